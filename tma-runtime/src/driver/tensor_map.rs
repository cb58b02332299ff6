//! `CUtensorMap` from a bound spec and a device buffer, checked before the driver sees it.

use std::sync::Arc;

use cudarc::driver::sys;
use cudarc::driver::{CudaSlice, CudaStream, DevicePtr, DeviceRepr};
use tma_core::limits::{TENSOR_MAP_ALIGN, TENSOR_MAP_BYTES};
use tma_core::{BoundIm2col, BoundSpec, DType, EncodeArgs, Im2colEncodeArgs};

use super::capture::{refuse_if_capturing, CaptureOp};
use super::cu_enums::{cu_dtype, cu_interleave, cu_l2, cu_oob, cu_swizzle};
use crate::error::Error;

/// One TMA descriptor: cudarc's `CUtensorMap` (CUDA 13: 128 bytes, 128-byte aligned), whose
/// size and alignment are checked at compile time against [`TENSOR_MAP_BYTES`] and
/// [`TENSOR_MAP_ALIGN`], the numbers the generated CUDA declares its `CUtensorMap` with.
/// Pushed to kernels BY VALUE (`builder.arg(&map)` copies the 128 bytes into the parameter
/// space): declare the kernel parameter `const __grid_constant__ CUtensorMap map`.
///
/// The map holds the buffer's address: keep the buffer alive while kernels use the map.
#[repr(transparent)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct TensorMap(pub sys::CUtensorMap);

// The device side declares `CUtensorMap` from tma_core's numbers (templates/prelude.cuh.tera
// static_asserts them); a cudarc or CUDA upgrade that changes the host type fails here.
const _: () = assert!(
    std::mem::size_of::<sys::CUtensorMap>() == TENSOR_MAP_BYTES,
    "cudarc's CUtensorMap size differs from tma_core::limits::TENSOR_MAP_BYTES"
);
const _: () = assert!(
    std::mem::align_of::<sys::CUtensorMap>() == TENSOR_MAP_ALIGN,
    "cudarc's CUtensorMap alignment differs from tma_core::limits::TENSOR_MAP_ALIGN"
);

// SAFETY: `CUtensorMap` is plain bytes the driver wrote; a kernel parameter of type
// `CUtensorMap` is exactly this layout (`repr(transparent)` over cudarc's `repr(C, align)`
// binding of cuda.h), so pushing `&TensorMap` passes it by value.
unsafe impl DeviceRepr for TensorMap {}

/// Rust element types a TMA buffer may hold, and the data types each carries.
pub trait TmaElement: DeviceRepr {
    /// The Rust type's name, for errors.
    const NAME: &'static str;
    /// The data types whose elements are values of this type: [`TensorMap::new`] encodes a
    /// map of one of them over a buffer of this type, and refuses the others, also those
    /// of the same size (a bf16 map over `half::f16` or `u16` data would read their bits as
    /// bf16). [`TensorMap::new_raw_bits`] takes any type of the right size. Empty for a type
    /// that only holds raw bits.
    const CARRIES: &'static [DType] = &[];
}

macro_rules! element {
    ($($t:ty => $name:literal: [$($d:ident),*]),* $(,)?) => {
        $(impl TmaElement for $t {
            const NAME: &'static str = $name;
            const CARRIES: &'static [DType] = &[$(DType::$d),*];
        })*
    };
}
// TMA has one 8-bit and one 16-bit integer type, and moves bits: signed or unsigned storage
// both carry them (fp8 data travels as u8). Packed sub-byte types travel in byte buffers.
element!(
    u8 => "u8": [U8, E4M3, E5M2, U4x16Align8B, U4x16Align16B, U6x16Align16B],
    i8 => "i8": [U8],
    u16 => "u16": [U16],
    i16 => "i16": [U16],
    u32 => "u32": [U32],
    i32 => "i32": [I32],
    u64 => "u64": [U64],
    i64 => "i64": [I64],
    f32 => "f32": [F32, F32Ftz, TF32, TF32Ftz],
    f64 => "f64": [F64],
    half::f16 => "half::f16": [F16],
    half::bf16 => "half::bf16": [BF16],
);

