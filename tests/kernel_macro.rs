//! `tma_kernel!`: the constants the macro computes at compile time (from inline parts and
//! from parts named by type alike) are the run-time builder's numbers (`KernelPlan::validate`
//! on the same declaration), the declared plan is the builder's plan, the generated CUDA is
//! the builder's CUDA, and a kernel over it NVRTC-compiles to sm_90a with the plan carried to
//! the compiled module (with `CI=true` a missing NVRTC is a failure, not a skip).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use tma::pipeline::{Consumers, PipelineSpec, WarpRoles};
use tma::plan::{KernelPlan, RegionRole, ValidKernelPlan};
use tma::render::KernelSource;
use tma::runtime::{CompileOptions, Compiler};
use tma::spec::Extent;
use tma::{validate, Arch, DType, Pipeline, Plan, Roles, Swizzle, Tile, TileSpec, ValidSpec};

// ---- Parts declared on their own, named by type in `Gemm` ----

tma::tma_pipeline! {
    pub GemmRing,
    stages = 4,
    consumers = warpgroups(2),
    tiles = {
        a: tma_2d! { pub GemmA: bf16, global = [M = _, K = _], boxed = [128, 64], swizzle = 128 },
        b: tma_2d! { pub GemmB: bf16, global = [N = _, K = _], boxed = [128, 64], swizzle = 128 },
    },
}

tma::tma_warp_roles! {
    pub GemmRoles,
    producer_regs = 40,
    consumer_warpgroups = 2,
    consumer_regs = 232,
}

tma::tma_2d! { pub GemmD: bf16, global = [M = _, N = _], boxed = [64, 64], swizzle = 128 }

tma::tma_kernel! {
    /// A GEMM's plan over parts declared elsewhere: a ring, its roles, two D tiles for the
    /// epilogue's TMA stores, flags.
    pub Gemm,
    roles = GemmRoles,
    pipelines = [GemmRing],
    staging = [d: GemmD x 2],
    scratch = [flags = 256 align 128],
}

// ---- The same plan, every part inline ----

tma::tma_kernel! {
    pub(crate) GemmInline,
    name = "gemm_inline",
    roles = tma_warp_roles! {
        InlineRoles, producer_regs = 40, consumer_warpgroups = 2, consumer_regs = 232,
        name = "gemm_roles",
    },
    pipelines = [tma_pipeline! {
        InlineRing,
        stages = 4,
        consumers = warpgroups(2),
        name = "gemm_ring",
        tiles = {
            a: tma_2d! { InlineA: bf16, global = [M = _, K = _], boxed = [128, 64], swizzle = 128, name = "gemm_a" },
            b: tma_2d! { InlineB: bf16, global = [N = _, K = _], boxed = [128, 64], swizzle = 128, name = "gemm_b" },
        },
    }],
    staging = [d: tma_2d! { InlineD: bf16, global = [M = _, N = _], boxed = [64, 64], swizzle = 128, name = "gemm_d" } x 2],
    scratch = [flags = 256 align 128],
}

// ---- The copy kernel of tests/gpu_plan.rs: a cluster ring, an aliased tile, scratch first ----

tma::tma_2d! { pub Pt: u32, global = [r = _, c = _], boxed = [32, 32] }

tma::tma_kernel! {
    pub PlanCopy,
    tiles = [PT: Pt],
    scratch = [count = 4],
    pipelines = [tma_pipeline! {
        pub Ring,
        stages = 3,
        consumers = threads(128),
        cluster = [2, 1, 1],
        tiles = { a: tma_2d! { pub RingA: u32, global = [r = _, c = _], boxed = [32, 32] } },
    }],
    staging = [staged: Pt x 2],
    block_threads = 160,
    blocks_per_sm = 2,
}

// ---- Small ones: no regions; another target (an inline tile takes it) ----

tma::tma_kernel! { Bare, block_threads = 64 }

tma::tma_kernel! {
    Blackwell,
    target = sm_100a,
    staging = [t: tma_2d! { BlackwellT: bf16, global = [M = _, K = 64], boxed = [64, 64], swizzle = 128 } x 3],
    block_threads = 128,
    cluster = [2, 2, 1],
}

fn runtime_tile(
    name: &str,
    dtype: DType,
    dims: [&str; 2],
    boxed: [u32; 2],
    sw: Swizzle,
) -> ValidSpec {
    let mut t = TileSpec::new(name, dtype, [1u64, 1], boxed)
        .dim_names(dims)
        .swizzle(sw);
    t.global = vec![Extent::Runtime; 2];
    validate(&t).unwrap()
}

