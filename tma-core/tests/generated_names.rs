//! The table of what the generated code calls by name (`tma_core::ident::generated`, read
//! from the templates): it explains every identifier of real rendered code, refuses the names
//! that broke a header or a kernel, and leaves the common ones alone.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeSet;

use tma_core::ident::generated::{
    identifiers_of, stale_uses, template_knows, unmapped_expressions,
};
use tma_core::ident::{
    check_name, generated_clash, generated_names, shared_generated_name, NameKind, NameProblem,
};
use tma_core::pipeline::{ClusterAxis, Consumers, PipelineSpec, WarpRoles};
use tma_core::plan::KernelPlan;
use tma_core::render::{
    corpus, exercise_body_checked, header_with, host_header, wgmma_exercise_body,
    wgmma_exercise_plan, HeaderOptions, KernelSource,
};
use tma_core::{validate, DType, Extent, Swizzle, TileSpec};

/// Renders everything a user can get: the corpus's header with Mirage MPK's names, its host
/// header, every exercise kernel, a wgmma exercise, and a kernel source with a tile set, an
/// alias, a multicast pipeline released per warp across a cluster, a pipeline released per
/// thread (under an alias), warp roles of warpgroups and of warps with barriers (per-consumer
/// ones too), two kernel plans (a pipeline, roles, a tile set, staging and scratch regions),
/// and a tile with run-time dims and strides (encode parameters). Returns the code and the user names in it, by kind.
fn everything() -> (String, Vec<(NameKind, String)>) {
    let mut names: Vec<(NameKind, String)> = Vec::new();
    let mut specs = corpus::specs();
    specs.push(
        TileSpec::new("dyn", DType::F32, [1, 1, 1], [8, 8, 4])
            .dim_names(["map", "rows", "cols"])
            .global_extents([Extent::Runtime, Extent::Runtime, Extent::Static(64)])
            .stride_extents([Extent::Runtime, Extent::Runtime, Extent::Static(1)]),
    );
    let tiles: Vec<_> = specs.iter().map(|s| validate(s).unwrap()).collect();
    for t in &tiles {
        names.push((NameKind::Tile, t.spec().name.clone()));
        for d in 0..t.spec().rank() {
            names.push((NameKind::Dim, t.spec().dim_label(d)));
        }
    }
    let sm90: Vec<_> = tiles
        .iter()
        .filter(|t| t.spec().target == tma_core::Arch::Sm90a)
        .cloned()
        .collect();
    let mut code = header_with(&sm90, HeaderOptions { mpk: true }).unwrap();
    code.push_str(&host_header(&tiles).unwrap());
    // An im2col tile with run-time dims (its encode parameters), in a header of its own.
    let im2col = tma_core::validate_im2col(
        &tma_core::Im2colSpec::new("act", DType::BF16, [1, 1, 1, 64], 64, 128)
            .dim_names(["batch", "rows", "cols", "chan"])
            .global_extents([
                Extent::Runtime,
                Extent::Runtime,
                Extent::Runtime,
                Extent::Static(64),
            ])
            .corners([-1, -1], [-1, -1]),
    )
    .unwrap();
    names.push((NameKind::Tile, "act".into()));
    for d in ["batch", "rows", "cols", "chan"] {
        names.push((NameKind::Dim, d.into()));
    }
    code.push_str(
        &tma_core::render::header_with_im2col(&[], &[im2col], &[], HeaderOptions::default())
            .unwrap(),
    );
    for t in &sm90 {
        code.push_str(&exercise_body_checked(t).unwrap());
    }
    let find = |n: &str| tiles.iter().find(|t| t.spec().name == n).unwrap();
    let (a, b) = (find("wg_a_bf16_k"), find("wg_b_bf16_mn"));
    let exercise = wgmma_exercise_plan("mma", "ops", a, b).validate().unwrap();
    code.push_str(&wgmma_exercise_body(&exercise, "ops").unwrap());
    names.push((NameKind::KernelPlan, "mma".into()));
    names.push((NameKind::TileSet, "ops".into()));
    names.push((NameKind::PlanRegion, "ops".into()));
    names.push((NameKind::SetMember, "a".into()));
    names.push((NameKind::SetMember, "b".into()));

    let ring_tile = |name: &str, rows: u32, repeat: u32| {
        validate(
            &TileSpec::new(name, DType::BF16, [4096, 4096], [rows, 64])
                .dim_names(["MN", "K"])
                .swizzle(Swizzle::B128)
                .repeat([repeat, 1]),
        )
        .unwrap()
    };
    let (pa, pb) = (ring_tile("pa", 64, 2), ring_tile("pb", 128, 1));
    let mc = PipelineSpec::new("ring", 3, Consumers::Warps(8))
        .multicast_tile("lhs", &pa, ClusterAxis::X)
        .tile("rhs", &pb)
        .cluster([2, 1, 1])
        .validate()
        .unwrap();
    let plain = PipelineSpec::new("flat", 2, Consumers::Threads(128))
        .tile("only", &pb)
        .validate()
        .unwrap();
    let roles = WarpRoles::new("spec", 40, 2, 232)
        .barrier("epilogue", 256)
        .barrier("mainloop", 128)
        .per_consumer_barrier("stage_out", 128)
        .validate()
        .unwrap();
    // Warp-granular roles without setmaxnreg and a per-consumer barrier, in a plan with the
    // multicast ring, a tile set, a staging and a scratch region.
    let warps = WarpRoles::warps("warpy", 1, 8)
        .per_consumer_barrier("epi", 32)
        .barrier("all", 288)
        .validate()
        .unwrap();
    let (q, k) = (find("r2_f16_sw64"), find("r2_u32_repeat"));
    let plan = KernelPlan::new("gemm_kernel")
        .pipeline(&mc)
        .roles(&warps)
        .tile_set("attn", &[("qq", q), ("kk", k)])
        .staging("out", &pb, 2)
        .scratch("flags", 64, 16)
        .validate()
        .unwrap();
    let bare = KernelPlan::new("bare")
        .scratch("bytes", 16, 16)
        .block_threads(64)
        .validate()
        .unwrap();
    code.push_str(
        &KernelSource::new()
            .tile_set("attn", &[("qq", q), ("kk", k)])
            .tile_as(find("r1_u8"), "Bytes")
            .pipeline(&mc)
            .pipeline_as(&plain, "Flat")
            .warp_roles(&roles)
            .warp_roles(&warps)
            .plan(&plan)
            .plan(&bare)
            .build()
            .unwrap(),
    );
    for (kind, n) in [
        (NameKind::Tile, "pa"),
        (NameKind::Tile, "pb"),
        (NameKind::Dim, "MN"),
        (NameKind::Dim, "K"),
        (NameKind::Pipeline, "ring"),
        (NameKind::Pipeline, "flat"),
        (NameKind::PipelineMember, "lhs"),
        (NameKind::PipelineMember, "rhs"),
        (NameKind::PipelineMember, "only"),
        (NameKind::WarpRoles, "spec"),
        (NameKind::NamedBarrier, "epilogue"),
        (NameKind::NamedBarrier, "mainloop"),
        (NameKind::TileSet, "attn"),
        (NameKind::SetMember, "qq"),
        (NameKind::SetMember, "kk"),
        (NameKind::Alias, "Bytes"),
        (NameKind::Alias, "Flat"),
        (NameKind::WarpRoles, "warpy"),
        (NameKind::NamedBarrier, "stage_out"),
        (NameKind::NamedBarrier, "epi"),
        (NameKind::NamedBarrier, "all"),
        (NameKind::KernelPlan, "gemm_kernel"),
        (NameKind::KernelPlan, "bare"),
        (NameKind::PlanRegion, "ring"),
        (NameKind::PlanRegion, "attn"),
        (NameKind::PlanRegion, "out"),
        (NameKind::PlanRegion, "flags"),
        (NameKind::PlanRegion, "bytes"),
    ] {
        names.push((kind, n.to_string()));
    }
    (code, names)
}

