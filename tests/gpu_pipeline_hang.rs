//! A pipeline stage that is never loaded: the producer loads stage 0 only, the consumers
//! release it and wait for stage 1. With debug waits the consumer's `wait` gives up, and its
//! hang record names the pipeline, the stage (1), the parity (0) and the stage's tiles; the
//! runtime returns `Error::PipelineTimeout` saying so about a second later.
//!
//! The trap leaves the CUDA context unusable, so this file holds exactly one GPU test (the GPU
//! runner gives every test its own process), and one NVRTC test. Skips visibly without a GPU.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

#[path = "gpu/support.rs"]
mod support;

use support::Device;
use tma::pipeline::{Consumers, PipelineSpec, ValidPipeline};
use tma::plan::{KernelPlan, ValidKernelPlan};
use tma::render::KernelSource;
use tma::runtime::{Error, Source, TensorMap};
use tma::{validate, DType, Swizzle, TileSpec, ValidSpec};

fn tiles() -> (ValidSpec, ValidSpec) {
    let a = TileSpec::new("ha", DType::F32, [64, 32], [16, 32])
        .dim_names(["r", "c"])
        .swizzle(Swizzle::B128);
    let b = TileSpec::new("hb", DType::U16, [64, 64], [8, 64]).dim_names(["r", "c"]);
    (validate(&a).unwrap(), validate(&b).unwrap())
}

fn ring() -> ValidPipeline {
    let (a, b) = tiles();
    PipelineSpec::new("stuck", 2, Consumers::Threads(128))
        .tile("a", &a)
        .tile("b", &b)
        .validate()
        .unwrap()
}

/// The kernel's plan: the ring in its shared memory, one warpgroup; its launch comes from it.
fn plan() -> ValidKernelPlan {
    KernelPlan::new("ring_hang")
        .pipeline(&ring())
        .block_threads(128)
        .validate()
        .unwrap()
}

const BODY: &str = r#"
typedef tma_plan_ring_hang P;
extern "C" __global__ void TMA_PLAN_RING_HANG_LAUNCH_BOUNDS ring_hang(const __grid_constant__ CUtensorMap a, const __grid_constant__ CUtensorMap b) {
  extern __shared__ __align__(16) unsigned char raw[];
  const tma_pipe_stuck pipe = P::stuck(P::base(raw));
  pipe.init();
  tma_pipe_stuck::state s;
  if (threadIdx.x == 0) {
    pipe.acquire(s);
    pipe.load(s, &a, {.r = 0, .c = 0}, &b, {.r = 8, .c = 0});
  }
  pipe.wait(s);
  pipe.release(s);
  ++s;
  pipe.wait(s);  // stage 1 was never loaded
}
"#;

fn source() -> Source {
    Source::kernel(&KernelSource::new().plan(&plan()).body(BODY)).unwrap()
}

#[test]
fn the_stuck_ring_compiles() {
    let Some(compiled) = support::compile_or_skip(
        "the_stuck_ring_compiles",
        &source(),
        &support::debug_waits(),
    ) else {
        return;
    };
    assert_eq!(compiled.pipeline_name(0), Some("stuck"));
    assert_eq!(compiled.plan("ring_hang"), Some(plan().launch()));
}

#[test]
fn gpu_a_stage_never_loaded_names_pipeline_stage_and_tiles() {
    let Some(dev) = Device::open("gpu_a_stage_never_loaded_names_pipeline_stage_and_tiles") else {
        return;
    };
    let stream = &dev.stream;
    let (a, b) = tiles();
    let da = stream.clone_htod(&vec![1.0f32; 64 * 32]).unwrap();
    let db = stream.clone_htod(&vec![2u16; 64 * 64]).unwrap();
    let ma = TensorMap::new(&a.bind(&[64, 32], None).unwrap(), &da).unwrap();
    let mb = TensorMap::new(&b.bind(&[64, 64], None).unwrap(), &db).unwrap();
    let module = dev.load(&source(), &support::debug_waits());
    let kernel = module.kernel("ring_hang").unwrap();
    let cfg = kernel.plan_config(stream, (1, 1, 1)).unwrap();
    let start = std::time::Instant::now();
    // SAFETY: ring_hang(CUtensorMap, CUtensorMap).
    let r = unsafe {
        kernel
            .launch_builder(&cfg)
            .arg(&ma)
            .arg(&mb)
            .launch_and_sync()
    };
    match r {
        Err(e @ Error::PipelineTimeout { .. }) => {
            println!("after {:?}: {e}", start.elapsed());
            let Error::PipelineTimeout {
                pipeline,
                helper,
                stage,
                parity,
                tiles,
                expected_tx,
                ..
            } = &e
            else {
                unreachable!()
            };
            assert_eq!(
                (pipeline.as_str(), *helper, *stage, *parity, tiles.as_str()),
                ("stuck", "wait", 1, 0, "ha + hb")
            );
            assert_eq!(u64::from(*expected_tx), ring().stage_tx_bytes());
        }
        other => panic!("expected a pipeline timeout, got {other:?}"),
    }
}
