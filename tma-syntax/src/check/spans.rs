//! Findings back to tokens: where each part of a declaration was written, and which token
//! a `tma_core` finding is about. Dims index the lists the user wrote (outer -> inner).

use crate::errors::Errors;
use crate::parse::List;
use proc_macro2::Span;
use syn::Ident;
use tma_core::Rule;
use tma_core::{Field, SpecError};

/// Where each part of a declaration was written, to point findings at it.
pub struct Spans {
    /// The tile's type or field: the fallback for findings with no token of their own.
    pub ident: Span,
    pub name: Option<Span>,
    pub dtype: Span,
    pub global: ListSpans,
    pub boxed: ListSpans,
    pub strides: Option<ListSpans>,
    pub element_strides: Option<ListSpans>,
    pub repeat: Option<ListSpans>,
    pub swizzle: Option<Span>,
    pub interleave: Option<Span>,
    pub l2_promotion: Option<Span>,
    pub oob_fill: Option<Span>,
    pub smem_stride: Option<Span>,
    pub target: Option<Span>,
    /// `wgmma = a_k_major`.
    pub wgmma: Option<Span>,
}

/// A list's brackets and each element's value token.
#[derive(Clone)]
pub struct ListSpans {
    pub whole: Span,
    pub items: Vec<Span>,
    /// Each item's dim name (`H = 94`), where one is written.
    pub names: Vec<Option<Span>>,
}

impl ListSpans {
    pub fn of(list: &List) -> ListSpans {
        ListSpans {
            whole: list.span,
            items: list.items.iter().map(|i| i.value.span()).collect(),
            names: list
                .items
                .iter()
                .map(|i| i.name.as_ref().map(Ident::span))
                .collect(),
        }
    }

    /// Element `d`'s value token, or the brackets when the list is shorter.
    pub fn item(&self, d: usize) -> Span {
        self.items.get(d).copied().unwrap_or(self.whole)
    }
}

/// Each validation error at its token, with a hint where the message alone would puzzle.
pub fn report(findings: &[SpecError], spans: &Spans, errs: &mut Errors) {
    for finding in findings {
        let span = span_of(finding, spans);
        match finding.rule {
            // The value is a length: the message says it better than `boxed = 1`.
            Rule::ListLength => errs.push(span, &finding.message),
            _ if matches!(finding.field, Field::Stride { .. }) && spans.strides.is_none() => errs
                .push(
                    span,
                    format!(
                        "{finding}\n(no `strides` given: rows are dense, each stride the product of the dims inside; give `strides = [..]` to pad rows)"
                    ),
                ),
            _ => errs.push(span, finding),
        }
    }
}

/// The token a finding is about.
pub fn span_of(e: &SpecError, s: &Spans) -> Span {
    let list = |l: &Option<ListSpans>, d: usize| l.as_ref().map(|l| l.item(d));
    match &e.field {
        Field::Name => s.name.unwrap_or(s.ident),
        Field::DimName { dim } => s
            .global
            .names
            .get(*dim)
            .copied()
            .flatten()
            .unwrap_or(s.global.item(*dim)),
        // Coordinates are run-time values; no declaration token carries them.
        Field::Coord { .. } => s.ident,
        Field::Rank => s.global.whole,
        Field::DType => s.dtype,
        Field::Global { dim, .. } => s.global.item(*dim),
        // Dense strides come from the global dims inside: point at the next one.
        Field::Stride { dim, .. } => list(&s.strides, *dim).unwrap_or_else(|| {
            s.global
                .item((*dim + 1).min(s.global.items.len().max(1) - 1))
        }),
        Field::Box { dim, .. } => s.boxed.item(*dim),
        Field::ElementStride { dim, .. } => list(&s.element_strides, *dim).unwrap_or(s.boxed.whole),
        Field::Repeat { dim, .. } => list(&s.repeat, *dim).unwrap_or(s.boxed.whole),
        Field::List(name) => match *name {
            "boxed" => Some(s.boxed.whole),
            "strides" => s.strides.as_ref().map(|l| l.whole),
            "element_strides" => s.element_strides.as_ref().map(|l| l.whole),
            "repeat" => s.repeat.as_ref().map(|l| l.whole),
            _ => None,
        }
        .unwrap_or(s.global.whole),
        Field::SmemStride => s
            .smem_stride
            .or(s.repeat.as_ref().map(|r| r.whole))
            .unwrap_or(s.boxed.whole),
        Field::Interleave => s.interleave.unwrap_or(s.ident),
        // A swizzle rule broken by the default swizzle is about the option that needs one.
        Field::Swizzle => s
            .swizzle
            .or(match e.rule {
                Rule::Interleave32NeedsSwizzle32 => s.interleave,
                _ => None,
            })
            .unwrap_or(s.ident),
        Field::L2Promotion => s.l2_promotion.unwrap_or(s.ident),
        Field::OobFill => s.oob_fill.unwrap_or(s.ident),
        Field::Target => s.target.unwrap_or(s.ident),
        Field::Wgmma => s.wgmma.unwrap_or(s.ident),
        Field::SmemFootprint => s.repeat.as_ref().map(|r| r.whole).unwrap_or(s.boxed.whole),
        Field::BaseAddress | Field::SmemAddress => s.ident,
        // Pipeline and warp-role fields never come from a tile's validation.
        _ => s.ident,
    }
}
