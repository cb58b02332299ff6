//! Validation: every TMA rule, every violation at once. Only a [`ValidSpec`] can be
//! rendered; only a [`BoundSpec`] (a valid spec with concrete global dims and strides)
//! can be laid out, encoded or modelled.

use crate::error::{Field, Severity, SpecError, SpecErrors};
use crate::limits::*;
use crate::size::Size;
use crate::spec::{Extent, Interleave, OobFill, Swizzle, TileSpec};

/// Each rule a spec can break. Tests match on these; messages carry the numbers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Rule {
    /// Tile and dim names reach generated CUDA: each must be a C identifier that is no
    /// C/C++ keyword, no reserved name (`__x`, `_X`) and no CUDA built-in variable.
    NameIsIdentifier,
    /// A size computed from the spec (bytes of a stride, of the tensor, of one call) does
    /// not fit in 64 bits: more than any GPU can address.
    SizeOverflow,
    /// Rank in [1, 5].
    RankRange,
    /// Interleave needs rank >= 3.
    InterleaveNeedsRank3,
    /// A per-dim list must have one entry per dim.
    ListLength,
    /// Global dims in [1, 2^32].
    GlobalDimRange,
    /// The innermost stride is 1 element (tiled mode: TMA's dim 0 is contiguous).
    InnerStrideIsOne,
    /// Byte strides are multiples of 16 (32 with 32-byte interleave).
    StrideAlignment,
    /// Byte strides are below 2^40.
    StrideMax,
    /// Packed sub-byte types: a stride must end on a whole byte (it is encoded in bytes).
    StrideWholeBytes,
    /// A stride smaller than the span of the dims inside it (0 included) makes elements alias
    /// (warning).
    StrideOverlap,
    /// Run-time dims/strides must agree with the static ones and be given for every runtime one.
    RuntimeShapeMismatch,
    /// Box dims in [1, 256].
    BoxDimRange,
    /// The box is larger than the tensor along a dim (warning: the excess is always out of bounds).
    BoxExceedsGlobal,
    /// Element strides in [1, 8].
    ElementStrideRange,
    /// Without interleave the hardware ignores the innermost element stride: it must be 1.
    InnerElementStrideIgnored,
    /// The inner box extent in bytes is a multiple of 16. The driver documents this for
    /// no interleave; driver 580 enforces it with interleave too, counting the box in
    /// elements although the hardware then counts it in chunks.
    InnerBoxBytesMultipleOf16,
    /// The box's data (elements traversed x size) must fit one SM's shared memory (228 KB on
    /// sm_90): driver 580 on an H100 refuses larger boxes (undocumented). It counts
    /// `floor(box / element_stride)` elements per dim (an H100 probe showed floor, not the
    /// ceil the copy moves), and an interleaved box in elements, dim 1 included (an H200
    /// probe showed it).
    BoxTooLarge,
    /// A box moves more bytes than the driver counts (whole chunks with interleave;
    /// `ceil(box / element_stride)` elements per dim, not the driver's floor): those must fit
    /// one SM's shared memory too, or the copy overflows it. The driver accepts such boxes
    /// (an H200 and an H100 probe showed it), so this rule is the toolkit's.
    BoxDataTooLarge,
    /// An inner dim whose bytes are not a multiple of 16 (warning): TMA bounds-checks the
    /// inner dim rounded up to 16 bytes, so loads read and stores write past its end.
    InnerDimRoundedUp,
    /// With interleave the hardware copies one position along the user's dim 1 (TMA dim
    /// `rank - 2`) whatever its box says (an H200 showed it), so that box must be 1.
    InterleaveDim1BoxIsOne,
    /// With swizzle (and no interleave) the inner box extent in bytes fits the swizzle span.
    InnerBoxFitsSwizzleSpan,
    /// 32-byte interleave works only with the 32-byte swizzle.
    Interleave32NeedsSwizzle32,
    /// Blackwell-only swizzle modes on an older target.
    SwizzleNeedsBlackwell,
    /// Packed sub-byte types on an older target.
    PackedTypeNeedsBlackwell,
    /// Packed types need no interleave.
    PackedTypeNoInterleave,
    /// Packed ALIGN16B types: inner global dim a multiple of 128, strides multiples of 32.
    PackedTypeAlignment,
    /// NaN out-of-bounds fill only for floating-point, non-packed types.
    NanFillNeedsFloat,
    /// Repeats in [1, 256] per dim.
    RepeatRange,
    /// Repeated boxes must not overlap in shared memory (MPK's row-overwrite bug).
    SmemStrideOverlap,
    /// Repeated boxes must start at the alignment the swizzle needs.
    SmemStrideAlignment,
    /// The bytes one helper call expects must fit an mbarrier's tx-count (2^20 - 1).
    TxBytesMax,
    /// Shared-memory footprint above the per-block limit of the target (warning).
    SmemFootprintLimit,
    /// The global base address must be 16-byte aligned (32 with 32-byte interleave).
    BaseAddressAlignment,
    /// The shared-memory address must be aligned to 128 B and the swizzle period.
    SmemAddressAlignment,
    /// A copy's coordinates: one per dim, the innermost a multiple of 16 bytes (the H100
    /// traps with an illegal instruction otherwise).
    CoordinateAlignment,
    /// Stores and reductions take no negative coordinate (the H100 traps with an illegal
    /// instruction; loads take them and fill).
    StoreCoordinateNegative,
    /// Coordinates are signed 32-bit operands of the instruction: every coordinate, plus the
    /// offset of the last repeated box, must fit in `i32`.
    CoordinateRange,
}

impl Rule {
    /// True for the rules `cuTensorMapEncodeTiled` itself enforces (it returns an error when
    /// they break). The others are this toolkit's own: traps the driver accepts (ignored
    /// inner element strides, aliasing strides, boxes past the tensor), shared-memory and
    /// mbarrier rules the driver never sees, and target-arch rules.
    pub fn checked_by_driver(self) -> bool {
        matches!(
            self,
            Rule::RankRange
                | Rule::InterleaveNeedsRank3
                | Rule::GlobalDimRange
                | Rule::StrideAlignment
                | Rule::StrideMax
                | Rule::BoxDimRange
                | Rule::ElementStrideRange
                | Rule::InnerBoxBytesMultipleOf16
                | Rule::InnerBoxFitsSwizzleSpan
                | Rule::BoxTooLarge
                | Rule::PackedTypeNoInterleave
                | Rule::PackedTypeAlignment
                | Rule::NanFillNeedsFloat
                | Rule::BaseAddressAlignment
        )
    }
}

