//! Attributes before a declaration are bounded before syn parses them: syn parses an
//! attribute's value as an expression, recursing once per prefix operator.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use tma_syntax::check;
use tma_syntax::parse::{parse_bounded, PipelineDecl, TileDecl, MAX_ATTRIBUTE_TOKENS};

const TILE: &str = "A: u8, global = [64], boxed = [64]";

/// `#[doc = || || .. 1]` with `n` closures: `2n + 4` tokens, counting its brackets.
fn closures(n: usize) -> String {
    format!("#[doc = {}1]", "|| ".repeat(n))
}

/// 5,000 closures overflowed the stack (an abort); now an error at the `#`, naming the limit.
/// The largest attribute allowed parses on a test thread's 2 MiB stack, in a debug build.
#[test]
fn long_attributes_are_refused_before_syn_recurses() {
    for n in [5_000, 30_000] {
        let text = format!("{} {TILE}", closures(n));
        let e = parse_bounded::<TileDecl>(text.parse().unwrap())
            .err()
            .expect("refused");
        assert!(
            e.to_string().starts_with(&format!(
                "this attribute holds more than {MAX_ATTRIBUTE_TOKENS} tokens"
            )),
            "{e}"
        );
        assert_eq!(e.span().start().column, 0);
        // The pipeline's and the other declarations' header, too.
        let pipe = format!(
            "{} pub R, stages = 2, consumers = warps(1), tiles = {{ a: tma_1d! {{ {TILE} }} }}",
            closures(n)
        );
        assert!(parse_bounded::<PipelineDecl>(pipe.parse().unwrap()).is_err());
    }
    let most = (MAX_ATTRIBUTE_TOKENS - 4) / 2;
    let text = format!("/// docs\n#[allow(dead_code)]\n{} {TILE}", closures(most));
    let decl = parse_bounded::<TileDecl>(text.parse().unwrap()).unwrap();
    assert_eq!(decl.attrs.len(), 3);
    assert!(check::tile_macro(1, "tma_1d", &decl).is_ok());
    let text = format!("{} {TILE}", closures(most + 1));
    assert!(parse_bounded::<TileDecl>(text.parse().unwrap()).is_err());
}
