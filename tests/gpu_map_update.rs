//! Tensor maps updated on the device (docs/MAP_UPDATE.md). Random specs (rank 1-5, every
//! sm_90 dtype size, swizzles, interleave) with every dim and stride a run-time one; for each
//! of thousands of maps, a host encode over one base and shape, then the tile's generated
//! `update_global` (one thread per map) or `update_shared` (one warp per map) replaces base,
//! dims and strides with random valid ones on the device; the 128 bytes copied back must
//! equal, byte for byte, the host encode (`cuTensorMapEncodeTiled`) of the same spec with the
//! new arguments. One kernel (a `switch` over the tiles), launched from its kernel plan.
//!
//! Without a GPU the kernel still compiles (NVRTC to sm_90a SASS, with and without TMA_DEBUG)
//! and its PTX holds one `tensormap.replace` per field.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use tma::plan::{KernelPlan, ValidKernelPlan};
use tma::render::KernelSource;
use tma::runtime::{CompileOptions, Compiler, Module, Source, TensorMap};
use tma::spec::Extent;
use tma::{Arch, BoundSpec, EncodeArgs, ValidSpec};
use tma_test_support::testgen::{random_valid_spec, XorShift};

/// Tiles in the kernel, maps updated per launch, maps per block in shared mode (warps).
const TILES: usize = 24;
const MAPS: usize = 4096;
const BLOCK: u32 = 128;

/// A random sm_90a spec with every dim and every outer stride a run-time one.
fn runtime_tile(rng: &mut XorShift, k: usize) -> ValidSpec {
    loop {
        let mut spec = random_valid_spec(rng, Arch::Sm90a).0.spec().clone();
        spec.name = format!("mu{k}");
        let rank = spec.rank();
        spec.global = vec![Extent::Runtime; rank];
        let mut strides = vec![Extent::Runtime; rank];
        strides[rank - 1] = Extent::Static(1);
        spec.strides = Some(strides);
        if let Ok(v) = tma::validate(&spec) {
            return v;
        }
    }
}

/// A number in [1, 2^bits) with log-uniform size.
fn log_uniform(rng: &mut XorShift, max_bits: u64) -> u64 {
    let bits = rng.range(1, max_bits);
    rng.range(1, (1u64 << bits) - 1)
}

/// Random valid new arguments for `valid`: (base, dims, strides in elements), user order,
/// bound by the host's checks (the oracle of what is valid).
fn random_update(rng: &mut XorShift, valid: &ValidSpec) -> (u64, BoundSpec) {
    let spec = valid.spec();
    let rank = spec.rank();
    let (align, _) = valid.stride_align();
    let bits = u64::from(spec.dtype.global_bits());
    loop {
        let dims: Vec<u64> = (0..rank).map(|_| log_uniform(rng, 32)).collect();
        let mut strides: Vec<u64> = (0..rank)
            .map(|_| log_uniform(rng, 36) * align * 8 / bits)
            .collect();
        strides[rank - 1] = 1;
        if let Ok(bound) = valid.bind(&dims, Some(&strides)) {
            let base = rng.range(1, 1 << 40) * valid.base_address_align();
            return (base, bound);
        }
    }
}

