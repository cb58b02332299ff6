//! Kernel plans: one declaration of a kernel's shared memory and launch ([`KernelPlan`] ->
//! [`KernelPlan::validate`] -> [`ValidKernelPlan`]), from which both the kernel's source
//! ([`crate::render::KernelSource::plan`]: `struct tma_plan_<name>`) and its launch
//! ([`LaunchPlan`]: block, cluster, dynamic shared memory, the opt-in attribute) come.
//!
//! A plan owns what a kernel keeps in its dynamic shared memory, each as a *region* at an
//! offset computed once ([`PlanLayout`]: a [`SmemLayout`] of the regions), like CUTLASS 3's
//! `SharedStorage`, the struct of its collectives' storages:
//!
//! - each pipeline's ring (stages, full and empty mbarriers: [`crate::smem::StageLayout`]);
//! - each tile set (its tiles' [`SmemLayout`]);
//! - *staging* regions: `copies` calls of one tile side by side, each aligned for its swizzle
//!   (an epilogue's D tile per consumer warpgroup, a ring of slots a kernel drives itself);
//! - *scratch*: bytes at an alignment;
//! - *work queues* ([`crate::pipeline::WorkQueue`]): a ring of `int` slots and their barriers.
//!
//! ```text
//! raw (the launch's dynamic shared memory, 16-byte aligned)
//! | up to SMEM_ALIGN - 16 bytes skipped by base(raw)
//! base: region 0 at OFFSET_<0> (a multiple of its alignment), region 1 ..., SMEM_BYTES in all
//! DYNAMIC_SMEM_BYTES = SMEM_BYTES + SMEM_ALIGN - 16     (plan_dynamic_smem)
//! ```
//!
//! The block's threads come from the warp roles when the plan has them (else are declared),
//! the cluster from the pipelines (which must agree; else declared, else none). A launch of
//! the plan's kernel with another block, cluster or dynamic shared memory is refused by the
//! runtime, naming both values (`tma_runtime::Error::PlanLaunch`, [`crate::Rule::PlanLaunch`]).

use std::fmt;

use crate::error::{Field, SpecError};
use crate::ident::{check_name, generated_clash, shared_generated_name, ClashHow, NameKind};
use crate::limits::DYNAMIC_SMEM_BASE_ALIGN;
use crate::pipeline::{
    check_resident_blocks, finding, PipelineErrors, ValidPipeline, ValidWarpRoles, ValidWorkQueue,
    MAX_BLOCK_THREADS, MAX_CLUSTER_CTAS,
};
use crate::rules::Rule;
use crate::size::Size;
use crate::smem::SmemLayout;
use crate::spec::Arch;
use crate::validate::ValidSpec;

pub mod consts;
#[cfg(test)]
mod tests;

/// Dynamic shared memory a kernel gets without the opt-in attribute
/// (`CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES`): 48 KB.
pub const DEFAULT_DYNAMIC_SMEM: u64 = 48 * 1024;

/// The largest alignment a scratch region may ask for: 1024 bytes, the 128B swizzle's period
/// (the largest a tile needs on sm_90).
pub const MAX_SCRATCH_ALIGN: u64 = 1024;

/// A tile the kernel names by an alias (`using <alias> = tma_<tile>;`), kept nowhere in the
/// plan's shared memory (see staging regions for that).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct PlanTile {
    pub alias: String,
    pub tile: ValidSpec,
}

/// A tile set region: its members in order.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct PlanTileSet {
    pub name: String,
    pub members: Vec<(String, ValidSpec)>,
}

/// What a region beside the pipelines holds.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum RegionKind {
    /// `copies` calls of `tile`, each at a multiple of its alignment.
    Staging { tile: Box<ValidSpec>, copies: u32 },
    /// `bytes` bytes aligned to `align` (a power of two, at most [`MAX_SCRATCH_ALIGN`]).
    Scratch { bytes: u64, align: u64 },
    /// A work queue's slots and barriers ([`crate::pipeline::WorkQueue`]); laid out as a
    /// scratch region of its bytes ([`RegionRole::Scratch`]), rendered as its
    /// `tma_work_queue<..>` (`queue_<name>`, the accessor `<name>(base)`).
    WorkQueue(ValidWorkQueue),
}

/// A staging or scratch region of a plan.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Region {
    /// Names its accessor `<name>(base ..)` and constants `OFFSET_<name>`, ...
    pub name: String,
    pub kind: RegionKind,
}

