//! What the example and the benchmark share: the value tiles, the kernel source, random
//! inputs, the device state (buffers, 192 tensor maps, kernels), launches and the checks.

use std::error::Error;
use std::sync::Arc;

use cudarc::driver::{CudaContext, CudaSlice, CudaStream, DeviceRepr};
use half::{bf16, f16};
use tma::plan::{KernelPlan, ValidKernelPlan};
use tma::render::KernelSource;
use tma::runtime::ByValue;
use tma::runtime::{CompileOptions, Compiled, Compiler, Source};
use tma::runtime::{Kernel, Module, TensorMap, TensorMapArray};
use tma::{Arch, BoundSpec, Tile, ValidSpec};

use crate::reference::Msda;

pub type Res<T> = Result<T, Box<dyn Error>>;

/// The kernel code (tile helpers are prepended by [`kernel_source`]).
pub const MSDA_CU: &str = include_str!("msda.cu");

/// What msda.cu hard-codes (MSDA_HEADS, MSDA_LEVELS, MSDA_POINTS, MSDA_CH).
pub const HEADS: usize = 8;
pub const LEVELS: usize = 4;
pub const POINTS: usize = 8;
pub const CHANNELS: usize = 32;
/// Threads per block: one warp per head.
pub const BLOCK: u32 = (HEADS * 32) as u32;
/// One [2][2][32] 16-bit box per sampling point.
pub const BOX_BYTES: u32 = 2 * 2 * CHANNELS as u32 * 2;
/// Points a warp gathers per mbarrier phase (MSDA_PHASE_PTS in msda.cu): all 32 by default,
/// `MSDA_PHASE_POINTS=4|8|16|32` to compare (the benchmark reports which one ran). On an H100
/// smaller phases doubled the resident warps but ran slower (BENCHMARKS.md).
pub fn phase_points() -> u32 {
    std::env::var("MSDA_PHASE_POINTS")
        .ok()
        .and_then(|v| v.parse().ok())
        .filter(|n: &u32| [1, 2, 4, 8, 16, 32].contains(n))
        .unwrap_or(32)
}

/// The value tile in f16: a `[H][W][C = 32]` view of one (batch, head, level) whose rows
/// skip the other heads (strides, in elements: `[W * heads * 32, heads * 32, 1]`).
pub mod f16_tile {
    tma::tma_3d! {
        /// `value[n][start_l + h * W + w][head][c]` as a `[H][W][32]` view, f16.
        pub MsdaValue: f16,
        global = [H = _, W = _, C = 32],
        boxed = [2, 2, 32],
        strides = [_, _, 1],
        oob_fill = zero,
        name = "msda_value",
    }
}

/// The same tile in bf16 (same CUDA name: one variant per compiled module).
pub mod bf16_tile {
    tma::tma_3d! {
        /// `value[n][start_l + h * W + w][head][c]` as a `[H][W][32]` view, bf16.
        pub MsdaValue: bf16,
        global = [H = _, W = _, C = 32],
        boxed = [2, 2, 32],
        strides = [_, _, 1],
        oob_fill = zero,
        name = "msda_value",
    }
}

/// The 16-bit element type of `value` and `out`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Elem {
    F16,
    Bf16,
}

impl Elem {
    pub const ALL: [Elem; 2] = [Elem::F16, Elem::Bf16];