/// The shared-memory plan of one helper call: sizes, alignment and where each repeated
/// box lands.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct SmemPlan {
    /// Elements per dim that one box writes (user order): ceil(box / element_stride). With
    /// interleave the innermost counts chunks, and dim 1 is 1 (the hardware takes one
    /// position there).
    pub box_elems: Vec<u64>,
    /// Bytes of data one box delivers: its elements times their size. What the mbarrier
    /// counts.
    pub box_data_bytes: u64,
    /// Bytes one box spans in shared memory: rows at the hardware's pitch (a row narrower
    /// than the swizzle span is padded to it), swizzled boxes rounded up to 128-byte lines.
    pub box_bytes: u64,
    /// Boxes one helper call moves (product of repeats).
    pub boxes: u64,
    /// Bytes between consecutive repeated boxes.
    pub stride_bytes: u64,
    /// Bytes the mbarrier must expect per helper call: `box_data_bytes * boxes`.
    pub tx_bytes: u64,
    /// Bytes of shared memory one helper call spans: `(boxes - 1) * stride_bytes + box_bytes`.
    pub footprint_bytes: u64,
    /// Required alignment of the shared-memory destination.
    pub align_bytes: u64,
}

impl ValidSpec {
    /// Where repeated box `i` (user order, `i[d] < repeat[d]`) lands: its offset from the
    /// call's coordinates in global elements (user order: `i[d] * boxed[d]`), and its
    /// byte offset in shared memory (`linear(i) * stride_bytes`, `linear` row-major over
    /// the repeat shape, last dim fastest). Every dim counts, so no two boxes collide.
    /// Validation bounds the count: each box delivers at least one byte and one call at
    /// most [`MAX_TX_BYTES`].
    pub fn repeat_placements(&self) -> Vec<RepeatPlacement> {
        let spec = &self.spec;
        let plan = &self.plan;
        let rank = spec.rank();
        let mut out = Vec::new();
        for linear in 0..plan.boxes {
            let mut rest = linear;
            let mut index = vec![0u32; rank];
            for d in (0..rank).rev() {
                let r = u64::from(spec.repeat[d]);
                index[d] = (rest % r) as u32;
                rest /= r;
            }
            let global_offset = (0..rank)
                .map(|d| i64::from(index[d]) * i64::from(spec.boxed[d]))
                .collect();
            out.push(RepeatPlacement {
                index,
                global_offset,
                smem_offset: linear * plan.stride_bytes,
            });
        }
        out
    }
}

/// Where one repeated box of a helper call goes.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct RepeatPlacement {
    /// The repeat index (user order).
    pub index: Vec<u32>,
    /// Added to the call's coordinates (user order, elements).
    pub global_offset: Vec<i64>,
    /// Byte offset from the call's shared-memory pointer.
    pub smem_offset: u64,
}

/// A spec whose static parts break no rule. The proof every renderer requires.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ValidSpec {
    spec: TileSpec,
    plan: SmemPlan,
    warnings: Vec<SpecError>,
}

/// A valid spec bound to concrete global dims and strides (elements, user order).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct BoundSpec {
    valid: ValidSpec,
    global: Vec<u64>,
    strides: Vec<u64>,
    /// The outer dims' `strides` in bytes (user order), each proven below 2^40.
    byte_strides: Vec<u64>,
    /// See [`BoundSpec::inner_bound`].
    inner_bound: u64,
    /// See [`BoundSpec::extent_bytes`]; proven to fit in 64 bits.
    extent_bytes: u64,
    warnings: Vec<SpecError>,
}

impl ValidSpec {
    pub fn spec(&self) -> &TileSpec {
        &self.spec
    }
    pub fn plan(&self) -> &SmemPlan {
        &self.plan
    }
    /// Bytes the mbarrier must expect for one helper call (repeats included).
    pub fn tx_bytes(&self) -> u64 {
        self.plan.tx_bytes
    }
    /// Findings that do not stop the spec (e.g. footprint above the per-block limit).
    pub fn warnings(&self) -> &[SpecError] {
        &self.warnings
    }
    /// True when every global dim and stride is known now.
    pub fn is_static(&self) -> bool {
        self.spec.global.iter().all(|e| e.get().is_some())
            && self
                .spec
                .strides
                .as_ref()
                .is_none_or(|s| s.iter().all(|e| e.get().is_some()))
    }

    /// Binds concrete global dims (and optionally strides, in elements), both user order.
    /// Static dims must agree; every global rule is checked again on the concrete values.
    /// Without `strides`, static strides from the spec are used, else dense row-major.
    pub fn bind(&self, global: &[u64], strides: Option<&[u64]>) -> Result<BoundSpec, SpecErrors> {
        let spec = &self.spec;
        let rank = spec.rank();
        let mut c = Collector::new();
        if global.len() != rank {
            c.error(
                Field::List("global"),
                global.len(),
                Rule::RuntimeShapeMismatch,
                format!(
                    "{} run-time dims given for a rank-{rank} tile",
                    global.len()
                ),
            );
            return Err(c.finish(spec));
        }
        for (d, (&given, want)) in global.iter().zip(&spec.global).enumerate() {
            if let Extent::Static(v) = want {
                if *v != given {
                    c.error(
                        field_global(spec, d),
                        given,
                        Rule::RuntimeShapeMismatch,
                        format!("the tile declares this dim as {v}; the buffer gives {given}"),
                    );
                }
            }
        }
        let strides: Vec<u64> = match (strides, &spec.strides) {
            (Some(s), declared) => {
                if s.len() != rank {
                    c.error(
                        Field::List("strides"),
                        s.len(),
                        Rule::RuntimeShapeMismatch,
                        format!("{} run-time strides given for a rank-{rank} tile", s.len()),
                    );
                    return Err(c.finish(spec));
                }
                if let Some(declared) = declared {
                    for (d, (&given, want)) in s.iter().zip(declared).enumerate() {
                        if let Extent::Static(v) = want {
                            if *v != given {
                                c.error(
                                    field_stride(spec, d),
                                    given,
                                    Rule::RuntimeShapeMismatch,
                                    format!(
                                        "the tile declares this stride as {v}; {given} was given"
                                    ),
                                );
                            }
                        }
                    }
                }
                s.to_vec()
            }
            (None, Some(declared)) => {
                let mut out = Vec::with_capacity(rank);
                for (d, e) in declared.iter().enumerate() {
                    match e.get() {
                        Some(v) => out.push(v),
                        None => {
                            c.error(
                                field_stride(spec, d),
                                "<runtime>",
                                Rule::RuntimeShapeMismatch,
                                "this stride is declared at run time but none was given".into(),
                            );
                            out.push(1);
                        }
                    }
                }
                out
            }
            (None, None) => match dense_strides(global, spec.inner_unit_elements()) {
                Some(s) => s,
                None => {
                    dense_overflow(spec, global, &mut c);
                    return Err(c.finish(spec));
                }
            },
        };
        let sizes = check_global(spec, global, &strides, &mut c);
        let (errors, warnings) = c.split();
        match sizes {
            Some(sizes) if errors.is_empty() => Ok(BoundSpec {
                valid: self.clone(),
                global: global.to_vec(),
                strides,
                byte_strides: sizes.byte_strides,
                inner_bound: sizes.inner_bound,
                extent_bytes: sizes.extent_bytes,
                warnings,
            }),
            _ => Err(SpecErrors {
                tile: spec.name.clone(),
                errors,
            }),
        }
    }

