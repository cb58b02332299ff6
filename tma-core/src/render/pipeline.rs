//! Pipelines and warp roles: [`PipelineCode`] (`struct tma_pipe_<name>`), [`WarpRolesCode`]
//! (`struct tma_roles_<name>`) and [`warp_support`], the helpers both use.

use super::*;
use crate::pipeline::{RoleWarps, ValidPipeline, ValidWarpRoles};
use crate::rules::Helper;

/// The helpers pipelines and warp roles use (include-guarded): `tma_setmaxnreg_inc<N>` /
/// `dec<N>`, `tma_elect_one`, `tma_named_barrier_sync<ID, THREADS>` / `arrive`, the cluster
/// helpers (`tma_cluster_ctarank`, `tma_cluster_ctaid<AXIS>`, `tma_cluster_sync`, `tma_mapa`,
/// `tma_mbarrier_arrive_remote`), `tma_pipe_state<STAGES>` and the debug-aware `tma_pipe_wait`.
/// With `TMA_TIMELINE` it also holds the timeline's recorder (`tma_timeline_record`, its
/// `__constant__` config and the kinds' codes of [`crate::timeline::TimelineKind`]). Goes
/// after the prelude.
pub fn warp_support() -> Result<String, RenderError> {
    render(
        "warp.cuh.tera",
        &WarpContext {
            timeline_kinds: crate::timeline::TimelineKind::ALL
                .iter()
                .map(|(k, code)| TimelineCode {
                    name: k.name().to_ascii_uppercase(),
                    code: *code,
                })
                .collect(),
            timeline_event_bytes: crate::timeline::EVENT_BYTES,
            timeline_config_bytes: crate::timeline::CONFIG_BYTES,
            helper_queue_push: helper_code(Helper::QueuePush),
            helper_queue_pop: helper_code(Helper::QueuePop),
        },
    )
}

/// A timeline kind's macro name and code.
#[derive(Serialize)]
struct TimelineCode {
    name: String,
    code: u32,
}

/// The context of `warp.cuh.tera`.
#[derive(Serialize)]
struct WarpContext {
    timeline_kinds: Vec<TimelineCode>,
    timeline_event_bytes: u64,
    timeline_config_bytes: usize,
    /// The work queue's waits' helper codes (its hang records).
    helper_queue_push: u32,
    helper_queue_pop: u32,
}

fn helper_code(h: Helper) -> u32 {
    Helper::ALL
        .iter()
        .find(|(x, _)| *x == h)
        .map_or(0, |(_, c)| *c)
}

/// A dim of a pipeline tile: the C++ local of its coordinate and its label.
#[derive(Serialize)]
struct PipeDim {
    var: String,
    label: String,
}

/// One box a CTA loads of a multicast tile: its index and its coordinates (TMA order).
#[derive(Serialize)]
struct MulticastBox {
    j: u64,
    coords: Vec<String>,
}

/// How a multicast tile is split over the cluster's CTAs.
#[derive(Serialize)]
struct Multicast {
    axis: &'static str,
    axis_index: usize,
    ctas: u32,
    per_cta: u64,
    step: u32,
    pattern: u32,
    boxes: Vec<MulticastBox>,
}

/// A tile of a pipeline's stage.
#[derive(Serialize)]
struct PipeTile {
    member: String,
    cuda: String,
    offset: u64,
    tx: u64,
    rank: usize,
    dims: Vec<PipeDim>,
    coord_example: String,
    stride_bytes: u64,
    tma_operands: Vec<usize>,
    #[serde(serialize_with = "or_false")]
    multicast: Option<Multicast>,
    /// An im2col tile: `load()` also takes its offsets (`{.H = .., .W = ..}`, this example).
    #[serde(serialize_with = "or_false")]
    im2col: Option<String>,
}

/// The context of `pipeline.cuh.tera`.
#[derive(Serialize)]
struct PipelineContext<'a> {
    id: u32,
    name: &'a str,
    cuda: String,
    stages: u32,
    stage_bytes: u64,
    stage_stride: u64,
    stage_tx: u64,
    full_offset: u64,
    empty_offset: u64,
    total: u64,
    align: u64,
    dynamic: u64,
    max_stages: u64,
    reserve: u64,
    target: &'static str,
    consumers: String,
    unit: &'static str,
    consumer_threads: u64,
    consumer_arrivals: u32,
    in_turn: bool,
    peers: u32,
    empty_arrivals: u32,
    cluster: [u32; 3],
    cluster_ctas: u32,
    helper_wait: u32,
    helper_acquire: u32,
    tiles: Vec<PipeTile>,
}

/// One pipeline's CUDA: `struct tma_pipe_<name>` (docs/CONTRACTS.md, "Pipelines"). Its tiles'
/// structs must be in the same translation unit ([`KernelSource::pipeline`] adds them).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PipelineCode {
    name: String,
    source: String,
}

