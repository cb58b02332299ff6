//! Properties of the CPU reference model over thousands of random valid specs, plus small
//! hand-checked cases.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use proptest::prelude::*;
use tma_core::model::{self, ModelOptions, ReduceOp};
use tma_core::smem::{ElementOffsets, InnerRowLayout};
use tma_core::{validate, Arch, BoundSpec, DType, OobFill, Swizzle, TileSpec};
use tma_test_support::testgen::{random_valid_spec, XorShift};

fn bind(spec: &TileSpec) -> BoundSpec {
    let v = validate(spec).unwrap_or_else(|e| panic!("{e}"));
    let g: Vec<u64> = spec.global.iter().map(|e| e.get().unwrap()).collect();
    v.bind(&g, None).unwrap_or_else(|e| panic!("{e}"))
}

fn random_global(bound: &BoundSpec, rng: &mut XorShift) -> Vec<u8> {
    let mut g = vec![0u8; bound.extent_bytes() as usize];
    rng.fill(&mut g);
    g
}

fn both_layouts() -> [ModelOptions; 2] {
    [
        ModelOptions {
            inner_rows: InnerRowLayout::PadToSpan,
        },
        ModelOptions {
            inner_rows: InnerRowLayout::Dense,
        },
    ]
}

/// The fill bytes an OOB element gets.
fn fill_of(bound: &BoundSpec) -> Vec<u8> {
    let spec = bound.spec();
    match spec.oob_fill {
        OobFill::NanRequestZeroFma => model::oob_nan_bytes(spec.dtype),
        OobFill::Zero => vec![0; spec.dtype.size_bytes().unwrap() as usize],
    }
}

#[test]
fn every_swizzle_is_a_bijection_within_its_period() {
    for mode in Swizzle::ALL {
        let p = mode.period_bytes().max(mode.pattern_bytes());
        let mut seen = vec![false; p as usize];
        for o in 0..p {
            let s = mode.apply(o);
            assert!(s < p, "{mode:?}: {o} -> {s} leaves the period");
            assert!(!seen[s as usize], "{mode:?}: {s} hit twice");
            seen[s as usize] = true;
            assert_eq!(mode.apply(s), o);
            // Blocks of 8 bytes move whole; 16-byte chunks too except with the 8B flip.
            assert_eq!(s % 8, o % 8);
            if mode != Swizzle::B128Atom32BFlip8B {
                assert_eq!(s % 16, o % 16);
            }
            // The pattern repeats after its period; rows stay in their 128-byte line.
            assert_eq!(mode.apply(o + p * 3), s + p * 3);
            assert_eq!(s / 128, o / 128);
        }
    }
}

#[test]
fn swizzle_128b_row_1_chunk_0_lands_at_chunk_1() {
    assert_eq!(Swizzle::B128.apply(128), 128 + 16);
    assert_eq!(Swizzle::B128.apply(7 * 128 + 16 * 2), 7 * 128 + 16 * 5);
    assert_eq!(Swizzle::B64.apply(3 * 128), 3 * 128 + 48);
    assert_eq!(Swizzle::B32.apply(128 + 16), 128);
    // 32B swizzle with 32-byte rows: rows 0-3 share line 0 (unswizzled), rows 4-7 swap halves.
    assert_eq!(Swizzle::B32.apply(3 * 32), 3 * 32);
    assert_eq!(Swizzle::B32.apply(4 * 32), 4 * 32 + 16);
}

