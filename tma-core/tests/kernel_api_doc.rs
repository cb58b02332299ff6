//! docs/KERNEL_API.md is generated here, from the templates' doc comments, so it cannot go
//! stale: the test renders one representative kernel (tiles, a wgmma operand pair, a tile set,
//! a multicast pipeline, warp roles with per-consumer barriers, a kernel plan, the C++ header
//! with Mirage MPK's names), reads every generated struct, function, constant and macro back
//! with its doc comment ([`scan`]), and fails when the page differs from what the templates say
//! (`TMA_UPDATE_DOCS=1 cargo test -p tma-core --test kernel_api_doc` rewrites it) or when a
//! generated member has no doc: a new helper cannot be forgotten.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

#[path = "kernel_api_doc/scan.rs"]
mod scan;

use scan::{scan, Item, Kind};
use std::collections::BTreeSet;
use std::fmt::Write;
use tma_core::operand::{Major, Operand};
use tma_core::pipeline::{ClusterAxis, Consumers, PipelineSpec, WarpRoles};
use tma_core::plan::KernelPlan;
use tma_core::render::{
    self, HeaderOptions, KernelSource, PipelineCode, PlanCode, TileCode, TileSetCode, WarpRolesCode,
};
use tma_core::{validate, DType, Interleave, Swizzle, TileSpec, ValidSpec};

struct Decls {
    a: ValidSpec,
    b: ValidSpec,
    d: ValidSpec,
    bias: ValidSpec,
    act: ValidSpec,
    ring: tma_core::pipeline::ValidPipeline,
    roles: tma_core::pipeline::ValidWarpRoles,
    plan: tma_core::plan::ValidKernelPlan,
}

/// The page's declarations; the page shows this function's code between the markers.
fn decls() -> Decls {
    // page: begin
    let v = |s: TileSpec| validate(&s).unwrap();
    let a = v(TileSpec::new("a", DType::BF16, [4096, 4096], [64, 64])
        .dim_names(["M", "K"])
        .swizzle(Swizzle::B128)
        .repeat([2, 1])
        .wgmma(Operand::A, Major::K));
    let b = v(TileSpec::new("b", DType::BF16, [4096, 4096], [256, 64])
        .dim_names(["N", "K"])
        .swizzle(Swizzle::B128)
        .wgmma(Operand::B, Major::K));
    let d = v(TileSpec::new("d", DType::F32, [4096, 4096], [64, 32]).dim_names(["M", "N"]));
    let bias = v(TileSpec::new("bias", DType::F32, [4096], [256]).dim_names(["N"]));
    let act = v(
        TileSpec::new("act", DType::F16, [2, 4, 16, 32], [1, 1, 8, 8])
            .dim_names(["n", "c8", "h", "w"])
            .interleave(Interleave::B16)
            .swizzle(Swizzle::B128),
    );
    let ring = PipelineSpec::new("ring", 4, Consumers::Warpgroups(2))
        .multicast_tile("a", &a, ClusterAxis::Y)
        .tile("b", &b)
        .cluster([1, 2, 1])
        .validate()
        .unwrap();
    let roles = WarpRoles::new("gemm", 40, 2, 232)
        .barrier("all", 256)
        .per_consumer_barrier("epi", 128)
        .validate()
        .unwrap();
    let plan = KernelPlan::new("gemm")
        .pipeline(&ring)
        .roles(&roles)
        .tile_set("io", &[("d", &d), ("bias", &bias)])
        .staging("out", &d, 2)
        .scratch("flags", 64, 16)
        .tile("Act", &act)
        .validate()
        .unwrap();
    // page: end
    Decls {
        a,
        b,
        d,
        bias,
        act,
        ring,
        roles,
        plan,
    }
}

/// One part of the page: a template's items, selected from what the renderer gives.
struct Section {
    id: &'static str,
    title: &'static str,
    templates: &'static [&'static str],
    intro: &'static str,
    /// The items, each with the scope names its example struct stands for.
    items: Vec<Item>,
}

/// `tma_a` -> `tma_<tile>` in scopes: the members of every tile struct are one list.
fn generic(mut items: Vec<Item>, names: &[(&str, &str)]) -> Vec<Item> {
    for it in &mut items {
        for s in &mut it.scope {
            if let Some((_, to)) = names.iter().find(|(from, _)| s == from) {
                *s = to.to_string();
            }
        }
        // The struct itself, and its constructors.
        if let Some((_, to)) = names.iter().find(|(from, _)| it.name == *from) {
            it.name = to.to_string();
        }
    }
    items
}

fn select(src: &str, keep: impl Fn(&scan::Scanned, &Item) -> bool) -> Vec<Item> {
    let s = scan(src);
    s.items.iter().filter(|i| keep(&s, i)).cloned().collect()
}

