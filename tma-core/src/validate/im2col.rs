//! Validation of im2col tiles ([`Im2colSpec`]): every rule at once, as for tiled tiles.
//!
//! The rules im2col shares with tiled mode are not restated: they run on the spec's tiled
//! views ([`Im2colSpec::tensor_view`]: the tensor read one pixel at a time;
//! [`Im2colSpec::smem_view`]: the `[pixels][channels]` box one load writes) and their findings
//! are renamed to the im2col fields (the box of C is `channels_per_pixel`). The im2col-only
//! rules (rank, corners, traversal strides, pixels, offsets, start) are checked here.

use super::collect::Collector;
use super::static_rules::check_plan;
use super::{validate, BoundSpec, ValidSpec};
use crate::error::{Field, SpecError, SpecErrors};
use crate::limits::*;
use crate::rules::Rule;
use crate::smem::SmemPlan;
use crate::spec::{Im2colSpec, IM2COL_RANKS};

/// An im2col spec whose static parts break no rule: what the renderer and the runtime take.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ValidIm2col {
    spec: Im2colSpec,
    /// The tensor read one pixel at a time, validated as a tiled tile.
    tensor: ValidSpec,
    /// The shared memory one load writes: the plan of [`Im2colSpec::smem_view`].
    plan: SmemPlan,
    /// [`Im2colSpec::smem_view`] validated as a tiled tile (with the spec's wgmma operand):
    /// what pipelines, kernel plans and wgmma descriptors take for the box. `Err`: the box is
    /// a valid im2col load but no tiled box (more than 256 pixels: a tiled box's rows; or
    /// more bytes than a tiled box may span), with why.
    smem: Option<ValidSpec>,
    /// Why `smem` is `None`.
    not_tiled: Vec<SpecError>,
    warnings: Vec<SpecError>,
}

/// A valid im2col spec bound to concrete global dims and strides (elements, user order).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct BoundIm2col {
    valid: ValidIm2col,
    tensor: BoundSpec,
}

/// The field an im2col finding is about, renamed from the tiled view's: the box of C is
/// `channels_per_pixel`, the `[pixels][channels]` box is one load.
fn rename(mut e: SpecError, rank: usize) -> SpecError {
    e.field = match e.field {
        Field::Box { dim, .. } if dim + 1 == rank => {
            e.message = format!("channels_per_pixel is the box of C: {}", e.message);
            Field::ChannelsPerPixel
        }
        Field::List("boxed") => Field::List("pixels_per_column x channels_per_pixel"),
        other => other,
    };
    e
}

/// The rules of a wgmma operand tile ([`crate::validate::operand_rules`]): the only findings of
/// the `[pixels][channels]` view that the tensor view and the box's plan have not stated.
fn is_operand_rule(rule: Rule) -> bool {
    matches!(
        rule,
        Rule::WgmmaDType
            | Rule::WgmmaMajor
            | Rule::WgmmaNeedsSm90a
            | Rule::WgmmaTileShape
            | Rule::WgmmaInnerBox
            | Rule::WgmmaMnExtent
            | Rule::WgmmaKExtent
    )
}

/// A finding of the `[pixels][channels]` view, renamed: its dim 0 is `pixels_per_column`, its
/// dim 1 `channels_per_pixel`.
fn rename_view(mut e: SpecError) -> SpecError {
    e.field = match e.field {
        Field::Box { dim: 0, .. } => {
            e.message = format!("pixels_per_column is the operand's rows: {}", e.message);
            Field::PixelsPerColumn
        }
        Field::Box { dim: 1, .. } => {
            e.message = format!("channels_per_pixel is the operand's columns: {}", e.message);
            Field::ChannelsPerPixel
        }
        other => other,
    };
    e
}

fn spatial_field(spec: &Im2colSpec, list: &'static str, index: usize) -> Field {
    Field::Spatial {
        list,
        index,
        name: spec.dim_name(index + 1).map(str::to_owned),
    }
}

