//! Syntax only: the token shapes of a tile declaration, no meaning attached.
//!
//! ```text
//! tma_3d! {
//!     /// docs and attributes go on the generated type
//!     pub DeformValue: f16,
//!     global = [H = 94, W = 162, C = 32],
//!     boxed = [2, 2, 32],
//!     swizzle = none,
//! }
//! #[tma(dtype = bf16, global = [S = _, D = 64], boxed = [128, 64], swizzle = 128, load)]
//! ```
//!
//! Both forms are a list of entries `key = value` or bare flags `key`; [`crate::check`]
//! gives them meaning, so every unknown key or bad value is reported with its span.
//! For the derive, [`tiles_struct`] reads the `#[tma(..)]` attribute of each field.

use proc_macro2::Span;
use syn::ext::IdentExt;
use syn::parse::{Parse, ParseStream};
use syn::punctuated::Punctuated;
use syn::{
    bracketed, Attribute, Data, DataStruct, DeriveInput, Fields, Ident, LitInt, LitStr, Token,
    Visibility,
};

/// A `tma_Nd!` invocation.
pub struct TileDecl {
    pub attrs: Vec<Attribute>,
    pub vis: Visibility,
    pub ident: Ident,
    pub dtype: Word,
    pub entries: Vec<Entry>,
}

/// `key = value` or a bare flag `key`. A pipeline's entries take its own values
/// ([`PipeEntry`]).
pub struct Entry<V = Value> {
    pub key: Ident,
    pub value: Option<V>,
}

pub enum Value {
    List(List),
    Word(Word),
}

/// `[a, b, c]` or `[H = a, W = b, C = c]`.
pub struct List {
    /// The whole bracketed list.
    pub span: Span,
    pub items: Vec<Item>,
}

/// One list element: an optional dim name and a value.
pub struct Item {
    pub name: Option<Ident>,
    pub value: Word,
}

/// A single value token.
#[derive(Clone)]
pub enum Word {
    Ident(Ident),
    Int(LitInt),
    Str(LitStr),
    /// `_`: given at run time.
    Underscore(Token![_]),
}

impl Word {
    pub fn span(&self) -> Span {
        match self {
            Word::Ident(i) => i.span(),
            Word::Int(l) => l.span(),
            Word::Str(s) => s.span(),
            Word::Underscore(u) => u.span,
        }
    }

    /// The value as text: identifiers and integer literals (suffix included, so
    /// `128b_atom_32b` reads as written) and string contents.
    pub fn text(&self) -> String {
        match self {
            Word::Ident(i) => i.unraw().to_string(),
            Word::Int(l) => l.to_string(),
            Word::Str(s) => s.value(),
            Word::Underscore(_) => "_".into(),
        }
    }
}

impl Value {
    pub fn span(&self) -> Span {
        match self {
            Value::List(l) => l.span,
            Value::Word(w) => w.span(),
        }
    }
}

impl Parse for Word {
    fn parse(input: ParseStream) -> syn::Result<Self> {
        let look = input.lookahead1();
        if look.peek(Token![_]) {
            Ok(Word::Underscore(input.parse()?))
        } else if look.peek(LitInt) {
            Ok(Word::Int(input.parse()?))
        } else if look.peek(LitStr) {
            Ok(Word::Str(input.parse()?))
        } else if look.peek(Ident::peek_any) {
            Ok(Word::Ident(Ident::parse_any(input)?))
        } else {
            Err(look.error())
        }
    }
}

impl Parse for Item {
    fn parse(input: ParseStream) -> syn::Result<Self> {
        let name = if input.peek(Ident) && input.peek2(Token![=]) {
            let name: Ident = input.parse()?;
            input.parse::<Token![=]>()?;
            Some(name)
        } else {
            None
        };
        Ok(Item {
            name,
            value: input.parse()?,
        })
    }
}

