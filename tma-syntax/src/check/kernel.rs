//! Meaning of `tma_kernel!`: the entries -> a [`KernelPlan`] ->
//! [`validate_plan`](tma_core::plan::validate_plan) (the function the run-time builder calls),
//! each finding at the token it is about.
//!
//! A part declared inline is checked here as its own macro checks it: a staging or aliased
//! tile as a pipeline checks its stage tiles (same errors, same tokens; without a `target` it
//! takes the plan's), a pipeline or warp roles by `check::pipeline`'s entry points (their
//! errors are their own macro's to report: the expansion hands the tokens to it). A part named
//! by type is known to rustc, not to the macro: the plan is then checked here without it for
//! the rules that cannot involve it (names, copies, scratch, targets of the parts seen), and
//! the expansion checks the rest in `const` items over the types' constants
//! (`tma_core::plan::consts`), at the same tokens, with the same messages.

use super::entries::{cluster_shape, int, name_of, TileInput};
use super::pipeline as parts;
use super::{snake_case, tile, Checked};
use crate::errors::Errors;
use crate::parse::{
    KernelDecl, KernelValue, NamedTile, Part, PipelineDecl, QueueItem, RolesDecl, ScratchItem,
    TileDecl, Value, Word,
};
use proc_macro2::Span;
use std::collections::HashMap;
use syn::ext::IdentExt;
use tma_core::echo::shown;
use tma_core::pipeline::{ValidPipeline, ValidWarpRoles, ValidWorkQueue, WorkQueue};
use tma_core::plan::consts::{first_past, place, Placed, PlanIn, RegionInfo};
use tma_core::plan::{KernelPlan, RegionKind, ValidKernelPlan};
use tma_core::render::KernelSource;
use tma_core::{validate, Arch, DType, Field, Rule, SpecError, TileSpec, ValidSpec};

/// A scratch region's alignment when `align` is not written: the base's own 16 bytes.
pub const DEFAULT_SCRATCH_ALIGN: u64 = 16;

const KEYS: [&str; 12] = [
    "name",
    "target",
    "roles",
    "pipelines",
    "tiles",
    "staging",
    "scratch",
    "block_threads",
    "cluster",
    "blocks_per_sm",
    "work_queues",
    "tile_sets",
];

/// A kernel plan whose entries all read and whose rules hold as far as the macro can see.
pub struct CheckedKernel<'a> {
    pub decl: &'a KernelDecl,
    /// The kernel's name (`name = ".."`, else the type's in snake case).
    pub name: String,
    pub target: Arch,
    pub roles: Option<&'a Part<RolesDecl>>,
    pub pipelines: Vec<&'a Part<PipelineDecl>>,
    /// Aliased tiles (`tiles = [..]`), in order.
    pub tiles: Vec<CheckedTile<'a>>,
    /// Staging and scratch regions, in the order written.
    pub regions: Vec<CheckedRegion<'a>>,
    pub block_threads: Option<(u32, Span)>,
    pub cluster: Option<([u32; 3], Span)>,
    pub blocks_per_sm: Option<(u32, Span)>,
    /// The plan, validated here, when no part is named by type.
    pub valid: Option<ValidKernelPlan>,
}

/// An aliased or staging tile: its part, and its check when declared inline.
pub struct CheckedTile<'a> {
    pub item: &'a NamedTile,
    pub checked: Option<Box<Checked>>,
}

/// A staging or scratch region.
pub enum CheckedRegion<'a> {
    Staging {
        tile: CheckedTile<'a>,
        copies: u32,
    },
    Scratch {
        item: &'a ScratchItem,
        bytes: u64,
        align: u64,
    },
    /// A work queue (`work_queues = [tiles = 4 readers warpgroups(2)]`).
    WorkQueue {
        item: &'a QueueItem,
        queue: ValidWorkQueue,
    },
}

impl CheckedRegion<'_> {
    pub fn name(&self) -> String {
        match self {
            CheckedRegion::Staging { tile, .. } => tile.item.label.unraw().to_string(),
            CheckedRegion::Scratch { item, .. } => item.name.unraw().to_string(),
            CheckedRegion::WorkQueue { item, .. } => item.name.unraw().to_string(),
        }
    }
    /// The region's name as written.
    pub fn span(&self) -> Span {
        match self {
            CheckedRegion::Staging { tile, .. } => tile.item.label.span(),
            CheckedRegion::Scratch { item, .. } => item.name.span(),
            CheckedRegion::WorkQueue { item, .. } => item.name.span(),
        }
    }
}