    /// The bound spec when every dim and stride is static.
    pub fn bound(&self) -> Option<BoundSpec> {
        if !self.is_static() {
            return None;
        }
        let global: Vec<u64> = self.spec.global.iter().filter_map(|e| e.get()).collect();
        self.bind(&global, None).ok()
    }

    /// The innermost coordinate of every copy must be a multiple of this many elements
    /// (16 bytes; see [`crate::limits::INNER_COORD_ALIGN`]). With interleave the coordinate
    /// counts chunks, each 16 or 32 bytes, so any value sits on 16 bytes: 1.
    pub fn inner_coord_multiple(&self) -> u64 {
        if self.spec.interleave != Interleave::None {
            return 1;
        }
        let bits = u64::from(self.spec.dtype.global_bits());
        (INNER_COORD_ALIGN * 8 / bits).max(1)
    }

    /// Checks the coordinates (user order) of one copy: one per dim, the innermost a
    /// multiple of [`ValidSpec::inner_coord_multiple`] elements. Repeats keep this, since
    /// the inner box extent is a multiple of 16 bytes too.
    pub fn check_coords(&self, coords: &[i64]) -> Result<(), SpecErrors> {
        let spec = &self.spec;
        let mut c = Collector::new();
        let rank = spec.rank();
        if coords.len() != rank {
            c.error(
                Field::List("coords"),
                coords.len(),
                Rule::CoordinateAlignment,
                format!("{} coordinates given for a rank-{rank} tile", coords.len()),
            );
            return c.into_result(spec);
        }
        for (d, &x) in coords.iter().enumerate() {
            // The last repeated box starts (repeat - 1) boxes further along this dim.
            let last = i128::from(x)
                + i128::from(spec.repeat[d].saturating_sub(1)) * i128::from(spec.boxed[d]);
            if i32::try_from(x).is_err() || i32::try_from(last).is_err() {
                c.error(
                    Field::Coord { dim: d, name: name_of(spec, d) },
                    x,
                    Rule::CoordinateRange,
                    if i32::try_from(x).is_err() {
                        format!(
                            "coordinates are signed 32-bit operands of cp.async.bulk.tensor: they must be in [{}, {}]",
                            i32::MIN,
                            i32::MAX
                        )
                    } else {
                        format!(
                            "the last repeated box starts at {last}, outside the signed 32-bit range of cp.async.bulk.tensor's coordinates"
                        )
                    },
                );
            }
        }
        let inner = rank - 1;
        let m = self.inner_coord_multiple() as i64;
        if coords[inner].rem_euclid(m) != 0 {
            c.error(
                Field::Coord { dim: inner, name: name_of(spec, inner) },
                coords[inner],
                Rule::CoordinateAlignment,
                format!(
                    "the innermost coordinate must be a multiple of {m} elements ({INNER_COORD_ALIGN} B of {}): the H100 traps with an illegal instruction otherwise",
                    spec.dtype
                ),
            );
        }
        c.into_result(spec)
    }

    /// Checks the coordinates of a store or reduction: those of [`ValidSpec::check_coords`],
    /// and none negative (the H100 traps on a negative store coordinate).
    pub fn check_store_coords(&self, coords: &[i64]) -> Result<(), SpecErrors> {
        self.check_coords(coords)?;
        let spec = &self.spec;
        let mut c = Collector::new();
        for (d, &x) in coords.iter().enumerate() {
            if x < 0 {
                c.error(
                    Field::Coord { dim: d, name: name_of(spec, d) },
                    x,
                    Rule::StoreCoordinateNegative,
                    "stores and reductions take no negative coordinate: the H100 traps with an illegal instruction (loads take them and fill)".into(),
                );
            }
        }
        c.into_result(spec)
    }

    /// Checks a shared-memory destination address (or offset from a 1024-aligned base)
    /// against the alignment this tile needs.
    pub fn check_smem_address(&self, addr: u64) -> Result<(), SpecErrors> {
        let mut c = Collector::new();
        let align = self.plan.align_bytes;
        if addr % align != 0 {
            c.error(
                Field::SmemAddress,
                format!("{addr:#x}"),
                Rule::SmemAddressAlignment,
                format!(
                    "must be a multiple of {align} B (128 B for every TMA copy; {} B for the {} swizzle pattern to start at its first row)",
                    self.spec.swizzle.period_bytes().max(SMEM_ALIGN),
                    self.spec.swizzle.name()
                ),
            );
        }
        c.into_result(&self.spec)
    }
}

