//! One row per TMA rule: a good spec, and the same spec broken in exactly one way, with the
//! exact field and rule the validator must report.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use tma_core::{
    validate, Arch, DType, Extent, Field, Interleave, Major, OobFill, Operand, Rule, Severity,
    SpecError, Swizzle, TileSpec,
};

/// A valid rank-3 f16 tile: `[H=8][W=16][C=64]`, box `[2][4][32]`.
fn good() -> TileSpec {
    TileSpec::new("good", DType::F16, [8, 16, 64], [2, 4, 32]).dim_names(["H", "W", "C"])
}

fn named(d: usize) -> Option<String> {
    Some(["H", "W", "C"][d].to_string())
}

/// What a row expects: the rule, the field, the severity, and whether the finding
/// comes from binding run-time dims rather than from `validate`.
struct Row {
    what: &'static str,
    broken: fn() -> TileSpec,
    good: fn() -> TileSpec,
    rule: Rule,
    field: Field,
    severity: Severity,
}

fn row(
    what: &'static str,
    good: fn() -> TileSpec,
    broken: fn() -> TileSpec,
    rule: Rule,
    field: Field,
) -> Row {
    Row {
        what,
        broken,
        good,
        rule,
        field,
        severity: Severity::Error,
    }
}

fn warn_row(
    what: &'static str,
    good: fn() -> TileSpec,
    broken: fn() -> TileSpec,
    rule: Rule,
    field: Field,
) -> Row {
    Row {
        what,
        broken,
        good,
        rule,
        field,
        severity: Severity::Warning,
    }
}

fn interleaved() -> TileSpec {
    TileSpec::new("il", DType::F16, [4, 8, 16], [2, 1, 16])
        .interleave(Interleave::B32)
        .swizzle(Swizzle::B32)
}

fn repeated() -> TileSpec {
    TileSpec::new("rep", DType::BF16, [256, 256], [64, 64])
        .swizzle(Swizzle::B128)
        .repeat([1, 2])
}

fn blackwell() -> TileSpec {
    good().target(Arch::Sm100a)
}

/// A wgmma A operand: 128 x 64 bf16, K-major, 128B swizzle (two 64-row blocks, 4 k-slices).
fn operand_a() -> TileSpec {
    TileSpec::new("a", DType::BF16, [1024, 1024], [128, 64])
        .dim_names(["M", "K"])
        .swizzle(Swizzle::B128)
        .wgmma(Operand::A, Major::K)
}

/// A wgmma B operand: 64 x 128 bf16 (K x N), MN-major, 128B swizzle: two 64-wide atoms.
fn operand_b_mn() -> TileSpec {
    TileSpec::new("b", DType::BF16, [1024, 1024], [64, 64])
        .dim_names(["K", "N"])
        .swizzle(Swizzle::B128)
        .repeat([1, 2])
        .wgmma(Operand::B, Major::MN)
}

fn mk(dim: usize) -> Option<String> {
    Some(["M", "K"][dim].to_string())
}

