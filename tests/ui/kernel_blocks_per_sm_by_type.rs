// Blocks per SM other than those the roles named by type checked their setmaxnreg registers
// for (1: 168 a thread; 2 blocks leave 80, and the consumers' setmaxnreg.inc to 232 would
// wait forever): the const check names both, at `blocks_per_sm`.
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
    blocks_per_sm = 2,
}

fn main() {}
