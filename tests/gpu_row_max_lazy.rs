//! `tma_wgmma_row_max_lazy<N>` (FlashAttention-4's lazy rescale) on the GPU against its CPU
//! model, `tma::wgmma::registers::row_max_lazy`: one warpgroup a block, each block a case of
//! its own (N of 8, 64, 144 and 256; the scale and headroom its own), on fresh random data.
//! Each case's starting maxima are built row by row so that some rows move past the headroom,
//! some grow by less than it (or shrink, or stay equal), some sit within a few ulps of it, some
//! start at -inf (over a finite row, or over a row all -inf), and one warp (sometimes all four)
//! has no moved row. Every thread writes its `m`, `corr` and the returned flag into buffers
//! poisoned before the launch; the host compares:
//!
//! - `m` and the flag: bit for bit (the flag is the model's "a row of the warp moved" in every
//!   thread of the warp);
//! - `corr`: exactly 1.0 where the row did not move, exactly 0 where it moved from -inf, else
//!   within `EX2_MAX_ULPS` of the model's `2^(old - new)` (the device's `ex2.approx.ftz.f32`).
//!
//! Without a GPU the kernel is still compiled for sm_90a (NVRTC and ptxas), and the checks are
//! run on the CPU against the model's own outputs, whole and broken.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use tma::plan::KernelPlan;
use tma::render::KernelSource;
use tma::runtime::{CompileOptions, Compiler, Module, Source};
use tma::wgmma::fragment::WARPGROUP_THREADS;
use tma::wgmma::registers::{row_max_lazy, thread_rows, RowPair, EX2_MAX_ULPS};
use tma::wgmma::{AccumulatorType, Fragment};
use tma::Arch;
use tma_test_support::testgen::XorShift;

const KERNEL: &str = "lazy";
const THREADS: usize = WARPGROUP_THREADS as usize;
/// The accumulator widths launched: the smallest and largest N, example 06's 64, and 144
/// (not a power of two).
const NS: [usize; 4] = [8, 64, 144, 256];
/// Cases (blocks) a launch.
const CASES: usize = 64;

/// Block `b` is a case: its fragment at `frag + b * 128 * N / 2` (per thread, register order),
/// its starting maxima, scale and headroom; it writes `m`, `corr` (2 per thread) and the flag
/// (1 word per thread).
const BODY: &str = r#"
template <unsigned N>
__device__ __forceinline__ void lazy_case(const float* frag, const float* m_in, const float* scale_log2,
    const float* headroom_log2, float* m_out, float* corr_out, unsigned* moved_out) {
  const unsigned b = blockIdx.x, t = threadIdx.x;
  const float* own = frag + (b * 128u + t) * (N / 2u);
  float d[N / 2];
#pragma unroll
  for (unsigned i = 0; i < N / 2u; ++i) d[i] = own[i];
  const unsigned at = (b * 128u + t) * 2u;
  float m[2] = {m_in[at], m_in[at + 1u]};
  float corr[2];
  const bool moved = tma_wgmma_row_max_lazy<N>(d, m, scale_log2[b], headroom_log2[b], corr);
  for (unsigned r = 0; r < 2u; ++r) {
    m_out[at + r] = m[r];
    corr_out[at + r] = corr[r];
  }
  moved_out[b * 128u + t] = moved ? 1u : 0u;
}

extern "C" __global__ void TMA_PLAN_LAZY_LAUNCH_BOUNDS lazy(unsigned n, const float* frag, const float* m_in,
    const float* scale_log2, const float* headroom_log2, float* m_out, float* corr_out, unsigned* moved_out) {
  if (n == 8u) lazy_case<8>(frag, m_in, scale_log2, headroom_log2, m_out, corr_out, moved_out);
  else if (n == 64u) lazy_case<64>(frag, m_in, scale_log2, headroom_log2, m_out, corr_out, moved_out);
  else if (n == 144u) lazy_case<144>(frag, m_in, scale_log2, headroom_log2, m_out, corr_out, moved_out);
  else if (n == 256u) lazy_case<256>(frag, m_in, scale_log2, headroom_log2, m_out, corr_out, moved_out);
}
"#;