    pub fn name(self) -> &'static str {
        match self {
            Elem::F16 => "f16",
            Elem::Bf16 => "bf16",
        }
    }
    pub fn valid(self) -> &'static ValidSpec {
        match self {
            Elem::F16 => f16_tile::MsdaValue::valid(),
            Elem::Bf16 => bf16_tile::MsdaValue::valid(),
        }
    }
    pub fn tx_bytes(self) -> u64 {
        match self {
            Elem::F16 => f16_tile::MsdaValue::TX_BYTES,
            Elem::Bf16 => bf16_tile::MsdaValue::TX_BYTES,
        }
    }
    pub fn cuda_name(self) -> &'static str {
        match self {
            Elem::F16 => f16_tile::MsdaValue::CUDA_NAME,
            Elem::Bf16 => bf16_tile::MsdaValue::CUDA_NAME,
        }
    }
    /// The `[H][W][32]` view of one (batch, head) at one level, strides skipping the heads.
    pub fn bind_view(self, h: usize, w: usize, heads: usize) -> Res<BoundSpec> {
        let global = [h as u64, w as u64, CHANNELS as u64];
        let strides = [(w * heads * CHANNELS) as u64, (heads * CHANNELS) as u64, 1];
        Ok(match self {
            Elem::F16 => f16_tile::MsdaValue::bind_strided(&global, &strides)?,
            Elem::Bf16 => bf16_tile::MsdaValue::bind_strided(&global, &strides)?,
        })
    }
    pub fn to_bits(self, x: f32) -> u16 {
        match self {
            Elem::F16 => f16::from_f32(x).to_bits(),
            Elem::Bf16 => bf16::from_f32(x).to_bits(),
        }
    }
    /// Exact.
    pub fn to_f32(self, bits: u16) -> f32 {
        match self {
            Elem::F16 => f16::from_bits(bits).to_f32(),
            Elem::Bf16 => bf16::from_bits(bits).to_f32(),
        }
    }
    /// Round to this type and back (what storing the exact result would give).
    pub fn round(self, x: f64) -> f64 {
        match self {
            Elem::F16 => f16::from_f64(x).to_f64(),
            Elem::Bf16 => bf16::from_f64(x).to_f64(),
        }
    }
    /// Relative L2 error allowed: output rounding alone gives ~2.1e-4 (f16) / ~1.7e-3 (bf16).
    pub fn rel_l2_tolerance(self) -> f64 {
        match self {
            Elem::F16 => 2e-3,
            Elem::Bf16 => 5e-3,
        }
    }
    /// Max abs error allowed (|out| < 1 here): a few half-ulps at 1, plus f32 arithmetic.
    pub fn abs_tolerance(self) -> f64 {
        match self {
            Elem::F16 => 2e-3,
            Elem::Bf16 => 1.6e-2,
        }
    }
}

/// msda_tma's plan: the tile (named `Value` for the kernel), a staging region `boxes` of one
/// box per sampling point of a phase for each warp (8 x phase_points() x 256 B), one warp per
/// head. msda.cu takes each box's place from it, the launch its dynamic shared memory.
pub fn tma_plan(elem: Elem) -> Res<ValidKernelPlan> {
    Ok(KernelPlan::new("msda_tma")
        .tile("Value", elem.valid())
        .staging("boxes", elem.valid(), HEADS as u32 * phase_points())
        .block_threads(BLOCK)
        .validate()?)
}

/// msda_ldg's plan: no shared memory, one warp per head (its launch's block, from one place).
pub fn ldg_plan() -> Res<ValidKernelPlan> {
    Ok(KernelPlan::new("msda_ldg")
        .block_threads(BLOCK)
        .validate()?)
}

/// Render the plans (the tile helpers, `tma_plan_msda_tma` / `tma_plan_msda_ldg`) + msda.cu,
/// which names the tile `Value` (its element type, `Value::elem`, picks the f16 or bf16
/// conversions); the source carries both plans' launches.
pub fn kernel_source(elem: Elem) -> Res<Source> {
    let source = KernelSource::new()
        .plan(&tma_plan(elem)?)
        .plan(&ldg_plan()?)
        .body(MSDA_CU);
    Ok(Source::kernel(&source)?)
}

/// `debug`: `-DTMA_DEBUG`, a hung mbarrier wait traps after 1 s and the launch returns an
/// error naming the tile, block and thread instead of hanging (used for the checked runs).
/// `MSDA_PHASE_PTS` is the kernel's tuning knob (not a tile fact).
pub fn compile_options(debug: bool) -> CompileOptions {
    CompileOptions::new(Arch::Sm90a)
        .define("MSDA_PHASE_PTS", phase_points().to_string())
        .debug_waits(debug)
        .line_info(true)
}

