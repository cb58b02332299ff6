//! `tma_pipeline!` and `tma_warp_roles!`: the constants the macros compute at compile time are
//! the run-time builders' numbers (`PipelineSpec::validate`, `WarpRoles::validate`), the
//! declared specs are the builders' specs, the generated CUDA is the builders' CUDA, and a
//! warp-specialized kernel over them NVRTC-compiles to sm_90a (with `CI=true` a missing NVRTC
//! is a failure, not a skip).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use tma::pipeline::{
    ClusterAxis, Consumers, PipelineSpec, RegisterSplit, RoleWarps, ValidPipeline, WarpRoles,
};
use tma::render::KernelSource;
use tma::runtime::{CompileOptions, Compiler, Source};
use tma::{validate, Arch, DType, Pipeline, Roles, Swizzle, Tile, TileSpec};

tma::tma_pipeline! {
    /// A GEMM main loop's operands: A alone, B split over a 2-CTA cluster.
    pub GemmRing,
    stages = 4,
    consumers = warpgroups(2),
    cluster = [2, 1, 1],
    reserve_smem = 32768,
    tiles = {
        a: tma_2d! { pub GemmA: bf16, global = [M = _, K = _], boxed = [128, 64], swizzle = 128 },
        b: tma_2d! {
            pub GemmB: bf16, global = [N = _, K = _], boxed = [64, 64], swizzle = 128,
            repeat = [2, 1],
        } multicast(x),
    },
}

tma::tma_pipeline! {
    /// Three tiles of different swizzles, released by warps, named explicitly.
    pub(crate) Small,
    stages = 3,
    consumers = warps(4),
    name = "small_ring",
    tiles = {
        x: tma_2d! { SmallX: f32, global = [R = 1024, C = 64], boxed = [32, 32], swizzle = 128 },
        y: tma_1d! { SmallY: u8, global = [N = _], boxed = [48] },
        z: tma_3d! { SmallZ: f16, global = [H = _, W = 64, C = 32], boxed = [2, 8, 32], swizzle = 64 },
    },
}

tma::tma_pipeline! {
    /// Tiles without a `target` take the pipeline's.
    Blackwell,
    stages = 2,
    consumers = threads(128),
    target = sm_100a,
    tiles = {
        t: tma_2d! { BlackwellT: bf16, global = [M = _, K = 64], boxed = [64, 64], swizzle = 128 },
    },
}

tma::tma_pipeline! {
    /// A ping-pong ring: each stage taken, and released, by one consumer warpgroup.
    PingPong,
    stages = 6,
    consumers = warpgroups(1),
    in_turn = true,
    tiles = {
        a: tma_2d! { PingPongA: bf16, global = [M = _, K = _], boxed = [128, 64], swizzle = 128 },
    },
}

tma::tma_warp_roles! {
    pub GemmRoles,
    producer_regs = 40,
    consumer_warpgroups = 2,
    consumer_regs = 232,
    barriers = [epilogue = 256, mainloop = 128],
}

tma::tma_warp_roles! {
    /// Two blocks per SM, two producer warpgroups.
    TwoBlocks,
    producer_warpgroups = 2,
    producer_regs = 24,
    consumer_warpgroups = 1,
    consumer_regs = 80,
    blocks_per_sm = 2,
    name = "two_blocks",
}

tma::tma_warp_roles! {
    /// One producer warp, four consumer warps (no setmaxnreg), a barrier per consumer.
    pub EpiRoles,
    producer_warps = 1,
    consumer_warps = 4,
    barriers = [all = 128, rows = per_consumer(32)],
}

tma::tma_warp_roles! {
    /// The GEMM's warpgroups with an epilogue barrier per consumer warpgroup.
    GemmEpi,
    producer_regs = 40,
    consumer_warpgroups = 2,
    consumer_regs = 232,
    barriers = [epi = per_consumer(128), both = 256],
}

fn gemm_built() -> ValidPipeline {
    // Run-time dims (`_` in the macro) are `Extent::Runtime`.
    let mut a = TileSpec::new("gemm_a", DType::BF16, [1u64, 1], [128, 64])
        .dim_names(["M", "K"])
        .swizzle(Swizzle::B128);
    a.global = vec![tma::spec::Extent::Runtime; 2];
    let mut b = TileSpec::new("gemm_b", DType::BF16, [1u64, 1], [64, 64])
        .dim_names(["N", "K"])
        .swizzle(Swizzle::B128)
        .repeat([2, 1]);
    b.global = vec![tma::spec::Extent::Runtime; 2];
    PipelineSpec::new("gemm_ring", 4, Consumers::Warpgroups(2))
        .tile("a", &validate(&a).unwrap())
        .multicast_tile("b", &validate(&b).unwrap(), ClusterAxis::X)
        .cluster([2, 1, 1])
        .reserve_smem(32768)
        .validate()
        .unwrap()
}

