//! Tile declarations in the macros' own syntax, read with the macros' own parser and checks
//! (`tma_syntax`): the same declarations are accepted, with the same errors at the same tokens.
//!
//! A source holds `tma_1d! { .. }` .. `tma_5d! { .. }` and `tma_im2col! { .. }` invocations
//! (each optionally followed by `;`; `//` comments allowed), or one bare declaration (`A: bf16,
//! global = [..], ..`) whose rank is the length of its `global` list, or one `tma_pipeline! {
//! .. }` (its stage tiles are the source's tiles).

use crate::diag::{Diagnostic, Level, Location, Source};
use proc_macro2::{Delimiter, Span, TokenStream, TokenTree};
use std::cell::Cell;
use std::collections::hash_map::{Entry, HashMap};
use syn::ext::IdentExt;
use tma_core::echo::shown;
use tma_core::pipeline::ValidPipeline;
use tma_syntax::check::im2col::{self as im2col_check, CheckedIm2col};
use tma_syntax::check::{self, Checked};
use tma_syntax::parse::{check_tokens, PipelineDecl, TileDecl, Value, MAX_TEXT_BYTES};

/// One declared tile that passed every rule.
pub struct Tile {
    /// The declared type name (`MpkA`): the kernel's name for the tile in `tma compile`.
    pub ident: String,
    /// Where the type name was written.
    pub span: Span,
    pub checked: Checked,
}

/// One declared im2col tile (`tma_im2col! { .. }`) that passed every rule.
pub struct Im2colTile {
    /// The declared type name (`Act`).
    pub ident: String,
    /// Where the type name was written.
    pub span: Span,
    pub checked: CheckedIm2col,
}

/// What a source declares: its tiles if every one passed, its warnings either way.
pub struct Read {
    pub tiles: Vec<Tile>,
    /// Its `tma_im2col!` tiles, in source order.
    pub im2col: Vec<Im2colTile>,
    pub warnings: Vec<Diagnostic>,
    /// The pipeline a `tma_pipeline!` source declares (its type name and the pipeline).
    pub pipeline: Option<(String, ValidPipeline)>,
}

/// The macro names, by rank.
const MACROS: [&str; 5] = ["tma_1d", "tma_2d", "tma_3d", "tma_4d", "tma_5d"];

/// Every macro a source may invoke, as messages list them.
const ALL_MACROS: &str = "tma_1d, tma_2d, tma_3d, tma_4d, tma_5d, tma_im2col";

/// The most bytes of declaration text one thread may lex (1 GiB, some 1,000 full sources).
/// proc-macro2 keeps every text a thread lexes, to give spans their line and column, and
/// numbers the bytes of all of them in 32 bits: past 4 GiB its positions wrap and locating a
/// span panics (`tma compile` with 4,097 `--tile` files of 1 MiB did). [`read`] refuses a
/// source past this budget instead; [`reset_thread`] starts it over.
pub const MAX_LEXED_BYTES: u64 = 1 << 30;

thread_local! {
    /// Bytes this thread's [`read`] calls have lexed: each text's length and 1, as
    /// proc-macro2 numbers them (it leaves a byte between texts).
    static LEXED: Cell<u64> = const { Cell::new(0) };
}

/// Starts this thread's lexing over: its [`MAX_LEXED_BYTES`] budget and proc-macro2's table
/// of the texts it lexed. For a caller that reads again and again on one thread (a watch mode,
/// a server): call it between independent runs, once nothing of an earlier run's [`Read`]s
/// is used any more, since proc-macro2 panics when a span of a forgotten text is located.
pub fn reset_thread() {
    proc_macro2::extra::invalidate_current_thread_spans();
    LEXED.with(|lexed| lexed.set(0));
}