fn rows() -> Vec<Row> {
    vec![
        row(
            "name is an identifier",
            good,
            || {
                let mut s = good();
                s.name = "9 lives".into();
                s
            },
            Rule::NameIsIdentifier,
            Field::Name,
        ),
        row(
            "dim names differ (they name coordinate fields)",
            good,
            || good().dim_names(["H", "W", "H"]),
            Rule::DimNameClash,
            Field::DimName { dim: 2 },
        ),
        row(
            "a named dim differs from an unnamed one's d<index>",
            || TileSpec::new("partly", DType::F16, [8, 64], [2, 32]),
            || {
                let mut s = TileSpec::new("partly", DType::F16, [8, 64], [2, 32]);
                s.dim_names = vec![Some("d1".into()), None];
                s
            },
            Rule::DimNameClash,
            Field::DimName { dim: 0 },
        ),
        row(
            "a dim name leaves the generated names alone",
            good,
            || good().dim_names(["H", "BYTES", "C"]),
            Rule::GeneratedNameClash,
            Field::DimName { dim: 1 },
        ),
        row(
            "a dim name is no macro of the headers the generated header includes (EOF)",
            good,
            || good().dim_names(["H", "EOF", "C"]),
            Rule::GeneratedNameClash,
            Field::DimName { dim: 1 },
        ),
        row(
            "two dims' generated names differ (W's stride parameter is stride_W)",
            good,
            || good().dim_names(["H", "W", "stride_W"]),
            Rule::DimNameClash,
            Field::DimName { dim: 2 },
        ),
        row(
            "a tile name leaves the generated names alone (tma_half is the prelude's)",
            good,
            || {
                let mut s = good();
                s.name = "half".into();
                s
            },
            Rule::GeneratedNameClash,
            Field::Name,
        ),
        row(
            "rank at least 1",
            good,
            || TileSpec::new("r0", DType::F16, [], []),
            Rule::RankRange,
            Field::Rank,
        ),
        row(
            "rank at most 5",
            good,
            || TileSpec::new("r6", DType::F16, [2, 2, 2, 2, 2, 8], [1, 1, 1, 1, 1, 8]),
            Rule::RankRange,
            Field::Rank,
        ),
        row(
            "interleave needs rank 3",
            interleaved,
            || TileSpec::new("il2", DType::F16, [8, 16], [4, 16]).interleave(Interleave::B16),
            Rule::InterleaveNeedsRank3,
            Field::Interleave,
        ),
        row(
            "one box dim per global dim",
            good,
            || {
                let mut s = good();
                s.boxed = vec![2, 32];
                s
            },
            Rule::ListLength,
            Field::List("boxed"),
        ),
        row(
            "one repeat per global dim",
            good,
            || good().repeat([1, 1]),
            Rule::ListLength,
            Field::List("repeat"),
        ),
        row(
            "one element stride per global dim",
            good,
            || good().element_strides([1, 1, 1, 1]),
            Rule::ListLength,
            Field::List("element_strides"),
        ),
        row(
            "one stride per global dim",
            good,
            || good().strides([1024, 1]),
            Rule::ListLength,
            Field::List("strides"),
        ),
        row(
            "global dim at least 1",
            good,
            || good().global_extents([Extent::Static(8), Extent::Static(0), Extent::Static(64)]),
            Rule::GlobalDimRange,
            Field::Global {
                dim: 1,
                name: named(1),
            },
        ),
        row(
            "global dim at most 2^32",
            good,
            || {
                good().global_extents([
                    Extent::Static((1 << 32) + 1),
                    Extent::Static(16),
                    Extent::Static(64),
                ])
            },
            Rule::GlobalDimRange,
            Field::Global {
                dim: 0,
                name: named(0),
            },
        ),
        row(
            "innermost stride is 1",
            good,
            || good().strides([2048, 128, 2]),
            Rule::InnerStrideIsOne,
            Field::Stride {
                dim: 2,
                name: named(2),
            },
        ),
        row(
            "byte strides are multiples of 16",
            good,
            || good().strides([1088, 68, 1]),
            Rule::StrideAlignment,
            Field::Stride {
                dim: 1,
                name: named(1),
            },
        ),
        row(
            "byte strides are multiples of 32 with 32B interleave",
            interleaved,
            || interleaved().strides([256, 24, 1]),
            Rule::StrideAlignment,
            Field::Stride { dim: 1, name: None },
        ),
        row(
            "byte strides below 2^40",
            good,
            || good().strides([1 << 40, 64, 1]),
            Rule::StrideMax,
            Field::Stride {
                dim: 0,
                name: named(0),
            },
        ),
        row(
            "box dim at least 1",
            good,
            || good().boxed_([2, 0, 32]),
            Rule::BoxDimRange,
            Field::Box {
                dim: 1,
                name: named(1),
            },
        ),
        row(
            "box dim at most 256",
            good,
            || TileSpec::new("b", DType::U8, [512, 64], [300, 64]),
            Rule::BoxDimRange,
            Field::Box { dim: 0, name: None },
        ),
        row(
            "element stride at least 1",
            good,
            || good().element_strides([0, 1, 1]),
            Rule::ElementStrideRange,
            Field::ElementStride {
                dim: 0,
                name: named(0),
            },
        ),
        row(
            "element stride at most 8",
            good,
            || good().element_strides([9, 1, 1]),
            Rule::ElementStrideRange,
            Field::ElementStride {
                dim: 0,
                name: named(0),
            },
        ),
        row(
            "innermost element stride is 1 without interleave",
            good,
            || good().element_strides([1, 1, 2]),
            Rule::InnerElementStrideIgnored,
            Field::ElementStride {
                dim: 2,
                name: named(2),
            },
        ),
        row(
            "inner box bytes multiple of 16",
            good,
            || good().boxed_([2, 4, 12]),
            Rule::InnerBoxBytesMultipleOf16,
            Field::Box {
                dim: 2,
                name: named(2),
            },
        ),
        // 21 6-bit values are 126 bits: rounded up to bytes they look like 16 B, but 16 B
        // takes 64 of them (128 / gcd(128, 6)).
        row(
            "inner box of a 6-bit type exactly a multiple of 16 bytes",
            || TileSpec::new("p6", DType::U6x16Align16B, [4, 128], [2, 64]).target(Arch::Sm100a),
            || TileSpec::new("p6", DType::U6x16Align16B, [4, 128], [2, 21]).target(Arch::Sm100a),
            Rule::InnerBoxBytesMultipleOf16,
            Field::Box { dim: 1, name: None },
        ),
        row(
            "inner box of a 4-bit type exactly a multiple of 16 bytes",
            || TileSpec::new("p4", DType::U4x16Align8B, [4, 128], [2, 32]).target(Arch::Sm100a),
            || TileSpec::new("p4", DType::U4x16Align8B, [4, 128], [2, 31]).target(Arch::Sm100a),
            Rule::InnerBoxBytesMultipleOf16,
            Field::Box { dim: 1, name: None },
        ),
        row(
            "inner box bytes multiple of 16 with interleave too",
            interleaved,
            || interleaved().boxed_([2, 1, 12]),
            Rule::InnerBoxBytesMultipleOf16,
            Field::Box { dim: 2, name: None },
        ),
        row(
            "a box fits the shared memory of an SM",
            || TileSpec::new("big", DType::U8, [256, 4, 256], [228, 4, 256]),
            || TileSpec::new("big", DType::U8, [256, 4, 256], [229, 4, 256]),
            Rule::BoxTooLarge,
            Field::List("boxed"),
        ),
        row(
            "an interleaved box's chunks fit the shared memory of an SM",
            || {
                TileSpec::new("ilbig", DType::U8, [256, 4, 256], [57, 1, 256])
                    .interleave(Interleave::B16)
            },
            || {
                TileSpec::new("ilbig", DType::U8, [256, 4, 256], [58, 1, 256])
                    .interleave(Interleave::B16)
            },
            Rule::BoxDataTooLarge,
            Field::List("boxed"),
        ),
        // The driver counts floor(box / element stride) per dim (an H100 accepts 57 / 2 as
        // 28 rows); the copy moves ceil = 29: 237568 B, more than one SM has.
        row(
            "a strided box whose copy overflows an SM",
            || {
                TileSpec::new("esbig", DType::U64, [256, 256, 256], [56, 64, 16])
                    .element_strides([2, 1, 1])
            },
            || {
                TileSpec::new("esbig", DType::U64, [256, 256, 256], [57, 64, 16])
                    .element_strides([2, 1, 1])
            },
            Rule::BoxDataTooLarge,
            Field::List("boxed"),
        ),
        row(
            "a strided box the driver counts over the limit",
            || {
                TileSpec::new("esbig", DType::U64, [256, 256, 256], [56, 64, 16])
                    .element_strides([2, 1, 1])
            },
            || {
                TileSpec::new("esbig", DType::U64, [256, 256, 256], [58, 64, 16])
                    .element_strides([2, 1, 1])
            },
            Rule::BoxTooLarge,
            Field::List("boxed"),
        ),
        row(
            "with interleave the box along dim 1 is 1",
            interleaved,
            || interleaved().boxed_([2, 4, 16]),
            Rule::InterleaveDim1BoxIsOne,
            Field::Box { dim: 1, name: None },
        ),
        warn_row(
            "an inner dim off 16 bytes is rounded up",
            good,
            || TileSpec::new("r", DType::F32, [8, 9], [8, 4]).strides([12, 1]),
            Rule::InnerDimRoundedUp,
            Field::Global { dim: 1, name: None },
        ),
        row(
            "inner box fits the 32B swizzle span",
            || good().boxed_([2, 4, 16]).swizzle(Swizzle::B32),
            || good().swizzle(Swizzle::B32),
            Rule::InnerBoxFitsSwizzleSpan,
            Field::Box {
                dim: 2,
                name: named(2),
            },
        ),
        row(
            "inner box fits the 64B swizzle span",
            || good().swizzle(Swizzle::B64),
            || good().boxed_([2, 4, 64]).swizzle(Swizzle::B64),
            Rule::InnerBoxFitsSwizzleSpan,
            Field::Box {
                dim: 2,
                name: named(2),
            },
        ),
        row(
            "inner box fits the 128B swizzle span",
            || good().boxed_([2, 4, 64]).swizzle(Swizzle::B128),
            || TileSpec::new("w", DType::F32, [8, 64], [8, 64]).swizzle(Swizzle::B128),
            Rule::InnerBoxFitsSwizzleSpan,
            Field::Box { dim: 1, name: None },
        ),
        row(
            "32B interleave needs the 32B swizzle",
            interleaved,
            || interleaved().swizzle(Swizzle::B128),
            Rule::Interleave32NeedsSwizzle32,
            Field::Swizzle,
        ),
        row(
            "Blackwell swizzle needs sm_100",
            blackwell,
            || good().swizzle(Swizzle::B128Atom32B),
            Rule::SwizzleNeedsBlackwell,
            Field::Swizzle,
        ),
        row(
            "packed types need sm_100",
            || TileSpec::new("p", DType::U4x16Align8B, [8, 256], [4, 128]).target(Arch::Sm100a),
            || TileSpec::new("p", DType::U4x16Align8B, [8, 256], [4, 128]),
            Rule::PackedTypeNeedsBlackwell,
            Field::DType,
        ),
        row(
            "packed types need no interleave",
            || {
                TileSpec::new("p", DType::U4x16Align8B, [4, 8, 256], [2, 4, 128])
                    .target(Arch::Sm100a)
            },
            || {
                TileSpec::new("p", DType::U4x16Align8B, [4, 8, 256], [2, 4, 128])
                    .target(Arch::Sm100a)
                    .interleave(Interleave::B16)
            },
            Rule::PackedTypeNoInterleave,
            Field::Interleave,
        ),
        row(
            "packed ALIGN16B inner dim multiple of 128",
            || TileSpec::new("p", DType::U4x16Align16B, [8, 256], [4, 128]).target(Arch::Sm100a),
            || TileSpec::new("p", DType::U4x16Align16B, [8, 192], [4, 128]).target(Arch::Sm100a),
            Rule::PackedTypeAlignment,
            Field::Global { dim: 1, name: None },
        ),
        row(
            "NaN fill needs a float type",
            || good().oob_fill(OobFill::NanRequestZeroFma),
            || TileSpec::new("n", DType::U8, [8, 64], [2, 32]).oob_fill(OobFill::NanRequestZeroFma),
            Rule::NanFillNeedsFloat,
            Field::OobFill,
        ),
        row(
            "repeat at least 1",
            repeated,
            || repeated().repeat([0, 2]),
            Rule::RepeatRange,
            Field::Repeat { dim: 0, name: None },
        ),
        row(
            "repeated boxes must not overlap",
            repeated,
            || repeated().smem_stride(2048),
            Rule::SmemStrideOverlap,
            Field::SmemStride,
        ),
        row(
            "repeated boxes keep the swizzle alignment",
            repeated,
            || repeated().smem_stride(4096 + 64),
            Rule::SmemStrideAlignment,
            Field::SmemStride,
        ),
        row(
            "tx bytes fit an mbarrier",
            repeated,
            || TileSpec::new("big", DType::F64, [4096, 4096], [256, 16]).repeat([2, 16]),
            Rule::TxBytesMax,
            Field::SmemFootprint,
        ),
        // Two 8 KB boxes 220 KB apart span 228 KB: one SM's worth, 1 KB over what a block
        // may use.
        warn_row(
            "footprint within the per-block limit",
            repeated,
            || repeated().smem_stride(220 * 1024 / 2),
            Rule::SmemFootprintLimit,
            Field::SmemFootprint,
        ),
        row(
            "footprint within one SM",
            repeated,
            || repeated().repeat([4, 8]),
            Rule::SmemFootprintTooLarge,
            Field::SmemFootprint,
        ),
        warn_row(
            "box larger than the tensor",
            good,
            || TileSpec::new("g", DType::F16, [2, 64], [4, 64]),
            Rule::BoxExceedsGlobal,
            Field::Box { dim: 0, name: None },
        ),
        row(
            "a wgmma operand is f16, bf16, tf32, e4m3 or e5m2",
            operand_a,
            || {
                let mut s = operand_a();
                s.dtype = DType::U16;
                s
            },
            Rule::WgmmaDType,
            Field::DType,
        ),
        row(
            "MN-major operands only for 16-bit types",
            || {
                TileSpec::new("b", DType::E4M3, [1024, 1024], [64, 128])
                    .swizzle(Swizzle::B128)
                    .wgmma(Operand::B, Major::K)
            },
            || {
                TileSpec::new("b", DType::E4M3, [1024, 1024], [64, 128])
                    .swizzle(Swizzle::B128)
                    .wgmma(Operand::B, Major::MN)
            },
            Rule::WgmmaMajor,
            Field::Wgmma,
        ),
        row(
            "wgmma needs sm_90a",
            operand_a,
            || operand_a().target(Arch::Sm100a),
            Rule::WgmmaNeedsSm90a,
            Field::Target,
        ),
        row(
            "an operand repeats along MN only in back-to-back boxes, K one box",
            || {
                TileSpec::new("a", DType::BF16, [1024, 1024], [64, 64])
                    .dim_names(["M", "K"])
                    .swizzle(Swizzle::B128)
                    .repeat([2, 1])
                    .wgmma(Operand::A, Major::K)
            },
            || {
                TileSpec::new("a", DType::BF16, [1024, 1024], [64, 32])
                    .dim_names(["M", "K"])
                    .swizzle(Swizzle::B128)
                    .repeat([2, 2])
                    .wgmma(Operand::A, Major::K)
            },
            Rule::WgmmaTileShape,
            Field::Repeat {
                dim: 0,
                name: mk(0),
            },
        ),
        row(
            "an operand's inner box is 16 bytes without swizzle",
            || {
                TileSpec::new("a", DType::BF16, [1024, 1024], [64, 8])
                    .dim_names(["M", "K"])
                    .repeat([1, 2])
                    .wgmma(Operand::A, Major::K)
            },
            || {
                TileSpec::new("a", DType::BF16, [1024, 1024], [64, 16])
                    .dim_names(["M", "K"])
                    .wgmma(Operand::A, Major::K)
            },
            Rule::WgmmaInnerBox,
            Field::Box {
                dim: 1,
                name: mk(1),
            },
        ),
        row(
            "an MN-major swizzled operand's inner box is the span",
            operand_b_mn,
            || {
                TileSpec::new("b", DType::BF16, [1024, 1024], [64, 32])
                    .dim_names(["K", "N"])
                    .swizzle(Swizzle::B128)
                    .repeat([1, 4])
                    .wgmma(Operand::B, Major::MN)
            },
            Rule::WgmmaInnerBox,
            Field::Box {
                dim: 1,
                name: Some("N".into()),
            },
        ),
        row(
            "A holds whole 64-row blocks",
            operand_a,
            || operand_a().boxed_2([96, 64]),
            Rule::WgmmaMnExtent,
            Field::Box {
                dim: 0,
                name: mk(0),
            },
        ),
        row(
            "B's N is at most 256",
            operand_b_mn,
            || operand_b_mn().repeat([1, 5]),
            Rule::WgmmaMnExtent,
            Field::Box {
                dim: 1,
                name: Some("N".into()),
            },
        ),
        row(
            "K is whole instructions",
            operand_b_mn,
            || operand_b_mn().boxed_2([24, 64]),
            Rule::WgmmaKExtent,
            Field::Box {
                dim: 0,
                name: Some("K".into()),
            },
        ),
        warn_row(
            "strides that alias",
            good,
            || good().strides([512, 32, 1]),
            Rule::StrideOverlap,
            Field::Stride {
                dim: 1,
                name: named(1),
            },
        ),
    ]
}

