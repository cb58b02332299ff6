//! Snapshots of the rendered CUDA for the corpus, plus determinism and the MPK seed.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use tma_core::limits::{TENSOR_MAP_ALIGN, TENSOR_MAP_BYTES};
use tma_core::render::{
    self, corpus, exercise_body, header, host_header, KernelSource, RenderError, TileCode,
    TileSetCode,
};
use tma_core::{validate, DType, Swizzle, TileSpec};

#[test]
fn corpus_validates_completely() {
    let specs = corpus::specs();
    for s in &specs {
        if let Err(e) = validate(s) {
            panic!("corpus spec does not validate: {e}");
        }
    }
    assert_eq!(corpus::corpus().len(), specs.len());
}

#[test]
fn prelude_snapshot() {
    insta::assert_snapshot!("prelude", render::prelude());
}

#[test]
fn tile_snapshots() {
    for v in corpus::corpus() {
        let code = match TileCode::new(&v, 0) {
            Ok(c) => c,
            Err(e) => panic!("{e}"),
        };
        assert_eq!(code.cuda_name(), format!("tma_{}", v.spec().name));
        insta::assert_snapshot!(format!("tile_{}", v.spec().name), code.source());
    }
}

#[test]
fn exercise_snapshots() {
    for v in corpus::corpus() {
        insta::assert_snapshot!(format!("exercise_{}", v.spec().name), exercise_body(&v));
    }
}

fn mpk() -> tma_core::ValidSpec {
    match corpus::corpus()
        .into_iter()
        .find(|v| v.spec().name == "mpk_a")
    {
        Some(v) => v,
        None => panic!("the corpus holds the MPK seed"),
    }
}

