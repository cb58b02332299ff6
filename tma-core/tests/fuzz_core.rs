//! Hostile values through the run-time builders the root crate's `tests/hardening*.rs` do not
//! reach: im2col tiles (`Im2colSpec` -> `validate_im2col` -> bind, encode, `check_call`, the
//! model, the render), kernel plans (`KernelPlan` -> `validate` -> layout, launch, render),
//! shared-memory layouts (`SmemLayout::place`, `StageShape`), device-side map updates,
//! element offsets and the wgmma register helpers. Every integer field draws from the edges
//! (0, 1, limits and their neighbours, 2^31, 2^32, 2^40, 2^63, `MAX`) as often as from
//! plausible values. What must hold: no panic (the test profile keeps overflow checks on, so a
//! wrapped product panics here), every refusal names a field, and every number an accepted
//! value yields equals its product recomputed in `u128`, within the hardware's limits.
//!
//! `PROPTEST_CASES` sets the cases per property (default 256, a few seconds; hardening runs
//! used 20,000).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
#![allow(clippy::needless_range_loop)]

use std::sync::OnceLock;

use proptest::prelude::*;
use proptest::sample::select;
use tma_core::error::SpecErrors;
use tma_core::limits::{
    MAX_BLOCKS_PER_SM, MAX_BLOCK_THREADS, MAX_CLUSTER_CTAS, MAX_IM2COL_SPATIAL_DIM,
    MAX_THREADS_PER_SM, MAX_TX_BYTES,
};
use tma_core::model::im2col;
use tma_core::pipeline::{
    Consumers, PipelineErrors, PipelineSpec, ValidPipeline, ValidWarpRoles, WarpRoles,
};
use tma_core::plan::{KernelPlan, RegionKind, ValidKernelPlan};
use tma_core::render::{Im2colCode, KernelSource, PlanCode, RenderError, TileSetCode};
use tma_core::smem::{ElementOffsets, SmemLayout, StageShape};
use tma_core::spec::Extent;
use tma_core::wgmma::registers::{a_fragments, a_matrix};
use tma_core::wgmma::{AccumulatorType, Fragment};
use tma_core::{
    validate, validate_im2col, Arch, DType, Im2colEncodeArgs, Im2colSpec, Major, OobFill, Operand,
    Swizzle, TileSpec, ValidSpec,
};
use tma_test_support::testgen::{random_im2col, random_valid_spec, unsigned_literals, XorShift};

// ---- the edges ----------------------------------------------------------------------------

const U64_EDGES: [u64; 30] = [
    0,
    1,
    2,
    3,
    7,
    8,
    15,
    16,
    17,
    31,
    32,
    255,
    256,
    257,
    1023,
    1024,
    1025,
    (1 << 31) - 1,
    1 << 31,
    (1 << 32) - 1,
    1 << 32,
    (1 << 32) + 1,
    (1 << 40) - 1,
    1 << 40,
    1 << 61,
    1 << 62,
    (1 << 63) - 1,
    1 << 63,
    u64::MAX - 1,
    u64::MAX,
];

fn u64_edge(plausible: u64) -> impl Strategy<Value = u64> {
    prop_oneof![
        3 => 0..=plausible,
        2 => select(&U64_EDGES[..]),
        1 => any::<u64>(),
    ]
}

fn u32_edge(plausible: u32) -> impl Strategy<Value = u32> {
    let edges: Vec<u32> = U64_EDGES
        .iter()
        .filter_map(|&v| u32::try_from(v).ok())
        .collect();
    prop_oneof![
        3 => 0..=plausible,
        2 => select(edges),
        1 => any::<u32>(),
    ]
}

fn i32_edge(plausible: i32) -> impl Strategy<Value = i32> {
    prop_oneof![
        4 => -plausible..=plausible,
        1 => select(vec![i32::MIN, i32::MIN + 1, -32769, -32768, -129, -128, -17, -16, 15, 16, 127, 128, 32767, 32768, i32::MAX - 1, i32::MAX]),
        1 => any::<i32>(),
    ]
}

fn i64_edge(plausible: i64) -> impl Strategy<Value = i64> {
    prop_oneof![
        4 => -plausible..=plausible,
        1 => select(vec![
            i64::MIN,
            i64::from(i32::MIN) - 1,
            i64::from(i32::MIN),
            i64::from(i32::MAX),
            i64::from(i32::MAX) + 1,
            1 << 40,
            i64::MAX,
        ]),
        1 => any::<i64>(),
    ]
}

