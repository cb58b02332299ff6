//! Inputs of the fast kernels in the three value types and two location distributions, and
//! the check of an output against the f64 reference. Shared by the example and the benchmark.

use half::{bf16, f16};

use crate::reference::Msda;
use crate::setup::{self, Rng};

/// The type of `value` and `out` (sampling locations and weights are f32).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ty {
    F16,
    Bf16,
    F32,
}

impl Ty {
    pub const ALL: [Ty; 3] = [Ty::F16, Ty::Bf16, Ty::F32];

    pub fn name(self) -> &'static str {
        match self {
            Ty::F16 => "f16",
            Ty::Bf16 => "bf16",
            Ty::F32 => "f32",
        }
    }
    pub fn bytes(self) -> usize {
        match self {
            Ty::F16 | Ty::Bf16 => 2,
            Ty::F32 => 4,
        }
    }
    /// `MSDA_DTYPE` in msda_fast.cu.
    pub fn code(self) -> u32 {
        match self {
            Ty::F16 => 0,
            Ty::Bf16 => 1,
            Ty::F32 => 2,
        }
    }
    pub fn dtype(self) -> tma::DType {
        match self {
            Ty::F16 => tma::DType::F16,
            Ty::Bf16 => tma::DType::BF16,
            Ty::F32 => tma::DType::F32,
        }
    }
    /// Round to this type and back.
    pub fn round(self, x: f64) -> f64 {
        match self {
            Ty::F16 => f16::from_f64(x).to_f64(),
            Ty::Bf16 => bf16::from_f64(x).to_f64(),
            Ty::F32 => f64::from(x as f32),
        }
    }
    /// 16-bit storage of `x` (f16 / bf16 only; f32 is stored as itself).
    pub fn to_bits16(self, x: f32) -> u16 {
        match self {
            Ty::Bf16 => bf16::from_f32(x).to_bits(),
            _ => f16::from_f32(x).to_bits(),
        }
    }
    pub fn bits16_to_f32(self, b: u16) -> f32 {
        match self {
            Ty::Bf16 => bf16::from_bits(b).to_f32(),
            _ => f16::from_bits(b).to_f32(),
        }
    }
    /// Max abs error allowed (|out| < 1): the output's half-ulp near 1 plus f32 arithmetic.
    pub fn abs_tolerance(self) -> f64 {
        match self {
            Ty::F16 => 2e-3,
            Ty::Bf16 => 1.6e-2,
            Ty::F32 => 2e-6,
        }
    }
    /// Relative L2 error allowed above the rounding floor (rounding the exact result to
    /// this type): f32 accumulation adds ~1e-7 of it.
    pub fn rel_l2_slack(self) -> f64 {
        match self {
            Ty::F16 | Ty::Bf16 => 1e-5,
            Ty::F32 => 1e-6,
        }
    }
}

/// Where the sampling points lie.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dist {
    /// Each coordinate U(-0.05, 1.05): about 17% of the points reach outside the map.
    Uniform,
    /// Deformable-DETR-like: one reference point per query (uniform, or the query's own pixel
    /// centre when Q equals the rows of the value: the encoder), each head's point p of each
    /// level p + 1 pixels from it along the head's direction, plus N(0, 2 pixels) noise.
    Local,
    /// The contention case: every point of a batch within a box 1% of each level's side
    /// around one centre per batch (U(0.1, 0.9)): at 92x160, about 1 x 1.6 pixels.
    Clustered,
}

impl Dist {
    pub const ALL: [Dist; 3] = [Dist::Uniform, Dist::Local, Dist::Clustered];
    pub fn name(self) -> &'static str {
        match self {
            Dist::Uniform => "uniform",
            Dist::Local => "local",
            Dist::Clustered => "clustered",
        }
    }
}

/// Host inputs: value in its storage type and as exact f32, locations, weights (softmax of
/// the logits, rounded to f32) and the logits (for the fused softmax).
pub struct Inputs {
    pub ty: Ty,
    pub dist: Dist,
    pub value: Vec<f32>,
    pub bits16: Vec<u16>,
    pub loc: Vec<f32>,
    pub attn: Vec<f32>,
    pub logits: Vec<f32>,
    /// Sampling points whose location is outside [0, 1] in x or y.
    pub outside: usize,
}

fn gaussian(rng: &mut Rng) -> f64 {
    let u = rng.unit().max(1e-300);
    let v = rng.unit();
    (-2.0 * u.ln()).sqrt() * (2.0 * std::f64::consts::PI * v).cos()
}

/// The reference point of query q of a batch (x, y in [0, 1]).
fn reference_point(m: &Msda, q: usize, rng: &mut Rng) -> (f64, f64) {
    if m.queries == m.spatial() {
        // Encoder: query q is pixel q of the flattened levels.
        let starts = m.level_start();
        let l = starts.iter().rposition(|&s| s <= q).unwrap_or(0);
        let (h, w) = m.levels[l];
        let i = q - starts[l];
        (
            ((i % w) as f64 + 0.5) / w as f64,
            ((i / w) as f64 + 0.5) / h as f64,
        )
    } else {
        (rng.unit(), rng.unit())
    }
}

