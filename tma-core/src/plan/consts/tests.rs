#![allow(clippy::unwrap_used, clippy::panic)]

use super::*;
use crate::pipeline::{PipelineSpec, ValidPipeline, WarpRoles};
use crate::plan::{KernelPlan, RegionKind};
use crate::{validate, DType, Rule, Swizzle, TileSpec, ValidSpec};
use tma_test_support::testgen::XorShift;

fn leak(s: &str) -> &'static str {
    Box::leak(s.to_string().into_boxed_str())
}

/// `plan` as `tma_kernel!` hands it to the const functions: the regions laid out and every
/// check's message (non-empty ones), in the order the macro's sites run them.
fn mirror(plan: &KernelPlan) -> (Vec<RegionInfo>, Placed, Vec<String>) {
    let mut regions: Vec<RegionInfo> = Vec::new();
    for (i, p) in plan.pipelines.iter().enumerate() {
        let l = p.layout();
        regions.push(RegionInfo::pipeline(
            leak(&p.spec().name),
            l.total_bytes(),
            l.align_bytes(),
            i,
        ));
    }
    let mut tiles: Vec<TileIn> = plan
        .tiles
        .iter()
        .map(|t| TileIn {
            what: "tile",
            label: leak(&t.alias),
            tile: leak(&t.tile.spec().name),
            target: t.tile.spec().target,
            stub: false,
        })
        .collect();
    for (i, r) in plan.regions.iter().enumerate() {
        let name = leak(&r.name);
        match &r.kind {
            RegionKind::Staging { tile, copies } => {
                let p = tile.plan();
                regions.push(RegionInfo::staging(
                    name,
                    p.footprint_bytes,
                    p.align_bytes,
                    *copies,
                    i,
                ));
                tiles.push(TileIn {
                    what: "staging",
                    label: name,
                    tile: leak(&tile.spec().name),
                    target: tile.spec().target,
                    stub: false,
                });
            }
            RegionKind::Scratch { bytes, align } => {
                regions.push(RegionInfo::scratch(name, *bytes, *align, i));
            }
            RegionKind::WorkQueue(q) => {
                regions.push(RegionInfo::scratch(
                    name,
                    q.smem_bytes(),
                    q.align_bytes(),
                    i,
                ));
            }
        }
    }
    let placed = place(&mut regions);
    let pipelines: Vec<PipelineIn> = plan
        .pipelines
        .iter()
        .map(|p| PipelineIn {
            name: leak(&p.spec().name),
            target: p.spec().target,
            cluster: p.spec().cluster,
            consumers: p.spec().consumers,
            stub: false,
        })
        .collect();
    let roles = plan.roles.as_ref().map(|r| RolesIn {
        name: leak(&r.roles().name),
        threads: r.roles().threads(),
        blocks_per_sm: r.roles().blocks_per_sm,
        setmaxnreg: r.roles().setmaxnreg.is_some(),
        stub: false,
    });
    let p = PlanIn {
        name: &plan.name,
        target: plan.target,
        regions: &regions,
        placed,
        pipelines: &pipelines,
        tiles: &tiles,
        roles,
        block_threads: plan.block_threads,
        cluster: plan.cluster,
        blocks_per_sm: plan.blocks_per_sm,
    };
    let mut msgs = Vec::new();
    let mut push = |m: Msg| {
        if !m.is_empty() {
            msgs.push(m.as_str().to_string());
        }
    };
    for k in 0..tiles.len() {
        push(tile_target(&p, k));
    }
    for j in 0..pipelines.len() {
        push(pipeline_target(&p, j));
        push(pipeline_cluster(&p, j));
        push(pipeline_consumers(&p, j));
    }
    for i in 0..regions.len() {
        push(region_name(&p, i));
        push(smem(&p, i));
    }
    push(block_threads(&p));
    push(blocks_per_sm(&p));
    push(cluster(&p));
    (regions.clone(), placed, msgs)
}

/// The findings the const functions mirror: every plan rule that can involve a part named
/// by type (the rest, a region's copies and a scratch's bytes, are literals the macro checks
/// with `validate_plan` itself).
fn mirrored(e: &crate::SpecError) -> bool {
    let region = matches!(e.field, crate::Field::PlanPart { .. });
    match e.rule {
        Rule::PlanTarget | Rule::PlanCluster | Rule::ClusterShape | Rule::PlanSmemFits => true,
        Rule::PlanBlockThreads => true,
        // The SM's limits, as the plan's launch bounds meet them.
        Rule::BlocksPerSm | Rule::ThreadsPerSm => matches!(e.field, crate::Field::Plan(_)),
        Rule::PlanRegions => {
            e.message.contains("have this name") || e.message.contains("would both give")
        }
        Rule::GeneratedNameClash => region,
        _ => false,
    }
}