/// A kernel plan declaration: plain data, checked by [`KernelPlan::validate`].
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct KernelPlan {
    /// The kernel's name: its `extern "C" __global__` function and `struct tma_plan_<name>`.
    pub name: String,
    pub target: Arch,
    pub tiles: Vec<PlanTile>,
    pub tile_sets: Vec<PlanTileSet>,
    pub pipelines: Vec<ValidPipeline>,
    pub roles: Option<ValidWarpRoles>,
    pub regions: Vec<Region>,
    /// Threads of the (1-D) block; from the roles when `None`.
    pub block_threads: Option<u32>,
    /// The cluster shape; from the pipelines when `None` (none without pipelines).
    pub cluster: Option<[u32; 3]>,
    /// Blocks per SM the kernel's `__launch_bounds__` asks for at least (its second
    /// argument); the roles' when `None`, and without roles none: the macro then gives only
    /// the block's threads, and ptxas may use as many registers as one block allows.
    pub blocks_per_sm: Option<u32>,
}

impl KernelPlan {
    /// An empty plan for kernel `name` on sm_90a.
    pub fn new(name: impl Into<String>) -> KernelPlan {
        KernelPlan {
            name: name.into(),
            target: Arch::Sm90a,
            tiles: Vec::new(),
            tile_sets: Vec::new(),
            pipelines: Vec::new(),
            roles: None,
            regions: Vec::new(),
            block_threads: None,
            cluster: None,
            blocks_per_sm: None,
        }
    }
    pub fn target(mut self, arch: Arch) -> KernelPlan {
        self.target = arch;
        self
    }
    /// A tile the kernel names `alias` (`using <alias> = tma_<tile>;`).
    pub fn tile(mut self, alias: impl Into<String>, tile: &ValidSpec) -> KernelPlan {
        self.tiles.push(PlanTile {
            alias: alias.into(),
            tile: tile.clone(),
        });
        self
    }
    /// A tile set region (`struct tma_<name>`, [`crate::render::TileSetCode`]).
    pub fn tile_set(
        mut self,
        name: impl Into<String>,
        members: &[(&str, &ValidSpec)],
    ) -> KernelPlan {
        self.tile_sets.push(PlanTileSet {
            name: name.into(),
            members: members
                .iter()
                .map(|(m, v)| (m.to_string(), (*v).clone()))
                .collect(),
        });
        self
    }
    /// A pipeline's ring as a region (named by the pipeline).
    pub fn pipeline(mut self, pipeline: &ValidPipeline) -> KernelPlan {
        self.pipelines.push(pipeline.clone());
        self
    }
    /// The warp roles: they give the block's threads.
    pub fn roles(mut self, roles: &ValidWarpRoles) -> KernelPlan {
        self.roles = Some(roles.clone());
        self
    }
    /// A staging region: `copies` calls of `tile` side by side.
    pub fn staging(mut self, name: impl Into<String>, tile: &ValidSpec, copies: u32) -> KernelPlan {
        self.regions.push(Region {
            name: name.into(),
            kind: RegionKind::Staging {
                tile: Box::new(tile.clone()),
                copies,
            },
        });
        self
    }
    /// A work queue's region (`queue`: its slots and their barriers): the plan's struct names
    /// its type `queue_<name>` and constructs it with `<name>(base)` (then `init()`, before
    /// any push or pop).
    pub fn work_queue(mut self, name: impl Into<String>, queue: &ValidWorkQueue) -> KernelPlan {
        self.regions.push(Region {
            name: name.into(),
            kind: RegionKind::WorkQueue(queue.clone()),
        });
        self
    }
    /// A scratch region of `bytes` bytes aligned to `align`.
    pub fn scratch(mut self, name: impl Into<String>, bytes: u64, align: u64) -> KernelPlan {
        self.regions.push(Region {
            name: name.into(),
            kind: RegionKind::Scratch { bytes, align },
        });
        self
    }
    /// Declares the block's threads (a plan without warp roles must).
    pub fn block_threads(mut self, threads: u32) -> KernelPlan {
        self.block_threads = Some(threads);
        self
    }
    /// Declares the cluster shape (a plan with pipelines takes theirs).
    pub fn cluster(mut self, shape: [u32; 3]) -> KernelPlan {
        self.cluster = Some(shape);
        self
    }
    /// The blocks per SM the generated `__launch_bounds__` asks for (its second argument,
    /// which caps each thread's registers at 64K / (threads x n)).
    pub fn blocks_per_sm(mut self, n: u32) -> KernelPlan {
        self.blocks_per_sm = Some(n);
        self
    }
    /// Checks every plan rule and lays out its shared memory; all findings at once.
    pub fn validate(&self) -> Result<ValidKernelPlan, PipelineErrors> {
        validate_plan(self)
    }
}