fn sections(d: &Decls) -> Vec<Section> {
    let prelude = render::prelude();
    let under =
        |title: &'static str| select(&prelude, move |s, i| s.banner_of(i).starts_with(title));
    let tiles = [&d.a, &d.b, &d.d, &d.bias, &d.act];
    let mut tile_items = Vec::new();
    let mut tile_names = Vec::new();
    for (id, t) in (0u32..).zip(tiles) {
        let code = TileCode::new(t, id).unwrap();
        tile_names.push(code.cuda_name());
        let mut items = scan(code.source()).items;
        for i in &mut items {
            i.example = Some(format!("`{}`", t.spec().name));
        }
        if id > 0 {
            // The members named after each dim (BOX_<dim>, EXTENT_<dim>, the coordinates'
            // fields) are shown for the first tile only.
            let spec = t.spec();
            let per_dim: Vec<String> = (0..spec.rank())
                .flat_map(|d| {
                    let l = spec.dim_label(d).to_string();
                    [format!("BOX_{l}"), format!("EXTENT_{l}"), l]
                })
                .collect();
            items.retain(|i| !per_dim.contains(&i.name));
        }
        tile_items.extend(items);
    }
    let names: Vec<(&str, &str)> = tile_names
        .iter()
        .map(|n| (n.as_str(), "tma_<tile>"))
        .collect();
    let ops_src = KernelSource::new().tile(&d.a).tile(&d.b).build().unwrap();
    let ops = select(&ops_src, |_, i| {
        i.heading
            .as_deref()
            .is_some_and(|h| h.starts_with("wgmma.mma_async for"))
            || i.scope
                .first()
                .is_some_and(|s| s.starts_with("tma_wgmma_op<"))
    });
    let set = TileSetCode::new("io", &[("d", &d.d), ("bias", &d.bias)]).unwrap();
    let pipe = PipelineCode::new(&d.ring, 0).unwrap();
    let roles = WarpRolesCode::new(&d.roles).unwrap();
    let plan = PlanCode::new(&d.plan).unwrap();
    let im2col_valid = {
        let spec =
            tma_core::Im2colSpec::new("act_nhwc", tma_core::DType::BF16, [8, 56, 56, 64], 64, 128)
                .corners([-1, -1], [-1, -1])
                .swizzle(tma_core::Swizzle::B128)
                .wgmma(tma_core::Operand::A, tma_core::Major::K);
        tma_core::validate_im2col(&spec).unwrap()
    };
    let im2col = tma_core::render::Im2colCode::new(&im2col_valid, 0).unwrap();
    let header = tma_core::render::header_with_im2col(
        &[d.a.clone(), d.bias.clone()],
        std::slice::from_ref(&im2col_valid),
        &[],
        HeaderOptions { mpk: true },
    )
    .unwrap();
    let mut wgmma = under("tma wgmma helpers");
    wgmma.extend(ops);
    vec![
        Section {
            id: "prelude",
            title: "The prelude: types, tensor maps, bulk stores, mbarriers, debug records, store tokens",
            templates: &["prelude.cuh.tera"],
            intro: "Every source starts with it (`render::prelude`, include-guarded).",
            items: under("tma prelude"),
        },
        Section {
            id: "shapes",
            title: "Coordinates",
            templates: &["shapes.cuh.tera"],
            intro: "What every tile's `coords` struct and `offset()` need; plain C++, host code too.",
            items: under("tma shapes"),
        },
        Section {
            id: "kernel",
            title: "Tiles sharing a barrier or shared memory",
            templates: &["kernel.cuh.tera"],
            intro: "Templates over tile structs (and tile set, pipeline or plan structs).",
            items: under("tma kernel helpers"),
        },
        Section {
            id: "tile",
            title: "A tile: `struct tma_<tile>`",
            templates: &["tile.cuh.tera", "shape.cuh.tera", "operand.cuh.tera"],
            intro: "One per declared tile (`tma_2d!`, `#[derive(TmaTiles)]`, `TileSpec`; \
                    `render::TileCode`). Rendered here for tiles `a` and `b` (wgmma operands), \
                    `d`, `bias` (rank 1: every helper also takes the one coordinate bare) and \
                    `act` (interleaved: positions are chunks). Members that only some tiles \
                    have say which.",
            items: generic(tile_items, &names),
        },
        Section {
            id: "im2col",
            title: "An im2col tile: `struct tma_<tile>` of an `Im2colSpec`",
            templates: &["im2col.cuh.tera"],
            intro: "One per declared im2col tile (`Im2colSpec`; `render::Im2colCode`; \
                    docs/IM2COL.md): `load` takes the coordinates and the filter offsets as \
                    named structs, user order. Rendered for `act_nhwc`: NHWC bf16, 64 channels, \
                    128 pixels, corners -1 (a 3x3 filter, pad 1), 128B swizzle, declared wgmma's \
                    K-major A (`Im2colSpec::wgmma`: M = pixels, K = channels), so it has the \
                    operand helpers of a tiled operand tile (`desc`, `K_SLICES`, `M_BLOCKS`). \
                    In a pipeline (`PipelineSpec::im2col_tile(\"a\", ..)`) the stage's \
                    `load(s, .., a_map, {.N, .H, .W, .C}, {.H, .W}, ..)` takes its coordinates \
                    and its offsets.",
            items: generic(
                scan(im2col.source()).items,
                &[(&im2col.cuda_name(), "tma_<tile>")],
            ),
        },
        Section {
            id: "wgmma",
            title: "wgmma: fences, the accumulator's layout, `tma_wgmma<A, B>`, A from \
                    registers, the accumulator's rows",
            templates: &["wgmma.cuh.tera", "wgmma_ops.cuh.tera"],
            intro: "The free helpers are in every source; one instruction wrapper is rendered \
                    per shape the source's operand tiles need (here `a` x `b`: \
                    m64n256k16 bf16), with its register-A form for an f16 or bf16 B \
                    (`tma_wgmma_rs<B>`), and one run per B tile's k-slice count \
                    (`tma_wgmma_k<A, B>`, `tma_wgmma_rs_k<B>`: all the k-slices as one call). \
                    The row helpers and `tma_wgmma_acc_to_a` are what an \
                    attention kernel's softmax does to the accumulator; \
                    `tma_core::wgmma::registers` is their CPU model.",
            items: wgmma,
        },
        Section {
            id: "set",
            title: "A tile set: `struct tma_<set>`",
            templates: &["set.cuh.tera"],
            intro: "Tiles in one block's shared memory (`KernelSource::tile_set`, a plan's \
                    `tile_set`, `#[derive(TmaTiles)]`). Rendered for set `io` = `d`, `bias`.",
            items: generic(scan(set.source()).items, &[(&set.cuda_name(), "tma_<set>")]),
        },
        Section {
            id: "warp",
            title: "Warp specialisation: registers, elect-one, named barriers, clusters, pipeline state",
            templates: &["warp.cuh.tera"],
            intro: "In every source that has a pipeline or warp roles (`render::warp_support`).",
            items: scan(&render::warp_support().unwrap()).items,
        },
        Section {
            id: "pipeline",
            title: "A pipeline: `struct tma_pipe_<name>`",
            templates: &["pipeline.cuh.tera"],
            intro: "A ring of stages (`tma_pipeline!`, `PipelineSpec`; `render::PipelineCode`). \
                    Rendered for `ring`: 4 stages of `a` (multicast along cluster y over 2 CTAs) \
                    and `b`, released by 2 consumer warpgroups, cluster 1x2x1.",
            items: generic(scan(pipe.source()).items, &[(&pipe.cuda_name(), "tma_pipe_<name>")]),
        },
        Section {
            id: "roles",
            title: "Warp roles: `struct tma_roles_<name>`",
            templates: &["roles.cuh.tera"],
            intro: "Who is producer and who consumer, the register split and the named barriers \
                    (`tma_warp_roles!`, `WarpRoles`; `render::WarpRolesCode`). Rendered for \
                    `gemm`: 1 producer and 2 consumer warpgroups, setmaxnreg 40 / 232, barrier \
                    `all` and a barrier `epi` per consumer.",
            items: generic(scan(roles.source()).items, &[(&roles.cuda_name(), "tma_roles_<name>")]),
        },
        Section {
            id: "plan",
            title: "A kernel plan: `struct tma_plan_<name>`",
            templates: &["plan.cuh.tera"],
            intro: "The kernel's shared memory and launch, from one declaration (`KernelPlan`; \
                    `render::PlanCode`, `KernelSource::plan`). Rendered for `gemm`: the ring, \
                    the roles, tile set `io`, staging `out` (2 x `d`), scratch `flags`.",
            items: generic(scan(plan.source()).items, &[(&plan.cuda_name(), "tma_plan_<name>")]),
        },
        Section {
            id: "encode",
            title: "Host: encoding a tile's tensor map in C++",
            templates: &["encode.cuh.tera", "encode_tile.cuh.tera", "encode_im2col_tile.cuh.tera"],
            intro: "In the standalone header for C++ users (`render::header`, \
                    `render::header_with_im2col`, `tma header`), host code only. Rendered for \
                    tiles `a` and `bias` (`bias`: none of its dims at run time either) and the \
                    im2col tile `act_nhwc` (`cuTensorMapEncodeIm2col`).",
            items: select(&header, |s, i| s.banner_of(i).starts_with("tma host encoding")),
        },
        Section {
            id: "mpk",
            title: "Mirage MPK's names",
            templates: &["mpk.cuh.tera", "mpk_tile.cuh.tera"],
            intro: "With `HeaderOptions { mpk: true }` (`tma header --mpk`): MPK's barrier and \
                    store helpers, and per tile `kernel::tma::tma_<tile>` with MPK's contract.",
            items: generic(
                select(&header, |s, i| s.banner_of(i).starts_with("Mirage MPK")),
                &[("tma_a", "tma_<tile>"), ("tma_bias", "tma_<tile>")],
            ),
        },
    ]
}

