//! On the GPU: problems (Q, K, V random, never 0), a compiled configuration loaded and launched
//! from its kernel plan, outputs poisoned before each run, event timing.

use std::sync::Arc;

use cudarc::driver::sys::CUevent_flags;
use cudarc::driver::{CudaContext, CudaSlice, CudaStream, DevicePtr};
use tma::runtime::{Compiled, Kernel, LaunchConfig, Module, TensorMap};

use crate::compile::Built;
use crate::kernel::{Config, In, Plan, Res, WorkPlan};
use crate::rng::Rng;

pub struct Gpu {
    pub ctx: Arc<CudaContext>,
    pub stream: Arc<CudaStream>,
    pub name: String,
    pub sms: u32,
}

impl Gpu {
    pub fn new() -> Res<Gpu> {
        let ctx = CudaContext::new(0)?;
        let stream = ctx.new_stream()?;
        let name = ctx.name()?;
        let sms = u32::try_from(ctx.attribute(
            cudarc::driver::sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT,
        )?)?;
        Ok(Gpu {
            ctx,
            stream,
            name,
            sms,
        })
    }
}

/// A problem's sizes: batch, query heads, key/value heads (GQA: `h % hkv == 0`), query and
/// key sequence lengths, head dim.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Shape {
    pub b: usize,
    pub h: usize,
    pub hkv: usize,
    pub sq: usize,
    pub sk: usize,
    pub d: usize,
}

impl Shape {
    /// FLOPs of the forward: 4 B H Sq Sk D (two GEMMs), halved under causal (as FlashAttention
    /// and the issue count them).
    pub fn flops(&self, causal: bool) -> f64 {
        let f = 4.0 * (self.b * self.h) as f64 * self.sq as f64 * self.sk as f64 * self.d as f64;
        if causal {
            f / 2.0
        } else {
            f
        }
    }
    pub fn check(&self) -> Res<()> {
        if self.b == 0 || self.h == 0 || self.hkv == 0 || self.sq == 0 || self.sk == 0 {
            return Err(format!("{self}: every size is at least 1").into());
        }
        if self.h % self.hkv != 0 {
            return Err(
                format!("{self}: query heads are a multiple of key/value heads (GQA)").into(),
            );
        }
        Ok(())
    }
}

impl std::fmt::Display for Shape {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "b{} h{}/{} sq{} sk{} d{}",
            self.b, self.h, self.hkv, self.sq, self.sk, self.d
        )
    }
}

/// One problem's inputs on host (bits) and device. Q is drawn from [-3, 3) (sharp softmax
/// rows, so the running max matters), K and V from [-1, 1) (K's row j times 1 + growth j / Sk
/// with `with_key_growth`); none is 0.
pub struct Problem {
    pub shape: Shape,
    pub input: In,
    pub q_host: Vec<u16>,
    pub k_host: Vec<u16>,
    pub v_host: Vec<u16>,
    pub q: CudaSlice<u16>,
    pub k: CudaSlice<u16>,
    pub v: CudaSlice<u16>,
}

impl Problem {
    pub fn new(gpu: &Gpu, shape: Shape, input: In, rng: &mut Rng) -> Res<Problem> {
        Problem::with_key_growth(gpu, shape, input, rng, 0.0)
    }

    /// Key row j (of every head) scaled by 1 + growth j / Sk: later keys score higher, so a
    /// row's running max keeps moving past its first blocks (the lazy rescale's taken path).
    pub fn with_key_growth(
        gpu: &Gpu,
        shape: Shape,
        input: In,
        rng: &mut Rng,
        growth: f32,
    ) -> Res<Problem> {
        shape.check()?;
        let mut fill = |len: usize, scale: &dyn Fn(usize) -> f32| -> Vec<u16> {
            (0..len)
                .map(|i| {
                    let v = rng.signed_unit() * scale(i);
                    input.to_bits(if v == 0.0 { 1.0 / 256.0 } else { v })
                })
                .collect()
        };
        let (q_len, kv_len) = (
            shape.b * shape.h * shape.sq * shape.d,
            shape.b * shape.hkv * shape.sk * shape.d,
        );
        let key_row = |i: usize| (i / shape.d) % shape.sk;
        let q_host = fill(q_len, &|_| 3.0);
        let k_host = fill(kv_len, &|i| {
            1.0 + growth * key_row(i) as f32 / shape.sk as f32
        });
        let v_host = fill(kv_len, &|_| 1.0);
        Ok(Problem {
            shape,
            input,
            q: gpu.stream.clone_htod(&q_host)?,
            k: gpu.stream.clone_htod(&k_host)?,
            v: gpu.stream.clone_htod(&v_host)?,
            q_host,
            k_host,
            v_host,
        })
    }
}