impl CheckedKernel<'_> {
    /// Every part the macro sees: no pipeline, roles or tile named by type.
    pub fn all_inline(&self) -> bool {
        let tiles_inline = self
            .tiles
            .iter()
            .chain(self.regions.iter().filter_map(|r| match r {
                CheckedRegion::Staging { tile, .. } => Some(tile),
                CheckedRegion::Scratch { .. } | CheckedRegion::WorkQueue { .. } => None,
            }))
            .all(|t| t.checked.is_some());
        tiles_inline
            && self
                .pipelines
                .iter()
                .all(|p| matches!(p, Part::Inline { .. }))
            && self.roles.is_none_or(|r| matches!(r, Part::Inline { .. }))
    }

    /// The token a region's findings go to: a pipeline's part, a region's name.
    pub fn region_spans(&self) -> Vec<Span> {
        self.pipelines
            .iter()
            .map(|p| p.span())
            .chain(self.regions.iter().map(CheckedRegion::span))
            .collect()
    }

    /// The token the block's thread count is about: `block_threads = n`, else the roles, else
    /// the type.
    pub fn block_threads_span(&self) -> Span {
        self.block_threads
            .map(|b| b.1)
            .or(self.roles.map(Part::span))
            .unwrap_or(self.decl.header.ident.span())
    }

    /// The token the cluster is about: `cluster = [..]`, else the first pipeline, else the type.
    pub fn cluster_span(&self) -> Span {
        self.cluster
            .map(|c| c.1)
            .or(self.pipelines.first().map(|p| p.span()))
            .unwrap_or(self.decl.header.ident.span())
    }
}

/// Why a plan was not accepted: errors to report, or none of its own (a part declared inline
/// was rejected by its own macro, which reports why).
pub type Rejected = Option<syn::Error>;

