//! Meaning of `tma_pipeline!` and `tma_warp_roles!`: each stage tile checked as a tile macro
//! checks it (same errors, same tokens), then the entries -> [`PipelineSpec`] ->
//! [`validate_pipeline`] (or [`WarpRoles`] -> [`WarpRoles::validate`]), each finding at the
//! token it is about, then the CUDA rendered once so expansion cannot fail. The rules are
//! `tma_core`'s: the same functions the run-time builders call.

use super::entries::{cluster_shape, int, name_of, TileInput};
use super::{snake_case, tile, Checked};
use crate::check::spans::ListSpans;
use crate::errors::Errors;
use crate::parse::{
    Call, Entry, Header, PipeValue, PipelineDecl, RolesDecl, RolesItemValue, RolesList, RolesValue,
    StageMember, TilesBlock, Value, Word,
};
use proc_macro2::Span;
use std::collections::HashMap;
use syn::ext::IdentExt;
use tma_core::echo::shown;
use tma_core::pipeline::{
    validate_pipeline, ClusterAxis, Consumers, NamedBarrier, PipelineSpec, RegisterSplit,
    RoleWarps, StageTile, ValidPipeline, ValidWarpRoles, WarpRoles, BLOCK_WARPGROUPS, BLOCK_WARPS,
};
use tma_core::render::KernelSource;
use tma_core::{Arch, Field, Rule, SpecError};

/// A pipeline whose tiles and rules all passed.
pub struct CheckedPipeline<'a> {
    pub valid: ValidPipeline,
    /// Each stage tile, in order, checked as its tile macro checks it.
    pub members: Vec<CheckedMember<'a>>,
}

/// One stage tile that passed.
pub struct CheckedMember<'a> {
    pub member: &'a StageMember,
    pub tile: Checked,
    pub multicast: Option<ClusterAxis>,
}

/// Warp roles whose rules all passed.
pub struct CheckedRoles {
    pub valid: ValidWarpRoles,
}

/// What every pipeline key reads into; each remembers its span.
type Spanned<T> = Option<(T, Span)>;

const PIPE_KEYS: [&str; 8] = [
    "stages",
    "consumers",
    "tiles",
    "cluster",
    "reserve_smem",
    "target",
    "name",
    "in_turn",
];

/// Where the parts of a pipeline were written.
struct PipeSpans {
    ident: Span,
    name: Option<Span>,
    stages: Option<Span>,
    /// The count inside `warpgroups(n)`.
    consumers: Option<Span>,
    cluster: Option<ListSpans>,
    tiles: Option<Span>,
    /// Per stage tile: its member name, its `target` token, its multicast axis token.
    members: Vec<(Span, Option<Span>, Option<Span>)>,
}

