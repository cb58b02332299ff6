//! Property tests of the command line's entry points (`tma_cli::run`, `decl::read`,
//! `header_text`) and of tma-syntax's parse + check, on hostile text, in a debug build (so an
//! arithmetic overflow panics): random bytes, token soup, deep nesting, long names, truncated
//! declarations, huge numbers and every literal suffix. Each asserts no panic (an abort on a
//! stack overflow fails the whole binary), every refusal located, and no bad value accepted.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use proptest::prelude::*;
use tma_cli::diag::{Diagnostic, Level, Source};
use tma_cli::{decl, explain, header_text, run, svg};
use tma_core::Extent;
use tma_syntax::check;
use tma_syntax::parse::{TileDecl, MAX_NESTING};
use tma_test_support::testgen::integer_literals;

fn source(text: &str) -> Source {
    Source {
        name: "p.tma".into(),
        text: text.to_string(),
    }
}

/// Reads `text` as `tma header` would and checks what every refusal must be: errors at a
/// line and column (but for a source with no declaration at all), each message of bounded
/// length whatever the input's size (echoed text is cut).
fn read_checked(text: &str) -> Result<decl::Read, Vec<Diagnostic>> {
    let src = source(text);
    let read = decl::read(&src);
    if let Err(diags) = &read {
        assert!(
            diags.iter().any(|d| d.level == Level::Error),
            "refused without an error: {diags:?}"
        );
        for d in diags {
            let unlocated_ok = d.message.contains("no tile declaration");
            assert!(
                d.at.is_some() || unlocated_ok,
                "an error without line:column: {d:?}"
            );
            for line in d.message.lines() {
                assert!(
                    line.len() <= 600,
                    "a message line of {} bytes: {line:.200}",
                    line.len()
                );
            }
            let shown = d.render();
            assert!(
                shown.len() <= 4_000,
                "a diagnostic of {} bytes",
                shown.len()
            );
        }
    }
    // The header of what was read renders (or is refused) without a panic.
    let _ = header_text(&src, false);
    read
}

/// Pieces of declarations, good and bad.
const FRAGMENTS: &[&str] = &[
    "tma_1d!",
    "tma_2d!",
    "tma_5d!",
    "tma_pipeline!",
    "tma_9d!",
    "{",
    "}",
    "[",
    "]",
    "(",
    ")",
    "=",
    ",",
    ":",
    ";",
    "!",
    "#",
    "-",
    ".",
    "_",
    "A",
    "pub",
    "fn",
    "r#fn",
    "bf16",
    "u8",
    "f32",
    "global",
    "boxed",
    "strides",
    "repeat",
    "element_strides",
    "smem_stride",
    "swizzle",
    "interleave",
    "name",
    "target",
    "mpk_b",
    "wgmma",
    "stages",
    "consumers",
    "warps(1)",
    "cluster",
    "tiles",
    "multicast(x)",
    "0",
    "1",
    "64",
    "128",
    "256u8",
    "70000u16",
    "64.0",
    "1e9",
    "-1",
    "4294967296",
    "99999999999999999999999999",
    "0x40",
    "0b1",
    "1_000",
    "64i32",
    "64usize",
    "64u128",
    "\"a\"",
    "\"a\\nb\"",
    "b\"x\"",
    "'c'",
    "//",
    "/*",
    "*/",
    "\"",
    "sm_90a",
    "none",
    "128b_atom_32b",
    "zero",
    "nan",
    "_",
    "K = _",
    "M = 64",
];

/// A declaration with `lit` in one slot; `slot` picks which. The rest is valid.
fn with_literal(slot: usize, lit: &str) -> String {
    match slot {
        0 => format!("A: u8, global = [{lit}, 256], boxed = [16, 64]"),
        1 => format!("A: u8, global = [4096, 256], boxed = [{lit}, 64]"),
        2 => format!("A: u8, global = [4096, 256], boxed = [16, 64], smem_stride = {lit}"),
        3 => format!("A: u8, global = [4096, 256], boxed = [16, 64], repeat = [{lit}, 1]"),
        _ => format!("A: u8, global = [4096, 256], boxed = [16, 64], element_strides = [{lit}, 1]"),
    }
}