fn arch() -> impl Strategy<Value = Arch> {
    prop_oneof![4 => Just(Arch::Sm90a), 1 => Just(Arch::Sm100a), 1 => Just(Arch::Sm120a)]
}

/// Every refusal names a field and says why in words.
fn check_refusal(e: &SpecErrors) {
    assert!(!e.errors.is_empty(), "a refusal without a finding");
    for f in &e.errors {
        assert!(!f.field.to_string().is_empty(), "{f:?}");
        assert!(f.message.len() > 10, "{f:?}");
    }
    assert!(!e.to_string().is_empty());
}

fn check_pipeline_refusal(e: &PipelineErrors) {
    assert!(!e.errors.is_empty(), "a refusal without a finding");
    for f in &e.errors {
        assert!(!f.field.to_string().is_empty(), "{f:?}");
        assert!(f.message.len() > 10, "{f:?}");
    }
    assert!(!e.to_string().is_empty());
}

/// Nothing a renderer printed is past 32 bits (the templates print `unsigned` sizes).
fn check_literals(source: &str) {
    let literals = unsigned_literals(source);
    assert!(
        literals.iter().all(|&v| v <= u128::from(u32::MAX)),
        "{literals:?}"
    );
}

// ---- im2col -------------------------------------------------------------------------------

fn im2col_spec() -> impl Strategy<Value = Im2colSpec> {
    let rank = prop_oneof![8 => 3usize..=5, 1 => 0usize..=7];
    (rank, select(DType::ALL.to_vec()), arch()).prop_flat_map(|(rank, dtype, target)| {
        let spatial = rank.saturating_sub(2);
        let len = move || prop_oneof![12 => Just(spatial), 1 => 0usize..=6];
        (
            prop::collection::vec(u64_edge(64), rank),
            prop_oneof![3 => select(vec![8u32, 16, 32, 64, 128, 256]), 2 => u32_edge(300)],
            prop_oneof![3 => 1u32..=256, 2 => u32_edge(1100)],
            len().prop_flat_map(|n| prop::collection::vec(i32_edge(8), n)),
            len().prop_flat_map(|n| prop::collection::vec(i32_edge(8), n)),
            len().prop_flat_map(|n| {
                prop::collection::vec(prop_oneof![4 => 1u32..=3, 1 => u32_edge(9)], n)
            }),
            select(Swizzle::ALL.to_vec()),
            any::<bool>(),
            prop::option::weighted(0.2, (any::<bool>(), any::<bool>())),
            prop::option::weighted(0.2, prop::collection::vec(u64_edge(1 << 12), rank)),
        )
            .prop_map(
                move |(global, c, p, lower, upper, estrides, swizzle, nan, wgmma, strides)| {
                    let mut s = Im2colSpec::new("im", dtype, global, c, p)
                        .corners(lower, upper)
                        .element_strides(estrides)
                        .swizzle(swizzle)
                        .target(target);
                    if nan {
                        s = s.oob_fill(OobFill::NanRequestZeroFma);
                    }
                    if let Some((a, k)) = wgmma {
                        s = s.wgmma(
                            if a { Operand::A } else { Operand::B },
                            if k { Major::K } else { Major::MN },
                        );
                    }
                    if let Some(st) = strides {
                        s = s.strides(st);
                    }
                    s
                },
            )
    })
}