impl BoundSpec {
    pub fn valid(&self) -> &ValidSpec {
        &self.valid
    }
    pub fn spec(&self) -> &TileSpec {
        &self.valid.spec
    }
    pub fn plan(&self) -> &SmemPlan {
        &self.valid.plan
    }
    /// Global dims, user order (outer -> inner), elements.
    pub fn global(&self) -> &[u64] {
        &self.global
    }
    /// Global strides, user order, elements.
    pub fn strides(&self) -> &[u64] {
        &self.strides
    }
    /// The outer dims' strides in bytes (user order, each below 2^40; the innermost dim,
    /// contiguous, has none): `globalStrides` before it is reversed.
    pub fn byte_strides(&self) -> &[u64] {
        &self.byte_strides
    }
    /// Warnings of the static spec and of the bound shape.
    pub fn warnings(&self) -> impl Iterator<Item = &SpecError> {
        self.valid.warnings.iter().chain(&self.warnings)
    }
    /// The inner global dim as TMA bounds-checks it: rounded up to 16 bytes. Elements
    /// between `global()[inner]` and this are read by loads and written by stores. With
    /// interleave the dim counts chunks of 16 or 32 bytes: no rounding.
    pub fn inner_bound(&self) -> u64 {
        self.inner_bound
    }

    /// Bytes from the base address to one past the last byte TMA may touch: the last
    /// element, with the inner dim rounded up to 16 bytes (see [`BoundSpec::inner_bound`]);
    /// with interleave, the end of the last chunk. Binding refuses shapes whose extent does
    /// not fit in 64 bits ([`Rule::SizeOverflow`]).
    pub fn extent_bytes(&self) -> u64 {
        self.extent_bytes
    }
    /// Checks the global base address of a buffer against the alignment TMA needs.
    pub fn check_base_address(&self, addr: u64) -> Result<(), SpecErrors> {
        let spec = self.spec();
        let mut c = Collector::new();
        let align = base_address_align(spec);
        if addr % align != 0 {
            c.error(
                Field::BaseAddress,
                format!("{addr:#x}"),
                Rule::BaseAddressAlignment,
                format!(
                    "the global base address must be {align}-byte aligned (cuTensorMapEncodeTiled: globalAddress)"
                ),
            );
        }
        c.into_result(spec)
    }
}

fn base_address_align(spec: &TileSpec) -> u64 {
    if spec.interleave == Interleave::B32 {
        GLOBAL_ADDRESS_ALIGN_INTERLEAVE_32B
    } else if matches!(
        spec.dtype,
        crate::DType::U4x16Align16B | crate::DType::U6x16Align16B
    ) {
        PACKED_ALIGN16B_ADDRESS_ALIGN
    } else {
        GLOBAL_ADDRESS_ALIGN
    }
}

/// Dense row-major strides (elements) for `global` (user order), whose innermost step covers
/// `inner_unit` elements (1; a chunk's worth with interleave, see
/// [`TileSpec::inner_unit_elements`]). The innermost stride is 1 step. `None` when a stride
/// does not fit in 64 bits.
pub fn dense_strides(global: &[u64], inner_unit: u64) -> Option<Vec<u64>> {
    let rank = global.len();
    let mut strides = vec![1u64; rank];
    for d in (0..rank.saturating_sub(1)).rev() {
        let step = if d + 1 == rank - 1 { inner_unit } else { 1 };
        strides[d] = (Size::new(strides[d + 1]) * step * global[d + 1]).get()?;
    }
    Some(strides)
}

/// The finding for dense strides that overflow: the shape itself is too large.
fn dense_overflow(spec: &TileSpec, global: &[u64], c: &mut Collector) {
    c.error(
        Field::List("global"),
        format!("{global:?}"),
        Rule::SizeOverflow,
        format!(
            "the dense strides of this shape of {} need more than 2^64 - 1 elements: more than any GPU can address",
            spec.dtype
        ),
    );
}

/// Checks every rule on `spec`. Global dims/strides are checked when static; run-time
/// ones are checked by [`ValidSpec::bind`] with the same code.
pub fn validate(spec: &TileSpec) -> Result<ValidSpec, SpecErrors> {
    let mut c = Collector::new();
    if !check_shape_lists(spec, &mut c) {
        return Err(c.finish(spec));
    }
    check_static(spec, &mut c);
    let plan = smem_plan(spec);
    check_plan(spec, &plan, &mut c);
    let all_static = spec.global.iter().all(|e| e.get().is_some())
        && spec
            .strides
            .as_ref()
            .is_none_or(|s| s.iter().all(|e| e.get().is_some()));
    let mut global_warnings = Vec::new();
    if all_static {
        let global: Vec<u64> = spec.global.iter().filter_map(|e| e.get()).collect();
        let mut g = Collector::new();
        let strides: Option<Vec<u64>> = match &spec.strides {
            Some(s) => Some(s.iter().filter_map(|e| e.get()).collect()),
            None => dense_strides(&global, spec.inner_unit_elements()),
        };
        match strides {
            Some(strides) => {
                check_global(spec, &global, &strides, &mut g);
            }
            None => dense_overflow(spec, &global, &mut g),
        }
        let (errs, warns) = g.split();
        c.findings.extend(errs);
        global_warnings = warns;
    }
    let fitted = plan.fit();
    if fitted.is_none() && !c.has_errors() {
        // Every size above is bounded by a limit checked in `check_plan`; this is a
        // safety net, not a finding anyone should meet.
        c.error(
            Field::SmemFootprint,
            "?",
            Rule::SizeOverflow,
            "a shared-memory size of one call does not fit in 64 bits".into(),
        );
    }
    let (errors, mut warnings) = c.split();
    match fitted {
        Some(plan) if errors.is_empty() => {
            warnings.extend(global_warnings);
            Ok(ValidSpec {
                spec: spec.clone(),
                plan,
                warnings,
            })
        }
        _ => Err(SpecErrors {
            tile: spec.name.clone(),
            errors,
        }),
    }
}

/// Collects findings so every violation is reported at once.
struct Collector {
    findings: Vec<SpecError>,
}

