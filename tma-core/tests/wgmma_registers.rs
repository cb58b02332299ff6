//! The CPU proof of the register-level pieces of an attention forward
//! ([`tma_core::wgmma::registers`]): for every shape of `attention_shapes` (N of both products
//! every multiple of 16 from 16 to 256, bf16 and f16), the models compose to the identity:
//!
//! global Q, K, V -> TMA's model writes each tile into shared memory -> wgmma's read model
//! reads it back through the generated descriptors -> `S = Q K^T` spread over the D fragment
//! -> row max, the softmax exponential, row sum (the helpers' models, thread by thread, with
//! the quad exchanges) -> the accumulator packed into A fragments -> the matrix those
//! registers hold, times V as read through its descriptors -> O, each row divided by its sum
//!
//! equals the same computation on the dense global matrices, element for element and bit for
//! bit. And the row reductions of the fragment model equal the dense rows' for every N of the
//! instruction (8 to 256), the proof fails when a piece is broken (the halves of a packed
//! register swapped, the k-slices out of order).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use tma_core::model;
use tma_core::operand::WgmmaType;
use tma_core::wgmma::fragment::WARPGROUP_THREADS;
use tma_core::wgmma::read::{read_operand, ReadShape};
use tma_core::wgmma::registers::{
    self, a_matrix, accumulator_to_a, exp2_argument, exp2_ftz, quad_sum, row_exp2, row_max,
    row_max_lazy, row_scale, row_sum, row_sum_partial, thread_rows, value_16, AFragment, LazyMax,
    RowPair,
};
use tma_core::wgmma::{AccumulatorType, Fragment, OperandPlan};
use tma_core::{BoundSpec, DType};
use tma_test_support::testgen::{attention_shapes, attention_tiles, AttentionShape, XorShift};

/// A matrix of 16-bit patterns, row-major.
struct Matrix {
    rows: usize,
    cols: usize,
    bits: Vec<u16>,
}

impl Matrix {
    fn at(&self, r: usize, c: usize) -> u16 {
        self.bits[r * self.cols + c]
    }
}

/// Values `k / 8`, `|k| <= 16`: exact in both types, and every product and sum of a row of
/// `S` (at most 256 terms of multiples of 1/64 below 4) is exact in f32.
fn random_matrix(kind: WgmmaType, rows: usize, cols: usize, rng: &mut XorShift) -> Matrix {
    let bits = (0..rows * cols)
        .map(|_| {
            let v = (rng.range(0, 32) as f32 - 16.0) / 8.0;
            registers::round_16(kind, v).unwrap()
        })
        .collect();
    Matrix { rows, cols, bits }
}

fn bytes(m: &Matrix) -> Vec<u8> {
    m.bits.iter().flat_map(|b| b.to_le_bytes()).collect()
}

/// The tile loaded by TMA's model at `coords` (rows `row0`, D 0), then every element of every
/// k-slice read back through its descriptor as the instruction reads it: `[row][k]` over the
/// whole tile (rows: M of A, N of B; k: every k-slice's 16 after another).
fn load_and_read(
    valid: &tma_core::ValidSpec,
    global: &Matrix,
    row0: i64,
    base: u64,
) -> (Vec<Vec<u16>>, OperandPlan) {
    let bound: BoundSpec = valid
        .bind(&[global.rows as u64, global.cols as u64], None)
        .unwrap();
    let smem = model::load(&bound, &bytes(global), &[row0, 0]).unwrap();
    let plan = OperandPlan::new(valid).unwrap();
    let shape = ReadShape {
        operand: plan.operand.operand,
        major: plan.operand.major,
        kind: plan.kind,
        n: plan.mn,
    };
    let rows = shape.rows() as usize;
    let mut out = vec![Vec::new(); rows];
    for slice in 0..plan.k_slices {
        let desc = plan
            .descriptor(valid, base, slice, 0)
            .unwrap()
            .encode()
            .unwrap();
        let read = read_operand(desc, &shape, &smem, base).unwrap();
        for (i, e) in read.iter().enumerate() {
            out[i / shape.k() as usize].push(u16::from_le_bytes([e[0], e[1]]));
        }
    }
    (out, plan)
}

