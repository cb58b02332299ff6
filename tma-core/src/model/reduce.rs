//! The reductions of `cp.reduce.async.bulk.tensor`: which types take which operation (one
//! table, [`ReduceOp::supported_types`]) and what each does to an element ([`combine`]).

use super::float::{BF16, F16};
use crate::dtype::DType;
use std::fmt;

/// A reduction of `cp.reduce.async.bulk.tensor` (`.add .min .max .inc .dec .and .or .xor`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ReduceOp {
    Add,
    Min,
    Max,
    And,
    Or,
    Xor,
    Inc,
    Dec,
}

impl ReduceOp {
    pub const ALL: [ReduceOp; 8] = [
        ReduceOp::Add,
        ReduceOp::Min,
        ReduceOp::Max,
        ReduceOp::And,
        ReduceOp::Or,
        ReduceOp::Xor,
        ReduceOp::Inc,
        ReduceOp::Dec,
    ];

    /// The PTX spelling (`add`, `min`, ...).
    pub fn ptx_name(self) -> &'static str {
        match self {
            ReduceOp::Add => "add",
            ReduceOp::Min => "min",
            ReduceOp::Max => "max",
            ReduceOp::And => "and",
            ReduceOp::Or => "or",
            ReduceOp::Xor => "xor",
            ReduceOp::Inc => "inc",
            ReduceOp::Dec => "dec",
        }
    }

    /// The tensor-map types the operation takes: the one table of supported reductions
    /// (the renderer emits exactly these, so an unsupported one fails to compile instead of
    /// trapping). From the PTX ISA (`cp.reduce.async.bulk.tensor`: `.add` on `.u32 .s32 .u64
    /// .f32 .f16 .bf16`; `.min/.max` on `.u32 .s32 .u64 .s64 .f16 .bf16`; `.inc/.dec` on
    /// `.u32`; `.and/.or/.xor` on `.b32 .b64`), less what an H100 (driver 580) traps on: an
    /// INT64 map raises "illegal instruction" on add/and/or/xor (min/max run, and every op
    /// runs on a UINT64 map; encode the map as `u64` for those). `.add` on `i32` is the same
    /// bits as `.u32`.
    pub fn supported_types(self) -> &'static [DType] {
        use DType::*;
        match self {
            ReduceOp::Add => &[U32, I32, U64, F32, F32Ftz, F16, BF16],
            ReduceOp::Min | ReduceOp::Max => &[U32, I32, U64, I64, F16, BF16],
            ReduceOp::Inc | ReduceOp::Dec => &[U32],
            ReduceOp::And | ReduceOp::Or | ReduceOp::Xor => &[U32, I32, U64],
        }
    }

    /// True when the hardware takes this reduction on a tensor map of `dtype`.
    pub fn supports(self, dtype: DType) -> bool {
        self.supported_types().contains(&dtype)
    }
}

impl fmt::Display for ReduceOp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.ptx_name())
    }
}

/// Whether `.add` on f32 flushes subnormal inputs and results to sign-preserving zero.
/// The PTX ISA says so of `red`/`atom` `.add.f32` and spells the 16-bit bulk adds `.noftz`,
/// implying the f32 bulk add flushes. **Unverified on hardware** for the tensor form.
pub const F32_ADD_FLUSHES_SUBNORMALS: bool = true;