/// Takes `len` bytes of this thread's [`MAX_LEXED_BYTES`]; `Err` with the bytes already
/// lexed when they do not fit.
fn take_lexed(len: usize) -> Result<(), u64> {
    LEXED.with(|lexed| {
        let before = lexed.get();
        let after = before.saturating_add(u64::try_from(len).unwrap_or(u64::MAX).saturating_add(1));
        if after > MAX_LEXED_BYTES {
            return Err(before);
        }
        lexed.set(after);
        Ok(())
    })
}

/// Reads every declaration of `source`. `Err`: every error found (a declaration's errors do not
/// stop the others from being checked). Untrusted text is bounded before it is parsed: at most
/// [`MAX_TEXT_BYTES`] bytes, [`tma_syntax::parse::MAX_TOKENS`] tokens, nested at most
/// [`tma_syntax::parse::MAX_NESTING`] deep (syn's parser recurses per nested bracket), and at
/// most [`MAX_LEXED_BYTES`] lexed by one thread in all.
pub fn read(source: &Source) -> Result<Read, Vec<Diagnostic>> {
    if source.text.len() > MAX_TEXT_BYTES {
        return Err(vec![too_long(
            &source.name,
            source.locate_byte(MAX_TEXT_BYTES),
        )]);
    }
    if let Err(lexed) = take_lexed(source.text.len()) {
        return Err(vec![Diagnostic::error(format!(
            "{}: {} more bytes of declarations would pass the {MAX_LEXED_BYTES} one thread may read \
             (tma_cli::decl::MAX_LEXED_BYTES; {lexed} read so far): give fewer or smaller sources, \
             or start the thread over between runs (tma_cli::decl::reset_thread)",
            source.name,
            source.text.len()
        ))]);
    }
    let tokens: TokenStream = match source.text.parse() {
        Ok(t) => t,
        Err(e) => {
            let at = source.locate(e.span());
            return Err(vec![Diagnostic {
                level: Level::Error,
                message: lex_error(source.text.lines().nth(at.line - 1).unwrap_or(""), &at),
                at: Some(at),
            }]);
        }
    };
    check_tokens(&tokens).map_err(|e| source.errors(e))?;
    if let Some(body) = pipeline_body(&tokens) {
        return read_pipeline(source, body);
    }
    let decls = if tokens.is_empty() {
        Vec::new()
    } else {
        split(source, tokens)?
    };
    if decls.is_empty() {
        return Err(vec![Diagnostic::error(format!(
            "{}: no tile declaration (expected e.g. `tma_2d! {{ A: bf16, global = [M = 4096, K = 1024], boxed = [64, 64] }}`)",
            source.name
        ))]);
    }
    let mut errors = Vec::new();
    let mut tiles = Vec::new();
    let mut im2col = Vec::new();
    let mut warnings = Vec::new();
    for (kind, decl) in decls {
        let (rank, mac) = match kind {
            Kind::Tiled(rank, mac) => (rank.unwrap_or_else(|| global_len(&decl)), mac),
            Kind::Im2col => {
                match im2col_check::im2col_macro(&decl) {
                    Ok(checked) => {
                        warnings.extend(checked.warnings.iter().map(|(span, msg)| Diagnostic {
                            level: Level::Warning,
                            message: msg.clone(),
                            at: Some(source.locate(*span)),
                        }));
                        im2col.push(Im2colTile {
                            ident: decl.ident.unraw().to_string(),
                            span: decl.ident.span(),
                            checked,
                        });
                    }
                    Err(e) => errors.extend(source.errors(e)),
                }
                continue;
            }
        };
        match check::tile_macro(rank, mac, &decl) {
            Ok(checked) => {
                warnings.extend(checked.warnings.iter().map(|(span, msg)| Diagnostic {
                    level: Level::Warning,
                    message: msg.clone(),
                    at: Some(source.locate(*span)),
                }));
                tiles.push(Tile {
                    ident: decl.ident.unraw().to_string(),
                    span: decl.ident.span(),
                    checked,
                });
            }
            Err(e) => errors.extend(source.errors(e)),
        }
    }
    let named: Vec<Named<'_>> = tiles
        .iter()
        .map(|t| Named::tiled(t, source))
        .chain(im2col.iter().map(|t| Named::im2col(t, source)))
        .collect();
    errors.extend(same_names(&named));
    if errors.is_empty() {
        Ok(Read {
            tiles,
            im2col,
            warnings,
            pipeline: None,
        })
    } else {
        let mut all = warnings;
        all.extend(errors);
        Err(all)
    }
}

