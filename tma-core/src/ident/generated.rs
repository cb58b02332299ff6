//! What the generated CUDA already calls by name, read from the templates themselves, and what
//! each user name becomes in it.
//!
//! Every name a user gives lands in generated code: a tile `a` becomes `struct tma_a`,
//! `tma_encode_a` and the macro `TMA_TILE_a_DEFINED`; a dim `M` a coordinate member `M`, the
//! constants `BOX_M` and `EXTENT_M` and an encode parameter; a pipeline member `b` the
//! typedef `tile_b`, `OFFSET_b`, `smem_b(s)` and the parameters `b_map`, `b` of `load`; a named
//! barrier `x` `BARRIER_x`, `BARRIER_x_THREADS`, `sync_x()`, `arrive_x()` (`sync_x(c)`,
//! `arrive_x(c)` per consumer); a tile set `s` `struct tma_s` and the macro `TMA_S_PARAMS`
//! (upper-cased); a kernel plan `k` `struct tma_plan_k`, `TMA_PLAN_K_LAUNCH_BOUNDS` and the
//! kernel `k` itself; a plan region `r` the accessor `r(base ..)`, `OFFSET_r`, `BYTES_r`,
//! `tile_r`, ... Such a name must not meet an identifier or macro the templates define or use
//! where it lands, or the helpers stop compiling (a dim `TMA_DEBUG` only under
//! `-DTMA_DEBUG`, a tile `tile` only in a header, where `tma_encode_tile` is the shared encode
//! function).
//!
//! The table is derived, once per process, from the embedded template texts (`templates::ALL`,
//! `tma-core/src/templates.rs`): no list to keep, so a helper added to a template is reserved
//! as soon as it is written. The reading is a small lexer, not a C++ parser:
//!
//! 1. tera: comments and statements go, `{% include %}` and component calls are inlined, and
//!    each `{{ expr }}` becomes a placeholder. The expressions that put a user name into an
//!    identifier are listed in `USES` with how Rust computes them (`cuda` is
//!    `tma_pipe_<name>` in `pipeline.cuh.tera`, `params_macro` is `TMA_<NAME>_PARAMS`, ...), and
//!    the few that put a renderer-chosen one there (`c0`..`c4`, `TMA_RULE_<rule>`) as
//!    patterns; any other expression is a number or a code fragment.
//! 2. C++: comments, strings and `#include` / `#pragma` lines go; `#define`, `#ifdef`,
//!    `#ifndef`, `#undef` and `defined(..)` name macros; identifiers after `.`, `->` or `X::`
//!    are lookups in another scope and count only against a user name that becomes a macro.
//! 3. Scopes: braces split the text into namespace scope (namespaces and `extern "C"` merged),
//!    structs (their bodies with every member function in them, plus the struct's own name)
//!    and functions (parameters, template parameters and body). A user name that lands in one
//!    of them must differ from every identifier of that scope (what a member would shadow,
//!    what a parameter would hide) and from every macro; a user name that becomes a macro
//!    must differ from every identifier anywhere.
//!
//! And four rules that are policy, not derivation: no generated identifier may be a macro of
//! the system and CUDA headers a generated header includes ([`HEADER_MACROS`], a committed
//! list that `tests/nvcc_header.rs` checks against nvcc; `EOF`, `NULL`, `CUDA_VERSION`); no
//! name landing at namespace scope (a plan's kernel, an alias, any generated identifier
//! there) may be one those headers or NVRTC's declare there ([`CUDA_NAMES`], checked the
//! same way; `j0`, `min`, `printf`, `float4`, `size_t`, `cudaSuccess`), nor a kernel take a
//! name ptxas reserves ([`PTXAS_SYMBOLS`]); a name emitted bare (a dim, a pipeline or set
//! member, a plan region, an alias, a plan's kernel) must not start with `tma_` in any case,
//! the prefix of every name the generated code defines at namespace scope and of every macro
//! it defines; and an alias starts with an upper-case letter, as its convention is and CUDA's
//! own names mostly are not.
//!
//! Why read the templates at run time rather than keep a table (checked by a test) or generate
//! one in a build script: the texts read are the very ones the engine renders (one list,
//! `templates.rs`), so the table cannot lag behind a template, and nobody has a list to
//! forget; a build script would run the same lexer at build time for no gain. What Rust adds
//! (the forms in `USES`) is checked by rendering: `tests/generated_names.rs` renders every
//! template and fails on any identifier the table does not explain, and
//! `tests/generated_names_compile.rs` compiles random accepted declarations.
//!
//! Two user names of one declaration whose generated names meet in one scope (dims `x` and
//! `stride_x` give two encode parameters `stride_x`; pipeline members `a` and `a_map`) are
//! found by [`shared_generated_name`]; names of different declarations meeting at namespace
//! scope (tiles `a` and `encode_a`) by the renderer, from [`generated_names`].

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::sync::OnceLock;

use NameKind::*;

/// The kinds of user name that reach generated CUDA.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum NameKind {
    /// A tile's name (`struct tma_<name>`).
    Tile,
    /// A dim's name (a coordinate member, `BOX_<dim>`, an encode parameter).
    Dim,
    /// A pipeline's name (`struct tma_pipe_<name>`).
    Pipeline,
    /// A pipeline's stage tile member (`tile_<m>`, `smem_<m>`, `load`'s `<m>_map`, `<m>`).
    PipelineMember,
    /// Warp roles' name (`struct tma_roles_<name>`, `TMA_ROLES_<NAME>_LAUNCH_BOUNDS`).
    WarpRoles,
    /// A named barrier of warp roles (`BARRIER_<b>`, `sync_<b>`, `arrive_<b>`).
    NamedBarrier,
    /// A tile set's name (`struct tma_<set>`, `TMA_<SET>_PARAMS`).
    TileSet,
    /// A tile set's member (`typedef .. <m>`, `OFFSET_<m>`, the parameter `<m>_map`).
    SetMember,
    /// A kernel plan's name: its kernel's `extern "C" __global__` function (written by the
    /// user, at namespace scope), `struct tma_plan_<name>` and
    /// `TMA_PLAN_<NAME>_LAUNCH_BOUNDS`.
    KernelPlan,
    /// A region of a kernel plan (a staging or scratch region, and the plan's pipelines and
    /// tile sets by their names): the accessor `<r>(base ..)`, `OFFSET_<r>`, `BYTES_<r>`,
    /// `ALIGN_<r>`, `tile_<r>`, ... in `struct tma_plan_<name>`.
    PlanRegion,
    /// A kernel's alias of a tile (`using <alias> = tma_<tile>;`, written by
    /// [`crate::render::KernelSource::tile_as`] at namespace scope, beside every function and
    /// type CUDA declares there: it starts with an upper-case letter and is none of
    /// [`CUDA_NAMES`]).
    Alias,
}

impl NameKind {
    /// Every kind.
    pub const ALL: [NameKind; 11] = [
        NameKind::Tile,
        NameKind::Dim,
        NameKind::Pipeline,
        NameKind::PipelineMember,
        NameKind::WarpRoles,
        NameKind::NamedBarrier,
        NameKind::TileSet,
        NameKind::SetMember,
        NameKind::KernelPlan,
        NameKind::PlanRegion,
        NameKind::Alias,
    ];

    /// The kind in words, for messages.
    pub fn describe(self) -> &'static str {
        match self {
            NameKind::Tile => "tile name",
            NameKind::Dim => "dim name",
            NameKind::Pipeline => "pipeline name",
            NameKind::PipelineMember => "pipeline member",
            NameKind::WarpRoles => "warp roles name",
            NameKind::NamedBarrier => "named barrier",
            NameKind::TileSet => "tile set name",
            NameKind::SetMember => "tile set member",
            NameKind::KernelPlan => "kernel plan name",
            NameKind::PlanRegion => "plan region",
            NameKind::Alias => "tile alias",
        }
    }
}

/// How Rust turns a user name into the text of a template expression.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Case {
    /// `pre + name + suf`.
    Same,
    /// `(pre + name + suf)` upper-cased (`TMA_<SET>_PARAMS`).
    Upper,
    /// An encode function's parameter: `pre + name + suf`, or `dim_` before it where that is
    /// one of the function's own names ([`encode_param`]).
    EncodeParam,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Form {
    pre: &'static str,
    suf: &'static str,
    case: Case,
}