/// Which part of the plan a region is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RegionRole {
    /// `pipelines[i]`'s ring.
    Pipeline(usize),
    /// `tile_sets[i]`.
    TileSet(usize),
    /// `regions[i]` (staging).
    Staging(usize),
    /// `regions[i]` (scratch, or a work queue laid out as one).
    Scratch(usize),
}

/// Where one region sits.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct RegionLayout {
    pub name: String,
    pub role: RegionRole,
    /// Bytes from the plan's aligned base.
    pub offset: u64,
    /// Bytes it spans.
    pub bytes: u64,
    /// Its alignment (the base and `offset` are multiples of it).
    pub align: u64,
    /// Staging: bytes from one copy to the next; else `bytes`.
    pub stride: u64,
    /// Staging: copies; else 1.
    pub copies: u32,
    /// Tile set: each member's offset from the region's start (the set's
    /// `OFFSET_<member>`), in the order declared; else empty.
    pub members: Vec<u64>,
}

/// The plan's one shared-memory layout: every region at its offset from a base aligned to
/// `layout.align_bytes`, placed in order by [`SmemLayout::place`] (as a tile set places its
/// tiles).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct PlanLayout {
    /// The regions' spans placed in order: `layout.offsets[i]` is `regions[i].offset`,
    /// `total_bytes` the bytes from the base to the end of the last region, `align_bytes` the
    /// largest region alignment, at least 16 (a launch's dynamic shared memory has that much
    /// anyway).
    pub layout: SmemLayout,
    /// Each region's name, role, offset, span and alignment.
    pub regions: Vec<RegionLayout>,
}

impl PlanLayout {
    /// Bytes from the base to the end of the last region.
    pub fn total_bytes(&self) -> u64 {
        self.layout.total_bytes
    }

    /// The largest region alignment (at least 16): the base must have it.
    pub fn align_bytes(&self) -> u64 {
        self.layout.align_bytes
    }

    /// What the launch gives: [`plan_dynamic_smem`] of the regions; 0 when the plan keeps
    /// nothing in dynamic shared memory.
    pub fn dynamic_smem_bytes(&self) -> u64 {
        if self.regions.is_empty() {
            0
        } else {
            plan_dynamic_smem(self.layout.total_bytes, self.layout.align_bytes)
        }
    }
}

/// A plan's dynamic shared memory for regions spanning `total` bytes from a base aligned to
/// `align`: `total + align - 16`, since the launch's dynamic shared memory starts at least 16-byte
/// aligned, so aligning it up skips at most `align - 16` bytes (the 16 bytes matter: a head-dim
/// 256 attention plan fits 227 KB by them).
pub const fn plan_dynamic_smem(total: u64, align: u64) -> u64 {
    let align = if align > DYNAMIC_SMEM_BASE_ALIGN {
        align
    } else {
        DYNAMIC_SMEM_BASE_ALIGN
    };
    total.saturating_add(align - DYNAMIC_SMEM_BASE_ALIGN)
}

/// What a launch of a plan's kernel must be: the typed description the runtime checks a
/// launch against (and builds one from), carried with the compiled module.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct LaunchPlan {
    /// The kernel's name (its `extern "C" __global__` function).
    pub kernel: String,
    pub target: Arch,
    /// Threads per block (x, y, z): `(BLOCK_THREADS, 1, 1)`.
    pub block: [u32; 3],
    /// The cluster shape; `[1, 1, 1]` without clusters.
    pub cluster: [u32; 3],
    /// Bytes of dynamic shared memory ([`PlanLayout::dynamic_smem_bytes`]).
    pub dynamic_smem_bytes: u32,
    /// Above 48 KB: the kernel must be opted in (`MAX_DYNAMIC_SHARED_SIZE_BYTES`).
    pub smem_opt_in: bool,
}

