tma::tma_2d! {
    pub A: bf16,
    global = [M = 1024, K = 1024],
    boxed = [64, 32],
    swizzle = 128,
    repeat = [2, 2],
    wgmma = a_k_major,
}

fn main() {}
