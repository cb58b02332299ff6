//! Pipelines: a ring of shared-memory stages that a producer fills with TMA loads and
//! consumers drain, declared once from validated tiles ([`PipelineSpec`] ->
//! [`validate_pipeline`] -> [`ValidPipeline`]), rendered to CUDA by
//! [`crate::render::PipelineCode`].
//!
//! # What a stage is
//!
//! One stage holds one call of each tile ([`StageTile`]), laid out by
//! [`crate::smem::StageLayout`] (each tile aligned for its swizzle). Each stage has a *full*
//! mbarrier (1 arrival: the producer's one `arrive.expect_tx` of [`ValidPipeline::stage_tx_bytes`];
//! the copies complete the bytes) and an *empty* mbarrier (the consumers' releases).
//!
//! # Multicast accounting
//!
//! A tile multicast along cluster axis `a` is shared by the `C = cluster[a]` CTAs that differ
//! only in their coordinate along `a`. Its call's boxes (the product of its repeats, `B`) are
//! split evenly ([`crate::Rule::MulticastSlices`]): the CTA whose coordinate along `a` is `r`
//! issues boxes `r B/C .. (r+1) B/C` (row-major over the repeats, as
//! [`crate::ValidSpec::repeat_placements`] numbers them) with `.multicast::cluster` and the
//! mask of all `C` CTAs. Each box lands at the same shared-memory offset in each of them and
//! completes its bytes on the mbarrier at the same offset in each. So every CTA receives the
//! whole call, `TX_BYTES` of the tile, on its own full barrier, and
//!
//! ```text
//! STAGE_TX_BYTES = sum over the stage's tiles of TX_BYTES   (multicast or not)
//! ```
//!
//! is what each CTA's producer expects, once per stage, in the same call that issues its
//! copies (CUTLASS's `PipelineTmaAsync` pattern: the box is split over the CTAs, each
//! barrier counts the full tile).
//!
//! Since a CTA's copies write into the stages of its peers, a CTA may refill a stage only when
//! the consumers of every CTA it writes into have released it. A CTA's *peers* are itself and
//! the CTAs along each multicast axis through it: `PEERS = 1 + sum over distinct multicast
//! axes of (cluster[a] - 1)`. Each consumer arrival is made on the empty barrier of every peer
//! (a remote `mbarrier.arrive` through `mapa` for the others), so each empty barrier counts
//! `consumer arrivals per CTA x PEERS` ([`ValidPipeline::empty_arrivals`]).
//!
//! # Consumers
//!
//! [`Consumers`] says who releases a stage in each CTA: every thread of `n` threads
//! (each arrives), or `n` warps, or `n` warpgroups (one arrival per warp, by lane 0 after
//! `__syncwarp()`, so a warp's ordinary shared-memory reads are complete before it releases).
//!
//! By default every consumer of the kernel's warp roles takes every stage (each waits, reads
//! its share, releases). A pipeline declared [`PipelineSpec::in_turn`] is taken by *one* of
//! the roles' consumers per stage, the consumers taking runs of stages in turn (a ping-pong
//! schedule: CUTLASS's `KernelTmaWarpSpecializedPingpong`, each consumer warpgroup owning
//! whole output tiles); its `consumers` then count that one consumer's releasers
//! (`Warpgroups(1)` or `Warps(1)`: [`crate::Rule::PipelineConsumers`]), and a source checks it
//! against the roles (at least two consumers of that unit). Each consumer's `tma_pipe_state`
//! skips the runs of the others (`state::advance(n)`).

mod queue;
mod roles;

pub use queue::{ValidWorkQueue, WorkQueue, MAX_QUEUE_SLOTS};
pub use roles::{
    NamedBarrier, RegisterSplit, RoleWarps, ValidWarpRoles, WarpRoles, BLOCK_WARPGROUPS,
    BLOCK_WARPS, MAX_NAMED_BARRIER_ID, REGISTER_FILE,
};

use std::fmt;