/// Combines one element `src` into `dst` (little-endian bytes of `dtype`) with `op`.
/// Callers check [`ReduceOp::supports`] first; unsupported pairs leave `dst` unchanged.
///
/// - Integers: `add` wraps; `min`/`max` compare signed for `i32`/`i64`; `inc` is
///   `dst >= src ? 0 : dst + 1` and `dec` is `dst == 0 || dst > src ? src : dst - 1`
///   (PTX `atom.inc`/`atom.dec`).
/// - f32 `add`: IEEE round to nearest even, subnormals flushed per
///   [`F32_ADD_FLUSHES_SUBNORMALS`]; a NaN result is the canonical `0x7fffffff`.
/// - f16/bf16 `add`: the exact sum rounded once to nearest even (computed in f64, which holds
///   every f16 sum exactly and cannot double-round a bf16 one); subnormals kept (`.noftz`);
///   a NaN result is `0x7fff`.
/// - f16/bf16 `min`/`max`: a NaN operand yields the other; both NaN yield `0x7fff`;
///   `-0 < +0`.
pub fn combine(op: ReduceOp, dtype: DType, dst: &mut [u8], src: &[u8]) {
    match dtype.size_bytes() {
        Some(2) => {
            let (Ok(d), Ok(s)) = (<[u8; 2]>::try_from(&*dst), <[u8; 2]>::try_from(src)) else {
                return;
            };
            let (d, s) = (u16::from_le_bytes(d), u16::from_le_bytes(s));
            let fmt = match dtype {
                DType::F16 => F16,
                DType::BF16 => BF16,
                _ => return,
            };
            let r = match op {
                ReduceOp::Add => fmt.round(fmt.value(d) + fmt.value(s)),
                ReduceOp::Min => fmt.min_max(d, s, true),
                ReduceOp::Max => fmt.min_max(d, s, false),
                _ => return,
            };
            dst.copy_from_slice(&r.to_le_bytes());
        }
        Some(4) => {
            let (Ok(d), Ok(s)) = (<[u8; 4]>::try_from(&*dst), <[u8; 4]>::try_from(src)) else {
                return;
            };
            let (d, s) = (u32::from_le_bytes(d), u32::from_le_bytes(s));
            let r = match (dtype, op) {
                (DType::F32 | DType::F32Ftz, ReduceOp::Add) => f32_add(d, s),
                (DType::F32 | DType::F32Ftz, _) => return,
                (_, ReduceOp::Add) => d.wrapping_add(s),
                (DType::I32, ReduceOp::Min) => (d as i32).min(s as i32) as u32,
                (DType::I32, ReduceOp::Max) => (d as i32).max(s as i32) as u32,
                (_, ReduceOp::Min) => d.min(s),
                (_, ReduceOp::Max) => d.max(s),
                (_, ReduceOp::And) => d & s,
                (_, ReduceOp::Or) => d | s,
                (_, ReduceOp::Xor) => d ^ s,
                (_, ReduceOp::Inc) => {
                    if d >= s {
                        0
                    } else {
                        d + 1
                    }
                }
                (_, ReduceOp::Dec) => {
                    if d == 0 || d > s {
                        s
                    } else {
                        d - 1
                    }
                }
            };
            dst.copy_from_slice(&r.to_le_bytes());
        }
        Some(8) => {
            let (Ok(d), Ok(s)) = (<[u8; 8]>::try_from(&*dst), <[u8; 8]>::try_from(src)) else {
                return;
            };
            let (d, s) = (u64::from_le_bytes(d), u64::from_le_bytes(s));
            let signed = dtype == DType::I64;
            let r = match op {
                ReduceOp::Add => d.wrapping_add(s),
                ReduceOp::Min if signed => (d as i64).min(s as i64) as u64,
                ReduceOp::Max if signed => (d as i64).max(s as i64) as u64,
                ReduceOp::Min => d.min(s),
                ReduceOp::Max => d.max(s),
                ReduceOp::And => d & s,
                ReduceOp::Or => d | s,
                ReduceOp::Xor => d ^ s,
                ReduceOp::Inc | ReduceOp::Dec => return,
            };
            dst.copy_from_slice(&r.to_le_bytes());
        }
        _ => {}
    }
}

fn f32_add(d: u32, s: u32) -> u32 {
    let flush = |x: f32| {
        if F32_ADD_FLUSHES_SUBNORMALS && x.is_subnormal() {
            if x.is_sign_negative() {
                -0.0
            } else {
                0.0
            }
        } else {
            x
        }
    };
    let r = flush(flush(f32::from_bits(d)) + flush(f32::from_bits(s)));
    if r.is_nan() {
        0x7fff_ffff
    } else {
        r.to_bits()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integer_reductions() {
        let mut d = 5u32.to_le_bytes();
        combine(ReduceOp::Inc, DType::U32, &mut d, &5u32.to_le_bytes());
        assert_eq!(u32::from_le_bytes(d), 0);
        let mut d = 0u32.to_le_bytes();
        combine(ReduceOp::Dec, DType::U32, &mut d, &7u32.to_le_bytes());
        assert_eq!(u32::from_le_bytes(d), 7);
        let mut d = (-3i32).to_le_bytes();
        combine(ReduceOp::Min, DType::I32, &mut d, &2i32.to_le_bytes());
        assert_eq!(i32::from_le_bytes(d), -3);
        let mut d = (-3i32).to_le_bytes();
        combine(ReduceOp::Min, DType::U32, &mut d, &2i32.to_le_bytes());
        assert_eq!(i32::from_le_bytes(d), 2);
    }

    #[test]
    fn half_min_max_and_add() {
        let mut d = 0x8000u16.to_le_bytes(); // -0
        combine(ReduceOp::Max, DType::F16, &mut d, &0u16.to_le_bytes());
        assert_eq!(u16::from_le_bytes(d), 0);
        let mut d = 0x7e00u16.to_le_bytes(); // NaN
        combine(ReduceOp::Min, DType::BF16, &mut d, &0x3f80u16.to_le_bytes());
        assert_eq!(u16::from_le_bytes(d), 0x3f80);
        let mut d = 0x3c00u16.to_le_bytes(); // 1.0 + 1.0
        combine(ReduceOp::Add, DType::F16, &mut d, &0x3c00u16.to_le_bytes());
        assert_eq!(u16::from_le_bytes(d), 0x4000);
    }
}
