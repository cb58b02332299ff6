//! `T::at` on a GPU: for random valid specs (every sm_90 swizzle, repeats, element strides,
//! interleave, padded rows, coordinates across every edge), one TMA load, then every element
//! of the call read back through `T::at(smem, T::position(n))` (and each element of a chunk
//! with interleave) into a poisoned buffer, which must equal the global source element by
//! element: its bytes where in bounds (TF32 rounded as a load rounds it), the fill outside.
//! The global side is independent of the shared-memory layout, so a wrong offset fails.
//! Skips visibly without a GPU. `TMA_GPU_SEED` replays a run.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

#[path = "gpu/support.rs"]
mod support;

use cudarc::driver::CudaSlice;
use support::Gpu;
use tma::plan::KernelPlan;
use tma::render::KernelSource;
use tma::runtime::{CompileOptions, Compiler, Module, Source};
use tma::smem::ElementOffsets;
use tma_core::model::{self, ModelOptions};
use tma_core::{Arch, BoundSpec, OobFill};
use tma_test_support::testgen::{gpu_seed, random_valid_spec, XorShift};

/// Specs per run (one kernel each).
const SPECS: usize = 64;

/// The load's coordinates, per rank: the random specs' dims have no names, so `d0, d1, ..`.
const COORDS: [&str; 5] = [
    "#define PROBE_COORDS {.d0 = c[0]}\n",
    "#define PROBE_COORDS {.d0 = c[0], .d1 = c[1]}\n",
    "#define PROBE_COORDS {.d0 = c[0], .d1 = c[1], .d2 = c[2]}\n",
    "#define PROBE_COORDS {.d0 = c[0], .d1 = c[1], .d2 = c[2], .d3 = c[3]}\n",
    "#define PROBE_COORDS {.d0 = c[0], .d1 = c[1], .d2 = c[2], .d3 = c[3], .d4 = c[4]}\n",
];

/// `T` is the tile and `tma_plan_shape_probe` the kernel's plan (`probe_source`: shared memory
/// and launch are the plan's). Element n (x CHUNK_ELEMENTS + k with interleave)
/// of `out` is position n (element k of that chunk) read through T::at.
const BODY: &str = r#"
template <class Tile>
static __device__ void probe_dump(const unsigned char* smem, typename Tile::elem* out) {
  if constexpr (requires { Tile::CHUNK_ELEMENTS; }) {
    for (unsigned n = threadIdx.x; n < Tile::POSITIONS * Tile::CHUNK_ELEMENTS; n += blockDim.x)
      out[n] = Tile::at(smem, Tile::position(n / Tile::CHUNK_ELEMENTS), static_cast<int>(n % Tile::CHUNK_ELEMENTS));
  } else {
    for (unsigned n = threadIdx.x; n < Tile::POSITIONS; n += blockDim.x) out[n] = Tile::at(smem, Tile::position(n));
  }
}

extern "C" __global__ void TMA_PLAN_SHAPE_PROBE_LAUNCH_BOUNDS
shape_probe(const __grid_constant__ CUtensorMap map, const int* c, T::elem* out) {
  using P = tma_plan_shape_probe;
  extern __shared__ unsigned char raw[];
  __shared__ alignas(8) tma_mbarrier bar;
  unsigned char* smem = P::box(P::base(raw), 0);
  if (threadIdx.x == 0) {
    tma_mbarrier_init(&bar, 1);
    tma_fence_mbarrier_init();
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    tma_expect<T>(&bar);
    T::load(&map, &bar, smem, PROBE_COORDS);
  }
  tma_group<T>::wait(&bar, 0);
  probe_dump<T>(smem, out);
}
"#;

/// What `out` must hold: per element (position-major, then in-chunk), the global source's
/// bytes as a load delivers them, or the fill.
fn expected(bound: &BoundSpec, global: &[u8], coords: &[i64]) -> Vec<u8> {
    let spec = bound.spec();
    let offsets = ElementOffsets::new(bound.valid()).unwrap();
    let esize = spec.dtype.size_bytes().unwrap() as usize;
    let fill = match spec.oob_fill {
        OobFill::NanRequestZeroFma if spec.dtype.is_float() => model::oob_nan_bytes(spec.dtype),
        _ => vec![0u8; esize],
    };
    let total = (offsets.positions() * offsets.chunk_elems) as usize;
    let mut want = vec![0u8; total * esize];
    for p in model::elements(bound, coords, ModelOptions::default()).unwrap() {
        let n = p
            .position
            .iter()
            .zip(&offsets.extent)
            .fold(0u64, |acc, (&x, &e)| acc * e + x);
        let at = (n * offsets.chunk_elems + p.in_chunk) as usize * esize;
        let dst = &mut want[at..at + esize];
        match p.global {
            Some(g) => {
                dst.copy_from_slice(&global[g as usize..g as usize + esize]);
                model::convert_on_load(spec.dtype, dst);
            }
            None => dst.copy_from_slice(&fill),
        }
    }
    want
}

