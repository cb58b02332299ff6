// `256u8` is an integer literal whose own suffix cannot hold it: refused, as rustc refuses it
// in an expression, naming the literal and the suffix's range.
tma::tma_2d! {
    pub Rows: f16,
    global = [M = 256u8, K = 64],
    boxed = [64, 64],
}

fn main() {}