/// A Rust type whose size carries `dtype`, for suggestions.
fn suggest(dtype: DType) -> &'static str {
    match dtype {
        DType::U8 => "u8 / i8",
        DType::E4M3 | DType::E5M2 => "u8 (fp8 bits)",
        DType::U16 => "u16 / i16",
        DType::F16 => "half::f16",
        DType::BF16 => "half::bf16",
        DType::U32 | DType::I32 => "u32 / i32",
        DType::F32 | DType::F32Ftz | DType::TF32 | DType::TF32Ftz => "f32",
        DType::U64 | DType::I64 => "u64 / i64",
        DType::F64 => "f64",
        DType::U4x16Align8B | DType::U4x16Align16B | DType::U6x16Align16B => "u8 (packed bytes)",
    }
}

/// Checks, before any driver call, that a buffer of `T` at `addr` holding `len_bytes` can back
/// `bound`: `T` carries the spec's data type ([`TmaElement::CARRIES`]), the base address is
/// aligned, the buffer holds the tensor's extent.
pub fn check_buffer<T: TmaElement>(
    bound: &BoundSpec,
    addr: u64,
    len_bytes: u64,
) -> Result<(), Error> {
    check(
        bound,
        addr,
        len_bytes,
        T::NAME,
        std::mem::size_of::<T>(),
        Some(T::CARRIES),
    )
}

/// [`check_buffer`] for a buffer that keeps the spec's elements as raw bits in another type of
/// the same size (bf16 data in a `u16` buffer): only the size of `T` must match.
pub fn check_buffer_bits<T: TmaElement>(
    bound: &BoundSpec,
    addr: u64,
    len_bytes: u64,
) -> Result<(), Error> {
    check(
        bound,
        addr,
        len_bytes,
        T::NAME,
        std::mem::size_of::<T>(),
        None,
    )
}

/// The buffer checks; `carries`: the data types the element type carries, or `None` for raw
/// bits (size only).
fn check(
    bound: &BoundSpec,
    addr: u64,
    len_bytes: u64,
    rust_type: &'static str,
    size: usize,
    carries: Option<&[DType]>,
) -> Result<(), Error> {
    let spec = bound.spec();
    let size_ok = match spec.dtype.size_bytes() {
        Some(b) => b == size as u64,
        None => size == 1, // packed sub-byte types travel in byte buffers
    };
    if !size_ok {
        return Err(Error::DTypeMismatch {
            tile: spec.name.clone(),
            spec_dtype: spec.dtype,
            spec_bits: spec.dtype.global_bits(),
            rust_type,
            rust_bytes: size,
            suggestion: suggest(spec.dtype),
        });
    }
    if carries.is_some_and(|c| !c.contains(&spec.dtype)) {
        return Err(Error::ElementTypeMismatch {
            tile: spec.name.clone(),
            spec_dtype: spec.dtype,
            rust_type,
            suggestion: suggest(spec.dtype),
        });
    }
    bound.check_base_address(addr)?;
    let needed = bound.extent_bytes();
    if len_bytes < needed {
        return Err(Error::BufferTooSmall {
            tile: spec.name.clone(),
            needed_bytes: needed,
            buffer_bytes: len_bytes,
        });
    }
    Ok(())
}

impl TensorMap {
    /// Encodes `bound` over a device buffer (`CudaSlice` or `CudaView`). Checks first that the
    /// element type carries the spec's data type (a bf16 map takes `half::bf16`, not
    /// `half::f16` or `u16`: see [`TensorMap::new_raw_bits`]), the alignment and the length;
    /// a driver refusal returns [`Error::Encode`] printing every argument.
    pub fn new<T: TmaElement, B: DevicePtr<T>>(
        bound: &BoundSpec,
        buffer: &B,
    ) -> Result<TensorMap, Error> {
        TensorMap::encode_over(bound, buffer, check_buffer::<T>)
    }

    /// [`TensorMap::new`] over a buffer that keeps the map's elements as raw bits in another
    /// Rust type of the same size: bf16 or f16 data in a `u16` buffer, say. The opt-in for
    /// what [`TensorMap::new`] refuses as [`Error::ElementTypeMismatch`]; the size, alignment
    /// and length are still checked.
    pub fn new_raw_bits<T: TmaElement, B: DevicePtr<T>>(
        bound: &BoundSpec,
        buffer: &B,
    ) -> Result<TensorMap, Error> {
        TensorMap::encode_over(bound, buffer, check_buffer_bits::<T>)
    }

