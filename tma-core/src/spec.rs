//! The tile spec: plain data, dims outer -> inner exactly as the user writes them.
//!
//! Nothing here is checked; [`crate::validate()`] turns a [`TileSpec`] into a
//! [`crate::ValidSpec`], the only thing that can be laid out, rendered or encoded.

use crate::dtype::DType;
use crate::operand::{Major, Operand, WgmmaOperand};
pub use crate::swizzle::Swizzle;
use std::fmt;

/// Largest tensor rank TMA supports.
pub const MAX_RANK: usize = 5;

/// Global-memory interleave (`CUtensorMapInterleave`): NC/8HWC8-style layouts, where the
/// channels of each pixel sit in 16- or 32-byte chunks and a row of pixels is a run of
/// contiguous chunks.
///
/// What the hardware does with an interleaved map (measured on an H200, docs/INTERLEAVE.md;
/// NVIDIA's documentation does not say):
/// - the innermost dim counts **chunks**, not elements: its global extent, box, coordinate
///   and element stride are all in chunks, and chunk `c` of a row starts `c * chunk` bytes
///   after the row (the chunks of a row are contiguous);
/// - the box along the user's dim 1 (TMA dim `rank - 2`) is ignored: a copy takes one
///   position there, so validation demands a box of 1;
/// - rows are packed in shared memory, never padded to the swizzle span.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum Interleave {
    #[default]
    None = 0,
    /// NC/8HWC8-style: the innermost dim is a run of 16-byte chunks.
    B16 = 1,
    /// NC/16HWC16-style: the innermost dim is a run of 32-byte chunks.
    B32 = 2,
}

impl Interleave {
    pub fn parse(s: &str) -> Option<Interleave> {
        Some(match s.to_ascii_lowercase().as_str() {
            "none" | "0" => Interleave::None,
            "16" | "16b" => Interleave::B16,
            "32" | "32b" => Interleave::B32,
            _ => return None,
        })
    }
    pub const ACCEPTED: &'static str = "none, 16, 32";
    pub fn name(self) -> &'static str {
        match self {
            Interleave::None => "none",
            Interleave::B16 => "16B",
            Interleave::B32 => "32B",
        }
    }
    pub fn cu_name(self) -> &'static str {
        match self {
            Interleave::None => "CU_TENSOR_MAP_INTERLEAVE_NONE",
            Interleave::B16 => "CU_TENSOR_MAP_INTERLEAVE_16B",
            Interleave::B32 => "CU_TENSOR_MAP_INTERLEAVE_32B",
        }
    }
    /// Bytes of one interleaved chunk, if interleaved.
    pub fn chunk_bytes(self) -> Option<u64> {
        match self {
            Interleave::None => None,
            Interleave::B16 => Some(16),
            Interleave::B32 => Some(32),
        }
    }
}

/// L2 sector promotion (`CUtensorMapL2promotion`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum L2Promotion {
    #[default]
    None = 0,
    B64 = 1,
    B128 = 2,
    B256 = 3,
}

impl L2Promotion {
    pub fn parse(s: &str) -> Option<L2Promotion> {
        Some(match s.to_ascii_lowercase().as_str() {
            "none" | "0" => L2Promotion::None,
            "64" | "64b" => L2Promotion::B64,
            "128" | "128b" => L2Promotion::B128,
            "256" | "256b" => L2Promotion::B256,
            _ => return None,
        })
    }
    pub const ACCEPTED: &'static str = "none, 64, 128, 256";
    pub fn name(self) -> &'static str {
        match self {
            L2Promotion::None => "none",
            L2Promotion::B64 => "64B",
            L2Promotion::B128 => "128B",
            L2Promotion::B256 => "256B",
        }
    }
    pub fn cu_name(self) -> &'static str {
        match self {
            L2Promotion::None => "CU_TENSOR_MAP_L2_PROMOTION_NONE",
            L2Promotion::B64 => "CU_TENSOR_MAP_L2_PROMOTION_L2_64B",
            L2Promotion::B128 => "CU_TENSOR_MAP_L2_PROMOTION_L2_128B",
            L2Promotion::B256 => "CU_TENSOR_MAP_L2_PROMOTION_L2_256B",
        }
    }
}