/// `tma_pipeline! { .. }`: every stage tile, then the pipeline's rules, every error at once.
pub fn pipeline(decl: &PipelineDecl) -> syn::Result<CheckedPipeline<'_>> {
    let mut errs = Errors::default();
    let ident = decl.header.ident.span();
    let mut seen: HashMap<String, Span> = HashMap::new();
    let mut name: Spanned<String> = None;
    let mut stages: Spanned<u32> = None;
    let mut consumers: Option<(Consumers, Span)> = None;
    let mut cluster: Option<([u32; 3], ListSpans)> = None;
    let mut reserve: Spanned<u64> = None;
    let mut target: Spanned<Arch> = None;
    let mut in_turn = false;
    let mut block: Option<&TilesBlock> = None;
    for entry in &decl.entries {
        let key = entry.key.unraw().to_string();
        if !PIPE_KEYS.contains(&key.as_str()) {
            errs.push(
                entry.key.span(),
                format!(
                    "unknown key `{}`; expected one of: {}",
                    shown(&key),
                    PIPE_KEYS.join(", ")
                ),
            );
            continue;
        }
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
        let word = |errs: &mut Errors| match value {
            PipeValue::Value(Value::Word(w)) => Some(w.clone()),
            other => {
                errs.push(
                    other.span(),
                    format!("`{key}` takes one value: `{key} = {}`", example(&key)),
                );
                None
            }
        };
        match key.as_str() {
            "stages" => {
                stages = word(&mut errs)
                    .and_then(|w| int::<u32>(&w, &key, &mut errs).map(|v| (v, w.span())));
            }
            "reserve_smem" => {
                reserve = word(&mut errs)
                    .and_then(|w| int::<u64>(&w, &key, &mut errs).map(|v| (v, w.span())));
            }
            "name" => name = word(&mut errs).and_then(|w| name_of(&w, &mut errs)),
            // Each stage taken by one consumer of the warp roles (ping-pong): the consumers
            // then say that one consumer, `warpgroups(1)` or `warps(1)`.
            "in_turn" => {
                if let Some(w) = word(&mut errs) {
                    match w.text().as_str() {
                        "true" => in_turn = true,
                        "false" => in_turn = false,
                        other => errs.push(
                            w.span(),
                            format!(
                                "`in_turn` is `true` (each stage taken by one consumer of the warp roles) or `false`, not `{}`",
                                shown(other)
                            ),
                        ),
                    }
                }
            }
            "target" => {
                if let Some(w) = word(&mut errs) {
                    match Arch::parse(&w.text()).filter(|_| !matches!(w, Word::Underscore(_))) {
                        Some(a) => target = Some((a, w.span())),
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
            }
            "consumers" => match value {
                PipeValue::Call(call) => consumers = read_consumers(call, &mut errs),
                other => errs.push(
                    other.span(),
                    "`consumers` says who releases a stage: `threads(n)`, `warps(n)` or `warpgroups(n)`",
                ),
            },
            "cluster" => match value {
                PipeValue::Value(Value::List(list)) => {
                    if let Some(shape) = cluster_shape(list, &mut errs) {
                        cluster = Some((shape, ListSpans::of(list)));
                    }
                }
                other => errs.push(
                    other.span(),
                    "`cluster` is the cluster shape: `cluster = [x, y, z]`",
                ),
            },
            _ => match value {
                PipeValue::Tiles(t) => block = Some(t),
                other => errs.push(
                    other.span(),
                    "`tiles` lists the tiles one stage loads: `tiles = { a: tma_2d! { .. }, .. }`",
                ),
            },
        }
    }
    for (key, ex) in [
        ("stages", "stages = 4"),
        ("consumers", "consumers = warpgroups(2)"),
        ("tiles", "tiles = { a: tma_2d! { .. } }"),
    ] {
        if !seen.contains_key(key) {
            errs.push(
                ident,
                format!("missing `{key}`: the pipeline needs e.g. `{ex}`"),
            );
        }
    }
    let arch = target.map_or(Arch::Sm90a, |t| t.0);

    // Each stage tile, as its tile macro checks it; a tile without a `target` takes the
    // pipeline's.
    let mut members = Vec::new();
    let mut member_spans = Vec::new();
    let mut tiles_ok = true;
    for (index, m) in block.map_or(&[][..], |b| &b.members).iter().enumerate() {
        let multicast = read_modifiers(m, &mut errs);
        let mac = m.mac.unraw().to_string();
        let rank = match mac.as_str() {
            "tma_1d" => Some((1, "tma_1d")),
            "tma_2d" => Some((2, "tma_2d")),
            "tma_3d" => Some((3, "tma_3d")),
            "tma_4d" => Some((4, "tma_4d")),
            "tma_5d" => Some((5, "tma_5d")),
            _ => None,
        };
        let Some(rank) = rank else {
            errs.push(
                m.mac.span(),
                format!(
                    "a stage tile is declared with `tma_1d!` .. `tma_5d!`, not `{}!`",
                    shown(&mac)
                ),
            );
            tiles_ok = false;
            continue;
        };
        let input = TileInput {
            ident: &m.decl.ident,
            default_name: snake_case(&m.decl.ident.unraw().to_string()),
            dtype: Some(&m.decl.dtype),
            entries: &m.decl.entries,
            rank: Some(rank),
            flags: &[],
        };
        let id = u32::try_from(index).unwrap_or(u32::MAX);
        match tile(input, id, Some(arch), &mut errs) {
            Some(t) => {
                member_spans.push((m.member.span(), t.target, multicast.map(|a| a.1)));
                members.push(CheckedMember {
                    member: m,
                    tile: t,
                    multicast: multicast.map(|a| a.0),
                });
            }
            None => tiles_ok = false,
        }
    }
    // The pipeline's rules need every tile (the stage's size is their sum) and every
    // entry: validating a half-read pipeline would only add findings about defaults.
    if !errs.is_empty() || !tiles_ok {
        return errs.finish(None, ident);
    }
    let (Some((stages, stages_span)), Some((consumers, consumers_span)), Some(block)) =
        (stages, consumers, block)
    else {
        return errs.finish(None, ident);
    };
    let spec = PipelineSpec {
        name: name.as_ref().map_or_else(
            || snake_case(&decl.header.ident.unraw().to_string()),
            |n| n.0.clone(),
        ),
        stages,
        tiles: members
            .iter()
            .map(|m| StageTile {
                member: m.member.member.unraw().to_string(),
                tile: m.tile.valid.clone(),
                multicast: m.multicast,
            })
            .collect(),
        consumers,
        cluster: cluster.as_ref().map_or([1, 1, 1], |c| c.0),
        target: arch,
        reserve_smem: reserve.map_or(0, |r| r.0),
        in_turn,
    };
    let spans = PipeSpans {
        ident,
        name: name.map(|n| n.1),
        stages: Some(stages_span),
        consumers: Some(consumers_span),
        cluster: cluster.map(|c| c.1),
        tiles: Some(block.span),
        members: member_spans,
    };
    let valid = match validate_pipeline(&spec) {
        Ok(valid) => valid,
        Err(e) => {
            for finding in &e.errors {
                errs.push(pipe_span(finding, &spans), finding);
            }
            return errs.finish(None, ident);
        }
    };
    // Rendered once here, so the expansion's `kernel_source()` cannot fail to build.
    if let Err(e) = KernelSource::new().pipeline(&valid).build() {
        return Err(syn::Error::new(
            ident,
            format!("rendering the pipeline's CUDA failed: {e}"),
        ));
    }
    Ok(CheckedPipeline { valid, members })
}

fn example(key: &str) -> &'static str {
    match key {
        "consumers" => "warpgroups(2)",
        "cluster" => "[2, 1, 1]",
        "tiles" => "{ a: tma_2d! { .. } }",
        "target" => "sm_90a",
        "name" => "\"ring\"",
        "in_turn" => "true",
        _ => "..",
    }
}

