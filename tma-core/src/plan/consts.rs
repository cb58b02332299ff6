//! A kernel plan's layout and cross-part rules as `const fn`s, for `tma_kernel!`.
//!
//! A `tma_kernel!` may name its pipelines, roles and tiles by type (`pipelines = [GemmRing]`):
//! their numbers are those types' constants (`Pipeline::SMEM_BYTES`, `Roles::THREADS`,
//! `Tile::TARGET`, ..), which rustc knows and the macro does not. The generated code hands
//! them to these functions in `const` items, so the plan's layout ([`layout`]: every region's
//! offset, the dynamic shared memory) is a compile-time constant and every rule across parts
//! ([`region_name`], [`tile_target`], [`pipeline_target`], [`pipeline_cluster`],
//! [`pipeline_consumers`], [`block_threads`], [`cluster`], [`smem`]) is a compile error at the
//! part's token, its message ([`Msg`]) the text [`super::validate_plan`]'s finding shows.
//!
//! They mirror [`super::validate_plan`] (which stays the one the builder and `valid()` run);
//! the tests below hold the two to the same layout and the same findings on random plans.
//! Sizes saturate instead of overflowing: a plan that large does not fit a block anyway.
//! A part whose own declaration was rejected (its stub's `CUDA_NAME` is empty) turns every
//! check off ([`PlanIn::any_stub`]): its own errors are already reported.
//!
//! The derived generated-names table ([`crate::ident::generated`]) is no `const fn`: what
//! [`region_name`] needs of it (`struct tma_plan_<name>`'s own names, where a region's name
//! lands) is copied into [`REGION_SLOTS`] and [`TEMPLATE_MACROS`], held to the table by a
//! test. The plan's own name is a literal: the macro checks it with
//! [`super::validate_plan`] at expansion.

use super::{RegionRole, DEFAULT_DYNAMIC_SMEM};
use crate::limits::{
    DYNAMIC_SMEM_BASE_ALIGN, MAX_BLOCKS_PER_SM, MAX_BLOCK_THREADS, MAX_CLUSTER_CTAS,
    MAX_THREADS_PER_SM,
};
use crate::pipeline::Consumers;
use crate::smem::MBARRIER_BYTES;
use crate::spec::Arch;

/// Bytes a [`Msg`] holds; longer text is cut (at a character boundary).
pub const MSG_BYTES: usize = 2048;

/// A message built in a `const fn` (text and numbers), shown by a compile-time `panic!`.
#[derive(Clone, Copy)]
pub struct Msg {
    buf: [u8; MSG_BYTES],
    len: usize,
}

impl Msg {
    /// No message: the rule holds.
    pub const NONE: Msg = Msg {
        buf: [0; MSG_BYTES],
        len: 0,
    };

    /// Appends `s` (cut at a character boundary when full).
    pub const fn str(mut self, s: &str) -> Msg {
        let b = s.as_bytes();
        let mut i = 0;
        while i < b.len() {
            if self.len == MSG_BYTES {
                // Drop a character cut in two.
                while self.len > 0 && (self.buf[self.len - 1] & 0xC0) == 0x80 {
                    self.len -= 1;
                }
                if self.len > 0 && self.buf[self.len - 1] >= 0xC0 {
                    self.len -= 1;
                }
                return self;
            }
            self.buf[self.len] = b[i];
            self.len += 1;
            i += 1;
        }
        self
    }

    /// Appends `n` in decimal.
    pub const fn num(self, mut n: u64) -> Msg {
        let mut digits = [0u8; 20];
        let mut k = 0;
        loop {
            digits[k] = b'0' + (n % 10) as u8;
            k += 1;
            n /= 10;
            if n == 0 {
                break;
            }
        }
        let mut out = self;
        while k > 0 {
            k -= 1;
            let d = [digits[k]];
            out = out.str(match core::str::from_utf8(&d) {
                Ok(s) => s,
                Err(_) => "?",
            });
        }
        out
    }

    /// Appends a shape `XxYxZ`.
    pub const fn shape(self, s: [u32; 3]) -> Msg {
        self.num(s[0] as u64)
            .str("x")
            .num(s[1] as u64)
            .str("x")
            .num(s[2] as u64)
    }

    /// The text so far.
    pub const fn as_str(&self) -> &str {
        let (b, _) = self.buf.split_at(self.len);
        match core::str::from_utf8(b) {
            Ok(s) => s,
            Err(_) => "(message not UTF-8)",
        }
    }

    pub const fn is_empty(&self) -> bool {
        self.len == 0
    }
}

impl core::fmt::Debug for Msg {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        core::fmt::Debug::fmt(self.as_str(), f)
    }
}

