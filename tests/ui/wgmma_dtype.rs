tma::tma_2d! {
    pub A: u16,
    global = [M = 1024, K = 1024],
    boxed = [64, 64],
    swizzle = 128,
    wgmma = a_k_major,
}

fn main() {}
