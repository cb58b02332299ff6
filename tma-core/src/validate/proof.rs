//! The proof types: a [`ValidSpec`] (static rules hold) and a [`BoundSpec`] (every rule
//! holds on a concrete shape, its sizes computed once), and the checks of run-time values
//! against them (coordinates, addresses).

use super::collect::*;
use super::global_rules::{check_global, dense_overflow, dense_strides, stride_align};
use crate::error::{Field, SpecError, SpecErrors};
use crate::limits::*;
use crate::rules::Rule;
use crate::smem::{ElementOffsets, RepeatPlacement, SmemPlan};
use crate::spec::{Extent, Interleave, TileSpec};

/// A spec whose static parts break no rule. The proof every renderer requires.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ValidSpec {
    pub(super) spec: TileSpec,
    pub(super) plan: SmemPlan,
    pub(super) warnings: Vec<SpecError>,
    /// Set by [`crate::validate::ValidIm2col::stage_tile`]: this is the `[pixels][channels]`
    /// box of that im2col tile, which loads it (`spec` is the box, not the tensor).
    pub(super) im2col: Option<Box<super::ValidIm2col>>,
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

impl ElementOffsets {
    /// The offsets of one call of `valid` (its spec and the plan validation proved for it),
    /// under the hardware's row layout ([`crate::smem::DEFAULT_INNER_ROW_LAYOUT`]). `None`
    /// for packed sub-byte types (no whole bytes per element). Here, beside the proof type,
    /// so that `smem` (below `validate`) names none.
    pub fn new(valid: &ValidSpec) -> Option<ElementOffsets> {
        ElementOffsets::of(&valid.spec, &valid.plan)
    }
}

impl ValidSpec {
    pub fn spec(&self) -> &TileSpec {
        &self.spec
    }
    pub fn plan(&self) -> &SmemPlan {
        &self.plan
    }
    /// The im2col tile this is the box of, for a tile made by
    /// [`crate::validate::ValidIm2col::stage_tile`]: its loads take the im2col tile's
    /// coordinates and offsets, and it renders as that tile. `None` for a tiled tile.
    pub fn im2col(&self) -> Option<&super::ValidIm2col> {
        self.im2col.as_deref()
    }
    /// Where repeated box `i` (user order, `i[d] < repeat[d]`) lands: its offset from the
    /// call's coordinates in global elements (user order: `i[d] * boxed[d]`), and its byte
    /// offset in shared memory (`linear(i) * stride_bytes`, `linear` row-major over the
    /// repeat shape, last dim fastest). Every dim counts, so no two boxes collide.
    /// Validation bounds the count: each box delivers at least one byte and one call at
    /// most [`MAX_TX_BYTES`].
    pub fn repeat_placements(&self) -> Vec<RepeatPlacement> {
        crate::smem::placements(&self.spec, &self.plan)
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

    /// The alignment (bytes) the global base address must have
    /// ([`Rule::BaseAddressAlignment`]; [`BoundSpec::check_base_address`] checks it).
    pub fn base_address_align(&self) -> u64 {
        base_address_align(&self.spec)
    }

    /// The byte multiple every outer global stride must be, and the rule a stride that is not
    /// breaks ([`Rule::StrideAlignment`], or [`Rule::PackedTypeAlignment`]).
    pub fn stride_align(&self) -> (u64, Rule) {
        stride_align(&self.spec)
    }

    /// The innermost coordinate of every copy must be a multiple of this many elements: the
    /// fewest that fill a multiple of 16 bytes ([`crate::limits::INNER_COORD_ALIGN`],
    /// [`crate::DType::elements_per_whole`]: 64 of a 6-bit type). With interleave the coordinate
    /// counts chunks, each 16 or 32 bytes, so any value sits on 16 bytes: 1.
    pub fn inner_coord_multiple(&self) -> u64 {
        if self.spec.interleave != Interleave::None {
            return 1;
        }
        self.spec.dtype.elements_per_whole(INNER_COORD_ALIGN)
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
        self.valid.check_base_address(addr)
    }
}

impl ValidSpec {
    /// Checks a global base address against the alignment TMA needs
    /// ([`ValidSpec::base_address_align`]).
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
