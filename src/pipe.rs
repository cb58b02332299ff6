//! What `tma_pipeline!` and `tma_warp_roles!` generate: [`Pipeline`] and [`Roles`], the
//! declared ring and warp split as constants computed at compile time, with the validated
//! [`ValidPipeline`] / [`ValidWarpRoles`] the run-time builders give (same rules, same code).
//!
//! ```
//! use tma::{Pipeline, Roles, Tile};
//!
//! tma::tma_pipeline! {
//!     /// Operands of a GEMM main loop.
//!     pub GemmRing,
//!     stages = 4,
//!     consumers = warpgroups(2),
//!     cluster = [2, 1, 1],
//!     reserve_smem = 32768,
//!     tiles = {
//!         a: tma_2d! { pub GemmA: bf16, global = [M = _, K = _], boxed = [128, 64], swizzle = 128 },
//!         b: tma_2d! {
//!             pub GemmB: bf16, global = [N = _, K = _], boxed = [64, 64], swizzle = 128,
//!             repeat = [2, 1],
//!         } multicast(x),
//!     },
//! }
//! tma::tma_warp_roles! {
//!     pub GemmRoles,
//!     producer_regs = 40,
//!     consumer_warpgroups = 2,
//!     consumer_regs = 232,
//!     barriers = [epilogue = 256],
//! }
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! // One stage: a (16 KB) then b (two 8 KB boxes, each CTA of the pair issues one).
//! assert_eq!(GemmRing::STAGE_TX_BYTES, GemmA::TX_BYTES + GemmB::TX_BYTES);
//! assert_eq!(GemmRing::STAGE_BYTES, 32768);
//! assert_eq!(GemmRing::MAX_STAGES, 6); // (227 KB - 1 KB slack - 32 KB) / (32 KB + 16 B)
//! assert_eq!(GemmRing::TILES[1].smem_offset, 16384);
//! assert_eq!(GemmRing::valid().stage_tx_bytes(), GemmRing::STAGE_TX_BYTES);
//! assert_eq!(GemmRoles::BARRIERS[0].id, 1);
//! let source = GemmRing::kernel_source().warp_roles(GemmRoles::valid()).build()?;
//! assert!(source.contains("struct tma_pipe_gemm_ring"));
//! // The tiles are tiles: bind and encode them as any other.
//! let a = GemmA::encode_args(&[4096, 4096])?;
//! assert_eq!(a.box_dim, vec![64, 128]); // innermost first
//! # Ok(()) }
//! ```

use std::sync::OnceLock;
use tma_core::pipeline::{
    ClusterAxis, PipelineSpec, RegisterSplit, RoleWarps, ValidPipeline, ValidWarpRoles, WarpRoles,
};
use tma_core::render::KernelSource;

/// A pipeline declared with `tma_pipeline!`, checked at compile time by the same
/// `tma_core::pipeline::validate_pipeline` the run-time builder ([`PipelineSpec`]) calls.
/// The constants are [`ValidPipeline`]'s numbers (and the generated `struct tma_pipe_<name>`'s).
pub trait Pipeline {
    /// The pipeline name (snake case of the type, or `name = ".."`).
    const NAME: &'static str;
    /// The generated CUDA struct: `tma_pipe_<name>`.
    const CUDA_NAME: &'static str;
    const STAGES: u32;
    /// Bytes each CTA's full barrier expects per stage: the sum of the tiles' `TX_BYTES`.
    const STAGE_TX_BYTES: u64;
    /// Bytes from a stage's start to the end of its last tile.
    const STAGE_BYTES: u64;
    /// Bytes from one stage to the next.
    const STAGE_STRIDE: u64;
    /// Bytes the stages and their mbarriers span from the aligned base.
    const SMEM_BYTES: u64;
    /// Alignment of the base (the largest tile alignment).
    const SMEM_ALIGN: u64;
    /// Dynamic shared memory a launch gives the pipeline: `SMEM_BYTES + SMEM_ALIGN`.
    const DYNAMIC_SMEM_BYTES: u64;
    /// The most stages that fit beside `RESERVE_SMEM` on the target.
    const MAX_STAGES: u64;
    /// Shared memory the rest of the kernel needs beside the pipeline.
    const RESERVE_SMEM: u64;
    /// The cluster shape (x, y, z).
    const CLUSTER: [u32; 3];
    /// CTAs whose copies land in a CTA's stages, itself included.
    const PEERS: u32;
    /// Arrivals that complete a phase of an empty barrier.
    const EMPTY_ARRIVALS: u32;
    /// The tiles one stage loads, in order.
    const TILES: &'static [StageTileInfo];

    /// The declared spec, field for field (the tiles are their `Tile::valid()`).
    fn spec() -> PipelineSpec;

    /// The validated pipeline, computed once on first use. The macro validated this same
    /// spec with the same code at compile time, so there is nothing left to fail.
    fn valid() -> &'static ValidPipeline;

    /// A kernel source holding the prelude, the tiles' helpers and `struct tma_pipe_<name>`:
    /// add warp roles, the kernel with `.body(..)`, and build.
    fn kernel_source() -> KernelSource {
        KernelSource::new().pipeline(Self::valid())
    }
}

/// One tile of a declared pipeline's stage, computed at compile time.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct StageTileInfo {
    /// Its name in the pipeline (`smem_<member>`, `OFFSET_<member>`, `tile_<member>`).
    pub member: &'static str,
    /// The tile name.
    pub name: &'static str,
    /// The tile's CUDA struct: `tma_<name>`.
    pub cuda_name: &'static str,
    /// Bytes the tile delivers to each CTA per stage.
    pub tx_bytes: u64,
    /// Shared memory one call spans.
    pub smem_bytes: u64,
    pub smem_align: u64,
    /// Byte offset from the start of a stage.
    pub smem_offset: u64,
    /// The cluster axis it is multicast along, if any.
    pub multicast: Option<ClusterAxis>,
}

