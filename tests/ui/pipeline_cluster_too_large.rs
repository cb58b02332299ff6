// A cluster of more than 16 CTAs: at its largest extent.
tma::tma_pipeline! {
    pub Ring,
    stages = 2,
    consumers = warps(4),
    cluster = [4, 8, 1],
    tiles = {
        a: tma_2d! { pub RingA: f32, global = [M = _, K = 64], boxed = [32, 32] },
    },
}

fn main() {}