/// A valid im2col load from the GPU test's generator with up to three fields set to an edge
/// (`(field, value)` pairs; the value is cut to the field's type), and its coordinates and
/// offsets, some moved to an edge too.
fn near_valid_im2col() -> impl Strategy<Value = (Im2colSpec, Vec<u64>, Vec<i64>, Vec<i64>)> {
    (
        any::<u64>(),
        prop::collection::vec((0u8..16, u64_edge(64), 0usize..8), 0..=3),
        prop::option::weighted(0.3, (0usize..8, i64_edge(40))),
        prop::option::weighted(0.3, (0usize..8, i64_edge(300))),
    )
        .prop_map(|(seed, mutations, coord, offset)| {
            let (bound, mut coords, mut offsets) = random_im2col(&mut XorShift::new(seed));
            let mut spec = bound.spec().clone();
            let mut dims = bound.global().to_vec();
            let k = spec.spatial_rank();
            for (field, v, at) in mutations {
                let (d, i) = (at % spec.rank(), at % k.max(1));
                let (v32, vi) = (v as u32, v as i32);
                match field {
                    0 => {
                        dims[d] = v;
                        spec.global[d] = Extent::Static(v);
                    }
                    1 => spec.channels_per_pixel = v32,
                    2 => spec.pixels_per_column = v32,
                    3 => spec.lower_corner[i] = vi,
                    4 => spec.upper_corner[i] = vi,
                    5 => spec.element_strides[i] = v32,
                    6 => spec.swizzle = Swizzle::ALL[at % Swizzle::ALL.len()],
                    7 => spec.dtype = DType::ALL[at % DType::ALL.len()],
                    8 => spec.target = [Arch::Sm90a, Arch::Sm100a, Arch::Sm120a][at % 3],
                    9 => {
                        let mut strides = tma_core::validate::dense_strides(&dims, 1)
                            .unwrap_or_else(|| vec![1; dims.len()]);
                        strides[d] = v;
                        spec = spec.strides(strides);
                    }
                    10 => {
                        spec.wgmma = Some(tma_core::WgmmaOperand {
                            operand: if at % 2 == 0 { Operand::A } else { Operand::B },
                            major: if at / 2 % 2 == 0 { Major::K } else { Major::MN },
                        })
                    }
                    11 => spec.oob_fill = OobFill::NanRequestZeroFma,
                    12 => spec.global[d] = Extent::Runtime,
                    13 => spec.global[d] = Extent::Static(v),
                    _ => {
                        // Corners at the rank's edges.
                        let (lo, hi) = tma_core::limits::im2col_corner_range(k);
                        spec.lower_corner[i] = if at % 2 == 0 { lo } else { hi };
                        spec.upper_corner[i] = if at % 4 < 2 { lo } else { hi };
                    }
                }
            }
            if let Some((d, v)) = coord {
                let at = d % coords.len().max(1);
                if let Some(c) = coords.get_mut(at) {
                    *c = v;
                }
            }
            if let Some((i, v)) = offset {
                let at = i % offsets.len().max(1);
                if let Some(o) = offsets.get_mut(at) {
                    *o = v;
                }
            }
            (spec, dims, coords, offsets)
        })
}

fn im2col_case(spec: &Im2colSpec, dims: &[u64], coords: &[i64], offsets: &[i64], r: &mut Reach) {
    let valid = match validate_im2col(spec) {
        Ok(v) => v,
        Err(e) => return check_refusal(&e),
    };
    r.saw("valid");
    let (p, c) = (
        u128::from(spec.pixels_per_column),
        u128::from(spec.channels_per_pixel),
    );
    let plan = valid.plan();
    // Packed sub-byte types are im2col tiles too (as in tiled mode); whole bytes otherwise.
    let bytes = spec
        .dtype
        .smem_bytes(u64::from(spec.pixels_per_column) * u64::from(spec.channels_per_pixel));
    assert_eq!(Some(valid.tx_bytes()), bytes.get());
    let esize = spec.dtype.size_bytes().map(u128::from);
    if let Some(esize) = esize {
        assert_eq!(u128::from(valid.tx_bytes()), p * c * esize);
    }
    assert!(valid.tx_bytes() <= MAX_TX_BYTES);
    assert!(plan.footprint_bytes <= spec.target.smem_per_sm());
    assert!(plan.footprint_bytes >= valid.tx_bytes());
    match valid.stage_tile() {
        Ok(tile) => assert_eq!(tile.plan(), plan),
        Err(e) => check_refusal(&e),
    }
    let code = Im2colCode::new(&valid, 0).expect("a valid im2col tile renders");
    check_literals(code.source());
    // Static dims, or run-time ones of any size.
    let global: Vec<u64> = match spec.global.iter().map(|e| e.get()).collect() {
        Some(g) if dims.is_empty() => g,
        _ => dims.to_vec(),
    };
    let bound = match valid.bind(&global, None) {
        Ok(b) => b,
        Err(e) => return check_refusal(&e),
    };
    r.saw("bound");
    let rank = spec.rank();
    for i in 0..spec.spatial_rank() {
        let dim = bound.global()[i + 1];
        let extent =
            i128::from(dim) + i128::from(spec.upper_corner[i]) - i128::from(spec.lower_corner[i]);
        assert!(dim <= MAX_IM2COL_SPATIAL_DIM);
        assert!((1..=i128::from(MAX_IM2COL_SPATIAL_DIM)).contains(&extent));
        let (lo, hi) = bound.bounding_box(i);
        assert_eq!(i128::from(hi) - i128::from(lo), extent);
    }
    let args = Im2colEncodeArgs::new(&bound);
    assert_eq!(args.rank as usize, rank);
    assert_eq!(args.global_strides.len(), rank - 1);
    let coords: Vec<i64> = (0..rank)
        .map(|d| coords.get(d).copied().unwrap_or(0))
        .collect();
    let offsets: Vec<i64> = offsets.iter().take(spec.spatial_rank()).copied().collect();
    if let Err(e) = bound.check_call(&coords, &offsets) {
        check_refusal(&e);
        assert!(im2col::pixels(&bound, &coords, &offsets).is_err());
        return;
    }
    r.saw("called");
    let pixels = im2col::pixels(&bound, &coords, &offsets).expect("a checked call walks");
    assert_eq!(pixels.len() as u128, p);
    let Some(esize) = esize else {
        // Not modelled yet (Blackwell only): refused, not guessed.
        assert!(im2col::elements(&bound, &coords, &offsets).is_err());
        return;
    };
    if bound.extent_bytes() > 1 << 16 {
        return;
    }
    let elements = im2col::elements(&bound, &coords, &offsets).expect("a checked call");
    assert_eq!(elements.len() as u128, p * c);
    for e in &elements {
        assert!(u128::from(e.smem) + esize <= u128::from(plan.footprint_bytes));
        if let Some(g) = e.global {
            assert!(u128::from(g) + esize <= u128::from(bound.extent_bytes()));
        }
    }
    let global = vec![0x5au8; bound.extent_bytes() as usize];
    let smem = im2col::load(&bound, &global, &coords, &offsets).expect("a checked load");
    assert_eq!(smem.len() as u64, plan.footprint_bytes);
    let picture = tma_core::model::picture::im2col_picture(&bound, &coords, &offsets);
    assert!(!picture.contains("no picture"), "{picture}");
    r.saw("modelled");
}