impl Form {
    const fn new(pre: &'static str, suf: &'static str, case: Case) -> Form {
        Form { pre, suf, case }
    }
    fn apply(&self, name: &str) -> String {
        let s = format!("{}{name}{}", self.pre, self.suf);
        match self.case {
            Case::Same => s,
            Case::Upper => s.to_ascii_uppercase(),
            Case::EncodeParam => encode_param(&s),
        }
    }
    fn is_bare(&self) -> bool {
        self.pre.is_empty() && self.suf.is_empty() && self.case != Case::Upper
    }
}

/// What a template expression inside an identifier stands for.
#[derive(Clone, Copy, Debug)]
enum Use {
    /// A user name of this kind, through each of these forms.
    User(NameKind, &'static [Form]),
    /// A name the renderer chooses: one of these patterns (`*`: any identifier characters,
    /// `#`: digits).
    Internal(&'static [&'static str]),
}

const SAME: &[Form] = &[Form::new("", "", Case::Same)];
const TMA: &[Form] = &[Form::new("tma_", "", Case::Same)];
const UPPER: &[Form] = &[Form::new("", "", Case::Upper)];
/// A run-time dim's encode parameters: its extent's and its stride's.
const ENCODE_PARAMS: &[Form] = &[
    Form::new("", "", Case::EncodeParam),
    Form::new("stride_", "", Case::EncodeParam),
];
/// The driver's enumerators (`CU_TENSOR_MAP_DATA_TYPE_BFLOAT16`, ...).
const CU: &[&str] = &["CU_TENSOR_MAP_*"];

const fn user(kind: NameKind, forms: &'static [Form]) -> Use {
    Use::User(kind, forms)
}
const fn internal(patterns: &'static [&'static str]) -> Use {
    Use::Internal(patterns)
}

/// The template expressions that put a name into an identifier, by template: a user's (and how
/// the renderer computes the expression from it) or one the renderer picks. Every other
/// expression renders a number or a code fragment whose names the template already holds
/// (the test `rendered_code_holds_only_names_the_table_explains` renders every template and
/// fails on an identifier this table does not explain). One exception: `plan.cuh.tera`'s
/// `r.cuda` names the struct of what a region holds (`tma_pipe_<p>`, `tma_<set>` or
/// `tma_<tile>`), which another declaration of the source defines and reserves; the plan only
/// refers to it, so it reserves nothing there.
#[rustfmt::skip]
const USES: &[(&str, &str, Use)] = &[
    ("components.tera", "d.label", user(Dim, SAME)),
    ("components.tera", "d.var", internal(&["c#"])),
    ("shape.cuh.tera", "d.label", user(Dim, SAME)),
    ("shape.cuh.tera", "d.pos", internal(&["j#"])),
    ("tile.cuh.tera", "name", user(Tile, SAME)),
    ("tile.cuh.tera", "cuda", user(Tile, TMA)),
    ("tile.cuh.tera", "d.label", user(Dim, SAME)),
    ("tile.cuh.tera", "d.var", internal(&["c#"])),
    ("tile.cuh.tera", "op", internal(&["*"])),
    ("im2col.cuh.tera", "name", user(Tile, SAME)),
    ("im2col.cuh.tera", "cuda", user(Tile, TMA)),
    ("im2col.cuh.tera", "d.label", user(Dim, SAME)),
    ("im2col.cuh.tera", "d.var", internal(&["c#", "o#"])),
    ("im2col.cuh.tera", "inner_var", internal(&["c#"])),
    ("im2col.cuh.tera", "v", internal(&["o#"])),
    ("operand.cuh.tera", "wgmma.kind | upper", internal(&["*"])),
    ("host_tile.cuh.tera", "name", user(Tile, SAME)),
    ("host_tile.cuh.tera", "cuda", user(Tile, TMA)),
    ("exercise.cu.tera", "name", user(Tile, SAME)),
    ("exercise.cu.tera", "cuda", user(Tile, TMA)),
    ("exercise.cu.tera", "d.label", user(Dim, SAME)),
    ("exercise.cu.tera", "d.var", internal(&["c#"])),
    ("exercise.cu.tera", "op", internal(&["*"])),
    ("encode_tile.cuh.tera", "name", user(Tile, SAME)),
    ("encode_tile.cuh.tera", "p.name", user(Dim, ENCODE_PARAMS)),
    ("encode_tile.cuh.tera", "dtype_cu", internal(CU)),
    ("encode_tile.cuh.tera", "interleave_cu", internal(CU)),
    ("encode_tile.cuh.tera", "swizzle_cu", internal(CU)),
    ("encode_tile.cuh.tera", "l2_cu", internal(CU)),
    ("encode_tile.cuh.tera", "oob_cu", internal(CU)),
    ("encode_im2col_tile.cuh.tera", "name", user(Tile, SAME)),
    ("encode_im2col_tile.cuh.tera", "p.name", user(Dim, ENCODE_PARAMS)),
    ("encode_im2col_tile.cuh.tera", "dtype_cu", internal(CU)),
    ("encode_im2col_tile.cuh.tera", "interleave_cu", internal(CU)),
    ("encode_im2col_tile.cuh.tera", "swizzle_cu", internal(CU)),
    ("encode_im2col_tile.cuh.tera", "l2_cu", internal(CU)),
    ("encode_im2col_tile.cuh.tera", "oob_cu", internal(CU)),
    ("mpk_tile.cuh.tera", "name", user(Tile, SAME)),
    ("mpk_tile.cuh.tera", "d.label", user(Dim, SAME)),
    ("mpk_tile.cuh.tera", "c.name", internal(&["GMEM_*", "SMEM_*"])),
    ("set.cuh.tera", "name", user(TileSet, SAME)),
    ("set.cuh.tera", "cuda", user(TileSet, TMA)),
    ("set.cuh.tera", "params_macro", user(TileSet, &[Form::new("TMA_", "_PARAMS", Case::Upper)])),
    ("set.cuh.tera", "m.name", user(SetMember, SAME)),
    ("set.cuh.tera", "m.cuda", user(Tile, TMA)),
    ("wgmma_exercise.cu.tera", "set", user(PlanRegion, SAME)),
    ("wgmma_exercise.cu.tera", "set | upper", user(TileSet, UPPER)),
    ("wgmma_exercise.cu.tera", "plan", user(KernelPlan, SAME)),
    ("wgmma_exercise.cu.tera", "cuda", user(KernelPlan, &[Form::new("tma_plan_", "", Case::Same)])),
    ("wgmma_exercise.cu.tera", "launch_macro", user(KernelPlan, &[Form::new("TMA_PLAN_", "_LAUNCH_BOUNDS", Case::Upper)])),
    ("pipeline.cuh.tera", "name", user(Pipeline, SAME)),
    ("pipeline.cuh.tera", "cuda", user(Pipeline, &[Form::new("tma_pipe_", "", Case::Same)])),
    ("pipeline.cuh.tera", "t.member", user(PipelineMember, SAME)),
    ("pipeline.cuh.tera", "t.cuda", user(Tile, TMA)),
    ("pipeline.cuh.tera", "d.label", user(Dim, SAME)),
    ("pipeline.cuh.tera", "d.var", internal(&["c#"])),
    ("roles.cuh.tera", "name", user(WarpRoles, SAME)),
    ("roles.cuh.tera", "cuda", user(WarpRoles, &[Form::new("tma_roles_", "", Case::Same)])),
    ("roles.cuh.tera", "launch_macro", user(WarpRoles, &[Form::new("TMA_ROLES_", "_LAUNCH_BOUNDS", Case::Upper)])),
    ("roles.cuh.tera", "b.name", user(NamedBarrier, SAME)),
    ("plan.cuh.tera", "name", user(KernelPlan, SAME)),
    ("plan.cuh.tera", "cuda", user(KernelPlan, &[Form::new("tma_plan_", "", Case::Same)])),
    ("plan.cuh.tera", "launch_macro", user(KernelPlan, &[Form::new("TMA_PLAN_", "_LAUNCH_BOUNDS", Case::Upper)])),
    ("plan.cuh.tera", "r.name", user(PlanRegion, SAME)),
    ("prelude.cuh.tera", "r.name", internal(&["*"])),
    ("prelude.cuh.tera", "h.name", internal(&["*"])),
    ("wgmma.cuh.tera", "t | upper", internal(&["*"])),
    ("wgmma_ops.cuh.tera", "op.n", internal(&["#"])),
    ("wgmma_ops.cuh.tera", "op.k", internal(&["#"])),
    ("wgmma_ops.cuh.tera", "op.a", internal(&["*"])),
    ("wgmma_ops.cuh.tera", "op.b", internal(&["*"])),
    ("wgmma_ops.cuh.tera", "op.a | upper", internal(&["*"])),
    ("wgmma_ops.cuh.tera", "op.b | upper", internal(&["*"])),
];