/// Compiles one variant (no GPU needed) and checks the PTX has both kernels and the TMA.
pub fn compile(
    compiler: &Compiler,
    elem: Elem,
    debug: bool,
) -> Res<(Source, CompileOptions, Arc<Compiled>)> {
    let source = kernel_source(elem)?;
    let options = compile_options(debug);
    let compiled = compiler.compile_source(&source, &options)?;
    let ptx = &compiled.ptx;
    let tma_ops = ptx
        .matches("cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier")
        .count();
    let cvt = if elem == Elem::Bf16 {
        "cvt.rn.bf16.f32"
    } else {
        "cvt.rn.f16.f32"
    };
    for (what, ok) in [
        (".entry msda_tma", ptx.contains(".entry msda_tma")),
        (".entry msda_ldg", ptx.contains(".entry msda_ldg")),
        ("a 3-D TMA load", tma_ops >= 1),
        ("prefetch.tensormap", ptx.contains("prefetch.tensormap")),
        ("mbarrier.init", ptx.contains("mbarrier.init")),
        (cvt, ptx.contains(cvt)),
    ] {
        if !ok {
            return Err(format!("{} PTX lacks {what}", elem.name()).into());
        }
    }
    Ok((source, options, compiled))
}

/// Both kernels of one compiled variant, loaded into `ctx`.
pub fn kernels(
    ctx: &Arc<CudaContext>,
    compiler: &Compiler,
    elem: Elem,
    debug: bool,
) -> Res<(Kernel, Kernel)> {
    let (source, options, _) = compile(compiler, elem, debug)?;
    let module = Module::compile_and_load(ctx, compiler, &source, &options)?;
    Ok((module.kernel("msda_tma")?, module.kernel("msda_ldg")?))
}

/// The level table msda.cu takes by value (`struct MsdaLevels`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct MsdaLevels {
    pub h: [i32; LEVELS],
    pub w: [i32; LEVELS],
    pub start: [i32; LEVELS],
}

// SAFETY: plain `#[repr(C)]` i32 arrays, the layout of msda.cu's `struct MsdaLevels`.
unsafe impl DeviceRepr for MsdaLevels {}

/// The sizes msda.cu is compiled for.
pub fn check_sizes(m: &Msda) -> Res<()> {
    if m.heads != HEADS || m.levels.len() != LEVELS || m.points != POINTS || m.channels != CHANNELS
    {
        return Err(format!(
            "msda.cu is written for heads {HEADS}, levels {LEVELS}, points {POINTS}, channels {CHANNELS}; got {m:?}"
        )
        .into());
    }
    let value_elems = m.value_len();
    if value_elems > i32::MAX as usize || m.batch * m.queries > i32::MAX as usize {
        return Err("sizes overflow the kernels' int arithmetic".into());
    }
    Ok(())
}

pub fn levels(m: &Msda) -> MsdaLevels {
    let mut lv = MsdaLevels::default();
    for (l, (&(h, w), start)) in m.levels.iter().zip(m.level_start()).enumerate() {
        lv.h[l] = h as i32;
        lv.w[l] = w as i32;
        lv.start[l] = start as i32;
    }
    lv
}

/// xorshift64*: fresh inputs each run (seeded from the clock), reproducible from the seed.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed | 1)
    }
    pub fn from_clock() -> Rng {
        let t = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(0x9e37_79b9_7f4a_7c15);
        Rng::new(t ^ 0x9e37_79b9_7f4a_7c15)
    }
    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    /// Uniform in [0, 1).
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
    pub fn range(&mut self, lo: f64, hi: f64) -> f64 {
        lo + (hi - lo) * self.unit()
    }
}

/// Host inputs: value as stored bits and as exact f32, locations, weights.
pub struct Inputs {
    pub elem: Elem,
    pub value_bits: Vec<u16>,
    pub value: Vec<f32>,
    pub loc: Vec<f32>,
    pub attn: Vec<f32>,
    /// How many sampling points fall in each class (inside, outside near, border, far).
    pub classes: [usize; 4],
}

