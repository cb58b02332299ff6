//! Hostile but plausible input through the whole public surface: no panic, no wrapped number,
//! every refusal names a field. A property test over 100,000 random specs (extremes of every
//! integer field, every rank 0..7, dtype, swizzle, interleave and fill, names with keywords and
//! newlines) plus one regression test per class of problem that was found.
//!
//! Runs in the test profile (debug: overflow checks on), so an arithmetic overflow anywhere
//! under the public API panics here.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
#![allow(clippy::needless_range_loop)] // d indexes several per-dim lists at once

use std::panic::{catch_unwind, AssertUnwindSafe};
use tma::model::{self, ReduceOp};
use tma::render::TileCode;
use tma::runtime::driver::check_buffer;
use tma::spec::{Extent, Field, Interleave, L2Promotion, OobFill, Rule, Severity};
use tma::{validate, Arch, BoundSpec, DType, EncodeArgs, SpecErrors, Swizzle, TileSpec, ValidSpec};
use tma_test_support::testgen::{random_valid_spec, XorShift};

// ---- the generator ----------------------------------------------------------------------

const U64_EXTREMES: [u64; 26] = [
    0,
    1,
    2,
    3,
    8,
    15,
    16,
    17,
    255,
    256,
    257,
    (1 << 31) - 1,
    1 << 31,
    (1 << 31) + 1,
    (1 << 32) - 1,
    1 << 32,
    (1 << 32) + 1,
    (1 << 40) - 1,
    1 << 40,
    (1 << 40) + 1,
    1 << 61,
    (1 << 61) + 1,
    1 << 62,
    1 << 63,
    u64::MAX - 1,
    u64::MAX,
];

const I64_EXTREMES: [i64; 16] = [
    0,
    1,
    -1,
    8,
    -16,
    i32::MAX as i64,
    i32::MIN as i64,
    i32::MAX as i64 + 1,
    i32::MIN as i64 - 1,
    i32::MAX as i64 - 7,
    1 << 40,
    -(1 << 40),
    i64::MAX,
    i64::MIN,
    i64::MAX - 1,
    i64::MIN + 1,
];

const NAMES: [&str; 16] = [
    "tile",
    "a",
    "x_1",
    "",
    "a\n#error injected",
    "a */ int x; /*",
    "int",
    "class",
    "__x",
    "_X",
    "a__b",
    "threadIdx",
    "naïve",
    "1a",
    "a b",
    "_ok",
];

/// A u64: usually plausible, sometimes an extreme, sometimes anything.
fn u64_field(rng: &mut XorShift, plausible: impl FnOnce(&mut XorShift) -> u64) -> u64 {
    match rng.below(10) {
        0..=6 => plausible(rng),
        7 | 8 => U64_EXTREMES[rng.below(U64_EXTREMES.len() as u64) as usize],
        _ => rng.next_u64() >> rng.below(64),
    }
}

fn u32_field(rng: &mut XorShift, plausible: impl FnOnce(&mut XorShift) -> u32) -> u32 {
    match rng.below(10) {
        0..=7 => plausible(rng),
        8 => *rng
            .pick(&[
                0u32,
                1,
                9,
                255,
                256,
                257,
                1 << 16,
                1 << 31,
                u32::MAX - 1,
                u32::MAX,
            ])
            .unwrap(),
        _ => (rng.next_u64() >> rng.below(64)) as u32,
    }
}

fn coord(rng: &mut XorShift, multiple: i64) -> i64 {
    match rng.below(4) {
        0 => I64_EXTREMES[rng.below(I64_EXTREMES.len() as u64) as usize],
        1 => rng.next_u64() as i64 >> rng.below(64),
        _ => (rng.range(0, 64) as i64 - 16) * multiple.max(1),
    }
}

fn name(rng: &mut XorShift) -> String {
    if rng.chance(3, 4) {
        return format!("t{}", rng.below(1000));
    }
    let n = NAMES[rng.below(NAMES.len() as u64) as usize];
    n.to_string()
}

/// A list of `rank` entries, or (rarely) of another length.
fn list_len(rng: &mut XorShift, rank: usize) -> usize {
    if rng.chance(1, 30) {
        rng.below(8) as usize
    } else {
        rank
    }
}

