//! The CPU model of an im2col load (`cp.async.bulk.tensor.{3,4,5}d.shared::cluster.global
//! .im2col`): which element of the tensor lands at which shared-memory byte, bit for bit.
//!
//! # The walk (what this model implements; docs/IM2COL.md says it with pictures)
//!
//! Names, user order: the tensor is `[N][S_0]..[S_k][C]` (k + 1 = rank - 2 spatial dims:
//! W; H, W; D, H, W), the spec gives per spatial dim `i` a lower corner `lo_i`, an upper
//! corner `up_i` and a traversal stride `e_i`; a load gives coordinates `(n, s_0 .. s_k, c)`
//! and offsets `(o_0 .. o_k)`.
//!
//! 1. **Bounding box.** Along spatial dim `i` the box is the half-open range
//!    `[lo_i, extent_i + up_i)` of *positions* (PTX ISA, "Tensors: im2col mode": the
//!    Bounding-Box Lower-Corner and Upper-Corner, relative to the tensor's first and last
//!    pixel; the Triton Gluon tutorial `13-tma-im2col.py` measured it half-open:
//!    `[lower, H + upper)`). The load's spatial coordinates are the first position and must lie
//!    in the box ([`crate::Rule::Im2colStartOutsideBox`]).
//! 2. **Pixels.** `pixels_per_column` pixels are taken, one per position, the last spatial dim
//!    fastest: after a position, `s_k += e_k`; a position that reaches the box's end
//!    (`>= extent_k + up_k`) wraps to `lo_k` and carries into the next-outer spatial dim
//!    (`s_{k-1} += e_{k-1}`, the same rule), and past the outermost spatial dim into the
//!    next image (`n += 1`, every spatial position back at its lower corner). The Gluon
//!    tutorial's examples 4 and 5 show the wrap to the next row and image; CUTLASS's
//!    `make_im2col_tma_copy_desc` counts `(extent + upper - lower - 1) / stride + 1`
//!    positions per dim (the strided walk from the lower corner).
//! 3. **Offsets.** The pixel read at position `(n, s)` is `(n, s_i + o_i)`: the offsets (the
//!    filter tap) shift the whole box (Gluon: "Lower bound = pixel_box_lower_corner +
//!    offsets"; CUTLASS passes the filter position `(r, s, t) * dilation` there).
//! 4. **Channels.** Each pixel contributes `channels_per_pixel` elements `c .. c + cpp - 1`.
//! 5. **Out of bounds.** An element with `n` outside `[0, N)`, a pixel outside `[0, extent_i)`
//!    or a channel outside `[0, C)` is filled as tiled loads fill (zeros, or the OOB-NaN of
//!    [`super::oob_nan_bytes`]); every element counts towards the mbarrier's bytes
//!    (`pixels x channels x size`, [`crate::ValidIm2col::tx_bytes`]).
//! 6. **Shared memory.** Pixel `p` is row `p` of the `[pixels][channels]` box of
//!    [`crate::Im2colSpec::smem_view`], laid out and swizzled as a tiled box is
//!    ([`crate::smem::ElementOffsets`]): rows padded to the swizzle span when narrower, the
//!    swizzle's XOR applied last. TF32 maps round on the way in ([`super::convert_on_load`]).
//!
//! What is unverified until the H100 test (tests/gpu_im2col_model.rs) has run: the wrap
//! target (`lo_i`, not `lo_i` plus the start's phase modulo the stride), the N step (1; the
//! driver's N traversal stride is encoded as 1), the upper corner's half-open reading
//! (CUTLASS/Gluon `upper = pad - (R - 1) * dilation` versus CubeCL's "padding - kernel_size -
//! 1"), and the channel coordinate's 16-byte rule (the tiled mode's, seen on an H100).

use super::{convert_on_load, oob_nan_bytes, ModelError};
use crate::smem::ElementOffsets;
use crate::spec::OobFill;
use crate::validate::BoundIm2col;

/// One element of an im2col load.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Im2colElement {
    /// Byte offset in shared memory from the load's (period-aligned) base, after swizzling.
    pub smem: u64,
    /// Byte offset in global memory from the tensor's base; `None` out of bounds (filled).
    pub global: Option<u64>,
    /// The tensor index read (user order: n, the spatial dims after the offsets, c); may lie
    /// outside the tensor.
    pub index: Vec<i64>,
    /// The pixel's row in the load, `0 .. pixels_per_column`.
    pub pixel: u64,
    /// The channel's column, `0 .. channels_per_pixel`.
    pub channel: u64,
}