/// The safety net of the derivation: every identifier of rendered code is a C++ keyword, one
/// the templates hold (plain or as a pattern of renderer-chosen names), or one the table says
/// a user name becomes. A name Rust computes (`tma_pipe_<name>`) or a template expression the
/// table does not know fails here, naming the identifier.
#[test]
fn rendered_code_holds_only_names_the_table_explains() {
    let (code, names) = everything();
    let generated: BTreeSet<String> = names
        .iter()
        .flat_map(|(kind, n)| generated_names(*kind, n).into_iter().map(|g| g.ident))
        .collect();
    let unexplained: BTreeSet<String> = identifiers_of(&code)
        .into_iter()
        .filter(|id| {
            check_name(id) != Err(NameProblem::Keyword)
                && !template_knows(id)
                && !generated.contains(id)
        })
        .collect();
    assert!(
        unexplained.is_empty(),
        "identifiers of the rendered code the table does not explain (add the template expression to USES in tma-core/src/ident/generated.rs): {unexplained:?}"
    );
    // And the table is no superset of everything: a random name is no template's.
    assert!(!template_knows("zq_not_generated"));
}

#[test]
fn every_table_row_names_an_expression_of_its_template() {
    assert_eq!(stale_uses(), Vec::<String>::new());
    // The expressions left to render numbers or code fragments: none looks like a name.
    for e in unmapped_expressions() {
        let expr = e.split(": ").nth(1).unwrap_or("");
        assert!(
            !matches!(expr, "name" | "cuda" | "member" | "label"),
            "{e} renders a name: list it in USES"
        );
    }
}

