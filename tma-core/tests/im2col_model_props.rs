//! Properties of the im2col model on random specs and loads (the GPU test's generator): every
//! load places `pixels x channels` elements at distinct, element-aligned bytes inside the
//! footprint, as many bytes as the mbarrier expects; the walk stays in the bounding box; the
//! generated `offset(pixel, channel)` arithmetic is the model's; and the rules refuse what the
//! generator never makes.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::HashSet;
use tma_core::model::im2col;
use tma_test_support::testgen::{random_im2col, XorShift};

#[test]
fn every_load_fills_its_box_once() {
    let mut rng = XorShift::new(0x12c0);
    for _ in 0..1500 {
        let (b, coords, offsets) = random_im2col(&mut rng);
        let spec = b.spec();
        let esize = spec.dtype.size_bytes().unwrap();
        let elements = im2col::elements(&b, &coords, &offsets).unwrap();
        let n = u64::from(spec.pixels_per_column) * u64::from(spec.channels_per_pixel);
        assert_eq!(elements.len() as u64, n);
        assert_eq!(n * esize, b.valid().tx_bytes());
        let mut seen = HashSet::new();
        for e in &elements {
            assert_eq!(e.smem % esize, 0);
            assert!(e.smem + esize <= b.plan().footprint_bytes);
            assert!(seen.insert(e.smem), "two elements at byte {}", e.smem);
        }
        // Every pixel's spatial position (before the offsets) lies in the bounding box.
        for p in im2col::pixels(&b, &coords, &offsets).unwrap() {
            for i in 0..spec.spatial_rank() {
                let (lo, hi) = b.bounding_box(i);
                let pos = p[i + 1] - offsets[i];
                assert!(lo <= pos && pos < hi, "{pos} outside [{lo}, {hi})");
            }
        }
        let mut global = vec![0u8; b.extent_bytes() as usize];
        rng.fill(&mut global);
        let smem = im2col::load(&b, &global, &coords, &offsets).unwrap();
        assert_eq!(smem.len() as u64, b.plan().footprint_bytes);
    }
}

/// The rendered `offset(pixel, channel)` is the model's: the swizzle of `pixel * pitch +
/// channel * size`, the pitch the text states.
#[test]
fn rendered_offsets_state_the_models_pitch() {
    let mut rng = XorShift::new(0x0ff5e7);
    for _ in 0..40 {
        let (b, coords, offsets) = random_im2col(&mut rng);
        let code = tma_core::render::Im2colCode::new(b.valid(), 0).unwrap();
        let esize = b.spec().dtype.size_bytes().unwrap();
        let pitch = tma_core::smem::row_pitch_bytes(
            &b.spec().smem_view(),
            tma_core::smem::DEFAULT_INNER_ROW_LAYOUT,
        )
        .get()
        .unwrap();
        let text = format!("const unsigned u = pixel * {pitch}u + channel * {esize}u;");
        assert!(
            code.source().contains(&text),
            "{text} missing from {}",
            code.source()
                .lines()
                .find(|l| l.contains("const unsigned u ="))
                .unwrap_or("")
        );
        for e in im2col::elements(&b, &coords, &offsets).unwrap() {
            let u = e.pixel * pitch + e.channel * esize;
            assert_eq!(b.spec().swizzle.apply(u), e.smem);
        }
    }
}
