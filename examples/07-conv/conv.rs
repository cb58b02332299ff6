//! The convolution of examples/07-conv: a problem's shape and its checks, its data on the GPU
//! (NHWC activations, KRSC filters, C padded to 8), the launch of examples/05-gemm's kernel
//! with `GEMM_CONV` (`Plan::conv`), the f64 reference and the CPU proofs of a plan's
//! operands. Shared by the example and `benches/conv.rs`.

use std::fmt;
use std::sync::Arc;

use cudarc::driver::{CudaSlice, DeviceRepr};
use tma::model;
use tma::model::im2col;
use tma::runtime::{ByValue, Kernel, LaunchConfig, Module, TensorMap};
use tma::wgmma::read::{read_operand, ReadShape};
use tma::wgmma::OperandPlan;

use crate::check::unit_roundoff;
use crate::compile::Built;
use crate::gpu::{from_bits, to_bits, Gpu, OutBuf};
use crate::kernel::{conv_a, Config, ConvMap, Epi, In, Kind, Out, Plan, Res, BK};
use crate::rng::Rng;

/// Channels are padded to a multiple of this: 8 two-byte elements, the 16 bytes TMA moves a
/// pixel's channels in (rule `InnerBoxBytesMultipleOf16`, and the 16-byte global strides).
pub const CHANNEL_UNIT: u64 = 8;

/// A 2-D convolution forward: input `[n][h][w][c]` (NHWC), filter `[k][r][s][c]` (KRSC),
/// output `[n][p][q][k]` (NPQK); padding, stride and dilation per spatial dim (`[H][W]`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Conv {
    pub n: u64,
    pub h: u64,
    pub w: u64,
    pub c: u64,
    pub k: u64,
    pub r: u64,
    pub s: u64,
    pub pad: [u64; 2],
    pub stride: [u64; 2],
    pub dil: [u64; 2],
}

impl fmt::Display for Conv {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "N{} {}x{} C{} -> K{} {}x{} pad {:?} stride {:?} dil {:?}",
            self.n, self.h, self.w, self.c, self.k, self.r, self.s, self.pad, self.stride, self.dil
        )
    }
}

impl Conv {
    /// A square convolution: `r x r` filter, the same padding, stride and dilation on H and W.
    #[allow(clippy::too_many_arguments)]
    pub fn square(
        n: u64,
        hw: u64,
        c: u64,
        k: u64,
        r: u64,
        pad: u64,
        stride: u64,
        dil: u64,
    ) -> Conv {
        Conv {
            n,
            h: hw,
            w: hw,
            c,
            k,
            r,
            s: r,
            pad: [pad; 2],
            stride: [stride; 2],
            dil: [dil; 2],
        }
    }
    /// Output rows and columns: `(x + 2 pad - (taps - 1) dil - 1) / stride + 1`.
    pub fn out(&self) -> [u64; 2] {
        let o = |x: u64, t: u64, i: usize| {
            (x + 2 * self.pad[i]).saturating_sub((t - 1) * self.dil[i] + 1) / self.stride[i] + 1
        };
        [o(self.h, self.r, 0), o(self.w, self.s, 1)]
    }
    /// C padded to [`CHANNEL_UNIT`].
    pub fn c_pad(&self) -> u64 {
        self.c.div_ceil(CHANNEL_UNIT) * CHANNEL_UNIT
    }
    /// 64-channel chunks of the padded C: the k-blocks of one filter tap.
    pub fn chunks(&self) -> u64 {
        self.c_pad().div_ceil(u64::from(BK))
    }
    /// The implicit GEMM: M = N P Q, N_gemm = K, K_gemm = R S (chunks x 64).
    pub fn gemm_m(&self) -> u64 {
        let [p, q] = self.out();
        self.n * p * q
    }
    pub fn gemm_k(&self) -> u64 {
        self.r * self.s * self.chunks() * u64::from(BK)
    }
    /// Useful work: 2 N P Q K R S C (the real C).
    pub fn flops(&self) -> f64 {
        2.0 * self.gemm_m() as f64 * (self.k * self.r * self.s * self.c) as f64
    }

