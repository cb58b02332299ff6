//! `#[derive(TmaTiles)]` end to end on a GPU: four annotated fields give the kernel source
//! (helpers, the set struct with each tile's offset, the parameter-list macro),
//! `tensor_maps` encodes the four maps over device buffers in that order, and a kernel that
//! loads q, k and v on one barrier (`tma_group`) and stores q + k + v (16-bit values added as
//! small integers, exact; each element read through `at`) through `o` produces the right
//! tensor. The kernel's plan holds the set as its one region: shared memory and launch are
//! the plan's. Skips visibly without a GPU.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

#[path = "gpu/support.rs"]
mod support;

use support::Device;
use tma::plan::{KernelPlan, ValidKernelPlan};
use tma::runtime::{CompileOptions, Source};
use tma::{Arch, TmaTiles, ValidSpec};

#[derive(TmaTiles)]
struct Attention {
    #[tma(dtype = u16, global = [S = _, D = 64], boxed = [64, 64], swizzle = 128, load)]
    q: [u64; 2],
    #[tma(dtype = u16, global = [S = _, D = 64], boxed = [64, 64], swizzle = 128, load)]
    k: [u64; 2],
    #[tma(dtype = u16, global = [S = _, D = 64], boxed = [64, 64], swizzle = 128, load)]
    v: [u64; 2],
    #[tma(dtype = u16, global = [S = _, D = 64], boxed = [64, 64], swizzle = 128, store)]
    o: [u64; 2],
}

/// The kernel names everything through the set struct `tma_attention` and its parameter
/// macro: the tiles (`S::q`), their offsets, the group expect; the set's place in shared
/// memory is its plan's (`tma_plan_qkv_sum`). Nothing is pasted into it.
const BODY: &str = r#"
extern "C" __global__ void TMA_PLAN_QKV_SUM_LAUNCH_BOUNDS qkv_sum(TMA_ATTENTION_PARAMS) {
  using S = tma_attention;
  using P = tma_plan_qkv_sum;
  extern __shared__ unsigned char raw[];
  __shared__ __align__(8) tma_mbarrier bar;
  unsigned char* smem = P::attention(P::base(raw));
  unsigned char* q = smem + S::OFFSET_q;
  unsigned char* k = smem + S::OFFSET_k;
  unsigned char* v = smem + S::OFFSET_v;
  unsigned char* o = smem + S::OFFSET_o;
  if (threadIdx.x == 0) { tma_mbarrier_init(&bar, 1); tma_fence_mbarrier_init(); }
  __syncthreads();
  const int s0 = blockIdx.x * S::q::BOX_S;
  if (threadIdx.x == 0) {
    tma_expect<S::q, S::k, S::v>(&bar);
    S::q::load(&q_map, &bar, q, {.S = s0, .D = 0});
    S::k::load(&k_map, &bar, k, {.S = s0, .D = 0});
    S::v::load(&v_map, &bar, v, {.S = s0, .D = 0});
  }
  tma_group<S::q, S::k, S::v>::wait(&bar, 0);
  // Element n (row-major) of each tile, wherever its swizzle put it. (Each tile has its own
  // coordinate type: a position is asked of the tile it indexes.)
  for (unsigned n = threadIdx.x; n < S::o::POSITIONS; n += blockDim.x)
    S::o::at(o, S::o::position(n)) = static_cast<unsigned short>(
        S::q::at(q, S::q::position(n)) + S::k::at(k, S::k::position(n)) + S::v::at(v, S::v::position(n)));
  tma_async_proxy_fence();
  __syncthreads();
  if (threadIdx.x == 0) {
    S::o::store(&o_map, o, {.S = s0, .D = 0});
    tma_store_commit_group();
    tma_store_async_wait<0>();
  }
}
"#;

/// The kernel's plan: the derived set (the same members `kernel_source` declares) as its one
/// region, 256 threads.
fn plan() -> ValidKernelPlan {
    let members: Vec<(&str, &ValidSpec)> = ["q", "k", "v", "o"]
        .into_iter()
        .zip(Attention::valid_specs())
        .collect();
    KernelPlan::new("qkv_sum")
        .tile_set("attention", &members)
        .block_threads(256)
        .validate()
        .unwrap()
}

fn source() -> Source {
    Source::kernel(&Attention::kernel_source().plan(&plan()).body(BODY)).unwrap()
}

fn options() -> CompileOptions {
    CompileOptions::new(Arch::Sm90a)
}

/// Without a GPU the kernel still compiles (CI).
#[test]
fn the_derived_kernel_compiles() {
    let test = "the_derived_kernel_compiles";
    let Some(compiled) = support::compile_or_skip(test, &source(), &options()) else {
        return;
    };
    assert!(compiled.ptx.contains(".entry qkv_sum"));
}

#[test]
fn gpu_derived_tiles_encode_and_run() {
    let Some(dev) = Device::open("gpu_derived_tiles_encode_and_run") else {
        return;
    };
    let s = 4096usize;
    let tiles = Attention {
        q: [s as u64, 64],
        k: [s as u64, 64],
        v: [s as u64, 64],
        o: [s as u64, 64],
    };
    let stream = &dev.stream;
    let mut seed = 0x9e3779b97f4a7c15u64 ^ std::process::id() as u64;
    let mut next = || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        (seed >> 40) as u16 & 0x3fff
    };
    let hq: Vec<u16> = (0..s * 64).map(|_| next()).collect();
    let hk: Vec<u16> = (0..s * 64).map(|_| next()).collect();
    let hv: Vec<u16> = (0..s * 64).map(|_| next()).collect();
    let (dq, dk, dv) = (
        stream.clone_htod(&hq).unwrap(),
        stream.clone_htod(&hk).unwrap(),
        stream.clone_htod(&hv).unwrap(),
    );
    let d_o = stream.clone_htod(&vec![0xffffu16; s * 64]).unwrap();
    let maps = tiles.tensor_maps(&[&dq, &dk, &dv, &d_o]).unwrap();
    assert!(
        tiles.tensor_maps(&[&dq, &dk]).is_err(),
        "two buffers for four tiles"
    );
    let module = dev.load(&source(), &options());
    let kernel = module.kernel("qkv_sum").unwrap();
    let cfg = kernel.plan_config(stream, ((s / 64) as u32, 1, 1)).unwrap();
    let mut launch = kernel.launch_builder(&cfg);
    for map in &maps {
        launch.arg(map);
    }
    // SAFETY: qkv_sum takes the four maps of TMA_ATTENTION_PARAMS, in this order.
    unsafe { launch.launch_and_sync() }.unwrap();
    let out = stream.clone_dtoh(&d_o).unwrap();
    let wrong = (0..s * 64)
        .filter(|&i| out[i] != hq[i] + hk[i] + hv[i])
        .count();
    assert_eq!(wrong, 0, "{wrong} of {} elements wrong", s * 64);
}
