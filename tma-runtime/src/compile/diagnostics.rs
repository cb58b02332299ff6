//! Compile errors shown where they point: the lines of the source each error of NVRTC's log
//! names, with [`CONTEXT_LINES`] lines around them, numbered as the log numbers them (after a
//! `#line`, in the user's file), instead of the whole translation unit (900-1,800 lines of a
//! generated source). The whole unit stays one option away: `TMA_FULL_SOURCE=1`, or the
//! `numbered_source` field of [`crate::Error::Compile`].
//!
//! NVRTC (the EDG front end) writes a message as `<file>(<line>): <severity>: <text>`, where
//! `<file>` is the program name (`tma.cu`) or the name a `#line` directive gave, and a template
//! error's `detected during:` notes list each instantiation `... at line <n>` (same file) or
//! `... at line <n> of <file>`.

use std::collections::BTreeSet;
use std::fmt::Write as _;

use super::source::{numbered_source, Numbering};

/// Lines shown before and after each reported line.
pub const CONTEXT_LINES: usize = 3;
/// At most this many excerpts; the rest are counted.
pub const MAX_EXCERPTS: usize = 20;
/// The environment variable that prints the whole numbered unit instead of the excerpts.
pub const FULL_SOURCE_ENV: &str = "TMA_FULL_SOURCE";

/// A line an error of the log points at.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Reported {
    pub file: String,
    pub line: u64,
}

/// `<file>(<line>): <rest>` at the start of a log line: (file, line, rest).
fn message_location(l: &str) -> Option<(&str, u64, &str)> {
    if l.starts_with(char::is_whitespace) {
        return None;
    }
    let mut from = 0;
    while let Some(i) = l[from..].find("): ").map(|i| i + from) {
        let before = &l[..i];
        if let Some(open) = before.rfind('(') {
            let digits = &before[open + 1..];
            if open > 0 && !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()) {
                if let Ok(line) = digits.parse() {
                    return Some((&before[..open], line, &l[i + 3..]));
                }
            }
        }
        from = i + 3;
    }
    None
}

/// `... at line <n>` or `... at line <n> of <file>` in an instantiation note.
fn instantiation_at(l: &str) -> Option<(u64, Option<&str>)> {
    let rest = &l[l.rfind(" at line ")? + " at line ".len()..];
    let end = rest
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(rest.len());
    let line = rest[..end].parse().ok()?;
    let file = rest[end..]
        .strip_prefix(" of ")
        .map(str::trim)
        .filter(|f| !f.is_empty());
    Some((line, file))
}

/// The lines the errors of `log` point at, in log order, without repeats: each
/// `<file>(<line>): error` (or `catastrophic error`) message, and the instantiation sites its
/// `detected during` notes list. Warnings and remarks are not shown.
pub(super) fn reported_lines(log: &str) -> Vec<Reported> {
    let mut out: Vec<Reported> = Vec::new();
    let mut push = |file: &str, line: u64| {
        if !out.iter().any(|r| r.file == file && r.line == line) {
            out.push(Reported {
                file: file.to_string(),
                line,
            });
        }
    };
    // The file of the error whose notes follow (None after a warning or remark).
    let mut error_file: Option<&str> = None;
    for l in log.lines() {
        if let Some((file, line, rest)) = message_location(l) {
            let rest = rest.trim_start();
            if rest.starts_with("error") || rest.starts_with("catastrophic error") {
                push(file, line);
                error_file = Some(file);
            } else {
                error_file = None;
            }
        } else if let Some(file) = error_file {
            if l.starts_with(char::is_whitespace) {
                if let Some((line, of)) = instantiation_at(l) {
                    push(of.unwrap_or(file), line);
                }
            } else if !l.trim().is_empty() {
                error_file = None;
            }
        }
    }
    out
}

/// What a compile error shows after NVRTC's log: the excerpts of [`excerpts`], or the whole
/// numbered unit when `full` (`TMA_FULL_SOURCE=1`).
pub(super) fn error_context(source: &str, log: &str, full: bool) -> String {
    if full {
        format!(
            "--- source ({FULL_SOURCE_ENV}) ---\n{}",
            numbered_source(source)
        )
    } else {
        excerpts(source, log)
    }
}

