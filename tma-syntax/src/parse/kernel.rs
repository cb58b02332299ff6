//! Syntax only: the token shapes of a kernel plan, no meaning attached.
//!
//! ```text
//! tma_kernel! {
//!     /// docs and attributes go on the generated type
//!     pub GemmKernel,
//!     name = "gemm",                                  // the kernel's name (default: snake case)
//!     target = sm_90a,
//!     roles = GemmRoles,                              // or tma_warp_roles! { pub GemmRoles, .. }
//!     pipelines = [GemmRing, tma_pipeline! { pub Other, .. }],
//!     tiles = [A: GemmA],                             // aliases: `using A = tma_gemm_a;`
//!     staging = [d: tma_2d! { pub GemmD: bf16, .. } x 2, e: GemmE],
//!     scratch = [counters = 64 align 16, flags = 4],
//!     work_queues = [tiles = 4 readers warpgroups(2)],   // slots, who pops
//!     block_threads = 384,
//!     cluster = [2, 1, 1],
//!     blocks_per_sm = 1,
//! }
//! ```
//!
//! A part is named by its type (a path) or declared inline with its own macro, whose body is
//! parsed here with that macro's own parser ([`PipelineDecl`], [`RolesDecl`], [`TileDecl`]);
//! [`crate::check::kernel`] gives them meaning. The key decides its value's shape, so an
//! unknown key's value is skipped here (to the next `,`) and refused there.

use super::{found, Call, Header, PipelineDecl, RolesDecl, TileDecl, Value, Word};
use proc_macro2::{Span, TokenTree};
use syn::ext::IdentExt;
use syn::parse::{Parse, ParseStream};
use syn::punctuated::Punctuated;
use syn::{bracketed, Ident, Token};
use tma_core::echo::shown;

/// A `tma_kernel!` invocation.
pub struct KernelDecl {
    pub header: Header,
    pub entries: Vec<KernelEntry>,
}

/// `key = value`, or a bare `key` (always an error, reported at the key).
pub struct KernelEntry {
    pub key: Ident,
    pub value: Option<KernelValue>,
}

/// A value, in the shape its key takes.
pub enum KernelValue {
    /// A word or a list of words: `name`, `target`, `block_threads`, `cluster`,
    /// `blocks_per_sm`.
    Value(Value),
    /// `roles = GemmRoles` or `roles = tma_warp_roles! { .. }`.
    Roles(Box<Part<RolesDecl>>),
    /// `pipelines = [GemmRing, tma_pipeline! { .. }]`.
    Pipelines(Parts<Part<PipelineDecl>>),
    /// `tiles = [A: GemmA, ..]` and `staging = [d: tma_2d! { .. } x 2, ..]`.
    Tiles(Parts<NamedTile>),
    /// `scratch = [counters = 64 align 16, ..]`.
    Scratch(Parts<ScratchItem>),
    /// `work_queues = [tiles = 4 readers warpgroups(2), ..]`.
    Queues(Parts<QueueItem>),
    /// An unknown key's value, skipped.
    Other(Span),
}

impl KernelValue {
    pub fn span(&self) -> Span {
        match self {
            KernelValue::Value(v) => v.span(),
            KernelValue::Roles(p) => p.span(),
            KernelValue::Pipelines(p) => p.span,
            KernelValue::Tiles(p) => p.span,
            KernelValue::Scratch(p) => p.span,
            KernelValue::Queues(p) => p.span,
            KernelValue::Other(s) => *s,
        }
    }
}

/// A bracketed list: its brackets and items.
pub struct Parts<T> {
    pub span: Span,
    pub items: Vec<T>,
}

/// A part declared elsewhere (its type) or here (its macro, its body parsed).
pub enum Part<D> {
    Path(syn::Path),
    Inline {
        /// The invocation as written: the expansion hands its tokens to the macro itself.
        mac: syn::Macro,
        /// The macro's name (its path's last segment): `tma_2d` gives a tile its rank.
        name: Ident,
        decl: D,
    },
}

impl<D> Part<D> {
    /// The path, or the macro's name.
    pub fn span(&self) -> Span {
        match self {
            Part::Path(p) => path_span(p),
            Part::Inline { name, .. } => name.span(),
        }
    }
}

/// From a path's first token to its last.
pub fn path_span(p: &syn::Path) -> Span {
    let first = p.segments.first().map(|s| s.ident.span());
    let last = p.segments.last().map(|s| s.ident.span());
    match (first, last) {
        (Some(f), Some(l)) => f.join(l).unwrap_or(f),
        _ => Span::call_site(),
    }
}

