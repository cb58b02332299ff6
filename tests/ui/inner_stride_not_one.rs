tma::tma_2d! {
    pub Rows: f16,
    global = [M = 64, K = 64],
    boxed = [8, 8],
    strides = [128, 2],
}

fn main() {}