/// The value the spec took for the literal of `with_literal(slot, ..)`.
fn taken(slot: usize, c: &check::Checked) -> Option<u128> {
    let s = c.valid.spec();
    match slot {
        0 => match s.global[0] {
            Extent::Static(v) => Some(u128::from(v)),
            Extent::Runtime => None,
        },
        1 => Some(u128::from(s.boxed[0])),
        2 => s.smem_stride.map(u128::from),
        3 => Some(u128::from(s.repeat[0])),
        _ => Some(u128::from(s.element_strides[0])),
    }
}

/// Valid sources that between them write every key, each with its run-time dims given.
const NEAR_VALID: &[&str] = &[
    "S=4096,stride_S=8192\ntma_3d! { pub Q: bf16, global = [B = 2, S = _, D = 64], boxed = [1, 64, 64], strides = [524288, _, 1], element_strides = [1, 1, 1], repeat = [1, 2, 1], smem_stride = 4096, swizzle = 128, l2_promotion = 128, oob_fill = zero, target = sm_90a, name = \"q\" }",
    "\ntma_2d! { pub A: bf16, global = [ROW = 4096, COL = 1024], boxed = [64, 64], mpk_b = 3, repeat = [1, 2], smem_stride = 4096 }",
    "\ntma_4d! { V: u8, global = [N = 2, C = 8, H = 64, W = 128], boxed = [1, 1, 16, 16], interleave = 32, swizzle = 32, repeat = [1, 1, 2, 1] }",
    "N=8\ntma_im2col! { pub Act: bf16, global = [N = _, H = 56, W = 56, C = 64], channels_per_pixel = 64, pixels_per_column = 128, lower_corner = [-1, -1], upper_corner = [-1, -1], element_strides = [1, 1], swizzle = 128 }",
    "M=4096,K=4096,N=4096\ntma_pipeline! { pub Ring, stages = 4, consumers = warpgroups(2), cluster = [2, 1, 1], reserve_smem = 1024, tiles = { a: tma_2d! { pub GA: bf16, global = [M = _, K = _], boxed = [128, 64], swizzle = 128 }, b: tma_2d! { pub GB: bf16, global = [N = _, K = _], boxed = [64, 64], swizzle = 128, repeat = [2, 1] } multicast(x) } }",
];

/// Boundaries of the fields' types and of the hardware rules.
const BOUNDARIES: &[&str] = &[
    "0",
    "1",
    "2",
    "15",
    "16",
    "17",
    "255",
    "256",
    "257",
    "65535",
    "65536",
    "131072",
    "2147483647",
    "2147483648",
    "4294967295",
    "4294967296",
    "4294967297",
    "1099511627776",
    "9223372036854775807",
    "9223372036854775808",
    "18446744073709551615",
    "18446744073709551616",
    "-1",
    "-2147483648",
    "-2147483649",
    "255u8",
    "256u8",
    "1i32",
];

/// What `boundary_values_in_valid_declarations` edits: each source as written is valid.
#[test]
fn near_valid_sources_are_valid() {
    for text in NEAR_VALID {
        let (_, source) = text.split_once('\n').unwrap();
        if let Err(d) = read_checked(source) {
            panic!("{source}: {d:?}");
        }
    }
}

const SUFFIXES: &[&str] = &[
    "", "u8", "u16", "u32", "u64", "usize", "u128", "i8", "i16", "i32", "i64", "i128", "isize",
    "f32", "f64", "_u8", "x",
];

/// The largest value an unsigned suffix holds; `None` for any other suffix.
fn suffix_max(suffix: &str) -> Option<u128> {
    Some(match suffix.trim_start_matches('_') {
        "" => u128::MAX,
        "u8" => u128::from(u8::MAX),
        "u16" => u128::from(u16::MAX),
        "u32" => u128::from(u32::MAX),
        "u64" => u128::from(u64::MAX),
        "usize" => usize::MAX as u128,
        _ => return None,
    })
}