impl LaunchPlan {
    /// Whether the plan launches with a cluster of more than one CTA.
    pub fn has_cluster(&self) -> bool {
        self.cluster != [1, 1, 1]
    }
    /// CTAs of the cluster.
    pub fn cluster_ctas(&self) -> u32 {
        self.cluster.iter().product()
    }
}

impl fmt::Display for LaunchPlan {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let [bx, by, bz] = self.block;
        let [cx, cy, cz] = self.cluster;
        write!(
            f,
            "`{}`: block {bx}x{by}x{bz}, cluster {cx}x{cy}x{cz}, {} B of dynamic shared memory{}",
            self.kernel,
            self.dynamic_smem_bytes,
            if self.smem_opt_in { " (opted in)" } else { "" }
        )
    }
}

/// A plan whose every rule holds: what [`crate::render::KernelSource::plan`] renders.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ValidKernelPlan {
    plan: KernelPlan,
    layout: PlanLayout,
    launch: LaunchPlan,
    blocks_per_sm: Option<u32>,
}

impl ValidKernelPlan {
    pub fn plan(&self) -> &KernelPlan {
        &self.plan
    }
    /// The one shared-memory layout.
    pub fn layout(&self) -> &PlanLayout {
        &self.layout
    }
    /// The launch the kernel must get.
    pub fn launch(&self) -> &LaunchPlan {
        &self.launch
    }
    /// The kernel's name.
    pub fn name(&self) -> &str {
        &self.plan.name
    }
    /// Blocks per SM the generated `__launch_bounds__` asks for (declared, else the warp
    /// roles'); `None`: no second argument.
    pub fn blocks_per_sm(&self) -> Option<u32> {
        self.blocks_per_sm
    }
    /// The region `name`'s layout.
    pub fn region(&self, name: &str) -> Option<&RegionLayout> {
        self.layout.regions.iter().find(|r| r.name == name)
    }
    /// Where member `member` of tile set `set` sits, in bytes from the plan's base: the
    /// set's `OFFSET_<set>` plus the member's `tma_<set>::OFFSET_<member>` (what a host reading
    /// a block's shared memory back needs). `None` when the plan has no such set or member.
    pub fn set_member(&self, set: &str, member: &str) -> Option<u64> {
        let region = self.region(set)?;
        let RegionRole::TileSet(i) = region.role else {
            return None;
        };
        let index = (self.plan.tile_sets.get(i)?.members.iter()).position(|(m, _)| m == member)?;
        Some(region.offset + region.members.get(index)?)
    }
}

fn part(what: &'static str, name: &str) -> Field {
    Field::PlanPart {
        what,
        name: name.to_string(),
    }
}

/// Checks every plan rule on `plan` and lays out its shared memory.
pub fn validate_plan(plan: &KernelPlan) -> Result<ValidKernelPlan, PipelineErrors> {
    let mut errors: Vec<SpecError> = Vec::new();
    if let Err(problem) = check_name(&plan.name) {
        errors.push(finding(
            Field::Name,
            &plan.name,
            Rule::NameIsIdentifier,
            format!(
                "the plan's name names its kernel and `tma_plan_{}`: it {}",
                plan.name,
                problem.describe()
            ),
        ));
    } else if let Some(why) = generated_clash(NameKind::KernelPlan, &plan.name) {
        let problem = match why.how {
            ClashHow::CudaName | ClashHow::PtxasSymbol => {
                format!("a kernel named {why}: rename the plan")
            }
            _ => format!(
                "the plan's name names its kernel, `tma_plan_{}` and `TMA_PLAN_{}_LAUNCH_BOUNDS`; this one clashes: {why}",
                plan.name,
                plan.name.to_ascii_uppercase()
            ),
        };
        errors.push(finding(
            Field::Name,
            &plan.name,
            Rule::GeneratedNameClash,
            problem,
        ));
    }
    check_targets(plan, &mut errors);
    check_region_names(plan, &mut errors);
    let threads = block_threads(plan, &mut errors);
    let cluster = cluster(plan, &mut errors);
    let blocks_per_sm = plan
        .blocks_per_sm
        .or_else(|| plan.roles.as_ref().map(|r| r.roles().blocks_per_sm));
    check_blocks_per_sm(plan, blocks_per_sm, &mut errors);
    let layout = layout(plan, &mut errors);
    match (layout, threads, cluster) {
        (Some(layout), Some(threads), Some(cluster)) if errors.is_empty() => {
            let dynamic = u32::try_from(layout.dynamic_smem_bytes()).unwrap_or(u32::MAX);
            let launch = LaunchPlan {
                kernel: plan.name.clone(),
                target: plan.target,
                block: [threads, 1, 1],
                cluster,
                dynamic_smem_bytes: dynamic,
                smem_opt_in: layout.dynamic_smem_bytes() > DEFAULT_DYNAMIC_SMEM,
            };
            Ok(ValidKernelPlan {
                plan: plan.clone(),
                layout,
                launch,
                blocks_per_sm,
            })
        }
        _ => Err(PipelineErrors {
            what: format!("kernel plan `{}`", plan.name),
            errors,
        }),
    }
}

