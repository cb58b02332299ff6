// A tile name whose struct is one the generated code already has: tile `half` would be
// `struct tma_half`, the prelude's 16-bit float. At the name.
tma::tma_2d! {
    pub Half: f16,
    global = [M = 64, K = 64],
    boxed = [64, 64],
}

fn main() {}
