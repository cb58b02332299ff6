// More registers than the block's share of the register file: at consumer_regs.
tma::tma_warp_roles! {
    pub Roles,
    producer_regs = 40,
    consumer_warpgroups = 2,
    consumer_regs = 256,
}

fn main() {}