/// The builder's GEMM plan, named `name`.
fn gemm_built(name: &str) -> ValidKernelPlan {
    let a = runtime_tile("gemm_a", DType::BF16, ["M", "K"], [128, 64], Swizzle::B128);
    let b = runtime_tile("gemm_b", DType::BF16, ["N", "K"], [128, 64], Swizzle::B128);
    let d = runtime_tile("gemm_d", DType::BF16, ["M", "N"], [64, 64], Swizzle::B128);
    let ring = PipelineSpec::new("gemm_ring", 4, Consumers::Warpgroups(2))
        .tile("a", &a)
        .tile("b", &b)
        .validate()
        .unwrap();
    let roles = WarpRoles::new("gemm_roles", 40, 2, 232).validate().unwrap();
    KernelPlan::new(name)
        .roles(&roles)
        .pipeline(&ring)
        .staging("d", &d, 2)
        .scratch("flags", 256, 128)
        .validate()
        .unwrap()
}

fn copy_built() -> ValidKernelPlan {
    let pt = runtime_tile("pt", DType::U32, ["r", "c"], [32, 32], Swizzle::None);
    let ring_a = runtime_tile("ring_a", DType::U32, ["r", "c"], [32, 32], Swizzle::None);
    let ring = PipelineSpec::new("ring", 3, Consumers::Threads(128))
        .tile("a", &ring_a)
        .cluster([2, 1, 1])
        .validate()
        .unwrap();
    KernelPlan::new("plan_copy")
        .tile("PT", &pt)
        .scratch("count", 4, 16)
        .pipeline(&ring)
        .staging("staged", &pt, 2)
        .block_threads(160)
        .blocks_per_sm(2)
        .validate()
        .unwrap()
}

/// Every constant against the builder's validated plan.
fn check_consts<K: Plan>(built: &ValidKernelPlan) {
    assert_eq!(K::valid(), built);
    assert_eq!(&K::plan(), built.plan());
    let (l, launch) = (built.layout(), built.launch());
    assert_eq!(K::NAME, built.name());
    assert_eq!(K::CUDA_NAME, format!("tma_plan_{}", built.name()));
    assert_eq!(
        K::LAUNCH_BOUNDS_MACRO,
        format!(
            "TMA_PLAN_{}_LAUNCH_BOUNDS",
            built.name().to_ascii_uppercase()
        )
    );
    assert_eq!(K::TARGET, built.plan().target);
    assert_eq!([K::BLOCK_THREADS, 1, 1], launch.block);
    assert_eq!(K::BLOCKS_PER_SM, built.blocks_per_sm().unwrap_or(0));
    assert_eq!(K::CLUSTER, launch.cluster);
    assert_eq!(K::SMEM_BYTES, l.total_bytes());
    assert_eq!(K::SMEM_ALIGN, l.align_bytes());
    assert_eq!(K::DYNAMIC_SMEM_BYTES, launch.dynamic_smem_bytes);
    assert_eq!(u64::from(K::DYNAMIC_SMEM_BYTES), l.dynamic_smem_bytes());
    assert_eq!(K::SMEM_OPT_IN, launch.smem_opt_in);
    assert_eq!(K::REGIONS.len(), l.regions.len());
    for (info, r) in K::REGIONS.iter().zip(&l.regions) {
        assert_eq!(info.name, r.name);
        assert_eq!(info.role, r.role);
        assert_eq!(
            (
                info.offset,
                info.bytes,
                info.align,
                info.stride,
                info.copies
            ),
            (r.offset, r.bytes, r.align, r.stride, r.copies),
            "{}",
            r.name
        );
        assert_eq!(K::region(&r.name), Some(info));
    }
    assert_eq!(K::launch(), launch);
    // The same CUDA, byte for byte, and the launch carried with it.
    assert_eq!(
        K::kernel_source().build().unwrap(),
        KernelSource::new().plan(built).build().unwrap()
    );
    let source = K::source("// no kernel").unwrap();
    assert_eq!(source.plans(), std::slice::from_ref(launch));
}