fn check_targets(plan: &KernelPlan, errors: &mut Vec<SpecError>) {
    let mut wrong = |field: Field, what: String, target: Arch| {
        if target != plan.target {
            errors.push(finding(
                field,
                target,
                Rule::PlanTarget,
                format!("{what} targets {target}, the plan targets {}", plan.target),
            ));
        }
    };
    for t in &plan.tiles {
        let target = t.tile.spec().target;
        wrong(
            part("tile", &t.alias),
            format!("tile `{}`", t.tile.spec().name),
            target,
        );
    }
    for s in &plan.tile_sets {
        for (m, v) in &s.members {
            wrong(
                part("tile set", &s.name),
                format!("member `{m}`"),
                v.spec().target,
            );
        }
    }
    for p in &plan.pipelines {
        let name = &p.spec().name;
        wrong(
            part("pipeline", name),
            format!("pipeline `{name}`"),
            p.spec().target,
        );
    }
    for r in &plan.regions {
        if let RegionKind::Staging { tile, .. } = &r.kind {
            let target = tile.spec().target;
            wrong(
                part("staging", &r.name),
                format!("tile `{}`", tile.spec().name),
                target,
            );
        }
    }
}

/// Every region's name: a C identifier, unique in the plan, meeting none of the names
/// `struct tma_plan_<name>` holds itself (read from its template: `base`, `SMEM_BYTES`, ...,
/// [`crate::ident::generated`]) nor another region's (`x` and `OFFSET_x`).
fn check_region_names(plan: &KernelPlan, errors: &mut Vec<SpecError>) {
    let mut seen: Vec<&str> = Vec::new();
    let names = (plan
        .pipelines
        .iter()
        .map(|p| ("pipeline", p.spec().name.as_str())))
    .chain(plan.tile_sets.iter().map(|s| ("tile set", s.name.as_str())))
    .chain(plan.regions.iter().map(|r| {
        let what = match r.kind {
            RegionKind::Staging { .. } => "staging",
            RegionKind::Scratch { .. } => "scratch",
            RegionKind::WorkQueue(_) => "work queue",
        };
        (what, r.name.as_str())
    }));
    for (what, name) in names {
        let problem = if let Err(p) = check_name(name) {
            Some((
                Rule::PlanRegions,
                format!(
                    "a region's name names CUDA (`{name}(base)`): it {}",
                    p.describe()
                ),
            ))
        } else if let Some(why) = generated_clash(NameKind::PlanRegion, name) {
            Some((
                Rule::GeneratedNameClash,
                format!(
                    "a region's name names members of struct tma_plan_{} (`{name}(base)`, `OFFSET_{name}`, `BYTES_{name}`, ...); this one clashes: {why}",
                    plan.name
                ),
            ))
        } else if seen.contains(&name) {
            Some((
                Rule::PlanRegions,
                "two regions of the plan have this name".into(),
            ))
        } else {
            seen.iter()
                .find_map(|o| {
                    shared_generated_name(NameKind::PlanRegion, o, name).map(|ident| (o, ident))
                })
                .map(|(o, ident)| {
                    (
                        Rule::PlanRegions,
                        format!("this region and region `{o}` would both give struct tma_plan_{} a `{ident}`", plan.name),
                    )
                })
        };
        seen.push(name);
        if let Some((rule, message)) = problem {
            errors.push(finding(part(what, name), name, rule, message));
        }
    }
    for r in &plan.regions {
        match r.kind {
            RegionKind::Staging { copies: 0, .. } => errors.push(finding(
                part("staging", &r.name),
                0,
                Rule::PlanRegions,
                "a staging region holds at least one copy of its tile".into(),
            )),
            RegionKind::Scratch { bytes, align } => {
                if bytes == 0 {
                    errors.push(finding(
                        part("scratch", &r.name),
                        0,
                        Rule::PlanRegions,
                        "a scratch region holds at least one byte".into(),
                    ));
                }
                if !align.is_power_of_two() || align > MAX_SCRATCH_ALIGN {
                    errors.push(finding(
                        part("scratch", &r.name),
                        format!("align {align}"),
                        Rule::PlanRegions,
                        format!("a scratch region's alignment is a power of two, at most {MAX_SCRATCH_ALIGN}"),
                    ));
                }
            }
            RegionKind::Staging { .. } | RegionKind::WorkQueue(_) => {}
        }
    }
}

