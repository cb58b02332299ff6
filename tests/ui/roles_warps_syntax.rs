// Warp-granular roles: each role counted once, both register counts or neither, barriers
// `name = threads` or `name = per_consumer(threads)`; each error at its token.
tma::tma_warp_roles! {
    pub Roles,
    producer_warps = 1,
    producer_warpgroups = 1,
    consumer_warps = 4,
    producer_regs = 40,
    barriers = [a = per_warp(32), b = per_consumer(32, 64), c = per_consumer(x)],
}

fn main() {}
