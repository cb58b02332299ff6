//! Warp-granular roles, per-consumer named barriers and consumers that TMA-store from a stage,
//! on the GPU: one kernel plan (a 2-stage ring of 32 x 32 u32 tiles released by
//! `Consumers::Warps(4)`; warp roles of one producer warp and four consumer warps, 160
//! threads, no setmaxnreg; a barrier per consumer, `rows`). The producer warp streams the
//! block's tiles; consumer warp `c` adds 1 to rows `8c .. 8c + 7` of each stage *in place*,
//! fences its writes for the async proxy, synchronises on its own barrier (`sync_rows(c)`,
//! id `BARRIER_rows + c`), and its lane 0 TMA-stores those 8 rows straight from the stage and
//! releases with `release_after_store` (the store has read the stage before the producer may
//! refill it); the other lanes `release`. The output, poisoned first, is compared with the CPU
//! model's: each tile loaded, plus 1, stored as four 8-row slices.
//!
//! `TMA_ROLES_BREAK=1` releases before the store instead (and sleeps, so the producer's next
//! load lands first): the test must then report wrong elements.
//!
//! Without a GPU the kernel still compiles (NVRTC, sm_90a, with and without debug checks), and
//! its launch is the roles' block.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use tma::model;
use tma::pipeline::{Consumers, PipelineSpec, RoleWarps, ValidWarpRoles, WarpRoles};
use tma::plan::{KernelPlan, ValidKernelPlan};
use tma::render::KernelSource;
use tma::runtime::{CompileOptions, Compiler, Error, Module, Source, TensorMap};
use tma::{validate, Arch, DType, TileSpec, ValidSpec};

const ROWS: u64 = 32 * 23;
const COLS: u64 = 32 * 5;
const GRID: u32 = 8;
const POISON: u32 = 0xdead_beef;

/// The ring's tile: 32 x 32 u32 (4 KB a stage).
fn tile() -> ValidSpec {
    validate(&TileSpec::new("rt", DType::U32, [ROWS, COLS], [32, 32]).dim_names(["r", "c"]))
        .unwrap()
}

/// What one consumer warp stores: 8 rows of a stage's tile.
fn slice() -> ValidSpec {
    validate(&TileSpec::new("rs", DType::U32, [ROWS, COLS], [8, 32]).dim_names(["r", "c"])).unwrap()
}

/// One producer warp, four consumer warps (160 threads), a barrier per consumer.
fn roles() -> ValidWarpRoles {
    WarpRoles::warps("epi", 1, 4)
        .per_consumer_barrier("rows", 32)
        .validate()
        .unwrap()
}

fn plan() -> ValidKernelPlan {
    let ring = PipelineSpec::new("ring", 2, Consumers::Warps(4))
        .tile("x", &tile())
        .validate()
        .unwrap();
    KernelPlan::new("roles_store")
        .tile("TS", &slice())
        .pipeline(&ring)
        .roles(&roles())
        .validate()
        .unwrap()
}

/// `roles_bad_barrier`'s plan: the roles alone (their block), no shared memory.
fn bad_barrier_plan() -> ValidKernelPlan {
    KernelPlan::new("roles_bad_barrier")
        .roles(&roles())
        .validate()
        .unwrap()
}

/// The line `BODY`'s text starts on (compile errors name this file's lines).
const BODY_LINE: u32 = line!() + 1;
const BODY: &str = r#"
extern "C" __global__ void TMA_PLAN_ROLES_STORE_LAUNCH_BOUNDS
roles_store(const __grid_constant__ CUtensorMap in, const __grid_constant__ CUtensorMap out,
            int tiles_r, int tiles_c) {
  typedef tma_plan_roles_store P;
  typedef tma_roles_epi R;
  static_assert(P::BLOCK_THREADS == R::THREADS && R::THREADS == 160u && R::CONSUMERS == 4u, "the roles' block");
  extern __shared__ __align__(16) unsigned char raw[];
  unsigned char* base = P::base(raw);
  const tma_pipe_ring pipe = P::ring(base);
  pipe.init();
  const int total = tiles_r * tiles_c;
  tma_pipe_ring::state s;
  if (R::is_producer()) {
    if (tma_elect_one()) {
      for (int t = blockIdx.x; t < total; t += gridDim.x, ++s) {
        pipe.acquire(s);
        pipe.load(s, &in, {.r = (t / tiles_c) * 32, .c = (t % tiles_c) * 32});
      }
    }
    __syncwarp();
  } else {
    // This warp's 8 rows of each stage (consumer_index_sync: a wrong index moves the rows).
    const unsigned c = R::consumer_index_sync();
    const unsigned lane = R::thread_in_consumer();
    for (int t = blockIdx.x; t < total; t += gridDim.x, ++s) {
      pipe.wait(s);
      unsigned* rows = reinterpret_cast<unsigned*>(pipe.smem_x(s)) + c * 8u * 32u;
      for (unsigned i = lane; i < 8u * 32u; i += 32u) rows[i] += 1u;  // in the stage
      tma_async_proxy_fence();  // each writer's writes, for the store's async reads
      R::sync_rows(c);          // this consumer's writers, on its own barrier
      const TS::coords at = {.r = (t / tiles_c) * 32 + static_cast<int>(c * 8u), .c = (t % tiles_c) * 32};
      if (lane == 0u) {
#if defined(TMA_TEST_RELEASE_BEFORE_STORE)
        pipe.release(s);
        __nanosleep(4000);
        TS::store_committed(&out, rows, at).wait_read();
#else
        pipe.release_after_store(s, TS::store_committed(&out, rows, at));
#endif
      } else {
        pipe.release(s);
      }
    }
    if (lane == 0u) tma_store_async_wait_complete<0>();
  }
  pipe.finish();
}