/// All variants of one name in one scope (overloads, tiles, preprocessor branches).
struct Entry {
    kind: Kind,
    scope: Vec<String>,
    name: String,
    variants: Vec<Item>,
}

impl Entry {
    /// Each variant's tag lines as one text; each text once.
    fn tag(&self, tag: &str) -> Vec<String> {
        uniq(
            self.variants
                .iter()
                .map(|v| v.tag(tag).join(" "))
                .filter(|t| !t.is_empty()),
        )
    }
    fn who(&self) -> Vec<String> {
        self.tag("@who")
    }
    fn debug(&self) -> Vec<String> {
        self.tag("@debug")
    }
    fn timeline(&self) -> Vec<String> {
        self.tag("@timeline")
    }
    /// The examples it was rendered for, when not the section's first.
    fn only_in(&self, first: Option<&str>) -> Option<String> {
        let examples = uniq(self.variants.iter().filter_map(|v| v.example.clone()));
        (first.is_some() && !examples.iter().any(|e| Some(e.as_str()) == first))
            .then(|| format!("tile {}", examples.join(", ")))
    }
    fn internal(&self) -> bool {
        self.variants.iter().any(Item::is_internal)
    }
    /// The first variant's contract, then those of variants that declare something new
    /// (an overload), each text once: the same member of another example says the same.
    fn contracts(&self) -> Vec<Vec<String>> {
        let mut seen = Vec::new();
        let mut decls: Vec<&str> = Vec::new();
        for v in &self.variants {
            let new_decl = !decls.contains(&v.decl.as_str());
            decls.push(&v.decl);
            let c = v.contract();
            let more = new_decl && self.kind != Kind::Struct;
            if !c.is_empty() && !seen.contains(&c) && (seen.is_empty() || more) {
                seen.push(c);
            }
        }
        seen
    }
    fn conditions(&self) -> Vec<String> {
        let first = &self.variants[0].conditions;
        if self.variants.iter().all(|v| &v.conditions == first) {
            first.clone()
        } else {
            Vec::new()
        }
    }
}

