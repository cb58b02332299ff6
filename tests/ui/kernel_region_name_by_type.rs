// A scratch region named as the pipeline named by type (`ring`): the const check names it, at
// the scratch's name.
tma::tma_pipeline! {
    pub Ring,
    stages = 2,
    consumers = threads(128),
    tiles = { a: tma_2d! { pub RingA: u32, global = [r = _, c = _], boxed = [32, 32] } },
}

tma::tma_kernel! {
    pub Copy,
    pipelines = [Ring],
    scratch = [ring = 16],
    block_threads = 160,
}

fn main() {}
