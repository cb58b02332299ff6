tma::tma_2d! {
    pub B: e4m3,
    global = [K = 1024, N = 1024],
    boxed = [64, 128],
    swizzle = 128,
    wgmma = b_mn_major,
}

fn main() {}