/// One region of a plan's shared memory, laid out ([`layout`]): what
/// [`super::RegionLayout`] says, with a `'static` name, for constants.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct RegionInfo {
    /// The region's name: the pipeline's name, or the staging / scratch name as declared.
    pub name: &'static str,
    pub role: RegionRole,
    /// Bytes from the plan's aligned base.
    pub offset: u64,
    /// Bytes it spans.
    pub bytes: u64,
    /// Its alignment.
    pub align: u64,
    /// Staging: bytes from one copy to the next; else `bytes`.
    pub stride: u64,
    /// Staging: copies; else 1.
    pub copies: u32,
}

const fn max(a: u64, b: u64) -> u64 {
    if a > b {
        a
    } else {
        b
    }
}

/// `v` rounded up to a multiple of `align` (at least 1), saturating.
const fn round_up(v: u64, align: u64) -> u64 {
    let a = max(align, 1);
    match v.checked_add(a - 1) {
        Some(s) => s / a * a,
        None => u64::MAX,
    }
}

impl RegionInfo {
    /// Pipeline `index`'s ring: `Pipeline::SMEM_BYTES` at `Pipeline::SMEM_ALIGN` (at least
    /// the mbarriers' 8).
    pub const fn pipeline(name: &'static str, bytes: u64, align: u64, index: usize) -> Self {
        RegionInfo {
            name,
            role: RegionRole::Pipeline(index),
            offset: 0,
            bytes,
            align: max(align, MBARRIER_BYTES),
            stride: bytes,
            copies: 1,
        }
    }
    /// Region `index`: `copies` calls of a tile whose one call spans `footprint` bytes at
    /// `align`, each copy at a multiple of `align`.
    pub const fn staging(
        name: &'static str,
        footprint: u64,
        align: u64,
        copies: u32,
        index: usize,
    ) -> Self {
        let stride = round_up(footprint, align);
        let before = copies.saturating_sub(1) as u64;
        let bytes = stride.saturating_mul(before).saturating_add(footprint);
        RegionInfo {
            name,
            role: RegionRole::Staging(index),
            offset: 0,
            bytes,
            align,
            stride,
            copies,
        }
    }
    /// Region `index`: `bytes` bytes at `align`.
    pub const fn scratch(name: &'static str, bytes: u64, align: u64, index: usize) -> Self {
        RegionInfo {
            name,
            role: RegionRole::Scratch(index),
            offset: 0,
            bytes,
            align: max(align, 1),
            stride: bytes,
            copies: 1,
        }
    }
    /// `pipeline`, `tile set`, `staging` or `scratch`: how findings name it.
    pub const fn what(&self) -> &'static str {
        match self.role {
            RegionRole::Pipeline(_) => "pipeline",
            RegionRole::TileSet(_) => "tile set",
            RegionRole::Staging(_) => "staging",
            RegionRole::Scratch(_) => "scratch",
        }
    }
}

/// Where [`place`] put the regions.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Placed {
    /// Bytes from the base to the end of the last region.
    pub total_bytes: u64,
    /// The largest region alignment, at least 16.
    pub align_bytes: u64,
    /// [`super::plan_dynamic_smem`]: `total_bytes + align_bytes - 16`; 0 without regions.
    pub dynamic_smem_bytes: u64,
    /// A size saturated (more than 64 bits).
    pub overflow: bool,
}

impl Placed {
    /// Whether a launch needs the opt-in attribute (above 48 KB).
    pub const fn opt_in(&self) -> bool {
        self.dynamic_smem_bytes > DEFAULT_DYNAMIC_SMEM
    }
    /// The dynamic shared memory as a launch takes it (saturating).
    pub const fn dynamic_u32(&self) -> u32 {
        if self.dynamic_smem_bytes > u32::MAX as u64 {
            u32::MAX
        } else {
            self.dynamic_smem_bytes as u32
        }
    }
}

/// Sets each region's offset, in order, each at the next multiple of its alignment after the
/// previous one (as [`crate::smem::SmemLayout::place`] places them); the regions are built with
/// [`RegionInfo::pipeline`], `staging` and `scratch` in the plan's order (pipelines, then
/// staging and scratch as declared).
pub const fn place(regions: &mut [RegionInfo]) -> Placed {
    let mut end = 0u64;
    let mut align = 1u64;
    let mut overflow = false;
    let mut i = 0;
    while i < regions.len() {
        let r = &mut regions[i];
        if r.bytes == u64::MAX || r.stride == u64::MAX {
            overflow = true;
        }
        let offset = round_up(end, r.align);
        if offset == u64::MAX {
            overflow = true;
        }
        r.offset = offset;
        end = match offset.checked_add(r.bytes) {
            Some(e) => e,
            None => {
                overflow = true;
                u64::MAX
            }
        };
        align = max(align, r.align);
        i += 1;
    }
    let align_bytes = max(align, DYNAMIC_SMEM_BASE_ALIGN);
    let dynamic = if regions.is_empty() {
        0
    } else {
        super::plan_dynamic_smem(end, align_bytes)
    };
    Placed {
        total_bytes: end,
        align_bytes,
        dynamic_smem_bytes: dynamic,
        overflow,
    }
}

