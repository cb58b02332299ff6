//! Syntax only: the token shapes of a pipeline and of warp roles, no meaning attached.
//!
//! ```text
//! tma_pipeline! {
//!     /// docs and attributes go on the generated type
//!     pub GemmRing,
//!     stages = 4,
//!     consumers = warpgroups(2),          // threads(n) | warps(n) | warpgroups(n)
//!     cluster = [2, 1, 1],
//!     reserve_smem = 32768,
//!     in_turn = false,                    // true: each stage taken by one consumer (ping-pong)
//!     tiles = {
//!         a: tma_2d! { pub GemmA: bf16, global = [M = _, K = _], boxed = [128, 64], swizzle = 128 },
//!         b: tma_2d! { pub GemmB: bf16, global = [N = _, K = _], boxed = [128, 64], swizzle = 128,
//!                      repeat = [2, 1] } multicast(x),
//!     },
//! }
//! tma_warp_roles! {
//!     pub GemmRoles,
//!     producer_regs = 40, consumer_warpgroups = 2, consumer_regs = 232,
//!     barriers = [epilogue = 256, epi = per_consumer(128)],
//! }
//! tma_warp_roles! {
//!     pub EpiRoles,
//!     producer_warps = 1, consumer_warps = 4,     // no setmaxnreg
//!     barriers = [slice = per_consumer(32)],
//! }
//! ```
//!
//! A pipeline's entries are `key = value` where a value is a word, a list, a call
//! `f(args)` or a block of stage tiles; each stage tile's body is a [`TileDecl`], the tile
//! macros' own syntax. Warp roles' entries are a word or a list of `name = value` items, a
//! value a word or a call (`per_consumer(128)`). [`crate::check::pipeline`] gives them
//! meaning.

use super::{after_header, Entry, TileDecl, Value, Word};
use proc_macro2::Span;
use syn::ext::IdentExt;
use syn::parse::{Parse, ParseStream};
use syn::punctuated::Punctuated;
use syn::{braced, bracketed, parenthesized, Attribute, Ident, Token, Visibility};

/// The header both macros share: attributes, visibility, the type's name.
pub struct Header {
    pub attrs: Vec<Attribute>,
    pub vis: Visibility,
    pub ident: Ident,
}

impl Parse for Header {
    fn parse(input: ParseStream) -> syn::Result<Self> {
        Ok(Header {
            attrs: input.call(super::outer_attributes)?,
            vis: input.parse()?,
            ident: super::type_name(input, "declaration")?,
        })
    }
}

/// A `tma_pipeline!` invocation.
pub struct PipelineDecl {
    pub header: Header,
    pub entries: Vec<PipeEntry>,
}

/// `key = value` or a bare `key` (always an error, reported with the key's span).
pub type PipeEntry = Entry<PipeValue>;

pub enum PipeValue {
    /// A word or a list.
    Value(Value),
    /// `warpgroups(2)`.
    Call(Call),
    /// `{ member: tma_Nd! { .. } modifiers, .. }`.
    Tiles(TilesBlock),
}

impl PipeValue {
    pub fn span(&self) -> Span {
        match self {
            PipeValue::Value(v) => v.span(),
            PipeValue::Call(c) => c.span,
            PipeValue::Tiles(t) => t.span,
        }
    }
}

/// `name(arg, ..)`.
pub struct Call {
    pub func: Ident,
    pub args: Vec<Word>,
    /// From the name to the closing parenthesis.
    pub span: Span,
}

/// The braces of `tiles = { .. }` and the stage tiles in them, in order.
pub struct TilesBlock {
    pub span: Span,
    pub members: Vec<StageMember>,
}

/// `a: tma_2d! { .. } multicast(x)`.
pub struct StageMember {
    pub member: Ident,
    /// The macro's name as written (`tma_2d`), its last path segment.
    pub mac: Ident,
    pub decl: TileDecl,
    /// What follows the macro: `multicast(x)`.
    pub modifiers: Vec<Call>,
}

impl Parse for Call {
    fn parse(input: ParseStream) -> syn::Result<Self> {
        let func = Ident::parse_any(input)?;
        let content;
        let parens = parenthesized!(content in input);
        let args = Punctuated::<Word, Token![,]>::parse_terminated(&content)?;
        Ok(Call {
            span: func.span().join(parens.span.close()).unwrap_or(func.span()),
            func,
            args: args.into_iter().collect(),
        })
    }
}