/// What a load writes for elements outside the tensor (`CUtensorMapFloatOOBfill`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum OobFill {
    /// Zeros (the driver's `CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE`).
    #[default]
    Zero = 0,
    /// A NaN that requests zero in FMA (floating-point types only).
    NanRequestZeroFma = 1,
}

impl OobFill {
    pub fn parse(s: &str) -> Option<OobFill> {
        Some(match s.to_ascii_lowercase().as_str() {
            "zero" | "none" => OobFill::Zero,
            "nan" | "nan_request_zero_fma" => OobFill::NanRequestZeroFma,
            _ => return None,
        })
    }
    pub const ACCEPTED: &'static str = "zero, nan";
    pub fn name(self) -> &'static str {
        match self {
            OobFill::Zero => "zero",
            OobFill::NanRequestZeroFma => "nan",
        }
    }
    pub fn cu_name(self) -> &'static str {
        match self {
            OobFill::Zero => "CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE",
            OobFill::NanRequestZeroFma => "CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA",
        }
    }
}

/// The GPU architecture the tile targets; some options exist only on newer GPUs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub enum Arch {
    /// Hopper (H100/H200), `sm_90a`.
    #[default]
    Sm90a,
    /// Blackwell datacenter (B200), `sm_100a`.
    Sm100a,
    /// Blackwell consumer (RTX 50), `sm_120a`.
    Sm120a,
}

impl Arch {
    pub fn parse(s: &str) -> Option<Arch> {
        Some(match s.to_ascii_lowercase().as_str() {
            "sm_90" | "sm_90a" | "sm90" | "sm90a" | "hopper" => Arch::Sm90a,
            "sm_100" | "sm_100a" | "sm100" | "sm100a" | "blackwell" => Arch::Sm100a,
            "sm_120" | "sm_120a" | "sm120" | "sm120a" => Arch::Sm120a,
            _ => return None,
        })
    }
    pub const ACCEPTED: &'static str = "sm_90a, sm_100a, sm_120a";
    /// The NVRTC `--gpu-architecture` value.
    pub const fn nvrtc_name(self) -> &'static str {
        match self {
            Arch::Sm90a => "sm_90a",
            Arch::Sm100a => "sm_100a",
            Arch::Sm120a => "sm_120a",
        }
    }
    /// The arch for a device's compute capability, if TMA exists there.
    pub fn from_compute_capability(major: i32, minor: i32) -> Option<Arch> {
        match (major, minor) {
            (9, _) => Some(Arch::Sm90a),
            (10, _) | (11, _) => Some(Arch::Sm100a),
            (12, _) => Some(Arch::Sm120a),
            _ => None,
        }
    }
    /// Shared memory of one SM: the largest box the driver encodes (an H100 with driver 580
    /// accepts a 228 KB box and refuses 230 KB; tests/gpu_validator.rs probes it).
    pub fn smem_per_sm(self) -> u64 {
        match self {
            Arch::Sm90a | Arch::Sm100a => 228 * 1024,
            Arch::Sm120a => 100 * 1024,
        }
    }
    /// Blackwell or newer: packed sub-byte types and the atom swizzles exist.
    pub fn is_blackwell(self) -> bool {
        self >= Arch::Sm100a
    }
    /// Shared memory one block may use (opt-in maximum): 227 KB on sm_90 and sm_100
    /// (CUDA C++ programming guide, "Technical Specifications per Compute Capability"),
    /// 99 KB on sm_120.
    pub const fn max_smem_per_block(self) -> u64 {
        match self {
            Arch::Sm90a | Arch::Sm100a => 227 * 1024,
            Arch::Sm120a => 99 * 1024,
        }
    }
}

impl fmt::Display for Arch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.nvrtc_name())
    }
}

/// The extent of one global dimension or stride: known now, or given at run time.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Extent {
    Static(u64),
    /// Given when the tile is bound to a buffer (see [`crate::ValidSpec::bind`]).
    Runtime,
}

impl Extent {
    pub fn get(self) -> Option<u64> {
        match self {
            Extent::Static(v) => Some(v),
            Extent::Runtime => None,
        }
    }
}

