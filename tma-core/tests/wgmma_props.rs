//! The CPU proof that a wgmma operand tile's descriptors agree with how TMA lays the tile out:
//! TMA's model (`tma_core::model::load`) writes the tile from a global matrix into shared
//! memory, wgmma's read model (`tma_core::wgmma::read`, written from the PTX ISA apart from
//! the descriptor generator) reads it back through the generated descriptor of every
//! k-slice (and 64-row block of A), and each element read is the global element at that
//! operand position: the composition is the identity. Over every supported (dtype, operand,
//! major, swizzle) and random shapes, shared-memory bases and data.
//!
//! And the proof can fail: a descriptor with its LBO, SBO, base offset or swizzle field
//! broken, or read at another k-slice, reads something else.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use proptest::prelude::*;
use tma_core::model;
use tma_core::operand::{Major, Operand, WgmmaOperand, WgmmaType};
use tma_core::wgmma::read::{read_operand, ReadShape};
use tma_core::wgmma::{MatrixDescriptor, OperandPlan};
use tma_core::{BoundSpec, DType, Swizzle};
use tma_test_support::testgen::{operand_case, operand_combinations, XorShift};

/// One operand tile loaded by the TMA model at a random aligned shared-memory base.
struct Loaded {
    bound: BoundSpec,
    plan: OperandPlan,
    coords: Vec<i64>,
    global: Vec<u8>,
    smem: Vec<u8>,
    base: u64,
}

fn load(bound: BoundSpec, coords: Vec<i64>, rng: &mut XorShift) -> Loaded {
    let plan = OperandPlan::new(bound.valid()).expect("an operand tile");
    let mut global = vec![0u8; bound.extent_bytes() as usize];
    rng.fill(&mut global);
    let smem = model::load(&bound, &global, &coords).unwrap_or_else(|e| panic!("{e}"));
    // Any address aligned as the tile demands (the swizzle period), away from 0.
    let align = bound.plan().align_bytes;
    let base = align * rng.range(1, 16);
    Loaded {
        bound,
        plan,
        coords,
        global,
        smem,
        base,
    }
}

/// The global element at operand position (`mn`, `k`) of the call, as it arrives in shared
/// memory (a TF32 map rounds on the way).
fn global_element(l: &Loaded, mn: u64, k: u64) -> Vec<u8> {
    let spec = l.bound.spec();
    let rank = spec.rank();
    let mut index: Vec<i64> = l.coords.clone();
    let (mn_dim, k_dim) = match l.plan.operand.major {
        Major::K => (rank - 2, rank - 1),
        Major::MN => (rank - 1, rank - 2),
    };
    index[mn_dim] += mn as i64;
    index[k_dim] += k as i64;
    let e = l.plan.kind.bytes();
    let offset: u64 = index
        .iter()
        .enumerate()
        .map(|(d, &i)| {
            let stride = if d + 1 == rank {
                e
            } else {
                l.bound.byte_strides()[d]
            };
            i as u64 * stride
        })
        .sum();
    let mut bytes = l.global[offset as usize..(offset + e) as usize].to_vec();
    model::convert_on_load(spec.dtype, &mut bytes);
    bytes
}

fn shape(plan: &OperandPlan) -> ReadShape {
    ReadShape {
        operand: plan.operand.operand,
        major: plan.operand.major,
        kind: plan.kind,
        n: plan.mn,
    }
}

/// Reads every k-slice (and 64-row block) through its descriptor, `tamper`ed, and counts
/// the elements that differ from the global matrix. `Err` when the read model refuses.
fn mismatches(l: &Loaded, tamper: impl Fn(u64, u64) -> u64) -> Result<u64, String> {
    let s = shape(&l.plan);
    let mut wrong = 0;
    for block in 0..l.plan.m_blocks {
        for slice in 0..l.plan.k_slices {
            let desc = l
                .plan
                .descriptor(l.bound.valid(), l.base, slice, block)
                .map_err(|e| e.to_string())?
                .encode()
                .map_err(|e| e.to_string())?;
            let read = read_operand(tamper(desc, slice), &s, &l.smem, l.base)
                .map_err(|e| e.to_string())?;
            for row in 0..s.rows() {
                for k in 0..s.k() {
                    let want = global_element(l, block * 64 + row, slice * l.plan.shape.k + k);
                    if read[(row * s.k() + k) as usize] != want {
                        wrong += 1;
                    }
                }
            }
        }
    }
    Ok(wrong)
}

