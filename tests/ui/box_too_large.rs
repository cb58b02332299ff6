tma::tma_2d! {
    pub Rows: f16,
    global = [M = 1024, K = 64],
    boxed = [300, 64],
}

fn main() {}