/// Lets rows replace the box without repeating the whole spec.
trait BoxedExt {
    fn boxed_(self, b: [u32; 3]) -> Self;
    fn boxed_2(self, b: [u32; 2]) -> Self;
}
impl BoxedExt for TileSpec {
    fn boxed_(mut self, b: [u32; 3]) -> Self {
        self.boxed = b.to_vec();
        self
    }
    fn boxed_2(mut self, b: [u32; 2]) -> Self {
        self.boxed = b.to_vec();
        self
    }
}

/// Every finding of a spec: its errors, or its warnings when it is valid.
fn findings(spec: &TileSpec) -> Vec<SpecError> {
    match validate(spec) {
        Ok(v) => v.warnings().to_vec(),
        Err(e) => e.errors,
    }
}

#[test]
fn every_rule_has_a_row_that_breaks_only_it() {
    let rows = rows();
    assert!(rows.len() >= 25, "only {} rows", rows.len());
    for r in &rows {
        let good = (r.good)();
        let good_findings = findings(&good);
        assert!(
            good_findings.iter().all(|f| f.rule != r.rule),
            "{}: the good spec already breaks {:?}: {good_findings:?}",
            r.what,
            r.rule
        );
        assert!(
            good_findings
                .iter()
                .all(|f| f.severity == Severity::Warning),
            "{}: good spec invalid: {good_findings:?}",
            r.what
        );
        let broken = (r.broken)();
        let found = findings(&broken);
        let hit: Vec<_> = found.iter().filter(|f| f.rule == r.rule).collect();
        assert_eq!(
            hit.len(),
            1,
            "{}: expected one {:?}, got {found:#?}",
            r.what,
            r.rule
        );
        assert_eq!(
            hit[0].field, r.field,
            "{}: wrong field in {}",
            r.what, hit[0]
        );
        assert_eq!(hit[0].severity, r.severity, "{}: {}", r.what, hit[0]);
        if r.severity == Severity::Error {
            assert!(validate(&broken).is_err(), "{}", r.what);
        }
        // Every finding says field, value and rule in words.
        let text = hit[0].to_string();
        assert!(
            text.contains(&hit[0].field.to_string()) && text.len() > 30,
            "{}: {text}",
            r.what
        );
    }
}