/// The block's threads when [`block_threads`] finds them right whatever the pipelines need:
/// the roles' or the declared count (both: they agree), 1 to 1024.
fn block_threads_if_right(plan: &KernelPlan) -> Option<u64> {
    let threads = match (
        plan.roles.as_ref().map(|r| r.roles().threads()),
        plan.block_threads,
    ) {
        (Some(t), Some(d)) if t != u64::from(d) => return None,
        (Some(t), _) => t,
        (None, Some(d)) => u64::from(d),
        (None, None) => return None,
    };
    (1..=u64::from(MAX_BLOCK_THREADS))
        .contains(&threads)
        .then_some(threads)
}

/// The block's threads: the roles', or the declared count (both: they agree), 1 to 1024, at
/// least each pipeline's consumer threads.
fn block_threads(plan: &KernelPlan, errors: &mut Vec<SpecError>) -> Option<u32> {
    let field = || Field::Plan("block_threads");
    let from_roles = plan
        .roles
        .as_ref()
        .map(|r| (r.roles().name.clone(), r.roles().threads()));
    let threads = match (from_roles, plan.block_threads) {
        (Some((roles, t)), Some(declared)) if t != u64::from(declared) => {
            errors.push(finding(
                field(),
                declared,
                Rule::PlanBlockThreads,
                format!("warp roles `{roles}` make the block {t} threads; drop block_threads or declare {t}"),
            ));
            return None;
        }
        (Some((_, t)), _) => t,
        (None, Some(declared)) => u64::from(declared),
        (None, None) => {
            errors.push(finding(
                field(),
                "none",
                Rule::PlanBlockThreads,
                "a plan without warp roles declares its block's threads (block_threads)".into(),
            ));
            return None;
        }
    };
    if threads == 0 || threads > u64::from(MAX_BLOCK_THREADS) {
        errors.push(finding(
            field(),
            threads,
            Rule::PlanBlockThreads,
            format!("a block has 1 to {MAX_BLOCK_THREADS} threads"),
        ));
        return None;
    }
    let mut ok = true;
    for p in &plan.pipelines {
        let consumers = p.spec().consumers;
        let need = consumers.threads();
        if !need.is_below(threads + 1) {
            ok = false;
            errors.push(finding(
                part("pipeline", &p.spec().name),
                consumers,
                Rule::PlanBlockThreads,
                format!("{need} consumer threads release each stage, but the block has {threads}: its empty barriers would never complete"),
            ));
        }
    }
    // A work queue's readers are threads other than its producer: fewer than the block's.
    for r in &plan.regions {
        let RegionKind::WorkQueue(q) = &r.kind else {
            continue;
        };
        let readers = q.queue().readers;
        let need = readers.threads();
        if !need.is_below(threads) {
            ok = false;
            errors.push(finding(
                part("work queue", &r.name),
                readers,
                Rule::PlanBlockThreads,
                format!("{need} reader threads pop each slot, but the block has {threads}: a work queue's producer thread is not one of its readers, so its readers are fewer than the block's threads"),
            ));
        }
    }
    let threads = u32::try_from(threads).ok()?;
    ok.then_some(threads)
}

