// A rejected plan still defines its type and its inline parts' types: uses add no errors.
use tma::{Plan, Tile};

tma::tma_kernel! {
    pub Copy,
    staging = [slots: tma_2d! { pub Slot: u32, global = [r = _, c = _], boxed = [32, 32] } x 0],
    block_threads = 32,
}

fn main() {
    let _bytes = Copy::DYNAMIC_SMEM_BYTES + Copy::BLOCK_THREADS;
    let _valid = Copy::valid();
    let _src = Copy::kernel_source();
    let _tx = Slot::TX_BYTES;
}
