//! The catalogue of rules a spec can break: each [`Rule`] with the source that states it
//! (the driver's documentation, the PTX ISA, or what an H100 / H200 showed) and whether
//! `cuTensorMapEncodeTiled` itself enforces it ([`Rule::checked_by_driver`]). The checks
//! live in [`crate::validate()`]; findings name a rule ([`crate::SpecError::rule`]).

/// Each rule a spec can break. Tests match on these; messages carry the numbers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Rule {
    /// Tile and dim names reach generated CUDA: each must be a C identifier that is no
    /// C/C++ keyword, no reserved name (`__x`, `_X`) and no CUDA built-in variable.
    NameIsIdentifier,
    /// Dim names (`d<i>` for a dim without one) name the fields of the tile's generated
    /// coordinate struct, its `BOX_<dim>` / `EXTENT_<dim>` constants and the run-time
    /// parameters of its encode function (`<dim>`, `stride_<dim>`): no two alike, and no two
    /// whose generated names meet (`x` and `stride_x`). See
    /// [`crate::ident::shared_generated_name`].
    DimNameClash,
    /// A user name (tile, dim, pipeline, pipeline member, warp roles, named barrier, tile set,
    /// set member, kernel plan, plan region, alias) becomes identifiers of the generated CUDA
    /// (`tma_<tile>`, `BOX_<dim>`, `smem_<member>`, `sync_<barrier>`, `TMA_<SET>_PARAMS`,
    /// `tma_plan_<plan>` and the kernel `<plan>`, `OFFSET_<region>`, ..): none may be an
    /// identifier the templates use where it lands or one of their macros (which would
    /// replace it, some only under `-DTMA_DEBUG`), and a name that lands bare may not start
    /// with `tma_` in any case. The table is read from the templates themselves
    /// ([`crate::ident::generated`]).
    GeneratedNameClash,
    /// A size computed from the spec (bytes of a stride, of the tensor, of one call) does
    /// not fit in 64 bits: more than any GPU can address.
    SizeOverflow,
    /// Rank in [1, 5].
    RankRange,
    /// Interleave needs rank >= 3.
    InterleaveNeedsRank3,
    /// A per-dim list must have one entry per dim.
    ListLength,
    /// Global dims in [1, 2^32].
    GlobalDimRange,
    /// The innermost stride is 1 element (tiled mode: TMA's dim 0 is contiguous).
    InnerStrideIsOne,
    /// Byte strides are multiples of 16 (32 with 32-byte interleave).
    StrideAlignment,
    /// Byte strides are below 2^40.
    StrideMax,
    /// Packed sub-byte types: a stride must end on a whole byte (it is encoded in bytes).
    StrideWholeBytes,
    /// A stride smaller than the span of the dims inside it (0 included) makes elements alias
    /// (warning).
    StrideOverlap,
    /// Run-time dims/strides must agree with the static ones and be given for every runtime one.
    RuntimeShapeMismatch,
    /// Box dims in [1, 256].
    BoxDimRange,
    /// The box is larger than the tensor along a dim (warning: the excess is always out of bounds).
    BoxExceedsGlobal,
    /// Element strides in [1, 8].
    ElementStrideRange,
    /// Without interleave the hardware ignores the innermost element stride: it must be 1.
    InnerElementStrideIgnored,
    /// The inner box extent in bytes is a multiple of 16. The driver documents this for
    /// no interleave; driver 580 enforces it with interleave too, counting the box in
    /// elements although the hardware then counts it in chunks.
    InnerBoxBytesMultipleOf16,
    /// The box's data (elements traversed x size) must fit one SM's shared memory (228 KB on
    /// sm_90): driver 580 on an H100 refuses larger boxes (undocumented). It counts
    /// `floor(box / element_stride)` elements per dim (an H100 probe showed floor, not the
    /// ceil the copy moves), and an interleaved box in elements, dim 1 included (an H200
    /// probe showed it).
    BoxTooLarge,
    /// A box moves more bytes than the driver counts (whole chunks with interleave;
    /// `ceil(box / element_stride)` elements per dim, not the driver's floor): those must fit
    /// one SM's shared memory too, or the copy overflows it. The driver accepts such boxes
    /// (an H200 and an H100 probe showed it), so this rule is the toolkit's.
    BoxDataTooLarge,
    /// An inner dim whose bytes are not a multiple of 16 (warning): TMA bounds-checks the
    /// inner dim rounded up to 16 bytes, so loads read and stores write past its end.
    InnerDimRoundedUp,
    /// With interleave the hardware copies one position along the user's dim 1 (TMA dim
    /// `rank - 2`) whatever its box says (an H200 showed it), so that box must be 1.
    InterleaveDim1BoxIsOne,
    /// With swizzle (and no interleave) the inner box extent in bytes fits the swizzle span.
    InnerBoxFitsSwizzleSpan,
    /// 32-byte interleave works only with the 32-byte swizzle.
    Interleave32NeedsSwizzle32,
    /// Blackwell-only swizzle modes on an older target.
    SwizzleNeedsBlackwell,
    /// Packed sub-byte types on an older target.
    PackedTypeNeedsBlackwell,
    /// Packed types need no interleave.
    PackedTypeNoInterleave,
    /// Packed ALIGN16B types: inner global dim a multiple of 128, strides multiples of 32.
    PackedTypeAlignment,
    /// NaN out-of-bounds fill only for floating-point, non-packed types.
    NanFillNeedsFloat,
    /// Repeats in [1, 256] per dim.
    RepeatRange,
    /// Repeated boxes must not overlap in shared memory (MPK's row-overwrite bug).
    SmemStrideOverlap,
    /// Repeated boxes must start at the alignment the swizzle needs.
    SmemStrideAlignment,
    /// The bytes one helper call expects must fit an mbarrier's tx-count (2^20 - 1).
    TxBytesMax,
    /// Shared-memory footprint above the per-block limit of the target (warning).
    SmemFootprintLimit,
    /// Shared-memory footprint above the shared memory of one SM of the target: no block can
    /// hold one call, and the generated 32-bit sizes and box offsets (`SMEM_BYTES`, ...)
    /// could wrap. Bounding the footprint bounds every size the templates render.
    SmemFootprintTooLarge,
    /// The global base address must be 16-byte aligned (32 with 32-byte interleave).
    BaseAddressAlignment,
    /// The shared-memory address must be aligned to 128 B and the swizzle period.
    SmemAddressAlignment,
    /// A copy's coordinates: one per dim, the innermost a multiple of 16 bytes (the H100
    /// traps with an illegal instruction otherwise).
    CoordinateAlignment,
    /// Stores and reductions take no negative coordinate (the H100 traps with an illegal
    /// instruction; loads take them and fill).
    StoreCoordinateNegative,
    /// Coordinates are signed 32-bit operands of the instruction: every coordinate, plus the
    /// offset of the last repeated box, must fit in `i32`.
    CoordinateRange,
    /// A copy's shared-memory box must lie inside the block's dynamic shared memory when it
    /// starts there (checked on the device in debug mode: `%dynamic_smem_size`).
    DynamicSmemTooSmall,
    /// Every committed bulk store group must be waited before the block exits or reuses its
    /// shared memory (checked on the device in debug mode, by the store token).
    StoreNotWaited,
    /// A multicast's CTA mask names at least one CTA and none past the cluster's size
    /// (`%cluster_nctarank`): a zero mask delivers nothing and the wait hangs, a bit past the
    /// cluster names no CTA (checked on the device in debug mode).
    MulticastMask,
    /// The mbarrier a copy completes on is in the CTA's shared memory and 8-byte aligned:
    /// the helpers convert it to a 32-bit shared-memory address, so a pointer elsewhere
    /// becomes an unrelated address (checked on the device in debug mode).
    MbarrierAddress,
    /// A pipeline kernel launches with the pipeline's cluster shape (`%cluster_nctaid` equals
    /// `CLUSTER_X/Y/Z`) and with dynamic shared memory that holds the pipeline where it sits
    /// (`%dynamic_smem_size`; `DYNAMIC_SMEM_BYTES` when it starts the dynamic shared memory):
    /// another cluster makes the multicast slices and masks name the wrong CTAs, too little
    /// memory makes `init()` write mbarriers past its end. Checked on the host before the
    /// driver (`Error::PipelineLaunch`, from the source's typed description,
    /// [`crate::facts::PipelineFacts`]) and, in debug mode, by `init()` on the device.
    PipelineLaunchShape,

    // ---- pipelines and warp specialization (tma_core::pipeline) ----
    /// A pipeline has at least one stage.
    PipelineStageCount,
    /// A stage loads at least one tile; each tile's member name is a C identifier, no two
    /// alike, and none of the names the pipeline struct itself uses.
    PipelineTiles,
    /// Every tile of a pipeline is validated for the pipeline's target arch.
    PipelineTileTarget,
    /// The stages, their mbarriers and the alignment slack, plus the shared memory the rest
    /// of the kernel reserves, fit one block's shared memory on the target
    /// ([`crate::Arch::max_smem_per_block`]). The finding names the most stages that fit.
    PipelineStagesFit,
    /// The consumers that release a stage: at least one, at most a block's 1024 threads
    /// (32 warps, 8 warpgroups); a pipeline taken in turn, one warpgroup or one warp.
    PipelineConsumers,
    /// A cluster has 1 to 16 CTAs (8 portably; the multicast CTA mask has 16 bits), each
    /// extent at least 1.
    ClusterShape,
    /// A multicast tile is shared along a cluster axis of at least 2 CTAs.
    MulticastAxis,
    /// A multicast tile's boxes per call (the product of its repeats) split evenly over the
    /// CTAs along its axis: each CTA issues its share and multicasts it to all of them.
    MulticastSlices,
    /// Warp roles count at least one producer (warp or warpgroup), one consumer and one
    /// block per SM, and at most a block's 1024 threads (32 warps, 8 warpgroups).
    WarpgroupCounts,
    /// `setmaxnreg` takes a register count that is a multiple of 8 in [24, 256] (PTX ISA,
    /// "setmaxnreg").
    SetmaxnregRange,
    /// `setmaxnreg.dec` only lowers a warp's register count and `.inc` only raises it (PTX ISA,
    /// "setmaxnreg"): `producer_regs` is at most the registers per thread the launch gives
    /// (see `RegisterBudget`) and `consumer_regs` at least that.
    SetmaxnregDirection,
    /// The warp roles' registers fit what the launch allocates: producer and consumer
    /// warpgroups after `setmaxnreg` hold at most the registers per thread the launch gives
    /// (64K registers per SM over the block's threads and blocks per SM, rounded down to 8)
    /// times the block's threads.
    RegisterBudget,
    /// Named barriers: ids 1 to 15 (0 is `__syncthreads`), one per name (a per-consumer
    /// barrier one per consumer, every one counted), each synchronising a multiple of 32
    /// threads, no more than the block has. On the device in debug mode: a per-consumer
    /// barrier's `sync_<name>(consumer)` / `arrive_<name>(consumer)` names one of its
    /// consumers (another index would be another barrier's id).
    NamedBarrierIds,
    /// Warp roles with `setmaxnreg` (`producer_regs`, `consumer_regs`) are whole warpgroups:
    /// the same `setmaxnreg` is executed by all warps of a warpgroup (PTX ISA, "setmaxnreg"),
    /// so producer and consumer warps are each a multiple of 4.
    SetmaxnregWarpgroups,
    /// Consumers counted in warpgroups start on a warpgroup of the block: the producer warps
    /// before them are a multiple of 4 (wgmma and `setmaxnreg` act on warps `4k .. 4k + 3`).
    WarpgroupAlignment,
    // ---- kernel plans (tma_core::plan) ----
    /// Every tile, tile set, pipeline and staging tile of a kernel plan is validated for the
    /// plan's target arch.
    PlanTarget,
    /// A kernel plan's regions (pipelines, tile sets, staging, scratch): each name a C
    /// identifier, no two alike, none of the names `struct tma_plan_<name>` uses itself; a
    /// staging region holds at least one copy, a scratch region at least one byte at a
    /// power-of-two alignment of at most 1024.
    PlanRegions,
    /// A kernel plan's block: its warp roles' threads, or declared (both: they agree), 1 to
    /// 1024 threads, at least each pipeline's consumer threads; its launch bounds ask for at
    /// least one block per SM, and beside warp roles with `setmaxnreg` for the roles' own count
    /// (the SM's limits are [`Rule::BlocksPerSm`] and [`Rule::ThreadsPerSm`]).
    PlanBlockThreads,
    /// A kernel plan's pipelines agree on one cluster shape, and a declared cluster agrees
    /// with them.
    PlanCluster,
    /// A kernel plan's regions, each at its alignment, plus the slack to align the base, fit
    /// one block's shared memory on the target ([`crate::Arch::max_smem_per_block`]).
    PlanSmemFits,
    /// A launch of a plan's kernel has the plan's block, cluster and dynamic shared memory:
    /// checked on the host before the driver (`tma_runtime::Error::PlanLaunch`).
    PlanLaunch,
    // ---- wgmma operand tiles (`TileSpec::wgmma`; PTX ISA 9.7.15, see `crate::operand`) ----
    /// A wgmma operand's type is one `wgmma.mma_async` reads from shared memory: f16, bf16,
    /// tf32, e4m3 or e5m2 (PTX ISA 9.7.15.2, "Matrix Data-types").
    WgmmaDType,
    /// MN-major operands only for f16 and bf16: only they have the transpose immediates
    /// (PTX ISA 9.7.15.5.2, `imm-trans-a`/`imm-trans-b`); tf32 and fp8 operands are K-major.
    WgmmaMajor,
    /// `wgmma.mma_async` is an sm_90a instruction (PTX ISA 9.7.15, "Target ISA notes").
    WgmmaNeedsSm90a,
    /// An operand tile is a matrix: rank >= 2, its last two dims `[MN][K]` (K-major) or
    /// `[K][MN]` (MN-major), outer dims a box of 1, no interleave, every element stride 1,
    /// and repeats along the outer matrix dim only where the boxes continue the canonical
    /// layout: a K-major swizzled operand, K one box, boxes of whole 8-row groups back to
    /// back (stride = rows x span), so SBO steps uniformly across them (a 256-row B tile
    /// whose 128-row halves two cluster CTAs multicast).
    WgmmaTileShape,
    /// The inner box against the canonical layouts (PTX ISA 9.7.15.5.1.2.1.3): without
    /// swizzle a core-matrix row, exactly 16 bytes (more K or MN comes from repeats, which
    /// the leading / stride byte offset steps over); K-major swizzled, a multiple of the 32
    /// bytes of K one instruction reads (at most the span); MN-major swizzled, exactly the
    /// swizzle span (one swizzle atom wide).
    WgmmaInnerBox,
    /// The MN extent against the instruction shape (PTX ISA 9.7.15.2): A holds whole 64-row
    /// blocks (`.m64`); B's N is a multiple of 8 from 8 to 256.
    WgmmaMnExtent,
    /// The K extent holds whole instructions: a multiple of 32 bytes of elements (k16 bf16 /
    /// f16, k8 tf32, k32 fp8; PTX ISA 9.7.15.2).
    WgmmaKExtent,

    // ---- launch and residency limits, wgmma descriptor ranges (issue 25) ----
    /// `__launch_bounds__(threads, blocks_per_sm)` (warp roles', a kernel plan's) asks for at
    /// most [`crate::limits::MAX_THREADS_PER_SM`] (2048) threads resident on one SM across its
    /// blocks.
    ThreadsPerSm,
    /// `blocks_per_sm` (warp roles', a kernel plan's) is at most
    /// [`crate::limits::MAX_BLOCKS_PER_SM`] (32) resident blocks per SM.
    BlocksPerSm,
    /// A launch's block: each extent in [1, [`crate::limits::MAX_BLOCK_DIM`]] (1024, 1024, 64)
    /// and at most [`crate::limits::MAX_BLOCK_THREADS`] (1024) threads in all
    /// ([`crate::launch::check_launch_shape`]).
    BlockDims,
    /// A launch's grid: each extent in [1, [`crate::limits::MAX_GRID_DIM`]] (2^31 - 1, 65535,
    /// 65535), and a multiple of the cluster along each axis.
    GridDims,
    /// A wgmma descriptor names a k-slice below the tile's `K_SLICES` and a 64-row block below
    /// its `M_BLOCKS` (1 for B): past them it addresses shared memory past the tile
    /// (`OperandPlan::offset` / `descriptor`; the generated `desc()` checks it on the device
    /// in debug mode).
    WgmmaSliceRange,

    // ---- tensor maps updated on the device (issue 26; docs/MAP_UPDATE.md) ----
    /// A map a kernel updates (`T::update_global` / `T::update_shared`) is 128-byte aligned and
    /// in the state space the helper names (global or shared memory): `tensormap.replace` and
    /// `tensormap.cp_fenceproxy` address it there (checked on the device in debug mode).
    TensorMapAddress,
    /// A map is updated only once no copy through it is in flight: the last loads through it
    /// completed (their mbarrier phase) and the updating thread's bulk stores were waited.
    /// Replacing a field under a copy that still reads the map races (DeepGEMM #343, CUTLASS
    /// #2162). Checked on the device in debug mode for loads the same CTA issued
    /// (docs/MAP_UPDATE.md says what is and is not caught).
    MapUpdateInFlight,

    // ---- im2col tiles (issue 22; docs/IM2COL.md, `crate::validate::validate_im2col`) ----
    /// An im2col tensor has rank 3, 4 or 5: NWC, NHWC, NDHWC (`cuTensorMapEncodeIm2col`:
    /// tensorRank).
    Im2colRank,
    /// A bounding-box corner fits the bits the map keeps for it: 16 bits shared by the spatial
    /// dims, signed ([`crate::limits::im2col_corner_range`]: [-32768, 32767] for NWC,
    /// [-128, 127] for NHWC, [-16, 15] for NDHWC; the driver's documentation and CUTLASS's
    /// `can_implement`).
    Im2colCornerRange,
    /// The bounding box is not empty along any spatial dim: `extent + upper - lower >= 1`
    /// (`cuTensorMapEncodeIm2col`: "must have non-zero area"), computed as the driver does, in
    /// 32-bit signed arithmetic (seen on the H100).
    Im2colBoxEmpty,
    /// `pixelsPerColumn` in [1, [`crate::limits::MAX_PIXELS_PER_COLUMN`]].
    Im2colPixelsRange,
    /// A spatial global dim (D, H, W) and its bounding box are at most
    /// [`crate::limits::MAX_IM2COL_SPATIAL_DIM`] (2^31 - 1). This toolkit's own rule: the
    /// driver computes the box in 32-bit signed arithmetic (seen on the H100) and so accepts a
    /// larger one whenever the wrapped extent is positive; N and C take 2^32 as in tiled mode.
    Im2colSpatialExtent,
    /// An im2col offset (the filter tap of one load) is in [0,
    /// [`crate::limits::im2col_offset_max`]]: 65535 / 255 / 31 for NWC / NHWC / NDHWC (the
    /// map keeps `16 / spatial` bits of each; CUTLASS's `can_implement`). Checked on the
    /// device in debug mode.
    Im2colOffsetRange,
    /// A load's spatial coordinates start inside the bounding box, `lower <= coord < extent +
    /// upper` along each spatial dim: the PTX ISA defines the walk from there; the model
    /// refuses other starts (the hardware's behaviour outside is not modelled).
    Im2colStartOutsideBox,
}