#[test]
fn every_violation_is_reported_at_once() {
    let spec = good()
        .boxed_([0, 300, 12])
        .element_strides([9, 1, 1])
        .oob_fill(OobFill::NanRequestZeroFma)
        .strides([1028, 68, 1]);
    let err = validate(&spec).expect_err("broken in five ways");
    let rules: Vec<Rule> = err.errors.iter().map(|e| e.rule).collect();
    for want in [
        Rule::BoxDimRange,
        Rule::ElementStrideRange,
        Rule::InnerBoxBytesMultipleOf16,
        Rule::StrideAlignment,
    ] {
        assert!(rules.contains(&want), "missing {want:?} in {rules:?}");
    }
    assert_eq!(rules.iter().filter(|r| **r == Rule::BoxDimRange).count(), 2);
    let text = err.to_string();
    assert!(text.contains("boxed[1] (W) = 300"), "{text}");
    assert!(text.contains("[1, 256]"), "{text}");
    assert!(text.starts_with("tile `good` breaks"), "{text}");
}

#[test]
fn runtime_dims_are_checked_when_bound() {
    let spec = TileSpec::new("rt", DType::F16, [0, 0, 32], [2, 2, 32]).global_extents([
        Extent::Runtime,
        Extent::Runtime,
        Extent::Static(32),
    ]);
    let valid = validate(&spec).expect("static parts are fine");
    assert!(!valid.is_static() && valid.bound().is_none());
    let bound = valid.bind(&[94, 162, 32], None).expect("binds");
    assert_eq!(bound.strides(), &[162 * 32, 32, 1]);
    let err = valid
        .bind(&[94, 162, 48], None)
        .expect_err("C is declared 32");
    assert_eq!(err.errors[0].rule, Rule::RuntimeShapeMismatch);
    assert_eq!(err.errors[0].field, Field::Global { dim: 2, name: None });
    let err = valid
        .bind(&[94, 162, 32], Some(&[5000, 30, 1]))
        .expect_err("60 B stride");
    assert_eq!(err.errors[0].rule, Rule::StrideAlignment);
    let err = valid.bind(&[94, 0, 32], None).expect_err("empty dim");
    assert_eq!(err.errors[0].rule, Rule::GlobalDimRange);
    // Dense strides past 64 bits: a dim out of range is what to fix (the header's
    // tma_encode_<tile> names it too; tests/encode_checks_agree.rs); in range, the shape.
    let err = valid.bind(&[2, u64::MAX, 32], None).expect_err("huge dim");
    let rules: Vec<_> = err
        .errors
        .iter()
        .map(|e| (e.rule, e.field.clone()))
        .collect();
    assert_eq!(
        rules,
        [(Rule::GlobalDimRange, Field::Global { dim: 1, name: None })]
    );
    let wide = TileSpec::new("wide", DType::F16, [0, 0, 32], [2, 2, 32]).global_extents([
        Extent::Runtime,
        Extent::Runtime,
        Extent::Runtime,
    ]);
    let err = validate(&wide)
        .unwrap()
        .bind(&[2, 1 << 32, 1 << 32], None)
        .expect_err("2^64 elements");
    assert_eq!(err.errors.len(), 1, "{err}");
    assert_eq!(err.errors[0].rule, Rule::SizeOverflow);
}