/// Half the cases are hostile from the start; the other half are valid specs (the model's
/// generator) with zero to two fields replaced by extremes, to probe near the limits.
fn random_spec(rng: &mut XorShift) -> TileSpec {
    if rng.chance(1, 2) {
        hostile_spec(rng)
    } else {
        near_valid_spec(rng)
    }
}

fn near_valid_spec(rng: &mut XorShift) -> TileSpec {
    let arch = *rng.pick(&[Arch::Sm90a, Arch::Sm100a]).unwrap();
    let (bound, _) = random_valid_spec(rng, arch);
    let mut spec = bound.spec().clone();
    let rank = spec.rank();
    for _ in 0..rng.below(3) {
        let d = rng.below(rank as u64) as usize;
        match rng.below(11) {
            0 => spec.global[d] = Extent::Static(u64_field(rng, |r| r.range(1, 1 << 33))),
            1 => {
                if let Some(s) = spec.strides.as_mut() {
                    s[d] = Extent::Static(u64_field(rng, |r| r.range(0, 1 << 20) * 16));
                }
            }
            2 => spec.boxed[d] = u32_field(rng, |r| r.range(1, 256) as u32),
            3 => spec.element_strides[d] = u32_field(rng, |r| r.range(1, 9) as u32),
            4 => spec.repeat[d] = u32_field(rng, |r| r.range(1, 300) as u32),
            5 => spec.smem_stride = Some(u64_field(rng, |r| r.range(1, 1 << 16) * 64)),
            6 => spec.name = name(rng),
            7 => {
                spec.dim_names = (0..rank).map(|_| Some(name(rng))).collect();
            }
            8 => spec.dtype = *rng.pick(&DType::ALL).unwrap(),
            9 => spec.swizzle = *rng.pick(&Swizzle::ALL).unwrap(),
            _ => {
                // A huge dense shape: the extent, or a dense stride, leaves u64.
                let dims = [1 << 16, (1 << 31) + 1, (1 << 32) - 1, 1 << 32];
                for g in &mut spec.global {
                    *g = Extent::Static(*rng.pick(&dims).unwrap());
                }
                spec.strides = None;
            }
        }
    }
    spec
}

fn hostile_spec(rng: &mut XorShift) -> TileSpec {
    let rank = if rng.chance(1, 20) {
        *rng.pick(&[0usize, 6, 7]).unwrap()
    } else {
        rng.range(1, 5) as usize
    };
    let dtype = *rng.pick(&DType::ALL).unwrap();
    let global: Vec<u64> = (0..list_len(rng, rank))
        .map(|_| u64_field(rng, |r| r.range(1, 300)))
        .collect();
    let boxed: Vec<u32> = (0..list_len(rng, rank))
        .map(|_| {
            u32_field(rng, |r| {
                *r.pick(&[1u32, 2, 4, 8, 16, 32, 64, 128, 256, 3, 24])
                    .unwrap()
            })
        })
        .collect();
    let mut spec = TileSpec::new(name(rng), dtype, global, boxed);
    if rng.chance(1, 10) {
        spec.global = spec
            .global
            .iter()
            .map(|&e| if rng.chance(1, 2) { Extent::Runtime } else { e })
            .collect();
    }
    if rng.chance(1, 2) {
        spec.dim_names = (0..list_len(rng, rank))
            .map(|_| rng.chance(4, 5).then(|| name(rng)))
            .collect();
    }
    if rng.chance(1, 3) {
        let strides: Vec<Extent> = (0..list_len(rng, rank))
            .map(|_| {
                if rng.chance(1, 20) {
                    Extent::Runtime
                } else {
                    Extent::Static(u64_field(rng, |r| r.range(0, 64) * 64))
                }
            })
            .collect();
        spec = spec.stride_extents(strides);
    }
    if rng.chance(1, 3) {
        spec.element_strides = (0..list_len(rng, rank))
            .map(|_| u32_field(rng, |r| r.range(1, 8) as u32))
            .collect();
    }
    if rng.chance(1, 3) {
        spec.repeat = (0..list_len(rng, rank))
            .map(|_| u32_field(rng, |r| r.range(1, 3) as u32))
            .collect();
    }
    if rng.chance(1, 4) {
        spec.smem_stride = Some(u64_field(rng, |r| r.range(1, 64) * 512));
    }
    spec.swizzle = *rng.pick(&Swizzle::ALL).unwrap();
    if rng.chance(1, 6) {
        spec.interleave = *rng
            .pick(&[Interleave::None, Interleave::B16, Interleave::B32])
            .unwrap();
    }
    spec.l2_promotion = *rng
        .pick(&[
            L2Promotion::None,
            L2Promotion::B64,
            L2Promotion::B128,
            L2Promotion::B256,
        ])
        .unwrap();
    spec.oob_fill = *rng
        .pick(&[OobFill::Zero, OobFill::NanRequestZeroFma])
        .unwrap();
    spec.target = *rng
        .pick(&[Arch::Sm90a, Arch::Sm100a, Arch::Sm120a])
        .unwrap();
    spec
}