/// One sampling coordinate pair: most inside [0, 1], some just outside, some exactly on
/// the borders 0 / 1 (and corners), a few far outside.
fn location(rng: &mut Rng) -> ([f32; 2], usize) {
    let r = rng.unit();
    let u = |rng: &mut Rng| rng.unit() as f32;
    let border = |rng: &mut Rng| if rng.unit() < 0.5 { 0.0f32 } else { 1.0 };
    if r < 0.84 {
        ([u(rng), u(rng)], 0)
    } else if r < 0.92 {
        let mut v = || rng.range(-0.15, 1.15) as f32;
        ([v(), v()], 1)
    } else if r < 0.96 {
        let (b, o) = (border(rng), u(rng));
        (if rng.unit() < 0.5 { [b, o] } else { [o, b] }, 2)
    } else if r < 0.98 {
        ([border(rng), border(rng)], 2)
    } else {
        let far = |rng: &mut Rng| {
            if rng.unit() < 0.5 {
                rng.range(-3.0, -1.0) as f32
            } else {
                rng.range(2.0, 4.0) as f32
            }
        };
        ([far(rng), u(rng)], 3)
    }
}

pub fn inputs(m: &Msda, elem: Elem, rng: &mut Rng) -> Inputs {
    let value_bits: Vec<u16> = (0..m.value_len())
        .map(|_| elem.to_bits(rng.range(-1.0, 1.0) as f32))
        .collect();
    let value = value_bits.iter().map(|&b| elem.to_f32(b)).collect();
    let pph = m.points_per_head();
    let mut loc = Vec::with_capacity(2 * m.attn_len());
    let mut classes = [0usize; 4];
    for _ in 0..m.attn_len() {
        let (xy, class) = location(rng);
        loc.extend_from_slice(&xy);
        classes[class] += 1;
    }
    // Softmax over the levels * points of each (n, q, head), in f64.
    let mut attn = Vec::with_capacity(m.attn_len());
    let mut logits = vec![0.0f64; pph];
    for _ in 0..m.batch * m.queries * m.heads {
        for l in logits.iter_mut() {
            *l = rng.range(-3.0, 3.0);
        }
        let max = logits.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
        let sum: f64 = logits.iter().map(|l| (l - max).exp()).sum();
        attn.extend(logits.iter().map(|l| ((l - max).exp() / sum) as f32));
    }
    Inputs {
        elem,
        value_bits,
        value,
        loc,
        attn,
        classes,
    }
}

/// 16-bit NaN pattern (f16 and bf16 alike) written to outputs before each checked launch.
pub const POISON: u16 = 0xffff;

/// Everything on the device: buffers, the 192 tensor maps, both kernels.
pub struct Device {
    pub m: Msda,
    pub elem: Elem,
    pub stream: Arc<CudaStream>,
    pub value: CudaSlice<u16>,
    pub loc: CudaSlice<f32>,
    pub attn: CudaSlice<f32>,
    pub out_tma: CudaSlice<u16>,
    pub out_ldg: CudaSlice<u16>,
    pub maps: TensorMapArray,
    pub levels: MsdaLevels,
    pub tma: Kernel,
    pub ldg: Kernel,
}