#[test]
fn addresses_are_checked() {
    let bound = validate(&good()).unwrap().bound().unwrap();
    assert!(bound.check_base_address(0x1000).is_ok());
    let e = bound.check_base_address(0x1008).unwrap_err();
    assert_eq!(e.errors[0].rule, Rule::BaseAddressAlignment);
    let valid = validate(&repeated()).unwrap();
    assert!(valid.check_smem_address(2048).is_ok());
    // The innermost coordinate must sit on 16 bytes (8 bf16 elements here).
    assert_eq!(valid.inner_coord_multiple(), 8);
    assert!(valid.check_coords(&[3, -8]).is_ok());
    let e = valid.check_coords(&[0, 4]).unwrap_err();
    assert_eq!(e.errors[0].rule, Rule::CoordinateAlignment);
    assert_eq!(e.errors[0].field, Field::Coord { dim: 1, name: None });
    assert!(e.to_string().contains("multiple of 8 elements"), "{e}");
    // 16 bytes of a 6-bit type are 64 values (21 are 126 bits), of a 4-bit type 32.
    let packed = |dtype, inner| {
        validate(&TileSpec::new("p", dtype, [4, 128], [2, inner]).target(Arch::Sm100a)).unwrap()
    };
    let six = packed(DType::U6x16Align16B, 64);
    assert_eq!(six.inner_coord_multiple(), 64);
    assert!(six.check_coords(&[0, 64]).is_ok());
    let e = six.check_coords(&[0, 21]).unwrap_err();
    assert_eq!(e.errors[0].rule, Rule::CoordinateAlignment);
    assert!(e.to_string().contains("multiple of 64 elements"), "{e}");
    assert_eq!(packed(DType::U4x16Align8B, 32).inner_coord_multiple(), 32);
    // Stores take no negative coordinate; loads do.
    assert!(valid.check_store_coords(&[0, 8]).is_ok());
    let e = valid.check_store_coords(&[-1, 8]).unwrap_err();
    assert_eq!(e.errors[0].rule, Rule::StoreCoordinateNegative);
    assert_eq!(e.errors[0].field, Field::Coord { dim: 0, name: None });
    let e = valid.check_smem_address(128).unwrap_err();
    assert_eq!(e.errors[0].rule, Rule::SmemAddressAlignment);
    assert!(e.to_string().contains("1024"), "{e}");
}

/// A footprint past one SM is an error, not a warning: a stride of 2^32 B would wrap the
/// generated 32-bit `SMEM_BYTES` and box offsets. At the limit, every rendered unsigned
/// literal fits 32 bits.
#[test]
fn a_footprint_past_an_sm_is_refused_and_nothing_rendered_wraps() {
    // 2^31 bf16 elements: two boxes 2^32 B apart.
    let err = validate(&repeated().smem_stride(1 << 31)).unwrap_err();
    let rules: Vec<Rule> = err.errors.iter().map(|e| e.rule).collect();
    assert_eq!(rules, vec![Rule::SmemFootprintTooLarge], "{err}");
    assert!(
        err.to_string()
            .contains("one call spans 4294975488 B of shared memory"),
        "{err}"
    );
    // One SM exactly: a warning (a block may use 1 KB less), and the largest numbers render.
    let at_limit = validate(&repeated().smem_stride(220 * 1024 / 2)).unwrap();
    assert_eq!(at_limit.plan().footprint_bytes, 228 * 1024);
    for valid in [at_limit, validate(&repeated()).unwrap()] {
        let code = tma_core::render::TileCode::new(&valid, 7).unwrap();
        let literals = tma_test_support::testgen::unsigned_literals(code.source());
        assert!(literals.contains(&u128::from(valid.plan().footprint_bytes)));
        assert!(
            literals.iter().all(|&v| v <= u128::from(u32::MAX)),
            "{:?}",
            literals.iter().max()
        );
    }
}

/// With one box nothing is repeated: an smem_stride of any size (even past 64 bits) is
/// unused, so it is no error, and the plan keeps the default stride.
#[test]
fn a_single_box_ignores_its_smem_stride() {
    let single = || TileSpec::new("one", DType::F64, [64, 64], [8, 8]);
    for stride in [u64::MAX, 1 << 62, 1] {
        let valid = validate(&single().smem_stride(stride)).unwrap();
        assert_eq!(valid.plan().stride_bytes, 512, "{stride}");
        assert_eq!(valid.plan().footprint_bytes, 512, "{stride}");
    }
    // Two boxes use it: too large for 64 bits is an error there.
    let err = validate(&single().repeat([1, 2]).smem_stride(1 << 62)).unwrap_err();
    assert_eq!(err.errors[0].rule, Rule::SizeOverflow, "{err}");
}

// ---- pipelines and warp roles: one row per rule, the same shape as above ----

mod pipeline_rules {
    use tma_core::pipeline::{ClusterAxis, Consumers, PipelineSpec, RoleWarps, WarpRoles};
    use tma_core::{validate, Arch, DType, Field, Rule, SpecError, Swizzle, TileSpec, ValidSpec};

    fn tile(name: &str, rows: u32, repeat: u32, target: Arch) -> ValidSpec {
        validate(
            &TileSpec::new(name, DType::BF16, [4096, 4096], [rows, 64])
                .swizzle(Swizzle::B128)
                .repeat([repeat, 1])
                .target(target),
        )
        .unwrap()
    }

    /// A 4-stage GEMM ring: A 128 x 64 as two 64-row boxes multicast along x of a 2 x 1
    /// cluster, B 128 x 64 loaded alone; 32 KB per stage.
    fn good() -> PipelineSpec {
        PipelineSpec::new("ring", 4, Consumers::Warpgroups(2))
            .multicast_tile("a", &tile("a", 64, 2, Arch::Sm90a), ClusterAxis::X)
            .tile("b", &tile("b", 128, 1, Arch::Sm90a))
            .cluster([2, 1, 1])
            .reserve_smem(1024)
    }

