//! The f32 accumulator as an attention kernel's softmax works on it, thread by thread: what
//! the generated helpers (templates/wgmma.cuh.tera) do to each thread's registers, in the
//! same order, so a GPU test compares the hardware with this model bit for bit.
//!
//! - Row-wise reductions that know the layout ([`row_max`], [`row_sum`]): thread `t` holds
//!   elements of two rows, `16 w + groupID` (elements `i` with `i % 4 < 2`) and 8 rows below
//!   (`i % 4 >= 2`) ([`super::fragment`]); the four threads of a quad (lanes `4 g .. 4 g + 3`)
//!   share those rows, so each reduces its own elements, then the quad combines them with
//!   `shfl.xor` 1 and 2, and all four hold the row's value. `tma_wgmma_row_max<N>` /
//!   `tma_wgmma_row_sum<N>`.
//! - [`row_max_lazy`] (`tma_wgmma_row_max_lazy<N>`): the online softmax's max step that
//!   moves a row's max only when it grows past a headroom (FlashAttention-4's lazy rescale),
//!   with each row's correction factor (1 where it stayed) and, per warp, whether any row of
//!   it moved (the warp's `__any_sync`: when none did, it skips the rescale).
//! - [`row_scale`] (`tma_wgmma_row_scale<N>`): each row times a per-row factor (rescaling the
//!   output when the running max moves, dividing by the row sum at the end).
//! - [`row_exp2`] (`tma_wgmma_row_exp2<N>`): `exp2(x * scale_log2 - max * scale_log2)`, the
//!   product and difference one fused multiply-add (FlashAttention's `exp2f(x * scale -
//!   max_scaled)`), a row max of `-inf` (a row masked out) taken as 0; [`row_exp2_poly`]
//!   (`tma_wgmma_row_exp2_poly<N, POLY_OF_8, DEG>`) raises a share of the elements by a
//!   polynomial on the FMA pipe instead ([`exp2_poly`], exact f32 steps the model repeats
//!   bit for bit).
//! - [`accumulator_to_a`] (`tma_wgmma_acc_to_a<N>`): the accumulator of `S = Q K^T` (64 x N,
//!   N a multiple of 16) as the A operand of the next wgmma (`P V`, K = N): k-slice `s` is
//!   columns `16 s .. 16 s + 15`, element for element an A fragment
//!   ([`super::Fragment::accumulator_to_a`]); each pair of elements is rounded to 16 bits
//!   (nearest even: `cvt.rn.bf16x2.f32` / `cvt.rn.f16x2.f32`) and packed, element `2 j` in the
//!   low half of register `j`.
//!
//! A warpgroup's registers are `Vec<Vec<f32>>`: 128 threads, each its elements in element
//! order ([`super::Fragment::scatter`] builds them from a matrix).
//!
//! Everything here is exact f32 arithmetic the model repeats bit for bit, except the
//! exponential: the device's `ex2.approx.ftz.f32` approximates `2^x` (PTX ISA 9.7.4, `ex2`:
//! an approximation, subnormal results flushed to zero); [`row_exp2`] gives the nearest f32
//! to the exact power (flushed the same way), and tests allow the device
//! [`EX2_MAX_ULPS`] from it.

use super::fragment::{d_position, Fragment, FragmentError, A_COLS, WARPGROUP_THREADS};
use crate::model::float::{Half, BF16, F16};
use crate::operand::WgmmaType;

/// Threads of a warp: the lanes a `__any_sync` votes over.
const WARP_THREADS: usize = 32;

/// A row-wise value per thread: `[0]` for the thread's upper row (`16 w + groupID`), `[1]`
/// for the row 8 below. What `float m[2]` holds in a kernel.
pub type RowPair = [f32; 2];

/// How far (in units in the last place of the f32 result) the device's `ex2.approx.ftz.f32`
/// may be from [`exp2_ftz`] before a test calls it wrong. The instruction is an approximation
/// of a few ulp at most; a wrong argument (another row's max, a scale missed, the product
/// rounded before the subtraction) moves the result by far more than this.
pub const EX2_MAX_ULPS: u32 = 4;

/// Rows of the fragment thread `thread` holds: `[16 w + groupID, 16 w + groupID + 8]`.
pub const fn thread_rows(thread: u32) -> [u32; 2] {
    let (row, _) = d_position(thread, 0);
    [row, row + 8]
}

/// Which of the thread's two rows element `element` is in: 0 (upper) or 1 (8 below).
pub const fn element_row(element: u32) -> usize {
    ((element / 2) % 2) as usize
}