impl Device {
    /// Uploads the inputs, encodes the 192 maps and loads the kernels (`debug`: see
    /// [`compile_options`]).
    pub fn new(
        ctx: &Arc<CudaContext>,
        compiler: &Compiler,
        m: &Msda,
        inp: &Inputs,
        debug: bool,
    ) -> Res<Device> {
        check_sizes(m)?;
        let elem = inp.elem;
        let stream = ctx.default_stream();
        let value = stream.clone_htod(&inp.value_bits)?;
        let loc = stream.clone_htod(&inp.loc)?;
        let attn = stream.clone_htod(&inp.attn)?;
        let out_tma = stream.clone_htod(&vec![POISON; m.out_len()])?;
        let out_ldg = stream.clone_htod(&vec![POISON; m.out_len()])?;

        // One map per (batch, head, level), at index (b * heads + head) * levels + level,
        // each over the sub-view of `value` that starts at its first element.
        let (s, starts) = (m.spatial(), m.level_start());
        let mut list = Vec::with_capacity(m.batch * m.heads * m.levels.len());
        for b in 0..m.batch {
            for head in 0..m.heads {
                for (l, &(h, w)) in m.levels.iter().enumerate() {
                    let bound = elem.bind_view(h, w, m.heads)?;
                    let offset = ((b * s + starts[l]) * m.heads + head) * m.channels;
                    let len = (bound.extent_bytes() / 2) as usize;
                    if offset + len > value.len() {
                        return Err(format!(
                            "view (b {b}, head {head}, level {l}) needs elements {offset}..{} of {}",
                            offset + len,
                            value.len()
                        )
                        .into());
                    }
                    let view = value.slice(offset..offset + len);
                    // f16 or bf16 data, kept as u16 bits for both: raw bits, asked for.
                    list.push(TensorMap::new_raw_bits(&bound, &view)?);
                }
            }
        }
        let maps = TensorMapArray::upload(&stream, list)?;

        let (tma, ldg) = kernels(ctx, compiler, elem, debug)?;
        Ok(Device {
            m: m.clone(),
            elem,
            stream,
            value,
            loc,
            attn,
            out_tma,
            out_ldg,
            maps,
            levels: levels(m),
            tma,
            ldg,
        })
    }

    /// Switches both kernels to the variant with (or without) debug waits.
    pub fn reload(&mut self, ctx: &Arc<CudaContext>, compiler: &Compiler, debug: bool) -> Res<()> {
        (self.tma, self.ldg) = kernels(ctx, compiler, self.elem, debug)?;
        Ok(())
    }

    pub fn grid(&self) -> (u32, u32, u32) {
        ((self.m.batch * self.m.queries) as u32, 1, 1)
    }

    /// Writes the NaN poison into both outputs.
    pub fn poison(&mut self) -> Res<()> {
        let p = vec![POISON; self.m.out_len()];
        self.stream.memcpy_htod(&p, &mut self.out_tma)?;
        self.stream.memcpy_htod(&p, &mut self.out_ldg)?;
        Ok(())
    }

    /// msda_tma (asynchronous on the stream).
    pub fn launch_tma(&mut self) -> Res<()> {
        let cfg = self.tma.plan_config(&self.stream, self.grid())?;
        let queries = self.m.queries as i32;
        // SAFETY: msda_tma(const CUtensorMap* maps, const float* loc, const float* attn,
        // unsigned short* out, MsdaLevels lv, int queries); the maps cover views of `value`
        // (alive in self); loc/attn/out hold batch * queries * heads * (32 * 2 | 32 | 32)
        // elements; the block and dynamic shared memory are its plan's.
        unsafe {
            self.tma
                .launch_builder(&cfg)
                .arg(self.maps.device())
                .arg(&self.loc)
                .arg(&self.attn)
                .arg(&mut self.out_tma)
                .arg(ByValue(&self.levels))
                .arg(&queries)
                .launch()
        }?;
        Ok(())
    }

    /// msda_ldg (asynchronous on the stream).
    pub fn launch_ldg(&mut self) -> Res<()> {
        let cfg = self.ldg.plan_config(&self.stream, self.grid())?;
        let spatial = self.m.spatial() as i32;
        let queries = self.m.queries as i32;
        // SAFETY: msda_ldg(const unsigned short* value, int spatial, const float* loc,
        // const float* attn, unsigned short* out, MsdaLevels lv, int queries); buffers sized
        // as for msda_tma, value holds batch * spatial * heads * 32 elements.
        unsafe {
            self.ldg
                .launch_builder(&cfg)
                .arg(&self.value)
                .arg(&spatial)
                .arg(&self.loc)
                .arg(&self.attn)
                .arg(&mut self.out_ldg)
                .arg(ByValue(&self.levels))
                .arg(&queries)
                .launch()
        }?;
        Ok(())
    }