/// A case of `combo` with `mn` rows and `k_slices` slices (retrying the random box split).
fn case(
    combo: (DType, WgmmaOperand, Swizzle),
    mn: u64,
    k_slices: u64,
    rng: &mut XorShift,
) -> Loaded {
    let (dtype, w, swizzle) = combo;
    for _ in 0..64 {
        if let Some((bound, coords)) = operand_case(rng, dtype, w, swizzle, mn, k_slices) {
            return load(bound, coords, rng);
        }
    }
    panic!("no valid operand tile for {combo:?} mn {mn} k_slices {k_slices}");
}

/// Rows of a random operand: whole 64-row blocks for A, a multiple of 8 (up to 256) for B,
/// rounded up to whole swizzle atoms along an MN-major inner dim.
fn random_mn(combo: (DType, WgmmaOperand, Swizzle), rng: &mut XorShift) -> u64 {
    let (dtype, w, swizzle) = combo;
    let e = WgmmaType::of(dtype).unwrap().bytes();
    match (w.operand, w.major) {
        (Operand::A, _) => 64 * rng.range(1, 2),
        (Operand::B, Major::K) => 8 * rng.range(1, 32),
        (Operand::B, Major::MN) => {
            let atom = swizzle.span_bytes().unwrap_or(16) / e;
            atom * rng.range(1, 256 / atom)
        }
    }
}

#[test]
fn every_combination_reads_back_the_global_matrix() {
    let combos = operand_combinations();
    assert_eq!(combos.len(), 56);
    let mut rng = XorShift::new(0x5eed_0013);
    let mut elements = 0u64;
    let mut mn_repeated = 0;
    for combo in combos {
        for k_slices in [1, 2, 4] {
            let mn = random_mn(combo, &mut rng);
            let l = case(combo, mn, k_slices, &mut rng);
            let rank = l.bound.spec().rank();
            if l.bound.spec().repeat[rank - 2] > 1 {
                mn_repeated += 1;
            }
            assert_eq!(l.plan.k_slices, k_slices);
            assert_eq!(
                mismatches(&l, |d, _| d),
                Ok(0),
                "{combo:?}: {}",
                l.bound.spec().name
            );
            elements += l.plan.m_blocks * l.plan.k_slices * 64.max(l.plan.mn) * l.plan.shape.k;
        }
    }
    assert!(elements > 100_000, "{elements}");
    assert!(
        mn_repeated >= 5,
        "{mn_repeated} cases repeat boxes along MN"
    );
}