    /// Encodes an im2col tile over a device buffer (`cuTensorMapEncodeIm2col`), after the
    /// checks of [`TensorMap::new`] on the tensor (element type, alignment, length). A driver
    /// refusal returns [`Error::EncodeIm2col`] printing every argument.
    pub fn new_im2col<T: TmaElement, B: DevicePtr<T>>(
        bound: &BoundIm2col,
        buffer: &B,
    ) -> Result<TensorMap, Error> {
        let args = Im2colEncodeArgs::new(bound);
        TensorMap::checked_over(bound.tensor(), buffer, check_buffer::<T>, |ptr| {
            // SAFETY: a context is current (checked_over binds it) and libcuda is loaded.
            unsafe { encode_im2col_args(&args, ptr) }
        })
    }

    /// [`TensorMap::new_im2col`] over raw bits of another type of the same size (see
    /// [`TensorMap::new_raw_bits`]).
    pub fn new_im2col_raw_bits<T: TmaElement, B: DevicePtr<T>>(
        bound: &BoundIm2col,
        buffer: &B,
    ) -> Result<TensorMap, Error> {
        let args = Im2colEncodeArgs::new(bound);
        TensorMap::checked_over(bound.tensor(), buffer, check_buffer_bits::<T>, |ptr| {
            // SAFETY: a context is current (checked_over binds it) and libcuda is loaded.
            unsafe { encode_im2col_args(&args, ptr) }
        })
    }

    /// Encodes `bound` over `buffer` after `check` accepted its address and length.
    fn encode_over<T: TmaElement, B: DevicePtr<T>>(
        bound: &BoundSpec,
        buffer: &B,
        check: fn(&BoundSpec, u64, u64) -> Result<(), Error>,
    ) -> Result<TensorMap, Error> {
        TensorMap::checked_over(bound, buffer, check, |ptr| {
            // SAFETY: the buffer was checked to hold the tensor; encoding only reads the
            // arguments; a context is current.
            unsafe { encode_unchecked(bound, ptr) }
        })
    }

    /// Checks `buffer` against `bound` (the tensor a tiled or im2col map reads), makes its
    /// context current, then runs `encode` on its address.
    fn checked_over<T: TmaElement, B: DevicePtr<T>>(
        bound: &BoundSpec,
        buffer: &B,
        check: fn(&BoundSpec, u64, u64) -> Result<(), Error>,
        encode: impl FnOnce(u64) -> Result<TensorMap, Error>,
    ) -> Result<TensorMap, Error> {
        crate::cuda_libs::libcuda_available()?;
        let stream: &Arc<CudaStream> = buffer.stream();
        // The encode is host only (legal in a capture); taking the address is not, when it
        // waits on an event recorded before a capture of the buffer's stream.
        super::capture::refuse_tracked_use(stream)?;
        let (ptr, _record) = buffer.device_ptr(stream);
        check(bound, ptr, buffer.num_bytes() as u64)?;
        stream
            .context()
            .bind_to_thread()
            .map_err(Error::driver("cuCtxSetCurrent"))?;
        encode(ptr)
    }

    /// Encodes `bound` over a `CudaSlice` (same as [`TensorMap::new`]).
    pub fn from_slice<T: TmaElement>(
        bound: &BoundSpec,
        buffer: &CudaSlice<T>,
    ) -> Result<TensorMap, Error> {
        TensorMap::new(bound, buffer)
    }

    /// Encodes `bound` over raw device memory of `len_bytes` at `ptr`, holding elements of `T`.
    ///
    /// # Safety
    /// `ptr .. ptr + len_bytes` must be device memory of the current context that stays
    /// allocated while kernels use the map. A context must be current on this thread.
    pub unsafe fn from_raw<T: TmaElement>(
        bound: &BoundSpec,
        ptr: u64,
        len_bytes: u64,
    ) -> Result<TensorMap, Error> {
        crate::cuda_libs::libcuda_available()?;
        check_buffer::<T>(bound, ptr, len_bytes)?;
        // SAFETY: forwarded from the caller.
        unsafe { encode_unchecked(bound, ptr) }
    }

    /// The raw descriptor.
    pub fn as_raw(&self) -> &sys::CUtensorMap {
        &self.0
    }
}

/// `cuTensorMapEncodeTiled` with the arguments of `bound` at `addr`.
///
/// # Safety
/// libcuda is loaded and a context is current.
unsafe fn encode_unchecked(bound: &BoundSpec, addr: u64) -> Result<TensorMap, Error> {
    // SAFETY: forwarded from the caller; a bound spec's arguments have the right lengths.
    unsafe { encode_args(&EncodeArgs::new(bound), addr) }
}