/// One k16 slice of A from registers: four `.b32` registers of two 16-bit elements each
/// (element `2 j` in the low half of `regs[j]`), what `tma_wgmma_a_frag<TYPE>` holds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct AFragment {
    pub regs: [u32; 4],
}

impl AFragment {
    /// The fragment's 8 elements (16-bit patterns) in element order.
    pub fn elements(&self) -> [u16; 8] {
        let mut out = [0u16; 8];
        for (j, r) in self.regs.iter().enumerate() {
            out[2 * j] = (r & 0xffff) as u16;
            out[2 * j + 1] = (r >> 16) as u16;
        }
        out
    }
}

/// The soft float of a 16-bit wgmma type; other types take no A from registers here.
fn half(kind: WgmmaType) -> Result<Half, FragmentError> {
    match kind {
        WgmmaType::F16 => Ok(F16),
        WgmmaType::BF16 => Ok(BF16),
        other => Err(FragmentError::RegisterA { kind: other }),
    }
}

/// `v` rounded to the 16-bit `kind` (nearest, ties to even; what `cvt.rn` does), as bits.
/// [`FragmentError::RegisterA`] for a type that is not f16 or bf16.
pub fn round_16(kind: WgmmaType, v: f32) -> Result<u16, FragmentError> {
    // f32 -> f64 is exact, so one rounding from f64 is the rounding from f32.
    Ok(half(kind)?.round(f64::from(v)))
}

/// The value of 16-bit pattern `bits` of `kind`, as f32 (exact: both 16-bit types fit).
pub fn value_16(kind: WgmmaType, bits: u16) -> Result<f32, FragmentError> {
    Ok(half(kind)?.value(bits) as f32)
}

/// `cvt.rn.{f16,bf16}x2.f32 d, hi, lo`: `lo` rounded into the low half, `hi` into the high.
pub fn pack_pair(kind: WgmmaType, lo: f32, hi: f32) -> Result<u32, FragmentError> {
    Ok(u32::from(round_16(kind, lo)?) | (u32::from(round_16(kind, hi)?) << 16))
}

/// The nearest f32 to `2^x`, flushed to zero below the smallest normal (`.ftz`): the model of
/// `ex2.approx.ftz.f32`, which the device approximates within [`EX2_MAX_ULPS`].
pub fn exp2_ftz(x: f32) -> f32 {
    // A subnormal input is read as 0 (`.ftz`): 2^0.
    let x = if x != 0.0 && x.abs() < f32::MIN_POSITIVE {
        0.0
    } else {
        x
    };
    let y = f64::from(x).exp2() as f32;
    if y < f32::MIN_POSITIVE {
        0.0
    } else {
        y
    }
}

/// The argument `tma_wgmma_row_exp2` raises 2 to for element `x` of a row of max `max`:
/// `fma(x, scale_log2, -(max * scale_log2))`, with a max of `-inf` taken as 0 (a row with
/// nothing unmasked gives 0s, not NaN).
pub fn exp2_argument(x: f32, max: f32, scale_log2: f32) -> f32 {
    let max_scaled = if max == f32::NEG_INFINITY {
        0.0
    } else {
        max * scale_log2
    };
    x.mul_add(scale_log2, -max_scaled)
}

/// The polynomial `tma_wgmma_ex2_poly<DEG>` evaluates: `2^x` on the FMA and ALU pipes, so a
/// softmax bound by the MUFU unit (16 exponentials a cycle an SM) can move a share off it.
/// Measured on the H100 (BENCHMARKS.md), example 06's softmax is not: MUFU and the tensor
/// cores were both about half busy at head dim 64, and every share of the polynomial was
/// slower (its ~11 instructions cost more issue slots than MUFU saved). `x = j + f` with `j = floor(x)`, `f` in
/// `[0, 1)`; `2^f` is `1 + c1 f + ... + c_deg f^deg` (Horner, fused multiply-adds; the
/// coefficients minimise the relative error on `[0, 1)` with `2^0` exactly 1), times `2^j`
/// built from `j`'s bits. Every step is exact f32 arithmetic with one rounding each, so
/// [`exp2_poly`] gives the device's bits, unlike `ex2.approx`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Ex2Poly {
    /// Degree 3: relative error under [`Ex2Poly::max_rel_error`] = 8.7e-5, 0.02 of bf16's
    /// unit roundoff.
    Cubic,
    /// Degree 4: 3.0e-6, 0.006 of f16's unit roundoff (one fused multiply-add more).
    Quartic,
}

impl Ex2Poly {
    pub const ALL: [Ex2Poly; 2] = [Ex2Poly::Cubic, Ex2Poly::Quartic];