fn digits() -> impl Strategy<Value = String> {
    prop_oneof![
        (0u64..300).prop_map(|v| v.to_string()),
        (0u64..=70_000).prop_map(|v| v.to_string()),
        any::<u64>().prop_map(|v| v.to_string()),
        any::<u128>().prop_map(|v| v.to_string()),
        "[1-9][0-9]{20,60}",
        Just(u64::MAX.to_string()),
        Just((u128::from(u64::MAX) + 1).to_string()),
        Just("4294967296".to_string()),
        Just("256".to_string()),
        Just("65536".to_string()),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 192,
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    /// Random bytes (as a file's text would reach the parser) never panic.
    #[test]
    fn random_bytes(bytes in proptest::collection::vec(any::<u8>(), 0..600)) {
        let text = String::from_utf8_lossy(&bytes).to_string();
        let _ = read_checked(&text);
    }

    /// Declaration fragments in random order, bare and inside a tile macro.
    #[test]
    fn token_soup(parts in proptest::collection::vec(proptest::sample::select(FRAGMENTS), 0..40), wrap in any::<bool>()) {
        let body = parts.join(" ");
        let text = if wrap { format!("tma_2d! {{ {body} }}") } else { body };
        let _ = read_checked(&text);
    }

    /// Groups nested past the limit are refused at a bracket, whatever the depth (100,000
    /// deep included) and wherever they sit; nesting within the limit never hits it.
    #[test]
    fn nesting(
        depth in prop_oneof![0usize..48, 10_000usize..120_000],
        delim in 0usize..3,
        place in 0usize..3,
    ) {
        let (open, close) = [("[", "]"), ("(", ")"), ("{", "}")][delim];
        let nest = format!("{}{}", open.repeat(depth), close.repeat(depth));
        // Levels around the nest: the macro's braces, then a list's or an attribute's brackets,
        // or the pipeline's `tiles = { .. }`.
        let (text, around) = match place {
            0 => (format!("tma_1d! {{ A: u8, global = [64 {nest}], boxed = [64] }}"), 2),
            1 => (format!("tma_1d! {{ #[doc = \"x\"] #[allow {nest}] A: u8, global = [64], boxed = [64] }}"), 2),
            _ => (format!("tma_pipeline! {{ pub R, stages = 2, consumers = warps(1), tiles = {{ a: tma_1d! {{ A: u8, global = [64], boxed = [64] }} {nest} }} }}"), 2),
        };
        let read = read_checked(&text);
        let too_deep = depth + around > MAX_NESTING;
        let refused_for_depth = matches!(&read, Err(d) if d.iter().any(|d| d.message.contains("nested too deep")));
        prop_assert_eq!(too_deep, refused_for_depth, "depth {} at place {}", depth, place);
    }

    /// An integer literal is taken only when its own suffix holds it and the field's type
    /// does, and then as written; every suffix and huge numbers included. The macros read it
    /// with the same code.
    #[test]
    fn literal_suffixes(slot in 0usize..5, value in digits(), suffix in proptest::sample::select(SUFFIXES)) {
        let lit = format!("{value}{suffix}");
        let text = with_literal(slot, &lit);
        // Text no Rust lexer takes (`0x`: a hex prefix without digits) never reaches a macro:
        // rustc refuses it first. The command line lexes it itself, and must refuse it at a place.
        let lexes = text.parse::<proc_macro2::TokenStream>().is_ok();
        let checked = syn::parse_str::<TileDecl>(&text)
            .and_then(|decl| check::tile_macro(2, "tma_2d", &decl));
        let v: Option<u128> = value.parse().ok();
        match checked {
            Ok(c) => {
                let v = v.expect("a literal of more than 128 bits taken");
                let max = suffix_max(suffix).unwrap_or_else(|| panic!("`{lit}` taken: its suffix is no unsigned integer"));
                prop_assert!(v <= max, "`{}` taken: the suffix holds at most {}", lit, max);
                prop_assert_eq!(taken(slot, &c), Some(v), "`{}` taken as another value", lit);
            }
            Err(e) => {
                // Refused: some message names the literal (or says the spec broke a rule).
                let all: Vec<String> = e.into_iter().map(|e| e.to_string()).collect();
                let digits_shown = tma_core::echo::shown(&value);
                let fits = v.zip(suffix_max(suffix)).is_some_and(|(v, max)| v <= max);
                if !fits && lexes {
                    prop_assert!(
                        all.iter().any(|m| m.contains(&digits_shown) || m.contains(&tma_core::echo::shown(&lit))),
                        "`{}` refused without naming it: {:?}", lit, all
                    );
                }
            }
        }
        // The command line takes it the same way, without a panic (read_checked: every
        // refusal located); what does not lex it refuses.
        let cli = read_checked(&format!("tma_2d! {{ {text} }}"));
        prop_assert!(lexes || cli.is_err(), "`{}` does not lex, yet the command line took it", lit);
    }

    /// Long names and values anywhere: a refusal's messages stay short (echoed text is cut).
    #[test]
    fn long_names(len in prop_oneof![0usize..80, 60usize..5_000], chars in "[a-z_0-9\\-]{1,3}", place in 0usize..6) {
        let name: String = chars.chars().cycle().take(len).collect();
        let text = match place {
            0 => format!("tma_1d! {{ A: u8, global = [64], boxed = [64], name = \"{name}\" }}"),
            1 => format!("tma_1d! {{ A: u8, global = [{name} = 64], boxed = [64] }}"),
            2 => format!("tma_1d! {{ A: u8, global = [64], boxed = [64], {name} = 3 }}"),
            3 => format!("tma_1d! {{ A: {name}, global = [64], boxed = [64] }}"),
            4 => format!("tma_1d! {{ A: u8, global = [64], boxed = [64], swizzle = {name} }}"),
            _ => format!("tma_pipeline! {{ pub R, stages = 2, consumers = warps(1), {name} = 1, tiles = {{ a: tma_1d! {{ A: u8, global = [64], boxed = [64] }} }} }}"),
        };
        let _ = read_checked(&text);
    }

    /// A valid source cut anywhere: no panic, every refusal located.
    #[test]
    fn truncated(which in 0usize..3, cut in 0.0f64..1.0) {
        let full = [
            "tma_2d! { pub Q: bf16, global = [S = _, D = 64], boxed = [64, 64], swizzle = 128, strides = [_, 1] }",
            "// two\ntma_1d! { A: u8, global = [4096], boxed = [256] };\ntma_3d! {\n  /// docs\n  V: f16, global = [B = _, H = 94, C = 32], boxed = [2, 2, 32], repeat = [1, 2, 1],\n}\n",
            "tma_pipeline! {\n pub GemmRing, stages = 4, consumers = warpgroups(2), cluster = [2, 1, 1],\n tiles = {\n  a: tma_2d! { pub GemmA: bf16, global = [M = _, K = _], boxed = [128, 64], swizzle = 128 },\n  b: tma_2d! { pub GemmB: bf16, global = [N = _, K = _], boxed = [64, 64], swizzle = 128, repeat = [2, 1] } multicast(x),\n },\n}\n",
        ][which];
        let chars: Vec<char> = full.chars().collect();
        let at = ((chars.len() as f64) * cut) as usize;
        let text: String = chars[..at].iter().collect();
        let _ = read_checked(&text);
        prop_assert!(read_checked(full).is_ok());
    }

    /// `tma explain` with random `--dims`: an unknown or static name, or a value that is no
    /// u64, exits 2; a value the tile refuses exits 1; success only when every name given is
    /// a run-time one and the tile takes the values.
    #[test]
    fn explain_dims(
        dims in proptest::collection::vec(
            (proptest::sample::select(&["S", "D", "stride_S", "X", "s", "stride_D", ""][..]),
             prop_oneof![Just("0".to_string()), Just("1".to_string()), Just("64".to_string()), Just("4096".to_string()),
                         Just("-1".to_string()), Just("abc".to_string()), digits()]),
            0..4),
    ) {
        let decl = "tma_2d! { Q: bf16, global = [S = _, D = 64], boxed = [64, 64], strides = [_, 1], swizzle = 128 }";
        let list: Vec<String> = dims.iter().map(|(k, v)| format!("{k}={v}")).collect();
        let mut args = vec!["tma".to_string(), "explain".into(), decl.into()];
        if !list.is_empty() {
            args.push("--dims".into());
            args.push(list.join(","));
        }
        let out = run(args);
        let bad_syntax = dims.iter().any(|(k, v)| k.is_empty() || v.parse::<u64>().is_err());
        let unknown = dims.iter().any(|(k, _)| !matches!(*k, "S" | "stride_S"));
        if bad_syntax || unknown {
            prop_assert_eq!(out.code, 2, "{:?}: {}", list, out.stderr);
        } else {
            prop_assert!(out.code == 0 || out.code == 1, "{:?}: {}", list, out.stderr);
        }
        if out.code == 0 {
            // Every value given was taken: S in [1, 2^32], stride_S a 16-byte multiple.
            let last = |key: &str| dims.iter().rev().find(|(k, _)| *k == key).map(|(_, v)| v.parse::<u64>().unwrap());
            if let Some(s) = last("S") {
                prop_assert!((1..=1u64 << 32).contains(&s), "S = {} accepted", s);
            }
            if let Some(st) = last("stride_S") {
                // Bytes a multiple of 16 (a stride below the row aliases rows: a warning).
                prop_assert!((u128::from(st) * 2) % 16 == 0, "stride_S = {} accepted", st);
            }
        }
        prop_assert!(out.stderr.len() < 2_000, "{} bytes of stderr", out.stderr.len());
    }
}

proptest! {
    // Cheap cases (no compile), and many: each edits 1 to 4 of some 20 literals.
    #![proptest_config(ProptestConfig {
        cases: 1024,
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    /// Valid declarations (every key between them) with some literals, the `--dims` values
    /// included, replaced by boundary values: read, header, explain and SVG never panic (a
    /// debug build: no arithmetic overflow), and every refusal is located.
    #[test]
    fn boundary_values_in_valid_declarations(
        which in 0..NEAR_VALID.len(),
        edits in proptest::collection::vec((any::<usize>(), proptest::sample::select(BOUNDARIES)), 1..5),
    ) {
        let mut text = NEAR_VALID[which].to_string();
        for (at, value) in &edits {
            let lits = integer_literals(&text);
            let (a, b) = lits[at % lits.len()];
            text.replace_range(a..b, value);
        }
        let (dims_line, source) = text.split_once('\n').unwrap();
        let mut dims = explain::Dims::new();
        for d in dims_line.split(',').filter(|d| !d.is_empty()) {
            let (k, v) = d.split_once('=').unwrap();
            if let Ok(v) = v.parse::<u64>() {
                dims.insert(k.to_string(), v);
            }
        }
        let Ok(read) = read_checked(source) else {
            return Ok(());
        };
        if let Some((ident, pipe)) = &read.pipeline {
            explain::explain_pipeline(ident, pipe);
        }
        for t in &read.tiles {
            explain::explain(t, &dims);
            if let explain::Binding::Given(b) | explain::Binding::Example(b, _) = explain::bind(&t.checked.valid, &dims) {
                let _ = svg::smem_svg(&b);
            }
        }
        for t in &read.im2col {
            explain::explain_im2col(t, &dims);
            if let explain::Im2colBinding::Given(b) | explain::Im2colBinding::Example(b, _) = explain::bind_im2col(&t.checked.valid, &dims) {
                let (coords, offsets) = explain::example_call(b.spec());
                let _ = svg::im2col_svg(&b, &coords, &offsets);
            }
        }
    }
}
