// Two pipelines declared for different clusters: one kernel launches with one cluster shape;
// at the second pipeline.
tma::tma_pipeline! {
    pub RingA,
    stages = 2,
    consumers = warpgroups(1),
    cluster = [2, 1, 1],
    tiles = { a: tma_2d! { pub TileA: bf16, global = [M = _, K = _], boxed = [64, 64], swizzle = 128 } },
}

tma::tma_pipeline! {
    pub RingB,
    stages = 2,
    consumers = warpgroups(1),
    tiles = { b: tma_2d! { pub TileB: bf16, global = [N = _, K = _], boxed = [64, 64], swizzle = 128 } },
}

tma::tma_kernel! {
    pub Twin,
    pipelines = [RingA, RingB],
    block_threads = 256,
}

fn main() {}