    /// Every rule this kernel needs of a convolution, all at once, each naming the field, its
    /// value and the rule. C that is not a multiple of 8 is not refused: it is padded
    /// ([`Conv::c_pad`], zero channels in the input and the filter), as the docs say.
    pub fn check(&self) -> Result<(), String> {
        let mut e: Vec<String> = Vec::new();
        for (field, v) in [
            ("n", self.n),
            ("h", self.h),
            ("w", self.w),
            ("c", self.c),
            ("k", self.k),
            ("r", self.r),
            ("s", self.s),
        ] {
            if v == 0 {
                e.push(format!(
                    "{field} = 0: every dim of a convolution is at least 1"
                ));
            }
        }
        for i in 0..2 {
            let dim = ["H", "W"][i];
            if !(1..=8).contains(&self.stride[i]) {
                e.push(format!(
                    "stride[{dim}] = {}: TMA's im2col traversal stride is 1 to 8 (rule ElementStrideRange)",
                    self.stride[i]
                ));
            }
            if self.dil[i] == 0 {
                e.push(format!("dil[{dim}] = 0: a dilation is at least 1"));
            }
        }
        if !e.is_empty() {
            return Err(e.join("; "));
        }
        let taps = [self.r, self.s];
        let ext = [self.h, self.w];
        for i in 0..2 {
            let dim = ["H", "W"][i];
            let span = (taps[i] - 1) * self.dil[i];
            if ext[i] + 2 * self.pad[i] < span + 1 {
                e.push(format!(
                    "{dim} = {} with padding {}: the dilated filter spans {} positions, more than the padded image (no output)",
                    ext[i],
                    self.pad[i],
                    span + 1
                ));
            }
            // An NHWC im2col map keeps 8 bits of each corner (rule Im2colCornerRange) and of
            // each offset, the filter tap (rule Im2colOffsetRange).
            let lower = -(self.pad[i] as i64);
            let upper = self.pad[i] as i64 - span as i64;
            for (what, v) in [
                ("lower corner -pad", lower),
                ("upper corner pad - (taps - 1) dil", upper),
            ] {
                if !(-128..=127).contains(&v) {
                    e.push(format!(
                        "pad[{dim}] = {}, taps {}, dil {}: the im2col {what} = {v} leaves [-128, 127] (rule Im2colCornerRange)",
                        self.pad[i], taps[i], self.dil[i]
                    ));
                }
            }
            if span > 255 {
                e.push(format!(
                    "{dim}: (taps - 1) x dil = {span}, the last tap's offset, is above 255 (rule Im2colOffsetRange)"
                ));
            }
        }
        if self.k % CHANNEL_UNIT != 0 {
            e.push(format!(
                "k = {}: the output's rows (K channels) are 16-byte multiples for its TMA stores (rule StrideAlignment): K a multiple of {CHANNEL_UNIT}",
                self.k
            ));
        }
        let m = self.gemm_m();
        if m > i32::MAX as u64 || self.h * self.w * self.n * self.c_pad() > 1 << 40 {
            e.push(format!("N P Q = {m}: the kernel's pixel index is an i32"));
        }
        if e.is_empty() {
            Ok(())
        } else {
            Err(e.join("; "))
        }
    }

    /// What the im2col map holds: the padded input's dims, the bounding box (lower corner
    /// `-pad`, upper corner `pad - (taps - 1) dil`: docs/IM2COL.md's formula, which the H100
    /// confirmed) and the strides.
    pub fn map(&self) -> ConvMap {
        let up = |i: usize, t: u64| self.pad[i] as i32 - ((t - 1) * self.dil[i]) as i32;
        ConvMap {
            dims: [self.n, self.h, self.w, self.c_pad()],
            lower: [-(self.pad[0] as i32), -(self.pad[1] as i32)],
            upper: [up(0, self.r), up(1, self.s)],
            strides: [self.stride[0] as u32, self.stride[1] as u32],
        }
    }

