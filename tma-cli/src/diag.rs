//! Diagnostics a shell user reads: `error: <message>` then ` --> file:line:column` and the
//! offending line with its span underlined, the way rustc prints them.

use proc_macro2::Span;
use std::fmt::Write;

/// How bad a diagnostic is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Level {
    Error,
    Warning,
}

/// One message, with where it points when it points anywhere.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Diagnostic {
    pub level: Level,
    pub message: String,
    pub at: Option<Location>,
}

/// A span in a source: 1-based line, 1-based columns (end exclusive, same line), and the
/// part of the line a diagnostic shows.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Location {
    pub file: String,
    pub line: usize,
    pub column: usize,
    pub end_column: usize,
    /// The line as shown: whole up to [`SHOWN_LINE_CHARS`] characters, else the part around
    /// the span cut with `...`; control characters replaced. Only this part is kept: each of
    /// 32,000 errors on a 1 MiB line held the whole line, and `tma header` of that file took
    /// 24 GB before it was killed.
    pub shown: String,
    /// Where the underline starts in `shown` (0-based characters), and its width.
    pub mark: (usize, usize),
}

/// A source being read: its name for messages and its text.
#[derive(Clone, Debug)]
pub struct Source {
    pub name: String,
    pub text: String,
}

impl Source {
    /// Where `span` (parsed from this source's text) is. proc-macro2's `span-locations` gives
    /// lines (1-based) and columns (0-based, in chars) relative to the text parsed.
    pub fn locate(&self, span: Span) -> Location {
        let (start, end) = (span.start(), span.end());
        let line = start.line.max(1);
        let text = self
            .line_at(span.byte_range().start)
            .unwrap_or_else(|| self.text.lines().nth(line - 1).unwrap_or(""));
        let end_column = if end.line == start.line && end.column > start.column {
            end.column
        } else {
            text.chars().count().max(start.column + 1)
        };
        Location::new(&self.name, line, start.column + 1, end_column + 1, text)
    }

    /// The line holding byte `offset` (without its line break), found from the offset: not
    /// by counting lines from the start, which took seconds for 32,000 errors of one file.
    fn line_at(&self, offset: usize) -> Option<&str> {
        if !self.text.is_char_boundary(offset) {
            return None;
        }
        let start = self.text[..offset].rfind('\n').map_or(0, |i| i + 1);
        let end = self.text[offset..]
            .find('\n')
            .map_or(self.text.len(), |i| offset + i);
        Some(self.text[start..end].trim_end_matches('\r'))
    }

    /// Where byte `offset` of this source's text is (clamped to the text, and back to a
    /// character boundary).
    pub fn locate_byte(&self, offset: usize) -> Location {
        Location::at_byte(&self.name, self.text.as_bytes(), offset)
    }

    /// Every error of `e`, each at its span.
    pub fn errors(&self, e: syn::Error) -> Vec<Diagnostic> {
        e.into_iter()
            .map(|one| Diagnostic {
                level: Level::Error,
                message: one.to_string(),
                at: Some(self.locate(one.span())),
            })
            .collect()
    }
}

impl Location {
    /// Where byte `offset` of `bytes` (text read from `file`, UTF-8 or not) is: its line, its
    /// column in characters (an invalid byte counts as one), the line's text (invalid bytes
    /// replaced).
    pub fn at_byte(file: &str, bytes: &[u8], offset: usize) -> Location {
        let offset = offset.min(bytes.len());
        let start = bytes[..offset]
            .iter()
            .rposition(|b| *b == b'\n')
            .map_or(0, |p| p + 1);
        let end = bytes[offset..]
            .iter()
            .position(|b| *b == b'\n')
            .map_or(bytes.len(), |p| offset + p);
        let line = 1 + bytes[..start].iter().filter(|b| **b == b'\n').count();
        let column = 1 + String::from_utf8_lossy(&bytes[start..offset])
            .chars()
            .count();
        let text = String::from_utf8_lossy(&bytes[start..end]);
        Location::new(file, line, column, column + 1, text.trim_end_matches('\r'))
    }

    /// Columns `[column, end_column)` (1-based characters) of `line` of `file`, whose text
    /// is `text`: keeps only the part of `text` a diagnostic shows.
    pub fn new(file: &str, line: usize, column: usize, end_column: usize, text: &str) -> Location {
        let (shown, start, width) = window(text, column, end_column);
        Location {
            file: file.to_string(),
            line,
            column,
            end_column,
            shown,
            mark: (start, width),
        }
    }
}

/// The most characters of a source line a diagnostic shows: a longer line is shown around
/// its span, cut with `...`.
pub const SHOWN_LINE_CHARS: usize = 100;

