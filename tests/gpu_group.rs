//! Tiles sharing a barrier, on real clusters: in each cluster of 1, 2 and 4 blocks, rank 0
//! multicasts tile `a` to every block and each block loads its own tile `b`; every block arms
//! its barrier once with `tma_expect<S::a, S::b>` (the bytes it receives, summed at compile
//! time) and waits through `tma_group<S::a, S::b>`, with debug waits on: a wrong sum would end
//! in a `BarrierTimeout`, not in data. Both tiles sit in one block's shared memory as the tile
//! set `pair` lays them out, and each block's must equal the CPU model's loads, bit for bit.
//! Skips visibly without a GPU.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

#[path = "gpu/support.rs"]
mod support;

use support::{random_bytes, Device};
use tma::model;
use tma::render::KernelSource;
use tma::runtime::{LaunchConfig, Source, TensorMap};
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

/// `tma_pair` lays out both tiles; `TMA_PAIR_PARAMS` is `a_map, b_map`.
const BODY: &str = r#"
extern "C" __global__ void group_probe(TMA_PAIR_PARAMS, unsigned char* out) {
  using S = tma_pair;
  extern __shared__ unsigned char raw[];
  __shared__ alignas(8) tma_mbarrier bar;
  unsigned char* smem = tma_align_smem<S>(raw);
  unsigned rank, size;
  asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(rank));
  asm volatile("mov.u32 %0, %%cluster_nctarank;" : "=r"(size));
  if (threadIdx.x == 0) {
    tma_mbarrier_init(&bar, 1);
    tma_fence_mbarrier_init();
    // This block receives a (multicast by rank 0) and loads b: its barrier counts both.
    tma_expect<S::a, S::b>(&bar);
  }
  // Every block's barrier is armed before any copy may signal it.
  asm volatile("barrier.cluster.arrive.release.aligned; barrier.cluster.wait.acquire.aligned;" ::: "memory");
  const int cluster = blockIdx.x / size;
  if (threadIdx.x == 0) {
    if (rank == 0)
      S::a::load_multicast(&a_map, &bar, smem + S::OFFSET_a, static_cast<unsigned short>((1u << size) - 1u),
                           {.R = S::a::BOX_R * cluster, .C = 0});
    S::b::load(&b_map, &bar, smem + S::OFFSET_b, {.M = S::b::BOX_M * static_cast<int>(blockIdx.x), .K = 0});
  }
  tma_group<S::a, S::b>::wait(&bar, 0);
  for (unsigned i = threadIdx.x; i < S::SMEM_BYTES; i += blockDim.x) out[blockIdx.x * S::SMEM_BYTES + i] = smem[i];
  // No block leaves while a peer's copy may still target it.
  asm volatile("barrier.cluster.arrive.release.aligned; barrier.cluster.wait.acquire.aligned;" ::: "memory");
}
"#;

fn source() -> Source {
    Source::new(
        KernelSource::new()
            .tile_set("pair", &[("a", GroupA::valid()), ("b", GroupB::valid())])
            .body(BODY)
            .build()
            .unwrap(),
    )
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
    assert!(compiled.ptx.contains(".entry group_probe"));
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
    let kernel = module.kernel("group_probe").unwrap();
    let layout =
        tma::smem::SmemLayout::new([GroupA::valid().plan(), GroupB::valid().plan()]).unwrap();
    let per_block = layout.total_bytes as usize;
    for cluster in [1u32, 2, 4] {
        let blocks = 4 * cluster;
        let mut out = stream
            .clone_htod(&vec![0xa5u8; blocks as usize * per_block])
            .unwrap();
        let cfg = LaunchConfig::new(stream, (blocks, 1, 1), (128, 1, 1))
            .dynamic_smem(layout.dynamic_smem_bytes() as u32)
            .cluster((cluster, 1, 1));
        {
            let mut launch = kernel.launch_builder(&cfg);
            for map in &maps {
                launch.arg(map);
            }
            launch.arg(&mut out);
            // SAFETY: group_probe(TMA_PAIR_PARAMS = two CUtensorMap, unsigned char*) with
            // one set footprint per block.
            unsafe { launch.launch_and_sync() }
                .unwrap_or_else(|e| panic!("cluster of {cluster}: {e}"));
        }
        let got = stream.clone_dtoh(&out).unwrap();
        for blk in 0..blocks as usize {
            let c = (blk / cluster as usize) as i64;
            let block = &got[blk * per_block..(blk + 1) * per_block];
            for (what, bound, global, coords, offset) in [
                ("a", &a, &a_bytes, [32 * c, 0], layout.offsets[0]),
                ("b", &b, &b_bytes, [16 * blk as i64, 0], layout.offsets[1]),
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