/// The kernel: thread (global) or warp (shared) `i` updates map `i` of tile `tile_of[i]`.
fn body(tiles: &[ValidSpec]) -> String {
    let mut cases = String::new();
    for (k, v) in tiles.iter().enumerate() {
        let spec = v.spec();
        let rank = spec.rank();
        let mut fields: Vec<String> = (0..rank)
            .map(|d| format!(".{} = d[{d}]", spec.dim_label(d)))
            .collect();
        fields.extend((0..rank - 1).map(|d| format!(".stride_{} = s[{d}]", spec.dim_label(d))));
        cases.push_str(&format!(
            "    case {k}u: {{\n      const tma_{n}::map_shape sh{{{f}}};\n      if (in_shared) tma_{n}::update_shared(&maps[i], &smem_maps[warp], b, sh);\n      else tma_{n}::update_global(&maps[i], b, sh);\n      break;\n    }}\n",
            n = spec.name,
            f = fields.join(", ")
        ));
    }
    format!(
        r#"
extern "C" __global__ void TMA_PLAN_MAP_UPDATE_LAUNCH_BOUNDS
map_update(CUtensorMap* maps, const unsigned* tile_of, const unsigned long long* bases,
           const unsigned long long* dims, const unsigned long long* strides, unsigned n, unsigned in_shared) {{
  typedef tma_plan_map_update P;
  extern __shared__ __align__(16) unsigned char raw[];
  CUtensorMap* smem_maps = reinterpret_cast<CUtensorMap*>(P::smem_maps(P::base(raw)));
  const unsigned warp = threadIdx.x / 32u;
  const unsigned i = in_shared ? blockIdx.x * (blockDim.x / 32u) + warp : blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;  // per warp in shared mode: the warp stays whole
  const unsigned long long* d = dims + 5ull * i;
  const unsigned long long* s = strides + 4ull * i;
  const void* b = reinterpret_cast<const void*>(bases[i]);
  switch (tile_of[i]) {{
{cases}    default: break;
  }}
}}
"#
    )
}

fn plan(tiles: &[ValidSpec]) -> ValidKernelPlan {
    let mut plan = KernelPlan::new("map_update")
        .scratch("smem_maps", u64::from(BLOCK / 32) * 128, 128)
        .block_threads(BLOCK);
    for (k, t) in tiles.iter().enumerate() {
        plan = plan.tile(format!("T{k}"), t);
    }
    plan.validate().unwrap()
}

fn tiles(seed: u64) -> Vec<ValidSpec> {
    let mut rng = XorShift::new(seed);
    (0..TILES).map(|k| runtime_tile(&mut rng, k)).collect()
}

fn source(tiles: &[ValidSpec]) -> Source {
    Source::kernel(&KernelSource::new().plan(&plan(tiles)).body(&body(tiles))).unwrap()
}

const SEED: u64 = 0x26;

#[test]
fn the_update_kernel_compiles_with_one_replace_per_field() {
    let test = "the_update_kernel_compiles_with_one_replace_per_field";
    if tma_test_support::skip::require_nvrtc_or_skip(test).is_none() {
        return;
    }
    let tiles = tiles(SEED);
    let compiler = Compiler::global().unwrap();
    for debug in [false, true] {
        let options = CompileOptions::new(Arch::Sm90a).debug_waits(debug);
        let compiled = compiler
            .compile_source(&source(&tiles), &options)
            .unwrap_or_else(|e| panic!("{e}"));
        assert!(compiled.cubin.starts_with(b"\x7fELF"), "no CUBIN");
        let ptx = &compiled.ptx;
        // Each tile: its fields once in global memory and once in shared memory.
        let dims: usize = tiles.iter().map(|t| t.spec().rank()).sum();
        for (field, n) in [
            ("global_address", tiles.len()),
            ("global_dim", dims),
            ("global_stride", dims - tiles.len()),
        ] {
            for space in ["global", "shared::cta"] {
                let op = format!("tensormap.replace.tile.{field}.{space}.b1024");
                assert_eq!(ptx.matches(&op).count(), n, "{op} (debug {debug})");
            }
        }
        assert!(ptx.contains("fence.proxy.tensormap::generic.release.gpu"));
        assert!(ptx.contains("tensormap.cp_fenceproxy.global.shared::cta.tensormap::generic.release.gpu.sync.aligned"));
        assert!(ptx.contains("cp.async.bulk.wait_group 0"));
    }
}

