//! On the GPU: problems (random A and B in [-1, 1], never 0), the cuBLAS reference on the
//! same buffers, launching a compiled configuration from its kernel plan, event timing.

use std::sync::Arc;

use cudarc::driver::sys;
use cudarc::driver::sys::CUevent_flags;
use cudarc::driver::{CudaContext, CudaSlice, CudaStream, DevicePtr};
use tma::runtime::{Kernel, LaunchConfig, Module, TensorMap};

use crate::compile::Built;
use crate::cublas::Cublas;
use crate::kernel::{Config, In, Out, Plan, Res};
use crate::rng::Rng;

pub struct Gpu {
    pub ctx: Arc<CudaContext>,
    pub stream: Arc<CudaStream>,
    pub name: String,
    pub sms: u32,
    pub cublas: Cublas,
}

impl Gpu {
    pub fn new() -> Res<Gpu> {
        let ctx = CudaContext::new(0)?;
        // A stream of our own: the tuner captures short kernels into CUDA graphs, which the
        // legacy default stream refuses.
        let stream = ctx.new_stream()?;
        let name = ctx.name()?;
        let sms = ctx
            .attribute(sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)?
            as u32;
        let cublas = Cublas::new(&stream)?;
        Ok(Gpu {
            ctx,
            stream,
            name,
            sms,
            cublas,
        })
    }
}

/// Bits of `v` as `input`'s element (round to nearest even); 0 becomes the smallest normal
/// step away from it (zero inputs run faster and prove less).
pub fn to_bits(v: f32, input: In) -> u16 {
    let v = if v == 0.0 { 1.0 / 256.0 } else { v };
    match input {
        In::BF16 => tma::half::bf16::from_f32(v).to_bits(),
        In::F16 => tma::half::f16::from_f32(v).to_bits(),
    }
}

pub fn from_bits(b: u16, t: In) -> f32 {
    match t {
        In::BF16 => tma::half::bf16::from_bits(b).to_f32(),
        In::F16 => tma::half::f16::from_bits(b).to_f32(),
    }
}

/// `len` random elements in [-1, 1) (never 0) as bits of `input`, filled on several threads (8192^2 elements per operand),
/// each from its own generator seeded by `seed`.
pub fn random_bits(len: usize, input: In, seed: u64) -> Vec<u16> {
    let mut v = vec![0u16; len];
    let threads = std::thread::available_parallelism()
        .map_or(1, |t| t.get())
        .min(16);
    let chunk = len.div_ceil(threads).max(1);
    std::thread::scope(|s| {
        for (i, part) in v.chunks_mut(chunk).enumerate() {
            s.spawn(move || {
                let mut rng = Rng::new(seed ^ (i as u64 + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15));
                for x in part {
                    *x = to_bits(rng.signed_unit(), input);
                }
            });
        }
    });
    v
}

/// One problem: M x N x K, inputs on host and device.
pub struct Problem {
    pub m: usize,
    pub n: usize,
    pub k: usize,
    pub input: In,
    pub a_host: Vec<u16>,
    pub b_host: Vec<u16>,
    pub a: CudaSlice<u16>,
    pub b: CudaSlice<u16>,
}

impl Problem {
    pub fn new(gpu: &Gpu, (m, n, k): (usize, usize, usize), input: In, seed: u64) -> Res<Problem> {
        let a_host = random_bits(m * k, input, seed);
        let b_host = random_bits(n * k, input, seed.rotate_left(17) ^ 0x5555);
        let a = gpu.stream.clone_htod(&a_host)?;
        let b = gpu.stream.clone_htod(&b_host)?;
        Ok(Problem {
            m,
            n,
            k,
            input,
            a_host,
            b_host,
            a,
            b,
        })
    }
    pub fn flops(&self) -> f64 {
        2.0 * self.m as f64 * self.n as f64 * self.k as f64
    }
}

/// An output buffer of one type.
pub enum OutBuf {
    Half(CudaSlice<u16>),
    Single(CudaSlice<f32>),
}