fn uniq(it: impl IntoIterator<Item = String>) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for s in it {
        if !out.contains(&s) {
            out.push(s);
        }
    }
    out
}

fn entries(items: &[Item]) -> Vec<Entry> {
    let mut out: Vec<Entry> = Vec::new();
    for it in items.iter().filter(|i| !i.deleted) {
        match out
            .iter_mut()
            .find(|e| e.scope == it.scope && e.name == it.name && e.kind == it.kind)
        {
            Some(e) => e.variants.push(it.clone()),
            None => out.push(Entry {
                kind: it.kind,
                scope: it.scope.clone(),
                name: it.name.clone(),
                variants: vec![it.clone()],
            }),
        }
    }
    out
}

/// Markdown text: `<` and `*` escaped outside code spans (`|` too in a table cell).
fn md(text: &str, cell: bool) -> String {
    let mut out = String::new();
    for (i, part) in text.split('`').enumerate() {
        if i % 2 == 1 {
            out.push('`');
            out.push_str(&if cell {
                part.replace('|', "\\|")
            } else {
                part.to_string()
            });
            out.push('`');
            continue;
        }
        for c in part.replace("__", "\\_\\_").chars() {
            match c {
                '<' => out.push_str("&lt;"),
                '*' => out.push_str("\\*"),
                '|' if cell => out.push_str("\\|"),
                _ => out.push(c),
            }
        }
    }
    out
}

/// Comment lines as one paragraph; an indented line starts a line of its own.
fn prose(lines: &[String], cell: bool) -> String {
    let mut out = String::new();
    for l in lines {
        if l.trim().is_empty() {
            continue;
        }
        if !out.is_empty() {
            out.push_str(if l.starts_with("  ") { "<br>" } else { " " });
        }
        out.push_str(&md(l.trim(), cell));
    }
    out
}

fn code(s: &str) -> String {
    if s.contains('`') {
        format!("`` {s} ``")
    } else {
        format!("`{s}`")
    }
}

fn condition_note(conds: &[String]) -> Option<String> {
    (!conds.is_empty()).then(|| {
        let c: Vec<String> = conds.iter().map(|c| code(&format!("#if {c}"))).collect();
        format!("**Only where:** {}", c.join(", "))
    })
}

struct Writer<'a> {
    out: String,
    entries: &'a [Entry],
    /// The conditions of the struct being written (its members' notes leave them out).
    outer: Vec<String>,
    /// The meaning of the table's last row.
    last_meaning: Option<String>,
    /// The section's first example (members it lacks say which example has them).
    first_example: Option<String>,
}