pub(crate) fn read_consumers(call: &Call, errs: &mut Errors) -> Option<(Consumers, Span)> {
    let unit = call.func.unraw().to_string();
    let make: fn(u32) -> Consumers = match unit.as_str() {
        "threads" => Consumers::Threads,
        "warps" => Consumers::Warps,
        "warpgroups" => Consumers::Warpgroups,
        _ => {
            errs.push(
                call.func.span(),
                format!(
                    "unknown consumers `{}(..)`; expected threads(n), warps(n) or warpgroups(n)",
                    shown(&unit)
                ),
            );
            return None;
        }
    };
    let [arg] = call.args.as_slice() else {
        errs.push(
            call.func.span(),
            format!("`{unit}(n)` takes one count, not {}", call.args.len()),
        );
        return None;
    };
    int::<u32>(arg, "consumers", errs).map(|n| (make(n), arg.span()))
}

/// `multicast(x)` after a stage tile: the axis and its token.
fn read_modifiers(m: &StageMember, errs: &mut Errors) -> Option<(ClusterAxis, Span)> {
    let mut axis = None;
    for call in &m.modifiers {
        let what = call.func.unraw().to_string();
        if what != "multicast" {
            errs.push(
                call.func.span(),
                format!(
                    "unknown `{}(..)` after a stage tile; expected `multicast(x|y|z)`",
                    shown(&what)
                ),
            );
            continue;
        }
        if axis.is_some() {
            errs.push(
                call.func.span(),
                "a tile is multicast along one cluster axis",
            );
            continue;
        }
        let [arg] = call.args.as_slice() else {
            errs.push(
                call.func.span(),
                "`multicast(..)` takes one cluster axis: x, y or z",
            );
            continue;
        };
        match ClusterAxis::parse(&arg.text()).filter(|_| matches!(arg, Word::Ident(_))) {
            Some(a) => axis = Some((a, arg.span())),
            None => errs.push(
                arg.span(),
                format!(
                    "unknown cluster axis `{}`; expected x, y or z",
                    shown(&arg.text())
                ),
            ),
        }
    }
    axis
}