/// `N` regions laid out ([`place`]): a compile-time constant of a `tma_kernel!`.
#[derive(Clone, Copy, Debug)]
pub struct Layout<const N: usize> {
    pub regions: [RegionInfo; N],
    pub placed: Placed,
}

/// [`place`] on an array.
pub const fn layout<const N: usize>(regions: [RegionInfo; N]) -> Layout<N> {
    let mut regions = regions;
    let placed = place(&mut regions);
    Layout { regions, placed }
}

/// A pipeline of the plan, from its `Pipeline` constants.
#[derive(Clone, Copy, Debug)]
pub struct PipelineIn {
    pub name: &'static str,
    pub target: Arch,
    pub cluster: [u32; 3],
    /// Who releases each stage (`Pipeline::CONSUMERS`).
    pub consumers: Consumers,
    /// Its declaration was rejected (`CUDA_NAME` empty).
    pub stub: bool,
}

/// A tile of the plan (an aliased tile or a staging region's), from its `Tile` constants.
#[derive(Clone, Copy, Debug)]
pub struct TileIn {
    /// `tile` (an alias) or `staging`.
    pub what: &'static str,
    /// The alias or the staging region's name.
    pub label: &'static str,
    /// The tile's name.
    pub tile: &'static str,
    pub target: Arch,
    pub stub: bool,
}

/// The plan's warp roles, from their `Roles` constants.
#[derive(Clone, Copy, Debug)]
pub struct RolesIn {
    pub name: &'static str,
    pub threads: u64,
    /// The roles' blocks per SM (`Roles::BLOCKS_PER_SM`).
    pub blocks_per_sm: u32,
    /// The roles use `setmaxnreg` (checked for their `blocks_per_sm`).
    pub setmaxnreg: bool,
    pub stub: bool,
}

/// Everything the cross-part rules read.
#[derive(Clone, Copy, Debug)]
pub struct PlanIn<'a> {
    pub name: &'a str,
    pub target: Arch,
    /// Laid out ([`place`]).
    pub regions: &'a [RegionInfo],
    pub placed: Placed,
    pub pipelines: &'a [PipelineIn],
    pub tiles: &'a [TileIn],
    pub roles: Option<RolesIn>,
    pub block_threads: Option<u32>,
    pub cluster: Option<[u32; 3]>,
    /// The declared `blocks_per_sm`.
    pub blocks_per_sm: Option<u32>,
}

const fn str_eq(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    if a.len() != b.len() {
        return false;
    }
    let mut i = 0;
    while i < a.len() {
        if a[i] != b[i] {
            return false;
        }
        i += 1;
    }
    true
}

const fn same_arch(a: Arch, b: Arch) -> bool {
    a as u8 == b as u8
}

const fn same_shape(a: [u32; 3], b: [u32; 3]) -> bool {
    a[0] == b[0] && a[1] == b[1] && a[2] == b[2]
}

impl<'a> PlanIn<'a> {
    /// A part's declaration was rejected: its errors are reported, these checks stay off.
    pub const fn any_stub(&self) -> bool {
        let mut i = 0;
        while i < self.pipelines.len() {
            if self.pipelines[i].stub {
                return true;
            }
            i += 1;
        }
        let mut i = 0;
        while i < self.tiles.len() {
            if self.tiles[i].stub {
                return true;
            }
            i += 1;
        }
        match self.roles {
            Some(r) => r.stub,
            None => false,
        }
    }

    /// The block's threads: the roles', else the declared count (1 when neither: the plan
    /// is refused then, [`block_threads`]).
    pub const fn threads(&self) -> u32 {
        match (self.roles, self.block_threads) {
            (Some(r), _) => {
                if r.threads > u32::MAX as u64 {
                    u32::MAX
                } else {
                    r.threads as u32
                }
            }
            (None, Some(t)) => t,
            (None, None) => 1,
        }
    }

