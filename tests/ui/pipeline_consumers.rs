// More consumer threads than a block holds: at the count.
tma::tma_pipeline! {
    pub Ring,
    stages = 2,
    consumers = warpgroups(9),
    tiles = {
        a: tma_2d! { pub RingA: f32, global = [M = _, K = 64], boxed = [32, 32] },
    },
}

fn main() {}