    /// The polynomial's degree: `DEG` of `tma_wgmma_ex2_poly<DEG>`.
    pub const fn degree(self) -> u32 {
        match self {
            Ex2Poly::Cubic => 3,
            Ex2Poly::Quartic => 4,
        }
    }

    /// The polynomial for an element type: the degree whose error is a small part of the
    /// rounding P takes on its way to a wgmma operand.
    pub fn for_type(kind: WgmmaType) -> Ex2Poly {
        match kind {
            WgmmaType::F16 => Ex2Poly::Quartic,
            _ => Ex2Poly::Cubic,
        }
    }

    /// `c1 .. c_deg` (c0 = 1), as f32 (their bits: the values the template renders as PTX
    /// hex floats).
    pub const fn coefficients(self) -> &'static [f32] {
        const CUBIC: [f32; 3] = [
            f32::from_bits(0x3F31_F32C),
            f32::from_bits(0x3E69_1BC5),
            f32::from_bits(0x3D9D_D553),
        ];
        const QUARTIC: [f32; 4] = [
            f32::from_bits(0x3F31_6B63),
            f32::from_bits(0x3E77_1228),
            f32::from_bits(0x3D55_FC34),
            f32::from_bits(0x3C5B_FB98),
        ];
        match self {
            Ex2Poly::Cubic => &CUBIC,
            Ex2Poly::Quartic => &QUARTIC,
        }
    }

    /// The largest relative error of [`exp2_poly`] from `2^x` where the result is normal
    /// (measured over `[0, 1)` and its shifts by the tests, with a margin).
    pub const fn max_rel_error(self) -> f64 {
        match self {
            Ex2Poly::Cubic => 8.7e-5,
            Ex2Poly::Quartic => 3.0e-6,
        }
    }
}

/// [`exp2_poly`] clamps `x` to `[EX2_POLY_LO, EX2_POLY_HI]` first (NaN stays NaN): past
/// them the result is 0 or infinity, and inside them `floor(x)` fits the bits `2^j` is built
/// from.
pub const EX2_POLY_LO: f32 = -127.0;
/// See [`EX2_POLY_LO`].
pub const EX2_POLY_HI: f32 = 128.0;
/// `1.5 * 2^23`: added with rounding toward minus infinity, it leaves `floor(x)` in the low
/// bits of the sum (`add.rm.f32`).
pub const EX2_POLY_SHIFTER: f32 = 12_582_912.0;

/// `tma_wgmma_ex2_poly<DEG>(x)`, bit for bit: `2^x` by [`Ex2Poly`]. `x < -126` (and `-inf`)
/// gives 0 (`2^x` is subnormal there, and `ex2.approx.ftz` flushes it to 0 too), `x >= 128`
/// gives `+inf`, NaN gives NaN, an integer `x` gives `2^x` exactly; elsewhere the result is
/// within [`Ex2Poly::max_rel_error`] of `2^x`. No flush-to-zero anywhere (the device's inline PTX names no `.ftz`), so the result
/// does not depend on `--use_fast_math`.
pub fn exp2_poly(x: f32, poly: Ex2Poly) -> f32 {
    if x.is_nan() {
        return f32::NAN;
    }
    // max.NaN.f32, min.NaN.f32
    let x = x.clamp(EX2_POLY_LO, EX2_POLY_HI);
    // add.rm.f32 t, x, 1.5 * 2^23: exact, t's ulp is 1 and floor(x) an integer in range.
    let j = x.floor();
    let t = EX2_POLY_SHIFTER + j;
    // sub.rn.f32 j, t, shifter; sub.rn.f32 f, x, j: both exact (f is x's fraction bits).
    let f = x - (t - EX2_POLY_SHIFTER);
    // fma.rn.f32, Horner from the top coefficient down to c0 = 1.
    let c = poly.coefficients();
    let mut p = c[c.len() - 1];
    for &ck in c[..c.len() - 1].iter().rev() {
        p = p.mul_add(f, ck);
    }
    p = p.mul_add(f, 1.0);
    // 2^j: t's low 9 bits are j mod 512; shifted into the exponent field plus 127 << 23 they
    // are j + 127 (j = -127: 0, the float 0; j = 128: 255, infinity), wrapping past bit 31.
    let scale = f32::from_bits(t.to_bits().wrapping_shl(23).wrapping_add(0x3F80_0000));
    p * scale
}