/// `a (rows x k) * b^T` (b: `cols x k`), f32 accumulated in k order: what the CPU takes for
/// one wgmma chain's products (exact on this data).
fn product(kind: WgmmaType, a: &[Vec<u16>], b: &[Vec<u16>]) -> Vec<f32> {
    let v = |x: u16| value_16(kind, x).unwrap();
    let mut out = Vec::with_capacity(a.len() * b.len());
    for ra in a {
        for rb in b {
            assert_eq!(ra.len(), rb.len());
            out.push(ra.iter().zip(rb).fold(0f32, |s, (&x, &y)| s + v(x) * v(y)));
        }
    }
    out
}

/// The sum of a row (`n` values) in the order `tma_wgmma_row_sum` takes it: each quad lane
/// `q` adds columns `8 j + 2 q`, `8 j + 2 q + 1` from 0 in order, then `(p0 + p1) + (p2 + p3)`.
fn row_sum_in_fragment_order(row: &[f32]) -> f32 {
    let p: Vec<f32> = (0..4)
        .map(|q| {
            (0..row.len() / 8).fold(0f32, |s, j| s + row[8 * j + 2 * q] + row[8 * j + 2 * q + 1])
        })
        .collect();
    (p[0] + p[1]) + (p[2] + p[3])
}

/// Per-thread pairs read back as the 64 rows; every thread of the row's quad holds the same.
fn rows_of(pairs: &[RowPair]) -> Vec<f32> {
    let mut rows = vec![f32::NAN; 64];
    for (t, p) in pairs.iter().enumerate() {
        for (r, &v) in thread_rows(t as u32).iter().zip(p) {
            let slot = &mut rows[*r as usize];
            assert!(
                slot.is_nan() || slot.to_bits() == v.to_bits(),
                "row {r}: {slot} and {v} in one quad"
            );
            *slot = v;
        }
    }
    rows
}