/// The launch bounds' second argument, `blocks_per_sm` (declared, else the roles'): at least
/// one block, at most [`MAX_BLOCKS_PER_SM`] blocks and [`MAX_THREADS_PER_SM`] threads of
/// the block's threads on one SM (the rules warp roles hold theirs to), and the roles' own
/// count when they use `setmaxnreg`: they checked its budget and direction against the
/// registers that many blocks leave each thread, and a launch bound asking for more blocks
/// leaves fewer (the consumers' `setmaxnreg.inc` would wait forever), for fewer more.
fn check_blocks_per_sm(plan: &KernelPlan, blocks_per_sm: Option<u32>, errors: &mut Vec<SpecError>) {
    let Some(n) = blocks_per_sm else {
        return;
    };
    let field = || Field::Plan("blocks_per_sm");
    if let (Some(roles), Some(declared)) = (&plan.roles, plan.blocks_per_sm) {
        let theirs = roles.roles().blocks_per_sm;
        if declared != theirs && roles.roles().setmaxnreg.is_some() {
            errors.push(finding(
                field(),
                declared,
                Rule::PlanBlockThreads,
                format!(
                    "warp roles `{}` checked their setmaxnreg registers for {theirs} block(s) per SM; drop blocks_per_sm or declare {theirs}",
                    roles.roles().name
                ),
            ));
            return;
        }
    }
    if n == 0 {
        errors.push(finding(
            field(),
            0,
            Rule::PlanBlockThreads,
            "the launch bounds ask for at least one block per SM".into(),
        ));
        return;
    }
    check_resident_blocks(field(), n, block_threads_if_right(plan), errors);
}

/// The cluster: every pipeline's (they agree), or the declared one (which agrees with them).
fn cluster(plan: &KernelPlan, errors: &mut Vec<SpecError>) -> Option<[u32; 3]> {
    let shape = |[x, y, z]: [u32; 3]| format!("{x}x{y}x{z}");
    let mut pipes = plan.pipelines.iter();
    let first = pipes
        .next()
        .map(|p| (p.spec().name.as_str(), p.spec().cluster));
    let mut ok = true;
    if let Some((first_name, c)) = first {
        for p in pipes {
            if p.spec().cluster != c {
                ok = false;
                errors.push(finding(
                    part("pipeline", &p.spec().name),
                    shape(p.spec().cluster),
                    Rule::PlanCluster,
                    format!(
                        "pipeline `{first_name}` was declared for cluster {}: one kernel launches with one cluster shape",
                        shape(c)
                    ),
                ));
            }
        }
    }
    let cluster = match (first, plan.cluster) {
        (Some((name, c)), Some(declared)) if c != declared => {
            errors.push(finding(
                Field::Plan("cluster"),
                shape(declared),
                Rule::PlanCluster,
                format!(
                    "pipeline `{name}` was declared for cluster {}; drop cluster or declare that",
                    shape(c)
                ),
            ));
            return None;
        }
        (Some((_, c)), _) => c,
        (None, Some(declared)) => declared,
        (None, None) => [1, 1, 1],
    };
    let ctas: Size = cluster.iter().map(|&n| u64::from(n)).product();
    if cluster.contains(&0) || !ctas.is_below(u64::from(MAX_CLUSTER_CTAS) + 1) {
        errors.push(finding(
            Field::Plan("cluster"),
            shape(cluster),
            Rule::ClusterShape,
            format!(
                "a cluster has 1 to {MAX_CLUSTER_CTAS} CTAs (8 portably), each extent at least 1"
            ),
        ));
        return None;
    }
    ok.then_some(cluster)
}

/// Every region's span and alignment, in order: pipelines, tile sets, then staging and
/// scratch as declared. `None` for a region whose size does not fit 64 bits.
fn spans(plan: &KernelPlan) -> Vec<(String, RegionRole, Size, u64, Size, u32)> {
    let mut out = Vec::new();
    for (i, p) in plan.pipelines.iter().enumerate() {
        let l = p.layout();
        // The ring's alignment: its tiles' (at least 128) and its mbarriers' (8).
        let align = l.align_bytes();
        let bytes = Size::new(l.total_bytes());
        out.push((
            p.spec().name.clone(),
            RegionRole::Pipeline(i),
            bytes,
            align,
            bytes,
            1,
        ));
    }
    for (i, s) in plan.tile_sets.iter().enumerate() {
        let (bytes, align) = match SmemLayout::new(s.members.iter().map(|(_, v)| v.plan())) {
            Ok(set) => (Size::new(set.total_bytes), set.align_bytes),
            Err(_) => (Size::OVERFLOW, 1),
        };
        out.push((
            s.name.clone(),
            RegionRole::TileSet(i),
            bytes,
            align,
            bytes,
            1,
        ));
    }
    for (i, r) in plan.regions.iter().enumerate() {
        match &r.kind {
            RegionKind::Staging { tile, copies } => {
                let (stride, bytes) = tile.plan().copies(*copies);
                out.push((
                    r.name.clone(),
                    RegionRole::Staging(i),
                    bytes,
                    tile.plan().align_bytes,
                    stride,
                    *copies,
                ));
            }
            RegionKind::Scratch { bytes, align } => {
                let b = Size::new(*bytes);
                out.push((
                    r.name.clone(),
                    RegionRole::Scratch(i),
                    b,
                    (*align).max(1),
                    b,
                    1,
                ));
            }
            RegionKind::WorkQueue(q) => {
                let b = Size::new(q.smem_bytes());
                out.push((
                    r.name.clone(),
                    RegionRole::Scratch(i),
                    b,
                    q.align_bytes(),
                    b,
                    1,
                ));
            }
        }
    }
    out
}

