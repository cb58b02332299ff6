//! `name = ..` in every declaration form: `_` (a run-time value elsewhere) is refused at its
//! token, by name; a name as written is taken as written.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use syn::parse::Parse;
use tma_syntax::check;
use tma_syntax::parse::{KernelDecl, PipelineDecl, RolesDecl, TileDecl};

const TILE: &str = "A: u8, global = [64], boxed = [64]";

fn parse<T: Parse>(text: &str) -> T {
    syn::parse_str(text).unwrap_or_else(|e| panic!("{text}: {e}"))
}

/// The messages of a refusal, one each.
fn messages(e: syn::Error) -> Vec<String> {
    e.into_iter().map(|e| e.to_string()).collect()
}

/// Each form's declaration with `name = {name}`, checked; `Err`: its messages.
fn each_form(name: &str) -> Vec<(&'static str, Result<String, Vec<String>>)> {
    let tile = parse::<TileDecl>(&format!("{TILE}, name = {name}"));
    let im2col = parse::<TileDecl>(&format!(
        "A: bf16, global = [N = _, H = 8, W = 8, C = 64], channels_per_pixel = 64, pixels_per_column = 64, name = {name}"
    ));
    let pipe = parse::<PipelineDecl>(&format!(
        "pub R, stages = 2, consumers = warps(1), name = {name}, tiles = {{ a: tma_1d! {{ {TILE} }} }}"
    ));
    let roles = parse::<RolesDecl>(&format!("pub R, consumer_warps = 4, name = {name}"));
    let kernel = parse::<KernelDecl>(&format!(
        "pub K, name = {name}, staging = [d: tma_1d! {{ {TILE} }}], block_threads = 128"
    ));
    vec![
        (
            "tile",
            check::tile_macro(1, "tma_1d", &tile)
                .map(|c| c.valid.spec().name.clone())
                .map_err(messages),
        ),
        (
            "im2col",
            check::im2col::im2col_macro(&im2col)
                .map(|c| c.valid.spec().name.clone())
                .map_err(messages),
        ),
        (
            "pipeline",
            check::pipeline::pipeline(&pipe)
                .map(|c| c.valid.spec().name.clone())
                .map_err(messages),
        ),
        (
            "roles",
            check::pipeline::roles(&roles)
                .map(|c| c.valid.roles().name.clone())
                .map_err(messages),
        ),
        (
            "kernel",
            check::kernel::kernel(&kernel)
                .map(|c| c.name)
                .map_err(|e| e.map(messages).unwrap_or_default()),
        ),
    ]
}

/// `name = _` took the name `_` (`struct tma__`, a name C++ reserves): now refused, in every
/// form, with one error that says what `name` takes.
#[test]
fn name_underscore_is_refused_in_every_form() {
    for (form, got) in each_form("_") {
        let msgs = got.expect_err(form);
        assert_eq!(msgs.len(), 1, "{form}: {msgs:?}");
        assert!(
            msgs[0].starts_with("`name` takes a name or a string") && msgs[0].contains("not `_`"),
            "{form}: {msgs:?}"
        );
    }
}

#[test]
fn a_name_is_taken_as_written() {
    for name in ["ring_a", "\"ring_a\"", "r#ring_a"] {
        for (form, got) in each_form(name) {
            assert_eq!(got.as_deref(), Ok("ring_a"), "{form}, name = {name}");
        }
    }
}
