//! The register-level pieces of an attention forward on the GPU, on every shape of
//! `testgen::attention_shapes` (N of both products every multiple of 16 from 16 to 256, bf16
//! and f16): TMA loads Q, K and V tiles on one barrier, one warpgroup computes `S = Q K^T`
//! with `tma_wgmma<Q, K>`, then `tma_wgmma_row_max`, `tma_wgmma_row_exp2`, `tma_wgmma_row_sum`,
//! `tma_wgmma_acc_to_a` (P as A fragments), `O = P V` with `tma_wgmma_rs<V>` (A from
//! registers) and `tma_wgmma_row_scale` by `1 / sum`; and, apart from the chain, `X V` with A
//! fragments of small integers uploaded from the host, its k-slices as one run
//! (`tma_wgmma_rs_k<V>`). Every stage is written out per thread
//! (register order) into buffers poisoned before the launch, on fresh random data, and
//! compared with the CPU model (`tma::wgmma::registers`) run on the GPU's previous stage:
//!
//! - S, X V: bit for bit with the CPU product (values `k / 8` and small integers: every
//!   product and sum exact in f32);
//! - row max, row sum, P as A (the packed bits), O scaled: bit for bit;
//! - P (the exponential): within `EX2_MAX_ULPS` of the correctly rounded `2^x` (the device's
//!   `ex2.approx.ftz.f32` approximates it);
//! - O = P V: against an f64 product of the P the A fragments hold with V, within
//!   `(n_kv + 2) 2^-23 sum |p v|` (f32 accumulation in an order the hardware does not
//!   document).
//!
//! Without a GPU the kernels are still rendered and compiled for sm_90a (NVRTC and ptxas), and
//! NVRTC refuses an f16 A fragment given to a bf16 B.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use tma::plan::{KernelPlan, ValidKernelPlan};
use tma::render::KernelSource;
use tma::runtime::{CompileOptions, Compiler, Module, Source, TensorMap};
use tma::spec::WgmmaType;
use tma::wgmma::fragment::{d_position, WARPGROUP_THREADS};
use tma::wgmma::registers::{
    self, a_fragments, a_matrix, accumulator_to_a, exp2_argument, exp2_ftz, quad_sum, row_max,
    row_scale, row_sum, row_sum_partial, value_16, AFragment, RowPair, EX2_MAX_ULPS,
};
use tma::wgmma::{AccumulatorType, Fragment};
use tma::{Arch, DType, ValidSpec};
use tma_test_support::testgen::{attention_shapes, attention_tiles, AttentionShape, XorShift};

const KERNEL: &str = "attn";
const SET: &str = "ops";