// ---- kernel plans -------------------------------------------------------------------------

struct Pool {
    tiles: Vec<ValidSpec>,
    pipelines: Vec<ValidPipeline>,
    roles: Vec<ValidWarpRoles>,
}

fn pool() -> &'static Pool {
    static POOL: OnceLock<Pool> = OnceLock::new();
    POOL.get_or_init(|| {
        let mut tiles = Vec::new();
        for arch in [Arch::Sm90a, Arch::Sm120a] {
            for (rows, swizzle) in [
                (64, Swizzle::B128),
                (128, Swizzle::B128),
                (8, Swizzle::None),
            ] {
                let spec = TileSpec::new(format!("t{rows}"), DType::BF16, [4096, 4096], [rows, 64])
                    .swizzle(swizzle)
                    .target(arch);
                tiles.push(validate(&spec).unwrap());
            }
            let small = TileSpec::new("s", DType::F32, [1 << 20], [8]).target(arch);
            tiles.push(validate(&small).unwrap());
        }
        let mut rng = XorShift::new(0xf022);
        for i in 0..4 {
            let mut spec = random_valid_spec(&mut rng, Arch::Sm90a).0.spec().clone();
            spec.name = format!("r{i}");
            tiles.push(validate(&spec).unwrap());
        }
        let mut pipelines = Vec::new();
        for (i, t) in tiles.iter().enumerate() {
            for (stages, consumers, cluster) in [
                (2, Consumers::Warpgroups(2), [1, 1, 1]),
                (4, Consumers::Warps(4), [2, 1, 1]),
                (1, Consumers::Threads(128), [1, 1, 1]),
            ] {
                let p = PipelineSpec::new(format!("p{i}_{stages}"), stages, consumers)
                    .tile("a", t)
                    .cluster(cluster)
                    .target(t.spec().target)
                    .validate();
                pipelines.extend(p.ok());
            }
        }
        let roles = [
            WarpRoles::new("gemm", 40, 2, 232),
            WarpRoles::new("one", 40, 1, 232).blocks_per_sm(2),
            WarpRoles::warps("w", 1, 4),
            WarpRoles::warps("w2", 1, 2).blocks_per_sm(4),
        ]
        .iter()
        .filter_map(|r| r.validate().ok())
        .collect();
        Pool {
            tiles,
            pipelines,
            roles,
        }
    })
}

#[derive(Clone, Debug)]
enum RegionDraw {
    Staging(usize, u32),
    Scratch(u64, u64),
}

#[derive(Clone, Debug)]
struct PlanDraw {
    target: Arch,
    tiles: Vec<usize>,
    sets: Vec<Vec<usize>>,
    pipelines: Vec<usize>,
    roles: Option<usize>,
    regions: Vec<RegionDraw>,
    block_threads: Option<u32>,
    cluster: Option<[u32; 3]>,
    blocks_per_sm: Option<u32>,
    /// Parts of other targets, a block without threads or beside the roles' are left as
    /// drawn; otherwise the draw is made plausible (see [`build_plan`]).
    hostile: bool,
}