/// The names of a tile's encode function (`tma_encode_<tile>`) that a run-time dim's
/// parameter may not take: those get `dim_` before them ([`encode_param`]).
const ENCODE_LOCALS: [&str; 6] = ["map", "base", "base_bytes", "err", "global", "strides"];

/// The encode function's parameter for a run-time extent `label` (or stride, `stride_<label>`):
/// the label, or `dim_<label>` where the function already uses that name.
pub fn encode_param(label: &str) -> String {
    if ENCODE_LOCALS.contains(&label) {
        format!("dim_{label}")
    } else {
        label.to_string()
    }
}

/// One piece of a name pattern.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Seg {
    Lit(String),
    /// Any identifier characters (maybe none).
    Any,
    /// One or more decimal digits.
    Digits,
}

fn glob(pattern: &str) -> Vec<Seg> {
    let mut segs = Vec::new();
    let mut lit = String::new();
    for c in pattern.chars() {
        let special = match c {
            '*' => Some(Seg::Any),
            '#' => Some(Seg::Digits),
            _ => None,
        };
        match special {
            Some(s) => {
                if !lit.is_empty() {
                    segs.push(Seg::Lit(std::mem::take(&mut lit)));
                }
                segs.push(s);
            }
            None => lit.push(c),
        }
    }
    if !lit.is_empty() {
        segs.push(Seg::Lit(lit));
    }
    segs
}

fn matches(segs: &[Seg], s: &str) -> bool {
    match segs.split_first() {
        None => s.is_empty(),
        Some((Seg::Lit(l), rest)) => s
            .strip_prefix(l.as_str())
            .is_some_and(|tail| matches(rest, tail)),
        Some((Seg::Any, rest)) => {
            (0..=s.len()).any(|i| s.is_char_boundary(i) && matches(rest, &s[i..]))
        }
        Some((Seg::Digits, rest)) => {
            let digits = s.bytes().take_while(u8::is_ascii_digit).count();
            (1..=digits).any(|i| matches(rest, &s[i..]))
        }
    }
}

fn glob_text(segs: &[Seg]) -> String {
    segs.iter()
        .map(|s| match s {
            Seg::Lit(l) => l.as_str(),
            Seg::Any => "*",
            Seg::Digits => "<n>",
        })
        .collect()
}

/// A set of identifiers: plain ones and patterns, each with the template it comes from.
#[derive(Clone, Debug, Default)]
struct Names {
    fixed: BTreeMap<String, &'static str>,
    globs: Vec<(Vec<Seg>, &'static str)>,
}

impl Names {
    fn add_fixed(&mut self, name: &str, from: &'static str) {
        self.fixed.entry(name.to_string()).or_insert(from);
    }
    fn add_glob(&mut self, segs: Vec<Seg>, from: &'static str) {
        if !self.globs.iter().any(|(g, _)| *g == segs) {
            self.globs.push((segs, from));
        }
    }
    fn extend(&mut self, other: &Names) {
        for (n, from) in &other.fixed {
            self.add_fixed(n, from);
        }
        for (g, from) in &other.globs {
            self.add_glob(g.clone(), from);
        }
    }
    /// The entry `ident` meets (its text: the name, or the pattern) and its template.
    fn find(&self, ident: &str) -> Option<(String, &'static str)> {
        if let Some(from) = self.fixed.get(ident) {
            return Some((ident.to_string(), from));
        }
        self.globs
            .iter()
            .find(|(g, _)| matches(g, ident))
            .map(|(g, from)| (glob_text(g), *from))
    }
    fn contains(&self, ident: &str) -> bool {
        self.find(ident).is_some()
    }
}

/// Where a user name lands: a template identifier holding one user expression.
#[derive(Clone, Debug)]
struct Slot {
    kind: NameKind,
    outer_pre: String,
    form: Form,
    outer_suf: String,
    /// The scope (index into [`Table::scopes`]); 0 is namespace scope.
    scope: usize,
    /// The identifier is a macro's name.
    is_macro: bool,
    template: &'static str,
}

impl Slot {
    fn apply(&self, name: &str) -> String {
        format!(
            "{}{}{}",
            self.outer_pre,
            self.form.apply(name),
            self.outer_suf
        )
    }
    fn is_bare(&self) -> bool {
        self.outer_pre.is_empty() && self.outer_suf.is_empty() && self.form.is_bare()
    }
}

/// The table: every identifier and macro of the templates, the identifiers of each scope, and
/// where user names land.
#[derive(Debug, Default)]
struct Table {
    /// Every identifier anywhere (what a user macro would replace).
    all: Names,
    /// Every macro the templates define or test.
    macros: Names,
    /// Per scope, the identifiers a name landing there must differ from (a struct's or
    /// function's own and those of everything nested in it).
    scopes: Vec<Names>,
    slots: Vec<Slot>,
}

fn table() -> &'static Table {
    static TABLE: OnceLock<Table> = OnceLock::new();
    TABLE.get_or_init(build)
}

// ---- tera --------------------------------------------------------------------------------

/// A placeholder for template expression `i` (in a Unicode private-use plane: never in a
/// template's own text).
fn placeholder(i: usize) -> char {
    u32::try_from(i)
        .ok()
        .and_then(|i| char::from_u32(0xF0000 + i))
        .unwrap_or('\u{FFFFD}')
}

fn placeholder_index(c: char) -> Option<usize> {
    let v = u32::from(c);
    (0xF0000..0xFFFFD)
        .contains(&v)
        .then(|| (v - 0xF0000) as usize)
}

