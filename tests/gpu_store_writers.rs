//! A tile that many threads write and one thread stores: `store_committed_by<SYNC>` fences
//! every writer's shared-memory writes for the async proxy, meets at SYNC, and one thread
//! issues the TMA store; `wait_read_by<SYNC>` lets every writer write the staging again. Each
//! block writes `ROUNDS` tiles through one staging buffer (128B swizzle, placed by `at()`),
//! with `tma_sync_block` and with a named barrier (`tma_sync_named<1, 128>`) over the 128
//! writers of a 160-thread block; the output, poisoned first, must equal the values bit for
//! bit. Warps 1 to 3 write a few microseconds late, so a store that does not wait for every
//! writer stores their part unwritten. Skips visibly without a GPU; the NVRTC test runs
//! without one.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

#[path = "gpu/support.rs"]
mod support;

use support::Device;
use tma::plan::{KernelPlan, ValidKernelPlan};
use tma::render::KernelSource;
use tma::runtime::{CompileOptions, Source, TensorMap};
use tma::{Arch, Tile};

const BLOCKS: usize = 16;
const ROUNDS: usize = 8;
const ROWS: usize = BLOCKS * ROUNDS * 32;

tma::tma_2d! {
    /// 32 x 32 f32 boxes (128 B rows) of a ROWS x 32 matrix, 128B swizzle.
    pub Staged: f32,
    global = [R = 4096, C = 32],
    boxed = [32, 32],
    swizzle = 128,
}

/// The writer kernels and their blocks: `writers_block` (128 threads, every one writes) and
/// `writers_named` (160: warps 0-3 write, warp 4 idles).
const KERNELS: [(&str, u32); 2] = [("writers_block", 128), ("writers_named", 160)];

/// The plan of writer kernel `kernel`: the tile (named `S` for the kernels), one staging copy
/// of it, `threads` threads.
fn plan(kernel: &str, threads: u32) -> ValidKernelPlan {
    KernelPlan::new(kernel)
        .tile("S", Staged::valid())
        .staging("staging", Staged::valid(), 1)
        .block_threads(threads)
        .validate()
        .unwrap()
}

const BODY: &str = r#"
// Every writer writes its share of the staging tile (element n = r * 32 + c gets
// seed + row * 32 + c), then the tile is stored by thread 0 of the writers.
template <class SYNC, unsigned WRITERS>
__device__ void write_rounds(const CUtensorMap* map, unsigned char* smem, int rounds, float seed) {
  for (int k = 0; k < rounds; ++k) {
    const int row0 = (static_cast<int>(blockIdx.x) * rounds + k) * 32;
    // Warps 1.. write late (1 us a warp): without the writers' barrier, thread 0 would store
    // their part of the tile before they wrote it.
    if (threadIdx.x >= 32u) __nanosleep(1000u * (threadIdx.x / 32u));
    for (unsigned n = threadIdx.x; n < 32u * 32u; n += WRITERS) {
      const int r = static_cast<int>(n / 32u), c = static_cast<int>(n % 32u);
      S::at(smem, {.R = r, .C = c}) = seed + static_cast<float>((row0 + r) * 32 + c);
    }
    tma_store_token t = S::store_committed_by<SYNC>(map, smem, {.R = row0, .C = 0}, threadIdx.x == 0u);
    if (k + 1 < rounds) {
      t.wait_read_by<SYNC>();
    } else {
      t.wait_complete();
    }
  }
}

extern "C" __global__ void TMA_PLAN_WRITERS_BLOCK_LAUNCH_BOUNDS
writers_block(const __grid_constant__ CUtensorMap map, int rounds, float seed) {
  typedef tma_plan_writers_block P;
  extern __shared__ __align__(16) unsigned char raw[];
  write_rounds<tma_sync_block, 128u>(&map, P::staging(P::base(raw), 0u), rounds, seed);
}

// 160 threads: warps 0-3 write and store (named barrier 1 over 128 threads), warp 4 idles.
extern "C" __global__ void TMA_PLAN_WRITERS_NAMED_LAUNCH_BOUNDS
writers_named(const __grid_constant__ CUtensorMap map, int rounds, float seed) {
  typedef tma_plan_writers_named P;
  extern __shared__ __align__(16) unsigned char raw[];
  if (threadIdx.x < 128u) write_rounds<tma_sync_named<1u, 128u>, 128u>(&map, P::staging(P::base(raw), 0u), rounds, seed);
}
"#;

fn source() -> Source {
    let source = KERNELS
        .into_iter()
        .fold(KernelSource::new(), |s, (k, threads)| {
            s.plan(&plan(k, threads))
        });
    Source::kernel(&source.body(BODY)).unwrap()
}

/// Release device code: what the helper costs where it is used.
fn options() -> CompileOptions {
    CompileOptions::new(Arch::Sm90a).debug_waits(false)
}

#[test]
fn the_writer_kernels_compile() {
    for options in [options(), options().debug_waits(true)] {
        let Some(c) = support::compile_or_skip("the_writer_kernels_compile", &source(), &options)
        else {
            return;
        };
        assert!(c.ptx.contains(".entry writers_named") && c.ptx.contains("bar.sync"));
        for (k, threads) in KERNELS {
            assert_eq!(c.plan(k), Some(plan(k, threads).launch()));
        }
        assert!(c.ptx.contains("fence.proxy.async.shared::cta"));
    }
}

#[test]
fn gpu_many_writers_one_store() {
    let Some(dev) = Device::open("gpu_many_writers_one_store") else {
        return;
    };
    let stream = &dev.stream;
    let module = dev.load(&source(), &options());
    for ((name, _), seed) in KERNELS.into_iter().zip([0.5f32, 0.25]) {
        let kernel = module.kernel(name).unwrap();
        let out = stream.clone_htod(&vec![f32::NAN; ROWS * 32]).unwrap();
        let map = TensorMap::new(&Staged::bind(&[ROWS as u64, 32]).unwrap(), &out).unwrap();
        let cfg = kernel.plan_config(stream, (BLOCKS as u32, 1, 1)).unwrap();
        // SAFETY: (CUtensorMap over `out`, int rounds, float seed); ROUNDS x BLOCKS tiles of
        // 32 rows fill the ROWS rows of `out`.
        unsafe {
            kernel
                .launch_builder(&cfg)
                .arg(&map)
                .arg(&(ROUNDS as i32))
                .arg(&seed)
                .launch_and_sync()
        }
        .unwrap();
        let got = stream.clone_dtoh(&out).unwrap();
        let wrong = got
            .iter()
            .enumerate()
            .filter(|&(i, v)| v.to_bits() != (seed + i as f32).to_bits())
            .count();
        println!("{name}: {wrong} of {} elements wrong", got.len());
        assert_eq!(wrong, 0, "{name}");
    }
}
