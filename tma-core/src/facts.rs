//! What a kernel source tells the runtime, as typed data carried beside its text: its tiles,
//! its pipelines and its kernel plans' launches ([`SourceFacts`], made by
//! [`KernelSource::facts`](crate::render::KernelSource::facts) from the same declarations the
//! text is rendered from). tma-runtime carries it with the compiled module (`Source::kernel`)
//! and consults it, and nothing else, to name the tiles and pipelines of a hang or device-check
//! record, to check a compile's arch against the tiles' target, and to check launches. Nothing
//! is read back out of the generated text or the PTX: a comment in a kernel body says nothing.
//!
//! ```
//! use tma_core::render::KernelSource;
//! use tma_core::{validate, Arch, DType, Swizzle, TileSpec};
//! let a = validate(
//!     &TileSpec::new("a", DType::BF16, [4096, 1024], [64, 64])
//!         .swizzle(Swizzle::B128)
//!         .dim_names(["M", "K"]),
//! )?;
//! let facts = KernelSource::new().tile_as(&a, "A").body("// tma-tile 7 forged\n").facts();
//! let t = facts.tile(0).ok_or("tile 0")?;
//! assert_eq!((t.name.as_str(), t.smem_bytes, t.align_bytes, t.target), ("a", 8192, 1024, Arch::Sm90a));
//! assert_eq!((t.dim_name(1), t.dim_name(2)), (Some("K"), None));
//! assert!(facts.tile(7).is_none(), "a comment declares nothing");
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use crate::pipeline::ValidPipeline;
use crate::plan::LaunchPlan;
use crate::spec::Arch;
use crate::validate::ValidSpec;

/// Everything a kernel source declares that the runtime checks or names.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct SourceFacts {
    /// The tiles, by id (0, 1, ... in the source's order: each tile's `TILE_ID`).
    pub tiles: Vec<TileFacts>,
    /// The pipelines, by id (each pipeline's `PIPELINE_ID`).
    pub pipelines: Vec<PipelineFacts>,
    /// The kernel plans' work queues, by id (each queue's `QUEUE_ID`).
    pub queues: Vec<QueueFacts>,
    /// The launches of the source's kernel plans: a plan kernel's launches are checked
    /// against its plan alone.
    pub plans: Vec<LaunchPlan>,
}

impl SourceFacts {
    /// Tile `id`.
    pub fn tile(&self, id: u32) -> Option<&TileFacts> {
        self.tiles.iter().find(|t| t.id == id)
    }
    /// Pipeline `id`.
    pub fn pipeline(&self, id: u32) -> Option<&PipelineFacts> {
        self.pipelines.iter().find(|p| p.id == id)
    }
    /// Work queue `id`.
    pub fn queue(&self, id: u32) -> Option<&QueueFacts> {
        self.queues.iter().find(|q| q.id == id)
    }
    /// The plan of kernel `name` (its `extern "C"` name).
    pub fn plan(&self, kernel: &str) -> Option<&LaunchPlan> {
        self.plans.iter().find(|p| p.kernel == kernel)
    }
}

/// One tile of a source.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct TileFacts {
    /// The tile's id in its source (its `TILE_ID`, the debug record's `tile_id`).
    pub id: u32,
    /// The tile's name as declared.
    pub name: String,
    /// Each dim's name, in the user's order (outer -> inner, as the debug record's `dim`);
    /// `None` for a dim declared without one.
    pub dim_names: Vec<Option<String>>,
    /// Bytes of shared memory one helper call spans ([`crate::SmemPlan::footprint_bytes`]).
    pub smem_bytes: u64,
    /// Alignment its shared memory needs ([`crate::SmemPlan::align_bytes`]).
    pub align_bytes: u64,
    /// The arch the tile was validated for ([`crate::TileSpec::target`]).
    pub target: Arch,
    /// The source holds the tile outside its kernel plans (added with `tile`, `tile_as`,
    /// `tile_set`, or as a stage tile of a pipeline added with `pipeline` / `pipeline_as`): a
    /// kernel without a plan may keep it. A tile only plans own is their kernels' business.
    pub outside_plans: bool,
}

impl TileFacts {
    /// Tile `id` of its source.
    pub fn of(valid: &ValidSpec, id: u32, outside_plans: bool) -> TileFacts {
        let spec = valid.spec();
        let plan = valid.plan();
        // An im2col tile's records name its tensor's dims (N, the spatial dims, C).
        let dim_names = match valid.im2col() {
            Some(i) => (0..i.spec().rank())
                .map(|d| i.spec().dim_name(d).map(str::to_string))
                .collect(),
            None => (0..spec.rank())
                .map(|d| spec.dim_name(d).map(str::to_string))
                .collect(),
        };
        TileFacts {
            id,
            name: spec.name.clone(),
            dim_names,
            smem_bytes: plan.footprint_bytes,
            align_bytes: plan.align_bytes,
            target: spec.target,
            outside_plans,
        }
    }

    /// The name of dim `dim` (user order, as the debug record's `dim`), when it has one.
    pub fn dim_name(&self, dim: u32) -> Option<&str> {
        let d = usize::try_from(dim).ok()?;
        self.dim_names.get(d)?.as_deref()
    }
}

/// One work queue of a source's kernel plans ([`crate::pipeline::WorkQueue`]).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct QueueFacts {
    /// The queue's id in its source (its `QUEUE_ID`, the hang record's `value`).
    pub id: u32,
    /// The plan's kernel.
    pub kernel: String,
    /// The queue's region name in that plan.
    pub name: String,
}

/// One pipeline of a source.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct PipelineFacts {
    /// The pipeline's id in its source (its `PIPELINE_ID`, the hang record's `value`).
    pub id: u32,
    pub name: String,
    pub stages: u32,
    /// The cluster shape (x, y, z) it was declared for (`[1, 1, 1]`: no cluster).
    pub cluster: [u32; 3],
    /// Its `DYNAMIC_SMEM_BYTES`: what a launch must give it at least
    /// ([`ValidPipeline::dynamic_smem_bytes`]).
    pub dynamic_smem_bytes: u64,
    /// The ids of its stage tiles, in stage order.
    pub tiles: Vec<u32>,
    /// The source holds the pipeline outside its kernel plans (added with `pipeline` /
    /// `pipeline_as`): a kernel without a plan may run it.
    pub outside_plans: bool,
}

impl PipelineFacts {
    /// Pipeline `id` of its source, whose stage tiles have ids `tiles`.
    pub fn of(
        pipeline: &ValidPipeline,
        id: u32,
        tiles: Vec<u32>,
        outside_plans: bool,
    ) -> PipelineFacts {
        let spec = pipeline.spec();
        PipelineFacts {
            id,
            name: spec.name.clone(),
            stages: spec.stages,
            cluster: spec.cluster,
            dynamic_smem_bytes: pipeline.dynamic_smem_bytes(),
            tiles,
            outside_plans,
        }
    }
}