    pub fn sync(&self) -> Res<()> {
        self.stream.synchronize()?;
        Ok(())
    }

    /// Poison, run both kernels once, read both outputs back.
    pub fn run_both(&mut self) -> Res<(Vec<u16>, Vec<u16>)> {
        self.poison()?;
        self.launch_tma()?;
        self.sync()?;
        self.launch_ldg()?;
        self.sync()?;
        let tma = self.stream.clone_dtoh(&self.out_tma)?;
        let ldg = self.stream.clone_dtoh(&self.out_ldg)?;
        Ok((tma, ldg))
    }
}

/// How far an output is from the f64 reference.
#[derive(Clone, Copy, Debug, Default)]
pub struct Check {
    pub max_abs: f64,
    pub worst: usize,
    pub rel_l2: f64,
    /// Relative L2 error of the reference rounded to the output type: the floor.
    pub rounding_rel_l2: f64,
    pub non_finite: usize,
}

impl Check {
    pub fn new(elem: Elem, out: &[u16], reference: &[f64]) -> Check {
        let out: Vec<f64> = out
            .iter()
            .map(|&bits| f64::from(elem.to_f32(bits)))
            .collect();
        Check::of(&out, reference, |r| elem.round(r))
    }
    /// `out` against `reference`; `round` rounds a value to the output's type (for the
    /// floor). An output missing or left over counts as non-finite.
    pub fn of(out: &[f64], reference: &[f64], round: impl Fn(f64) -> f64) -> Check {
        let mut c = Check::default();
        let (mut num, mut den, mut rnd) = (0.0f64, 0.0f64, 0.0f64);
        for (i, (&v, &r)) in out.iter().zip(reference).enumerate() {
            if !v.is_finite() {
                c.non_finite += 1;
                continue;
            }
            let e = (v - r).abs();
            if e > c.max_abs {
                c.max_abs = e;
                c.worst = i;
            }
            num += e * e;
            den += r * r;
            rnd += (round(r) - r).powi(2);
        }
        c.non_finite += out.len().abs_diff(reference.len());
        let den = den.max(f64::MIN_POSITIVE);
        c.rel_l2 = (num / den).sqrt();
        c.rounding_rel_l2 = (rnd / den).sqrt();
        c
    }
    pub fn ok(&self, elem: Elem) -> bool {
        self.non_finite == 0
            && self.rel_l2 <= elem.rel_l2_tolerance()
            && self.max_abs <= elem.abs_tolerance()
    }
    pub fn line(&self, elem: Elem, reference: &[f64]) -> String {
        format!(
            "max abs err {:.3e} (at {}, ref {:+.5}), rel L2 err {:.3e} (rounding to {} alone: {:.3e}), non-finite {}; limits: rel L2 {:.0e}, abs {:.1e}",
            self.max_abs,
            self.worst,
            reference.get(self.worst).copied().unwrap_or(f64::NAN),
            self.rel_l2,
            elem.name(),
            self.rounding_rel_l2,
            self.non_finite,
            elem.rel_l2_tolerance(),
            elem.abs_tolerance(),
        )
    }
}

/// TMA output vs LDG output: elements that differ in bits, and the largest difference.
pub fn compare_outputs(elem: Elem, a: &[u16], b: &[u16]) -> (usize, f64, usize) {
    let mut differ = 0;
    let mut max = 0.0f64;
    let mut non_finite = 0;
    for (&x, &y) in a.iter().zip(b) {
        let (fx, fy) = (f64::from(elem.to_f32(x)), f64::from(elem.to_f32(y)));
        if !fx.is_finite() || !fy.is_finite() {
            non_finite += 1;
            continue;
        }
        if x != y {
            differ += 1;
            max = max.max((fx - fy).abs());
        }
    }
    (differ, max, non_finite + a.len().abs_diff(b.len()))
}