    /// The kernel's walk numbers (kernel.cu's `gemm_conv`).
    pub fn args(&self) -> ConvArgs {
        let [p, q] = self.out();
        let m = self.map();
        ConvArgs([
            p as i32,
            q as i32,
            self.r as i32,
            self.s as i32,
            self.chunks() as i32,
            m.lower[0],
            m.lower[1],
            self.stride[0] as i32,
            self.stride[1] as i32,
            self.dil[0] as i32,
            self.dil[1] as i32,
        ])
    }
}

/// kernel.cu's `struct gemm_conv`: P, Q, R, S, CB, lo_h, lo_w, sh, sw, dh, dw.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct ConvArgs(pub [i32; 11]);

// SAFETY: eleven i32, the layout of kernel.cu's `struct gemm_conv` (11 ints, no padding).
unsafe impl DeviceRepr for ConvArgs {}

/// The configurations: warp-specialized, persistent, TMA-store epilogue, B multicast over 2
/// CTAs along M (or none), N tiles of 256, 128 and 64 output channels (ResNet's K of 64 wastes
/// nothing at 64), 128 or 256 pixels with two consumer warpgroups, or 192 with three (`ws3_`:
/// the short grids' tile, e.g. 1x1 2048->512 @7 is 33 x 4 = 132 tiles of 192 x 128, one wave
/// of the H100's 132 SMs, where 128 x 256 tiles are 98, 0.74 of one), or ping-pong (`pp_`:
/// each of two consumer warpgroups a whole 128 x 64, 128 x 128 or 64 x 256 tile, one's
/// epilogue under the other's mainloop: the short-K layers', e.g. 3x3 64->64 @56, 9 k-blocks).
pub fn configs(input: In) -> Vec<Config> {
    let ws = |bm, bn, stages, cm, nb| Config {
        kind: Kind::WS2,
        bm,
        bn,
        stages,
        cm,
        cn: 1,
        persistent: true,
        epi: Epi::Tma { nb },
        input,
        out: Out::of(input),
        wg_release: false,
    };
    let ws3 = |bm, bn, stages, cm, nb| Config {
        kind: Kind::WS3,
        ..ws(bm, bn, stages, cm, nb)
    };
    let pp = |bm, bn, stages, cm, nb| Config {
        kind: Kind::PingPong,
        ..ws(bm, bn, stages, cm, nb)
    };
    vec![
        ws(128, 256, 4, 2, 2),
        ws(128, 128, 6, 2, 2),
        ws(128, 128, 6, 1, 2),
        ws(128, 64, 8, 2, 1),
        ws(256, 128, 3, 2, 2),
        ws(256, 64, 5, 2, 1),
        ws3(192, 128, 4, 1, 2),
        ws3(192, 128, 4, 2, 2),
        ws3(192, 128, 5, 1, 1),
        ws3(192, 64, 6, 2, 1),
        pp(128, 64, 8, 1, 1),
        pp(128, 64, 8, 2, 1),
        pp(128, 128, 6, 2, 2),
        pp(64, 256, 4, 2, 2),
    ]
}

/// The conv plans of [`configs`].
pub fn plans(input: In) -> Vec<Res<Plan>> {
    configs(input).into_iter().map(Plan::conv).collect()
}

/// One problem on the GPU: input and filter (C padded with zero channels), host copies for
/// the reference.
pub struct Problem {
    pub conv: Conv,
    pub input: In,
    pub x_host: Vec<u16>,
    pub w_host: Vec<u16>,
    pub x: CudaSlice<u16>,
    pub w: CudaSlice<u16>,
}

impl Problem {
    pub fn new(gpu: &Gpu, conv: Conv, input: In, rng: &mut Rng) -> Res<Problem> {
        conv.check().map_err(|e| format!("{conv}: {e}"))?;
        let cp = conv.c_pad() as usize;
        let c = conv.c as usize;
        let fill = |pixels: usize, rng: &mut Rng| -> Vec<u16> {
            let mut v = vec![0u16; pixels * cp];
            for px in 0..pixels {
                for ch in 0..c {
                    v[px * cp + ch] = to_bits(rng.signed_unit(), input);
                }
            }
            v
        };
        let x_host = fill((conv.n * conv.h * conv.w) as usize, rng);
        let w_host = fill((conv.k * conv.r * conv.s) as usize, rng);
        Ok(Problem {
            conv,
            input,
            x: gpu.stream.clone_htod(&x_host)?,
            w: gpu.stream.clone_htod(&w_host)?,
            x_host,
            w_host,
        })
    }

