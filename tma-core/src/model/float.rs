//! A soft 16-bit float (f16 and bf16): exact values and round-to-nearest-even, so the model
//! can add and compare halves the way the hardware's reductions do without a float crate.

/// A 16-bit binary float format: exponent and mantissa widths.
#[derive(Clone, Copy)]
pub(crate) struct Half {
    ebits: u32,
    mbits: u32,
}

pub(crate) const F16: Half = Half {
    ebits: 5,
    mbits: 10,
};
pub(crate) const BF16: Half = Half { ebits: 8, mbits: 7 };
pub(crate) const HALF_NAN: u16 = 0x7fff;

impl Half {
    fn bias(self) -> i32 {
        (1 << (self.ebits - 1)) - 1
    }
    fn is_nan(self, b: u16) -> bool {
        let e = (u32::from(b) >> self.mbits) & ((1 << self.ebits) - 1);
        e == (1 << self.ebits) - 1 && (u32::from(b) & ((1 << self.mbits) - 1)) != 0
    }
    pub(crate) fn value(self, b: u16) -> f64 {
        let b = u32::from(b);
        let sign = if b >> 15 == 1 { -1.0 } else { 1.0 };
        let e = ((b >> self.mbits) & ((1 << self.ebits) - 1)) as i32;
        let m = f64::from(b & ((1 << self.mbits) - 1));
        let emax = (1 << self.ebits) - 1;
        let mb = self.mbits as i32;
        if e == emax {
            return if m == 0.0 {
                sign * f64::INFINITY
            } else {
                f64::NAN
            };
        }
        if e == 0 {
            return sign * m * 2f64.powi(1 - self.bias() - mb);
        }
        sign * (m + 2f64.powi(mb)) * 2f64.powi(e - self.bias() - mb)
    }
    /// Rounds `v` to this format, nearest even; NaN -> `0x7fff`.
    pub(crate) fn round(self, v: f64) -> u16 {
        if v.is_nan() {
            return HALF_NAN;
        }
        let sign: u32 = if v.is_sign_negative() { 0x8000 } else { 0 };
        let x = v.abs();
        let mb = self.mbits as i32;
        let inf = ((1u32 << self.ebits) - 1) << self.mbits;
        if x.is_infinite() {
            return (sign | inf) as u16;
        }
        if x == 0.0 {
            return sign as u16;
        }
        let emin = 1 - self.bias();
        let e = ((x.to_bits() >> 52) & 0x7ff) as i32 - 1023;
        if e < emin {
            // Subnormal (may round up to the smallest normal: the bits then read right too).
            let q = (x * 2f64.powi(mb - emin)).round_ties_even() as u32;
            return (sign | q) as u16;
        }
        let mut q = (x * 2f64.powi(mb - e)).round_ties_even() as u32;
        let mut e = e;
        if q == 1 << (self.mbits + 1) {
            q >>= 1;
            e += 1;
        }
        if e > self.bias() {
            return (sign | inf) as u16;
        }
        let field = (e + self.bias()) as u32;
        (sign | (field << self.mbits) | (q - (1 << self.mbits))) as u16
    }
    pub(crate) fn min_max(self, a: u16, b: u16, min: bool) -> u16 {
        match (self.is_nan(a), self.is_nan(b)) {
            (true, true) => return HALF_NAN,
            (true, false) => return b,
            (false, true) => return a,
            _ => {}
        }
        let (x, y) = (self.value(a), self.value(b));
        let a_first = if x == y {
            // Equal values differ only in the sign of zero: -0 is the smaller.
            (a >> 15 == 1) == min
        } else {
            (x < y) == min
        };
        if a_first {
            a
        } else {
            b
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn half_round_trips_every_finite_value() {
        for fmt in [F16, BF16] {
            for b in 0..=u16::MAX {
                if fmt.is_nan(b) {
                    continue;
                }
                assert_eq!(fmt.round(fmt.value(b)), b, "{b:#06x}");
            }
        }
    }

    #[test]
    fn half_rounding_is_nearest_even() {
        // f16: 1 + 2^-11 is the midpoint of 1 and 1 + 2^-10 -> even (1.0).
        assert_eq!(F16.round(1.0 + 2f64.powi(-11)), 0x3c00);
        assert_eq!(F16.round(1.0 + 3.0 * 2f64.powi(-11)), 0x3c02);
        assert_eq!(F16.round(65520.0), 0x7c00);
        assert_eq!(F16.round(65519.0), 0x7bff);
        // bf16: 1 + 2^-8 -> 1.0; 1 + 3 * 2^-8 -> 1 + 2^-6.
        assert_eq!(BF16.round(1.0 + 2f64.powi(-8)), 0x3f80);
        assert_eq!(BF16.round(1.0 + 3.0 * 2f64.powi(-8)), 0x3f82);
        // Smallest f16 subnormal and half of it (ties to even -> 0).
        assert_eq!(F16.round(2f64.powi(-24)), 1);
        assert_eq!(F16.round(2f64.powi(-25)), 0);
    }
}