#[test]
fn the_macro_constants_are_the_run_time_builders() {
    check_consts::<Gemm>(&gemm_built("gemm"));
    check_consts::<GemmInline>(&gemm_built("gemm_inline"));
    // The numbers: the ring (4 x 32 KB + 64 B of mbarriers) at 0, two 8 KB D copies at the
    // next 1 KB, the flags after them at 128; 384 threads from the roles.
    let ring: u64 = 4 * 32768 + 64;
    let d_at = ring.next_multiple_of(1024);
    let got: Vec<(&str, u64, u64)> = Gemm::REGIONS
        .iter()
        .map(|r| (r.name, r.offset, r.bytes))
        .collect();
    assert_eq!(
        got,
        vec![
            ("gemm_ring", 0, ring),
            ("d", d_at, 2 * 8192),
            ("flags", d_at + 16384, 256)
        ]
    );
    assert_eq!(Gemm::REGIONS[0].role, RegionRole::Pipeline(0));
    assert_eq!(Gemm::REGIONS[0].bytes, GemmRing::SMEM_BYTES);
    assert_eq!(Gemm::REGIONS[1].stride, GemmD::SMEM_BYTES);
    assert_eq!(u64::from(Gemm::BLOCK_THREADS), GemmRoles::THREADS);
    assert_eq!(Gemm::BLOCKS_PER_SM, GemmRoles::BLOCKS_PER_SM);
    assert_eq!(
        u64::from(Gemm::DYNAMIC_SMEM_BYTES),
        d_at + 16384 + 256 + 1024 - 16
    );
    const { assert!(Gemm::SMEM_OPT_IN) };
    // Inline parts are types like any other.
    assert_eq!(InlineRing::NAME, GemmRing::NAME);
    assert_eq!(InlineD::valid(), GemmD::valid());
    assert_eq!(InlineRoles::THREADS, 384);
}

#[test]
fn a_plan_of_a_cluster_ring_with_scratch_first() {
    let built = copy_built();
    check_consts::<PlanCopy>(&built);
    let order: Vec<RegionRole> = PlanCopy::REGIONS.iter().map(|r| r.role).collect();
    assert_eq!(
        order,
        [
            RegionRole::Pipeline(0),
            RegionRole::Scratch(0),
            RegionRole::Staging(1)
        ]
    );
    assert_eq!(PlanCopy::CLUSTER, [2, 1, 1]);
    assert_eq!(PlanCopy::BLOCKS_PER_SM, 2);
    const { assert!(!PlanCopy::SMEM_OPT_IN) };
    assert_eq!(Pt::TARGET, Arch::Sm90a);
}

#[test]
fn small_plans() {
    let bare = KernelPlan::new("bare")
        .block_threads(64)
        .validate()
        .unwrap();
    check_consts::<Bare>(&bare);
    assert_eq!((Bare::DYNAMIC_SMEM_BYTES, Bare::REGIONS.len()), (0, 0));

    let mut t = TileSpec::new("blackwell_t", DType::BF16, [1u64, 64], [64, 64])
        .dim_names(["M", "K"])
        .swizzle(Swizzle::B128)
        .target(Arch::Sm100a);
    t.global[0] = Extent::Runtime;
    let blackwell = KernelPlan::new("blackwell")
        .target(Arch::Sm100a)
        .staging("t", &validate(&t).unwrap(), 3)
        .block_threads(128)
        .cluster([2, 2, 1])
        .validate()
        .unwrap();
    check_consts::<Blackwell>(&blackwell);
    assert_eq!(BlackwellT::TARGET, Arch::Sm100a);
}

/// The copy kernel of tests/gpu_plan.rs over the declared plan; it states none of the plan's
/// numbers, and the static_asserts hold the CUDA struct to the macro's constants.
const COPY: &str = include_str!("gpu/plan_copy.cu");

/// The GEMM plan's kernel: every region from the struct, nothing computed by hand.
const GEMM: &str = r#"
extern "C" __global__ void TMA_PLAN_GEMM_LAUNCH_BOUNDS gemm(float* out) {
  typedef tma_plan_gemm P;
  using R = tma_roles_gemm_roles;
  extern __shared__ __align__(16) unsigned char raw[];
  unsigned char* base = P::base(raw);
  const tma_pipe_gemm_ring pipe = P::gemm_ring(base);
  unsigned* flags = reinterpret_cast<unsigned*>(P::flags(base));
  pipe.init();
  if (R::is_producer()) {
    R::producer_setmaxnreg();
  } else {
    R::consumer_setmaxnreg();
    const unsigned wg = threadIdx.x / 128u - 1u;
    unsigned char* d = P::d(base, wg % P::COPIES_d);
    d[threadIdx.x % 128u] = 1;
    if (threadIdx.x % 128u == 0u) flags[wg] = 1u;
    out[threadIdx.x] = (float)d[0];
  }
  pipe.finish();
}
"#;

