//! The multi-scale deformable attention operator on the CPU, in f64: the reference the GPU
//! kernels are compared against. Shared by the example and the benchmark.

/// Problem sizes of the seed workload.
#[derive(Clone, Debug)]
pub struct Msda {
    pub batch: usize,
    pub queries: usize,
    pub heads: usize,
    pub channels: usize,
    pub points: usize,
    /// (H, W) per level.
    pub levels: Vec<(usize, usize)>,
}

impl Msda {
    /// N = 6, heads = 8, 4 levels of 92x160, 46x80, 23x40, 12x20, Q = 1000, P = 8, C = 32.
    pub fn seed() -> Msda {
        Msda {
            batch: 6,
            queries: 1000,
            heads: 8,
            channels: 32,
            points: 8,
            levels: vec![(92, 160), (46, 80), (23, 40), (12, 20)],
        }
    }
    /// Rows of the value tensor per batch: sum of H * W.
    pub fn spatial(&self) -> usize {
        self.levels.iter().map(|(h, w)| h * w).sum()
    }
    /// First row of each level.
    pub fn level_start(&self) -> Vec<usize> {
        let mut start = Vec::new();
        let mut acc = 0;
        for (h, w) in &self.levels {
            start.push(acc);
            acc += h * w;
        }
        start
    }
    pub fn value_len(&self) -> usize {
        self.batch * self.spatial() * self.heads * self.channels
    }
    /// Sampling points per (batch, query, head): levels * points.
    pub fn points_per_head(&self) -> usize {
        self.levels.len() * self.points
    }
    pub fn attn_len(&self) -> usize {
        self.batch * self.queries * self.heads * self.points_per_head()
    }
    pub fn out_len(&self) -> usize {
        self.batch * self.queries * self.heads * self.channels
    }
}

/// out[n][q][h*C + c] = sum over levels and points of attn * bilinear(value, loc), with zero
/// padding outside each level's image (grid_sample, align_corners = false). `value` holds
/// exact f32 copies of the device's values (f16 and bf16 convert to f32 exactly);
/// locations are f32 as on the device; every product and sum is in f64. Chunks of queries run on
/// separate threads.
pub fn msda_reference<T: Copy + Into<f64> + Sync>(
    m: &Msda,
    value: &[T],
    loc: &[T],
    attn: &[T],
) -> Vec<f64> {
    let mut out = vec![0.0f64; m.out_len()];
    let per_query = m.heads * m.channels;
    if per_query == 0 || m.queries == 0 {
        return out;
    }
    // Chunks of queries of one batch, spread over the machine's threads.
    let threads = std::thread::available_parallelism().map_or(4, |n| n.get());
    let per_chunk = m.queries.div_ceil(threads.div_ceil(m.batch.max(1)));
    std::thread::scope(|scope| {
        for (n, batch) in out.chunks_mut(m.queries * per_query).enumerate() {
            for (c, chunk) in batch.chunks_mut(per_chunk * per_query).enumerate() {
                let q0 = c * per_chunk;
                scope.spawn(move || reference_batch(m, n, q0, value, loc, attn, chunk));
            }
        }
    });
    out
}

/// Queries `q0..` of batch `n` of [`msda_reference`]: `out` is their `[Q][heads * C]`.
fn reference_batch<T: Copy + Into<f64>>(
    m: &Msda,
    n: usize,
    q0: usize,
    value: &[T],
    loc: &[T],
    attn: &[T],
    out: &mut [f64],
) {
    let (heads, ch, s) = (m.heads, m.channels, m.spatial());
    let starts = m.level_start();
    let pph = m.points_per_head();
    for q in q0..(q0 + out.len() / (heads * ch)) {
        for h in 0..heads {
            let pq_head = (n * m.queries + q) * heads + h;
            let local = (q - q0) * heads + h;
            let acc = &mut out[local * ch..(local + 1) * ch];
            for (l, &(lh, lw)) in m.levels.iter().enumerate() {
                for p in 0..m.points {
                    let i = pq_head * pph + l * m.points + p;
                    let Some(b) = Bilinear::new(loc[2 * i].into(), loc[2 * i + 1].into(), lh, lw)
                    else {
                        continue;
                    };
                    let a: f64 = attn[i].into();
                    for k in b.corners() {
                        let row = n * s + starts[l] + k.pixel;
                        let base = (row * heads + h) * ch;
                        let wgt = a * k.weight;
                        for (o, &v) in acc.iter_mut().zip(&value[base..base + ch]) {
                            *o += wgt * v.into();
                        }
                    }
                }
            }
        }
    }
}

