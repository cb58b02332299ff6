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

use proc_macro2::{Delimiter, Span, TokenTree};
use syn::ext::IdentExt;
use syn::parse::{Parse, ParseStream};
use syn::punctuated::Punctuated;
use syn::{
    bracketed, Attribute, Data, DataStruct, DeriveInput, Fields, Ident, LitInt, LitStr, Token,
    Visibility,
};
use tma_core::echo::shown;

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
        if input.peek(Token![_]) {
            Ok(Word::Underscore(input.parse()?))
        } else if input.peek(LitInt) || (input.peek(Token![-]) && input.peek2(LitInt)) {
            // `-1`: syn reads the sign into the literal (an im2col corner); keys that take
            // unsigned values refuse it by name.
            Ok(Word::Int(input.parse()?))
        } else if input.peek(LitStr) {
            Ok(Word::Str(input.parse()?))
        } else if input.peek(Ident::peek_any) {
            Ok(Word::Ident(Ident::parse_any(input)?))
        } else {
            Err(input.error(format!(
                "expected an integer, `_`, a name or a string; found {}",
                found(input)
            )))
        }
    }
}

/// The next token as an error message names it: "the float literal `64.0`", "`-`", "a
/// `[..]` list", "the end of the input". User text is cut ([`tma_core::echo::shown`]).
pub fn found(input: ParseStream) -> String {
    let Some((tt, _)) = input.cursor().token_tree() else {
        return "the end of the input".into();
    };
    match tt {
        TokenTree::Literal(lit) => {
            let text = shown(&lit.to_string());
            let kind = match syn::Lit::new(lit) {
                syn::Lit::Float(_) => "the float literal",
                syn::Lit::Int(_) => "the integer literal",
                syn::Lit::Str(_) => "the string",
                syn::Lit::ByteStr(_) | syn::Lit::CStr(_) => "the byte string",
                syn::Lit::Byte(_) | syn::Lit::Char(_) => "the character literal",
                _ => "the literal",
            };
            format!("{kind} `{text}`")
        }
        TokenTree::Ident(i) => format!("`{}`", shown(&i.to_string())),
        TokenTree::Punct(p) => format!("`{}`", p.as_char()),
        TokenTree::Group(g) => match g.delimiter() {
            Delimiter::Bracket => "a `[..]` list".into(),
            Delimiter::Brace => "a `{..}` block".into(),
            Delimiter::Parenthesis => "a `(..)` group".into(),
            Delimiter::None => "a group".into(),
        },
    }
}