/// The pixels one load takes, in order: each `(n, spatial position + offset ...)`, user order,
/// before the channels (step 1-3 of the module docs). Checks the call first.
pub fn pixels(
    bound: &BoundIm2col,
    coords: &[i64],
    offsets: &[i64],
) -> Result<Vec<Vec<i64>>, ModelError> {
    bound.check_call(coords, offsets)?;
    let spec = bound.spec();
    let k = spec.spatial_rank();
    let mut n = coords[0];
    let mut pos: Vec<i64> = coords[1..=k].to_vec();
    let boxes: Vec<(i64, i64)> = (0..k).map(|i| bound.bounding_box(i)).collect();
    let mut out = Vec::with_capacity(spec.pixels_per_column as usize);
    for _ in 0..spec.pixels_per_column {
        let mut pixel = Vec::with_capacity(k + 1);
        pixel.push(n);
        pixel.extend(pos.iter().zip(offsets).map(|(&s, &o)| s + o));
        out.push(pixel);
        let mut carry = true;
        for i in (0..k).rev() {
            pos[i] += i64::from(spec.element_strides[i]);
            if pos[i] < boxes[i].1 {
                carry = false;
                break;
            }
            pos[i] = boxes[i].0;
        }
        if carry {
            n += 1;
        }
    }
    Ok(out)
}

/// Every element one load moves, pixel by pixel, channels innermost.
pub fn elements(
    bound: &BoundIm2col,
    coords: &[i64],
    offsets: &[i64],
) -> Result<Vec<Im2colElement>, ModelError> {
    let spec = bound.spec();
    if spec.dtype.is_packed() {
        return Err(ModelError::PackedType { dtype: spec.dtype });
    }
    let esize = spec.dtype.size_bytes().unwrap_or(1);
    let pixels = pixels(bound, coords, offsets)?;
    let offsets_of = ElementOffsets::of(&spec.smem_view(), bound.plan())
        .ok_or(ModelError::PackedType { dtype: spec.dtype })?;
    let rank = spec.rank();
    let global = bound.global();
    // Byte strides of N and the spatial dims (user order); C is contiguous.
    let byte_strides = bound.tensor().byte_strides();
    let c0 = coords[rank - 1];
    let mut out = Vec::with_capacity(pixels.len() * spec.channels_per_pixel as usize);
    for (p, pixel) in pixels.iter().enumerate() {
        let mut in_bounds = true;
        let mut base = 0u64;
        for (d, &x) in pixel.iter().enumerate() {
            if x < 0 || x as u64 >= global[d] {
                in_bounds = false;
            } else {
                base += x as u64 * byte_strides[d];
            }
        }
        for j in 0..u64::from(spec.channels_per_pixel) {
            let c = c0 + j as i64;
            let inside = in_bounds && c >= 0 && (c as u64) < global[rank - 1];
            let mut index = pixel.clone();
            index.push(c);
            out.push(Im2colElement {
                smem: offsets_of.offset(&[p as u64, j], 0).unwrap_or(u64::MAX),
                global: inside.then(|| base + c as u64 * esize),
                index,
                pixel: p as u64,
                channel: j,
            });
        }
    }
    Ok(out)
}

/// The shared-memory bytes one im2col load writes (`plan().footprint_bytes` long, padding
/// left 0). `global` holds the tensor's bytes from its base address.
pub fn load(
    bound: &BoundIm2col,
    global: &[u8],
    coords: &[i64],
    offsets: &[i64],
) -> Result<Vec<u8>, ModelError> {
    let spec = bound.spec();
    let needed = bound.extent_bytes();
    if (global.len() as u64) < needed {
        return Err(ModelError::GlobalTooSmall {
            needed,
            got: global.len() as u64,
        });
    }
    let esize = spec.dtype.size_bytes().unwrap_or(0) as usize;
    let fill = match spec.oob_fill {
        OobFill::NanRequestZeroFma if spec.dtype.is_float() => oob_nan_bytes(spec.dtype),
        _ => vec![0u8; esize],
    };
    let len = bound.plan().footprint_bytes;
    let mut out = vec![0u8; len as usize];
    for e in elements(bound, coords, offsets)? {
        let s = e.smem as usize;
        let dst = out.get_mut(s..s + esize).ok_or(ModelError::SmemTooSmall {
            needed: e.smem + esize as u64,
            got: len,
        })?;
        match e.global {
            Some(g) => {
                let g = g as usize;
                let src = global.get(g..g + esize).ok_or(ModelError::GlobalTooSmall {
                    needed: (g + esize) as u64,
                    got: global.len() as u64,
                })?;
                dst.copy_from_slice(src);
                convert_on_load(spec.dtype, dst);
            }
            None => dst.copy_from_slice(&fill),
        }
    }
    Ok(out)
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::panic)]
mod tests {
    use super::*;
    use crate::{validate_im2col, DType, Im2colSpec, Swizzle};

    fn bound(spec: Im2colSpec) -> BoundIm2col {
        match validate_im2col(&spec) {
            Ok(v) => v.bound().unwrap(),
            Err(e) => panic!("{e}"),
        }
    }

