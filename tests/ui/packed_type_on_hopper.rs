tma::tma_2d! {
    pub Nibbles: u4x16_align8b,
    global = [M = 1024, K = 128],
    boxed = [64, 64],
}

fn main() {}