fn plan_draw() -> impl Strategy<Value = PlanDraw> {
    let index = || 0usize..64;
    let region = prop_oneof![
        (index(), prop_oneof![3 => 1u32..=4, 1 => u32_edge(8)])
            .prop_map(|(t, c)| RegionDraw::Staging(t, c)),
        (
            u64_edge(1 << 12),
            prop_oneof![3 => select(vec![1u64, 16, 128, 1024]), 1 => u64_edge(2048)]
        )
            .prop_map(|(b, a)| RegionDraw::Scratch(b, a)),
    ];
    (
        prop_oneof![4 => Just(Arch::Sm90a), 1 => Just(Arch::Sm120a)],
        prop::collection::vec(index(), 0..=2),
        prop::collection::vec(prop::collection::vec(index(), 1..=3), 0..=2),
        prop_oneof![3 => prop::collection::vec(index(), 0..=1), 1 => prop::collection::vec(index(), 2..=3)],
        prop::option::weighted(0.5, index()),
        prop::collection::vec(region, 0..=3),
        prop::option::weighted(0.6, prop_oneof![3 => select(vec![128u32, 160, 256, 384, 512, 1024]), 1 => u32_edge(2048)]),
        prop::option::weighted(0.1, prop::array::uniform3(prop_oneof![3 => 1u32..=2, 1 => u32_edge(17)])),
        prop::option::weighted(0.4, prop_oneof![3 => 1u32..=4, 1 => u32_edge(64)]),
        prop::bool::weighted(0.2),
    )
        .prop_map(
            |(target, tiles, sets, pipelines, roles, regions, block_threads, cluster, blocks_per_sm, hostile)| {
                PlanDraw {
                    target,
                    tiles,
                    sets,
                    pipelines,
                    roles,
                    regions,
                    block_threads,
                    cluster,
                    blocks_per_sm,
                    hostile,
                }
            },
        )
}

fn build_plan(d: &PlanDraw) -> KernelPlan {
    let pool = pool();
    // Plausible: parts of the plan's target; hostile: any.
    let ours: Vec<&ValidSpec> = pool
        .tiles
        .iter()
        .filter(|t| d.hostile || t.spec().target == d.target)
        .collect();
    let pipes: Vec<&ValidPipeline> = pool
        .pipelines
        .iter()
        .filter(|p| d.hostile || p.spec().target == d.target)
        .collect();
    let tile = |i: usize| ours[i % ours.len()];
    let mut plan = KernelPlan::new("k").target(d.target);
    for (n, &t) in d.tiles.iter().enumerate() {
        plan = plan.tile(format!("T{n}"), tile(t));
    }
    for (n, members) in d.sets.iter().enumerate() {
        let names: Vec<String> = (0..members.len()).map(|m| format!("m{m}")).collect();
        let members: Vec<(&str, &ValidSpec)> = names
            .iter()
            .zip(members)
            .map(|(name, &t)| (name.as_str(), tile(t)))
            .collect();
        plan = plan.tile_set(format!("set{n}"), &members);
    }
    let mut first_cluster = None;
    for &p in &d.pipelines {
        let p = pipes[p % pipes.len()];
        // Plausible pipelines share the first one's cluster.
        if d.hostile || *first_cluster.get_or_insert(p.spec().cluster) == p.spec().cluster {
            plan = plan.pipeline(p);
        }
    }
    if let Some(r) = d.roles {
        plan = plan.roles(&pool.roles[r % pool.roles.len()]);
    }
    for (n, r) in d.regions.iter().enumerate() {
        plan = match *r {
            RegionDraw::Staging(t, copies) => plan.staging(format!("st{n}"), tile(t), copies),
            RegionDraw::Scratch(bytes, align) => plan.scratch(format!("sc{n}"), bytes, align),
        };
    }
    match (d.block_threads, &plan.roles) {
        (Some(t), None) => plan = plan.block_threads(t),
        (Some(t), Some(_)) if d.hostile => plan = plan.block_threads(t),
        (None, None) if !d.hostile => plan = plan.block_threads(384),
        _ => {}
    }
    if let Some(c) = d.cluster {
        plan = plan.cluster(c);
    }
    if let Some(n) = d.blocks_per_sm {
        plan = plan.blocks_per_sm(n);
    }
    plan
}

