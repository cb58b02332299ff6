// setmaxnreg takes a multiple of 8 in [24, 256]: at the count.
tma::tma_warp_roles! {
    pub Roles,
    producer_regs = 41,
    consumer_warpgroups = 2,
    consumer_regs = 264,
}

fn main() {}