/// Mirage MPK's seed: 4096 x 1024 bf16, box 64 x 64, 128B swizzle, repeat 1 x 2, smem stride
/// 4096 elements: two 8 KiB boxes, 16384 bytes per load.
#[test]
fn mpk_seed_tx_bytes_and_coordinates() {
    let v = mpk();
    assert_eq!(v.tx_bytes(), 16384);
    let code = match TileCode::new(&v, 0) {
        Ok(c) => c,
        Err(e) => panic!("{e}"),
    };
    let src = code.source();
    assert!(src.contains("static constexpr unsigned TX_BYTES = 16384u;"));
    assert!(src.contains("= 16384 B per load call"));
    assert!(src.contains("static constexpr unsigned SMEM_ALIGN = 1024u;"));
    // Box 1 of the repeat: 64 columns to the right, 8192 bytes further in smem; the PTX
    // operand is innermost first (col, row).
    assert!(src.contains(r#""r"(dst + 8192u), "l"(map), "r"(c1 + 64), "r"(c0), "r"(mbar)"#));
    assert!(src.contains("//   boxDim         = [64, 64]"));
    assert!(src.contains("//   globalDim      = [1024, 4096]"));
    assert!(src.contains("CU_TENSOR_MAP_SWIZZLE_128B"));
    assert_eq!(
        src.matches("cp.async.bulk.tensor.2d.shared::cluster")
            .count(),
        4
    );
}

#[test]
fn prelude_polls_with_selp_and_no_branch_in_asm() {
    let p = render::prelude();
    assert!(p.contains("selp.b32"));
    assert!(p.contains("mbarrier.try_wait.parity.shared::cta.b64"));
    // No branch inside any inline-PTX string (only comments mention `@p bra`).
    for line in p.lines().filter(|l| !l.trim_start().starts_with("//")) {
        assert!(!line.contains("bra"), "branch in inline PTX: {line}");
    }
    assert!(p.contains(&format!(
        "struct alignas({TENSOR_MAP_ALIGN}) CUtensorMap {{ unsigned long long opaque[{}]; }};",
        TENSOR_MAP_BYTES / 8
    )));
    assert!(p.contains(&format!(
        "static_assert(alignof(CUtensorMap) == {TENSOR_MAP_ALIGN},"
    )));
    assert!(p.contains("cp.async.bulk.wait_group.read %0;"));
    assert!(p.contains("fence.proxy.tensormap::generic.acquire.gpu"));
}

#[test]
fn kernel_source_is_deterministic_and_lists_tiles() {
    let all = corpus::corpus();
    let source = || {
        let mut k = KernelSource::new();
        for v in &all {
            k = k.tile(v);
        }
        k.body("extern \"C\" __global__ void k() {}\n")
    };
    let build = || source().build();
    let (a, b) = match (build(), build()) {
        (Ok(a), Ok(b)) => (a, b),
        (Err(e), _) | (_, Err(e)) => panic!("{e}"),
    };
    assert_eq!(a, b);
    assert!(a.starts_with(&render::prelude()));
    // The typed description carries what the runtime checks (footprint, alignment, target)
    // under the ids the text gives the tiles; the text carries nothing for it to read back.
    let facts = source().facts();
    assert_eq!(facts, source().facts());
    assert_eq!(facts.tiles.len(), all.len());
    for (id, (v, t)) in all.iter().zip(&facts.tiles).enumerate() {
        assert_eq!(t.id as usize, id);
        assert_eq!(t.name, v.spec().name);
        assert_eq!(t.smem_bytes, v.plan().footprint_bytes, "{}", t.name);
        assert_eq!(t.align_bytes, v.plan().align_bytes, "{}", t.name);
        assert_eq!(t.target, v.spec().target, "{}", t.name);
        assert_eq!(t.dim_names.len(), v.spec().rank(), "{}", t.name);
        assert!(t.outside_plans, "{}", t.name);
        let at = a
            .find(&format!("struct tma_{} {{", v.spec().name))
            .unwrap_or_else(|| panic!("no struct for {}", t.name));
        let id_at = a[at..]
            .find("static constexpr unsigned TILE_ID = ")
            .map(|i| at + i)
            .unwrap_or_else(|| panic!("no TILE_ID for {}", t.name));
        assert!(
            a[id_at..].starts_with(&format!("static constexpr unsigned TILE_ID = {id}u;")),
            "{}",
            t.name
        );
    }
    assert!(!a.contains("tma-tile") && !a.contains("tma-pipeline"));
    assert!(a.ends_with("extern \"C\" __global__ void k() {}\n"));
    // Rendering each piece twice gives the same bytes too.
    assert_eq!(render::prelude(), render::prelude());
    for v in &all {
        assert_eq!(exercise_body(v), exercise_body(v));
    }
}

#[test]
fn a_located_body_starts_with_a_line_directive() {
    let v = mpk();
    let src = KernelSource::new()
        .tile(&v)
        .body("// first\n// no newline")
        .body_at(
            "dir\\my \"k\".cu",
            40,
            "extern \"C\" __global__ void k() {}\n",
        )
        .build();
    let src = match src {
        Ok(s) => s,
        Err(e) => panic!("{e}"),
    };
    assert!(
        src.ends_with(
            "// no newline\n#line 40 \"dir\\\\my \\\"k\\\".cu\"\nextern \"C\" __global__ void k() {}\n"
        ),
        "{src}"
    );
}

/// A file name is written as a C string literal: a newline in it neither ends the `#line`
/// directive nor starts a line of code (`#error` here), nor does any other control character;
/// line 0 (which `#line` does not take) becomes 1.
#[test]
fn body_at_escapes_the_file_name() {
    let src = KernelSource::new()
        .body_at(
            "k.cu\"\n#error injected\r\u{7}\u{1b}[0m\tµ.cu",
            0,
            "// body\n",
        )
        .build()
        .unwrap_or_else(|e| panic!("{e}"));
    let at = src.find("#line").unwrap_or_else(|| panic!("{src}"));
    let rest = &src[at..];
    assert_eq!(
        rest,
        "#line 1 \"k.cu\\\"\\n#error injected\\r\\007\\033[0m\\tµ.cu\"\n// body\n"
    );
    assert!(!src.lines().any(|l| l.starts_with("#error")), "{src}");
}

#[test]
fn kernel_snapshot_mpk() {
    let v = mpk();
    let src = KernelSource::new()
        .tile(&v)
        .body(&exercise_body(&v))
        .build();
    match src {
        Ok(s) => insta::assert_snapshot!("kernel_mpk_a", s),
        Err(e) => panic!("{e}"),
    }
}

#[test]
fn header_has_pragma_once_and_every_tile() {
    let all = corpus::corpus();
    let h = match header(&all[..2]) {
        Ok(h) => h,
        Err(e) => panic!("{e}"),
    };
    assert!(h.contains("#pragma once\n"));
    assert!(h.contains("struct tma_mpk_a {"));
    assert!(h.contains(&format!("struct tma_{} {{", all[1].spec().name)));
    insta::assert_snapshot!("header_two_tiles", h);
}

#[test]
fn duplicate_tile_names_are_refused() {
    let v = mpk();
    let err = KernelSource::new().tile(&v).tile(&v).build();
    assert!(matches!(
        err,
        Err(render::RenderError::DuplicateTile {
            first: 0,
            second: 1,
            ..
        })
    ));
    assert!(matches!(
        TileCode::new(&v, u32::MAX),
        Err(render::RenderError::ReservedTileId(_))
    ));
    // Bit 31 marks a group in the hang record: a single tile may not use it.
    assert!(matches!(
        TileCode::new(&v, 0x8000_0001),
        Err(render::RenderError::ReservedTileId(_))
    ));
}

#[test]
fn reductions_follow_the_ptx_type_table() {
    assert_eq!(render::reduce_ops(DType::F64), Vec::<&str>::new());
    assert_eq!(render::reduce_ops(DType::F32), vec!["add"]);
    // INT64 maps trap on add/and/or/xor (seen on an H100); min/max run.
    assert_eq!(render::reduce_ops(DType::I64), vec!["min", "max"]);
    assert_eq!(
        render::reduce_ops(DType::U64),
        vec!["add", "min", "max", "and", "or", "xor"]
    );
    assert_eq!(render::reduce_ops(DType::BF16), vec!["add", "min", "max"]);
    assert_eq!(
        render::reduce_ops(DType::U32),
        vec!["add", "min", "max", "and", "or", "xor", "inc", "dec"]
    );
}

fn tile(name: &str, swizzle: Swizzle) -> tma_core::ValidSpec {
    let inner = swizzle
        .span_bytes()
        .map_or(64, |span| (span / 2).min(64) as u32);
    let spec = TileSpec::new(name, DType::BF16, [4096, 64], [64, inner])
        .dim_names(["S", "D"])
        .swizzle(swizzle);
    validate(&spec).unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn tile_set_snapshot_and_layout() {
    let (q, k, o) = (
        tile("attn_q", Swizzle::B128),
        tile("attn_k", Swizzle::B64),
        tile("attn_o", Swizzle::None),
    );
    let set = TileSetCode::new("attn", &[("q", &q), ("k", &k), ("o", &o)])
        .unwrap_or_else(|e| panic!("{e}"));
    let layout = tma_core::smem::SmemLayout::new([q.plan(), k.plan(), o.plan()]).unwrap();
    assert_eq!(set.layout(), &layout);
    assert_eq!(layout.offsets, vec![0, 8192, 12288]);
    let src = set.source();
    for (member, offset) in [("q", 0), ("k", 8192), ("o", 12288)] {
        assert!(src.contains(&format!(
            "static constexpr unsigned OFFSET_{member} = {offset}u;"
        )));
        assert!(src.contains(&format!("typedef tma_attn_{member} {member};")));
    }
    assert!(src.contains(&format!(
        "static constexpr unsigned SMEM_BYTES = {}u;",
        layout.total_bytes
    )));
    assert!(src.contains(&format!(
        "static constexpr unsigned DYNAMIC_SMEM_BYTES = {}u;",
        layout.total_bytes + layout.align_bytes
    )));
    assert!(src.contains(
        "#define TMA_ATTN_PARAMS const __grid_constant__ CUtensorMap q_map, const __grid_constant__ CUtensorMap k_map, const __grid_constant__ CUtensorMap o_map\n"
    ));
    insta::assert_snapshot!("tile_set_attn", src);
}

#[test]
fn host_header_snapshot() {
    let all = corpus::corpus();
    let h = host_header(&all[..2]).unwrap_or_else(|e| panic!("{e}"));
    assert!(h.contains("#pragma once\n"));
    assert!(!h.contains("__device__ __forceinline__"), "host code only");
    assert!(!h.contains("asm"), "host code only");
    insta::assert_snapshot!("host_header_two_tiles", h);
}

#[test]
fn kernel_source_names_tiles_for_the_body() {
    let (q, k, x) = (
        tile("attn_q", Swizzle::B128),
        tile("attn_k", Swizzle::B128),
        tile("extra", Swizzle::None),
    );
    let src = KernelSource::new()
        .tile_set("attn", &[("q", &q), ("k", &k)])
        .tile_as(&x, "X")
        .body("// body\n")
        .build()
        .unwrap_or_else(|e| panic!("{e}"));
    // Tile ids follow the order added, sets included; the set follows its tiles.
    let facts = KernelSource::new()
        .tile_set("attn", &[("q", &q), ("k", &k)])
        .tile_as(&x, "X")
        .facts();
    for (id, name) in [(0, "attn_q"), (1, "attn_k"), (2, "extra")] {
        assert_eq!(facts.tile(id).map(|t| t.name.as_str()), Some(name));
        let at = src.find(&format!("struct tma_{name} {{")).unwrap();
        assert!(src[at..].contains(&format!("TILE_ID = {id}u;")));
    }
    let set_at = src.find("struct tma_attn {").unwrap();
    assert!(src.find("struct tma_attn_k {").unwrap() < set_at);
    assert!(src.contains("using X = tma_extra;\n"));
    assert!(src.ends_with("using X = tma_extra;\n\n// body\n"));
}

#[test]
fn kernel_source_refuses_names_that_collide() {
    let (q, k) = (tile("q", Swizzle::None), tile("k", Swizzle::None));
    let err = |ks: KernelSource| ks.build().unwrap_err();
    assert!(matches!(
        err(KernelSource::new().tile_as(&q, "int")),
        RenderError::InvalidName {
            what: "tile alias",
            ..
        }
    ));
    // An alias may not take the generated code's prefix (a tile struct's name), nor another
    // alias's name.
    assert!(matches!(
        err(KernelSource::new().tile_as(&q, "tma_k").tile(&k)),
        RenderError::GeneratedName {
            what: "tile alias",
            ..
        }
    ));
    assert!(matches!(
        err(KernelSource::new().tile_as(&q, "T").tile_as(&k, "T")),
        RenderError::NameTaken {
            what: "tile alias",
            ..
        }
    ));
    assert!(matches!(
        err(KernelSource::new().tile_set("s", &[("a", &q), ("a", &k)])),
        RenderError::NameTaken {
            what: "tile set member",
            ..
        }
    ));
    assert!(matches!(
        err(KernelSource::new().tile_set("s", &[("SMEM_BYTES", &q)])),
        RenderError::GeneratedName {
            what: "tile set member",
            ..
        }
    ));
    // Members `x` and `OFFSET_x` would both give the set an `OFFSET_x`.
    assert!(matches!(
        err(KernelSource::new().tile_set("s", &[("x", &q), ("OFFSET_x", &k)])),
        RenderError::NameTaken {
            what: "tile set member",
            ..
        }
    ));
    // Tiles `q` and `encode_q` would both give a header a `tma_encode_q`.
    let encode_q = tile("encode_q", Swizzle::None);
    match err(KernelSource::new().tile(&q).tile(&encode_q)) {
        RenderError::NameTaken {
            what: "tile", by, ..
        } => {
            assert!(by.contains("tma_encode_q"), "{by}")
        }
        other => panic!("{other}"),
    }
    assert!(matches!(
        err(KernelSource::new().tile_set("9s", &[("a", &q)])),
        RenderError::InvalidName {
            what: "tile set",
            ..
        }
    ));
    // Set `q` would be struct tma_q, the tile's.
    assert!(matches!(
        err(KernelSource::new().tile_set("q", &[("a", &q)])),
        RenderError::NameTaken {
            what: "tile set",
            ..
        }
    ));
    // Sets `s` and `S` would share TMA_S_PARAMS.
    assert!(matches!(
        err(KernelSource::new()
            .tile_set("s", &[("a", &q)])
            .tile_set("S", &[("b", &k)])),
        RenderError::NameTaken {
            what: "tile set",
            ..
        }
    ));
}

#[test]
fn coordinates_are_named_fields_in_user_order() {
    let v = mpk();
    let src = TileCode::new(&v, 0).unwrap_or_else(|e| panic!("{e}"));
    let src = src.source();
    assert!(src.contains(
        "  struct coords {\n    // tma_positional refuses a positional brace list; then one int per dim, user order.\n    tma_name_each_coordinate tma_positional{};\n    int row = tma_coord_missing;\n    int col = tma_coord_missing;\n  };\n"
    ));
    assert!(src.contains("static __device__ __forceinline__ void load(const CUtensorMap* map, tma_mbarrier* bar, void* smem, coords c) {\n    const int c0 = c.row, c1 = c.col;\n"));
    assert!(src.contains("static constexpr int BOX_row = 64;"));
    assert!(src.contains("static constexpr int EXTENT_col = 128;"));
    // No positional overload above rank 1.
    assert!(!src.contains("int c0, int c1"));
    let r1 = corpus::corpus()
        .into_iter()
        .find(|v| v.spec().rank() == 1)
        .unwrap();
    let r1 = TileCode::new(&r1, 0).unwrap_or_else(|e| panic!("{e}"));
    assert!(r1
        .source()
        .contains("void load(const CUtensorMap* map, tma_mbarrier* bar, void* smem, int c0) {"));
}

/// A GEMM-like ring (plain and multicast), warp roles and the warp helpers, snapshot-tested;
/// the rendered numbers are the plan's.
#[test]
fn pipeline_snapshots() {
    use tma_core::pipeline::{ClusterAxis, Consumers, PipelineSpec, WarpRoles};
    use tma_core::render::{warp_support, PipelineCode, WarpRolesCode};
    let tile = |name: &str, rows: u32, repeat: u32| {
        validate(
            &TileSpec::new(name, DType::BF16, [4096, 4096], [rows, 64])
                .dim_names(["MN", "K"])
                .swizzle(Swizzle::B128)
                .repeat([repeat, 1]),
        )
        .unwrap()
    };
    let ring = PipelineSpec::new("gemm", 4, Consumers::Warpgroups(2))
        .tile("a", &tile("a", 128, 1))
        .tile("b", &tile("b", 256, 1))
        .validate()
        .unwrap();
    let code = PipelineCode::new(&ring, 0).unwrap();
    assert!(code
        .source()
        .contains("static constexpr unsigned STAGE_TX_BYTES = 49152u;"));
    insta::assert_snapshot!("pipeline_gemm", code.source());
    let mc = PipelineSpec::new("gemm_mc", 3, Consumers::Warpgroups(2))
        .multicast_tile("a", &tile("a_half", 64, 2), ClusterAxis::Y)
        .tile("b", &tile("b", 256, 1))
        .cluster([1, 2, 1])
        .validate()
        .unwrap();
    let code = PipelineCode::new(&mc, 1).unwrap();
    assert!(code
        .source()
        .contains("static constexpr unsigned EMPTY_ARRIVALS = 16u;"));
    insta::assert_snapshot!("pipeline_gemm_mc", code.source());
    let roles = WarpRoles::new("gemm", 40, 2, 232)
        .barrier("consumers", 256)
        .validate()
        .unwrap();
    insta::assert_snapshot!("roles_gemm", WarpRolesCode::new(&roles).unwrap().source());
    // Warp-granular: one producer warp, four consumer warps, a barrier per consumer, no
    // setmaxnreg (so no setmaxnreg helpers to call).
    let warps = WarpRoles::warps("epi", 1, 4)
        .barrier("all", 128)
        .per_consumer_barrier("slice", 32)
        .validate()
        .unwrap();
    let code = WarpRolesCode::new(&warps).unwrap();
    assert!(code.source().contains(
        "sync_slice(unsigned consumer) { tma_named_barrier_sync_of<2u, CONSUMERS, 32u>(consumer); }"
    ));
    assert!(!code.source().contains("setmaxnreg()"));
    insta::assert_snapshot!("roles_epi_warps", code.source());
    insta::assert_snapshot!("warp_support", warp_support().unwrap());
    // Deterministic, and the description carries each pipeline (ids in the order added).
    let src = KernelSource::new()
        .pipeline(&ring)
        .pipeline(&mc)
        .build()
        .unwrap();
    assert_eq!(
        src,
        KernelSource::new()
            .pipeline(&ring)
            .pipeline(&mc)
            .build()
            .unwrap()
    );
    let facts = KernelSource::new().pipeline(&ring).pipeline(&mc).facts();
    let p = facts.pipeline(1).unwrap();
    assert_eq!(
        (p.name.as_str(), p.stages, p.cluster, p.dynamic_smem_bytes),
        ("gemm_mc", 3, [1, 2, 1], mc.dynamic_smem_bytes())
    );
    assert_eq!(p.dynamic_smem_bytes, 148528);
    assert!(p.outside_plans);
    // Its stage tiles by id (each tile once: a tile equal to one held is shared).
    for t in &facts.pipelines {
        let p = if t.id == 0 { &ring } else { &mc };
        let names: Vec<&str> = t
            .tiles
            .iter()
            .map(|&id| facts.tile(id).unwrap().name.as_str())
            .collect();
        let want: Vec<&str> = p
            .spec()
            .tiles
            .iter()
            .map(|m| m.tile.spec().name.as_str())
            .collect();
        assert_eq!(names, want);
    }
    let mc_at = src.find("struct tma_pipe_gemm_mc {").unwrap();
    assert!(src[mc_at..].contains("static constexpr unsigned PIPELINE_ID = 1u;"));
}

/// A pipeline's consumers against the source's warp roles: beside one warp roles,
/// `Warpgroups(n)` is its consumer warpgroup count; never more consumer threads than the
/// roles have; `Warps(n)` may be a subset.
#[test]
fn pipeline_consumers_agree_with_the_warp_roles() {
    use tma_core::pipeline::{Consumers, PipelineSpec, WarpRoles};
    let t = validate(&TileSpec::new("t", DType::BF16, [4096, 64], [64, 64]).swizzle(Swizzle::B128))
        .unwrap();
    let pipe = |c| {
        PipelineSpec::new("p", 2, c)
            .tile("a", &t)
            .validate()
            .unwrap()
    };
    let roles = |cw| {
        // One consumer warpgroup (256 threads) starts at 256 registers: its inc goes to 256.
        WarpRoles::new(format!("r{cw}"), 40, cw, if cw == 1 { 256 } else { 232 })
            .validate()
            .unwrap()
    };
    let build = |c, cws: &[u32]| {
        let mut src = KernelSource::new().pipeline(&pipe(c));
        for &cw in cws {
            src = src.warp_roles(&roles(cw));
        }
        src.build()
    };
    let warps = |c| WarpRoles::warps(format!("w{c}"), 1, c).validate().unwrap();
    let build_warps = |c, roles_warps| {
        KernelSource::new()
            .pipeline(&pipe(c))
            .warp_roles(&warps(roles_warps))
            .build()
    };
    assert!(build_warps(Consumers::Warps(4), 4).is_ok());
    assert!(build_warps(Consumers::Warpgroups(1), 4).is_ok());
    assert!(build_warps(Consumers::Threads(100), 4).is_ok());
    for (c, w, why) in [
        (Consumers::Warps(3), 4, "each consumer warp"),
        (Consumers::Warpgroups(1), 8, "released by all of them"),
        (Consumers::Warps(5), 4, "never completes"),
    ] {
        match build_warps(c, w) {
            Err(e @ render::RenderError::ConsumersDisagree { .. }) => {
                assert!(e.to_string().contains(why), "{e}")
            }
            other => panic!("{c}: {other:?}"),
        }
    }
    assert!(build(Consumers::Warpgroups(2), &[2]).is_ok());
    assert!(build(Consumers::Warps(6), &[2]).is_ok());
    assert!(build(Consumers::Threads(128), &[1]).is_ok());
    assert!(build(Consumers::Warpgroups(1), &[]).is_ok());
    // Several roles: the pairing is unknown, only the widest bounds the threads.
    assert!(build(Consumers::Warpgroups(1), &[1, 2]).is_ok());
    match build(Consumers::Warpgroups(1), &[2]) {
        Err(e @ render::RenderError::ConsumersDisagree { .. }) => assert!(
            e.to_string().starts_with(
                "pipeline `p` is released by warpgroups(1) (128 threads) but warp roles `r2` have consumers warpgroups(2) (256 threads)"
            ),
            "{e}"
        ),
        other => panic!("{other:?}"),
    }
    for (c, cws) in [
        (Consumers::Warps(9), &[2u32][..]),
        (Consumers::Threads(129), &[1]),
        (Consumers::Warpgroups(3), &[1, 2]),
    ] {
        match build(c, cws) {
            Err(e @ render::RenderError::ConsumersDisagree { .. }) => {
                assert!(e.to_string().contains("never completes"), "{e}")
            }
            other => panic!("{c}: {other:?}"),
        }
    }
}

/// A pipeline taken in turn (ping-pong): released by one consumer of the roles, of which there
/// are two or more, in the roles' unit; anything else is refused naming why. Its struct says so
/// (`IN_TURN`), and the state skips stages with `advance(n)`.
#[test]
fn pipeline_taken_in_turn_is_one_consumer_of_several() {
    use tma_core::pipeline::{Consumers, PipelineSpec, WarpRoles};
    let t = validate(&TileSpec::new("t", DType::BF16, [4096, 64], [64, 64]).swizzle(Swizzle::B128))
        .unwrap();
    let pipe = |c| {
        PipelineSpec::new("p", 2, c)
            .tile("a", &t)
            .in_turn()
            .validate()
            .unwrap()
    };
    let groups = |cw| {
        WarpRoles::new(format!("r{cw}"), 40, cw, if cw == 1 { 256 } else { 232 })
            .validate()
            .unwrap()
    };
    let warps = |c| WarpRoles::warps(format!("w{c}"), 1, c).validate().unwrap();
    let build = |c, roles: &tma_core::pipeline::ValidWarpRoles| {
        KernelSource::new()
            .pipeline(&pipe(c))
            .warp_roles(roles)
            .build()
    };
    let src = build(Consumers::Warpgroups(1), &groups(2)).expect("one warpgroup of two");
    assert!(src.contains("static constexpr bool IN_TURN = true;"));
    assert!(src.contains("CONSUMER_THREADS = 128u"));
    assert!(src.contains("taken in turn: each stage is waited, read and released by ONE consumer"));
    assert!(src.contains("__device__ __forceinline__ void advance(unsigned n)"));
    assert!(build(Consumers::Warps(1), &warps(4)).is_ok());
    for (c, roles, why) in [
        (
            Consumers::Warpgroups(1),
            groups(1),
            "at least two consumers",
        ),
        (Consumers::Warps(1), warps(1), "at least two consumers"),
        (
            Consumers::Warpgroups(1),
            warps(8),
            "released by one consumer of the roles",
        ),
        (
            Consumers::Warps(1),
            groups(2),
            "released by one consumer of the roles",
        ),
    ] {
        match build(c, &roles) {
            Err(e @ render::RenderError::ConsumersDisagree { .. }) => {
                assert!(e.to_string().contains(why), "{c}: {e}")
            }
            other => panic!("{c}: {other:?}"),
        }
    }
    // Without in_turn, one warpgroup of two is refused (each stage is every consumer's).
    let all = PipelineSpec::new("p", 2, Consumers::Warpgroups(1))
        .tile("a", &t)
        .validate()
        .unwrap();
    let plain = KernelSource::new()
        .pipeline(&all)
        .warp_roles(&groups(2))
        .build();
    assert!(
        matches!(plain, Err(render::RenderError::ConsumersDisagree { .. })),
        "{plain:?}"
    );
    let no = KernelSource::new().pipeline(&all).build().expect("alone");
    assert!(no.contains("static constexpr bool IN_TURN = false;"));
}

/// A kernel plan: a GEMM-like ring beside warp roles, a D staging tile per consumer
/// warpgroup and scratch, snapshot-tested; the rendered numbers are the plan's layout, and
/// the whole source carries every part the plan owns, each once.
#[test]
fn plan_snapshots() {
    use tma_core::pipeline::{Consumers, PipelineSpec, WarpRoles};
    use tma_core::plan::KernelPlan;
    use tma_core::render::PlanCode;
    let tile = |name: &str, rows: u32| {
        validate(
            &TileSpec::new(name, DType::BF16, [4096, 4096], [rows, 64])
                .dim_names(["MN", "K"])
                .swizzle(Swizzle::B128),
        )
        .unwrap()
    };
    let ring = PipelineSpec::new("ring", 4, Consumers::Warpgroups(2))
        .tile("a", &tile("a", 128))
        .tile("b", &tile("b", 256))
        .validate()
        .unwrap();
    let roles = WarpRoles::new("gemm", 40, 2, 232).validate().unwrap();
    let plan = KernelPlan::new("gemm")
        .pipeline(&ring)
        .roles(&roles)
        .staging("d", &tile("d", 64), 2)
        .scratch("flags", 64, 16)
        .validate()
        .unwrap();
    let code = PlanCode::new(&plan).unwrap();
    let d = plan.region("d").unwrap();
    assert!(code.source().contains(&format!(
        "static constexpr unsigned OFFSET_d = {}u, BYTES_d = 16384u, ALIGN_d = 1024u;",
        d.offset
    )));
    assert!(code.source().contains(&format!(
        "static constexpr unsigned DYNAMIC_SMEM_BYTES = {}u;",
        plan.launch().dynamic_smem_bytes
    )));
    assert_eq!(code.launch_macro(), "TMA_PLAN_GEMM_LAUNCH_BOUNDS");
    insta::assert_snapshot!("plan_gemm", code.source());
    // Two plans sharing a ring, its tiles and the roles: each part once.
    let other = KernelPlan::new("gemm2")
        .pipeline(&ring)
        .roles(&roles)
        .validate()
        .unwrap();
    let src = KernelSource::new()
        .plan(&plan)
        .plan(&other)
        .build()
        .unwrap();
    assert_eq!(src.matches("struct tma_pipe_ring {").count(), 1);
    assert_eq!(src.matches("struct tma_roles_gemm {").count(), 1);
    assert_eq!(src.matches("struct tma_d {").count(), 1);
    assert!(src.contains("struct tma_plan_gemm {") && src.contains("struct tma_plan_gemm2 {"));
    let launches = KernelSource::new().plan(&plan).plan(&other).launch_plans();
    assert_eq!(launches.len(), 2);
    assert_eq!(launches[0], *plan.launch());
    // The description: the plans' launches, and what only plans own is marked so (a kernel
    // without a plan is not checked against it); a tile also added outside them is not.
    let facts = KernelSource::new().plan(&plan).plan(&other).facts();
    assert_eq!(facts.plans, launches);
    assert!(facts.tiles.iter().all(|t| !t.outside_plans));
    assert!(facts.pipelines.iter().all(|p| !p.outside_plans));
    let shared = KernelSource::new().tile(&tile("d", 64)).plan(&plan).facts();
    let outside: Vec<(&str, bool)> = (shared.tiles.iter())
        .map(|t| (t.name.as_str(), t.outside_plans))
        .collect();
    assert_eq!(outside, [("d", true), ("a", false), ("b", false)]);
    // A pipeline added outside the plans makes its stage tiles the source's too, whoever added
    // them first; the plan's pipeline stays the plan's.
    let other_ring = PipelineSpec::new("other_ring", 2, Consumers::Warpgroups(2))
        .tile("a", &tile("a", 128))
        .validate()
        .unwrap();
    let mixed = KernelSource::new()
        .plan(&plan)
        .pipeline(&other_ring)
        .facts();
    let outside: Vec<(&str, bool)> = (mixed.tiles.iter())
        .map(|t| (t.name.as_str(), t.outside_plans))
        .collect();
    assert_eq!(outside, [("a", true), ("b", false), ("d", false)]);
    let outside: Vec<(&str, bool)> = (mixed.pipelines.iter())
        .map(|p| (p.name.as_str(), p.outside_plans))
        .collect();
    assert_eq!(outside, [("ring", false), ("other_ring", true)]);
    // The launch bounds: the roles' blocks per SM; without roles, only a declared one (a
    // minimum of 1 block made ptxas use 70 registers where 32 did, examples/03 msda_ldg).
    let bounds = |p: KernelPlan| {
        let code = PlanCode::new(&p.validate().unwrap()).unwrap();
        let line = code
            .source()
            .lines()
            .find(|l| l.contains("_LAUNCH_BOUNDS __"))
            .unwrap();
        line.split_once(' ')
            .unwrap()
            .1
            .split_once(' ')
            .unwrap()
            .1
            .to_string()
    };
    assert_eq!(
        bounds(KernelPlan::new("k").block_threads(128)),
        "__launch_bounds__(128)"
    );
    assert_eq!(
        bounds(KernelPlan::new("k").block_threads(128).blocks_per_sm(3)),
        "__launch_bounds__(128, 3)"
    );
    assert_eq!(
        bounds(KernelPlan::new("k").roles(&roles)),
        "__launch_bounds__(384, 1)"
    );
    // Roles without setmaxnreg take the plan's count; roles with it checked their registers
    // for theirs, and a plan asking for another is refused (plan::tests).
    let warps = WarpRoles::warps("w", 4, 8).validate().unwrap();
    assert_eq!(
        bounds(KernelPlan::new("k").roles(&warps).blocks_per_sm(2)),
        "__launch_bounds__(384, 2)"
    );
    assert!(KernelPlan::new("k")
        .roles(&roles)
        .blocks_per_sm(2)
        .validate()
        .is_err());
    let code = PlanCode::new(&KernelPlan::new("k").block_threads(64).validate().unwrap()).unwrap();
    assert!(code
        .source()
        .contains("static constexpr unsigned BLOCKS_PER_SM = 0u;"));
}

/// The device-side map update of a grouped GEMM's A operand (`[M][K]` bf16, M, K and M's row
/// pitch bound at run time): the fields in TMA order (K -> global_dim 0, M -> 1, M's pitch
/// -> global_stride 0, in bytes), and a rank-3 tile with a static dim and stride the debug
/// check holds to the declaration.
#[test]
fn map_update_snapshot() {
    use tma_core::Extent;
    let grouped = TileSpec::new("grouped_a", DType::BF16, [1, 1], [64, 64])
        .dim_names(["M", "K"])
        .swizzle(Swizzle::B128)
        .global_extents([Extent::Runtime, Extent::Runtime])
        .stride_extents([Extent::Runtime, Extent::Static(1)]);
    let mixed = TileSpec::new("mixed", DType::F32, [8, 1, 64], [2, 4, 32])
        .dim_names(["H", "W", "C"])
        .global_extents([Extent::Runtime, Extent::Runtime, Extent::Static(64)])
        .stride_extents([Extent::Runtime, Extent::Static(64), Extent::Static(1)]);
    for spec in [grouped, mixed] {
        let code = TileCode::new(&validate(&spec).unwrap(), 0).unwrap();
        let src = code.source();
        let start = src.find("  // ---- tensor map updates").unwrap();
        let end = src.find("  // ---- copies (device)").unwrap();
        insta::assert_snapshot!(format!("map_update_{}", spec.name), &src[start..end]);
    }
}

/// The im2col corpus: NWC u8, NHWC bf16 with the 128B swizzle and a 3x3/2 box, NDHWC f32 with
/// run-time dims. Snapshots, and the same bytes twice.
#[test]
fn im2col_snapshots() {
    use tma_core::render::Im2colCode;
    use tma_core::{validate_im2col, Extent, Im2colSpec};
    let specs = [
        Im2colSpec::new("nwc_u8", DType::U8, [4, 100, 32], 32, 64).corners([-2], [0]),
        Im2colSpec::new("nhwc_bf16", DType::BF16, [8, 56, 56, 64], 64, 128)
            .corners([-1, -1], [-1, -1])
            .element_strides([2, 2])
            .swizzle(Swizzle::B128),
        Im2colSpec::new("ndhwc_f32", DType::F32, [2, 8, 8, 8, 16], 16, 32)
            .global_extents([
                Extent::Runtime,
                Extent::Runtime,
                Extent::Runtime,
                Extent::Runtime,
                Extent::Static(16),
            ])
            .corners([0, -1, -1], [0, -1, -1])
            .swizzle(Swizzle::B64),
    ];
    let mut valids = Vec::new();
    for spec in specs {
        let valid = validate_im2col(&spec).unwrap_or_else(|e| panic!("{e}"));
        let code = Im2colCode::new(&valid, 3).unwrap();
        assert_eq!(code.source(), Im2colCode::new(&valid, 3).unwrap().source());
        assert_eq!(code.cuda_name(), format!("tma_{}", spec.name));
        insta::assert_snapshot!(format!("im2col_{}", spec.name), code.source());
        valids.push(valid);
    }
    // The C++ header: after a tiled tile, each im2col tile's helpers (ids 1, 2, 3) and its host
    // encode function, whose constant arguments and parameters are snapshotted.
    let tiled = mpk();
    let h = render::header_with_im2col(
        std::slice::from_ref(&tiled),
        &valids,
        &[],
        render::HeaderOptions::default(),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    for (id, v) in (1..).zip(&valids) {
        let name = &v.spec().name;
        assert!(
            h.contains(&format!("// im2col tile {id}: `{name}`")),
            "{name}"
        );
        assert!(h.contains(&format!("inline CUresult tma_encode_{name}(")));
    }
    let start = h
        .find("// im2col tile `nwc_u8`: its CUtensorMap (host)")
        .unwrap();
    insta::assert_snapshot!("im2col_header_encode", &h[start..]);
    // One name, one tile: an im2col tile may not take a tiled tile's name.
    let clash = validate_im2col(&Im2colSpec::new(
        tiled.spec().name.clone(),
        DType::U8,
        [4, 100, 32],
        32,
        64,
    ))
    .unwrap();
    assert!(matches!(
        render::header_with_im2col(&[tiled], &[clash], &[], render::HeaderOptions::default()),
        Err(render::RenderError::DuplicateTile {
            first: 0,
            second: 1,
            ..
        })
    ));
}

/// A pipeline whose stage holds an im2col A operand (the convolution's, `Im2colSpec::wgmma`,
/// `PipelineSpec::im2col_tile`) and a tiled B: the im2col struct with its descriptors, and
/// `load()` taking A's coordinates and offsets.
#[test]
fn im2col_pipeline_snapshot() {
    use tma_core::pipeline::{Consumers, PipelineSpec};
    use tma_core::render::KernelSource;
    use tma_core::{validate_im2col, Extent, Im2colSpec, Major, Operand};
    let a = validate_im2col(
        &Im2colSpec::new("conv_a", DType::BF16, [1, 1, 1, 1], 64, 128)
            .global_extents([Extent::Runtime; 4])
            .swizzle(Swizzle::B128)
            .wgmma(Operand::A, Major::K),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let b = validate(
        &TileSpec::new("conv_b", DType::BF16, [9, 64, 64], [1, 128, 64])
            .dim_names(["rs", "n", "k"])
            .swizzle(Swizzle::B128)
            .wgmma(Operand::B, Major::K),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let p = PipelineSpec::new("conv", 3, Consumers::Warpgroups(2))
        .im2col_tile("a", &a)
        .unwrap()
        .tile("b", &b)
        .validate()
        .unwrap_or_else(|e| panic!("{e}"));
    let src = KernelSource::new().pipeline(&p).build().unwrap();
    let start = src.find("// im2col tile 0").unwrap();
    insta::assert_snapshot!("im2col_pipeline", &src[start..]);
}
