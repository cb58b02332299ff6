// One box cannot be split over the two CTAs along x: at the axis.
tma::tma_pipeline! {
    pub Ring,
    stages = 2,
    consumers = warps(4),
    cluster = [2, 1, 1],
    tiles = {
        a: tma_2d! { pub RingA: f32, global = [M = _, K = 64], boxed = [32, 32] } multicast(x),
    },
}

fn main() {}
