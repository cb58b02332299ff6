//! The weight-gradient grouped GEMM of examples/08-grouped-gemm (issue 26's ragged K): for each
//! group g of tokens[g] routed tokens (a device array; zeros allowed), dW_g[N][K] = dY_g^T X_g
//! over the group's rows of dY [T][N] and X [T][K] (the tokens back to back, as the forward's A),
//! bf16 in, fp32 accumulation, bf16 or f32 out. examples/05-gemm's kernel with `GEMM_WGRAD`
//! (`Plan::wgrad`): A and B MN-major over the tokens, per-group maps of both built on the device
//! once per launch (the prologue kernel `gemm_wgrad_maps`, then `gemm`) so each group's k-loop
//! stops at its own last token. Shared by the example and `benches/grouped_gemm.rs`.

use std::sync::Arc;

use cudarc::driver::{CudaSlice, DevicePtr};
use tma::runtime::{Kernel, LaunchConfig, Module, TensorMap};

use crate::check::{apart, compare_within, unit_roundoff, Compare};
use crate::compile::Built;
use crate::gpu::{from_bits, random_bits, Gpu, OutBuf};
use crate::grouped::{self, GemmArgs};
use crate::kernel::{Config, Epi, In, Kind, Out, Plan, Res};
use crate::rng::Rng;

/// The weight-gradient configurations: the large tile (alone and in 2-CTA clusters, X
/// multicast), 128 x 128 with the TMA-store and the direct epilogue, the large tile with f32
/// out (dW kept in fp32 for the optimizer), ping-pong consumers (128 x 128, 64 x 256, 128 x
/// 192) and 256 x 192 tiles.
pub fn configs(input: In) -> Vec<Config> {
    let ws = |bn, stages, epi, out| Config {
        kind: Kind::WS2,
        bm: 128,
        bn,
        stages,
        cm: 1,
        cn: 1,
        persistent: true,
        epi,
        input,
        out,
        wg_release: false,
    };
    let o = Out::of(input);
    let c2 = |c: Config| Config { cm: 2, ..c };
    let pp = |bm, bn, stages| grouped::ping_pong(bm, ws(bn, stages, Epi::Tma { nb: 2 }, o));
    vec![
        ws(256, 4, Epi::Tma { nb: 2 }, o),
        c2(ws(256, 4, Epi::Tma { nb: 2 }, o)),
        ws(128, 6, Epi::Tma { nb: 2 }, o),
        ws(128, 6, Epi::Direct, o),
        ws(256, 4, Epi::Tma { nb: 2 }, Out::F32),
        pp(128, 128, 5),
        pp(64, 256, 4),
        grouped::ping_pong(128, ws(192, 4, Epi::Tma { nb: 3 }, o)),
        // 256 x 192 tiles (grouped.rs says why): measured (H100, 8 experts) the fastest or tied
        // on 3 of the 4 shapes, 1.01-1.05x the cuBLAS loop there.
        Config {
            bm: 256,
            ..ws(192, 3, Epi::Tma { nb: 3 }, o)
        },
    ]
}

/// The weight-gradient plans of [`configs`].
pub fn plans(input: In) -> Vec<Res<Plan>> {
    configs(input).into_iter().map(Plan::wgrad).collect()
}

/// Why a configuration cannot run a problem (None: it can). dY's and X's rows must be
/// 16-byte multiples (TMA's global strides), and the TMA-store epilogue writes dW as one
/// [G * N][K] map in 64-row chunks per consumer, so N must be whole chunks (the direct
/// epilogue clips any N).
pub fn unsupported(c: &Config, n: usize, k: usize) -> Option<String> {
    if n % 8 != 0 || k % 8 != 0 || n == 0 || k == 0 {
        return Some(format!(
            "N = {n}, K = {k}: both non-zero multiples of 8 (16-byte rows of dY and X)"
        ));
    }
    let rows = c.consumer_rows() as usize;
    if matches!(c.epi, Epi::Tma { .. }) && n % rows != 0 {
        return Some(format!(
            "{c}: N = {n} is not a multiple of a consumer's {rows} rows (the TMA-store epilogue writes dW as one [G * N][K] map); the direct epilogue clips it"
        ));
    }
    None
}

