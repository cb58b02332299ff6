// Every broken rule is reported, each at its token.
tma::tma_3d! {
    pub Broken: u8,
    global = [H = 0, W = 162, C = 32],
    boxed = [2, 300, 32],
    element_strides = [1, 9, 1],
    oob_fill = nan,
    swizzle = 128b_atom_64b,
}

fn main() {}
