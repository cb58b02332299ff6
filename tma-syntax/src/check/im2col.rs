//! `tma_im2col!`: an im2col tile's entries -> [`Im2colSpec`] -> [`validate_im2col`] (the
//! function the runtime calls) -> its rendered helpers ([`Im2colCode`]), every error at the
//! token that caused it, all of them at once.
//!
//! ```text
//! tma_im2col! {
//!     pub Act: bf16,
//!     global = [N = _, H = 56, W = 56, C = 64],   // NWC / NHWC / NDHWC, outer -> inner
//!     channels_per_pixel = 64,                     // the box of C
//!     pixels_per_column = 128,                     // the rows of one load
//!     lower_corner = [H = -1, W = -1],             // spatial dims, user order (default 0)
//!     upper_corner = [-1, -1],                     // (default 0)
//!     element_strides = [1, 1],                    // traversal strides (default 1)
//!     swizzle = 128,
//! }
//! ```
//!
//! The keys it shares with the tiled macros (`global`, `strides`, `swizzle`, `l2_promotion`,
//! `oob_fill`, `target`, `name`) are read by the tiled reader ([`super::entries`]); the keys
//! are the [`Im2colSpec`] fields' names, as the tiled keys are [`tma_core::TileSpec`]'s.

use crate::check::entries::{check_name, int, list_of, signed_int, Builder};
use crate::check::snake_case;
use crate::check::spans::{self, ListSpans, Spans};
use crate::errors::Errors;
use crate::parse::{List, TileDecl, Value};
use proc_macro2::Span;
use std::collections::HashMap;
use syn::ext::IdentExt;
use tma_core::echo::shown;
use tma_core::render::Im2colCode;
use tma_core::{
    validate_im2col, Arch, Field, Im2colSpec, L2Promotion, OobFill, Rule, SpecError, Swizzle,
    ValidIm2col,
};

/// The macro's name, as errors and the command line spell it.
pub const MACRO: &str = "tma_im2col";

/// An im2col tile that passed every rule, with its rendered CUDA helpers.
pub struct CheckedIm2col {
    pub valid: ValidIm2col,
    /// Validation warnings, at their tokens.
    pub warnings: Vec<(Span, String)>,
    /// The helper's struct name, `tma_<name>`.
    pub cuda_name: String,
    /// The helpers, rendered as tile 0 of their translation unit.
    pub cuda_source: String,
    /// Where `target = ..` was written, if it was.
    pub target: Option<Span>,
}

/// The keys a `tma_im2col!` takes, in the order its messages list them.
const KEYS: [&str; 12] = [
    "global",
    "channels_per_pixel",
    "pixels_per_column",
    "lower_corner",
    "upper_corner",
    "element_strides",
    "strides",
    "swizzle",
    "l2_promotion",
    "oob_fill",
    "target",
    "name",
];

/// Keys of the tiled macros an im2col tile has no use for, and what it takes instead.
fn tiled_only(key: &str) -> Option<&'static str> {
    Some(match key {
        "boxed" | "box" => "an im2col load's box is `pixels_per_column` rows of `channels_per_pixel` channels: give those",
        "repeat" | "smem_stride" => "an im2col tile issues one load per call (no repeats)",
        "interleave" => "im2col tiles are not interleaved (INTERLEAVE_NONE)",
        "mpk_b" => "give the swizzle as `swizzle = ..`",
        "wgmma" => "an im2col tile declares no wgmma operand",
        "dtype" => "the dtype goes in the header (`pub Name: bf16, ...`), not in a `dtype = ..` entry",
        _ => return None,
    })
}

/// Where each part of an im2col declaration was written.
pub struct Im2colSpans {
    /// The keys shared with tiled tiles (`boxed` stands for `channels_per_pixel`).
    pub tiled: Spans,
    pub channels: Span,
    pub pixels: Span,
    pub lower: Option<ListSpans>,
    pub upper: Option<ListSpans>,
    pub element_strides: Option<ListSpans>,
}

/// `tma_im2col! { .. }`: the declaration's one im2col tile.
pub fn im2col_macro(decl: &TileDecl) -> syn::Result<CheckedIm2col> {
    let mut errs = Errors::default();
    let checked = im2col(decl, 0, &mut errs);
    errs.finish(checked, decl.ident.span())
}

/// Checks one im2col declaration (syntax first; if clean, [`validate_im2col`] with each
/// finding at its token), then renders its helpers as tile `tile_id`. Appends its errors to
/// `errs`.
pub fn im2col(decl: &TileDecl, tile_id: u32, errs: &mut Errors) -> Option<CheckedIm2col> {
    let mut own = Errors::default();
    let read = read(decl, &mut own);
    errs.append(own);
    let (spec, spans) = read?;
    let valid = match validate_im2col(&spec) {
        Ok(v) => v,
        Err(e) => {
            report(&e.errors, &spans, errs);
            return None;
        }
    };
    let code = match Im2colCode::new(&valid, tile_id) {
        Ok(c) => c,
        Err(e) => {
            errs.push(
                decl.ident.span(),
                format!("rendering the CUDA helpers failed: {e}"),
            );
            return None;
        }
    };
    let warnings = valid
        .warnings()
        .iter()
        .map(|w| (span_of(w, &spans), w.to_string()))
        .collect();
    Some(CheckedIm2col {
        cuda_name: code.cuda_name(),
        cuda_source: code.source().to_owned(),
        valid,
        warnings,
        target: spans.tiled.target,
    })
}