/// `cuTensorMapEncodeTiled` on raw arguments, checked by nothing but the driver. For tests
/// that compare the validator with the driver; real code uses [`TensorMap::new`].
///
/// # Safety
/// libcuda is loaded and a context is current on this thread.
pub unsafe fn encode_args(a: &EncodeArgs, addr: u64) -> Result<TensorMap, Error> {
    let rank = a.rank as usize;
    if a.global_dim.len() != rank
        || a.box_dim.len() != rank
        || a.element_strides.len() != rank
        || a.global_strides.len() + 1 != rank.max(1)
    {
        return Err(Error::InvalidLaunch {
            kernel: "cuTensorMapEncodeTiled".into(),
            reason: format!("argument lists do not match rank {rank}:\n{a}"),
        });
    }
    let mut map = std::mem::MaybeUninit::<sys::CUtensorMap>::zeroed();
    // SAFETY: every array holds `rank` (strides: rank - 1) entries, checked above; the map
    // is a valid out-pointer; the driver only reads the arguments.
    let r = unsafe {
        sys::cuTensorMapEncodeTiled(
            map.as_mut_ptr(),
            cu_dtype(a.data_type),
            a.rank,
            addr as *mut std::ffi::c_void,
            a.global_dim.as_ptr(),
            a.global_strides.as_ptr(),
            a.box_dim.as_ptr(),
            a.element_strides.as_ptr(),
            cu_interleave(a.interleave),
            cu_swizzle(a.swizzle),
            cu_l2(a.l2_promotion),
            cu_oob(a.oob_fill),
        )
    };
    match r.result() {
        // SAFETY: the driver wrote the map on success (and it was zeroed before).
        Ok(()) => Ok(TensorMap(unsafe { map.assume_init() })),
        Err(result) => Err(Error::Encode {
            result: result.into(),
            global_address: addr,
            args: Box::new(a.clone()),
        }),
    }
}

/// `cuTensorMapEncodeIm2col` on raw arguments, checked by nothing but the driver: for tests
/// that compare the im2col validator with the driver; real code uses
/// [`TensorMap::new_im2col`].
///
/// # Safety
/// libcuda is loaded and a context is current on this thread.
pub unsafe fn encode_im2col_args(a: &Im2colEncodeArgs, addr: u64) -> Result<TensorMap, Error> {
    let rank = a.rank as usize;
    let spatial = rank.saturating_sub(2);
    if a.global_dim.len() != rank
        || a.element_strides.len() != rank
        || a.global_strides.len() + 1 != rank.max(1)
        || a.lower_corner.len() != spatial.min(3)
        || a.upper_corner.len() != spatial.min(3)
    {
        return Err(Error::InvalidLaunch {
            kernel: "cuTensorMapEncodeIm2col".into(),
            reason: format!("argument lists do not match rank {rank}:\n{a}"),
        });
    }
    // The corners go in arrays of 3 whatever the rank, so a driver that reads them before
    // refusing a rank outside 3-5 reads initialised memory.
    let mut lower = [0i32; 3];
    let mut upper = [0i32; 3];
    for (dst, src) in [(&mut lower, &a.lower_corner), (&mut upper, &a.upper_corner)] {
        for (d, s) in dst.iter_mut().zip(src) {
            *d = *s;
        }
    }
    let mut map = std::mem::MaybeUninit::<sys::CUtensorMap>::zeroed();
    // SAFETY: the dim, stride and element-stride arrays hold the entries the rank asks for
    // (checked above), the corner arrays 3 (the most any rank has); the map is a valid
    // out-pointer; the driver only reads the arguments.
    let r = unsafe {
        sys::cuTensorMapEncodeIm2col(
            map.as_mut_ptr(),
            cu_dtype(a.data_type),
            a.rank,
            addr as *mut std::ffi::c_void,
            a.global_dim.as_ptr(),
            a.global_strides.as_ptr(),
            lower.as_ptr(),
            upper.as_ptr(),
            a.channels_per_pixel,
            a.pixels_per_column,
            a.element_strides.as_ptr(),
            cu_interleave(a.interleave),
            cu_swizzle(a.swizzle),
            cu_l2(a.l2_promotion),
            cu_oob(a.oob_fill),
        )
    };
    match r.result() {
        // SAFETY: the driver wrote the map on success (and it was zeroed before).
        Ok(()) => Ok(TensorMap(unsafe { map.assume_init() })),
        Err(result) => Err(Error::EncodeIm2col {
            result: result.into(),
            global_address: addr,
            args: Box::new(a.clone()),
        }),
    }
}

