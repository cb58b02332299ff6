//! What `tma_kernel!` generates: [`Plan`], a kernel plan's layout and launch as constants
//! computed at compile time, with the [`ValidKernelPlan`] the run-time builder
//! ([`KernelPlan`]) gives for the same declaration (same rules, same layout).
//!
//! ```
//! use tma::{Pipeline, Plan};
//!
//! tma::tma_pipeline! {
//!     pub GemmRing,
//!     stages = 4,
//!     consumers = warpgroups(2),
//!     tiles = {
//!         a: tma_2d! { pub GemmA: bf16, global = [M = _, K = _], boxed = [128, 64], swizzle = 128 },
//!         b: tma_2d! { pub GemmB: bf16, global = [N = _, K = _], boxed = [128, 64], swizzle = 128 },
//!     },
//! }
//!
//! tma::tma_kernel! {
//!     /// A GEMM: the ring, one D tile per consumer warpgroup for the TMA store, 256 B of flags.
//!     pub Gemm,
//!     roles = tma_warp_roles! {
//!         pub GemmRoles, producer_regs = 40, consumer_warpgroups = 2, consumer_regs = 232,
//!     },
//!     pipelines = [GemmRing],
//!     staging = [d: tma_2d! { pub GemmD: bf16, global = [M = _, N = _], boxed = [64, 64], swizzle = 128 } x 2],
//!     scratch = [flags = 256],
//! }
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! assert_eq!(Gemm::BLOCK_THREADS, 384); // from the roles
//! let ring = Gemm::region("gemm_ring").ok_or("no ring")?;
//! assert_eq!((ring.offset, ring.bytes), (0, GemmRing::SMEM_BYTES));
//! let d = Gemm::region("d").ok_or("no d")?;
//! assert_eq!((d.offset % 1024, d.stride, d.copies), (0, 8192, 2));
//! // The base is at least 16-byte aligned: aligning it to 1 KB skips at most 1008 bytes.
//! assert_eq!(u64::from(Gemm::DYNAMIC_SMEM_BYTES), Gemm::SMEM_BYTES + 1024 - 16);
//! // The same plan as the builder's, and the source that carries it to the runtime.
//! assert_eq!(Gemm::valid().launch().dynamic_smem_bytes, Gemm::DYNAMIC_SMEM_BYTES);
//! let source = Gemm::source("extern \"C\" __global__ void TMA_PLAN_GEMM_LAUNCH_BOUNDS gemm() {}")?;
//! assert_eq!(source.plans(), &[Gemm::launch().clone()]);
//! assert!(source.text().contains("struct tma_plan_gemm"));
//! # Ok(()) }
//! ```

use std::sync::{Arc, OnceLock};

use tma_core::pipeline::{Consumers, ValidWorkQueue, WorkQueue};
use tma_core::plan::{KernelPlan, LaunchPlan, ValidKernelPlan};
use tma_core::render::{KernelSource, RenderError};
use tma_core::Arch;
use tma_runtime::{LaunchConfig, Source};

pub use tma_core::plan::consts::RegionInfo;
pub use tma_core::plan::RegionRole;

/// A kernel plan declared with `tma_kernel!`: its shared-memory layout and launch, computed
/// at compile time from its parts (inline, or named by type: then from their constants), and
/// checked there by the rules [`KernelPlan::validate`] checks at run time.
pub trait Plan {
    /// The kernel's name: its `extern "C" __global__` function (snake case of the type, or
    /// `name = ".."`).
    const NAME: &'static str;
    /// The generated CUDA struct: `tma_plan_<name>`.
    const CUDA_NAME: &'static str;
    /// The macro holding `__launch_bounds__(BLOCK_THREADS, BLOCKS_PER_SM)`:
    /// `TMA_PLAN_<NAME>_LAUNCH_BOUNDS`.
    const LAUNCH_BOUNDS_MACRO: &'static str;
    const TARGET: Arch;
    /// Threads of the (1-D) block: the roles', else `block_threads`.
    const BLOCK_THREADS: u32;
    /// Blocks per SM of the launch bounds: `blocks_per_sm`, else the roles', else 0 (no minimum).
    const BLOCKS_PER_SM: u32;
    /// The cluster shape: the pipelines', else `cluster`, else 1x1x1.
    const CLUSTER: [u32; 3];
    /// Bytes every region spans from the aligned base.
    const SMEM_BYTES: u64;
    /// The base's alignment: the largest region alignment, at least 16.
    const SMEM_ALIGN: u64;
    /// What the launch gives: `SMEM_BYTES + SMEM_ALIGN` (0 without regions).
    const DYNAMIC_SMEM_BYTES: u32;
    /// Above 48 KB: the launch opts the kernel in.
    const SMEM_OPT_IN: bool;
    /// Every region, in the plan's order (pipelines, then staging and scratch as declared):
    /// offsets from the aligned base, as `tma_plan_<name>::OFFSET_<region>`.
    const REGIONS: &'static [RegionInfo];

