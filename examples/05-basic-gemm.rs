//! A GEMM in one file: D = A B^T (A M x K, B N x K, both K-major; D M x N row-major), bf16 in,
//! fp32 accumulation, bf16 out, for any M, N, K that are multiples of 8.
//!
//! One configuration of `examples/05-gemm` (which adds the cluster, the persistent scheduler,
//! other tiles and types, and the checks against cuBLAS; its tuning and timing is
//! `benches/gemm`): a 128 x 256 block tile, K in steps of 64 through a 3-stage TMA pipeline,
//! one producer warpgroup and two consumer warpgroups (64 rows each, wgmma m64n256k16), and an
//! epilogue that writes each consumer's accumulators into D's swizzled tile in shared memory
//! and stores it with one TMA store.
//!
//! The host declares it once: three tiles, the pipeline, the warp roles and the kernel plan.
//! The plan lays out the shared memory (the ring, then one D staging copy per consumer) and
//! fixes the launch (block, cluster, dynamic shared memory); the kernel reads its offsets from
//! `tma_plan_gemm`, the launch comes from `Kernel::plan_config`. Nothing is counted twice.
//!
//! Without a GPU it renders the kernel, compiles it with NVRTC and says it skipped the run.
//! With one it runs on random inputs, output poisoned first, and checks every element was
//! written and 1024 sampled entries against the exact f64 value; it exits non-zero if wrong.
//!
//! Run: `cargo run --release --example 05-basic-gemm [-- M N K]` (default 1000 1032 520: ragged
//! edges, which TMA zero-fills on load and clips on store).

use std::error::Error;

use tma::half::bf16;
use tma::pipeline::{Consumers, PipelineSpec, WarpRoles};
use tma::plan::KernelPlan;
use tma::render::KernelSource;
use tma::runtime::{CompileOptions, Compiler, Module, Source, TensorMap};
use tma::spec::{Extent, Major, Operand};
use tma::{validate, Arch, DType, Swizzle, TileSpec};

const BM: u32 = 128; // rows of D per block: 64 per consumer warpgroup
const BN: u32 = 256; // columns of D per block: wgmma's N
const BK: u32 = 64; // K per stage: 64 bf16, one 128-byte swizzled row
const STAGES: u32 = 3;
const CONSUMERS: u32 = 2;

const KERNEL: &str = r#"
typedef tma_plan_gemm P;     // the plan: where each region sits, the launch's numbers
typedef tma_pipe_ring Pipe;  // the ring of A and B stages
typedef Pipe::tile_a TA;
typedef Pipe::tile_b TB;
typedef P::tile_d TD;        // D's call: 64 rows x 256 columns, 128B-swizzled
typedef tma_roles_gemm R;    // warpgroup 0 produces, 1 and 2 consume

__device__ __forceinline__ unsigned pack_bf16x2(float lo, float hi) {
  unsigned r;
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
  return r;
}

extern "C" __global__ void TMA_PLAN_GEMM_LAUNCH_BOUNDS gemm(const __grid_constant__ CUtensorMap mapA,
                                                           const __grid_constant__ CUtensorMap mapB,
                                                           const __grid_constant__ CUtensorMap mapD, int K) {
  extern __shared__ __align__(16) unsigned char raw[];
  unsigned char* base = P::base(raw);
  const Pipe pipe = P::ring(base);
  pipe.init();
  const int m0 = blockIdx.y * (int)TA::BOX_m, n0 = blockIdx.x * (int)TB::WGMMA_N;
  const int bk = (int)TA::BOX_k, nk = (K + bk - 1) / bk;  // K per stage (64), stages of K
  if (R::is_producer()) {
    R::producer_setmaxnreg();
    if (threadIdx.x == 0u) {  // one thread issues every stage: arm the barrier, load A and B
      Pipe::state s;
      for (int kb = 0; kb < nk; ++kb, ++s) {
        pipe.acquire(s);
        pipe.load(s, &mapA, {.m = m0, .k = kb * bk}, &mapB, {.n = n0, .k = kb * bk});
      }
    }
    return;
  }
  R::consumer_setmaxnreg();
  const unsigned c = R::consumer_index(), t = threadIdx.x % 128u;
  float acc[TB::WGMMA_N / 2];  // this thread's share of the warpgroup's 64 x 256 fp32
  Pipe::state s, prev;
  for (int kb = 0; kb < nk; ++kb) {
    pipe.wait(s);
    tma_wgmma_fence();
#pragma unroll
    for (int k = 0; k < (int)TA::K_SLICES; ++k)  // A's rows 64c .. 64c + 63 times all of B
      tma_wgmma<TA, TB>(acc, TA::desc(pipe.smem_a(s), k, c), TB::desc(pipe.smem_b(s), k), (kb | k) != 0);
    tma_wgmma_commit_group();
    if (kb > 0) {
      tma_wgmma_wait_group<1>();  // the previous stage's wgmmas are done reading it
      pipe.release(prev);
    }
    prev = s;
    ++s;
  }
  tma_wgmma_wait_group<0>();
  pipe.release(prev);
  // Epilogue: each fp32 pair to bf16, where D's tile puts it in this consumer's staging copy
  // (TD::offset applies the 128B swizzle), then one TMA store of the 64 x 256 call.
  unsigned char* d = P::d(base, c);
#pragma unroll
  for (int i = 0; i < (int)TB::WGMMA_N / 2; i += 2) {
    const int row = (int)tma_wgmma_d_row(t, i), col = (int)tma_wgmma_d_col(t, i);
    *reinterpret_cast<unsigned*>(d + TD::offset({.m = row, .n = col})) = pack_bf16x2(acc[i], acc[i + 1]);
  }
  tma_async_proxy_fence();  // these generic-proxy writes, visible to the TMA store
  R::sync_epi();            // every consumer thread wrote its part
  if (t == 0u) {
    TD::store(&mapD, d, {.m = m0 + 64 * (int)c, .n = n0});  // what lies past D is clipped
    tma_store_commit_group();
    tma_store_async_wait<0>();  // the store has read the staging before the block leaves
  }
}
"#;