// ---- what must hold ---------------------------------------------------------------------

/// Every refusal names a field and says the rule in words.
fn check_refusal(e: &SpecErrors) {
    assert!(!e.errors.is_empty(), "a refusal with no finding");
    for f in &e.errors {
        assert_eq!(f.severity, Severity::Error);
        assert!(!f.field.to_string().is_empty(), "{f:?}");
        assert!(f.message.len() > 10, "{f:?}");
    }
    assert!(e.to_string().contains("breaks"));
}

fn product(xs: impl IntoIterator<Item = u64>) -> u128 {
    xs.into_iter().map(u128::from).product()
}

/// The plan's numbers, recomputed in u128: nothing wrapped.
fn check_plan_exact(valid: &ValidSpec) {
    let spec = valid.spec();
    let plan = valid.plan();
    let boxes = product(spec.repeat.iter().map(|&r| u64::from(r)));
    assert_eq!(u128::from(plan.boxes), boxes);
    assert_eq!(
        u128::from(plan.tx_bytes),
        u128::from(plan.box_data_bytes) * boxes
    );
    assert!(plan.tx_bytes < 1 << 20);
    assert_eq!(
        u128::from(plan.footprint_bytes),
        (boxes - 1) * u128::from(plan.stride_bytes) + u128::from(plan.box_bytes)
    );
    // Bounded by one SM, so every size the templates render as `unsigned` fits.
    assert!(plan.footprint_bytes <= spec.target.smem_per_sm());
    // One box ignores a given stride (it is never used).
    if let (Some(elems), true) = (spec.smem_stride, boxes > 1) {
        let bits = u128::from(elems) * u128::from(spec.dtype.global_bits());
        if !matches!(dtype_kind(spec.dtype), Kind::Align16) {
            assert_eq!(u128::from(plan.stride_bytes), bits.div_ceil(8));
        }
    }
    if boxes <= 64 {
        assert_eq!(valid.repeat_placements().len() as u128, boxes);
    }
    // Dim names name coordinate fields: no two alike in a valid spec (`d<i>` for unnamed).
    let labels: Vec<String> = (0..spec.rank()).map(|d| spec.dim_label(d)).collect();
    for (d, l) in labels.iter().enumerate() {
        assert!(
            !labels[..d].contains(l),
            "dim label {l:?} twice reached a valid spec"
        );
    }
    // Names that reach CUDA are identifiers (checked here independently of tma::ident).
    for n in std::iter::once(&spec.name).chain(spec.dim_names.iter().flatten()) {
        let mut chars = n.chars();
        assert!(
            chars
                .next()
                .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
                && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
                && !n.contains("__")
                && !["int", "class", "threadIdx"].contains(&n.as_str()),
            "{n:?} reached a valid spec"
        );
    }
}

enum Kind {
    Whole,
    Align16,
    Packed,
}

fn dtype_kind(d: DType) -> Kind {
    match d {
        DType::U4x16Align16B | DType::U6x16Align16B => Kind::Align16,
        DType::U4x16Align8B => Kind::Packed,
        _ => Kind::Whole,
    }
}