/// Names that broke generated code (each seen with nvcc or NVRTC), refused with the
/// identifier they would meet.
#[test]
fn names_that_break_generated_code_are_refused() {
    let refused: &[(NameKind, &str, &str)] = &[
        // struct tma_half is the prelude's 16-bit float.
        (NameKind::Tile, "half", "tma_half"),
        (NameKind::Tile, "mbarrier", "tma_mbarrier"),
        (NameKind::Tile, "group", "tma_group"),
        // A struct with a member function of its own name (the MPK alias).
        (NameKind::Tile, "cp_async", "tma_cp_async"),
        // tma_encode_tile is every header's shared encode function.
        (NameKind::Tile, "tile", "tma_encode_tile"),
        (NameKind::Tile, "status_name", "tma_encode_status_name"),
        // The exercise kernel's shared memory is `tma_smem`.
        (NameKind::Tile, "smem", "tma_smem"),
        // A dim is a coordinate member: a macro replaces it (only under -DTMA_DEBUG here).
        (NameKind::Dim, "TMA_DEBUG", "TMA_DEBUG"),
        (NameKind::Dim, "tma_positional", "tma_positional"),
        (NameKind::Dim, "BYTES", "BOX_BYTES"),
        (NameKind::Dim, "DATA_BYTES", "BOX_DATA_BYTES"),
        (NameKind::Dim, "Tma_x", "Tma_x"),
        // A pipeline member is a parameter of `load` beside `s`, and names locals there.
        (NameKind::PipelineMember, "s", "s"),
        (NameKind::PipelineMember, "bar", "bar"),
        (NameKind::PipelineMember, "full", "full"),
        (NameKind::PipelineMember, "c0", "c0"),
        (NameKind::PipelineMember, "STAGE_TX_BYTES", "STAGE_TX_BYTES"),
        (NameKind::PipelineMember, "state", "state"),
        (NameKind::Pipeline, "state", "tma_pipe_state"),
        (NameKind::Pipeline, "wait", "tma_pipe_wait"),
        (NameKind::TileSet, "half", "tma_half"),
        (NameKind::SetMember, "TILES", "TILES"),
        (NameKind::SetMember, "SMEM_ALIGN", "SMEM_ALIGN"),
        (NameKind::Alias, "CUtensorMap", "CUtensorMap"),
        (NameKind::Alias, "tma_a", "tma_a"),
        // CUDA's Bessel function j0 and every other name CUDA declares at namespace scope
        // are lower-case (found by the random unit of seed 130).
        (NameKind::Alias, "j0", "j0"),
        (NameKind::Alias, "min", "min"),
        // The bounded waits' helpers and switches, the per-consumer barriers' helpers.
        (NameKind::Tile, "wait_slow", "tma_wait_slow"),
        (NameKind::Tile, "globaltimer", "tma_globaltimer"),
        (
            NameKind::TileSet,
            "mbarrier_try_wait_shared",
            "tma_mbarrier_try_wait_shared",
        ),
        (NameKind::Dim, "TMA_WAIT_TIMEOUT_NS", "TMA_WAIT_TIMEOUT_NS"),
        (NameKind::Dim, "TMA_BOUNDED_WAITS", "TMA_BOUNDED_WAITS"),
        (
            NameKind::Tile,
            "named_barrier_sync_of",
            "tma_named_barrier_sync_of",
        ),
        // A plan's kernel sits at namespace scope; its regions in struct tma_plan_<name>,
        // beside base(raw), the launch's constants and a staging accessor's `i`.
        (NameKind::KernelPlan, "tma_copy", "tma_copy"),
        (NameKind::KernelPlan, "CUtensorMap", "CUtensorMap"),
        (NameKind::PlanRegion, "base", "base"),
        (NameKind::PlanRegion, "raw", "raw"),
        (NameKind::PlanRegion, "i", "i"),
        (NameKind::PlanRegion, "SMEM_BYTES", "SMEM_BYTES"),
        (
            NameKind::PlanRegion,
            "DYNAMIC_SMEM_BYTES",
            "DYNAMIC_SMEM_BYTES",
        ),
        (NameKind::PlanRegion, "CLUSTER_X", "CLUSTER_X"),
        (NameKind::PlanRegion, "TMA_DEBUG", "TMA_DEBUG"),
    ];
    for (kind, name, becomes) in refused {
        let clash = generated_clash(*kind, name)
            .unwrap_or_else(|| panic!("{} `{name}` was accepted", kind.describe()));
        assert!(
            clash.becomes == *becomes || clash.meets == *becomes,
            "{} `{name}`: {clash}",
            kind.describe()
        );
        assert!(clash.to_string().len() > 30, "{clash}");
    }
}

