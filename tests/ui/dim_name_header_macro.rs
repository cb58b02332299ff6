// A dim name that is a macro of the headers a generated header includes: `EOF` (<cstdio>)
// would be replaced by `(-1)` in nvcc's host compile of `tma header`'s output. At the name.
tma::tma_2d! {
    pub HeaderMacro: f16,
    global = [EOF = 64, K = 64],
    boxed = [64, 64],
}

fn main() {}
