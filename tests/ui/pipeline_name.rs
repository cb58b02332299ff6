// A pipeline name that is no C identifier: at the name.
tma::tma_pipeline! {
    pub Ring,
    stages = 2,
    consumers = warps(4),
    name = "2ring",
    tiles = {
        a: tma_2d! { pub RingA: f32, global = [M = _, K = 64], boxed = [32, 32] },
    },
}

fn main() {}