fn source() -> Source {
    let plan = KernelPlan::new(KERNEL)
        .block_threads(WARPGROUP_THREADS)
        .validate()
        .unwrap();
    Source::kernel(&KernelSource::new().plan(&plan).body(BODY)).unwrap()
}

/// What a row's starting max is, against the row's own max.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Start {
    /// Far enough below that the scaled growth passes the headroom (by 0.05 to 24).
    Moves,
    /// -inf over a row with finite elements: moves, corr 0.
    FromNegInf,
    /// Below by up to 0.9 of the headroom (scaled): stays, corr 1.
    Below,
    /// The row's max itself.
    Equal,
    /// Above the row's max: stays.
    Shrinks,
    /// `max - headroom / scale`, a few ulps either way: the compare's edge, as the model says.
    NearThreshold,
    /// -inf over a row all -inf: stays -inf, corr 1.
    MaskedStays,
    /// A finite max over a row all -inf: stays.
    MaskedFinite,
}

const QUIET: [Start; 5] = [
    Start::Below,
    Start::Equal,
    Start::Shrinks,
    Start::MaskedStays,
    Start::MaskedFinite,
];
const ANY: [Start; 8] = [
    Start::Moves,
    Start::FromNegInf,
    Start::Below,
    Start::Equal,
    Start::Shrinks,
    Start::NearThreshold,
    Start::MaskedStays,
    Start::MaskedFinite,
];

/// One block's inputs.
struct Case {
    n: usize,
    scale_log2: f32,
    headroom_log2: f32,
    /// Per row, how its start was made.
    rows: Vec<Start>,
    /// The warps given no moved row.
    quiet: [bool; 4],
    /// Per thread, register order.
    regs: Vec<Vec<f32>>,
    /// Per thread, its two rows' starting maxima.
    start: Vec<RowPair>,
}

/// Uniform in `[0, 1)`, 24 bits.
fn unit(rng: &mut XorShift) -> f32 {
    (rng.next_u64() >> 40) as f32 / (1u64 << 24) as f32
}

/// `x` moved `k` ulps up (`k > 0`) or down, `x` finite.
fn ulps_away(x: f32, k: i32) -> f32 {
    let mut y = x;
    for _ in 0..k.unsigned_abs() {
        let up = k > 0;
        y = if y == 0.0 {
            f32::from_bits(1) * if up { 1.0 } else { -1.0 }
        } else if (y > 0.0) == up {
            f32::from_bits(y.to_bits() + 1)
        } else {
            f32::from_bits(y.to_bits() - 1)
        };
    }
    y
}