/// N tensor maps in device global memory, for kernels that index many descriptors
/// (e.g. 192, one per head and layer). The kernel reads `&maps[i]` as a
/// `const CUtensorMap*`: issue `prefetch.tensormap` on it (`tma_prefetch_tensormap`) and
/// `fence.proxy.tensormap::generic.acquire.gpu` before the first TMA with a map that was
/// written after the kernel started (uploads before launch are ordered by the stream).
#[derive(Debug)]
pub struct TensorMapArray {
    maps: Vec<TensorMap>,
    device: CudaSlice<TensorMap>,
}

// SAFETY: every bit pattern of a TensorMap is fine to allocate and zero (the driver ignores
// an all-zero map until encoded).
unsafe impl cudarc::driver::ValidAsZeroBits for TensorMap {}

impl TensorMapArray {
    /// Uploads `maps` on `stream` (not while it is being captured: [`CaptureOp::MapUpload`]).
    /// The device copy is aligned as `CUtensorMap` requires
    /// (driver allocations are 256-byte aligned, checked here against [`TENSOR_MAP_ALIGN`];
    /// elements are `size_of::<CUtensorMap>()` apart).
    pub fn upload(stream: &Arc<CudaStream>, maps: Vec<TensorMap>) -> Result<TensorMapArray, Error> {
        crate::cuda_libs::libcuda_available()?;
        refuse_if_capturing(stream, CaptureOp::MapUpload)?;
        let device = stream
            .clone_htod(&maps)
            .map_err(Error::driver("cuMemcpyHtoD"))?;
        check_array_address(device.device_ptr(stream).0)?;
        Ok(TensorMapArray { maps, device })
    }
    /// Replaces map `i` (host and device). Kernels already running see it only after the
    /// tensormap fence.
    pub fn set(&mut self, stream: &Arc<CudaStream>, i: usize, map: TensorMap) -> Result<(), Error> {
        let Some(slot) = self.maps.get_mut(i) else {
            return Err(Error::InvalidLaunch {
                kernel: "TensorMapArray::set".into(),
                reason: format!("index {i} out of {} maps", self.maps.len()),
            });
        };
        refuse_if_capturing(stream, CaptureOp::MapUpload)?;
        *slot = map;
        let mut view = self.device.slice_mut(i..i + 1);
        stream
            .memcpy_htod(std::slice::from_ref(&map), &mut view)
            .map_err(Error::driver("cuMemcpyHtoD"))
    }
    /// The host copies.
    pub fn maps(&self) -> &[TensorMap] {
        &self.maps
    }
    /// The device array (push it as a kernel argument: a `const CUtensorMap*`).
    pub fn device(&self) -> &CudaSlice<TensorMap> {
        &self.device
    }
    /// The number of maps.
    pub fn len(&self) -> usize {
        self.maps.len()
    }
    /// True when there are no maps.
    pub fn is_empty(&self) -> bool {
        self.maps.is_empty()
    }
}

/// A device array of maps must start at a multiple of the `CUtensorMap` alignment: the kernel
/// indexes it as `const CUtensorMap*`.
fn check_array_address(address: u64) -> Result<(), Error> {
    if address % TENSOR_MAP_ALIGN as u64 == 0 {
        Ok(())
    } else {
        Err(Error::TensorMapArrayMisaligned {
            address,
            align: TENSOR_MAP_ALIGN,
        })
    }
}

#[cfg(test)]
#[allow(clippy::panic, clippy::unwrap_used)]
mod tests {
    use super::*;
    use tma_core::{validate, TileSpec};

    fn bound(spec: TileSpec) -> BoundSpec {
        validate(&spec).unwrap().bound().unwrap()
    }

    #[test]
    fn size_and_alignment_follow_the_driver_struct() {
        assert_eq!(std::mem::size_of::<TensorMap>(), TENSOR_MAP_BYTES);
        assert_eq!(std::mem::align_of::<TensorMap>(), TENSOR_MAP_ALIGN);
    }

    #[test]
    fn map_arrays_start_at_the_map_alignment() {
        assert!(check_array_address(0x7f00_0000_0000).is_ok());
        assert!(check_array_address(0x7f00_0000_0000 + TENSOR_MAP_ALIGN as u64).is_ok());
        let off = 0x7f00_0000_0000 + TENSOR_MAP_ALIGN as u64 / 2;
        match check_array_address(off) {
            Err(e @ Error::TensorMapArrayMisaligned { .. }) => {
                assert!(e.to_string().contains(&format!("{off:#x}")), "{e}");
            }
            other => panic!("expected a misalignment error, got {other:?}"),
        }
    }

