//! The fast kernels of msda_fast.cu for any sizes: their configuration, their kernel plans
//! (block, blocks per SM, and for `msda_stage` one 5-D tile per staged level in a tile set and
//! the cluster), the rendered source, the device buffers and the launches (from the plans).
//! Shared by the example and the benchmark.

use std::sync::Arc;

use cudarc::driver::{CudaContext, CudaSlice, CudaStream, DeviceRepr};
use tma::plan::{KernelPlan, ValidKernelPlan};
use tma::render::KernelSource;
use tma::runtime::{ByValue, CompileOptions, Compiler, Kernel, Module, Source};
use tma::runtime::{Compiled, TensorMap};
use tma::spec::OobFill;
use tma::{validate, Arch, TileSpec, ValidSpec};

use crate::dist::{Inputs, Ty};
use crate::reference::Msda;
use crate::setup::Res;

pub const MSDA_FAST_CU: &str = include_str!("msda_fast.cu");
/// Levels `MsdaShapes` holds (msda_fast.cu's arrays are MSDA_L long; the host's copy is
/// padded to this many).
pub const MAX_LEVELS: usize = 16;

/// Which kernel, and its knobs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Design {
    /// msda_vec: `qpb` queries per block; `all_heads`: a block holds every head of its
    /// queries (else one (batch, head) per block).
    Vec { qpb: u32, all_heads: bool },
    /// msda_stage: `qpb` queries per pass, `rounds` passes per block; the smallest levels
    /// whose planes fit `budget` bytes of shared memory are staged by TMA; `cluster` blocks
    /// of one (batch, head) share the staging, each loading part of it multicast to all.
    Stage {
        qpb: u32,
        rounds: u32,
        budget: u32,
        cluster: u32,
    },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Config {
    pub design: Design,
    /// `attn` holds logits; the kernel applies the softmax over each (query, head)'s L * P.
    pub softmax: bool,
    /// `#pragma unroll` of the point loop.
    pub unroll: u32,
    /// Blocks per SM the registers must allow (`__launch_bounds__`' second argument).
    pub minb: u32,
}

impl Config {
    /// The default plain-load kernel.
    pub const VEC: Config = Config {
        design: Design::Vec {
            qpb: 64,
            all_heads: false,
        },
        softmax: false,
        unroll: 2,
        minb: 1,
    };
    /// The default TMA kernel (76 KB budget: 3 blocks per SM).
    pub const STAGE: Config = Config {
        design: Design::Stage {
            qpb: 128,
            rounds: 1,
            budget: 76 * 1024,
            cluster: 1,
        },
        softmax: false,
        unroll: 2,
        minb: 1,
    };
    /// The hybrid: only what fits 20 KB staged by TMA (the smallest level at the seed
    /// size), the other levels gathered through L1, 64 queries per block.
    pub const HYBRID: Config = Config {
        design: Design::Stage {
            qpb: 64,
            rounds: 1,
            budget: 20 * 1024,
            cluster: 1,
        },
        softmax: false,
        unroll: 2,
        minb: 1,
    };
    /// This config with a cluster of `n` blocks sharing the staging (msda_stage only).
    pub fn with_cluster(self, n: u32) -> Config {
        let design = match self.design {
            Design::Stage {
                qpb,
                rounds,
                budget,
                ..
            } => Design::Stage {
                qpb,
                rounds,
                budget,
                cluster: n,
            },
            d => d,
        };
        Config { design, ..self }
    }
    pub fn with_softmax(self) -> Config {
        Config {
            softmax: true,
            ..self
        }
    }
    pub fn kernel_name(&self) -> &'static str {
        match self.design {
            Design::Vec { .. } => "msda_vec",
            Design::Stage { .. } => "msda_stage",
        }
    }
    /// A short name with the knobs, for tables.
    pub fn label(&self) -> String {
        let knobs = match self.design {
            Design::Vec { qpb, all_heads } => {
                format!("q{qpb}{}", if all_heads { " allheads" } else { "" })
            }
            Design::Stage {
                qpb,
                rounds,
                budget,
                cluster,
            } => format!("q{qpb}x{rounds} {}K c{cluster}", budget / 1024),
        };
        format!(
            "{} {knobs} u{} b{}{}",
            self.kernel_name(),
            self.unroll,
            self.minb,
            if self.softmax { " softmax" } else { "" }
        )
    }
}