/// The kernel: one warpgroup, tile set `ops` (`q`, `k`, `v`); outputs per thread, in register
/// order: S, m (2), P, l (2), P as A (n_kv / 16 x 4 words), O, O scaled, X V, and P's row-sum
/// shares (2) with their quad sums (2).
const BODY: &str = r#"
extern "C" __global__ void TMA_PLAN_ATTN_LAUNCH_BOUNDS attn(TMA_OPS_PARAMS, int q_row, int kv_row, float scale_log2,
    const unsigned* x_in, float* s_out, float* m_out, float* p_out, float* l_out, unsigned* a_out,
    float* o_out, float* on_out, float* xv_out, float* ls_out) {
  using P = tma_plan_attn;
  using S = P::tile_ops;
  using Q = S::q;
  using K = S::k;
  using V = S::v;
  constexpr unsigned NKV = K::WGMMA_N;  // S is 64 x NKV; P V has K = NKV
  constexpr unsigned HD = V::WGMMA_N;   // O is 64 x HD
  constexpr unsigned SLICES = NKV / 16u;
  static_assert(V::K_SLICES == SLICES, "P V: V's k-slices are K's rows");
  static_assert(Q::K_SLICES == K::K_SLICES, "Q K^T: the same head dim");
  extern __shared__ unsigned char raw[];
  __shared__ alignas(8) tma_mbarrier bar;
  unsigned char* smem = P::ops(P::base(raw));
  unsigned char* sq = smem + S::OFFSET_q;
  unsigned char* sk = smem + S::OFFSET_k;
  unsigned char* sv = smem + S::OFFSET_v;
  if (threadIdx.x == 0) {
    tma_mbarrier_init(&bar, 1u);
    tma_fence_mbarrier_init();
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    tma_expect<Q, K, V>(&bar);
    Q::load(&q_map, &bar, sq, {.S = q_row, .D = 0});
    K::load(&k_map, &bar, sk, {.S = kv_row, .D = 0});
    V::load(&v_map, &bar, sv, {.S = kv_row, .D = 0});
  }
  tma_group<Q, K, V>::wait(&bar, 0u);
  const unsigned t = threadIdx.x % 128u;

  // S = Q K^T, both from shared memory.
  float s[NKV / 2];
#pragma unroll
  for (unsigned i = 0; i < NKV / 2u; ++i) {
    s[i] = 0.0f;
    tma_wgmma_fence_operand(s[i]);
  }
  tma_wgmma_fence();
#pragma unroll
  for (unsigned k = 0; k < Q::K_SLICES; ++k) tma_wgmma<Q, K>(s, Q::desc(sq, k), K::desc(sk, k), k > 0u ? 1 : 0);
  tma_wgmma_commit_group();
  tma_wgmma_wait_group<0>();
#pragma unroll
  for (unsigned i = 0; i < NKV / 2u; ++i) {
    tma_wgmma_fence_operand(s[i]);
    s_out[t * (NKV / 2u) + i] = s[i];
  }

  // The softmax numerator and its row sums.
  float m[2] = {__int_as_float(0xff800000), __int_as_float(0xff800000)};
  tma_wgmma_row_max<NKV>(s, m);
  tma_wgmma_row_exp2<NKV>(s, m, scale_log2);
  float l[2] = {0.0f, 0.0f};
  tma_wgmma_row_sum<NKV>(s, l);
#pragma unroll
  for (unsigned i = 0; i < NKV / 2u; ++i) p_out[t * (NKV / 2u) + i] = s[i];
  for (unsigned r = 0; r < 2u; ++r) {
    m_out[t * 2u + r] = m[r];
    l_out[t * 2u + r] = l[r];
  }
  // The same sums as each thread's shares, quad-added once (the attention's epilogue).
  float share[2] = {0.0f, 0.0f};
  tma_wgmma_row_sum_partial<NKV>(s, share);
  for (unsigned r = 0; r < 2u; ++r) {
    ls_out[t * 4u + r] = share[r];
    ls_out[t * 4u + 2u + r] = tma_wgmma_quad_sum(share[r]);
  }

  // P as A fragments of V's type, and O = P V with A from registers.
  tma_wgmma_a_frag<V::WGMMA_TYPE> a[SLICES];
  tma_wgmma_acc_to_a<NKV>(s, a);
#pragma unroll
  for (unsigned k = 0; k < SLICES; ++k)
#pragma unroll
    for (unsigned j = 0; j < 4u; ++j) a_out[(t * SLICES + k) * 4u + j] = a[k].r[j];
  float o[HD / 2];
#pragma unroll
  for (unsigned i = 0; i < HD / 2u; ++i) {
    o[i] = 0.0f;
    tma_wgmma_fence_operand(o[i]);
  }
#pragma unroll
  for (unsigned k = 0; k < SLICES; ++k) tma_wgmma_fence_operand(a[k]);
  tma_wgmma_fence();
#pragma unroll
  for (unsigned k = 0; k < SLICES; ++k) tma_wgmma_rs<V>(o, a[k], V::desc(sv, k), k > 0u ? 1 : 0);
  tma_wgmma_commit_group();
  tma_wgmma_wait_group<0>();
#pragma unroll
  for (unsigned k = 0; k < SLICES; ++k) tma_wgmma_fence_operand(a[k]);
#pragma unroll
  for (unsigned i = 0; i < HD / 2u; ++i) {
    tma_wgmma_fence_operand(o[i]);
    o_out[t * (HD / 2u) + i] = o[i];
  }
  const float inv[2] = {1.0f / l[0], 1.0f / l[1]};
  tma_wgmma_row_scale<HD>(o, inv);
#pragma unroll
  for (unsigned i = 0; i < HD / 2u; ++i) on_out[t * (HD / 2u) + i] = o[i];

  // X V: A fragments from the host (small integers), the register-A wgmma alone, its k-slices
  // as one run (tma_wgmma_rs_k: the form attention's P V takes; O above takes a call a slice).
  tma_wgmma_a_frag<V::WGMMA_TYPE> x[SLICES];
#pragma unroll
  for (unsigned k = 0; k < SLICES; ++k)
#pragma unroll
    for (unsigned j = 0; j < 4u; ++j) x[k].r[j] = x_in[(t * SLICES + k) * 4u + j];
  // The accumulators start with what the host left in xv_out (NaN): the run's first k-slice
  // (scale_d = 0) must not read them.
  float xv[HD / 2];
#pragma unroll
  for (unsigned i = 0; i < HD / 2u; ++i) {
    xv[i] = xv_out[t * (HD / 2u) + i];
    tma_wgmma_fence_operand(xv[i]);
  }
#pragma unroll
  for (unsigned k = 0; k < SLICES; ++k) tma_wgmma_fence_operand(x[k]);
  tma_wgmma_fence();
  tma_wgmma_rs_k<V>(xv, x, sv, 0);
  tma_wgmma_commit_group();
  tma_wgmma_wait_group<0>();
#pragma unroll
  for (unsigned i = 0; i < HD / 2u; ++i) {
    tma_wgmma_fence_operand(xv[i]);
    xv_out[t * (HD / 2u) + i] = xv[i];
  }
}
"#;

fn plan(tiles: &[ValidSpec; 3]) -> ValidKernelPlan {
    let [q, k, v] = tiles;
    KernelPlan::new(KERNEL)
        .tile_set(SET, &[("q", q), ("k", k), ("v", v)])
        .block_threads(WARPGROUP_THREADS)
        .validate()
        .unwrap()
}

fn source(tiles: &[ValidSpec; 3], body: &str) -> Source {
    Source::kernel(&KernelSource::new().plan(&plan(tiles)).body(body)).unwrap()
}

fn kind(shape: AttentionShape) -> WgmmaType {
    WgmmaType::of(shape.dtype).unwrap()
}

