//! Validation: every TMA rule, every violation at once. Only a [`ValidSpec`] can be
//! rendered; only a [`BoundSpec`] (a valid spec with concrete global dims and strides)
//! can be laid out, encoded or modelled.

use crate::error::{Field, Severity, SpecError, SpecErrors};
use crate::limits::*;
use crate::spec::{Extent, Interleave, OobFill, Swizzle, TileSpec};

/// Each rule a spec can break. Tests match on these; messages carry the numbers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Rule {
    /// The tile name must be a C identifier: it names CUDA helpers.
    NameIsIdentifier,
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
    /// A stride smaller than the span of the dims inside it makes elements alias (warning).
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
    /// sm_90): driver 580 on an H100 refuses larger boxes (undocumented). The driver counts
    /// an interleaved box in elements too, dim 1 included (an H200 probe showed it).
    BoxTooLarge,
    /// With interleave a box moves whole chunks, more bytes than the driver's element count:
    /// those must fit one SM's shared memory too, or the copy overflows it. The driver
    /// accepts such boxes (an H200 probe showed it), so this rule is the toolkit's.
    InterleaveBoxTooLarge,
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

impl SmemPlan {
    /// Where repeated box `i` (user order, `i[d] < repeat[d]`) lands: its offset from the
    /// call's coordinates in global elements (user order: `i[d] * boxed[d]`), and its
    /// byte offset in shared memory (`linear(i) * stride_bytes`, `linear` row-major over
    /// the repeat shape, last dim fastest). Every dim counts, so no two boxes collide.
    pub fn repeat_placements(&self, spec: &TileSpec) -> Vec<RepeatPlacement> {
        let rank = spec.rank();
        let mut out = Vec::with_capacity(self.boxes as usize);
        for linear in 0..self.boxes {
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
                smem_offset: linear * self.stride_bytes,
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
            (None, None) => dense_strides(global, spec.inner_unit_elements()),
        };
        check_global(spec, global, &strides, &mut c);
        let (errors, warnings) = c.split();
        if !errors.is_empty() {
            return Err(SpecErrors {
                tile: spec.name.clone(),
                errors,
            });
        }
        Ok(BoundSpec {
            valid: self.clone(),
            global: global.to_vec(),
            strides,
            warnings,
        })
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
    /// Warnings of the static spec and of the bound shape.
    pub fn warnings(&self) -> impl Iterator<Item = &SpecError> {
        self.valid.warnings.iter().chain(&self.warnings)
    }
    /// The inner global dim as TMA bounds-checks it: rounded up to 16 bytes. Elements
    /// between `global()[inner]` and this are read by loads and written by stores. With
    /// interleave the dim counts chunks of 16 or 32 bytes: no rounding.
    pub fn inner_bound(&self) -> u64 {
        let inner = self.global.len() - 1;
        if self.spec().interleave != Interleave::None {
            return self.global[inner];
        }
        let dtype = self.spec().dtype;
        let bytes = dtype
            .global_bytes(self.global[inner])
            .next_multiple_of(INNER_COORD_ALIGN);
        bytes * 8 / u64::from(dtype.global_bits())
    }

    /// Bytes from the base address to one past the last byte TMA may touch: the last
    /// element, with the inner dim rounded up to 16 bytes (see [`BoundSpec::inner_bound`]);
    /// with interleave, the end of the last chunk.
    pub fn extent_bytes(&self) -> u64 {
        let inner = self.global.len() - 1;
        if let Some(chunk) = self.spec().interleave.chunk_bytes() {
            let outer: u64 = self.global[..inner]
                .iter()
                .zip(&self.strides)
                .map(|(&g, &s)| self.spec().dtype.global_bytes((g - 1) * s))
                .sum();
            return outer + self.global[inner] * chunk;
        }
        let last: u64 = self
            .global
            .iter()
            .zip(&self.strides)
            .enumerate()
            .map(|(d, (&g, &s))| {
                if d == inner {
                    (self.inner_bound() - 1) * s
                } else {
                    (g - 1) * s
                }
            })
            .sum();
        self.spec().dtype.global_bytes(last + 1)
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
/// [`TileSpec::inner_unit_elements`]). The innermost stride is 1 step.
pub fn dense_strides(global: &[u64], inner_unit: u64) -> Vec<u64> {
    let rank = global.len();
    let mut strides = vec![1u64; rank];
    for d in (0..rank.saturating_sub(1)).rev() {
        let step = if d + 1 == rank - 1 { inner_unit } else { 1 };
        strides[d] = strides[d + 1]
            .saturating_mul(step)
            .saturating_mul(global[d + 1]);
    }
    strides
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
        let strides: Vec<u64> = match &spec.strides {
            Some(s) => s.iter().filter_map(|e| e.get()).collect(),
            None => dense_strides(&global, spec.inner_unit_elements()),
        };
        let mut g = Collector::new();
        check_global(spec, &global, &strides, &mut g);
        let (errs, warns) = g.split();
        c.findings.extend(errs);
        global_warnings = warns;
    }
    let (errors, mut warnings) = c.split();
    if !errors.is_empty() {
        return Err(SpecErrors {
            tile: spec.name.clone(),
            errors,
        });
    }
    warnings.extend(global_warnings);
    Ok(ValidSpec {
        spec: spec.clone(),
        plan,
        warnings,
    })
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

fn is_c_identifier(s: &str) -> bool {
    let mut chars = s.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// Rank and list lengths. Returns false when the per-dim rules cannot be checked.
fn check_shape_lists(spec: &TileSpec, c: &mut Collector) -> bool {
    let rank = spec.rank();
    if !is_c_identifier(&spec.name) {
        c.error(
            Field::Name,
            format!("{:?}", spec.name),
            Rule::NameIsIdentifier,
            "the tile name names CUDA helpers, so it must be an identifier ([A-Za-z_][A-Za-z0-9_]*)".into(),
        );
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
    spec.dtype.global_bytes(u64::from(spec.boxed[inner]))
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

/// The shared-memory plan. Needs the list lengths to be right.
fn smem_plan(spec: &TileSpec) -> SmemPlan {
    let interleaved = spec.interleave != Interleave::None;
    let mut box_elems = traversed(spec);
    if interleaved && spec.rank() >= MIN_RANK_INTERLEAVED {
        // The hardware copies one position along dim 1 of an interleaved map.
        box_elems[1] = 1;
    }
    // Rows (the inner dim) sit at the pitch the hardware uses; a swizzled box fills whole
    // 128-byte lines, since the swizzle moves chunks anywhere within a line.
    let rows: u64 = box_elems[..box_elems.len().saturating_sub(1)]
        .iter()
        .product();
    let data_bytes = if interleaved {
        rows * crate::swizzle::row_bytes(spec)
    } else {
        spec.dtype.smem_bytes(box_elems.iter().product())
    };
    let pitch = crate::swizzle::row_pitch_bytes(spec, crate::swizzle::DEFAULT_INNER_ROW_LAYOUT);
    let box_bytes = match spec.swizzle {
        Swizzle::None => rows * pitch,
        _ => (rows * pitch).next_multiple_of(128),
    };
    let boxes: u64 = spec.repeat.iter().map(|&r| u64::from(r.max(1))).product();
    let align_bytes = spec.swizzle.period_bytes().max(SMEM_ALIGN);
    let stride_bytes = match spec.smem_stride {
        Some(elems) => spec.dtype.smem_bytes(elems),
        None => box_bytes.next_multiple_of(align_bytes),
    };
    SmemPlan {
        box_elems,
        box_data_bytes: data_bytes,
        box_bytes,
        boxes,
        stride_bytes,
        tx_bytes: data_bytes * boxes,
        footprint_bytes: (boxes - 1) * stride_bytes + box_bytes,
        align_bytes,
    }
}

/// The box bytes the driver compares with an SM's shared memory: every dim's traversed
/// elements times the element size. With interleave that is not what the copy moves (the
/// inner dim counts chunks and dim 1 is one position), but it is what the driver checks.
fn driver_box_bytes(spec: &TileSpec) -> u64 {
    spec.dtype.smem_bytes(traversed(spec).iter().product())
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

fn check_plan(spec: &TileSpec, plan: &SmemPlan, c: &mut Collector) {
    if plan.boxes > 1 {
        let stride = spec
            .smem_stride
            .map_or(plan.stride_bytes.to_string(), |s| s.to_string());
        if plan.stride_bytes < plan.box_bytes {
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
        if plan.stride_bytes % plan.align_bytes != 0 {
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
    let driver_bytes = driver_box_bytes(spec);
    if driver_bytes > box_limit {
        c.error(
            Field::List("boxed"),
            format!("{:?}", spec.boxed),
            Rule::BoxTooLarge,
            format!(
                "one box holds {driver_bytes} B of data{}; the driver refuses boxes over the {box_limit} B of shared memory of one SM on {}",
                if spec.interleave == Interleave::None { "" } else { " counted as the driver does (in elements, every dim's box)" },
                spec.target,
            ),
        );
    }
    if spec.interleave != Interleave::None && plan.box_data_bytes > box_limit {
        c.error(
            Field::List("boxed"),
            format!("{:?}", spec.boxed),
            Rule::InterleaveBoxTooLarge,
            format!(
                "with interleave one box moves {} B of chunks, more than the {box_limit} B of shared memory of one SM on {}: the copy would overflow it (the driver checks the box in elements, {driver_bytes} B, and accepts it)",
                plan.box_data_bytes, spec.target,
            ),
        );
    }
    if plan.tx_bytes > MAX_TX_BYTES {
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
    if plan.footprint_bytes > limit {
        c.warning(
            Field::SmemFootprint,
            plan.footprint_bytes,
            Rule::SmemFootprintLimit,
            format!(
                "one call spans {} B of shared memory; a block on {} may use at most {limit} B",
                plan.footprint_bytes, spec.target
            ),
        );
    }
}

/// Rules on concrete global dims and strides (elements, user order).
fn check_global(spec: &TileSpec, global: &[u64], strides: &[u64], c: &mut Collector) {
    let rank = spec.rank();
    let inner = rank - 1;
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
    let inner_bytes = spec.dtype.global_bytes(global[inner]);
    if inner_bytes % INNER_COORD_ALIGN != 0 && spec.interleave == Interleave::None {
        c.warning(
            field_global(spec, inner),
            global[inner],
            Rule::InnerDimRoundedUp,
            format!(
                "{inner_bytes} B: TMA bounds-checks the inner dim rounded up to 16 bytes, so loads read and stores write up to {} B past its end",
                inner_bytes.next_multiple_of(INNER_COORD_ALIGN) - inner_bytes
            ),
        );
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
        spec.dtype,
        crate::DType::U4x16Align16B | crate::DType::U6x16Align16B
    ) {
        PACKED_ALIGN16B_ADDRESS_ALIGN
    } else {
        STRIDE_ALIGN
    };
    for d in 0..inner {
        let bytes = spec.dtype.global_bytes(strides[d]);
        if bytes % align != 0 {
            let rule = if align == PACKED_ALIGN16B_ADDRESS_ALIGN && spec.dtype.is_packed() {
                Rule::PackedTypeAlignment
            } else {
                Rule::StrideAlignment
            };
            c.error(
                field_stride(spec, d),
                strides[d],
                rule,
                format!(
                    "{} elements of {} = {bytes} B; global strides must be multiples of {align} B (cuTensorMapEncodeTiled: globalStrides)",
                    strides[d], spec.dtype
                ),
            );
        }
        if bytes >= MAX_STRIDE_BYTES {
            c.error(
                field_stride(spec, d),
                strides[d],
                Rule::StrideMax,
                format!("{bytes} B; global strides must be below 2^40 B (cuTensorMapEncodeTiled: globalStrides)"),
            );
        }
        let unit = if d + 1 == inner {
            spec.inner_unit_elements()
        } else {
            1
        };
        let inside = strides[d + 1]
            .saturating_mul(unit)
            .saturating_mul(global[d + 1]);
        if strides[d] < inside && strides[d] != 0 {
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
    if spec.dtype.is_packed()
        && matches!(
            spec.dtype,
            crate::DType::U4x16Align16B | crate::DType::U6x16Align16B
        )
        && global[inner] % PACKED_INNER_DIM_MULTIPLE != 0
    {
        c.error(
            field_global(spec, inner),
            global[inner],
            Rule::PackedTypeAlignment,
            format!(
                "with {} the inner global dim must be a multiple of {PACKED_INNER_DIM_MULTIPLE}",
                spec.dtype
            ),
        );
    }
}
