//! The driver's encode arguments ([`EncodeArgs`]): the one place dims are reversed to TMA
//! order (innermost first) and element strides become byte strides.

use crate::dtype::DType;
use crate::spec::{Im2colSpec, Interleave, L2Promotion, OobFill, Swizzle, TileSpec};
use crate::validate::{BoundIm2col, BoundSpec};

/// Reverses a per-dim list from the user's order (outer -> inner) to TMA order
/// (innermost first: X = the contiguous dim). Every other module calls this; none
/// reverses on its own.
pub fn to_tma_order<T: Clone>(user_order: &[T]) -> Vec<T> {
    user_order.iter().rev().cloned().collect()
}

/// For TMA dim `t` (innermost first), the user dim it comes from.
pub fn user_dim_of_tma_dim(rank: usize, t: usize) -> usize {
    rank - 1 - t
}

/// Exactly the arguments `cuTensorMapEncodeTiled` takes (all but the map and base address).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct EncodeArgs {
    pub data_type: DType,
    pub rank: u32,
    /// `globalDim`, innermost first.
    pub global_dim: Vec<u64>,
    /// `globalStrides` in bytes, innermost first, without dim 0 (rank - 1 entries).
    pub global_strides: Vec<u64>,
    /// `boxDim`, innermost first.
    pub box_dim: Vec<u32>,
    /// `elementStrides`, innermost first.
    pub element_strides: Vec<u32>,
    pub interleave: Interleave,
    pub swizzle: Swizzle,
    pub l2_promotion: L2Promotion,
    pub oob_fill: OobFill,
}

impl EncodeArgs {
    /// The encode arguments of a bound spec: its byte strides were computed and checked
    /// when it was bound.
    pub fn new(bound: &BoundSpec) -> EncodeArgs {
        EncodeArgs::assemble(bound.spec(), bound.global(), bound.byte_strides())
    }

    /// The arguments an unchecked spec would pass, for testing the validator against the
    /// driver. Use [`EncodeArgs::new`] for real work: only a bound spec is known to be valid.
    /// `global` and `strides` (elements) are in user order. The innermost stride is dropped
    /// (TMA's dim 0 has none); a byte stride that does not fit in 64 bits becomes `u64::MAX`,
    /// which the driver refuses like any stride of 2^40 B or more.
    pub fn from_parts(spec: &TileSpec, global: &[u64], strides: &[u64]) -> EncodeArgs {
        let outer = &strides[..strides.len().saturating_sub(1)];
        let byte_strides: Vec<u64> = outer
            .iter()
            .map(|&s| spec.dtype.global_bytes(s).get().unwrap_or(u64::MAX))
            .collect();
        EncodeArgs::assemble(spec, global, &byte_strides)
    }

    /// Reverses everything to TMA order. `byte_strides` are the outer dims' (user order).
    fn assemble(spec: &TileSpec, global: &[u64], byte_strides: &[u64]) -> EncodeArgs {
        EncodeArgs {
            data_type: spec.dtype,
            rank: u32::try_from(spec.rank()).unwrap_or(u32::MAX),
            global_dim: to_tma_order(global),
            global_strides: to_tma_order(byte_strides),
            box_dim: to_tma_order(&spec.boxed),
            element_strides: to_tma_order(&spec.element_strides),
            interleave: spec.interleave,
            swizzle: spec.swizzle,
            l2_promotion: spec.l2_promotion,
            oob_fill: spec.oob_fill,
        }
    }
}

