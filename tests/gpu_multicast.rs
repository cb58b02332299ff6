//! The multicast load on real clusters: in each cluster of 2 (and of 4) blocks, block rank 0
//! issues `load_multicast` with a mask of every rank, and each block waits on its own
//! mbarrier (armed for the tile's `TX_BYTES`) and copies its shared memory out. Every block
//! must hold the same box, equal to the CPU model's load, bit for bit. One kernel per cluster
//! size, each a plan (the tile, one staging copy, 128 threads, its cluster): shared memory and
//! launch are the plan's. Skips visibly without a GPU.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

#[path = "gpu/support.rs"]
mod support;

use support::Device;
use tma::model;
use tma::plan::{KernelPlan, ValidKernelPlan};
use tma::render::KernelSource;
use tma::runtime::Source;
use tma::runtime::TensorMap;
use tma::Tile;

tma::tma_2d! {
    /// 32 x 32 f32 boxes of a 256 x 256 matrix with the 128B swizzle.
    pub CastTile: f32,
    global = [R = 256, C = 256],
    boxed = [32, 32],
    swizzle = 128,
}

/// The cluster sizes probed: kernel `multicast_probe_c<n>` for each.
const CLUSTERS: [u32; 2] = [2, 4];

/// `Cast` is the tile's name for these kernels, `tma_plan_multicast_probe_c<n>` their plans.
const BODY: &str = r#"
template <class Plan>
static __device__ __forceinline__ void multicast_probe(const CUtensorMap& map, unsigned char* out) {
  extern __shared__ unsigned char raw[];
  __shared__ __align__(8) tma_mbarrier bar;
  unsigned char* smem = Plan::box(Plan::base(raw), 0);
  unsigned rank, size;
  asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(rank));
  asm volatile("mov.u32 %0, %%cluster_nctarank;" : "=r"(size));
  if (threadIdx.x == 0) {
    tma_mbarrier_init(&bar, 1);
    tma_fence_mbarrier_init();
    Cast::arrive_expect_tx(&bar);  // each block expects the whole box on its own barrier
  }
  // Every block's barrier is armed before any copy may signal it.
  asm volatile("barrier.cluster.arrive.release.aligned; barrier.cluster.wait.acquire.aligned;" ::: "memory");
  const int cluster = blockIdx.x / size;
  if (rank == 0 && threadIdx.x == 0)
    Cast::load_multicast(&map, &bar, smem, static_cast<unsigned short>((1u << size) - 1u),
                         {.R = Cast::BOX_R * cluster, .C = 32});
  Cast::wait(&bar, 0);
  for (unsigned i = threadIdx.x; i < Cast::SMEM_BYTES; i += blockDim.x)
    out[blockIdx.x * Cast::SMEM_BYTES + i] = smem[i];
  // No block leaves while a peer's copy may still target it.
  asm volatile("barrier.cluster.arrive.release.aligned; barrier.cluster.wait.acquire.aligned;" ::: "memory");
}
extern "C" __global__ void TMA_PLAN_MULTICAST_PROBE_C2_LAUNCH_BOUNDS
multicast_probe_c2(const __grid_constant__ CUtensorMap map, unsigned char* out) {
  multicast_probe<tma_plan_multicast_probe_c2>(map, out);
}
extern "C" __global__ void TMA_PLAN_MULTICAST_PROBE_C4_LAUNCH_BOUNDS
multicast_probe_c4(const __grid_constant__ CUtensorMap map, unsigned char* out) {
  multicast_probe<tma_plan_multicast_probe_c4>(map, out);
}
"#;

/// The plan of `multicast_probe_c<cluster>`.
fn plan(cluster: u32) -> ValidKernelPlan {
    KernelPlan::new(format!("multicast_probe_c{cluster}"))
        .tile("Cast", CastTile::valid())
        .staging("box", CastTile::valid(), 1)
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

/// Without a GPU the kernel still compiles (CI).
#[test]
fn the_multicast_kernel_compiles() {
    let test = "the_multicast_kernel_compiles";
    let Some(compiled) = support::compile_or_skip(test, &source(), &support::debug_waits()) else {
        return;
    };
    for cluster in CLUSTERS {
        assert!(compiled
            .ptx
            .contains(&format!(".entry multicast_probe_c{cluster}(")));
    }
}

#[test]
fn gpu_multicast_fills_every_block_of_the_cluster() {
    let Some(dev) = Device::open("gpu_multicast_fills_every_block_of_the_cluster") else {
        return;
    };
    let stream = &dev.stream;
    let bound = CastTile::bind(&[256, 256]).unwrap();
    let mut seed = 0x2545f4914f6cdd1du64 ^ u64::from(std::process::id());
    let input = support::random_bytes(256 * 256 * 4, &mut seed);
    let values: Vec<f32> = input
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .collect();
    let d_in = stream.clone_htod(&values).unwrap();
    let map = TensorMap::new(&bound, &d_in).unwrap();
    let module = dev.load(&source(), &support::debug_waits());
    let per_block = CastTile::SMEM_BYTES as usize;
    for cluster in CLUSTERS {
        let kernel = module
            .kernel(&format!("multicast_probe_c{cluster}"))
            .unwrap();
        let blocks = 4 * cluster;
        let mut out = stream
            .clone_htod(&vec![0xa5u8; blocks as usize * per_block])
            .unwrap();
        let cfg = kernel.plan_config(stream, (blocks, 1, 1)).unwrap();
        // SAFETY: multicast_probe(CUtensorMap, unsigned char*) with one footprint per block.
        unsafe {
            kernel
                .launch_builder(&cfg)
                .arg(&map)
                .arg(&mut out)
                .launch_and_sync()
        }
        .unwrap();
        let got = stream.clone_dtoh(&out).unwrap();
        for b in 0..blocks as usize {
            let c = (b / cluster as usize) as i64;
            let want = model::load(&bound, &input, &[32 * c, 32]).unwrap();
            let block = &got[b * per_block..(b + 1) * per_block];
            let wrong = want.iter().zip(block).filter(|(a, g)| a != g).count();
            assert_eq!(wrong, 0, "cluster of {cluster}, block {b}: {wrong} of {per_block} bytes differ from the model");
        }
        println!("cluster of {cluster}: {blocks} blocks, each holds the multicast box bit for bit");
    }
}