/// Refuses registers that are not 128 threads of `f`'s elements each.
fn check<T>(f: &Fragment, threads: &[Vec<T>]) -> Result<(), FragmentError> {
    if threads.len() != WARPGROUP_THREADS as usize {
        return Err(FragmentError::Length {
            what: "threads of the warpgroup".to_string(),
            expected: WARPGROUP_THREADS as usize,
            given: threads.len(),
        });
    }
    let per = f.elements_per_thread() as usize;
    for (t, e) in threads.iter().enumerate() {
        if e.len() != per {
            return Err(FragmentError::Length {
                what: format!("elements of thread {t}"),
                expected: per,
                given: e.len(),
            });
        }
    }
    Ok(())
}

fn check_rows(what: &str, rows: &[RowPair]) -> Result<(), FragmentError> {
    if rows.len() != WARPGROUP_THREADS as usize {
        return Err(FragmentError::Length {
            what: format!("{what} (a pair per thread)"),
            expected: WARPGROUP_THREADS as usize,
            given: rows.len(),
        });
    }
    Ok(())
}

/// Each thread's own reduction of its two rows (`op` folded from `init` in element order),
/// then the quad's butterfly: `v = op(v, shfl_xor(v, 1)); v = op(v, shfl_xor(v, 2))`.
fn quad_reduce(threads: &[Vec<f32>], init: f32, op: impl Fn(f32, f32) -> f32) -> Vec<RowPair> {
    let own: Vec<RowPair> = threads
        .iter()
        .map(|e| {
            let mut p = [init; 2];
            for (i, &v) in e.iter().enumerate() {
                let r = element_row(i as u32);
                p[r] = op(p[r], v);
            }
            p
        })
        .collect();
    let butterfly = |from: &[RowPair], mask: usize| -> Vec<RowPair> {
        (0..from.len())
            .map(|t| {
                let (a, b) = (from[t], from[t ^ mask]);
                [op(a[0], b[0]), op(a[1], b[1])]
            })
            .collect()
    };
    butterfly(&butterfly(&own, 1), 2)
}

/// `tma_wgmma_row_max<N>(d, m)`: `m = max(m, max of the row)` for both rows of each thread,
/// the four threads of a quad ending with the same value (`fmaxf`: a NaN element is skipped).
pub fn row_max(f: &Fragment, threads: &[Vec<f32>], m: &mut [RowPair]) -> Result<(), FragmentError> {
    check(f, threads)?;
    check_rows("row max", m)?;
    let rows = quad_reduce(threads, f32::NEG_INFINITY, f32::max);
    for (m, r) in m.iter_mut().zip(rows) {
        *m = [m[0].max(r[0]), m[1].max(r[1])];
    }
    Ok(())
}

/// What [`row_max_lazy`] gives beside the maxima it updates: `tma_wgmma_row_max_lazy<N>`'s
/// `corr` and its return value.
#[derive(Clone, Debug, PartialEq)]
pub struct LazyMax {
    /// Per thread, its two rows' factors for the running output and sums: `2^(old scaled -
    /// new scaled)` ([`exp2_ftz`]; 0 from a max of `-inf`) where the max moved, exactly 1.0
    /// where it stayed.
    pub corr: Vec<RowPair>,
    /// Per warp (threads `32 w .. 32 w + 31`), whether a row of it moved: what every thread of
    /// the warp gets back (`__any_sync`), and whether the warp must rescale.
    pub warp_moved: Vec<bool>,
}

/// `tma_wgmma_row_max_lazy<N>(d, m, scale_log2, headroom_log2, corr)`, FlashAttention-4's lazy
/// rescale: each row's max of the elements and `m` ([`row_max`]'s) replaces `m` only where
/// `new * scale_log2 - old * scale_log2` (each step rounded to f32) is `> headroom_log2`, with
/// `corr = 2^(old * scale_log2 - new * scale_log2)`; elsewhere `m` stays and `corr` is 1. A
/// max of `-inf` that stays `-inf` is no move (the difference is NaN); one from `-inf` to a
/// finite max moves with `corr` 0. Headroom 0 moves every max whose scaled value grew: the
/// eager update's `m` and factors. [`FragmentError::Headroom`] for a headroom that is not a
/// finite number `>= 0`.
pub fn row_max_lazy(
    f: &Fragment,
    threads: &[Vec<f32>],
    m: &mut [RowPair],
    scale_log2: f32,
    headroom_log2: f32,
) -> Result<LazyMax, FragmentError> {
    // -0.0 passes as 0: the same compare.
    if !(headroom_log2.is_finite() && headroom_log2 >= 0.0) {
        return Err(FragmentError::Headroom {
            headroom_log2_bits: headroom_log2.to_bits(),
        });
    }
    check(f, threads)?;
    check_rows("row max", m)?;
    let mut new = m.to_vec();
    row_max(f, threads, &mut new)?;
    let mut corr = vec![[1.0f32; 2]; m.len()];
    let mut warp_moved = vec![false; m.len() / WARP_THREADS];
    for (t, (m, new)) in m.iter_mut().zip(new).enumerate() {
        for r in 0..2 {
            let (old_scaled, new_scaled) = (m[r] * scale_log2, new[r] * scale_log2);
            if new_scaled - old_scaled > headroom_log2 {
                corr[t][r] = exp2_ftz(old_scaled - new_scaled);
                m[r] = new[r];
                warp_moved[t / WARP_THREADS] = true;
            }
        }
    }
    Ok(LazyMax { corr, warp_moved })
}