impl fmt::Display for Extent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Extent::Static(v) => write!(f, "{v}"),
            Extent::Runtime => f.write_str("<runtime>"),
        }
    }
}

impl From<u64> for Extent {
    fn from(v: u64) -> Self {
        Extent::Static(v)
    }
}

/// A plain-data description of one TMA tile. Dims are outer -> inner, like a Rust array
/// `[H][W][C]`; strides are in elements. Build one with [`TileSpec::new`] and the
/// builder methods, or through the macros.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct TileSpec {
    /// The tile's name: names the generated CUDA helper (`tma_<name>`). An identifier.
    pub name: String,
    pub dtype: DType,
    /// Optional names of the dims (outer -> inner), used in errors and generated comments.
    pub dim_names: Vec<Option<String>>,
    /// Global extent of each dim, outer -> inner, in elements (the innermost in chunks with
    /// interleave: see [`Interleave`]).
    pub global: Vec<Extent>,
    /// Global strides in elements, outer -> inner; the innermost must be 1 (TMA's dim 0
    /// is always contiguous). `None`: dense row-major strides derived from `global`.
    pub strides: Option<Vec<Extent>>,
    /// Box (tile) extent of each dim, outer -> inner, in elements (the innermost in chunks
    /// with interleave).
    pub boxed: Vec<u32>,
    /// Traversal stride of each dim inside the box (1 = every element; chunks for the
    /// innermost dim with interleave).
    pub element_strides: Vec<u32>,
    pub interleave: Interleave,
    pub swizzle: Swizzle,
    pub l2_promotion: L2Promotion,
    pub oob_fill: OobFill,
    /// Boxes one helper call moves along each dim (MPK's SMEM_REPEAT_ROW/COL).
    pub repeat: Vec<u32>,
    /// Elements between consecutive repeated boxes in shared memory. `None`: the box's
    /// shared-memory bytes rounded up to the swizzle period. Ignored (the default is kept)
    /// when the tile has one box: nothing is repeated.
    pub smem_stride: Option<u64>,
    /// The architecture whose rules apply.
    pub target: Arch,
    /// The tile feeds `wgmma.mma_async` as this operand (see [`crate::operand`]): validation
    /// adds the operand rules, and the tile gets matrix descriptors ([`crate::wgmma`]).
    pub wgmma: Option<WgmmaOperand>,
}

impl TileSpec {
    /// A spec with the given global shape (outer -> inner) and box, every other field at
    /// its default: dense strides, unit element strides, no swizzle, one box per call.
    pub fn new(
        name: impl Into<String>,
        dtype: DType,
        global: impl IntoIterator<Item = u64>,
        boxed: impl IntoIterator<Item = u32>,
    ) -> TileSpec {
        let global: Vec<Extent> = global.into_iter().map(Extent::Static).collect();
        let boxed: Vec<u32> = boxed.into_iter().collect();
        let rank = global.len();
        TileSpec {
            name: name.into(),
            dtype,
            dim_names: vec![None; rank],
            global,
            strides: None,
            element_strides: vec![1; boxed.len()],
            repeat: vec![1; boxed.len()],
            boxed,
            interleave: Interleave::None,
            swizzle: Swizzle::None,
            l2_promotion: L2Promotion::None,
            oob_fill: OobFill::Zero,
            smem_stride: None,
            target: Arch::Sm90a,
            wgmma: None,
        }
    }

    /// The rank: number of global dims.
    pub fn rank(&self) -> usize {
        self.global.len()
    }

