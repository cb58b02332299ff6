//! What the runtime reads from PTX text: which kernels use dynamic shared memory, and which
//! pipelines (the `// tma-pipeline-use <id>` comment each pipeline's `init()` leaves).
//!
//! NVRTC declares every `extern __shared__` array once at module scope
//! (`.extern .shared .align 16 .b8 raw[];`), and a kernel that uses one names it in its body
//! or in a `.func` it calls. Which kernel uses it decides whether a launch's dynamic shared
//! memory must hold the source's tiles: a kernel that keeps its tiles in static shared memory,
//! or uses none, is not held to them.

use std::collections::{HashMap, HashSet};

/// The prelude's `extern __shared__` array the device debug checks bound tiles with.
const DEBUG_DYNAMIC_SMEM: &str = "tma_dynamic_smem";

/// Whether entry `kernel` of `ptx` names an `extern .shared` array, itself or through the
/// functions it calls (transitively); `None` when `ptx` has no entry `kernel`.
pub(crate) fn uses_dynamic_smem(ptx: &str, kernel: &str) -> Option<bool> {
    let externs: HashSet<&str> = ptx
        .lines()
        .filter_map(|l| {
            let rest = l.trim().strip_prefix(".extern .shared")?;
            let name = rest.split_whitespace().last()?;
            Some(name.split('[').next().unwrap_or(name).trim_end_matches(';'))
        })
        // The debug mode's own view of dynamic shared memory (it only reads its bounds) is
        // not the kernel keeping tiles there.
        .filter(|name| *name != DEBUG_DYNAMIC_SMEM)
        .collect();
    let bodies = function_bodies(ptx);
    let entry = match bodies.get(kernel) {
        Some((true, body)) => *body,
        _ => return None,
    };
    let mut seen: HashSet<&str> = HashSet::new();
    let mut todo: Vec<&str> = vec![entry];
    while let Some(body) = todo.pop() {
        for word in words(body) {
            if externs.contains(word) {
                return Some(true);
            }
            if let Some((false, callee)) = bodies.get(word) {
                if seen.insert(word) {
                    todo.push(callee);
                }
            }
        }
    }
    Some(false)
}

/// The comment a pipeline's `init()` puts in the PTX of every kernel that calls it (an inline
/// `asm` of a comment: no instruction).
const PIPELINE_USE: &str = "// tma-pipeline-use ";

/// The ids of the pipelines entry `kernel` of `ptx` initialises, itself or through the
/// functions it calls, sorted, each once; `None` when `ptx` has no entry `kernel`.
pub(crate) fn pipelines_used(ptx: &str, kernel: &str) -> Option<Vec<u32>> {
    let bodies = function_bodies(ptx);
    let entry = match bodies.get(kernel) {
        Some((true, body)) => *body,
        _ => return None,
    };
    let mut ids = Vec::new();
    let mut seen: HashSet<&str> = HashSet::new();
    let mut todo: Vec<&str> = vec![entry];
    while let Some(body) = todo.pop() {
        ids.extend(body.lines().filter_map(|l| {
            l.trim()
                .strip_prefix(PIPELINE_USE)
                .and_then(|id| id.trim().parse::<u32>().ok())
        }));
        for word in words(body) {
            if let Some((false, callee)) = bodies.get(word) {
                if seen.insert(word) {
                    todo.push(callee);
                }
            }
        }
    }
    ids.sort_unstable();
    ids.dedup();
    Some(ids)
}

/// Name -> (is an entry, its body) of every `.entry` and `.func` defined in `ptx`. At the top
/// level of PTX only function bodies open braces, and each follows its header.
fn function_bodies(ptx: &str) -> HashMap<&str, (bool, &str)> {
    let mut out = HashMap::new();
    let mut header: Option<(&str, bool)> = None;
    let (mut depth, mut start, mut offset) = (0usize, 0usize, 0usize);
    for line in ptx.split_inclusive('\n') {
        let code = line.split("//").next().unwrap_or(line);
        if depth == 0 {
            if let Some(h) = header_of(code) {
                header = Some(h);
            }
        }
        for (i, c) in code.char_indices() {
            match c {
                '{' => {
                    if depth == 0 {
                        start = offset + i;
                    }
                    depth += 1;
                }
                '}' if depth > 0 => {
                    depth -= 1;
                    if depth == 0 {
                        if let Some((name, is_entry)) = header.take() {
                            out.insert(name, (is_entry, &ptx[start..=offset + i]));
                        }
                    }
                }
                _ => {}
            }
        }
        offset += line.len();
    }
    out
}

