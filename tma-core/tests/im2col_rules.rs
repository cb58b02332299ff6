//! The im2col rules, one row each: a good spec, the same spec broken in one field, the rule
//! and the field the finding names (the tiled rules' table, tests/rules.rs, for im2col), and
//! the per-call checks. Hand-computed numbers from the driver's documentation and CUTLASS.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use tma_core::error::{Field, Severity};
use tma_core::limits::{im2col_corner_range, im2col_offset_max, MAX_PIXELS_PER_COLUMN};
use tma_core::{
    validate_im2col, DType, Extent, Im2colEncodeArgs, Im2colSpec, OobFill, Rule, SpecError, Swizzle,
};

/// NHWC bf16, 64 channels (128 B: the 128B swizzle's span), 128 pixels, 3x3 pad 1.
fn good() -> Im2colSpec {
    Im2colSpec::new("act", DType::BF16, [8, 56, 56, 64], 64, 128)
        .corners([-1, -1], [-1, -1])
        .swizzle(Swizzle::B128)
}

fn findings(spec: &Im2colSpec) -> Vec<SpecError> {
    match validate_im2col(spec) {
        Ok(v) => v.warnings().to_vec(),
        Err(e) => e.errors,
    }
}

fn spatial(list: &'static str, index: usize, name: &str) -> Field {
    Field::Spatial {
        list,
        index,
        name: Some(name.into()),
    }
}

struct Row {
    what: &'static str,
    broken: Im2colSpec,
    rule: Rule,
    field: Field,
}

fn rows() -> Vec<Row> {
    let row = |what, broken, rule, field| Row {
        what,
        broken,
        rule,
        field,
    };
    vec![
        row(
            "rank 2",
            Im2colSpec::new("act", DType::BF16, [56, 64], 64, 128),
            Rule::Im2colRank,
            Field::Rank,
        ),
        row(
            "rank 6",
            Im2colSpec::new("act", DType::BF16, [2, 2, 2, 2, 2, 64], 64, 128),
            Rule::Im2colRank,
            Field::Rank,
        ),
        row(
            "NHWC lower corner -129",
            good().corners([-129, -1], [-1, -1]),
            Rule::Im2colCornerRange,
            spatial("lower_corner", 0, "H"),
        ),
        row(
            "NHWC upper corner 128",
            good().corners([-1, -1], [-1, 128]),
            Rule::Im2colCornerRange,
            spatial("upper_corner", 1, "W"),
        ),
        row(
            "NDHWC lower corner -17",
            Im2colSpec::new("act", DType::BF16, [2, 8, 8, 8, 64], 64, 64)
                .corners([0, -17, 0], [0, 0, 0]),
            Rule::Im2colCornerRange,
            spatial("lower_corner", 1, "H"),
        ),
        row(
            "NWC upper corner 32768",
            Im2colSpec::new("act", DType::BF16, [2, 4096, 64], 64, 64).corners([0], [32768]),
            Rule::Im2colCornerRange,
            spatial("upper_corner", 0, "W"),
        ),
        row(
            "empty bounding box",
            good().corners([-1, 60], [-1, 3]),
            Rule::Im2colBoxEmpty,
            spatial("upper_corner", 1, "W"),
        ),
        row(
            "traversal stride 9",
            good().element_strides([9, 1]),
            Rule::ElementStrideRange,
            spatial("element_strides", 0, "H"),
        ),
        row(
            "traversal stride 0",
            good().element_strides([1, 0]),
            Rule::ElementStrideRange,
            spatial("element_strides", 1, "W"),
        ),
        row(
            "1025 pixels",
            Im2colSpec::new("act", DType::U8, [8, 56, 56, 16], 16, 1025),
            Rule::Im2colPixelsRange,
            Field::PixelsPerColumn,
        ),
        row(
            "0 pixels",
            Im2colSpec::new("act", DType::U8, [8, 56, 56, 16], 16, 0),
            Rule::Im2colPixelsRange,
            Field::PixelsPerColumn,
        ),
        row(
            "257 channels",
            Im2colSpec::new("act", DType::U8, [8, 56, 56, 512], 257, 16),
            Rule::BoxDimRange,
            Field::ChannelsPerPixel,
        ),
        row(
            "channels of 24 B",
            Im2colSpec::new("act", DType::BF16, [8, 56, 56, 64], 12, 16),
            Rule::InnerBoxBytesMultipleOf16,
            Field::ChannelsPerPixel,
        ),
        row(
            "channels past the swizzle span",
            good().swizzle(Swizzle::B64),
            Rule::InnerBoxFitsSwizzleSpan,
            Field::ChannelsPerPixel,
        ),
        row(
            "stride not on 16 B",
            Im2colSpec::new("act", DType::BF16, [8, 56, 56, 64], 64, 128).strides([
                56 * 56 * 64,
                56 * 64,
                68,
                1,
            ]),
            Rule::StrideAlignment,
            Field::Stride {
                dim: 2,
                name: Some("W".into()),
            },
        ),
        row(
            "NaN fill on integers",
            Im2colSpec::new("act", DType::U8, [8, 56, 56, 64], 64, 128)
                .oob_fill(OobFill::NanRequestZeroFma),
            Rule::NanFillNeedsFloat,
            Field::OobFill,
        ),
        row(
            "a load past an SM",
            Im2colSpec::new("act", DType::F64, [8, 56, 56, 256], 128, 1024),
            Rule::BoxTooLarge,
            Field::List("pixels_per_column x channels_per_pixel"),
        ),
        row(
            "corner list of the wrong length",
            good().corners([-1], [-1, -1]),
            Rule::ListLength,
            Field::List("lower_corner"),
        ),
    ]
}