/// The CPU check of one weight-gradient plan (no GPU): its MN-major A and B tiles loaded by
/// tma's CPU model of TMA from a random `[tokens][columns]` matrix (three blocks of tokens,
/// three tiles of columns, the tile at the middle one), then read back through every
/// descriptor the kernel builds (each 64-row block of A, each k-slice) by tma's model of what
/// wgmma reads: each element read must be dY's or X's element (column, token). Also a box of
/// tokens past a group's end: the model zero-fills it, as the per-group maps make TMA do.
/// Returns the elements checked.
pub fn cpu_check(plan: &Plan, rng: &mut Rng) -> Res<u64> {
    use tma::model;
    use tma::wgmma::read::{read_operand, ReadShape};
    use tma::wgmma::OperandPlan;
    let c = &plan.config;
    let mut read = 0;
    for (valid, cols) in [(&plan.a, u64::from(c.bm)), (&plan.b, u64::from(c.bn))] {
        let op = OperandPlan::new(valid).ok_or("not an operand tile")?;
        if op.mn != cols || op.k != u64::from(crate::kernel::BK) || !op.transpose() {
            return Err(format!(
                "{c}: tile {}: MN {} K {} transpose {} (want {cols}, 64, MN-major)",
                valid.spec().name,
                op.mn,
                op.k,
                op.transpose()
            )
            .into());
        }
        let bk = u64::from(crate::kernel::BK);
        let e = op.kind.bytes();
        // The group: tokens [0, 2 BK + 5) (its last block is 5 tokens, the rest zero-filled).
        for (tokens, kb) in [(3 * bk, 1u64), (2 * bk + 5, 2)] {
            let global = [tokens, 3 * cols];
            let bound = valid.bind(&global, None)?;
            let mut bytes = vec![0u8; (global[0] * global[1] * e) as usize];
            for b in bytes.iter_mut() {
                *b = rng.next() as u8;
            }
            let origin = [(kb * bk) as i64, cols as i64];
            let smem = model::load(&bound, &bytes, &origin)?;
            let base = 1024 * 37;
            let shape = ReadShape {
                operand: op.operand.operand,
                major: op.operand.major,
                kind: op.kind,
                n: op.mn,
            };
            for block in 0..op.m_blocks {
                for slice in 0..op.k_slices {
                    let desc = op.descriptor(valid, base, slice, block)?.encode()?;
                    let got = read_operand(desc, &shape, &smem, base)?;
                    for row in 0..shape.rows() {
                        for k in 0..shape.k() {
                            let (col, tok) =
                                (cols + block * 64 + row, kb * bk + slice * op.shape.k + k);
                            let want = if tok < tokens {
                                let at = ((tok * global[1] + col) * e) as usize;
                                bytes[at..at + e as usize].to_vec()
                            } else {
                                vec![0u8; e as usize]
                            };
                            if got[(row * shape.k() + k) as usize] != want {
                                return Err(format!(
                                    "{c}: tile {}: block {block} k-slice {slice} reads the wrong element at column {col}, token {tok} ({tokens} tokens)",
                                    valid.spec().name
                                )
                                .into());
                            }
                            read += 1;
                        }
                    }
                }
            }
        }
    }
    Ok(read)
}

/// One weight-gradient problem: G groups of shared N and K, tokens[g] tokens each (on the
/// device; the host keeps a copy for the baseline and the checks).
pub struct Problem {
    pub groups: usize,
    pub n: usize,
    pub k: usize,
    pub input: In,
    pub tokens: Vec<i32>,
    pub tokens_dev: CudaSlice<i32>,
    /// dY [T][N] and X [T][K], the groups' tokens back to back.
    pub dy_host: Vec<u16>,
    pub x_host: Vec<u16>,
    pub dy: CudaSlice<u16>,
    pub x: CudaSlice<u16>,
}

