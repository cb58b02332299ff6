//! The device debug mode, for real: each kernel-side mistake that the hardware answers with an
//! anonymous trap, silently wrong data or nothing at all becomes `Error::DeviceCheck` naming
//! the tile, the helper, the rule and the value. One test per mistake class; a check traps
//! and leaves the CUDA context unusable, so the GPU runner gives every test its own process.
//! A control test shows the checks pass correct use. Skips visibly without a GPU.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use tma::render::KernelSource;
use tma::runtime::{CompileOptions, Compiler, Error, LaunchConfig, Module, Source, TensorMap};
use tma::spec::Rule;
use tma::{Arch, Tile};

tma::tma_2d! {
    /// f16, 16 x 64 boxes (128 B rows, the 128B swizzle), two boxes per call along M.
    pub CheckTile: f16,
    global = [M = 256, K = 256],
    boxed = [16, 64],
    swizzle = 128,
    repeat = [2, 1],
}

/// One kernel per mistake, chosen by `mode`; coordinates and the shared-memory offset come
/// from the host so the compiler cannot see the mistake. The tile is `T`.
const BODY: &str = r#"
extern "C" __global__ void misuse(const __grid_constant__ CUtensorMap map, int mode, int m, int k, int offset,
                                  int* out) {
  extern __shared__ __align__(1024) unsigned char dyn[];
  __shared__ __align__(8) tma_mbarrier bar;
  if (threadIdx.x == 0) { tma_mbarrier_init(&bar, 1); tma_fence_mbarrier_init(); }
  __syncthreads();
  if (threadIdx.x != 0) return;
  unsigned char* smem = dyn + offset;
  if (mode == 0) {          // load at (m, k) into smem
    T::arrive_expect_tx(&bar);
    T::load(&map, &bar, smem, {.M = m, .K = k});
    T::wait(&bar, 0);
    out[0] = 1;
  } else if (mode == 1) {   // store at (m, k) from smem, fenced, committed and waited
    tma_async_proxy_fence();
    T::store(&map, smem, {.M = m, .K = k});
    tma_store_commit_group();
    tma_store_async_wait<0>();
    out[0] = 1;
  } else if (mode == 2) {   // the store path by construction, waited
    tma_store_token token = T::store_committed(&map, smem, {.M = m, .K = k});
    token.wait_complete();
    out[0] = 1;
  } else {                  // the same, the token dropped unwaited at block exit
    tma_store_token token = T::store_committed(&map, smem, {.M = m, .K = k});
    out[0] = 1;
  }
}
"#;

/// What one launch does.
struct Misuse {
    mode: i32,
    m: i32,
    k: i32,
    smem_offset: i32,
    dynamic_smem: u32,
}

/// The footprint of one call, 1024-aligned: what a correct launch gives.
fn enough_smem() -> u32 {
    u32::try_from(CheckTile::SMEM_BYTES + CheckTile::SMEM_ALIGN).unwrap()
}

fn run(test: &str, m: Misuse) -> Option<Result<(), Error>> {
    tma::runtime::testing::require_gpu_or_skip(test)?;
    let ctx = cudarc::driver::CudaContext::new(0).unwrap();
    let stream = ctx.default_stream();
    let source = Source::new(
        KernelSource::new()
            .tile_as(CheckTile::valid(), "T")
            .body(BODY)
            .build()
            .unwrap(),
    );
    let options = CompileOptions::new(Arch::Sm90a).debug_waits(true);
    let module =
        Module::compile_and_load(&ctx, Compiler::global().unwrap(), &source, &options).unwrap();
    let kernel = module.kernel("misuse").unwrap();
    let input = stream
        .clone_htod(&vec![half::f16::from_f32(1.0); 256 * 256])
        .unwrap();
    let mut out = stream.clone_htod(&[-1i32]).unwrap();
    let map = TensorMap::new(&CheckTile::bind(&[256, 256]).unwrap(), &input).unwrap();
    let cfg = LaunchConfig::new(&stream, (1, 1, 1), (32, 1, 1)).dynamic_smem(m.dynamic_smem);
    // SAFETY: misuse(CUtensorMap, int, int, int, int, int*) with one int of output.
    let result = unsafe {
        kernel
            .launch_builder(&cfg)
            .arg(&map)
            .arg(&m.mode)
            .arg(&m.m)
            .arg(&m.k)
            .arg(&m.smem_offset)
            .arg(&mut out)
            .launch_and_sync()
    };
    println!("{test}: {result:?}");
    if result.is_ok() {
        assert_eq!(
            stream.clone_dtoh(&out).unwrap(),
            vec![1],
            "the kernel did not run"
        );
    }
    Some(result)
}

