// setmaxnreg acts on whole warpgroups: one producer warp cannot take it, at its count.
tma::tma_warp_roles! {
    pub Roles,
    producer_warps = 1,
    producer_regs = 40,
    consumer_warps = 8,
    consumer_regs = 232,
}

fn main() {}
