//! Pipelines on the GPU: a producer warp (one elected thread issuing, after setmaxnreg.dec)
//! streams hundreds of stages, each two tiles with different swizzles (bf16 64 x 64 under the
//! 128B swizzle, u32 32 x 16 under the 64B swizzle), through 2, 3, 4 and 8 stage rings to 1 and
//! 2 consumer warpgroups (after setmaxnreg.inc). The consumers read every element of every
//! stage through the tiles' `at()` and compare it with global memory, and copy each stage's raw
//! bytes out; the host compares every copy with the CPU model's load, byte for byte. A
//! multicast variant runs over 2-CTA clusters: the bf16 tile is two boxes of 32 rows, each CTA
//! issues one and multicasts it to both, both expect the whole stage, and each release arrives
//! on both CTAs' empty barriers. More multicast rings cover the other cluster axes: `[1, 2, 1]`
//! (along y), `[1, 1, 2]` (along z), `[2, 2, 1]` with `a` shared along y and `b` along x (3 peers,
//! the union of two masks), and one released by 6 consumer warps (`Consumers::Warps`) rather
//! than warpgroups. Fresh random data each run; outputs poisoned.
//!
//! The source goes with its typed description (`Source::kernel`). `ring_mc_yx` is a kernel
//! plan's: a launch off its plan (its pipeline's cluster shape and DYNAMIC_SMEM_BYTES) is
//! refused on the host (`Error::PlanLaunch`). The other kernels have no plan: a launch that
//! fits none of the source's pipelines is refused (`Error::PipelineLaunch`); past that check
//! (`unchecked_pipelines`), a debug build's `init()` names it (`Rule::PipelineLaunchShape`).
//!
//! Without a GPU the kernels still compile to sm_90a, and their SASS is checked (no local
//! memory; the producer's UTMALDG count, the multicast's).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use tma::model;
use tma::pipeline::{ClusterAxis, Consumers, PipelineSpec, ValidPipeline, WarpRoles};
use tma::plan::KernelPlan;
use tma::render::KernelSource;
use tma::runtime::{CompileOptions, Compiler, LaunchConfig, Module, Source, TensorMap};
use tma::{validate, Arch, DType, Swizzle, TileSpec, ValidSpec};

const A_ROWS: u64 = 64 * 37;
const B_ROWS: u64 = 32 * 41;
const STAGES_STREAMED: i32 = 300;
const BLOCKS: u32 = 4;

fn tile_a() -> ValidSpec {
    validate(
        &TileSpec::new("ta", DType::BF16, [A_ROWS, 64], [64, 64])
            .dim_names(["r", "c"])
            .swizzle(Swizzle::B128),
    )
    .unwrap()
}

/// The same 64 x 64 bf16 call as two boxes of 32 rows: one per CTA of a 2-CTA cluster.
fn tile_a_halves() -> ValidSpec {
    validate(
        &TileSpec::new("ta_mc", DType::BF16, [A_ROWS, 64], [32, 64])
            .dim_names(["r", "c"])
            .swizzle(Swizzle::B128)
            .repeat([2, 1]),
    )
    .unwrap()
}

/// The same 32 x 16 u32 call as two boxes of 16 rows: shared along a cluster axis of 2.
fn tile_b_halves() -> ValidSpec {
    validate(
        &TileSpec::new("tb_mc", DType::U32, [B_ROWS, 16], [16, 16])
            .dim_names(["r", "c"])
            .swizzle(Swizzle::B64)
            .repeat([2, 1]),
    )
    .unwrap()
}

fn tile_b() -> ValidSpec {
    validate(
        &TileSpec::new("tb", DType::U32, [B_ROWS, 16], [32, 16])
            .dim_names(["r", "c"])
            .swizzle(Swizzle::B64),
    )
    .unwrap()
}

/// (stages, consumer warpgroups) of each ring.
const RINGS: [(u32, u32); 8] = [
    (2, 1),
    (2, 2),
    (3, 1),
    (3, 2),
    (4, 1),
    (4, 2),
    (8, 1),
    (8, 2),
];

fn rings() -> Vec<ValidPipeline> {
    RINGS
        .iter()
        .map(|&(s, w)| {
            PipelineSpec::new(format!("ring{s}_w{w}"), s, Consumers::Warpgroups(w))
                .tile("a", &tile_a())
                .tile("b", &tile_b())
                .validate()
                .unwrap()
        })
        .collect()
}

fn multicast_ring() -> ValidPipeline {
    PipelineSpec::new("mc", 4, Consumers::Warpgroups(1))
        .multicast_tile("a", &tile_a_halves(), ClusterAxis::X)
        .tile("b", &tile_b())
        .cluster([2, 1, 1])
        .validate()
        .unwrap()
}

/// One multicast ring and how it launches.
struct McRing {
    kernel: &'static str,
    pipe: ValidPipeline,
    /// Consumer warpgroups of the warp roles (`tma_roles_w<n>`).
    warpgroups: u32,
    grid: (u32, u32, u32),
    /// The cluster axis `a` and `b` are multicast along (None: loaded alone).
    axis_a: Option<ClusterAxis>,
    axis_b: Option<ClusterAxis>,
}