/// Every shape's kernel compiles for sm_90a (NVRTC, then ptxas: a CUBIN), with the
/// register-A wgmma of V's N and type, the packing `cvt` and the exponential in its PTX; and
/// the type of an A fragment is checked: an f16 fragment for a bf16 V, or a conversion of an
/// N that is not whole k-slices, does not compile. NVRTC only: runs without a GPU.
#[test]
fn every_shape_compiles_and_a_mismatched_fragment_does_not() {
    let test = "every_shape_compiles_and_a_mismatched_fragment_does_not";
    if tma_test_support::skip::require_nvrtc_or_skip(test).is_none() {
        return;
    }
    let compiler = Compiler::global().unwrap();
    let options = CompileOptions::new(Arch::Sm90a);
    let shapes = attention_shapes();
    assert_eq!(shapes.len(), 32);
    let items: Vec<(Source, CompileOptions)> = shapes
        .iter()
        .map(|&s| (source(&attention_tiles(s).unwrap(), BODY), options.clone()))
        .collect();
    let compiled = compiler.compile_all(&items);
    for (shape, c) in shapes.iter().zip(compiled) {
        let c = c.unwrap_or_else(|e| panic!("{shape:?}: {e}"));
        let t = kind(*shape).ptx_name();
        let rs = format!(
            "wgmma.mma_async.sync.aligned.m64n{}k16.f32.{t}.{t}",
            shape.d
        );
        let ss = format!(
            "wgmma.mma_async.sync.aligned.m64n{}k16.f32.{t}.{t}",
            shape.n_kv
        );
        for want in [
            rs.as_str(),
            ss.as_str(),
            &format!("cvt.rn.{t}x2.f32"),
            "ex2.approx.ftz.f32",
            "shfl.sync.bfly.b32",
        ] {
            assert!(c.ptx.contains(want), "{shape:?}: no `{want}` in the PTX");
        }
        assert!(
            !c.cubin.is_empty(),
            "{shape:?}: no CUBIN (ptxas did not run)"
        );
        // The register-A form (`{d..}, { %r, %r, %r, %r}, desc-b, p, 1, 1, 1`: V is MN-major),
        // one per k-slice of P V and of X V (the loops unrolled).
        let rs_issued = c.ptx.matches("}, { %r").count();
        assert_eq!(rs_issued, 2 * shape.n_kv as usize / 16, "{shape:?}");
        // ptxas says when it must serialize wgmma (a fence missing, registers moved): clean.
        assert!(c.log.trim().is_empty(), "{shape:?}: {}", c.log);
        let r = c.resources(KERNEL).unwrap();
        assert_eq!(r.spill_stores, 0, "{shape:?}: {r:?}");
        println!("{shape:?}: compiles, {} registers", r.registers);
    }
    // A fragment of the other 16-bit type, and N = 24 as A: compile errors.
    let shape = shapes[3];
    assert_eq!(shape.dtype, DType::BF16);
    let tiles = attention_tiles(shape).unwrap();
    for (wrong, says) in [
        (
            BODY.replace(
                "tma_wgmma_a_frag<V::WGMMA_TYPE> x[SLICES];",
                "tma_wgmma_a_frag<TMA_WGMMA_F16> x[SLICES];",
            ),
            "tma_wgmma_rs",
        ),
        (
            BODY.replace(
                "tma_wgmma_acc_to_a<NKV>(s, a);",
                "{ float d24[12] = {}; tma_wgmma_a_frag<V::WGMMA_TYPE> a24[1]; tma_wgmma_acc_to_a<24>(d24, a24); }",
            ),
            "tma_wgmma_acc_to_a",
        ),
    ] {
        assert_ne!(wrong, BODY);
        match compiler.compile_source(&source(&tiles, &wrong), &options) {
            Err(tma::runtime::Error::Compile { log, .. }) => {
                assert!(log.contains(says), "{log}")
            }
            other => panic!("a mismatched fragment compiled: {other:?}"),
        }
    }
}

/// The X V run (`tma_wgmma_rs_k<V>`) issues the same tensor-core instructions as
/// `tma_wgmma_rs<V>` called a k-slice at a time, on the shapes whose runs take one statement, a
/// full one (9 slices) and two (10 and 16): the kernel compiled both ways, its HGMMA lines
/// compared (operands but the uniform registers' names, accumulate flags). X V's accumulators
/// start from the host's poison, so a run whose first slice accumulated would differ. NVRTC and
/// cuobjdump only: runs without a GPU.
#[test]
fn a_register_a_run_issues_the_calls_instructions() {
    let test = "a_register_a_run_issues_the_calls_instructions";
    if tma_test_support::skip::require_nvrtc_or_skip(test).is_none() {
        return;
    }
    let Some(cuobjdump) = tma_test_support::skip::require_tool_or_skip(test, "cuobjdump") else {
        return;
    };
    let compiler = Compiler::global().unwrap();
    let options = CompileOptions::new(Arch::Sm90a);
    let run = "tma_wgmma_rs_k<V>(xv, x, sv, 0);";
    let calls = "#pragma unroll\n  for (unsigned k = 0; k < SLICES; ++k) \
                 tma_wgmma_rs<V>(xv, x[k], V::desc(sv, k), k > 0u ? 1 : 0);";
    assert_eq!(BODY.matches(run).count(), 1, "X V's run moved");
    let hgmma = |body: &str, tiles: &[ValidSpec; 3], name: &str| -> Vec<String> {
        let c = compiler
            .compile_source(&source(tiles, body), &options)
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        let sass = tma_test_support::skip::sass(&cuobjdump, &c.cubin, name);
        tma_test_support::skip::mma_instructions(&sass, "HGMMA")
    };
    let mut checked = 0;
    for shape in attention_shapes() {
        if ![1, 9, 10, 16].contains(&(shape.n_kv / 16)) || shape.dtype != DType::BF16 {
            continue;
        }
        let tiles = attention_tiles(shape).unwrap();
        let name = format!("{}_{}", shape.n_kv, shape.d);
        let as_run = hgmma(BODY, &tiles, &name);
        let as_calls = hgmma(&BODY.replace(run, calls), &tiles, &format!("{name}_calls"));
        assert!(!as_run.is_empty(), "{shape:?}: no HGMMA");
        assert_eq!(as_run, as_calls, "{shape:?}: the run's instructions");
        checked += 1;
    }
    assert_eq!(checked, 4, "the shapes of 1, 9, 10 and 16 k-slices");
    println!("{checked} shapes: the run issues the calls' HGMMA");
}

/// The 16-bit patterns of `v` in `kind`, for a device buffer of `u16`.
fn encode(kind: WgmmaType, v: &[f32]) -> Vec<u16> {
    v.iter()
        .map(|&x| registers::round_16(kind, x).unwrap())
        .collect()
}

/// Ulps between two non-negative floats.
fn ulps(a: f32, b: f32) -> u32 {
    a.to_bits().abs_diff(b.to_bits())
}

/// One launch's inputs: global Q `[128, d]`, K and V `[2 n_kv, d]` (values `k / 8`,
/// `|k| <= 16`), the rows loaded, X (64 x n_kv small integers) for `X V`.
struct Inputs {
    shape: AttentionShape,
    q: Vec<u16>,
    k: Vec<u16>,
    v: Vec<u16>,
    q0: usize,
    kv0: usize,
    x: Vec<u16>,
    scale_log2: f32,
}