/// MPK's tile: 4096 x 1024 bf16, box 64 x 64, 128B swizzle, two boxes along the columns.
#[test]
fn mpk_tile_load_matches_the_swizzle_by_hand() {
    let spec = TileSpec::new("mpk_a", DType::BF16, [4096, 1024], [64, 64])
        .swizzle(Swizzle::B128)
        .repeat([1, 2])
        .smem_stride(4096);
    let bound = bind(&spec);
    // Global element (r, c) holds r * 1024 + c (mod 2^16) as u16.
    let mut global = vec![0u8; bound.extent_bytes() as usize];
    for (i, pair) in global.chunks_mut(2).enumerate() {
        pair.copy_from_slice(&(i as u16).to_le_bytes());
    }
    let smem = model::load(&bound, &global, &[128, 64]).unwrap();
    assert_eq!(smem.len(), 16384);
    let at = |off: usize| u16::from_le_bytes([smem[off], smem[off + 1]]);
    for box_i in 0..2usize {
        for r in 0..64usize {
            for c in 0..64usize {
                let chunk = (c / 8) ^ (r % 8);
                let off = box_i * 8192 + r * 128 + chunk * 16 + (c % 8) * 2;
                let want = ((128 + r) * 1024 + 64 + box_i * 64 + c) as u16;
                assert_eq!(at(off), want, "box {box_i} ({r},{c})");
            }
        }
    }
    let text = tma_core::model::picture::smem_picture(&bound);
    assert!(text.contains("(1,8)  (1,0)"), "{text}");
}

/// The seed's nvFuser pseudo-code (2D, strided, TMA order = innermost first) as a reference.
#[test]
fn matches_the_nvfuser_model() {
    // TMA order: gs = [10, 7] (x innermost), bs = [8, 6], er = [1, 2]. User order reversed.
    let spec = TileSpec::new("nv", DType::U32, [7, 12], [6, 8])
        .element_strides([2, 1])
        .strides([12, 1]);
    let bound = bind(&spec);
    let mut rng = XorShift::new(3);
    let global = random_global(&bound, &mut rng);
    let (gs, bs, er) = ([12i64, 7], [8i64, 6], [1i64, 2]);
    // Inner (x) coordinates sit on 16 bytes (4 u32), as the hardware requires.
    for x in [[0i64, 0], [4, 3], [-4, -2], [8, 5]] {
        let smem = model::load(&bound, &global, &[x[1], x[0]]).unwrap();
        let ts = [(bs[0] + er[0] - 1) / er[0], (bs[1] + er[1] - 1) / er[1]];
        for i0 in 0..ts[0] {
            for i1 in 0..ts[1] {
                let smem_idx = (i1 * ts[0] + i0) as usize;
                let g0 = x[0] + i0 * er[0];
                let g1 = x[1] + i1 * er[1];
                let want = if (0..gs[0]).contains(&g0) && (0..gs[1]).contains(&g1) {
                    let gi = (g0 + g1 * 12) as usize * 4;
                    global[gi..gi + 4].to_vec()
                } else {
                    vec![0; 4]
                };
                assert_eq!(
                    &smem[smem_idx * 4..smem_idx * 4 + 4],
                    &want[..],
                    "{x:?} {i0} {i1}"
                );
            }
        }
    }
}

#[test]
fn reduce_rejects_unsupported_pairs_and_packed_types() {
    let bound = bind(&TileSpec::new("r", DType::F64, [4, 16], [2, 16]));
    let mut g = vec![0u8; bound.extent_bytes() as usize];
    let smem = vec![0u8; 256];
    let err = model::reduce(&bound, ReduceOp::Add, &smem, &[0, 0], &mut g).unwrap_err();
    assert!(
        matches!(err, model::ModelError::ReduceUnsupported { .. }),
        "{err}"
    );
    let bound = bind(&TileSpec::new("r", DType::U8, [4, 16], [2, 16]));
    let err = model::reduce(&bound, ReduceOp::Inc, &smem, &[0, 0], &mut g).unwrap_err();
    assert!(err.to_string().contains("u32"), "{err}");
    let spec = TileSpec::new("p", DType::U4x16Align8B, [4, 128], [2, 32]).target(Arch::Sm100a);
    let err = model::load(&bind(&spec), &[0; 4096], &[0, 0]).unwrap_err();
    assert!(matches!(err, model::ModelError::PackedType { .. }));
}