impl McRing {
    fn cluster(&self) -> (u32, u32, u32) {
        let [x, y, z] = self.pipe.spec().cluster;
        (x, y, z)
    }
}

fn axis_arg(a: Option<ClusterAxis>) -> i32 {
    a.map_or(-1, |a| a.index() as i32)
}

/// The multicast rings past the x-axis one: each a 4-CTA grid.
fn mc_rings() -> Vec<McRing> {
    let ring = |name: &str,
                consumers,
                cluster: [u32; 3],
                a: Option<ClusterAxis>,
                b: Option<ClusterAxis>| {
        let mut p = PipelineSpec::new(name, 3, consumers).cluster(cluster);
        p = match a {
            Some(axis) => p.multicast_tile("a", &tile_a_halves(), axis),
            None => p.tile("a", &tile_a()),
        };
        p = match b {
            Some(axis) => p.multicast_tile("b", &tile_b_halves(), axis),
            None => p.tile("b", &tile_b()),
        };
        p.validate().unwrap()
    };
    let (x, y, z) = (
        Some(ClusterAxis::X),
        Some(ClusterAxis::Y),
        Some(ClusterAxis::Z),
    );
    vec![
        McRing {
            kernel: "ring_mc",
            pipe: multicast_ring(),
            warpgroups: 1,
            grid: (BLOCKS, 1, 1),
            axis_a: x,
            axis_b: None,
        },
        McRing {
            kernel: "ring_mc_y",
            pipe: ring("mc_y", Consumers::Warpgroups(1), [1, 2, 1], y, None),
            warpgroups: 1,
            grid: (2, 2, 1),
            axis_a: y,
            axis_b: None,
        },
        McRing {
            kernel: "ring_mc_z",
            pipe: ring("mc_z", Consumers::Warpgroups(2), [1, 1, 2], z, None),
            warpgroups: 2,
            grid: (2, 1, 2),
            axis_a: z,
            axis_b: None,
        },
        McRing {
            kernel: "ring_mc_yx",
            pipe: ring("mc_yx", Consumers::Warpgroups(1), [2, 2, 1], y, x),
            warpgroups: 1,
            grid: (2, 2, 1),
            axis_a: y,
            axis_b: x,
        },
        McRing {
            kernel: "ring_mc_warps",
            pipe: ring("mc_warps", Consumers::Warps(6), [2, 1, 1], x, None),
            warpgroups: 2,
            grid: (BLOCKS, 1, 1),
            axis_a: x,
            axis_b: None,
        },
    ]
}

/// The linear id of the block the CTAs sharing a tile along `axis` take their coordinates
/// from (the first of them); the block itself when `axis` is None. The kernel's twin.
fn group(
    blk: [u32; 3],
    grid: (u32, u32, u32),
    cluster: (u32, u32, u32),
    axis: Option<ClusterAxis>,
) -> u64 {
    let mut b = blk;
    if let Some(a) = axis {
        let c = [cluster.0, cluster.1, cluster.2][a.index()];
        b[a.index()] -= b[a.index()] % c;
    }
    u64::from(b[0]) + u64::from(grid.0) * (u64::from(b[1]) + u64::from(grid.1) * u64::from(b[2]))
}

/// The kernel template: every config instantiates it.
const BODY: &str = r#"
// The rows stage k loads: `grp` is the block the CTAs sharing the tile take coordinates from.
__device__ __forceinline__ int tma_test_a_row(int k, int grp) { return ((k * 7 + grp * 3) % 37) * 64; }
__device__ __forceinline__ int tma_test_b_row(int k, int grp) { return ((k * 5 + grp * 11) % 41) * 32; }

// The linear id of the first block along cluster axis `axis` of this block's cluster (this
// block when axis < 0): the CTAs that share a tile multicast along it load the same call.
template <class Pipe>
__device__ __forceinline__ int tma_test_group(int axis) {
  unsigned b[3] = {blockIdx.x, blockIdx.y, blockIdx.z};
  const unsigned c[3] = {Pipe::CLUSTER_X, Pipe::CLUSTER_Y, Pipe::CLUSTER_Z};
  if (axis >= 0) b[axis] -= b[axis] % c[axis];
  return (int)(b[0] + gridDim.x * (b[1] + gridDim.y * b[2]));
}

