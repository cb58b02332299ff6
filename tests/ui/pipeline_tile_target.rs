// A tile validated for another arch than the pipeline's: at the tile's `target`.
tma::tma_pipeline! {
    pub Ring,
    stages = 2,
    consumers = warps(4),
    target = sm_100a,
    tiles = {
        a: tma_2d! { pub RingA: f32, global = [M = _, K = 64], boxed = [32, 32] },
        b: tma_2d! { pub RingB: f32, global = [M = _, K = 64], boxed = [32, 32], target = sm_90a },
    },
}

fn main() {}
