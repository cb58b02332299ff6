tma::tma_2d! {
    pub Rows: f16,
    global = [M = 1024, K = 1024],
    boxed = [64, 64],
    repeat = [1, 2],
    smem_stride = 2048,
}

fn main() {}