impl OutBuf {
    pub fn new(gpu: &Gpu, len: usize, out: Out) -> Res<OutBuf> {
        Ok(match out {
            Out::F32 => OutBuf::Single(gpu.stream.alloc_zeros::<f32>(len)?),
            _ => OutBuf::Half(gpu.stream.alloc_zeros::<u16>(len)?),
        })
    }
    pub fn addr(&self, stream: &CudaStream) -> u64 {
        match self {
            OutBuf::Half(s) => s.device_ptr(stream).0,
            OutBuf::Single(s) => s.device_ptr(stream).0,
        }
    }
    pub fn bytes(&self) -> usize {
        match self {
            OutBuf::Half(s) => s.len() * 2,
            OutBuf::Single(s) => s.len() * 4,
        }
    }
    /// Every byte 0xFF: NaN in bf16, f16 and f32.
    pub fn poison(&mut self, stream: &CudaStream) -> Res<()> {
        let (addr, bytes) = (self.addr(stream), self.bytes());
        // SAFETY: the buffer's own address and length, on the stream it was allocated on.
        unsafe { cudarc::driver::result::memset_d8_async(addr, 0xFF, bytes, stream.cu_stream()) }?;
        Ok(())
    }
    /// The values, as f32.
    pub fn read(&self, stream: &Arc<CudaStream>, out: Out) -> Res<Vec<f32>> {
        Ok(match self {
            OutBuf::Single(s) => stream.clone_dtoh(s)?,
            OutBuf::Half(s) => {
                let t = if out == Out::F16 { In::F16 } else { In::BF16 };
                stream
                    .clone_dtoh(s)?
                    .into_iter()
                    .map(|b| from_bits(b, t))
                    .collect()
            }
        })
    }
}

/// cuBLAS into `d`.
pub fn cublas(gpu: &Gpu, p: &Problem, out: Out, d: &OutBuf) -> Res<()> {
    let s = &gpu.stream;
    let (a, b) = (p.a.device_ptr(s).0, p.b.device_ptr(s).0);
    // SAFETY: A is M x K, B N x K of p.input, d holds M x N of `out` (OutBuf::new(M * N)).
    unsafe {
        gpu.cublas
            .gemm(p.m, p.n, p.k, p.input, out, a, b, d.addr(s))
    }?;
    Ok(())
}

/// A configuration loaded on the GPU.
pub struct Loaded {
    pub config: Config,
    pub kernel: Kernel,
    /// Resident clusters per GPU (persistent grid size), from the driver.
    pub max_clusters: u32,
    plan_a: tma::ValidSpec,
    plan_b: tma::ValidSpec,
    plan_d: Option<tma::ValidSpec>,
}

impl Loaded {
    pub fn new(gpu: &Gpu, built: &Built) -> Res<Arc<Loaded>> {
        let module = Module::load(&gpu.ctx, built.compiled.clone())?;
        Loaded::from_module(gpu, &built.plan, &module)
    }

    /// `plan`'s kernel in `module` (compiled from `plan.source()`).
    pub fn from_module(gpu: &Gpu, plan: &Plan, module: &Arc<Module>) -> Res<Arc<Loaded>> {
        let kernel = module.kernel("gemm")?;
        let c = plan.config;
        // The most clusters of the plan's launch (block, cluster, dynamic shared memory: the
        // runtime opts the kernel in) that fit the GPU at once: a persistent grid.
        let cfg = kernel.plan_config(&gpu.stream, (c.cluster() * gpu.sms, 1, 1))?;
        let max_clusters = kernel.max_active_clusters(&cfg)?;
        if max_clusters == 0 {
            return Err(format!("{c}: no cluster of this configuration fits the GPU").into());
        }
        Ok(Arc::new(Loaded {
            config: c,
            kernel,
            max_clusters,
            plan_a: plan.a.clone(),
            plan_b: plan.b.clone(),
            plan_d: plan.d.clone(),
        }))
    }

    /// Grid (blocks) for a problem.
    pub fn grid(&self, p: &Problem) -> u32 {
        let c = &self.config;
        let (bm, bn) = (c.bm as usize, c.bn as usize);
        let clusters =
            p.m.div_ceil(bm).div_ceil(c.cm as usize) * p.n.div_ceil(bn).div_ceil(c.cn as usize);
        let clusters = if c.persistent {
            clusters.min(self.max_clusters as usize)
        } else {
            clusters
        };
        clusters as u32 * c.cluster()
    }

    /// Passes each warp makes through the ring on `p` (what a timeline holds per warp): the
    /// k-blocks of every tile its cluster takes.
    pub fn passes(&self, p: &Problem) -> u32 {
        let c = &self.config;
        let tiles = p.m.div_ceil(c.bm as usize).div_ceil(c.cm as usize)
            * p.n.div_ceil(c.bn as usize).div_ceil(c.cn as usize);
        let clusters = (self.grid(p) / c.cluster()) as usize;
        (tiles.div_ceil(clusters) * p.k.div_ceil(crate::kernel::BK as usize)) as u32
    }
}

