// A dim name is a Rust identifier but a C++ keyword: it would reach the generated CUDA.
tma::tma_2d! {
    pub Rows: f16,
    global = [M = 1024, int = 64],
    boxed = [64, 64],
}

fn main() {}