/// A finding `tma_kernel!` reports at expansion, before any const check is expanded: the
/// plan's own name refused by the derived table.
fn refused_at_expansion(e: &crate::SpecError) -> bool {
    e.rule == Rule::GeneratedNameClash && !matches!(e.field, crate::Field::PlanPart { .. })
}

fn tile(rng: &mut XorShift, name: &str, arch: Arch) -> ValidSpec {
    let rows = *rng.pick(&[8u32, 32, 64, 128, 256]).unwrap();
    let swizzle = *rng
        .pick(&[Swizzle::None, Swizzle::B32, Swizzle::B64, Swizzle::B128])
        .unwrap();
    let cols = match swizzle {
        Swizzle::B32 => 16,
        Swizzle::B64 => 32,
        _ => 64,
    };
    validate(
        &TileSpec::new(name, DType::BF16, [4096, 4096], [rows, cols])
            .swizzle(swizzle)
            .target(arch),
    )
    .unwrap()
}

fn arch(rng: &mut XorShift) -> Arch {
    if rng.chance(1, 20) {
        Arch::Sm100a
    } else {
        Arch::Sm90a
    }
}

fn pipeline(rng: &mut XorShift, name: &str) -> ValidPipeline {
    let a = arch(rng);
    let consumers = *rng
        .pick(&[
            Consumers::Threads(128),
            Consumers::Warps(4),
            Consumers::Warpgroups(1),
            Consumers::Warpgroups(2),
            Consumers::Threads(1),
        ])
        .unwrap();
    let cluster = *rng
        .pick(&[[1, 1, 1], [1, 1, 1], [1, 1, 1], [1, 1, 1], [2, 1, 1]])
        .unwrap();
    let t = tile(rng, &format!("{name}_t"), a);
    let stages = rng.range(1, 4) as u32;
    PipelineSpec::new(name, stages, consumers)
        .tile("t", &t)
        .cluster(cluster)
        .target(a)
        .validate()
        .unwrap()
}

/// A region name: mostly fresh, now and then one taken, one the plan struct uses (`base`,
/// `raw`) or one whose generated names meet another's (`x`, `OFFSET_x`).
fn name(rng: &mut XorShift, fresh: &mut u32) -> String {
    *fresh += 1;
    if rng.chance(1, 12) {
        rng.pick(&[
            "ring",
            "base",
            "OFFSET_x",
            "x",
            "tile_y",
            "raw",
            "r1",
            "SMEM_BYTES",
            "CLUSTER_X",
            "STRIDE_ring",
        ])
        .unwrap()
        .to_string()
    } else {
        format!("r{fresh}")
    }
}

fn random_plan(rng: &mut XorShift) -> KernelPlan {
    let mut fresh = 0;
    // Now and then a plan name the derived table refuses (`tma_kernel!` reports it at
    // expansion).
    let kernel = if rng.chance(1, 40) { "tma_k" } else { "k" };
    let mut plan = KernelPlan::new(kernel).target(if rng.chance(1, 20) {
        Arch::Sm100a
    } else {
        Arch::Sm90a
    });
    for _ in 0..rng.below(3) {
        let name = name(rng, &mut fresh);
        plan = plan.pipeline(&pipeline(rng, &name));
    }
    for _ in 0..rng.below(2) {
        let a = arch(rng);
        plan = plan.tile("T", &tile(rng, "aliased", a));
    }
    for _ in 0..rng.below(4) {
        let name = name(rng, &mut fresh);
        if rng.chance(1, 2) {
            let a = arch(rng);
            let copies = rng.range(1, 6) as u32;
            plan = plan.staging(&name, &tile(rng, &format!("s_{name}"), a), copies);
        } else {
            let bytes = *rng.pick(&[4u64, 256, 4096, 4096, 100_000]).unwrap();
            let align = *rng.pick(&[1u64, 16, 128, 1024]).unwrap();
            plan = plan.scratch(&name, bytes, align);
        }
    }
    if rng.chance(1, 2) {
        // 384 or 256 threads.
        let roles = match rng.below(4) {
            0 => WarpRoles::new("gemm", 40, 2, 232),
            1 => WarpRoles::new("gemm", 40, 1, 256),
            // 256 threads, two blocks per SM: 128 registers a thread.
            2 => WarpRoles::new("gemm", 40, 1, 160).blocks_per_sm(2),
            // No setmaxnreg: a plan may ask for other blocks per SM.
            _ => WarpRoles::warps("gemm", 4, 8),
        };
        plan = plan.roles(&roles.validate().unwrap());
    }
    if rng.chance(2, 3) {
        let threads = [0u32, 32, 128, 256, 384, 384, 384, 256, 256, 2048];
        plan = plan.block_threads(*rng.pick(&threads).unwrap());
    }
    if rng.chance(1, 4) {
        let shapes = [[1, 1, 1], [1, 1, 1], [2, 1, 1], [4, 4, 2], [0, 1, 1]];
        plan = plan.cluster(*rng.pick(&shapes).unwrap());
    }
    if rng.chance(1, 3) {
        // The roles' (1 or 2), more than they were checked for, past 2048 threads or 32 blocks.
        plan = plan.blocks_per_sm(*rng.pick(&[0u32, 1, 1, 2, 4, 5, 8, 33, u32::MAX]).unwrap());
    }
    plan
}

