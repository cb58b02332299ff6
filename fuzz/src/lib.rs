//! What every fuzz target runs on one input: the command line's reading, header, explain and
//! SVG of a source, or one macro's checks on a body, each as the project runs them.

use proc_macro2::{TokenStream, TokenTree};
use std::collections::BTreeMap;
use tma_cli::diag::Source;
use tma_cli::{decl, explain, header_text, svg};
use tma_syntax::check;
use tma_syntax::parse::{self, KernelDecl, PipelineDecl, RolesDecl, TileDecl};

/// Which entry point an input goes to.
#[derive(Clone, Copy, Debug)]
pub enum Mode {
    /// `tma explain` / `tma header` of a source (no `--dims`).
    Cli,
    /// The same, with the first line `NAME=VALUE,..` as `--dims`.
    CliDims,
    /// `tma_1d!` .. `tma_5d!` and `tma_im2col!` on a body.
    Tile,
    Pipeline,
    Roles,
    Kernel,
    /// `#[derive(TmaTiles)]` on a struct.
    Derive,
}

impl Mode {
    pub const ALL: [Mode; 7] = [
        Mode::Cli,
        Mode::CliDims,
        Mode::Tile,
        Mode::Pipeline,
        Mode::Roles,
        Mode::Kernel,
        Mode::Derive,
    ];
}

/// `--dims` as the command line reads it (`NAME=VALUE`, VALUE a u64), the bad ones skipped.
pub fn dims(line: &str) -> explain::Dims {
    let mut out = BTreeMap::new();
    for d in line.split(',') {
        if let Some((k, v)) = d.split_once('=') {
            if let Ok(v) = v.trim().parse::<u64>() {
                out.insert(k.trim().to_string(), v);
            }
        }
    }
    out
}

/// Reads `text` as the command line reads a `.tma` file, then writes everything `tma
/// explain --svg` and `tma header [--mpk]` would.
pub fn cli(text: &str, dims: &explain::Dims) {
    let src = Source {
        name: "fuzz.tma".into(),
        text: text.to_string(),
    };
    let Ok(read) = decl::read(&src) else {
        return;
    };
    let _ = header_text(&src, false);
    let _ = header_text(&src, true);
    if let Some((ident, pipe)) = &read.pipeline {
        let _ = explain::explain_pipeline(ident, pipe);
    }
    for t in &read.tiles {
        let _ = explain::explain(t, dims);
        match explain::bind(&t.checked.valid, dims) {
            explain::Binding::Given(b) | explain::Binding::Example(b, _) => {
                let _ = svg::smem_svg(&b);
            }
            explain::Binding::None(_) => {}
        }
    }
    for t in &read.im2col {
        let _ = explain::explain_im2col(t, dims);
        match explain::bind_im2col(&t.checked.valid, dims) {
            explain::Im2colBinding::Given(b) | explain::Im2colBinding::Example(b, _) => {
                let (coords, offsets) = explain::example_call(b.spec());
                let _ = svg::im2col_svg(&b, &coords, &offsets);
            }
            explain::Im2colBinding::None(_) => {}
        }
    }
}

/// The body of `name! { body }` when `tokens` is one macro invocation, else `tokens`.
fn body(tokens: TokenStream) -> TokenStream {
    let v: Vec<TokenTree> = tokens.clone().into_iter().collect();
    match v.as_slice() {
        [TokenTree::Ident(_), TokenTree::Punct(p), TokenTree::Group(g), ..]
            if p.as_char() == '!' =>
        {
            g.stream()
        }
        _ => tokens,
    }
}

/// `#[derive(TmaTiles)]` on `text`. syn's own `DeriveInput` parser recurses once per prefix
/// operator in an attribute's value or a type (`#[doc = || || ..]`, `& & & T`): the caller
/// runs it on a big stack, so that known overflow (README) does not hide the rest.
fn derive(text: &str) {
    let Ok(tokens) = text.parse::<TokenStream>() else {
        return;
    };
    if let Ok(input) = parse::parse_bounded::<syn::DeriveInput>(tokens) {
        if let Ok(s) = parse::tiles_struct(&input) {
            let _ = check::derive(s);
        }
    }
}

/// One macro's parse (bounded, as the macros parse) and checks on `text`.
pub fn macro_mode(mode: Mode, text: &str) {
    let Ok(tokens) = text.parse::<TokenStream>() else {
        return;
    };
    if parse::check_tokens(&tokens).is_err() {
        return;
    }
    match mode {
        Mode::Tile => {
            let Ok(decl) = syn::parse2::<TileDecl>(body(tokens)) else {
                return;
            };
            for (rank, mac) in [
                (1, "tma_1d"),
                (2, "tma_2d"),
                (3, "tma_3d"),
                (4, "tma_4d"),
                (5, "tma_5d"),
            ] {
                let _ = check::tile_macro(rank, mac, &decl);
            }
            let _ = check::im2col::im2col_macro(&decl);
        }
        Mode::Pipeline => {
            if let Ok(decl) = syn::parse2::<PipelineDecl>(body(tokens)) {
                let _ = check::pipeline::pipeline(&decl);
            }
        }
        Mode::Roles => {
            if let Ok(decl) = syn::parse2::<RolesDecl>(body(tokens)) {
                let _ = check::pipeline::roles(&decl);
            }
        }
        Mode::Kernel => {
            if let Ok(decl) = syn::parse2::<KernelDecl>(body(tokens)) {
                let _ = check::kernel::kernel(&decl);
            }
        }
        Mode::Derive => big_stack(|| derive(text)),
        Mode::Cli | Mode::CliDims => {}
    }
}

/// Runs `text` through the entry point `mode` names. The command line's reads run on a thread
/// of their own: `decl::read` refuses a thread past `MAX_LEXED_BYTES` of text in all, which a
/// fuzzing run passes in minutes. (A panic there still aborts: libfuzzer-sys's hook.)
pub fn run(mode: Mode, text: &str) {
    match mode {
        Mode::Cli => fresh_thread(|| cli(text, &explain::Dims::new())),
        Mode::CliDims => {
            let (line, rest) = text.split_once('\n').unwrap_or(("", text));
            fresh_thread(|| cli(rest, &dims(line)));
        }
        m => macro_mode(m, text),
    }
}

fn big_stack(f: impl FnOnce() + Send) {
    std::thread::scope(|s| {
        let joined = std::thread::Builder::new()
            .stack_size(256 << 20)
            .spawn_scoped(s, f)
            .map(|h| h.join());
        if !matches!(joined, Ok(Ok(()))) {
            std::process::abort();
        }
    });
}

fn fresh_thread(f: impl FnOnce() + Send) {
    std::thread::scope(|s| {
        if s.spawn(f).join().is_err() {
            std::process::abort();
        }
    });
}