    /// The value of pixel `(n, h, w)` of the Gluon tutorial's tensors: `1 + n*16 + h*4 + w`.
    fn gluon_value(p: &[i64]) -> i64 {
        if p[1] < 0 || p[1] >= 4 || p[2] < 0 || p[2] >= 4 || p[0] >= 2 {
            0
        } else {
            1 + p[0] * 16 + p[1] * 4 + p[2]
        }
    }

    fn walk(lower: [i32; 2], upper: [i32; 2], coords: [i64; 4], offsets: [i64; 2]) -> Vec<i64> {
        let b =
            bound(Im2colSpec::new("g", DType::F32, [2, 4, 4, 32], 32, 16).corners(lower, upper));
        pixels(&b, &coords, &offsets)
            .unwrap()
            .iter()
            .map(|p| gluon_value(p))
            .collect()
    }

    /// The five loads of Triton's Gluon tutorial (13-tma-im2col.py), values by hand there.
    #[test]
    fn gluon_tutorial_examples() {
        let all: Vec<i64> = (1..=16).collect();
        assert_eq!(walk([0, 0], [0, 0], [0, 0, 0, 0], [0, 0]), all);
        assert_eq!(
            walk([-1, -1], [-1, -1], [0, -1, -1, 0], [0, 0]),
            [0, 0, 0, 0, 0, 1, 2, 3, 0, 5, 6, 7, 0, 9, 10, 11]
        );
        assert_eq!(walk([-1, -1], [-1, -1], [0, -1, -1, 0], [1, 1]), all);
        assert_eq!(
            walk([0, 0], [0, 0], [0, 1, 3, 0], [0, 0]),
            (8..=23).collect::<Vec<i64>>()
        );
        assert_eq!(
            walk([-1, -1], [-1, -1], [0, 1, 2, 0], [0, 0]),
            [7, 0, 9, 10, 11, 0, 0, 0, 0, 0, 17, 18, 19, 0, 21, 22]
        );
    }

    /// A strided 3x3 convolution's walk: stride 2, pad 1 on a 5-wide image gives 3 output
    /// columns (-1, 1, 3), then the next output row.
    #[test]
    fn strided_walk_wraps_to_the_lower_corner() {
        // CUTLASS/Gluon: upper = pad - (R - 1) * dilation = 1 - 2 = -1.
        let b = bound(
            Im2colSpec::new("s", DType::F16, [1, 5, 5, 8], 8, 6)
                .corners([-1, -1], [-1, -1])
                .element_strides([2, 2]),
        );
        let p = pixels(&b, &[0, -1, -1, 0], &[0, 0]).unwrap();
        let hw: Vec<(i64, i64)> = p.iter().map(|x| (x[1], x[2])).collect();
        assert_eq!(hw, [(-1, -1), (-1, 1), (-1, 3), (1, -1), (1, 1), (1, 3)]);
        // Tap (2, 1) of the filter reads two rows down, one column right.
        let p = pixels(&b, &[0, -1, -1, 0], &[2, 1]).unwrap();
        assert_eq!((p[4][1], p[4][2]), (3, 2));
    }

    /// Bytes: channels in a row, rows at the swizzle span, the 128B XOR, OOB zeros, the
    /// count the mbarrier expects.
    #[test]
    fn bytes_land_as_a_swizzled_pixels_by_channels_box() {
        let b = bound(
            Im2colSpec::new("b", DType::U8, [1, 2, 3, 32], 32, 8)
                .swizzle(Swizzle::B128)
                .corners([0, 0], [0, 0]),
        );
        assert_eq!(b.valid().tx_bytes(), 8 * 32);
        // 8 rows padded to 128 B.
        assert_eq!(b.plan().footprint_bytes, 8 * 128);
        let global: Vec<u8> = (0..(2 * 3 * 32)).map(|i| i as u8).collect();
        let smem = load(&b, &global, &[0, 0, 1, 0], &[0, 0]).unwrap();
        // Pixel 0 = (h 0, w 1): channel j at row 0, byte j.
        assert_eq!(smem[5], global[32 + 5]);
        // Pixel 2 = (h 1, w 0): row 2, chunk 0 ^ 2 = 2.
        assert_eq!(smem[2 * 128 + 2 * 16 + 3], global[3 * 32 + 3]);
        // Pixels 5.. are image 1: out of bounds (N = 1), zero.
        assert!(smem[5 * 128..].iter().all(|&x| x == 0));
    }

    #[test]
    fn calls_outside_the_rules_are_refused() {
        let b = bound(Im2colSpec::new("r", DType::F16, [1, 4, 4, 16], 16, 4));
        for (coords, offsets) in [
            (vec![0, 0, 0, 3], vec![0, 0]),   // C not on 16 bytes
            (vec![0, 4, 0, 0], vec![0, 0]),   // start past the box
            (vec![0, 0, 0, 0], vec![256, 0]), // offset past 8 bits
            (vec![0, 0, 0, 0], vec![-1, 0]),
        ] {
            assert!(
                pixels(&b, &coords, &offsets).is_err(),
                "{coords:?} {offsets:?}"
            );
        }
    }
}