impl Inputs {
    fn random(shape: AttentionShape, rng: &mut XorShift) -> Inputs {
        let k16 = kind(shape);
        let (n, d) = (shape.n_kv as usize, shape.d as usize);
        let mut random = |len: usize, f: &dyn Fn(u64) -> f32| -> Vec<u16> {
            let v: Vec<f32> = (0..len).map(|_| f(rng.next_u64())).collect();
            encode(k16, &v)
        };
        let eighths = |r: u64| (r % 33) as f32 / 8.0 - 2.0;
        let (q, k, v) = (
            random(128 * d, &eighths),
            random(2 * n * d, &eighths),
            random(2 * n * d, &eighths),
        );
        let x = random(64 * n, &|r| (r % 7) as f32 - 3.0);
        Inputs {
            shape,
            q,
            k,
            v,
            q0: 64 * rng.below(2) as usize,
            kv0: n * rng.below(2) as usize,
            x,
            scale_log2: (1.0 / (d as f64).sqrt() * std::f64::consts::LOG2_E) as f32,
        }
    }
    fn value(&self, bits: u16) -> f64 {
        f64::from(value_16(kind(self.shape), bits).unwrap())
    }
    /// `S[r][c]`, `(Q K^T)` of the loaded rows, in f64 (exact).
    fn s(&self, r: usize, c: usize) -> f64 {
        let d = self.shape.d as usize;
        (0..d)
            .map(|kk| {
                self.value(self.q[(self.q0 + r) * d + kk])
                    * self.value(self.k[(self.kv0 + c) * d + kk])
            })
            .sum()
    }
    /// `V[kk][c]` of the loaded rows.
    fn v_at(&self, kk: usize, c: usize) -> f64 {
        self.value(self.v[(self.kv0 + kk) * self.shape.d as usize + c])
    }
}

/// What the kernel writes, per thread in register order.
#[derive(Clone)]
struct Outputs {
    s: Vec<Vec<f32>>,
    m: Vec<RowPair>,
    p: Vec<Vec<f32>>,
    l: Vec<RowPair>,
    a: Vec<Vec<AFragment>>,
    o: Vec<Vec<f32>>,
    on: Vec<Vec<f32>>,
    xv: Vec<Vec<f32>>,
    /// P's row-sum shares per thread (`tma_wgmma_row_sum_partial`) and their quad sums.
    shares: Vec<RowPair>,
    quads: Vec<RowPair>,
}

/// Counts and prints the mismatches of one stage.
struct Stage {
    what: &'static str,
    shape: AttentionShape,
    wrong: u64,
    total: u64,
}

impl Stage {
    fn check(&mut self, ok: bool, at: impl FnOnce() -> String) {
        self.total += 1;
        if !ok {
            if self.wrong < 4 {
                println!("  {:?} {}: {}", self.shape, self.what, at());
            }
            self.wrong += 1;
        }
    }
}