/// The template expressions met so far: (template, expression text).
type Exprs = Vec<(&'static str, String)>;

/// A piece of a tera template.
enum Piece<'a> {
    Text(&'a str),
    /// `{{ expr }}`, trimmed.
    Expr(&'a str),
    /// `{% stmt %}`, trimmed.
    Stmt(&'a str),
    /// `{{<name .. />}}`: a component call.
    Component(&'a str),
}

/// The pieces of a template, its `{# comments #}` left out.
fn pieces(text: &str) -> Vec<Piece<'_>> {
    let mut out = Vec::new();
    let mut rest = text;
    let mut at = 0;
    while let Some(p) = rest[at..].find('{').map(|p| p + at) {
        let close = match rest.as_bytes().get(p + 1) {
            Some(b'{') => "}}",
            Some(b'%') => "%}",
            Some(b'#') => "#}",
            _ => {
                at = p + 1;
                continue;
            }
        };
        let Some(end) = rest[p + 2..].find(close) else {
            break;
        };
        out.push(Piece::Text(&rest[..p]));
        let inner = rest[p + 2..p + 2 + end].trim_matches(|c: char| c == '-' || c.is_whitespace());
        match close {
            "}}" => match inner.strip_prefix('<') {
                Some(call) => out.push(Piece::Component(
                    call.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                        .next()
                        .unwrap_or(""),
                )),
                None => out.push(Piece::Expr(inner)),
            },
            "%}" => out.push(Piece::Stmt(inner)),
            _ => {}
        }
        rest = &rest[p + 2 + end + 2..];
        at = 0;
    }
    out.push(Piece::Text(rest));
    out
}

/// Strips tera from template `name`: comments go, a statement becomes a space (the branches
/// of an `if` are not one identifier), includes and component calls are inlined (already
/// stripped), expressions become placeholders.
fn strip_tera(
    name: &'static str,
    texts: &BTreeMap<&'static str, &'static str>,
    components: &BTreeMap<String, String>,
    exprs: &mut Exprs,
    depth: usize,
) -> String {
    let Some(text) = texts.get(name) else {
        return String::new();
    };
    let mut out = String::with_capacity(text.len());
    for piece in pieces(text) {
        match piece {
            Piece::Text(t) => out.push_str(t),
            Piece::Expr(e) => {
                out.push(placeholder(exprs.len()));
                exprs.push((name, e.to_string()));
            }
            Piece::Component(c) => {
                out.push_str(components.get(c).map_or("", String::as_str));
            }
            Piece::Stmt(st) => {
                out.push(' ');
                let target = st
                    .strip_prefix("include")
                    .map(|t| t.trim().trim_matches('"'));
                if let Some((included, _)) = target.and_then(|t| texts.get_key_value(t)) {
                    if depth < 8 {
                        out.push_str(&strip_tera(included, texts, components, exprs, depth + 1));
                    }
                }
            }
        }
    }
    out
}

/// The component bodies of `components.tera` (`{% component name(..) %}..{% endcomponent %}`),
/// stripped, their expressions keyed to `components.tera`.
fn components(text: &str, exprs: &mut Exprs) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let mut current: Option<(String, String)> = None;
    for piece in pieces(text) {
        match (piece, &mut current) {
            (Piece::Stmt(st), _) if st.starts_with("component ") => {
                let name = st["component ".len()..]
                    .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                    .next()
                    .unwrap_or("")
                    .to_string();
                current = Some((name, String::new()));
            }
            (Piece::Stmt(st), Some(_)) if st.starts_with("endcomponent") => {
                if let Some((name, body)) = current.take() {
                    out.insert(name, body);
                }
            }
            (Piece::Text(t), Some((_, body))) => body.push_str(t),
            (Piece::Expr(e), Some((_, body))) => {
                body.push(placeholder(exprs.len()));
                exprs.push(("components.tera", e.to_string()));
            }
            (Piece::Stmt(_), Some((_, body))) => body.push(' '),
            _ => {}
        }
    }
    out
}

// ---- C++ ---------------------------------------------------------------------------------

#[derive(Clone, Debug, PartialEq, Eq)]
enum Tok {
    /// An identifier (placeholders included); `scoped`: after `.`, `->` or `X::`.
    Id {
        text: String,
        scoped: bool,
    },
    P(char),
}

/// A preprocessor line: the macros it defines or tests, and the other identifiers in it.
#[derive(Debug, Default)]
struct Directive {
    macros: Vec<String>,
    body: Vec<String>,
}

fn is_ident_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_' || placeholder_index(c).is_some()
}

/// Tokens of C++ text without its comments, strings and character literals; preprocessor
/// lines come back apart.
fn lex(text: &str) -> (Vec<Tok>, Vec<Directive>) {
    let chars: Vec<char> = text.chars().collect();
    let mut toks = Vec::new();
    let mut directives = Vec::new();
    let mut i = 0;
    let mut line_start = true;
    while i < chars.len() {
        let c = chars[i];
        if c == '\n' {
            line_start = true;
            i += 1;
            continue;
        }
        if c.is_whitespace() {
            i += 1;
            continue;
        }
        if c == '#' && line_start {
            // The directive's line, with its continuations.
            let mut line = String::new();
            i += 1;
            while i < chars.len() && chars[i] != '\n' {
                if chars[i] == '\\' && chars.get(i + 1) == Some(&'\n') {
                    i += 2;
                    continue;
                }
                line.push(chars[i]);
                i += 1;
            }
            if let Some(d) = directive(&line) {
                directives.push(d);
            }
            continue;
        }
        line_start = false;
        if c == '/' && chars.get(i + 1) == Some(&'/') {
            while i < chars.len() && chars[i] != '\n' {
                i += 1;
            }
            continue;
        }
        if c == '/' && chars.get(i + 1) == Some(&'*') {
            i += 2;
            while i + 1 < chars.len() && !(chars[i] == '*' && chars[i + 1] == '/') {
                i += 1;
            }
            i += 2;
            continue;
        }
        if c == '"' || c == '\'' {
            i += 1;
            while i < chars.len() && chars[i] != c && chars[i] != '\n' {
                if chars[i] == '\\' {
                    i += 1;
                }
                i += 1;
            }
            i += 1;
            continue;
        }
        if c.is_ascii_digit() || (c == '.' && chars.get(i + 1).is_some_and(char::is_ascii_digit)) {
            // A number (suffixes and exponents included).
            i += 1;
            while i < chars.len() && (is_ident_char(chars[i]) || chars[i] == '.') {
                i += 1;
            }
            continue;
        }
        if is_ident_char(c) {
            let start = i;
            while i < chars.len() && is_ident_char(chars[i]) {
                i += 1;
            }
            let text: String = chars[start..i].iter().collect();
            let scoped = matches!(
                toks.as_slice(),
                [.., Tok::P('.')]
                    | [.., Tok::P('-'), Tok::P('>')]
                    | [.., Tok::Id { .. } | Tok::P('>'), Tok::P(':'), Tok::P(':')]
            );
            toks.push(Tok::Id { text, scoped });
            continue;
        }
        if c == '.' && chars.get(i + 1) == Some(&'.') && chars.get(i + 2) == Some(&'.') {
            // An ellipsis: what follows is no member.
            toks.push(Tok::P('…'));
            i += 3;
            continue;
        }
        toks.push(Tok::P(c));
        i += 1;
    }
    (toks, directives)
}

fn directive(line: &str) -> Option<Directive> {
    let line = line.trim_start();
    let word: String = line
        .chars()
        .take_while(|c| c.is_ascii_alphabetic())
        .collect();
    let (toks, _) = lex(&line[word.len()..]);
    let ids: Vec<String> = toks
        .iter()
        .filter_map(|t| match t {
            Tok::Id { text, .. } => Some(text.clone()),
            Tok::P(_) => None,
        })
        .collect();
    let mut d = Directive::default();
    match word.as_str() {
        "define" | "undef" | "ifdef" | "ifndef" => {
            let mut it = ids.into_iter();
            d.macros.extend(it.next());
            d.body.extend(it);
        }
        "if" | "elif" => {
            let mut after_defined = false;
            for id in ids {
                if id == "defined" {
                    after_defined = true;
                } else if after_defined {
                    d.macros.push(id);
                    after_defined = false;
                } else {
                    d.body.push(id);
                }
            }
        }
        _ => return None,
    }
    Some(d)
}

// ---- scopes --------------------------------------------------------------------------------

#[derive(Debug)]
struct Scope {
    parent: Option<usize>,
    /// Namespace scope and directive lines: no nested scope counts in them.
    flat: bool,
    direct: Vec<(String, &'static str)>,
}

struct Parser<'a> {
    toks: &'a [Tok],
    i: usize,
    template: &'static str,
    scopes: &'a mut Vec<Scope>,
}

const CONTROL: [&str; 10] = [
    "if", "else", "for", "while", "do", "switch", "try", "catch", "return", "case",
];

impl Parser<'_> {
    fn new_scope(&mut self, parent: usize) -> usize {
        self.scopes.push(Scope {
            parent: Some(parent),
            flat: false,
            direct: Vec::new(),
        });
        self.scopes.len() - 1
    }

    fn assign(&mut self, toks: &[Tok], scope: usize) {
        for t in toks {
            if let Tok::Id {
                text,
                scoped: false,
            } = t
            {
                self.scopes[scope]
                    .direct
                    .push((text.clone(), self.template));
            }
        }
    }

    /// Splits `template <...>` off a head: (its parameters, the rest).
    fn split_template(head: &[Tok]) -> (Vec<Tok>, Vec<Tok>) {
        let mut params = Vec::new();
        let mut rest = Vec::new();
        let mut k = 0;
        while k < head.len() {
            let is_template = matches!(&head[k], Tok::Id { text, .. } if text == "template")
                && head.get(k + 1) == Some(&Tok::P('<'));
            if is_template {
                let mut depth = 0;
                k += 1;
                while k < head.len() {
                    match head[k] {
                        Tok::P('<') => depth += 1,
                        Tok::P('>') => {
                            depth -= 1;
                            if depth == 0 {
                                k += 1;
                                break;
                            }
                        }
                        _ => params.push(head[k].clone()),
                    }
                    k += 1;
                }
                continue;
            }
            rest.push(head[k].clone());
            k += 1;
        }
        (params, rest)
    }

    /// Parses statements and blocks into `scope` until its closing brace (consumed) or the end.
    fn scope(&mut self, scope: usize) {
        loop {
            let start = self.i;
            let mut depth = 0usize;
            loop {
                let Some(t) = self.toks.get(self.i) else {
                    let head = self.toks[start..].to_vec();
                    self.statement(&head, scope);
                    return;
                };
                match t {
                    Tok::P('(' | '[') => depth += 1,
                    Tok::P(')' | ']') => depth = depth.saturating_sub(1),
                    Tok::P('{') if depth > 0 => depth += 1,
                    Tok::P('}') if depth > 0 => depth -= 1,
                    Tok::P(';') if depth == 0 => {
                        let head = self.toks[start..self.i].to_vec();
                        self.i += 1;
                        self.statement(&head, scope);
                        break;
                    }
                    Tok::P('{') => {
                        let head = self.toks[start..self.i].to_vec();
                        self.i += 1;
                        self.block(&head, scope);
                        break;
                    }
                    Tok::P('}') => {
                        let head = self.toks[start..self.i].to_vec();
                        self.i += 1;
                        self.statement(&head, scope);
                        return;
                    }
                    _ => {}
                }
                self.i += 1;
            }
        }
    }

    fn statement(&mut self, head: &[Tok], scope: usize) {
        // A declaration's template parameters belong to no scope a user name reaches.
        let (_, rest) = Self::split_template(head);
        self.assign(&rest, scope);
    }

    fn block(&mut self, head: &[Tok], scope: usize) {
        let (params, rest) = Self::split_template(head);
        let ids: Vec<&str> = rest
            .iter()
            .filter_map(|t| match t {
                Tok::Id { text, .. } => Some(text.as_str()),
                Tok::P(_) => None,
            })
            .collect();
        let first = ids.first().copied().unwrap_or("");
        let mut depth = 0usize;
        let mut equals_at_top = false;
        let mut first_paren = None;
        for (k, t) in rest.iter().enumerate() {
            match t {
                Tok::P('(' | '[') => {
                    if depth == 0 && first_paren.is_none() && *t == Tok::P('(') {
                        first_paren = Some(k);
                    }
                    depth += 1;
                }
                Tok::P(')' | ']') => depth = depth.saturating_sub(1),
                Tok::P('=') if depth == 0 && first_paren.is_none() => equals_at_top = true,
                _ => {}
            }
        }
        let is_struct = !equals_at_top
            && ids
                .iter()
                .take_while(|w| !matches!(**w, "="))
                .any(|w| matches!(*w, "struct" | "class" | "union"));
        if is_struct {
            let inner = self.new_scope(scope);
            self.assign(&rest, scope);
            self.assign(&rest, inner);
            self.assign(&params, inner);
            self.scope(inner);
        } else if first == "namespace" || first == "enum" || (ids == ["extern"]) {
            self.assign(&rest, scope);
            self.scope(scope);
        } else if let (Some(p), false, false) =
            (first_paren, equals_at_top, CONTROL.contains(&first))
        {
            let inner = self.new_scope(scope);
            self.assign(&rest[..p], scope);
            self.assign(&rest[p..], inner);
            self.assign(&params, inner);
            self.scope(inner);
        } else {
            self.assign(head, scope);
            self.scope(scope);
        }
    }
}