    fn roles() -> WarpRoles {
        WarpRoles::new("gemm", 40, 2, 232).barrier("consumers", 256)
    }

    /// One producer warp, four consumer warps, an epilogue barrier per consumer: 160
    /// threads, no setmaxnreg, ids 1 .. 5.
    fn warps() -> WarpRoles {
        WarpRoles::warps("epi", 1, 4)
            .barrier("all", 128)
            .per_consumer_barrier("epi", 32)
    }

    enum Broken {
        Pipe(fn() -> PipelineSpec),
        Roles(fn() -> WarpRoles),
    }

    fn findings(b: &Broken) -> (Vec<SpecError>, bool) {
        let r = match b {
            Broken::Pipe(f) => f().validate().map(|_| ()),
            Broken::Roles(f) => f().validate().map(|_| ()),
        };
        match r {
            Ok(()) => (Vec::new(), true),
            Err(e) => (e.errors, false),
        }
    }

    fn rows() -> Vec<(&'static str, Broken, Rule, Field)> {
        let a = || Field::StageTile {
            index: 0,
            member: "a".into(),
        };
        vec![
            (
                "zero stages",
                Broken::Pipe(|| PipelineSpec {
                    stages: 0,
                    ..good()
                }),
                Rule::PipelineStageCount,
                Field::Stages,
            ),
            (
                "no tiles",
                Broken::Pipe(|| PipelineSpec {
                    tiles: vec![],
                    ..good()
                }),
                Rule::PipelineTiles,
                Field::Tiles,
            ),
            (
                "two members named alike",
                Broken::Pipe(|| good().tile("b", &tile("c", 64, 1, Arch::Sm90a))),
                Rule::PipelineTiles,
                Field::StageTile {
                    index: 2,
                    member: "b".into(),
                },
            ),
            (
                "two different tiles of one name",
                Broken::Pipe(|| good().tile("c", &tile("b", 64, 1, Arch::Sm90a))),
                Rule::PipelineTiles,
                Field::StageTile {
                    index: 2,
                    member: "c".into(),
                },
            ),
            (
                "a pipeline named like a helper (tma_pipe_state)",
                Broken::Pipe(|| PipelineSpec {
                    name: "state".into(),
                    ..good()
                }),
                Rule::GeneratedNameClash,
                Field::Name,
            ),
            (
                "a member named like load's stage parameter",
                Broken::Pipe(|| {
                    let mut p = good();
                    p.tiles[1].member = "s".into();
                    p
                }),
                Rule::GeneratedNameClash,
                Field::StageTile {
                    index: 1,
                    member: "s".into(),
                },
            ),
            (
                "members whose generated names meet (a's map parameter is a_map)",
                Broken::Pipe(|| {
                    let mut p = good();
                    p.tiles[1].member = "a_map".into();
                    p
                }),
                Rule::PipelineTiles,
                Field::StageTile {
                    index: 1,
                    member: "a_map".into(),
                },
            ),
            (
                "a tile for another arch",
                Broken::Pipe(|| {
                    let mut p = good();
                    p.tiles[0].tile = tile("a", 64, 2, Arch::Sm100a);
                    p
                }),
                Rule::PipelineTileTarget,
                a(),
            ),
            (
                "eight 32 KB stages beside 1 KB",
                Broken::Pipe(|| PipelineSpec {
                    stages: 8,
                    ..good()
                }),
                Rule::PipelineStagesFit,
                Field::Stages,
            ),
            (
                "nine consumer warpgroups",
                Broken::Pipe(|| PipelineSpec {
                    consumers: Consumers::Warpgroups(9),
                    ..good()
                }),
                Rule::PipelineConsumers,
                Field::Consumers,
            ),
            (
                "a cluster of 32",
                Broken::Pipe(|| good().cluster([2, 16, 1])),
                Rule::ClusterShape,
                Field::Cluster { axis: 1 },
            ),
            (
                "multicast along an axis of 1",
                Broken::Pipe(|| good().cluster([1, 2, 1])),
                Rule::MulticastAxis,
                Field::Multicast {
                    index: 0,
                    member: "a".into(),
                },
            ),
            (
                "one box over two CTAs",
                Broken::Pipe(|| {
                    let mut p = good();
                    p.tiles[0].tile = tile("a", 128, 1, Arch::Sm90a);
                    p
                }),
                Rule::MulticastSlices,
                Field::Multicast {
                    index: 0,
                    member: "a".into(),
                },
            ),
            (
                "setmaxnreg 236",
                Broken::Roles(|| roles().setmaxnreg(40, 236)),
                Rule::SetmaxnregRange,
                Field::WarpRoles("consumer_regs"),
            ),
            (
                "nine warpgroups, past a block",
                Broken::Roles(|| roles().producer_warpgroups(7)),
                Rule::WarpgroupCounts,
                Field::WarpRoles("producer_warpgroups + consumer_warpgroups"),
            ),
            (
                "no block per SM",
                Broken::Roles(|| roles().blocks_per_sm(0)),
                Rule::WarpgroupCounts,
                Field::WarpRoles("blocks_per_sm"),
            ),
            (
                "consumers raised to 160, below the launch's 168",
                Broken::Roles(|| roles().setmaxnreg(40, 160)),
                Rule::SetmaxnregDirection,
                Field::WarpRoles("consumer_regs"),
            ),
            (
                "the producer lowered to 176, above the launch's 168",
                Broken::Roles(|| WarpRoles::new("gemm", 176, 2, 168)),
                Rule::SetmaxnregDirection,
                Field::WarpRoles("producer_regs"),
            ),
            (
                "240 registers for 2 consumers",
                Broken::Roles(|| roles().setmaxnreg(40, 240)),
                Rule::RegisterBudget,
                Field::WarpRoles("consumer_regs"),
            ),
            (
                "barriers whose generated names meet (BARRIER_consumers_THREADS)",
                Broken::Roles(|| roles().barrier("consumers_THREADS", 128)),
                Rule::NamedBarrierIds,
                Field::NamedBarrier {
                    name: "consumers_THREADS".into(),
                },
            ),
            (
                "a per-consumer barrier whose generated names meet another's (BARRIER_consumers_THREADS)",
                Broken::Roles(|| roles().per_consumer_barrier("consumers_THREADS", 128)),
                Rule::NamedBarrierIds,
                Field::NamedBarrier {
                    name: "consumers_THREADS".into(),
                },
            ),
            (
                "a named barrier of 100 threads",
                Broken::Roles(|| roles().barrier("odd", 100)),
                Rule::NamedBarrierIds,
                Field::NamedBarrier { name: "odd".into() },
            ),
            (
                "ids 14 to 17 for a fourth per-consumer barrier over 4 consumer warps",
                Broken::Roles(|| {
                    warps()
                        .per_consumer_barrier("p0", 32)
                        .per_consumer_barrier("p1", 64)
                        .per_consumer_barrier("p2", 32)
                }),
                Rule::NamedBarrierIds,
                Field::NamedBarrier { name: "p2".into() },
            ),
            (
                "setmaxnreg over one producer warp",
                Broken::Roles(|| warps().setmaxnreg(40, 232)),
                Rule::SetmaxnregWarpgroups,
                Field::WarpRoles("producer_warps"),
            ),
            (
                "consumer warpgroups after one producer warp",
                Broken::Roles(|| warps().consumers(RoleWarps::Warpgroups(2))),
                Rule::WarpgroupAlignment,
                Field::WarpRoles("producer_warps"),
            ),
            (
                "no consumer warps",
                Broken::Roles(|| WarpRoles::warps("epi", 1, 0)),
                Rule::WarpgroupCounts,
                Field::WarpRoles("consumer_warps"),
            ),
            (
                "33 blocks per SM",
                Broken::Roles(|| roles().blocks_per_sm(33)),
                Rule::BlocksPerSm,
                Field::WarpRoles("blocks_per_sm"),
            ),
            (
                "384 threads x 6 blocks per SM = 2304",
                Broken::Roles(|| WarpRoles::new("gemm", 24, 2, 24).blocks_per_sm(6)),
                Rule::ThreadsPerSm,
                Field::WarpRoles("blocks_per_sm"),
            ),
        ]
    }

