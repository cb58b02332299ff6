// A plan without warp roles must say how many threads its block has: at the type.
tma::tma_kernel! {
    pub Copy,
    staging = [slots: tma_2d! { pub Slot: u32, global = [r = _, c = _], boxed = [32, 32] } x 3],
}

fn main() {}