/// The source around each line the log's errors report ([`reported_lines`]): for each,
/// [`CONTEXT_LINES`] lines before and after, under the name of its file, numbered as
/// [`numbered_source`] numbers them, the reported lines marked `>`; overlapping excerpts are
/// merged.
pub(super) fn excerpts(source: &str, log: &str) -> String {
    let numbering = Numbering::new(source);
    let reported = reported_lines(log);
    let mut marked = BTreeSet::new();
    let mut missing = Vec::new();
    for r in &reported {
        let mut found = false;
        for (i, l) in numbering.lines.iter().enumerate() {
            if l.number == r.line && numbering.file(l.file) == r.file {
                marked.insert(i);
                found = true;
            }
        }
        if !found {
            missing.push(r);
        }
    }
    let total = numbering.lines.len();
    let mut out = String::new();
    let _ = writeln!(
        out,
        "--- the source around the lines reported above (the whole unit is {total} lines: set \
         {FULL_SOURCE_ENV}=1 to print it, or read Error::Compile's numbered_source) ---"
    );
    if marked.is_empty() {
        out.push_str("(no reported line is in the source)\n");
    }
    // Merge the windows around marked lines.
    let mut windows: Vec<(usize, usize)> = Vec::new();
    for &m in &marked {
        let (lo, hi) = (
            m.saturating_sub(CONTEXT_LINES),
            (m + CONTEXT_LINES).min(total.saturating_sub(1)),
        );
        match windows.last_mut() {
            Some(last) if lo <= last.1 + 1 => last.1 = last.1.max(hi),
            _ => windows.push((lo, hi)),
        }
    }
    let w = numbering.width;
    for &(lo, hi) in windows.iter().take(MAX_EXCERPTS) {
        let Some(first) = numbering.lines.get(lo) else {
            continue;
        };
        let _ = writeln!(out, "  {:>w$} --- {} ---", "", numbering.file(first.file));
        for (i, l) in numbering.lines.iter().enumerate().take(hi + 1).skip(lo) {
            let mark = if marked.contains(&i) { '>' } else { ' ' };
            let _ = writeln!(out, "{mark} {:>w$} | {}", l.number, l.text);
            if let (Some(file), true) = (l.directive, i < hi) {
                let _ = writeln!(out, "  {:>w$} --- {} ---", "", numbering.file(file));
            }
        }
    }
    if windows.len() > MAX_EXCERPTS {
        let _ = writeln!(
            out,
            "... {} more excerpt(s) not shown",
            windows.len() - MAX_EXCERPTS
        );
    }
    for r in missing {
        let _ = writeln!(
            out,
            "({}({}) is not a line of this source: a header or NVRTC's own)",
            r.file, r.line
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const LOG: &str = r#"tma.cu(4): warning #177-D: variable "unused_var" was declared but never referenced
    int unused_var = 3;
        ^

kernels/user (1).cu(41): error: identifier "first_undefined" is undefined
    *p = first_undefined;
         ^

tma.cu(1): error: static assertion failed with "N too big"
  template <int N> struct S { static __device__ int g() { static_assert(N < 2, "N too big"); return N; } };
                                                          ^
          detected during:
            instantiation of "int S<N>::g() [with N=3]" at line 2
            instantiation of "int f<N>() [with N=3]" at line 43 of kernels/user (1).cu

2 errors detected in the compilation of "tma.cu".
"#;

    #[test]
    fn errors_and_their_instantiations_are_reported_warnings_not() {
        let r: Vec<(String, u64)> = reported_lines(LOG)
            .into_iter()
            .map(|r| (r.file, r.line))
            .collect();
        assert_eq!(
            r,
            [
                ("kernels/user (1).cu".to_string(), 41),
                ("tma.cu".to_string(), 1),
                ("tma.cu".to_string(), 2),
                ("kernels/user (1).cu".to_string(), 43),
            ]
        );
        assert_eq!(
            message_location("a(b)(12): error: x"),
            Some(("a(b)", 12, "error: x"))
        );
        assert_eq!(message_location("  tma.cu(3): error: x"), None);
        assert_eq!(message_location("f(x): error"), None);
        assert_eq!(
            instantiation_at("  at line 7 of a.cu"),
            Some((7, Some("a.cu")))
        );
    }

    #[test]
    fn excerpts_show_numbered_context_around_reported_lines() {
        let mut src = String::new();
        for i in 1..=30 {
            src.push_str(&format!("line {i}\n"));
        }
        src.push_str("#line 40 \"kernels/user (1).cu\"\n");
        for i in 40..=50 {
            src.push_str(&format!("user {i}\n"));
        }
        let shown = excerpts(&src, LOG);
        let want = "\
--- the source around the lines reported above (the whole unit is 42 lines: set TMA_FULL_SOURCE=1 to print it, or read Error::Compile's numbered_source) ---
      --- tma.cu ---
>   1 | line 1
>   2 | line 2
    3 | line 3
    4 | line 4
    5 | line 5
      --- tma.cu ---
   30 | line 30
   31 | #line 40 \"kernels/user (1).cu\"
      --- kernels/user (1).cu ---
   40 | user 40
>  41 | user 41
   42 | user 42
>  43 | user 43
   44 | user 44
   45 | user 45
   46 | user 46
";
        assert_eq!(shown, want);
        // The warning's line 4 is not marked; the whole unit is one option away.
        assert!(error_context(&src, LOG, true).contains("\n  4 | line 4\n  5 | line 5\n"));
        assert!(!shown.contains("line 15"));
        // A line the source lacks is named, not invented.
        let short = excerpts("only\n", "tma.cu(9): error: x\n");
        assert!(
            short.contains("(no reported line is in the source)"),
            "{short}"
        );
        assert!(
            short.contains("tma.cu(9) is not a line of this source"),
            "{short}"
        );
    }
}