/// The bilinear sample of one point on one level (grid_sample, align_corners = false, zero
/// padding): `None` when the point lies at or beyond -1 / H / W in pixels (it adds nothing).
#[derive(Clone, Copy, Debug)]
pub struct Bilinear {
    h0: i64,
    w0: i64,
    /// Fractions of the pixel coordinates y * H - 0.5 and x * W - 0.5.
    fh: f64,
    fw: f64,
    height: usize,
    width: usize,
}

/// One in-bounds corner: its pixel (row-major in the level), its weight and the weight's
/// derivatives by the two fractions.
#[derive(Clone, Copy, Debug)]
pub struct Corner {
    pub pixel: usize,
    pub weight: f64,
    pub d_fh: f64,
    pub d_fw: f64,
}

impl Bilinear {
    pub fn new(x: f64, y: f64, height: usize, width: usize) -> Option<Bilinear> {
        let h_im = y * height as f64 - 0.5;
        let w_im = x * width as f64 - 0.5;
        if !(h_im > -1.0 && w_im > -1.0 && h_im < height as f64 && w_im < width as f64) {
            return None;
        }
        let (h0, w0) = (h_im.floor(), w_im.floor());
        Some(Bilinear {
            h0: h0 as i64,
            w0: w0 as i64,
            fh: h_im - h0,
            fw: w_im - w0,
            height,
            width,
        })
    }

    /// The corners inside the level (those outside read zeros).
    pub fn corners(&self) -> impl Iterator<Item = Corner> + '_ {
        [(0i64, 0i64), (0, 1), (1, 0), (1, 1)]
            .into_iter()
            .filter_map(move |(dh, dw)| {
                let (hh, ww) = (self.h0 + dh, self.w0 + dw);
                if hh < 0 || ww < 0 || hh >= self.height as i64 || ww >= self.width as i64 {
                    return None;
                }
                let (wh, sh) = if dh == 0 {
                    (1.0 - self.fh, -1.0)
                } else {
                    (self.fh, 1.0)
                };
                let (ww_, sw) = if dw == 0 {
                    (1.0 - self.fw, -1.0)
                } else {
                    (self.fw, 1.0)
                };
                Some(Corner {
                    pixel: hh as usize * self.width + ww as usize,
                    weight: wh * ww_,
                    d_fh: sh * ww_,
                    d_fw: wh * sw,
                })
            })
    }
}

