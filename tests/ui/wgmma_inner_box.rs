tma::tma_2d! {
    pub B: bf16,
    global = [K = 1024, N = 1024],
    boxed = [64, 32],
    swizzle = 128,
    repeat = [1, 4],
    wgmma = b_mn_major,
}

fn main() {}