/// What msda_fast.cu takes by value (`struct MsdaShapes`, MSDA_L = levels long; this copy is
/// MAX_LEVELS long and only its first `levels` entries of each array are read).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct Shapes {
    pub hws: [i32; 3 * MAX_LEVELS],
}

// SAFETY: a plain `#[repr(C)]` i32 array.
unsafe impl DeviceRepr for Shapes {}

/// `MsdaShapes` for `levels` levels: h[L], w[L], start[L] packed, as the kernel reads them.
pub fn shapes(m: &Msda) -> Shapes {
    let mut s = Shapes {
        hws: [0; 3 * MAX_LEVELS],
    };
    let l = m.levels.len();
    for (i, (&(h, w), start)) in m.levels.iter().zip(m.level_start()).enumerate() {
        s.hws[i] = h as i32;
        s.hws[l + i] = w as i32;
        s.hws[2 * l + i] = start as i32;
    }
    s
}

/// Sizes the kernels take (a finding otherwise).
pub fn check_problem(m: &Msda, ty: Ty) -> Res<()> {
    let vec = 16 / ty.bytes();
    let tpq = m.channels / vec.max(1);
    if m.channels % vec != 0 || !tpq.is_power_of_two() || tpq > 32 {
        return Err(format!(
            "D = {} x {} B must be 16, 32, .., 512 bytes (a power of two of 16-byte vectors, at most a warp of them)",
            m.channels,
            ty.bytes()
        )
        .into());
    }
    if m.levels.is_empty() || m.levels.len() > MAX_LEVELS || m.points == 0 {
        return Err(format!(
            "levels {} (1..={MAX_LEVELS}), points {}",
            m.levels.len(),
            m.points
        )
        .into());
    }
    if m.value_len() > i32::MAX as usize || m.batch * m.queries == 0 {
        return Err("value must hold fewer than 2^31 elements, N * Q > 0".into());
    }
    Ok(())
}

/// The levels msda_stage stages: the smallest first while their planes fit the budget and
/// each side is a TMA box dim (<= 256); if none fits, the smallest alone (whether one block
/// holds it is the kernel plan's to say: `Rule::PlanSmemFits`).
pub fn staged_levels(m: &Msda, ty: Ty, budget: u32) -> Vec<usize> {
    staged_levels_by(m, ty.bytes(), budget)
}

/// [`staged_levels`] for planes of `elem_bytes` bytes per element (the backward's f32
/// accumulation, plus its 16-bit copy).
pub fn staged_levels_by(m: &Msda, elem_bytes: usize, budget: u32) -> Vec<usize> {
    let plane = |l: usize| m.levels[l].0 * m.levels[l].1 * m.channels * elem_bytes;
    let mut order: Vec<usize> = (0..m.levels.len()).collect();
    order.sort_by_key(|&l| plane(l));
    let boxable = |l: usize| m.levels[l].0 <= 256 && m.levels[l].1 <= 256;
    let mut used = 0;
    let mut staged = Vec::new();
    for &l in &order {
        if boxable(l) && used + plane(l) <= budget as usize {
            used += plane(l);
            staged.push(l);
        }
    }
    // None fits the budget: the smallest level alone (the plan refuses it if no block can
    // hold it).
    if staged.is_empty() {
        staged.extend(order.iter().find(|&&l| boxable(l)));
    }
    staged.sort_unstable();
    staged
}

/// The tile of level `l`: value as `[N][H][W][M][C]` from the level's first row, box
/// `[1][H][W][1][D]` (the plane of one (batch, head)).
pub fn level_tile(m: &Msda, ty: Ty, l: usize) -> Res<ValidSpec> {
    level_tile_named(m, ty, "msda_level", l)
}

/// [`level_tile`] in type `ty` named `<prefix><l>` (the backward's f32 gradient planes are
/// the same view of an f32 buffer).
pub fn level_tile_named(m: &Msda, ty: Ty, prefix: &str, l: usize) -> Res<ValidSpec> {
    let (h, w) = m.levels[l];
    level_box_tile(m, ty, prefix, l, (h as u32, w as u32))
}