/// `label: part`, then `x copies` for a staging region.
pub struct NamedTile {
    pub label: Ident,
    pub tile: Part<TileDecl>,
    /// `x 2`: the `x`, then the count.
    pub copies: Option<(Ident, Word)>,
}

/// `name = bytes`, then `align n`.
pub struct ScratchItem {
    pub name: Ident,
    pub bytes: Word,
    /// `align 16`: the `align`, then the value.
    pub align: Option<(Ident, Word)>,
}

/// `name = slots readers who`: a work queue (`tiles = 4 readers warpgroups(2)`).
pub struct QueueItem {
    pub name: Ident,
    pub slots: Word,
    /// `readers warpgroups(2)`: the `readers`, then who pops (absent: an error at check).
    pub readers: Option<(Ident, Call)>,
}

/// What a part is, for its parser's messages, and which macros declare one inline.
trait PartKind {
    const WHAT: &'static str;
    const EXAMPLE: &'static str;
    fn accepts(mac: &str) -> bool;
}

impl PartKind for RolesDecl {
    const WHAT: &'static str = "warp roles";
    const EXAMPLE: &'static str = "`GemmRoles` or `tma_warp_roles! { pub GemmRoles, .. }`";
    fn accepts(mac: &str) -> bool {
        mac == "tma_warp_roles"
    }
}

impl PartKind for PipelineDecl {
    const WHAT: &'static str = "pipeline";
    const EXAMPLE: &'static str = "`GemmRing` or `tma_pipeline! { pub GemmRing, .. }`";
    fn accepts(mac: &str) -> bool {
        mac == "tma_pipeline"
    }
}

impl PartKind for TileDecl {
    const WHAT: &'static str = "tile";
    const EXAMPLE: &'static str = "`GemmD` or `tma_2d! { pub GemmD: bf16, .. }`";
    fn accepts(mac: &str) -> bool {
        matches!(mac, "tma_1d" | "tma_2d" | "tma_3d" | "tma_4d" | "tma_5d")
    }
}

impl<D: Parse + PartKind> Parse for Part<D> {
    fn parse(input: ParseStream) -> syn::Result<Self> {
        let fork = input.fork();
        let is_path = fork.call(syn::Path::parse_mod_style).is_ok();
        if !is_path {
            return Err(input.error(format!(
                "expected a {}: {}; found {}",
                D::WHAT,
                D::EXAMPLE,
                found(input)
            )));
        }
        if !fork.peek(Token![!]) {
            return Ok(Part::Path(input.call(syn::Path::parse_mod_style)?));
        }
        let mac: syn::Macro = input.parse()?;
        let name = mac
            .path
            .segments
            .last()
            .map(|s| s.ident.clone())
            .ok_or_else(|| syn::Error::new_spanned(&mac.path, "expected a macro's name"))?;
        let text = name.unraw().to_string();
        if !D::accepts(&text) {
            return Err(syn::Error::new(
                name.span(),
                format!(
                    "`{}!` declares no {}: write {}",
                    shown(&text),
                    D::WHAT,
                    D::EXAMPLE
                ),
            ));
        }
        let decl = mac.parse_body::<D>()?;
        Ok(Part::Inline { mac, name, decl })
    }
}

impl<T: Parse> Parse for Parts<T> {
    fn parse(input: ParseStream) -> syn::Result<Self> {
        if !input.peek(syn::token::Bracket) {
            return Err(input.error(format!("expected a `[..]` list; found {}", found(input))));
        }
        let content;
        let brackets = bracketed!(content in input);
        let items = Punctuated::<T, Token![,]>::parse_terminated(&content)?;
        Ok(Parts {
            span: brackets.span.join(),
            items: items.into_iter().collect(),
        })
    }
}

/// After a part or a value: `word value` (`x 2`, `align 16`), where `word` is expected.
fn suffix(input: ParseStream, word: &str, example: &str) -> syn::Result<Option<(Ident, Word)>> {
    if input.is_empty() || input.peek(Token![,]) {
        return Ok(None);
    }
    if !input.peek(Ident::peek_any) {
        return Err(input.error(format!(
            "expected `,` or `{example}`; found {}",
            found(input)
        )));
    }
    let w = Ident::parse_any(input)?;
    if w.unraw() != word {
        let text = w.unraw().to_string();
        let hint =
            if text.starts_with(word) && text[word.len()..].chars().all(|c| c.is_ascii_digit()) {
                format!("write `{word} {}`, with a space", &text[word.len()..])
            } else {
                format!("expected `,` or `{example}`")
            };
        return Err(syn::Error::new(
            w.span(),
            format!("{hint}; found `{}`", shown(&text)),
        ));
    }
    let value = input.parse()?;
    Ok(Some((w, value)))
}