// ---- the table ---------------------------------------------------------------------------

/// What one token of a template is, once its placeholders are resolved.
enum Resolved {
    /// A plain identifier.
    Fixed(String),
    /// Renderer-chosen identifiers: any of these patterns.
    Globs(Vec<Vec<Seg>>),
    /// A user name's identifier.
    User {
        kind: NameKind,
        pre: String,
        forms: &'static [Form],
        suf: String,
    },
    /// A number or a code fragment: nothing to reserve.
    Opaque,
}

fn use_of(template: &str, expr: &str) -> Option<Use> {
    USES.iter()
        .find(|(t, e, _)| *t == template && *e == expr)
        .map(|(_, _, u)| *u)
}

fn resolve(text: &str, exprs: &Exprs) -> Resolved {
    if !text.chars().any(|c| placeholder_index(c).is_some()) {
        return Resolved::Fixed(text.to_string());
    }
    // Literal runs and uses, in order.
    let mut parts: Vec<Result<String, Use>> = Vec::new();
    for c in text.chars() {
        match placeholder_index(c) {
            Some(i) => {
                let Some((template, expr)) = exprs.get(i) else {
                    return Resolved::Opaque;
                };
                match use_of(template, expr) {
                    Some(u) => parts.push(Err(u)),
                    None => return Resolved::Opaque,
                }
            }
            None => match parts.last_mut() {
                Some(Ok(s)) => s.push(c),
                _ => parts.push(Ok(c.to_string())),
            },
        }
    }
    let users = parts
        .iter()
        .filter(|p| matches!(p, Err(Use::User(..))))
        .count();
    if users > 0 {
        // One user name with literal text around it; anything else is not an identifier a
        // template writes (two user names, or a user name beside a renderer-chosen part).
        let mut pre = String::new();
        let mut suf = String::new();
        let mut found = None;
        for p in &parts {
            match (p, found) {
                (Ok(s), None) => pre.push_str(s),
                (Ok(s), Some(_)) => suf.push_str(s),
                (Err(Use::User(kind, forms)), None) => found = Some((*kind, *forms)),
                _ => return Resolved::Opaque,
            }
        }
        return match found {
            Some((kind, forms)) => Resolved::User {
                kind,
                pre,
                forms,
                suf,
            },
            None => Resolved::Opaque,
        };
    }
    // Only renderer-chosen parts: every combination of their patterns.
    let mut globs: Vec<String> = vec![String::new()];
    for p in &parts {
        match p {
            Ok(s) => globs.iter_mut().for_each(|g| g.push_str(s)),
            Err(Use::Internal(alts)) => {
                globs = globs
                    .iter()
                    .flat_map(|g| alts.iter().map(move |a| format!("{g}{a}")))
                    .collect();
            }
            Err(Use::User(..)) => return Resolved::Opaque,
        }
    }
    // A token that starts with digits is a number.
    let globs: Vec<Vec<Seg>> = globs
        .iter()
        .map(|g| glob(g))
        .filter(|g| !matches!(g.first(), Some(Seg::Digits)))
        .collect();
    if globs.is_empty() {
        Resolved::Opaque
    } else {
        Resolved::Globs(globs)
    }
}

/// The templates rendered on their own (the others are only included or are components).
fn roots(texts: &BTreeMap<&'static str, &'static str>) -> Vec<&'static str> {
    let included: BTreeSet<&str> = texts
        .values()
        .flat_map(|t| {
            t.match_indices("include \"").filter_map(move |(at, m)| {
                let rest = &t[at + m.len()..];
                rest.find('"').map(|end| &rest[..end])
            })
        })
        .collect();
    texts
        .keys()
        .copied()
        .filter(|n| *n != "components.tera" && !included.contains(n))
        .collect()
}

fn build() -> Table {
    build_from(&crate::templates::ALL)
}

fn build_from(templates: &[(&'static str, &'static str)]) -> Table {
    let texts: BTreeMap<&'static str, &'static str> = templates.iter().copied().collect();
    let mut exprs: Exprs = Vec::new();
    let comps = components(
        texts.get("components.tera").copied().unwrap_or(""),
        &mut exprs,
    );
    let mut scopes = vec![Scope {
        parent: None,
        flat: true,
        direct: Vec::new(),
    }];
    let mut table = Table::default();
    // Macro names and directive bodies, per template.
    let mut macro_names: Vec<(String, &'static str)> = Vec::new();
    for root in roots(&texts) {
        let text = strip_tera(root, &texts, &comps, &mut exprs, 0);
        let (toks, directives) = lex(&text);
        for t in &toks {
            if let Tok::Id { text, .. } = t {
                add(&mut table.all, text, root, &exprs);
            }
        }
        for d in directives {
            for m in &d.macros {
                add(&mut table.all, m, root, &exprs);
                macro_names.push((m.clone(), root));
            }
            scopes.push(Scope {
                parent: None,
                flat: true,
                direct: Vec::new(),
            });
            let line = scopes.len() - 1;
            for b in d.body {
                add(&mut table.all, &b, root, &exprs);
                scopes[line].direct.push((b, root));
            }
        }
        let mut parser = Parser {
            toks: &toks,
            i: 0,
            template: root,
            scopes: &mut scopes,
        };
        parser.scope(0);
    }
    for (m, from) in &macro_names {
        match resolve(m, &exprs) {
            Resolved::User {
                kind,
                pre,
                forms,
                suf,
            } => {
                for form in forms {
                    table.slots.push(Slot {
                        kind,
                        outer_pre: pre.clone(),
                        form: *form,
                        outer_suf: suf.clone(),
                        scope: 0,
                        is_macro: true,
                        template: from,
                    });
                }
            }
            _ => add(&mut table.macros, m, from, &exprs),
        }
    }
    // Each scope's own names, then those of the scopes nested in it.
    let mut own: Vec<Names> = Vec::with_capacity(scopes.len());
    for (id, s) in scopes.iter().enumerate() {
        let mut names = Names::default();
        for (text, from) in &s.direct {
            match resolve(text, &exprs) {
                Resolved::User {
                    kind,
                    pre,
                    forms,
                    suf,
                } => {
                    for form in forms {
                        table.slots.push(Slot {
                            kind,
                            outer_pre: pre.clone(),
                            form: *form,
                            outer_suf: suf.clone(),
                            scope: id,
                            is_macro: false,
                            template: from,
                        });
                    }
                }
                _ => add(&mut names, text, from, &exprs),
            }
        }
        own.push(names);
    }
    let mut total = own.clone();
    // Children come after their parents: fold them up from the last.
    for id in (0..scopes.len()).rev() {
        if let Some(p) = scopes[id].parent {
            if !scopes[p].flat {
                let child = total[id].clone();
                total[p].extend(&child);
            }
        }
    }
    table.scopes = total;
    // Aliases: `using <alias> = tma_<tile>;` at namespace scope (written by KernelSource).
    // A plan's kernel: `extern "C" __global__ void <plan>(..)`, written by the user under the
    // plan's name (its launch is looked up by it), also at namespace scope.
    for (kind, template) in [
        (NameKind::Alias, "KernelSource::tile_as"),
        (NameKind::KernelPlan, "the plan's kernel function"),
    ] {
        table.slots.push(Slot {
            kind,
            outer_pre: String::new(),
            form: SAME[0],
            outer_suf: String::new(),
            scope: 0,
            is_macro: false,
            template,
        });
    }
    // Duplicates (one slot per occurrence) say nothing more.
    let mut seen = BTreeSet::new();
    table.slots.retain(|s| {
        seen.insert((
            s.kind,
            s.outer_pre.clone(),
            s.form.pre,
            s.form.suf,
            s.form.case as u8,
            s.outer_suf.clone(),
            s.scope,
            s.is_macro,
        ))
    });
    table
}

fn add(names: &mut Names, text: &str, from: &'static str, exprs: &Exprs) {
    match resolve(text, exprs) {
        Resolved::Fixed(s) => names.add_fixed(&s, from),
        Resolved::Globs(gs) => gs.into_iter().for_each(|g| names.add_glob(g, from)),
        Resolved::User { .. } | Resolved::Opaque => {}
    }
}

// ---- the checks --------------------------------------------------------------------------

/// Why a user name cannot be used: the identifier it would become in generated CUDA and what
/// the generated code already means by it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GeneratedClash {
    /// The identifier the name becomes (the name itself when it lands bare).
    pub becomes: String,
    /// What it meets: the template's identifier or macro, or a pattern (`TMA_RULE_*`).
    pub meets: String,
    /// The template (or renderer) it meets it in.
    pub template: &'static str,
    /// How it meets it.
    pub how: ClashHow,
}

