//! What the runtime reads from PTX text: which kernels use dynamic shared memory, and which
//! pipelines (the marker each pipeline's `init()` leaves: a scoped declaration of the register
//! `%tma_pipeline_use_<id>`, no instruction).
//!
//! NVRTC declares every `extern __shared__` array once at module scope
//! (`.extern .shared .align 16 .b8 raw[];`), and a kernel that uses one names it in its body
//! or in a `.func` it calls. Which kernel uses it decides whether a launch's dynamic shared
//! memory must hold the source's tiles: a kernel that keeps its tiles in static shared memory,
//! or uses none, is not held to them.
//!
//! Only PTX code is read, never its comments or strings ([`code_only`]): a comment in an
//! inline `asm` string (which NVRTC copies into the PTX) that names the extern array, or a
//! user-written `// tma-pipeline-use 7`, proves nothing. The pipeline marker is a register
//! declaration, which no comment and no C++ name can produce (NVRTC names its registers
//! `%r1`, `%rd2`, ..., and C++ identifiers never start with `%`).

use std::collections::{HashMap, HashSet};

/// The prelude's `extern __shared__` array the device debug checks bound tiles with.
const DEBUG_DYNAMIC_SMEM: &str = "tma_dynamic_smem";

/// Whether entry `kernel` of `ptx` names an `extern .shared` array, itself or through the
/// functions it calls (transitively); `None` when `ptx` has no entry `kernel`.
pub(crate) fn uses_dynamic_smem(ptx: &str, kernel: &str) -> Option<bool> {
    let code = code_only(ptx);
    let externs: HashSet<&str> = code
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
    let bodies = function_bodies(&code);
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

/// The register a pipeline's `init()` declares in the PTX of every kernel that calls it
/// (`asm volatile("{ .reg .b32 %tma_pipeline_use_<id>; }")`: a scoped declaration, no
/// instruction; ptxas drops it).
const PIPELINE_USE: &str = "%tma_pipeline_use_";

/// The ids of the pipelines entry `kernel` of `ptx` initialises, itself or through the
/// functions it calls, sorted, each once; `None` when `ptx` has no entry `kernel`. Only a
/// declaration `.reg .b32 %tma_pipeline_use_<id>` counts, never a comment.
pub(crate) fn pipelines_used(ptx: &str, kernel: &str) -> Option<Vec<u32>> {
    let code = code_only(ptx);
    let bodies = function_bodies(&code);
    let entry = match bodies.get(kernel) {
        Some((true, body)) => *body,
        _ => return None,
    };
    let mut ids = Vec::new();
    let mut seen: HashSet<&str> = HashSet::new();
    let mut todo: Vec<&str> = vec![entry];
    while let Some(body) = todo.pop() {
        ids.extend(body.split(';').filter_map(pipeline_use));
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

/// The pipeline id of one PTX statement (the text before a `;`, after any braces that open
/// a scope) when it is exactly `.reg .b32 %tma_pipeline_use_<id>`.
fn pipeline_use(statement: &str) -> Option<u32> {
    let statement =
        statement.trim_start_matches(|c: char| c.is_whitespace() || c == '{' || c == '}');
    let mut tokens = statement.split_whitespace();
    let (Some(".reg"), Some(".b32"), Some(name), None) =
        (tokens.next(), tokens.next(), tokens.next(), tokens.next())
    else {
        return None;
    };
    let id = name.strip_prefix(PIPELINE_USE)?;
    // Digits only: `u32::from_str` would take a `+`.
    if id.is_empty() || !id.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    id.parse().ok()
}

/// `ptx` with every comment (`// ..` to the end of the line, `/* .. */`) and the inside of
/// every string literal (`.file 1 "/a {b}//c.cu"`) blanked out, newlines kept: what is left
/// is PTX code, the same length, the same lines.
pub(crate) fn code_only(ptx: &str) -> String {
    #[derive(Clone, Copy, PartialEq)]
    enum In {
        Code,
        Line,
        Block,
        Str,
        StrEscape,
    }
    let mut state = In::Code;
    let mut out = String::with_capacity(ptx.len());
    let mut chars = ptx.chars().peekable();
    while let Some(c) = chars.next() {
        let blank = |c: char| if c == '\n' { '\n' } else { ' ' };
        match state {
            In::Code => match (c, chars.peek()) {
                ('/', Some('/')) => {
                    chars.next();
                    out.push_str("  ");
                    state = In::Line;
                }
                ('/', Some('*')) => {
                    chars.next();
                    out.push_str("  ");
                    state = In::Block;
                }
                ('"', _) => {
                    out.push('"');
                    state = In::Str;
                }
                _ => out.push(c),
            },
            In::Line => {
                out.push(blank(c));
                if c == '\n' {
                    state = In::Code;
                }
            }
            In::Block => {
                if c == '*' && chars.peek() == Some(&'/') {
                    chars.next();
                    out.push_str("  ");
                    state = In::Code;
                } else {
                    out.push(blank(c));
                }
            }
            In::Str => match c {
                '"' => {
                    out.push('"');
                    state = In::Code;
                }
                '\\' => {
                    out.push(' ');
                    state = In::StrEscape;
                }
                // A string does not run past its line (a malformed one stops there).
                '\n' => {
                    out.push('\n');
                    state = In::Code;
                }
                _ => out.push(' '),
            },
            In::StrEscape => {
                out.push(blank(c));
                state = if c == '\n' { In::Code } else { In::Str };
            }
        }
    }
    out
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

/// The symbols `text` names: identifiers, not registers (`%rd4` is no use of a symbol `rd4`).
fn words(text: &str) -> impl Iterator<Item = &str> {
    text.split(|c: char| !is_ident(c) && c != '%')
        .filter(|w| !w.is_empty() && !w.starts_with('%'))
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
	{ .reg .b32 %tma_pipeline_use_2; }
	// end inline asm
	call.uni _Z4initv, ();
	ret;
}
.func _Z4initv(
)
{
	// begin inline asm
	{ .reg .b32 %tma_pipeline_use_0; }
	// end inline asm
	// begin inline asm
	{
	.reg .b32   %tma_pipeline_use_2;
	}
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

    /// Forgeries: a kernel of NVRTC's shape whose inline `asm` strings (copied into the PTX
    /// between `begin/end inline asm`) hold comments that name the extern array `raw`, the
    /// old comment marker and the new marker, a block comment that spans lines and braces, a
    /// string with `//` and braces, and a register whose name contains `raw`. None of it is
    /// a use of `raw` or of a pipeline.
    const FORGED: &str = r#"
.version 9.0
.target sm_90a
.address_size 64
.file	1 "/tmp/{odd}//dir/k.cu"
.extern .shared .align 16 .b8 raw[];
// .extern .shared .align 16 .b8 st[];
.shared .align 4 .b8 st[64];
.visible .entry forged(
	.param .u64 forged_param_0
)
{
	.reg .b64 	%rd<3>;
	.reg .b32 	%raw<2>;
	// begin inline asm
	// keeps its tiles in raw (a comment, no use)
	// end inline asm
	// begin inline asm
	// tma-pipeline-use 7
	// end inline asm
	// begin inline asm
	// { .reg .b32 %tma_pipeline_use_5; }
	// a note; .reg .b32 %tma_pipeline_use_12; and more
	// end inline asm
	/* { .reg .b32 %tma_pipeline_use_6; }
	   mov.u64 %rd1, raw; } */
	// begin inline asm
	{ .reg .b32 %tma_pipeline_use_x; }
	{ .reg .b32 %tma_pipeline_use_+3; }
	{ .reg .b32 %tma_pipeline_use_8, %r9; }
	{ .reg .b64 %tma_pipeline_use_9; }
	{ .reg .b32 tma_pipeline_use_4; }
	// end inline asm
	mov.u32 	%raw1, 0;
	mov.u64 	%rd1, st;
	ret;
}
.visible .entry honest(
)
{
	/* a comment before a use */ mov.u64 %rd1, raw; // and after
	// begin inline asm
	{ .reg .b32 %tma_pipeline_use_3; } // tma-pipeline-use 11
	// end inline asm
	ret;
}
"#;

    #[test]
    fn comments_and_strings_forge_no_use() {
        assert_eq!(
            uses_dynamic_smem(FORGED, "forged"),
            Some(false),
            "comments naming `raw`, a register `%raw1`"
        );
        assert_eq!(
            pipelines_used(FORGED, "forged"),
            Some(vec![]),
            "commented markers, malformed markers"
        );
        assert_eq!(uses_dynamic_smem(FORGED, "honest"), Some(true));
        assert_eq!(pipelines_used(FORGED, "honest"), Some(vec![3]));
        // The commented-out extern is no extern: `st` is static shared memory.
        let st_is_extern = FORGED.replace("\n.shared .align 4 .b8 st[64];", "");
        assert_eq!(uses_dynamic_smem(&st_is_extern, "forged"), Some(false));
        let st_is_extern = st_is_extern.replace("// .extern", ".extern");
        assert_eq!(uses_dynamic_smem(&st_is_extern, "forged"), Some(true));
    }

    #[test]
    fn code_only_blanks_comments_and_strings_and_keeps_lines() {
        let ptx = "a // b { \n/* c\n } */ d \"e // { \\\" f\" g\n";
        let code = code_only(ptx);
        assert_eq!(code.len(), ptx.len());
        assert_eq!(code.lines().count(), ptx.lines().count());
        assert_eq!(
            code.split_whitespace().collect::<Vec<_>>(),
            ["a", "d", "\"", "\"", "g"]
        );
        // An unterminated block comment runs to the end; an unterminated string to its line.
        assert_eq!(code_only("x /* y\nz").trim(), "x");
        assert_eq!(
            code_only("\"y\nz").split_whitespace().collect::<Vec<_>>(),
            ["\"", "z"]
        );
    }
}