    /// The cluster: the first pipeline's, else the declared one, else 1x1x1.
    pub const fn cluster_shape(&self) -> [u32; 3] {
        if !self.pipelines.is_empty() {
            self.pipelines[0].cluster
        } else {
            match self.cluster {
                Some(c) => c,
                None => [1, 1, 1],
            }
        }
    }
}

/// `{what} `{name}` = {value}: ` (a finding's field and value, as [`crate::SpecError`] shows them).
const fn part(what: &str, name: &str) -> Msg {
    Msg::NONE.str(what).str(" `").str(name).str("`")
}

/// Tile `k` (an alias or a staging region's tile) targets the plan's arch
/// ([`crate::Rule::PlanTarget`]).
pub const fn tile_target(p: &PlanIn<'_>, k: usize) -> Msg {
    if p.any_stub() || k >= p.tiles.len() {
        return Msg::NONE;
    }
    let t = p.tiles[k];
    if same_arch(t.target, p.target) {
        return Msg::NONE;
    }
    part(t.what, t.label)
        .str(" = ")
        .str(t.target.nvrtc_name())
        .str(": tile `")
        .str(t.tile)
        .str("` targets ")
        .str(t.target.nvrtc_name())
        .str(", the plan targets ")
        .str(p.target.nvrtc_name())
}

/// Pipeline `j` targets the plan's arch ([`crate::Rule::PlanTarget`]).
pub const fn pipeline_target(p: &PlanIn<'_>, j: usize) -> Msg {
    if p.any_stub() || j >= p.pipelines.len() {
        return Msg::NONE;
    }
    let q = p.pipelines[j];
    if same_arch(q.target, p.target) {
        return Msg::NONE;
    }
    part("pipeline", q.name)
        .str(" = ")
        .str(q.target.nvrtc_name())
        .str(": pipeline `")
        .str(q.name)
        .str("` targets ")
        .str(q.target.nvrtc_name())
        .str(", the plan targets ")
        .str(p.target.nvrtc_name())
}

/// Where a region's name lands in `struct tma_plan_<kernel>` ([`crate::plan`]'s template):
/// one identifier, `prefix` + the name, in the scope `scope` whose own identifiers are
/// `names`. A copy of what the derived generated-names table ([`crate::ident::generated`],
/// not `const`) says about the plan template, in the table's order; a tma-core test holds
/// the two equal.
#[derive(Clone, Copy, Debug)]
pub struct RegionSlot {
    pub prefix: &'static str,
    /// Slots of one scope share it.
    pub scope: u8,
    /// The scope's identifiers (all from `plan.cuh.tera`).
    pub names: &'static [&'static str],
}

/// `struct tma_plan_<kernel>`'s own identifiers (its members and what its code names).
const PLAN_STRUCT: &[&str] = &[
    "BLOCKS_PER_SM",
    "BLOCK_THREADS",
    "CLUSTER_X",
    "CLUSTER_Y",
    "CLUSTER_Z",
    "DYNAMIC_SMEM_BYTES",
    "SMEM_ALIGN",
    "SMEM_BYTES",
    "__device__",
    "__forceinline__",
    "base",
    "char",
    "constexpr",
    "i",
    "raw",
    "return",
    "static",
    "static_assert",
    "struct",
    "tma_align_smem",
    "typedef",
    "unsigned",
    "void",
];
/// A region accessor's body.
const ACCESSOR: &[&str] = &["base", "char", "return", "unsigned"];
/// A staging region's accessor's body (copy `i`).
const ACCESSOR_I: &[&str] = &["base", "char", "i", "return", "unsigned"];