/// The GEMM's B tile: 256 rows of bf16, K-major, 128B swizzle, as two 128-row boxes (each CTA
/// of a 2-CTA cluster multicasts one): one descriptor walks both (SBO 1024 across the seam),
/// and every row of every k-slice reads back; an A tile split the same way (4 x 32 rows, two
/// 64-row blocks) too. And the rule refuses what would break it.
#[test]
fn mn_repeated_boxes_read_back_as_one_matrix() {
    use tma_core::{validate, Rule, TileSpec};
    let mut rng = XorShift::new(0x5eed_0014);
    for (w, rows, boxes, kb) in [
        (
            WgmmaOperand {
                operand: Operand::B,
                major: Major::K,
            },
            256u64,
            2u32,
            64u32,
        ),
        (
            WgmmaOperand {
                operand: Operand::B,
                major: Major::K,
            },
            64,
            8,
            32,
        ),
        (
            WgmmaOperand {
                operand: Operand::A,
                major: Major::K,
            },
            128,
            4,
            64,
        ),
    ] {
        let box_rows = (rows / u64::from(boxes)) as u32;
        let global = [rows * 3, 512];
        let spec = TileSpec::new("t", DType::BF16, global, [box_rows, kb])
            .swizzle(Swizzle::B128)
            .repeat([boxes, 1])
            .wgmma(w.operand, w.major);
        let bound = validate(&spec).unwrap().bind(&global, None).unwrap();
        let l = load(bound, vec![rows as i64, 64], &mut rng);
        assert_eq!((l.plan.mn, l.plan.sbo), (rows, 1024));
        assert_eq!(
            mismatches(&l, |d, _| d),
            Ok(0),
            "{w} {rows} rows in {boxes} boxes"
        );
        // Broken: SBO 16 bytes short reads the wrong rows past the first 8-row group.
        assert!(mismatches(&l, |d, _| d - (1u64 << 32)).unwrap() > 0);
        let refused = |s: TileSpec| {
            let e = validate(&s).unwrap_err();
            assert!(
                e.errors.iter().any(|f| f.rule == Rule::WgmmaTileShape),
                "{e}"
            );
        };
        // Boxes not back to back, K repeated as well, rows not whole 8-row groups.
        refused(spec.clone().smem_stride(u64::from(box_rows) * 64 + 512));
        refused(
            TileSpec::new("t", DType::BF16, global, [box_rows, 32])
                .swizzle(Swizzle::B128)
                .repeat([boxes, 2])
                .wgmma(w.operand, w.major),
        );
        if w.operand == Operand::B {
            refused(
                TileSpec::new("t", DType::BF16, [1024, 512], [12, kb])
                    .swizzle(Swizzle::B128)
                    .repeat([2, 1])
                    .wgmma(w.operand, w.major),
            );
        }
        // Without swizzle the rows are 16-byte core-matrix rows: no MN repeats.
        refused(
            TileSpec::new("t", DType::BF16, global, [box_rows, 8])
                .repeat([boxes, 1])
                .wgmma(w.operand, w.major),
        );
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, .. ProptestConfig::default() })]
    #[test]
    fn random_operand_tiles_read_back_the_global_matrix(seed in any::<u64>(), which in 0usize..56) {
        let mut rng = XorShift::new(seed);
        let combo = operand_combinations()[which];
        let (dtype, w, swizzle) = combo;
        // Shapes whose footprint fits (the generator refuses the others).
        let l = loop {
            let k_slices = rng.range(1, 8);
            let mn = random_mn(combo, &mut rng);
            if let Some((bound, coords)) = operand_case(&mut rng, dtype, w, swizzle, mn, k_slices) {
                break load(bound, coords, &mut rng);
            }
        };
        prop_assert_eq!(mismatches(&l, |d, _| d), Ok(0), "{:?}", combo);
    }
}

/// The fields the layout of `plan` uses (so breaking them must show).
fn fields_used(l: &Loaded) -> (bool, bool, bool) {
    let p = &l.plan;
    let swizzled = p.swizzle != Swizzle::None;
    let rows_groups = match p.operand.major {
        Major::K => 64.max(p.mn) > 8 || p.operand.operand == Operand::A,
        Major::MN => p.shape.k > 8,
    };
    let lbo = match (p.operand.major, swizzled) {
        (Major::K, true) => false,
        (Major::K, false) => true,
        (Major::MN, false) => p.shape.k > 8,
        (Major::MN, true) => {
            let rows = if p.operand.operand == Operand::A {
                64
            } else {
                p.mn
            };
            rows * p.kind.bytes() > p.swizzle.span_bytes().unwrap_or(16)
        }
    };
    (lbo, rows_groups, swizzled)
}

