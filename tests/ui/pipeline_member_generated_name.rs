// A pipeline member named like `load`'s stage parameter `s`: `load(const state& s, ..,
// tile_s::coords s)` would not compile. At the member.
tma::tma_pipeline! {
    pub Ring,
    stages = 2,
    consumers = warps(4),
    tiles = {
        s: tma_2d! { pub RingS: f32, global = [M = _, K = 64], boxed = [32, 32] },
    },
}

fn main() {}