/// The outputs: O ([B H][Sq][D], the input type) and the log-sum-exp ([B H][Sq], f32).
pub struct Outputs {
    pub o: CudaSlice<u16>,
    pub lse: CudaSlice<f32>,
}

impl Outputs {
    pub fn new(gpu: &Gpu, s: &Shape) -> Res<Outputs> {
        let rows = s.b * s.h * s.sq;
        Ok(Outputs {
            o: gpu.stream.alloc_zeros::<u16>(rows * s.d)?,
            lse: gpu.stream.alloc_zeros::<f32>(rows)?,
        })
    }
    /// Every byte 0xFF: NaN in the 16-bit types and f32.
    pub fn poison(&mut self, stream: &CudaStream) -> Res<()> {
        for (addr, bytes) in [
            (self.o.device_ptr(stream).0, self.o.len() * 2),
            (self.lse.device_ptr(stream).0, self.lse.len() * 4),
        ] {
            // SAFETY: each buffer's own address and length, on the stream it was allocated on.
            unsafe {
                cudarc::driver::result::memset_d8_async(addr, 0xFF, bytes, stream.cu_stream())
            }?;
        }
        Ok(())
    }
}

/// A configuration loaded on the GPU.
pub struct Loaded {
    pub config: Config,
    pub kernel: Kernel,
    /// attn_merge (`Config::split_tail`).
    merge: Option<Kernel>,
    plan: Plan,
    /// CTAs resident on the whole GPU at once (a persistent grid's size).
    resident: u32,
}

impl Loaded {
    pub fn new(gpu: &Gpu, built: &Built) -> Res<Arc<Loaded>> {
        Loaded::from_compiled(gpu, &built.plan, built.compiled.clone())
    }

    /// `plan` compiled with other options than [`Built`]'s (the bench's timeline build).
    pub fn from_compiled(gpu: &Gpu, plan: &Plan, compiled: Arc<Compiled>) -> Res<Arc<Loaded>> {
        let module = Module::load(&gpu.ctx, compiled)?;
        let kernel = module.kernel("attn")?;
        let merge = if plan.config.split_tail {
            Some(module.kernel("attn_merge")?)
        } else {
            None
        };
        // The plan's launch (block, cluster, dynamic shared memory: the runtime opts the kernel
        // in) at the most blocks (clusters) the driver gives it at once.
        let ctas = plan.config.cluster_ctas();
        let resident = if ctas > 1 {
            let cfg = kernel.plan_config(&gpu.stream, (ctas * gpu.sms, 1, 1))?;
            ctas * kernel.max_active_clusters(&cfg)?
        } else {
            let cfg = kernel.plan_config(&gpu.stream, (1, 1, 1))?;
            kernel.max_active_blocks_per_sm(&cfg)? * gpu.sms
        };
        if resident == 0 {
            return Err(format!("{}: no block (cluster) fits the GPU", plan.config).into());
        }
        Ok(Arc::new(Loaded {
            config: plan.config,
            kernel,
            merge,
            plan: plan.clone(),
            resident,
        }))
    }
}

/// A launch of one configuration on one problem: the maps encoded once.
pub struct Launch {
    loaded: Arc<Loaded>,
    cfg: LaunchConfig,
    maps: [TensorMap; 4],
    out: u64,
    lse: u64,
    dims: [i32; 4],
    scale_log2: f32,
    units: i32,
    /// A head's query blocks (`Config::query_blocks`): attn.cu's units of one head.
    qblocks: i32,
    /// The table's buffers (None: a round-robin walk, `Config::walks_table` false).
    work: Option<Work>,
    /// The work's part, items, nitems and pieces (0: no table).
    ptrs: [u64; 4],
    stride: i32,
    /// Cut units (`Config::split_tail`): attn_merge's grid is split x consumers.
    split: i32,
}