#[test]
fn reduce_add_f32_rounds_to_nearest_even() {
    let bound = bind(&TileSpec::new("r", DType::F32, [1, 4], [1, 4]));
    let mut g: Vec<u8> = [1.0f32, 1.0, -2.5, 3.0e38]
        .iter()
        .flat_map(|v| v.to_le_bytes())
        .collect();
    let s: Vec<u8> = [f32::EPSILON / 2.0, 1.0, 2.5, 3.0e38]
        .iter()
        .flat_map(|v| v.to_le_bytes())
        .collect();
    model::reduce(&bound, ReduceOp::Add, &s, &[0, 0], &mut g).unwrap();
    let out: Vec<f32> = g
        .chunks(4)
        .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
        .collect();
    assert_eq!(out, vec![1.0, 2.0, 0.0, f32::INFINITY]);
}

fn check_spec(bound: &BoundSpec, coords: &[i64], seed: u64) {
    let spec = bound.spec();
    let esize = spec.dtype.size_bytes().unwrap();
    let mut rng = XorShift::new(seed);
    let global = random_global(bound, &mut rng);
    let fill = fill_of(bound);
    for opts in both_layouts() {
        let smem = model::load_with(bound, &global, coords, opts).unwrap();
        let layout = model::smem_layout(bound, opts).unwrap();
        assert_eq!(smem.len() as u64, layout.len);
        // The plan (what kernels allocate) is the default layout's extent.
        if opts.inner_rows == tma_core::smem::DEFAULT_INNER_ROW_LAYOUT {
            assert_eq!(layout.len, bound.plan().footprint_bytes, "{spec:?}");
            assert_eq!(layout.box_extent, bound.plan().box_bytes, "{spec:?}");
        }
        let elems = model::elements(bound, coords, opts).unwrap();
        // Every element gets its own slot: no two collide.
        let mut owner = vec![false; smem.len()];
        for e in &elems {
            for b in e.smem..e.smem + esize {
                assert!(!owner[b as usize], "slot {b} written twice: {spec:?}");
                owner[b as usize] = true;
            }
            let got = &smem[e.smem as usize..(e.smem + esize) as usize];
            match e.global {
                // In-bounds elements equal a naive gather from the global index (with
                // interleave the innermost index counts chunks of several elements).
                Some(_) => {
                    let inner = spec.rank() - 1;
                    let outer: i64 = e.index[..inner]
                        .iter()
                        .zip(bound.strides())
                        .map(|(&i, &s)| i * s as i64)
                        .sum();
                    let unit = spec.inner_unit_elements() as i64;
                    let off = outer + e.index[inner] * unit + e.in_chunk as i64;
                    let off = off as usize * esize as usize;
                    // ... after the load's conversion (TF32 rounding, FTZ).
                    let mut want = global[off..off + esize as usize].to_vec();
                    model::convert_on_load(spec.dtype, &mut want);
                    assert_eq!(got, &want[..]);
                }
                // OOB elements hold the fill pattern.
                None => assert_eq!(got, &fill[..], "{spec:?} {coords:?}"),
            }
        }
        // Bytes nobody owns (padding) stay zero.
        for (b, &o) in owner.iter().enumerate() {
            if !o {
                assert_eq!(smem[b], 0);
            }
        }
        // Store round trip: storing the loaded bytes into a blank tensor writes back exactly
        // the in-bounds elements and nothing else.
        let mut back = vec![0xa5u8; global.len()];
        if coords.iter().any(|&c| c < 0) {
            // The hardware traps on negative store coordinates; the model refuses them.
            let e = model::store_with(bound, &smem, coords, &mut back, opts).unwrap_err();
            assert!(e.to_string().contains("no negative coordinate"), "{e}");
            continue;
        }
        model::store_with(bound, &smem, coords, &mut back, opts).unwrap();
        // Stores also write past an inner dim that is not a multiple of 16 bytes (up to
        // the next 16 bytes), so the exact round trip holds where it is one.
        if bound.inner_bound() == bound.global()[spec.rank() - 1] {
            let mut touched = vec![false; global.len()];
            for e in elems.iter().filter_map(|e| e.global) {
                for b in e..e + esize {
                    touched[b as usize] = true;
                }
            }
            let mut loaded = global.clone();
            for e in elems.iter().filter_map(|e| e.global) {
                model::convert_on_load(spec.dtype, &mut loaded[e as usize..(e + esize) as usize]);
            }
            for (b, &t) in touched.iter().enumerate() {
                assert_eq!(back[b], if t { loaded[b] } else { 0xa5 }, "byte {b}");
            }
            // Reductions: XOR with itself clears what was touched.
            xor_clears(bound, &smem, coords, opts, &global, &touched, &elems, esize);
        }
    }
}

