// `x2` is one word: the copies need a space.
tma::tma_kernel! {
    pub Copy,
    staging = [slots: tma_2d! { pub Slot: u32, global = [r = _, c = _], boxed = [32, 32] } x2],
    block_threads = 32,
}

fn main() {}
