//! Meaning: entries -> [`TileSpec`] -> [`tma_core::validate`], every finding mapped back
//! to the token that caused it. The checks are `tma_core`'s own: the same function the
//! runtime calls, run at expansion time.

use crate::parse::{Entry, Item, List, Value, Word};
use proc_macro2::Span;
use std::collections::HashMap;
use std::fmt::Display;
use std::str::FromStr;
use syn::ext::IdentExt;
use syn::Ident;
use tma_core::Rule;
use tma_core::{
    validate, Arch, DType, Extent, Field, Interleave, L2Promotion, OobFill, SpecError, Swizzle,
    TileSpec, ValidSpec,
};

/// Accumulates every error (serde_derive's `Ctxt`, darling's `Accumulator`).
#[derive(Default)]
pub struct Errors(Option<syn::Error>);

impl Errors {
    pub fn push(&mut self, span: Span, message: impl Display) {
        self.push_error(syn::Error::new(span, message));
    }
    pub fn push_error(&mut self, e: syn::Error) {
        match &mut self.0 {
            Some(all) => all.combine(e),
            None => self.0 = Some(e),
        }
    }
    /// Moves `other`'s errors after these.
    pub fn append(&mut self, other: Errors) {
        if let Some(e) = other.0 {
            self.push_error(e);
        }
    }
    pub fn is_empty(&self) -> bool {
        self.0.is_none()
    }
    pub fn take(self) -> Option<syn::Error> {
        self.0
    }
}

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
    fn item(&self, d: usize) -> Span {
        self.items.get(d).copied().unwrap_or(self.whole)
    }
}

/// What a declaration has to say besides its entries.
pub struct TileInput<'a> {
    /// The type (macro) or field (derive) the tile belongs to.
    pub ident: &'a Ident,
    /// The tile name unless `name = ".."` overrides it.
    pub default_name: String,
    /// The header's dtype (macro); the derive reads `dtype = ..` from the entries.
    pub dtype: Option<&'a Word>,
    pub entries: &'a [Entry],
    /// The rank the macro promises, with the macro's name.
    pub rank: Option<(usize, &'static str)>,
    /// Bare flags this form accepts (`load`, `store`).
    pub flags: &'static [&'static str],
}

/// A declaration that passed every rule.
pub struct Checked {
    pub valid: ValidSpec,
    /// Validation warnings, at their tokens.
    pub warnings: Vec<(Span, String)>,
    /// The flags given, in order.
    pub flags: Vec<Ident>,
}

const LIST_KEYS: [&str; 5] = ["global", "boxed", "strides", "element_strides", "repeat"];
const SCALAR_KEYS: [&str; 10] = [
    "name",
    "dtype",
    "swizzle",
    "mpk_b",
    "interleave",
    "l2_promotion",
    "oob_fill",
    "smem_stride",
    "target",
    "box",
];

/// Checks one tile: syntax-level errors first (unknown keys, bad values), then, if
/// those are clean, `tma_core::validate` with each finding at its token. Appends this
/// tile's errors to `errs`; errors already there (another field's) do not stop the checks.
pub fn tile(input: TileInput<'_>, errs: &mut Errors) -> Option<Checked> {
    let mut own = Errors::default();
    let checked = tile_alone(input, &mut own);
    errs.append(own);
    checked
}