use crate::error::{write_breaks, Field, Severity, SpecError};
use crate::ident::{check_name, generated_clash, shared_generated_name, NameKind};
use crate::limits::{MAX_BLOCKS_PER_SM, MAX_THREADS_PER_SM, MAX_TX_BYTES};
use crate::rules::Rule;
use crate::size::Size;
use crate::smem::{StageLayout, StageShape};
use crate::spec::Arch;
use crate::validate::ValidSpec;

/// The cluster and block limits, stated in [`crate::limits`] (re-exported here, where the
/// pipeline rules use them).
pub use crate::limits::{MAX_BLOCK_THREADS, MAX_CLUSTER_CTAS};

/// A cluster axis a tile is multicast along.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ClusterAxis {
    X = 0,
    Y = 1,
    Z = 2,
}

impl ClusterAxis {
    pub const ALL: [ClusterAxis; 3] = [ClusterAxis::X, ClusterAxis::Y, ClusterAxis::Z];
    pub fn parse(s: &str) -> Option<ClusterAxis> {
        Some(match s {
            "x" | "X" => ClusterAxis::X,
            "y" | "Y" => ClusterAxis::Y,
            "z" | "Z" => ClusterAxis::Z,
            _ => return None,
        })
    }
    /// `x`, `y` or `z`.
    pub fn name(self) -> &'static str {
        ["x", "y", "z"][self as usize]
    }
    pub fn index(self) -> usize {
        self as usize
    }
}

/// Who releases a stage in each CTA.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Consumers {
    /// `n` threads, each arriving once.
    Threads(u32),
    /// `n` warps, one arrival each (lane 0, after `__syncwarp()`).
    Warps(u32),
    /// `n` warpgroups of 4 warps, one arrival per warp.
    Warpgroups(u32),
}

impl Consumers {
    /// Threads that call `release` per CTA.
    pub fn threads(self) -> Size {
        match self {
            Consumers::Threads(n) => Size::from(n),
            Consumers::Warps(n) => Size::from(n) * 32u64,
            Consumers::Warpgroups(n) => Size::from(n) * 128u64,
        }
    }
    /// Arrivals one CTA's consumers make on an empty barrier per stage.
    pub fn arrivals(self) -> Size {
        match self {
            Consumers::Threads(n) | Consumers::Warps(n) => Size::from(n),
            Consumers::Warpgroups(n) => Size::from(n) * 4u64,
        }
    }
    /// The count as declared.
    pub fn count(self) -> u32 {
        match self {
            Consumers::Threads(n) | Consumers::Warps(n) | Consumers::Warpgroups(n) => n,
        }
    }
    /// `threads`, `warps` or `warpgroups`.
    pub fn unit(self) -> &'static str {
        match self {
            Consumers::Threads(_) => "threads",
            Consumers::Warps(_) => "warps",
            Consumers::Warpgroups(_) => "warpgroups",
        }
    }
}

impl fmt::Display for Consumers {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}({})", self.unit(), self.count())
    }
}

/// One tile a stage loads.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct StageTile {
    /// Its name in the pipeline (`smem_<member>`, `OFFSET_<member>`, the `load` arguments).
    pub member: String,
    pub tile: ValidSpec,
    /// Multicast along this cluster axis (see the module docs), or loaded by each CTA alone.
    pub multicast: Option<ClusterAxis>,
}

/// A pipeline declaration: plain data, checked by [`validate_pipeline`].
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct PipelineSpec {
    /// Names the generated `struct tma_pipe_<name>`: a C identifier.
    pub name: String,
    pub stages: u32,
    /// The tiles one stage loads, in order.
    pub tiles: Vec<StageTile>,
    pub consumers: Consumers,
    /// The cluster shape (x, y, z) the kernel launches with; `[1, 1, 1]` without clusters.
    pub cluster: [u32; 3],
    pub target: Arch,
    /// Shared memory the rest of the kernel needs beside the pipeline (static or dynamic).
    pub reserve_smem: u64,
    /// Each stage is taken (waited, read, released) by one of the warp roles' consumers, in
    /// turn, rather than by all of them (see the module docs): `consumers` is that one.
    pub in_turn: bool,
}