/// How a generated name meets the generated code.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClashHow {
    /// It lands bare and starts with `tma_` (any case), the generated code's prefix.
    Prefix,
    /// The templates use this identifier in the scope where it lands.
    Identifier,
    /// It is one of the templates' macros (which would replace it).
    Macro,
    /// It is a macro, and the templates use this identifier (which it would replace).
    IsMacro,
    /// An alias, at namespace scope beside every name CUDA declares there (`min`, `j0`,
    /// `exp`, `float4`, `atomicAdd`: mostly lower-case), must start with an upper-case letter.
    CudaScope,
    /// It lands at namespace scope (a plan's kernel, an alias) and is a name CUDA's headers
    /// declare there ([`CUDA_NAMES`]: `j0`, `min`, `printf`, `float4`, `CUresult`, ...).
    CudaName,
    /// A kernel's name that ptxas takes for a symbol of its own ([`PTXAS_SYMBOLS`]).
    PtxasSymbol,
    /// It is a macro of the system and CUDA headers a generated header includes
    /// ([`HEADER_MACROS`]: `EOF`, `NULL`, `INT_MAX`, `CUDA_VERSION`, ...), which would
    /// replace it.
    HeaderMacro,
}

/// Where the macros of [`HEADER_MACROS`] come from, for messages.
pub const HEADER_MACRO_SOURCE: &str = "cuda.h, cuda_runtime.h, <cstdio>";

/// The macros the headers a generated header includes define (`cuda.h`, `cuda_runtime.h`
/// (nvcc's implicit include) and `<cstdio>`, CUDA 13.0 and the host's C++ library), one
/// name a line, sorted: those that could be a user name (a C identifier not starting with
/// `_`, which is reserved anyway, nor with `tma_`, which the generated code's prefix rule
/// already refuses). No generated identifier may be one of them, or nvcc's preprocessor
/// replaces it in the host compile of the header (`tma header`); a dim `EOF` or `M_PI`.
///
/// The same list applies to NVRTC sources, which include none of these headers: one rule for
/// every name, so a declaration accepted for the JIT also renders into a header that builds.
///
/// Not derived at run time (that needs nvcc and the headers): `tests/nvcc_header.rs`
/// regenerates it with nvcc and fails when a macro is missing here; refresh it with
/// `TMA_UPDATE_MACROS=1 cargo test --test nvcc_header` after
/// `eval "$(scripts/cuda-tools.sh --headers)"`.
pub const HEADER_MACROS: &str = include_str!("header_macros.txt");

/// Whether `ident` is one of [`HEADER_MACROS`].
pub fn is_header_macro(ident: &str) -> bool {
    static SET: OnceLock<BTreeSet<&'static str>> = OnceLock::new();
    in_committed_list(&SET, HEADER_MACROS, ident)
}

/// Whether `ident` is a line of `list` (a committed name list, one a line), read into `set`
/// once.
fn in_committed_list(
    set: &'static OnceLock<BTreeSet<&'static str>>,
    list: &'static str,
    ident: &str,
) -> bool {
    set.get_or_init(|| {
        list.lines()
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .collect()
    })
    .contains(ident)
}

/// Where the names of [`CUDA_NAMES`] come from, for messages.
pub const CUDA_NAME_SOURCE: &str = "cuda.h, cuda_runtime.h, <cstdio> and NVRTC's built-in headers";

/// The names the headers of a CUDA translation unit declare at namespace scope, one a line,
/// sorted: functions, types, variables, enumerators and namespaces of `cuda.h`,
/// `cuda_runtime.h` (nvcc's implicit include, which holds what NVRTC builds in: the math API,
/// intrinsics, `printf`, `malloc`, the vector types) and `<cstdio>`, CUDA 13.0 and the host's
/// C library and libstdc++, host and device passes; only those a user may write
/// ([`super::check_name`]: no keyword, no reserved `__x` or `_X`). A plan's kernel (`extern "C" __global__ void <plan>`) or an alias of one
/// of these names does not compile: a kernel `j0` has "more than one instance of overloaded
/// function "j0" has "C" linkage", a kernel `float4` is "already declared in the current
/// scope". A few (struct tags such as `CUstream_st`, C++ overloads such as `atomicAdd`)
/// would still compile beside a kernel of their name; they are refused all the same.
///
/// Not derived at run time (that needs nvcc and the headers): `tests/nvcc_header.rs`
/// regenerates it with nvcc and fails when a name is missing here; refresh it with
/// `TMA_UPDATE_NAMES=1 cargo test --test nvcc_header cuda_names` after
/// `eval "$(scripts/cuda-tools.sh --headers)"`.
pub const CUDA_NAMES: &str = include_str!("cuda_names.txt");

/// Whether `ident` is one of [`CUDA_NAMES`].
pub fn is_cuda_name(ident: &str) -> bool {
    static SET: OnceLock<BTreeSet<&'static str>> = OnceLock::new();
    in_committed_list(&SET, CUDA_NAMES, ident)
}

/// Kernel names ptxas (13.0.88, NVRTC's and nvcc's) takes for a symbol of its own: a kernel
/// `A7` gives "Inconsistent redefinition of variable 'A7'", then ptxas crashes, inside the
/// process when NVRTC compiles to a cubin. Found by compiling a kernel of every name of two
/// characters and every identifier of the CUDA headers and ptxas; `tests/nvcc_header.rs`
/// checks that ptxas still fails on each.
pub const PTXAS_SYMBOLS: [&str; 1] = ["A7"];

