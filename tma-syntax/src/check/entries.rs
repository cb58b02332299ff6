//! Building the spec from the entries: each key read once, each value to its typed
//! field, every syntax-level error (unknown key, duplicate, bad value, missing entry) at
//! its token, and where each part was written ([`Spans`]) for the findings to come.

use crate::check::spans::{ListSpans, Spans};
use crate::errors::Errors;
use crate::parse::{Entry, List, Value, Word};
use proc_macro2::Span;
use std::collections::HashMap;
use std::fmt::Display;
use std::str::FromStr;
use syn::ext::IdentExt;
use syn::Ident;
use tma_core::echo::shown;
use tma_core::{
    Arch, DType, Extent, Interleave, L2Promotion, OobFill, Swizzle, TileSpec, WgmmaOperand,
};

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

/// What the entries say: the spec to validate and where each part of it was written.
pub struct Read {
    pub spec: TileSpec,
    pub spans: Spans,
    /// The flags given, in order.
    pub flags: Vec<Ident>,
}

const LIST_KEYS: [&str; 5] = ["global", "boxed", "strides", "element_strides", "repeat"];
const SCALAR_KEYS: [&str; 11] = [
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
    "wgmma",
];

/// Reads one tile's entries into a spec. `errs` must hold this tile's errors only: any
/// error there, found here or before, means the spec is not read (validating a half-read
/// spec would only add findings about defaults).
pub fn read(input: TileInput<'_>, errs: &mut Errors) -> Option<Read> {
    let mut b = Builder::default();
    let mut seen: HashMap<&'static str, Span> = HashMap::new();
    let mut flags = Vec::new();
    let mut flag_written = false;

    if let Some(d) = input.dtype {
        b.dtype(d, errs);
    }
    for entry in input.entries {
        let key = entry.key.unraw().to_string();
        if let Some(flag) = input.flags.iter().find(|f| **f == key) {
            flag_written = true;
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
    // A derive field says what the kernel does with its tile: nothing said was read as a
    // load, silently.
    if !input.flags.is_empty() && !flag_written {
        errs.push(
            input.ident.span(),
            format!(
                "field `{}` has neither {}: say what the kernel does with this tile (a field may \
                 have both)",
                shown(&input.ident.unraw().to_string()),
                input
                    .flags
                    .iter()
                    .map(|f| format!("`{f}`"))
                    .collect::<Vec<_>>()
                    .join(" nor ")
            ),
        );
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
    spec.wgmma = b.wgmma.map(|s| s.0);

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
        wgmma: b.wgmma.map(|s| s.1),
    };
    Some(Read { spec, spans, flags })
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
        "wgmma",
        "name",
    ]);
    keys.extend(input.flags);
    if key == "dtype" {
        return "the dtype goes in the header (`pub Name: bf16, ...`), not in a `dtype = ..` entry"
            .into();
    }
    format!(
        "unknown key `{}`; expected one of: {}",
        shown(key),
        keys.join(", ")
    )
}
type Spanned<T> = Option<(T, Span)>;

/// Entry values as they are read; each remembers its span. `tma_im2col!` reads the keys it
/// shares with the tiled macros (`global`, `strides`, `dtype`, `name`, `swizzle`, ..) with it.
#[derive(Default)]
pub(crate) struct Builder {
    pub(crate) name: Spanned<String>,
    pub(crate) name_span: Option<Span>,
    pub(crate) dtype: Spanned<DType>,
    pub(crate) dim_names: Vec<Option<String>>,
    pub(crate) global: Option<(ListSpans, Vec<Extent>)>,
    pub(crate) boxed: Option<(ListSpans, Vec<u32>)>,
    pub(crate) strides: Option<(ListSpans, Vec<Extent>)>,
    pub(crate) element_strides: Option<(ListSpans, Vec<u32>)>,
    pub(crate) repeat: Option<(ListSpans, Vec<u32>)>,
    pub(crate) swizzle: Spanned<Swizzle>,
    pub(crate) interleave: Spanned<Interleave>,
    pub(crate) l2_promotion: Spanned<L2Promotion>,
    pub(crate) oob_fill: Spanned<OobFill>,
    pub(crate) smem_stride: Spanned<u64>,
    pub(crate) target: Spanned<Arch>,
    pub(crate) wgmma: Spanned<WgmmaOperand>,
    /// Names given inside lists other than `global`, checked against it at the end.
    pub(crate) other_names: Vec<(usize, Ident)>,
}

