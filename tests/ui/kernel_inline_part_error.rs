// An inline pipeline rejected by its own checks: its error, at its token, and nothing from
// the plan (which cannot be checked without it); uses of both types add no errors.
use tma::{Pipeline, Plan};

tma::tma_kernel! {
    pub Copy,
    pipelines = [tma_pipeline! {
        pub Ring,
        stages = 0,
        consumers = threads(128),
        tiles = { a: tma_2d! { pub RingA: u32, global = [r = _, c = _], boxed = [32, 32] } },
    }],
    block_threads = 128,
}

fn main() {
    let _ = Copy::DYNAMIC_SMEM_BYTES + Copy::BLOCK_THREADS;
    let _ = Ring::STAGES;
}