const fn slot(prefix: &'static str, scope: u8, names: &'static [&'static str]) -> RegionSlot {
    RegionSlot {
        prefix,
        scope,
        names,
    }
}

/// Every identifier a region's name becomes in `struct tma_plan_<kernel>`.
pub const REGION_SLOTS: &[RegionSlot] = &[
    slot("OFFSET_", 0, PLAN_STRUCT),
    slot("BYTES_", 0, PLAN_STRUCT),
    slot("ALIGN_", 0, PLAN_STRUCT),
    slot("", 0, PLAN_STRUCT),
    slot("tile_", 0, PLAN_STRUCT),
    slot("COPIES_", 0, PLAN_STRUCT),
    slot("STRIDE_", 0, PLAN_STRUCT),
    slot("queue_", 0, PLAN_STRUCT),
    slot("OFFSET_", 1, ACCESSOR),
    slot("OFFSET_", 2, ACCESSOR),
    slot("OFFSET_", 3, ACCESSOR_I),
    slot("STRIDE_", 3, ACCESSOR_I),
    slot("queue_", 4, ACCESSOR),
    slot("OFFSET_", 4, ACCESSOR),
    slot("OFFSET_", 5, ACCESSOR),
];

/// The templates' macros (name, template). Their patterns (`TMA_RULE_*`, ..) all start with
/// `TMA_`, which a region's name meets only bare, and then the `tma_` prefix rule refuses it
/// first (the test holding [`REGION_SLOTS`] to the table checks that too).
pub const TEMPLATE_MACROS: &[(&str, &str)] = &[
    ("TMA_BOUNDED_WAITS", "prelude.cuh.tera"),
    ("TMA_DEBUG", "im2col.cuh.tera"),
    ("TMA_DEBUG_TIMEOUT_NS", "prelude.cuh.tera"),
    ("TMA_DEBUG_MAP_SLOTS", "prelude.cuh.tera"),
    ("TMA_ENCODE_CUH_", "encode.cuh.tera"),
    ("TMA_ENCODE_LINK_DRIVER", "encode.cuh.tera"),
    ("TMA_HOST_DEVICE", "shapes.cuh.tera"),
    ("TMA_KERNEL_CUH_", "kernel.cuh.tera"),
    ("TMA_MPK_CUH_", "mpk.cuh.tera"),
    ("TMA_MPK_NO_BARRIER", "mpk.cuh.tera"),
    ("TMA_PRELUDE_CUH_", "prelude.cuh.tera"),
    ("TMA_SHAPES_CUH_", "shapes.cuh.tera"),
    ("TMA_TIMELINE", "pipeline.cuh.tera"),
    ("TMA_TIMELINE_KINDS", "warp.cuh.tera"),
    ("TMA_WAIT_LIMIT_NS", "prelude.cuh.tera"),
    ("TMA_WAIT_TIMEOUT_NS", "prelude.cuh.tera"),
    ("TMA_WARP_CUH_", "warp.cuh.tera"),
    ("TMA_WGMMA_CUH_", "wgmma.cuh.tera"),
    ("__CUDACC_RTC__", "encode.cuh.tera"),
    ("__CUDACC__", "encode.cuh.tera"),
];

/// Byte `k` of `pre` + `name`.
const fn cat_byte(pre: &str, name: &str, k: usize) -> u8 {
    let (p, n) = (pre.as_bytes(), name.as_bytes());
    if k < p.len() {
        p[k]
    } else {
        n[k - p.len()]
    }
}

/// How `pre_a` + `a` compares with `pre_b` + `b` (byte order, as `str`'s `Ord`).
const fn cat_cmp(pre_a: &str, a: &str, pre_b: &str, b: &str) -> core::cmp::Ordering {
    use core::cmp::Ordering;
    let (la, lb) = (pre_a.len() + a.len(), pre_b.len() + b.len());
    let mut k = 0;
    while k < la && k < lb {
        let (x, y) = (cat_byte(pre_a, a, k), cat_byte(pre_b, b, k));
        if x != y {
            return if x < y {
                Ordering::Less
            } else {
                Ordering::Greater
            };
        }
        k += 1;
    }
    if la < lb {
        Ordering::Less
    } else if la > lb {
        Ordering::Greater
    } else {
        Ordering::Equal
    }
}

const fn cat_eq(pre_a: &str, a: &str, pre_b: &str, b: &str) -> bool {
    matches!(cat_cmp(pre_a, a, pre_b, b), core::cmp::Ordering::Equal)
}

/// A region's name meeting the generated code ([`crate::ident::generated_clash`] for a plan
/// region): what it becomes and the text of the [`crate::ident::GeneratedClash`].
const fn region_clash(name: &str) -> Msg {
    let b = name.as_bytes();
    if b.len() >= 4
        && (b[0] == b't' || b[0] == b'T')
        && (b[1] == b'm' || b[1] == b'M')
        && (b[2] == b'a' || b[2] == b'A')
        && b[3] == b'_'
    {
        return Msg::NONE
            .str("it lands in the generated CUDA as `")
            .str(name)
            .str("`, and names starting with `tma_` (in any case) belong to the generated code");
    }
    let mut s = 0;
    while s < REGION_SLOTS.len() {
        let slot = REGION_SLOTS[s];
        let becomes = Msg::NONE
            .str("it becomes `")
            .str(slot.prefix)
            .str(name)
            .str("`, ");
        let mut m = 0;
        while m < TEMPLATE_MACROS.len() {
            let (mac, template) = TEMPLATE_MACROS[m];
            if cat_eq(slot.prefix, name, "", mac) {
                return becomes
                    .str("a macro of the generated code (")
                    .str(template)
                    .str("), which would replace it");
            }
            m += 1;
        }
        let mut k = 0;
        while k < slot.names.len() {
            if cat_eq(slot.prefix, name, "", slot.names[k]) {
                return becomes
                    .str("which the generated code (plan.cuh.tera) already names in that scope");
            }
            k += 1;
        }
        s += 1;
    }
    Msg::NONE
}

/// The first identifier (in `str` order) that region names `a` and `b` (different) both
/// become in one scope of the plan struct, as [`crate::ident::shared_generated_name`]
/// finds it: its slot of `b`, or `None`.
const fn shared_slot(a: &str, b: &str) -> Option<usize> {
    if str_eq(a, b) {
        return None;
    }
    let mut best: Option<usize> = None;
    let mut sb = 0;
    while sb < REGION_SLOTS.len() {
        let y = REGION_SLOTS[sb];
        let mut sa = 0;
        while sa < REGION_SLOTS.len() {
            let x = REGION_SLOTS[sa];
            if x.scope == y.scope && cat_eq(x.prefix, a, y.prefix, b) {
                best = match best {
                    Some(o)
                        if !matches!(
                            cat_cmp(y.prefix, b, REGION_SLOTS[o].prefix, b),
                            core::cmp::Ordering::Less
                        ) =>
                    {
                        Some(o)
                    }
                    _ => Some(sb),
                };
            }
            sa += 1;
        }
        sb += 1;
    }
    best
}

/// Region `i`'s name meets none of `struct tma_plan_<kernel>`'s own names
/// ([`crate::Rule::GeneratedNameClash`]: `base`, `raw`, `SMEM_BYTES`, a region `CLUSTER_X`
/// ..), is no earlier region's, and gives the struct no member an earlier region's gives
/// (`x` and `OFFSET_x`) ([`crate::Rule::PlanRegions`]): [`super::validate_plan`]'s region
/// name rules, but that a name is a C identifier (a pipeline's is, and a name written in
/// `tma_kernel!` is checked at expansion).
///
/// These involve a part named by type (a pipeline's ring is named by its `Pipeline::NAME`).
/// The generated names come from [`REGION_SLOTS`] and [`TEMPLATE_MACROS`], a copy of the
/// derived table that a test holds equal to it.
pub const fn region_name(p: &PlanIn<'_>, i: usize) -> Msg {
    if p.any_stub() || i >= p.regions.len() {
        return Msg::NONE;
    }
    let r = p.regions[i];
    let head = part(r.what(), r.name).str(" = ").str(r.name).str(": ");
    let why = region_clash(r.name);
    if !why.is_empty() {
        return head
            .str("a region's name names members of struct tma_plan_")
            .str(p.name)
            .str(" (`")
            .str(r.name)
            .str("(base)`, `OFFSET_")
            .str(r.name)
            .str("`, `BYTES_")
            .str(r.name)
            .str("`, ...); this one clashes: ")
            .str(why.as_str());
    }
    let mut k = 0;
    while k < i {
        if str_eq(p.regions[k].name, r.name) {
            return head.str("two regions of the plan have this name");
        }
        k += 1;
    }
    let mut k = 0;
    while k < i {
        let o = p.regions[k].name;
        if let Some(s) = shared_slot(o, r.name) {
            return head
                .str("this region and region `")
                .str(o)
                .str("` would both give struct tma_plan_")
                .str(p.name)
                .str(" a `")
                .str(REGION_SLOTS[s].prefix)
                .str(r.name)
                .str("`");
        }
        k += 1;
    }
    Msg::NONE
}

/// The block's threads: the roles' agree with a declared count, one of them is given, 1 to
/// [`MAX_BLOCK_THREADS`] ([`crate::Rule::PlanBlockThreads`]).
pub const fn block_threads(p: &PlanIn<'_>) -> Msg {
    if p.any_stub() {
        return Msg::NONE;
    }
    let head = Msg::NONE.str("block_threads = ");
    let threads = match (p.roles, p.block_threads) {
        (Some(r), Some(d)) if r.threads != d as u64 => {
            return head
                .num(d as u64)
                .str(": warp roles `")
                .str(r.name)
                .str("` make the block ")
                .num(r.threads)
                .str(" threads; drop block_threads or declare ")
                .num(r.threads);
        }
        (Some(r), _) => r.threads,
        (None, Some(d)) => d as u64,
        (None, None) => {
            return head.str(
                "none: a plan without warp roles declares its block's threads (block_threads)",
            );
        }
    };
    if threads == 0 || threads > MAX_BLOCK_THREADS as u64 {
        return head
            .num(threads)
            .str(": a block has 1 to ")
            .num(MAX_BLOCK_THREADS as u64)
            .str(" threads");
    }
    Msg::NONE
}

/// The launch bounds' blocks per SM (declared, else the roles'): the roles' own count when
/// both are given and the roles use `setmaxnreg`, 1 to [`MAX_BLOCKS_PER_SM`], at most [`MAX_THREADS_PER_SM`] threads of
/// blocks of the plan's threads (once [`block_threads`] holds)
/// ([`crate::Rule::PlanBlockThreads`], [`crate::Rule::BlocksPerSm`], [`crate::Rule::ThreadsPerSm`]; `validate_plan`'s `check_blocks_per_sm`).
pub const fn blocks_per_sm(p: &PlanIn<'_>) -> Msg {
    if p.any_stub() {
        return Msg::NONE;
    }
    let head = Msg::NONE.str("blocks_per_sm = ");
    let n = match (p.roles, p.blocks_per_sm) {
        (Some(r), Some(d)) if d != r.blocks_per_sm && r.setmaxnreg => {
            return head
                .num(d as u64)
                .str(": warp roles `")
                .str(r.name)
                .str("` checked their setmaxnreg registers for ")
                .num(r.blocks_per_sm as u64)
                .str(" block(s) per SM; drop blocks_per_sm or declare ")
                .num(r.blocks_per_sm as u64);
        }
        (_, Some(d)) => d,
        (Some(r), None) => r.blocks_per_sm,
        (None, None) => return Msg::NONE,
    };
    if n == 0 {
        return head.str("0: the launch bounds ask for at least one block per SM");
    }
    if n > MAX_BLOCKS_PER_SM {
        return head
            .num(n as u64)
            .str(": an SM holds at most ")
            .num(MAX_BLOCKS_PER_SM as u64)
            .str(" resident blocks (sm_90), so __launch_bounds__ cannot ask for ")
            .num(n as u64);
    }
    if !block_threads(p).is_empty() {
        return Msg::NONE;
    }
    let threads = p.threads() as u64;
    let per_sm = threads * n as u64;
    if per_sm <= MAX_THREADS_PER_SM as u64 {
        return Msg::NONE;
    }
    head.num(n as u64)
        .str(": ")
        .num(threads)
        .str(" threads x ")
        .num(n as u64)
        .str(" block(s) per SM = ")
        .num(per_sm)
        .str(" threads; an SM holds at most ")
        .num(MAX_THREADS_PER_SM as u64)
        .str(" resident threads (sm_90): at most ")
        .num(MAX_THREADS_PER_SM as u64 / threads)
        .str(" block(s) of ")
        .num(threads)
        .str(" threads")
}

/// Pipeline `j`'s consumers fit the block ([`crate::Rule::PlanBlockThreads`]); checked once
/// the block's threads are right ([`block_threads`]).
pub const fn pipeline_consumers(p: &PlanIn<'_>, j: usize) -> Msg {
    if p.any_stub() || j >= p.pipelines.len() || !block_threads(p).is_empty() {
        return Msg::NONE;
    }
    let q = p.pipelines[j];
    let threads = p.threads() as u64;
    if consumer_threads(q.consumers) <= threads {
        return Msg::NONE;
    }
    consumers_part("pipeline", q.name, q.consumers)
        .str(" consumer threads release each stage, but the block has ")
        .num(threads)
        .str(": its empty barriers would never complete")
}

/// The threads `c` counts (as `Consumers::threads`, in `const`).
const fn consumer_threads(c: Consumers) -> u64 {
    match c {
        Consumers::Threads(n) => n as u64,
        Consumers::Warps(n) => n as u64 * 32,
        Consumers::Warpgroups(n) => n as u64 * 128,
    }
}

/// `<what> `<name>` = <unit>(<n>): <threads>`: the head of a finding on `c`'s thread count,
/// `c` shown as the plan's findings show a `Consumers`.
const fn consumers_part(what: &str, name: &str, c: Consumers) -> Msg {
    let (unit, count) = match c {
        Consumers::Threads(n) => ("threads", n),
        Consumers::Warps(n) => ("warps", n),
        Consumers::Warpgroups(n) => ("warpgroups", n),
    };
    part(what, name)
        .str(" = ")
        .str(unit)
        .str("(")
        .num(count as u64)
        .str("): ")
        .num(consumer_threads(c))
}

/// Work queue `name`'s `readers` fit the block beside its producer thread (a plan's
/// [`crate::Rule::PlanBlockThreads`] on a work queue; [`crate::pipeline::WorkQueue`]).
pub const fn queue_readers(p: &PlanIn<'_>, name: &'static str, readers: Consumers) -> Msg {
    if p.any_stub() || !block_threads(p).is_empty() {
        return Msg::NONE;
    }
    let threads = p.threads() as u64;
    if consumer_threads(readers) < threads {
        return Msg::NONE;
    }
    consumers_part("work queue", name, readers)
        .str(" reader threads pop each slot, but the block has ")
        .num(threads)
        .str(": a work queue's producer thread is not one of its readers, so its readers are fewer than the block's threads")
}

/// Pipeline `j` (after the first) was declared for the first's cluster
/// ([`crate::Rule::PlanCluster`]).
pub const fn pipeline_cluster(p: &PlanIn<'_>, j: usize) -> Msg {
    if p.any_stub() || j == 0 || j >= p.pipelines.len() {
        return Msg::NONE;
    }
    let (first, q) = (p.pipelines[0], p.pipelines[j]);
    if same_shape(first.cluster, q.cluster) {
        return Msg::NONE;
    }
    part("pipeline", q.name)
        .str(" = ")
        .shape(q.cluster)
        .str(": pipeline `")
        .str(first.name)
        .str("` was declared for cluster ")
        .shape(first.cluster)
        .str(": one kernel launches with one cluster shape")
}

/// A declared cluster is the pipelines' ([`crate::Rule::PlanCluster`]), and the cluster has
/// 1 to [`MAX_CLUSTER_CTAS`] CTAs ([`crate::Rule::ClusterShape`]).
pub const fn cluster(p: &PlanIn<'_>) -> Msg {
    if p.any_stub() {
        return Msg::NONE;
    }
    if let (false, Some(declared)) = (p.pipelines.is_empty(), p.cluster) {
        let first = p.pipelines[0];
        if !same_shape(first.cluster, declared) {
            return Msg::NONE
                .str("cluster = ")
                .shape(declared)
                .str(": pipeline `")
                .str(first.name)
                .str("` was declared for cluster ")
                .shape(first.cluster)
                .str("; drop cluster or declare that");
        }
    }
    let c = p.cluster_shape();
    let ctas = c[0] as u64 * c[1] as u64 * c[2] as u64;
    if ctas == 0 || ctas > MAX_CLUSTER_CTAS as u64 {
        return Msg::NONE
            .str("cluster = ")
            .shape(c)
            .str(": a cluster has 1 to ")
            .num(MAX_CLUSTER_CTAS as u64)
            .str(" CTAs (8 portably), each extent at least 1");
    }
    Msg::NONE
}

/// The plan's dynamic shared memory fits a block on its target
/// ([`crate::Rule::PlanSmemFits`]); the finding goes to region `i`, the first to end past
/// what the block has (with the alignment slack).
pub const fn smem(p: &PlanIn<'_>, i: usize) -> Msg {
    if p.any_stub() || i >= p.regions.len() {
        return Msg::NONE;
    }
    let limit = p.target.max_smem_per_block();
    let placed = p.placed;
    if !placed.overflow && placed.dynamic_smem_bytes <= limit {
        return Msg::NONE;
    }
    if first_past(p, limit) != i {
        return Msg::NONE;
    }
    let mut m = Msg::NONE.str("smem = ");
    m = if placed.overflow {
        m.str("more than 64 bits")
    } else {
        m.num(placed.dynamic_smem_bytes)
    };
    m = m.str(": the plan's regions (");
    let mut k = 0;
    while k < p.regions.len() {
        let r = p.regions[k];
        if k > 0 {
            m = m.str(", ");
        }
        m = m
            .str("`")
            .str(r.name)
            .str("` ")
            .num(r.bytes)
            .str(" B at +")
            .num(r.offset)
            .str(" (align ")
            .num(r.align)
            .str(")");
        k += 1;
    }
    m.str(") span ")
        .num(placed.total_bytes)
        .str(" B, ")
        .num(placed.dynamic_smem_bytes)
        .str(" B with the ")
        .num(placed.dynamic_smem_bytes - placed.total_bytes)
        .str(" B alignment slack; a block on ")
        .str(p.target.nvrtc_name())
        .str(" has ")
        .num(limit)
        .str(" B")
}

/// The first region whose end, with the alignment slack, is past `limit` (the last when
/// none is: the slack alone does it).
pub const fn first_past(p: &PlanIn<'_>, limit: u64) -> usize {
    let mut i = 0;
    while i < p.regions.len() {
        let r = p.regions[i];
        let end = super::plan_dynamic_smem(r.offset.saturating_add(r.bytes), p.placed.align_bytes);
        if end > limit || r.bytes == u64::MAX {
            return i;
        }
        i += 1;
    }
    p.regions.len().saturating_sub(1)
}

#[cfg(test)]
mod tests;