impl Problem {
    pub fn new(
        gpu: &Gpu,
        tokens: Vec<i32>,
        n: usize,
        k: usize,
        input: In,
        rng: &mut Rng,
    ) -> Res<Problem> {
        // dY and X hold at least one row (a problem with no token still has buffers).
        let total = grouped::total(&tokens).max(1);
        let dy_host = random_bits(total * n, input, rng.next());
        let x_host = random_bits(total * k, input, rng.next());
        Ok(Problem {
            groups: tokens.len(),
            n,
            k,
            input,
            tokens_dev: gpu.stream.clone_htod(&tokens)?,
            dy: gpu.stream.clone_htod(&dy_host)?,
            x: gpu.stream.clone_htod(&x_host)?,
            tokens,
            dy_host,
            x_host,
        })
    }
    pub fn total_tokens(&self) -> usize {
        grouped::total(&self.tokens)
    }
    pub fn flops(&self) -> f64 {
        2.0 * self.total_tokens() as f64 * self.n as f64 * self.k as f64
    }
    /// The first token of each group (and the end).
    pub fn starts(&self) -> Vec<usize> {
        self.operands().starts()
    }
    /// The host's copy of the operands (what the checks read).
    pub fn operands(&self) -> Operands<'_> {
        Operands {
            n: self.n,
            k: self.k,
            input: self.input,
            tokens: &self.tokens,
            dy: &self.dy_host,
            x: &self.x_host,
        }
    }
}

/// A weight-gradient problem's operands on the host: dY [T][N] and X [T][K] (bits of the input
/// type), the groups' tokens back to back.
pub struct Operands<'a> {
    pub n: usize,
    pub k: usize,
    pub input: In,
    pub tokens: &'a [i32],
    pub dy: &'a [u16],
    pub x: &'a [u16],
}

impl Operands<'_> {
    /// The first token of each group (and the end).
    pub fn starts(&self) -> Vec<usize> {
        grouped::starts(self.tokens)
    }
}

/// dW for a problem: [G][N][K] of `out`, poisoned (NaN) before each checked run.
pub fn out_buf(gpu: &Gpu, p: &Problem, out: Out) -> Res<OutBuf> {
    OutBuf::new(gpu, p.groups * p.n * p.k, out)
}

/// A weight-gradient configuration loaded, with its persistent grid: the GEMM and its
/// prologue `gemm_wgrad_maps` (one module).
pub struct Loaded {
    pub config: Config,
    pub kernel: Kernel,
    pub maps: Kernel,
    pub grid: u32,
    plan: Plan,
}

impl Loaded {
    pub fn new(gpu: &Gpu, built: &Built) -> Res<Arc<Loaded>> {
        let module = Module::load(&gpu.ctx, built.compiled.clone())?;
        let kernel = module.kernel("gemm")?;
        let maps = module.kernel("gemm_wgrad_maps")?;
        let grid = grouped::persistent_grid(gpu, &kernel, &built.plan.config)?;
        Ok(Arc::new(Loaded {
            config: built.plan.config,
            kernel,
            maps,
            grid,
            plan: built.plan.clone(),
        }))
    }
}

/// Where the claims' counter sits in a launch's workspace of `groups` groups: past the 2 x G
/// maps of 128 bytes and the 2 x G ints of the groups' order and tokens.
fn claims_counter_at(groups: usize) -> usize {
    (128 * 2 + 8) * groups
}

/// A launch over one problem: the template maps of A (dY over all tokens), B (X over all
/// tokens) and D (dW as [G * N][K]), and the workspace of per-group maps (2 x G maps of 128
/// bytes; cudarc's allocations are 256-byte aligned), of the claims' order of the groups (G
/// ints by k-blocks, most first, then their G token counts) and of the claims' counter (one
/// int) that `gemm_wgrad_maps` writes before each `gemm` on the same stream.
pub struct Launch {
    loaded: Arc<Loaded>,
    cfg: LaunchConfig,
    maps_cfg: LaunchConfig,
    args: GemmArgs,
    dy_addr: u64,
    x_addr: u64,
    /// The launch's cluster tiles (what the claims count, without a cluster).
    tiles: usize,
}