impl<'a> Writer<'a> {
    fn children(&self, path: &[String]) -> Vec<&'a Entry> {
        let entries: &'a [Entry] = self.entries;
        entries
            .iter()
            .filter(|e| e.scope == path && !e.internal())
            .collect()
    }

    fn table_row(&mut self, e: &Entry) {
        let v = &e.variants[0];
        let decl = match e.kind {
            Kind::Macro => v.decl.clone(),
            Kind::Enum => format!("{} {{ {} }}", v.decl, v.enumerators.join(", ")),
            _ => match &v.value {
                Some(val) if val.len() <= 60 => format!("{} = {val}", v.decl),
                Some(_) => format!("{} = ...", v.decl),
                None => v.decl.clone(),
            },
        };
        let mut meaning = if v.trailing.is_empty() {
            let m = prose(&v.contract(), true);
            if self.last_meaning.as_ref() == Some(&m) && !m.is_empty() {
                "(as above)".to_string()
            } else {
                self.last_meaning = Some(m.clone());
                m
            }
        } else {
            self.last_meaning = None;
            prose(&v.trailing, true)
        };
        let conds = e.conditions();
        if conds != self.outer {
            if let Some(n) = condition_note(&conds) {
                meaning.push_str(&format!(" {}", n.replace("**", "")));
            }
        }
        if let Some(only) = e.only_in(self.first_example.as_deref()) {
            meaning.push_str(&format!(" Only in {only}."));
        }
        writeln!(
            self.out,
            "| `{}` | {} | {} |",
            e.name,
            code(&decl).replace('|', "\\|"),
            meaning
        )
        .unwrap();
    }

    fn function(&mut self, e: &Entry, level: usize) {
        let w = &mut self.out;
        writeln!(w, "{} `{}`\n", "#".repeat(level), e.name).unwrap();
        writeln!(w, "```cuda").unwrap();
        for sig in uniq(e.variants.iter().map(|v| v.decl.clone())) {
            writeln!(w, "{sig};").unwrap();
        }
        writeln!(w, "```\n").unwrap();
        let mut facts = Vec::new();
        let who = e.who();
        if !who.is_empty() {
            facts.push(format!("**Who:** {}", md(&who.join("; "), false)));
        }
        let debug = e.debug();
        if !debug.is_empty() {
            facts.push(format!("**Debug:** {}", md(&debug.join(" "), false)));
        }
        let timeline = e.timeline();
        if !timeline.is_empty() {
            facts.push(format!("**Timeline:** {}", md(&timeline.join(" "), false)));
        }
        let conds = e.conditions();
        if conds != self.outer {
            if let Some(n) = condition_note(&conds) {
                facts.push(n);
            }
        }
        if let Some(only) = e.only_in(self.first_example.as_deref()) {
            facts.push(format!("**Only in:** {only}"));
        }
        if !facts.is_empty() {
            writeln!(w, "{}\n", facts.join("<br>\n")).unwrap();
        }
        for c in e.contracts() {
            writeln!(w, "{}\n", prose(&c, false)).unwrap();
        }
    }

    fn structure(&mut self, e: &Entry, level: usize) {
        let v = &e.variants[0];
        let shown = e
            .scope
            .iter()
            .chain([&e.name])
            .cloned()
            .collect::<Vec<_>>()
            .join("::");
        writeln!(self.out, "{} struct `{}`\n", "#".repeat(level), shown).unwrap();
        if v.banner {
            writeln!(self.out, "```text\n{}\n```\n", v.doc.join("\n").trim_end()).unwrap();
        } else {
            let mut facts = Vec::new();
            let who = e.who();
            if !who.is_empty() {
                facts.push(format!("**Who:** {}", md(&who.join("; "), false)));
            }
            if let Some(n) = condition_note(&e.conditions()) {
                facts.push(n);
            }
            if !facts.is_empty() {
                writeln!(self.out, "{}\n", facts.join("<br>\n")).unwrap();
            }
            for c in e.contracts() {
                writeln!(self.out, "{}\n", prose(&c, false)).unwrap();
            }
        }
        let mut path = e.scope.clone();
        path.push(e.name.clone());
        let outer = std::mem::replace(&mut self.outer, e.conditions());
        self.members(&path, (level + 1).min(6));
        self.outer = outer;
    }

    /// The entries of one scope, in order: tables of constants and types, then functions,
    /// under the scope's `---- title ----` subsections.
    fn members(&mut self, path: &[String], level: usize) {
        let children = self.children(path);
        let mut heading: Option<String> = None;
        let mut in_table = false;
        for e in children {
            let h = e.variants[0].heading.clone();
            if h != heading && h.is_some() {
                if in_table {
                    self.out.push('\n');
                    in_table = false;
                }
                writeln!(
                    self.out,
                    "{} {}\n",
                    "#".repeat(level),
                    md(h.as_deref().unwrap_or(""), false)
                )
                .unwrap();
            }
            heading = h;
            match e.kind {
                Kind::Function => {
                    if in_table {
                        self.out.push('\n');
                        in_table = false;
                    }
                    self.function(e, (level + 1).min(6));
                }
                Kind::Struct => {
                    if in_table {
                        self.out.push('\n');
                        in_table = false;
                    }
                    self.structure(e, (level + 1).min(6));
                }
                _ => {
                    if !in_table {
                        writeln!(
                            self.out,
                            "| name | declaration | meaning |\n| --- | --- | --- |"
                        )
                        .unwrap();
                        in_table = true;
                        self.last_meaning = None;
                    }
                    self.table_row(e);
                }
            }
        }
        if in_table {
            self.out.push('\n');
        }
    }
}

