// A reversed split: the producer "lowered" to 240 and the consumers "raised" to 128 fit the
// budget, but the launch runs with 168 registers per thread: at each count.
tma::tma_warp_roles! {
    pub Roles,
    producer_regs = 240,
    consumer_warpgroups = 2,
    consumer_regs = 128,
}

fn main() {}