impl Parse for StageMember {
    fn parse(input: ParseStream) -> syn::Result<Self> {
        let member = Ident::parse_any(input)?;
        input.parse::<Token![:]>()?;
        let mac: syn::Macro = input.parse()?;
        let name = mac
            .path
            .segments
            .last()
            .map(|s| s.ident.clone())
            .ok_or_else(|| syn::Error::new_spanned(&mac.path, "expected `tma_Nd! { .. }`"))?;
        let decl = mac.parse_body::<TileDecl>()?;
        let mut modifiers = Vec::new();
        while !input.is_empty() && !input.peek(Token![,]) {
            modifiers.push(input.parse()?);
        }
        Ok(StageMember {
            member,
            mac: name,
            decl,
            modifiers,
        })
    }
}

impl Parse for PipeValue {
    fn parse(input: ParseStream) -> syn::Result<Self> {
        if input.peek(syn::token::Brace) {
            let content;
            let braces = braced!(content in input);
            let members = Punctuated::<StageMember, Token![,]>::parse_terminated(&content)?;
            Ok(PipeValue::Tiles(TilesBlock {
                span: braces.span.join(),
                members: members.into_iter().collect(),
            }))
        } else if input.peek(Ident::peek_any) && input.peek2(syn::token::Paren) {
            Ok(PipeValue::Call(input.parse()?))
        } else {
            Ok(PipeValue::Value(input.parse()?))
        }
    }
}

impl Parse for PipelineDecl {
    fn parse(input: ParseStream) -> syn::Result<Self> {
        Ok(PipelineDecl {
            header: input.parse()?,
            entries: after_header(input)?,
        })
    }
}

/// A `tma_warp_roles!` invocation.
pub struct RolesDecl {
    pub header: Header,
    pub entries: Vec<RolesEntry>,
}

/// `key = value` or a bare `key` (always an error, reported with the key's span).
pub type RolesEntry = Entry<RolesValue>;

/// A warp-roles value: a word, or a list (`barriers = [epilogue = 256, ..]`).
pub enum RolesValue {
    Word(Word),
    List(RolesList),
}

impl RolesValue {
    pub fn span(&self) -> Span {
        match self {
            RolesValue::Word(w) => w.span(),
            RolesValue::List(l) => l.span,
        }
    }
}

/// `[a = 256, b = per_consumer(128)]`.
pub struct RolesList {
    /// The whole bracketed list.
    pub span: Span,
    pub items: Vec<RolesItem>,
}

/// One list item: an optional name and a word or a call.
pub struct RolesItem {
    pub name: Option<Ident>,
    pub value: RolesItemValue,
}

pub enum RolesItemValue {
    Word(Word),
    /// `per_consumer(128)`.
    Call(Call),
}

impl RolesItemValue {
    pub fn span(&self) -> Span {
        match self {
            RolesItemValue::Word(w) => w.span(),
            RolesItemValue::Call(c) => c.span,
        }
    }
}

impl Parse for RolesItem {
    fn parse(input: ParseStream) -> syn::Result<Self> {
        let name = if input.peek(Ident::peek_any) && input.peek2(Token![=]) {
            let name = Ident::parse_any(input)?;
            input.parse::<Token![=]>()?;
            Some(name)
        } else {
            None
        };
        let value = if input.peek(Ident::peek_any) && input.peek2(syn::token::Paren) {
            RolesItemValue::Call(input.parse()?)
        } else {
            RolesItemValue::Word(input.parse()?)
        };
        Ok(RolesItem { name, value })
    }
}

impl Parse for RolesValue {
    fn parse(input: ParseStream) -> syn::Result<Self> {
        if input.peek(syn::token::Bracket) {
            let content;
            let bracket = bracketed!(content in input);
            let items = Punctuated::<RolesItem, Token![,]>::parse_terminated(&content)?;
            Ok(RolesValue::List(RolesList {
                span: bracket.span.join(),
                items: items.into_iter().collect(),
            }))
        } else {
            Ok(RolesValue::Word(input.parse()?))
        }
    }
}

impl Parse for RolesDecl {
    fn parse(input: ParseStream) -> syn::Result<Self> {
        Ok(RolesDecl {
            header: input.parse()?,
            entries: after_header(input)?,
        })
    }
}