impl PipelineCode {
    /// Renders `pipeline` as pipeline `id` of its translation unit (the hang record's
    /// `value` names it).
    pub fn new(pipeline: &ValidPipeline, id: u32) -> Result<PipelineCode, RenderError> {
        let spec = pipeline.spec();
        let layout = pipeline.layout();
        let mut tiles = Vec::with_capacity(spec.tiles.len());
        for (i, t) in spec.tiles.iter().enumerate() {
            let tile = t.tile.spec();
            // An im2col member's coordinates are its tensor's (N, the spatial dims, C); its
            // box (`tile`) is where they land.
            let named = |labels: &mut dyn Iterator<Item = String>| {
                format!(
                    "{{{}}}",
                    labels
                        .map(|l| format!(".{l} = .."))
                        .collect::<Vec<_>>()
                        .join(", ")
                )
            };
            let (rank, example, im2col) = match t.tile.im2col() {
                Some(i) => {
                    let s = i.spec();
                    (
                        s.rank(),
                        named(&mut (0..s.rank()).map(|d| s.dim_label(d))),
                        Some(named(&mut (1..=s.spatial_rank()).map(|d| s.dim_label(d)))),
                    )
                }
                None => (
                    tile.rank(),
                    named(&mut (0..tile.rank()).map(|d| tile.dim_label(d))),
                    None,
                ),
            };
            let dims: Vec<PipeDim> = (0..rank)
                .map(|d| PipeDim {
                    var: format!("c{d}"),
                    label: tile.dim_label(d),
                })
                .collect();
            let multicast = match pipeline.split(i) {
                None => None,
                Some(split) => {
                    let axis = split.axis.index();
                    let step: u32 = spec.cluster[..axis].iter().product();
                    let pattern: u32 = (0..split.ctas).map(|k| 1u32 << (k * step)).sum();
                    let boxes: Vec<MulticastBox> = (0..split.boxes_per_cta)
                        .map(|j| MulticastBox {
                            j,
                            coords: to_tma_order(&box_coords(tile)),
                        })
                        .collect();
                    Some(Multicast {
                        axis: split.axis.name(),
                        axis_index: axis,
                        ctas: split.ctas,
                        per_cta: split.boxes_per_cta,
                        step,
                        pattern,
                        boxes,
                    })
                }
            };
            tiles.push(PipeTile {
                member: t.member.clone(),
                cuda: format!("tma_{}", tile.name),
                offset: layout.stage.offsets[i],
                tx: t.tile.tx_bytes(),
                rank,
                dims,
                coord_example: example,
                stride_bytes: t.tile.plan().stride_bytes,
                tma_operands: (2..rank + 2).collect(),
                multicast,
                im2col,
            });
        }
        let ctx = PipelineContext {
            id,
            name: &spec.name,
            cuda: format!("tma_pipe_{}", spec.name),
            stages: spec.stages,
            stage_bytes: layout.stage.total_bytes,
            stage_stride: layout.stage_stride,
            stage_tx: pipeline.stage_tx_bytes(),
            full_offset: layout.full_offset(),
            empty_offset: layout.empty_offset(),
            total: layout.total_bytes(),
            align: layout.align_bytes(),
            dynamic: layout.dynamic_smem_bytes(),
            max_stages: pipeline.max_stages(),
            reserve: spec.reserve_smem,
            target: spec.target.nvrtc_name(),
            consumers: spec.consumers.to_string(),
            unit: spec.consumers.unit(),
            consumer_threads: spec.consumers.threads().get().unwrap_or(0),
            consumer_arrivals: pipeline.consumer_arrivals(),
            in_turn: spec.in_turn,
            peers: pipeline.peers(),
            empty_arrivals: pipeline.empty_arrivals(),
            cluster: spec.cluster,
            cluster_ctas: pipeline.cluster_ctas(),
            helper_wait: helper_code(Helper::PipelineWait),
            helper_acquire: helper_code(Helper::PipelineAcquire),
            tiles,
        };
        Ok(PipelineCode {
            name: spec.name.clone(),
            source: render("pipeline.cuh.tera", &ctx)?,
        })
    }

    /// The struct, without the tiles' helpers or the prelude.
    pub fn source(&self) -> &str {
        &self.source
    }

    /// `tma_pipe_<name>`.
    pub fn cuda_name(&self) -> String {
        format!("tma_pipe_{}", self.name)
    }
}