/// `tma_kernel! { .. }`: every entry, every inline part, then the plan's rules; every error at
/// once.
pub fn kernel(decl: &KernelDecl) -> Result<CheckedKernel<'_>, Rejected> {
    let ident = decl.header.ident.span();
    let mut errs = Errors::default();
    let mut seen: HashMap<String, Span> = HashMap::new();
    let mut values: HashMap<&'static str, &KernelValue> = HashMap::new();
    for entry in &decl.entries {
        let key = entry.key.unraw().to_string();
        let Some(slot) = KEYS.iter().find(|k| **k == key).copied() else {
            errs.push(
                entry.key.span(),
                format!(
                    "unknown key `{}`; expected one of: {}",
                    shown(&key),
                    KEYS[..11].join(", ")
                ),
            );
            continue;
        };
        if seen.insert(key.clone(), entry.key.span()).is_some() {
            errs.push(entry.key.span(), format!("duplicate key `{key}`"));
            continue;
        }
        let Some(value) = &entry.value else {
            errs.push(
                entry.key.span(),
                format!("expected a value: `{key} = {}`", example(&key)),
            );
            continue;
        };
        if slot == "tile_sets" {
            errs.push(
                entry.key.span(),
                "a kernel plan's tile sets are the builder's (`KernelPlan::tile_set`); in `tma_kernel!`, declare the tiles as `staging` regions",
            );
            continue;
        }
        values.insert(slot, value);
    }

    let word = |key: &str, errs: &mut Errors| match values.get(key) {
        Some(KernelValue::Value(Value::Word(w))) => Some(w.clone()),
        Some(other) => {
            errs.push(
                other.span(),
                format!("`{key}` takes one value: `{key} = {}`", example(key)),
            );
            None
        }
        None => None,
    };
    let name = word("name", &mut errs).and_then(|w| name_of(&w, &mut errs));
    let mut target = Arch::Sm90a;
    if let Some(w) = word("target", &mut errs) {
        match Arch::parse(&w.text()).filter(|_| !matches!(w, Word::Underscore(_))) {
            Some(a) => target = a,
            None => errs.push(
                w.span(),
                format!(
                    "unknown target `{}`; expected one of: {}",
                    shown(&w.text()),
                    Arch::ACCEPTED
                ),
            ),
        }
    }
    let count = |key: &str, errs: &mut Errors| {
        word(key, errs).and_then(|w| int::<u32>(&w, key, errs).map(|v| (v, w.span())))
    };
    let block_threads = count("block_threads", &mut errs);
    let blocks_per_sm = count("blocks_per_sm", &mut errs);
    let cluster = match values.get("cluster") {
        Some(KernelValue::Value(Value::List(list))) => {
            cluster_shape(list, &mut errs).map(|shape| (shape, list.span))
        }
        Some(other) => {
            errs.push(
                other.span(),
                "`cluster` is the cluster shape: `cluster = [x, y, z]`",
            );
            None
        }
        None => None,
    };

    // The parts. An inline pipeline or roles rejected by its own checks: its macro reports.
    let mut part_rejected = false;
    let roles: Option<&Part<RolesDecl>> = match values.get("roles") {
        Some(KernelValue::Roles(r)) => Some(&**r),
        _ => None,
    };
    let mut known_roles = None;
    if let Some(Part::Inline { decl, .. }) = roles {
        match parts::roles(decl) {
            Ok(c) => known_roles = Some(c.valid),
            Err(_) => part_rejected = true,
        }
    }
    let pipelines: Vec<&Part<PipelineDecl>> = match values.get("pipelines") {
        Some(KernelValue::Pipelines(list)) => list.items.iter().collect(),
        _ => Vec::new(),
    };
    // Each pipeline as the macro sees it: an inline one checked, one named by type unknown.
    let mut seen_pipelines = Vec::new();
    for p in &pipelines {
        seen_pipelines.push(match p {
            Part::Inline { decl, .. } => match parts::pipeline(decl) {
                Ok(c) => Some(c.valid),
                Err(_) => {
                    part_rejected = true;
                    None
                }
            },
            Part::Path(_) => None,
        });
    }
    let mut tile_id = 0u32;
    let mut inline_tile = |item: &NamedTile, errs: &mut Errors| -> (Option<Box<Checked>>, bool) {
        let Part::Inline { name, decl, .. } = &item.tile else {
            return (None, true);
        };
        let Some(rank) = rank(&name.unraw().to_string()) else {
            return (None, false);
        };
        let input = TileInput {
            ident: &decl.ident,
            default_name: snake_case(&decl.ident.unraw().to_string()),
            dtype: Some(&decl.dtype),
            entries: &decl.entries,
            rank: Some(rank),
            flags: &[],
        };
        let checked = tile(input, tile_id, Some(target), errs).map(Box::new);
        tile_id += 1;
        let ok = checked.is_some();
        (checked, ok)
    };
    let mut tiles = Vec::new();
    if let Some(KernelValue::Tiles(list)) = values.get("tiles") {
        for item in &list.items {
            if let Some((x, _)) = &item.copies {
                errs.push(
                    x.span(),
                    "an aliased tile names a tile for the kernel (`using A = tma_a;`) and holds no shared memory: copies go in `staging = [..]`",
                );
            }
            let (checked, ok) = inline_tile(item, &mut errs);
            if ok {
                tiles.push(CheckedTile { item, checked });
            }
        }
    } else if let Some(other) = values.get("tiles") {
        errs.push(other.span(), "`tiles` is a list: `tiles = [A: GemmA, ..]`");
    }
    // Staging and scratch, in the order their keys were written.
    let mut regions = Vec::new();
    let order: Vec<&str> = decl
        .entries
        .iter()
        .map(|e| e.key.unraw().to_string())
        .filter_map(|k| {
            ["staging", "scratch", "work_queues"]
                .into_iter()
                .find(|s| *s == k)
        })
        .collect();
    for key in order {
        match (key, values.get(key)) {
            ("staging", Some(KernelValue::Tiles(list))) => {
                for item in &list.items {
                    let copies = match &item.copies {
                        Some((_, w)) => int::<u32>(w, "staging", &mut errs),
                        None => Some(1),
                    };
                    let (checked, ok) = inline_tile(item, &mut errs);
                    if let (Some(copies), true) = (copies, ok) {
                        regions.push(CheckedRegion::Staging {
                            tile: CheckedTile { item, checked },
                            copies,
                        });
                    }
                }
            }
            ("scratch", Some(KernelValue::Scratch(list))) => {
                for item in &list.items {
                    let bytes = int::<u64>(&item.bytes, "scratch", &mut errs);
                    let align = match &item.align {
                        Some((_, w)) => int::<u64>(w, "scratch", &mut errs),
                        None => Some(DEFAULT_SCRATCH_ALIGN),
                    };
                    if let (Some(bytes), Some(align)) = (bytes, align) {
                        regions.push(CheckedRegion::Scratch { item, bytes, align });
                    }
                }
            }
            ("work_queues", Some(KernelValue::Queues(list))) => {
                for item in &list.items {
                    if let Some(queue) = work_queue(item, &mut errs) {
                        regions.push(CheckedRegion::WorkQueue { item, queue });
                    }
                }
            }
            (_, Some(other))
                if !matches!(
                    other,
                    KernelValue::Tiles(_) | KernelValue::Scratch(_) | KernelValue::Queues(_)
                ) =>
            {
                errs.push(
                    other.span(),
                    format!("`{key}` is a list: `{key} = {}`", example(key)),
                );
            }
            _ => {}
        }
    }
    for (key, want) in [
        (
            "roles",
            matches!(values.get("roles"), None | Some(KernelValue::Roles(_))),
        ),
        (
            "pipelines",
            matches!(
                values.get("pipelines"),
                None | Some(KernelValue::Pipelines(_))
            ),
        ),
    ] {
        if !want {
            if let Some(v) = values.get(key) {
                errs.push(v.span(), format!("expected `{key} = {}`", example(key)));
            }
        }
    }
    if !errs.is_empty() {
        return Err(errs.finish::<()>(None, ident).err());
    }

    let mut checked = CheckedKernel {
        decl,
        name: name.as_ref().map_or_else(
            || snake_case(&decl.header.ident.unraw().to_string()),
            |n| n.0.clone(),
        ),
        target,
        roles,
        pipelines,
        tiles,
        regions,
        block_threads,
        cluster,
        blocks_per_sm,
        valid: None,
    };
    // A rejected inline part is unknown here, as one named by type is.
    let all_inline = checked.all_inline() && !part_rejected;
    let plan = known_plan(&checked, seen_pipelines.iter().flatten(), known_roles);
    match plan.validate() {
        Ok(valid) if all_inline => {
            // Rendered once here, so `kernel_source().build()` of the expansion holds.
            if let Err(e) = KernelSource::new().plan(&valid).build() {
                return Err(Some(syn::Error::new(
                    ident,
                    format!("rendering the kernel plan's CUDA failed: {e}"),
                )));
            }
            checked.valid = Some(valid);
        }
        Ok(_) => {}
        Err(e) => {
            let sites = Sites::of(&checked, &seen_pipelines, name.map(|n| n.1));
            let mut dups: HashMap<String, usize> = HashMap::new();
            for finding in &e.errors {
                if all_inline || local(finding) {
                    errs.push(sites.span(finding, &plan, &mut dups), finding);
                }
            }
        }
    }
    if part_rejected {
        // The part's own macro reports why; the plan adds what it found without it.
        return Err((!errs.is_empty())
            .then(|| errs.finish::<()>(None, ident).err())
            .flatten());
    }
    errs.finish(Some(checked), ident).map_err(Some)
}

