// A plan named `j0`: its kernel, `extern "C"` at namespace scope, would meet CUDA's Bessel
// function (NVRTC: "more than one instance of overloaded function "j0" has "C" linkage").
// Refused at the name.
tma::tma_kernel! {
    pub Bessel,
    name = "j0",
    scratch = [acc = 64],
    block_threads = 128,
}

fn main() {}