#[test]
fn the_const_layout_and_rules_are_validate_plans() {
    let mut rng = XorShift::new(0x706c_616e);
    let (mut ok, mut refused, mut at_expansion) = (0, 0, 0);
    let mut rules = std::collections::HashSet::new();
    for case in 0..3000 {
        let plan = random_plan(&mut rng);
        let (regions, placed, msgs) = mirror(&plan);
        match plan.validate() {
            Ok(v) => {
                ok += 1;
                assert!(msgs.is_empty(), "case {case}: {msgs:?}\n{plan:?}");
                let l = v.layout();
                let want: Vec<RegionInfo> = l
                    .regions
                    .iter()
                    .map(|r| RegionInfo {
                        name: leak(&r.name),
                        role: r.role,
                        offset: r.offset,
                        bytes: r.bytes,
                        align: r.align,
                        stride: r.stride,
                        copies: r.copies,
                    })
                    .collect();
                assert_eq!(regions, want, "case {case}");
                assert_eq!(
                    (
                        placed.total_bytes,
                        placed.align_bytes,
                        placed.dynamic_smem_bytes
                    ),
                    (l.total_bytes(), l.align_bytes(), l.dynamic_smem_bytes()),
                    "case {case}"
                );
                assert!(!placed.overflow);
                assert_eq!(placed.dynamic_u32(), v.launch().dynamic_smem_bytes);
                assert_eq!(placed.opt_in(), v.launch().smem_opt_in);
            }
            Err(e) if e.errors.iter().any(refused_at_expansion) => {
                // The macro reports these and expands no const check.
                at_expansion += 1;
            }
            Err(e) => {
                refused += 1;
                rules.extend(e.errors.iter().filter(|f| mirrored(f)).map(|f| f.rule));
                let mut want: Vec<String> = e
                    .errors
                    .iter()
                    .filter(|f| mirrored(f))
                    .map(|f| f.to_string())
                    .collect();
                let mut got = msgs.clone();
                want.sort();
                got.sort();
                assert_eq!(got, want, "case {case}: {e}\n{plan:?}");
            }
        }
    }
    // Both kinds were drawn, often.
    assert!(
        ok > 300 && refused > 300 && at_expansion > 30,
        "{ok} accepted, {refused} refused, {at_expansion} refused at expansion"
    );
    let every = [
        Rule::PlanTarget,
        Rule::PlanRegions,
        Rule::PlanBlockThreads,
        Rule::PlanCluster,
        Rule::GeneratedNameClash,
        Rule::ClusterShape,
        Rule::PlanSmemFits,
    ];
    assert!(every.iter().all(|r| rules.contains(r)), "{rules:?}");
}

#[test]
fn a_message_is_cut_at_a_character_boundary() {
    let long = "é".repeat(MSG_BYTES);
    let m = Msg::NONE.str("x").str(&long);
    assert!(m.as_str().len() <= MSG_BYTES);
    assert!(m.as_str().starts_with("xé"), "{}", m.as_str());
    assert_eq!(Msg::NONE.num(0).num(1234567890).as_str(), "01234567890");
    assert_eq!(Msg::NONE.num(u64::MAX).as_str(), u64::MAX.to_string());
    assert_eq!(Msg::NONE.shape([2, 1, 4]).as_str(), "2x1x4");
}