/// A work queue as written: its slots and readers, checked as `WorkQueue::validate` checks
/// them (each finding at its token).
fn work_queue(item: &QueueItem, errs: &mut Errors) -> Option<ValidWorkQueue> {
    let slots = int::<u32>(&item.slots, "work_queues", errs);
    let Some((_, call)) = &item.readers else {
        errs.push(
            item.name.span(),
            format!(
                "a work queue names who pops its slots: `{} = {} readers warpgroups(2)` (or warps(n), threads(n))",
                shown(&item.name.unraw().to_string()),
                item.slots.span().source_text().unwrap_or_else(|| "4".to_string())
            ),
        );
        return None;
    };
    let readers = parts::read_consumers(call, errs);
    let (slots, (readers, _)) = (slots?, readers?);
    match WorkQueue::new(slots, readers).validate() {
        Ok(q) => Some(q),
        Err(e) => {
            for f in &e.errors {
                let at = match f.field {
                    Field::Slots => item.slots.span(),
                    _ => call.span,
                };
                errs.push(at, f);
            }
            None
        }
    }
}

/// The rules a part named by type cannot change (kept from the plan checked without it):
/// the plan's name, region names among those written (against the derived generated-names
/// table, `GeneratedNameClash`, and each other), copies and scratch, the targets of the parts
/// seen, the launch bounds' blocks per SM.
fn local(f: &SpecError) -> bool {
    match f.rule {
        Rule::NameIsIdentifier
        | Rule::GeneratedNameClash
        | Rule::PlanRegions
        | Rule::PlanTarget => true,
        Rule::PlanBlockThreads => f.field == Field::Plan("blocks_per_sm"),
        _ => false,
    }
}

