// A pipeline named by type whose name (its region's in struct tma_plan_<kernel>) is one of the
// plan struct's own (`base`): the const check names it at the pipeline's type, where
// `Plan::valid()` would otherwise refuse it at run time.
tma::tma_pipeline! {
    pub Ring,
    stages = 2,
    consumers = threads(128),
    name = "base",
    tiles = { a: tma_2d! { pub RingA: u32, global = [r = _, c = _], boxed = [32, 32] } },
}

tma::tma_kernel! {
    pub Copy,
    pipelines = [Ring],
    block_threads = 160,
}

fn main() {}