fn page() -> String {
    let d = decls();
    let mut w = String::new();
    writeln!(
        w,
        "# The kernel-side API: every generated struct and function\n"
    )
    .unwrap();
    writeln!(
        w,
        "<!-- Generated by tma-core/tests/kernel_api_doc.rs from the doc comments of \
         tma-core/templates/ (TMA_UPDATE_DOCS=1 rewrites it); do not edit. -->\n"
    )
    .unwrap();
    w.push_str(INTRO);
    writeln!(w, "\n```rust\n{}```\n", declarations()).unwrap();
    let sections = sections(&d);
    writeln!(w, "## Contents\n").unwrap();
    for (n, s) in (1..).zip(&sections) {
        writeln!(w, "{n}. [{}](#{})", md(s.title, false), s.id).unwrap();
    }
    w.push('\n');
    for (n, s) in (1..).zip(&sections) {
        let entries = entries(&s.items);
        writeln!(
            w,
            "<a id=\"{}\"></a>\n\n## {n}. {}\n",
            s.id,
            md(s.title, false)
        )
        .unwrap();
        let templates: Vec<String> = s
            .templates
            .iter()
            .map(|t| format!("[`{t}`](../tma-core/templates/{t})"))
            .collect();
        writeln!(w, "{} From {}.\n", md(s.intro, false), templates.join(", ")).unwrap();
        let internal: Vec<&Entry> = entries.iter().filter(|e| e.internal()).collect();
        let mut writer = Writer {
            out: String::new(),
            entries: &entries,
            outer: Vec::new(),
            last_meaning: None,
            first_example: s.items.first().and_then(|i| i.example.clone()),
        };
        // File scope and namespaces: every scope that is no struct.
        let structs: BTreeSet<Vec<String>> = entries
            .iter()
            .filter(|e| e.kind == Kind::Struct)
            .map(|e| e.scope.iter().chain([&e.name]).cloned().collect())
            .collect();
        let mut scopes: Vec<Vec<String>> = Vec::new();
        for e in &entries {
            if !structs.contains(&e.scope) && !scopes.contains(&e.scope) {
                scopes.push(e.scope.clone());
            }
        }
        for scope in scopes {
            if !scope.is_empty() {
                writeln!(writer.out, "### namespace `{}`\n", scope.join("::")).unwrap();
            }
            writer.members(&scope, 3);
        }
        w.push_str(&writer.out);
        if !internal.is_empty() {
            writeln!(w, "Implementation details (`@internal`, not API):\n").unwrap();
            for e in internal {
                let shown = e
                    .scope
                    .iter()
                    .chain([&e.name])
                    .cloned()
                    .collect::<Vec<_>>()
                    .join("::");
                let why = e
                    .variants
                    .iter()
                    .flat_map(|v| v.tag("@internal"))
                    .find(|t| !t.is_empty())
                    .or_else(|| e.variants[0].contract().first().cloned())
                    .unwrap_or_default();
                writeln!(w, "- `{shown}`: {}", md(&why, false)).unwrap();
            }
            w.push('\n');
        }
    }
    w.push_str(OUTRO);
    w.trim_end().to_string() + "\n"
}

/// The code of [`decls`] between its markers, dedented.
fn declarations() -> String {
    let this = include_str!("kernel_api_doc.rs");
    let lines: Vec<&str> = this.lines().collect();
    let begin = lines
        .iter()
        .position(|l| l.trim() == "// page: begin")
        .unwrap();
    let end = lines
        .iter()
        .position(|l| l.trim() == "// page: end")
        .unwrap();
    lines[begin + 1..end]
        .iter()
        .map(|l| format!("{}\n", l.strip_prefix("    ").unwrap_or(l)))
        .collect()
}

const INTRO: &str = "\
What `tma` writes into a kernel's CUDA source, member by member: what each struct and function \
is for, its contract, which threads call it and what a debug build checks in it. Each entry is \
the doc comment above the declaration in `tma-core/templates/`, read back from the rendered \
source of one representative kernel:

- **Who:** the threads that call it (one thread, every thread of a warp or warpgroup, every \
  consumer thread, ...). A collective (`.sync.aligned`) helper called by fewer is undefined \
  behaviour.
- **Debug:** what it checks in a `TMA_DEBUG` build (`CompileOptions::debug_waits(true)`): a \
  failed check writes the debug record naming tile, helper, rule, dim and value and traps, and \
  the runtime returns `Error::DeviceCheck` naming the same; the rule names are \
  `tma::spec::Rule`'s (docs/CONTRACTS.md, \"Debug waits and checks\"). A bounded wait gives up \
  after `TMA_DEBUG_TIMEOUT_NS` (1 s; `TMA_WAIT_TIMEOUT_NS`, 10 s, in a release build with \
  `TMA_BOUNDED_WAITS`) with `Error::BarrierTimeout` or `Error::PipelineTimeout`. No Debug \
  line: nothing is checked.
- **Timeline:** the event it records in a `TMA_TIMELINE` build (`CompileOptions::timeline(true)`; \
  `tma_runtime::timeline`): one per warp and pass through a stage, into the slot of its kind. \
  No Timeline line: nothing is recorded. Without `TMA_TIMELINE` no helper records anything.
