// Readers the block cannot hold beside the producer thread (3 warpgroups of a 384-thread
// block): refused at the readers.
tma::tma_kernel! {
    pub Walk,
    work_queues = [tiles = 2 readers warpgroups(3)],
    block_threads = 384,
}

fn main() {}