impl PipelineSpec {
    /// A pipeline of `stages` stages released by `consumers`, no tiles yet, no cluster,
    /// nothing reserved, for sm_90a.
    pub fn new(name: impl Into<String>, stages: u32, consumers: Consumers) -> PipelineSpec {
        PipelineSpec {
            name: name.into(),
            stages,
            tiles: Vec::new(),
            consumers,
            cluster: [1, 1, 1],
            target: Arch::Sm90a,
            reserve_smem: 0,
            in_turn: false,
        }
    }
    /// Adds a tile each CTA loads alone.
    pub fn tile(mut self, member: impl Into<String>, tile: &ValidSpec) -> PipelineSpec {
        self.tiles.push(StageTile {
            member: member.into(),
            tile: tile.clone(),
            multicast: None,
        });
        self
    }
    /// Adds an im2col tile each CTA loads alone: the stage holds its `[pixels][channels]` box
    /// (aligned for its swizzle, its `TX_BYTES` in the stage's), and `load()` takes its
    /// coordinates and its offsets (the filter tap), both named, user order
    /// ([`crate::validate::ValidIm2col::stage_tile`]). An im2col load is one box: it is not
    /// split over a cluster (no multicast). Refused (naming the rule) for a box no tiled box
    /// can be: more than 256 pixels, or more bytes than a tiled box spans.
    pub fn im2col_tile(
        self,
        member: impl Into<String>,
        tile: &crate::validate::ValidIm2col,
    ) -> Result<PipelineSpec, crate::error::SpecErrors> {
        Ok(self.tile(member, &tile.stage_tile()?))
    }
    /// Adds a tile shared by the CTAs along `axis` of the cluster (see the module docs).
    pub fn multicast_tile(
        mut self,
        member: impl Into<String>,
        tile: &ValidSpec,
        axis: ClusterAxis,
    ) -> PipelineSpec {
        self.tiles.push(StageTile {
            member: member.into(),
            tile: tile.clone(),
            multicast: Some(axis),
        });
        self
    }
    pub fn cluster(mut self, shape: [u32; 3]) -> PipelineSpec {
        self.cluster = shape;
        self
    }
    pub fn target(mut self, arch: Arch) -> PipelineSpec {
        self.target = arch;
        self
    }
    pub fn reserve_smem(mut self, bytes: u64) -> PipelineSpec {
        self.reserve_smem = bytes;
        self
    }
    /// Each stage is taken by one consumer of the warp roles, the consumers in turn (a
    /// ping-pong schedule; see the module docs): declare `consumers` as that one consumer,
    /// `Warpgroups(1)` beside consumer warpgroups, `Warps(1)` beside consumer warps.
    pub fn in_turn(mut self) -> PipelineSpec {
        self.in_turn = true;
        self
    }
    /// [`validate_pipeline`].
    pub fn validate(&self) -> Result<ValidPipeline, PipelineErrors> {
        validate_pipeline(self)
    }
}

/// Every finding of a pipeline (or warp roles) declaration, reported at once.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub struct PipelineErrors {
    /// What was declared: `pipeline `ring``, `warp roles `gemm``.
    pub what: String,
    pub errors: Vec<SpecError>,
}

impl fmt::Display for PipelineErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write_breaks(f, &self.what, "rule", &self.errors)
    }
}

pub(crate) fn finding(
    field: Field,
    value: impl ToString,
    rule: Rule,
    message: String,
) -> SpecError {
    SpecError {
        field,
        value: value.to_string(),
        rule,
        message,
        severity: Severity::Error,
    }
}