impl Launch {
    pub fn new(gpu: &Gpu, loaded: &Arc<Loaded>, p: &Problem, d: &OutBuf) -> Res<Launch> {
        let c = &loaded.config;
        if let Some(why) = unsupported(c, p.n, p.k) {
            return Err(why.into());
        }
        let tiles = p.n.div_ceil(c.bm as usize).div_ceil(c.cm as usize)
            * p.k.div_ceil(c.bn as usize)
            * p.groups;
        // dW's [G * N] rows, the tile count and the tokens are i32 in the kernel; its claims
        // (or a cluster's walk) run at most one grid past the last tile.
        if p.groups == 0
            || p.groups * p.n > i32::MAX as usize
            || tiles + loaded.grid as usize > i32::MAX as usize
            || p.total_tokens() > i32::MAX as usize
            || p.k > i32::MAX as usize
        {
            return Err(format!(
                "groups = {}, G x N = {}, tiles = {tiles}, tokens = {}: 1 or more groups, the rest below 2^31",
                p.groups,
                p.groups * p.n,
                p.total_tokens()
            )
            .into());
        }
        let total = p.total_tokens().max(1) as u64;
        let (n, k) = (p.n as u64, p.k as u64);
        let plan = &loaded.plan;
        // The templates: every field but the base and the tokens dim is what the per-group maps
        // keep (the kernel rewrites those two and, unchanged, the other dim and the stride).
        let ma = TensorMap::new_raw_bits(&plan.a.bind(&[total, n], None)?, &p.dy)?;
        let mb = TensorMap::new_raw_bits(&plan.b.bind(&[total, k], None)?, &p.x)?;
        let rows = p.groups as u64 * n;
        let md = grouped::d_map(plan, d, rows, k, || {
            Ok(TensorMap::new_raw_bits(
                &plan.a.bind(&[total, n], None)?,
                &p.dy,
            )?)
        })?;
        let cfg = loaded
            .kernel
            .plan_config(&gpu.stream, (loaded.grid, 1, 1))?;
        let maps_cfg = loaded.maps.plan_config(
            &gpu.stream,
            (
                (p.groups as u32).div_ceil(crate::kernel::WGRAD_MAPS_THREADS),
                1,
                1,
            ),
        )?;
        // 2 x G maps of 128 bytes, then the claims' order of the groups and their tokens in
        // that order (2 x G ints), then the claims' counter (one int).
        let workspace = gpu
            .stream
            .alloc_zeros::<u8>(claims_counter_at(p.groups) + 4)?;
        let s = &gpu.stream;
        Ok(Launch {
            loaded: loaded.clone(),
            cfg,
            maps_cfg,
            args: GemmArgs {
                maps: [ma, mb, md],
                d_addr: d.addr(s),
                dims: [total as i32, p.n as i32, p.k as i32, p.groups as i32],
                raster: grouped::RASTER_ROWS,
                counts_addr: p.tokens_dev.device_ptr(s).0,
                workspace,
            },
            dy_addr: p.dy.device_ptr(s).0,
            x_addr: p.x.device_ptr(s).0,
            tiles,
        })
    }

    /// The GEMM's launch (the grid, the plan's block, cluster and shared memory).
    pub fn config(&self) -> &LaunchConfig {
        &self.cfg
    }