impl Parse for Value {
    fn parse(input: ParseStream) -> syn::Result<Self> {
        if input.peek(syn::token::Bracket) {
            let content;
            let bracket = bracketed!(content in input);
            let items = Punctuated::<Item, Token![,]>::parse_terminated(&content)?;
            Ok(Value::List(List {
                span: bracket.span.join(),
                items: items.into_iter().collect(),
            }))
        } else {
            Ok(Value::Word(input.parse()?))
        }
    }
}

impl<V: Parse> Parse for Entry<V> {
    fn parse(input: ParseStream) -> syn::Result<Self> {
        let key = Ident::parse_any(input)?;
        let value = if input.peek(Token![=]) {
            input.parse::<Token![=]>()?;
            Some(input.parse()?)
        } else {
            None
        };
        Ok(Entry { key, value })
    }
}

/// The entries of a `#[tma(...)]` attribute or the body after a tile's header.
pub fn entries<T: Parse>(input: ParseStream) -> syn::Result<Vec<T>> {
    Ok(Punctuated::<T, Token![,]>::parse_terminated(input)?
        .into_iter()
        .collect())
}

/// After a declaration's header: nothing, or a comma and the entries.
fn after_header<T: Parse>(input: ParseStream) -> syn::Result<Vec<T>> {
    if input.is_empty() {
        return Ok(Vec::new());
    }
    input.parse::<Token![,]>()?;
    entries(input)
}

impl Parse for TileDecl {
    fn parse(input: ParseStream) -> syn::Result<Self> {
        let attrs = input.call(Attribute::parse_outer)?;
        let vis = input.parse()?;
        let ident = input.parse()?;
        input.parse::<Token![:]>()?;
        let dtype = input.parse()?;
        let entries = after_header(input)?;
        Ok(TileDecl {
            attrs,
            vis,
            ident,
            dtype,
            entries,
        })
    }
}

/// A `#[derive(TmaTiles)]` struct: its fields that carry `#[tma(..)]`, in field order.
pub struct TilesStruct<'a> {
    pub ident: &'a Ident,
    pub fields: Vec<TileField<'a>>,
}

/// One field with a `#[tma(..)]` attribute.
pub struct TileField<'a> {
    pub ident: &'a Ident,
    pub ty: &'a syn::Type,
    /// The first attribute's entries, if it parses.
    pub entries: Option<Vec<Entry>>,
    /// Why the attributes do not read: a second `#[tma(..)]`, a first that does not parse.
    pub error: Option<syn::Error>,
}

/// The `#[tma(..)]` fields of a derive input. Only a non-struct is an error here; a field's
/// own errors stay with it, so the other fields are still checked.
pub fn tiles_struct(input: &DeriveInput) -> syn::Result<TilesStruct<'_>> {
    let Data::Struct(DataStruct {
        fields: Fields::Named(named),
        ..
    }) = &input.data
    else {
        return Err(syn::Error::new(
            input.ident.span(),
            "`TmaTiles` needs a struct with named fields, one `#[tma(..)]` tile per field",
        ));
    };
    let mut fields = Vec::new();
    for field in &named.named {
        let Some(ident) = &field.ident else {
            continue;
        };
        let mut attrs = field.attrs.iter().filter(|a| a.path().is_ident("tma"));
        let Some(first) = attrs.next() else {
            continue;
        };
        let mut error: Option<syn::Error> = None;
        let mut push = |e: syn::Error| match &mut error {
            Some(all) => all.combine(e),
            None => error = Some(e),
        };
        for extra in attrs {
            push(syn::Error::new_spanned(
                extra,
                "one `#[tma(..)]` per field: a field is one tile",
            ));
        }
        let entries = first
            .parse_args_with(entries::<Entry>)
            .map_err(&mut push)
            .ok();
        fields.push(TileField {
            ident,
            ty: &field.ty,
            entries,
            error,
        });
    }
    Ok(TilesStruct {
        ident: &input.ident,
        fields,
    })
}

mod pipeline;
pub use pipeline::{
    Call, Header, PipeEntry, PipeValue, PipelineDecl, RolesDecl, StageMember, TilesBlock,
};