#[test]
fn every_im2col_rule_has_a_row_that_breaks_only_it() {
    let good_findings = findings(&good());
    assert!(
        good_findings
            .iter()
            .all(|f| f.severity == Severity::Warning),
        "{good_findings:?}"
    );
    for r in rows() {
        let found = findings(&r.broken);
        let hit: Vec<_> = found.iter().filter(|f| f.rule == r.rule).collect();
        assert_eq!(hit.len(), 1, "{}: {found:#?}", r.what);
        assert_eq!(hit[0].field, r.field, "{}: {}", r.what, hit[0]);
        assert!(validate_im2col(&r.broken).is_err(), "{}", r.what);
        let text = hit[0].to_string();
        assert!(
            text.contains(&r.field.to_string()) && text.len() > 30,
            "{}: {text}",
            r.what
        );
    }
}

#[test]
fn every_violation_is_reported_at_once() {
    let spec = good()
        .corners([-200, -1], [-1, 300])
        .element_strides([0, 9]);
    let e = validate_im2col(&spec).unwrap_err();
    let rules: Vec<Rule> = e.errors.iter().map(|f| f.rule).collect();
    assert_eq!(
        rules,
        [
            Rule::Im2colCornerRange,
            Rule::Im2colCornerRange,
            Rule::ElementStrideRange,
            Rule::ElementStrideRange
        ],
        "{e}"
    );
}

/// The driver's documented corner ranges and CUTLASS's offset limits.
#[test]
fn corner_and_offset_ranges_per_rank() {
    assert_eq!(im2col_corner_range(1), (-32768, 32767));
    assert_eq!(im2col_corner_range(2), (-128, 127));
    assert_eq!(im2col_corner_range(3), (-16, 15));
    assert_eq!(im2col_offset_max(1), 65535);
    assert_eq!(im2col_offset_max(2), 255);
    assert_eq!(im2col_offset_max(3), 31);
    assert_eq!(MAX_PIXELS_PER_COLUMN, 1024);
    // The edges themselves are valid.
    for (g, lo, hi) in [
        (vec![2u64, 300, 32], vec![-32768], vec![32767]),
        (vec![2, 300, 300, 32], vec![-128, -128], vec![127, 127]),
        (
            vec![2, 40, 40, 40, 32],
            vec![-16, -16, -16],
            vec![15, 15, 15],
        ),
    ] {
        let spec = Im2colSpec::new("t", DType::U8, g, 32, 64).corners(lo, hi);
        assert!(
            validate_im2col(&spec).is_ok(),
            "{:?}",
            validate_im2col(&spec)
        );
    }
}

