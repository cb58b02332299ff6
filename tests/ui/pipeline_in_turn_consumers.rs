// A ring taken in turn is released by the one consumer that took the stage: two consumer
// warpgroups releasing each stage is refused at the count.
tma::tma_pipeline! {
    pub Ring,
    stages = 2,
    consumers = warpgroups(2),
    in_turn = true,
    tiles = {
        a: tma_2d! { pub RingA: f32, global = [M = _, K = 64], boxed = [32, 32] },
    },
}

fn main() {}
