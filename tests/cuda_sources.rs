//! Checks over the repository's own CUDA sources (`.cu`, `.cuh` and templates, anywhere but
//! build outputs and caches) that no compiler makes: a preprocessor test (`#if`, `#elif`,
//! `#ifdef`, `#ifndef`) on a name a source declares `constexpr` reads that name as 0,
//! silently. The weight gradient's `#if GEMM_CL == 1` did, and its tiles were walked in a fixed
//! order while every check passed (examples/05-gemm/kernel.cu).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// Folders the scan skips: build outputs, caches, the fetched toolkit, VCS data.
const SKIP: [&str; 6] = ["target", ".cache", ".git", ".gpu", "fuzz", "node_modules"];

/// The CUDA sources under `dir` (`.cu`, `.cuh`, `.tera`), recursively.
fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let name = entry.file_name();
        if path.is_dir() {
            if !SKIP.iter().any(|s| name == *s) {
                sources(&path, out);
            }
        } else if path
            .extension()
            .and_then(|e| e.to_str())
            .is_some_and(|e| matches!(e, "cu" | "cuh" | "tera"))
        {
            out.push(path);
        }
    }
}

fn is_name(word: &str) -> bool {
    !word.is_empty()
        && !word.starts_with(|c: char| c.is_ascii_digit())
        && word.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// The names `text` declares `constexpr` (`constexpr [static] <type> NAME = ..`, one line;
/// not `if constexpr (..)`).
fn constexpr_names(text: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    for line in text.lines() {
        let Some(at) = line.find("constexpr ") else {
            continue;
        };
        let rest = &line[at + "constexpr ".len()..];
        let Some(eq) = rest.find('=') else {
            continue;
        };
        if rest[eq + 1..].starts_with('=') {
            continue;
        }
        let words: Vec<&str> = rest[..eq].split_whitespace().collect();
        if let [.., _type, name] = words.as_slice() {
            if is_name(name) {
                names.insert(name.to_string());
            }
        }
    }
    names
}

/// The names `text` `#define`s.
fn macro_names(text: &str) -> BTreeSet<String> {
    text.lines()
        .filter_map(|l| {
            let t = l.trim_start().strip_prefix('#')?.trim_start();
            let name = t.strip_prefix("define")?.split_whitespace().next()?;
            let name = name.split('(').next()?;
            is_name(name).then(|| name.to_string())
        })
        .collect()
}

/// A template's text with each tera expression (`{{ .. }}`, `{% .. %}`) replaced by `X`, so
/// a rendered name such as `M64N{{ op.n }}K` stays one word.
fn without_tera(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find('{') {
        let (open, close) = match rest[at..].get(..2) {
            Some("{{") => ("{{", "}}"),
            Some("{%") => ("{%", "%}"),
            _ => {
                out.push_str(&rest[..=at]);
                rest = &rest[at + 1..];
                continue;
            }
        };
        out.push_str(&rest[..at]);
        match rest[at + open.len()..].find(close) {
            Some(end) => {
                out.push('X');
                rest = &rest[at + open.len() + end + close.len()..];
            }
            None => {
                out.push_str(&rest[at..]);
                rest = "";
            }
        }
    }
    out.push_str(rest);
    out
}

/// `(line, name)` for each `#if`, `#elif`, `#ifdef` or `#ifndef` of `text` that reads a name of
/// `declared` (comments after the condition left out).
fn preprocessor_reads(text: &str, declared: &BTreeSet<String>) -> Vec<(usize, String)> {
    let mut found = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let Some(t) = line.trim_start().strip_prefix('#') else {
            continue;
        };
        let t = t.trim_start();
        let condition = ["ifndef", "ifdef", "elif", "if"]
            .iter()
            .find_map(|d| t.strip_prefix(d));
        let Some(condition) = condition.filter(|c| c.starts_with([' ', '\t', '('])) else {
            continue;
        };
        let condition = condition.split("//").next().unwrap_or("");
        let condition = condition.split("/*").next().unwrap_or("");
        for word in condition.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_')) {
            if declared.contains(word) {
                found.push((i + 1, word.to_string()));
            }
        }
    }
    found
}

/// Every CUDA source of the repository: a preprocessor test never reads a name some source
/// declares `constexpr` and none `#define`s (a prelude's constexpr tested in the kernel
/// appended to it counts too).
#[test]
fn no_preprocessor_test_reads_a_constexpr() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    sources(root, &mut files);
    assert!(
        files.len() > 30,
        "found only {} CUDA sources: the walk is broken",
        files.len()
    );
    let texts: Vec<(PathBuf, String)> = files
        .into_iter()
        .map(|f| {
            let text = std::fs::read_to_string(&f).expect("reads");
            (f, without_tera(&text))
        })
        .collect();
    let mut declared = BTreeSet::new();
    let mut defined = BTreeSet::new();
    for (_, text) in &texts {
        declared.extend(constexpr_names(text));
        defined.extend(macro_names(text));
    }
    let declared: BTreeSet<String> = declared.difference(&defined).cloned().collect();
    let mut bad = Vec::new();
    for (f, text) in &texts {
        for (line, name) in preprocessor_reads(text, &declared) {
            bad.push(format!("{}:{line}: `{name}`", f.display()));
        }
    }
    assert!(
        bad.is_empty(),
        "a preprocessor test reads a constexpr (as 0): {bad:?}"
    );
}

/// The scan finds the bug it exists for (in `#if`, `#elif`, `#ifdef`, `defined(..)`), and
/// leaves macros, `if constexpr`, comparisons and comments alone.
#[test]
fn the_scan_finds_a_constexpr_in_an_if() {
    let text = "#define A 1\nconstexpr int B = A * 2;\nif constexpr (C == 1) {}\n\
                #if B == 2 // A\n#elif A // B\n#endif\n#ifdef B\n#if defined(B) || defined(D)\n";
    let declared = constexpr_names(text);
    assert_eq!(declared, BTreeSet::from(["B".to_string()]));
    assert_eq!(macro_names(text), BTreeSet::from(["A".to_string()]));
    assert_eq!(
        preprocessor_reads(text, &declared),
        vec![
            (4, "B".to_string()),
            (7, "B".to_string()),
            (8, "B".to_string())
        ]
    );
}

/// Tera expressions join the name they sit in.
#[test]
fn tera_expressions_stay_inside_a_name() {
    assert_eq!(
        without_tera("#ifndef M64N{{ op.n }}K{{ op.k }}_A\n{% if x %}{ }"),
        "#ifndef M64NXKX_A\nX{ }"
    );
}