/// Names users write every day stay free: dims `M`, `N`, `K`, `c`, `h`, `w`, `n`; members
/// `q`, `k`, `v`; aliases `A`, `B`, `T` (template parameters of the prelude's templates, which
/// scope them); an encode parameter `map` (renamed `dim_map`).
#[test]
fn everyday_names_stay_free() {
    let free: &[(NameKind, &str)] = &[
        (NameKind::Tile, "a"),
        (NameKind::Tile, "tma_tile"),
        (NameKind::Tile, "rows"),
        (NameKind::Dim, "M"),
        (NameKind::Dim, "N"),
        (NameKind::Dim, "K"),
        (NameKind::Dim, "c"),
        (NameKind::Dim, "d"),
        (NameKind::Dim, "h"),
        (NameKind::Dim, "w"),
        (NameKind::Dim, "n"),
        (NameKind::Dim, "row"),
        (NameKind::Dim, "map"),
        (NameKind::Dim, "base"),
        (NameKind::Dim, "BOX"),
        (NameKind::PipelineMember, "a"),
        (NameKind::PipelineMember, "b"),
        (NameKind::PipelineMember, "q"),
        (NameKind::PipelineMember, "k"),
        (NameKind::PipelineMember, "v"),
        (NameKind::Pipeline, "gemm"),
        (NameKind::WarpRoles, "gemm"),
        (NameKind::NamedBarrier, "consumers"),
        (NameKind::NamedBarrier, "epilogue"),
        (NameKind::TileSet, "attn"),
        (NameKind::SetMember, "q"),
        (NameKind::SetMember, "k"),
        (NameKind::Alias, "A"),
        (NameKind::Alias, "B"),
        (NameKind::Alias, "T"),
        (NameKind::Alias, "Rows"),
        (NameKind::KernelPlan, "gemm"),
        (NameKind::KernelPlan, "copy"),
        (NameKind::KernelPlan, "msda_tma"),
        (NameKind::PlanRegion, "d"),
        (NameKind::PlanRegion, "ring"),
        (NameKind::PlanRegion, "flags"),
        (NameKind::PlanRegion, "boxes"),
        (NameKind::PlanRegion, "smem"),
        (NameKind::NamedBarrier, "epi"),
        (NameKind::NamedBarrier, "consumer"),
    ];
    for (kind, name) in free {
        assert_eq!(
            generated_clash(*kind, name),
            None,
            "{} `{name}`",
            kind.describe()
        );
    }
}