    /// Output elements: N P Q K.
    pub fn out_len(&self) -> usize {
        (self.conv.gemm_m() * self.conv.k) as usize
    }

    /// The exact output at pixel `m` (n p q, row-major), channel `kk`, and the sum of the
    /// products' magnitudes (the bound's scale).
    pub fn exact(&self, m: u64, kk: u64) -> (f64, f64) {
        let cv = &self.conv;
        let [p_out, q_out] = cv.out();
        let (n, p, q) = (m / (p_out * q_out), m / q_out % p_out, m % q_out);
        let cp = cv.c_pad();
        let (mut sum, mut mag) = (0f64, 0f64);
        for r in 0..cv.r {
            let h = (p * cv.stride[0] + r * cv.dil[0]) as i64 - cv.pad[0] as i64;
            if !(0..cv.h as i64).contains(&h) {
                continue;
            }
            for s in 0..cv.s {
                let w = (q * cv.stride[1] + s * cv.dil[1]) as i64 - cv.pad[1] as i64;
                if !(0..cv.w as i64).contains(&w) {
                    continue;
                }
                let xb = (((n * cv.h + h as u64) * cv.w + w as u64) * cp) as usize;
                let wb = (((kk * cv.r + r) * cv.s + s) * cp) as usize;
                for c in 0..cv.c as usize {
                    let v = f64::from(from_bits(self.x_host[xb + c], self.input))
                        * f64::from(from_bits(self.w_host[wb + c], self.input));
                    sum += v;
                    mag += v.abs();
                }
            }
        }
        (sum, mag)
    }
}

/// Writes one problem for examples/07-conv/cudnn_check.py: `NAME.json` (the shape, the padded
/// channels, the type) and `NAME_x.bin` (N H W C_pad), `NAME_w.bin` (K R S C_pad), `NAME_y.bin`
/// (N P Q K): the raw 16-bit elements, little-endian.
pub fn dump(dir: &std::path::Path, name: &str, p: &Problem, y: &[f32], out: Out) -> Res<()> {
    std::fs::create_dir_all(dir)?;
    let cv = &p.conv;
    let bits = |v: &[u16]| -> Vec<u8> { v.iter().flat_map(|b| b.to_le_bytes()).collect() };
    let y_bits: Vec<u16> = match out {
        Out::BF16 => y
            .iter()
            .map(|&v| tma::half::bf16::from_f32(v).to_bits())
            .collect(),
        Out::F16 => y
            .iter()
            .map(|&v| tma::half::f16::from_f32(v).to_bits())
            .collect(),
        Out::F32 => return Err("the dump takes 16-bit outputs".into()),
    };
    std::fs::write(dir.join(format!("{name}_x.bin")), bits(&p.x_host))?;
    std::fs::write(dir.join(format!("{name}_w.bin")), bits(&p.w_host))?;
    std::fs::write(dir.join(format!("{name}_y.bin")), bits(&y_bits))?;
    let [p_out, q_out] = cv.out();
    std::fs::write(
        dir.join(format!("{name}.json")),
        format!(
            r#"{{"n":{},"h":{},"w":{},"c":{},"c_pad":{},"k":{},"r":{},"s":{},"pad":[{},{}],"stride":[{},{}],"dil":[{},{}],"p":{p_out},"q":{q_out},"dtype":"{}"}}"#,
            cv.n,
            cv.h,
            cv.w,
            cv.c,
            cv.c_pad(),
            cv.k,
            cv.r,
            cv.s,
            cv.pad[0],
            cv.pad[1],
            cv.stride[0],
            cv.stride[1],
            cv.dil[0],
            cv.dil[1],
            p.input.name()
        ),
    )?;
    Ok(())
}

/// The output buffer of a problem (poison it before each checked run).
pub fn out_buf(gpu: &Gpu, p: &Problem, out: Out) -> Res<OutBuf> {
    OutBuf::new(gpu, p.out_len().max(1), out)
}