fn rank(mac: &str) -> Option<(usize, &'static str)> {
    Some(match mac {
        "tma_1d" => (1, "tma_1d"),
        "tma_2d" => (2, "tma_2d"),
        "tma_3d" => (3, "tma_3d"),
        "tma_4d" => (4, "tma_4d"),
        "tma_5d" => (5, "tma_5d"),
        _ => return None,
    })
}

fn example(key: &str) -> &'static str {
    match key {
        "name" => "\"gemm\"",
        "target" => "sm_90a",
        "roles" => "GemmRoles",
        "pipelines" => "[GemmRing]",
        "tiles" => "[A: GemmA]",
        "staging" => "[d: tma_2d! { .. } x 2]",
        "scratch" => "[counters = 64 align 16]",
        "work_queues" => "[tiles = 4 readers warpgroups(2)]",
        "block_threads" => "384",
        "cluster" => "[2, 1, 1]",
        "blocks_per_sm" => "1",
        _ => "..",
    }
}

/// A tile standing in for one named by type in the plan checked at expansion: it targets the
/// plan's arch, and the findings its size could cause are not kept ([`local`]).
fn stand_in(target: Arch) -> Option<ValidSpec> {
    validate(&TileSpec::new("tma_stand_in", DType::U8, [16u64], [16]).target(target)).ok()
}

/// The plan of what the macro sees: inline pipelines and roles, every region (a staging
/// tile named by type as a [`stand_in`]).
fn known_plan<'p>(
    c: &CheckedKernel<'_>,
    pipelines: impl Iterator<Item = &'p ValidPipeline>,
    roles: Option<ValidWarpRoles>,
) -> KernelPlan {
    let mut plan = KernelPlan::new(c.name.clone()).target(c.target);
    for t in &c.tiles {
        if let Some(ch) = &t.checked {
            plan = plan.tile(t.item.label.unraw().to_string(), &ch.valid);
        }
    }
    for p in pipelines {
        plan = plan.pipeline(p);
    }
    if let Some(r) = &roles {
        plan = plan.roles(r);
    }
    let stand_in = stand_in(c.target);
    for r in &c.regions {
        match r {
            CheckedRegion::Staging { tile, copies } => {
                let valid = tile
                    .checked
                    .as_ref()
                    .map(|ch| &ch.valid)
                    .or(stand_in.as_ref());
                if let Some(v) = valid {
                    plan = plan.staging(r.name(), v, *copies);
                }
            }
            CheckedRegion::Scratch { bytes, align, .. } => {
                plan = plan.scratch(r.name(), *bytes, *align);
            }
            CheckedRegion::WorkQueue { queue, .. } => {
                plan = plan.work_queue(r.name(), queue);
            }
        }
    }
    if let Some((t, _)) = c.block_threads {
        plan = plan.block_threads(t);
    }
    if let Some((s, _)) = c.cluster {
        plan = plan.cluster(s);
    }
    if let Some((n, _)) = c.blocks_per_sm {
        plan = plan.blocks_per_sm(n);
    }
    plan
}

/// Where each part of a plan was written, to point findings at it.
struct Sites {
    ident: Span,
    name: Option<Span>,
    block_threads: Span,
    blocks_per_sm: Option<Span>,
    cluster: Span,
    /// Every region in the plan's order (pipelines, then staging and scratch): what, name,
    /// its token, its value's token (copies, bytes), `align`'s value, its tile's `target`.
    regions: Vec<RegionSite>,
    /// Aliased tiles: alias, its token, the tile's `target` token.
    tiles: Vec<(String, Span, Option<Span>)>,
}

struct RegionSite {
    what: &'static str,
    name: String,
    at: Span,
    value: Option<Span>,
    align: Option<Span>,
    target: Option<Span>,
}