    pub fn dim_names<S: Into<String>>(mut self, names: impl IntoIterator<Item = S>) -> Self {
        self.dim_names = names.into_iter().map(|n| Some(n.into())).collect();
        self
    }
    /// Global dims as extents (some may be [`Extent::Runtime`]).
    pub fn global_extents(mut self, global: impl IntoIterator<Item = Extent>) -> Self {
        self.global = global.into_iter().collect();
        self
    }
    pub fn strides(mut self, strides: impl IntoIterator<Item = u64>) -> Self {
        self.strides = Some(strides.into_iter().map(Extent::Static).collect());
        self
    }
    pub fn stride_extents(mut self, strides: impl IntoIterator<Item = Extent>) -> Self {
        self.strides = Some(strides.into_iter().collect());
        self
    }
    pub fn element_strides(mut self, s: impl IntoIterator<Item = u32>) -> Self {
        self.element_strides = s.into_iter().collect();
        self
    }
    pub fn interleave(mut self, i: Interleave) -> Self {
        self.interleave = i;
        self
    }
    pub fn swizzle(mut self, s: Swizzle) -> Self {
        self.swizzle = s;
        self
    }
    pub fn l2_promotion(mut self, l: L2Promotion) -> Self {
        self.l2_promotion = l;
        self
    }
    pub fn oob_fill(mut self, o: OobFill) -> Self {
        self.oob_fill = o;
        self
    }
    pub fn repeat(mut self, r: impl IntoIterator<Item = u32>) -> Self {
        self.repeat = r.into_iter().collect();
        self
    }
    pub fn smem_stride(mut self, elements: u64) -> Self {
        self.smem_stride = Some(elements);
        self
    }
    pub fn target(mut self, a: Arch) -> Self {
        self.target = a;
        self
    }
    /// Declares the tile a `wgmma.mma_async` operand: `A` or `B`, K-major (`[MN][K]`, K
    /// innermost) or MN-major (`[K][MN]`). See [`crate::operand`].
    pub fn wgmma(mut self, operand: Operand, major: Major) -> Self {
        self.wgmma = Some(WgmmaOperand { operand, major });
        self
    }

    /// Bytes one step along the innermost dim covers: one element, or one chunk with
    /// interleave. `None` for the packed sub-byte types (no whole bytes per element).
    pub fn inner_unit_bytes(&self) -> Option<u64> {
        self.interleave
            .chunk_bytes()
            .or_else(|| self.dtype.size_bytes())
    }

    /// Elements one step along the innermost dim covers (1, or a chunk's worth with
    /// interleave): what dense strides and stride checks count the inner dim in.
    pub fn inner_unit_elements(&self) -> u64 {
        match (self.interleave.chunk_bytes(), self.dtype.size_bytes()) {
            (Some(chunk), Some(size)) => (chunk / size).max(1),
            _ => 1,
        }
    }

    /// The name of user dim `d`, if given.
    pub fn dim_name(&self, d: usize) -> Option<&str> {
        self.dim_names.get(d).and_then(|n| n.as_deref())
    }

    /// The name dim `d` has in generated CUDA (its coordinate field, its `BOX_<dim>`
    /// constant): the given name, or `d<d>` (`d0`, `d1`, ...) for a dim without one.
    pub fn dim_label(&self, d: usize) -> String {
        self.dim_name(d)
            .map_or_else(|| format!("d{d}"), ToString::to_string)
    }
}

/// Smallest and largest tensor rank of an im2col map: NWC (3), NHWC (4), NDHWC (5)
/// (`cuTensorMapEncodeIm2col`: "tensorRank ... must be 3, 4, or 5").
pub const IM2COL_RANKS: std::ops::RangeInclusive<usize> = 3..=5;