impl Case {
    fn random(n: usize, rng: &mut XorShift) -> Case {
        let scale_log2 = match rng.below(4) {
            0 => 0.125 * std::f32::consts::LOG2_E,
            1 => (1.0 / 128f64.sqrt() * std::f64::consts::LOG2_E) as f32,
            2 => 0.25,
            _ => 0.05 + 0.45 * unit(rng),
        };
        let headroom_log2 = match rng.below(4) {
            0 => 8.0,
            1 => 0.0,
            2 => 2.0,
            _ => 12.0 * unit(rng),
        };
        // One quiet warp; one case in 8 all quiet.
        let mut quiet = [false; 4];
        if rng.chance(1, 8) {
            quiet = [true; 4];
        } else {
            quiet[rng.below(4) as usize] = true;
        }
        let mut rows: Vec<Start> = (0..64)
            .map(|r| {
                let from: &[Start] = if quiet[r / 16] { &QUIET } else { &ANY };
                *rng.pick(from).unwrap()
            })
            .collect();
        for (w, &q) in quiet.iter().enumerate() {
            if !q {
                rows[16 * w + rng.below(16) as usize] = Start::Moves;
            }
        }
        let mut dense = vec![0f32; 64 * n];
        let mut start_rows = vec![0f32; 64];
        for (r, kind) in rows.iter_mut().enumerate() {
            let row = &mut dense[r * n..(r + 1) * n];
            for x in row.iter_mut() {
                *x = 32.0 * unit(rng) - 16.0;
            }
            match kind {
                Start::MaskedStays | Start::MaskedFinite => row.fill(f32::NEG_INFINITY),
                // A causal-style mask on some rows: a suffix of -inf, one element left at least.
                _ if rng.chance(1, 4) => {
                    row[rng.range(1, n as u64 - 1) as usize..].fill(f32::NEG_INFINITY)
                }
                _ => {}
            }
            let max = row.iter().copied().fold(f32::NEG_INFINITY, f32::max);
            // Below needs room under the headroom.
            if *kind == Start::Below && headroom_log2 < 0.1 {
                *kind = Start::Shrinks;
            }
            start_rows[r] = match kind {
                Start::Moves => max - (headroom_log2 + 0.05 + 24.0 * unit(rng)) / scale_log2,
                Start::FromNegInf | Start::MaskedStays => f32::NEG_INFINITY,
                Start::Below => max - 0.9 * unit(rng) * headroom_log2 / scale_log2,
                Start::Equal => max,
                Start::Shrinks => max + 0.01 + 8.0 * unit(rng),
                Start::NearThreshold => {
                    ulps_away(max - headroom_log2 / scale_log2, rng.range(0, 6) as i32 - 3)
                }
                Start::MaskedFinite => 32.0 * unit(rng) - 16.0,
            };
        }
        let f = Fragment::accumulator(n as u32, AccumulatorType::F32).unwrap();
        Case {
            n,
            scale_log2,
            headroom_log2,
            rows,
            quiet,
            regs: f.scatter(&dense).unwrap(),
            start: (0..WARPGROUP_THREADS)
                .map(|t| thread_rows(t).map(|r| start_rows[r as usize]))
                .collect(),
        }
    }
}

/// What a block writes: per thread, `m`, `corr` and the flag word.
#[derive(Clone, Debug)]
struct Got {
    m: Vec<RowPair>,
    corr: Vec<RowPair>,
    moved: Vec<u32>,
}

/// What a correct kernel writes, from the model.
fn model(case: &Case) -> Got {
    let f = Fragment::accumulator(case.n as u32, AccumulatorType::F32).unwrap();
    let mut m = case.start.clone();
    let lazy = row_max_lazy(&f, &case.regs, &mut m, case.scale_log2, case.headroom_log2).unwrap();
    Got {
        m,
        corr: lazy.corr,
        moved: (0..THREADS)
            .map(|t| u32::from(lazy.warp_moved[t / 32]))
            .collect(),
    }
}

/// Mismatches of one kind over many cases (the first few printed).
#[derive(Default)]
struct Tally {
    wrong: u64,
    total: u64,
}

impl Tally {
    fn check(&mut self, ok: bool, at: impl FnOnce() -> String) {
        self.total += 1;
        if !ok {
            if self.wrong < 4 {
                println!("  {}", at());
            }
            self.wrong += 1;
        }
    }
}

/// Rows by outcome, over the cases checked: that the data covers what it must.
#[derive(Default, Debug)]
struct Seen {
    moved: u64,
    kept: u64,
    from_neg_inf: u64,
    kept_neg_inf: u64,
    quiet_warps: u64,
    moved_warps: u64,
    near_moved: u64,
    near_kept: u64,
}