/// A spatial list as read: its spans and values.
type SpatialList<T> = Option<(ListSpans, Vec<T>)>;

/// Reads the entries into a spec. Any syntax error (here or already in `errs`) means no spec.
fn read(decl: &TileDecl, errs: &mut Errors) -> Option<(Im2colSpec, Im2colSpans)> {
    let mut b = Builder::default();
    b.dtype(&decl.dtype, errs);
    let mut seen: HashMap<&'static str, Span> = HashMap::new();
    let mut channels: Option<(u32, Span)> = None;
    let mut pixels: Option<(u32, Span)> = None;
    let mut lower: SpatialList<i32> = None;
    let mut upper: SpatialList<i32> = None;
    let mut estrides: SpatialList<u32> = None;
    // Names written in the spatial lists: (list, spatial index, name).
    let mut spatial_names: Vec<(usize, syn::Ident)> = Vec::new();
    for entry in &decl.entries {
        let key = entry.key.unraw().to_string();
        let Some(slot) = KEYS.iter().copied().find(|k| *k == key) else {
            let msg = match tiled_only(&key) {
                Some(why) => format!("`{}` is not an im2col key: {why}", shown(&key)),
                None => format!(
                    "unknown key `{}`; `{MACRO}!` takes: {}",
                    shown(&key),
                    KEYS.join(", ")
                ),
            };
            errs.push(entry.key.span(), msg);
            continue;
        };
        if seen.insert(slot, entry.key.span()).is_some() {
            errs.push(entry.key.span(), format!("duplicate key `{key}`"));
            continue;
        }
        let Some(value) = &entry.value else {
            let shape = if matches!(
                slot,
                "global" | "strides" | "lower_corner" | "upper_corner" | "element_strides"
            ) {
                "[..]"
            } else {
                ".."
            };
            errs.push(
                entry.key.span(),
                format!("expected a value: `{key} = {shape}`"),
            );
            continue;
        };
        match slot {
            "channels_per_pixel" | "pixels_per_column" => {
                let Some(w) = scalar(slot, value, errs) else {
                    continue;
                };
                if let Some(v) = int::<u32>(&w, slot, errs) {
                    let out = if slot == "channels_per_pixel" {
                        &mut channels
                    } else {
                        &mut pixels
                    };
                    *out = Some((v, w.span()));
                }
            }
            "lower_corner" | "upper_corner" => {
                let Some(list) = list_of(slot, value, errs) else {
                    continue;
                };
                note_names(list, &mut spatial_names);
                let vals: Option<Vec<i32>> = list
                    .items
                    .iter()
                    .map(|i| signed_int(&i.value, slot, errs))
                    .collect::<Vec<_>>()
                    .into_iter()
                    .collect();
                if let Some(v) = vals {
                    let out = if slot == "lower_corner" {
                        &mut lower
                    } else {
                        &mut upper
                    };
                    *out = Some((ListSpans::of(list), v));
                }
            }
            "element_strides" => {
                let Some(list) = list_of(slot, value, errs) else {
                    continue;
                };
                note_names(list, &mut spatial_names);
                let vals: Option<Vec<u32>> = list
                    .items
                    .iter()
                    .map(|i| int::<u32>(&i.value, slot, errs))
                    .collect::<Vec<_>>()
                    .into_iter()
                    .collect();
                if let Some(v) = vals {
                    estrides = Some((ListSpans::of(list), v));
                }
            }
            // global, strides, swizzle, l2_promotion, oob_fill, target, name: as tiled.
            _ => b.entry(slot, value, errs),
        }
    }
    for (what, example) in [
        ("global", "global = [N = _, H = 56, W = 56, C = 64]"),
        ("channels_per_pixel", "channels_per_pixel = 64"),
        ("pixels_per_column", "pixels_per_column = 128"),
    ] {
        if !seen.contains_key(what) {
            errs.push(
                decl.ident.span(),
                format!("missing `{what}`: the im2col tile needs e.g. `{example}`"),
            );
        }
    }
    // Dim names: those written in `global`, the im2col defaults (N, [D, H,] W, C) elsewhere.
    // The names are read even when a value of `global` is refused.
    let rank = b.dim_names.len();
    let defaults = Im2colSpec::new("", tma_core::DType::U8, vec![1; rank], 1, 1).dim_names;
    let labels: Vec<Option<String>> = (0..rank)
        .map(|d| {
            b.dim_names
                .get(d)
                .cloned()
                .flatten()
                .or_else(|| defaults.get(d).cloned().flatten())
        })
        .collect();
    if seen.contains_key("global") {
        for (d, id) in &b.other_names {
            check_name(&labels, *d, id, errs);
        }
        for (i, id) in &spatial_names {
            check_name(&labels, i + 1, id, errs);
        }
    }
    if !errs.is_empty() {
        return None;
    }
    let (gspans, global) = b.global.take()?;
    let (dtype, dtype_span) = b.dtype?;
    let (channels, channels_span) = channels?;
    let (pixels, pixels_span) = pixels?;
    let mut spec = Im2colSpec::new(
        b.name.as_ref().map_or_else(
            || snake_case(&decl.ident.unraw().to_string()),
            |(n, _)| n.clone(),
        ),
        dtype,
        [],
        channels,
        pixels,
    )
    .global_extents(global);
    spec.dim_names = labels;
    let k = rank.saturating_sub(2);
    spec.lower_corner = lower.as_ref().map_or(vec![0; k], |(_, v)| v.clone());
    spec.upper_corner = upper.as_ref().map_or(vec![0; k], |(_, v)| v.clone());
    spec.element_strides = estrides.as_ref().map_or(vec![1; k], |(_, v)| v.clone());
    spec.strides = b.strides.as_ref().map(|(_, v)| v.clone());
    spec.swizzle = b.swizzle.map_or(Swizzle::None, |s| s.0);
    spec.l2_promotion = b.l2_promotion.map_or(L2Promotion::None, |s| s.0);
    spec.oob_fill = b.oob_fill.map_or(OobFill::Zero, |s| s.0);
    spec.target = b.target.map_or(Arch::Sm90a, |s| s.0);
    let tiled = Spans {
        ident: decl.ident.span(),
        name: b.name.map(|n| n.1),
        dtype: dtype_span,
        global: gspans,
        // The tensor view's box is 1 along every dim but C, whose box is the channels.
        boxed: ListSpans {
            whole: channels_span,
            items: Vec::new(),
            names: Vec::new(),
        },
        strides: b.strides.map(|s| s.0),
        element_strides: None,
        repeat: None,
        swizzle: b.swizzle.map(|s| s.1),
        interleave: None,
        l2_promotion: b.l2_promotion.map(|s| s.1),
        oob_fill: b.oob_fill.map(|s| s.1),
        smem_stride: None,
        target: b.target.map(|s| s.1),
        wgmma: None,
    };
    let spans = Im2colSpans {
        tiled,
        channels: channels_span,
        pixels: pixels_span,
        lower: lower.map(|l| l.0),
        upper: upper.map(|l| l.0),
        element_strides: estrides.map(|l| l.0),
    };
    Some((spec, spans))
}

