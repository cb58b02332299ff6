//! The CUDA source going in: hashed once ([`Source`]), and read for the tile names of hang
//! reports and the numbered listing of compile errors.

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

/// Parses `// tma-tile <id> <name>` lines.
pub fn tile_names(source: &str) -> Vec<(u32, String)> {
    source
        .lines()
        .filter_map(|l| {
            let rest = l.trim_start().strip_prefix("// tma-tile ")?;
            let mut it = rest.split_whitespace();
            let id = it.next()?.parse().ok()?;
            Some((id, it.next()?.to_string()))
        })
        .collect()
}

/// `source` with right-aligned line numbers, to read beside NVRTC's `(line)` references.
pub fn numbered_source(source: &str) -> String {
    let n = source.lines().count().max(1);
    let w = n.to_string().len();
    let mut out = String::with_capacity(source.len() + n * (w + 3));
    for (i, l) in source.lines().enumerate() {
        let _ = writeln!(out, "{:>w$} | {l}", i + 1);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tile_names_and_numbered_source() {
        let src = "// tma-tile 0 a_tile\n  // tma-tile 7 b\n// tma-tile x bad\nint x;\n";
        assert_eq!(tile_names(src), vec![(0, "a_tile".into()), (7, "b".into())]);
        let n = numbered_source("a\nb\n");
        assert_eq!(n, "1 | a\n2 | b\n");
    }
}