#[test]
fn a_rejected_part_turns_the_checks_off() {
    let mut l = layout([
        RegionInfo::scratch("x", 1 << 30, 16, 0),
        RegionInfo::scratch("x", 16, 16, 1),
    ]);
    let pipes = [PipelineIn {
        name: "p",
        target: Arch::Sm100a,
        cluster: [0, 0, 0],
        consumers: Consumers::Threads(0),
        stub: true,
    }];
    let p = PlanIn {
        name: "k",
        target: Arch::Sm90a,
        regions: &l.regions,
        placed: l.placed,
        pipelines: &pipes,
        tiles: &[],
        roles: None,
        block_threads: None,
        cluster: None,
        blocks_per_sm: Some(0),
    };
    assert!(p.any_stub());
    for m in [
        region_name(&p, 1),
        smem(&p, 0),
        pipeline_target(&p, 0),
        block_threads(&p),
        blocks_per_sm(&p),
        cluster(&p),
    ] {
        assert!(m.is_empty(), "{m:?}");
    }
    l.regions[0].name = "x";
    assert!(place(&mut l.regions).dynamic_smem_bytes > (1 << 30));
}

/// [`REGION_SLOTS`] and [`TEMPLATE_MACROS`] are what the derived generated-names table says
/// about a plan region's name: the same slots in the same order (a plain prefix each), the
/// same scopes and their identifiers, the same macros; and the macro patterns start with
/// `TMA_`, which only a bare region name meets (refused first by the `tma_` rule).
#[test]
fn the_const_region_slots_are_the_derived_tables() {
    let (slots, macros, globs) = crate::ident::generated::plan_region_slots();
    assert_eq!(slots.len(), REGION_SLOTS.len(), "{slots:?}");
    let mut scopes: Vec<(usize, u8)> = Vec::new();
    for ((prefix, plain, scope, names, scope_globs), c) in slots.iter().zip(REGION_SLOTS) {
        assert!(*plain, "a slot that is no plain prefix: {prefix}");
        assert_eq!(prefix, c.prefix);
        assert!(scope_globs.is_empty(), "{scope_globs:?}");
        let want: Vec<&str> = names.keys().map(|n| n.as_str()).collect();
        let mut got = c.names.to_vec();
        got.sort();
        assert_eq!(got, want, "slot {prefix}");
        assert!(names.values().all(|t| *t == "plan.cuh.tera"), "{names:?}");
        // One table scope is one const scope, and back.
        for &(s, cs) in &scopes {
            assert_eq!(s == *scope, cs == c.scope, "slot {prefix}");
        }
        scopes.push((*scope, c.scope));
    }
    let got: std::collections::BTreeMap<String, &str> = TEMPLATE_MACROS
        .iter()
        .map(|(m, t)| (m.to_string(), *t))
        .collect();
    assert_eq!(got, macros);
    for g in &globs {
        assert!(g.starts_with("TMA_"), "{g}");
    }
    for c in REGION_SLOTS {
        assert!(
            !c.prefix.to_ascii_lowercase().starts_with("tma_"),
            "{}",
            c.prefix
        );
    }
}

/// A pipeline named by type whose name meets the plan struct's own (`base`, `SMEM_BYTES`),
/// or gives a member another region gives (`x`, `OFFSET_x`): the const check says what
/// `validate_plan` says.
#[test]
fn a_pipeline_name_meeting_the_plan_structs_is_refused_as_validate_plan_does() {
    let mut rng = XorShift::new(7);
    for names in [
        &["base"][..],
        &["SMEM_BYTES"],
        &["raw"],
        &["CLUSTER_X"],
        &["x", "OFFSET_x"],
        &["OFFSET_x", "x"],
        &["STRIDE_y", "y"],
        &["y", "tile_y"],
    ] {
        let mut plan = KernelPlan::new("gemm").block_threads(384);
        for n in names {
            plan = plan.pipeline(&pipeline(&mut rng, n));
        }
        let e = plan.validate().unwrap_err();
        let want: Vec<String> = e
            .errors
            .iter()
            .filter(|f| matches!(f.rule, Rule::GeneratedNameClash | Rule::PlanRegions))
            .map(|f| f.to_string())
            .collect();
        assert!(!want.is_empty(), "{names:?}: {e}");
        let (_, _, msgs) = mirror(&plan);
        let got: Vec<String> = msgs
            .into_iter()
            .filter(|m| m.contains("clashes") || m.contains("would both give"))
            .collect();
        assert_eq!(got, want, "{names:?}");
    }
}
