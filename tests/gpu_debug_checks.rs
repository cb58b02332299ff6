//! The device debug mode, for real: each kernel-side mistake that the hardware answers with an
//! anonymous trap, silently wrong data or nothing at all becomes `Error::DeviceCheck` naming
//! the tile, the helper, the rule and the value. One test per mistake class; a check traps
//! and leaves the CUDA context unusable, so the GPU runner gives every test its own process.
//! A control test shows the checks pass correct use. Skips visibly without a GPU.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;

use cudarc::driver::{CudaSlice, CudaStream, DevicePtr};
use tma::render::KernelSource;
use tma::runtime::{
    CompileOptions, Compiler, Error, Kernel, LaunchConfig, Module, Source, TensorMap,
};
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

/// One kernel per mistake, chosen by `mode`; coordinates, the shared-memory offset and `aux`
/// (a CTA mask, an mbarrier offset) come from the host so the compiler cannot see the
/// mistake. The tile is `T`.
const BODY: &str = r#"
extern "C" __global__ void misuse(const __grid_constant__ CUtensorMap map, int mode, int m, int k, int offset,
                                  int aux, int* out) {
  extern __shared__ __align__(1024) unsigned char dyn[];
  __shared__ __align__(8) tma_mbarrier bar;
  __shared__ __align__(16) unsigned char bars[32];
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
  } else if (mode == 3) {   // the same, the token dropped unwaited at block exit
    tma_store_token token = T::store_committed(&map, smem, {.M = m, .K = k});
    out[0] = 1;
  } else if (mode == 4) {   // load_multicast to CTA mask `aux` (negative: this CTA alone)
    unsigned rank;
    asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(rank));
    const unsigned short mask = aux >= 0 ? (unsigned short)aux : (unsigned short)(1u << rank);
    T::arrive_expect_tx(&bar);
    T::load_multicast(&map, &bar, smem, mask, {.M = m, .K = k});
    T::wait(&bar, 0);
    out[0] = 1;
  } else if (mode == 5) {   // a load completing on an "mbarrier" `aux` bytes into shared memory
    T::load(&map, reinterpret_cast<tma_mbarrier*>(bars + aux), smem, {.M = m, .K = k});
    out[0] = 1;
  } else {                  // a load completing on an "mbarrier" in global memory
    T::load(&map, reinterpret_cast<tma_mbarrier*>(out), smem, {.M = m, .K = k});
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
    aux: i32,
    dynamic_smem: u32,
    /// A cluster launch of this shape (the grid is one cluster).
    cluster: Option<(u32, u32, u32)>,
}

/// The footprint of one call, 1024-aligned: what a correct launch gives.
fn enough_smem() -> u32 {
    u32::try_from(CheckTile::SMEM_BYTES + CheckTile::SMEM_ALIGN).unwrap()
}

/// The compiled `misuse` kernel with its map and output, on one stream.
struct Rig {
    stream: Arc<CudaStream>,
    kernel: Kernel,
    map: TensorMap,
    out: CudaSlice<i32>,
    _input: CudaSlice<half::f16>,
}

fn rig(test: &str) -> Option<Rig> {
    tma_test_support::skip::require_gpu_or_skip(test)?;
    let ctx = cudarc::driver::CudaContext::new(0).unwrap();
    let stream = ctx.default_stream();
    // With its description (`Source::kernel`): a check names the tile and the dim.
    let source = Source::kernel(
        &KernelSource::new()
            .tile_as(CheckTile::valid(), "T")
            .body(BODY),
    )
    .unwrap();
    let options = CompileOptions::new(Arch::Sm90a).debug_waits(true);
    let module =
        Module::compile_and_load(&ctx, Compiler::global().unwrap(), &source, &options).unwrap();
    let kernel = module.kernel("misuse").unwrap();
    let input = stream
        .clone_htod(&vec![half::f16::from_f32(1.0); 256 * 256])
        .unwrap();
    let out = stream.clone_htod(&[-1i32]).unwrap();
    let map = TensorMap::new(&CheckTile::bind(&[256, 256]).unwrap(), &input).unwrap();
    Some(Rig {
        stream,
        kernel,
        map,
        out,
        _input: input,
    })
}

impl Rig {
    /// Launches `m`; with `sync`, waits for it (a check's error comes back here).
    fn launch(&mut self, m: &Misuse, sync: bool) -> Result<(), Error> {
        let grid = m.cluster.unwrap_or((1, 1, 1));
        let mut cfg =
            LaunchConfig::new(&self.stream, grid, (32, 1, 1)).dynamic_smem(m.dynamic_smem);
        if let Some(c) = m.cluster {
            cfg = cfg.cluster(c);
        }
        let mut b = self.kernel.launch_builder(&cfg);
        b.arg(&self.map)
            .arg(&m.mode)
            .arg(&m.m)
            .arg(&m.k)
            .arg(&m.smem_offset)
            .arg(&m.aux)
            .arg(&mut self.out);
        // SAFETY: misuse(CUtensorMap, int x5, int*) with one int of output.
        unsafe {
            if sync {
                b.launch_and_sync()
            } else {
                b.launch()
            }
        }
    }

    /// The output's device address (what mode 6 passes as its mbarrier).
    fn out_address(&self) -> u64 {
        let (ptr, _record) = self.out.device_ptr(&self.stream);
        ptr
    }
}