impl Builder {
    pub(crate) fn dtype(&mut self, w: &Word, errs: &mut Errors) {
        match DType::parse(&w.text()).filter(|_| !matches!(w, Word::Underscore(_))) {
            Some(d) => self.dtype = Some((d, w.span())),
            None => errs.push(
                w.span(),
                format!(
                    "unknown dtype `{}`; expected one of: {}",
                    shown(&w.text()),
                    DType::ACCEPTED
                ),
            ),
        }
    }

    pub(crate) fn entry(&mut self, key: &str, value: &Value, errs: &mut Errors) {
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
                let spans = ListSpans::of(list);
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
                let entry = Some((ListSpans::of(list), vals));
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
                    self.name = name_of(&w, errs);
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
                let shown_text = shown(&text);
                macro_rules! one_of {
                    ($ty:ident, $slot:ident, $what:literal) => {
                        match $ty::parse(&text).filter(|_| !matches!(w, Word::Underscore(_))) {
                            Some(v) => self.$slot = Some((v, span)),
                            None => errs.push(
                                span,
                                format!(
                                    concat!("unknown ", $what, " `{}`; expected one of: {}"),
                                    shown_text,
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
                    "wgmma" => one_of!(WgmmaOperand, wgmma, "wgmma operand"),
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
                    errs.push(id.span(), format!("duplicate dim name `{}`", shown(n)));
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

pub(crate) fn check_name(global: &[Option<String>], d: usize, id: &Ident, errs: &mut Errors) {
    let raw = id.unraw().to_string();
    let given = shown(&raw);
    match global.get(d) {
        Some(Some(n)) if *n == raw => {}
        Some(Some(n)) => errs.push(
            id.span(),
            format!("dim {d} is named `{}` in `global`, not `{given}`", shown(n)),
        ),
        _ => errs.push(
            id.span(),
            format!("dim {d} has no name in `global`: name it there (`{given} = ..`) first"),
        ),
    }
}

pub(crate) fn list_of<'v>(key: &str, value: &'v Value, errs: &mut Errors) -> Option<&'v List> {
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

/// An unsigned integer literal (plain or with an unsigned suffix) that fits `T`, and its
/// suffix's own type: `256u8` is refused, as rustc refuses it in an expression.
pub(crate) fn int<T: FromStr>(w: &Word, key: &str, errs: &mut Errors) -> Option<T>
where
    T::Err: Display,
{
    let Word::Int(lit) = w else {
        errs.push(
            w.span(),
            format!("`{key}` takes integers, not `{}`", shown(&w.text())),
        );
        return None;
    };
    let text = shown(&lit.to_string());
    if lit.base10_digits().starts_with('-') {
        errs.push(
            lit.span(),
            format!("`{key}` takes unsigned integers, not `{text}`"),
        );
        return None;
    }
    let suffix = lit.suffix();
    let suffix_fits = match suffix {
        "" => Some(true),
        "u8" => Some(lit.base10_parse::<u8>().is_ok()),
        "u16" => Some(lit.base10_parse::<u16>().is_ok()),
        "u32" => Some(lit.base10_parse::<u32>().is_ok()),
        "u64" => Some(lit.base10_parse::<u64>().is_ok()),
        "usize" => Some(lit.base10_parse::<usize>().is_ok()),
        _ => None,
    };
    match suffix_fits {
        None => {
            errs.push(
                lit.span(),
                format!(
                    "`{key}` takes unsigned integers: `{text}` has the suffix `{}` (write `{}` or `{}u32`)",
                    shown(suffix),
                    shown(lit.base10_digits()),
                    shown(lit.base10_digits())
                ),
            );
            return None;
        }
        Some(false) => {
            errs.push(
                lit.span(),
                format!(
                    "`{key}`: `{text}` does not fit its own suffix `{suffix}` ({})",
                    suffix_range(suffix)
                ),
            );
            return None;
        }
        Some(true) => {}
    }
    match lit.base10_parse::<T>() {
        Ok(v) => Some(v),
        Err(_) => {
            errs.push(
                lit.span(),
                format!(
                    "`{}` is out of range for `{key}` ({})",
                    shown(lit.base10_digits()),
                    std::any::type_name::<T>()
                ),
            );
            None
        }
    }
}

/// A `name = ..` value: a name or a string, as written. `_` is refused: it stands for a value
/// given at run time, and a name is fixed when the code is generated (taken as the name `_`,
/// it made `struct tma__`, a name C++ reserves).
pub(crate) fn name_of(w: &Word, errs: &mut Errors) -> Option<(String, Span)> {
    if let Word::Underscore(u) = w {
        errs.push(
            u.span,
            "`name` takes a name or a string (`name = \"ring\"`), not `_`: a name is fixed when the code is generated, not given at run time (leave `name` out for the default)",
        );
        return None;
    }
    Some((w.text(), w.span()))
}

/// A signed integer literal (`-1`, `3`, `-1i32`) that fits an `i32`: an im2col corner.
pub(crate) fn signed_int(w: &Word, key: &str, errs: &mut Errors) -> Option<i32> {
    let Word::Int(lit) = w else {
        errs.push(
            w.span(),
            format!("`{key}` takes integers, not `{}`", shown(&w.text())),
        );
        return None;
    };
    let text = shown(&lit.to_string());
    if !matches!(lit.suffix(), "" | "i32") {
        errs.push(
            lit.span(),
            format!(
                "`{key}` takes i32 integers: `{text}` has the suffix `{}` (write `{}`)",
                shown(lit.suffix()),
                shown(lit.base10_digits())
            ),
        );
        return None;
    }
    match lit.base10_parse::<i32>() {
        Ok(v) => Some(v),
        Err(_) => {
            errs.push(
                lit.span(),
                format!(
                    "`{}` is out of range for `{key}` (i32)",
                    shown(lit.base10_digits())
                ),
            );
            None
        }
    }
}

/// The values an unsigned suffix holds, for messages.
fn suffix_range(suffix: &str) -> String {
    let max = match suffix {
        "u8" => u64::from(u8::MAX),
        "u16" => u64::from(u16::MAX),
        "u32" => u64::from(u32::MAX),
        "usize" => u64::try_from(usize::MAX).unwrap_or(u64::MAX),
        _ => u64::MAX,
    };
    format!("{suffix} holds 0..={max}")
}

/// A cluster shape `[x, y, z]`: three unnamed `u32` extents, each error pushed at its token;
/// `None` when any is wrong. `tma_pipeline!` and `tma_kernel!` read `cluster = [..]` with it.
pub(crate) fn cluster_shape(list: &List, errs: &mut Errors) -> Option<[u32; 3]> {
    let mut shape = [1u32; 3];
    let mut ok = list.items.len() == 3;
    if !ok {
        errs.push(
            list.span,
            format!(
                "`cluster` is the cluster shape `[x, y, z]`: 3 extents, not {}",
                list.items.len()
            ),
        );
    }
    for (axis, item) in list.items.iter().enumerate().take(3) {
        if let Some(n) = &item.name {
            errs.push(n.span(), "`cluster` extents take no names: `[x, y, z]`");
            ok = false;
        }
        match int::<u32>(&item.value, "cluster", errs) {
            Some(v) => shape[axis] = v,
            None => ok = false,
        }
    }
    ok.then_some(shape)
}