/// The function a header line starts, `(name, is an entry)`: `.visible .entry k(`,
/// `.func _Z1fv(`, `.func (.param .b32 func_retval0) _Z1gv(`.
fn header_of(line: &str) -> Option<(&str, bool)> {
    let (at, is_entry) =
        [(".entry", true), (".func", false)]
            .into_iter()
            .find_map(|(word, is_entry)| {
                let at = line.find(word)?;
                let directives_only = line[..at].split_whitespace().all(|w| w.starts_with('.'));
                let ends = !line[at + word.len()..].starts_with(is_ident);
                (directives_only && ends).then_some((at + word.len(), is_entry))
            })?;
    let mut rest = line[at..].trim_start();
    if let Some(r) = rest.strip_prefix('(') {
        rest = r.split_once(')')?.1.trim_start();
    }
    let name = rest.split(|c: char| !is_ident(c)).next()?;
    (!name.is_empty()).then_some((name, is_entry))
}

/// A character of a PTX symbol (registers start with `%` and are never symbols).
fn is_ident(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_' || c == '$'
}

fn words(text: &str) -> impl Iterator<Item = &str> {
    text.split(|c: char| !is_ident(c)).filter(|w| !w.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Shaped like NVRTC 13's output for four kernels: `a` and `b` use the extern array
    /// `raw`, `c` only static shared memory, `d` calls a function that uses it.
    const PTX: &str = r#"
.version 9.0
.target sm_90a
.address_size 64
.extern .shared .align 1024 .b8 raw[];
.func  (.param .b32 func_retval0) _Z4peekv(
	.param .b32 _Z4peekv_param_0
);
.visible .entry a(
	.param .u64 a_param_0
)
{
	mov.u64 	%rd4, raw;
	ld.shared.u8 	%r2, [raw+3];
	ret;
}
.visible .entry b(
	.param .u64 b_param_0
)
{
	{ // callseq 0
	}
	ld.shared.u8 	%r2, [raw+5];
}
.visible .entry c(
	.param .u64 c_param_0
)
{
	.shared .align 1 .b8 _ZZ1cE2st[64];
	ld.shared.u8 	%r2, [_ZZ1cE2st+5];
	ret;
}
.visible .entry d(
	.param .u64 d_param_0
)
{
	call.uni (retval0), _Z4peekv, (param0);
	ret;
}
.func  (.param .b32 func_retval0) _Z4peekv(
	.param .b32 _Z4peekv_param_0
)
{
	ld.shared.u8 	%r1, [raw];
	st.param.b32 	[func_retval0], %r1;
	ret;
}
.visible .entry raw_free(
)
{
	ret;
}
.visible .entry p(
)
{
	// begin inline asm
	// tma-pipeline-use 2
	// end inline asm
	call.uni _Z4initv, ();
	ret;
}
.func _Z4initv(
)
{
	// begin inline asm
	// tma-pipeline-use 0
	// end inline asm
	// begin inline asm
	// tma-pipeline-use 2
	// end inline asm
	ret;
}
"#;

    #[test]
    fn kernels_that_name_an_extern_shared_array_use_dynamic_smem() {
        let uses = |k| uses_dynamic_smem(PTX, k);
        assert_eq!(uses("a"), Some(true));
        assert_eq!(uses("b"), Some(true), "nested braces in the body");
        assert_eq!(uses("c"), Some(false), "static shared memory only");
        assert_eq!(uses("d"), Some(true), "through a called function");
        assert_eq!(
            uses("raw_free"),
            Some(false),
            "a name containing `raw` is not `raw`"
        );
        assert_eq!(uses("e"), None);
        assert_eq!(uses("_Z4peekv"), None, "a function is not a kernel");
        assert_eq!(uses_dynamic_smem("", "a"), None);
        // The debug checks read the prelude's `tma_dynamic_smem` to bound tiles: that alone
        // does not put tiles there.
        let debug = PTX.replace("raw", DEBUG_DYNAMIC_SMEM);
        assert_eq!(uses_dynamic_smem(&debug, "a"), Some(false));
    }

    #[test]
    fn kernels_name_the_pipelines_they_initialise() {
        assert_eq!(
            pipelines_used(PTX, "p"),
            Some(vec![0, 2]),
            "itself and a callee"
        );
        assert_eq!(pipelines_used(PTX, "a"), Some(vec![]));
        assert_eq!(
            pipelines_used(PTX, "_Z4initv"),
            None,
            "a function is not a kernel"
        );
        assert_eq!(pipelines_used(PTX, "e"), None);
    }
}
