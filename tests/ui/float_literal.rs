// A float literal where an integer goes: the error names the key and the literal.
tma::tma_2d! {
    pub Rows: f16,
    global = [M = 1024, K = 64],
    boxed = [64.0, 64],
}

fn main() {}