impl fmt::Display for GeneratedClash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let same = self.becomes == self.meets;
        match (self.how, same) {
            (ClashHow::Prefix, _) => write!(
                f,
                "it lands in the generated CUDA as `{}`, and names starting with `tma_` (in any case) belong to the generated code",
                self.becomes
            ),
            (ClashHow::Identifier, true) => write!(
                f,
                "it becomes `{}`, which the generated code ({}) already names in that scope",
                self.becomes, self.template
            ),
            (ClashHow::Identifier, false) => write!(
                f,
                "it becomes `{}`, which the generated code's `{}` ({}) takes in that scope",
                self.becomes, self.meets, self.template
            ),
            (ClashHow::Macro, true) => write!(
                f,
                "it becomes `{}`, a macro of the generated code ({}), which would replace it",
                self.becomes, self.template
            ),
            (ClashHow::Macro, false) => write!(
                f,
                "it becomes `{}`, which the generated code's macros `{}` ({}) take",
                self.becomes, self.meets, self.template
            ),
            (ClashHow::CudaScope, _) => write!(
                f,
                "`{}` is an alias at namespace scope, where CUDA declares its functions and types (`j0`, `min`, `exp`, `float4`, ..., mostly lower-case): an alias starts with an upper-case letter",
                self.becomes
            ),
            (ClashHow::CudaName, _) => write!(
                f,
                "`{}` meets CUDA's own `{}`, which {} declare at namespace scope (a function, type, variable or constant: the math API, intrinsics, runtime and driver API, C library)",
                self.becomes, self.meets, self.template
            ),
            (ClashHow::PtxasSymbol, _) => write!(
                f,
                "`{}` meets a symbol of ptxas's own ({}): a kernel of that name makes ptxas fail, then crash",
                self.becomes, self.template
            ),
            (ClashHow::HeaderMacro, _) => write!(
                f,
                "it becomes `{}`, a macro of the system and CUDA headers the generated header includes ({}), which would replace it",
                self.becomes, self.template
            ),
            (ClashHow::IsMacro, _) => write!(
                f,
                "it becomes the macro `{}`, which would replace the generated code's `{}` ({})",
                self.becomes, self.meets, self.template
            ),
        }
    }
}

impl Table {
    /// Whether a name of `kind` lands bare somewhere (then it may not start with `tma_`).
    fn lands_bare(&self, kind: NameKind) -> bool {
        self.slots.iter().any(|s| s.kind == kind && s.is_bare())
    }

    fn clash(&self, kind: NameKind, name: &str) -> Option<GeneratedClash> {
        if self.lands_bare(kind)
            && name
                .get(..4)
                .is_some_and(|p| p.eq_ignore_ascii_case("tma_"))
        {
            return Some(GeneratedClash {
                becomes: name.to_string(),
                meets: "tma_*".to_string(),
                template: "every template",
                how: ClashHow::Prefix,
            });
        }
        if kind == NameKind::Alias && !name.starts_with(|c: char| c.is_ascii_uppercase()) {
            return Some(GeneratedClash {
                becomes: name.to_string(),
                meets: "CUDA's namespace scope".to_string(),
                template: "NVRTC's built-in headers",
                how: ClashHow::CudaScope,
            });
        }
        if kind == NameKind::KernelPlan && PTXAS_SYMBOLS.contains(&name) {
            return Some(GeneratedClash {
                becomes: name.to_string(),
                meets: name.to_string(),
                template: "ptxas 13.0",
                how: ClashHow::PtxasSymbol,
            });
        }
        for slot in self.slots.iter().filter(|s| s.kind == kind) {
            let ident = slot.apply(name);
            if slot.scope == 0 && !slot.is_macro && is_cuda_name(&ident) {
                return Some(GeneratedClash {
                    meets: ident.clone(),
                    becomes: ident,
                    template: CUDA_NAME_SOURCE,
                    how: ClashHow::CudaName,
                });
            }
            if is_header_macro(&ident) {
                return Some(GeneratedClash {
                    meets: ident.clone(),
                    becomes: ident,
                    template: HEADER_MACRO_SOURCE,
                    how: ClashHow::HeaderMacro,
                });
            }
            if let Some((meets, template)) = self.macros.find(&ident) {
                return Some(GeneratedClash {
                    becomes: ident,
                    meets,
                    template,
                    how: ClashHow::Macro,
                });
            }
            let scope = if slot.is_macro {
                &self.all
            } else {
                match self.scopes.get(slot.scope) {
                    Some(s) => s,
                    None => continue,
                }
            };
            if let Some((meets, template)) = scope.find(&ident) {
                return Some(GeneratedClash {
                    becomes: ident,
                    meets,
                    template,
                    how: if slot.is_macro {
                        ClashHow::IsMacro
                    } else {
                        ClashHow::Identifier
                    },
                });
            }
        }
        None
    }
}

/// The first identifier or macro of the generated code that `name`, as a name of `kind`,
/// would meet (see the module documentation), or `None` when it is free. `name` should
/// already be a usable identifier ([`super::check_name`]).
pub fn generated_clash(kind: NameKind, name: &str) -> Option<GeneratedClash> {
    table().clash(kind, name)
}

/// One identifier a user name becomes.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct GeneratedName {
    /// The identifier.
    pub ident: String,
    /// At namespace scope or a macro: it must differ from every other declaration's global
    /// names in one translation unit.
    pub global: bool,
    /// The template it lands in.
    pub template: &'static str,
    scope: usize,
}

/// Every identifier `name`, as a name of `kind`, becomes in the generated CUDA (the name
/// itself where it lands bare), each once per scope.
pub fn generated_names(kind: NameKind, name: &str) -> Vec<GeneratedName> {
    let mut out: Vec<GeneratedName> = table()
        .slots
        .iter()
        .filter(|s| s.kind == kind)
        .map(|s| GeneratedName {
            ident: s.apply(name),
            global: s.scope == 0 || s.is_macro,
            template: s.template,
            scope: if s.is_macro { 0 } else { s.scope },
        })
        .collect();
    out.sort();
    out.dedup_by(|a, b| a.ident == b.ident && a.scope == b.scope);
    out
}

/// An identifier two different names of one kind (two dims of a tile, two members of a
/// pipeline, ..) both become in one scope: `x` and `stride_x` as dims both give an encode
/// parameter `stride_x`. `None` when they stay apart.
pub fn shared_generated_name(kind: NameKind, a: &str, b: &str) -> Option<String> {
    if a == b {
        return None;
    }
    let of_a: BTreeSet<(usize, String)> = generated_names(kind, a)
        .into_iter()
        .map(|g| (g.scope, g.ident))
        .collect();
    generated_names(kind, b)
        .into_iter()
        .find(|g| of_a.contains(&(g.scope, g.ident.clone())))
        .map(|g| g.ident)
}

/// For tests: every identifier and macro the templates hold (plain names), and whether
/// `ident` is one of them or matches one of their patterns.
#[doc(hidden)]
pub fn template_knows(ident: &str) -> bool {
    let t = table();
    t.all.contains(ident) || t.macros.contains(ident)
}

/// For tests: every plain identifier and macro name the templates hold (what a random name
/// generator mutates to find names near the reserved ones).
#[doc(hidden)]
pub fn template_identifiers() -> Vec<String> {
    let t = table();
    t.all
        .fixed
        .keys()
        .chain(t.macros.fixed.keys())
        .cloned()
        .collect::<BTreeSet<String>>()
        .into_iter()
        .collect()
}

/// For tests: every identifier in C++ `code` (comments, strings and `#include` / `#pragma`
/// lines left out), macro names included.
#[doc(hidden)]
pub fn identifiers_of(code: &str) -> Vec<String> {
    let (toks, directives) = lex(code);
    toks.into_iter()
        .filter_map(|t| match t {
            Tok::Id { text, .. } => Some(text),
            Tok::P(_) => None,
        })
        .chain(
            directives
                .into_iter()
                .flat_map(|d| d.macros.into_iter().chain(d.body)),
        )
        .collect()
}

/// For tests: the template expressions inside identifiers that `USES` does not list, as
/// `template: expr` (numbers and code fragments are fine there; this lists them for review).
#[doc(hidden)]
pub fn unmapped_expressions() -> Vec<String> {
    let texts: BTreeMap<&'static str, &'static str> =
        crate::templates::ALL.iter().copied().collect();
    let mut exprs: Exprs = Vec::new();
    let comps = components(
        texts.get("components.tera").copied().unwrap_or(""),
        &mut exprs,
    );
    let mut out = BTreeSet::new();
    for root in roots(&texts) {
        let text = strip_tera(root, &texts, &comps, &mut exprs, 0);
        let (toks, directives) = lex(&text);
        let ids = toks
            .iter()
            .filter_map(|t| match t {
                Tok::Id { text, .. } => Some(text.clone()),
                Tok::P(_) => None,
            })
            .chain(
                directives
                    .into_iter()
                    .flat_map(|d| d.macros.into_iter().chain(d.body)),
            );
        for id in ids {
            for c in id.chars() {
                if let Some((template, expr)) = placeholder_index(c).and_then(|i| exprs.get(i)) {
                    if use_of(template, expr).is_none() {
                        out.insert(format!("{template}: {expr}"));
                    }
                }
            }
        }
    }
    out.into_iter().collect()
}