    /// The claims the last launch made, read back after it (synchronize first), and the
    /// count its schedule implies: without a cluster each tile is claimed once (by some CTA)
    /// and each CTA makes one more claim, past the last tile, so tiles + grid; a cluster walks
    /// a fixed order and claims none. Unequal means the tiles were not claimed as the kernel
    /// says (once, a preprocessor test on a constexpr compiled the walk in their place).
    pub fn claims(&self, gpu: &Gpu) -> Res<(u64, u64)> {
        let at = claims_counter_at(self.args.dims[3] as usize);
        let bytes: Vec<u8> = gpu
            .stream
            .clone_dtoh(&self.args.workspace.slice(at..at + 4))?;
        let got = u32::from_le_bytes(bytes.try_into().map_err(|_| "the claims' counter")?) as u64;
        let expected = if self.loaded.config.cluster() == 1 {
            (self.tiles + self.cfg.grid.0 as usize) as u64
        } else {
            0
        };
        Ok((got, expected))
    }

    /// The raster's tile-rows of this launch's groups (tuning; [`grouped::RASTER_ROWS`]
    /// otherwise).
    pub fn set_raster(&mut self, rows: i32) {
        self.args.raster = rows.max(1);
    }

    /// The prologue (group g's maps into pair g of the workspace, the groups' order after
    /// them), then the GEMM, on one stream: the GEMM loads through maps the prologue finished
    /// writing.
    pub fn run(&mut self, gpu: &Gpu) -> Res<()> {
        let a = &self.args;
        let ws = a.workspace.device_ptr(&gpu.stream).0;
        let mut l = self.loaded.maps.launch_builder(&self.maps_cfg);
        l.arg(&a.maps[0])
            .arg(&a.maps[1])
            .arg(&a.counts_addr)
            .arg(&a.dims[3])
            .arg(&a.dims[1])
            .arg(&a.dims[2])
            .arg(&self.dy_addr)
            .arg(&self.x_addr)
            .arg(&ws);
        // SAFETY: gemm_wgrad_maps(CUtensorMap x 2, const int* tokens, int groups, int N, int K,
        // const void* dY, const void* X, CUtensorMap* ab_maps) as kernel.cu declares: tokens
        // holds G ints summing to at most dY's and X's rows (Problem::new), so each group's
        // base and tokens lie inside dY ([T][N]) and X ([T][K]); ab_maps 2 x G maps of 128
        // bytes (the workspace), 256-byte aligned, then 2 x G ints (the groups' order, their
        // tokens) and the claims' counter.
        unsafe { l.launch() }?;
        // SAFETY: gemm compiled with GEMM_WGRAD (Plan::wgrad); the maps cover the problem's dY
        // ([T][N]), X ([T][K]) and dW ([G * N][K]) buffers, which the caller holds past the
        // launch; the counts are G token counts summing to T; the workspace holds the maps of
        // every non-empty group, the groups' order (a permutation of 0..G) and the claims'
        // counter (0), written by the prologue before it on this stream (the GEMM reads no
        // empty group's maps).
        unsafe { a.launch(gpu, &self.loaded.kernel, &self.cfg) }
    }
}

/// The baseline and reference: one cuBLAS GEMM a non-empty group, a memset (zeros) an empty
/// one, into `d`.
pub fn cublas_loop(gpu: &Gpu, p: &Problem, out: Out, d: &OutBuf) -> Res<()> {
    let s = &gpu.stream;
    let (dy, x, dw) = (p.dy.device_ptr(s).0, p.x.device_ptr(s).0, d.addr(s));
    let starts = p.starts();
    let (n, k) = (p.n as u64, p.k as u64);
    let ob = out.bytes();
    for (g, &t) in p.tokens.iter().enumerate() {
        let at = dw + g as u64 * n * k * ob;
        if t <= 0 {
            // SAFETY: group g's N x K outputs lie inside d (out_buf: G x N x K).
            unsafe {
                cudarc::driver::result::memset_d8_async(at, 0, (n * k * ob) as usize, s.cu_stream())
            }?;
            continue;
        }
        let t0 = starts[g] as u64;
        // SAFETY: group g's tokens of dY (t0.., N each) and X (t0.., K each) and its N x K of
        // dW lie inside the problem's buffers (2-byte inputs, `ob`-byte outputs).
        unsafe {
            gpu.cublas.wgrad(
                t as usize,
                p.n,
                p.k,
                p.input,
                out,
                dy + t0 * n * 2,
                x + t0 * k * 2,
                at,
            )
        }?;
    }
    Ok(())
}