- **Only where:** the preprocessor condition it is compiled under.

Names that come from the declarations are shown as this page's example gives them: tiles `a`, \
`b`, `d`, `bias`, `act`; pipeline `ring` (members `a`, `b`); warp roles `gemm` (barriers `all`, \
`epi`); plan `gemm` (regions `ring`, `io`, `out`, `flags`); tile set `io`. `tma_<tile>` stands \
for every tile struct. The declarations (Rust builders; the macros say the same):
";

const OUTRO: &str = "\
## How this page is made

`tma-core/tests/kernel_api_doc.rs` renders the declarations above, reads every generated \
declaration back with the comment block right above it, and writes this page; it fails when \
the page is stale (`TMA_UPDATE_DOCS=1 cargo test -p tma-core --test kernel_api_doc` rewrites \
it) and when a template breaks the convention:

- every generated struct, function, constant, field, type and macro has a doc: the `//` \
  block right above it (conditional-compilation lines may come between; a struct may take \
  the banner above it), its trailing `// ...`, or that of the declaration right above it when \
  no blank line parts them (a group; its `@internal` is not shared);
- every function has a `// @who ...` line: the threads that call it;
- a function whose debug build checks a rule or whose wait writes a hang record (following \
  its calls) has a `// @debug ...` line; a rule that line names must be one the function can \
  fail, and every device-checked rule is named by some `@debug` line;
- a function that records a timeline event (itself, or through the functions of its struct it \
  calls) has a `// @timeline <kind>: ...` line naming the kinds it records, and only such a \
  function has one;
- `// @internal ...` marks an implementation detail (listed per section, not documented);
- every tag line of the templates appears in the rendered sources (a member only some \
  declarations generate needs such a declaration on this page).
";

/// The rules a function's debug build can fail, following its calls by name through every
/// function of the page, and whether it holds a bounded wait (one that writes a hang record).
struct Checks<'a> {
    functions: Vec<&'a Item>,
}

impl Checks<'_> {
    fn reach(&self, root: &[&Item]) -> (BTreeSet<String>, bool) {
        let mut rules = BTreeSet::new();
        let mut waits = false;
        let mut seen: BTreeSet<String> = BTreeSet::new();
        let mut todo: Vec<&Item> = root.to_vec();
        while let Some(f) = todo.pop() {
            let mut rest = f.body.as_str();
            while let Some(at) = rest.find("TMA_RULE_") {
                rest = &rest[at + "TMA_RULE_".len()..];
                let name: String = rest
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_')
                    .collect();
                rules.insert(name);
            }
            waits |= f.body.contains("tma_wait_slow(");
            for call in scan::calls(&f.body) {
                if seen.insert(call.clone()) {
                    // A constructor's object is destroyed too.
                    let dtor = format!("~{call}");
                    todo.extend(
                        self.functions
                            .iter()
                            .filter(|g| g.name == call || g.name == dtor),
                    );
                }
            }
        }
        (rules, waits)
    }

    /// The timeline kinds a function records (`tma_timeline_record(TMA_TIMELINE_<KIND>, ..)`),
    /// itself or through the functions of its own struct it calls (`release_after_store`
    /// through `release`): names alone would mix a pipeline's `load` with a tile's.
    fn records(&self, root: &[&Item]) -> BTreeSet<String> {
        let mut kinds = BTreeSet::new();
        let mut seen: BTreeSet<String> = BTreeSet::new();
        let mut todo: Vec<&Item> = root.to_vec();
        while let Some(f) = todo.pop() {
            let mut rest = f.body.as_str();
            while let Some(at) = rest.find("tma_timeline_record(TMA_TIMELINE_") {
                rest = &rest[at + "tma_timeline_record(TMA_TIMELINE_".len()..];
                let kind: String = rest
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_')
                    .collect();
                kinds.insert(kind.to_ascii_lowercase());
            }
            for call in scan::calls(&f.body) {
                if seen.insert(call.clone()) {
                    todo.extend(
                        self.functions
                            .iter()
                            .filter(|g| g.name == call && g.scope == f.scope),
                    );
                }
            }
        }
        kinds
    }
}

