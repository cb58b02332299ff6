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
/// line's text.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Location {
    pub file: String,
    pub line: usize,
    pub column: usize,
    pub end_column: usize,
    pub text: String,
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
        let text = self.text.lines().nth(line - 1).unwrap_or("").to_string();
        let end_column = if end.line == start.line && end.column > start.column {
            end.column
        } else {
            text.chars().count().max(start.column + 1)
        };
        Location {
            file: self.name.clone(),
            line,
            column: start.column + 1,
            end_column: end_column + 1,
            text,
        }
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
        Location {
            file: file.to_string(),
            line,
            column,
            end_column: column + 1,
            text: String::from_utf8_lossy(&bytes[start..end])
                .trim_end_matches('\r')
                .to_string(),
        }
    }
}

/// The most characters of a source line a diagnostic shows: a longer line is shown around
/// its span, cut with `...`.
pub const SHOWN_LINE_CHARS: usize = 100;

/// The part of `text` a diagnostic shows for columns `[column, end_column)` (1-based chars):
/// the shown text, the span's 0-based start in it and its width.
fn window(text: &str, column: usize, end_column: usize) -> (String, usize, usize) {
    // Control characters (a terminal's escape sequences) are shown as one replacement each.
    let chars: Vec<char> = text
        .chars()
        .map(|c| {
            if c.is_control() && c != '\t' {
                char::REPLACEMENT_CHARACTER
            } else {
                c
            }
        })
        .collect();
    let text: String = chars.iter().collect();
    let start = column.saturating_sub(1);
    let width = end_column.saturating_sub(column).max(1);
    if chars.len() <= SHOWN_LINE_CHARS {
        return (text, start, width);
    }
    let from = start
        .saturating_sub(SHOWN_LINE_CHARS / 3)
        .min(chars.len().saturating_sub(SHOWN_LINE_CHARS));
    let to = (from + SHOWN_LINE_CHARS).min(chars.len());
    let mut shown = String::new();
    if from > 0 {
        shown.push_str("...");
    }
    let lead = shown.chars().count();
    shown.extend(&chars[from..to]);
    if to < chars.len() {
        shown.push_str("...");
    }
    let at = lead + start.saturating_sub(from);
    let width = width.min(to.saturating_sub(start).max(1));
    (shown, at, width)
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
        let (text, start, width) = window(&at.text, at.column, at.end_column);
        let _ = writeln!(out, "{} | {}", at.line, text);
        let _ = writeln!(out, "{pad} | {}{}", " ".repeat(start), "^".repeat(width));
        for l in lines {
            let _ = writeln!(out, "{pad} = {l}");
        }
        out
    }
}
