//! The f64 reference of one query row and the check of the GPU's row against it.
//!
//! Error model (why the tolerance is what it is): the kernel computes S in f32 (exact products
//! of 16-bit inputs, f32 sums), P = 2^(S log2(e) / sqrt(d) - max) in f32, then rounds P to the
//! input type for P V (each weight moves by at most the type's unit roundoff u, relative), sums
//! in f32 and rounds O to the input type (u again). So element e of the row is off by at most
//! about `u * A_e + u * |o_e|`, with `A_e = sum_j p_j |v_je| / l` (the weights' share of |V|),
//! plus f32 rounding, far below; the check allows twice the first term and a 1e-5 floor.
//! The log-sum-exp is f32 throughout: 1e-5 relative (plus 1e-5). A configuration that raises
//! part of P by tma's polynomial (`Config::poly`) moves each weight by up to its relative
//! error e more (`Config::exp_rel_error`): O by up to e (A_e + |o_e|) <= 2 e A_e, of which
//! the check adds e A_e (the rest is inside the 2 u A_e margin: e <= 0.02 u), and the
//! log-sum-exp by up to e, which it adds.

use crate::gpu::{Problem, Shape};
use crate::kernel::{Config, In};

/// The exact (f64) output row `row` of head `bh` (= b H + h): O's row and its log-sum-exp,
/// and each element's tolerance.
pub struct RefRow {
    pub o: Vec<f64>,
    pub lse: f64,
    pub tol: Vec<f64>,
    pub lse_tol: f64,
}

/// Row `row` of head `bh` (= b H + h): the exact scores `q . k_j / sqrt(d)` of the keys it
/// sees (all, or up to the row under causal), and the element reader of its key/value head.
fn scores(
    p: &Problem,
    causal: bool,
    bh: usize,
    row: usize,
) -> (Vec<f64>, impl Fn(&[u16], usize, usize) -> f64 + '_) {
    let Shape {
        h, hkv, sq, sk, d, ..
    } = p.shape;
    let (b, head) = (bh / h, bh % h);
    let bh_kv = b * hkv + head / (h / hkv);
    let t = p.input;
    let q: Vec<f64> = (0..d)
        .map(|e| f64::from(t.value_of(p.q_host[(bh * sq + row) * d + e])))
        .collect();
    let kv =
        move |buf: &[u16], j: usize, e: usize| f64::from(t.value_of(buf[(bh_kv * sk + j) * d + e]));
    let keys = if causal { (row + 1).min(sk) } else { sk };
    let scale = 1.0 / (d as f64).sqrt();
    let s = (0..keys)
        .map(|j| (0..d).map(|e| q[e] * kv(&p.k_host, j, e)).sum::<f64>() * scale)
        .collect();
    (s, kv)
}

pub fn reference_row(p: &Problem, c: &Config, bh: usize, row: usize) -> RefRow {
    let e = c.exp_rel_error();
    let d = p.shape.d;
    let t = p.input;
    let (s, kv) = scores(p, c.causal, bh, row);
    let m = s.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let w: Vec<f64> = s.iter().map(|x| (x - m).exp()).collect();
    let l: f64 = w.iter().sum();
    let mut o = vec![0.0; d];
    let mut a = vec![0.0; d];
    for (j, wj) in w.iter().enumerate() {
        for e in 0..d {
            let v = kv(&p.v_host, j, e);
            o[e] += wj * v;
            a[e] += wj * v.abs();
        }
    }
    let u = t.unit_roundoff();
    let tol = (0..d)
        .map(|j| (2.0 * u + e) * a[j] / l + u * (o[j] / l).abs() + 1e-5)
        .collect();
    let lse = m + l.ln();
    RefRow {
        o: o.into_iter().map(|x| x / l).collect(),
        lse,
        tol,
        lse_tol: 1e-5 * (1.0 + lse.abs()) + e,
    }
}

/// The first few mismatches of one row (empty: the row is right).
pub fn check_row(
    r: &RefRow,
    o: &[u16],
    lse: f32,
    t: In,
    bh: usize,
    row: usize,
    out: &mut Vec<String>,
) {
    let lse = f64::from(lse);
    // (A NaN fails: `is_some_and` on the comparison, not a negated `<=`.)
    let close = |d: f64, tol: f64| d.partial_cmp(&tol).is_some_and(|o| o.is_le());
    if !close((lse - r.lse).abs(), r.lse_tol) {
        out.push(format!(
            "head {bh} row {row}: lse {lse} (want {}, off {:.2e})",
            r.lse,
            (lse - r.lse).abs()
        ));
    }
    for (e, bits) in o.iter().enumerate() {
        let got = f64::from(t.value_of(*bits));
        if !close((got - r.o[e]).abs(), r.tol[e]) {
            out.push(format!(
                "head {bh} row {row} col {e}: {got} (want {:.6}, off {:.2e} > {:.2e})",
                r.o[e],
                (got - r.o[e]).abs(),
                r.tol[e]
            ));
            if out.len() > 8 {
                return;
            }
        }
    }
}

/// Whether row `row` of head `bh` moves its running max by more than `headroom_log2` (scaled,
/// log2: its weights would grow past 2^headroom) after its first block of `bn` keys: the path
/// `Config::lazy` rescales O on. From the exact scores (the kernel's f32 ones differ by far
/// less than a headroom of 8).
pub fn moves_past_first_block(
    p: &Problem,
    c: &Config,
    bh: usize,
    row: usize,
    headroom_log2: f64,
) -> bool {
    let (s, _) = scores(p, c.causal, bh, row);
    let mut m = f64::NEG_INFINITY;
    for (block, keys) in s.chunks(c.bn as usize).enumerate() {
        let block_max =
            keys.iter().fold(f64::NEG_INFINITY, |a, &x| a.max(x)) * std::f64::consts::LOG2_E;
        if block > 0 && block_max - m > headroom_log2 {
            return true;
        }
        m = m.max(block_max);
    }
    false
}