/// The bound shape's numbers, recomputed in u128.
fn check_bound_exact(bound: &BoundSpec) {
    let spec = bound.spec();
    let bits = u128::from(spec.dtype.global_bits());
    let rank = spec.rank();
    let inner = rank - 1;
    let (g, s) = (bound.global(), bound.strides());
    assert_eq!(bound.byte_strides().len(), inner);
    for d in 0..inner {
        let exact = u128::from(s[d]) * bits;
        assert_eq!(exact % 8, 0, "stride {d} not whole bytes");
        assert_eq!(u128::from(bound.byte_strides()[d]), exact / 8);
        assert!(exact / 8 < 1 << 40);
    }
    let outer: u128 = (0..inner)
        .map(|d| u128::from(g[d] - 1) * u128::from(bound.byte_strides()[d]))
        .sum();
    let extent = match spec.interleave.chunk_bytes() {
        Some(chunk) => outer + u128::from(g[inner]) * u128::from(chunk),
        None => {
            let inner_bytes = (u128::from(g[inner]) * bits)
                .div_ceil(8)
                .next_multiple_of(16);
            assert_eq!(u128::from(bound.inner_bound()), inner_bytes * 8 / bits);
            outer + (u128::from(bound.inner_bound()) * bits).div_ceil(8)
        }
    };
    assert_eq!(u128::from(bound.extent_bytes()), extent);
    let args = EncodeArgs::new(bound);
    assert_eq!(args.global_dim, g.iter().rev().copied().collect::<Vec<_>>());
    assert_eq!(
        args.global_strides,
        bound
            .byte_strides()
            .iter()
            .rev()
            .copied()
            .collect::<Vec<_>>()
    );
    assert_eq!(args.rank as usize, rank);
}

/// Coordinates the checks accept fit the instruction's `.s32` operands, repeats included.
fn check_coords(rng: &mut XorShift, valid: &ValidSpec) -> Option<Vec<i64>> {
    let spec = valid.spec();
    let m = valid.inner_coord_multiple() as i64;
    let n = if rng.chance(1, 20) {
        rng.below(7) as usize
    } else {
        spec.rank()
    };
    let coords: Vec<i64> = (0..n).map(|_| coord(rng, m)).collect();
    let load = valid.check_coords(&coords);
    let store = valid.check_store_coords(&coords);
    for r in [&load, &store] {
        if let Err(e) = r {
            check_refusal(e);
        }
    }
    if store.is_ok() {
        assert!(load.is_ok());
        assert!(coords.iter().all(|&c| c >= 0));
    }
    load.ok()?;
    for (d, &c) in coords.iter().enumerate() {
        let last = i128::from(c) + i128::from(spec.repeat[d] - 1) * i128::from(spec.boxed[d]);
        assert!(i32::try_from(c).is_ok() && i32::try_from(last).is_ok());
    }
    assert_eq!(coords[spec.rank() - 1] % m, 0);
    Some(coords)
}

/// The model on small buffers: runs or refuses, never panics.
fn check_model(rng: &mut XorShift, bound: &BoundSpec, coords: &[i64]) -> bool {
    if bound.extent_bytes() > 1 << 18 || bound.plan().tx_bytes > 1 << 14 {
        return false;
    }
    let mut global = vec![0u8; bound.extent_bytes() as usize];
    rng.fill(&mut global);
    let smem = match model::load(bound, &global, coords) {
        Ok(s) => s,
        Err(_) => return false,
    };
    let _ = model::store(bound, &smem, coords, &mut global);
    let _ = model::reduce(bound, ReduceOp::Add, &smem, coords, &mut global);
    // A buffer one byte short is refused, not read past.
    if !global.is_empty() {
        let short = global.len() - 1;
        assert!(model::load(bound, &global[..short], coords).is_err());
    }
    true
}

#[derive(Default, Debug)]
struct Tally {
    cases: usize,
    valid: usize,
    bound: usize,
    coords_ok: usize,
    rendered: usize,
    modelled: usize,
    refusals_by_rule: std::collections::BTreeMap<String, usize>,
}

