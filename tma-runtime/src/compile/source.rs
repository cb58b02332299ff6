//! The CUDA source going in: hashed once ([`Source`]), with the typed description of what it
//! declares when it was rendered ([`Source::kernel`]), and numbered for compile errors as
//! NVRTC numbers it.

use std::fmt::Write as _;
use std::sync::Arc;

use tma_core::facts::SourceFacts;

use super::hash::{fingerprint, fingerprint_seeded};

/// A CUDA source with its fingerprint computed once. Hold one for hot paths: a cached
/// compile of a `Source` costs a hash-map lookup, not a pass over the text.
///
/// A source rendered by [`KernelSource`](tma_core::render::KernelSource) and given with
/// [`Source::kernel`] carries what it declares ([`SourceFacts`]: tiles, pipelines, kernel
/// plans); the compiled module carries it on ([`Compiled::facts`](super::Compiled::facts)) and
/// the runtime names hang records and checks launches with it. Text alone ([`Source::new`],
/// `&str`, `String`) carries none: its records name tiles and pipelines by id, and its launches
/// are checked against the kernel's parameters and the hardware only. Nothing is read out of
/// the text; from its PTX, only what spares the driver a query that fails by design (each
/// kernel's parameter count, whether the hang record exists).
#[derive(Clone, Debug)]
pub struct Source {
    text: Arc<str>,
    /// The text's and the description's: the caches' key.
    fingerprint: u128,
    facts: Option<Arc<SourceFacts>>,
}

impl Source {
    /// Takes `text` and hashes it, once. No description: see [`Source::kernel`].
    pub fn new(text: impl Into<Arc<str>>) -> Source {
        let text = text.into();
        let fingerprint = fingerprint(text.as_bytes());
        Source {
            text,
            fingerprint,
            facts: None,
        }
    }
    /// `text` with the typed description of what it declares (as
    /// [`KernelSource::facts`](tma_core::render::KernelSource::facts) gives it for the text
    /// [`KernelSource::build`](tma_core::render::KernelSource::build) gives): the compiled
    /// module carries it. [`Source::kernel`] makes both from one `KernelSource`.
    pub fn described(text: impl Into<Arc<str>>, facts: SourceFacts) -> Source {
        let mut source = Source::new(text);
        let described = format!("{:032x} {facts:?}", source.fingerprint);
        source.fingerprint = fingerprint_seeded(described.as_bytes(), 0x0074_6d61_6661_6374);
        source.facts = Some(Arc::new(facts));
        source
    }
    /// [`KernelSource::build`](tma_core::render::KernelSource::build) with its description
    /// ([`KernelSource::facts`](tma_core::render::KernelSource::facts)): tile names, dim names
    /// and pipeline names for hang and check records, the tiles' target for the compile's
    /// arch, and what launches are checked against (its plans' launches; for a kernel without
    /// a plan, the tiles and pipelines it holds outside its plans).
    pub fn kernel(
        source: &tma_core::render::KernelSource,
    ) -> Result<Source, tma_core::render::RenderError> {
        let text = source.build()?;
        Ok(Source::described(text, source.facts()))
    }
    /// `text` whose fingerprint was computed already (by [`Compiler::compile`](super::Compiler::compile)).
    pub(super) fn with_fingerprint(text: &str, fingerprint: u128) -> Source {
        Source {
            text: text.into(),
            fingerprint,
            facts: None,
        }
    }
    /// The text, shared (the in-process cache keeps it to compare `&str` sources with).
    pub(super) fn shared_text(&self) -> Arc<str> {
        self.text.clone()
    }
    /// The CUDA source.
    pub fn text(&self) -> &str {
        &self.text
    }
    /// What the source declares, when it was given ([`Source::kernel`], [`Source::described`]).
    pub fn facts(&self) -> Option<&SourceFacts> {
        self.facts.as_deref()
    }
    /// The kernel plans' launches it declares (none without a description).
    pub fn plans(&self) -> &[tma_core::plan::LaunchPlan] {
        self.facts.as_deref().map_or(&[], |f| &f.plans)
    }
    /// The caches' key: the text's fingerprint, and the description's (computed once, in
    /// [`Source::new`] / [`Source::described`]).
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

/// One line of a source as NVRTC numbers it: the file its messages name and the line number.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct NumberedLine<'a> {
    /// Index into [`Numbering::files`].
    pub file: usize,
    pub number: u64,
    pub text: &'a str,
    /// This line is a `#line` directive: the index of the file the lines after it belong to.
    pub directive: Option<usize>,
}

/// A source's lines numbered as NVRTC numbers them (see [`numbered_source`]).
#[derive(Clone, Debug)]
pub(super) struct Numbering<'a> {
    /// File names, [`PROGRAM_NAME`] first.
    pub files: Vec<String>,
    pub lines: Vec<NumberedLine<'a>>,
    /// Width of the widest line number (at least 3).
    pub width: usize,
}

impl<'a> Numbering<'a> {
    /// The name of file `i` (empty when out of range).
    pub fn file(&self, i: usize) -> &str {
        self.files.get(i).map_or("", String::as_str)
    }

    pub fn new(source: &'a str) -> Numbering<'a> {
        let mut files = vec![PROGRAM_NAME.to_string()];
        let mut lines = Vec::new();
        let (mut file, mut number) = (0usize, 1u64);
        let mut widest = 1u64;
        for text in source.lines() {
            let (this_file, this_number) = (file, number);
            widest = widest.max(number);
            number = number.saturating_add(1);
            let directive = line_directive(text).map(|(line, named)| {
                if let Some(named) = named {
                    file = match files.iter().position(|f| *f == named) {
                        Some(i) => i,
                        None => {
                            files.push(named);
                            files.len() - 1
                        }
                    };
                }
                number = line;
                file
            });
            lines.push(NumberedLine {
                file: this_file,
                number: this_number,
                text,
                directive,
            });
        }
        Numbering {
            files,
            lines,
            width: widest.to_string().len().max(3),
        }
    }
}

/// `source` with right-aligned line numbers, counted as NVRTC counts them in its messages:
/// lines of the program as `tma.cu`, and after a `#line <n> "<file>"` directive (e.g. from
/// [`KernelSource::body_at`](tma_core::render::KernelSource::body_at)) from `n`, under a
/// `--- <file> ---` heading.
pub fn numbered_source(source: &str) -> String {
    let numbering = Numbering::new(source);
    let w = numbering.width;
    let mut out = String::with_capacity(source.len() + numbering.lines.len() * (w + 3));
    for l in &numbering.lines {
        let _ = writeln!(out, "{:>w$} | {}", l.number, l.text);
        if let Some(file) = l.directive {
            let _ = writeln!(out, "{:>w$} --- {} ---", "", numbering.file(file));
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