/// Checks every rule on `spec`. Global dims and strides are checked when static; run-time
/// ones by [`ValidIm2col::bind`], with the same code.
pub fn validate_im2col(spec: &Im2colSpec) -> Result<ValidIm2col, SpecErrors> {
    let mut c = Collector::new();
    let rank = spec.rank();
    let fail = |c: Collector| SpecErrors {
        tile: crate::echo::shown(&spec.name),
        errors: c.split().0,
    };
    if !IM2COL_RANKS.contains(&rank) {
        c.error(
            Field::Rank,
            rank,
            Rule::Im2colRank,
            "im2col tensors have 3, 4 or 5 dims: [N][W][C], [N][H][W][C] or [N][D][H][W][C] (cuTensorMapEncodeIm2col: tensorRank)".into(),
        );
        return Err(fail(c));
    }
    let spatial = spec.spatial_rank();
    let lists = [
        ("lower_corner", spec.lower_corner.len()),
        ("upper_corner", spec.upper_corner.len()),
        ("element_strides", spec.element_strides.len()),
    ];
    let mut lists_ok = true;
    for (list, len) in lists {
        if len != spatial {
            lists_ok = false;
            c.error(
                Field::List(list),
                len,
                Rule::ListLength,
                format!("needs one entry per spatial dim: a rank-{rank} tensor has {spatial}, `{list}` has {len}"),
            );
        }
    }
    // The rules shared with tiled mode, on the tensor read one pixel at a time (its static
    // global shape included).
    let tensor = match validate(&spec.tensor_view()) {
        Ok(v) => Some(v),
        Err(e) => {
            c.findings
                .extend(e.errors.into_iter().map(|e| rename(e, rank)));
            None
        }
    };
    if !lists_ok {
        return Err(fail(c));
    }
    let (lo, hi) = im2col_corner_range(spatial);
    for (list, corner) in [
        ("lower_corner", &spec.lower_corner),
        ("upper_corner", &spec.upper_corner),
    ] {
        for (i, &v) in corner.iter().enumerate() {
            if v < lo || v > hi {
                c.error(
                    spatial_field(spec, list, i),
                    v,
                    Rule::Im2colCornerRange,
                    format!(
                        "a rank-{rank} im2col map keeps {} bits of each corner: it must be in [{lo}, {hi}] (cuTensorMapEncodeIm2col: pixelBox{}Corner)",
                        im2col_corner_bits(spatial),
                        if list == "lower_corner" { "Lower" } else { "Upper" }
                    ),
                );
            }
        }
    }
    for (i, &e) in spec.element_strides.iter().enumerate() {
        if e == 0 || e > MAX_ELEMENT_STRIDE {
            c.error(
                spatial_field(spec, "element_strides", i),
                e,
                Rule::ElementStrideRange,
                format!("traversal strides must be in [1, {MAX_ELEMENT_STRIDE}] (cuTensorMapEncodeIm2col: elementStrides)"),
            );
        }
    }
    let p = spec.pixels_per_column;
    if p == 0 || p > MAX_PIXELS_PER_COLUMN {
        c.error(
            Field::PixelsPerColumn,
            p,
            Rule::Im2colPixelsRange,
            format!("pixels per column must be in [1, {MAX_PIXELS_PER_COLUMN}] (cuTensorMapEncodeIm2col: pixelsPerColumn)"),
        );
    }
    // What one load writes: the [pixels][channels] box (its size against an SM and an
    // mbarrier's tx-count; the channel rules were the tensor view's).
    let view = spec.smem_view();
    let sizes = crate::smem::plan(&view);
    let mut plan_findings = Collector::new();
    if p > 0 && spec.channels_per_pixel > 0 {
        check_plan(&view, &sizes, &mut plan_findings);
    }
    c.findings
        .extend(plan_findings.findings.into_iter().map(|e| rename(e, rank)));
    // The box as a tiled tile: its operand rules (the others were stated above, on the same
    // numbers), and the proof pipelines and descriptors take.
    let mut smem = None;
    let mut view_errors = Vec::new();
    if p > 0 && spec.channels_per_pixel > 0 {
        match validate(&view) {
            Ok(v) => smem = Some(v),
            Err(e) => {
                for f in e.errors {
                    if is_operand_rule(f.rule) {
                        c.findings.push(rename_view(f));
                    } else {
                        view_errors.push(rename_view(f));
                    }
                }
            }
        }
    }
    let (mut errors, mut warnings) = c.split();
    // The view's other findings restate the rules checked above, except two that bind a tiled
    // box and not an im2col load (the H100's driver takes 1024 pixels and 233472-byte im2col
    // boxes): those leave the tile valid, only not a stage member or operand.
    let (tiled_only, others): (Vec<SpecError>, Vec<SpecError>) =
        view_errors.into_iter().partition(|e| {
            matches!(e.rule, Rule::BoxTooLarge)
                || (e.rule == Rule::BoxDimRange && e.field == Field::PixelsPerColumn)
        });
    if errors.is_empty() && smem.is_none() {
        // Never dropped: anything else the view refuses refuses the tile.
        errors = others;
    }
    match (tensor, sizes.fit()) {
        (Some(tensor), Some(plan)) if errors.is_empty() => {
            if let Some(bound) = tensor.bound() {
                check_box_extents(spec, bound.global())?;
            }
            warnings.extend(tensor.warnings().iter().cloned());
            Ok(ValidIm2col {
                spec: spec.clone(),
                tensor,
                plan,
                smem,
                not_tiled: tiled_only,
                warnings,
            })
        }
        _ => Err(SpecErrors {
            tile: crate::echo::shown(&spec.name),
            errors,
        }),
    }
}