/// `tma_wgmma_row_sum<N>(d, s)`: `s = s + (sum of the row)`, the row's sum taken as the
/// device does: each thread adds its elements of the row from 0 in element order, then the
/// quad adds pairs (`v + shfl_xor(v, 1)`, then `v + shfl_xor(v, 2)`).
pub fn row_sum(f: &Fragment, threads: &[Vec<f32>], s: &mut [RowPair]) -> Result<(), FragmentError> {
    check(f, threads)?;
    check_rows("row sum", s)?;
    let rows = quad_reduce(threads, 0.0, |a, b| a + b);
    for (s, r) in s.iter_mut().zip(rows) {
        *s = [s[0] + r[0], s[1] + r[1]];
    }
    Ok(())
}

/// `tma_wgmma_row_sum_partial<N>(d, s)`: each thread's own share of its two rows, no exchange
/// (`s = s + own`, the own sum added from 0 in element order); [`quad_sum`] adds the four shares.
pub fn row_sum_partial(
    f: &Fragment,
    threads: &[Vec<f32>],
    s: &mut [RowPair],
) -> Result<(), FragmentError> {
    check(f, threads)?;
    check_rows("row sum shares", s)?;
    for (s, e) in s.iter_mut().zip(threads) {
        let mut own = [0.0f32; 2];
        for (i, &v) in e.iter().enumerate() {
            let r = element_row(i as u32);
            own[r] += v;
        }
        *s = [s[0] + own[0], s[1] + own[1]];
    }
    Ok(())
}

/// `tma_wgmma_quad_sum` on both rows of every thread: lane ^ 1's value added, then lane ^ 2's.
pub fn quad_sum(s: &[RowPair]) -> Result<Vec<RowPair>, FragmentError> {
    check_rows("quad sums", s)?;
    let butterfly = |from: &[RowPair], mask: usize| -> Vec<RowPair> {
        (0..from.len())
            .map(|t| {
                [
                    from[t][0] + from[t ^ mask][0],
                    from[t][1] + from[t ^ mask][1],
                ]
            })
            .collect()
    };
    Ok(butterfly(&butterfly(s, 1), 2))
}

/// `tma_wgmma_row_scale<N>(d, factor)`: every element times its row's factor.
pub fn row_scale(
    f: &Fragment,
    threads: &mut [Vec<f32>],
    factor: &[RowPair],
) -> Result<(), FragmentError> {
    check(f, threads)?;
    check_rows("row factors", factor)?;
    for (e, fac) in threads.iter_mut().zip(factor) {
        for (i, v) in e.iter_mut().enumerate() {
            *v *= fac[element_row(i as u32)];
        }
    }
    Ok(())
}

/// `tma_wgmma_row_exp2<N>(d, m, scale_log2)`: every element `x` becomes
/// `exp2(`[`exp2_argument`]`(x, m_row, scale_log2))` ([`exp2_ftz`]: the device's
/// `ex2.approx.ftz.f32` is within [`EX2_MAX_ULPS`] of it).
pub fn row_exp2(
    f: &Fragment,
    threads: &mut [Vec<f32>],
    max: &[RowPair],
    scale_log2: f32,
) -> Result<(), FragmentError> {
    check(f, threads)?;
    check_rows("row max", max)?;
    for (e, m) in threads.iter_mut().zip(max) {
        for (i, v) in e.iter_mut().enumerate() {
            *v = exp2_ftz(exp2_argument(*v, m[element_row(i as u32)], scale_log2));
        }
    }
    Ok(())
}

