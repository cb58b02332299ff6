// Without `strides`, rows are dense: the row stride is the inner dim, so the error is there.
tma::tma_2d! {
    pub Rows: f16,
    global = [M = 64, K = 100],
    boxed = [8, 8],
}

fn main() {}