/// [`Rule::Im2colSpatialExtent`] and [`Rule::Im2colBoxEmpty`] on a concrete shape.
///
/// The driver computes each bounding box's extent, `dim + upper - lower`, in 32-bit signed
/// arithmetic and refuses it below 1 (seen on the H100: a dim of 2^32 with `upper - lower = 3`
/// is accepted, with 0 refused; 2^31 with corners 0 refused). So `Im2colBoxEmpty` is that
/// wrapped check, exactly what the driver refuses; `Im2colSpatialExtent`, this toolkit's own
/// rule, refuses every dim or extent past 2^31 - 1, which the driver accepts only by
/// wrap-around.
fn check_box_extents(spec: &Im2colSpec, global: &[u64]) -> Result<(), SpecErrors> {
    let mut c = Collector::new();
    for i in 0..spec.spatial_rank() {
        let dim = global[i + 1];
        let (lower, upper) = (
            i64::from(spec.lower_corner[i]),
            i64::from(spec.upper_corner[i]),
        );
        let extent = i128::from(dim) + i128::from(upper) - i128::from(lower);
        let field = || Field::Global {
            dim: i + 1,
            name: spec.dim_name(i + 1).map(str::to_owned),
        };
        if dim > MAX_IM2COL_SPATIAL_DIM || extent > i128::from(MAX_IM2COL_SPATIAL_DIM) {
            c.error(
                field(),
                dim,
                Rule::Im2colSpatialExtent,
                format!(
                    "a spatial dim of an im2col map and its bounding box ({dim} + {upper} - {lower} = {extent} positions) are at most 2^31 - 1 = {MAX_IM2COL_SPATIAL_DIM}: the driver computes the box in 32-bit signed arithmetic and takes larger ones only by wrap-around (N and C take up to 2^32)"
                ),
            );
        }
        // The driver's own check, in its arithmetic: two's complement, 32 bits.
        let wrapped = i64::from(extent as u32 as i32);
        if wrapped < 1 {
            c.error(
                spatial_field(spec, "upper_corner", i),
                spec.upper_corner[i],
                Rule::Im2colBoxEmpty,
                if i128::from(wrapped) == extent {
                    format!(
                        "the bounding box along this dim is [{lower}, {dim} + {upper}) = {extent} positions: it must hold at least one (cuTensorMapEncodeIm2col: \"must have non-zero area\")"
                    )
                } else {
                    format!(
                        "the bounding box along this dim, {dim} + {upper} - {lower} = {extent} positions, is {wrapped} in the driver's 32-bit arithmetic, which refuses it (\"must have non-zero area\")"
                    )
                },
            );
        }
    }
    if c.has_errors() {
        return Err(SpecErrors {
            tile: crate::echo::shown(&spec.name),
            errors: c.split().0,
        });
    }
    Ok(())
}