/// One shape end to end, through the fragment models; `tamper` may break the A fragments.
/// Returns the mismatches against the dense computation (0 when the identity holds).
fn attention_through_fragments(
    shape: AttentionShape,
    rng: &mut XorShift,
    tamper: &dyn Fn(&mut Vec<Vec<AFragment>>),
) -> u64 {
    let AttentionShape { dtype, n_kv, d } = shape;
    let kind = WgmmaType::of(dtype).unwrap();
    let (n, d) = (n_kv as usize, d as usize);
    let [q_tile, k_tile, v_tile] = attention_tiles(shape).unwrap();
    let q = random_matrix(kind, 128, d, rng);
    let k = random_matrix(kind, 2 * n, d, rng);
    let v = random_matrix(kind, 2 * n, d, rng);
    let (q0, kv0) = (64 * rng.below(2) as usize, n * rng.below(2) as usize);
    let base = 1024 * rng.range(1, 8);
    let (q_read, _) = load_and_read(&q_tile, &q, q0 as i64, base);
    let (k_read, k_plan) = load_and_read(&k_tile, &k, kv0 as i64, base);
    let (v_read, v_plan) = load_and_read(&v_tile, &v, kv0 as i64, base);
    assert_eq!(
        (k_plan.mn, v_plan.mn, v_plan.k_slices),
        (n_kv, d as u64, n_kv / 16)
    );
    let scale_log2 = (1.0 / (d as f64).sqrt() * std::f64::consts::LOG2_E) as f32;

    // The kernel's view: registers, thread by thread.
    let fs = Fragment::accumulator(n_kv as u32, AccumulatorType::F32).unwrap();
    let fo = Fragment::accumulator(d as u32, AccumulatorType::F32).unwrap();
    let s_regs = fs.scatter(&product(kind, &q_read, &k_read)).unwrap();
    let mut m: Vec<RowPair> = vec![[f32::NEG_INFINITY; 2]; WARPGROUP_THREADS as usize];
    row_max(&fs, &s_regs, &mut m).unwrap();
    let mut p_regs = s_regs.clone();
    row_exp2(&fs, &mut p_regs, &m, scale_log2).unwrap();
    let mut l: Vec<RowPair> = vec![[0.0; 2]; WARPGROUP_THREADS as usize];
    row_sum(&fs, &p_regs, &mut l).unwrap();
    let mut a = accumulator_to_a(&fs, kind, &p_regs).unwrap();
    tamper(&mut a);
    let p16 = a_matrix(&a).unwrap();
    let p16_rows: Vec<Vec<u16>> = p16.chunks(n).map(<[u16]>::to_vec).collect();
    let mut o_regs = fo.scatter(&product(kind, &p16_rows, &v_read)).unwrap();
    let inv: Vec<RowPair> = l.iter().map(|s| [1.0 / s[0], 1.0 / s[1]]).collect();
    row_scale(&fo, &mut o_regs, &inv).unwrap();

    // The dense computation on the global matrices.
    let rows = |mtx: &Matrix, r0: usize, count: usize| -> Vec<Vec<u16>> {
        (r0..r0 + count)
            .map(|r| (0..mtx.cols).map(|c| mtx.at(r, c)).collect())
            .collect()
    };
    let s = product(kind, &rows(&q, q0, 64), &rows(&k, kv0, n));
    let m_dense: Vec<f32> = s
        .chunks(n)
        .map(|r| r.iter().copied().fold(f32::NEG_INFINITY, f32::max))
        .collect();
    let p: Vec<f32> = s
        .iter()
        .enumerate()
        .map(|(i, &x)| exp2_ftz(exp2_argument(x, m_dense[i / n], scale_log2)))
        .collect();
    let l_dense: Vec<f32> = p.chunks(n).map(row_sum_in_fragment_order).collect();
    let p16_dense: Vec<Vec<u16>> = p
        .chunks(n)
        .map(|r| {
            r.iter()
                .map(|&x| registers::round_16(kind, x).unwrap())
                .collect()
        })
        .collect();
    // V^T: N (d) rows of K (n_kv).
    let vt: Vec<Vec<u16>> = (0..d)
        .map(|c| (kv0..kv0 + n).map(|r| v.at(r, c)).collect())
        .collect();
    let o: Vec<f32> = product(kind, &p16_dense, &vt)
        .iter()
        .enumerate()
        .map(|(i, &x)| x * (1.0 / l_dense[i / d]))
        .collect();

    let mut wrong = 0u64;
    let mut differ = |what: &str, got: &[u32], want: &[u32]| {
        assert_eq!(got.len(), want.len(), "{what}");
        let bad = got.iter().zip(want).filter(|(g, w)| g != w).count() as u64;
        if bad > 0 {
            println!("{shape:?}: {what}: {bad} of {} differ", got.len());
        }
        wrong += bad;
    };
    let f32_bits = |x: &[f32]| x.iter().map(|v| v.to_bits()).collect::<Vec<u32>>();
    differ("row max", &f32_bits(&rows_of(&m)), &f32_bits(&m_dense));
    differ("row sum", &f32_bits(&rows_of(&l)), &f32_bits(&l_dense));
    let p16_dense_flat: Vec<u32> = p16_dense.iter().flatten().map(|&b| u32::from(b)).collect();
    let p16_flat: Vec<u32> = p16.iter().map(|&b| u32::from(b)).collect();
    differ("P as A", &p16_flat, &p16_dense_flat);
    differ("O", &f32_bits(&fo.gather(&o_regs).unwrap()), &f32_bits(&o));
    wrong
}

#[test]
fn the_fragment_models_compose_to_the_dense_attention() {
    let shapes = attention_shapes();
    assert_eq!(shapes.len(), 32);
    let mut rng = XorShift::new(0x0a77_e471);
    for shape in shapes {
        assert_eq!(
            attention_through_fragments(shape, &mut rng, &|_| {}),
            0,
            "{shape:?}"
        );
    }
}

/// The identity can fail: the halves of each packed register swapped (the `cvt` operands in
/// the wrong order), or the k-slices taken in reverse, change P as A (and O).
#[test]
fn a_broken_conversion_breaks_the_identity() {
    let mut rng = XorShift::new(0x0bad_a77e);
    for shape in attention_shapes().into_iter().step_by(5) {
        let swapped = attention_through_fragments(shape, &mut rng, &|a| {
            for t in a.iter_mut() {
                for f in t.iter_mut() {
                    for r in f.regs.iter_mut() {
                        *r = r.rotate_left(16);
                    }
                }
            }
        });
        assert!(swapped > 0, "{shape:?}: swapped halves went unnoticed");
        if shape.n_kv > 16 {
            let reversed = attention_through_fragments(shape, &mut rng, &|a| {
                a.iter_mut().for_each(|t| t.reverse())
            });
            assert!(reversed > 0, "{shape:?}: reversed k-slices went unnoticed");
        }
    }
}