type Res<T> = Result<T, Box<dyn Error>>;

fn main() -> Res<()> {
    // 1. The declarations, each checked: A and B as wgmma operands, D's store call, the ring,
    //    the roles (setmaxnreg 40 / 232, a named barrier over both consumers) and the plan.
    let runtime = [Extent::Runtime, Extent::Runtime];
    let a = validate(
        &TileSpec::new("a", DType::BF16, [1, 1], [BM, BK])
            .global_extents(runtime)
            .dim_names(["m", "k"])
            .swizzle(Swizzle::B128)
            .wgmma(Operand::A, Major::K),
    )?;
    let b = validate(
        &TileSpec::new("b", DType::BF16, [1, 1], [BN, BK])
            .global_extents(runtime)
            .dim_names(["n", "k"])
            .swizzle(Swizzle::B128)
            .wgmma(Operand::B, Major::K),
    )?;
    let d = validate(
        &TileSpec::new("d", DType::BF16, [1, 1], [64, 64])
            .global_extents(runtime)
            .dim_names(["m", "n"])
            .swizzle(Swizzle::B128)
            .repeat([1, BN / 64]),
    )?;
    let ring = PipelineSpec::new("ring", STAGES, Consumers::Warpgroups(CONSUMERS))
        .tile("a", &a)
        .tile("b", &b)
        .validate()?;
    let roles = WarpRoles::new("gemm", 40, CONSUMERS, 232)
        .barrier("epi", 128 * CONSUMERS)
        .validate()?;
    let plan = KernelPlan::new("gemm")
        .pipeline(&ring)
        .roles(&roles)
        .staging("d", &d, CONSUMERS)
        .validate()?;
    let launch = plan.launch();
    println!(
        "kernel plan `gemm`: block {}x{}x{}, {} B of dynamic shared memory",
        launch.block[0], launch.block[1], launch.block[2], launch.dynamic_smem_bytes
    );
    for r in &plan.layout().regions {
        println!("  {:<5} at +{:<6} {:>6} B", r.name, r.offset, r.bytes);
    }

    // 2. The source: tma's helpers for every part of the plan, struct tma_plan_gemm, and the
    //    kernel; it carries the plan's launch. NVRTC compiles it for sm_90a.
    let source = Source::kernel(&KernelSource::new().plan(&plan).body(KERNEL))?;
    let compiler = match Compiler::global() {
        Ok(c) => c,
        Err(e) if !required("TMA_REQUIRE_NVRTC") => {
            println!("no NVRTC ({e}): the plan is checked; skipping the compile and the run");
            return Ok(());
        }
        Err(e) => return Err(e.into()),
    };
    let compiled = compiler.compile_source(&source, &CompileOptions::new(Arch::Sm90a))?;
    println!("compiled: {} B of CUBIN", compiled.cubin.len());
    if let Err(e) = tma::runtime::gpu_available() {
        if required("TMA_REQUIRE_GPU") {
            return Err(e.into());
        }
        println!("no GPU ({e}): rendered and compiled; skipping the run");
        return Ok(());
    }

    // 3. Random inputs in [-1, 1] (never 0), D poisoned with NaN, one launch from the plan.
    let dims: Vec<usize> = std::env::args()
        .skip(1)
        .map(|s| s.parse())
        .collect::<Result<_, _>>()?;
    let (m, n, k) = match dims[..] {
        [m, n, k] if [m, n, k].iter().all(|&x| x > 0 && x % 8 == 0) => (m, n, k),
        [] => (1000, 1032, 520),
        _ => return Err("usage: 05-basic-gemm [M N K] (multiples of 8)".into()),
    };
    let mut rng = 0x9e37_79b9_7f4a_7c15_u64;
    let mut random = |len: usize| -> Vec<u16> {
        (0..len)
            .map(|_| {
                rng ^= rng << 13;
                rng ^= rng >> 7;
                rng ^= rng << 17;
                let x = (rng >> 40) as f32 / (1u64 << 23) as f32 - 1.0;
                bf16::from_f32(if x == 0.0 { 1.0 / 256.0 } else { x }).to_bits()
            })
            .collect()
    };
    let (a_host, b_host) = (random(m * k), random(n * k));
    let ctx = tma::cudarc::driver::CudaContext::new(0)?;
    let stream = ctx.default_stream();
    let a_dev = stream.clone_htod(&a_host)?;
    let b_dev = stream.clone_htod(&b_host)?;
    let d_dev = stream.clone_htod(&vec![0xffff_u16; m * n])?;
    let (mu, nu, ku) = (m as u64, n as u64, k as u64);
    let map_a = TensorMap::new_raw_bits(&a.bind(&[mu, ku], None)?, &a_dev)?;
    let map_b = TensorMap::new_raw_bits(&b.bind(&[nu, ku], None)?, &b_dev)?;
    let map_d = TensorMap::new_raw_bits(&d.bind(&[mu, nu], None)?, &d_dev)?;
    let module = Module::load(&ctx, compiled)?;
    let kernel = module.kernel("gemm")?;
    let grid = (
        n.div_ceil(BN as usize) as u32,
        m.div_ceil(BM as usize) as u32,
        1,
    );
    let cfg = kernel.plan_config(&stream, grid)?; // block, cluster, smem: the plan's
    let k_arg = k as i32;
    // SAFETY: gemm(CUtensorMap A, CUtensorMap B, CUtensorMap D, int K) as declared above; the
    // maps cover live M x K, N x K and M x N buffers, and the grid covers D in 128 x 256 tiles.
    unsafe {
        kernel
            .launch_builder(&cfg)
            .arg(&map_a)
            .arg(&map_b)
            .arg(&map_d)
            .arg(&k_arg)
            .launch()
    }?;
    module.synchronize(&stream)?;
    let out = stream.clone_dtoh(&d_dev)?;

    // 4. The check: no NaN left (every element written), and sampled entries (the corners
    //    among them) within 2^-8 |x| + K 2^-23 sum_k |a_k b_k| of the exact x: one rounding
    //    to bf16 of an fp32 sum whose error is below K 2^-24 sum_k |a_k b_k|.
    let unwritten = out.iter().filter(|&&v| bf16::from_bits(v).is_nan()).count();
    let f = |v: u16| f64::from(bf16::from_bits(v).to_f32());
    let mut bad = 0;
    for s in 0..1024usize {
        let (i, j) = match s {
            0 => (m - 1, n - 1),
            1 => (m - 1, 0),
            2 => (0, n - 1),
            _ => (s * 7919 % m, s * 104_729 % n),
        };
        let (row_a, row_b) = (&a_host[i * k..(i + 1) * k], &b_host[j * k..(j + 1) * k]);
        let exact: f64 = row_a.iter().zip(row_b).map(|(&x, &y)| f(x) * f(y)).sum();
        let size: f64 = row_a
            .iter()
            .zip(row_b)
            .map(|(&x, &y)| (f(x) * f(y)).abs())
            .sum();
        let got = f(out[i * n + j]);
        let bound = exact.abs() / 256.0 + k as f64 * size / f64::from(1u32 << 23);
        let close = (got - exact).abs() <= bound; // false for NaN
        if !close {
            bad += 1;
            if bad <= 5 {
                println!("  D[{i}][{j}] = {got}, exact {exact} (bound {bound:.2e})");
            }
        }
    }
    println!("{m}x{n}x{k}: {unwritten} elements unwritten, {bad}/1024 samples off the exact value");
    if unwritten > 0 || bad > 0 {
        return Err("wrong result".into());
    }
    println!("correct");
    Ok(())
}

/// `name=1` in the environment: a missing NVRTC or GPU is an error, not a skip.
fn required(name: &str) -> bool {
    std::env::var(name).is_ok_and(|v| v == "1")
}