/// The body of a source that is one `tma_pipeline! { .. }` (optionally followed by `;`).
fn pipeline_body(tokens: &TokenStream) -> Option<TokenStream> {
    let mut iter = tokens.clone().into_iter();
    match (iter.next(), iter.next(), iter.next()) {
        (Some(TokenTree::Ident(i)), Some(TokenTree::Punct(p)), Some(TokenTree::Group(g)))
            if i == "tma_pipeline" && p.as_char() == '!' =>
        {
            let rest: Vec<TokenTree> = iter.collect();
            let only_semicolons = rest
                .iter()
                .all(|t| matches!(t, TokenTree::Punct(p) if p.as_char() == ';'));
            only_semicolons.then(|| g.stream())
        }
        _ => None,
    }
}

/// A `tma_pipeline!` source: the pipeline's checks (its stage tiles' included), as the macro
/// runs them.
fn read_pipeline(source: &Source, body: TokenStream) -> Result<Read, Vec<Diagnostic>> {
    let decl = syn::parse2::<PipelineDecl>(body).map_err(|e| source.errors(e))?;
    let checked = check::pipeline::pipeline(&decl).map_err(|e| source.errors(e))?;
    let mut warnings = Vec::new();
    let mut tiles = Vec::new();
    for m in checked.members {
        warnings.extend(m.tile.warnings.iter().map(|(span, msg)| Diagnostic {
            level: Level::Warning,
            message: msg.clone(),
            at: Some(source.locate(*span)),
        }));
        tiles.push(Tile {
            ident: m.member.decl.ident.unraw().to_string(),
            span: m.member.decl.ident.span(),
            checked: m.tile,
        });
    }
    Ok(Read {
        tiles,
        im2col: Vec::new(),
        warnings,
        pipeline: Some((decl.header.ident.unraw().to_string(), checked.valid)),
    })
}

