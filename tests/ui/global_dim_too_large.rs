tma::tma_2d! {
    pub Rows: f16,
    global = [M = 4294967297, K = 64],
    boxed = [8, 64],
}

fn main() {}