    #[test]
    fn every_pipeline_rule_has_a_row_that_breaks_only_it() {
        assert!(good().validate().is_ok(), "{:?}", good().validate().err());
        assert!(roles().validate().is_ok());
        assert!(warps().validate().is_ok());
        let rows = rows();
        for (what, broken, rule, field) in &rows {
            let (found, ok) = findings(broken);
            assert!(!ok, "{what}: validated");
            assert_eq!(found.len(), 1, "{what}: {found:#?}");
            assert_eq!(found[0].rule, *rule, "{what}: {}", found[0]);
            assert_eq!(found[0].field, *field, "{what}: {}", found[0]);
            let text = found[0].to_string();
            assert!(
                text.contains(&field.to_string()) && text.len() > 30,
                "{what}: {text}"
            );
        }
        for rule in [
            Rule::PipelineStageCount,
            Rule::PipelineTiles,
            Rule::PipelineTileTarget,
            Rule::PipelineStagesFit,
            Rule::PipelineConsumers,
            Rule::ClusterShape,
            Rule::MulticastAxis,
            Rule::MulticastSlices,
            Rule::WarpgroupCounts,
            Rule::SetmaxnregRange,
            Rule::SetmaxnregDirection,
            Rule::RegisterBudget,
            Rule::NamedBarrierIds,
            Rule::SetmaxnregWarpgroups,
            Rule::WarpgroupAlignment,
            Rule::BlocksPerSm,
            Rule::ThreadsPerSm,
            Rule::GeneratedNameClash,
        ] {
            assert!(rows.iter().any(|r| r.2 == rule), "{rule:?} has no row");
        }
        // Five blocks of 384 threads fit an SM's 2048 (and 32 registers each): the good side
        // of the ThreadsPerSm row.
        assert!(WarpRoles::new("gemm", 24, 2, 32)
            .blocks_per_sm(5)
            .validate()
            .is_ok());
    }
}

// ---- launch shapes and wgmma descriptors: one row per rule, a good one beside it ----

mod launch_rules {
    use tma_core::launch::{check_launch_shape, Dims};
    use tma_core::wgmma::OperandPlan;
    use tma_core::{validate, DType, Field, Major, Operand, Rule, Swizzle, TileSpec};

    const GOOD: (Dims, Dims, Option<Dims>) = ((8, 4, 1), (128, 2, 1), Some((2, 2, 1)));

    #[test]
    fn every_launch_rule_has_a_row_that_breaks_only_it() {
        assert!(check_launch_shape(GOOD.0, GOOD.1, GOOD.2).is_ok());
        type Row = (&'static str, Dims, Dims, Option<Dims>, Rule, Field);
        let rows: [Row; 7] = [
            (
                "grid x 0",
                (0, 4, 1),
                GOOD.1,
                GOOD.2,
                Rule::GridDims,
                Field::Grid { axis: 0 },
            ),
            (
                "grid y 65536",
                (8, 65536, 1),
                GOOD.1,
                GOOD.2,
                Rule::GridDims,
                Field::Grid { axis: 1 },
            ),
            (
                "grid z not a multiple of the cluster",
                (8, 4, 3),
                GOOD.1,
                Some((2, 2, 2)),
                Rule::GridDims,
                Field::Grid { axis: 2 },
            ),
            (
                "block z 65",
                GOOD.0,
                (1, 1, 65),
                GOOD.2,
                Rule::BlockDims,
                Field::Block { axis: 2 },
            ),
            (
                "block x 1025",
                GOOD.0,
                (1025, 1, 1),
                GOOD.2,
                Rule::BlockDims,
                Field::Block { axis: 0 },
            ),
            (
                "block of 2048 threads",
                GOOD.0,
                (1024, 2, 1),
                GOOD.2,
                Rule::BlockDims,
                Field::BlockThreads,
            ),
            (
                "cluster of 32",
                (32, 4, 1),
                GOOD.1,
                Some((8, 4, 1)),
                Rule::ClusterShape,
                Field::Cluster { axis: 0 },
            ),
        ];
        for (what, g, b, c, rule, field) in rows {
            let err = check_launch_shape(g, b, c).expect_err(what);
            assert_eq!(err.errors.len(), 1, "{what}: {err}");
            assert_eq!(
                (err.errors[0].rule, &err.errors[0].field),
                (rule, &field),
                "{what}"
            );
            let text = err.to_string();
            assert!(text.contains(&format!("{field} = ")), "{what}: {text}");
        }
    }

    #[test]
    fn a_descriptor_past_the_tile_breaks_wgmma_slice_range() {
        // 128 x 64 bf16 A, K-major 128B: 4 k-slices, 2 blocks of 64 rows.
        let spec = TileSpec::new("a", DType::BF16, [1024, 1024], [128, 64])
            .swizzle(Swizzle::B128)
            .wgmma(Operand::A, Major::K);
        let valid = validate(&spec).unwrap();
        let plan = OperandPlan::new(&valid).unwrap();
        assert!(plan.descriptor(&valid, 1024, 3, 1).is_ok());
        for (k, m, field) in [(4, 1, Field::KSlice), (3, 2, Field::MBlock)] {
            let err = plan.descriptor(&valid, 1024, k, m).unwrap_err();
            assert_eq!(err.errors.len(), 1, "{err}");
            assert_eq!(
                (err.errors[0].rule, &err.errors[0].field),
                (Rule::WgmmaSliceRange, &field)
            );
            assert!(err.to_string().contains(&format!("{field} = ")), "{err}");
        }
    }
}

// ---- kernel plans: one row per rule, the same shape as above ----

mod plan_rules {
    use tma_core::pipeline::{Consumers, PipelineSpec, WarpRoles};
    use tma_core::plan::KernelPlan;
    use tma_core::{validate, Arch, DType, Field, Rule, Swizzle, TileSpec, ValidSpec};