impl Rule {
    /// True for the rules `cuTensorMapEncodeTiled` itself enforces (it returns an error when
    /// they break). The others are this toolkit's own: traps the driver accepts (ignored
    /// inner element strides, aliasing strides, boxes past the tensor), shared-memory and
    /// mbarrier rules the driver never sees, and target-arch rules.
    pub fn checked_by_driver(self) -> bool {
        matches!(
            self,
            Rule::RankRange
                | Rule::InterleaveNeedsRank3
                | Rule::GlobalDimRange
                | Rule::StrideAlignment
                | Rule::StrideMax
                | Rule::BoxDimRange
                | Rule::ElementStrideRange
                | Rule::InnerBoxBytesMultipleOf16
                | Rule::InnerBoxFitsSwizzleSpan
                | Rule::BoxTooLarge
                | Rule::PackedTypeNoInterleave
                | Rule::PackedTypeAlignment
                | Rule::NanFillNeedsFloat
                | Rule::BaseAddressAlignment
                | Rule::Im2colRank
                | Rule::Im2colCornerRange
                | Rule::Im2colBoxEmpty
                | Rule::Im2colPixelsRange
        )
    }

    /// The rules the generated helpers check on the device in debug mode, with the code the
    /// device writes into the debug record (docs/CONTRACTS.md "Debug checks"). The one table:
    /// the renderer passes these codes to the templates and the runtime decodes with them.
    pub const DEVICE_CHECKED: [(Rule, u32); 21] = [
        (Rule::CoordinateAlignment, 1),
        (Rule::StoreCoordinateNegative, 2),
        (Rule::CoordinateRange, 3),
        (Rule::SmemAddressAlignment, 4),
        (Rule::DynamicSmemTooSmall, 5),
        (Rule::StoreNotWaited, 6),
        (Rule::MulticastMask, 7),
        (Rule::MbarrierAddress, 8),
        (Rule::PipelineLaunchShape, 9),
        (Rule::WgmmaSliceRange, 10),
        (Rule::NamedBarrierIds, 11),
        // A device-side map update checks what the host encode checks.
        (Rule::GlobalDimRange, 12),
        (Rule::StrideAlignment, 13),
        (Rule::StrideMax, 14),
        (Rule::StrideWholeBytes, 15),
        (Rule::BaseAddressAlignment, 16),
        (Rule::RuntimeShapeMismatch, 17),
        (Rule::PackedTypeAlignment, 18),
        (Rule::TensorMapAddress, 19),
        (Rule::MapUpdateInFlight, 20),
        // An im2col load's filter offsets.
        (Rule::Im2colOffsetRange, 21),
    ];