/// Row max, sum, scale and the exponential of the fragment model equal the dense rows' for
/// every N of the instruction (8 to 256 in steps of 8): on small integers every sum is exact
/// (so any order agrees), on random floats the sum is the fragment's order, and a row masked
/// out (every element -inf) exponentiates to 0s with a max of -inf.
#[test]
fn row_reductions_equal_the_dense_rows_for_every_n() {
    let mut rng = XorShift::new(0x5eed_0a0e);
    for n in (8..=256u32).step_by(8) {
        let f = Fragment::accumulator(n, AccumulatorType::F32).unwrap();
        let cols = n as usize;
        for integers in [true, false] {
            let mut s: Vec<f32> = (0..64 * cols)
                .map(|_| {
                    if integers {
                        rng.range(0, 200) as f32 - 100.0
                    } else {
                        f32::from_bits(rng.range(0x3000_0000, 0x4300_0000) as u32)
                            * if rng.chance(1, 2) { -1.0 } else { 1.0 }
                    }
                })
                .collect();
            // Row 5 masked out.
            s[5 * cols..6 * cols].fill(f32::NEG_INFINITY);
            let regs = f.scatter(&s).unwrap();
            let mut m = vec![[f32::NEG_INFINITY; 2]; 128];
            row_max(&f, &regs, &mut m).unwrap();
            let mut sum = vec![[0.0f32; 2]; 128];
            row_sum(&f, &regs, &mut sum).unwrap();
            // The shares, added by the quad once, are the same row sums bit for bit.
            let mut shares = vec![[0.0f32; 2]; 128];
            row_sum_partial(&f, &regs, &mut shares).unwrap();
            let summed = quad_sum(&shares).unwrap();
            for t in 0..128 {
                for r in 0..2 {
                    assert_eq!(
                        summed[t][r].to_bits(),
                        sum[t][r].to_bits(),
                        "N {n} thread {t} row {r}"
                    );
                }
            }
            let factor: Vec<RowPair> = (0..128).map(|t| [t as f32 + 0.5, -(t as f32)]).collect();
            let mut scaled = regs.clone();
            row_scale(&f, &mut scaled, &factor).unwrap();
            let scale_log2 = 0.127_3;
            let mut e = regs.clone();
            row_exp2(&f, &mut e, &m, scale_log2).unwrap();
            let (m_rows, s_rows) = (rows_of(&m), rows_of(&sum));
            for r in 0..64 {
                let row = &s[r * cols..(r + 1) * cols];
                let want_max = row.iter().copied().fold(f32::NEG_INFINITY, f32::max);
                assert_eq!(m_rows[r].to_bits(), want_max.to_bits(), "N {n} row {r}");
                let want_sum = if integers {
                    row.iter().sum::<f32>()
                } else {
                    row_sum_in_fragment_order(row)
                };
                // The masked row sums to -inf either way.
                assert_eq!(s_rows[r].to_bits(), want_sum.to_bits(), "N {n} row {r}");
            }
            let (scaled, e) = (f.gather(&scaled).unwrap(), f.gather(&e).unwrap());
            for (i, &x) in s.iter().enumerate() {
                let (r, c) = (i / cols, (i % cols) as u32);
                let owner = f.owner(r as u32, c).unwrap();
                let half = usize::from(thread_rows(owner.thread)[1] == r as u32);
                let fac = factor[owner.thread as usize][half];
                assert_eq!(scaled[i].to_bits(), (x * fac).to_bits(), "N {n} ({r}, {c})");
                let want = exp2_ftz(exp2_argument(x, m_rows[r], scale_log2));
                assert_eq!(e[i].to_bits(), want.to_bits(), "N {n} ({r}, {c})");
                if r == 5 {
                    assert_eq!(e[i], 0.0);
                } else {
                    // At the max, the argument is the rounding error of max * scale_log2
                    // (the fused multiply-add keeps it): 2^that is 1 within an ulp or so.
                    assert!(e[i] <= 1.0 + 1e-6, "N {n} ({r}, {c}): {}", e[i]);
                }
            }
        }
    }
}

