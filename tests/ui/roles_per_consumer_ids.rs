// A per-consumer barrier takes one id per consumer: 4 + 4 + 4 + 4 ids do not fit 1 to 15,
// at the barrier past the last.
tma::tma_warp_roles! {
    pub Roles,
    producer_warps = 1,
    consumer_warps = 4,
    barriers = [a = per_consumer(32), b = per_consumer(32), c = per_consumer(64), d = per_consumer(32)],
}

fn main() {}