    /// The rule a debug record's code names.
    pub fn from_device_code(code: u32) -> Option<Rule> {
        Rule::DEVICE_CHECKED
            .iter()
            .find(|(_, c)| *c == code)
            .map(|(r, _)| *r)
    }
}

/// The generated helpers a debug check can fail in, with the code the device writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Helper {
    Load,
    LoadMulticast,
    Store,
    Reduce,
    Prefetch,
    /// The store token (`store_committed`), checked when it goes out of scope unwaited.
    StoreToken,
    /// A pipeline's consumer `wait(state)` on a stage's full barrier (a hang names the
    /// pipeline, stage, phase and tiles).
    PipelineWait,
    /// A pipeline's producer `acquire(state)` on a stage's empty barrier.
    PipelineAcquire,
    /// A pipeline's `init()`, checking the launch's cluster shape and dynamic shared memory
    /// against the pipeline's ([`Rule::PipelineLaunchShape`]).
    PipelineInit,
    /// An operand tile's wgmma descriptor `desc(smem, k_slice, m_block)`, checking the
    /// k-slice and 64-row block against the tile ([`Rule::WgmmaSliceRange`]).
    WgmmaDesc,
    /// A per-consumer named barrier's `sync_<name>(consumer)` / `arrive_<name>(consumer)`,
    /// checking the consumer against the barrier's ids ([`Rule::NamedBarrierIds`]).
    NamedBarrier,
    /// A map update (`update_global` / `update_shared`): the map's address and the drain
    /// ([`Rule::TensorMapAddress`], [`Rule::MapUpdateInFlight`]).
    MapUpdate,
    /// A map update's new base address ([`Rule::BaseAddressAlignment`]).
    MapUpdateAddress,
    /// A map update's new global dims ([`Rule::GlobalDimRange`], [`Rule::RuntimeShapeMismatch`],
    /// [`Rule::PackedTypeAlignment`]); the record's dim is the user dim.
    MapUpdateDim,
    /// A map update's new strides ([`Rule::StrideAlignment`], [`Rule::StrideMax`],
    /// [`Rule::StrideWholeBytes`], [`Rule::RuntimeShapeMismatch`]); the record's dim is the
    /// user dim whose stride it is.
    MapUpdateStride,
    /// A work queue's producer `push(state, item)` waiting for a slot's readers (its empty
    /// barrier; a hang names the queue, slot and phase).
    QueuePush,
    /// A work queue reader's `pop(state)` waiting for a slot's item (its full barrier).
    QueuePop,
}