template <class Pipe, class R, int AXIS_A, int AXIS_B>
__device__ __forceinline__ void tma_test_ring(const CUtensorMap* a_map, const CUtensorMap* b_map, int stages,
                                              const unsigned short* a_glob, const unsigned* b_glob,
                                              unsigned char* out, unsigned long long* mismatches) {
  extern __shared__ __align__(16) unsigned char tma_test_raw[];
  using A = typename Pipe::tile_a;
  using B = typename Pipe::tile_b;
  const Pipe pipe(tma_test_raw);
  pipe.init();
  const int blk = tma_test_group<Pipe>(-1);
  const int ga = tma_test_group<Pipe>(AXIS_A), gb = tma_test_group<Pipe>(AXIS_B);
  if (R::is_producer()) {
    R::producer_setmaxnreg();
    if (threadIdx.x < 32u) {
      typename Pipe::state s;
      for (int k = 0; k < stages; ++k, ++s) {
        pipe.acquire(s);
        if (tma_elect_one()) {
          pipe.load(s, a_map, {.r = tma_test_a_row(k, ga), .c = 0}, b_map, {.r = tma_test_b_row(k, gb), .c = 0});
        }
        __syncwarp();
      }
    }
  } else {
    R::consumer_setmaxnreg();
    typename Pipe::state s;
    const unsigned t = threadIdx.x - 128u * R::PRODUCER_WARPGROUPS;  // among the consumer warps
    const unsigned nt = Pipe::CONSUMER_THREADS;  // those that consume (Consumers::Warps(6): 6 of 8 warps)
    for (int k = 0; t < nt && k < stages; ++k, ++s) {
#if defined(TMA_TEST_SKIP_WAIT)
      if (k + 1 == stages) pipe.wait(s);  // the test's own check, broken: stages read before they are full
#else
      pipe.wait(s);
#endif
      const unsigned char* st = pipe.stage(s);
      unsigned char* o = out + ((unsigned long long)blk * stages + k) * Pipe::STAGE_BYTES;
      for (unsigned i = t * 16u; i < Pipe::STAGE_BYTES; i += nt * 16u)
        *reinterpret_cast<uint4*>(o + i) = *reinterpret_cast<const uint4*>(st + i);
      const int ar = tma_test_a_row(k, ga), br = tma_test_b_row(k, gb);
      unsigned bad = 0u;
      for (unsigned n = t; n < A::POSITIONS; n += nt) {
        const typename A::coords p = A::position(n);
        bad += A::at(pipe.smem_a(s), p).bits != a_glob[(ar + p.r) * 64 + p.c];
      }
      for (unsigned n = t; n < B::POSITIONS; n += nt) {
        const typename B::coords p = B::position(n);
        bad += B::at(pipe.smem_b(s), p) != b_glob[(br + p.r) * 16 + p.c];
      }
      if (bad != 0u) atomicAdd(mismatches, (unsigned long long)bad);
      pipe.release(s);
    }
  }
  pipe.finish();
}
"#;

fn entry(name: &str, pipe: &str, roles: &str, axis_a: i32, axis_b: i32) -> String {
    format!(
        "extern \"C\" __global__ void TMA_ROLES_{}_LAUNCH_BOUNDS {name}(const __grid_constant__ CUtensorMap a, \
         const __grid_constant__ CUtensorMap b, int stages, const unsigned short* ag, const unsigned* bg, \
         unsigned char* out, unsigned long long* bad) {{\n  tma_test_ring<{pipe}, {roles}, {axis_a}, {axis_b}>(&a, &b, stages, ag, bg, out, bad);\n}}\n",
        roles.trim_start_matches("tma_roles_").to_ascii_uppercase()
    )
}

fn source() -> Source {
    let w1 = WarpRoles::new("w1", 40, 1, 256).validate().unwrap();
    let w2 = WarpRoles::new("w2", 40, 2, 232).validate().unwrap();
    let mut src = KernelSource::new().warp_roles(&w1).warp_roles(&w2);
    // TMA_PIPELINE_BREAK=1 breaks the consumers (they read stages without waiting): the test
    // must then report mismatches.
    let mut body = if std::env::var_os("TMA_PIPELINE_BREAK").is_some() {
        format!("#define TMA_TEST_SKIP_WAIT 1\n{BODY}")
    } else {
        BODY.to_string()
    };
    for (p, &(s, w)) in rings().iter().zip(&RINGS) {
        src = src.pipeline(p);
        body.push_str(&entry(
            &format!("ring{s}_w{w}"),
            &format!("tma_pipe_{}", p.spec().name),
            &format!("tma_roles_w{w}"),
            -1,
            -1,
        ));
    }
    for r in mc_rings() {
        // `ring_mc_yx` launches from a plan (its pipeline and warp roles); the others hold
        // their pipelines outside any plan.
        src = if r.kernel == PLANNED {
            let roles = if r.warpgroups == 1 { &w1 } else { &w2 };
            let plan = KernelPlan::new(r.kernel)
                .pipeline(&r.pipe)
                .roles(roles)
                .validate()
                .unwrap();
            src.plan(&plan)
        } else {
            src.pipeline(&r.pipe)
        };
        body.push_str(&entry(
            r.kernel,
            &format!("tma_pipe_{}", r.pipe.spec().name),
            &format!("tma_roles_w{}", r.warpgroups),
            axis_arg(r.axis_a),
            axis_arg(r.axis_b),
        ));
    }
    Source::kernel(&src.body(&body)).unwrap()
}

/// The ring kernel that launches from a kernel plan.
const PLANNED: &str = "ring_mc_yx";