#[test]
fn calls_are_checked_at_run_time() {
    let runtime = [
        Extent::Runtime,
        Extent::Runtime,
        Extent::Runtime,
        Extent::Static(64),
    ];
    // A 3x3 filter without padding: the box is [0, extent - 2).
    let valid = validate_im2col(&good().global_extents(runtime).corners([0, 0], [-2, -2])).unwrap();
    assert_eq!(valid.tx_bytes(), 128 * 64 * 2);
    assert_eq!(valid.offset_max(), 255);
    assert!(valid.bind(&[1, 3, 3, 64], None).is_ok());
    let e = valid.bind(&[1, 3, 2, 64], None).unwrap_err();
    assert_eq!(e.errors[0].rule, Rule::Im2colBoxEmpty, "{e}");
    // Spatial dims stop at 2^31 - 1 (the H100's driver), N and C do not.
    // (Strides given: dense ones would pass 2^40 bytes first.)
    let strides = [192, 192, 64, 1];
    assert!(valid
        .bind(&[1, (1 << 31) - 1, 3, 64], Some(&strides))
        .is_ok());
    for global in [[1, 1 << 31, 3, 64], [1, 3, 1 << 32, 64]] {
        let e = valid.bind(&global, Some(&strides)).unwrap_err();
        assert_eq!(e.errors[0].rule, Rule::Im2colSpatialExtent, "{e}");
        assert!(e.to_string().contains("2^31 - 1"), "{e}");
    }
    assert!(valid.bind(&[1 << 32, 3, 3, 64], Some(&strides)).is_ok());
    let valid = validate_im2col(&good().global_extents(runtime)).unwrap();
    let b = valid.bind(&[8, 56, 56, 64], None).unwrap();
    assert!(b.check_call(&[0, -1, -1, 0], &[2, 2]).is_ok());
    let e = b.check_call(&[0, -2, 55, 4], &[256, 0]).unwrap_err();
    let rules: Vec<Rule> = e.errors.iter().map(|f| f.rule).collect();
    assert_eq!(
        rules,
        [
            Rule::CoordinateAlignment,
            Rule::Im2colOffsetRange,
            Rule::Im2colStartOutsideBox,
            Rule::Im2colStartOutsideBox
        ],
        "{e}"
    );
}

/// The encode arguments, innermost first, as CUTLASS's `make_im2col_tma_copy_desc` passes
/// them: corners W first, element strides 1 for C and N.
#[test]
fn encode_arguments_are_in_tma_order() {
    let spec = good().corners([-1, -2], [-3, -4]).element_strides([2, 3]);
    let b = validate_im2col(&spec).unwrap().bound().unwrap();
    let a = Im2colEncodeArgs::new(&b);
    assert_eq!(a.rank, 4);
    assert_eq!(a.global_dim, [64, 56, 56, 8]);
    assert_eq!(a.global_strides, [128, 128 * 56, 128 * 56 * 56]);
    assert_eq!(a.lower_corner, [-2, -1]);
    assert_eq!(a.upper_corner, [-4, -3]);
    assert_eq!(a.element_strides, [1, 3, 2, 1]);
    assert_eq!((a.channels_per_pixel, a.pixels_per_column), (64, 128));
    let text = a.to_string();
    assert!(text.contains("pixelBoxLowerCorner = [-2, -1]"), "{text}");
}