/// The error a check must give: its tile, helper, rule, dim and value.
fn expect_check(
    result: Option<Result<(), Error>>,
    want_helper: &str,
    want_rule: Rule,
    want_dim: Option<u32>,
    want_value: impl FnOnce(i64) -> bool,
) {
    let Some(result) = result else { return };
    match result {
        Err(Error::DeviceCheck {
            tile,
            helper,
            rule,
            dim,
            value,
            ..
        }) => {
            assert_eq!(tile, "check_tile");
            assert_eq!(helper, want_helper);
            assert_eq!(rule, want_rule);
            assert_eq!(dim, want_dim);
            assert!(want_value(value), "value {value}");
        }
        other => panic!("expected a DeviceCheck {want_rule:?}, got {other:?}"),
    }
}

fn ok(mode: i32) -> Misuse {
    Misuse {
        mode,
        m: 0,
        k: 0,
        smem_offset: 0,
        dynamic_smem: enough_smem(),
    }
}

#[test]
fn gpu_debug_checks_pass_correct_use() {
    for mode in [0, 1, 2] {
        if let Some(r) = run("gpu_debug_checks_pass_correct_use", ok(mode)) {
            r.unwrap_or_else(|e| panic!("mode {mode}: {e}"));
        }
    }
}

/// The innermost coordinate off 16 bytes (4 f16 = 8 B): an H100 traps with an anonymous
/// illegal instruction.
#[test]
fn gpu_check_innermost_coordinate_multiple() {
    let r = run(
        "gpu_check_innermost_coordinate_multiple",
        Misuse { k: 4, ..ok(0) },
    );
    expect_check(r, "load", Rule::CoordinateAlignment, Some(1), |v| v == 4);
}

/// A negative store coordinate: an H100 traps with an anonymous illegal instruction.
#[test]
fn gpu_check_negative_store_coordinate() {
    let r = run(
        "gpu_check_negative_store_coordinate",
        Misuse { m: -16, ..ok(1) },
    );
    expect_check(r, "store", Rule::StoreCoordinateNegative, Some(0), |v| {
        v == -16
    });
}

/// The second repeated box starts past `int`: the helper's coordinate arithmetic overflows.
#[test]
fn gpu_check_repeated_box_past_int() {
    let r = run(
        "gpu_check_repeated_box_past_int",
        Misuse {
            m: i32::MAX - 8,
            ..ok(0)
        },
    );
    expect_check(r, "load", Rule::CoordinateRange, Some(0), |v| {
        v == i64::from(i32::MAX - 8)
    });
}

/// A 128B-swizzled destination only 128-aligned: the data lands silently permuted.
#[test]
fn gpu_check_destination_alignment() {
    let r = run(
        "gpu_check_destination_alignment",
        Misuse {
            smem_offset: 128,
            dynamic_smem: enough_smem() + 1024,
            ..ok(0)
        },
    );
    expect_check(r, "load", Rule::SmemAddressAlignment, None, |v| {
        v % 1024 == 128
    });
}

/// A tile placed past the end of the dynamic shared memory: the copy writes past the
/// block's memory.
#[test]
fn gpu_check_dynamic_smem_covers_the_tile() {
    let r = run(
        "gpu_check_dynamic_smem_covers_the_tile",
        // Enough for one tile from the base, but the kernel puts it 2048 B further in.
        Misuse {
            smem_offset: 2048,
            ..ok(0)
        },
    );
    // The value counts from the start of the dynamic shared memory: the 1024-byte alignment
    // of `dyn` comes out of the launch's bytes too (an H100 put `dyn` 1008 B in), which is
    // why a launch needs the alignment slack.
    expect_check(r, "load", Rule::DynamicSmemTooSmall, None, |v| {
        v >= 2048 + i64::try_from(CheckTile::SMEM_BYTES).unwrap() && v > i64::from(enough_smem())
    });
}

/// A committed store never waited before the block exits: its shared memory may be gone
/// before the copy read it.
#[test]
fn gpu_check_store_token_waited() {
    let r = run("gpu_check_store_token_waited", ok(3));
    expect_check(r, "store_committed", Rule::StoreNotWaited, None, |v| v == 0);
}

/// Without a GPU: the kernels above compile, with the debug mode on and off (CI checks it).
#[test]
fn debug_check_kernels_compile_without_gpu() {
    let Some(_) =
        tma::runtime::testing::require_nvrtc_or_skip("debug_check_kernels_compile_without_gpu")
    else {
        return;
    };
    let source = Source::new(
        KernelSource::new()
            .tile_as(CheckTile::valid(), "T")
            .body(BODY)
            .build()
            .unwrap(),
    );
    for debug in [false, true] {
        let options = CompileOptions::new(Arch::Sm90a).debug_waits(debug);
        let c = Compiler::global()
            .unwrap()
            .compile_source(&source, &options)
            .unwrap();
        assert!(c.ptx.contains(".entry misuse"));
        assert_eq!(c.ptx.contains("tma_debug_fail"), debug, "debug {debug}");
    }
}
