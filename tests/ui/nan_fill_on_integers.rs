tma::tma_2d! {
    pub Bytes: u8,
    global = [M = 1024, K = 64],
    boxed = [64, 64],
    oob_fill = nan,
}

fn main() {}