/// `__launch_bounds__(threads, blocks)` asks for `blocks` blocks resident on one SM: at most
/// [`MAX_BLOCKS_PER_SM`] of them ([`Rule::BlocksPerSm`]) and, when the block's `threads` are
/// known, at most [`MAX_THREADS_PER_SM`] threads ([`Rule::ThreadsPerSm`]). Warp roles and
/// kernel plans hold their launch bounds to it.
pub(crate) fn check_resident_blocks(
    field: Field,
    blocks: u32,
    threads: Option<u64>,
    errors: &mut Vec<SpecError>,
) {
    if blocks > MAX_BLOCKS_PER_SM {
        errors.push(finding(
            field,
            blocks,
            Rule::BlocksPerSm,
            format!(
                "an SM holds at most {MAX_BLOCKS_PER_SM} resident blocks (sm_90), so __launch_bounds__ cannot ask for {blocks}"
            ),
        ));
        return;
    }
    let Some(threads) = threads.filter(|&t| t > 0) else {
        return;
    };
    let per_sm = threads * u64::from(blocks);
    if per_sm > u64::from(MAX_THREADS_PER_SM) {
        errors.push(finding(
            field,
            blocks,
            Rule::ThreadsPerSm,
            format!(
                "{threads} threads x {blocks} block(s) per SM = {per_sm} threads; an SM holds at most {MAX_THREADS_PER_SM} resident threads (sm_90): at most {} block(s) of {threads} threads",
                u64::from(MAX_THREADS_PER_SM) / threads
            ),
        ));
    }
}

/// How one multicast tile is split: the CTAs along its axis and the boxes each issues.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct MulticastSplit {
    pub axis: ClusterAxis,
    /// CTAs sharing the tile: `cluster[axis]`.
    pub ctas: u32,
    /// Boxes each CTA issues: the tile's boxes per call / `ctas`.
    pub boxes_per_cta: u64,
}

/// A pipeline whose every rule holds: what [`crate::render::PipelineCode`] requires.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ValidPipeline {
    spec: PipelineSpec,
    layout: StageLayout,
    stage_tx_bytes: u64,
    max_stages: u64,
    peers: u32,
    empty_arrivals: u32,
    cluster_ctas: u32,
    splits: Vec<Option<MulticastSplit>>,
}

impl ValidPipeline {
    pub fn spec(&self) -> &PipelineSpec {
        &self.spec
    }
    /// Where stages, tiles and barriers sit ([`StageLayout`]).
    pub fn layout(&self) -> &StageLayout {
        &self.layout
    }
    /// Bytes each CTA's full barrier receives per stage: the sum of the tiles' `TX_BYTES`
    /// (see the module docs for multicast).
    pub fn stage_tx_bytes(&self) -> u64 {
        self.stage_tx_bytes
    }
    /// The most stages that fit beside `reserve_smem` on the target.
    pub fn max_stages(&self) -> u64 {
        self.max_stages
    }
    /// CTAs whose copies write into this CTA's stages, itself included.
    pub fn peers(&self) -> u32 {
        self.peers
    }
    /// Arrivals that complete a phase of an empty barrier: consumer arrivals x peers.
    pub fn empty_arrivals(&self) -> u32 {
        self.empty_arrivals
    }
    /// Arrivals that complete a phase of a full barrier: the producer's one
    /// `arrive.expect_tx` (the copies complete the bytes).
    pub fn full_arrivals(&self) -> u32 {
        1
    }
    /// Arrivals one CTA's consumers make per stage on each peer's empty barrier.
    pub fn consumer_arrivals(&self) -> u32 {
        self.empty_arrivals / self.peers.max(1)
    }
    /// How tile `i` is split over its multicast CTAs (`None`: loaded alone).
    pub fn split(&self, i: usize) -> Option<MulticastSplit> {
        self.splits.get(i).copied().flatten()
    }
    /// Dynamic shared memory a launch gives the pipeline ([`StageLayout::dynamic_smem_bytes`]).
    pub fn dynamic_smem_bytes(&self) -> u64 {
        self.layout.dynamic_smem_bytes()
    }
    /// CTAs of the cluster.
    pub fn cluster_ctas(&self) -> u32 {
        self.cluster_ctas
    }
}

