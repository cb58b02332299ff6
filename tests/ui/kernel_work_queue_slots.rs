// A work queue of no slot: refused at the slots, as WorkQueue::validate refuses it.
tma::tma_kernel! {
    pub Walk,
    work_queues = [tiles = 0 readers warps(8)],
    block_threads = 288,
}

fn main() {}