/// A launch of one configuration on one problem and output: the maps, encoded once, and
/// D's address (no `&CudaSlice` per launch: the tuner captures launches into CUDA graphs).
pub struct Launch {
    loaded: Arc<Loaded>,
    cfg: LaunchConfig,
    maps: [TensorMap; 3],
    d_addr: u64,
    dims: [i32; 3],
}

impl Launch {
    pub fn new(gpu: &Gpu, loaded: &Arc<Loaded>, p: &Problem, d: &OutBuf, out: Out) -> Res<Launch> {
        let (m, n, k) = (p.m as u64, p.n as u64, p.k as u64);
        let ma = TensorMap::new_raw_bits(&loaded.plan_a.bind(&[m, k], None)?, &p.a)?;
        let mb = TensorMap::new_raw_bits(&loaded.plan_b.bind(&[n, k], None)?, &p.b)?;
        // Without the TMA epilogue the kernel ignores map D: pass A's.
        let md = match (&loaded.plan_d, d) {
            (Some(pd), OutBuf::Half(buf)) if out != Out::F32 => {
                TensorMap::new_raw_bits(&pd.bind(&[m, n], None)?, buf)?
            }
            (Some(pd), OutBuf::Single(buf)) => TensorMap::new(&pd.bind(&[m, n], None)?, buf)?,
            (Some(_), _) => return Err("output buffer of the wrong type".into()),
            (None, _) => TensorMap::new_raw_bits(&loaded.plan_a.bind(&[m, k], None)?, &p.a)?,
        };
        // Block, cluster and dynamic shared memory from the kernel's plan; the grid is ours.
        let cfg = loaded
            .kernel
            .plan_config(&gpu.stream, (loaded.grid(p), 1, 1))?;
        Ok(Launch {
            loaded: loaded.clone(),
            cfg,
            maps: [ma, mb, md],
            d_addr: d.addr(&gpu.stream),
            dims: [p.m as i32, p.n as i32, p.k as i32],
        })
    }

    /// The launch's grid, block, cluster and shared memory (what a timeline is sized for).
    pub fn config(&self) -> &LaunchConfig {
        &self.cfg
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
            .arg(&group);
        // SAFETY: (CUtensorMap x 3, void*, int, int, int, int) as kernel.cu declares; the maps
        // cover the problem's buffers, which outlive the launch (the caller holds them), and
        // D's address is a live M x N output of the configuration's type.
        unsafe { l.launch() }?;
        Ok(())
    }
}

/// Event times (ms) of `reps` launches of `f`, each between its own pair of events.
pub fn time(gpu: &Gpu, reps: usize, f: &mut dyn FnMut() -> Res<()>) -> Res<Vec<f64>> {
    let start = gpu.ctx.new_event(Some(CUevent_flags::CU_EVENT_DEFAULT))?;
    let end = gpu.ctx.new_event(Some(CUevent_flags::CU_EVENT_DEFAULT))?;
    let mut t = Vec::with_capacity(reps);
    for _ in 0..reps {
        start.record(&gpu.stream)?;
        f()?;
        end.record(&gpu.stream)?;
        t.push(f64::from(start.elapsed_ms(&end)?));
    }
    Ok(t)
}

/// Per-launch times (ms) of `reps` samples, each `launches` calls of `f` back to back between
/// one pair of events, after one untimed sample and [`warm_ms`] of samples: a kernel of tens
/// of microseconds is timed on the GPU, not with the host's launch gap in every sample (which
/// favours whichever side launches faster), at the clocks the power cap settles to (the
/// Python baselines are timed the same way, `torch_timing.timed`).
#[allow(dead_code)] // the benchmarks'
pub fn time_batched(
    gpu: &Gpu,
    reps: usize,
    launches: usize,
    f: &mut dyn FnMut() -> Res<()>,
) -> Res<Vec<f64>> {
    let mut batch = || -> Res<()> {
        for _ in 0..launches {
            f()?;
        }
        Ok(())
    };
    time(gpu, 1, &mut batch)?;
    let mut spent = 0.0;
    while spent < warm_ms() {
        spent += time(gpu, 1, &mut batch)?.iter().sum::<f64>();
    }
    Ok(time(gpu, reps, &mut batch)?
        .into_iter()
        .map(|t| t / launches as f64)
        .collect())
}

// warm_ms(): one definition for examples 05 and 06 (and their benches).
include!("warm_ms.rs");

pub fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(f64::NAN)
}
