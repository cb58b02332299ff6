// A member name the generated pipeline struct uses itself: at the member.
tma::tma_pipeline! {
    pub Ring,
    stages = 2,
    consumers = warps(4),
    tiles = {
        state: tma_2d! { pub RingA: f32, global = [M = _, K = 64], boxed = [32, 32] },
    },
}

fn main() {}
