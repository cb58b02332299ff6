//! Hang -> error, for real: a kernel that declares a wrong transaction byte count (16 bytes
//! more than its load delivers) would wait forever; compiled with debug waits, the generated
//! wait gives up, records which tile, barrier, phase and byte count hung, and traps, and the
//! runtime returns `Error::BarrierTimeout` within about a second.
//!
//! The trap leaves the CUDA context unusable, so this file holds exactly one GPU test (the GPU
//! runner gives every test its own process), and one NVRTC test. Skips visibly without a GPU.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

#[path = "gpu/support.rs"]
mod support;

use support::Device;
use tma::plan::{KernelPlan, ValidKernelPlan};
use tma::render::KernelSource;
use tma::runtime::{Error, Source, TensorMap};
use tma::Tile;

tma::tma_2d! {
    /// A plain f32 tile: 16 x 16 boxes of a 64 x 64 matrix, 1 KB per load.
    pub HangTile: f32,
    global = [R = 64, C = 64],
    boxed = [16, 16],
}

/// The kernel's plan: the tile (named `Hang` for the kernel; it keeps it in static shared
/// memory) on 128 threads; its launch comes from it.
fn plan() -> ValidKernelPlan {
    KernelPlan::new("wrong_byte_count")
        .tile("Hang", HangTile::valid())
        .block_threads(128)
        .validate()
        .unwrap()
}

const BODY: &str = r#"
extern "C" __global__ void TMA_PLAN_WRONG_BYTE_COUNT_LAUNCH_BOUNDS
wrong_byte_count(const __grid_constant__ CUtensorMap map, float* out) {
  __shared__ __align__(128) unsigned char smem[Hang::SMEM_BYTES];
  __shared__ __align__(8) tma_mbarrier bar;
  if (threadIdx.x == 0) { tma_mbarrier_init(&bar, 1); tma_fence_mbarrier_init(); }
  __syncthreads();
  if (threadIdx.x == 0) {
    // The bug under test: 16 bytes more than the load delivers.
    tma_mbarrier_arrive_expect_tx(&bar, Hang::TX_BYTES + 16);
    Hang::load(&map, &bar, smem, {.R = 0, .C = 0});
  }
  Hang::wait(&bar, 0);  // never completes; debug waits turn it into a report
  out[threadIdx.x] = reinterpret_cast<float*>(smem)[threadIdx.x];
}
"#;

/// With its description (`Source::kernel`): the hang record names the tile.
fn source() -> Source {
    Source::kernel(&KernelSource::new().plan(&plan()).body(BODY)).unwrap()
}

/// Without a GPU the kernel still compiles (CI).
#[test]
fn the_hang_kernel_compiles() {
    let options = support::short_debug_waits();
    let Some(compiled) = support::compile_or_skip("the_hang_kernel_compiles", &source(), &options)
    else {
        return;
    };
    assert!(compiled.ptx.contains(".entry wrong_byte_count"));
    assert_eq!(compiled.plan("wrong_byte_count"), Some(plan().launch()));
}

#[test]
fn gpu_a_wrong_byte_count_becomes_a_barrier_timeout() {
    let Some(dev) = Device::open("gpu_a_wrong_byte_count_becomes_a_barrier_timeout") else {
        return;
    };
    let module = dev.load(&source(), &support::short_debug_waits());
    let stream = &dev.stream;
    let kernel = module.kernel("wrong_byte_count").unwrap();
    let input = stream.clone_htod(&vec![1.0f32; 64 * 64]).unwrap();
    let mut out = stream.alloc_zeros::<f32>(128).unwrap();
    let map = TensorMap::new(&HangTile::bind(&[64, 64]).unwrap(), &input).unwrap();
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
            assert_eq!(tile, "hang_tile");
            // The real wait: at least the debug bound, not the 0 a cut-short record said.
            assert!(
                waited_ns >= support::SHORT_DEBUG_TIMEOUT_NS,
                "waited {waited_ns} ns"
            );
            assert_eq!(u64::from(expected_tx), HangTile::TX_BYTES);
            assert_eq!(phase, 0);
        }
        other => panic!("expected a BarrierTimeout, got {other:?}"),
    }
    assert!(elapsed.as_secs_f64() < 1.5, "took {elapsed:?}");
}
