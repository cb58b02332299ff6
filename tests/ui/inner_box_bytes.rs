tma::tma_2d! {
    pub Rows: f16,
    global = [M = 1024, K = 64],
    boxed = [8, 7],
}

fn main() {}
