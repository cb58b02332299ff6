// A declared block that is not the block of the roles named by type (384 threads): the const
// check names both, at `block_threads`.
tma::tma_warp_roles! {
    pub GemmRoles,
    producer_regs = 40,
    consumer_warpgroups = 2,
    consumer_regs = 232,
}

tma::tma_kernel! {
    pub Gemm,
    roles = GemmRoles,
    scratch = [flags = 64],
    block_threads = 256,
}

fn main() {}