/// `tma_wgmma_row_exp2_poly<N, POLY_OF_8, DEG>(d, m, scale_log2)`: [`row_exp2`] with the
/// elements `i` where `i % 8 < poly_of_8` raised by [`exp2_poly`] (bit for bit) and the rest
/// by the device's `ex2.approx` ([`exp2_ftz`], within [`EX2_MAX_ULPS`]): `poly_of_8` of
/// every 8 exponentials on the FMA pipe instead of MUFU. [`FragmentError::PolyShare`] past 8.
pub fn row_exp2_poly(
    f: &Fragment,
    threads: &mut [Vec<f32>],
    max: &[RowPair],
    scale_log2: f32,
    poly_of_8: u32,
    poly: Ex2Poly,
) -> Result<(), FragmentError> {
    if poly_of_8 > 8 {
        return Err(FragmentError::PolyShare { poly_of_8 });
    }
    check(f, threads)?;
    check_rows("row max", max)?;
    for (e, m) in threads.iter_mut().zip(max) {
        for (i, v) in e.iter_mut().enumerate() {
            let x = exp2_argument(*v, m[element_row(i as u32)], scale_log2);
            *v = if (i as u32) % 8 < poly_of_8 {
                exp2_poly(x, poly)
            } else {
                exp2_ftz(x)
            };
        }
    }
    Ok(())
}

/// `tma_wgmma_acc_to_a<N>(d, a)`: each thread's f32 accumulator of a `64 x N` fragment `f`
/// (N a multiple of 16) as `N / 16` A fragments of `kind` (f16 or bf16): slice `s`, register
/// `j` packs elements `8 s + 2 j` (low half) and `8 s + 2 j + 1` (high), rounded to nearest
/// even. Per thread, per k-slice.
pub fn accumulator_to_a(
    f: &Fragment,
    kind: WgmmaType,
    threads: &[Vec<f32>],
) -> Result<Vec<Vec<AFragment>>, FragmentError> {
    half(kind)?;
    check(f, threads)?;
    if f.cols() % A_COLS != 0 {
        return Err(FragmentError::KSlices {
            n: u64::from(f.cols()),
        });
    }
    threads
        .iter()
        .map(|e| {
            e.chunks_exact(8)
                .map(|s| {
                    let mut a = AFragment::default();
                    for (j, r) in a.regs.iter_mut().enumerate() {
                        *r = pack_pair(kind, s[2 * j], s[2 * j + 1])?;
                    }
                    Ok(a)
                })
                .collect()
        })
        .collect()
}

/// The `64 x 16 k` matrix (row-major, 16-bit patterns) that A fragments hold: each thread's
/// `k` slices (`slices[t][s]`), element `e` of slice `s` at `(row, 16 s + col)` of
/// [`Fragment::a_16bit`]'s position of `e`. What the register-A wgmma multiplies.
pub fn a_matrix(slices: &[Vec<AFragment>]) -> Result<Vec<u16>, FragmentError> {
    if slices.len() != WARPGROUP_THREADS as usize {
        return Err(FragmentError::Length {
            what: "threads of the warpgroup".to_string(),
            expected: WARPGROUP_THREADS as usize,
            given: slices.len(),
        });
    }
    let k = slices[0].len();
    let cols = k * A_COLS as usize;
    let mut out = vec![0u16; 64 * cols];
    for (t, thread) in slices.iter().enumerate() {
        if thread.len() != k {
            return Err(FragmentError::Length {
                what: format!("k-slices of thread {t}"),
                expected: k,
                given: thread.len(),
            });
        }
        for (s, a) in thread.iter().enumerate() {
            for (e, bits) in a.elements().into_iter().enumerate() {
                let (row, col) = d_position(t as u32, e as u32);
                out[row as usize * cols + s * A_COLS as usize + col as usize] = bits;
            }
        }
    }
    Ok(out)
}