/// static_asserts of the plan struct's numbers against `K`'s constants.
fn asserts<K: Plan>() -> String {
    let mut s = format!(
        "static_assert({c}::BLOCK_THREADS == {}u && {c}::BLOCKS_PER_SM == {}u && {c}::CLUSTER_X == {}u && {c}::CLUSTER_Y == {}u && {c}::CLUSTER_Z == {}u, \"launch\");\n\
         static_assert({c}::SMEM_BYTES == {}u && {c}::SMEM_ALIGN == {}u && {c}::DYNAMIC_SMEM_BYTES == {}u, \"smem\");\n",
        K::BLOCK_THREADS,
        K::BLOCKS_PER_SM,
        K::CLUSTER[0],
        K::CLUSTER[1],
        K::CLUSTER[2],
        K::SMEM_BYTES,
        K::SMEM_ALIGN,
        K::DYNAMIC_SMEM_BYTES,
        c = K::CUDA_NAME,
    );
    for r in K::REGIONS {
        s += &format!(
            "static_assert({c}::OFFSET_{n} == {}u && {c}::BYTES_{n} == {}u && {c}::ALIGN_{n} == {}u, \"{n}\");\n",
            r.offset,
            r.bytes,
            r.align,
            c = K::CUDA_NAME,
            n = r.name
        );
    }
    s
}

#[test]
fn the_declared_plans_compile_to_sm90a_and_carry_their_launch() {
    let test = "the_declared_plans_compile_to_sm90a_and_carry_their_launch";
    if tma_test_support::skip::require_nvrtc_or_skip(test).is_none() {
        return;
    }
    let compiler = Compiler::global().unwrap();
    let copy = PlanCopy::source(&(asserts::<PlanCopy>() + COPY)).unwrap();
    let gemm = Gemm::source(&(asserts::<Gemm>() + GEMM)).unwrap();
    for (source, name, launch) in [
        (&copy, "plan_copy", PlanCopy::launch()),
        (&gemm, "gemm", Gemm::launch()),
    ] {
        for debug in [false, true] {
            let options = CompileOptions::new(Arch::Sm90a).debug_waits(debug);
            let compiled = compiler
                .compile_source(source, &options)
                .unwrap_or_else(|e| panic!("{name}: {e}"));
            assert!(compiled.cubin.starts_with(b"\x7fELF"), "no CUBIN");
            assert_eq!(compiled.plan(name), Some(launch));
        }
    }
    assert!(gemm.text().contains("struct tma_roles_gemm_roles"));
}

/// A work queue declared in `tma_kernel!` is the builder's: the same region (bytes, alignment,
/// after the others) and the same rendered type, and the plan refuses readers the block cannot
/// hold (`tests/ui/kernel_work_queue_readers.rs`).
mod work_queues {
    use tma::pipeline::{Consumers, WorkQueue};
    use tma::plan::KernelPlan;
    use tma::Plan;

    tma::tma_kernel! {
        pub Walk,
        work_queues = [tiles = 4 readers warpgroups(2), more = 2 readers threads(32)],
        scratch = [counter = 4],
        block_threads = 384,
    }

    #[test]
    fn a_macro_work_queue_is_the_builders() {
        let tiles = WorkQueue::new(4, Consumers::Warpgroups(2))
            .validate()
            .unwrap();
        let more = WorkQueue::new(2, Consumers::Threads(32))
            .validate()
            .unwrap();
        let built = KernelPlan::new("walk")
            .work_queue("tiles", &tiles)
            .work_queue("more", &more)
            .scratch("counter", 4, 16)
            .block_threads(384)
            .validate()
            .unwrap();
        assert_eq!(Walk::valid(), &built);
        let r = Walk::region("tiles").unwrap();
        assert_eq!((r.bytes, r.align), (80, 8));
        assert_eq!(Walk::region("more").map(|r| r.bytes), Some(40));
        let text = Walk::kernel_source().build().unwrap();
        assert!(text.contains("typedef tma_work_queue<4u, 8u, true, 0u> queue_tiles;"));
        assert!(text.contains("typedef tma_work_queue<2u, 32u, false, 1u> queue_more;"));
    }
}
