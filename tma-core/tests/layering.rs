//! The modules below `validate` (declaration, arithmetic, rules, shared memory) name nothing of
//! `validate` or the stages after it: data flows one way (lib.rs's table). `smem` once built
//! `ElementOffsets` from a `&ValidSpec`; that constructor now sits beside the proof type.
//! Reads the sources: code outside comments and `#[cfg(test)]` modules.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::{Path, PathBuf};

/// Modules (files or folders under src/) before `validate`.
const BELOW_VALIDATE: [&str; 11] = [
    "spec", "dtype", "swizzle", "operand", "size", "limits", "ident", "rules", "error", "echo",
    "smem",
];

/// What they may not name: the proof types and the modules from `validate` on.
const LATER: [&str; 10] = [
    "validate",
    "pipeline",
    "launch",
    "wgmma",
    "encode_args",
    "model",
    "render",
    "facts",
    "plan",
    "testgen",
];
const PROOF_TYPES: [&str; 2] = ["ValidSpec", "BoundSpec"];

fn files(module: &str) -> Vec<PathBuf> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let dir = src.join(module);
    if dir.is_dir() {
        let mut out: Vec<PathBuf> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|x| x == "rs"))
            .collect();
        out.sort();
        out
    } else {
        vec![src.join(format!("{module}.rs"))]
    }
}

/// The code of a source: no comment lines, nothing from the first `#[cfg(test)]` on.
fn code(text: &str) -> String {
    let text = text.split("#[cfg(test)]").next().unwrap_or("");
    text.lines()
        .filter(|l| !l.trim_start().starts_with("//"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Every crate-level name `code` uses: `crate::x` and the first names of `crate::{x, y::z}`.
fn crate_names(code: &str) -> Vec<String> {
    let mut out = Vec::new();
    for (i, _) in code.match_indices("crate::") {
        let rest = &code[i + "crate::".len()..];
        let items = match rest.strip_prefix('{') {
            Some(group) => group.split('}').next().unwrap_or("").split(',').collect(),
            None => vec![rest],
        };
        for item in items {
            let name: String = item
                .trim_start()
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            out.push(name);
        }
    }
    out
}

fn back_edges(code: &str) -> Vec<String> {
    let mut found: Vec<String> = crate_names(code)
        .into_iter()
        .filter(|n| LATER.contains(&n.as_str()))
        .collect();
    found.extend(
        PROOF_TYPES
            .iter()
            .filter(|t| code.contains(*t))
            .map(|t| t.to_string()),
    );
    found
}

#[test]
fn modules_below_validate_name_no_proof_type_and_no_later_stage() {
    let mut bad = Vec::new();
    for module in BELOW_VALIDATE {
        let paths = files(module);
        assert!(
            !paths.is_empty() && paths[0].is_file(),
            "{module}: no source"
        );
        for path in paths {
            for name in back_edges(&code(&std::fs::read_to_string(&path).unwrap())) {
                bad.push(format!("{} names {name}", path.display()));
            }
        }
    }
    assert!(bad.is_empty(), "back-edges:\n{}", bad.join("\n"));
}

/// The scan sees what it must.
#[test]
fn the_scan_finds_back_edges() {
    assert_eq!(
        back_edges("use crate::{validate, DType};\nfn f(v: &crate::ValidSpec) {}"),
        ["validate", "ValidSpec"]
    );
    assert_eq!(back_edges("use crate::render::x;"), ["render"]);
    assert!(back_edges(&code("/// see crate::ValidSpec\nuse crate::size::Size;")).is_empty());
    let with_tests = "fn f() {}\n#[cfg(test)]\nmod tests { use crate::validate; }";
    assert!(back_edges(&code(with_tests)).is_empty());
}