/// The inverse of [`a_matrix`]: a `64 x cols` matrix of 16-bit patterns (row-major, `cols` a
/// multiple of 16) as each thread's A fragments, `cols / 16` k-slices per thread: what a host
/// uploads for a kernel to read into `tma_wgmma_a_frag`s.
pub fn a_fragments(matrix: &[u16], cols: usize) -> Result<Vec<Vec<AFragment>>, FragmentError> {
    if cols == 0 || cols % A_COLS as usize != 0 {
        return Err(FragmentError::KSlices { n: cols as u64 });
    }
    // A `cols` past what memory holds has no matrix: `64 * cols` is never computed wrapped.
    let expected = cols.checked_mul(64);
    if expected != Some(matrix.len()) {
        return Err(FragmentError::Length {
            what: format!("A matrix (64 x {cols}, row-major)"),
            expected: expected.unwrap_or(usize::MAX),
            given: matrix.len(),
        });
    }
    let at = |t: u32, s: usize, e: u32| {
        let (row, col) = d_position(t, e);
        u32::from(matrix[row as usize * cols + s * A_COLS as usize + col as usize])
    };
    Ok((0..WARPGROUP_THREADS)
        .map(|t| {
            (0..cols / A_COLS as usize)
                .map(|s| AFragment {
                    regs: [0u32, 1, 2, 3].map(|j| at(t, s, 2 * j) | (at(t, s, 2 * j + 1) << 16)),
                })
                .collect()
        })
        .collect())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::wgmma::AccumulatorType;

    /// The polynomial's error over every binade of `[0, 1)` shifted to every exponent the
    /// result is normal at: within the bound each type relies on, and the bound not loose
    /// (a coefficient off in its last places moves the error past it).
    #[test]
    fn exp2_poly_is_within_its_bound_of_the_power() {
        for poly in Ex2Poly::ALL {
            let mut worst = 0f64;
            let mut check = |x: f32| {
                let got = f64::from(exp2_poly(x, poly));
                let want = f64::from(x).exp2();
                let rel = (got - want).abs() / want;
                assert!(
                    rel <= poly.max_rel_error(),
                    "{poly:?} 2^{x}: {got} vs {want} ({rel:e})"
                );
                worst = worst.max(rel);
            };
            // Every 97th f32 in [0, 1) (all exponents of the fraction), at 5 integer shifts.
            for bits in (0..0x3F80_0000u32).step_by(97) {
                let f = f32::from_bits(bits);
                for j in [-126.0f32, -40.0, -1.0, 0.0, 127.0] {
                    let x = j + f;
                    if x < 128.0 {
                        check(x);
                    }
                }
            }
            assert!(
                worst > 0.8 * poly.max_rel_error(),
                "{poly:?}: worst {worst:e}"
            );
        }
    }

    #[test]
    fn exp2_poly_edges_match_the_flushing_instruction() {
        for poly in Ex2Poly::ALL {
            let e = |x: f32| exp2_poly(x, poly);
            assert_eq!(e(0.0).to_bits(), 1f32.to_bits());
            assert_eq!(e(-0.0), 1.0);
            assert_eq!(e(3.0), 8.0);
            assert_eq!(e(-126.0), f32::MIN_POSITIVE);
            assert_eq!(e(-126.5), 0.0);
            assert_eq!(e(-127.0), 0.0);
            assert_eq!(e(f32::NEG_INFINITY), 0.0);
            assert_eq!(e(-1e30), 0.0);
            assert_eq!(e(127.0), 2f32.powi(127));
            assert_eq!(e(128.0), f32::INFINITY);
            assert_eq!(e(1e30), f32::INFINITY);
            assert_eq!(e(f32::INFINITY), f32::INFINITY);
            assert!(e(f32::NAN).is_nan());
            // Subnormal arguments: 2^x within the bound of 1 either side of 0.
            for x in [
                f32::from_bits(1),
                -f32::from_bits(1),
                -f32::from_bits(0x7f_ffff),
            ] {
                assert!(
                    (f64::from(e(x)) - 1.0).abs() <= poly.max_rel_error(),
                    "{x:e}"
                );
            }
            // Results agree with exp2_ftz wherever both are exact or flushed.
            for x in [-126.0f32, -100.0, -1.0, 0.0, 5.0] {
                assert_eq!(e(x), exp2_ftz(x), "{x}");
            }
        }
        assert_eq!(Ex2Poly::Cubic.coefficients().len(), 3);
        assert_eq!(Ex2Poly::Quartic.coefficients().len(), 4);
        assert_eq!(Ex2Poly::for_type(WgmmaType::F16), Ex2Poly::Quartic);
        assert_eq!(Ex2Poly::for_type(WgmmaType::BF16), Ex2Poly::Cubic);
    }

    /// The share picks elements by index: 0 of 8 is `row_exp2`, 8 of 8 every element on the
    /// polynomial, 2 of 8 exactly elements 0, 1, 8, 9, ...; 9 of 8 a typed error.
    #[test]
    fn row_exp2_poly_takes_its_share_by_element_index() {
        let f = Fragment::accumulator(64, AccumulatorType::F32).unwrap();
        let threads: Vec<Vec<f32>> = (0..WARPGROUP_THREADS)
            .map(|t| (0..32).map(|i| -((t * 32 + i) as f32) / 997.0).collect())
            .collect();
        let max = vec![[0.25f32, -0.5]; WARPGROUP_THREADS as usize];
        let s = 0.125 * std::f32::consts::LOG2_E;
        let mut mufu = threads.clone();
        row_exp2(&f, &mut mufu, &max, s).unwrap();
        let mut none = threads.clone();
        row_exp2_poly(&f, &mut none, &max, s, 0, Ex2Poly::Cubic).unwrap();
        assert_eq!(none, mufu);
        let mut two = threads.clone();
        row_exp2_poly(&f, &mut two, &max, s, 2, Ex2Poly::Cubic).unwrap();
        for (t, row) in two.iter().enumerate() {
            for (i, v) in row.iter().enumerate() {
                let x = exp2_argument(threads[t][i], max[t][element_row(i as u32)], s);
                let want = if i % 8 < 2 {
                    exp2_poly(x, Ex2Poly::Cubic)
                } else {
                    exp2_ftz(x)
                };
                assert_eq!(v.to_bits(), want.to_bits(), "thread {t} element {i}");
            }
        }
        assert_ne!(two, mufu);
        assert_eq!(
            row_exp2_poly(&f, &mut two, &max, s, 9, Ex2Poly::Cubic),
            Err(FragmentError::PolyShare { poly_of_8: 9 })
        );
    }

    #[test]
    fn pack_puts_the_first_element_low() {
        // bf16: 1.0 = 0x3f80, 2.0 = 0x4000; f16: 1.0 = 0x3c00, -2.0 = 0xc000.
        assert_eq!(pack_pair(WgmmaType::BF16, 1.0, 2.0), Ok(0x4000_3f80));
        assert_eq!(pack_pair(WgmmaType::F16, 1.0, -2.0), Ok(0xc000_3c00));
        // Ties to even: 1 + 2^-8 is halfway between bf16 1.0 and 1 + 2^-7.
        assert_eq!(round_16(WgmmaType::BF16, 1.0 + 2f32.powi(-8)), Ok(0x3f80));
        assert_eq!(
            round_16(WgmmaType::TF32, 1.0),
            Err(FragmentError::RegisterA {
                kind: WgmmaType::TF32
            })
        );
    }

    #[test]
    fn exp2_argument_is_one_fused_multiply_add() {
        let (x, m, s) = (1.1f32, 3.3f32, 0.180_336_88f32);
        assert_eq!(exp2_argument(x, m, s), x.mul_add(s, -(m * s)));
        // A masked row (max -inf) exponentiates its -inf elements to 0, not NaN.
        let a = exp2_argument(f32::NEG_INFINITY, f32::NEG_INFINITY, s);
        assert_eq!(exp2_ftz(a), 0.0);
        assert_eq!(exp2_ftz(0.0), 1.0);
        assert_eq!(exp2_ftz(-3.0), 0.125);
        assert_eq!(exp2_ftz(-127.0), 0.0); // 2^-127 is subnormal: flushed
        assert_eq!(exp2_ftz(-126.0), f32::MIN_POSITIVE);
    }

    #[test]
    fn a_fragments_invert_a_matrix() {
        let m: Vec<u16> = (0..64 * 48).map(|i| (i * 7919 % 65521) as u16).collect();
        let frags = a_fragments(&m, 48).unwrap();
        assert_eq!((frags.len(), frags[0].len()), (128, 3));
        assert_eq!(a_matrix(&frags).unwrap(), m);
        // Thread 0, slice 1: A[0][16], A[0][17] in register 0 (low, high).
        assert_eq!(
            frags[0][1].regs[0],
            u32::from(m[16]) | (u32::from(m[17]) << 16)
        );
        assert!(a_fragments(&m, 40).is_err());
        assert!(a_fragments(&m[1..], 48).is_err());
    }

    /// Columns past what memory holds are refused, not multiplied: `64 * 2^60` overflowed
    /// (a panic in debug; in release it wrapped to 0, matched the empty matrix, and the
    /// first index panicked), and a count past `u32` was named truncated (2^32 + 8 as 8).
    #[test]
    fn a_fragments_refuse_columns_no_matrix_has() {
        for cols in [1usize << 60, usize::MAX - 15, 1 << 58] {
            assert_eq!(
                a_fragments(&[], cols),
                Err(FragmentError::Length {
                    what: format!("A matrix (64 x {cols}, row-major)"),
                    expected: cols.saturating_mul(64),
                    given: 0,
                })
            );
        }
        assert_eq!(
            a_fragments(&[], (1 << 32) + 8),
            Err(FragmentError::KSlices { n: (1 << 32) + 8 })
        );
    }

    #[test]
    fn thread_rows_are_the_rows_of_its_elements() {
        for n in (8..=256).step_by(8) {
            let f = Fragment::accumulator(n, AccumulatorType::F32).unwrap();
            for e in f.iter() {
                assert_eq!(
                    thread_rows(e.thread)[element_row(e.element)],
                    e.row,
                    "{e:?}"
                );
            }
        }
    }
}