/// `got` against the model: `m` and the flag bit for bit, `corr` exactly 1 where the row did
/// not move, exactly 0 from -inf, else within `EX2_MAX_ULPS`. Keys: "m", "flag", "corr".
fn check(
    case: &Case,
    got: &Got,
    tallies: &mut std::collections::BTreeMap<&'static str, Tally>,
    seen: &mut Seen,
) {
    let want = model(case);
    let label = |t: usize, r: usize| {
        format!(
            "N {} scale {} headroom {} thread {t} row {} ({:?})",
            case.n,
            case.scale_log2,
            case.headroom_log2,
            thread_rows(t as u32)[r],
            case.rows[thread_rows(t as u32)[r] as usize]
        )
    };
    for t in 0..THREADS {
        for r in 0..2 {
            let (g, w) = (got.m[t][r], want.m[t][r]);
            tallies
                .entry("m")
                .or_default()
                .check(g.to_bits() == w.to_bits(), || {
                    format!("{}: m {g:e}, want {w:e}", label(t, r))
                });
            let moved = w.to_bits() != case.start[t][r].to_bits();
            let (g, w) = (got.corr[t][r], want.corr[t][r]);
            let ok = if !moved {
                g.to_bits() == 1f32.to_bits()
            } else if w == 0.0 {
                g.to_bits() == 0
            } else {
                g.is_finite() && g.to_bits().abs_diff(w.to_bits()) <= EX2_MAX_ULPS
            };
            tallies.entry("corr").or_default().check(ok, || {
                format!("{}: corr {g:e}, want {w:e} (moved: {moved})", label(t, r))
            });
            // Each row once: the quad's first thread.
            if t % 4 == 0 {
                let kind = case.rows[thread_rows(t as u32)[r] as usize];
                match (moved, case.start[t][r] == f32::NEG_INFINITY) {
                    (true, true) => seen.from_neg_inf += 1,
                    (true, false) => seen.moved += 1,
                    (false, true) => seen.kept_neg_inf += 1,
                    (false, false) => seen.kept += 1,
                }
                if kind == Start::NearThreshold {
                    if moved {
                        seen.near_moved += 1;
                    } else {
                        seen.near_kept += 1;
                    }
                }
            }
        }
        let (g, w) = (got.moved[t], want.moved[t]);
        tallies.entry("flag").or_default().check(g == w, || {
            format!("N {} thread {t}: flag {g:#x}, want {w}", case.n)
        });
    }
    for w in 0..4 {
        if want.moved[32 * w] == 1 {
            seen.moved_warps += 1;
        } else {
            seen.quiet_warps += 1;
        }
    }
}

fn all_cases(rng: &mut XorShift) -> Vec<Vec<Case>> {
    NS.iter()
        .map(|&n| (0..CASES).map(|_| Case::random(n, rng)).collect())
        .collect()
}

