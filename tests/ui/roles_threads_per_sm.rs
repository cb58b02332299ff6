// 384 threads x 6 blocks = 2304 threads: an SM holds at most 2048. At blocks_per_sm.
tma::tma_warp_roles! {
    pub Roles,
    producer_regs = 24,
    consumer_warpgroups = 2,
    consumer_regs = 24,
    blocks_per_sm = 6,
}

fn main() {}