/// A table walk's buffers (`Config::walks_table`): the split tail's pieces' partials (attn.cu's
/// attn_partial, read by attn_merge; one unused float otherwise) and the plan's table
/// (`WorkPlan`).
struct Work {
    part: CudaSlice<f32>,
    items: CudaSlice<i32>,
    nitems: CudaSlice<i32>,
    pieces: CudaSlice<i32>,
}

impl Launch {
    pub fn new(gpu: &Gpu, loaded: &Arc<Loaded>, p: &Problem, out: &Outputs) -> Res<Launch> {
        let s = p.shape;
        let c = loaded.config;
        if s.d != c.d as usize || p.input != c.input {
            return Err(format!("{c}: a problem of {s} {}", p.input.name()).into());
        }
        let plan = &loaded.plan;
        let (bh, bhkv, d) = ((s.b * s.h) as u64, (s.b * s.hkv) as u64, s.d as u64);
        let mq = TensorMap::new_raw_bits(&plan.q.bind(&[bh, s.sq as u64, d], None)?, &p.q)?;
        let mk = TensorMap::new_raw_bits(&plan.k.bind(&[bhkv, s.sk as u64, d], None)?, &p.k)?;
        let mv = TensorMap::new_raw_bits(&plan.v.bind(&[bhkv, s.sk as u64, d], None)?, &p.v)?;
        let mo = TensorMap::new_raw_bits(&plan.o.bind(&[bh, s.sq as u64, d], None)?, &out.o)?;
        // Work units: each head's query blocks (an even count on 2-CTA clusters, so a grid of
        // pairs: `resident` is even too).
        let qblocks = c.query_blocks(s.sq);
        let i = |v: usize| i32::try_from(v).map_err(|_| format!("{v} does not fit an int"));
        let units = i(qblocks * s.b * s.h)?;
        let grid = if c.persistent {
            (units as u32).min(loaded.resident)
        } else {
            units as u32
        };
        let cfg = loaded.kernel.plan_config(&gpu.stream, (grid, 1, 1))?;
        // Units past the last full round, when there is one: on a grid of 132, 2048 units are
        // 15 rounds and 68 units, which take a 16th round on 68 CTAs while 64 idle. A
        // split_tail kernel reads its work from the plan's table, split or not; so does a causal
        // persistent grid, balanced by the units' key blocks.
        let tail = units as usize % grid as usize;
        let split = if units as u32 > grid { tail } else { 0 };
        let mut stride = 0;
        let work = if c.walks_table() {
            let plan = if c.split_tail {
                WorkPlan::split_tail(
                    units as usize,
                    grid as usize,
                    s.sk.div_ceil(c.bn as usize),
                    split,
                )?
            } else {
                let blocks: Vec<usize> = (0..units as usize)
                    .map(|u| c.unit_blocks(u, qblocks, s.sk))
                    .collect();
                WorkPlan::balanced(&blocks, grid as usize)?
            };
            let consumers = c.consumers() as usize;
            // Per CTA, 2 slots x consumers of (D / 2 + 4) x 128 floats (one float: no pieces).
            let part_floats = if c.split_tail {
                grid as usize * 2 * consumers * (s.d / 2 + 4) * 128
            } else {
                1
            };
            let part = gpu.stream.alloc_zeros::<f32>(part_floats)?;
            let flat: Vec<i32> = plan.items.iter().flatten().copied().collect();
            let items = gpu.stream.clone_htod(&flat)?;
            let nitems = gpu.stream.clone_htod(&plan.nitems)?;
            // One word more: with nothing split the list is empty, and an empty buffer has no
            // address to pass (attn_merge does not run then).
            let mut lists = plan.pieces.clone();
            lists.push(0);
            let pieces = gpu.stream.clone_htod(&lists)?;
            stride = i(plan.stride)?;
            Some(Work {
                part,
                items,
                nitems,
                pieces,
            })
        } else {
            None
        };
        let ptrs = work.as_ref().map_or([0; 4], |w| {
            [
                w.part.device_ptr(&gpu.stream).0,
                w.items.device_ptr(&gpu.stream).0,
                w.nitems.device_ptr(&gpu.stream).0,
                w.pieces.device_ptr(&gpu.stream).0,
            ]
        });
        Ok(Launch {
            loaded: loaded.clone(),
            cfg,
            maps: [mq, mk, mv, mo],
            out: out.o.device_ptr(&gpu.stream).0,
            lse: out.lse.device_ptr(&gpu.stream).0,
            dims: [i(s.h)?, i(s.hkv)?, i(s.sq)?, i(s.sk)?],
            scale_log2: (std::f64::consts::LOG2_E / (s.d as f64).sqrt()) as f32,
            units,
            qblocks: i(qblocks)?,
            stride,
            split: if c.split_tail { i(split)? } else { 0 },
            work,
            ptrs,
        })
    }

