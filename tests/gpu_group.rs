//! Tiles sharing a barrier, on real clusters: in each cluster of 1, 2 and 4 blocks, rank 0
//! multicasts tile `a` to every block and each block loads its own tile `b`; every block arms
//! its barrier once with `tma_expect<S::a, S::b>` (the bytes it receives, summed at compile
//! time) and waits through `tma_group<S::a, S::b>`, with debug waits on: a wrong sum would end
//! in a `BarrierTimeout`, not in data. Both tiles sit in one block's shared memory as the tile
//! set `pair` lays them out, and each block's must equal the CPU model's loads, bit for bit.
//! One kernel per cluster size, each a plan (the set, 128 threads, its cluster; a cluster of
//! 1 is a launch without one): shared memory and launch are the plan's. Skips visibly without
//! a GPU.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

#[path = "gpu/support.rs"]
mod support;

use support::{random_bytes, Device};
use tma::model;
use tma::plan::{KernelPlan, ValidKernelPlan};
use tma::render::KernelSource;
use tma::runtime::{Source, TensorMap};
use tma::Tile;

tma::tma_2d! {
    /// 32 x 32 f32 boxes of a 256 x 256 matrix with the 128B swizzle: multicast.
    pub GroupA: f32,
    global = [R = 256, C = 256],
    boxed = [32, 32],
    swizzle = 128,
}

tma::tma_2d! {
    /// 16 x 32 bf16 boxes (64 B rows, the 64B swizzle span) of a 256 x 64 matrix, two per
    /// call along K: 2 KB per call.
    pub GroupB: bf16,
    global = [M = 256, K = 64],
    boxed = [16, 32],
    swizzle = 64,
    repeat = [1, 2],
}

/// The cluster sizes probed: kernel `group_probe_c<n>` for each.
const CLUSTERS: [u32; 3] = [1, 2, 4];

/// `tma_plan_group_probe_c<n>` holds the set `pair` (`tma_pair`: both tiles, its parameter
/// list `TMA_PAIR_PARAMS` = `a_map, b_map`); each block copies the plan's shared memory out.
const BODY: &str = r#"
template <class P>
static __device__ __forceinline__ void group_probe(const CUtensorMap& a_map, const CUtensorMap& b_map,
                                                   unsigned char* out) {
  using S = typename P::tile_pair;
  using A = typename S::a;
  using B = typename S::b;
  extern __shared__ unsigned char raw[];
  __shared__ alignas(8) tma_mbarrier bar;
  unsigned char* base = P::base(raw);
  unsigned char* pair = P::pair(base);
  unsigned rank, size;
  asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(rank));
  asm volatile("mov.u32 %0, %%cluster_nctarank;" : "=r"(size));
  if (threadIdx.x == 0) {
    tma_mbarrier_init(&bar, 1);
    tma_fence_mbarrier_init();
    // This block receives a (multicast by rank 0) and loads b: its barrier counts both.
    tma_expect<A, B>(&bar);
  }
  // Every block's barrier is armed before any copy may signal it.
  asm volatile("barrier.cluster.arrive.release.aligned; barrier.cluster.wait.acquire.aligned;" ::: "memory");
  const int cluster = blockIdx.x / size;
  if (threadIdx.x == 0) {
    if (rank == 0)
      A::load_multicast(&a_map, &bar, pair + S::OFFSET_a, static_cast<unsigned short>((1u << size) - 1u),
                        {.R = A::BOX_R * cluster, .C = 0});
    B::load(&b_map, &bar, pair + S::OFFSET_b, {.M = B::BOX_M * static_cast<int>(blockIdx.x), .K = 0});
  }
  tma_group<A, B>::wait(&bar, 0);
  for (unsigned i = threadIdx.x; i < P::SMEM_BYTES; i += blockDim.x) out[blockIdx.x * P::SMEM_BYTES + i] = base[i];
  // No block leaves while a peer's copy may still target it.
  asm volatile("barrier.cluster.arrive.release.aligned; barrier.cluster.wait.acquire.aligned;" ::: "memory");
}
extern "C" __global__ void TMA_PLAN_GROUP_PROBE_C1_LAUNCH_BOUNDS group_probe_c1(TMA_PAIR_PARAMS, unsigned char* out) {
  group_probe<tma_plan_group_probe_c1>(a_map, b_map, out);
}
extern "C" __global__ void TMA_PLAN_GROUP_PROBE_C2_LAUNCH_BOUNDS group_probe_c2(TMA_PAIR_PARAMS, unsigned char* out) {
  group_probe<tma_plan_group_probe_c2>(a_map, b_map, out);
}
extern "C" __global__ void TMA_PLAN_GROUP_PROBE_C4_LAUNCH_BOUNDS group_probe_c4(TMA_PAIR_PARAMS, unsigned char* out) {
  group_probe<tma_plan_group_probe_c4>(a_map, b_map, out);
}
"#;