impl Helper {
    /// Every helper with its device code (the one table; see [`Rule::DEVICE_CHECKED`]).
    pub const ALL: [(Helper, u32); 17] = [
        (Helper::Load, 1),
        (Helper::LoadMulticast, 2),
        (Helper::Store, 3),
        (Helper::Reduce, 4),
        (Helper::Prefetch, 5),
        (Helper::StoreToken, 6),
        (Helper::PipelineWait, 7),
        (Helper::PipelineAcquire, 8),
        (Helper::PipelineInit, 9),
        (Helper::WgmmaDesc, 10),
        (Helper::NamedBarrier, 11),
        (Helper::MapUpdate, 12),
        (Helper::MapUpdateAddress, 13),
        (Helper::MapUpdateDim, 14),
        (Helper::MapUpdateStride, 15),
        (Helper::QueuePush, 16),
        (Helper::QueuePop, 17),
    ];

    /// The helper a debug record's code names.
    pub fn from_device_code(code: u32) -> Option<Helper> {
        Helper::ALL
            .iter()
            .find(|(_, c)| *c == code)
            .map(|(h, _)| *h)
    }

    /// The name the generated CUDA gives it.
    pub fn name(self) -> &'static str {
        match self {
            Helper::Load => "load",
            Helper::LoadMulticast => "load_multicast",
            Helper::Store => "store",
            Helper::Reduce => "reduce",
            Helper::Prefetch => "prefetch",
            Helper::StoreToken => "store_committed",
            Helper::PipelineWait => "wait",
            Helper::PipelineAcquire => "acquire",
            Helper::PipelineInit => "init",
            Helper::WgmmaDesc => "desc",
            Helper::NamedBarrier => "sync_<barrier>/arrive_<barrier>",
            Helper::MapUpdate => "update_global/update_shared",
            Helper::MapUpdateAddress => "update_global/update_shared (base address)",
            Helper::MapUpdateDim => "update_global/update_shared (global dim)",
            Helper::MapUpdateStride => "update_global/update_shared (global stride)",
            Helper::QueuePush => "push",
            Helper::QueuePop => "pop",
        }
    }
}