/// An accepted plan's numbers, recomputed in `u128` and held to the hardware.
fn check_plan(plan: &KernelPlan, v: &ValidKernelPlan, render: bool) {
    let (layout, launch) = (v.layout(), v.launch());
    let align = u128::from(layout.align_bytes());
    assert!(align >= 16 && align.is_power_of_two());
    let mut end = 0u128;
    for r in &layout.regions {
        let (offset, bytes, ralign) = (
            u128::from(r.offset),
            u128::from(r.bytes),
            u128::from(r.align),
        );
        assert!(
            ralign >= 1 && offset % ralign == 0 && align % ralign == 0,
            "{r:?}"
        );
        assert!(offset >= end, "regions overlap: {r:?}");
        end = offset + bytes;
        if r.copies > 1 {
            let one = u128::from(r.stride);
            assert!(one % ralign == 0);
            assert!(bytes <= one * u128::from(r.copies));
        }
        if let Some(kind) = plan.regions.iter().find(|x| x.name == r.name) {
            if let RegionKind::Scratch { bytes: b, align: a } = kind.kind {
                assert!(b >= 1 && a.is_power_of_two() && a <= 1024);
                assert_eq!(u128::from(b), bytes);
            }
        }
    }
    assert_eq!(u128::from(layout.total_bytes()), end);
    let dynamic = if layout.regions.is_empty() {
        0
    } else {
        end + align - 16
    };
    assert_eq!(u128::from(layout.dynamic_smem_bytes()), dynamic);
    assert_eq!(u128::from(launch.dynamic_smem_bytes), dynamic);
    assert!(dynamic <= u128::from(plan.target.max_smem_per_block()));
    let threads = u128::from(launch.block[0]);
    assert!((1..=u128::from(MAX_BLOCK_THREADS)).contains(&threads));
    assert_eq!(launch.block[1..], [1, 1]);
    let ctas: u128 = launch.cluster.iter().map(|&n| u128::from(n)).product();
    assert!(launch.cluster.iter().all(|&n| n >= 1) && ctas <= u128::from(MAX_CLUSTER_CTAS));
    if let Some(n) = v.blocks_per_sm() {
        let n = u128::from(n);
        assert!((1..=u128::from(MAX_BLOCKS_PER_SM)).contains(&n));
        assert!(threads * n <= u128::from(MAX_THREADS_PER_SM));
        // Roles with setmaxnreg checked their registers for their own count.
        if let Some(roles) = plan
            .roles
            .as_ref()
            .filter(|r| r.roles().setmaxnreg.is_some())
        {
            assert_eq!(n, u128::from(roles.roles().blocks_per_sm));
        }
    }
    for p in &plan.pipelines {
        assert!(p.spec().consumers.threads().get().unwrap() <= u64::from(launch.block[0]));
    }
    if render {
        let code = PlanCode::new(v).expect("a valid plan renders");
        check_literals(code.source());
        KernelSource::new()
            .plan(v)
            .build()
            .expect("a valid plan's source builds");
    }
}

// ---- layouts, map updates, offsets, wgmma registers --------------------------------------

fn check_place(spans: &[(u64, u64)]) {
    let Ok(l) = SmemLayout::place(spans.iter().copied()) else {
        // Refused only when an offset or end passes 64 bits, or an alignment is 0.
        let mut end = 0u128;
        for &(bytes, align) in spans {
            if align == 0 {
                return;
            }
            end = end.next_multiple_of(u128::from(align)) + u128::from(bytes);
        }
        assert!(end > u128::from(u64::MAX), "{spans:?} refused but fits");
        return;
    };
    let mut end = 0u128;
    for (&(bytes, align), &offset) in spans.iter().zip(&l.offsets) {
        end = end.next_multiple_of(u128::from(align));
        assert_eq!(u128::from(offset), end);
        end += u128::from(bytes);
    }
    assert_eq!(u128::from(l.total_bytes), end);
    let _ = l.dynamic_smem_bytes();
    let _ = SmemLayout::min_dynamic_smem(spans);
}

fn check_stages(tiles: &[ValidSpec], stages: u64, reserve: u64, limit: u64) {
    let Ok(shape) = StageShape::new(tiles.iter().map(ValidSpec::plan)) else {
        return;
    };
    let n = shape.max_stages(reserve, limit);
    let stride = u128::from(shape.stride.get().unwrap());
    let need =
        |s: u128| s * (stride + 16) + u128::from(shape.stage.align_bytes) + u128::from(reserve);
    if n > 0 {
        assert!(
            need(u128::from(n)) <= u128::from(limit),
            "{n} stages past {limit}"
        );
    }
    assert!(
        need(u128::from(n) + 1) > u128::from(limit),
        "{n} is not the most"
    );
    match shape.layout(stages) {
        Some(l) => {
            assert_eq!(
                u128::from(l.total_bytes()),
                u128::from(stages) * (stride + 16)
            );
            let _ = l.tile_offset(stages.saturating_sub(1), tiles.len().saturating_sub(1));
            let _ = l.tile_offset(u64::MAX, usize::MAX);
        }
        None => assert!(u128::from(stages) * (stride + 16) > u128::from(u64::MAX)),
    }
}