/// The user-order coordinates of box `n` (a C++ local) of a call at `c0, c1, ..`: per dim
/// `c<d> + (n / inner % repeat) * box`, the row-major index over the repeats (as
/// [`crate::ValidSpec::repeat_placements`] numbers boxes), with the division and remainder left
/// out where they do nothing.
fn box_coords(tile: &crate::TileSpec) -> Vec<String> {
    let rank = tile.rank();
    (0..rank)
        .map(|d| {
            let r = u64::from(tile.repeat[d].max(1));
            if r == 1 {
                return format!("c{d}");
            }
            let inner: u64 = tile.repeat[d + 1..]
                .iter()
                .map(|&x| u64::from(x.max(1)))
                .product();
            let outer: u64 = tile.repeat[..d]
                .iter()
                .map(|&x| u64::from(x.max(1)))
                .product();
            let mut index = "n".to_string();
            if inner > 1 {
                index = format!("{index} / {inner}u");
            }
            if outer > 1 {
                index = format!("{index} % {r}u");
            }
            format!("c{d} + static_cast<int>({index}) * {}", tile.boxed[d])
        })
        .collect()
}

/// A named barrier of warp roles: its first and last id (one per consumer when
/// `per_consumer`).
#[derive(Serialize)]
struct RolesBarrier {
    name: String,
    id: u32,
    last: u32,
    threads: u32,
    per_consumer: bool,
}

/// The registers `setmaxnreg` gives each role.
#[derive(Serialize)]
struct RegisterSplitContext {
    producer_regs: u32,
    consumer_regs: u32,
}

/// The context of `roles.cuh.tera`.
#[derive(Serialize)]
struct RolesContext<'a> {
    name: &'a str,
    cuda: String,
    launch_macro: String,
    producers: String,
    consumers: String,
    producer_warps: u64,
    consumer_warps: u64,
    #[serde(serialize_with = "or_false")]
    producer_warpgroups: Option<u32>,
    #[serde(serialize_with = "or_false")]
    consumer_warpgroups: Option<u32>,
    consumer_count: u32,
    consumer_unit: &'static str,
    warps_per_consumer: u32,
    producer_threads: u64,
    warps: u64,
    threads: u64,
    #[serde(serialize_with = "or_false")]
    setmaxnreg: Option<RegisterSplitContext>,
    launch_regs: u64,
    blocks_per_sm: u32,
    barriers: Vec<RolesBarrier>,
}

/// Warp roles' CUDA: `struct tma_roles_<name>` and its `TMA_ROLES_<NAME>_LAUNCH_BOUNDS` macro.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WarpRolesCode {
    name: String,
    source: String,
}

impl WarpRolesCode {
    pub fn new(roles: &ValidWarpRoles) -> Result<WarpRolesCode, RenderError> {
        let r = roles.roles();
        let barriers: Vec<RolesBarrier> = roles
            .barrier_ids()
            .map(|(b, ids)| RolesBarrier {
                name: b.name.clone(),
                id: *ids.start(),
                last: *ids.end(),
                threads: b.threads,
                per_consumer: b.per_consumer,
            })
            .collect();
        let warpgroups = |w: RoleWarps| match w {
            RoleWarps::Warpgroups(n) => Some(n),
            RoleWarps::Warps(_) => None,
        };
        let ctx = RolesContext {
            name: &r.name,
            cuda: format!("tma_roles_{}", r.name),
            launch_macro: launch_macro(&r.name),
            producers: r.producers.to_string(),
            consumers: r.consumers.to_string(),
            producer_warps: r.producer_warps(),
            consumer_warps: r.consumer_warps(),
            producer_warpgroups: warpgroups(r.producers),
            consumer_warpgroups: warpgroups(r.consumers),
            consumer_count: r.consumer_count(),
            consumer_unit: match r.consumers {
                RoleWarps::Warps(_) => "warp",
                RoleWarps::Warpgroups(_) => "warpgroup",
            },
            warps_per_consumer: r.consumers.warps_per_unit(),
            producer_threads: 32 * r.producer_warps(),
            warps: r.producer_warps() + r.consumer_warps(),
            threads: r.threads(),
            setmaxnreg: r.setmaxnreg.map(|s| RegisterSplitContext {
                producer_regs: s.producer_regs,
                consumer_regs: s.consumer_regs,
            }),
            launch_regs: roles.launch_regs(),
            blocks_per_sm: r.blocks_per_sm,
            barriers,
        };
        Ok(WarpRolesCode {
            name: r.name.clone(),
            source: render("roles.cuh.tera", &ctx)?,
        })
    }
    pub fn source(&self) -> &str {
        &self.source
    }
    /// `tma_roles_<name>`.
    pub fn cuda_name(&self) -> String {
        format!("tma_roles_{}", self.name)
    }
    /// `TMA_ROLES_<NAME>_LAUNCH_BOUNDS`: `__launch_bounds__(threads, blocks_per_sm)`.
    pub fn launch_macro(&self) -> String {
        launch_macro(&self.name)
    }
}

fn launch_macro(name: &str) -> String {
    format!("TMA_ROLES_{}_LAUNCH_BOUNDS", name.to_ascii_uppercase())
}