impl ValidIm2col {
    pub fn spec(&self) -> &Im2colSpec {
        &self.spec
    }
    /// Where one load's pixels land: the plan of the `[pixels][channels]` box.
    pub fn plan(&self) -> &SmemPlan {
        &self.plan
    }
    /// The tensor, validated as the tiled tile that reads one pixel at a time
    /// ([`Im2colSpec::tensor_view`]): its alignment, coordinate and stride rules are im2col's.
    pub fn tensor(&self) -> &ValidSpec {
        &self.tensor
    }
    /// The `[pixels][channels]` box one load writes, validated as a tiled tile with the
    /// spec's wgmma operand ([`Im2colSpec::smem_view`]): its plan, alignment and descriptors
    /// ([`crate::wgmma::OperandPlan::new`]) are the box's. Not a tile to load: pipelines and
    /// kernel sources take [`ValidIm2col::stage_tile`]. `Err` for a box no tiled box can be
    /// (more than 256 pixels, or more bytes than a tiled box spans), naming the rule.
    pub fn smem_tile(&self) -> Result<&ValidSpec, SpecErrors> {
        self.smem.as_ref().ok_or_else(|| SpecErrors {
            tile: crate::echo::shown(&self.spec.name),
            errors: self.not_tiled.clone(),
        })
    }
    /// What a pipeline stage or a kernel source holds for this tile: the box's
    /// [`ValidIm2col::smem_tile`] (its bytes, shared memory and operand), marked as this
    /// im2col tile ([`ValidSpec::im2col`]), so it is rendered as `struct tma_<name>` of
    /// `templates/im2col.cuh.tera` and loaded with its coordinates and offsets.
    pub fn stage_tile(&self) -> Result<ValidSpec, SpecErrors> {
        let mut v = self.smem_tile()?.clone();
        v.im2col = Some(Box::new(self.clone()));
        Ok(v)
    }
    /// Bytes the mbarrier must expect for one load: every pixel's channels, out-of-bounds
    /// ones included (they are filled): `pixels x channels x element size`.
    pub fn tx_bytes(&self) -> u64 {
        self.plan.tx_bytes
    }
    /// Findings that do not stop the spec.
    pub fn warnings(&self) -> &[SpecError] {
        &self.warnings
    }
    /// The largest offset a load takes per spatial dim ([`Rule::Im2colOffsetRange`]).
    pub fn offset_max(&self) -> u32 {
        im2col_offset_max(self.spec.spatial_rank())
    }
    /// The innermost (C) coordinate must be a multiple of this many elements (16 bytes).
    pub fn inner_coord_multiple(&self) -> u64 {
        self.tensor.inner_coord_multiple()
    }

    /// Binds concrete global dims (and optionally strides, elements), user order: every
    /// global rule again on the concrete values, and the bounding box not empty.
    pub fn bind(&self, global: &[u64], strides: Option<&[u64]>) -> Result<BoundIm2col, SpecErrors> {
        let tensor = self.tensor.bind(global, strides)?;
        check_box_extents(&self.spec, tensor.global())?;
        Ok(BoundIm2col {
            valid: self.clone(),
            tensor,
        })
    }

    /// The bound spec when every dim and stride is static.
    pub fn bound(&self) -> Option<BoundIm2col> {
        let tensor = self.tensor.bound()?;
        self.bind(tensor.global(), Some(tensor.strides())).ok()
    }