/// Without a GPU: the source's description carries `ring_mc_yx`'s plan, which is the launch
/// the streaming test gives it (its pipeline's cluster and DYNAMIC_SMEM_BYTES, its roles'
/// block), and the pipelines the other kernels are checked against, not the plan's.
#[test]
fn the_planned_ring_launches_as_its_pipeline() {
    let source = source();
    let facts = source.facts().unwrap();
    let ring = mc_rings()
        .into_iter()
        .find(|r| r.kernel == PLANNED)
        .unwrap();
    let plan = facts.plan(PLANNED).unwrap();
    assert_eq!(
        (plan.block, plan.cluster, u64::from(plan.dynamic_smem_bytes)),
        (
            [128 * (1 + ring.warpgroups), 1, 1],
            ring.pipe.spec().cluster,
            // The plan's slack is SMEM_ALIGN - 16 (a 16-byte aligned base skips no more); the
            // pipeline's own DYNAMIC_SMEM_BYTES keeps SMEM_ALIGN.
            ring.pipe.dynamic_smem_bytes() - 16
        )
    );
    assert_eq!(source.plans().len(), 1);
    let unplanned: Vec<&str> = (facts.pipelines.iter())
        .filter(|p| p.outside_plans)
        .map(|p| p.name.as_str())
        .collect();
    assert_eq!(unplanned.len(), RINGS.len() + mc_rings().len() - 1);
    assert!(!unplanned.contains(&"mc_yx") && unplanned.contains(&"mc"));
    // Ids in the order added: `mc` is pipeline 8 (the debug test's record names it so).
    assert_eq!(facts.pipeline(8).map(|p| p.name.as_str()), Some("mc"));
}

fn options(debug: bool) -> CompileOptions {
    CompileOptions::new(Arch::Sm90a).debug_waits(debug)
}

/// Resource usage and SASS of one kernel of a CUBIN.
fn sass_of(cuobjdump: &std::path::Path, cubin: &[u8], kernel: &str, tag: &str) -> (String, String) {
    use tma_test_support::skip::run_cuobjdump;
    let res = run_cuobjdump(cuobjdump, &["-res-usage", "-fun", kernel], cubin, tag);
    let sass = run_cuobjdump(cuobjdump, &["-sass", "-fun", kernel], cubin, tag);
    (res, sass)
}

fn count(sass: &str, op: &str) -> usize {
    sass.split(|c: char| !c.is_ascii_alphanumeric() && c != '.' && c != '_')
        .filter(|w| w.split('.').next() == Some(op))
        .count()
}

/// Without a GPU: every ring compiles to sm_90a SASS without local memory (debug builds: two
/// saved register pairs around out-of-line debug calls at most); with the debug
/// waits off, a producer issues one UTMALDG per box (2 per stage; the multicast CTA its one box
/// of `a` plus `b`), one arrive.expect_tx, and the consumers' release one arrive (remote ones
/// for the multicast ring).
#[test]
fn the_pipeline_kernels_compile_without_local_memory() {
    let test = "the_pipeline_kernels_compile_without_local_memory";
    if tma_test_support::skip::require_nvrtc_or_skip(test).is_none() {
        return;
    }
    let compiler = Compiler::global().unwrap();
    // Missing, the SASS checks skip (fail under CI); the compiles still run.
    let cuobjdump =
        tma_test_support::skip::require_tool_or_skip(&format!("{test} SASS checks"), "cuobjdump");
    for debug in [false, true] {
        let compiled = compiler
            .compile_source(&source(), &options(debug))
            .unwrap_or_else(|e| panic!("{e}"));
        assert!(compiled.cubin.starts_with(b"\x7fELF"));
        let mut names: Vec<String> = RINGS.iter().map(|(s, w)| format!("ring{s}_w{w}")).collect();
        names.extend(mc_rings().iter().map(|r| r.kernel.to_string()));
        let Some(cuobjdump) = &cuobjdump else {
            continue;
        };
        for name in &names {
            let (res, sass) = sass_of(
                cuobjdump,
                &compiled.cubin,
                name,
                &format!("pipeline-{name}-{debug}"),
            );
            assert!(res.contains("LOCAL:0"), "{name}: {res}");
            // Release builds: no local memory at all. Debug builds: at most two register pairs
            // saved and restored around the out-of-line debug calls (the map-load tracking of
            // docs/MAP_UPDATE.md and the failure record's writer); inlined, the tracking made the
            // register-starved producers of debug builds spill 10-12 times (measured).
            let local = count(&sass, "LDL") + count(&sass, "STL");
            assert!(
                local <= if debug { 4 } else { 0 },
                "{name} (debug {debug}): {local} local memory accesses"
            );
            let ldg = count(&sass, "UTMALDG");
            let setmax = count(&sass, "USETMAXREG");
            println!(
                "{name} (debug {debug}): UTMALDG {ldg}, SYNCS {}, USETMAXREG {setmax}, {}",
                count(&sass, "SYNCS"),
                res.lines()
                    .find(|l| l.contains("REG:"))
                    .unwrap_or("")
                    .trim()
            );
            if !debug {
                assert_eq!(ldg, 2, "{name}: one UTMALDG per box of a stage\n{sass}");
                assert_eq!(setmax, 2, "{name}: one setmaxnreg per role");
            }
        }
    }
}

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

