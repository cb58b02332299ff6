tma::tma_2d! {
    pub Big: f32,
    global = [M = 4096, K = 4096],
    boxed = [128, 256],
    repeat = [8, 1],
}

fn main() {}