impl Collector {
    fn new() -> Self {
        Collector {
            findings: Vec::new(),
        }
    }
    fn push(
        &mut self,
        severity: Severity,
        field: Field,
        value: impl ToString,
        rule: Rule,
        message: String,
    ) {
        self.findings.push(SpecError {
            field,
            value: value.to_string(),
            rule,
            message,
            severity,
        });
    }
    fn error(&mut self, field: Field, value: impl ToString, rule: Rule, message: String) {
        self.push(Severity::Error, field, value, rule, message);
    }
    fn warning(&mut self, field: Field, value: impl ToString, rule: Rule, message: String) {
        self.push(Severity::Warning, field, value, rule, message);
    }
    fn has_errors(&self) -> bool {
        self.findings.iter().any(|f| f.severity == Severity::Error)
    }
    fn split(self) -> (Vec<SpecError>, Vec<SpecError>) {
        self.findings
            .into_iter()
            .partition(|f| f.severity == Severity::Error)
    }
    fn finish(self, spec: &TileSpec) -> SpecErrors {
        SpecErrors {
            tile: spec.name.clone(),
            errors: self.split().0,
        }
    }
    fn into_result(self, spec: &TileSpec) -> Result<(), SpecErrors> {
        let errs = self.finish(spec);
        if errs.errors.is_empty() {
            Ok(())
        } else {
            Err(errs)
        }
    }
}

fn name_of(spec: &TileSpec, d: usize) -> Option<String> {
    spec.dim_name(d).map(str::to_owned)
}
fn field_global(spec: &TileSpec, d: usize) -> Field {
    Field::Global {
        dim: d,
        name: name_of(spec, d),
    }
}
fn field_stride(spec: &TileSpec, d: usize) -> Field {
    Field::Stride {
        dim: d,
        name: name_of(spec, d),
    }
}
fn field_box(spec: &TileSpec, d: usize) -> Field {
    Field::Box {
        dim: d,
        name: name_of(spec, d),
    }
}
fn field_estride(spec: &TileSpec, d: usize) -> Field {
    Field::ElementStride {
        dim: d,
        name: name_of(spec, d),
    }
}
fn field_repeat(spec: &TileSpec, d: usize) -> Field {
    Field::Repeat {
        dim: d,
        name: name_of(spec, d),
    }
}