/// Wrong sizes and types are named errors, not panics.
#[test]
fn wrong_registers_are_refused() {
    use tma_core::wgmma::FragmentError;
    let f = Fragment::accumulator(64, AccumulatorType::F32).unwrap();
    let regs = vec![vec![0f32; 32]; 128];
    assert!(matches!(
        accumulator_to_a(&f, WgmmaType::E4M3, &regs),
        Err(FragmentError::RegisterA {
            kind: WgmmaType::E4M3
        })
    ));
    let f24 = Fragment::accumulator(24, AccumulatorType::F32).unwrap();
    let e = accumulator_to_a(&f24, WgmmaType::BF16, &vec![vec![0f32; 12]; 128]).unwrap_err();
    assert_eq!(
        e.to_string(),
        "N = 24 columns as A (an accumulator fed back, or an A matrix): the k-slices of A are 16 columns, so N must be a nonzero multiple of 16"
    );
    let mut m = vec![[0f32; 2]; 127];
    let e = row_max(&f, &regs, &mut m).unwrap_err();
    assert_eq!(
        e.to_string(),
        "row max (a pair per thread): expected 128 elements, got 127"
    );
    let e = row_sum(&f, &regs[..5], &mut vec![[0f32; 2]; 128]).unwrap_err();
    assert!(matches!(
        e,
        FragmentError::Length {
            expected: 128,
            given: 5,
            ..
        }
    ));
    let _ = DType::BF16;
}

/// Each thread's pair of a per-row value (64 rows): what `m` holds before a row helper.
fn pairs_of(rows: &[f32]) -> Vec<RowPair> {
    (0..WARPGROUP_THREADS)
        .map(|t| thread_rows(t).map(|r| rows[r as usize]))
        .collect()
}

/// The max of each of the 64 rows of a dense `64 x cols` matrix.
fn dense_row_max(s: &[f32], cols: usize) -> Vec<f32> {
    s.chunks(cols)
        .map(|r| r.iter().copied().fold(f32::NEG_INFINITY, f32::max))
        .collect()
}

/// `row_max_lazy` on a dense matrix and per-row starting maxima: the rows' maxima after, their
/// factors, and the warp flags.
fn lazy_rows(
    s: &[f32],
    cols: usize,
    start: &[f32],
    scale_log2: f32,
    headroom_log2: f32,
) -> (Vec<f32>, Vec<f32>, Vec<bool>) {
    let f = Fragment::accumulator(cols as u32, AccumulatorType::F32).unwrap();
    let regs = f.scatter(s).unwrap();
    let mut m = pairs_of(start);
    let LazyMax { corr, warp_moved } =
        row_max_lazy(&f, &regs, &mut m, scale_log2, headroom_log2).unwrap();
    assert_eq!(warp_moved.len(), 4);
    (rows_of(&m), rows_of(&corr), warp_moved)
}

/// Random floats of either sign in about `[-2^7, 2^7)`, normal, none of them -inf.
fn random_scores(rng: &mut XorShift, len: usize) -> Vec<f32> {
    (0..len)
        .map(|_| {
            let v = f32::from_bits(rng.range(0x3000_0000, 0x4300_0000) as u32);
            if rng.chance(1, 2) {
                -v
            } else {
                v
            }
        })
        .collect()
}

/// Headroom 0 is the eager update for every N: `m = max(m, row)` ([`row_max`]'s) and the factor
/// `2^(old scaled - new scaled)` wherever the max grew, exactly 1 (and `m` kept) where it did
/// not, and 0 from a start of -inf; on random rows and starts below, at and above the row's max.
#[test]
fn lazy_max_with_no_headroom_is_the_eager_update() {
    let mut rng = XorShift::new(0x1a2e_0000);
    let scale_log2 = 0.180_336_88f32;
    let (mut grew, mut kept) = (0, 0);
    for n in (8..=256u32).step_by(8) {
        let cols = n as usize;
        let s = random_scores(&mut rng, 64 * cols);
        let row_max_of = dense_row_max(&s, cols);
        let start: Vec<f32> = row_max_of
            .iter()
            .map(|&x| match rng.below(4) {
                0 => x - rng.range(1, 1000) as f32 / 64.0,
                1 => x,
                2 => x + rng.range(1, 1000) as f32 / 64.0,
                _ => f32::NEG_INFINITY,
            })
            .collect();
        let f = Fragment::accumulator(n, AccumulatorType::F32).unwrap();
        let mut eager = pairs_of(&start);
        row_max(&f, &f.scatter(&s).unwrap(), &mut eager).unwrap();
        let eager = rows_of(&eager);
        let (m, corr, _) = lazy_rows(&s, cols, &start, scale_log2, 0.0);
        for r in 0..64 {
            let want = exp2_ftz(start[r] * scale_log2 - eager[r] * scale_log2);
            assert_eq!(m[r].to_bits(), eager[r].to_bits(), "N {n} row {r}");
            assert_eq!(corr[r].to_bits(), want.to_bits(), "N {n} row {r}");
            if eager[r] > start[r] {
                grew += 1;
                assert!(corr[r] < 1.0, "N {n} row {r}: {}", corr[r]);
                if start[r] == f32::NEG_INFINITY {
                    assert_eq!(corr[r].to_bits(), 0, "N {n} row {r}");
                }
            } else {
                kept += 1;
                assert_eq!(corr[r].to_bits(), 1f32.to_bits(), "N {n} row {r}");
            }
        }
    }
    assert!(grew > 500 && kept > 500, "{grew} grew, {kept} kept");
}