/// Checks every pipeline rule on `spec` and lays out its stages.
pub fn validate_pipeline(spec: &PipelineSpec) -> Result<ValidPipeline, PipelineErrors> {
    let mut errors = Vec::new();
    if let Err(problem) = check_name(&spec.name) {
        errors.push(finding(
            Field::Name,
            &spec.name,
            Rule::NameIsIdentifier,
            format!(
                "the pipeline's name names CUDA (`tma_pipe_{}`): it {}",
                spec.name,
                problem.describe()
            ),
        ));
    } else if let Some(why) = generated_clash(NameKind::Pipeline, &spec.name) {
        errors.push(finding(
            Field::Name,
            &spec.name,
            Rule::GeneratedNameClash,
            format!(
                "the pipeline's name names CUDA (`tma_pipe_{}`); this one clashes: {why}",
                spec.name
            ),
        ));
    }
    if spec.stages == 0 {
        errors.push(finding(
            Field::Stages,
            spec.stages,
            Rule::PipelineStageCount,
            "a pipeline needs at least one stage (two or more to overlap loads and use)".into(),
        ));
    }
    check_tiles(spec, &mut errors);
    check_cluster(spec, &mut errors);
    let splits = check_multicast(spec, &mut errors);
    let threads = spec.consumers.threads();
    let consumers_ok =
        spec.consumers.count() >= 1 && threads.is_below(u64::from(MAX_BLOCK_THREADS) + 1);
    if !consumers_ok {
        errors.push(finding(
            Field::Consumers,
            spec.consumers,
            Rule::PipelineConsumers,
            format!(
                "a stage is released by 1 to {MAX_BLOCK_THREADS} threads of a block (32 warps, 8 warpgroups); this is {threads} threads"
            ),
        ));
    }
    // Taken in turn: a stage's releasers are one consumer of the roles, a whole unit of them.
    if spec.in_turn
        && consumers_ok
        && !matches!(
            spec.consumers,
            Consumers::Warpgroups(1) | Consumers::Warps(1)
        )
    {
        errors.push(finding(
            Field::Consumers,
            spec.consumers,
            Rule::PipelineConsumers,
            "a pipeline taken in turn is released by the one consumer that took the stage: declare Consumers::Warpgroups(1) (consumer warpgroups) or Consumers::Warps(1) (consumer warps)".into(),
        ));
    }
    // Sizes from user numbers, through `Size`: a cluster or consumer count no machine has
    // overflows here (and ClusterShape / PipelineConsumers above refuse it), never wraps.
    let peers = peers(spec);
    let empty_arrivals = spec.consumers.arrivals() * peers;
    let cluster_ctas: Size = spec.cluster.iter().map(|&n| u64::from(n)).product();

    // Budget: only meaningful when the tiles themselves are fine.
    let shape = StageShape::new(spec.tiles.iter().map(|t| t.tile.plan()));
    let stage_tx: Size = spec.tiles.iter().map(|t| t.tile.tx_bytes()).sum();
    // A stage's bytes never exceed its shared memory, so PipelineStagesFit catches this first
    // on every target today; checked anyway, as the mbarrier's limit is another number.
    if !stage_tx.is_below(MAX_TX_BYTES + 1) {
        errors.push(finding(
            Field::Tiles,
            stage_tx,
            Rule::TxBytesMax,
            format!(
                "one stage's tiles deliver {stage_tx} bytes to its full barrier; an mbarrier's tx-count holds at most {MAX_TX_BYTES}"
            ),
        ));
    }
    let limit = spec.target.max_smem_per_block();
    let mut max_stages = 0;
    let mut layout = None;
    match &shape {
        Ok(shape) if !spec.tiles.is_empty() => {
            max_stages = shape.max_stages(spec.reserve_smem, limit);
            let need = shape.dynamic_smem_bytes(u64::from(spec.stages)) + spec.reserve_smem;
            if spec.stages > 0 && !need.is_below(limit + 1) {
                errors.push(finding(
                    Field::Stages,
                    spec.stages,
                    Rule::PipelineStagesFit,
                    format!(
                        "{} stages of {} B (+ 16 B of mbarriers each, + {} B alignment slack) and reserve_smem = {} B need {need} B; a block on {} has {limit} B: at most {max_stages} stage{} fit",
                        spec.stages,
                        shape.stride,
                        shape.stage.align_bytes,
                        spec.reserve_smem,
                        spec.target,
                        if max_stages == 1 { "" } else { "s" }
                    ),
                ));
            }
            layout = shape.layout(u64::from(spec.stages));
        }
        Ok(_) => {}
        // The tile at which the stage's running span left 64 bits, and that span.
        Err(overflow) => errors.push(finding(
            spec.tiles
                .get(overflow.index)
                .map_or(Field::Tiles, |t| Field::StageTile {
                    index: overflow.index,
                    member: t.member.clone(),
                }),
            overflow.span,
            Rule::SizeOverflow,
            format!(
                "the stage's tiles up to this one span {} bytes of shared memory: more than 64 bits hold",
                overflow.span
            ),
        )),
    }
    let counts = (to_u32(peers), to_u32(empty_arrivals), to_u32(cluster_ctas));
    match (layout, stage_tx.get(), counts) {
        (Some(layout), Some(stage_tx_bytes), (Some(peers), Some(empty_arrivals), Some(ctas)))
            if errors.is_empty() =>
        {
            Ok(ValidPipeline {
                spec: spec.clone(),
                layout,
                stage_tx_bytes,
                max_stages,
                peers,
                empty_arrivals,
                cluster_ctas: ctas,
                splits,
            })
        }
        _ => Err(PipelineErrors {
            what: format!("pipeline `{}`", spec.name),
            errors,
        }),
    }
}