/// A tile set renders only when one block holds it, and then every constant fits 32 bits.
fn check_set(tiles: &[ValidSpec]) {
    let names: Vec<String> = (0..tiles.len()).map(|i| format!("m{i}")).collect();
    let members: Vec<(&str, &ValidSpec)> = names.iter().map(String::as_str).zip(tiles).collect();
    let limit = tiles
        .iter()
        .map(|t| t.spec().target.max_smem_per_block())
        .min()
        .unwrap_or(u64::MAX);
    match TileSetCode::new("set", &members) {
        Ok(code) => {
            // What the launch asks for (DYNAMIC_SMEM_BYTES), the alignment slack counted.
            assert!(code.layout().dynamic_smem_bytes() <= limit);
            check_literals(code.source());
        }
        Err(RenderError::TileSetTooLarge {
            bytes, limit: l, ..
        }) => {
            assert_eq!(l, limit);
            assert!(bytes > limit);
        }
        Err(e) => panic!("{e}"),
    }
}

fn check_map_update(valid: &ValidSpec, base: u64, dims: &[u64], strides: &[u64]) {
    match valid.map_update(base, dims, strides) {
        Ok(u) => {
            assert!(u.bound().global().iter().all(|&d| d <= u64::from(u32::MAX)));
            assert_eq!(base % valid.base_address_align(), 0);
            assert_eq!(u.encode_args().global_dim.len(), valid.spec().rank());
            assert_eq!(u.shape_fields().len(), 2 * valid.spec().rank() - 1);
        }
        Err(e) => check_refusal(&e),
    }
}

fn check_offsets(valid: &ValidSpec, position: &[u64], in_chunk: u64) {
    let Some(o) = ElementOffsets::new(valid) else {
        return;
    };
    let plan = valid.plan();
    match o.offset(position, in_chunk) {
        Some(at) => {
            assert!(at + o.elem_bytes <= plan.footprint_bytes.next_multiple_of(plan.align_bytes))
        }
        None => assert!(
            position.len() != o.extent.len()
                || in_chunk >= o.chunk_elems
                || position.iter().zip(&o.extent).any(|(p, e)| p >= e)
        ),
    }
    let n = o.positions();
    assert_eq!(
        u128::from(n),
        o.extent.iter().map(|&e| u128::from(e)).product::<u128>()
    );
    let _ = o.position(position.first().copied().unwrap_or(0));
}

fn check_registers(n: u32, cols: usize, len: usize) {
    if let Ok(f) = Fragment::accumulator(n, AccumulatorType::F32) {
        assert!(f.cols() >= 8 && f.cols() <= 256 && f.cols() % 8 == 0);
        let matrix = vec![0f32; len.min(1 << 16)];
        match f.scatter(&matrix) {
            Ok(t) => {
                assert_eq!(matrix.len(), 64 * f.cols() as usize);
                assert_eq!(f.gather(&t).unwrap(), matrix);
            }
            Err(e) => assert_ne!(matrix.len(), 64 * f.cols() as usize, "{e}"),
        }
    }
    let matrix = vec![0u16; len.min(1 << 16)];
    match a_fragments(&matrix, cols) {
        Ok(frags) => {
            assert_eq!(matrix.len() as u128, 64 * cols as u128);
            assert_eq!(a_matrix(&frags).unwrap(), matrix);
        }
        // Refused only what no A matrix is: no whole k-slice of 16 columns, or another length.
        Err(e) => assert!(
            cols == 0 || cols % 16 != 0 || matrix.len() as u128 != 64 * cols as u128,
            "{e}"
        ),
    }
}

// ---- the properties -----------------------------------------------------------------------