/// The plan of `group_probe_c<cluster>`.
fn plan(cluster: u32) -> ValidKernelPlan {
    KernelPlan::new(format!("group_probe_c{cluster}"))
        .tile_set("pair", &[("a", GroupA::valid()), ("b", GroupB::valid())])
        .block_threads(128)
        .cluster([cluster, 1, 1])
        .validate()
        .unwrap()
}

fn source() -> Source {
    let source = CLUSTERS
        .into_iter()
        .fold(KernelSource::new(), |s, c| s.plan(&plan(c)));
    Source::kernel(&source.body(BODY)).unwrap()
}

#[test]
fn the_group_kernel_compiles() {
    let Some(compiled) = support::compile_or_skip(
        "the_group_kernel_compiles",
        &source(),
        &support::debug_waits(),
    ) else {
        return;
    };
    for cluster in CLUSTERS {
        let name = format!("group_probe_c{cluster}");
        assert!(compiled.ptx.contains(&format!(".entry {name}(")));
        assert_eq!(compiled.plan(&name), Some(plan(cluster).launch()));
    }
    // One expect for both tiles: 4096 + 2 x 1024 bytes.
    assert_eq!(GroupA::TX_BYTES + GroupB::TX_BYTES, 4096 + 2048);
    assert!(compiled.ptx.contains(", 6144;"), "{}", compiled.ptx);
}

#[test]
fn gpu_a_group_expect_completes_with_multicast() {
    let Some(dev) = Device::open("gpu_a_group_expect_completes_with_multicast") else {
        return;
    };
    let stream = &dev.stream;
    let (a, b) = (
        GroupA::bind(&[256, 256]).unwrap(),
        GroupB::bind(&[256, 64]).unwrap(),
    );
    let mut seed = 0x9e37_79b9_7f4a_7c15u64 ^ u64::from(std::process::id());
    let a_bytes = random_bytes(256 * 256 * 4, &mut seed);
    let b_bytes = random_bytes(256 * 64 * 2, &mut seed);
    // Buffers of the tiles' own element types (bits kept as they are).
    let a_vals: Vec<f32> = a_bytes
        .chunks_exact(4)
        .map(|x| f32::from_le_bytes([x[0], x[1], x[2], x[3]]))
        .collect();
    let b_vals: Vec<half::bf16> = b_bytes
        .chunks_exact(2)
        .map(|x| half::bf16::from_bits(u16::from_le_bytes([x[0], x[1]])))
        .collect();
    let (d_a, d_b) = (
        stream.clone_htod(&a_vals).unwrap(),
        stream.clone_htod(&b_vals).unwrap(),
    );
    let maps = [
        TensorMap::new(&a, &d_a).unwrap(),
        TensorMap::new(&b, &d_b).unwrap(),
    ];
    let module = dev.load(&source(), &support::debug_waits());
    for cluster in CLUSTERS {
        let plan = plan(cluster);
        let kernel = module.kernel(plan.name()).unwrap();
        // Each block's copy of the plan's shared memory, and where in it the set has each tile.
        let per_block = plan.layout().total_bytes() as usize;
        let (at_a, at_b) = (
            plan.set_member("pair", "a").unwrap(),
            plan.set_member("pair", "b").unwrap(),
        );
        let blocks = 4 * cluster;
        let mut out = stream
            .clone_htod(&vec![0xa5u8; blocks as usize * per_block])
            .unwrap();
        let cfg = kernel.plan_config(stream, (blocks, 1, 1)).unwrap();
        {
            let mut launch = kernel.launch_builder(&cfg);
            for map in &maps {
                launch.arg(map);
            }
            launch.arg(&mut out);
            // SAFETY: group_probe_c<n>(TMA_PAIR_PARAMS = two CUtensorMap, unsigned char*)
            // with the plan's shared memory per block; the plan's launch.
            unsafe { launch.launch_and_sync() }
                .unwrap_or_else(|e| panic!("cluster of {cluster}: {e}"));
        }
        let got = stream.clone_dtoh(&out).unwrap();
        for blk in 0..blocks as usize {
            let c = (blk / cluster as usize) as i64;
            let block = &got[blk * per_block..(blk + 1) * per_block];
            for (what, bound, global, coords, offset) in [
                ("a", &a, &a_bytes, [32 * c, 0], at_a),
                ("b", &b, &b_bytes, [16 * blk as i64, 0], at_b),
            ] {
                let want = model::load(bound, global, &coords).unwrap();
                let at = offset as usize;
                let wrong = want
                    .iter()
                    .zip(&block[at..at + want.len()])
                    .filter(|(w, g)| w != g)
                    .count();
                assert_eq!(
                    wrong,
                    0,
                    "cluster of {cluster}, block {blk}, tile {what}: {wrong} of {} bytes differ from the model",
                    want.len()
                );
            }
        }
        println!(
            "cluster of {cluster}: {blocks} blocks, one group expect each, both tiles bit for bit"
        );
    }
}