/// What the templates gained beside the table (kernel plans, warp-granular roles, per-consumer
/// barriers, bounded waits) is in it without a list: the roles' members, the plan struct's
/// own names, the waits' helpers and switches; a plan's and a region's generated names; two
/// regions of one plan whose names meet (`x` and `OFFSET_x`), where `OFFSET_x` alone is free.
#[test]
fn the_templates_newer_names_are_in_the_table() {
    for id in [
        "warp",
        "warpgroup",
        "is_consumer",
        "warp_in_role",
        "consumer_index",
        "thread_in_consumer",
        "CONSUMERS",
        "THREADS_PER_CONSUMER",
        "WARPS_PER_CONSUMER",
        "PRODUCER_WARPS",
        "tma_named_barrier_sync_of",
        "tma_named_barrier_arrive_of",
        "tma_debug_check_barrier_index",
        "tma_mbarrier_try_wait_shared",
        "tma_wait_slow",
        "tma_globaltimer",
        "TMA_WAIT_TIMEOUT_NS",
        "TMA_BOUNDED_WAITS",
        "BLOCK_THREADS",
        "DYNAMIC_SMEM_BYTES",
        "base",
    ] {
        assert!(template_knows(id), "{id} is not in the table");
    }
    let plan: Vec<(String, bool)> = generated_names(NameKind::KernelPlan, "gemm")
        .into_iter()
        .map(|g| (g.ident, g.global))
        .collect();
    for id in ["gemm", "tma_plan_gemm", "TMA_PLAN_GEMM_LAUNCH_BOUNDS"] {
        assert!(plan.contains(&(id.to_string(), true)), "{id}: {plan:?}");
    }
    let region: BTreeSet<String> = generated_names(NameKind::PlanRegion, "d")
        .into_iter()
        .map(|g| g.ident)
        .collect();
    for id in [
        "d", "OFFSET_d", "BYTES_d", "ALIGN_d", "tile_d", "COPIES_d", "STRIDE_d",
    ] {
        assert!(region.contains(id), "{id}: {region:?}");
    }
    let barrier: BTreeSet<String> = generated_names(NameKind::NamedBarrier, "epi")
        .into_iter()
        .map(|g| g.ident)
        .collect();
    for id in [
        "BARRIER_epi",
        "BARRIER_epi_THREADS",
        "sync_epi",
        "arrive_epi",
    ] {
        assert!(barrier.contains(id), "{id}: {barrier:?}");
    }
    assert_eq!(
        shared_generated_name(NameKind::PlanRegion, "x", "OFFSET_x").as_deref(),
        Some("OFFSET_x")
    );
    assert_eq!(generated_clash(NameKind::PlanRegion, "OFFSET_x"), None);
}

/// Upper-casing: sets `debug` and `DEBUG` give one macro, `TMA_DEBUG_PARAMS`; the names a set
/// becomes say so.
#[test]
fn upper_cased_names_are_in_the_table() {
    let names: Vec<String> = generated_names(NameKind::TileSet, "debug")
        .into_iter()
        .map(|g| g.ident)
        .collect();
    assert!(names.contains(&"TMA_DEBUG_PARAMS".to_string()), "{names:?}");
    let roles: Vec<String> = generated_names(NameKind::WarpRoles, "gemm")
        .into_iter()
        .filter(|g| g.global)
        .map(|g| g.ident)
        .collect();
    assert!(
        roles.contains(&"TMA_ROLES_GEMM_LAUNCH_BOUNDS".to_string()),
        "{roles:?}"
    );
}

/// Random accepted declarations (`testgen::random_unit`, names drawn near the reserved ones)
/// always render: the kernel source and the header (with Mirage MPK's names) build, and
/// every identifier in them is one the table explains. The generator reaches reserved names
/// (some draws are refused). `tests/generated_names_compile.rs` compiles such units.
#[test]
fn random_accepted_declarations_render_and_are_explained() {
    use tma_test_support::testgen::{name_pools, random_unit, Taken, XorShift};
    let pools = name_pools();
    let mut refused = 0;
    let mut kinds = BTreeSet::new();
    for seed in 0..48 {
        let mut rng = XorShift::new(seed);
        let mut taken = Taken::default();
        let unit = random_unit(&mut rng, &pools, &mut taken, 1 + seed as usize % 3);
        refused += unit.refused;
        let mut code = unit
            .source
            .build()
            .unwrap_or_else(|e| panic!("seed {seed}: {e}"));
        code.push_str(
            &header_with(&unit.tiles, HeaderOptions { mpk: true })
                .unwrap_or_else(|e| panic!("seed {seed}: {e}")),
        );
        let generated: BTreeSet<String> = unit
            .names
            .iter()
            .flat_map(|(kind, n)| {
                kinds.insert(*kind);
                generated_names(*kind, n).into_iter().map(|g| g.ident)
            })
            .collect();
        let unexplained: Vec<String> = identifiers_of(&code)
            .into_iter()
            .filter(|id| {
                let keyword = check_name(id) == Err(NameProblem::Keyword);
                // The test kernels' own names (`k__pipe3`, `raw__`), parameters and locals
                // (`m0`, `pipe`, `out`, `base`, the typedefs `R` and `P`).
                let test_code = id.contains("__")
                    || ["pipe", "s", "R", "P", "out", "base"].contains(&id.as_str())
                    || (id.starts_with('m') && id[1..].chars().all(|c| c.is_ascii_digit()));
                !(keyword || test_code || template_knows(id) || generated.contains(id))
            })
            .collect();
        assert!(unexplained.is_empty(), "seed {seed}: {unexplained:?}");
    }
    assert!(
        refused > 20,
        "only {refused} draws refused: the names stay far from the reserved ones"
    );
    assert_eq!(kinds.len(), NameKind::ALL.len(), "kinds drawn: {kinds:?}");
}