/// How far the cases got: the generator must reach the deep stages, or a pass means little.
#[derive(Default, Debug)]
struct Reach(std::collections::BTreeMap<&'static str, u32>);

impl Reach {
    fn saw(&mut self, stage: &'static str) {
        *self.0.entry(stage).or_default() += 1;
    }
    /// Each stage reached in at least `1 / den` of the cases.
    fn check(&self, cases: u32, stages: &[(&'static str, u32)]) {
        println!("{cases} cases: {:?}", self.0);
        for &(stage, den) in stages {
            let n = self.0.get(stage).copied().unwrap_or(0);
            assert!(
                n * den >= cases,
                "{stage} reached {n} times in {cases}: {self:?}"
            );
        }
    }
}

/// Runs `one` on `PROPTEST_CASES` (default 256) values of `strategy`, shrinking a failure.
fn run<S: Strategy>(strategy: S, one: impl FnMut(S::Value, &mut Reach)) -> (u32, Reach)
where
    S::Value: std::fmt::Debug,
{
    let config = ProptestConfig {
        failure_persistence: None,
        ..ProptestConfig::default()
    };
    let cases = config.cases;
    let mut runner = proptest::test_runner::TestRunner::new(config);
    // `run` takes an `Fn`; a failure's shrinking counts too, but then the test fails anyway.
    let reach = std::cell::RefCell::new(Reach::default());
    let one = std::cell::RefCell::new(one);
    if let Err(e) = runner.run(&strategy, |v| {
        (one.borrow_mut())(v, &mut reach.borrow_mut());
        Ok(())
    }) {
        panic!("{e}");
    }
    (cases, reach.into_inner())
}

#[test]
fn im2col_tiles_refuse_or_hold() {
    let hostile = (
        im2col_spec(),
        prop_oneof![2 => Just(Vec::new()), 1 => prop::collection::vec(u64_edge(64), 0..=6)],
        prop::collection::vec(i64_edge(40), 0..=6),
        prop::collection::vec(i64_edge(4), 0..=4),
    );
    let strategy = prop_oneof![1 => hostile, 3 => near_valid_im2col()];
    let (cases, reach) = run(strategy, |(spec, dims, coords, offsets), r| {
        im2col_case(&spec, &dims, &coords, &offsets, r)
    });
    reach.check(cases, &[("valid", 8), ("bound", 20), ("called", 50)]);
}

#[test]
fn kernel_plans_refuse_or_fit() {
    let (cases, reach) = run(
        (plan_draw(), prop::bool::weighted(0.1)),
        |(d, render), r| {
            let plan = build_plan(&d);
            match plan.validate() {
                Ok(v) => {
                    r.saw("valid");
                    check_plan(&plan, &v, render);
                }
                Err(e) => check_pipeline_refusal(&e),
            }
        },
    );
    reach.check(cases, &[("valid", 10)]);
}

#[test]
fn layouts_place_exactly() {
    let strategy = (
        prop::collection::vec(
            (
                u64_edge(1 << 16),
                prop_oneof![3 => select(vec![1u64, 8, 16, 128, 1024]), 1 => u64_edge(4096)],
            ),
            0..=5,
        ),
        prop::collection::vec(0usize..64, 0..=4),
        u64_edge(16),
        u64_edge(1 << 16),
        u64_edge(1 << 18),
    );
    run(strategy, |(spans, tiles, stages, reserve, limit), _| {
        check_place(&spans);
        let pool = pool();
        let tiles: Vec<ValidSpec> = tiles
            .iter()
            .map(|&t| pool.tiles[t % pool.tiles.len()].clone())
            .collect();
        check_stages(&tiles, stages, reserve, limit);
        check_set(&tiles);
    });
}

#[test]
fn map_updates_offsets_and_registers_hold() {
    let strategy = (
        (
            0usize..64,
            u64_edge(1 << 12),
            prop::collection::vec(u64_edge(1 << 12), 0..=6),
            prop::collection::vec(u64_edge(1 << 16), 0..=5),
        ),
        prop::collection::vec(u64_edge(300), 0..=6),
        u64_edge(4),
        u32_edge(300),
        prop_oneof![
            3 => (0usize..=20).prop_map(|k| 16 * k),
            1 => any::<usize>(),
            1 => select(vec![1usize << 58, 1 << 60, usize::MAX - 15, (1 << 32) + 8]),
        ],
        prop_oneof![3 => (0usize..=20).prop_map(|k| 64 * 16 * k), 1 => 0usize..=1 << 16],
    );
    run(
        strategy,
        |((tile, base, dims, strides), position, in_chunk, n, cols, len), _| {
            let pool = pool();
            let valid = &pool.tiles[tile % pool.tiles.len()];
            check_map_update(valid, base, &dims, &strides);
            check_offsets(valid, &position, in_chunk);
            check_registers(n, cols, len);
        },
    );
}
