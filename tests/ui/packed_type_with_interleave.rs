tma::tma_3d! {
    pub Nibbles: u4x16_align8b,
    global = [C = 64, H = 64, W = 128],
    boxed = [8, 1, 64],
    interleave = 16,
    target = sm_100a,
}

fn main() {}