/// [`tile`] with an accumulator holding this tile's errors only.
fn tile_alone(input: TileInput<'_>, errs: &mut Errors) -> Option<Checked> {
    let mut b = Builder::default();
    let mut seen: HashMap<&'static str, Span> = HashMap::new();
    let mut flags = Vec::new();

    if let Some(d) = input.dtype {
        b.dtype(d, errs);
    }
    for entry in input.entries {
        let key = entry.key.unraw().to_string();
        if let Some(flag) = input.flags.iter().find(|f| **f == key) {
            if let Some(v) = &entry.value {
                errs.push(
                    v.span(),
                    format!("`{flag}` is a flag: write it alone, without a value"),
                );
            } else if seen.insert(flag, entry.key.span()).is_some() {
                errs.push(entry.key.span(), format!("duplicate `{flag}`"));
            } else {
                flags.push(entry.key.clone());
            }
            continue;
        }
        let Some(slot) = slot_of(&key, input.dtype.is_some()) else {
            errs.push(entry.key.span(), unknown_key(&key, &input));
            continue;
        };
        if seen.insert(slot, entry.key.span()).is_some() {
            let msg = if slot == "swizzle" {
                "duplicate swizzle: give it once, as `swizzle = ..` or `mpk_b = ..`".to_string()
            } else {
                format!("duplicate key `{key}`")
            };
            errs.push(entry.key.span(), msg);
            continue;
        }
        let Some(value) = &entry.value else {
            let shape = if LIST_KEYS.contains(&key.as_str()) {
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
        b.entry(&key, value, errs);
    }

    let mut missing = |what: &str, example: &str| {
        errs.push(
            input.ident.span(),
            format!("missing `{what}`: the tile needs e.g. `{example}`"),
        );
    };
    if input.dtype.is_none() && !seen.contains_key("dtype") {
        missing("dtype", "dtype = bf16");
    }
    if !seen.contains_key("global") {
        missing("global", "global = [H = 1024, W = _]");
    }
    if !seen.contains_key("boxed") {
        missing("boxed", "boxed = [64, 64]");
    }
    let (global, boxed) = (b.global.take(), b.boxed.take());
    if let (Some((gs, gl)), Some((want, mac))) = (&global, input.rank) {
        if gl.len() != want {
            errs.push(
                gs.whole,
                format!(
                    "`{mac}!` declares a rank-{want} tile, but `global` has {} dim{}",
                    gl.len(),
                    if gl.len() == 1 { "" } else { "s" }
                ),
            );
        }
    }
    if seen.contains_key("global") {
        for (d, id) in &b.other_names {
            check_name(&b.dim_names, *d, id, errs);
        }
    }
    // Syntax errors: validating a half-read spec would only add findings about defaults.
    if !errs.is_empty() {
        return None;
    }
    let ((gspans, gvals), (bspans, bvals), (dtype, dtype_span)) = (global?, boxed?, b.dtype?);
    let rank = gvals.len();
    let mut spec = TileSpec::new(input.default_name, dtype, [], bvals);
    spec.global = gvals;
    // Unwritten per-dim lists default to one entry per global dim.
    spec.element_strides = vec![1; rank];
    spec.repeat = vec![1; rank];
    spec.dim_names = b.dim_names.clone();
    if let Some((n, span)) = b.name.take() {
        spec.name = n;
        b.name_span = Some(span);
    }
    if let Some((_, v)) = &b.strides {
        spec.strides = Some(v.clone());
    }
    if let Some((_, v)) = &b.element_strides {
        spec.element_strides = v.clone();
    }
    if let Some((_, v)) = &b.repeat {
        spec.repeat = v.clone();
    }
    spec.swizzle = b.swizzle.map_or(Swizzle::None, |s| s.0);
    spec.interleave = b.interleave.map_or(Interleave::None, |s| s.0);
    spec.l2_promotion = b.l2_promotion.map_or(L2Promotion::None, |s| s.0);
    spec.oob_fill = b.oob_fill.map_or(OobFill::Zero, |s| s.0);
    spec.smem_stride = b.smem_stride.map(|s| s.0);
    spec.target = b.target.map_or(Arch::Sm90a, |s| s.0);

    let spans = Spans {
        ident: input.ident.span(),
        name: b.name_span,
        dtype: dtype_span,
        global: gspans,
        boxed: bspans,
        strides: b.strides.map(|s| s.0),
        element_strides: b.element_strides.map(|s| s.0),
        repeat: b.repeat.map(|s| s.0),
        swizzle: b.swizzle.map(|s| s.1),
        interleave: b.interleave.map(|s| s.1),
        l2_promotion: b.l2_promotion.map(|s| s.1),
        oob_fill: b.oob_fill.map(|s| s.1),
        smem_stride: b.smem_stride.map(|s| s.1),
        target: b.target.map(|s| s.1),
    };
    match validate(&spec) {
        Ok(valid) => {
            let warnings = valid
                .warnings()
                .iter()
                .map(|w| (span_of(w, &spans), w.to_string()))
                .collect();
            Some(Checked {
                valid,
                warnings,
                flags,
            })
        }
        Err(e) => {
            for finding in &e.errors {
                let span = span_of(finding, &spans);
                match finding.rule {
                    // The value is a length: the message says it better than `boxed = 1`.
                    Rule::ListLength => errs.push(span, &finding.message),
                    _ if matches!(finding.field, Field::Stride { .. }) && spans.strides.is_none() => {
                        errs.push(
                            span,
                            format!(
                                "{finding}\n(no `strides` given: rows are dense, each stride the product of the dims inside; give `strides = [..]` to pad rows)"
                            ),
                        )
                    }
                    _ => errs.push(span, finding),
                }
            }
            None
        }
    }
}

fn slot_of(key: &str, header_dtype: bool) -> Option<&'static str> {
    if key == "dtype" && header_dtype {
        return None;
    }
    if key == "mpk_b" {
        return Some("swizzle");
    }
    if key == "box" {
        return Some("boxed");
    }
    LIST_KEYS
        .iter()
        .chain(&SCALAR_KEYS)
        .find(|k| **k == key)
        .copied()
}

fn unknown_key(key: &str, input: &TileInput<'_>) -> String {
    let mut keys: Vec<&str> = Vec::new();
    if input.dtype.is_none() {
        keys.push("dtype");
    }
    keys.extend([
        "global",
        "boxed",
        "strides",
        "element_strides",
        "swizzle",
        "mpk_b",
        "interleave",
        "l2_promotion",
        "oob_fill",
        "repeat",
        "smem_stride",
        "target",
        "name",
    ]);
    keys.extend(input.flags);
    if key == "dtype" {
        return "the dtype goes in the header (`pub Name: bf16, ...`), not in a `dtype = ..` entry"
            .into();
    }
    format!("unknown key `{key}`; expected one of: {}", keys.join(", "))
}

/// The token a finding is about. Dims index the lists the user wrote (outer -> inner).
fn span_of(e: &SpecError, s: &Spans) -> Span {
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
        Field::SmemFootprint => s.repeat.as_ref().map(|r| r.whole).unwrap_or(s.boxed.whole),
        Field::BaseAddress | Field::SmemAddress => s.ident,
    }
}