/// How far an output is from the exact f64 convolution.
#[derive(Clone, Copy, Debug, Default)]
pub struct Check {
    pub samples: usize,
    pub bad: usize,
    pub max_err: f64,
}

impl Check {
    pub fn ok(&self) -> bool {
        self.bad == 0 && self.samples > 0
    }
}

/// Every output element when there are at most `all_below` of them, else `samples` random
/// ones (the first and last pixel's among them), against the exact sum: `|d - exact| <=
/// u |exact| + 2^-22 sum |products| + 2^-30` (example 05's bound: fp32 accumulation, one
/// rounding to the output type). NaN (the poison left unwritten) fails.
pub fn check(
    p: &Problem,
    out: Out,
    d: &[f32],
    all_below: usize,
    samples: usize,
    rng: &mut Rng,
) -> Check {
    let u = unit_roundoff(out);
    let (m, k) = (p.conv.gemm_m(), p.conv.k);
    let total = (m * k) as usize;
    let picks: Vec<(u64, u64)> = if total <= all_below {
        (0..m).flat_map(|i| (0..k).map(move |j| (i, j))).collect()
    } else {
        (0..samples)
            .map(|i| match i {
                0 => (0, 0),
                1 => (m - 1, k - 1),
                _ => (rng.below(m), rng.below(k)),
            })
            .collect()
    };
    let mut c = Check::default();
    for (i, j) in picks {
        let (exact, mag) = p.exact(i, j);
        let got = f64::from(d[(i * k + j) as usize]);
        let err = (got - exact).abs();
        let bound = u * exact.abs() + 2f64.powi(-22) * mag + 2f64.powi(-30);
        c.samples += 1;
        if err.is_nan() || err > bound {
            c.bad += 1;
        }
        if err.is_finite() {
            c.max_err = c.max_err.max(err / bound.max(1e-30));
        } else {
            c.max_err = f64::INFINITY;
        }
    }
    c
}

/// A conv configuration loaded, with its persistent grid's most clusters.
pub struct Loaded {
    pub config: Config,
    pub kernel: Kernel,
    pub max_clusters: u32,
    plan: Plan,
}

impl Loaded {
    pub fn new(gpu: &Gpu, built: &Built) -> Res<Arc<Loaded>> {
        let module = Module::load(&gpu.ctx, built.compiled.clone())?;
        let kernel = module.kernel("gemm")?;
        let c = built.plan.config;
        let cfg = kernel.plan_config(&gpu.stream, (c.cluster() * gpu.sms, 1, 1))?;
        let max_clusters = kernel.max_active_clusters(&cfg)?;
        if max_clusters == 0 {
            return Err(format!("{c}: no cluster of this configuration fits the GPU").into());
        }
        Ok(Arc::new(Loaded {
            config: c,
            kernel,
            max_clusters,
            plan: built.plan.clone(),
        }))
    }
}

/// A launch of one configuration on one problem: the maps (A im2col over the input, B the
/// filter's `[R*S][K][C]` view, D `[N P Q][K]`), encoded once, and the walk's numbers.
pub struct Launch {
    loaded: Arc<Loaded>,
    cfg: LaunchConfig,
    maps: [TensorMap; 3],
    d_addr: u64,
    dims: [i32; 3],
    args: ConvArgs,
}

