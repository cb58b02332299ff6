// A stage tile's own errors, as its tile macro reports them, at their tokens.
tma::tma_pipeline! {
    pub Ring,
    stages = 2,
    consumers = warps(4),
    tiles = {
        a: tma_2d! { pub RingA: f32, global = [M = _, K = 64], boxed = [300, 32] },
        b: tma_3d! { pub RingB: f32, global = [M = _, K = 64], boxed = [32, 32] },
    },
}

fn main() {}