/// The token a pipeline finding is about.
fn pipe_span(e: &SpecError, s: &PipeSpans) -> Span {
    let member = |i: usize| s.members.get(i);
    match &e.field {
        Field::Name => s.name,
        Field::Stages => s.stages,
        Field::Consumers => s.consumers,
        Field::Tiles => s.tiles,
        Field::Cluster { axis } => s
            .cluster
            .as_ref()
            .map(|c| c.items.get(*axis).copied().unwrap_or(c.whole)),
        // A tile for another arch: its `target` where written, else its member name.
        Field::StageTile { index, .. } => member(*index).map(|m| match e.rule {
            Rule::PipelineTileTarget => m.1.unwrap_or(m.0),
            _ => m.0,
        }),
        Field::Multicast { index, .. } => member(*index).map(|m| m.2.unwrap_or(m.0)),
        _ => None,
    }
    .unwrap_or(s.ident)
}

const ROLES_KEYS: [&str; 9] = [
    "producer_warpgroups",
    "producer_warps",
    "producer_regs",
    "consumer_warpgroups",
    "consumer_warps",
    "consumer_regs",
    "blocks_per_sm",
    "barriers",
    "name",
];

/// One barrier as written: its name and token, threads and token, one per consumer or not.
struct BarrierDecl {
    name: String,
    name_span: Span,
    threads: u32,
    threads_span: Span,
    per_consumer: bool,
}

/// `barriers = [a = 256, b = per_consumer(128)]`: each item read, every error at its token.
fn read_barriers(list: &RolesList, errs: &mut Errors) -> Vec<BarrierDecl> {
    let mut out = Vec::new();
    for item in &list.items {
        let Some(n) = &item.name else {
            errs.push(
                item.value.span(),
                "a named barrier is `name = threads` or `name = per_consumer(threads)`, e.g. `barriers = [epilogue = 256]`",
            );
            continue;
        };
        let (word, per_consumer) = match &item.value {
            RolesItemValue::Word(w) => (w, false),
            RolesItemValue::Call(call) => {
                let func = call.func.unraw().to_string();
                if func != "per_consumer" {
                    errs.push(
                        call.func.span(),
                        format!(
                            "unknown `{}(..)` for a named barrier; expected `per_consumer(threads)` (one barrier per consumer) or a thread count",
                            shown(&func)
                        ),
                    );
                    continue;
                }
                let [arg] = call.args.as_slice() else {
                    errs.push(
                        call.func.span(),
                        format!(
                            "`per_consumer(threads)` takes one thread count, not {}",
                            call.args.len()
                        ),
                    );
                    continue;
                };
                (arg, true)
            }
        };
        if let Some(t) = int::<u32>(word, "barriers", errs) {
            out.push(BarrierDecl {
                name: n.unraw().to_string(),
                name_span: n.span(),
                threads: t,
                threads_span: word.span(),
                per_consumer,
            });
        }
    }
    out
}