#[test]
fn gpu_rings_stream_every_stage_intact() {
    let Some(_) =
        tma_test_support::skip::require_gpu_or_skip("gpu_rings_stream_every_stage_intact")
    else {
        return;
    };
    let ctx = cudarc::driver::CudaContext::new(0).unwrap();
    let stream = ctx.default_stream();
    let seed = tma_test_support::testgen::gpu_seed() | 1;
    println!("seed {seed} (set TMA_GPU_SEED to replay)");
    let mut rng = Rng(seed);
    let a_host: Vec<u16> = (0..A_ROWS * 64).map(|_| rng.next() as u16).collect();
    let b_host: Vec<u32> = (0..B_ROWS * 16).map(|_| rng.next() as u32).collect();
    let a_bytes: Vec<u8> = a_host.iter().flat_map(|v| v.to_le_bytes()).collect();
    let b_bytes: Vec<u8> = b_host.iter().flat_map(|v| v.to_le_bytes()).collect();
    let a_bf16: Vec<tma::half::bf16> = a_host
        .iter()
        .map(|&v| tma::half::bf16::from_bits(v))
        .collect();
    let a_dev = stream.clone_htod(&a_bf16).unwrap();
    let b_dev = stream.clone_htod(&b_host).unwrap();
    let (ta, ta_mc, tb, tb_mc) = (tile_a(), tile_a_halves(), tile_b(), tile_b_halves());
    let bound_a = ta.bind(&[A_ROWS, 64], None).unwrap();
    let bound_a_mc = ta_mc.bind(&[A_ROWS, 64], None).unwrap();
    let bound_b = tb.bind(&[B_ROWS, 16], None).unwrap();
    let bound_b_mc = tb_mc.bind(&[B_ROWS, 16], None).unwrap();
    let map_a = TensorMap::new(&bound_a, &a_dev).unwrap();
    let map_a_mc = TensorMap::new(&bound_a_mc, &a_dev).unwrap();
    let map_b = TensorMap::new(&bound_b, &b_dev).unwrap();
    let map_b_mc = TensorMap::new(&bound_b_mc, &b_dev).unwrap();
    let debug = std::env::var_os("TMA_PIPELINE_DEBUG").is_some();
    let module = Module::compile_and_load(
        &ctx,
        Compiler::global().unwrap(),
        &source(),
        &options(debug),
    )
    .unwrap();
    let a_row = |k: u64, grp: u64| ((k * 7 + grp * 3) % 37) * 64;
    let b_row = |k: u64, grp: u64| ((k * 5 + grp * 11) % 41) * 32;
    let mut configs: Vec<McRing> = rings()
        .into_iter()
        .zip(RINGS)
        .map(|(pipe, (_, w))| McRing {
            kernel: "",
            pipe,
            warpgroups: w,
            grid: (BLOCKS, 1, 1),
            axis_a: None,
            axis_b: None,
        })
        .collect();
    configs.extend(mc_rings());
    let (mut total_stages, mut total_bad) = (0u64, 0u64);
    for ring in &configs {
        let pipe = &ring.pipe;
        let name = match ring.kernel {
            "" => format!("ring{}_w{}", pipe.spec().stages, ring.warpgroups),
            k => k.to_string(),
        };
        let cluster = ring.cluster();
        let kernel = module.kernel(&name).unwrap();
        let stage_bytes = pipe.layout().stage.total_bytes as usize;
        let n = STAGES_STREAMED as usize;
        let mut out = stream
            .clone_htod(&vec![0xa5u8; BLOCKS as usize * n * stage_bytes])
            .unwrap();
        let mut bad = stream.clone_htod(&[0u64]).unwrap();
        // The planned kernel launches as its plan says: its pipeline's bytes with the plan's
        // slack (SMEM_ALIGN - 16: a 16-byte aligned base skips no more), 16 below the
        // pipeline's own DYNAMIC_SMEM_BYTES.
        let smem = kernel
            .plan()
            .map_or(pipe.dynamic_smem_bytes() as u32, |p| p.dynamic_smem_bytes);
        let mut cfg = LaunchConfig::new(&stream, ring.grid, (128 * (1 + ring.warpgroups), 1, 1))
            .dynamic_smem(smem);
        if pipe.cluster_ctas() > 1 {
            cfg = cfg.cluster(cluster);
        }
        let a_map = if ring.axis_a.is_some() {
            &map_a_mc
        } else {
            &map_a
        };
        let b_map = if ring.axis_b.is_some() {
            &map_b_mc
        } else {
            &map_b
        };
        // SAFETY: (CUtensorMap, CUtensorMap, int, const u16*, const u32*, u8*, u64*), `out`
        // holds BLOCKS x STAGES_STREAMED stages, `bad` one counter.
        unsafe {
            kernel
                .launch_builder(&cfg)
                .arg(a_map)
                .arg(b_map)
                .arg(&STAGES_STREAMED)
                .arg(&a_dev)
                .arg(&b_dev)
                .arg(&mut out)
                .arg(&mut bad)
                .launch_and_sync()
        }
        .unwrap_or_else(|e| panic!("{name}: {e}"));
        let got = stream.clone_dtoh(&out).unwrap();
        let device_bad = stream.clone_dtoh(&bad).unwrap()[0];
        let offs = &pipe.layout().stage.offsets;
        let bound_a_used = if ring.axis_a.is_some() {
            &bound_a_mc
        } else {
            &bound_a
        };
        let bound_b_used = if ring.axis_b.is_some() {
            &bound_b_mc
        } else {
            &bound_b
        };
        let (gx, gy, gz) = ring.grid;
        assert_eq!(gx * gy * gz, BLOCKS);
        let mut model_bad = 0u64;
        for bz in 0..gz {
            for by in 0..gy {
                for bx in 0..gx {
                    let b3 = [bx, by, bz];
                    let blk = group(b3, ring.grid, cluster, None);
                    let ga = group(b3, ring.grid, cluster, ring.axis_a);
                    let gb = group(b3, ring.grid, cluster, ring.axis_b);
                    for k in 0..n as u64 {
                        let at = (blk as usize * n + k as usize) * stage_bytes;
                        let stage = &got[at..at + stage_bytes];
                        let want_a =
                            model::load(bound_a_used, &a_bytes, &[a_row(k, ga) as i64, 0]).unwrap();
                        let want_b =
                            model::load(bound_b_used, &b_bytes, &[b_row(k, gb) as i64, 0]).unwrap();
                        for (want, off) in [(&want_a, offs[0]), (&want_b, offs[1])] {
                            let off = off as usize;
                            model_bad += want
                                .iter()
                                .zip(&stage[off..off + want.len()])
                                .filter(|(w, g)| w != g)
                                .count() as u64;
                        }
                    }
                }
            }
        }
        let streamed = u64::from(BLOCKS) * n as u64;
        let axis = |a: Option<ClusterAxis>| a.map_or("-", ClusterAxis::name);
        println!(
            "{name}: {} stage(s), consumers {}, grid {:?}, cluster {cluster:?}, a multicast along {}, b along {}, {} peer(s): \
             {streamed} stages streamed ({} per block), {} B each; \
             mismatches: {device_bad} elements (device, through at()), {model_bad} bytes (host, against the CPU model)",
            pipe.spec().stages,
            pipe.spec().consumers,
            ring.grid,
            axis(ring.axis_a),
            axis(ring.axis_b),
            pipe.peers(),
            n,
            stage_bytes
        );
        total_stages += streamed;
        total_bad += device_bad + model_bad;
    }
    println!(
        "pipelines: {total_stages} stages streamed over {} configurations, {total_bad} mismatches",
        configs.len()
    );
    assert_eq!(total_bad, 0);
}