/// Which macro a declaration was written with.
enum Kind {
    /// `tma_Nd!` (the rank it promises; none for a bare declaration) and the macro's name.
    Tiled(Option<usize>, &'static str),
    /// `tma_im2col!`.
    Im2col,
}

type Decl = (Kind, TileDecl);

/// The declarations of a source: `tma_Nd! { .. }` invocations, or one bare declaration.
fn split(source: &Source, tokens: TokenStream) -> Result<Vec<Decl>, Vec<Diagnostic>> {
    let starts_with_macro = matches!(
        (tokens.clone().into_iter().next(), tokens.clone().into_iter().nth(1)),
        (Some(TokenTree::Ident(i)), Some(TokenTree::Punct(p))) if i.to_string().starts_with("tma_") && p.as_char() == '!'
    );
    if !starts_with_macro {
        return match syn::parse2::<TileDecl>(tokens) {
            Ok(decl) => Ok(vec![(Kind::Tiled(None, "tma_Nd"), decl)]),
            Err(e) => Err(source.errors(e)),
        };
    }
    let mut out = Vec::new();
    let mut errors = Vec::new();
    let mut iter = tokens.into_iter().peekable();
    while let Some(tt) = iter.next() {
        let TokenTree::Ident(mac) = &tt else {
            if matches!(&tt, TokenTree::Punct(p) if p.as_char() == ';') {
                continue;
            }
            errors.push(at(
                source,
                tt.span(),
                "expected a tile macro: `tma_1d!` .. `tma_5d!` or `tma_im2col!`",
            ));
            break;
        };
        let name = mac.to_string();
        let kind = if name == im2col_check::MACRO {
            Kind::Im2col
        } else if let Some(rank) = MACROS.iter().position(|m| *m == name) {
            Kind::Tiled(Some(rank + 1), MACROS[rank])
        } else if name == "tma_pipeline" {
            // Read as a pipeline only when alone: beside other declarations it is no tile macro,
            // but "unknown macro" would puzzle.
            errors.push(at(
                source,
                mac.span(),
                "a `tma_pipeline! { .. }` source holds the pipeline alone (its stage tiles are the source's tiles): put the other declarations in another source",
            ));
            break;
        } else {
            errors.push(at(
                source,
                mac.span(),
                &format!(
                    "unknown macro `{}`; expected one of: {ALL_MACROS}",
                    shown(&name),
                ),
            ));
            break;
        };
        match iter.next() {
            Some(TokenTree::Punct(p)) if p.as_char() == '!' => {}
            other => {
                let span = other.map_or(mac.span(), |t| t.span());
                errors.push(at(
                    source,
                    span,
                    &format!("expected `!` after `{}`", shown(&name)),
                ));
                break;
            }
        }
        let body = match iter.next() {
            Some(TokenTree::Group(g)) if g.delimiter() != Delimiter::None => g,
            other => {
                let span = other.map_or(mac.span(), |t| t.span());
                errors.push(at(
                    source,
                    span,
                    &format!("expected `{}! {{ .. }}`", shown(&name)),
                ));
                break;
            }
        };
        match syn::parse2::<TileDecl>(body.stream()) {
            Ok(decl) => out.push((kind, decl)),
            Err(e) => errors.extend(source.errors(e)),
        }
    }
    if errors.is_empty() {
        Ok(out)
    } else {
        Err(errors)
    }
}

fn at(source: &Source, span: proc_macro2::Span, message: &str) -> Diagnostic {
    Diagnostic {
        level: Level::Error,
        message: message.to_string(),
        at: Some(source.locate(span)),
    }
}

/// A bare declaration's rank: its `global` list's length (the checks report a missing one).
fn global_len(decl: &TileDecl) -> usize {
    decl.entries
        .iter()
        .find(|e| e.key.unraw() == "global")
        .and_then(|e| match &e.value {
            Some(Value::List(l)) => Some(l.items.len()),
            _ => None,
        })
        .unwrap_or(1)
}

/// A declaration text over [`MAX_TEXT_BYTES`], at the first byte past the limit.
pub fn too_long(name: &str, at: Location) -> Diagnostic {
    Diagnostic {
        level: Level::Error,
        message: format!(
            "{name} is longer than {MAX_TEXT_BYTES} bytes, the most a declaration source may hold (tma_syntax::parse::MAX_TEXT_BYTES)"
        ),
        at: Some(at),
    }
}

/// What a lexing error at `at` is, from the character there (`line` is its line's text).
fn lex_error(line: &str, at: &Location) -> String {
    let c = line.chars().nth(at.column.saturating_sub(1));
    match c {
        Some(c @ (')' | ']' | '}')) => format!("not valid tokens: `{c}` closes nothing open"),
        Some(c @ ('(' | '[' | '{')) => format!("not valid tokens: `{c}` is never closed"),
        Some(c @ ('"' | '\'')) => format!("not valid tokens: a `{c}` literal is never closed"),
        Some('/') => "not valid tokens: a `/* .. */` comment is never closed".into(),
        Some(c) if c.is_ascii_digit() => {
            // A number the lexer refuses: `0x` (a radix prefix with no digits), `0b2`.
            let number: String = line
                .chars()
                .skip(at.column.saturating_sub(1))
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .take(64)
                .collect();
            format!(
                "not valid tokens: `{}` is no Rust number (a radix prefix `0x`, `0o` or `0b` needs digits of its radix)",
                number.escape_debug()
            )
        }
        Some(c) => format!(
            "not valid tokens: `{}` starts no Rust token",
            c.escape_debug()
        ),
        None => "not valid tokens: the text ends inside a bracket, string or comment".into(),
    }
}

/// A tile's name, where its type was written, and the source it was read from: what
/// [`same_names`] compares, tiled and im2col tiles alike (both are `struct tma_<name>`).
pub struct Named<'a> {
    pub name: &'a str,
    pub span: Span,
    pub source: &'a Source,
}