/// Every stage of `out` against the CPU: each on the previous stage's output as the GPU gave
/// it (the model of a helper applied to what the helper got).
fn check(inp: &Inputs, out: &Outputs) -> Vec<Stage> {
    let shape = inp.shape;
    let k16 = kind(shape);
    let (n, d) = (shape.n_kv as usize, shape.d as usize);
    let threads = WARPGROUP_THREADS as usize;
    let fs = Fragment::accumulator(n as u32, AccumulatorType::F32).unwrap();
    let fo = Fragment::accumulator(d as u32, AccumulatorType::F32).unwrap();
    let stage = |what| Stage {
        what,
        shape,
        wrong: 0,
        total: 0,
    };
    let mut stages = Vec::new();
    // S = Q K^T: exact.
    let mut st = stage("S = Q K^T");
    for (t, regs) in out.s.iter().enumerate() {
        for (i, &g) in regs.iter().enumerate() {
            let (r, c) = d_position(t as u32, i as u32);
            let want = inp.s(r as usize, c as usize);
            st.check(g == want as f32, || {
                format!("S[{r}][{c}] = {g}, want {want}")
            });
        }
    }
    stages.push(st);
    // Row max of the GPU's S: exact.
    let mut m = vec![[f32::NEG_INFINITY; 2]; threads];
    row_max(&fs, &out.s, &mut m).unwrap();
    let mut st = stage("row max");
    for (t, (gt, wt)) in out.m.iter().zip(&m).enumerate() {
        for (r, (&g, &w)) in gt.iter().zip(wt).enumerate() {
            st.check(g.to_bits() == w.to_bits(), || {
                format!("thread {t} row {r}: {g}, want {w}")
            });
        }
    }
    stages.push(st);
    // P: within EX2_MAX_ULPS of the correctly rounded power.
    let mut st = stage("P = exp2");
    for (t, ((pt, st_), mt)) in out.p.iter().zip(&out.s).zip(&m).enumerate() {
        for (i, (&g, &x)) in pt.iter().zip(st_).enumerate() {
            let arg = exp2_argument(x, mt[registers::element_row(i as u32)], inp.scale_log2);
            let w = exp2_ftz(arg);
            let tiny = g.abs() <= 2.0 * f32::MIN_POSITIVE && w <= 2.0 * f32::MIN_POSITIVE;
            st.check(tiny || ulps(g, w) <= EX2_MAX_ULPS, || {
                format!(
                    "thread {t} element {i}: 2^{arg} = {g}, want {w} ({} ulps)",
                    ulps(g, w)
                )
            });
        }
    }
    stages.push(st);
    // Row sum of the GPU's P: exact.
    let mut l = vec![[0f32; 2]; threads];
    row_sum(&fs, &out.p, &mut l).unwrap();
    let mut st = stage("row sum");
    for (t, (gt, wt)) in out.l.iter().zip(&l).enumerate() {
        for (r, (&g, &w)) in gt.iter().zip(wt).enumerate() {
            st.check(g.to_bits() == w.to_bits(), || {
                format!("thread {t} row {r}: {g}, want {w}")
            });
        }
    }
    stages.push(st);
    // Row-sum shares of the GPU's P, then the quad sums of the GPU's shares: exact.
    let mut shares = vec![[0f32; 2]; threads];
    row_sum_partial(&fs, &out.p, &mut shares).unwrap();
    let quads = quad_sum(&out.shares).unwrap();
    for (what, got, want) in [
        ("row sum shares", &out.shares, &shares),
        ("quad sum", &out.quads, &quads),
    ] {
        let mut st = stage(what);
        for (t, (gt, wt)) in got.iter().zip(want).enumerate() {
            for (r, (&g, &w)) in gt.iter().zip(wt).enumerate() {
                st.check(g.to_bits() == w.to_bits(), || {
                    format!("thread {t} row {r}: {g}, want {w}")
                });
            }
        }
        stages.push(st);
    }
    // P as A fragments: the packed bits exactly.
    let a = accumulator_to_a(&fs, k16, &out.p).unwrap();
    let mut st = stage("P as A");
    for (t, (gt, wt)) in out.a.iter().zip(&a).enumerate() {
        assert_eq!(gt.len(), n / 16);
        for (s, (gs, ws)) in gt.iter().zip(wt).enumerate() {
            for (j, (&g, &w)) in gs.regs.iter().zip(&ws.regs).enumerate() {
                st.check(g == w, || {
                    format!("thread {t} slice {s} reg {j}: {g:#010x}, want {w:#010x}")
                });
            }
        }
    }
    stages.push(st);
    // O = P V: an f64 product of the P the GPU's fragments hold, within f32 accumulation.
    let p16 = a_matrix(&out.a).unwrap();
    let mut st = stage("O = P V");
    for (t, regs) in out.o.iter().enumerate() {
        for (i, &g) in regs.iter().enumerate() {
            let (r, c) = d_position(t as u32, i as u32);
            let (want, mag) = (0..n)
                .map(|kk| inp.value(p16[r as usize * n + kk]) * inp.v_at(kk, c as usize))
                .fold((0f64, 0f64), |(s, m), x| (s + x, m + x.abs()));
            let tol = (n as f64 + 2.0) * 2f64.powi(-23) * mag;
            st.check((f64::from(g) - want).abs() <= tol, || {
                format!("O[{r}][{c}] = {g}, want {want} (tolerance {tol:e})")
            });
        }
    }
    stages.push(st);
    // O scaled by 1 / l: exact, on the GPU's O and l.
    let mut on = out.o.clone();
    let inv: Vec<RowPair> = out.l.iter().map(|l| [1.0 / l[0], 1.0 / l[1]]).collect();
    row_scale(&fo, &mut on, &inv).unwrap();
    let mut st = stage("O / l");
    for (t, (gt, wt)) in out.on.iter().zip(&on).enumerate() {
        for (i, (&g, &w)) in gt.iter().zip(wt).enumerate() {
            st.check(g.to_bits() == w.to_bits(), || {
                format!("thread {t} element {i}: {g}, want {w}")
            });
        }
    }
    stages.push(st);
    // X V, A from the host's fragments: exact.
    let mut st = stage("X V");
    for (t, regs) in out.xv.iter().enumerate() {
        for (i, &g) in regs.iter().enumerate() {
            let (r, c) = d_position(t as u32, i as u32);
            let want: f64 = (0..n)
                .map(|kk| inp.value(inp.x[r as usize * n + kk]) * inp.v_at(kk, c as usize))
                .sum();
            st.check(g == want as f32, || {
                format!("XV[{r}][{c}] = {g}, want {want}")
            });
        }
    }
    stages.push(st);
    stages
}

/// What a correct kernel writes, from the CPU model: the test's checks pass on it.
fn model_outputs(inp: &Inputs) -> Outputs {
    let shape = inp.shape;
    let k16 = kind(shape);
    let (n, d) = (shape.n_kv as usize, shape.d as usize);
    let threads = WARPGROUP_THREADS as usize;
    let fs = Fragment::accumulator(n as u32, AccumulatorType::F32).unwrap();
    let fo = Fragment::accumulator(d as u32, AccumulatorType::F32).unwrap();
    let s_dense: Vec<f32> = (0..64 * n).map(|j| inp.s(j / n, j % n) as f32).collect();
    let s = fs.scatter(&s_dense).unwrap();
    let mut m = vec![[f32::NEG_INFINITY; 2]; threads];
    row_max(&fs, &s, &mut m).unwrap();
    let mut p = s.clone();
    registers::row_exp2(&fs, &mut p, &m, inp.scale_log2).unwrap();
    let mut l = vec![[0f32; 2]; threads];
    row_sum(&fs, &p, &mut l).unwrap();
    let mut shares = vec![[0f32; 2]; threads];
    row_sum_partial(&fs, &p, &mut shares).unwrap();
    let quads = quad_sum(&shares).unwrap();
    let a = accumulator_to_a(&fs, k16, &p).unwrap();
    let product = |a16: &[u16]| -> Vec<Vec<f32>> {
        let dense: Vec<f32> = (0..64 * d)
            .map(|j| {
                let (r, c) = (j / d, j % d);
                (0..n)
                    .map(|kk| inp.value(a16[r * n + kk]) * inp.v_at(kk, c))
                    .sum::<f64>() as f32
            })
            .collect();
        fo.scatter(&dense).unwrap()
    };
    let o = product(&a_matrix(&a).unwrap());
    let mut on = o.clone();
    let inv: Vec<RowPair> = l.iter().map(|l| [1.0 / l[0], 1.0 / l[1]]).collect();
    row_scale(&fo, &mut on, &inv).unwrap();
    let xv = product(&inp.x);
    Outputs {
        s,
        m,
        p,
        l,
        a,
        o,
        on,
        xv,
        shares,
        quads,
    }
}