impl Parse for Item {
    fn parse(input: ParseStream) -> syn::Result<Self> {
        let named = input.peek(Ident::peek_any) && !input.peek(Token![_]) && input.peek2(Token![=]);
        let name = if named {
            // A keyword (`fn = 64`) is no name to Rust: say so, not "expected `,`".
            if !input.peek(Ident) {
                let kw = Ident::parse_any(input)?;
                return Err(syn::Error::new(
                    kw.span(),
                    format!(
                        "the dim name `{kw}` is a Rust keyword: write `r#{kw} = ..` (the dim is then named `{kw}`), or another name"
                    ),
                ));
            }
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
        if !input.peek(Ident::peek_any) {
            return Err(input.error(format!(
                "expected a key (`global = [..]`, `boxed = [..]`, ..); found {}",
                found(input)
            )));
        }
        let key = Ident::parse_any(input)?;
        let value = if input.peek(Token![=]) {
            input.parse::<Token![=]>()?;
            // The value's own error names what was found; this names whose value it is.
            Some(input.parse().map_err(|e| in_field(&key, e))?)
        } else {
            None
        };
        Ok(Entry { key, value })
    }
}

/// `e` with the key whose value it is about: "`boxed`: expected an integer, ..".
fn in_field(key: &Ident, e: syn::Error) -> syn::Error {
    let name = shown(&key.unraw().to_string());
    let mut parts = e
        .into_iter()
        .map(|one| syn::Error::new(one.span(), format!("`{name}`: {one}")));
    let Some(mut all) = parts.next() else {
        return syn::Error::new(key.span(), format!("`{name}`: a bad value"));
    };
    for one in parts {
        all.combine(one);
    }
    all
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
        let attrs = input.call(outer_attributes)?;
        let vis = input.parse()?;
        let ident = type_name(input, "tile")?;
        if !input.peek(Token![:]) {
            let name = shown(&ident.unraw().to_string());
            return Err(input.error(format!(
                "expected `:` and the dtype after the tile's name (`{name}: bf16, ..`); found {}",
                found(input)
            )));
        }
        input.parse::<Token![:]>()?;
        let dtype = input
            .parse()
            .map_err(|e: syn::Error| syn::Error::new(e.span(), format!("the dtype: {e}")))?;
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

/// The most tokens one attribute of a declaration may hold, brackets and nested groups
/// included (`#[doc = ".."]` holds 4, a `#[derive(..)]` of a dozen traits some 30). syn
/// parses an attribute's value (`#[doc = ..]`) as an expression and recurses once per prefix
/// operator: `#[doc = || || .. 1]` with 5,000 closures, 10,000 tokens nested nowhere,
/// overflowed the stack of `tma header` (an abort, not an error).
pub const MAX_ATTRIBUTE_TOKENS: usize = 128;

/// `#[..]` attributes before a declaration (`Attribute::parse_outer`), each refused at its
/// `#` when it holds more than [`MAX_ATTRIBUTE_TOKENS`] tokens, before syn parses it.
pub(crate) fn outer_attributes(input: ParseStream) -> syn::Result<Vec<Attribute>> {
    let mut cursor = input.cursor();
    while let Some((TokenTree::Punct(hash), next)) = cursor.token_tree() {
        if hash.as_char() != '#' {
            break;
        }
        let Some((TokenTree::Group(group), after)) = next.token_tree() else {
            break;
        };
        let mut count = 1usize;
        let mut stack = vec![group.stream().into_iter()];
        while let Some(top) = stack.last_mut() {
            match top.next() {
                None => {
                    stack.pop();
                }
                Some(tt) => {
                    count += 1;
                    if let TokenTree::Group(g) = tt {
                        stack.push(g.stream().into_iter());
                    }
                }
            }
            if count > MAX_ATTRIBUTE_TOKENS {
                return Err(syn::Error::new(
                    hash.span(),
                    format!(
                        "this attribute holds more than {MAX_ATTRIBUTE_TOKENS} tokens (tma_syntax::parse::MAX_ATTRIBUTE_TOKENS): an attribute of a declaration is a doc comment or a short `#[..]`"
                    ),
                ));
            }
        }
        cursor = after;
    }
    input.call(Attribute::parse_outer)
}

/// The type a declaration names (`pub GemmA`): a Rust identifier, no keyword.
pub(crate) fn type_name(input: ParseStream, what: &str) -> syn::Result<Ident> {
    if input.peek(Ident) {
        return input.parse();
    }
    if input.peek(Ident::peek_any) && !input.peek(Token![_]) {
        let kw = Ident::parse_any(input)?;
        return Err(syn::Error::new(
            kw.span(),
            format!(
                "the {what}'s type name `{kw}` is a Rust keyword: write `r#{kw}`, or another name"
            ),
        ));
    }
    Err(input.error(format!(
        "expected the {what}'s type name (`pub Name: ..`); found {}",
        found(input)
    )))
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

mod kernel;
mod limits;
mod pipeline;
pub use kernel::{
    path_span, KernelDecl, KernelEntry, KernelValue, NamedTile, Part, Parts, QueueItem, ScratchItem,
};
pub use limits::{check_tokens, parse_bounded, MAX_NESTING, MAX_TEXT_BYTES, MAX_TOKENS};
pub use pipeline::{
    Call, Header, PipeEntry, PipeValue, PipelineDecl, RolesDecl, RolesEntry, RolesItem,
    RolesItemValue, RolesList, RolesValue, StageMember, TilesBlock,
};
