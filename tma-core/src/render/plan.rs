//! Kernel plans: [`PlanCode`] (`struct tma_plan_<name>`), the generated layout of a
//! [`ValidKernelPlan`]'s shared memory and its launch's numbers.

use super::*;
use crate::pipeline::ValidWorkQueue;
use crate::plan::{RegionKind, RegionRole, ValidKernelPlan};

/// A region of a kernel plan's shared memory: what it holds (`kind`, the struct it names) and
/// where.
#[derive(Serialize)]
struct PlanRegion {
    name: String,
    kind: &'static str,
    cuda: String,
    offset: u64,
    bytes: u64,
    align: u64,
    stride: u64,
    copies: u32,
}

/// The context of `plan.cuh.tera`.
#[derive(Serialize)]
struct PlanContext<'a> {
    name: &'a str,
    cuda: String,
    launch_macro: String,
    threads: u32,
    blocks_per_sm: u32,
    cluster: [u32; 3],
    total: u64,
    align: u64,
    dynamic: u32,
    opt_in: bool,
    regions: Vec<PlanRegion>,
}

/// One kernel plan's CUDA: `struct tma_plan_<name>` with `BLOCK_THREADS`, `CLUSTER_X/Y/Z`,
/// `SMEM_BYTES`, `SMEM_ALIGN`, `DYNAMIC_SMEM_BYTES`, per region `OFFSET_<r>`, `BYTES_<r>`,
/// `ALIGN_<r>` and its accessor (a pipeline constructed on its region, a tile set's or
/// scratch's base, a staging copy `r(base, i)`), `base(raw)`, and the macro
/// `TMA_PLAN_<NAME>_LAUNCH_BOUNDS`. The structs it names (tiles, sets, pipelines) must be in
/// the same translation unit ([`KernelSource::plan`] adds them).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PlanCode {
    name: String,
    source: String,
}

impl PlanCode {
    /// The plan's code, its work queues numbered from 0 (their `QUEUE_ID`s): right for a
    /// source with this one plan. [`KernelSource::plan`] numbers them across a source's plans
    /// ([`PlanCode::with_queue_ids`]) and its facts name them by those numbers.
    pub fn new(valid: &ValidKernelPlan) -> Result<PlanCode, RenderError> {
        PlanCode::with_queue_ids(valid, 0)
    }
    /// The plan's code, its work queues numbered from `first_queue_id` in the order declared:
    /// a hang record names a queue by that id ([`crate::facts::QueueFacts`]).
    pub fn with_queue_ids(
        valid: &ValidKernelPlan,
        first_queue_id: u32,
    ) -> Result<PlanCode, RenderError> {
        let plan = valid.plan();
        let mut queue_id = first_queue_id;
        let layout = valid.layout();
        let launch = valid.launch();
        let regions: Vec<PlanRegion> = layout
            .regions
            .iter()
            .map(|r| {
                let (kind, cuda) = match r.role {
                    RegionRole::Pipeline(i) => (
                        "pipeline",
                        plan.pipelines
                            .get(i)
                            .map(|p| format!("tma_pipe_{}", p.spec().name)),
                    ),
                    RegionRole::TileSet(i) => (
                        "set",
                        plan.tile_sets.get(i).map(|s| format!("tma_{}", s.name)),
                    ),
                    RegionRole::Staging(i) => (
                        "staging",
                        plan.regions.get(i).and_then(|g| match &g.kind {
                            RegionKind::Staging { tile, .. } => {
                                Some(format!("tma_{}", tile.spec().name))
                            }
                            RegionKind::Scratch { .. } | RegionKind::WorkQueue(_) => None,
                        }),
                    ),
                    RegionRole::Scratch(i) => match plan.regions.get(i).map(|g| &g.kind) {
                        Some(RegionKind::WorkQueue(q)) => {
                            let id = queue_id;
                            queue_id = queue_id.saturating_add(1);
                            ("queue", Some(work_queue_type(q, id)))
                        }
                        _ => ("scratch", None),
                    },
                };
                PlanRegion {
                    name: r.name.clone(),
                    kind,
                    cuda: cuda.unwrap_or_default(),
                    offset: r.offset,
                    bytes: r.bytes,
                    align: r.align,
                    stride: r.stride,
                    copies: r.copies,
                }
            })
            .collect();
        let ctx = PlanContext {
            name: &plan.name,
            cuda: plan_cuda_name(&plan.name),
            launch_macro: plan_launch_macro(&plan.name),
            threads: launch.block[0],
            // 0: no second `__launch_bounds__` argument (none declared, no warp roles).
            blocks_per_sm: valid.blocks_per_sm().unwrap_or(0),
            cluster: launch.cluster,
            total: layout.total_bytes(),
            align: layout.align_bytes(),
            dynamic: launch.dynamic_smem_bytes,
            opt_in: launch.smem_opt_in,
            regions,
        };
        Ok(PlanCode {
            name: plan.name.clone(),
            source: render("plan.cuh.tera", &ctx)?,
        })
    }
    /// The struct and its launch-bounds macro.
    pub fn source(&self) -> &str {
        &self.source
    }
    /// `tma_plan_<name>`.
    pub fn cuda_name(&self) -> String {
        plan_cuda_name(&self.name)
    }
    /// `TMA_PLAN_<NAME>_LAUNCH_BOUNDS`: `__launch_bounds__(BLOCK_THREADS, BLOCKS_PER_SM)`, or
    /// `__launch_bounds__(BLOCK_THREADS)` when the plan asks for no blocks per SM.
    pub fn launch_macro(&self) -> String {
        plan_launch_macro(&self.name)
    }
}

/// The prelude's `tma_work_queue<SLOTS, EMPTY_ARRIVALS, PER_WARP, QUEUE_ID>` of `queue`.
fn work_queue_type(queue: &ValidWorkQueue, id: u32) -> String {
    format!(
        "tma_work_queue<{}u, {}u, {}, {id}u>",
        queue.slots(),
        queue.empty_arrivals(),
        queue.per_warp()
    )
}

pub(super) fn plan_cuda_name(name: &str) -> String {
    format!("tma_plan_{name}")
}

pub(super) fn plan_launch_macro(name: &str) -> String {
    format!("TMA_PLAN_{}_LAUNCH_BOUNDS", name.to_ascii_uppercase())
}
