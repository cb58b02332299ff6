// Unknown keys, bad values and a missing entry, each at its token.
tma::tma_pipeline! {
    pub Ring,
    stages = four,
    consumers = blocks(2),
    rings = 3,
    tiles = {
        a: tma_2d! { pub RingA: f32, global = [M = _, K = 64], boxed = [32, 32] } multicast(w),
    },
}

tma::tma_pipeline! {
    pub Other,
    consumers = warps(4),
    tiles = {
        a: tma_4x! { pub OtherA: f32, global = [M = _, K = 64], boxed = [32, 32] },
    },
}

fn main() {}