/// Every constant against the validated pipeline, and the validated pipeline against the one
/// the run-time builder gives.
fn check_consts<P: Pipeline>(built: &ValidPipeline) {
    assert_eq!(P::valid(), built);
    assert_eq!(&P::spec(), built.spec());
    let l = built.layout();
    assert_eq!(P::NAME, built.spec().name);
    assert_eq!(P::CUDA_NAME, format!("tma_pipe_{}", built.spec().name));
    assert_eq!(u64::from(P::STAGES), l.stages);
    assert_eq!(P::STAGE_TX_BYTES, built.stage_tx_bytes());
    assert_eq!(P::STAGE_BYTES, l.stage.total_bytes);
    assert_eq!(P::STAGE_STRIDE, l.stage_stride);
    assert_eq!(P::SMEM_BYTES, l.total_bytes());
    assert_eq!(P::SMEM_ALIGN, l.align_bytes());
    assert_eq!(P::DYNAMIC_SMEM_BYTES, built.dynamic_smem_bytes());
    assert_eq!(P::MAX_STAGES, built.max_stages());
    assert_eq!(P::RESERVE_SMEM, built.spec().reserve_smem);
    assert_eq!(P::CLUSTER, built.spec().cluster);
    assert_eq!(P::PEERS, built.peers());
    assert_eq!(P::EMPTY_ARRIVALS, built.empty_arrivals());
    assert_eq!(P::TILES.len(), built.spec().tiles.len());
    for (i, (info, t)) in P::TILES.iter().zip(&built.spec().tiles).enumerate() {
        let plan = t.tile.plan();
        assert_eq!(info.member, t.member);
        assert_eq!(info.name, t.tile.spec().name);
        assert_eq!(info.cuda_name, format!("tma_{}", t.tile.spec().name));
        assert_eq!(info.tx_bytes, t.tile.tx_bytes());
        assert_eq!(info.smem_bytes, plan.footprint_bytes);
        assert_eq!(info.smem_align, plan.align_bytes);
        assert_eq!(info.smem_offset, l.stage.offsets[i]);
        assert_eq!(info.multicast, t.multicast);
    }
    // The same CUDA, byte for byte.
    assert_eq!(
        P::kernel_source().build().unwrap(),
        KernelSource::new().pipeline(built).build().unwrap()
    );
}

#[test]
fn the_macro_constants_are_the_run_time_builders() {
    let built = gemm_built();
    check_consts::<GemmRing>(&built);
    // The numbers themselves: 16 KB of A, two 8 KB boxes of B (one issued by each CTA of the
    // pair, both received by each), 1024-aligned for the 128B swizzle.
    assert_eq!(GemmRing::STAGE_TX_BYTES, 32768);
    assert_eq!(GemmRing::STAGE_TX_BYTES, GemmA::TX_BYTES + GemmB::TX_BYTES);
    assert_eq!(GemmRing::SMEM_BYTES, 4 * 32768 + 4 * 16);
    assert_eq!(GemmRing::DYNAMIC_SMEM_BYTES, 4 * 32768 + 4 * 16 + 1024);
    assert_eq!(
        GemmRing::MAX_STAGES,
        (227 * 1024 - 1024 - 32768) / (32768 + 16)
    );
    assert_eq!((GemmRing::PEERS, GemmRing::EMPTY_ARRIVALS), (2, 2 * 8));

    let x = validate(
        &TileSpec::new("small_x", DType::F32, [1024, 64], [32, 32])
            .dim_names(["R", "C"])
            .swizzle(Swizzle::B128),
    )
    .unwrap();
    let mut y = TileSpec::new("small_y", DType::U8, [1u64], [48]).dim_names(["N"]);
    y.global = vec![tma::spec::Extent::Runtime];
    let mut z = TileSpec::new("small_z", DType::F16, [1u64, 64, 32], [2, 8, 32])
        .dim_names(["H", "W", "C"])
        .swizzle(Swizzle::B64);
    z.global[0] = tma::spec::Extent::Runtime;
    let small = PipelineSpec::new("small_ring", 3, Consumers::Warps(4))
        .tile("x", &x)
        .tile("y", &validate(&y).unwrap())
        .tile("z", &validate(&z).unwrap())
        .validate()
        .unwrap();
    check_consts::<Small>(&small);
    assert_eq!(SmallX::valid(), &x);

    let mut t = TileSpec::new("blackwell_t", DType::BF16, [1u64, 64], [64, 64])
        .dim_names(["M", "K"])
        .swizzle(Swizzle::B128)
        .target(Arch::Sm100a);
    t.global[0] = tma::spec::Extent::Runtime;
    let blackwell = PipelineSpec::new("blackwell", 2, Consumers::Threads(128))
        .tile("t", &validate(&t).unwrap())
        .target(Arch::Sm100a)
        .validate()
        .unwrap();
    check_consts::<Blackwell>(&blackwell);
    assert_eq!(BlackwellT::valid().spec().target, Arch::Sm100a);

    // `in_turn = true` is the builder's `.in_turn()`.
    let mut p = TileSpec::new("ping_pong_a", DType::BF16, [1u64, 1], [128, 64])
        .dim_names(["M", "K"])
        .swizzle(Swizzle::B128);
    p.global = vec![tma::spec::Extent::Runtime; 2];
    let ping_pong = PipelineSpec::new("ping_pong", 6, Consumers::Warpgroups(1))
        .tile("a", &validate(&p).unwrap())
        .in_turn()
        .validate()
        .unwrap();
    check_consts::<PingPong>(&ping_pong);
    assert!(PingPong::spec().in_turn && !GemmRing::spec().in_turn);
}

