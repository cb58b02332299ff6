//! Limits on untrusted declaration text, checked before syn is handed the tokens: syn's
//! parser (and its token buffer) recurse once per nested group, so a file of 100,000 nested
//! brackets would overflow the stack (an abort, not an error). [`check_tokens`] walks the
//! tokens without recursing and refuses, at the offending token, a group nested deeper than
//! [`MAX_NESTING`] or more than [`MAX_TOKENS`] tokens; [`parse_bounded`] checks, then parses.
//! The command line also caps a declaration's text at [`MAX_TEXT_BYTES`] before it lexes it.

use proc_macro2::{TokenStream, TokenTree};
use syn::parse::Parse;

/// The deepest nesting of brackets, braces and parentheses a declaration may have. The
/// deepest a declaration needs is a pipeline's: `tma_pipeline! { tiles = { a: tma_2d! {
/// global = [..] } } }` nests 4 deep (attributes may nest more; 32 leaves them room).
pub const MAX_NESTING: usize = 32;

/// The most tokens one declaration source (a macro's input, a `.tma` file) may hold: a tile
/// takes about 30, so this is some 2,000 tiles.
pub const MAX_TOKENS: usize = 1 << 16;

/// The most bytes of declaration text the command line reads (a `.tma` file, an argument,
/// standard input): 1 MiB.
pub const MAX_TEXT_BYTES: usize = 1 << 20;

/// Refuses `tokens` nested deeper than [`MAX_NESTING`] (at the opening delimiter of the first
/// group too deep) or longer than [`MAX_TOKENS`] (at the first token past the limit). Walks
/// the tree with a stack of its own, so any depth is safe to check.
pub fn check_tokens(tokens: &TokenStream) -> syn::Result<()> {
    let mut stack = vec![tokens.clone().into_iter()];
    let mut count = 0usize;
    while let Some(top) = stack.last_mut() {
        let Some(tt) = top.next() else {
            stack.pop();
            continue;
        };
        count += 1;
        if count > MAX_TOKENS {
            return Err(syn::Error::new(
                tt.span(),
                format!(
                    "the declaration is too long: more than {MAX_TOKENS} tokens (tma_syntax::parse::MAX_TOKENS); split it"
                ),
            ));
        }
        if let TokenTree::Group(g) = tt {
            // `stack` holds the top level and the groups around `g`: `g` opens level `len`.
            if stack.len() > MAX_NESTING {
                return Err(syn::Error::new(
                    g.span_open(),
                    format!(
                        "brackets nested too deep: more than {MAX_NESTING} levels (tma_syntax::parse::MAX_NESTING); a pipeline's tiles nest 4"
                    ),
                ));
            }
            stack.push(g.stream().into_iter());
        }
    }
    Ok(())
}

/// [`check_tokens`], then `syn::parse2::<T>`: what the macros and the command line parse
/// untrusted tokens with.
pub fn parse_bounded<T: Parse>(tokens: TokenStream) -> syn::Result<T> {
    check_tokens(&tokens)?;
    syn::parse2(tokens)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn nested(depth: usize) -> TokenStream {
        format!("{}{}", "[".repeat(depth), "]".repeat(depth))
            .parse()
            .unwrap()
    }

    #[test]
    fn nesting_up_to_the_limit_passes_deeper_is_refused_at_the_bracket() {
        assert!(check_tokens(&nested(MAX_NESTING)).is_ok());
        let e = check_tokens(&nested(MAX_NESTING + 1)).unwrap_err();
        assert!(e.to_string().contains("nested too deep"), "{e}");
        // The bracket opening level MAX_NESTING + 1 (0-based column MAX_NESTING).
        assert_eq!(e.span().start().column, MAX_NESTING);
        // Far past any stack: refused, no overflow.
        assert!(check_tokens(&nested(200_000)).is_err());
    }

    #[test]
    fn token_count_is_capped() {
        let ok: TokenStream = "a ".repeat(MAX_TOKENS).parse().unwrap();
        assert!(check_tokens(&ok).is_ok());
        let long: TokenStream = "a ".repeat(MAX_TOKENS + 1).parse().unwrap();
        let e = check_tokens(&long).unwrap_err();
        assert!(e.to_string().contains("too long"), "{e}");
        assert_eq!(e.span().start().column, 2 * MAX_TOKENS);
    }
}