impl Launch {
    pub fn new(gpu: &Gpu, loaded: &Arc<Loaded>, p: &Problem, d: &OutBuf) -> Res<Launch> {
        let cv = p.conv;
        let plan = &loaded.plan;
        let c = loaded.config;
        let a = conv_a(p.input, c.bm, cv.map())?;
        // The problem's map lays out the box the kernel was compiled for.
        let kernel_a = plan.im2col.as_ref().ok_or("not a conv plan")?;
        if a.smem_tile()?.plan() != kernel_a.smem_tile()?.plan() {
            return Err(format!("{c}: the problem's im2col box is not the kernel's").into());
        }
        let ma = TensorMap::new_im2col_raw_bits(&a.bind(&cv.map().dims, None)?, &p.x)?;
        let (rs, cp) = (cv.r * cv.s, cv.c_pad());
        let mb = TensorMap::new_raw_bits(
            &plan.b.bind(&[rs, cv.k, cp], Some(&[cp, rs * cp, 1]))?,
            &p.w,
        )?;
        let (m, k) = (cv.gemm_m(), cv.k);
        let md = match (&plan.d, d) {
            (Some(pd), OutBuf::Half(buf)) => {
                TensorMap::new_raw_bits(&pd.bind(&[m, k], None)?, buf)?
            }
            _ => {
                return Err(
                    format!("{c}: the conv stores 16-bit outputs through its D tile").into(),
                )
            }
        };
        let tiles =
            m.div_ceil(u64::from(c.bm)).div_ceil(u64::from(c.cm)) * k.div_ceil(u64::from(c.bn));
        let grid = tiles.min(u64::from(loaded.max_clusters)) as u32 * c.cluster();
        let cfg = loaded.kernel.plan_config(&gpu.stream, (grid, 1, 1))?;
        Ok(Launch {
            loaded: loaded.clone(),
            cfg,
            maps: [ma, mb, md],
            d_addr: d.addr(&gpu.stream),
            dims: [m as i32, k as i32, cv.gemm_k() as i32],
            args: cv.args(),
        })
    }

    pub fn run(&self, group: i32) -> Res<()> {
        let mut l = self.loaded.kernel.launch_builder(&self.cfg);
        l.arg(&self.maps[0])
            .arg(&self.maps[1])
            .arg(&self.maps[2])
            .arg(&self.d_addr)
            .arg(&self.dims[0])
            .arg(&self.dims[1])
            .arg(&self.dims[2])
            .arg(&group)
            .arg(ByValue(&self.args));
        // SAFETY: gemm (GEMM_CONV)(CUtensorMap x 3, void* D, int M, int N, int K, int group,
        // gemm_conv) as kernel.cu declares: the maps cover the problem's input, filter and
        // output buffers, which the caller holds past the launch; M, N, K and the walk's
        // numbers are the problem's (Conv::args, checked by Conv::check).
        unsafe { l.launch() }?;
        Ok(())
    }
}

