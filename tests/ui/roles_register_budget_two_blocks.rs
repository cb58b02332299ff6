// Two blocks per SM halve each block's registers: at consumer_regs.
tma::tma_warp_roles! {
    pub Roles,
    producer_regs = 24,
    consumer_warpgroups = 1,
    consumer_regs = 240,
    blocks_per_sm = 2,
}

fn main() {}