/// The same view of level `l` with a box of `rows` x `cols` pixels (one (batch, head)).
pub fn level_box_tile(
    m: &Msda,
    ty: Ty,
    prefix: &str,
    l: usize,
    (rows, cols): (u32, u32),
) -> Res<ValidSpec> {
    let (h, w) = m.levels[l];
    let (s, heads, d) = (m.spatial() as u64, m.heads as u64, m.channels as u64);
    let spec = TileSpec::new(
        format!("{prefix}{l}"),
        ty.dtype(),
        [m.batch as u64, h as u64, w as u64, heads, d],
        [1, rows, cols, 1, d as u32],
    )
    .dim_names(["N", "H", "W", "M", "C"])
    .strides([s * heads * d, w as u64 * heads * d, heads * d, d, 1])
    .oob_fill(OobFill::Zero);
    Ok(validate(&spec)?)
}

/// One kernel rendered and compiled for a problem (no GPU needed).
pub struct Built {
    pub config: Config,
    pub source: Source,
    pub options: CompileOptions,
    pub compiled: Arc<Compiled>,
    /// msda_stage: the staged levels and their tiles.
    pub staged: Vec<(usize, ValidSpec)>,
    /// The kernel's plan: its block, cluster and dynamic shared memory (the tile set).
    pub plan: ValidKernelPlan,
    pub grid: u32,
}

pub fn build(compiler: &Compiler, m: &Msda, ty: Ty, config: Config, debug: bool) -> Res<Built> {
    check_problem(m, ty)?;
    let tpq = (m.channels * ty.bytes() / 16) as u32;
    let chunks = |per_block: u32| m.queries.div_ceil(per_block as usize) as u32;
    let (nb, nh) = (m.batch as u32, m.heads as u32);
    let mut options = CompileOptions::new(Arch::Sm90a)
        .debug_waits(debug)
        .line_info(true)
        .define("MSDA_DTYPE", ty.code().to_string())
        .define("MSDA_M", m.heads.to_string())
        .define("MSDA_D", m.channels.to_string())
        .define("MSDA_L", m.levels.len().to_string())
        .define("MSDA_P", m.points.to_string())
        .define("MSDA_SOFTMAX", u32::from(config.softmax).to_string())
        .define("MSDA_UNROLL", config.unroll.to_string())
        .define("MSDA_MINB", config.minb.to_string());
    let mut staged = Vec::new();
    // Queries per block, fewer where a block would pass 1024 threads (D = 64 in f32, say).
    let fit = |qpb: u32, per_query: u32| qpb.min(1024 / per_query).max(1);
    let (grid, plan, prelude, qpb) = match config.design {
        Design::Vec { qpb, all_heads } => {
            let qpb = fit(qpb, tpq * if all_heads { nh } else { 1 });
            options = options
                .define("MSDA_MAP", u32::from(all_heads).to_string())
                .define("MSDA_STAGED", "0")
                .define("MSDA_ROUNDS", "1")
                .define("MSDA_CLUSTER", "1");
            let (grid, block) = if all_heads {
                (nb * chunks(qpb), qpb * nh * tpq)
            } else {
                (nb * nh * chunks(qpb), qpb * tpq)
            };
            (
                grid,
                KernelPlan::new("msda_vec").block_threads(block),
                String::new(),
                qpb,
            )
        }
        Design::Stage {
            qpb,
            rounds,
            budget,
            cluster,
        } => {
            let qpb = fit(qpb, tpq);
            if !(1..=8).contains(&cluster) {
                return Err(format!("cluster of {cluster} blocks (1..=8)").into());
            }
            let levels = staged_levels(m, ty, budget);
            if levels.is_empty() {
                return Err(
                    "msda_stage: no level's plane has sides a TMA box can span (<= 256)".into(),
                );
            }
            for &l in &levels {
                staged.push((l, level_tile(m, ty, l)?));
            }
            let members: Vec<(String, &ValidSpec)> = staged
                .iter()
                .enumerate()
                .map(|(k, (_, v))| (format!("s{k}"), v))
                .collect();
            let refs: Vec<(&str, &ValidSpec)> =
                members.iter().map(|(n, v)| (n.as_str(), *v)).collect();
            // The staged levels are the plan's tile set (its one region), its cluster the
            // blocks that share them.
            let plan = KernelPlan::new("msda_stage")
                .tile_set("msda_stage", &refs)
                .block_threads(qpb * tpq)
                .cluster([cluster, 1, 1]);
            options = options
                .define("MSDA_MAP", "0")
                .define("MSDA_STAGED", levels.len().to_string())
                .define("MSDA_ROUNDS", rounds.to_string())
                .define("MSDA_CLUSTER", cluster.to_string());
            let per_pair = chunks(qpb * rounds).next_multiple_of(cluster);
            (nb * nh * per_pair, plan, stage_prelude(&levels), qpb)
        }
    };
    options = options.define("MSDA_QPB", qpb.to_string());
    let plan = plan
        .blocks_per_sm(config.minb)
        .validate()
        .map_err(|e| format!("{}: {e}", config.label()))?;
    let block = plan.launch().block[0];
    if block % 32 != 0 {
        return Err(format!("{}: block of {block} threads (whole warps)", config.label()).into());
    }
    let source = KernelSource::new().plan(&plan).body(&prelude).body_at(
        "examples/03-deformable-attention/msda_fast.cu",
        1,
        MSDA_FAST_CU,
    );
    let (source, compiled) = compile_kernel(compiler, &source, &options, config.kernel_name())?;
    Ok(Built {
        config,
        source,
        options,
        compiled,
        staged,
        plan,
        grid,
    })
}

