// A Rust keyword as a dim name: the error names the key and the keyword, and says how to
// write it (`r#fn`).
tma::tma_2d! {
    pub Rows: f16,
    global = [fn = 1024, K = 64],
    boxed = [64, 64],
}

fn main() {}