    /// Every byte of the split tail's partials 0xFF (NaN), so that a merge that reads a slot
    /// this launch did not write shows (nothing without `Config::split_tail`).
    pub fn poison_work(&self, stream: &CudaStream) -> Res<()> {
        if let Some(w) = &self.work {
            let (addr, bytes) = (w.part.device_ptr(stream).0, w.part.len() * 4);
            // SAFETY: the buffer's own address and length, on the stream it was allocated on.
            unsafe {
                cudarc::driver::result::memset_d8_async(addr, 0xFF, bytes, stream.cu_stream())
            }?;
        }
        Ok(())
    }

    /// attn's launch (grid, block, shared memory): what a timeline attaches to.
    pub fn config(&self) -> &LaunchConfig {
        &self.cfg
    }

    pub fn run(&self) -> Res<()> {
        let mut l = self.loaded.kernel.launch_builder(&self.cfg);
        for m in &self.maps {
            l.arg(m);
        }
        l.arg(&self.out).arg(&self.lse);
        for d in &self.dims {
            l.arg(d);
        }
        l.arg(&self.scale_log2).arg(&self.units).arg(&self.qblocks);
        let [part, items, nitems, pieces] = &self.ptrs;
        l.arg(part).arg(items).arg(nitems).arg(&self.stride);
        // SAFETY: (CUtensorMap x 4, void*, float*, int x 4, float, int, int, float*, int4*, int*, int)
        // as attn.cu declares; the maps cover the problem's and the outputs'
        // buffers, which outlive the launch (the caller holds them); O and LSE hold B H Sq (x D)
        // elements of their types; a table walk's buffers are the plan's and the sizes
        // Launch::new allocated (self.work holds them); other kernels never read the null
        // pointers.
        unsafe { l.launch() }?;
        if self.split > 0 {
            let merge = self
                .loaded
                .merge
                .as_ref()
                .ok_or("a split_tail configuration without attn_merge")?;
            let grid = (self.split * self.loaded.config.consumers() as i32) as u32;
            let cfg = LaunchConfig::new(&self.cfg.stream, (grid, 1, 1), (128, 1, 1));
            let mut m = merge.launch_builder(&cfg);
            m.arg(&self.out).arg(&self.lse).arg(part).arg(pieces);
            for d in &self.dims {
                m.arg(d);
            }
            m.arg(&self.scale_log2)
                .arg(&self.units)
                .arg(&self.qblocks)
                .arg(&self.split);
            // SAFETY: (void*, float*, const float*, const int*, int x 4, float, int, int, int) as
            // attn.cu's attn_merge declares; part holds every piece's partial that attn just
            // wrote (same stream), pieces the plan's lists; O and LSE as above.
            unsafe { m.launch() }?;
        }
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

// warm_ms(): the same rule as example 05's benches.
include!("../05-gemm/warm_ms.rs");

/// Runs `f` back to back until [`warm_ms`] of GPU time have passed (event-timed): a
/// power-capped GPU's clocks settle before the samples (the torch script does the same).
pub fn warm(gpu: &Gpu, f: &mut dyn FnMut() -> Res<()>) -> Res<()> {
    let ms = warm_ms();
    let mut spent = 0.0;
    while spent < ms {
        spent += time(gpu, 1, f)?.iter().sum::<f64>();
    }
    Ok(())
}

pub fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(f64::NAN)
}