/// Rank and list lengths. Returns false when the per-dim rules cannot be checked.
fn check_shape_lists(spec: &TileSpec, c: &mut Collector) -> bool {
    let rank = spec.rank();
    if let Err(problem) = crate::ident::check_name(&spec.name) {
        c.error(
            Field::Name,
            format!("{:?}", spec.name),
            Rule::NameIsIdentifier,
            format!(
                "the tile name names CUDA helpers (`tma_<name>`); this one {}",
                problem.describe()
            ),
        );
    }
    for (d, name) in spec.dim_names.iter().enumerate() {
        if let Some(Err(problem)) = name.as_deref().map(crate::ident::check_name) {
            c.error(
                Field::DimName { dim: d },
                format!("{:?}", name.as_deref().unwrap_or_default()),
                Rule::NameIsIdentifier,
                format!(
                    "dim names appear in generated CUDA; this one {}",
                    problem.describe()
                ),
            );
        }
    }
    if rank == 0 || rank > MAX_RANK {
        c.error(
            Field::Rank,
            rank,
            Rule::RankRange,
            format!("TMA tensors have 1 to {MAX_RANK} dims (cuTensorMapEncodeTiled: tensorRank)"),
        );
        return false;
    }
    let mut ok = true;
    let lists: [(&'static str, Option<usize>); 5] = [
        ("boxed", Some(spec.boxed.len())),
        ("element_strides", Some(spec.element_strides.len())),
        ("repeat", Some(spec.repeat.len())),
        ("strides", spec.strides.as_ref().map(Vec::len)),
        ("dim_names", Some(spec.dim_names.len())),
    ];
    for (list, len) in lists {
        if let Some(len) = len {
            if len != rank {
                c.error(
                    Field::List(list),
                    len,
                    Rule::ListLength,
                    format!("needs one entry per dim: the global shape has {rank} dims, `{list}` has {len}"),
                );
                ok = false;
            }
        }
    }
    ok
}

/// The inner box extent in bytes (the box's last user dim).
fn inner_box_bytes(spec: &TileSpec) -> u64 {
    let inner = spec.rank() - 1;
    // A u32 box of at most 64-bit elements: below 2^38 bits, no overflow possible.
    (u64::from(spec.boxed[inner]) * u64::from(spec.dtype.global_bits())).div_ceil(8)
}

/// Rules on the static parts: box, element strides, swizzle, interleave, dtype, target.
fn check_static(spec: &TileSpec, c: &mut Collector) {
    let rank = spec.rank();
    let inner = rank - 1;
    let interleaved = spec.interleave != Interleave::None;
    if interleaved && rank < MIN_RANK_INTERLEAVED {
        c.error(
            Field::Interleave,
            spec.interleave.name(),
            Rule::InterleaveNeedsRank3,
            format!(
                "interleaved layouts need at least {MIN_RANK_INTERLEAVED} dims; this tile has {rank} (cuTensorMapEncodeTiled: tensorRank)"
            ),
        );
    }
    if interleaved && rank >= MIN_RANK_INTERLEAVED && spec.boxed[1] != 1 {
        c.error(
            field_box(spec, 1),
            spec.boxed[1],
            Rule::InterleaveDim1BoxIsOne,
            "with interleave the hardware copies one position along dim 1 (the channel-slice dim) \
             whatever its box says (the driver accepts any box; an H200 ignores it): use a box of 1, and \
             `repeat` along this dim for several positions per call"
                .into(),
        );
    }
    for d in 0..rank {
        let b = spec.boxed[d];
        if b == 0 || b > MAX_BOX_DIM {
            c.error(
                field_box(spec, d),
                b,
                Rule::BoxDimRange,
                format!("box dims must be in [1, {MAX_BOX_DIM}] (cuTensorMapEncodeTiled: boxDim)"),
            );
        }
        let e = spec.element_strides[d];
        if e == 0 || e > MAX_ELEMENT_STRIDE {
            c.error(
                field_estride(spec, d),
                e,
                Rule::ElementStrideRange,
                format!(
                    "element strides must be in [1, {MAX_ELEMENT_STRIDE}] (cuTensorMapEncodeTiled: elementStrides)"
                ),
            );
        }
        let r = spec.repeat[d];
        if r == 0 || r > MAX_BOX_DIM {
            c.error(
                field_repeat(spec, d),
                r,
                Rule::RepeatRange,
                format!("repeats must be in [1, {MAX_BOX_DIM}] boxes per dim"),
            );
        }
    }
    if !interleaved && spec.element_strides[inner] != 1 {
        c.error(
            field_estride(spec, inner),
            spec.element_strides[inner],
            Rule::InnerElementStrideIgnored,
            "without interleave the hardware ignores the innermost element stride (cuTensorMapEncodeTiled: \
             \"TMA doesn't support the stride for dimension zero\"); it must be 1"
                .into(),
        );
    }
    let inner_bytes = inner_box_bytes(spec);
    if inner_bytes % INNER_BOX_BYTES_ALIGN != 0 {
        let message = if interleaved {
            format!(
                "with interleave the inner box counts chunks, but the driver checks it as {} elements of {} = {inner_bytes} B, which must be a multiple of {INNER_BOX_BYTES_ALIGN} B: use a multiple of {} chunks",
                spec.boxed[inner],
                spec.dtype,
                INNER_BOX_BYTES_ALIGN / spec.dtype.size_bytes().unwrap_or(1).max(1)
            )
        } else {
            format!(
                "the inner box extent is {inner_bytes} B ({} x {}); it must be a multiple of {INNER_BOX_BYTES_ALIGN} B",
                spec.boxed[inner], spec.dtype
            )
        };
        c.error(
            field_box(spec, inner),
            spec.boxed[inner],
            Rule::InnerBoxBytesMultipleOf16,
            message,
        );
    }
    if let (false, Some(span)) = (interleaved, spec.swizzle.span_bytes()) {
        if inner_bytes > span {
            c.error(
                field_box(spec, inner),
                spec.boxed[inner],
                Rule::InnerBoxFitsSwizzleSpan,
                format!(
                    "the inner box extent is {inner_bytes} B; the {} swizzle holds at most {span} B per row: use at most {} elements and repeat the box along this dim",
                    spec.swizzle.name(),
                    span * 8 / u64::from(spec.dtype.global_bits())
                ),
            );
        }
    }
    if spec.interleave == Interleave::B32 && spec.swizzle != Swizzle::B32 {
        c.error(
            Field::Swizzle,
            spec.swizzle.name(),
            Rule::Interleave32NeedsSwizzle32,
            "32-byte interleave requires the 32B swizzle (cuTensorMapEncodeTiled: \"When interleave is \
             CU_TENSOR_MAP_INTERLEAVE_32B, swizzle must be CU_TENSOR_MAP_SWIZZLE_32B\")"
                .into(),
        );
    }
    if spec.swizzle.is_blackwell_only() && !spec.target.is_blackwell() {
        c.error(
            Field::Swizzle,
            spec.swizzle.name(),
            Rule::SwizzleNeedsBlackwell,
            format!(
                "the {} swizzle exists only on Blackwell (sm_100a and later); the target is {}",
                spec.swizzle.name(),
                spec.target
            ),
        );
    }
    if spec.dtype.is_packed() {
        if !spec.target.is_blackwell() {
            c.error(
                Field::DType,
                spec.dtype,
                Rule::PackedTypeNeedsBlackwell,
                format!(
                    "packed sub-byte types exist only on Blackwell (sm_100a and later); the target is {}",
                    spec.target
                ),
            );
        }
        if interleaved {
            c.error(
                Field::Interleave,
                spec.interleave.name(),
                Rule::PackedTypeNoInterleave,
                format!(
                    "packed sub-byte type {} needs interleave = none",
                    spec.dtype
                ),
            );
        }
    }
    if spec.oob_fill == OobFill::NanRequestZeroFma
        && (!spec.dtype.is_float() || spec.dtype.is_packed())
    {
        c.error(
            Field::OobFill,
            spec.oob_fill.name(),
            Rule::NanFillNeedsFloat,
            format!(
                "NaN out-of-bounds fill needs a floating-point type; {} is not (cuTensorMapEncodeTiled: oobFill)",
                spec.dtype
            ),
        );
    }
}

/// The sizes of a shared-memory plan before they are proven to fit: each [`Size`] may
/// have overflowed. [`check_plan`] reports the rules on them; [`PlanSizes::fit`] turns them
/// into a [`SmemPlan`] once they all fit.
struct PlanSizes {
    box_elems: Vec<u64>,
    box_data_bytes: Size,
    box_bytes: Size,
    boxes: Size,
    stride_bytes: Size,
    tx_bytes: Size,
    footprint_bytes: Size,
    align_bytes: u64,
    /// What the driver compares with an SM's shared memory (see [`driver_box_bytes`]).
    driver_box_bytes: Size,
}

impl PlanSizes {
    fn fit(&self) -> Option<SmemPlan> {
        Some(SmemPlan {
            box_elems: self.box_elems.clone(),
            box_data_bytes: self.box_data_bytes.get()?,
            box_bytes: self.box_bytes.get()?,
            boxes: self.boxes.get()?,
            stride_bytes: self.stride_bytes.get()?,
            tx_bytes: self.tx_bytes.get()?,
            footprint_bytes: self.footprint_bytes.get()?,
            align_bytes: self.align_bytes,
        })
    }
}

/// The shared-memory plan. Needs the list lengths to be right.
fn smem_plan(spec: &TileSpec) -> PlanSizes {
    let interleaved = spec.interleave != Interleave::None;
    let mut box_elems = traversed(spec);
    if interleaved && spec.rank() >= MIN_RANK_INTERLEAVED {
        // The hardware copies one position along dim 1 of an interleaved map.
        box_elems[1] = 1;
    }
    // Rows (the inner dim) sit at the pitch the hardware uses; a swizzled box fills whole
    // 128-byte lines, since the swizzle moves chunks anywhere within a line.
    let rows: Size = box_elems[..box_elems.len().saturating_sub(1)]
        .iter()
        .copied()
        .product();
    let data_bytes = if interleaved {
        rows * crate::swizzle::row_bytes(spec)
    } else {
        spec.dtype
            .smem_bytes(box_elems.iter().copied().product::<Size>())
    };
    let pitch = crate::swizzle::row_pitch_bytes(spec, crate::swizzle::DEFAULT_INNER_ROW_LAYOUT);
    let box_bytes = match spec.swizzle {
        Swizzle::None => rows * pitch,
        _ => (rows * pitch).next_multiple_of(128),
    };
    let boxes: Size = spec.repeat.iter().map(|&r| r.max(1)).product();
    let align_bytes = spec.swizzle.period_bytes().max(SMEM_ALIGN);
    let stride_bytes = match spec.smem_stride {
        Some(elems) => spec.dtype.smem_bytes(elems),
        None => box_bytes.next_multiple_of(align_bytes),
    };
    PlanSizes {
        box_elems,
        box_data_bytes: data_bytes,
        box_bytes,
        boxes,
        stride_bytes,
        tx_bytes: data_bytes * boxes,
        footprint_bytes: (boxes - 1u64) * stride_bytes + box_bytes,
        align_bytes,
        driver_box_bytes: driver_box_bytes(spec),
    }
}

/// The box bytes the driver compares with an SM's shared memory: per dim
/// `floor(box / element_stride)` elements, times the element size. That is not what the
/// copy moves (`ceil` per dim; chunks with interleave, where dim 1 is one position), but an
/// H100 showed it is what the driver checks: box 57 with element stride 2 counts 28.
fn driver_box_bytes(spec: &TileSpec) -> Size {
    let counted = spec
        .boxed
        .iter()
        .zip(&spec.element_strides)
        .map(|(&b, &e)| u64::from(b) / u64::from(e.max(1)));
    spec.dtype.smem_bytes(counted.product::<Size>())
}

/// Per dim (user order), the steps a box traverses as the encode arguments state it:
/// `ceil(box / element_stride)`.
fn traversed(spec: &TileSpec) -> Vec<u64> {
    spec.boxed
        .iter()
        .zip(&spec.element_strides)
        .map(|(&b, &e)| u64::from(b).div_ceil(u64::from(e.max(1))))
        .collect()
}

/// The rules on a plan's sizes; an overflowed size counts as larger than every limit.
fn check_plan(spec: &TileSpec, plan: &PlanSizes, c: &mut Collector) {
    let boxes = plan.boxes.get().unwrap_or(u64::MAX);
    let smem_stride_value = |bytes: Size| {
        spec.smem_stride
            .map_or(bytes.to_string(), |s| s.to_string())
    };
    if !plan.stride_bytes.is_below(u64::MAX) && spec.smem_stride.is_some() {
        c.error(
            Field::SmemStride,
            smem_stride_value(plan.stride_bytes),
            Rule::SizeOverflow,
            format!(
                "{} elements of {} are more than 2^64 - 1 bytes: more than any GPU can address",
                smem_stride_value(plan.stride_bytes),
                spec.dtype
            ),
        );
    } else if boxes > 1 {
        let stride = smem_stride_value(plan.stride_bytes);
        if plan
            .box_bytes
            .get()
            .is_none_or(|b| plan.stride_bytes.is_below(b))
        {
            c.error(
                Field::SmemStride,
                stride.clone(),
                Rule::SmemStrideOverlap,
                format!(
                    "repeated boxes are {} B apart in shared memory but each box takes {} B: they would overwrite each other",
                    plan.stride_bytes, plan.box_bytes
                ),
            );
        }
        if !plan.stride_bytes.is_multiple_of(plan.align_bytes) {
            c.error(
                Field::SmemStride,
                stride,
                Rule::SmemStrideAlignment,
                format!(
                    "repeated boxes are {} B apart; each must start {} B-aligned ({} swizzle)",
                    plan.stride_bytes,
                    plan.align_bytes,
                    spec.swizzle.name()
                ),
            );
        }
    }
    let box_limit = spec.target.smem_per_sm();
    let driver_bytes = plan.driver_box_bytes;
    let interleaved = spec.interleave != Interleave::None;
    if !driver_bytes.is_below(box_limit + 1) {
        c.error(
            Field::List("boxed"),
            format!("{:?}", spec.boxed),
            Rule::BoxTooLarge,
            format!(
                "one box holds {driver_bytes} B of data counted as the driver does ({}); the driver refuses boxes over the {box_limit} B of shared memory of one SM on {}",
                if interleaved { "in elements, every dim's box" } else { "floor(box / element stride) elements per dim" },
                spec.target,
            ),
        );
    } else if !plan.box_data_bytes.is_below(box_limit + 1) {
        c.error(
            Field::List("boxed"),
            format!("{:?}", spec.boxed),
            Rule::BoxDataTooLarge,
            format!(
                "one box moves {} B ({}), more than the {box_limit} B of shared memory of one SM on {}: the copy would overflow it (the driver counts {driver_bytes} B, {}, and accepts it)",
                plan.box_data_bytes,
                if interleaved { "whole chunks" } else { "ceil(box / element stride) elements per dim" },
                spec.target,
                if interleaved { "in elements" } else { "with floor(box / element stride)" },
            ),
        );
    }
    if !plan.tx_bytes.is_below(MAX_TX_BYTES + 1) {
        c.error(
            Field::SmemFootprint,
            plan.tx_bytes,
            Rule::TxBytesMax,
            format!(
                "one call delivers {} B but an mbarrier phase can expect at most {MAX_TX_BYTES} B (PTX ISA: tx-count)",
                plan.tx_bytes
            ),
        );
    }
    let limit = spec.target.max_smem_per_block();
    match plan.footprint_bytes.get() {
        Some(bytes) if bytes > limit => c.warning(
            Field::SmemFootprint,
            bytes,
            Rule::SmemFootprintLimit,
            format!(
                "one call spans {bytes} B of shared memory; a block on {} may use at most {limit} B",
                spec.target
            ),
        ),
        Some(_) => {}
        None if !c.has_errors() => c.error(
            Field::SmemStride,
            smem_stride_value(plan.stride_bytes),
            Rule::SizeOverflow,
            format!(
                "{boxes} repeated boxes {} B apart span more than 2^64 - 1 bytes of shared memory",
                plan.stride_bytes
            ),
        ),
        None => {}
    }
}

/// Sizes of a bound shape, each proven to fit in 64 bits.
struct GlobalSizes {
    byte_strides: Vec<u64>,
    inner_bound: u64,
    extent_bytes: u64,
}

/// Rules on concrete global dims and strides (elements, user order). Returns the shape's
/// sizes when every one of them fits (findings may still have been recorded).
fn check_global(
    spec: &TileSpec,
    global: &[u64],
    strides: &[u64],
    c: &mut Collector,
) -> Option<GlobalSizes> {
    let rank = spec.rank();
    let inner = rank - 1;
    let dtype = spec.dtype;
    #[allow(clippy::needless_range_loop)] // d indexes global, boxed and the field names
    for d in 0..rank {
        let g = global[d];
        if g == 0 || g > MAX_GLOBAL_DIM {
            c.error(
                field_global(spec, d),
                g,
                Rule::GlobalDimRange,
                "global dims must be in [1, 2^32] (cuTensorMapEncodeTiled: globalDim)".into(),
            );
        }
        if u64::from(spec.boxed[d]) > g && g > 0 {
            c.warning(
                field_box(spec, d),
                spec.boxed[d],
                Rule::BoxExceedsGlobal,
                format!(
                    "the box is larger than the tensor ({g}) along this dim: the excess is always out of bounds (loads fill it, stores skip it)"
                ),
            );
        }
    }
    let interleaved = spec.interleave != Interleave::None;
    let inner_bytes = dtype.global_bytes(global[inner]);
    if let (false, Some(bytes)) = (interleaved, inner_bytes.get()) {
        if bytes % INNER_COORD_ALIGN != 0 {
            c.warning(
                field_global(spec, inner),
                global[inner],
                Rule::InnerDimRoundedUp,
                format!(
                    "{bytes} B: TMA bounds-checks the inner dim rounded up to 16 bytes, so loads read and stores write up to {} B past its end",
                    INNER_COORD_ALIGN - bytes % INNER_COORD_ALIGN
                ),
            );
        }
    }
    if strides[inner] != 1 {
        c.error(
            field_stride(spec, inner),
            strides[inner],
            Rule::InnerStrideIsOne,
            "the innermost dim must be contiguous (stride 1): TMA's dim 0 has no stride".into(),
        );
    }
    let align = if spec.interleave == Interleave::B32 {
        STRIDE_ALIGN_INTERLEAVE_32B
    } else if matches!(
        dtype,
        crate::DType::U4x16Align16B | crate::DType::U6x16Align16B
    ) {
        PACKED_ALIGN16B_ADDRESS_ALIGN
    } else {
        STRIDE_ALIGN
    };
    let mut byte_strides: Vec<Size> = Vec::with_capacity(rank);
    for d in 0..inner {
        let bytes = dtype.global_bytes(strides[d]);
        byte_strides.push(bytes);
        if !dtype.is_whole_bytes(strides[d]) {
            c.error(
                field_stride(spec, d),
                strides[d],
                Rule::StrideWholeBytes,
                format!(
                    "{} elements of {dtype} ({} bits each) do not end on a byte, and strides are encoded in bytes: use a multiple of {} elements",
                    strides[d],
                    dtype.global_bits(),
                    8 / gcd(8, u64::from(dtype.global_bits()))
                ),
            );
        } else if !bytes.is_below(MAX_STRIDE_BYTES) {
            c.error(
                field_stride(spec, d),
                strides[d],
                Rule::StrideMax,
                format!("{} elements of {dtype} = {bytes} B; global strides must be below 2^40 B (cuTensorMapEncodeTiled: globalStrides)", strides[d]),
            );
        } else if !bytes.is_multiple_of(align) {
            let rule = if align == PACKED_ALIGN16B_ADDRESS_ALIGN && dtype.is_packed() {
                Rule::PackedTypeAlignment
            } else {
                Rule::StrideAlignment
            };
            c.error(
                field_stride(spec, d),
                strides[d],
                rule,
                format!(
                    "{} elements of {dtype} = {bytes} B; global strides must be multiples of {align} B (cuTensorMapEncodeTiled: globalStrides)",
                    strides[d]
                ),
            );
        }
        // Positions along a dim of extent 1 cannot alias each other.
        if global[d] > 1 {
            let unit = if d + 1 == inner {
                spec.inner_unit_elements()
            } else {
                1
            };
            let inside = Size::new(strides[d + 1]) * unit * global[d + 1];
            if strides[d] == 0 {
                c.warning(
                    field_stride(spec, d),
                    0,
                    Rule::StrideOverlap,
                    format!(
                        "every one of the {} positions along this dim reads and writes the same elements (loads duplicate, stores race)",
                        global[d]
                    ),
                );
            } else if inside.get().is_none_or(|v| v > strides[d]) {
                c.warning(
                    field_stride(spec, d),
                    strides[d],
                    Rule::StrideOverlap,
                    format!(
                        "the dim inside spans {inside} elements, more than this stride: elements alias (loads may duplicate, stores race)"
                    ),
                );
            }
        }
    }
    if matches!(
        dtype,
        crate::DType::U4x16Align16B | crate::DType::U6x16Align16B
    ) && global[inner] % PACKED_INNER_DIM_MULTIPLE != 0
    {
        c.error(
            field_global(spec, inner),
            global[inner],
            Rule::PackedTypeAlignment,
            format!(
                "with {dtype} the inner global dim must be a multiple of {PACKED_INNER_DIM_MULTIPLE}"
            ),
        );
    }
    if c.has_errors() {
        return None;
    }
    // Every dim is in [1, 2^32] and every stride below 2^40 B here: only the extent can
    // still overflow (2^32 positions of a 2^40-byte stride).
    let (inner_bound, extent) = match spec.interleave.chunk_bytes() {
        Some(chunk) => {
            let outer: Size = (0..inner).map(|d| byte_strides[d] * (global[d] - 1)).sum();
            (
                Size::new(global[inner]),
                outer + Size::new(global[inner]) * chunk,
            )
        }
        None => {
            let bound = (inner_bytes.next_multiple_of(INNER_COORD_ALIGN) * 8u64)
                .div_floor(u64::from(dtype.global_bits()));
            let last: Size = (0..inner)
                .map(|d| byte_strides[d] * (global[d] - 1))
                .sum::<Size>()
                + dtype.global_bytes(bound);
            (bound, last)
        }
    };
    match (
        inner_bound.get(),
        extent.get(),
        byte_strides
            .iter()
            .map(|b| b.get())
            .collect::<Option<Vec<u64>>>(),
    ) {
        (Some(inner_bound), Some(extent_bytes), Some(byte_strides)) => Some(GlobalSizes {
            byte_strides,
            inner_bound,
            extent_bytes,
        }),
        _ => {
            c.error(
                Field::List("global"),
                format!("{global:?}"),
                Rule::SizeOverflow,
                format!(
                    "this shape of {dtype} with strides {strides:?} spans {extent} bytes: more than any GPU can address"
                ),
            );
            None
        }
    }
}

fn gcd(a: u64, b: u64) -> u64 {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}
