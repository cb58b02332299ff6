tma::tma_2d! {
    pub Rows: f16,
    global = [M = _, K = 64],
    boxed = [_, 64],
}

fn main() {}
