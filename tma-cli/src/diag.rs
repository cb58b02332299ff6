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
        let _ = writeln!(out, "{} | {}", at.line, at.text);
        let width = at.end_column.saturating_sub(at.column).max(1);
        let _ = writeln!(
            out,
            "{pad} | {}{}",
            " ".repeat(at.column - 1),
            "^".repeat(width)
        );
        for l in lines {
            let _ = writeln!(out, "{pad} = {l}");
        }
        out
    }
}