    #[test]
    fn buffer_checks_run_before_the_driver() {
        let b = bound(TileSpec::new(
            "deform_value",
            DType::F16,
            [94, 162, 32],
            [2, 2, 32],
        ));
        let need = b.extent_bytes();
        assert_eq!(need, 94 * 162 * 32 * 2);
        assert!(check_buffer::<half::f16>(&b, 0x1000, need).is_ok());
        // Same size, another type: refused unless asked for as raw bits.
        for refused in [
            check_buffer::<u16>(&b, 0x1000, need),
            check_buffer::<half::bf16>(&b, 0x1000, need),
            check_buffer::<i16>(&b, 0x1000, need),
        ] {
            assert!(
                matches!(
                    refused,
                    Err(Error::ElementTypeMismatch {
                        spec_dtype: DType::F16,
                        ..
                    })
                ),
                "{refused:?}"
            );
        }
        assert!(check_buffer_bits::<u16>(&b, 0x1000, need).is_ok());
        assert!(check_buffer_bits::<half::bf16>(&b, 0x1000, need).is_ok());
        assert!(matches!(
            check_buffer_bits::<f32>(&b, 0x1000, need),
            Err(Error::DTypeMismatch { .. })
        ));
        assert!(matches!(
            check_buffer_bits::<u16>(&b, 0x1000, need - 2),
            Err(Error::BufferTooSmall { .. })
        ));
        let bf = bound(TileSpec::new("q", DType::BF16, [64, 64], [64, 64]));
        match check_buffer::<half::f16>(&bf, 0x1000, 64 * 64 * 2) {
            Err(e @ Error::ElementTypeMismatch { .. }) => assert_eq!(
                e.to_string(),
                "tile `q` is bf16 but the buffer holds `half::f16`, another type of the same size whose \
                 bits mean something else; use a buffer of half::bf16, or TensorMap::new_raw_bits to \
                 encode over bf16 bits kept as `half::f16`"
            ),
            other => panic!("{other:?}"),
        }
        // Every type carries what it is, and only types of its size.
        for d in DType::ALL {
            let carriers = [
                (u8::CARRIES, 1),
                (i8::CARRIES, 1),
                (u16::CARRIES, 2),
                (i16::CARRIES, 2),
                (u32::CARRIES, 4),
                (i32::CARRIES, 4),
                (f32::CARRIES, 4),
                (u64::CARRIES, 8),
                (i64::CARRIES, 8),
                (f64::CARRIES, 8),
                (half::f16::CARRIES, 2),
                (half::bf16::CARRIES, 2),
            ];
            let by: Vec<u64> = carriers
                .iter()
                .filter(|(c, _)| c.contains(&d))
                .map(|(_, size)| *size)
                .collect();
            assert!(!by.is_empty(), "{d} has no Rust type");
            assert!(
                by.iter().all(|&s| s == d.size_bytes().unwrap_or(1)),
                "{d}: {by:?}"
            );
        }
        match check_buffer::<f32>(&b, 0x1000, need) {
            Err(Error::DTypeMismatch {
                rust_type: "f32",
                rust_bytes: 4,
                spec_dtype: DType::F16,
                ..
            }) => {}
            other => panic!("{other:?}"),
        }
        match check_buffer::<half::f16>(&b, 0x1008, need) {
            Err(e @ Error::Spec(_)) => assert!(e.to_string().contains("16-byte aligned"), "{e}"),
            other => panic!("{other:?}"),
        }
        match check_buffer::<half::f16>(&b, 0x1000, need - 2) {
            Err(Error::BufferTooSmall {
                needed_bytes,
                buffer_bytes,
                ..
            }) => {
                assert_eq!((needed_bytes, buffer_bytes), (need, need - 2))
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn encode_error_prints_every_argument() {
        let b = bound(TileSpec::new("t", DType::BF16, [4096, 1024], [64, 64]));
        let e = Error::Encode {
            result: crate::error::CuResult(sys::CUresult::CUDA_ERROR_INVALID_VALUE),
            global_address: 0x7f00_0000_0000,
            args: Box::new(EncodeArgs::new(&b)),
        };
        let s = e.to_string();
        for needle in [
            "tensorDataType = CU_TENSOR_MAP_DATA_TYPE_BFLOAT16",
            "globalDim      = [1024, 4096]",
            "boxDim         = [64, 64]",
            "CUDA_ERROR_INVALID_VALUE",
            "0x7f0000000000",
        ] {
            assert!(s.contains(needle), "{needle} missing from:\n{s}");
        }
    }
}