/// The part of `text` a diagnostic shows for columns `[column, end_column)` (1-based chars):
/// the shown text, the span's 0-based start in it and its width. Keeps only the shown part of
/// a long line, so thousands of errors on a 1 MiB line hold kilobytes, not gigabytes (each
/// still scans its line once: time grows with errors x line length).
fn window(text: &str, column: usize, end_column: usize) -> (String, usize, usize) {
    // Control characters (a terminal's escape sequences) are shown as one replacement each.
    let shown_char = |c: char| {
        if c.is_control() && c != '\t' {
            char::REPLACEMENT_CHARACTER
        } else {
            c
        }
    };
    let start = column.saturating_sub(1);
    let width = end_column.saturating_sub(column).max(1);
    let len = text.chars().count();
    if len <= SHOWN_LINE_CHARS {
        return (text.chars().map(shown_char).collect(), start, width);
    }
    let from = start
        .saturating_sub(SHOWN_LINE_CHARS / 3)
        .min(len.saturating_sub(SHOWN_LINE_CHARS));
    let to = (from + SHOWN_LINE_CHARS).min(len);
    let mut shown = String::new();
    if from > 0 {
        shown.push_str("...");
    }
    let lead = shown.chars().count();
    shown.extend(chars_between(text, from, to).chars().map(shown_char));
    if to < len {
        shown.push_str("...");
    }
    let at = lead + start.saturating_sub(from);
    let width = width.min(to.saturating_sub(start).max(1));
    (shown, at, width)
}

/// Characters `[from, to)` of `text` (clamped to it).
fn chars_between(text: &str, from: usize, to: usize) -> &str {
    if text.is_ascii() {
        return &text[from.min(text.len())..to.min(text.len())];
    }
    let byte = |k: usize| text.char_indices().nth(k).map_or(text.len(), |(i, _)| i);
    let (a, b) = (byte(from), byte(to));
    &text[a..b.max(a)]
}

impl Diagnostic {
    pub fn error(message: impl Into<String>) -> Diagnostic {
        Diagnostic {
            level: Level::Error,
            message: message.into(),
            at: None,
        }
    }

    /// rustc's layout: message, location, the line, the underline.
    pub fn render(&self) -> String {
        let mut out = String::new();
        let level = match self.level {
            Level::Error => "error",
            Level::Warning => "warning",
        };
        let mut lines = self.message.lines();
        let _ = writeln!(out, "{level}: {}", lines.next().unwrap_or(""));
        let Some(at) = &self.at else {
            for l in lines {
                let _ = writeln!(out, "  {l}");
            }
            return out;
        };
        let gutter = at.line.to_string().len();
        let pad = " ".repeat(gutter);
        let _ = writeln!(out, "{pad}--> {}:{}:{}", at.file, at.line, at.column);
        let _ = writeln!(out, "{pad} |");
        let (start, width) = at.mark;
        let _ = writeln!(out, "{} | {}", at.line, at.shown);
        let _ = writeln!(out, "{pad} | {}{}", " ".repeat(start), "^".repeat(width));
        for l in lines {
            let _ = writeln!(out, "{pad} = {l}");
        }
        out
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::decl;
    use proc_macro2::TokenStream;

    /// A diagnostic keeps the part of its line it shows, not the line: 200 errors on one
    /// 1 MiB line held 200 MiB (32,000 of them: 24 GB, and `tma header` was killed).
    #[test]
    fn a_location_keeps_only_what_it_shows() {
        let keys: Vec<String> = (0..200).map(|i| format!("k{i}")).collect();
        let pad = " ".repeat((1 << 20) - 10_000);
        let text = format!(
            "tma_1d! {{ A: u8, global = [64], boxed = [64],{pad}{} }}",
            keys.join(", ")
        );
        let source = Source {
            name: "wide.tma".into(),
            text,
        };
        let diags = decl::read(&source).err().unwrap();
        assert_eq!(diags.len(), 200, "{:?}", &diags[..2]);
        let kept: usize = diags.iter().map(|d| format!("{d:?}").len()).sum();
        assert!(kept < 200 * 1_000, "{kept} bytes kept for 200 diagnostics");
        // Each still shows its key, underlined, and where it is.
        let last = diags[199].render();
        assert!(last.contains("unknown key `k199`"), "{last}");
        assert!(
            last.contains("1 | ...") && last.contains("k198, k199 }\n"),
            "{last}"
        );
        assert!(last.contains(" --> wide.tma:1:"), "{last}");
        let at = diags[199].at.as_ref().unwrap();
        let under: String = at.shown.chars().skip(at.mark.0).take(at.mark.1).collect();
        assert_eq!(under, "k199");
    }

    /// Lines are found from the span's byte offset: CRLF line ends and a line after a long one
    /// show as before.
    #[test]
    fn spans_locate_their_own_line() {
        let text = format!("// {}\r\na b\r\n  ccc\r\n", "é".repeat(300));
        let source = Source {
            name: "t".into(),
            text,
        };
        let tokens: TokenStream = source.text.parse().unwrap();
        let spans: Vec<Span> = tokens.into_iter().map(|t| t.span()).collect();
        let at = source.locate(spans[2]);
        assert_eq!((at.line, at.column, at.end_column), (3, 3, 6));
        assert_eq!((at.shown.as_str(), at.mark), ("  ccc", (2, 3)));
        let at = source.locate(spans[1]);
        assert_eq!((at.line, at.shown.as_str(), at.mark), (2, "a b", (2, 1)));
    }
}
