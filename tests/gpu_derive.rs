//! `#[derive(TmaTiles)]` end to end on a GPU: four annotated fields give the kernel's
//! parameter list and helpers, `tensor_maps` encodes the four maps over device buffers in
//! that order, and a kernel that loads q, k and v and stores q + k + v (bf16 bits added as
//! small integers, exact) through `o` produces the right tensor. Skips visibly without a GPU.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use tma::render;
use tma::runtime::LaunchConfig;
use tma::runtime::{CompileOptions, Compiler, Module};
use tma::{Arch, TmaTiles};

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

const BODY: &str = r#"
extern "C" __global__ void qkv_sum(PARAMS) {
  extern __shared__ unsigned char raw[];
  __shared__ __align__(8) tma_mbarrier bar;
  const unsigned base = tma_smem_addr(raw);
  unsigned char* smem = raw + (((base + 1023u) & ~1023u) - base);
  unsigned short* q = reinterpret_cast<unsigned short*>(smem + Q_OFF);
  unsigned short* k = reinterpret_cast<unsigned short*>(smem + K_OFF);
  unsigned short* v = reinterpret_cast<unsigned short*>(smem + V_OFF);
  unsigned short* o = reinterpret_cast<unsigned short*>(smem + O_OFF);
  if (threadIdx.x == 0) { tma_mbarrier_init(&bar, 1); tma_fence_mbarrier_init(); }
  __syncthreads();
  const int s0 = blockIdx.x * 64;
  if (threadIdx.x == 0) {
    tma_mbarrier_arrive_expect_tx(&bar, tma_attention_q::TX_BYTES + tma_attention_k::TX_BYTES + tma_attention_v::TX_BYTES);
    tma_attention_q::load(&q_map, &bar, q, s0, 0);
    tma_attention_k::load(&k_map, &bar, k, s0, 0);
    tma_attention_v::load(&v_map, &bar, v, s0, 0);
  }
  tma_attention_q::wait(&bar, 0);
  // Same swizzle and box for all four tiles: element i of each buffer is the same (s, d).
  for (int i = threadIdx.x; i < 64 * 64; i += blockDim.x) o[i] = q[i] + k[i] + v[i];
  tma_async_proxy_fence();
  __syncthreads();
  if (threadIdx.x == 0) {
    tma_attention_o::store(&o_map, o, s0, 0);
    tma_store_commit_group();
    tma_store_async_wait<0>();
  }
}
"#;

#[test]
fn gpu_derived_tiles_encode_and_run() {
    let Some(_) = tma::runtime::testing::require_gpu_or_skip("gpu_derived_tiles_encode_and_run")
    else {
        return;
    };
    let s = 4096usize;
    let tiles = Attention {
        q: [s as u64, 64],
        k: [s as u64, 64],
        v: [s as u64, 64],
        o: [s as u64, 64],
    };
    let ctx = cudarc::driver::CudaContext::new(0).unwrap();
    let stream = ctx.default_stream();
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
    let body = BODY
        .replace("PARAMS", Attention::cuda_params())
        .replace("Q_OFF", &Attention::TILES[0].smem_offset.to_string())
        .replace("K_OFF", &Attention::TILES[1].smem_offset.to_string())
        .replace("V_OFF", &Attention::TILES[2].smem_offset.to_string())
        .replace("O_OFF", &Attention::TILES[3].smem_offset.to_string());
    let source = format!(
        "{}\n{}\n{body}",
        render::prelude(),
        Attention::cuda_helpers()
    );
    let module = Module::compile_and_load(
        &ctx,
        Compiler::global().unwrap(),
        &source.into(),
        &CompileOptions::new(Arch::Sm90a),
    )
    .unwrap();
    let kernel = module.kernel("qkv_sum").unwrap();
    let cfg = LaunchConfig::new(&stream, ((s / 64) as u32, 1, 1), (256, 1, 1))
        .dynamic_smem((Attention::SMEM_BYTES + Attention::SMEM_ALIGN) as u32);
    let mut launch = kernel.launch_builder(&cfg);
    for map in &maps {
        launch.arg(map);
    }
    // SAFETY: qkv_sum takes the four maps of CUDA_PARAMS, in this order.
    unsafe { launch.launch_and_sync() }.unwrap();
    let out = stream.clone_dtoh(&d_o).unwrap();
    let wrong = (0..s * 64)
        .filter(|&i| out[i] != hq[i] + hk[i] + hv[i])
        .count();
    assert_eq!(wrong, 0, "{wrong} of {} elements wrong", s * 64);
}
