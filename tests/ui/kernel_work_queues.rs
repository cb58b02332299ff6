// A work queue names who pops its slots: `readers ..` is missing.
tma::tma_kernel! {
    pub Walk,
    work_queues = [tiles = 4],
    block_threads = 288,
}

fn main() {}
