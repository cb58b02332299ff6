tma::tma_2d! {
    pub Rows: f17,
    global = [M = 1024, K = 64],
    boxed = [64, 64],
}

fn main() {}
