// An SM holds at most 32 resident blocks: at blocks_per_sm.
tma::tma_warp_roles! {
    pub Roles,
    producer_regs = 24,
    consumer_warpgroups = 1,
    consumer_regs = 32,
    blocks_per_sm = 33,
}

fn main() {}