type Spanned<T> = Option<(T, Span)>;

/// Entry values as they are read; each remembers its span.
#[derive(Default)]
struct Builder {
    name: Spanned<String>,
    name_span: Option<Span>,
    dtype: Spanned<DType>,
    dim_names: Vec<Option<String>>,
    global: Option<(ListSpans, Vec<Extent>)>,
    boxed: Option<(ListSpans, Vec<u32>)>,
    strides: Option<(ListSpans, Vec<Extent>)>,
    element_strides: Option<(ListSpans, Vec<u32>)>,
    repeat: Option<(ListSpans, Vec<u32>)>,
    swizzle: Spanned<Swizzle>,
    interleave: Spanned<Interleave>,
    l2_promotion: Spanned<L2Promotion>,
    oob_fill: Spanned<OobFill>,
    smem_stride: Spanned<u64>,
    target: Spanned<Arch>,
    /// Names given inside lists other than `global`, checked against it at the end.
    other_names: Vec<(usize, Ident)>,
}

impl Builder {
    fn dtype(&mut self, w: &Word, errs: &mut Errors) {
        match DType::parse(&w.text()).filter(|_| !matches!(w, Word::Underscore(_))) {
            Some(d) => self.dtype = Some((d, w.span())),
            None => errs.push(
                w.span(),
                format!(
                    "unknown dtype `{}`; expected one of: {}",
                    w.text(),
                    DType::ACCEPTED
                ),
            ),
        }
    }

