// More warpgroups than a block holds, and a count of zero: at the counts.
tma::tma_warp_roles! {
    pub Roles,
    producer_warpgroups = 0,
    producer_regs = 40,
    consumer_warpgroups = 9,
    consumer_regs = 232,
}

fn main() {}
