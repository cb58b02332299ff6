// `in_turn` takes `true` or `false`: anything else is refused at the word.
tma::tma_pipeline! {
    pub Ring,
    stages = 2,
    consumers = warpgroups(1),
    in_turn = maybe,
    tiles = {
        a: tma_2d! { pub RingA: f32, global = [M = _, K = 64], boxed = [32, 32] },
    },
}

fn main() {}