impl std::fmt::Display for EncodeArgs {
    /// Every argument, the way ThunderKittens' `format_tma_error` prints them: what a
    /// person needs to read a driver refusal.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(f, "cuTensorMapEncodeTiled(")?;
        writeln!(
            f,
            "  tensorDataType = {} ({})",
            self.data_type.cu_name(),
            self.data_type.cu_value()
        )?;
        writeln!(f, "  tensorRank     = {}", self.rank)?;
        writeln!(
            f,
            "  globalDim      = {:?}  (innermost first)",
            self.global_dim
        )?;
        writeln!(
            f,
            "  globalStrides  = {:?}  (bytes, dim 0 omitted)",
            self.global_strides
        )?;
        writeln!(f, "  boxDim         = {:?}", self.box_dim)?;
        writeln!(f, "  elementStrides = {:?}", self.element_strides)?;
        writeln!(f, "  interleave     = {}", self.interleave.cu_name())?;
        writeln!(f, "  swizzle        = {}", self.swizzle.cu_name())?;
        writeln!(f, "  l2Promotion    = {}", self.l2_promotion.cu_name())?;
        write!(f, "  oobFill        = {})", self.oob_fill.cu_name())
    }
}

/// Exactly the arguments `cuTensorMapEncodeIm2col` takes (all but the map and base address),
/// in TMA order: the one place an im2col spec's lists are reversed.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Im2colEncodeArgs {
    pub data_type: DType,
    pub rank: u32,
    /// `globalDim`, innermost first: C, W, H, D, N.
    pub global_dim: Vec<u64>,
    /// `globalStrides` in bytes, innermost first, without C's (rank - 1 entries).
    pub global_strides: Vec<u64>,
    /// `pixelBoxLowerCorner`, innermost first: W, H, D.
    pub lower_corner: Vec<i32>,
    /// `pixelBoxUpperCorner`, innermost first: W, H, D.
    pub upper_corner: Vec<i32>,
    pub channels_per_pixel: u32,
    pub pixels_per_column: u32,
    /// `elementStrides`, innermost first: 1 for C, the spatial traversal strides, 1 for N.
    pub element_strides: Vec<u32>,
    /// Always [`Interleave::None`]: im2col tiles are not interleaved.
    pub interleave: Interleave,
    pub swizzle: Swizzle,
    pub l2_promotion: L2Promotion,
    pub oob_fill: OobFill,
}

impl Im2colEncodeArgs {
    /// The encode arguments of a bound im2col spec.
    pub fn new(bound: &BoundIm2col) -> Im2colEncodeArgs {
        Im2colEncodeArgs::assemble(bound.spec(), bound.global(), bound.tensor().byte_strides())
    }

    /// The arguments an unchecked spec would pass, for testing the validator against the
    /// driver (see [`EncodeArgs::from_parts`]). `global` and `strides` (elements) are in user
    /// order; lists of the wrong length are passed as they are.
    pub fn from_parts(spec: &Im2colSpec, global: &[u64], strides: &[u64]) -> Im2colEncodeArgs {
        let outer = &strides[..strides.len().saturating_sub(1)];
        let byte_strides: Vec<u64> = outer
            .iter()
            .map(|&s| spec.dtype.global_bytes(s).get().unwrap_or(u64::MAX))
            .collect();
        Im2colEncodeArgs::assemble(spec, global, &byte_strides)
    }

    fn assemble(spec: &Im2colSpec, global: &[u64], byte_strides: &[u64]) -> Im2colEncodeArgs {
        // N and C traverse every element; the spatial dims by the convolution's stride.
        let mut element_strides = vec![1u32];
        element_strides.extend(&spec.element_strides);
        element_strides.push(1);
        Im2colEncodeArgs {
            data_type: spec.dtype,
            rank: u32::try_from(spec.rank()).unwrap_or(u32::MAX),
            global_dim: to_tma_order(global),
            global_strides: to_tma_order(byte_strides),
            lower_corner: to_tma_order(&spec.lower_corner),
            upper_corner: to_tma_order(&spec.upper_corner),
            channels_per_pixel: spec.channels_per_pixel,
            pixels_per_column: spec.pixels_per_column,
            element_strides: to_tma_order(&element_strides),
            interleave: Interleave::None,
            swizzle: spec.swizzle,
            l2_promotion: spec.l2_promotion,
            oob_fill: spec.oob_fill,
        }
    }
}