#[test]
fn gpu_device_updates_match_the_host_encode_byte_for_byte() {
    let test = "gpu_device_updates_match_the_host_encode_byte_for_byte";
    let Some(_) = tma_test_support::skip::require_gpu_or_skip(test) else {
        return;
    };
    let tiles = tiles(SEED);
    let ctx = cudarc::driver::CudaContext::new(0).unwrap();
    let stream = ctx.default_stream();
    let options = CompileOptions::new(Arch::Sm90a);
    let module =
        Module::compile_and_load(&ctx, Compiler::global().unwrap(), &source(&tiles), &options)
            .unwrap();
    let kernel = module.kernel("map_update").unwrap();
    let mut rng = XorShift::new(0x2600 ^ u64::from(std::process::id()));
    println!("seed {:#x}", 0x2600 ^ u64::from(std::process::id()));
    let encode = |bound: &BoundSpec, base: u64| -> TensorMap {
        // SAFETY: a context is current (the module was loaded on it); the driver only
        // reads the arguments, and nothing copies through these maps.
        unsafe { tma::runtime::driver::encode_args(&EncodeArgs::new(bound), base) }
            .unwrap_or_else(|e| panic!("{e}"))
    };
    for in_shared in [0u32, 1] {
        let mut tile_of = Vec::with_capacity(MAPS);
        let (mut before, mut expected) = (Vec::new(), Vec::new());
        let (mut bases, mut dims, mut strides) = (Vec::new(), Vec::new(), Vec::new());
        for _ in 0..MAPS {
            let k = rng.below(TILES as u64) as usize;
            let (base0, bound0) = random_update(&mut rng, &tiles[k]);
            let (base, bound) = random_update(&mut rng, &tiles[k]);
            before.push(encode(&bound0, base0));
            expected.push(encode(&bound, base));
            tile_of.push(k as u32);
            bases.push(base);
            let mut d = bound.global().to_vec();
            d.resize(5, 0);
            let mut s = bound.strides()[..bound.global().len() - 1].to_vec();
            s.resize(4, 0);
            dims.extend(d);
            strides.extend(s);
        }
        let mut d_maps = stream.clone_htod(&before).unwrap();
        let d_tile = stream.clone_htod(&tile_of).unwrap();
        let d_bases = stream.clone_htod(&bases).unwrap();
        let d_dims = stream.clone_htod(&dims).unwrap();
        let d_strides = stream.clone_htod(&strides).unwrap();
        let per_block = if in_shared == 1 { BLOCK / 32 } else { BLOCK };
        let grid = (MAPS as u32).div_ceil(per_block);
        let cfg = kernel.plan_config(&stream, (grid, 1, 1)).unwrap();
        let n = MAPS as u32;
        // SAFETY: map_update(CUtensorMap*, const unsigned*, const u64*, const u64*, const u64*,
        // unsigned, unsigned): MAPS maps, tiles, bases, 5 dims and 4 strides per map; the plan's launch.
        unsafe {
            kernel
                .launch_builder(&cfg)
                .arg(&mut d_maps)
                .arg(&d_tile)
                .arg(&d_bases)
                .arg(&d_dims)
                .arg(&d_strides)
                .arg(&n)
                .arg(&in_shared)
                .launch()
        }
        .unwrap();
        module.synchronize(&stream).unwrap();
        let got: Vec<TensorMap> = stream.clone_dtoh(&d_maps).unwrap();
        let mut wrong = 0;
        for i in 0..MAPS {
            let (g, e) = (got[i].as_raw().opaque, expected[i].as_raw().opaque);
            if g != e {
                wrong += 1;
                if wrong <= 5 {
                    let k = tile_of[i] as usize;
                    println!(
                        "map {i} (tile {k}: {:?} rank {}, dims {:?}, strides {:?}, base {:#x}):\n  device {:016x?}\n  host   {:016x?}",
                        tiles[k].spec().dtype,
                        tiles[k].spec().rank(),
                        &dims[5 * i..5 * i + 5],
                        &strides[4 * i..4 * i + 4],
                        bases[i],
                        g,
                        e
                    );
                }
            }
        }
        let mode = if in_shared == 1 { "update_shared" } else { "update_global" };
        println!("{mode}: {} of {MAPS} maps equal the host encode", MAPS - wrong);
        assert_eq!(wrong, 0, "{mode}: {wrong} of {MAPS} maps differ");
    }
}
