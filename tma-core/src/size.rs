//! Counts of elements and bytes computed from user input, with arithmetic that cannot wrap.
//!
//! A spec may describe sizes no machine has: a `u8` tensor of `[2^32, 2^32]` spans 2^64
//! bytes, an `f64` stride of 2^61 elements is 2^64 bytes. Plain `u64` arithmetic would wrap
//! such a number to a small one in release builds (and panic in debug builds). A [`Size`]
//! instead remembers that it overflowed, through any chain of operations, like a NaN; the
//! validator turns an overflowed size into a finding that names the field
//! ([`crate::Rule::SizeOverflow`]). Every size of the spec, plan and bound shape is computed
//! through this type once, and stored as a plain `u64` only after it was proven to fit.

use std::fmt;
use std::iter::{Product, Sum};
use std::ops::{Add, Mul, Sub};

/// A `u64` count, or "overflowed" once any operation that made it overflowed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Size(Option<u64>);

impl Size {
    /// Zero.
    pub const ZERO: Size = Size(Some(0));
    /// The overflowed size.
    pub const OVERFLOW: Size = Size(None);

    /// A size that fits.
    pub const fn new(v: u64) -> Size {
        Size(Some(v))
    }

    /// The value, or `None` when a step overflowed `u64`.
    pub fn get(self) -> Option<u64> {
        self.0
    }

    /// True when the value is known and less than `limit` (an overflowed size never is).
    pub fn is_below(self, limit: u64) -> bool {
        self.0.is_some_and(|v| v < limit)
    }

    /// `ceil(self / d)`; `d = 0` overflows.
    pub fn div_ceil(self, d: u64) -> Size {
        Size(self.0.and_then(|v| (d != 0).then(|| v.div_ceil(d))))
    }

    /// `floor(self / d)`; `d = 0` overflows.
    pub fn div_floor(self, d: u64) -> Size {
        Size(self.0.and_then(|v| v.checked_div(d)))
    }

    /// The smallest multiple of `m` that is `>= self`; `m = 0` overflows.
    pub fn next_multiple_of(self, m: u64) -> Size {
        Size(self.0.and_then(|v| v.checked_next_multiple_of(m)))
    }

    /// `self % m == 0`; false when overflowed or `m = 0`.
    pub fn is_multiple_of(self, m: u64) -> bool {
        self.0.is_some_and(|v| m != 0 && v % m == 0)
    }
}

impl From<u64> for Size {
    fn from(v: u64) -> Size {
        Size::new(v)
    }
}

impl From<u32> for Size {
    fn from(v: u32) -> Size {
        Size::new(u64::from(v))
    }
}

impl<T: Into<Size>> Add<T> for Size {
    type Output = Size;
    fn add(self, rhs: T) -> Size {
        let rhs = rhs.into();
        Size(self.0.zip(rhs.0).and_then(|(a, b)| a.checked_add(b)))
    }
}

impl<T: Into<Size>> Mul<T> for Size {
    type Output = Size;
    fn mul(self, rhs: T) -> Size {
        let rhs = rhs.into();
        Size(self.0.zip(rhs.0).and_then(|(a, b)| a.checked_mul(b)))
    }
}

/// Subtraction below zero overflows too: no size is negative.
impl<T: Into<Size>> Sub<T> for Size {
    type Output = Size;
    fn sub(self, rhs: T) -> Size {
        let rhs = rhs.into();
        Size(self.0.zip(rhs.0).and_then(|(a, b)| a.checked_sub(b)))
    }
}

impl<T: Into<Size>> Sum<T> for Size {
    fn sum<I: Iterator<Item = T>>(iter: I) -> Size {
        iter.fold(Size::ZERO, |acc, x| acc + x)
    }
}

impl<T: Into<Size>> Product<T> for Size {
    fn product<I: Iterator<Item = T>>(iter: I) -> Size {
        iter.fold(Size::new(1), |acc, x| acc * x)
    }
}

impl fmt::Display for Size {
    /// The number, or `more than 2^64 - 1` when it overflowed.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            Some(v) => write!(f, "{v}"),
            None => f.write_str("more than 2^64 - 1"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overflow_poisons_every_later_step() {
        let big = Size::new(1 << 32);
        assert_eq!((big * (1u64 << 31)).get(), Some(1 << 63));
        let over = big * big;
        assert_eq!(over.get(), None);
        let zero = Size::new(u64::from(over.get().is_some()));
        assert_eq!((over * zero + 1u64).get(), None);
        assert_eq!((Size::new(3) - 4u64).get(), None);
        assert_eq!(Size::new(5).div_ceil(0).get(), None);
        assert_eq!(Size::new(5).next_multiple_of(4).get(), Some(8));
        assert_eq!(Size::new(u64::MAX).next_multiple_of(16).get(), None);
        assert_eq!(
            [1u64 << 40, 1 << 30].into_iter().product::<Size>(),
            Size::OVERFLOW
        );
        assert_eq!([u64::MAX, 1].into_iter().sum::<Size>(), Size::OVERFLOW);
        assert!(!over.is_below(u64::MAX) && Size::new(3).is_below(4));
        assert_eq!(over.to_string(), "more than 2^64 - 1");
    }
}
