//! The CUDA source going in: hashed once ([`Source`]), and numbered for compile errors as
//! NVRTC numbers it. (Its tile lines are read with [`tma_core::manifest::declared_tiles`].)

use std::fmt::Write as _;
use std::sync::Arc;

use super::hash::fingerprint;

/// A CUDA source with its fingerprint computed once. Hold one for hot paths: a cached
/// compile of a `Source` costs a hash-map lookup, not a pass over the text.
#[derive(Clone, Debug)]
pub struct Source {
    text: Arc<str>,
    fingerprint: u128,
}

impl Source {
    /// Takes `text` and hashes it, once.
    pub fn new(text: impl Into<Arc<str>>) -> Source {
        let text = text.into();
        let fingerprint = fingerprint(text.as_bytes());
        Source { text, fingerprint }
    }
    /// The CUDA source.
    pub fn text(&self) -> &str {
        &self.text
    }
    /// The cache's key for the text (computed once, in [`Source::new`]).
    pub(super) fn fingerprint(&self) -> u128 {
        self.fingerprint
    }
}

impl From<&str> for Source {
    fn from(s: &str) -> Self {
        Source::new(s)
    }
}
impl From<String> for Source {
    fn from(s: String) -> Self {
        Source::new(s)
    }
}

/// The file name NVRTC gives the program: its messages say `tma.cu(<line>)` for lines no
/// `#line` directive maps elsewhere.
pub(super) const PROGRAM_NAME: &str = "tma.cu";

/// `source` with right-aligned line numbers, counted as NVRTC counts them in its messages:
/// lines of the program as `tma.cu`, and after a `#line <n> "<file>"` directive (e.g. from
/// [`KernelSource::body_at`](tma_core::render::KernelSource::body_at)) from `n`, under a
/// `--- <file> ---` heading.
pub fn numbered_source(source: &str) -> String {
    let n = source.lines().count().max(1);
    let w = n.to_string().len().max(3);
    let mut out = String::with_capacity(source.len() + n * (w + 3));
    let mut number: u64 = 1;
    let mut file = PROGRAM_NAME.to_string();
    for l in source.lines() {
        let _ = writeln!(out, "{number:>w$} | {l}");
        number += 1;
        if let Some((line, named)) = line_directive(l) {
            file = named.unwrap_or(file);
            let _ = writeln!(out, "{:>w$} --- {file} ---", "");
            number = line;
        }
    }
    out
}

/// `#line <n> "<file>"` (or `# line <n>`, which keeps the file): the next line is line `n`.
fn line_directive(l: &str) -> Option<(u64, Option<String>)> {
    let rest = l.trim_start().strip_prefix('#')?.trim_start();
    let rest = rest.strip_prefix("line")?.trim_start();
    let (n, file) = rest.split_once(char::is_whitespace).unwrap_or((rest, ""));
    let n = n.parse().ok()?;
    let file = file.trim();
    let file = file
        .strip_prefix('"')
        .and_then(|f| f.strip_suffix('"'))
        .map(unescape);
    Some((n, file))
}

/// The text of a C string literal's body (what `KernelSource::body_at` writes): `\\`, `\"`,
/// `\n`, `\r`, `\t` and octal escapes decoded, then every control character shown escaped, so
/// the file name stays on the heading's one line.
fn unescape(body: &str) -> String {
    let mut out = String::with_capacity(body.len());
    let mut chars = body.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('n') => out.push('\n'),
            Some('r') => out.push('\r'),
            Some('t') => out.push('\t'),
            Some(d @ '0'..='7') => {
                let mut v = d.to_digit(8).unwrap_or(0);
                for _ in 0..2 {
                    match chars.peek().and_then(|c| c.to_digit(8)) {
                        Some(x) => {
                            v = v * 8 + x;
                            chars.next();
                        }
                        None => break,
                    }
                }
                out.push(char::from_u32(v).unwrap_or('\u{fffd}'));
            }
            Some(other) => out.push(other),
            None => out.push('\\'),
        }
    }
    out.chars()
        .flat_map(|c| {
            let shown: Vec<char> = if c.is_control() {
                c.escape_default().collect()
            } else {
                vec![c]
            };
            shown
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbered_source_counts_as_nvrtc_does() {
        assert_eq!(numbered_source("a\nb\n"), "  1 | a\n  2 | b\n");
        let src = "a\n#line 40 \"k/my \\\"x\\\".cu\"\nb\nc\n";
        assert_eq!(
            numbered_source(src),
            "  1 | a\n  2 | #line 40 \"k/my \\\"x\\\".cu\"\n    --- k/my \"x\".cu ---\n 40 | b\n 41 | c\n"
        );
        assert_eq!(
            numbered_source("#line 9\nx\n"),
            "  1 | #line 9\n    --- tma.cu ---\n  9 | x\n"
        );
        assert_eq!(
            line_directive("  # line 7 \"a.cu\""),
            Some((7, Some("a.cu".into())))
        );
        assert_eq!(line_directive("#linear 7"), None);
        // A newline and other control characters in the name stay escaped on the heading.
        assert_eq!(
            line_directive("#line 3 \"a\\n#error\\033\\\\b\\\".cu\""),
            Some((3, Some("a\\n#error\\u{1b}\\b\".cu".into())))
        );
    }
}