pub fn inputs(m: &Msda, ty: Ty, dist: Dist, rng: &mut Rng) -> Inputs {
    let mut bits16 = Vec::new();
    let value: Vec<f32> = (0..m.value_len())
        .map(|_| {
            let x = rng.range(-1.0, 1.0) as f32;
            if ty == Ty::F32 {
                x
            } else {
                let b = ty.to_bits16(x);
                bits16.push(b);
                ty.bits16_to_f32(b)
            }
        })
        .collect();
    let mut loc = Vec::with_capacity(2 * m.attn_len());
    for _ in 0..m.batch {
        let centre = (rng.range(0.1, 0.9), rng.range(0.1, 0.9));
        for q in 0..m.queries {
            let (rx, ry) = reference_point(m, q, rng);
            for head in 0..m.heads {
                let theta = 2.0 * std::f64::consts::PI * head as f64 / m.heads as f64;
                let (dx, dy) = (theta.cos(), theta.sin());
                let scale = dx.abs().max(dy.abs());
                let (dx, dy) = (dx / scale, dy / scale);
                for &(h, w) in &m.levels {
                    for p in 0..m.points {
                        let (x, y) = match dist {
                            Dist::Uniform => (rng.range(-0.05, 1.05), rng.range(-0.05, 1.05)),
                            Dist::Local => {
                                let k = (p + 1) as f64;
                                let ox = k * dx + 2.0 * gaussian(rng);
                                let oy = k * dy + 2.0 * gaussian(rng);
                                (rx + ox / w as f64, ry + oy / h as f64)
                            }
                            Dist::Clustered => (
                                centre.0 + rng.range(-0.005, 0.005),
                                centre.1 + rng.range(-0.005, 0.005),
                            ),
                        };
                        loc.push(x as f32);
                        loc.push(y as f32);
                    }
                }
            }
        }
    }
    let outside = loc
        .chunks(2)
        .filter(|xy| xy.iter().any(|&v| !(0.0..=1.0).contains(&v)))
        .count();
    let pph = m.points_per_head();
    let mut attn = Vec::with_capacity(m.attn_len());
    let mut logits = Vec::with_capacity(m.attn_len());
    for _ in 0..m.batch * m.queries * m.heads {
        let group: Vec<f32> = (0..pph).map(|_| rng.range(-3.0, 3.0) as f32).collect();
        let max = group.iter().map(|&l| f64::from(l)).fold(f64::MIN, f64::max);
        let sum: f64 = group.iter().map(|&l| (f64::from(l) - max).exp()).sum();
        attn.extend(
            group
                .iter()
                .map(|&l| ((f64::from(l) - max).exp() / sum) as f32),
        );
        logits.extend(group);
    }
    Inputs {
        ty,
        dist,
        value,
        bits16,
        loc,
        attn,
        logits,
        outside,
    }
}

/// How far an output is from the f64 reference: the measures of [`setup::Check`], judged
/// against the rounding floor of a [`Ty`].
#[derive(Clone, Copy, Debug, Default)]
pub struct Check(pub setup::Check);

impl Check {
    pub fn new(ty: Ty, out: &[f64], reference: &[f64]) -> Check {
        Check(setup::Check::of(out, reference, |r| ty.round(r)))
    }
    /// At the rounding floor: relative L2 error within 10% (plus the type's slack) of what
    /// rounding the exact result gives, max abs error within the type's limit, every
    /// element finite (written: outputs are poisoned with NaN first).
    pub fn ok(&self, ty: Ty) -> bool {
        let c = &self.0;
        c.non_finite == 0
            && c.rel_l2 <= 1.1 * c.rounding_rel_l2 + ty.rel_l2_slack()
            && c.max_abs <= ty.abs_tolerance()
    }
    pub fn line(&self, ty: Ty) -> String {
        format!(
            "max abs {:.2e}, rel L2 {:.3e} (floor {:.3e}), non-finite {}",
            self.0.max_abs, self.0.rel_l2, self.0.rounding_rel_l2, self.0.non_finite,
        ) + if self.ok(ty) { " OK" } else { " FAIL" }
    }
}

/// The items of `all` whose name is in the comma-separated list in environment variable `var`
/// (all of them when it is unset): `MSDA_TYPES=f16,f32`, `MSDA_DISTS=uniform`, `MSDA_SIZES=seed`.
pub fn wanted<T: Clone>(var: &str, all: &[T], name: impl Fn(&T) -> &str) -> Vec<T> {
    match std::env::var(var) {
        Ok(list) => all
            .iter()
            .filter(|x| list.split(',').any(|w| w.trim() == name(x)))
            .cloned()
            .collect(),
        Err(_) => all.to_vec(),
    }
}

/// The sizes the example checks every kernel on: the seed (the benchmark), the encoder
/// (Q = S = 19560 queries, one per pixel), one level only, and odd sizes (4 heads, D = 64,
/// 3 levels of odd shapes, 5 points).
pub fn sizes() -> Vec<(&'static str, Msda)> {
    let seed = Msda::seed();
    vec![
        ("seed", seed.clone()),
        (
            "encoder",
            Msda {
                batch: 1,
                queries: seed.spatial(),
                ..seed.clone()
            },
        ),
        (
            "one level",
            Msda {
                batch: 2,
                queries: 500,
                points: 4,
                levels: vec![(30, 50)],
                ..seed.clone()
            },
        ),
        (
            "odd",
            Msda {
                batch: 3,
                queries: 777,
                heads: 4,
                channels: 64,
                points: 5,
                levels: vec![(37, 53), (19, 27), (10, 14)],
            },
        ),
    ]
}
