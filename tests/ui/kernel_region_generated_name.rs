// A scratch region named `base`, a member of `struct tma_plan_copy` (read from its template),
// beside a pipeline named by type: refused at expansion through the derived names table, at
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
    scratch = [base = 16],
    block_threads = 160,
}

fn main() {}