/// How far the kernel's dW is from cuBLAS's (every element: example 05's comparison, its
/// absolute term scaled by the group's tokens past 4096), whether every empty group's dW is
/// exactly zero, and how sampled elements compare with exact f64 sums under example 05's
/// proven bound (check.rs: u |exact| + 2^-22 sum_t |s_t| + 2^-30, s_t the exact prefix sums
/// over the group's tokens).
pub struct Check {
    pub elements: Compare,
    /// Elements of empty groups that are not +0 or -0 (NaN included).
    pub empty_nonzero: usize,
    pub samples: usize,
    /// Samples outside the bound (NaN included).
    pub samples_bad: usize,
    /// The largest error / bound among the samples (1 is the bound).
    pub sample_worst: f64,
    /// When the kernel and cuBLAS disagree: the elements where they do, each computed exactly
    /// in f64, so the exact sum decides which side is off.
    pub disputes: Disputes,
}

/// Disputed elements checked exactly (the kernel's and cuBLAS's values against the f64 sum
/// under the samples' proven bound for an fp32 sum).
#[derive(Clone, Debug, Default)]
pub struct Disputes {
    /// Elements where the kernel and cuBLAS are further apart than the comparison allows.
    pub disputed: usize,
    /// Of them, computed exactly: all of them, or none past [`MAX_DISPUTES`].
    pub checked: usize,
    /// Checked elements where the kernel is outside the bound.
    pub kernel_bad: usize,
    /// Checked elements where cuBLAS is outside the bound (cuBLAS proven off there).
    pub reference_bad: usize,
    /// Groups (index, tokens) the disputed elements lie in.
    pub groups: Vec<(usize, i32)>,
}

/// The most disputed elements a check computes exactly; past it, the kernel is not cleared.
pub const MAX_DISPUTES: usize = 1 << 18;

impl Check {
    /// Every element within example 05's bound of cuBLAS's, or, where not, within the proven
    /// bound of its exact sum (every disputed element computed: [`Check::disputes_cleared`]);
    /// empty groups exactly zero; every sample within its bound of the exact sum.
    pub fn ok(&self) -> bool {
        self.empty_nonzero == 0
            && self.samples_bad == 0
            && (self.elements.ok() || self.disputes_cleared())
    }

    /// The kernel disagrees with cuBLAS somewhere, and at every such element (all computed
    /// exactly) it is within the proven bound of an fp32 sum: wherever the two agree cuBLAS
    /// vouches for it, wherever they do not the exact sum does.
    pub fn disputes_cleared(&self) -> bool {
        let d = &self.disputes;
        d.disputed > 0 && d.checked == d.disputed && d.kernel_bad == 0
    }
}

/// An exact f64 sum and the proven bound of an fp32 result of it (check.rs).
#[derive(Clone, Copy)]
struct Exact {
    sum: f64,
    bound: f64,
}

impl Exact {
    fn err(&self, v: f32) -> f64 {
        (f64::from(v) - self.sum).abs()
    }
    fn outside(&self, v: f32) -> bool {
        let err = self.err(v);
        err.is_nan() || err > self.bound
    }
}