#[allow(clippy::too_many_arguments)]
fn xor_clears(
    bound: &BoundSpec,
    smem: &[u8],
    coords: &[i64],
    opts: ModelOptions,
    global: &[u8],
    touched: &[bool],
    elems: &[model::ElementPlace],
    esize: u64,
) {
    if !model::ReduceOp::Xor.supports(bound.spec().dtype) {
        return;
    }
    let mut g2 = global.to_vec();
    model::reduce_with(bound, ReduceOp::Xor, smem, coords, &mut g2, opts).unwrap();
    // Aliasing strides may touch a byte twice; check cleared bytes only when none does.
    let in_bounds = elems.iter().filter(|e| e.global.is_some()).count() * esize as usize;
    let no_alias = in_bounds == touched.iter().filter(|&&x| x).count();
    for (b, &t) in touched.iter().enumerate() {
        if t && no_alias {
            assert_eq!(g2[b], 0);
        } else if !t {
            assert_eq!(g2[b], global[b]);
        }
    }
}

#[test]
fn fully_in_bounds_unswizzled_box_is_a_naive_gather() {
    let spec = TileSpec::new("g", DType::F16, [5, 9, 24], [3, 3, 16]).element_strides([2, 1, 1]);
    let bound = bind(&spec);
    let mut rng = XorShift::new(11);
    let global = random_global(&bound, &mut rng);
    let smem = model::load(&bound, &global, &[1, 4, 8]).unwrap();
    let mut want = Vec::new();
    for h in [1usize, 3] {
        for w in 4..7usize {
            for c in 8..24usize {
                let off = (h * 9 * 24 + w * 24 + c) * 2;
                want.extend_from_slice(&global[off..off + 2]);
            }
        }
    }
    assert_eq!(smem, want);
}

/// `smem::ElementOffsets` (what the generated `T::offset` evaluates) puts every element of a
/// call where the model does, and enumerates exactly the model's positions.
fn check_offsets(bound: &BoundSpec, coords: &[i64]) {
    let spec = bound.spec();
    let offsets = ElementOffsets::new(bound.valid()).expect("whole-byte types");
    let places = model::elements(bound, coords, ModelOptions::default()).unwrap();
    assert_eq!(
        places.len() as u64,
        offsets.positions() * offsets.chunk_elems,
        "{spec:?}"
    );
    for p in &places {
        assert_eq!(
            offsets.offset(&p.position, p.in_chunk),
            Some(p.smem),
            "{spec:?} position {:?} in_chunk {}",
            p.position,
            p.in_chunk
        );
    }
    // Positions enumerate row-major, last dim fastest; the model's order within a box.
    for n in [0, offsets.positions() - 1] {
        let pos = offsets.position(n);
        assert!(pos.iter().zip(&offsets.extent).all(|(p, e)| p < e));
    }
    assert_eq!(offsets.offset(&offsets.extent, 0), None);
}

#[test]
fn element_offsets_agree_with_the_model() {
    for arch in [Arch::Sm90a, Arch::Sm100a] {
        let mut rng = XorShift::new(0x0ff5e7 ^ arch as u64);
        for _ in 0..1500 {
            let (bound, coords) = random_valid_spec(&mut rng, arch);
            check_offsets(&bound, &coords);
        }
    }
}

