//! The grouped GEMM of examples/08-grouped-gemm: routing (how many rows each group gets), a
//! problem on the GPU (A's routed rows back to back, every group's B, D), the launch of
//! examples/05-gemm's kernel with its grouped schedule, the checks and the baseline (a loop
//! of cuBLAS calls, one a group). Shared by the example and `benches/grouped_gemm.rs`.

use std::sync::Arc;

use cudarc::driver::{CudaSlice, DevicePtr};
use tma::runtime::{Kernel, LaunchConfig, Module, TensorMap};

use crate::check::{compare, unit_roundoff, Compare};
use crate::compile::Built;
use crate::gpu::{from_bits, random_bits, Gpu, OutBuf};
use crate::kernel::{Config, Epi, In, Kind, Out, Plan, Res};
use crate::rng::Rng;

/// How routed rows fall on groups.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Routing {
    /// Each row picks a group uniformly.
    Uniform,
    /// Group g is picked with weight 1 / (g + 1)^1.2 (a few hot experts, many cold), and
    /// every 7th group gets no row at all.
    Skewed,
}

impl Routing {
    pub fn name(self) -> &'static str {
        match self {
            Routing::Uniform => "uniform",
            Routing::Skewed => "skewed",
        }
    }

    /// Rows per group for `rows` routed rows over `groups` groups.
    pub fn counts(self, groups: usize, rows: usize, rng: &mut Rng) -> Vec<i32> {
        let w: Vec<f64> = (0..groups)
            .map(|g| match self {
                Routing::Uniform => 1.0,
                Routing::Skewed if g % 7 == 3 => 0.0,
                Routing::Skewed => 1.0 / ((g + 1) as f64).powf(1.2),
            })
            .collect();
        let total: f64 = w.iter().sum();
        let cdf: Vec<f64> = w
            .iter()
            .scan(0.0, |s, &x| {
                *s += x / total;
                Some(*s)
            })
            .collect();
        let mut c = vec![0i32; groups];
        for _ in 0..rows {
            let u = (rng.next() >> 11) as f64 / (1u64 << 53) as f64;
            let g = cdf.partition_point(|&x| x <= u).min(groups - 1);
            c[g] += 1;
        }
        c
    }
}

/// The configurations tried: the large tile (alone and in 2-CTA clusters), 128 x 128 ones and
/// ping-pong consumers of 128 x 128, 64 x 256 and 128 x 192 tiles, each persistent, with the
/// TMA-store epilogue through per-consumer maps updated on the device, and with the direct
/// epilogue (stores clipped by the kernel) to measure the update's cost.
pub fn configs(input: In) -> Vec<Config> {
    let ws = |bn, stages, epi| Config {
        kind: Kind::WS2,
        bm: 128,
        bn,
        stages,
        cm: 1,
        cn: 1,
        persistent: true,
        epi,
        input,
        out: Out::of(input),
        wg_release: false,
    };
    // 2-CTA clusters along M multicast each group's B (the large groups' configuration).
    let c2 = |c: Config| Config { cm: 2, ..c };
    let pp = |bm, bn, stages| ping_pong(bm, ws(bn, stages, Epi::Tma { nb: 2 }));
    vec![
        ws(256, 4, Epi::Tma { nb: 2 }),
        c2(ws(256, 4, Epi::Tma { nb: 2 })),
        c2(ws(256, 4, Epi::Direct)),
        ws(128, 6, Epi::Tma { nb: 2 }),
        ws(128, 6, Epi::Direct),
        pp(128, 128, 5),
        pp(64, 256, 4),
        // A consumer's 128 x 192 tile (192 accumulators a thread, the most that fit its 232
        // registers: 128 x 256 needs 256): ping-pong's epilogue under the other's mainloop with
        // less operand traffic a product than 128 x 128. N = 768 is 4 tiles; D's stores are
        // 3 chunks of 64 columns. Measured (H100, 128 experts x 65536 rows, BENCHMARKS.md): the
        // fastest of the configurations on all four shapes.
        ping_pong(128, ws(192, 4, Epi::Tma { nb: 3 })),
        // 256 x 192 tiles, the consumers 128 rows each (192 accumulators a thread): 0.0091
        // operand elements a product against 128 x 256's 0.0117, three stages (four do not fit).
        // Measured (H100, 8 experts x 65536 rows, two calls): the fastest or tied there,
        // 0.95-1.04x the cuBLAS loop; 256 x 128, alone or in 2-CTA clusters, ping-pong
        // 128 x 192 in 2-CTA clusters and this tile in 2-CTA clusters (B multicast: 0.83-1.00x
        // the loop against 0.91-1.06x alone, one call) were no faster and are not kept.
        Config {
            bm: 256,
            ..ws(192, 3, Epi::Tma { nb: 3 })
        },
    ]
}