    fn entry(&mut self, key: &str, value: &Value, errs: &mut Errors) {
        let word = |errs: &mut Errors| match value {
            Value::Word(w) => Some(w.clone()),
            Value::List(l) => {
                errs.push(l.span, format!("`{key}` takes one value, not a list"));
                None
            }
        };
        match key {
            "global" | "strides" => {
                let Some(list) = list_of(key, value, errs) else {
                    return;
                };
                let mut vals = Vec::with_capacity(list.items.len());
                let mut ok = true;
                for item in &list.items {
                    match &item.value {
                        Word::Underscore(_) => vals.push(Extent::Runtime),
                        w => match int::<u64>(w, key, errs) {
                            Some(v) => vals.push(Extent::Static(v)),
                            None => ok = false,
                        },
                    }
                }
                let spans = list_spans(list);
                if key == "global" {
                    self.dim_names = self.names(list, errs);
                    if ok {
                        self.global = Some((spans, vals));
                    }
                } else {
                    self.note_names(list);
                    if ok {
                        self.strides = Some((spans, vals));
                    }
                }
            }
            "boxed" | "box" | "element_strides" | "repeat" => {
                let Some(list) = list_of(key, value, errs) else {
                    return;
                };
                self.note_names(list);
                let mut vals = Vec::with_capacity(list.items.len());
                let mut ok = true;
                for item in &list.items {
                    if let Word::Underscore(u) = &item.value {
                        errs.push(
                            u.span,
                            format!("`{key}` must be known at compile time: it sizes shared memory and the CUDA helpers"),
                        );
                        ok = false;
                        continue;
                    }
                    match int::<u32>(&item.value, key, errs) {
                        Some(v) => vals.push(v),
                        None => ok = false,
                    }
                }
                if !ok {
                    return;
                }
                let entry = Some((list_spans(list), vals));
                match key {
                    "element_strides" => self.element_strides = entry,
                    "repeat" => self.repeat = entry,
                    _ => self.boxed = entry,
                }
            }
            "dtype" => {
                if let Some(w) = word(errs) {
                    self.dtype(&w, errs);
                }
            }
            "name" => {
                if let Some(w) = word(errs) {
                    self.name = Some((w.text(), w.span()));
                }
            }
            "smem_stride" => {
                if let Some(w) = word(errs) {
                    if let Some(v) = int::<u64>(&w, key, errs) {
                        self.smem_stride = Some((v, w.span()));
                    }
                }
            }
            "mpk_b" => {
                if let Some(w) = word(errs) {
                    if let Some(v) = int::<u32>(&w, key, errs) {
                        match Swizzle::from_mpk_class(v) {
                            Some(s) => self.swizzle = Some((s, w.span())),
                            None => errs.push(
                                w.span(),
                                format!("unknown MPK swizzle class `{v}`; expected 0 (none), 1 (32B), 2 (64B) or 3 (128B)"),
                            ),
                        }
                    }
                }
            }
            _ => {
                let Some(w) = word(errs) else {
                    return;
                };
                let text = w.text();
                let span = w.span();
                macro_rules! one_of {
                    ($ty:ident, $slot:ident, $what:literal) => {
                        match $ty::parse(&text).filter(|_| !matches!(w, Word::Underscore(_))) {
                            Some(v) => self.$slot = Some((v, span)),
                            None => errs.push(
                                span,
                                format!(
                                    concat!("unknown ", $what, " `{}`; expected one of: {}"),
                                    text,
                                    $ty::ACCEPTED
                                ),
                            ),
                        }
                    };
                }
                match key {
                    "swizzle" => one_of!(Swizzle, swizzle, "swizzle"),
                    "interleave" => one_of!(Interleave, interleave, "interleave"),
                    "l2_promotion" => one_of!(L2Promotion, l2_promotion, "L2 promotion"),
                    "oob_fill" => one_of!(OobFill, oob_fill, "out-of-bounds fill"),
                    _ => one_of!(Arch, target, "target"),
                }
            }
        }
    }