#[test]
fn random_specs_hopper() {
    let mut rng = XorShift::new(0x5eed);
    for i in 0..1000 {
        let (bound, coords) = random_valid_spec(&mut rng, Arch::Sm90a);
        check_spec(&bound, &coords, i);
    }
}

#[test]
fn random_specs_blackwell() {
    let mut rng = XorShift::new(0xb1ac);
    for i in 0..700 {
        let (bound, coords) = random_valid_spec(&mut rng, Arch::Sm100a);
        check_spec(&bound, &coords, i);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 400, .. ProptestConfig::default() })]

    /// Proptest-driven seeds, so failures shrink to a seed that can be replayed.
    #[test]
    fn model_properties_hold(seed in any::<u64>(), blackwell in any::<bool>()) {
        let arch = if blackwell { Arch::Sm100a } else { Arch::Sm90a };
        let mut rng = XorShift::new(seed);
        let (bound, coords) = random_valid_spec(&mut rng, arch);
        check_spec(&bound, &coords, seed);
    }

    /// Boxes placed entirely out of bounds on one edge load nothing but fill.
    #[test]
    fn boxes_past_an_edge_are_all_fill(seed in any::<u64>(), dim in 0usize..5, after in any::<bool>()) {
        let mut rng = XorShift::new(seed);
        let (bound, mut coords) = random_valid_spec(&mut rng, Arch::Sm90a);
        let d = dim % coords.len();
        let spec = bound.spec();
        let reach = i64::from(spec.boxed[d]) * i64::from(spec.repeat[d]);
        coords[d] = if after { bound.global()[d] as i64 } else { -reach };
        if d == coords.len() - 1 {
            // past the end, on the 16-byte grid the innermost coordinate needs
            let m = bound.valid().inner_coord_multiple() as i64;
            coords[d] = coords[d].div_euclid(m) * m + if coords[d].rem_euclid(m) == 0 { 0 } else { m };
        }
        let global = random_global(&bound, &mut rng);
        let smem = model::load(&bound, &global, &coords).unwrap();
        let fill = fill_of(&bound);
        for e in model::elements(&bound, &coords, ModelOptions::default()).unwrap() {
            prop_assert!(e.global.is_none());
            let s = e.smem as usize;
            prop_assert_eq!(&smem[s..s + fill.len()], &fill[..]);
        }
    }
}

#[test]
#[ignore = "prints pictures for a person to look at"]
fn print_pictures() {
    let mpk = TileSpec::new("mpk_a", DType::BF16, [4096, 1024], [64, 64]).swizzle(Swizzle::B128);
    println!("{}", tma_core::model::picture::smem_picture(&bind(&mpk)));
    let narrow = TileSpec::new("narrow", DType::F16, [64, 64], [16, 16]).swizzle(Swizzle::B64);
    println!("{}", tma_core::model::picture::smem_picture(&bind(&narrow)));
}

/// TF32 loads round to nearest, ties to even (an H100 showed ties away is wrong).
#[test]
fn tf32_rounding_ties_to_even() {
    let round = |bits: u32| {
        let mut b = bits.to_le_bytes();
        model::convert_on_load(DType::TF32, &mut b);
        u32::from_le_bytes(b)
    };
    assert_eq!(round(0x4000_1000), 0x4000_0000); // tie, even below: down
    assert_eq!(round(0x4000_3000), 0x4000_4000); // tie, odd below: up
    assert_eq!(round(0x4000_1001), 0x4000_2000); // above the tie: up
    assert_eq!(round(0x4000_0fff), 0x4000_0000); // below: down
    assert_eq!(round(0x2bb9_b9e5), 0x2bb9_c000); // seen on the H100
    assert_eq!(round(0x7fc0_0001), 0x7fff_e000); // NaN
    assert_eq!(round(0x7f80_0000), 0x7f80_0000); // inf
}
