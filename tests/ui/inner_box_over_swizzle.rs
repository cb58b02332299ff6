tma::tma_2d! {
    pub Rows: bf16,
    global = [M = 1024, K = 1024],
    boxed = [64, 128],
    swizzle = 128,
}

fn main() {}