fn mismatches(stages: &[Stage]) -> Vec<(&'static str, u64)> {
    stages.iter().map(|s| (s.what, s.wrong)).collect()
}

/// The GPU test's checks, on the CPU: they pass on what the model says a correct kernel
/// writes, and each catches its stage broken (the halves of the packed registers swapped, a
/// row max from the other row, one element of S, O or X V off by an ulp, P off by more than
/// EX2_MAX_ULPS, a row's scale missed).
#[test]
fn the_checks_pass_on_the_model_and_catch_each_stage_broken() {
    let mut rng = XorShift::new(0xc0ffee);
    for shape in attention_shapes().into_iter().step_by(7) {
        let inp = Inputs::random(shape, &mut rng);
        let good = model_outputs(&inp);
        let stages = check(&inp, &good);
        assert_eq!(stages.len(), 10);
        assert!(
            stages.iter().all(|s| s.wrong == 0 && s.total > 0),
            "{:?}",
            mismatches(&stages)
        );
        type Break = (&'static str, fn(&mut Outputs));
        let breaks: [Break; 10] = [
            ("S = Q K^T", |o| {
                o.s[7][3] = f32::from_bits(o.s[7][3].to_bits() + 1)
            }),
            ("row max", |o| o.m[9].swap(0, 1)),
            ("P = exp2", |o| o.p[4][1] *= 1.0 + 1e-5),
            ("row sum", |o| o.l[0][1] = o.l[0][1].next_up()),
            ("row sum shares", |o| o.shares[3].swap(0, 1)),
            ("quad sum", |o| o.quads[66][0] = o.shares[66][0]),
            ("P as A", |o| {
                o.a[5][0].regs[2] = o.a[5][0].regs[2].rotate_left(16)
            }),
            ("O = P V", |o| o.o[100][1] += 0.25),
            ("O / l", |o| o.on[31][2] = o.o[31][2]),
            ("X V", |o| {
                o.xv[127][0] = f32::from_bits(o.xv[127][0].to_bits() ^ 1)
            }),
        ];
        for (what, f) in breaks {
            let mut bad = good.clone();
            f(&mut bad);
            let caught: Vec<_> = mismatches(&check(&inp, &bad))
                .into_iter()
                .filter(|(_, n)| *n > 0)
                .collect();
            assert!(
                caught.iter().any(|(w, _)| *w == what),
                "{shape:?}: breaking {what} went unnoticed ({caught:?})"
            );
        }
    }
}

#[test]
fn gpu_attention_pieces_match_the_cpu_model() {
    let test = "gpu_attention_pieces_match_the_cpu_model";
    let Some(info) = tma_test_support::skip::require_gpu_or_skip(test) else {
        return;
    };
    println!("device: {}", info.name);
    let ctx = cudarc::driver::CudaContext::new(0).unwrap();
    let stream = ctx.default_stream();
    let seed = tma_test_support::testgen::gpu_seed();
    println!("seed {seed} (set TMA_GPU_SEED to replay)");
    let mut rng = XorShift::new(seed);
    let options = CompileOptions::new(Arch::Sm90a);
    let threads = WARPGROUP_THREADS as usize;
    let mut totals = std::collections::BTreeMap::<&str, (u64, u64)>::new();
    for shape in attention_shapes() {
        let (n, d) = (shape.n_kv as usize, shape.d as usize);
        let slices = n / 16;
        let tiles = attention_tiles(shape).unwrap();
        let inp = Inputs::random(shape, &mut rng);
        let x_words: Vec<u32> = a_fragments(&inp.x, n)
            .unwrap()
            .iter()
            .flatten()
            .flat_map(|f| f.regs)
            .collect();
        let upload = |bits: &[u16], rows: usize, spec: &ValidSpec| {
            let bound = spec.bind(&[rows as u64, d as u64], None).unwrap();
            let buf = stream.clone_htod(bits).unwrap();
            let map = TensorMap::new_raw_bits(&bound, &buf).unwrap();
            (map, buf)
        };
        let (q_map, _qb) = upload(&inp.q, 128, &tiles[0]);
        let (k_map, _kb) = upload(&inp.k, 2 * n, &tiles[1]);
        let (v_map, _vb) = upload(&inp.v, 2 * n, &tiles[2]);
        let x_dev = stream.clone_htod(&x_words).unwrap();
        // Every output poisoned: NaN, and all-ones words for the fragments.
        let poison = |len: usize| stream.clone_htod(&vec![f32::NAN; len]).unwrap();
        let (mut s_d, mut m_d, mut p_d, mut l_d) = (
            poison(threads * n / 2),
            poison(threads * 2),
            poison(threads * n / 2),
            poison(threads * 2),
        );
        let mut a_d = stream
            .clone_htod(&vec![u32::MAX; threads * slices * 4])
            .unwrap();
        let (mut o_d, mut on_d, mut xv_d, mut ls_d) = (
            poison(threads * d / 2),
            poison(threads * d / 2),
            poison(threads * d / 2),
            poison(threads * 4),
        );
        let module = Module::compile_and_load(
            &ctx,
            Compiler::global().unwrap(),
            &source(&tiles, BODY),
            &options,
        )
        .unwrap_or_else(|e| panic!("{shape:?}: {e}"));
        let kernel = module.kernel(KERNEL).unwrap();
        let cfg = kernel.plan_config(&stream, (1, 1, 1)).unwrap();
        let (q_row, kv_row) = (inp.q0 as i32, inp.kv0 as i32);
        {
            let mut launch = kernel.launch_builder(&cfg);
            launch.arg(&q_map);
            launch.arg(&k_map);
            launch.arg(&v_map);
            launch.arg(&q_row);
            launch.arg(&kv_row);
            launch.arg(&inp.scale_log2);
            launch.arg(&x_dev);
            launch.arg(&mut s_d);
            launch.arg(&mut m_d);
            launch.arg(&mut p_d);
            launch.arg(&mut l_d);
            launch.arg(&mut a_d);
            launch.arg(&mut o_d);
            launch.arg(&mut on_d);
            launch.arg(&mut xv_d);
            launch.arg(&mut ls_d);
            // SAFETY: attn(three CUtensorMap, int, int, float, const unsigned* of 128 x
            // n_kv / 16 x 4 words, then float / unsigned outputs of the sizes allocated
            // above), one block of the plan's launch (one warpgroup, the set's shared memory).
            unsafe { launch.launch_and_sync() }.unwrap_or_else(|e| panic!("{shape:?}: {e}"));
        }
        let per_thread = |flat: Vec<f32>, per: usize| -> Vec<Vec<f32>> {
            flat.chunks(per).map(<[f32]>::to_vec).collect()
        };
        let pairs =
            |flat: Vec<f32>| -> Vec<RowPair> { flat.chunks(2).map(|c| [c[0], c[1]]).collect() };
        let ls = stream.clone_dtoh(&ls_d).unwrap();
        let out = Outputs {
            s: per_thread(stream.clone_dtoh(&s_d).unwrap(), n / 2),
            m: pairs(stream.clone_dtoh(&m_d).unwrap()),
            p: per_thread(stream.clone_dtoh(&p_d).unwrap(), n / 2),
            l: pairs(stream.clone_dtoh(&l_d).unwrap()),
            a: stream
                .clone_dtoh(&a_d)
                .unwrap()
                .chunks(slices * 4)
                .map(|t| {
                    t.chunks(4)
                        .map(|r| AFragment {
                            regs: [r[0], r[1], r[2], r[3]],
                        })
                        .collect()
                })
                .collect(),
            o: per_thread(stream.clone_dtoh(&o_d).unwrap(), d / 2),
            on: per_thread(stream.clone_dtoh(&on_d).unwrap(), d / 2),
            xv: per_thread(stream.clone_dtoh(&xv_d).unwrap(), d / 2),
            shares: ls.chunks(4).map(|c| [c[0], c[1]]).collect(),
            quads: ls.chunks(4).map(|c| [c[2], c[3]]).collect(),
        };
        let stages = check(&inp, &out);
        let line: Vec<String> = stages
            .iter()
            .map(|s| format!("{} {}/{}", s.what, s.wrong, s.total))
            .collect();
        println!("{shape:?}: mismatches {}", line.join(", "));
        for s in stages {
            let e = totals.entry(s.what).or_default();
            e.0 += s.wrong;
            e.1 += s.total;
        }
    }
    let mut bad = 0;
    for (what, (wrong, total)) in &totals {
        println!("{what}: {wrong} mismatches of {total}");
        bad += wrong;
    }
    assert_eq!(totals.len(), 10);
    assert_eq!(bad, 0);
}

/// `tma_wgmma_ex2_poly<3 / 4>` on every input of a list and `tma_wgmma_row_exp2_poly<64, 3,
/// 3>` on one warpgroup's fragment: plan `ex2p`, one warpgroup a block.
const POLY_KERNEL: &str = "ex2p";
const POLY_BODY: &str = r#"
extern "C" __global__ void TMA_PLAN_EX2P_LAUNCH_BOUNDS ex2p(const float* x, float* y3, float* y4, unsigned n,
    const float* frag, const float* mrow, float scale_log2, float* rows) {
  for (unsigned i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
    y3[i] = tma_wgmma_ex2_poly<3>(x[i]);
    y4[i] = tma_wgmma_ex2_poly<4>(x[i]);
  }
  if (blockIdx.x == 0) {
    const unsigned t = threadIdx.x;
    float d[32];
    const float m[2] = {mrow[2u * t], mrow[2u * t + 1u]};
#pragma unroll
    for (unsigned i = 0; i < 32u; ++i) d[i] = frag[t * 32u + i];
    tma_wgmma_row_exp2_poly<64, 3, 3>(d, m, scale_log2);
#pragma unroll
    for (unsigned i = 0; i < 32u; ++i) rows[t * 32u + i] = d[i];
  }
}
"#;

fn poly_source() -> Source {
    let plan = KernelPlan::new(POLY_KERNEL)
        .block_threads(WARPGROUP_THREADS)
        .validate()
        .unwrap();
    Source::kernel(&KernelSource::new().plan(&plan).body(POLY_BODY)).unwrap()
}

/// Inputs for the polynomial: every edge the model names (infinities, NaN, the clamps, the
/// flush boundary, subnormals, integers), uniform arguments over the whole range and the
/// softmax's (-30, 0], and random bit patterns (any float at all).
fn poly_inputs(rng: &mut XorShift) -> Vec<f32> {
    let mut v = vec![
        0.0,
        -0.0,
        1.0,
        -1.0,
        3.0,
        -126.0,
        -126.5,
        -127.0,
        -127.5,
        127.0,
        127.999,
        128.0,
        200.0,
        -1e30,
        1e30,
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::NAN,
        f32::from_bits(1),
        -f32::from_bits(1),
        -f32::from_bits(0x7f_ffff),
        f32::MIN_POSITIVE,
    ];
    for _ in 0..(1 << 18) {
        let u = (rng.next_u64() >> 40) as f32 / (1u64 << 24) as f32;
        v.push(-140.0 + 280.0 * u);
        v.push(-30.0 * u);
        v.push(f32::from_bits(rng.next_u64() as u32));
    }
    v
}

/// The polynomial's bits as tma's model gives them (NaN for NaN: the payload is the device's).
fn poly_mismatches(x: &[f32], got: &[f32], poly: registers::Ex2Poly) -> (usize, Vec<String>) {
    let mut wrong = 0;
    let mut first = Vec::new();
    for (&xi, &g) in x.iter().zip(got) {
        let want = registers::exp2_poly(xi, poly);
        let same = (want.is_nan() && g.is_nan()) || want.to_bits() == g.to_bits();
        if !same {
            wrong += 1;
            if first.len() < 8 {
                first.push(format!(
                    "{poly:?} 2^{xi:e} ({:#x}): device {g:e}, model {want:e}",
                    xi.to_bits()
                ));
            }
        }
    }
    (wrong, first)
}

/// The polynomial compiles for sm_90a with no MUFU in it: NVRTC only, runs without a GPU.
#[test]
fn ex2_poly_compiles_without_mufu() {
    let test = "ex2_poly_compiles_without_mufu";
    if tma_test_support::skip::require_nvrtc_or_skip(test).is_none() {
        return;
    }
    let c = Compiler::global()
        .unwrap()
        .compile_source(&poly_source(), &CompileOptions::new(Arch::Sm90a))
        .unwrap();
    assert!(!c.cubin.is_empty());
    for want in [
        "add.rm.f32",
        "max.NaN.f32",
        "min.NaN.f32",
        "ex2.approx.ftz.f32",
    ] {
        assert!(c.ptx.contains(want), "no `{want}` in the PTX");
    }
    // The row helper leaves 5 of every 8 elements to MUFU: 20 of its 32.
    assert_eq!(c.ptx.matches("ex2.approx.ftz.f32").count(), 20);
}

#[test]
fn gpu_ex2_poly_matches_the_model_bit_for_bit() {
    let test = "gpu_ex2_poly_matches_the_model_bit_for_bit";
    let Some(info) = tma_test_support::skip::require_gpu_or_skip(test) else {
        return;
    };
    println!("device: {}", info.name);
    let ctx = cudarc::driver::CudaContext::new(0).unwrap();
    let stream = ctx.default_stream();
    let seed = tma_test_support::testgen::gpu_seed();
    println!("seed {seed} (set TMA_GPU_SEED to replay)");
    let mut rng = XorShift::new(seed);
    let x = poly_inputs(&mut rng);
    let threads = WARPGROUP_THREADS as usize;
    // One warpgroup's fragment: scores around their row's max, a max of -inf in some rows.
    let frag: Vec<f32> = (0..threads * 32)
        .map(|_| ((rng.next_u64() >> 40) as f32 / (1u64 << 24) as f32) * 24.0 - 20.0)
        .collect();
    let mrow: Vec<f32> = (0..threads * 2)
        .map(|i| if i % 37 == 5 { f32::NEG_INFINITY } else { 4.0 })
        .collect();
    let scale_log2 = 0.125 * std::f32::consts::LOG2_E;
    let module = Module::compile_and_load(
        &ctx,
        Compiler::global().unwrap(),
        &poly_source(),
        &CompileOptions::new(Arch::Sm90a),
    )
    .unwrap();
    let kernel = module.kernel(POLY_KERNEL).unwrap();
    let x_d = stream.clone_htod(&x).unwrap();
    let frag_d = stream.clone_htod(&frag).unwrap();
    let mrow_d = stream.clone_htod(&mrow).unwrap();
    let poison = |len: usize| stream.clone_htod(&vec![f32::NAN; len]).unwrap();
    let (mut y3, mut y4, mut rows) = (poison(x.len()), poison(x.len()), poison(threads * 32));
    let n = x.len() as u32;
    let cfg = kernel.plan_config(&stream, (264, 1, 1)).unwrap();
    // SAFETY: ex2p(const float* of n, float* of n, float* of n, unsigned n, const float* of
    // 128 x 32, const float* of 128 x 2, float, float* of 128 x 32), the plan's launch.
    unsafe {
        kernel
            .launch_builder(&cfg)
            .arg(&x_d)
            .arg(&mut y3)
            .arg(&mut y4)
            .arg(&n)
            .arg(&frag_d)
            .arg(&mrow_d)
            .arg(&scale_log2)
            .arg(&mut rows)
            .launch_and_sync()
    }
    .unwrap();
    let mut bad = 0;
    for (poly, got) in [
        (registers::Ex2Poly::Cubic, stream.clone_dtoh(&y3).unwrap()),
        (registers::Ex2Poly::Quartic, stream.clone_dtoh(&y4).unwrap()),
    ] {
        let (wrong, first) = poly_mismatches(&x, &got, poly);
        println!(
            "{poly:?}: {wrong} of {} differ from the model{}",
            x.len(),
            first.join("\n  ")
        );
        bad += wrong;
    }
    // The row helper: elements i % 8 < 3 bit for bit, the rest within EX2_MAX_ULPS of 2^x.
    let got = stream.clone_dtoh(&rows).unwrap();
    let per_thread: Vec<Vec<f32>> = frag.chunks(32).map(<[f32]>::to_vec).collect();
    let m: Vec<RowPair> = mrow.chunks(2).map(|c| [c[0], c[1]]).collect();
    let f = Fragment::accumulator(64, AccumulatorType::F32).unwrap();
    let mut model = per_thread.clone();
    registers::row_exp2_poly(&f, &mut model, &m, scale_log2, 3, registers::Ex2Poly::Cubic).unwrap();
    let (mut exact, mut near) = (0, 0);
    for (t, want) in model.iter().enumerate() {
        for (i, w) in want.iter().enumerate() {
            let g = got[t * 32 + i];
            let ok = if i % 8 < 3 {
                exact += 1;
                g.to_bits() == w.to_bits()
            } else {
                near += 1;
                ulps(g, *w) <= EX2_MAX_ULPS
            };
            if !ok {
                bad += 1;
                println!("row helper: thread {t} element {i}: device {g:e}, model {w:e}");
            }
        }
    }
    println!("row helper: {exact} polynomial elements exact, {near} MUFU ones within {EX2_MAX_ULPS} ulps");
    assert_eq!(bad, 0);
}