fn one_case(rng: &mut XorShift, t: &mut Tally) {
    let spec = random_spec(rng);
    t.cases += 1;
    // The unchecked path the validator tests use must not panic either.
    let static_global: Vec<u64> = spec.global.iter().map(|e| e.get().unwrap_or(1)).collect();
    let _ = EncodeArgs::from_parts(&spec, &static_global, &static_global);
    let valid = match validate(&spec) {
        Ok(v) => v,
        Err(e) => {
            check_refusal(&e);
            for f in &e.errors {
                *t.refusals_by_rule
                    .entry(format!("{:?}", f.rule))
                    .or_default() += 1;
            }
            return;
        }
    };
    t.valid += 1;
    check_plan_exact(&valid);
    let _ = valid.check_smem_address(u64_field(rng, |r| r.below(8) * 128));
    // Bind: static dims, or run-time ones of any size.
    let global: Vec<u64> = (0..list_len(rng, spec.rank()))
        .map(|d| match spec.global.get(d).and_then(|e| e.get()) {
            Some(v) if rng.chance(9, 10) => v,
            _ => u64_field(rng, |r| r.range(1, 300)),
        })
        .collect();
    let strides: Option<Vec<u64>> = rng.chance(1, 5).then(|| {
        (0..list_len(rng, spec.rank()))
            .map(|_| u64_field(rng, |r| r.range(0, 64) * 64))
            .collect()
    });
    if rng.chance(1, 8) {
        let code = TileCode::new(&valid, 0).expect("a valid spec renders");
        // Nothing rendered wraps a 32-bit field.
        let literals = tma_test_support::testgen::unsigned_literals(code.source());
        assert!(
            literals.iter().all(|&v| v <= u128::from(u32::MAX)),
            "{literals:?}"
        );
        t.rendered += 1;
    }
    let coords = check_coords(rng, &valid);
    t.coords_ok += usize::from(coords.is_some());
    let bound = match valid.bind(&global, strides.as_deref()) {
        Ok(b) => b,
        Err(e) => {
            check_refusal(&e);
            return;
        }
    };
    t.bound += 1;
    check_bound_exact(&bound);
    let addr = u64_field(rng, |r| r.below(4) * 16);
    let len = u64_field(rng, |r| r.below(1 << 20));
    let size_ok = spec.dtype.size_bytes().unwrap_or(1) == 1;
    match check_buffer::<u8>(&bound, addr, len) {
        Ok(()) => assert!(len >= bound.extent_bytes() && size_ok),
        Err(e) => assert!(!e.to_string().is_empty()),
    }
    let _ = check_buffer::<f64>(&bound, addr, len);
    if rng.chance(1, 8) && bound.plan().tx_bytes <= 1 << 14 {
        assert!(!tma::model::picture::smem_picture(&bound).is_empty());
    }
    if let Some(coords) = coords {
        t.modelled += usize::from(check_model(rng, &bound, &coords));
    }
}