/// The probe kernel of every spec, compiled by NVRTC for sm_90a: its plan (the tile as `T`,
/// one staging copy of it, 128 threads) and the body.
fn probe_source(bound: &BoundSpec) -> Source {
    let plan = KernelPlan::new("shape_probe")
        .tile("T", bound.valid())
        .staging("box", bound.valid(), 1)
        .block_threads(128)
        .validate()
        .unwrap();
    let source = KernelSource::new()
        .plan(&plan)
        .body(COORDS[bound.spec().rank() - 1])
        .body(BODY);
    Source::kernel(&source).unwrap()
}

fn options() -> CompileOptions {
    CompileOptions::new(Arch::Sm90a)
}

/// Without a GPU the probe still compiles (CI): every rank, interleaved or not.
#[test]
fn the_probe_compiles_for_random_specs() {
    let test = "the_probe_compiles_for_random_specs";
    if tma_test_support::skip::require_nvrtc_or_skip(test).is_none() {
        return;
    }
    let mut rng = XorShift::new(0x5a9e);
    let (mut ranks, mut interleaved) = ([false; 5], false);
    for _ in 0..200 {
        let (bound, _) = random_valid_spec(&mut rng, Arch::Sm90a);
        let rank = bound.spec().rank();
        let il = bound.spec().interleave.chunk_bytes().is_some();
        if ranks[rank - 1] && (interleaved || !il) {
            continue;
        }
        ranks[rank - 1] = true;
        interleaved |= il;
        let compiled = Compiler::global()
            .unwrap()
            .compile_source(&probe_source(&bound), &options())
            .unwrap_or_else(|e| panic!("{:?}: {e}", bound.spec()));
        assert!(compiled.ptx.contains(".entry shape_probe"));
    }
    assert!(
        ranks.iter().all(|&r| r) && interleaved,
        "{ranks:?} {interleaved}"
    );
}

#[test]
fn gpu_at_reads_every_element_where_tma_wrote_it() {
    let Some(gpu) = Gpu::open("gpu_at_reads_every_element_where_tma_wrote_it") else {
        return;
    };
    let seed = gpu_seed();
    println!("TMA_GPU_SEED={seed}");
    let mut rng = XorShift::new(seed);
    let compiler = Compiler::global().unwrap();
    let options = options();
    let mut failures = Vec::new();
    let mut elements = 0usize;
    for i in 0..SPECS {
        let (bound, coords) = random_valid_spec(&mut rng, Arch::Sm90a);
        let spec = bound.spec();
        let source = probe_source(&bound);
        let module = Module::compile_and_load(&gpu.ctx, compiler, &source, &options)
            .unwrap_or_else(|e| panic!("spec {i} {spec:?}: {e}"));
        let kernel = module.kernel("shape_probe").unwrap();
        let mut global = vec![0u8; bound.extent_bytes() as usize];
        rng.fill(&mut global);
        let want = expected(&bound, &global, &coords);
        let (gbuf, map) = gpu.upload_tensor(&bound, &global);
        let c: Vec<i32> = coords.iter().map(|&x| x as i32).collect();
        let d_coords = gpu.stream.clone_htod(&c).unwrap();
        let mut out: CudaSlice<u8> = gpu.stream.clone_htod(&vec![0xa5u8; want.len()]).unwrap();
        let cfg = kernel.plan_config(&gpu.stream, (1, 1, 1)).unwrap();
        // SAFETY: shape_probe(CUtensorMap, const int* (rank coordinates), T::elem* (one per
        // position and chunk element: want.len() bytes)); the launch is the plan's.
        let launched = unsafe {
            kernel
                .launch_builder(&cfg)
                .arg(&map)
                .arg(&d_coords)
                .arg(&mut out)
                .launch_and_sync()
        };
        let got = match launched {
            Ok(()) => gpu.stream.clone_dtoh(&out).unwrap(),
            Err(e) => panic!("spec {i} {spec:?} coords {coords:?}: {e}"),
        };
        drop(gbuf);
        elements += want.len();
        let esize = spec.dtype.size_bytes().unwrap() as usize;
        let wrong = want
            .chunks(esize)
            .zip(got.chunks(esize))
            .filter(|(w, g)| w != g)
            .count();
        if wrong != 0 {
            failures.push(format!(
                "spec {i}: {wrong} of {} elements wrong: {} global {:?} box {:?} estr {:?} rep {:?} swz {} il {} coords {coords:?}",
                want.len() / esize,
                spec.dtype,
                bound.global(),
                spec.boxed,
                spec.element_strides,
                spec.repeat,
                spec.swizzle.name(),
                spec.interleave.name()
            ));
        }
    }
    println!("{SPECS} specs, {elements} bytes read through T::at");
    assert!(failures.is_empty(), "seed {seed}:\n{}", failures.join("\n"));
}
