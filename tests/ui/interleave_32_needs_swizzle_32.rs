tma::tma_3d! {
    pub Nc16wc16: f16,
    global = [N = 4, C16 = 4, W = 64],
    boxed = [2, 1, 16],
    interleave = 32,
    swizzle = 64,
}

fn main() {}