/// The arguments of a ring kernel, on `stream`, for `BLOCKS` blocks of `stages` stages.
struct RingArgs {
    a: TensorMap,
    b: TensorMap,
    a_dev: cudarc::driver::CudaSlice<tma::half::bf16>,
    b_dev: cudarc::driver::CudaSlice<u32>,
    out: cudarc::driver::CudaSlice<u8>,
    bad: cudarc::driver::CudaSlice<u64>,
}

impl RingArgs {
    /// For a ring whose `a` and `b` are both multicast (`ring_mc_yx`) or `a` alone (`ring_mc`).
    fn new(
        stream: &std::sync::Arc<cudarc::driver::CudaStream>,
        pipe: &ValidPipeline,
        b_mc: bool,
    ) -> RingArgs {
        let a_dev = stream
            .clone_htod(&vec![tma::half::bf16::from_bits(0); (A_ROWS * 64) as usize])
            .unwrap();
        let b_dev = stream
            .clone_htod(&vec![0u32; (B_ROWS * 16) as usize])
            .unwrap();
        let tb = if b_mc { tile_b_halves() } else { tile_b() };
        let a =
            TensorMap::new(&tile_a_halves().bind(&[A_ROWS, 64], None).unwrap(), &a_dev).unwrap();
        let b = TensorMap::new(&tb.bind(&[B_ROWS, 16], None).unwrap(), &b_dev).unwrap();
        let out = stream
            .clone_htod(&vec![
                0u8;
                BLOCKS as usize
                    * STAGES_STREAMED as usize
                    * pipe.layout().stage.total_bytes as usize
            ])
            .unwrap();
        let bad = stream.clone_htod(&[0u64]).unwrap();
        RingArgs {
            a,
            b,
            a_dev,
            b_dev,
            out,
            bad,
        }
    }

