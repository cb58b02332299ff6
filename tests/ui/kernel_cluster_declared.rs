// A declared cluster that is not the (inline) pipeline's: at `cluster`.
tma::tma_kernel! {
    pub Copy,
    pipelines = [tma_pipeline! {
        pub Ring,
        stages = 2,
        consumers = threads(128),
        cluster = [2, 1, 1],
        tiles = { a: tma_2d! { pub RingA: u32, global = [r = _, c = _], boxed = [32, 32] } },
    }],
    block_threads = 160,
    cluster = [4, 1, 1],
}

fn main() {}
