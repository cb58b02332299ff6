//! Bounded waits in a release build, opted in with `CompileOptions::bounded_waits(true)`
//! (`-DTMA_BOUNDED_WAITS`): the same two mistakes as `gpu_hang` and `gpu_pipeline_hang` (a load
//! whose barrier expects 16 bytes more than it delivers; a pipeline stage never loaded),
//! compiled without `TMA_DEBUG`, become `Error::BarrierTimeout` naming the tile and
//! `Error::PipelineTimeout` naming the pipeline and stage, not a frozen process. The release
//! bound (`TMA_WAIT_TIMEOUT_NS`, 10 s by default) is set to 300 ms here to keep the tests
//! short. The release default, the bare loop, has no hang record and still loads and runs.
//!
//! A trap leaves the CUDA context unusable: the GPU runner gives every test its own process.
//! Skips visibly without a GPU; the NVRTC test runs without one.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

#[path = "gpu/support.rs"]
mod support;

use std::time::{Duration, Instant};

use support::Device;
use tma::pipeline::{Consumers, PipelineSpec, ValidPipeline};
use tma::plan::{KernelPlan, ValidKernelPlan};
use tma::render::KernelSource;
use tma::runtime::{CompileOptions, Error, Source, TensorMap};
use tma::{Arch, Tile};

tma::tma_2d! {
    /// A plain f32 tile: 16 x 16 boxes of a 64 x 64 matrix, 1 KB per load.
    pub ReleaseTile: f32,
    global = [R = 64, C = 64],
    boxed = [16, 16],
}

/// The release bound of these tests: 300 ms of `%globaltimer`.
const BOUND_NS: u64 = 300_000_000;

/// Release device code (no `TMA_DEBUG`) with the default waits (the bare loop) and the
/// test's short bound for those that opt in.
fn release() -> CompileOptions {
    CompileOptions::new(Arch::Sm90a)
        .debug_waits(false)
        .define("TMA_WAIT_TIMEOUT_NS", format!("{BOUND_NS}ull"))
}

/// Release device code with bounded waits.
fn bounded() -> CompileOptions {
    release().bounded_waits(true)
}

/// The kernels' (`wrong_byte_count`, `right_byte_count`) plans: the tile (named `Rel` for
/// them; they keep it in static shared memory) on 128 threads; their launches come from them.
fn tile_plan(kernel: &str) -> ValidKernelPlan {
    KernelPlan::new(kernel)
        .tile("Rel", ReleaseTile::valid())
        .block_threads(128)
        .validate()
        .unwrap()
}

const BODY: &str = r#"
extern "C" __global__ void TMA_PLAN_WRONG_BYTE_COUNT_LAUNCH_BOUNDS
wrong_byte_count(const __grid_constant__ CUtensorMap map, float* out) {
  __shared__ __align__(128) unsigned char smem[Rel::SMEM_BYTES];
  __shared__ __align__(8) tma_mbarrier bar;
  if (threadIdx.x == 0) { tma_mbarrier_init(&bar, 1); tma_fence_mbarrier_init(); }
  __syncthreads();
  if (threadIdx.x == 0) {
    // The bug under test: 16 bytes more than the load delivers.
    tma_mbarrier_arrive_expect_tx(&bar, Rel::TX_BYTES + 16);
    Rel::load(&map, &bar, smem, {.R = 0, .C = 0});
  }
  Rel::wait(&bar, 0);  // never completes; the release bound turns it into a report
  out[threadIdx.x] = reinterpret_cast<float*>(smem)[threadIdx.x];
}

// The correct kernel: one load of box (1, 2), every thread copies an element out.
extern "C" __global__ void TMA_PLAN_RIGHT_BYTE_COUNT_LAUNCH_BOUNDS
right_byte_count(const __grid_constant__ CUtensorMap map, float* out) {
  __shared__ __align__(128) unsigned char smem[Rel::SMEM_BYTES];
  __shared__ __align__(8) tma_mbarrier bar;
  if (threadIdx.x == 0) { tma_mbarrier_init(&bar, 1); tma_fence_mbarrier_init(); }
  __syncthreads();
  if (threadIdx.x == 0) {
    Rel::arrive_expect_tx(&bar);
    Rel::load(&map, &bar, smem, {.R = 16, .C = 32});
  }
  Rel::wait(&bar, 0);
  for (unsigned i = threadIdx.x; i < 256u; i += blockDim.x) out[i] = reinterpret_cast<float*>(smem)[i];
}
"#;

