//! A device-side map update checked on the host (`ValidSpec::map_update`): the new base, dims
//! and strides of a grouped kernel's `T::update_global`, each broken field a typed finding
//! naming the field, the value and the rule; the fields of a good one in TMA order.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use tma_core::validate::MAX_UPDATE_GLOBAL_DIM;
use tma_core::{validate, DType, Extent, Field, Rule, TileSpec, ValidSpec};

/// A grouped GEMM's A operand: `[M][K]` bf16, M, K and M's row pitch bound at run time.
fn grouped() -> ValidSpec {
    validate(
        &TileSpec::new("grouped_a", DType::BF16, [1, 1], [64, 64])
            .dim_names(["M", "K"])
            .global_extents([Extent::Runtime, Extent::Runtime])
            .stride_extents([Extent::Runtime, Extent::Static(1)]),
    )
    .unwrap()
}

/// The (rule, field) of every finding of an update.
fn findings(v: &ValidSpec, base: u64, dims: &[u64], strides: &[u64]) -> Vec<(Rule, Field)> {
    match v.map_update(base, dims, strides) {
        Ok(_) => Vec::new(),
        Err(e) => e.errors.into_iter().map(|e| (e.rule, e.field)).collect(),
    }
}

fn global(dim: usize, name: &str) -> Field {
    Field::Global {
        dim,
        name: Some(name.into()),
    }
}

#[test]
fn a_good_update_gives_its_fields_in_tma_order() {
    let u = grouped()
        .map_update(0x7f00_0000_0100, &[384, 200], &[256])
        .unwrap();
    assert_eq!(u.base(), 0x7f00_0000_0100);
    assert_eq!(u.shape_fields(), vec![384, 200, 256]);
    let args = u.encode_args();
    assert_eq!(args.global_dim, vec![200, 384]); // K first: TMA's dim 0 is the innermost
    assert_eq!(args.global_strides, vec![512]); // M's pitch in bytes
}

#[test]
fn each_broken_field_is_named_with_its_rule() {
    let v = grouped();
    let ok = (0x1000u64, [384u64, 200], [256u64]);
    assert!(findings(&v, ok.0, &ok.1, &ok.2).is_empty());
    assert_eq!(
        findings(&v, 0x1008, &ok.1, &ok.2),
        vec![(Rule::BaseAddressAlignment, Field::BaseAddress)]
    );
    assert_eq!(
        findings(&v, ok.0, &[384, 0], &ok.2),
        vec![(Rule::GlobalDimRange, global(1, "K"))]
    );
    // 2^32 is a dim the host encode takes, but the device update's operand is 32 bits.
    assert_eq!(MAX_UPDATE_GLOBAL_DIM, (1 << 32) - 1);
    assert_eq!(
        findings(&v, ok.0, &[1 << 32, 200], &[256]),
        vec![(Rule::GlobalDimRange, global(0, "M"))]
    );
    assert!(v.map_update(ok.0, &[(1 << 32) - 1, 200], &[256]).is_ok());
    let stride = Field::Stride {
        dim: 0,
        name: Some("M".into()),
    };
    assert_eq!(
        findings(&v, ok.0, &ok.1, &[204]),
        vec![(Rule::StrideAlignment, stride.clone())]
    );
    assert_eq!(
        findings(&v, ok.0, &ok.1, &[1 << 40]),
        vec![(Rule::StrideMax, stride)]
    );
    assert_eq!(
        findings(&v, ok.0, &ok.1, &[]),
        vec![(Rule::RuntimeShapeMismatch, Field::List("strides"))]
    );
    // All at once.
    assert_eq!(findings(&v, 0x1001, &[0, 200], &[204]).len(), 3);
}

#[test]
fn a_static_dim_keeps_its_declared_value() {
    let v = validate(
        &TileSpec::new("mixed", DType::F32, [8, 1, 64], [2, 4, 32])
            .dim_names(["H", "W", "C"])
            .global_extents([Extent::Runtime, Extent::Runtime, Extent::Static(64)])
            .stride_extents([Extent::Runtime, Extent::Static(64), Extent::Static(1)]),
    )
    .unwrap();
    assert!(v.map_update(0x100, &[8, 3, 64], &[192, 64]).is_ok());
    assert_eq!(
        findings(&v, 0x100, &[8, 3, 32], &[192, 64]),
        vec![(Rule::RuntimeShapeMismatch, global(2, "C"))]
    );
}