/// A tile set's member offsets from its region's start, as `struct tma_<set>` states them
/// (a set too large for 64 bits is refused by `layout` before this is asked).
fn members(set: &PlanTileSet) -> Vec<u64> {
    SmemLayout::new(set.members.iter().map(|(_, v)| v.plan()))
        .map_or_else(|_| Vec::new(), |l| l.offsets)
}

fn layout(plan: &KernelPlan, errors: &mut Vec<SpecError>) -> Option<PlanLayout> {
    let spans = spans(plan);
    let mut fits = true;
    for (name, role, bytes, _, stride, _) in &spans {
        if bytes.get().is_none() || stride.get().is_none() {
            fits = false;
            let what = match role {
                RegionRole::Pipeline(_) => "pipeline",
                RegionRole::TileSet(_) => "tile set",
                RegionRole::Staging(_) => "staging",
                RegionRole::Scratch(_) => "scratch",
            };
            errors.push(finding(
                part(what, name),
                bytes,
                Rule::SizeOverflow,
                "the region spans more bytes than 64 bits hold".into(),
            ));
        }
    }
    if !fits {
        return None;
    }
    let placed = SmemLayout::place(
        spans
            .iter()
            .map(|(_, _, bytes, align, _, _)| (bytes.get().unwrap_or(0), *align)),
    );
    let mut set = match placed {
        Ok(set) => set,
        Err(o) => {
            errors.push(finding(
                Field::Plan("smem"),
                o.span,
                Rule::SizeOverflow,
                "the plan's regions span more bytes than 64 bits hold".into(),
            ));
            return None;
        }
    };
    // The base comes from a launch's dynamic shared memory, 16-byte aligned: asking that much
    // costs no slack.
    set.align_bytes = set.align_bytes.max(DYNAMIC_SMEM_BASE_ALIGN);
    let align_bytes = set.align_bytes;
    let dynamic = if spans.is_empty() {
        Size::ZERO
    } else {
        Size::new(set.total_bytes) + (plan_dynamic_smem(0, align_bytes))
    };
    let limit = plan.target.max_smem_per_block();
    if !dynamic.is_below(limit + 1) {
        let parts: Vec<String> = spans
            .iter()
            .zip(&set.offsets)
            .map(|((name, _, bytes, align, _, _), off)| {
                format!("`{name}` {bytes} B at +{off} (align {align})")
            })
            .collect();
        errors.push(finding(
            Field::Plan("smem"),
            dynamic,
            Rule::PlanSmemFits,
            format!(
                "the plan's regions ({}) span {} B, {dynamic} B with the {} B alignment slack; a block on {} has {limit} B",
                parts.join(", "),
                set.total_bytes,
                plan_dynamic_smem(0, align_bytes),
                plan.target
            ),
        ));
        return None;
    }
    let regions = spans
        .into_iter()
        .zip(&set.offsets)
        .map(
            |((name, role, bytes, align, stride, copies), &offset)| RegionLayout {
                name,
                role,
                offset,
                bytes: bytes.get().unwrap_or(0),
                align,
                stride: stride.get().unwrap_or(0),
                copies,
                members: match role {
                    RegionRole::TileSet(i) => plan.tile_sets.get(i).map_or_else(Vec::new, members),
                    _ => Vec::new(),
                },
            },
        )
        .collect();
    Some(PlanLayout {
        layout: set,
        regions,
    })
}