fn check_tiles(spec: &PipelineSpec, errors: &mut Vec<SpecError>) {
    if spec.tiles.is_empty() {
        errors.push(finding(
            Field::Tiles,
            "[]",
            Rule::PipelineTiles,
            "a stage loads at least one tile".into(),
        ));
    }
    for (index, t) in spec.tiles.iter().enumerate() {
        let field = || Field::StageTile {
            index,
            member: t.member.clone(),
        };
        let earlier = &spec.tiles[..index];
        let clash = if let Err(problem) = check_name(&t.member) {
            Some((
                Rule::PipelineTiles,
                format!(
                    "the member name names CUDA (`smem_{}`, `{}_map`): it {}",
                    t.member,
                    t.member,
                    problem.describe()
                ),
            ))
        } else if let Some(why) = generated_clash(NameKind::PipelineMember, &t.member) {
            Some((
                Rule::GeneratedNameClash,
                format!(
                    "the member name names CUDA (`tile_{m}`, `smem_{m}`, `load`'s `{m}_map` and `{m}`); this one clashes: {why}",
                    m = t.member
                ),
            ))
        } else if earlier.iter().any(|o| o.member == t.member) {
            Some((
                Rule::PipelineTiles,
                "two tiles of the stage have this member name".into(),
            ))
        } else {
            let shared = earlier.iter().find_map(|o| {
                shared_generated_name(NameKind::PipelineMember, &o.member, &t.member).map(|ident| {
                    (
                        Rule::PipelineTiles,
                        format!(
                            "this member and member `{}` would both give the pipeline struct a `{ident}`",
                            o.member
                        ),
                    )
                })
            });
            // One struct per tile name in a source: two different tiles of one name clash
            // (the same tile twice is shared).
            let name = &t.tile.spec().name;
            shared.or_else(|| {
                earlier
                    .iter()
                    .find(|o| o.tile.spec().name == *name && o.tile != t.tile)
                    .map(|o| {
                        (
                            Rule::PipelineTiles,
                            format!(
                                "its tile `{name}` is another tile than member `{}`'s of the same name: both would be `struct tma_{name}`",
                                o.member
                            ),
                        )
                    })
            })
        };
        if let Some((rule, message)) = clash {
            errors.push(finding(field(), &t.member, rule, message));
        }
        let target = t.tile.spec().target;
        if target != spec.target {
            errors.push(finding(
                field(),
                target,
                Rule::PipelineTileTarget,
                format!(
                    "tile `{}` was validated for {target}, the pipeline targets {}",
                    t.tile.spec().name,
                    spec.target
                ),
            ));
        }
    }
}

