tma::tma_2d! {
    pub Rows: f16,
    global = [M = 1024, K = 64],
    boxed = [64, 64],
    element_strides = [9, 1],
}

fn main() {}