/// A plain-data description of one TMA **im2col** tile (`cuTensorMapEncodeIm2col`,
/// `cp.async.bulk.tensor.{3,4,5}d...im2col`): an activation tensor `[N][W][C]`, `[N][H][W][C]`
/// or `[N][D][H][W][C]` (outer -> inner, as tiled tiles are written), and what one load takes
/// from it: `pixels_per_column` pixels, walked W fastest through the bounding box the corners
/// define, `channels_per_pixel` channels of each. docs/IM2COL.md and [`crate::model::im2col`]
/// say exactly which element lands where.
///
/// The spatial lists (`lower_corner`, `upper_corner`, `element_strides`; the per-call offsets)
/// have one entry per spatial dim (rank - 2), user order (`[H][W]` for NHWC). Interleave is
/// always none. Unchecked: [`crate::validate::validate_im2col`] makes a
/// [`crate::validate::ValidIm2col`].
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Im2colSpec {
    /// Names the generated helper (`tma_<name>`). An identifier.
    pub name: String,
    pub dtype: DType,
    /// Dim names (outer -> inner); default `N, W, C` / `N, H, W, C` / `N, D, H, W, C`.
    pub dim_names: Vec<Option<String>>,
    /// Global extent of each dim, outer -> inner, in elements.
    pub global: Vec<Extent>,
    /// Global strides in elements, outer -> inner; the innermost (C) is 1. `None`: dense.
    pub strides: Option<Vec<Extent>>,
    /// Channels each pixel contributes to one load (`channelsPerPixel`): the box of C.
    pub channels_per_pixel: u32,
    /// Pixels one load takes (`pixelsPerColumn`): the rows of the shared-memory tile.
    pub pixels_per_column: u32,
    /// The bounding box's lower corner per spatial dim (`pixelBoxLowerCorner`, user order):
    /// the box starts `lower` positions from the tensor's first pixel (`-padding` for a
    /// convolution).
    pub lower_corner: Vec<i32>,
    /// The bounding box's upper corner per spatial dim (`pixelBoxUpperCorner`, user order):
    /// the box ends (exclusive) at `extent + upper` (docs/IM2COL.md on the two formulas in use).
    pub upper_corner: Vec<i32>,
    /// Traversal stride per spatial dim (the convolution's stride), in [1, 8]; N and C are
    /// encoded with 1.
    pub element_strides: Vec<u32>,
    pub swizzle: Swizzle,
    pub l2_promotion: L2Promotion,
    pub oob_fill: OobFill,
    pub target: Arch,
    /// The box as a `wgmma.mma_async` operand (`None`: not one). Its shared memory is the
    /// `[pixels][channels]` box ([`Im2colSpec::smem_view`]), so the operand rules and the
    /// descriptors are the tiled ones: `Operand::A, Major::K` makes M the pixels and K the
    /// channels (an implicit GEMM's A).
    pub wgmma: Option<WgmmaOperand>,
}

impl Im2colSpec {
    /// An im2col spec over a tensor of `global` (outer -> inner, rank 3-5), every option at
    /// its default: dense strides, corners 0 (the box is the tensor), unit traversal strides,
    /// no swizzle, zero fill.
    pub fn new(
        name: impl Into<String>,
        dtype: DType,
        global: impl IntoIterator<Item = u64>,
        channels_per_pixel: u32,
        pixels_per_column: u32,
    ) -> Im2colSpec {
        let global: Vec<Extent> = global.into_iter().map(Extent::Static).collect();
        let rank = global.len();
        let spatial = rank.saturating_sub(2);
        let defaults: &[&str] = match rank {
            3 => &["N", "W", "C"],
            4 => &["N", "H", "W", "C"],
            5 => &["N", "D", "H", "W", "C"],
            _ => &[],
        };
        let dim_names = if defaults.is_empty() {
            vec![None; rank]
        } else {
            defaults.iter().map(|n| Some((*n).to_string())).collect()
        };
        Im2colSpec {
            name: name.into(),
            dtype,
            dim_names,
            global,
            strides: None,
            channels_per_pixel,
            pixels_per_column,
            lower_corner: vec![0; spatial],
            upper_corner: vec![0; spatial],
            element_strides: vec![1; spatial],
            swizzle: Swizzle::None,
            l2_promotion: L2Promotion::None,
            oob_fill: OobFill::Zero,
            target: Arch::Sm90a,
            wgmma: None,
        }
    }