/// A row whose scaled max grows by less than the headroom, or by exactly it (the compare is
/// strict), or shrinks, keeps its `m` and gets exactly 1.0; one past it moves, with the
/// factor of the whole step. Scale 1/4 makes every product exact: headroom 8 is 32 in scores.
#[test]
fn lazy_max_moves_a_row_only_past_the_headroom() {
    let mut rng = XorShift::new(0x1a2e_0001);
    let (scale_log2, headroom) = (0.25f32, 8.0f32);
    for n in [8usize, 64, 144, 256] {
        let s: Vec<f32> = (0..64 * n)
            .map(|_| rng.range(0, 4096) as f32 / 16.0 - 128.0)
            .collect();
        let row_max_of = dense_row_max(&s, n);
        // Below by 31.75 (7.9375 scaled), exactly 32, 32.0625 past, above by 3, far below.
        let steps = [31.75f32, 32.0, 32.0625, -3.0, 100.0];
        let start: Vec<f32> = (0..64)
            .map(|r| row_max_of[r] - steps[r % steps.len()])
            .collect();
        let (m, corr, warps) = lazy_rows(&s, n, &start, scale_log2, headroom);
        for r in 0..64 {
            let step = steps[r % steps.len()];
            if step * scale_log2 > headroom {
                assert_eq!(m[r].to_bits(), row_max_of[r].to_bits(), "N {n} row {r}");
                let want = exp2_ftz(-step * scale_log2);
                assert_eq!(corr[r].to_bits(), want.to_bits(), "N {n} row {r}");
                assert!(corr[r] < 2f32.powi(-8), "N {n} row {r}: {}", corr[r]);
            } else {
                assert_eq!(m[r].to_bits(), start[r].to_bits(), "N {n} row {r}");
                assert_eq!(corr[r].to_bits(), 1f32.to_bits(), "N {n} row {r}");
            }
        }
        // Every warp's 16 rows hold each step: all moved.
        assert_eq!(warps, [true; 4]);
        // The same data with a headroom past every step: nothing moves, nothing to rescale.
        let (m, corr, warps) = lazy_rows(&s, n, &start, scale_log2, 26.0);
        assert_eq!(
            m.iter().map(|x| x.to_bits()).collect::<Vec<_>>(),
            start.iter().map(|x| x.to_bits()).collect::<Vec<_>>()
        );
        assert!(corr.iter().all(|c| c.to_bits() == 1f32.to_bits()));
        assert_eq!(warps, [false; 4]);
    }
}

/// Rows masked out so far: a max of -inf over elements all -inf stays -inf with factor 1 (the
/// scaled difference is NaN, not past any headroom); -inf to a finite max moves with factor
/// exactly 0 (no old output to keep); a finite max over a block all -inf stays.
#[test]
fn lazy_max_of_masked_rows() {
    let n = 64usize;
    let scale_log2 = 0.180_336_88f32;
    let mut s: Vec<f32> = (0..64 * n).map(|i| (i % 13) as f32 - 6.0).collect();
    // Rows 0..16 (warp 0) all -inf; row 20 partly.
    s[..16 * n].fill(f32::NEG_INFINITY);
    s[20 * n..20 * n + 40].fill(f32::NEG_INFINITY);
    let mut start = vec![2.0f32; 64];
    start[..8].fill(f32::NEG_INFINITY); // -inf over -inf: stays
    start[16..32].fill(f32::NEG_INFINITY); // -inf to finite: moves, corr 0
    for headroom in [0.0f32, 8.0] {
        let (m, corr, warps) = lazy_rows(&s, n, &start, scale_log2, headroom);
        for r in 0..64 {
            let (m_want, c_want) = match r {
                0..8 => (f32::NEG_INFINITY, 1.0),
                8..16 => (2.0, 1.0),
                16..32 => (dense_row_max(&s, n)[r], 0.0),
                // Rows 32.. reach 6 over a start of 2: 4 * 0.18 scaled, past headroom 0 only.
                _ if headroom == 0.0 => (6.0, exp2_ftz(2.0 * scale_log2 - 6.0 * scale_log2)),
                _ => (2.0, 1.0),
            };
            assert_eq!(
                m[r].to_bits(),
                m_want.to_bits(),
                "headroom {headroom} row {r}"
            );
            assert_eq!(
                corr[r].to_bits(),
                f32::to_bits(c_want),
                "headroom {headroom} row {r}"
            );
        }
        assert_eq!(warps, [false, true, headroom == 0.0, headroom == 0.0]);
    }
}

