tma::tma_2d! {
    pub Cube: f16,
    global = [D = 8, H = 8, W = 64],
    boxed = [8, 8, 64],
}

fn main() {}
