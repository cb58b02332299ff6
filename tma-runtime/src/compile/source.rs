//! The CUDA source going in: hashed once ([`Source`]), and numbered for compile errors as
//! NVRTC numbers it. (Its tile lines are read with [`tma_core::manifest::declared_tiles`].)

use std::fmt::Write as _;
use std::sync::Arc;

use tma_core::plan::LaunchPlan;

use super::hash::{fingerprint, fingerprint_seeded};

/// A CUDA source with its fingerprint computed once. Hold one for hot paths: a cached
/// compile of a `Source` costs a hash-map lookup, not a pass over the text.
#[derive(Clone, Debug)]
pub struct Source {
    text: Arc<str>,
    fingerprint: u128,
    plans: Arc<[LaunchPlan]>,
}

impl Source {
    /// Takes `text` and hashes it, once.
    pub fn new(text: impl Into<Arc<str>>) -> Source {
        let text = text.into();
        let fingerprint = fingerprint(text.as_bytes());
        Source {
            text,
            fingerprint,
            plans: Arc::from(Vec::new()),
        }
    }
    /// `text` with the launches of the kernel plans it renders
    /// ([`KernelSource::launch_plans`](tma_core::render::KernelSource::launch_plans)): the
    /// compiled module carries them ([`Compiled::plans`](super::Compiled::plans)), and each
    /// plan kernel's launches are checked against its plan, not against facts read from the
    /// source's comments or PTX. The fingerprint covers the plans.
    pub fn planned(text: impl Into<Arc<str>>, plans: impl Into<Vec<LaunchPlan>>) -> Source {
        let mut source = Source::new(text);
        let plans: Vec<LaunchPlan> = plans.into();
        if !plans.is_empty() {
            let described = format!("{:032x} {plans:?}", source.fingerprint);
            source.fingerprint = fingerprint_seeded(described.as_bytes(), 0x0074_6d61_706c_616e);
            source.plans = Arc::from(plans);
        }
        source
    }
    /// [`KernelSource::build`](tma_core::render::KernelSource::build) with its plans'
    /// launches ([`Source::planned`]).
    pub fn kernel(
        source: &tma_core::render::KernelSource,
    ) -> Result<Source, tma_core::render::RenderError> {
        let text = source.build()?;
        Ok(Source::planned(text, source.launch_plans()))
    }
    /// The CUDA source.
    pub fn text(&self) -> &str {
        &self.text
    }
    /// The kernel plans' launches given with it ([`Source::planned`]).
    pub fn plans(&self) -> &[LaunchPlan] {
        &self.plans
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
        .map(|f| f.replace("\\\"", "\"").replace("\\\\", "\\"));
    Some((n, file))
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
    }
}