/// With its description (`Source::kernel`): the hang record names the tile.
fn tile_source() -> Source {
    let source = ["wrong_byte_count", "right_byte_count"]
        .into_iter()
        .fold(KernelSource::new(), |s, k| s.plan(&tile_plan(k)));
    Source::kernel(&source.body(BODY)).unwrap()
}

fn ring() -> ValidPipeline {
    use tma::{validate, DType, Swizzle, TileSpec};
    let a = TileSpec::new("ra", DType::F32, [64, 32], [16, 32])
        .dim_names(["r", "c"])
        .swizzle(Swizzle::B128);
    let b = TileSpec::new("rb", DType::U16, [64, 64], [8, 64]).dim_names(["r", "c"]);
    PipelineSpec::new("stalled", 2, Consumers::Threads(128))
        .tile("a", &validate(&a).unwrap())
        .tile("b", &validate(&b).unwrap())
        .validate()
        .unwrap()
}

/// The ring kernel's plan: the ring in its shared memory, one warpgroup; its launch comes
/// from it.
fn ring_plan() -> ValidKernelPlan {
    KernelPlan::new("ring_hang")
        .pipeline(&ring())
        .block_threads(128)
        .validate()
        .unwrap()
}

const RING_BODY: &str = r#"
typedef tma_plan_ring_hang P;
extern "C" __global__ void TMA_PLAN_RING_HANG_LAUNCH_BOUNDS ring_hang(const __grid_constant__ CUtensorMap a, const __grid_constant__ CUtensorMap b) {
  extern __shared__ __align__(16) unsigned char raw[];
  const tma_pipe_stalled pipe = P::stalled(P::base(raw));
  pipe.init();
  tma_pipe_stalled::state s;
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

/// With its description: the hang record names the pipeline and its tiles.
fn ring_source() -> Source {
    Source::kernel(&KernelSource::new().plan(&ring_plan()).body(RING_BODY)).unwrap()
}

/// Release PTX has the bound (the timer, the trap and the record's global) only when asked
/// for; by default it has the bare loop; debug is bounded either way. Runs without a GPU (CI).
#[test]
fn release_waits_are_bounded_only_when_opted_in() {
    let test = "release_waits_are_bounded_only_when_opted_in";
    for (options, bounded) in [
        (release(), false),
        (bounded(), true),
        (release().debug_waits(true), true),
    ] {
        for source in [tile_source(), ring_source()] {
            let Some(c) = support::compile_or_skip(test, &source, &options) else {
                return;
            };
            for needle in [
                "%globaltimer",
                "trap;",
                ".global .align 8 .u64 tma_debug_record",
            ] {
                assert_eq!(
                    c.ptx.contains(needle),
                    bounded,
                    "{needle}: debug {} bounded {}",
                    options.debug_waits,
                    options.bounded_waits
                );
            }
        }
    }
}

#[test]
fn gpu_release_wrong_byte_count_becomes_a_barrier_timeout() {
    let Some(dev) = Device::open("gpu_release_wrong_byte_count_becomes_a_barrier_timeout") else {
        return;
    };
    let module = dev.load(&tile_source(), &bounded());
    assert!(!module.compiled().debug_waits);
    let stream = &dev.stream;
    let kernel = module.kernel("wrong_byte_count").unwrap();
    let input = stream.clone_htod(&vec![1.0f32; 64 * 64]).unwrap();
    let mut out = stream.alloc_zeros::<f32>(128).unwrap();
    let map = TensorMap::new(&ReleaseTile::bind(&[64, 64]).unwrap(), &input).unwrap();
    // The plan's launch (the tile lives in static shared memory: none dynamic).
    let cfg = kernel.plan_config(stream, (2, 1, 1)).unwrap();
    // SAFETY: wrong_byte_count(CUtensorMap, float*) with 128 floats of output.
    let (result, elapsed) = support::timed(|| unsafe {
        kernel
            .launch_builder(&cfg)
            .arg(&map)
            .arg(&mut out)
            .launch_and_sync()
    });
    match result {
        Err(Error::BarrierTimeout {
            tile,
            expected_tx,
            phase,
            waited_ns,
            ..
        }) => {
            assert_eq!(tile, "release_tile");
            assert_eq!(u64::from(expected_tx), ReleaseTile::TX_BYTES);
            assert_eq!(phase, 0);
            assert!(waited_ns > BOUND_NS, "{waited_ns}");
        }
        other => panic!("expected a BarrierTimeout, got {other:?}"),
    }
    assert!(elapsed < Duration::from_secs(3), "took {elapsed:?}");
}

#[test]
fn gpu_release_stage_never_loaded_becomes_a_pipeline_timeout() {
    let Some(dev) = Device::open("gpu_release_stage_never_loaded_becomes_a_pipeline_timeout")
    else {
        return;
    };
    let stream = &dev.stream;
    let a = tma::validate(
        &tma::TileSpec::new("ra", tma::DType::F32, [64, 32], [16, 32])
            .dim_names(["r", "c"])
            .swizzle(tma::Swizzle::B128),
    )
    .unwrap();
    let b = tma::validate(
        &tma::TileSpec::new("rb", tma::DType::U16, [64, 64], [8, 64]).dim_names(["r", "c"]),
    )
    .unwrap();
    let da = stream.clone_htod(&vec![1.0f32; 64 * 32]).unwrap();
    let db = stream.clone_htod(&vec![2u16; 64 * 64]).unwrap();
    let ma = TensorMap::new(&a.bind(&[64, 32], None).unwrap(), &da).unwrap();
    let mb = TensorMap::new(&b.bind(&[64, 64], None).unwrap(), &db).unwrap();
    let module = dev.load(&ring_source(), &bounded());
    let kernel = module.kernel("ring_hang").unwrap();
    let cfg = kernel.plan_config(stream, (1, 1, 1)).unwrap();
    // SAFETY: ring_hang(CUtensorMap, CUtensorMap).
    let (r, elapsed) = support::timed(|| unsafe {
        kernel
            .launch_builder(&cfg)
            .arg(&ma)
            .arg(&mb)
            .launch_and_sync()
    });
    match &r {
        Err(Error::PipelineTimeout {
            pipeline,
            helper,
            stage,
            parity,
            tiles,
            expected_tx,
            ..
        }) => {
            assert_eq!(
                (pipeline.as_str(), *helper, *stage, *parity, tiles.as_str()),
                ("stalled", "wait", 1, 0, "ra + rb")
            );
            assert_eq!(u64::from(*expected_tx), ring().stage_tx_bytes());
        }
        other => panic!("expected a pipeline timeout, got {other:?}"),
    }
    assert!(elapsed < Duration::from_secs(3), "took {elapsed:?}");
}

/// The bare loop (the release default): the module has no `tma_debug_record`, loads
/// without a hang record, and a correct kernel runs right; the bounded build of the same
/// source has the record.
#[test]
fn gpu_unbounded_module_loads_without_a_record_and_runs() {
    let Some(dev) = Device::open("gpu_unbounded_module_loads_without_a_record_and_runs") else {
        return;
    };
    let stream = &dev.stream;
    let host: Vec<f32> = (0..64 * 64).map(|i| i as f32 + 0.25).collect();
    let input = stream.clone_htod(&host).unwrap();
    let map = TensorMap::new(&ReleaseTile::bind(&[64, 64]).unwrap(), &input).unwrap();
    for bounded in [false, true] {
        let options = if bounded {
            release().bounded_waits(true)
        } else {
            release()
        };
        let module = dev.load(&tile_source(), &options);
        let shown = format!("{module:?}");
        assert!(
            shown.contains(&format!("hang_record: {bounded}")),
            "{shown}"
        );
        let kernel = module.kernel("right_byte_count").unwrap();
        let mut out = stream.alloc_zeros::<f32>(256).unwrap();
        // The plan's launch (the tile lives in static shared memory).
        let cfg = kernel.plan_config(stream, (1, 1, 1)).unwrap();
        let start = Instant::now();
        // SAFETY: right_byte_count(CUtensorMap, float*) with 256 floats of output.
        unsafe {
            kernel
                .launch_builder(&cfg)
                .arg(&map)
                .arg(&mut out)
                .launch_and_sync()
        }
        .unwrap();
        let got = stream.clone_dtoh(&out).unwrap();
        let want: Vec<f32> = (0..256)
            .map(|i| host[(16 + i / 16) * 64 + 32 + i % 16])
            .collect();
        assert_eq!(got, want, "bounded {bounded}");
        assert!(module.hang_error().is_none());
        println!("bounded {bounded}: right in {:?}", start.elapsed());
    }
}
