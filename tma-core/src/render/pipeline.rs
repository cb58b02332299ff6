//! Pipelines and warp roles: [`PipelineCode`] (`struct tma_pipe_<name>`), [`WarpRolesCode`]
//! (`struct tma_roles_<name>`) and [`warp_support`], the helpers both use.

use super::*;
use crate::pipeline::{RoleWarps, ValidPipeline, ValidWarpRoles};
use crate::rules::Helper;

/// The helpers pipelines and warp roles use (include-guarded): `tma_setmaxnreg_inc<N>` /
/// `dec<N>`, `tma_elect_one`, `tma_named_barrier_sync<ID, THREADS>` / `arrive`, the cluster
/// helpers (`tma_cluster_ctarank`, `tma_cluster_ctaid<AXIS>`, `tma_cluster_sync`, `tma_mapa`,
/// `tma_mbarrier_arrive_remote`), `tma_pipe_state<STAGES>` and the debug-aware `tma_pipe_wait`.
/// Goes after the prelude.
pub fn warp_support() -> Result<String, RenderError> {
    render("warp.cuh.tera", &Context::new())
}

fn helper_code(h: Helper) -> u32 {
    Helper::ALL
        .iter()
        .find(|(x, _)| *x == h)
        .map_or(0, |(_, c)| *c)
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
            let rank = tile.rank();
            let dims: Vec<Value> = (0..rank)
                .map(|d| {
                    map([
                        ("var", Value::from(format!("c{d}"))),
                        ("label", Value::from(tile.dim_label(d))),
                    ])
                })
                .collect();
            let example = format!(
                "{{{}}}",
                (0..rank)
                    .map(|d| format!(".{} = ..", tile.dim_label(d)))
                    .collect::<Vec<_>>()
                    .join(", ")
            );
            let multicast = match pipeline.split(i) {
                None => Value::from(false),
                Some(split) => {
                    let axis = split.axis.index();
                    let step: u32 = spec.cluster[..axis].iter().product();
                    let pattern: u32 = (0..split.ctas).map(|k| 1u32 << (k * step)).sum();
                    let boxes: Vec<Value> = (0..split.boxes_per_cta)
                        .map(|j| {
                            let user = box_coords(tile);
                            map([
                                ("j", Value::from(j)),
                                (
                                    "coords",
                                    Value::from(
                                        to_tma_order(&user)
                                            .into_iter()
                                            .map(Value::from)
                                            .collect::<Vec<_>>(),
                                    ),
                                ),
                            ])
                        })
                        .collect();
                    map([
                        ("axis", Value::from(split.axis.name())),
                        ("axis_index", Value::from(axis)),
                        ("ctas", Value::from(split.ctas)),
                        ("per_cta", Value::from(split.boxes_per_cta)),
                        ("step", Value::from(step)),
                        ("pattern", Value::from(pattern)),
                        ("boxes", Value::from(boxes)),
                    ])
                }
            };
            tiles.push(map([
                ("member", Value::from(t.member.clone())),
                ("cuda", Value::from(format!("tma_{}", tile.name))),
                ("offset", Value::from(layout.tile_offsets[i])),
                ("tx", Value::from(t.tile.tx_bytes())),
                ("rank", Value::from(rank)),
                ("dims", Value::from(dims)),
                ("coord_example", Value::from(example)),
                ("stride_bytes", Value::from(t.tile.plan().stride_bytes)),
                (
                    "tma_operands",
                    Value::from((2..rank + 2).map(Value::from).collect::<Vec<_>>()),
                ),
                ("multicast", multicast),
            ]));
        }
        let mut ctx = Context::new();
        ctx.insert("id", &id);
        ctx.insert("name", &spec.name);
        ctx.insert("cuda", &format!("tma_pipe_{}", spec.name));
        ctx.insert("stages", &spec.stages);
        ctx.insert("stage_bytes", &layout.stage_bytes);
        ctx.insert("stage_stride", &layout.stage_stride);
        ctx.insert("stage_tx", &pipeline.stage_tx_bytes());
        ctx.insert("full_offset", &layout.full_offset);
        ctx.insert("empty_offset", &layout.empty_offset);
        ctx.insert("total", &layout.total_bytes);
        ctx.insert("align", &layout.align_bytes);
        ctx.insert("dynamic", &layout.dynamic_smem_bytes());
        ctx.insert("max_stages", &pipeline.max_stages());
        ctx.insert("reserve", &spec.reserve_smem);
        ctx.insert("target", spec.target.nvrtc_name());
        ctx.insert("consumers", &spec.consumers.to_string());
        ctx.insert("unit", spec.consumers.unit());
        ctx.insert(
            "consumer_threads",
            &spec.consumers.threads().get().unwrap_or(0),
        );
        ctx.insert("consumer_arrivals", &pipeline.consumer_arrivals());
        ctx.insert("peers", &pipeline.peers());
        ctx.insert("empty_arrivals", &pipeline.empty_arrivals());
        ctx.insert("cluster", &spec.cluster.to_vec());
        ctx.insert("cluster_ctas", &pipeline.cluster_ctas());
        ctx.insert("helper_wait", &helper_code(Helper::PipelineWait));
        ctx.insert("helper_acquire", &helper_code(Helper::PipelineAcquire));
        ctx.insert_value("tiles", Value::from(tiles));
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