/// The data covers what the test claims (on the model): the quiet warps have no moved row and
/// the others one at least; rows move, stay, start at -inf both ways, and the near-threshold
/// rows fall on both sides. And the checks pass on the model's outputs and catch each break:
/// `m` off in its last bit, one thread's flag flipped, a kept row's corr one ulp below 1, a moved row's
/// past `EX2_MAX_ULPS`, a corr from -inf the smallest subnormal instead of 0, a poisoned word.
#[test]
fn the_cases_cover_each_outcome_and_the_checks_catch_each_break() {
    let mut rng = XorShift::new(0x1a2e_9e70);
    let cases = all_cases(&mut rng);
    let mut tallies = std::collections::BTreeMap::new();
    let mut seen = Seen::default();
    for case in cases.iter().flatten() {
        let want = model(case);
        for w in 0..4 {
            assert_eq!(
                want.moved[32 * w] == 1,
                !case.quiet[w],
                "N {} warp {w}: {:?}",
                case.n,
                &case.rows[16 * w..16 * w + 16]
            );
        }
        check(case, &want, &mut tallies, &mut seen);
    }
    println!("{seen:?}");
    assert!(tallies.values().all(|t| t.wrong == 0 && t.total > 0));
    assert_eq!(tallies.len(), 3);
    for count in [
        seen.moved,
        seen.kept,
        seen.from_neg_inf,
        seen.kept_neg_inf,
        seen.quiet_warps,
        seen.moved_warps,
        seen.near_moved,
        seen.near_kept,
    ] {
        assert!(count >= 4, "{seen:?}");
    }

    // Breaks, each on the first case with a row of the kind it needs.
    type Break = (&'static str, fn(&Case, &mut Got) -> bool);
    let breaks: [Break; 6] = [
        ("m", |_, g| {
            g.m[9][1] = f32::from_bits(g.m[9][1].to_bits() ^ 1);
            true
        }),
        ("flag", |_, g| {
            g.moved[70] ^= 1;
            true
        }),
        ("corr", |c, g| {
            match (0..THREADS * 2).find(|&i| g.m[i / 2][i % 2] == c.start[i / 2][i % 2]) {
                Some(i) => g.corr[i / 2][i % 2] = f32::from_bits(1f32.to_bits() - 1),
                None => return false,
            }
            true
        }),
        ("corr", |c, g| {
            let Some(i) = (0..THREADS * 2).find(|&i| {
                g.m[i / 2][i % 2] != c.start[i / 2][i % 2]
                    && c.start[i / 2][i % 2] != f32::NEG_INFINITY
            }) else {
                return false;
            };
            let x = &mut g.corr[i / 2][i % 2];
            *x = f32::from_bits(x.to_bits() + EX2_MAX_ULPS + 1);
            true
        }),
        ("corr", |c, g| {
            let Some(i) = (0..THREADS * 2).find(|&i| {
                c.start[i / 2][i % 2] == f32::NEG_INFINITY && g.m[i / 2][i % 2] != f32::NEG_INFINITY
            }) else {
                return false;
            };
            g.corr[i / 2][i % 2] = f32::from_bits(1);
            true
        }),
        ("m", |_, g| {
            g.m[127][0] = f32::NAN;
            true
        }),
    ];
    for (what, f) in breaks {
        let mut broke = false;
        for case in cases.iter().flatten() {
            let mut bad = model(case);
            if !f(case, &mut bad) {
                continue;
            }
            let mut tallies = std::collections::BTreeMap::new();
            check(case, &bad, &mut tallies, &mut Seen::default());
            let caught: Vec<_> = tallies
                .iter()
                .filter(|(_, t)| t.wrong > 0)
                .map(|(w, _)| *w)
                .collect();
            assert_eq!(caught, [what], "breaking {what}");
            broke = true;
            break;
        }
        assert!(broke, "no case to break {what} on");
    }
}

/// The kernel compiles for sm_90a (NVRTC, then ptxas): the quad's shuffles, MUFU's ex2 and the
/// warp vote in its PTX, no spills. NVRTC only: runs without a GPU.
#[test]
fn row_max_lazy_compiles_for_sm_90a() {
    let test = "row_max_lazy_compiles_for_sm_90a";
    if tma_test_support::skip::require_nvrtc_or_skip(test).is_none() {
        return;
    }
    let c = Compiler::global()
        .unwrap()
        .compile_source(&source(), &CompileOptions::new(Arch::Sm90a))
        .unwrap();
    assert!(!c.cubin.is_empty(), "no CUBIN (ptxas did not run)");
    for want in [
        "shfl.sync.bfly.b32",
        "ex2.approx.ftz.f32",
        "vote.sync.any.pred",
    ] {
        assert!(c.ptx.contains(want), "no `{want}` in the PTX");
    }
    // Two rows a thread, one ex2 each, for each of the four N.
    assert_eq!(c.ptx.matches("ex2.approx.ftz.f32").count(), 2 * NS.len());
    assert_eq!(c.ptx.matches("vote.sync.any.pred").count(), NS.len());
    let r = c.resources(KERNEL).unwrap();
    assert_eq!(r.spill_stores, 0, "{r:?}");
    println!("compiles, {} registers", r.registers);
}

#[test]
fn gpu_row_max_lazy_matches_the_model() {
    let test = "gpu_row_max_lazy_matches_the_model";
    let Some(info) = tma_test_support::skip::require_gpu_or_skip(test) else {
        return;
    };
    println!("device: {}", info.name);
    let ctx = cudarc::driver::CudaContext::new(0).unwrap();
    let stream = ctx.default_stream();
    let seed = tma_test_support::testgen::gpu_seed();
    println!("seed {seed} (set TMA_GPU_SEED to replay)");
    let mut rng = XorShift::new(seed);
    let module = Module::compile_and_load(
        &ctx,
        Compiler::global().unwrap(),
        &source(),
        &CompileOptions::new(Arch::Sm90a),
    )
    .unwrap();
    let kernel = module.kernel(KERNEL).unwrap();
    let mut tallies = std::collections::BTreeMap::new();
    let mut seen = Seen::default();
    for cases in all_cases(&mut rng) {
        let n = cases[0].n;
        let frag: Vec<f32> = cases
            .iter()
            .flat_map(|c| c.regs.iter().flatten().copied())
            .collect();
        let m_in: Vec<f32> = cases
            .iter()
            .flat_map(|c| c.start.iter().flatten().copied())
            .collect();
        let scales: Vec<f32> = cases.iter().map(|c| c.scale_log2).collect();
        let headrooms: Vec<f32> = cases.iter().map(|c| c.headroom_log2).collect();
        let frag_d = stream.clone_htod(&frag).unwrap();
        let m_in_d = stream.clone_htod(&m_in).unwrap();
        let scales_d = stream.clone_htod(&scales).unwrap();
        let headrooms_d = stream.clone_htod(&headrooms).unwrap();
        // Outputs poisoned: NaN, and all-ones flag words.
        let poison = |len: usize| stream.clone_htod(&vec![f32::NAN; len]).unwrap();
        let (mut m_d, mut corr_d) = (poison(CASES * THREADS * 2), poison(CASES * THREADS * 2));
        let mut moved_d = stream.clone_htod(&vec![u32::MAX; CASES * THREADS]).unwrap();
        let n_arg = n as u32;
        let cfg = kernel.plan_config(&stream, (CASES as u32, 1, 1)).unwrap();
        // SAFETY: lazy(unsigned n, const float* of CASES x 128 x n / 2, const float* of
        // CASES x 128 x 2, const float* of CASES, const float* of CASES, float* of CASES x 128
        // x 2 twice, unsigned* of CASES x 128), CASES blocks of the plan's 128 threads.
        unsafe {
            kernel
                .launch_builder(&cfg)
                .arg(&n_arg)
                .arg(&frag_d)
                .arg(&m_in_d)
                .arg(&scales_d)
                .arg(&headrooms_d)
                .arg(&mut m_d)
                .arg(&mut corr_d)
                .arg(&mut moved_d)
                .launch_and_sync()
        }
        .unwrap_or_else(|e| panic!("N {n}: {e}"));
        let (m, corr, moved) = (
            stream.clone_dtoh(&m_d).unwrap(),
            stream.clone_dtoh(&corr_d).unwrap(),
            stream.clone_dtoh(&moved_d).unwrap(),
        );
        let pairs =
            |flat: &[f32]| -> Vec<RowPair> { flat.chunks(2).map(|c| [c[0], c[1]]).collect() };
        for (b, case) in cases.iter().enumerate() {
            let words = b * THREADS * 2..(b + 1) * THREADS * 2;
            let got = Got {
                m: pairs(&m[words.clone()]),
                corr: pairs(&corr[words]),
                moved: moved[b * THREADS..(b + 1) * THREADS].to_vec(),
            };
            check(case, &got, &mut tallies, &mut seen);
        }
    }
    println!("{seen:?}");
    let mut bad = 0;
    for (what, t) in &tallies {
        println!("{what}: {} mismatches of {}", t.wrong, t.total);
        bad += t.wrong;
    }
    assert_eq!(tallies.len(), 3);
    assert_eq!(bad, 0);
}