impl std::fmt::Display for Im2colEncodeArgs {
    /// Every argument, as [`EncodeArgs`] prints them.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(f, "cuTensorMapEncodeIm2col(")?;
        writeln!(
            f,
            "  tensorDataType      = {} ({})",
            self.data_type.cu_name(),
            self.data_type.cu_value()
        )?;
        writeln!(f, "  tensorRank          = {}", self.rank)?;
        writeln!(
            f,
            "  globalDim           = {:?}  (innermost first)",
            self.global_dim
        )?;
        writeln!(
            f,
            "  globalStrides       = {:?}  (bytes, dim 0 omitted)",
            self.global_strides
        )?;
        writeln!(
            f,
            "  pixelBoxLowerCorner = {:?}  (W first)",
            self.lower_corner
        )?;
        writeln!(
            f,
            "  pixelBoxUpperCorner = {:?}  (W first)",
            self.upper_corner
        )?;
        writeln!(f, "  channelsPerPixel    = {}", self.channels_per_pixel)?;
        writeln!(f, "  pixelsPerColumn     = {}", self.pixels_per_column)?;
        writeln!(f, "  elementStrides      = {:?}", self.element_strides)?;
        writeln!(f, "  interleave          = {}", self.interleave.cu_name())?;
        writeln!(f, "  swizzle             = {}", self.swizzle.cu_name())?;
        writeln!(f, "  l2Promotion         = {}", self.l2_promotion.cu_name())?;
        write!(f, "  oobFill             = {})", self.oob_fill.cu_name())
    }
}

#[cfg(test)]
#[allow(clippy::panic)]
mod tests {
    use super::*;
    use crate::{validate, DType, Swizzle, TileSpec};

    /// The deformable-attention seed: `[H=94][W=162][C=32]` f16, a 2x2x32 box.
    #[test]
    fn deformable_attention_seed_layout() {
        let spec = TileSpec::new("deform_value", DType::F16, [94, 162, 32], [2, 2, 32])
            .dim_names(["H", "W", "C"]);
        let bound = validate(&spec).and_then(|v| v.bind(&[94, 162, 32], None));
        let bound = match bound {
            Ok(b) => b,
            Err(e) => panic!("{e}"),
        };
        let args = EncodeArgs::new(&bound);
        assert_eq!(args.rank, 3);
        assert_eq!(args.global_dim, vec![32, 162, 94]);
        assert_eq!(args.global_strides, vec![64, 10368]);
        assert_eq!(args.box_dim, vec![32, 2, 2]);
        assert_eq!(args.element_strides, vec![1, 1, 1]);
        // Coordinates in user order {h, w, c} go to the hardware as {c, w, h}.
        assert_eq!(to_tma_order(&[7, 5, 0]), vec![0, 5, 7]);
        assert_eq!(bound.valid().tx_bytes(), 2 * 2 * 32 * 2);
    }

    /// Mirage MPK's example: 4096 x 1024 bf16, box 64 x 64, 128B swizzle, repeat 1 x 2,
    /// smem stride 4096 elements.
    #[test]
    fn mpk_seed_layout() {
        let spec = TileSpec::new("mpk_a", DType::BF16, [4096, 1024], [64, 64])
            .swizzle(Swizzle::B128)
            .repeat([1, 2])
            .smem_stride(4096);
        let valid = match validate(&spec) {
            Ok(v) => v,
            Err(e) => panic!("{e}"),
        };
        assert_eq!(valid.tx_bytes(), 16384);
        let plan = valid.plan();
        assert_eq!(
            (plan.box_bytes, plan.boxes, plan.stride_bytes),
            (8192, 2, 8192)
        );
        assert_eq!(plan.align_bytes, 1024);
        let places = valid.repeat_placements();
        assert_eq!(places[1].global_offset, vec![0, 64]);
        assert_eq!(places[1].smem_offset, 8192);
        let args = EncodeArgs::new(
            &valid
                .bound()
                .into_iter()
                .next()
                .unwrap_or_else(|| panic!("static")),
        );
        assert_eq!(args.global_dim, vec![1024, 4096]);
        assert_eq!(args.global_strides, vec![2048]);
        assert_eq!(args.box_dim, vec![64, 64]);
    }
}