    /// The declaration as the run-time builder's plan (parts as their `valid()`).
    fn plan() -> KernelPlan;

    /// The validated plan, computed once on first use (the macro checked its rules at
    /// compile time).
    fn valid() -> &'static ValidKernelPlan;

    /// The launch the kernel must get (block, cluster, dynamic shared memory, opt-in).
    fn launch() -> &'static LaunchPlan {
        Self::valid().launch()
    }

    /// The region `name`.
    fn region(name: &str) -> Option<&'static RegionInfo> {
        Self::REGIONS.iter().find(|r| r.name == name)
    }

    /// A kernel source holding the prelude, the plan's parts and `struct tma_plan_<name>`:
    /// add the kernel with `.body(..)`, and build.
    fn kernel_source() -> KernelSource {
        KernelSource::new().plan(Self::valid())
    }

    /// The source of `body` (the kernel) with the plan, its launch carried along for the
    /// runtime's launch checks ([`Source::kernel`]).
    fn source(body: &str) -> Result<Source, RenderError> {
        Source::kernel(&Self::kernel_source().body(body))
    }

    /// The launch of the plan over `grid` blocks ([`LaunchConfig::from_plan`]); a loaded
    /// kernel gives the same with `Kernel::plan_config`.
    fn launch_config(
        stream: &Arc<cudarc::driver::CudaStream>,
        grid: (u32, u32, u32),
    ) -> LaunchConfig {
        LaunchConfig::from_plan(stream, grid, Self::launch())
    }
}

/// Helpers the generated code calls through `::tma::__private`.
#[doc(hidden)]
pub mod support {
    use super::*;
    pub use tma_core::plan::consts::{
        block_threads as check_block_threads, blocks_per_sm as check_blocks_per_sm,
        cluster as check_cluster, layout as plan_layout,
        pipeline_cluster as check_pipeline_cluster, pipeline_consumers as check_pipeline_consumers,
        pipeline_target as check_pipeline_target, queue_readers as check_queue_readers,
        region_name as check_region_name, smem as check_smem, tile_target as check_tile_target,
        Layout as PlanLayoutConst, Msg as PlanMsg, PipelineIn, PlanIn, RolesIn, TileIn,
    };
    pub use tma_core::plan::{KernelPlan, ValidKernelPlan};

    /// `Plan::valid`: the declared plan, validated once.
    #[allow(clippy::panic)]
    pub fn plan_once(
        cell: &'static OnceLock<ValidKernelPlan>,
        plan: fn() -> KernelPlan,
    ) -> &'static ValidKernelPlan {
        cell.get_or_init(|| match plan().validate() {
            Ok(valid) => valid,
            // Cannot happen: the macro ran `validate_plan` on what it saw, and the const items
            // of the expansion ran its mirror over the parts named by type (held to the same
            // findings by tma-core's tests). Reaching this is a bug in tma.
            Err(e) => panic!(
                "tma bug: a kernel plan passed its compile-time checks but not validate_plan: {e}"
            ),
        })
    }

    /// A work queue `tma_kernel!` declared (and checked: `WorkQueue::validate`) as `slots` of
    /// `readers`.
    #[allow(clippy::panic)]
    pub fn work_queue(slots: u32, readers: Consumers) -> ValidWorkQueue {
        match WorkQueue::new(slots, readers).validate() {
            Ok(q) => q,
            // Cannot happen: the macro validated the same numbers. Reaching this is a bug in tma.
            Err(e) => {
                panic!("tma bug: a work queue passed tma_kernel!'s checks but not validate: {e}")
            }
        }
    }

    /// `Plan::valid` of a declaration that failed to compile (never run): a fixed plan that
    /// passes.
    pub fn stub_plan() -> &'static ValidKernelPlan {
        static STUB: OnceLock<ValidKernelPlan> = OnceLock::new();
        plan_once(&STUB, || KernelPlan::new("stub_plan").block_threads(32))
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_stub_is_valid() {
        assert_eq!(super::support::stub_plan().name(), "stub_plan");
    }
}