/// A key that takes one value.
fn scalar(key: &str, value: &Value, errs: &mut Errors) -> Option<crate::parse::Word> {
    match value {
        Value::Word(w) => Some(w.clone()),
        Value::List(l) => {
            errs.push(l.span, format!("`{key}` takes one value, not a list"));
            None
        }
    }
}

fn note_names(list: &List, out: &mut Vec<(usize, syn::Ident)>) {
    for (i, item) in list.items.iter().enumerate() {
        if let Some(n) = &item.name {
            out.push((i, n.clone()));
        }
    }
}

/// Each validation finding at its token (as [`spans::report`] does for tiled tiles).
pub fn report(findings: &[SpecError], spans: &Im2colSpans, errs: &mut Errors) {
    for finding in findings {
        let span = span_of(finding, spans);
        match finding.rule {
            Rule::ListLength => errs.push(span, &finding.message),
            _ if matches!(finding.field, Field::Stride { .. }) && spans.tiled.strides.is_none() => {
                errs.push(
                    span,
                    format!(
                        "{finding}\n(no `strides` given: the tensor is dense, each stride the product of the dims inside; give `strides = [..]` to pad it)"
                    ),
                )
            }
            _ => errs.push(span, finding),
        }
    }
}

/// The token an im2col finding is about. A spatial entry not written points at its global
/// dim (its default was read there).
pub fn span_of(e: &SpecError, s: &Im2colSpans) -> Span {
    let spatial = |list: &Option<ListSpans>, i: usize| {
        list.as_ref()
            .map_or_else(|| s.tiled.global.item(i + 1), |l| l.item(i))
    };
    let whole = |list: &Option<ListSpans>| list.as_ref().map_or(s.tiled.global.whole, |l| l.whole);
    match &e.field {
        Field::Spatial { list, index, .. } => match *list {
            "lower_corner" => spatial(&s.lower, *index),
            "upper_corner" => spatial(&s.upper, *index),
            "element_strides" => spatial(&s.element_strides, *index),
            _ => s.tiled.ident,
        },
        Field::List("lower_corner") => whole(&s.lower),
        Field::List("upper_corner") => whole(&s.upper),
        Field::List("element_strides") => whole(&s.element_strides),
        Field::ChannelsPerPixel => s.channels,
        // What one load writes: its rows.
        Field::PixelsPerColumn
        | Field::List("pixels_per_column x channels_per_pixel")
        | Field::SmemFootprint => s.pixels,
        _ => spans::span_of(e, &s.tiled),
    }
}