/// msda_slot<l> for each level, the map pointers and the barrier's group (see msda_fast.cu).
/// Compiles `source` and checks its PTX has the entry `kernel` (forward and backward alike).
pub fn compile_kernel(
    compiler: &Compiler,
    source: &KernelSource,
    options: &CompileOptions,
    kernel: &str,
) -> Res<(Source, Arc<Compiled>)> {
    let source = Source::kernel(source)?;
    let compiled = compiler.compile_source(&source, options)?;
    let entry = format!(".entry {kernel}");
    if !compiled.ptx.contains(&entry) {
        return Err(format!("PTX lacks {entry}").into());
    }
    Ok((source, compiled))
}

fn stage_prelude(levels: &[usize]) -> String {
    let mut s = String::from(
        "\n// msda_stage's staged levels (rendered by fast.rs)\ntemplate <int L> struct msda_slot { static constexpr bool staged = false; };\n",
    );
    for (k, l) in levels.iter().enumerate() {
        s += &format!(
            "template <> struct msda_slot<{l}> {{ static constexpr bool staged = true; static constexpr int index = {k}; typedef tma_msda_stage::s{k} tile; static constexpr unsigned offset = tma_msda_stage::OFFSET_s{k}; }};\n"
        );
    }
    let ptrs: Vec<String> = (0..levels.len()).map(|k| format!("&s{k}_map")).collect();
    let tiles: Vec<String> = (0..levels.len())
        .map(|k| format!("tma_msda_stage::s{k}"))
        .collect();
    s += &format!("#define MSDA_STAGE_MAP_PTRS {}\n", ptrs.join(", "));
    s += &format!(
        "typedef tma_group<{}> msda_stage_group;\n",
        tiles.join(", ")
    );
    s
}

/// A device buffer of the value type.
pub enum Buf {
    U16(CudaSlice<u16>),
    F32(CudaSlice<f32>),
}

/// Everything on the device for one input set.
pub struct FastDevice {
    pub m: Msda,
    pub ty: Ty,
    pub stream: Arc<CudaStream>,
    pub value: Buf,
    pub loc: CudaSlice<f32>,
    pub attn: CudaSlice<f32>,
    pub logits: CudaSlice<f32>,
    pub out: Buf,
    pub shapes: Shapes,
}

/// A built kernel loaded, with its tensor maps over this device's value buffer.
pub struct Loaded {
    pub built: Built,
    pub kernel: Kernel,
    pub maps: Vec<TensorMap>,
}