/// `c` as a ping-pong kernel of BM = `bm`: each consumer owns whole tiles, its epilogue under
/// the other's mainloop (short K, groups whose many small tiles end often, and the weight
/// gradient's tiles of few tokens, where dW's store is most of a tile's time).
pub fn ping_pong(bm: u32, c: Config) -> Config {
    Config {
        kind: Kind::PingPong,
        bm,
        ..c
    }
}

/// The grouped plans of [`configs`] (the ones whose shared memory fits: the plan says).
pub fn plans(input: In) -> Vec<Res<Plan>> {
    configs(input).into_iter().map(Plan::grouped).collect()
}

/// The first row (or token) of each group of `counts` (a negative count as 0), and the end.
pub fn starts(counts: &[i32]) -> Vec<usize> {
    let mut s = vec![0usize];
    for &r in counts {
        s.push(s[s.len() - 1] + r.max(0) as usize);
    }
    s
}

/// The rows (or tokens) of all groups of `counts` (a negative count as 0).
pub fn total(counts: &[i32]) -> usize {
    counts.iter().map(|&r| r.max(0) as usize).sum()
}

/// One grouped problem: G groups of shared N and K, rows[g] routed rows each (on the device;
/// the host keeps a copy only for the baseline and the checks).
pub struct Problem {
    pub groups: usize,
    pub n: usize,
    pub k: usize,
    pub input: In,
    pub rows: Vec<i32>,
    pub rows_dev: CudaSlice<i32>,
    /// A: the routed rows back to back [sum rows][K]; B: every group's [N][K], [G * N][K].
    pub a_host: Vec<u16>,
    pub b_host: Vec<u16>,
    pub a: CudaSlice<u16>,
    pub b: CudaSlice<u16>,
}

impl Problem {
    pub fn new(
        gpu: &Gpu,
        rows: Vec<i32>,
        n: usize,
        k: usize,
        input: In,
        rng: &mut Rng,
    ) -> Res<Problem> {
        // A holds at least one row (a problem with no routed row still has buffers).
        let a_host = random_bits(total(&rows).max(1) * k, input, rng.next());
        let b_host = random_bits(rows.len() * n * k, input, rng.next());
        Ok(Problem {
            groups: rows.len(),
            n,
            k,
            input,
            rows_dev: gpu.stream.clone_htod(&rows)?,
            a: gpu.stream.clone_htod(&a_host)?,
            b: gpu.stream.clone_htod(&b_host)?,
            rows,
            a_host,
            b_host,
        })
    }
    pub fn total_rows(&self) -> usize {
        total(&self.rows)
    }
    pub fn flops(&self) -> f64 {
        2.0 * self.total_rows() as f64 * self.n as f64 * self.k as f64
    }
    /// The first row of each group (and the end).
    pub fn starts(&self) -> Vec<usize> {
        starts(&self.rows)
    }
}

/// A grouped configuration loaded, with its persistent grid.
pub struct Loaded {
    pub config: Config,
    pub kernel: Kernel,
    pub grid: u32,
    plan: Plan,
}

impl Loaded {
    pub fn new(gpu: &Gpu, built: &Built) -> Res<Arc<Loaded>> {
        let module = Module::load(&gpu.ctx, built.compiled.clone())?;
        let kernel = module.kernel("gemm")?;
        let grid = persistent_grid(gpu, &kernel, &built.plan.config)?;
        Ok(Arc::new(Loaded {
            config: built.plan.config,
            kernel,
            grid,
            plan: built.plan.clone(),
        }))
    }
}

/// A persistent grid for `kernel` (of `config`'s plan): as many clusters as fit the GPU at
/// once, in blocks; an error when none fits.
pub fn persistent_grid(gpu: &Gpu, kernel: &Kernel, config: &Config) -> Res<u32> {
    let cl = config.cluster();
    let cfg = kernel.plan_config(&gpu.stream, (gpu.sms * cl, 1, 1))?;
    let grid = kernel.max_active_clusters(&cfg)? * cl;
    if grid == 0 {
        return Err(format!("{config}: no CTA of this configuration fits the GPU").into());
    }
    Ok(grid)
}

/// A launch over one problem: the maps (A over the routed rows, B over [G * N][K], D over
/// [rows][N], the template each consumer copies and re-points at its group's end), the
/// workspace of per-consumer maps (128 bytes each, 128-byte aligned: cudarc's allocations
/// are 256-byte aligned).
pub struct Launch {
    loaded: Arc<Loaded>,
    cfg: LaunchConfig,
    args: GemmArgs,
}