impl Sites {
    fn of(c: &CheckedKernel<'_>, seen: &[Option<ValidPipeline>], name: Option<Span>) -> Sites {
        let mut regions: Vec<RegionSite> = c
            .pipelines
            .iter()
            .zip(seen)
            .filter_map(|(p, v)| {
                v.as_ref().map(|v| RegionSite {
                    what: "pipeline",
                    name: v.spec().name.clone(),
                    at: p.span(),
                    value: None,
                    align: None,
                    target: None,
                })
            })
            .collect();
        for r in &c.regions {
            regions.push(match r {
                CheckedRegion::Staging { tile, .. } => RegionSite {
                    what: "staging",
                    name: r.name(),
                    at: r.span(),
                    value: tile.item.copies.as_ref().map(|(_, w)| w.span()),
                    align: None,
                    target: tile
                        .checked
                        .as_ref()
                        .and_then(|ch| ch.target)
                        .or(Some(tile.item.tile.span())),
                },
                CheckedRegion::Scratch { item, .. } => RegionSite {
                    what: "scratch",
                    name: r.name(),
                    at: r.span(),
                    value: Some(item.bytes.span()),
                    align: item.align.as_ref().map(|(_, w)| w.span()),
                    target: None,
                },
                CheckedRegion::WorkQueue { item, .. } => RegionSite {
                    what: "work queue",
                    name: r.name(),
                    at: r.span(),
                    value: item.readers.as_ref().map(|(_, c)| c.span),
                    align: None,
                    target: None,
                },
            });
        }
        let tiles = c
            .tiles
            .iter()
            .map(|t| {
                let target = t.checked.as_ref().and_then(|ch| ch.target);
                (
                    t.item.label.unraw().to_string(),
                    t.item.label.span(),
                    target.or(Some(t.item.tile.span())),
                )
            })
            .collect();
        Sites {
            ident: c.decl.header.ident.span(),
            name,
            block_threads: c.block_threads_span(),
            blocks_per_sm: c.blocks_per_sm.map(|b| b.1),
            cluster: c.cluster_span(),
            regions,
            tiles,
        }
    }

    /// The token finding `e` of `plan` is about. A second region of one name: the second.
    fn span(&self, e: &SpecError, plan: &KernelPlan, dups: &mut HashMap<String, usize>) -> Span {
        match &e.field {
            Field::Name => self.name.unwrap_or(self.ident),
            Field::Plan("block_threads") => self.block_threads,
            Field::Plan("blocks_per_sm") => self.blocks_per_sm.unwrap_or(self.ident),
            Field::Plan("cluster") => self.cluster,
            Field::Plan("smem") => self.smem(plan),
            Field::PlanPart { what: "tile", name } => self
                .tiles
                .iter()
                .find(|t| t.0 == *name)
                .map_or(self.ident, |t| match e.rule {
                    Rule::PlanTarget => t.2.unwrap_or(t.1),
                    _ => t.1,
                }),
            Field::PlanPart { what, name } => {
                let mut named = self.regions.iter().filter(|r| r.name == *name);
                let site = if e.message.contains("have this name") {
                    let n = dups.entry(name.clone()).or_insert(0);
                    *n += 1;
                    named.nth(*n)
                } else {
                    named.find(|r| r.what == *what)
                };
                site.map_or(self.ident, |r| match e.rule {
                    Rule::PlanTarget => r.target.unwrap_or(r.at),
                    Rule::PlanRegions if e.value.starts_with("align") => r.align.unwrap_or(r.at),
                    Rule::PlanRegions if e.value != *name => r.value.unwrap_or(r.at),
                    Rule::PlanBlockThreads => r.value.unwrap_or(r.at),
                    _ => r.at,
                })
            }
            _ => self.ident,
        }
    }

    /// Shared memory past the block: the first region that ends past it (with the slack).
    fn smem(&self, plan: &KernelPlan) -> Span {
        let mut regions: Vec<RegionInfo> = Vec::new();
        for (i, p) in plan.pipelines.iter().enumerate() {
            let l = p.layout();
            regions.push(RegionInfo::pipeline(
                "",
                l.total_bytes(),
                l.align_bytes(),
                i,
            ));
        }
        for (i, r) in plan.regions.iter().enumerate() {
            regions.push(match &r.kind {
                RegionKind::Staging { tile, copies } => {
                    let p = tile.plan();
                    RegionInfo::staging("", p.footprint_bytes, p.align_bytes, *copies, i)
                }
                RegionKind::Scratch { bytes, align } => RegionInfo::scratch("", *bytes, *align, i),
                RegionKind::WorkQueue(q) => {
                    RegionInfo::scratch("", q.smem_bytes(), q.align_bytes(), i)
                }
            });
        }
        let placed: Placed = place(&mut regions);
        let p = PlanIn {
            name: "",
            target: plan.target,
            regions: &regions,
            placed,
            pipelines: &[],
            tiles: &[],
            roles: None,
            block_threads: None,
            cluster: None,
            blocks_per_sm: None,
        };
        let i = first_past(&p, plan.target.max_smem_per_block());
        self.regions.get(i).map_or(self.ident, |r| r.at)
    }
}

/// The tile declaration of an inline tile part.
pub fn tile_decl(part: &Part<TileDecl>) -> Option<&TileDecl> {
    match part {
        Part::Inline { decl, .. } => Some(decl),
        Part::Path(_) => None,
    }
}