pub fn check(p: &Operands, out: Out, d: &[f32], reference: &[f32], rng: &mut Rng) -> Check {
    let (n, k) = (p.n, p.k);
    let u = unit_roundoff(out);
    // The absolute term grows with the group's tokens past 4096 (the forward's contraction
    // lengths, where 1e-3 was set): f32 output of an 8.6k-token group drifted from cuBLAS's
    // by 1.0-1.4e-3 (H100) while its f64 samples sat at 1 % of their proven bound.
    let group_abs: Vec<f64> = p
        .tokens
        .iter()
        .map(|&t| 1e-3 * (f64::from(t.max(0)) / 4096.0).max(1.0))
        .collect();
    let per_group = n * k;
    let mut c = Check {
        elements: compare_within(d, reference, out, |i| group_abs[i / per_group]),
        empty_nonzero: 0,
        samples: 0,
        samples_bad: 0,
        sample_worst: 0.0,
        disputes: Disputes::default(),
    };
    let starts = p.starts();
    let dy = |i: usize| f64::from(from_bits(p.dy[i], p.input));
    let x = |i: usize| f64::from(from_bits(p.x[i], p.input));
    // Element (row, col) of group g: its exact sum and the proven bound of an fp32 result.
    let exact = |g: usize, row: usize, col: usize| {
        let (t, start) = (p.tokens[g].max(0) as usize, starts[g]);
        let (mut sum, mut prefix_abs) = (0f64, 0f64);
        for tt in start..start + t {
            sum += dy(tt * n + row) * x(tt * k + col); // products exact in f64
            prefix_abs += sum.abs();
        }
        Exact {
            sum,
            bound: u * sum.abs() + 2f64.powi(-22) * prefix_abs + 2f64.powi(-30),
        }
    };
    if !c.elements.ok() {
        // Every disputed element (up to MAX_DISPUTES) computed exactly, in parallel.
        let mut disputed = Vec::new();
        for i in 0..d.len() {
            if apart(d[i], reference[i], out, group_abs[i / per_group]) {
                c.disputes.disputed += 1;
                if disputed.len() < MAX_DISPUTES {
                    disputed.push(i);
                }
            }
        }
        for &i in &disputed {
            let g = i / per_group;
            if !c.disputes.groups.iter().any(|&(gg, _)| gg == g) {
                c.disputes.groups.push((g, p.tokens[g]));
            }
        }
        if c.disputes.disputed <= MAX_DISPUTES {
            let threads = std::thread::available_parallelism()
                .map_or(1, |t| t.get())
                .min(16);
            let chunk = disputed.len().div_ceil(threads).max(1);
            let exact = &exact;
            let verdicts: Vec<(usize, usize)> = std::thread::scope(|s| {
                let hs: Vec<_> = disputed
                    .chunks(chunk)
                    .map(|part| {
                        s.spawn(move || {
                            part.iter().fold((0, 0), |(kb, rb), &i| {
                                let e = exact(i / per_group, i % per_group / k, i % k);
                                (
                                    kb + usize::from(e.outside(d[i])),
                                    rb + usize::from(e.outside(reference[i])),
                                )
                            })
                        })
                    })
                    .collect();
                // A thread that panicked counts its whole part against the kernel.
                hs.into_iter()
                    .map(|h| h.join().unwrap_or((usize::MAX / 2, 0)))
                    .collect()
            });
            c.disputes.checked = disputed.len();
            for (kb, rb) in verdicts {
                c.disputes.kernel_bad = c.disputes.kernel_bad.saturating_add(kb);
                c.disputes.reference_bad += rb;
            }
        }
    }
    for (g, &t) in p.tokens.iter().enumerate() {
        let dw = &d[g * n * k..(g + 1) * n * k];
        let t = t.max(0) as usize;
        if t == 0 {
            c.empty_nonzero += dw.iter().filter(|&&v| v != 0.0).count();
            continue;
        }
        // The four corners of dW_g (its first and last rows and columns: the clipped edges of
        // the last tiles) and four random elements.
        let mut at = vec![(0, 0), (0, k - 1), (n - 1, 0), (n - 1, k - 1)];
        while at.len() < 8 {
            at.push((rng.below(n as u64) as usize, rng.below(k as u64) as usize));
        }
        for (row, col) in at {
            let e = exact(g, row, col);
            let v = dw[row * k + col];
            let err = e.err(v);
            c.samples += 1;
            if e.outside(v) {
                c.samples_bad += 1;
            }
            c.sample_worst = if err.is_finite() {
                c.sample_worst.max(err / e.bound)
            } else {
                f64::INFINITY
            };
        }
    }
    c
}