    fn tile(name: &str, rows: u32, target: Arch) -> ValidSpec {
        validate(
            &TileSpec::new(name, DType::BF16, [4096, 4096], [rows, 64])
                .swizzle(Swizzle::B128)
                .target(target),
        )
        .unwrap()
    }

    fn ring(
        name: &str,
        cluster: [u32; 3],
        consumers: Consumers,
    ) -> tma_core::pipeline::ValidPipeline {
        PipelineSpec::new(name, 4, consumers)
            .tile("a", &tile("a", 128, Arch::Sm90a))
            .cluster(cluster)
            .validate()
            .unwrap()
    }

    /// A 4-stage ring of 16 KB, two consumer warpgroups, a D tile per consumer warpgroup and
    /// a little scratch.
    fn good() -> KernelPlan {
        KernelPlan::new("gemm")
            .pipeline(&ring("ring", [1, 1, 1], Consumers::Warpgroups(2)))
            .roles(&WarpRoles::new("gemm", 40, 2, 232).validate().unwrap())
            .staging("d", &tile("d", 64, Arch::Sm90a), 2)
            .scratch("flags", 64, 16)
    }

    fn part(what: &'static str, name: &str) -> Field {
        Field::PlanPart {
            what,
            name: name.into(),
        }
    }

    /// What a row breaks, the broken plan, the rule and the field it must name.
    type Row = (&'static str, fn() -> KernelPlan, Rule, Field);

    fn rows() -> Vec<Row> {
        vec![
            (
                "a staging tile for another arch",
                || good().staging("e", &tile("e", 64, Arch::Sm100a), 1),
                Rule::PlanTarget,
                part("staging", "e"),
            ),
            (
                "two regions named d",
                || good().scratch("d", 16, 16),
                Rule::PlanRegions,
                part("scratch", "d"),
            ),
            (
                "a region named like another region's offset (OFFSET_d)",
                || good().scratch("OFFSET_d", 16, 16),
                Rule::PlanRegions,
                part("scratch", "OFFSET_d"),
            ),
            (
                "a region named like the plan struct's base(raw)",
                || good().scratch("base", 16, 16),
                Rule::GeneratedNameClash,
                part("scratch", "base"),
            ),
            (
                "a plan (its kernel) named with the generated code's prefix",
                || {
                    let mut p = good();
                    p.name = "tma_gemm".into();
                    p
                },
                Rule::GeneratedNameClash,
                Field::Name,
            ),
            (
                "scratch aligned to 48",
                || good().scratch("s", 16, 48),
                Rule::PlanRegions,
                part("scratch", "s"),
            ),
            (
                "block_threads against the roles' 384",
                || good().block_threads(256),
                Rule::PlanBlockThreads,
                Field::Plan("block_threads"),
            ),
            (
                "no roles and no block_threads",
                || KernelPlan::new("k").scratch("s", 16, 16),
                Rule::PlanBlockThreads,
                Field::Plan("block_threads"),
            ),
            (
                "a pipeline with more consumers than the block",
                || {
                    KernelPlan::new("k")
                        .pipeline(&ring("ring", [1, 1, 1], Consumers::Warpgroups(2)))
                        .block_threads(128)
                },
                Rule::PlanBlockThreads,
                part("pipeline", "ring"),
            ),
            (
                "two pipelines of two clusters",
                || good().pipeline(&ring("other", [2, 1, 1], Consumers::Warpgroups(2))),
                Rule::PlanCluster,
                part("pipeline", "other"),
            ),
            (
                "a declared cluster against the pipeline's",
                || good().cluster([2, 1, 1]),
                Rule::PlanCluster,
                Field::Plan("cluster"),
            ),
            (
                "a declared cluster of 32",
                || KernelPlan::new("k").block_threads(32).cluster([4, 8, 1]),
                Rule::ClusterShape,
                Field::Plan("cluster"),
            ),
            (
                "D tiles past the block",
                || good().staging("e", &tile("e", 256, Arch::Sm90a), 5),
                Rule::PlanSmemFits,
                Field::Plan("smem"),
            ),
        ]
    }

    #[test]
    fn every_plan_rule_has_a_row_that_breaks_only_it() {
        assert!(good().validate().is_ok(), "{:?}", good().validate().err());
        let rows = rows();
        for (what, broken, rule, field) in &rows {
            let found = match broken().validate() {
                Ok(_) => panic!("{what}: validated"),
                Err(e) => e.errors,
            };
            assert_eq!(found.len(), 1, "{what}: {found:#?}");
            assert_eq!(found[0].rule, *rule, "{what}: {}", found[0]);
            assert_eq!(found[0].field, *field, "{what}: {}", found[0]);
            let text = found[0].to_string();
            assert!(
                text.contains(&field.to_string()) && text.len() > 30,
                "{what}: {text}"
            );
        }
        for rule in [
            Rule::PlanTarget,
            Rule::PlanRegions,
            Rule::PlanBlockThreads,
            Rule::PlanCluster,
            Rule::PlanSmemFits,
            Rule::GeneratedNameClash,
        ] {
            assert!(rows.iter().any(|r| r.2 == rule), "{rule:?} has no row");
        }
    }
}