/// For tests: the `USES` rows whose expression no template holds (a stale row).
#[doc(hidden)]
pub fn stale_uses() -> Vec<String> {
    USES.iter()
        .filter(|(t, e, _)| {
            let text = crate::templates::ALL
                .iter()
                .find(|(n, _)| n == t)
                .map_or("", |(_, x)| *x);
            !text.contains(&format!("{{{{ {e} }}}}"))
                && !text.contains(&format!("{{{{- {e} }}}}"))
                && !text.contains(&format!("{{{{ {e} -}}}}"))
        })
        .map(|(t, e, _)| format!("{t}: {e}"))
        .collect()
}

/// For the test holding [`crate::plan::consts`]'s copy to the table: each slot of a plan
/// region's name (its prefix, whether it is a plain prefix, its scope and that scope's
/// identifiers and patterns), and the templates' macros (plain, with template; patterns).
#[cfg(test)]
#[allow(clippy::type_complexity)]
pub(crate) fn plan_region_slots() -> (
    Vec<(
        String,
        bool,
        usize,
        BTreeMap<String, &'static str>,
        Vec<String>,
    )>,
    BTreeMap<String, &'static str>,
    Vec<String>,
) {
    let t = table();
    let slots = t
        .slots
        .iter()
        .filter(|s| s.kind == NameKind::PlanRegion)
        .map(|s| {
            let plain = s.outer_suf.is_empty() && s.form == Form::new("", "", Case::Same);
            let scope = t.scopes.get(s.scope).cloned().unwrap_or_default();
            let globs = scope.globs.iter().map(|(g, _)| glob_text(g)).collect();
            (
                s.outer_pre.clone(),
                plain && !s.is_macro,
                s.scope,
                scope.fixed,
                globs,
            )
        })
        .collect();
    let globs = t.macros.globs.iter().map(|(g, _)| glob_text(g)).collect();
    (slots, t.macros.fixed.clone(), globs)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod derived {
    use super::*;

    /// A template with a helper written today and a struct whose member a user name lands
    /// beside: the table holds both, without anyone listing them.
    const PRELUDE: &str = r#"#ifndef TMA_PRELUDE_CUH_
#define TMA_PRELUDE_CUH_
#define TMA_NEW_FLAG 1
// tma_in_a_comment() is no helper
__device__ __forceinline__ unsigned tma_new_helper(const void* p, unsigned bytes) {
  asm volatile("tma_in_a_string %0;" :: "r"(bytes));
  return 0u;
}
#endif
"#;
    const TILE: &str = r#"struct {{ cuda }} {
  static constexpr unsigned NEW_CONSTANT = 1u;
  struct coords { int {{ d.label }} = 0; };
  static constexpr int BOX_{{ d.label }} = {{ d.box }};
  static __device__ void load(coords c, unsigned scratch) { (void)scratch; (void)c.{{ d.label }}; }
};
"#;

    fn table() -> Table {
        build_from(&[("prelude.cuh.tera", PRELUDE), ("tile.cuh.tera", TILE)])
    }

    #[test]
    fn a_helper_written_in_a_template_is_reserved() {
        let t = table();
        // The new function at namespace scope takes tile `new_helper`'s struct name.
        let c = t.clash(NameKind::Tile, "new_helper").unwrap();
        assert_eq!(
            (c.becomes.as_str(), c.how),
            ("tma_new_helper", ClashHow::Identifier)
        );
        // A new member of the tile struct takes `BOX_<dim>`'s place; a new macro any name.
        assert_eq!(t.clash(NameKind::Dim, "CONSTANT"), None);
        assert!(t.macros.contains("TMA_NEW_FLAG") && t.macros.contains("TMA_PRELUDE_CUH_"));
        assert!(!t.all.contains("tma_in_a_comment") && !t.all.contains("tma_in_a_string"));
        let c = t.clash(NameKind::Dim, "NEW_FLAG");
        assert_eq!(c, None, "BOX_NEW_FLAG is free");
        // Comments and strings hold no names; a function's parameters are its own.
        assert_eq!(t.clash(NameKind::Tile, "in_a_comment"), None);
        assert_eq!(t.clash(NameKind::Tile, "in_a_string"), None);
        assert_eq!(t.clash(NameKind::Dim, "bytes"), None);
        assert_eq!(t.clash(NameKind::Dim, "scratch"), None);
        // The coordinate struct's own name and the tile struct's members.
        assert!(t.clash(NameKind::Dim, "coords").is_some());
        assert_eq!(t.clash(NameKind::Tile, "x"), None);
    }

    #[test]
    fn header_macros_are_refused_and_common_names_are_not() {
        let lines: Vec<&str> = HEADER_MACROS.lines().collect();
        let mut sorted = lines.clone();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(
            lines, sorted,
            "header_macros.txt is sorted, one name a line"
        );
        for m in ["EOF", "NULL", "INT_MAX", "M_PI", "CUDA_VERSION", "stdout"] {
            assert!(is_header_macro(m), "{m}");
            let c = generated_clash(NameKind::Dim, m).unwrap();
            assert_eq!((c.becomes.as_str(), c.how), (m, ClashHow::HeaderMacro));
            assert!(c
                .to_string()
                .contains("headers the generated header includes"));
        }
        // Every kind that lands bare: a plan region `EOF` is its accessor `EOF(base ..)`.
        assert!(generated_clash(NameKind::PlanRegion, "EOF").is_some());
        for n in [
            "M", "N", "K", "H", "W", "C", "B", "D", "X", "Y", "Z", "R", "S", "row", "col",
        ] {
            assert_eq!(generated_clash(NameKind::Dim, n), None, "dim {n}");
        }
    }

    #[test]
    fn cuda_names_are_refused_where_they_land_at_namespace_scope() {
        let lines: Vec<&str> = CUDA_NAMES.lines().collect();
        let mut sorted = lines.clone();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(lines, sorted, "cuda_names.txt is sorted, one name a line");
        // Functions, types, variables, enumerators, of the device and the host headers.
        for n in [
            "j0",
            "min",
            "printf",
            "puts",
            "exit",
            "malloc",
            "float4",
            "size_t",
            "FILE",
            "cudaSuccess",
            "CUresult",
            "cuInit",
            "atomicAdd",
        ] {
            assert!(is_cuda_name(n), "{n}");
            let c = generated_clash(NameKind::KernelPlan, n).unwrap();
            assert_eq!((c.becomes.as_str(), c.how), (n, ClashHow::CudaName), "{n}");
            assert!(c.to_string().contains(&format!("meets CUDA's own `{n}`")));
        }
        // An alias starts upper-case; CUDA's upper-case names are refused by name.
        let c = generated_clash(NameKind::Alias, "CUresult").unwrap();
        assert_eq!(c.how, ClashHow::CudaName);
        assert_eq!(generated_clash(NameKind::Alias, "Q"), None);
        // Inside a struct or under a prefix they meet nothing of CUDA's.
        assert_eq!(generated_clash(NameKind::Dim, "j0"), None);
        assert_eq!(generated_clash(NameKind::Tile, "j0"), None);
        assert_eq!(generated_clash(NameKind::PlanRegion, "index"), None);
        // Kernel names of the project, the examples and the tests.
        for n in [
            "gemm",
            "copy",
            "epi",
            "mma",
            "attention",
            "softmax",
            "msda_fwd",
        ] {
            assert_eq!(generated_clash(NameKind::KernelPlan, n), None, "{n}");
        }
        // The plan's kernel and an alias, written outside the templates, land at namespace
        // scope in every table.
        let c = table().clash(NameKind::KernelPlan, "j0").map(|c| c.how);
        assert_eq!(c, Some(ClashHow::CudaName));
        let c = generated_clash(NameKind::KernelPlan, "A7").unwrap();
        assert_eq!(c.how, ClashHow::PtxasSymbol);
        assert!(c.to_string().contains("ptxas"));
        assert_eq!(
            generated_clash(NameKind::Alias, "A7"),
            None,
            "no PTX symbol"
        );
    }

    #[test]
    fn globs_match() {
        assert!(matches(&glob("TMA_RULE_*"), "TMA_RULE_Foo"));
        assert!(matches(&glob("TMA_RULE_*"), "TMA_RULE_"));
        assert!(!matches(&glob("TMA_RULE_*"), "TMA_RULEx"));
        assert!(matches(&glob("c#"), "c12"));
        assert!(!matches(&glob("c#"), "c"));
        assert!(!matches(&glob("c#"), "cx"));
        assert!(matches(&glob("a*b#c"), "axxb3c"));
    }
}