/// Warp roles declared with `tma_warp_roles!`, checked at compile time by the same
/// `WarpRoles::validate` the run-time builder calls.
pub trait Roles {
    /// The roles' name (snake case of the type, or `name = ".."`).
    const NAME: &'static str;
    /// The generated CUDA struct: `tma_roles_<name>`.
    const CUDA_NAME: &'static str;
    /// The macro holding `__launch_bounds__(THREADS, BLOCKS_PER_SM)`:
    /// `TMA_ROLES_<NAME>_LAUNCH_BOUNDS`.
    const LAUNCH_BOUNDS_MACRO: &'static str;
    /// The producers as declared: `warpgroups(1)` unless `producer_warps` /
    /// `producer_warpgroups` says otherwise.
    const PRODUCERS: RoleWarps;
    /// The consumers as declared (`consumer_warps` / `consumer_warpgroups`): their unit is
    /// what `consumer_index()` counts.
    const CONSUMERS: RoleWarps;
    /// The registers per thread after `setmaxnreg` (`producer_regs`, `consumer_regs`);
    /// `None`: no `setmaxnreg`.
    const SETMAXNREG: Option<RegisterSplit>;
    const BLOCKS_PER_SM: u32;
    /// Threads of the block: 32 per warp.
    const THREADS: u64;
    /// Registers per thread the launch allocates at most.
    const LAUNCH_REGS: u64;
    /// The named barriers with their ids (1, 2, ...; a per-consumer one, one per consumer).
    const BARRIERS: &'static [BarrierInfo];

    /// The declared roles, field for field.
    fn spec() -> WarpRoles;

    /// The validated roles, computed once on first use (validated at compile time).
    fn valid() -> &'static ValidWarpRoles;

    /// A kernel source holding the prelude and `struct tma_roles_<name>`.
    fn kernel_source() -> KernelSource {
        KernelSource::new().warp_roles(Self::valid())
    }
}

/// A named barrier of declared warp roles.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct BarrierInfo {
    pub name: &'static str,
    /// `bar.sync` id: 1 to 15 (a per-consumer barrier's first: consumer `c`'s is `id + c`).
    pub id: u32,
    pub threads: u32,
    /// One barrier per consumer (`sync_<name>(consumer)`), ids `id ..= last`.
    pub per_consumer: bool,
    /// The last id: `id`, or `id + consumers - 1`.
    pub last: u32,
}

/// Helpers the generated code calls through `::tma::__private`.
#[doc(hidden)]
pub mod support {
    use super::*;
    use tma_core::pipeline::Consumers;

    /// `Pipeline::valid`: the declared spec, validated once.
    #[allow(clippy::panic)]
    pub fn pipeline_once(
        cell: &'static OnceLock<ValidPipeline>,
        spec: fn() -> PipelineSpec,
    ) -> &'static ValidPipeline {
        cell.get_or_init(|| match spec().validate() {
            Ok(valid) => valid,
            // Cannot happen: the macro ran this same `validate_pipeline` on this same spec
            // at expansion time (its tiles are the tiles' `valid()`, themselves proven the
            // same way), and it is a pure function of the spec. Reaching this is a bug in tma.
            Err(e) => panic!(
                "tma bug: a pipeline passed validate_pipeline at compile time but not at run time: {e}"
            ),
        })
    }

    /// `Roles::valid`: the declared roles, validated once.
    #[allow(clippy::panic)]
    pub fn roles_once(
        cell: &'static OnceLock<ValidWarpRoles>,
        spec: fn() -> WarpRoles,
    ) -> &'static ValidWarpRoles {
        cell.get_or_init(|| match spec().validate() {
            Ok(valid) => valid,
            // Cannot happen, as for `pipeline_once`.
            Err(e) => panic!(
                "tma bug: warp roles passed WarpRoles::validate at compile time but not at run time: {e}"
            ),
        })
    }

    /// The spec of a pipeline that failed to compile (never run: the crate does not build).
    pub fn stub_pipeline_spec(name: &str) -> PipelineSpec {
        PipelineSpec::new(name, 0, Consumers::Threads(0))
    }

    /// `Pipeline::valid` of a declaration that failed to compile (never run): a fixed
    /// pipeline that passes.
    pub fn stub_pipeline() -> &'static ValidPipeline {
        static STUB: OnceLock<ValidPipeline> = OnceLock::new();
        pipeline_once(&STUB, || {
            PipelineSpec::new("tma_stub", 1, Consumers::Threads(1))
                .tile("t", crate::tile::support::stub_valid())
        })
    }

    /// The spec of warp roles that failed to compile (never run).
    pub fn stub_roles_spec(name: &str) -> WarpRoles {
        WarpRoles::new(name, 0, 0, 0)
    }

    /// `Roles::valid` of a declaration that failed to compile (never run).
    pub fn stub_roles() -> &'static ValidWarpRoles {
        static STUB: OnceLock<ValidWarpRoles> = OnceLock::new();
        roles_once(&STUB, || WarpRoles::new("tma_stub", 40, 2, 232))
    }
}

#[cfg(test)]
mod tests {
    use super::support::*;

    #[test]
    fn the_stubs_are_valid() {
        assert_eq!(stub_pipeline().spec().name, "tma_stub");
        assert_eq!(stub_roles().roles().name, "tma_stub");
    }
}