    /// Dim names of `global`: each an identifier, no two alike.
    fn names(&mut self, list: &List, errs: &mut Errors) -> Vec<Option<String>> {
        let mut seen: HashMap<String, ()> = HashMap::new();
        let mut out = Vec::with_capacity(list.items.len());
        for item in &list.items {
            let name = item.name.as_ref().map(|n| n.unraw().to_string());
            if let (Some(n), Some(id)) = (&name, &item.name) {
                if seen.insert(n.clone(), ()).is_some() {
                    errs.push(id.span(), format!("duplicate dim name `{n}`"));
                }
            }
            out.push(name);
        }
        out
    }

    fn note_names(&mut self, list: &List) {
        for (d, item) in list.items.iter().enumerate() {
            if let Some(n) = &item.name {
                self.other_names.push((d, n.clone()));
            }
        }
    }
}

fn check_name(global: &[Option<String>], d: usize, id: &Ident, errs: &mut Errors) {
    let given = id.unraw().to_string();
    match global.get(d) {
        Some(Some(n)) if *n == given => {}
        Some(Some(n)) => errs.push(
            id.span(),
            format!("dim {d} is named `{n}` in `global`, not `{given}`"),
        ),
        _ => errs.push(
            id.span(),
            format!("dim {d} has no name in `global`: name it there (`{given} = ..`) first"),
        ),
    }
}

fn list_of<'v>(key: &str, value: &'v Value, errs: &mut Errors) -> Option<&'v List> {
    match value {
        Value::List(l) => Some(l),
        Value::Word(w) => {
            errs.push(
                w.span(),
                format!("`{key}` takes one value per dim: `{key} = [..]`, outer -> inner"),
            );
            None
        }
    }
}

fn list_spans(list: &List) -> ListSpans {
    ListSpans {
        whole: list.span,
        items: list.items.iter().map(|i: &Item| i.value.span()).collect(),
        names: list
            .items
            .iter()
            .map(|i: &Item| i.name.as_ref().map(Ident::span))
            .collect(),
    }
}

/// An unsigned integer literal (plain or with an unsigned suffix) that fits `T`.
fn int<T: FromStr>(w: &Word, key: &str, errs: &mut Errors) -> Option<T>
where
    T::Err: Display,
{
    let Word::Int(lit) = w else {
        errs.push(
            w.span(),
            format!("`{key}` takes integers, not `{}`", w.text()),
        );
        return None;
    };
    if !matches!(lit.suffix(), "" | "u8" | "u16" | "u32" | "u64" | "usize") {
        errs.push(
            lit.span(),
            format!("`{lit}` is not a plain integer (suffix `{}`)", lit.suffix()),
        );
        return None;
    }
    match lit.base10_parse::<T>() {
        Ok(v) => Some(v),
        Err(_) => {
            errs.push(
                lit.span(),
                format!(
                    "`{}` is out of range for `{key}` ({})",
                    lit.base10_digits(),
                    std::any::type_name::<T>()
                ),
            );
            None
        }
    }
}

/// `DeformValue` -> `deform_value`, `QKVTile` -> `qkv_tile`.
pub fn snake_case(s: &str) -> String {
    let chars: Vec<char> = s.chars().collect();
    let mut out = String::with_capacity(s.len() + 4);
    for (i, &c) in chars.iter().enumerate() {
        if c.is_uppercase() {
            let prev = i.checked_sub(1).map(|p| chars[p]);
            let next = chars.get(i + 1);
            let boundary = match prev {
                Some(p) if p.is_lowercase() || p.is_ascii_digit() => true,
                Some(p) if p.is_uppercase() => next.is_some_and(|n| n.is_lowercase()),
                _ => false,
            };
            if boundary && !out.ends_with('_') {
                out.push('_');
            }
            out.extend(c.to_lowercase());
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::snake_case;

    #[test]
    fn snake() {
        assert_eq!(snake_case("DeformValue"), "deform_value");
        assert_eq!(snake_case("QKVTile"), "qkv_tile");
        assert_eq!(snake_case("A2B"), "a2_b");
        assert_eq!(snake_case("already_snake"), "already_snake");
        assert_eq!(snake_case("Attn"), "attn");
    }
}
