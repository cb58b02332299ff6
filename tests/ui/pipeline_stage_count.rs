// A pipeline of no stages: at `stages`.
tma::tma_pipeline! {
    pub Ring,
    stages = 0,
    consumers = warps(4),
    tiles = {
        a: tma_2d! { pub RingA: f32, global = [M = _, K = 64], boxed = [32, 32] },
    },
}

fn main() {}
