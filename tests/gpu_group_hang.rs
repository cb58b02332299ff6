//! A group whose loads do not all come: a barrier armed with `tma_expect<Left, Right>` but
//! only `Left` loaded never completes; with debug waits `tma_group<Left, Right>::wait` gives up,
//! and its hang record carries the group's bytes and a tile id naming both tiles
//! (`0x80000000 | 1 << 0 | 1 << 1`, docs/CONTRACTS.md "Debug waits"). The runtime returns
//! `Error::BarrierTimeout` about a second later.
//!
//! The trap leaves the CUDA context unusable, so this file holds exactly one GPU test (the
//! GPU runner gives every test its own process), and one NVRTC test. Skips visibly without a
//! GPU.
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
    pub HangLeft: f32,
    global = [R = 64, C = 64],
    boxed = [16, 16],
}

tma::tma_2d! {
    /// Another: 8 x 32 boxes, 1 KB per load.
    pub HangRight: f32,
    global = [R = 64, C = 64],
    boxed = [8, 32],
}

/// The kernel's plan: both tiles (named `Left` and `Right` for the kernel, ids 0 and 1; it
/// keeps them in static shared memory) on 128 threads; its launch comes from it.
fn plan() -> ValidKernelPlan {
    KernelPlan::new("half_a_group")
        .tile("Left", HangLeft::valid())
        .tile("Right", HangRight::valid())
        .block_threads(128)
        .validate()
        .unwrap()
}

const BODY: &str = r#"
extern "C" __global__ void TMA_PLAN_HALF_A_GROUP_LAUNCH_BOUNDS
half_a_group(const __grid_constant__ CUtensorMap left, float* out) {
  __shared__ __align__(128) unsigned char smem[Left::SMEM_BYTES];
  __shared__ __align__(8) tma_mbarrier bar;
  static_assert(tma_group<Left, Right>::TILE_ID == 0x80000003u, "tiles 0 and 1");
  if (threadIdx.x == 0) { tma_mbarrier_init(&bar, 1); tma_fence_mbarrier_init(); }
  __syncthreads();
  if (threadIdx.x == 0) {
    // The bug under test: the group counts Right, which is never loaded.
    tma_expect<Left, Right>(&bar);
    Left::load(&left, &bar, smem, {.R = 0, .C = 0});
  }
  tma_group<Left, Right>::wait(&bar, 0);  // never completes; debug waits report it
  out[threadIdx.x] = reinterpret_cast<float*>(smem)[threadIdx.x];
}
"#;

/// With its description (`Source::kernel`): the hang record names the group's tiles.
fn source() -> Source {
    Source::kernel(&KernelSource::new().plan(&plan()).body(BODY)).unwrap()
}

/// Without a GPU the kernel still compiles (CI), its group id checked by a `static_assert`.
#[test]
fn the_half_group_kernel_compiles() {
    let test = "the_half_group_kernel_compiles";
    let Some(compiled) = support::compile_or_skip(test, &source(), &support::short_debug_waits())
    else {
        return;
    };
    assert!(compiled.ptx.contains(".entry half_a_group"));
    assert_eq!(compiled.plan("half_a_group"), Some(plan().launch()));
}

#[test]
fn gpu_a_group_missing_a_load_names_the_group() {
    let Some(dev) = Device::open("gpu_a_group_missing_a_load_names_the_group") else {
        return;
    };
    let module = dev.load(&source(), &support::short_debug_waits());
    let stream = &dev.stream;
    let kernel = module.kernel("half_a_group").unwrap();
    let input = stream.clone_htod(&vec![1.0f32; 64 * 64]).unwrap();
    let mut out = stream.alloc_zeros::<f32>(128).unwrap();
    let map = TensorMap::new(&HangLeft::bind(&[64, 64]).unwrap(), &input).unwrap();
    // The plan's launch (the tiles live in static shared memory: none dynamic).
    let cfg = kernel.plan_config(stream, (1, 1, 1)).unwrap();
    // SAFETY: half_a_group(CUtensorMap, float*) with 128 floats of output.
    let (result, elapsed) = support::timed(|| unsafe {
        kernel
            .launch_builder(&cfg)
            .arg(&map)
            .arg(&mut out)
            .launch_and_sync()
    });
    match result {
        Err(Error::BarrierTimeout {
            tile, expected_tx, ..
        }) => {
            assert_eq!(
                u64::from(expected_tx),
                HangLeft::TX_BYTES + HangRight::TX_BYTES
            );
            // The record holds the group's id (bit 31, then bit `TILE_ID` of each tile:
            // 0x80000003, the body's static_assert); the runtime names each of its tiles.
            assert_eq!(tile, "hang_left + hang_right");
        }
        other => panic!("expected a BarrierTimeout, got {other:?}"),
    }
    assert!(elapsed.as_secs_f64() < 1.5, "took {elapsed:?}");
}
