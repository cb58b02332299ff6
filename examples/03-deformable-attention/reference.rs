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
pub fn msda_reference(m: &Msda, value: &[f32], loc: &[f32], attn: &[f32]) -> Vec<f64> {
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
fn reference_batch(
    m: &Msda,
    n: usize,
    q0: usize,
    value: &[f32],
    loc: &[f32],
    attn: &[f32],
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
            for (l, &(lh_, lw_)) in m.levels.iter().enumerate() {
                for p in 0..m.points {
                    let i = pq_head * pph + l * m.points + p;
                    let (x, y) = (f64::from(loc[2 * i]), f64::from(loc[2 * i + 1]));
                    let a = f64::from(attn[i]);
                    let h_im = y * lh_ as f64 - 0.5;
                    let w_im = x * lw_ as f64 - 0.5;
                    if !(h_im > -1.0 && w_im > -1.0 && h_im < lh_ as f64 && w_im < lw_ as f64) {
                        continue;
                    }
                    let (h0, w0) = (h_im.floor(), w_im.floor());
                    let (fh, fw) = (h_im - h0, w_im - w0);
                    let (h0, w0) = (h0 as i64, w0 as i64);
                    for (dh, wh) in [(0i64, 1.0 - fh), (1, fh)] {
                        for (dw, ww) in [(0i64, 1.0 - fw), (1, fw)] {
                            let (hh, wwi) = (h0 + dh, w0 + dw);
                            if hh < 0 || wwi < 0 || hh >= lh_ as i64 || wwi >= lw_ as i64 {
                                continue;
                            }
                            let row = n * s + starts[l] + hh as usize * lw_ + wwi as usize;
                            let base = (row * heads + h) * ch;
                            let wgt = a * wh * ww;
                            for (o, &v) in acc.iter_mut().zip(&value[base..base + ch]) {
                                *o += wgt * f64::from(v);
                            }
                        }
                    }
                }
            }
        }
    }
}