    /// The rank: number of global dims (N, the spatial dims, C).
    pub fn rank(&self) -> usize {
        self.global.len()
    }
    /// Spatial dims: rank - 2 (W; H, W; D, H, W).
    pub fn spatial_rank(&self) -> usize {
        self.rank().saturating_sub(2)
    }
    pub fn dim_names<S: Into<String>>(mut self, names: impl IntoIterator<Item = S>) -> Self {
        self.dim_names = names.into_iter().map(|n| Some(n.into())).collect();
        self
    }
    pub fn global_extents(mut self, global: impl IntoIterator<Item = Extent>) -> Self {
        self.global = global.into_iter().collect();
        self
    }
    pub fn strides(mut self, strides: impl IntoIterator<Item = u64>) -> Self {
        self.strides = Some(strides.into_iter().map(Extent::Static).collect());
        self
    }
    pub fn stride_extents(mut self, strides: impl IntoIterator<Item = Extent>) -> Self {
        self.strides = Some(strides.into_iter().collect());
        self
    }
    /// The bounding box's corners, user order (`[H][W]` for NHWC).
    pub fn corners(
        mut self,
        lower: impl IntoIterator<Item = i32>,
        upper: impl IntoIterator<Item = i32>,
    ) -> Self {
        self.lower_corner = lower.into_iter().collect();
        self.upper_corner = upper.into_iter().collect();
        self
    }
    /// Traversal strides of the spatial dims, user order.
    pub fn element_strides(mut self, s: impl IntoIterator<Item = u32>) -> Self {
        self.element_strides = s.into_iter().collect();
        self
    }
    pub fn swizzle(mut self, s: Swizzle) -> Self {
        self.swizzle = s;
        self
    }
    pub fn l2_promotion(mut self, l: L2Promotion) -> Self {
        self.l2_promotion = l;
        self
    }
    pub fn oob_fill(mut self, o: OobFill) -> Self {
        self.oob_fill = o;
        self
    }
    pub fn target(mut self, a: Arch) -> Self {
        self.target = a;
        self
    }
    /// Declares the box a `wgmma.mma_async` operand: the `[pixels][channels]` box read as a
    /// matrix, so `Operand::A, Major::K` gives M = pixels, K = channels (the rules and the
    /// descriptor are those of a tiled `[pixels][channels]` operand tile; see
    /// [`Im2colSpec::smem_view`]).
    pub fn wgmma(mut self, operand: Operand, major: Major) -> Self {
        self.wgmma = Some(WgmmaOperand { operand, major });
        self
    }

    /// The name of user dim `d`, if given.
    pub fn dim_name(&self, d: usize) -> Option<&str> {
        self.dim_names.get(d).and_then(|n| n.as_deref())
    }
    /// The name dim `d` has in generated CUDA: its name, or `d<d>`.
    pub fn dim_label(&self, d: usize) -> String {
        self.dim_name(d)
            .map_or_else(|| format!("d{d}"), ToString::to_string)
    }

    /// The tiled tile that reads the same tensor one pixel at a time: box 1 along N and the
    /// spatial dims, `channels_per_pixel` along C, unit element strides, no repeats. The rules
    /// im2col shares with tiled mode (names, data type, global dims and strides, the channel
    /// box's 16-byte multiple and swizzle span, OOB fill, target) are stated once, on tiled
    /// specs; validation runs them on this view and renames their findings to the im2col
    /// fields. Its lists have the spec's rank whatever they hold.
    pub fn tensor_view(&self) -> TileSpec {
        let rank = self.rank();
        let mut boxed = vec![1u32; rank];
        if let Some(c) = boxed.last_mut() {
            *c = self.channels_per_pixel;
        }
        TileSpec {
            name: self.name.clone(),
            dtype: self.dtype,
            dim_names: self.dim_names.clone(),
            global: self.global.clone(),
            strides: self.strides.clone(),
            element_strides: vec![1; rank],
            repeat: vec![1; rank],
            boxed,
            interleave: Interleave::None,
            swizzle: self.swizzle,
            l2_promotion: self.l2_promotion,
            oob_fill: self.oob_fill,
            smem_stride: None,
            target: self.target,
            wgmma: None,
        }
    }

    /// The tiled tile whose one box lands in shared memory exactly as one im2col load does:
    /// `[pixels_per_column][channels_per_pixel]`, each pixel a row (padded to the swizzle span
    /// when narrower), the swizzle applied to the whole. [`crate::smem`] lays it out; nothing
    /// about shared memory is computed twice. It carries the spec's wgmma operand, so an
    /// operand box is checked and described (descriptors, k-slices) as a tiled one.
    pub fn smem_view(&self) -> TileSpec {
        let (p, c) = (self.pixels_per_column, self.channels_per_pixel);
        let mut view = TileSpec::new(
            self.name.clone(),
            self.dtype,
            [u64::from(p), u64::from(c)],
            [p, c],
        )
        .swizzle(self.swizzle)
        .target(self.target);
        view.wgmma = self.wgmma;
        view
    }
}