/// Warp roles' CUDA: `struct tma_roles_<name>` and its `TMA_ROLES_<NAME>_LAUNCH_BOUNDS` macro.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WarpRolesCode {
    name: String,
    source: String,
}

impl WarpRolesCode {
    pub fn new(roles: &ValidWarpRoles) -> Result<WarpRolesCode, RenderError> {
        let r = roles.roles();
        let barriers: Vec<Value> = roles
            .barrier_ids()
            .map(|(b, ids)| {
                map([
                    ("name", Value::from(b.name.clone())),
                    ("id", Value::from(*ids.start())),
                    ("last", Value::from(*ids.end())),
                    ("threads", Value::from(b.threads)),
                    ("per_consumer", Value::from(b.per_consumer)),
                ])
            })
            .collect();
        let warpgroups = |w: RoleWarps| match w {
            RoleWarps::Warpgroups(n) => Value::from(n),
            RoleWarps::Warps(_) => Value::from(false),
        };
        let mut ctx = Context::new();
        ctx.insert("name", &r.name);
        ctx.insert("cuda", &format!("tma_roles_{}", r.name));
        ctx.insert("launch_macro", &launch_macro(&r.name));
        ctx.insert("producers", &r.producers.to_string());
        ctx.insert("consumers", &r.consumers.to_string());
        ctx.insert("producer_warps", &r.producer_warps());
        ctx.insert("consumer_warps", &r.consumer_warps());
        ctx.insert_value("producer_warpgroups", warpgroups(r.producers));
        ctx.insert_value("consumer_warpgroups", warpgroups(r.consumers));
        ctx.insert("consumer_count", &r.consumer_count());
        ctx.insert(
            "consumer_unit",
            match r.consumers {
                RoleWarps::Warps(_) => "warp",
                RoleWarps::Warpgroups(_) => "warpgroup",
            },
        );
        ctx.insert("warps_per_consumer", &r.consumers.warps_per_unit());
        ctx.insert("producer_threads", &(32 * r.producer_warps()));
        ctx.insert("warps", &(r.producer_warps() + r.consumer_warps()));
        ctx.insert("threads", &r.threads());
        let split = r.setmaxnreg.map_or(Value::from(false), |s| {
            map([
                ("producer_regs", Value::from(s.producer_regs)),
                ("consumer_regs", Value::from(s.consumer_regs)),
            ])
        });
        ctx.insert_value("setmaxnreg", split);
        ctx.insert("launch_regs", &roles.launch_regs());
        ctx.insert("blocks_per_sm", &r.blocks_per_sm);
        ctx.insert_value("barriers", Value::from(barriers));
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
