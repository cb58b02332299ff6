// The same with the block from warp roles named by type: the const check, at the readers.
tma::tma_warp_roles! {
    pub GemmRoles,
    producer_regs = 40,
    consumer_warpgroups = 2,
    consumer_regs = 232,
}

tma::tma_kernel! {
    pub Walk,
    roles = GemmRoles,
    work_queues = [tiles = 4 readers warpgroups(3)],
}

fn main() {}