fn check_cluster(spec: &PipelineSpec, errors: &mut Vec<SpecError>) {
    for (axis, &n) in spec.cluster.iter().enumerate() {
        if n == 0 {
            errors.push(finding(
                Field::Cluster { axis },
                n,
                Rule::ClusterShape,
                "each cluster extent is at least 1".into(),
            ));
        }
    }
    let ctas: Size = spec.cluster.iter().map(|&n| u64::from(n)).product();
    if !ctas.is_below(u64::from(MAX_CLUSTER_CTAS) + 1) {
        let axis = (0..3).max_by_key(|&a| spec.cluster[a]).unwrap_or(0);
        errors.push(finding(
            Field::Cluster { axis },
            spec.cluster[axis],
            Rule::ClusterShape,
            format!(
                "a cluster of {:?} has {ctas} CTAs; at most {MAX_CLUSTER_CTAS} (8 portably), and the multicast CTA mask has 16 bits",
                spec.cluster
            ),
        ));
    }
}

fn check_multicast(
    spec: &PipelineSpec,
    errors: &mut Vec<SpecError>,
) -> Vec<Option<MulticastSplit>> {
    let mut splits = Vec::with_capacity(spec.tiles.len());
    for (index, t) in spec.tiles.iter().enumerate() {
        let Some(axis) = t.multicast else {
            splits.push(None);
            continue;
        };
        let field = || Field::Multicast {
            index,
            member: t.member.clone(),
        };
        let ctas = spec.cluster[axis.index()];
        let boxes = t.tile.plan().boxes;
        if ctas < 2 {
            errors.push(finding(
                field(),
                axis.name(),
                Rule::MulticastAxis,
                format!(
                    "multicast along cluster axis {} shares the tile among cluster[{}] = {ctas} CTA(s); it needs at least 2",
                    axis.name(),
                    axis.index()
                ),
            ));
            splits.push(None);
        } else if t.tile.im2col().is_some() {
            errors.push(finding(
                field(),
                axis.name(),
                Rule::MulticastSlices,
                format!(
                    "im2col tile `{}` moves one box per call (its pixels and channels), which is not split over the {ctas} CTAs along {}: load it in each CTA (`im2col_tile`) and multicast the other operand",
                    t.tile.spec().name,
                    axis.name()
                ),
            ));
            splits.push(None);
        } else if boxes % u64::from(ctas) != 0 {
            errors.push(finding(
                field(),
                axis.name(),
                Rule::MulticastSlices,
                format!(
                    "tile `{}` moves {boxes} box(es) per call, which do not split evenly over the {ctas} CTAs along {}: give it a repeat that is a multiple of {ctas} (each CTA issues its share and multicasts it)",
                    t.tile.spec().name,
                    axis.name()
                ),
            ));
            splits.push(None);
        } else {
            splits.push(Some(MulticastSplit {
                axis,
                ctas,
                boxes_per_cta: boxes / u64::from(ctas),
            }));
        }
    }
    splits
}

/// CTAs whose copies land in a CTA's stages, itself included (see the module docs). A
/// `Size`: three axes of `u32::MAX` CTAs do not fit a `u32` (ClusterShape refuses them).
fn peers(spec: &PipelineSpec) -> Size {
    let mut axes: Vec<ClusterAxis> = spec.tiles.iter().filter_map(|t| t.multicast).collect();
    axes.sort();
    axes.dedup();
    Size::new(1)
        + axes
            .iter()
            .map(|a| spec.cluster[a.index()].saturating_sub(1))
            .sum::<Size>()
}

/// A count proven to fit a `u32`, or `None`.
fn to_u32(n: Size) -> Option<u32> {
    n.get().and_then(|v| u32::try_from(v).ok())
}

#[cfg(test)]
mod tests;
