tma::tma_2d! {
    pub Big: f32,
    global = [M = 4096, K = 4096],
    boxed = [256, 256],
    repeat = [4, 1],
}

fn main() {}
