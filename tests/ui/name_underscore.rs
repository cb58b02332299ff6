// `_` is a value given at run time; a name is fixed when the code is generated (taken as the
// name `_`, it made `struct tma__`, a name C++ reserves).
tma::tma_2d! {
    pub Rows: f16,
    global = [M = 1024, K = 64],
    boxed = [64, 64],
    name = _,
}

fn main() {}