fn run(test: &str, m: Misuse) -> Option<Result<(), Error>> {
    let mut rig = rig(test)?;
    let result = rig.launch(&m, true);
    println!("{test}: {result:?}");
    if result.is_ok() {
        assert_eq!(
            rig.stream.clone_dtoh(&rig.out).unwrap(),
            vec![1],
            "the kernel did not run"
        );
    }
    Some(result)
}

/// The error a check must give: its tile, helper, rule, dim (named as declared, `M` / `K`,
/// as host errors name it) and value.
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
            dim_name,
            value,
            ..
        }) => {
            assert_eq!(tile, "check_tile");
            assert_eq!(helper, want_helper);
            assert_eq!(rule, want_rule);
            assert_eq!(dim, want_dim);
            let want_name = want_dim.map(|d| ["M", "K"][d as usize]);
            assert_eq!(dim_name.as_deref(), want_name);
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
        aux: 0,
        dynamic_smem: enough_smem(),
        cluster: None,
    }
}

/// A multicast in a 2-CTA cluster (one cluster), each CTA to itself unless `aux` says.
fn multicast(aux: i32) -> Misuse {
    Misuse {
        aux,
        cluster: Some((2, 1, 1)),
        ..ok(4)
    }
}

#[test]
fn gpu_debug_checks_pass_correct_use() {
    for m in [ok(0), ok(1), ok(2), multicast(-1)] {
        let mode = m.mode;
        if let Some(r) = run("gpu_debug_checks_pass_correct_use", m) {
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

/// A multicast to no CTA: nothing arrives anywhere and every wait on it hangs.
#[test]
fn gpu_check_multicast_mask_is_not_zero() {
    let r = run("gpu_check_multicast_mask_is_not_zero", multicast(0));
    expect_check(r, "load_multicast", Rule::MulticastMask, None, |v| {
        v == 2 << 32
    });
}

/// A multicast to CTA 2 of a 2-CTA cluster (`%cluster_nctarank` = 2): a CTA that does not
/// exist.
#[test]
fn gpu_check_multicast_mask_within_the_cluster() {
    let r = run(
        "gpu_check_multicast_mask_within_the_cluster",
        multicast(0b101),
    );
    expect_check(r, "load_multicast", Rule::MulticastMask, None, |v| {
        v == (2 << 32) | 0b101
    });
}

/// An mbarrier 4 bytes off 8: the copy's completion lands on a misaligned address.
#[test]
fn gpu_check_mbarrier_is_8_byte_aligned() {
    let r = run(
        "gpu_check_mbarrier_is_8_byte_aligned",
        Misuse { aux: 4, ..ok(5) },
    );
    expect_check(r, "load", Rule::MbarrierAddress, None, |v| v % 8 == 4);
}

/// An mbarrier in global memory: the helper would cut its generic address to an unrelated
/// shared-memory address.
#[test]
fn gpu_check_mbarrier_is_in_shared_memory() {
    let Some(mut rig) = rig("gpu_check_mbarrier_is_in_shared_memory") else {
        return;
    };
    let out = rig.out_address();
    let r = rig.launch(&ok(6), true);
    expect_check(Some(r), "load", Rule::MbarrierAddress, None, |v| {
        v == out as i64
    });
}

/// A check that fails in a launch nobody synchronised is reported by the next launch of the
/// module, as that check: the next launch used to clear the module's one debug record, and
/// the lost context then came back as a bare `Error::Launch`.
#[test]
fn gpu_an_unsynchronised_check_is_reported_by_the_next_launch() {
    let Some(mut rig) = rig("gpu_an_unsynchronised_check_is_reported_by_the_next_launch") else {
        return;
    };
    rig.launch(&Misuse { k: 4, ..ok(0) }, false)
        .expect("queued: the check fails on the device");
    // Let it trap and write the record before the next launch looks.
    std::thread::sleep(std::time::Duration::from_millis(500));
    let r = rig.launch(&ok(0), true);
    println!("next launch: {r:?}");
    expect_check(Some(r), "load", Rule::CoordinateAlignment, Some(1), |v| {
        v == 4
    });
}

/// Without a GPU: the kernels above compile, with the debug mode on and off (CI checks it).
#[test]
fn debug_check_kernels_compile_without_gpu() {
    let Some(_) =
        tma_test_support::skip::require_nvrtc_or_skip("debug_check_kernels_compile_without_gpu")
    else {
        return;
    };
    let source = Source::kernel(
        &KernelSource::new()
            .tile_as(CheckTile::valid(), "T")
            .body(BODY),
    )
    .unwrap();
    for debug in [false, true] {
        let options = CompileOptions::new(Arch::Sm90a).debug_waits(debug);
        let c = Compiler::global()
            .unwrap()
            .compile_source(&source, &options)
            .unwrap();
        assert!(c.ptx.contains(".entry misuse"));
        assert_eq!(c.ptx.contains("tma_debug_fail"), debug, "debug {debug}");
        // The mbarrier and multicast checks are there only in debug mode.
        assert_eq!(c.ptx.contains("isspacep.shared"), debug, "debug {debug}");
        assert_eq!(c.ptx.contains("%cluster_nctarank"), debug, "debug {debug}");
    }
}
