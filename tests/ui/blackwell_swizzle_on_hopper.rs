tma::tma_2d! {
    pub Rows: bf16,
    global = [M = 1024, K = 64],
    boxed = [64, 64],
    swizzle = 128b_atom_32b,
    target = sm_90a,
}

fn main() {}