impl<'a> Named<'a> {
    pub fn tiled(t: &'a Tile, source: &'a Source) -> Named<'a> {
        Named {
            name: &t.checked.valid.spec().name,
            span: t.span,
            source,
        }
    }
    pub fn im2col(t: &'a Im2colTile, source: &'a Source) -> Named<'a> {
        Named {
            name: &t.checked.valid.spec().name,
            span: t.span,
            source,
        }
    }
}

/// Two tiles of one header or kernel may not share a name (their structs would collide):
/// each repeat is an error at its type name, with a note of where the first one is.
pub fn same_names(tiles: &[Named<'_>]) -> Vec<Diagnostic> {
    let mut out = Vec::new();
    // Each name's first tile, so 10,000 tiles take 10,000 lookups, not 50 million comparisons.
    let mut firsts: HashMap<&str, &Named<'_>> = HashMap::with_capacity(tiles.len());
    for t in tiles {
        let (name, src) = (t.name, t.source);
        let first = match firsts.entry(name) {
            Entry::Occupied(o) => Some(*o.get()),
            Entry::Vacant(v) => {
                v.insert(t);
                None
            }
        };
        if let Some(o) = first {
            let was = o.source.locate(o.span);
            out.push(Diagnostic {
                level: Level::Error,
                message: format!(
                    "two tiles are named `{}`: tile names name CUDA structs and must differ (give one `name = \"..\"`)\nnote: the first is declared at {}:{}:{}",
                    shown(name),
                    was.file,
                    was.line,
                    was.column
                ),
                at: Some(src.locate(t.span)),
            });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn source(text: &str) -> Source {
        Source {
            name: "t.tma".into(),
            text: text.to_string(),
        }
    }

    const TILE: &str = "tma_1d! { A: u8, global = [64], boxed = [64] }";

    /// Every read counts its text (and the byte proc-macro2 leaves after it) against the
    /// thread's budget; a source past the budget is refused by name, before it is lexed, and
    /// the budget is not spent on it. (Past 4 GiB proc-macro2's positions wrap: locating a
    /// span then panicked.)
    #[test]
    fn lexing_is_bounded_per_thread() {
        let before = LEXED.with(Cell::get);
        assert!(read(&source(TILE)).is_ok());
        assert_eq!(LEXED.with(Cell::get), before + TILE.len() as u64 + 1);

        LEXED.with(|l| l.set(MAX_LEXED_BYTES - TILE.len() as u64));
        let diags = read(&source(TILE)).err().unwrap();
        assert_eq!(diags.len(), 1, "{diags:?}");
        let m = &diags[0].message;
        assert!(
            m.starts_with("t.tma: ")
                && m.contains("MAX_LEXED_BYTES")
                && m.contains(&MAX_LEXED_BYTES.to_string()),
            "{m}"
        );
        assert_eq!(LEXED.with(Cell::get), MAX_LEXED_BYTES - TILE.len() as u64);
        // Exactly at the budget is still read.
        LEXED.with(|l| l.set(MAX_LEXED_BYTES - TILE.len() as u64 - 1));
        assert!(read(&source(TILE)).is_ok());
        assert_eq!(LEXED.with(Cell::get), MAX_LEXED_BYTES);
        // Started over, the thread reads again, and its new spans locate.
        assert!(read(&source(TILE)).is_err());
        reset_thread();
        let again = read(&source(TILE)).unwrap();
        assert_eq!(LEXED.with(Cell::get), TILE.len() as u64 + 1);
        assert_eq!(again.tiles.len(), 1);
    }
}