    /// # Safety
    /// `kernel` is a ring kernel of [`source`] and `cfg` fits it.
    unsafe fn launch(
        &mut self,
        kernel: &tma::runtime::Kernel,
        cfg: &LaunchConfig,
    ) -> Result<(), tma::runtime::Error> {
        // SAFETY: the ring kernels' parameters, in order; `out` holds every stage.
        unsafe {
            kernel
                .launch_builder(cfg)
                .arg(&self.a)
                .arg(&self.b)
                .arg(&STAGES_STREAMED)
                .arg(&self.a_dev)
                .arg(&self.b_dev)
                .arg(&mut self.out)
                .arg(&mut self.bad)
                .launch_and_sync()
        }
    }
}

/// A launch off a plan kernel's plan (`ring_mc_yx`: its pipeline's cluster shape and
/// DYNAMIC_SMEM_BYTES, its roles' block) is refused on the host before the driver (the
/// context stays usable: the right launch then runs); so is a launch of a kernel without a
/// plan (`ring_mc`) that fits none of the pipelines its source holds outside plans.
#[test]
fn gpu_a_launch_off_the_pipelines_shape_is_refused_on_the_host() {
    use tma::runtime::Error;
    let Some(_) = tma_test_support::skip::require_gpu_or_skip(
        "gpu_a_launch_off_the_pipelines_shape_is_refused_on_the_host",
    ) else {
        return;
    };
    let ctx = cudarc::driver::CudaContext::new(0).unwrap();
    let stream = ctx.default_stream();
    let module = Module::compile_and_load(
        &ctx,
        Compiler::global().unwrap(),
        &source(),
        &options(false),
    )
    .unwrap();
    let ring = mc_rings()
        .into_iter()
        .find(|r| r.kernel == PLANNED)
        .unwrap();
    let kernel = module.kernel(ring.kernel).unwrap();
    let mut args = RingArgs::new(&stream, &ring.pipe, true);
    // The plan's bytes: the pipeline's with SMEM_ALIGN - 16 of slack.
    let smem = ring.pipe.dynamic_smem_bytes() as u32 - 16;
    let cfg = |grid, cluster: Option<(u32, u32, u32)>, smem: u32| {
        let c = LaunchConfig::new(&stream, grid, (256, 1, 1)).dynamic_smem(smem);
        match cluster {
            Some(cl) => c.cluster(cl),
            None => c,
        }
    };
    // The kernel's plan is its pipeline's shape: its launches are held to it alone, though
    // other pipelines of the source have 1x1x1, 2x1x1 and 1x2x1 clusters.
    let plan = kernel.plan().expect("ring_mc_yx has a plan");
    assert_eq!(
        (plan.block, plan.cluster, plan.dynamic_smem_bytes),
        ([256, 1, 1], [2, 2, 1], smem)
    );
    assert!(kernel.pipelines().is_empty() && kernel.min_dynamic_smem() == 0);
    // A cluster no pipeline of the source declares (4x1x1), clusters other pipelines of the
    // source declare, and no cluster.
    for (grid, cluster) in [
        ((4, 1, 1), Some((4, 1, 1))),
        ((2, 2, 1), Some((1, 2, 1))),
        ((4, 1, 1), Some((2, 1, 1))),
        ((4, 1, 1), None),
    ] {
        // SAFETY: refused before the driver (checked below).
        match unsafe { args.launch(&kernel, &cfg(grid, cluster, smem)) } {
            Err(
                e @ Error::PlanLaunch {
                    field: "cluster", ..
                },
            ) => println!("refused: {e}"),
            other => panic!("cluster {cluster:?}: {other:?}"),
        }
    }
    // The largest tile plus its slack (what a kernel without a plan is held to) is not the
    // plan's shared memory, nor is less or more than it.
    let ring_mc = module.kernel("ring_mc").unwrap();
    let largest = ring_mc.min_dynamic_smem() as u32;
    assert!(largest < smem, "{largest} {smem}");
    for given in [largest, smem - 16, smem + 1024] {
        // SAFETY: refused before the driver.
        match unsafe { args.launch(&kernel, &cfg(ring.grid, Some(ring.cluster()), given)) } {
            Err(
                e @ Error::PlanLaunch {
                    field: "dynamic shared memory",
                    ..
                },
            ) => println!("refused: {e}"),
            other => panic!("{given} B: {other:?}"),
        }
    }
    // The plan's shape runs, and streams intact (zeros in, zeros compared).
    // SAFETY: the ring's own shape.
    unsafe { args.launch(&kernel, &cfg(ring.grid, Some(ring.cluster()), smem)) }.unwrap();
    assert_eq!(stream.clone_dtoh(&args.bad).unwrap()[0], 0);
    println!(
        "{PLANNED} with cluster {:?} and {smem} B: ran",
        ring.cluster()
    );
    // A kernel without a plan may run any pipeline the source holds outside plans (not the
    // plan's): a launch must fit one of them.
    let names: Vec<&str> = ring_mc
        .pipelines()
        .iter()
        .map(|p| p.name.as_str())
        .collect();
    assert!(
        names.contains(&"mc") && !names.contains(&"mc_yx"),
        "{names:?}"
    );
    let mc = multicast_ring();
    let mut mc_args = RingArgs::new(&stream, &mc, false);
    // No pipeline of the source has 4x1x1.
    let c = cfg((4, 1, 1), Some((4, 1, 1)), mc.dynamic_smem_bytes() as u32);
    // SAFETY: refused before the driver.
    match unsafe { mc_args.launch(&ring_mc, &c) } {
        Err(
            e @ Error::PipelineLaunch {
                what: "cluster", ..
            },
        ) => println!("refused: {e}"),
        other => panic!("ring_mc, cluster 4x1x1: {other:?}"),
    }
    // 2x1x1 is `mc`'s and `mc_warps`'s: below the smaller of their DYNAMIC_SMEM_BYTES.
    let least = ring_mc
        .pipelines()
        .iter()
        .filter(|p| p.cluster == [2, 1, 1])
        .map(|p| p.dynamic_smem_bytes)
        .min()
        .unwrap() as u32;
    let c = cfg((4, 1, 1), Some((2, 1, 1)), least - 16);
    // SAFETY: refused before the driver.
    match unsafe { mc_args.launch(&ring_mc, &c) } {
        Err(
            e @ Error::PipelineLaunch {
                what: "dynamic shared memory",
                ..
            },
        ) => println!("refused: {e}"),
        other => panic!("ring_mc, {} B: {other:?}", least - 16),
    }
}