// Consumer 0 names `consumer` as its barrier (the others their own): past CONSUMERS, a debug
// build fails instead of synchronising on another barrier's id.
extern "C" __global__ void TMA_PLAN_ROLES_BAD_BARRIER_LAUNCH_BOUNDS roles_bad_barrier(unsigned consumer, int* out) {
  typedef tma_roles_epi R;
  if (R::is_consumer()) {
    const unsigned c = R::consumer_index();
    R::sync_rows(c == 0u ? consumer : c);
  }
  out[threadIdx.x] = 1;
}
"#;

fn kernel_source() -> KernelSource {
    let body = if std::env::var_os("TMA_ROLES_BREAK").is_some() {
        format!("#define TMA_TEST_RELEASE_BEFORE_STORE 1\n{BODY}")
    } else {
        BODY.to_string()
    };
    KernelSource::new()
        .plan(&plan())
        .plan(&bad_barrier_plan())
        .body_at(file!(), BODY_LINE, &body)
}

fn options(debug: bool) -> CompileOptions {
    CompileOptions::new(Arch::Sm90a).debug_waits(debug)
}

#[test]
fn the_roles_kernel_compiles_and_launches_as_its_roles() {
    let test = "the_roles_kernel_compiles_and_launches_as_its_roles";
    let launch = plan().launch().clone();
    assert_eq!((launch.block, launch.cluster), ([160, 1, 1], [1, 1, 1]));
    assert_eq!(
        plan().plan().roles.as_ref().unwrap().roles().consumers,
        RoleWarps::Warps(4)
    );
    if tma_test_support::skip::require_nvrtc_or_skip(test).is_none() {
        return;
    }
    let compiler = Compiler::global().unwrap();
    let source = Source::kernel(&kernel_source()).unwrap();
    for debug in [false, true] {
        let compiled = compiler
            .compile_source(&source, &options(debug))
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(compiled.plan("roles_store"), Some(&launch));
        assert_eq!(
            compiled.plan("roles_bad_barrier"),
            Some(bad_barrier_plan().launch())
        );
        let ptx = &compiled.ptx;
        // The per-consumer barrier's id is a register; the stores read the stage and are
        // waited for their reads before the release.
        assert!(ptx.contains("bar.sync"), "no named barrier");
        assert!(
            ptx.contains("cp.async.bulk.tensor.2d.global.shared::cta"),
            "no TMA store"
        );
        assert!(
            ptx.contains("cp.async.bulk.wait_group.read 0"),
            "no read wait"
        );
        assert!(
            !ptx.contains("setmaxnreg"),
            "setmaxnreg without its declaration"
        );
    }
}