/// Every way the page's sources break the doc convention, each naming the member and the
/// template to fix.
fn problems(sections: &[Section]) -> Vec<String> {
    let all: Vec<&Item> = sections.iter().flat_map(|s| &s.items).collect();
    let checks = Checks {
        functions: all
            .iter()
            .copied()
            .filter(|i| i.kind == Kind::Function)
            .collect(),
    };
    // The rules the device checks: the prelude's TMA_RULE_<name> codes.
    let device_rules: BTreeSet<String> = all
        .iter()
        .filter_map(|i| i.name.strip_prefix("TMA_RULE_"))
        .map(str::to_string)
        .collect();
    let mut documented_rules = BTreeSet::new();
    let mut out = Vec::new();
    for s in sections {
        let entries = entries(&s.items);
        let internal_structs: BTreeSet<Vec<String>> = entries
            .iter()
            .filter(|e| e.kind == Kind::Struct && e.internal())
            .map(|e| e.scope.iter().chain([&e.name]).cloned().collect())
            .collect();
        for e in &entries {
            // The members of an internal struct are its business.
            if internal_structs.iter().any(|p| e.scope.starts_with(p)) {
                continue;
            }
            let internal = e.internal();
            let shown = e
                .scope
                .iter()
                .chain([&e.name])
                .cloned()
                .collect::<Vec<_>>()
                .join("::");
            let at = format!(
                "{} (tma-core/templates/{})",
                shown,
                s.templates.join(" or ")
            );
            let documented = !e.contracts().is_empty()
                || e.variants.iter().any(|v| v.banner)
                || internal && !e.variants.iter().all(|v| v.doc.is_empty());
            if !documented {
                out.push(format!(
                    "{at}: no doc comment (a `//` block right above it)"
                ));
            }
            if internal {
                continue;
            }
            if e.kind == Kind::Function && e.who().is_empty() {
                out.push(format!("{at}: no `// @who` line (which threads call it)"));
            }
            if e.kind != Kind::Function {
                continue;
            }
            let (rules, waits) = checks.reach(&e.variants.iter().collect::<Vec<_>>());
            let records = checks.records(&e.variants.iter().collect::<Vec<_>>());
            let timeline = e.timeline().join(" ");
            // `@timeline <kind>, ..: what it spans`: the kinds before the colon.
            let named: BTreeSet<String> = timeline
                .split_once(':')
                .map_or("", |(kinds, _)| kinds)
                .split(',')
                .map(|k| k.trim().to_string())
                .filter(|k| !k.is_empty())
                .collect();
            if timeline.is_empty() && !records.is_empty() {
                out.push(format!(
                    "{at}: no `// @timeline` line, but it records {}",
                    records.iter().cloned().collect::<Vec<_>>().join(", ")
                ));
            } else if !timeline.is_empty() && named != records {
                out.push(format!(
                    "{at}: `@timeline {timeline}` names {:?}, but it records {:?}",
                    named, records
                ));
            }
            let debug = e.debug().join(" ");
            if debug.is_empty() && (!rules.is_empty() || waits) {
                let what = if rules.is_empty() {
                    "its wait is bounded and writes the hang record".to_string()
                } else {
                    format!(
                        "its debug build checks {}",
                        rules.iter().cloned().collect::<Vec<_>>().join(", ")
                    )
                };
                out.push(format!("{at}: no `// @debug` line, but {what}"));
            }
            for r in &device_rules {
                if debug.contains(r.as_str()) {
                    documented_rules.insert(r.clone());
                    if !rules.contains(r) {
                        out.push(format!(
                            "{at}: `@debug` names {r}, which nothing it calls checks"
                        ));
                    }
                }
            }
        }
    }
    for r in device_rules.difference(&documented_rules) {
        out.push(format!(
            "device-checked rule {r}: no `@debug` line names it"
        ));
    }
    out
}

/// Every tag line of the templates, to check that the page's sources render each: a member
/// only some declarations generate is documented only if one of them is on the page.
fn template_tags() -> Vec<(String, String)> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("templates");
    let mut out = Vec::new();
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    for f in files {
        let text = std::fs::read_to_string(&f).unwrap();
        let name = f.file_name().unwrap().to_string_lossy().to_string();
        for line in text.lines() {
            let t = line.trim();
            let Some(rest) = t.strip_prefix("//") else {
                continue;
            };
            let rest = rest.trim_start();
            if scan::is_tag(rest) && !t.contains("{{") && !t.contains("{%") {
                out.push((name.clone(), t.to_string()));
            }
        }
    }
    out
}

#[test]
fn docs_kernel_api_md_is_what_the_templates_say() {
    let d = decls();
    let sections = sections(&d);
    let mut bad = problems(&sections);
    let rendered: String = sections
        .iter()
        .flat_map(|s| &s.items)
        .flat_map(|i| i.doc.iter())
        .map(|l| format!("{l}\n"))
        .collect();
    for (file, tag) in template_tags() {
        let text = scan::collapse(tag.trim_start_matches('/'));
        if !rendered.lines().any(|l| scan::collapse(l) == text) {
            bad.push(format!(
                "tma-core/templates/{file}: `{tag}` documents nothing the page renders: declare \
                 what generates that member in tma-core/tests/kernel_api_doc.rs"
            ));
        }
    }
    assert!(
        bad.is_empty(),
        "the templates' doc comments (docs/KERNEL_API.md's convention) are incomplete:\n  {}",
        bad.join("\n  ")
    );
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/KERNEL_API.md");
    let want = page();
    if std::env::var_os("TMA_UPDATE_DOCS").is_some() {
        std::fs::write(&path, &want).unwrap();
    }
    let have = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        have == want,
        "docs/KERNEL_API.md is stale: run TMA_UPDATE_DOCS=1 cargo test -p tma-core --test kernel_api_doc"
    );
}