#[test]
fn the_warp_roles_constants_are_the_run_time_builders() {
    let built = WarpRoles::new("gemm_roles", 40, 2, 232)
        .barrier("epilogue", 256)
        .barrier("mainloop", 128)
        .validate()
        .unwrap();
    assert_eq!(GemmRoles::valid(), &built);
    assert_eq!(&GemmRoles::spec(), built.roles());
    assert_eq!(GemmRoles::CUDA_NAME, "tma_roles_gemm_roles");
    assert_eq!(
        GemmRoles::LAUNCH_BOUNDS_MACRO,
        "TMA_ROLES_GEMM_ROLES_LAUNCH_BOUNDS"
    );
    assert_eq!(GemmRoles::THREADS, 384);
    assert_eq!(GemmRoles::LAUNCH_REGS, built.launch_regs());
    let ids: Vec<(&str, u32, u32)> = GemmRoles::BARRIERS
        .iter()
        .map(|b| (b.name, b.id, b.threads))
        .collect();
    let want: Vec<(&str, u32, u32)> = built
        .barriers()
        .map(|(b, id)| (b.name.as_str(), id, b.threads))
        .collect();
    assert_eq!(ids, want);
    assert_eq!(ids, vec![("epilogue", 1, 256), ("mainloop", 2, 128)]);
    assert_eq!(
        GemmRoles::kernel_source().build().unwrap(),
        KernelSource::new().warp_roles(&built).build().unwrap()
    );

    let two = WarpRoles::new("two_blocks", 24, 1, 80)
        .producer_warpgroups(2)
        .blocks_per_sm(2)
        .validate()
        .unwrap();
    assert_eq!(TwoBlocks::valid(), &two);
    assert_eq!(
        (TwoBlocks::THREADS, TwoBlocks::LAUNCH_REGS),
        (384, two.launch_regs())
    );
}

#[test]
fn warp_granular_roles_and_per_consumer_barriers_are_the_builders() {
    let built = WarpRoles::warps("epi_roles", 1, 4)
        .barrier("all", 128)
        .per_consumer_barrier("rows", 32)
        .validate()
        .unwrap();
    assert_eq!(EpiRoles::valid(), &built);
    assert_eq!(
        (
            EpiRoles::PRODUCERS,
            EpiRoles::CONSUMERS,
            EpiRoles::SETMAXNREG
        ),
        (RoleWarps::Warps(1), RoleWarps::Warps(4), None)
    );
    assert_eq!(EpiRoles::THREADS, 160);
    let ids: Vec<(&str, u32, u32, bool)> = EpiRoles::BARRIERS
        .iter()
        .map(|b| (b.name, b.id, b.last, b.per_consumer))
        .collect();
    assert_eq!(ids, vec![("all", 1, 1, false), ("rows", 2, 5, true)]);
    let src = EpiRoles::kernel_source().build().unwrap();
    assert!(src.contains("static __device__ __forceinline__ void sync_rows(unsigned consumer)"));

    let gemm = WarpRoles::new("gemm_epi", 40, 2, 232)
        .per_consumer_barrier("epi", 128)
        .barrier("both", 256)
        .validate()
        .unwrap();
    assert_eq!(GemmEpi::valid(), &gemm);
    assert_eq!(
        GemmEpi::SETMAXNREG,
        Some(RegisterSplit {
            producer_regs: 40,
            consumer_regs: 232
        })
    );
    let ids: Vec<(&str, u32, u32)> = GemmEpi::BARRIERS
        .iter()
        .map(|b| (b.name, b.id, b.last))
        .collect();
    assert_eq!(ids, vec![("epi", 1, 2), ("both", 3, 3)]);
}