/// The CPU proof of a conv plan on one convolution: every k-block (tap, chunk) of a few pixel
/// tiles loaded by tma's im2col model (the problem's map: corners, strides, offsets) and
/// tiled model (the filter's `[R*S][K][C]` view with its strides), read back through the
/// plan's own descriptors by the wgmma read model, is the convolution's im2col matrix and
/// filter. Returns the elements compared.
pub fn cpu_proof(plan: &Plan, conv: &Conv, rng: &mut Rng) -> Res<u64> {
    conv.check().map_err(|e| format!("{conv}: {e}"))?;
    let c = plan.config;
    let a = conv_a(c.input, c.bm, conv.map())?;
    let bound_a = a.bind(&conv.map().dims, None)?;
    let pa = OperandPlan::new(a.smem_tile()?).ok_or("A is no operand")?;
    let pb = OperandPlan::new(&plan.b).ok_or("B is no operand")?;
    let kernel_a = plan.im2col.as_ref().ok_or("not a conv plan")?;
    if a.smem_tile()?.plan() != kernel_a.smem_tile()?.plan() {
        return Err("the problem's im2col box is not the kernel's".into());
    }
    let (rs, cp) = (conv.r * conv.s, conv.c_pad());
    let bound_b = plan.b.bind(&[rs, conv.k, cp], Some(&[cp, rs * cp, 1]))?;
    let e = 2u64;
    let rand =
        |len: u64, rng: &mut Rng| -> Vec<u8> { (0..len * e).map(|_| rng.next() as u8).collect() };
    // Zero channels past C, as Problem::new pads them.
    let mut x = rand(conv.n * conv.h * conv.w * cp, rng);
    let mut wt = rand(conv.k * rs * cp, rng);
    for buf in [&mut x, &mut wt] {
        for (i, b) in buf.iter_mut().enumerate() {
            if (i as u64 / e) % cp >= conv.c {
                *b = 0;
            }
        }
    }
    let [p_out, q_out] = conv.out();
    let m_total = conv.gemm_m();
    let base = 1024 * 5;
    let shape_a = ReadShape {
        operand: tma::spec::Operand::A,
        major: tma::spec::Major::K,
        kind: pa.kind,
        n: 0,
    };
    let shape_b = ReadShape {
        operand: tma::spec::Operand::B,
        major: tma::spec::Major::K,
        kind: pb.kind,
        n: pb.mn,
    };
    let tiles = m_total.div_ceil(u64::from(c.bm));
    let mut compared = 0u64;
    for t in [0, tiles / 2, tiles - 1] {
        let m0 = t * u64::from(c.bm);
        let (n0, p0, q0) = (m0 / (p_out * q_out), m0 / q_out % p_out, m0 % q_out);
        let lo = conv.map().lower;
        for r in 0..conv.r {
            for s in 0..conv.s {
                for cb in 0..conv.chunks() {
                    let coords = [
                        n0 as i64,
                        i64::from(lo[0]) + (p0 * conv.stride[0]) as i64,
                        i64::from(lo[1]) + (q0 * conv.stride[1]) as i64,
                        (cb * u64::from(BK)) as i64,
                    ];
                    let offsets = [(r * conv.dil[0]) as i64, (s * conv.dil[1]) as i64];
                    let smem_a = im2col::load(&bound_a, &x, &coords, &offsets)?;
                    // B: the tile's first N rows (a cluster's share is the same view).
                    let smem_b =
                        model::load(&bound_b, &wt, &[(r * conv.s + s) as i64, 0, coords[3]])?;
                    for slice in 0..pa.k_slices {
                        for block in 0..pa.m_blocks {
                            let desc = pa
                                .descriptor(a.smem_tile()?, base, slice, block)?
                                .encode()?;
                            let got = read_operand(desc, &shape_a, &smem_a, base)?;
                            for row in 0..64 {
                                let m = m0 + block * 64 + row;
                                let (n, p, q) = (m / (p_out * q_out), m / q_out % p_out, m % q_out);
                                let h = (p * conv.stride[0] + r * conv.dil[0]) as i64
                                    - conv.pad[0] as i64;
                                let w = (q * conv.stride[1] + s * conv.dil[1]) as i64
                                    - conv.pad[1] as i64;
                                for kk in 0..shape_a.k() {
                                    let ch = cb * u64::from(BK) + slice * shape_a.k() + kk;
                                    let inside = n < conv.n
                                        && (0..conv.h as i64).contains(&h)
                                        && (0..conv.w as i64).contains(&w)
                                        && ch < cp;
                                    let want = if inside {
                                        let at = ((((n * conv.h + h as u64) * conv.w + w as u64)
                                            * cp
                                            + ch)
                                            * e)
                                            as usize;
                                        x[at..at + e as usize].to_vec()
                                    } else {
                                        vec![0; e as usize]
                                    };
                                    if got[(row * shape_a.k() + kk) as usize] != want {
                                        return Err(format!(
                                            "{conv}: A pixel {m} tap ({r}, {s}) channel {ch} is not the im2col matrix's"
                                        )
                                        .into());
                                    }
                                    compared += 1;
                                }
                            }
                        }
                        let desc = pb.descriptor(&plan.b, base, slice, 0)?.encode()?;
                        let got = read_operand(desc, &shape_b, &smem_b, base)?;
                        for row in 0..shape_b.rows() {
                            for kk in 0..shape_b.k() {
                                let ch = cb * u64::from(BK) + slice * shape_b.k() + kk;
                                let want = if row < conv.k && ch < cp {
                                    let at = ((((row * conv.r + r) * conv.s + s) * cp + ch) * e)
                                        as usize;
                                    wt[at..at + e as usize].to_vec()
                                } else {
                                    vec![0; e as usize]
                                };
                                if got[(row * shape_b.k() + kk) as usize] != want {
                                    return Err(format!(
                                        "{conv}: B filter {row} tap ({r}, {s}) channel {ch} is not the filter's"
                                    )
                                    .into());
                                }
                                compared += 1;
                            }
                        }
                    }
                }
            }
        }
    }
    Ok(compared)
}