/// Past the host check (`unchecked_pipelines`), a debug build's `init()` names a launch off
/// the pipeline's cluster shape: `DeviceCheck { PipelineLaunchShape }` from `init`, naming the
/// pipeline, the axis, what was declared and what the launch has. (It traps: one per process.)
#[test]
fn gpu_debug_init_names_a_launch_off_the_pipelines_cluster() {
    use tma::runtime::Error;
    let Some(_) = tma_test_support::skip::require_gpu_or_skip(
        "gpu_debug_init_names_a_launch_off_the_pipelines_cluster",
    ) else {
        return;
    };
    let ctx = cudarc::driver::CudaContext::new(0).unwrap();
    let stream = ctx.default_stream();
    let module =
        Module::compile_and_load(&ctx, Compiler::global().unwrap(), &source(), &options(true))
            .unwrap();
    let pipe = multicast_ring();
    let kernel = module.kernel("ring_mc").unwrap();
    let mut args = RingArgs::new(&stream, &pipe, false);
    let cfg = LaunchConfig::new(&stream, (BLOCKS, 1, 1), (256, 1, 1))
        .dynamic_smem(pipe.dynamic_smem_bytes() as u32)
        .cluster((4, 1, 1))
        .unchecked_pipelines();
    // SAFETY: the kernel traps in init() before any copy.
    match unsafe { args.launch(&kernel, &cfg) } {
        Err(
            e @ Error::DeviceCheck {
                rule: tma::spec::Rule::PipelineLaunchShape,
                helper: "init",
                dim: Some(0),
                ..
            },
        ) => {
            let text = e.to_string();
            println!("{text}");
            assert!(text.contains("of pipeline `mc`"), "{text}");
            assert!(
                text.contains("declared for cluster x = 2, the launch has %cluster_nctaid.x = 4"),
                "{text}"
            );
        }
        other => panic!("{other:?}"),
    }
}

/// As above, for dynamic shared memory that holds the largest tile but not the pipeline's
/// barriers: `init()` names it before it writes past the end.
#[test]
fn gpu_debug_init_names_too_little_dynamic_smem() {
    use tma::runtime::Error;
    let Some(_) =
        tma_test_support::skip::require_gpu_or_skip("gpu_debug_init_names_too_little_dynamic_smem")
    else {
        return;
    };
    let ctx = cudarc::driver::CudaContext::new(0).unwrap();
    let stream = ctx.default_stream();
    let module =
        Module::compile_and_load(&ctx, Compiler::global().unwrap(), &source(), &options(true))
            .unwrap();
    let pipe = multicast_ring();
    let kernel = module.kernel("ring_mc").unwrap();
    let mut args = RingArgs::new(&stream, &pipe, false);
    let given = kernel.min_dynamic_smem() as u32;
    let cfg = LaunchConfig::new(&stream, (BLOCKS, 1, 1), (256, 1, 1))
        .dynamic_smem(given)
        .cluster((2, 1, 1))
        .unchecked_pipelines();
    // SAFETY: the kernel traps in init() before it writes a barrier.
    match unsafe { args.launch(&kernel, &cfg) } {
        Err(
            e @ Error::DeviceCheck {
                rule: tma::spec::Rule::PipelineLaunchShape,
                helper: "init",
                dim: Some(3),
                value,
                ..
            },
        ) => {
            println!("{e}");
            assert_eq!(value & 0xfff_ffff, i64::from(given), "{e}");
            assert!(((value >> 28) & 0xfff_ffff) > i64::from(given), "{e}");
            assert_eq!(value >> 56, 8, "pipeline id of `mc`: {e}");
        }
        other => panic!("{other:?}"),
    }
}