impl Parse for NamedTile {
    fn parse(input: ParseStream) -> syn::Result<Self> {
        if !input.peek(Ident::peek_any) || !input.peek2(Token![:]) {
            return Err(input.error(format!(
                "expected `name: tile` (`d: GemmD`, `d: tma_2d! {{ .. }} x 2`); found {}",
                found(input)
            )));
        }
        let label = Ident::parse_any(input)?;
        input.parse::<Token![:]>()?;
        let tile = input.parse()?;
        let copies = suffix(input, "x", "x 2")?;
        Ok(NamedTile {
            label,
            tile,
            copies,
        })
    }
}

impl Parse for ScratchItem {
    fn parse(input: ParseStream) -> syn::Result<Self> {
        if !input.peek(Ident::peek_any) || !input.peek2(Token![=]) {
            return Err(input.error(format!(
                "expected `name = bytes` (`counters = 64`, `counters = 64 align 16`); found {}",
                found(input)
            )));
        }
        let name = Ident::parse_any(input)?;
        input.parse::<Token![=]>()?;
        let bytes = input.parse()?;
        let align = suffix(input, "align", "align 16")?;
        Ok(ScratchItem { name, bytes, align })
    }
}

impl Parse for QueueItem {
    fn parse(input: ParseStream) -> syn::Result<Self> {
        if !input.peek(Ident::peek_any) || !input.peek2(Token![=]) {
            return Err(input.error(format!(
                "expected `name = slots readers who` (`tiles = 4 readers warpgroups(2)`); found {}",
                found(input)
            )));
        }
        let name = Ident::parse_any(input)?;
        input.parse::<Token![=]>()?;
        let slots = input.parse()?;
        let readers = if input.is_empty() || input.peek(Token![,]) {
            None
        } else {
            let w = Ident::parse_any(input)?;
            if w.unraw() != "readers" {
                return Err(syn::Error::new(
                    w.span(),
                    format!(
                        "expected `readers warpgroups(n)` (or `warps(n)`, `threads(n)`); found `{}`",
                        shown(&w.unraw().to_string())
                    ),
                ));
            }
            Some((w, input.parse()?))
        };
        Ok(QueueItem {
            name,
            slots,
            readers,
        })
    }
}

/// Skips an unknown key's value: every token up to the next `,` at this level.
fn skip_value(input: ParseStream) -> syn::Result<Span> {
    let start = input.span();
    input.step(|cursor| {
        let mut rest = *cursor;
        while let Some((tt, next)) = rest.token_tree() {
            if matches!(&tt, TokenTree::Punct(p) if p.as_char() == ',') {
                break;
            }
            rest = next;
        }
        Ok(((), rest))
    })?;
    Ok(start)
}

impl Parse for KernelEntry {
    fn parse(input: ParseStream) -> syn::Result<Self> {
        if !input.peek(Ident::peek_any) {
            return Err(input.error(format!(
                "expected a key (`pipelines = [..]`, `staging = [..]`, ..); found {}",
                found(input)
            )));
        }
        let key = Ident::parse_any(input)?;
        if !input.peek(Token![=]) {
            return Ok(KernelEntry { key, value: None });
        }
        input.parse::<Token![=]>()?;
        let k = key.unraw().to_string();
        let in_key = |e: syn::Error| {
            let mut all: Option<syn::Error> = None;
            for one in e {
                let one = syn::Error::new(one.span(), format!("`{}`: {one}", shown(&k)));
                match &mut all {
                    Some(a) => a.combine(one),
                    None => all = Some(one),
                }
            }
            all.unwrap_or_else(|| {
                syn::Error::new(key.span(), format!("`{}`: a bad value", shown(&k)))
            })
        };
        let value = match k.as_str() {
            "roles" => KernelValue::Roles(Box::new(input.parse().map_err(in_key)?)),
            "pipelines" => KernelValue::Pipelines(input.parse().map_err(in_key)?),
            "tiles" | "staging" => KernelValue::Tiles(input.parse().map_err(in_key)?),
            "scratch" => KernelValue::Scratch(input.parse().map_err(in_key)?),
            "work_queues" => KernelValue::Queues(input.parse().map_err(in_key)?),
            "name" | "target" | "block_threads" | "cluster" | "blocks_per_sm" => {
                KernelValue::Value(input.parse().map_err(in_key)?)
            }
            _ => KernelValue::Other(skip_value(input)?),
        };
        Ok(KernelEntry {
            key,
            value: Some(value),
        })
    }
}

impl Parse for KernelDecl {
    fn parse(input: ParseStream) -> syn::Result<Self> {
        Ok(KernelDecl {
            header: input.parse()?,
            entries: super::after_header(input)?,
        })
    }
}