/// The flag of each warp (its 16 rows: `16 w .. 16 w + 15`) is exactly "a row of it moved", for
/// every subset of the four warps, one moved row (any of its 16) in each warp of the subset.
#[test]
fn lazy_max_flags_exactly_the_warps_with_a_moved_row() {
    let mut rng = XorShift::new(0x1a2e_0003);
    let (n, scale_log2, headroom) = (144usize, 0.127_517_4f32, 8.0f32);
    for subset in 0u32..16 {
        let s = random_scores(&mut rng, 64 * n);
        let row_max_of = dense_row_max(&s, n);
        // Every row a little below its max (stays) ...
        let mut start: Vec<f32> = row_max_of.iter().map(|&x| x - 1.0).collect();
        let mut moved = [false; 4];
        for (w, flag) in moved.iter_mut().enumerate() {
            if subset & (1 << w) != 0 {
                // ... but one row of each warp of the subset far below (moves).
                let r = 16 * w + rng.below(16) as usize;
                start[r] = row_max_of[r] - 1000.0;
                *flag = true;
            }
        }
        let (m, _, warps) = lazy_rows(&s, n, &start, scale_log2, headroom);
        assert_eq!(warps, moved, "subset {subset:#06b}");
        let changed = (0..64).filter(|&r| m[r] != start[r]).count() as u32;
        assert_eq!(changed, subset.count_ones(), "subset {subset:#06b}");
    }
}

/// A headroom that is negative, infinite or NaN is a named error (and `m` untouched); -0 and 0
/// are the same headroom; wrong sizes are refused as for the other row helpers.
#[test]
fn lazy_max_refuses_a_headroom_that_is_not_finite_or_negative() {
    use tma_core::wgmma::FragmentError;
    let f = Fragment::accumulator(64, AccumulatorType::F32).unwrap();
    let regs = vec![vec![1f32; 32]; 128];
    for bad in [
        -1.0f32,
        -f32::from_bits(1),
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::NAN,
    ] {
        let mut m = vec![[0f32; 2]; 128];
        assert_eq!(
            row_max_lazy(&f, &regs, &mut m, 1.0, bad),
            Err(FragmentError::Headroom {
                headroom_log2_bits: bad.to_bits()
            }),
            "{bad}"
        );
        assert_eq!(m, vec![[0f32; 2]; 128]);
    }
    let e = row_max_lazy(&f, &regs, &mut vec![[0f32; 2]; 128], 1.0, -0.5).unwrap_err();
    assert_eq!(
        e.to_string(),
        "headroom_log2 = -0.5: a lazy max's headroom is a finite log2 of at least 0 \
         (tma_wgmma_row_max_lazy<N>; 0 moves every max that grew)"
    );
    assert_eq!(e.rule(), None);
    let (mut a, mut b) = (vec![[0f32; 2]; 128], vec![[0f32; 2]; 128]);
    let za = row_max_lazy(&f, &regs, &mut a, 1.0, 0.0).unwrap();
    let zb = row_max_lazy(&f, &regs, &mut b, 1.0, -0.0).unwrap();
    assert_eq!((za, a), (zb, b));
    assert!(matches!(
        row_max_lazy(&f, &regs, &mut vec![[0f32; 2]; 127], 1.0, 8.0),
        Err(FragmentError::Length {
            expected: 128,
            given: 127,
            ..
        })
    ));
    assert!(matches!(
        row_max_lazy(&f, &regs[..64], &mut vec![[0f32; 2]; 128], 1.0, 8.0),
        Err(FragmentError::Length {
            expected: 128,
            given: 64,
            ..
        })
    ));
}
