tma::tma_2d! {
    pub Rows: f16,
    global = [M = 64, K = 100],
    boxed = [8, 8],
    strides = [100, 1],
}

fn main() {}
