//! Checks over the repository's own CUDA sources (examples, benches, tests, templates) that no
//! compiler makes: a preprocessor test (`#if`, `#elif`) on a name the file declares `constexpr`
//! reads that name as 0, silently. The weight gradient's `#if GEMM_CL == 1` did, and its tiles
//! were walked in a fixed order while every check passed (examples/05-gemm/kernel.cu).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// The CUDA sources under `dir` (`.cu`, `.cuh`, `.tera`), recursively.
fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            sources(&path, out);
        } else if path
            .extension()
            .and_then(|e| e.to_str())
            .is_some_and(|e| matches!(e, "cu" | "cuh" | "tera"))
        {
            out.push(path);
        }
    }
}

/// The names `text` declares `constexpr` (`constexpr [static] <type> NAME =`).
fn constexpr_names(text: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    for line in text.lines() {
        let Some(at) = line.find("constexpr ") else {
            continue;
        };
        let rest = &line[at..];
        let Some(eq) = rest.find('=') else {
            continue;
        };
        if let Some(name) = rest[..eq].split_whitespace().last() {
            if name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
                names.insert(name.to_string());
            }
        }
    }
    names
}

/// `(line, name)` for each `#if` / `#elif` of `text` that reads a name of `declared`.
fn preprocessor_reads(text: &str, declared: &BTreeSet<String>) -> Vec<(usize, String)> {
    let mut found = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let t = line.trim_start();
        let Some(t) = t.strip_prefix('#') else {
            continue;
        };
        let t = t.trim_start();
        let condition = t.strip_prefix("elif").or_else(|| t.strip_prefix("if"));
        let Some(condition) = condition.filter(|c| c.starts_with([' ', '\t', '('])) else {
            continue;
        };
        for word in condition.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_')) {
            if declared.contains(word) {
                found.push((i + 1, word.to_string()));
            }
        }
    }
    found
}

#[test]
fn no_preprocessor_test_reads_a_constexpr() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    for dir in ["examples", "benches", "tests", "tma-core/templates", "src"] {
        sources(&root.join(dir), &mut files);
    }
    assert!(
        files.len() > 10,
        "found only {} CUDA sources: the walk is broken",
        files.len()
    );
    let mut bad = Vec::new();
    for f in &files {
        let text = std::fs::read_to_string(f).expect("reads");
        for (line, name) in preprocessor_reads(&text, &constexpr_names(&text)) {
            bad.push(format!("{}:{line}: `{name}`", f.display()));
        }
    }
    assert!(
        bad.is_empty(),
        "a preprocessor test reads a constexpr (as 0): {bad:?}"
    );
}

/// The scan finds the bug it exists for, and leaves macros and `defined` alone.
#[test]
fn the_scan_finds_a_constexpr_in_an_if() {
    let text =
        "#define A 1\nconstexpr int B = A * 2;\n#if B == 2\n#elif A\n#endif\n#if defined(C)\n";
    let declared = constexpr_names(text);
    assert_eq!(declared, BTreeSet::from(["B".to_string()]));
    assert_eq!(
        preprocessor_reads(text, &declared),
        vec![(3, "B".to_string())]
    );
}