#[test]
fn a_broken_field_breaks_the_identity() {
    let mut rng = XorShift::new(0xbad_f1e1d);
    let field = |word: u64, lsb: u32, bits: u32, f: &dyn Fn(u64) -> u64| {
        let mask = ((1u64 << bits) - 1) << lsb;
        (word & !mask) | ((f((word & mask) >> lsb) << lsb) & mask)
    };
    let mut broken = [0u32; 5];
    for combo in operand_combinations() {
        // Two k-slices and 64 rows: every field of the layout is used.
        let l = case(combo, 64, 2, &mut rng);
        let (lbo, sbo, swz) = fields_used(&l);
        let fails = |name: &str, t: &dyn Fn(u64, u64) -> u64| {
            if let Ok(0) = mismatches(&l, t) {
                panic!("{combo:?}: breaking {name} went unnoticed")
            }
        };
        if lbo {
            fails("LBO", &|d, _| field(d, 16, 14, &|v| v + 1));
            broken[0] += 1;
        }
        if sbo {
            fails("SBO", &|d, _| field(d, 32, 14, &|v| v + 2));
            broken[1] += 1;
        }
        // A base offset the tile does not need: refused by the read model.
        if swz {
            fails("base offset", &|d, _| field(d, 49, 3, &|_| 1));
            broken[2] += 1;
        }
        // Another swizzle mode (none <-> 128B, 32B <-> 64B).
        fails("swizzle", &|d, _| field(d, 62, 2, &|v| v ^ 1));
        broken[3] += 1;
        // Every slice read at the first slice's address: the k-slice step matters.
        fails("k-slice step", &|d, slice| {
            let s = MatrixDescriptor::decode(d);
            let first =
                s.start_address - l.plan.offset(slice, 0).unwrap() + l.plan.offset(0, 0).unwrap();
            MatrixDescriptor {
                start_address: first,
                ..s
            }
            .encode()
            .unwrap()
        });
        broken[4] += 1;
    }
    // Each field was broken in many combinations.
    assert!(broken.iter().all(|&n| n >= 16), "{broken:?}");
}

/// The generated `desc()`'s arithmetic (templates/operand.cuh.tera): the tile's address OR'ed
/// into the low word of `DESC_BASE` (`base_word`) once, then the slice's offset / 16 added to
/// that word. Mirrored here and held to the model's encoding of the slice's own address for
/// every combination, every aligned tile start in the 227 KB a block can have, every slice
/// and block: the sum never leaves the 14-bit address field.
#[test]
fn the_generated_descriptor_arithmetic_is_the_models_encoding() {
    fn generated(base_word: u64, smem_addr: u64, offset: u64) -> u64 {
        let lo = (base_word as u32) | (((smem_addr & 0x3FFFF) >> 4) as u32);
        (base_word & 0xFFFF_FFFF_0000_0000) | u64::from(lo.wrapping_add((offset >> 4) as u32))
    }
    const SMEM: u64 = 227 * 1024;
    let mut rng = XorShift::new(0x5eed_0026);
    let mut words = 0u64;
    for combo in operand_combinations() {
        let mn = random_mn(combo, &mut rng);
        let l = case(combo, mn, 4, &mut rng);
        let base_word = l.plan.base_word().unwrap();
        let footprint = l.smem.len() as u64;
        let align = l.bound.plan().align_bytes;
        let mut addr = 0;
        while addr + footprint <= SMEM {
            for block in 0..l.plan.m_blocks {
                for slice in 0..l.plan.k_slices {
                    let want = l
                        .plan
                        .descriptor(l.bound.valid(), addr, slice, block)
                        .unwrap()
                        .encode()
                        .unwrap();
                    let offset = l.plan.offset(slice, block).unwrap();
                    assert_eq!(
                        generated(base_word, addr, offset),
                        want,
                        "{combo:?} at {addr:#x}, slice {slice}, block {block}"
                    );
                    words += 1;
                }
            }
            addr += align.max(1024);
        }
    }
    assert!(words > 10_000, "{words}");
}
