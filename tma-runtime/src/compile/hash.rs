//! A fast, stable 128-bit content fingerprint: XXH3-128 (the `xxhash-rust` crate). XXH3's
//! output is specified and frozen since xxHash 0.8.0: the same on every platform (endianness,
//! pointer width, SIMD or not), in every version of the crate and of Rust (unlike
//! `DefaultHasher`), so it names disk-cache files. Tens of GB/s even without AVX2 (the SSE2
//! path): 47 KB in 1.3 us on an x86-64 core. Not cryptographic: the cache trusts its own
//! directory.

use xxhash_rust::xxh3::{xxh3_128, xxh3_128_with_seed};

/// The fingerprint of `data`, seeded (different seeds give independent fingerprints).
pub(super) fn fingerprint_seeded(data: &[u8], seed: u64) -> u128 {
    xxh3_128_with_seed(data, seed)
}

/// The fingerprint of `data`.
pub(super) fn fingerprint(data: &[u8]) -> u128 {
    xxh3_128(data)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 1000 bytes that exercise XXH3's long-input path (stripes, blocks, the last stripe).
    fn sample() -> Vec<u8> {
        (0..1000u32)
            .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
            .collect()
    }

    #[test]
    fn pinned_values_of_the_reference_xxh3_128() {
        // From the reference C implementation (xxHash 0.8.x, `XXH3_128bits[_withSeed]`).
        // The disk cache names files by these: if they ever change, bump CACHE_FORMAT in
        // key.rs and MAGIC in disk.rs so no old entry is read as a new one.
        assert_eq!(fingerprint(b""), 0x99aa_06d3_0147_98d8_6001_c324_468d_497f);
        assert_eq!(
            fingerprint(&sample()),
            0xebf2_9281_9ecb_8a2c_a067_b58e_6ea5_d2f2
        );
        assert_eq!(
            fingerprint_seeded(&sample(), 0x0074_6d61_706c_616e),
            0x7711_b657_56ea_871c_0872_0b75_608c_0123
        );
    }

    #[test]
    fn stable_and_sensitive() {
        assert_eq!(fingerprint(b""), fingerprint(b""));
        assert_ne!(fingerprint(b""), fingerprint(b"\0"));
        let base = sample();
        let h = fingerprint(&base);
        for i in [0, 1, 31, 32, 500, 998, 999] {
            let mut m = base.clone();
            m[i] ^= 1;
            assert_ne!(fingerprint(&m), h, "flip at {i}");
        }
        assert_ne!(fingerprint(&base[..999]), h);
        assert_ne!(fingerprint_seeded(&base, 1), h);
        assert_eq!(
            fingerprint_seeded(&base, 0),
            h,
            "seed 0 is the unseeded hash"
        );
    }
}