    /// Checks the filter offsets of one load (spatial, user order): one per spatial dim, each
    /// in [0, [`ValidIm2col::offset_max`]].
    pub fn check_offsets(&self, offsets: &[i64]) -> Result<(), SpecErrors> {
        let spec = &self.spec;
        let spatial = spec.spatial_rank();
        let mut c = Collector::new();
        if offsets.len() != spatial {
            c.error(
                Field::List("offsets"),
                offsets.len(),
                Rule::Im2colOffsetRange,
                format!("{} offsets given for {spatial} spatial dims", offsets.len()),
            );
        }
        let max = i64::from(self.offset_max());
        for (i, &o) in offsets.iter().enumerate() {
            if o < 0 || o > max {
                c.error(
                    spatial_field(spec, "offsets", i),
                    o,
                    Rule::Im2colOffsetRange,
                    format!(
                        "a rank-{} im2col map keeps {} bits of each offset: it must be in [0, {max}]",
                        spec.rank(),
                        im2col_corner_bits(spatial)
                    ),
                );
            }
        }
        c.into_result_named(&spec.name)
    }
}

impl BoundIm2col {
    pub fn valid(&self) -> &ValidIm2col {
        &self.valid
    }
    pub fn spec(&self) -> &Im2colSpec {
        &self.valid.spec
    }
    pub fn plan(&self) -> &SmemPlan {
        &self.valid.plan
    }
    /// The tensor bound as the one-pixel tiled tile: dims, strides, byte strides, extent,
    /// base-address check.
    pub fn tensor(&self) -> &BoundSpec {
        &self.tensor
    }
    /// Global dims, user order, elements.
    pub fn global(&self) -> &[u64] {
        self.tensor.global()
    }
    /// Global strides, user order, elements.
    pub fn strides(&self) -> &[u64] {
        self.tensor.strides()
    }
    /// Bytes from the base address to one past the last byte a load may read.
    pub fn extent_bytes(&self) -> u64 {
        self.tensor.extent_bytes()
    }
    /// Checks the global base address of a buffer against the alignment TMA needs.
    pub fn check_base_address(&self, addr: u64) -> Result<(), SpecErrors> {
        self.tensor.check_base_address(addr)
    }
    /// The bounding box of spatial dim `i` (user order, in coordinate space before the
    /// offsets): `[lower, extent + upper)`.
    ///
    /// # Panics
    /// If `i` is not a spatial dim (at least the rank minus 2), as indexing a slice does.
    pub fn bounding_box(&self, i: usize) -> (i64, i64) {
        let spec = self.spec();
        (
            i64::from(spec.lower_corner[i]),
            self.global()[i + 1] as i64 + i64::from(spec.upper_corner[i]),
        )
    }

    /// Checks one load: its coordinates (user order: N, the spatial dims, C) as a tiled
    /// copy's ([`ValidSpec::check_coords`]: signed 32-bit, C on 16 bytes), its offsets
    /// ([`ValidIm2col::check_offsets`]), and a start inside the bounding box
    /// ([`Rule::Im2colStartOutsideBox`]).
    pub fn check_call(&self, coords: &[i64], offsets: &[i64]) -> Result<(), SpecErrors> {
        let spec = self.spec();
        let mut errors = Vec::new();
        if let Err(e) = self.valid.tensor.check_coords(coords) {
            errors.extend(e.errors);
        }
        if let Err(e) = self.valid.check_offsets(offsets) {
            errors.extend(e.errors);
        }
        if coords.len() == spec.rank() {
            let mut c = Collector::new();
            for i in 0..spec.spatial_rank() {
                let (lo, hi) = self.bounding_box(i);
                let x = coords[i + 1];
                if x < lo || x >= hi {
                    c.error(
                        Field::Coord {
                            dim: i + 1,
                            name: spec.dim_name(i + 1).map(str::to_owned),
                        },
                        x,
                        Rule::Im2colStartOutsideBox,
                        format!("a load starts inside the bounding box [{lo}, {hi}) of this dim (lower corner, extent + upper corner); the walk from elsewhere is not modelled"),
                    );
                }
            }
            errors.extend(c.split().0);
        }
        if errors.is_empty() {
            Ok(())
        } else {
            Err(SpecErrors {
                tile: crate::echo::shown(&spec.name),
                errors,
            })
        }
    }
}