/// `tma_warp_roles! { .. }`: the entries -> [`WarpRoles`] -> its rules, every error at once.
pub fn roles(decl: &RolesDecl) -> syn::Result<CheckedRoles> {
    let Header { ident, .. } = &decl.header;
    let ident = ident.span();
    let mut errs = Errors::default();
    let mut seen: HashMap<String, Span> = HashMap::new();
    let mut counts: HashMap<&'static str, (u32, Span)> = HashMap::new();
    let mut name: Spanned<String> = None;
    let mut barriers: Vec<BarrierDecl> = Vec::new();
    for Entry { key, value } in &decl.entries {
        let k = key.unraw().to_string();
        let Some(slot) = ROLES_KEYS.iter().find(|s| **s == k).copied() else {
            errs.push(
                key.span(),
                format!(
                    "unknown key `{}`; expected one of: {}",
                    shown(&k),
                    ROLES_KEYS.join(", ")
                ),
            );
            continue;
        };
        if seen.insert(k.clone(), key.span()).is_some() {
            errs.push(key.span(), format!("duplicate key `{k}`"));
            continue;
        }
        match (slot, value) {
            (_, None) => errs.push(key.span(), format!("expected a value: `{k} = ..`")),
            ("barriers", Some(RolesValue::List(list))) => {
                barriers = read_barriers(list, &mut errs);
            }
            ("barriers", Some(other)) => errs.push(
                other.span(),
                "`barriers` lists named barriers: `barriers = [epilogue = 256, epi = per_consumer(128), ..]`",
            ),
            ("name", Some(RolesValue::Word(w))) => name = name_of(w, &mut errs),
            (_, Some(RolesValue::Word(w))) => {
                if let Some(v) = int::<u32>(w, slot, &mut errs) {
                    counts.insert(slot, (v, w.span()));
                }
            }
            (_, Some(RolesValue::List(l))) => {
                errs.push(l.span, format!("`{k}` takes one value, not a list"));
            }
        }
    }
    // Each role counted once, in warps or in warpgroups.
    for role in ["producer", "consumer"] {
        let (warps, groups) = (format!("{role}_warps"), format!("{role}_warpgroups"));
        if let (Some(_), Some(later)) = (seen.get(&warps), seen.get(&groups)) {
            errs.push(
                *later,
                format!("`{warps}` and `{groups}` both count the {role}s: write one"),
            );
        }
    }
    if !seen.contains_key("consumer_warpgroups") && !seen.contains_key("consumer_warps") {
        errs.push(
            ident,
            "missing the consumers: the warp roles need e.g. `consumer_warpgroups = 2` or `consumer_warps = 4`",
        );
    }
    // setmaxnreg: both register counts or neither.
    for (given, missing) in [
        ("producer_regs", "consumer_regs"),
        ("consumer_regs", "producer_regs"),
    ] {
        if let (Some(at), None) = (seen.get(given), seen.get(missing)) {
            errs.push(
                *at,
                format!("`{given}` without `{missing}`: setmaxnreg sets both roles' registers (write both, or neither for no setmaxnreg)"),
            );
        }
    }
    if !errs.is_empty() {
        return errs.finish(None, ident);
    }
    let count = |k: &str| counts.get(k).map(|c| c.0);
    let role = |role: &str, default: RoleWarps| {
        count(&format!("{role}_warps"))
            .map(RoleWarps::Warps)
            .or_else(|| count(&format!("{role}_warpgroups")).map(RoleWarps::Warpgroups))
            .unwrap_or(default)
    };
    let roles = WarpRoles {
        name: name.as_ref().map_or_else(
            || snake_case(&decl.header.ident.unraw().to_string()),
            |n| n.0.clone(),
        ),
        producers: role("producer", RoleWarps::Warpgroups(1)),
        consumers: role("consumer", RoleWarps::Warpgroups(0)),
        setmaxnreg: count("producer_regs").zip(count("consumer_regs")).map(
            |(producer_regs, consumer_regs)| RegisterSplit {
                producer_regs,
                consumer_regs,
            },
        ),
        blocks_per_sm: count("blocks_per_sm").unwrap_or(1),
        barriers: barriers
            .iter()
            .map(|b| NamedBarrier {
                name: b.name.clone(),
                threads: b.threads,
                per_consumer: b.per_consumer,
            })
            .collect(),
    };
    let valid = match roles.validate() {
        Ok(v) => v,
        Err(e) => {
            for finding in &e.errors {
                let span = match &finding.field {
                    Field::Name => name.as_ref().map(|n| n.1),
                    // The warps together past a block: at the consumers' count (the
                    // producers' when only they are written).
                    Field::WarpRoles(k) if *k == BLOCK_WARPGROUPS || *k == BLOCK_WARPS => [
                        "consumer_warpgroups",
                        "consumer_warps",
                        "producer_warpgroups",
                        "producer_warps",
                    ]
                    .iter()
                    .find_map(|k| counts.get(k))
                    .map(|c| c.1),
                    Field::WarpRoles(k) => counts.get(k).map(|c| c.1),
                    // A barrier's thread count (the finding's value is the count) at the
                    // count; its name, a clash or its ids at its name (a second of one
                    // name: the later).
                    Field::NamedBarrier { name } => {
                        let mut named = barriers.iter().filter(|b| b.name == *name);
                        if finding.value.parse::<u32>().is_ok() {
                            named.next().map(|b| b.threads_span)
                        } else {
                            named.next_back().map(|b| b.name_span)
                        }
                    }
                    _ => None,
                }
                .unwrap_or(ident);
                errs.push(span, finding);
            }
            return errs.finish(None, ident);
        }
    };
    if let Err(e) = KernelSource::new().warp_roles(&valid).build() {
        return Err(syn::Error::new(
            ident,
            format!("rendering the warp roles' CUDA failed: {e}"),
        ));
    }
    Ok(CheckedRoles { valid })
}