/// The attention input of the backward: weights, or logits whose softmax over each
/// (query, head)'s L * P points are the weights (the gradient is then the logits').
#[derive(Clone, Copy, Debug)]
pub enum Attn<'a, T> {
    Weights(&'a [T]),
    Logits(&'a [T]),
}

/// The backward's three gradients, in f64: `value` `[N][S][M][D]`, `loc` `[N][Q][M][L][P][2]`,
/// `attn` `[N][Q][M][L][P]` (the weights' gradient, or the logits' with [`Attn::Logits`]).
#[derive(Clone, Debug, Default)]
pub struct Grads {
    pub value: Vec<f64>,
    pub loc: Vec<f64>,
    pub attn: Vec<f64>,
}

/// The gradients of sum(grad_out * out) by value, locations and weights (or logits), in
/// f64, `grad_out` being `[N][Q][M * D]`. Locations: the derivative of the bilinear weights
/// by the fractions (the floor is locally constant), times H or W; points outside give zero.
/// (batch, head) pairs run on separate threads (each owns its part of grad_value).
pub fn msda_backward<T: Copy + Into<f64> + Sync>(
    m: &Msda,
    value: &[T],
    loc: &[T],
    attn: Attn<'_, T>,
    grad_out: &[T],
) -> Grads {
    let (heads, ch, s) = (m.heads, m.channels, m.spatial());
    let pph = m.points_per_head();
    let pairs = m.batch * heads;
    let threads = std::thread::available_parallelism().map_or(4, |n| n.get());
    // Per (batch, head): grad_value of the pair ([S][D]), grad_loc and grad_attn of its
    // queries ([Q][L * P] (x2)).
    let parts: Vec<(Vec<f64>, Vec<f64>, Vec<f64>)> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..threads.min(pairs.max(1)))
            .map(|t| {
                scope.spawn(move || {
                    (t..pairs)
                        .step_by(threads)
                        .map(|pair| (pair, backward_pair(m, pair, value, loc, attn, grad_out)))
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        let mut all: Vec<_> = handles
            .into_iter()
            .flat_map(|h| h.join().unwrap_or_default())
            .collect();
        all.sort_by_key(|(pair, _)| *pair);
        all.into_iter().map(|(_, p)| p).collect()
    });
    let mut g = Grads {
        value: vec![0.0; m.value_len()],
        loc: vec![0.0; 2 * m.attn_len()],
        attn: vec![0.0; m.attn_len()],
    };
    for (pair, (gv, gl, ga)) in parts.iter().enumerate() {
        let (n, h) = (pair / heads, pair % heads);
        for row in 0..s {
            let dst = ((n * s + row) * heads + h) * ch;
            g.value[dst..dst + ch].copy_from_slice(&gv[row * ch..(row + 1) * ch]);
        }
        for q in 0..m.queries {
            let i = ((n * m.queries + q) * heads + h) * pph;
            g.attn[i..i + pph].copy_from_slice(&ga[q * pph..(q + 1) * pph]);
            g.loc[2 * i..2 * (i + pph)].copy_from_slice(&gl[2 * q * pph..2 * (q + 1) * pph]);
        }
    }
    g
}

/// [`msda_backward`] of one (batch, head) pair.
fn backward_pair<T: Copy + Into<f64>>(
    m: &Msda,
    pair: usize,
    value: &[T],
    loc: &[T],
    attn: Attn<'_, T>,
    grad_out: &[T],
) -> (Vec<f64>, Vec<f64>, Vec<f64>) {
    let (heads, ch, s) = (m.heads, m.channels, m.spatial());
    let (n, h) = (pair / heads, pair % heads);
    let starts = m.level_start();
    let pph = m.points_per_head();
    let mut gv = vec![0.0; s * ch];
    let mut gl = vec![0.0; 2 * m.queries * pph];
    let mut ga = vec![0.0; m.queries * pph];
    let mut weights = vec![0.0; pph];
    for q in 0..m.queries {
        let nqh = (n * m.queries + q) * heads + h;
        let g = &grad_out[nqh * ch..(nqh + 1) * ch];
        match attn {
            Attn::Weights(a) => {
                for (w, &x) in weights.iter_mut().zip(&a[nqh * pph..(nqh + 1) * pph]) {
                    *w = x.into();
                }
            }
            Attn::Logits(z) => {
                let z = &z[nqh * pph..(nqh + 1) * pph];
                let max = z.iter().map(|&x| x.into()).fold(f64::MIN, f64::max);
                let sum: f64 = z.iter().map(|&x| (x.into() - max).exp()).sum();
                for (w, &x) in weights.iter_mut().zip(z) {
                    *w = (x.into() - max).exp() / sum;
                }
            }
        }
        for (l, &(lh, lw)) in m.levels.iter().enumerate() {
            for p in 0..m.points {
                let j = l * m.points + p;
                let i = nqh * pph + j;
                let Some(b) = Bilinear::new(loc[2 * i].into(), loc[2 * i + 1].into(), lh, lw)
                else {
                    continue;
                };
                let a = weights[j];
                let (mut d_a, mut d_fh, mut d_fw) = (0.0, 0.0, 0.0);
                for k in b.corners() {
                    let pixel = starts[l] + k.pixel;
                    let base = ((n * s + pixel) * heads + h) * ch;
                    // sum_c g[c] * v[c] at this corner.
                    let mut gdotv = 0.0;
                    for (c, (&gc, &v)) in g.iter().zip(&value[base..base + ch]).enumerate() {
                        let gc: f64 = gc.into();
                        gdotv += gc * v.into();
                        gv[pixel * ch + c] += a * k.weight * gc;
                    }
                    d_a += k.weight * gdotv;
                    d_fh += k.d_fh * gdotv;
                    d_fw += k.d_fw * gdotv;
                }
                ga[q * pph + j] = d_a;
                gl[2 * (q * pph + j)] = a * d_fw * lw as f64;
                gl[2 * (q * pph + j) + 1] = a * d_fh * lh as f64;
            }
        }
        if let Attn::Logits(_) = attn {
            // d logit_j = a_j (d a_j - sum_k a_k d a_k).
            let row = &mut ga[q * pph..(q + 1) * pph];
            let dot: f64 = row.iter().zip(&weights).map(|(d, w)| d * w).sum();
            for (d, w) in row.iter_mut().zip(&weights) {
                *d = w * (*d - dot);
            }
        }
    }
    (gv, gl, ga)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lcg(state: &mut u64) -> f64 {
        *state = state
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (*state >> 11) as f64 / (1u64 << 53) as f64
    }

    /// sum(grad_out * forward(value, loc, attn)), the softmax applied to `attn` if `logits`.
    fn loss(m: &Msda, v: &[f64], loc: &[f64], attn: &[f64], logits: bool, g: &[f64]) -> f64 {
        let weights: Vec<f64> = if logits {
            attn.chunks(m.points_per_head())
                .flat_map(|z| {
                    let max = z.iter().copied().fold(f64::MIN, f64::max);
                    let sum: f64 = z.iter().map(|x| (x - max).exp()).sum();
                    z.iter().map(move |x| (x - max).exp() / sum)
                })
                .collect()
        } else {
            attn.to_vec()
        };
        msda_reference(m, v, loc, &weights)
            .iter()
            .zip(g)
            .map(|(o, g)| o * g)
            .sum()
    }

    /// The f64 backward against central finite differences of the f64 forward, for every
    /// value, location and weight (or logit) of a small problem with points inside, on the
    /// borders and outside, both attention forms.
    #[test]
    fn backward_matches_finite_differences() {
        let m = Msda {
            batch: 2,
            queries: 3,
            heads: 2,
            channels: 3,
            points: 2,
            levels: vec![(3, 4), (2, 3)],
        };
        let mut st = 5u64;
        let v: Vec<f64> = (0..m.value_len())
            .map(|_| lcg(&mut st) * 2.0 - 1.0)
            .collect();
        let loc: Vec<f64> = (0..2 * m.attn_len())
            .map(|_| lcg(&mut st) * 1.8 - 0.4)
            .collect();
        let attn: Vec<f64> = (0..m.attn_len())
            .map(|_| lcg(&mut st) * 2.0 - 1.0)
            .collect();
        let g: Vec<f64> = (0..m.out_len()).map(|_| lcg(&mut st) * 2.0 - 1.0).collect();
        let inside = (0..m.attn_len())
            .filter(|&i| {
                let l = (i % m.points_per_head()) / m.points;
                let (h, w) = m.levels[l];
                Bilinear::new(loc[2 * i], loc[2 * i + 1], h, w).is_some()
            })
            .count();
        assert!(
            inside > m.attn_len() / 2 && inside < m.attn_len(),
            "{inside}"
        );
        let eps = 1e-6;
        for logits in [false, true] {
            let a = if logits {
                Attn::Logits(&attn[..])
            } else {
                Attn::Weights(&attn[..])
            };
            let grads = msda_backward(&m, &v, &loc, a, &g);
            let fd = |which: usize, i: usize| {
                let mut x = [v.clone(), loc.clone(), attn.clone()];
                x[which][i] += eps;
                let up = loss(&m, &x[0], &x[1], &x[2], logits, &g);
                x[which][i] -= 2.0 * eps;
                let down = loss(&m, &x[0], &x[1], &x[2], logits, &g);
                (up - down) / (2.0 * eps)
            };
            for (which, analytic) in [&grads.value, &grads.loc, &grads.attn].iter().enumerate() {
                let mut nonzero = 0;
                for (i, &want) in analytic.iter().enumerate() {
                    let got = fd(which, i);
                    assert!(
                        (got - want).abs() <= 1e-6 * (1.0 + want.abs()),
                        "input {which} element {i} (logits {logits}): finite difference {got}, backward {want}"
                    );
                    nonzero += usize::from(want != 0.0);
                }
                assert!(nonzero > analytic.len() / 3, "input {which}: {nonzero}");
            }
        }
    }
}
