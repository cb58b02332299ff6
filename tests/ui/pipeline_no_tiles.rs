// A stage that loads nothing: at the tiles' braces.
tma::tma_pipeline! {
    pub Ring,
    stages = 2,
    consumers = warps(4),
    tiles = {},
}

fn main() {}