/// Tile-rows of a group the raster walks before the next tile-column, unless a launch is told
/// otherwise ([`GemmArgs::raster`]): example 05's.
pub const RASTER_ROWS: i32 = 8;

/// `gemm`'s arguments in the grouped and the weight-gradient mode (kernel.cu gives both one
/// parameter list): A's, B's and D's maps, D, (M, N, K, groups), the raster's tile-rows, the
/// groups' device counts (rows or tokens), the mode's workspace.
pub struct GemmArgs {
    pub maps: [TensorMap; 3],
    pub d_addr: u64,
    pub dims: [i32; 4],
    /// Tile-rows of a group the raster walks before the next tile-column (1 or more).
    pub raster: i32,
    pub counts_addr: u64,
    pub workspace: CudaSlice<u8>,
}

impl GemmArgs {
    /// `gemm` over these arguments.
    ///
    /// # Safety
    /// `kernel` is `gemm` compiled with `GEMM_GROUPED` or `GEMM_WGRAD`; the maps cover buffers
    /// that outlive the launch, D's address is a live output of the configuration's type and
    /// size, the counts are `dims[3]` device ints whose sum the maps cover, and the workspace
    /// is what the mode reads or writes (the caller's SAFETY says which).
    pub unsafe fn launch(&self, gpu: &Gpu, kernel: &Kernel, cfg: &LaunchConfig) -> Res<()> {
        let ws = self.workspace.device_ptr(&gpu.stream).0;
        let group = self.raster.max(1);
        let mut l = kernel.launch_builder(cfg);
        l.arg(&self.maps[0])
            .arg(&self.maps[1])
            .arg(&self.maps[2])
            .arg(&self.d_addr)
            .arg(&self.dims[0])
            .arg(&self.dims[1])
            .arg(&self.dims[2])
            .arg(&group)
            .arg(&self.counts_addr)
            .arg(&self.dims[3])
            .arg(&ws);
        // SAFETY: (CUtensorMap x 3, void* D, int M, int N, int K, int group, const int* counts,
        // int groups, CUtensorMap* workspace) as kernel.cu declares in both modes; the rest is
        // this function's contract.
        unsafe { l.launch() }?;
        Ok(())
    }
}

/// D's map over `[rows][cols]` of `d` for the TMA-store epilogue; the direct epilogue has no
/// D map, and `stand_in` (any valid map) fills the parameter.
pub fn d_map(
    plan: &Plan,
    d: &OutBuf,
    rows: u64,
    cols: u64,
    stand_in: impl FnOnce() -> Res<TensorMap>,
) -> Res<TensorMap> {
    Ok(match (&plan.d, d) {
        (Some(pd), OutBuf::Half(buf)) => {
            TensorMap::new_raw_bits(&pd.bind(&[rows, cols], None)?, buf)?
        }
        (Some(pd), OutBuf::Single(buf)) => TensorMap::new(&pd.bind(&[rows, cols], None)?, buf)?,
        (None, _) => stand_in()?,
    })
}

impl Launch {
    pub fn new(gpu: &Gpu, loaded: &Arc<Loaded>, p: &Problem, d: &OutBuf) -> Res<Launch> {
        // B's [G * N][K] view is indexed by i32 rows in the kernel.
        if p.groups == 0 || p.groups * p.n > i32::MAX as usize {
            return Err(format!(
                "groups = {}: 1 or more, and groups x N = {} below 2^31 (B's rows)",
                p.groups,
                p.groups * p.n
            )
            .into());
        }
        let total = p.total_rows().max(1) as u64;
        let (n, k) = (p.n as u64, p.k as u64);
        let plan = &loaded.plan;
        let ma = TensorMap::new_raw_bits(&plan.a.bind(&[total, k], None)?, &p.a)?;
        let mb = TensorMap::new_raw_bits(&plan.b.bind(&[p.groups as u64 * n, k], None)?, &p.b)?;
        let md = d_map(plan, d, total, n, || {
            Ok(TensorMap::new_raw_bits(
                &plan.a.bind(&[total, k], None)?,
                &p.a,
            )?)
        })?;
        let cfg = loaded
            .kernel
            .plan_config(&gpu.stream, (loaded.grid, 1, 1))?;
        let consumers = loaded.config.consumers() as usize;
        let workspace = gpu
            .stream
            .alloc_zeros::<u8>(128 * loaded.grid as usize * consumers)?;
        Ok(Launch {
            loaded: loaded.clone(),
            cfg,
            args: GemmArgs {
                maps: [ma, mb, md],
                d_addr: d.addr(&gpu.stream),
                dims: [total as i32, p.n as i32, p.k as i32, p.groups as i32],
                raster: RASTER_ROWS,
                counts_addr: p.rows_dev.device_ptr(&gpu.stream).0,
                workspace,
            },
        })
    }