/// 100,000 random specs through validate -> bind -> EncodeArgs -> check_buffer / check_coords
/// / check_smem_address -> render -> picture -> model. Set `TMA_HARDENING_CASES` for more (or fewer).
#[test]
fn no_input_panics_or_wraps() {
    let cases: usize = std::env::var("TMA_HARDENING_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(100_000);
    let start = std::time::Instant::now();
    let mut t = Tally::default();
    for seed in 0..cases as u64 {
        let mut rng = XorShift::new(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ 0x5eed);
        let mut replay = rng.clone();
        if let Err(panic) = catch_unwind(AssertUnwindSafe(|| one_case(&mut rng, &mut t))) {
            let spec = random_spec(&mut replay);
            panic!("case {seed} panicked: {panic:?}\nspec: {spec:#?}");
        }
    }
    println!("{t:#?}\n{:.1} s", start.elapsed().as_secs_f64());
    // The generator reaches every stage often enough to mean something.
    assert!(t.valid * 10 > cases, "{t:?}");
    assert!(t.bound * 20 > cases, "{t:?}");
    assert!(t.modelled * 50 > cases, "{t:?}");
    for rule in [
        "SizeOverflow",
        "NameIsIdentifier",
        "StrideMax",
        "TxBytesMax",
    ] {
        assert!(
            t.refusals_by_rule.contains_key(rule),
            "{rule} never hit: {t:?}"
        );
    }
}

// ---- one regression test per class found ----------------------------------------------

fn rules(r: &Result<impl std::fmt::Debug, SpecErrors>) -> Vec<Rule> {
    match r {
        Ok(_) => Vec::new(),
        Err(e) => e.errors.iter().map(|f| f.rule).collect(),
    }
}

/// Class 1: a tensor whose extent does not fit in u64 was bound with extent 0, so a 1 MiB
/// buffer passed `check_buffer`.
#[test]
fn an_extent_past_u64_is_refused() {
    let spec = TileSpec::new("huge", DType::U8, [1 << 32, 1 << 32], [16, 16]);
    let err = validate(&spec).unwrap_err();
    assert_eq!(rules(&Err::<(), _>(err.clone())), vec![Rule::SizeOverflow]);
    assert_eq!(err.errors[0].field, Field::List("global"));
    assert!(
        err.to_string().contains("more than any GPU can address"),
        "{err}"
    );
    // Just below: 2^32 x (2^32 - 16) bytes fits and is exact.
    let spec =
        TileSpec::new("big", DType::U8, [(1 << 32) - 1, 1 << 32], [16, 16]).strides([1 << 32, 1]);
    let bound = validate(&spec).unwrap().bound().unwrap();
    assert_eq!(
        bound.extent_bytes(),
        ((1u64 << 32) - 2) * (1 << 32) + (1 << 32)
    );
    assert!(check_buffer::<u8>(&bound, 0x1000, 1 << 20).is_err());
}

/// Class 1: an element stride times the element size that overflows was encoded as 0.
#[test]
fn a_stride_past_u64_is_refused_as_too_large() {
    let spec = TileSpec::new("f", DType::F64, [4, 16], [2, 16]).strides([1 << 61, 1]);
    let err = validate(&spec).unwrap_err();
    assert_eq!(err.errors.len(), 1, "{err}");
    assert_eq!(err.errors[0].rule, Rule::StrideMax);
    assert!(err.to_string().contains("more than 2^64 - 1 B"), "{err}");
    // The unchecked arguments saturate: the driver refuses them like any huge stride.
    let args = EncodeArgs::from_parts(&spec, &[4, 16], &[1 << 61, 1]);
    assert_eq!(args.global_strides, vec![u64::MAX]);
}

/// Class 1: box x repeat x element size, smem_stride x element size and the footprint sum
/// wrapped; a 5-D f64 spec whose every field is in range panicked in debug builds.
#[test]
fn plan_products_past_u64_are_findings() {
    let spec = TileSpec::new("r", DType::F64, [256; 5], [256; 5]).repeat([256; 5]);
    assert!(rules(&validate(&spec)).contains(&Rule::TxBytesMax));
    let spec = TileSpec::new("s", DType::F64, [64, 64], [8, 8])
        .repeat([1, 2])
        .smem_stride(1 << 62);
    let err = validate(&spec).unwrap_err();
    assert_eq!(err.errors[0].rule, Rule::SizeOverflow);
    assert_eq!(err.errors[0].field, Field::SmemStride);
    let spec = TileSpec::new("t", DType::F64, [64, 64], [8, 8])
        .repeat([1, 256])
        .smem_stride(1 << 58);
    assert_eq!(rules(&validate(&spec)), vec![Rule::SizeOverflow]);
    // Every field in range, dense strides of 2^32 x 2^32 x ... elements.
    let spec = TileSpec::new("five", DType::F64, [1 << 32; 5], [2, 2, 2, 2, 2]);
    let err = validate(&spec).unwrap_err();
    assert!(
        err.errors.iter().all(|e| e.rule == Rule::SizeOverflow),
        "{err}"
    );
}

/// Class 2: a name given through the builder reached generated CUDA unchecked.
#[test]
fn names_cannot_inject_cuda() {
    let spec = TileSpec::new("a\n#error injected", DType::F16, [64, 64], [8, 8]);
    let err = validate(&spec).unwrap_err();
    assert_eq!(err.errors[0].rule, Rule::NameIsIdentifier);
    assert_eq!(err.errors[0].field, Field::Name);
    let spec = TileSpec::new("a", DType::F16, [64, 64], [8, 8]).dim_names(["M", "K */ int x; /*"]);
    let err = validate(&spec).unwrap_err();
    assert_eq!(err.errors[0].field, Field::DimName { dim: 1 });
    for bad in ["int", "__x", "_X", "threadIdx", "namespace"] {
        let spec = TileSpec::new(bad, DType::F16, [64, 64], [8, 8]);
        assert_eq!(
            rules(&validate(&spec)),
            vec![Rule::NameIsIdentifier],
            "{bad}"
        );
        let spec = TileSpec::new("ok", DType::F16, [64, 64], [8, 8]).dim_names(["M", bad]);
        assert_eq!(
            rules(&validate(&spec)),
            vec![Rule::NameIsIdentifier],
            "{bad}"
        );
    }
    // A name at the edge of `_` would meet the generated code's own `_` (`tma__tile`).
    for bad in ["_tile", "tile_"] {
        let spec = TileSpec::new(bad, DType::F16, [64, 64], [8, 8]);
        assert_eq!(
            rules(&validate(&spec)),
            vec![Rule::NameIsIdentifier],
            "{bad}"
        );
    }
    let ok = TileSpec::new("t_1", DType::F16, [64, 64], [8, 8]).dim_names(["m_0", "k8"]);
    assert!(validate(&ok).is_ok());
}

/// Class 3: coordinates outside `int`, stride 0, and packed strides that are not whole bytes.
#[test]
fn ranges_are_checked() {
    let valid = validate(&TileSpec::new("c", DType::F16, [64, 64], [8, 8]).repeat([4, 1])).unwrap();
    assert!(valid.check_coords(&[i64::from(i32::MAX) - 24, 0]).is_ok());
    for (coords, dim) in [
        ([i64::from(i32::MAX) - 23, 0], 0), // the fourth box starts past i32::MAX
        ([1 << 32, 0], 0),
        ([0, i64::MIN], 1),
        ([i64::from(i32::MIN) - 1, 0], 0),
    ] {
        let e = valid.check_coords(&coords).unwrap_err();
        assert_eq!(e.errors[0].rule, Rule::CoordinateRange, "{coords:?}");
        assert_eq!(e.errors[0].field, Field::Coord { dim, name: None });
        assert!(valid.check_store_coords(&coords).is_err());
    }
    // Stride 0 aliases every row: a warning naming the stride. Extent 1 cannot alias.
    let zero = TileSpec::new("z", DType::F16, [4, 64], [2, 64]).strides([0, 1]);
    let v = validate(&zero).unwrap();
    let w: Vec<_> = v
        .warnings()
        .iter()
        .filter(|w| w.rule == Rule::StrideOverlap)
        .collect();
    assert_eq!(w.len(), 1, "{:?}", v.warnings());
    assert_eq!(w[0].field, Field::Stride { dim: 0, name: None });
    let one = TileSpec::new("o", DType::F16, [1, 64], [1, 64]).strides([0, 1]);
    assert!(validate(&one).unwrap().warnings().is_empty());
    // 6-bit values: 2 elements are 12 bits, not whole bytes. 64 are 48 bytes.
    let packed = |s: u64| {
        TileSpec::new("p", DType::U6x16Align16B, [4, 128], [2, 128])
            .strides([s, 1])
            .target(Arch::Sm100a)
    };
    let err = validate(&packed(130)).unwrap_err();
    assert_eq!(err.errors[0].rule, Rule::StrideWholeBytes, "{err}");
    assert!(err.to_string().contains("multiple of 4 elements"), "{err}");
    assert!(!rules(&validate(&packed(256))).contains(&Rule::StrideWholeBytes));
}

/// A shared memory no SM has is refused by validation (it was a warning, and the model
/// refused it only later): its sizes would wrap the generated 32-bit constants.
#[test]
fn a_footprint_larger_than_an_sm_is_refused() {
    let spec = TileSpec::new("w", DType::F16, [64, 64], [8, 8])
        .repeat([1, 2])
        .smem_stride(1 << 40);
    assert_eq!(rules(&validate(&spec)), vec![Rule::SmemFootprintTooLarge]);
}