/// The stage tiles are ordinary tiles: bound and encoded as any other.
#[test]
fn the_stage_tiles_are_tiles() {
    let a = GemmA::encode_args(&[4096, 8192]).unwrap();
    assert_eq!(a.global_dim, vec![8192, 4096]);
    assert_eq!(a.box_dim, vec![64, 128]);
    assert_eq!(GemmB::BOX_BYTES * 2, GemmB::TX_BYTES);
    assert!(SmallX::bind(&[1000, 64]).is_err(), "static dims must agree");
}

/// A warp-specialized kernel over the declared pipeline and roles: a producer warp streams
/// stages, two consumer warpgroups wait, read and release them.
const KERNEL: &str = r#"
extern "C" __global__ void TMA_ROLES_GEMM_ROLES_LAUNCH_BOUNDS gemm_ring_sum(
    const __grid_constant__ CUtensorMap a_map, const __grid_constant__ CUtensorMap b_map,
    int k_tiles, float* out) {
  extern __shared__ __align__(16) unsigned char raw[];
  using Pipe = tma_pipe_gemm_ring;
  using R = tma_roles_gemm_roles;
  const Pipe pipe(raw);
  pipe.init();
  const int m = 128 * (int)(blockIdx.x / 2u), n = 128 * (int)(blockIdx.x / 2u);
  if (R::is_producer()) {
    R::producer_setmaxnreg();
    if (threadIdx.x < 32u) {
      Pipe::state s;
      for (int k = 0; k < k_tiles; ++k, ++s) {
        pipe.acquire(s);
        if (tma_elect_one()) {
          pipe.load(s, &a_map, {.M = m, .K = 64 * k}, &b_map, {.N = n, .K = 64 * k});
        }
        __syncwarp();
      }
    }
  } else {
    R::consumer_setmaxnreg();
    Pipe::state s;
    float acc = 0.0f;
    for (int k = 0; k < k_tiles; ++k, ++s) {
      pipe.wait(s);
      const unsigned short* a = reinterpret_cast<const unsigned short*>(pipe.smem_a(s));
      const unsigned short* b = reinterpret_cast<const unsigned short*>(pipe.smem_b(s));
      acc += (float)a[threadIdx.x] + (float)b[threadIdx.x];
      pipe.release(s);
    }
    R::sync_epilogue();
    out[blockIdx.x * blockDim.x + threadIdx.x] = acc;
  }
  pipe.finish();
}
"#;

#[test]
fn the_declared_pipeline_compiles_to_sm90a() {
    let test = "the_declared_pipeline_compiles_to_sm90a";
    if tma_test_support::skip::require_nvrtc_or_skip(test).is_none() {
        return;
    }
    let source = GemmRing::kernel_source()
        .warp_roles(GemmRoles::valid())
        .body(KERNEL)
        .build()
        .unwrap();
    let compiler = Compiler::global().unwrap();
    for debug in [false, true] {
        let options = CompileOptions::new(Arch::Sm90a).debug_waits(debug);
        let compiled = compiler
            .compile_source(&Source::new(source.clone()), &options)
            .unwrap_or_else(|e| panic!("{e}"));
        assert!(compiled.cubin.starts_with(b"\x7fELF"), "no CUBIN");
        let ptx = &compiled.ptx;
        assert!(ptx.contains("cp.async.bulk.tensor.2d"), "no TMA load");
        assert!(ptx.contains(".multicast::cluster"), "no multicast");
        assert!(ptx.contains("setmaxnreg"), "no setmaxnreg");
    }
}
