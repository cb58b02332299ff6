tma::tma_3d! {
    pub Nchw: f16,
    global = [C = 64, H = 64, W = 64],
    boxed = [8, 8, 16],
    interleave = 32,
    swizzle = 64,
}

fn main() {}
