// Every broken pipeline rule is reported, each at its token.
tma::tma_pipeline! {
    pub Ring,
    stages = 0,
    consumers = threads(0),
    cluster = [2, 1, 1],
    tiles = {
        a: tma_2d! { pub RingA: f32, global = [M = _, K = 64], boxed = [32, 32] } multicast(x),
        b: tma_2d! { pub RingB: f32, global = [M = _, K = 64], boxed = [32, 32] } multicast(z),
    },
}

fn main() {}