#[test]
fn gpu_consumer_warps_store_from_their_stage_before_releasing_it() {
    let test = "gpu_consumer_warps_store_from_their_stage_before_releasing_it";
    let Some(_) = tma_test_support::skip::require_gpu_or_skip(test) else {
        return;
    };
    let ctx = cudarc::driver::CudaContext::new(0).unwrap();
    let stream = ctx.default_stream();
    let source = Source::kernel(&kernel_source()).unwrap();
    let debug = std::env::var_os("TMA_ROLES_DEBUG").is_some();
    let module =
        Module::compile_and_load(&ctx, Compiler::global().unwrap(), &source, &options(debug))
            .unwrap();
    let kernel = module.kernel("roles_store").unwrap();

    let n = (ROWS * COLS) as usize;
    let mut seed = 0x2545_f491_4f6c_dd1du64 ^ u64::from(std::process::id());
    println!("seed {seed:#x}");
    let input: Vec<u32> = (0..n)
        .map(|_| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            // Below 2^31: plus 1 is never the poison.
            (seed >> 33) as u32
        })
        .collect();
    let d_in = stream.clone_htod(&input).unwrap();
    let d_out = stream.clone_htod(&vec![POISON; n]).unwrap();
    let bound_in = tile().bind(&[ROWS, COLS], None).unwrap();
    let bound_out = slice().bind(&[ROWS, COLS], None).unwrap();
    let map_in = TensorMap::new(&bound_in, &d_in).unwrap();
    let map_out = TensorMap::new(&bound_out, &d_out).unwrap();
    let (tiles_r, tiles_c) = ((ROWS / 32) as i32, (COLS / 32) as i32);

    let cfg = kernel.plan_config(&stream, (GRID, 1, 1)).unwrap();
    // SAFETY: roles_store(CUtensorMap, CUtensorMap, int, int): maps of the ring's tile and of
    // the 8-row slice over live ROWS x COLS buffers, the tile counts; the plan's launch.
    unsafe {
        kernel
            .launch_builder(&cfg)
            .arg(&map_in)
            .arg(&map_out)
            .arg(&tiles_r)
            .arg(&tiles_c)
            .launch()
    }
    .unwrap();
    module.synchronize(&stream).unwrap();
    let got = stream.clone_dtoh(&d_out).unwrap();

    // The CPU model: each tile loaded, plus 1, stored as four 8-row slices.
    let in_bytes: Vec<u8> = input.iter().flat_map(|v| v.to_le_bytes()).collect();
    let mut want_bytes: Vec<u8> = std::iter::repeat_n(POISON.to_le_bytes(), n)
        .flatten()
        .collect();
    for tr in 0..i64::from(tiles_r) {
        for tc in 0..i64::from(tiles_c) {
            let mut stage = model::load(&bound_in, &in_bytes, &[tr * 32, tc * 32]).unwrap();
            for e in stage.chunks_exact_mut(4) {
                let v = u32::from_le_bytes([e[0], e[1], e[2], e[3]]).wrapping_add(1);
                e.copy_from_slice(&v.to_le_bytes());
            }
            for (c, rows) in stage.chunks_exact(8 * 32 * 4).enumerate() {
                let at = [tr * 32 + 8 * c as i64, tc * 32];
                model::store(&bound_out, rows, &at, &mut want_bytes).unwrap();
            }
        }
    }
    let want: Vec<u32> = want_bytes
        .chunks_exact(4)
        .map(|e| u32::from_le_bytes([e[0], e[1], e[2], e[3]]))
        .collect();
    let wrong = want.iter().zip(&got).filter(|(w, g)| w != g).count();
    assert!(
        want.iter().all(|&w| w != POISON),
        "the model covers every element"
    );
    assert_eq!(
        wrong, 0,
        "{wrong} of {n} elements differ from the CPU model"
    );
}

/// A consumer index past a per-consumer barrier's consumers, in a debug build: the device
/// names it (`Rule::NamedBarrierIds`) instead of synchronising on another barrier's id.
#[test]
fn gpu_debug_a_consumer_past_its_barriers_is_named() {
    let test = "gpu_debug_a_consumer_past_its_barriers_is_named";
    let Some(_) = tma_test_support::skip::require_gpu_or_skip(test) else {
        return;
    };
    let ctx = cudarc::driver::CudaContext::new(0).unwrap();
    let stream = ctx.default_stream();
    let source = Source::kernel(&kernel_source()).unwrap();
    let module =
        Module::compile_and_load(&ctx, Compiler::global().unwrap(), &source, &options(true))
            .unwrap();
    let kernel = module.kernel("roles_bad_barrier").unwrap();
    let mut out = stream.clone_htod(&[0i32; 160]).unwrap();
    let cfg = kernel.plan_config(&stream, (1, 1, 1)).unwrap();
    // Control: consumer 0's own barrier.
    // SAFETY: roles_bad_barrier(unsigned, int*): `out` holds the block's 160 ints.
    unsafe {
        kernel
            .launch_builder(&cfg)
            .arg(&0u32)
            .arg(&mut out)
            .launch_and_sync()
    }
    .unwrap();
    assert!(stream.clone_dtoh(&out).unwrap().iter().all(|&o| o == 1));
    // SAFETY: as above; the kernel traps in sync_rows before it synchronises.
    let r = unsafe {
        kernel
            .launch_builder(&cfg)
            .arg(&4u32)
            .arg(&mut out)
            .launch_and_sync()
    };
    match r {
        Err(
            e @ Error::DeviceCheck {
                rule: tma::spec::Rule::NamedBarrierIds,
                value,
                ..
            },
        ) => {
            println!("{e}");
            // The barrier `rows`: ids 1 to 4, consumer 4.
            assert_eq!(value, (1 << 40) | (4 << 32) | 4, "{e}");
            assert!(e.to_string().contains("ids 1 to 4"), "{e}");
        }
        other => panic!("{other:?}"),
    }
}