    /// The raster's tile-rows of this launch's groups (tuning; [`RASTER_ROWS`] otherwise).
    pub fn set_raster(&mut self, rows: i32) {
        self.args.raster = rows.max(1);
    }

    pub fn run(&mut self, gpu: &Gpu) -> Res<()> {
        // SAFETY: gemm compiled with GEMM_GROUPED (Plan::grouped); the maps cover the
        // problem's A ([rows][K]), B ([G * N][K]) and D ([rows][N]) buffers, which the caller
        // holds past the launch; the counts are G row counts summing to at most the maps' rows
        // (Problem::new); the workspace is 128 bytes per CTA and consumer of this grid (the
        // consumers' D maps).
        unsafe { self.args.launch(gpu, &self.loaded.kernel, &self.cfg) }
    }
}

/// The baseline and reference: one cuBLAS GEMM a non-empty group, into `d`.
pub fn cublas_loop(gpu: &Gpu, p: &Problem, out: Out, d: &OutBuf) -> Res<()> {
    let s = &gpu.stream;
    let (a, b, dd) = (p.a.device_ptr(s).0, p.b.device_ptr(s).0, d.addr(s));
    let starts = p.starts();
    let (n, k) = (p.n as u64, p.k as u64);
    let ob = out.bytes();
    for (g, &r) in p.rows.iter().enumerate() {
        if r <= 0 {
            continue;
        }
        let row0 = starts[g] as u64;
        // SAFETY: group g's rows of A (row0.., K each), its B ([N][K] at g * N * K) and its rows
        // of D lie inside the problem's buffers (2-byte inputs, `ob`-byte outputs).
        unsafe {
            gpu.cublas.gemm(
                r as usize,
                p.n,
                p.k,
                p.input,
                out,
                a + row0 * k * 2,
                b + g as u64 * n * k * 2,
                dd + row0 * n * ob,
            )
        }?;
    }
    Ok(())
}

/// How far the kernel's D is from cuBLAS's (every element: example 05's comparison and
/// bound) and from exact f64 sums (samples in every non-empty group, its first and last rows
/// included, relative to the largest reference element).
pub struct Check {
    pub elements: Compare,
    pub samples: usize,
    pub sample_max_err: f64,
}

impl Check {
    /// Every element within example 05's bound of cuBLAS's, and every sample within one ulp
    /// of the largest element (2 units of roundoff of the output type) of the exact sum.
    pub fn ok(&self, out: Out) -> bool {
        self.elements.ok() && self.sample_max_err <= 2.0 * unit_roundoff(out)
    }
}

pub fn check(p: &Problem, out: Out, d: &[f32], reference: &[f32], rng: &mut Rng) -> Check {
    let len = p.total_rows() * p.n;
    let cols = p.n;
    let scale = reference[..len]
        .iter()
        .fold(0f64, |m, &x| m.max(f64::from(x).abs()))
        .max(1e-30);
    let mut c = Check {
        elements: compare(&d[..len], &reference[..len], out),
        samples: 0,
        sample_max_err: 0.0,
    };
    let starts = p.starts();
    let a = |i: usize| f64::from(from_bits(p.a_host[i], p.input));
    let b = |i: usize| f64::from(from_bits(p.b_host[i], p.input));
    for (g, (&rows, &start)) in p.rows.iter().zip(&starts).enumerate() {
        let r = rows.max(0) as usize;
        if r == 0 {
            continue;
        }
        for s in 0..6 {
            let row = match s {
                0 => 0,
                1 => r - 1,
                _ => rng.below(r as u64) as usize,
            };
            let col = rng.below(cols as u64) as usize;
            let gr = start + row;
            let exact: f64 = (0..p.k)
                .map(|kk| a(gr * p.k + kk) * b((g * cols + col) * p.k + kk))
                .sum();
            let got = f64::from(d[gr * cols + col]);
            c.samples += 1;
            let err = (got - exact).abs() / scale;
            c.sample_max_err = if got.is_finite() {
                c.sample_max_err.max(err)
            } else {
                f64::INFINITY
            };
        }
    }
    c
}

/// The output buffer for a problem, poisoned (NaN) before each checked run.
pub fn out_buf(gpu: &Gpu, p: &Problem, out: Out) -> Res<OutBuf> {
    OutBuf::new(gpu, p.total_rows().max(1) * p.n, out)
}
