// Work queues are declared with the builder (KernelPlan::work_queue), not in tma_kernel!.
tma::tma_kernel! {
    pub Walk,
    work_queues = [tiles = 4],
    block_threads = 288,
}

fn main() {}