impl FastDevice {
    pub fn new(ctx: &Arc<CudaContext>, m: &Msda, inp: &Inputs) -> Res<FastDevice> {
        check_problem(m, inp.ty)?;
        let stream = ctx.default_stream();
        let (value, out) = if inp.ty == Ty::F32 {
            (
                Buf::F32(stream.clone_htod(&inp.value)?),
                Buf::F32(stream.alloc_zeros::<f32>(m.out_len())?),
            )
        } else {
            (
                Buf::U16(stream.clone_htod(&inp.bits16)?),
                Buf::U16(stream.alloc_zeros::<u16>(m.out_len())?),
            )
        };
        Ok(FastDevice {
            m: m.clone(),
            ty: inp.ty,
            value,
            loc: stream.clone_htod(&inp.loc)?,
            attn: stream.clone_htod(&inp.attn)?,
            logits: stream.clone_htod(&inp.logits)?,
            out,
            shapes: shapes(m),
            stream,
        })
    }

    /// Loads `built` and encodes its maps: for level l, the view from the level's first row.
    pub fn load(&self, ctx: &Arc<CudaContext>, compiler: &Compiler, built: Built) -> Res<Loaded> {
        let module = Module::compile_and_load(ctx, compiler, &built.source, &built.options)?;
        let kernel = module.kernel(built.config.kernel_name())?;
        let starts = self.m.level_start();
        let row = self.m.heads * self.m.channels;
        let mut maps = Vec::new();
        for (l, valid) in &built.staged {
            let bound = valid.bound().ok_or("a level tile has static dims")?;
            let off = starts[*l] * row;
            maps.push(match &self.value {
                Buf::U16(v) => TensorMap::new_raw_bits(&bound, &v.slice(off..))?,
                Buf::F32(v) => TensorMap::new(&bound, &v.slice(off..))?,
            });
        }
        Ok(Loaded {
            built,
            kernel,
            maps,
        })
    }

    /// Writes NaN into every output element.
    pub fn poison(&mut self) -> Res<()> {
        match &mut self.out {
            Buf::U16(o) => self.stream.memcpy_htod(&vec![0xffffu16; o.len()], o)?,
            Buf::F32(o) => self.stream.memcpy_htod(&vec![f32::NAN; o.len()], o)?,
        }
        Ok(())
    }

    /// The output as f64 (exact).
    pub fn output(&self) -> Res<Vec<f64>> {
        Ok(match &self.out {
            Buf::U16(o) => {
                let bits = self.stream.clone_dtoh(o)?;
                bits.iter()
                    .map(|&b| f64::from(self.ty.bits16_to_f32(b)))
                    .collect()
            }
            Buf::F32(o) => self
                .stream
                .clone_dtoh(o)?
                .iter()
                .map(|&v| f64::from(v))
                .collect(),
        })
    }

    /// Queues one launch of `k` on the stream.
    pub fn launch(&mut self, k: &Loaded) -> Res<()> {
        let b = &k.built;
        // Block, cluster and dynamic shared memory from the kernel's plan; the grid is ours.
        let cfg = k.kernel.plan_config(&self.stream, (b.grid, 1, 1))?;
        let (queries, spatial) = (self.m.queries as i32, self.m.spatial() as i32);
        let attn = if b.config.softmax {
            &self.logits
        } else {
            &self.attn
        };
        let mut l = k.kernel.launch_builder(&cfg);
        match (&self.value, &mut self.out) {
            (Buf::U16(v), Buf::U16(o)) => l.arg(v).arg(&self.loc).arg(attn).arg(o),
            (Buf::F32(v), Buf::F32(o)) => l.arg(v).arg(&self.loc).arg(attn).arg(o),
            _ => return Err("value and out differ in type".into()),
        };
        l.arg(ByValue(&self.shapes)).arg(&queries).arg(&spatial);
        for map in &k.maps {
            l.arg(map);
        }
        // SAFETY: msda_vec / msda_stage(const msda_t* value, const float* loc, const float*
        // attn, msda_t* out, MsdaShapes sh, int queries, int spatial[, CUtensorMap s<k>_map..]):
        // value holds N * S * M * D elements of the kernel's type, loc 2 * N * Q * M * L * P,
        // attn N * Q * M * L * P, out N * Q * M * D (check_problem keeps indices in range);
        // the maps cover views of `value`, which lives in self; the grid covers exactly the
        // blocks the kernel's index arithmetic expects (build()).
        unsafe { l.launch() }?;
        Ok(())
    }

    pub fn sync(&self) -> Res<()> {
        self.stream.synchronize()?;
        Ok(())
    }
}
