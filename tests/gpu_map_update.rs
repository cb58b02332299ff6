//! Tensor maps updated on the device (docs/MAP_UPDATE.md). Random specs (rank 1-5, every
//! sm_90 dtype size, swizzles, interleave) with every dim and stride a run-time one; for each
//! of thousands of maps, a host encode over one base and shape, then the tile's generated
//! `update_global` (one thread per map) or `update_shared` (one warp per map) replaces base,
//! dims and strides with random valid ones on the device; the 128 bytes copied back must
//! equal, byte for byte, the host encode (`cuTensorMapEncodeTiled`) of the same spec with the
//! new arguments. One kernel (a `switch` over the tiles), launched from its kernel plan.
//!
//! Then one tile end to end and in debug mode (`map_misuse`, launched from its own plan): a
//! load through a map the kernel pointed at another buffer with other dims (global map,
//! released, acquired) reads what the CPU model (`tma::model::load`) says it reads, out of
//! bounds fill included; and in a TMA_DEBUG build a bad base, dim or stride, and an update
//! while a load through the map is armed and not completed, each trap with the named record
//! (`Error::DeviceCheck`: tile, helper, rule, dim, value). A trap ends the CUDA context: the
//! GPU runner (scripts/gpu-bundle.sh) gives every test its own process.
//!
//! Without a GPU both kernels still compile (NVRTC to sm_90a SASS, with and without
//! TMA_DEBUG) and the PTX holds one `tensormap.replace` per field.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use tma::plan::{KernelPlan, ValidKernelPlan};
use tma::render::KernelSource;
use tma::runtime::Error;
use tma::runtime::{CompileOptions, Compiler, Module, Source, TensorMap};
use tma::spec::Extent;
use tma::spec::Rule;
use tma::{Arch, EncodeArgs, MapUpdate, TileSpec, ValidSpec};
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

/// Random valid new arguments for `valid`, checked by the host (`ValidSpec::map_update`, the
/// oracle of what an update may write): base, dims up to 2^32 - 1, strides up to 2^40 B.
fn random_update(rng: &mut XorShift, valid: &ValidSpec) -> MapUpdate {
    let spec = valid.spec();
    let rank = spec.rank();
    let (align, _) = valid.stride_align();
    let bits = u64::from(spec.dtype.global_bits());
    loop {
        let dims: Vec<u64> = (0..rank).map(|_| log_uniform(rng, 32)).collect();
        let strides: Vec<u64> = (1..rank)
            .map(|_| log_uniform(rng, 36) * align * 8 / bits)
            .collect();
        let base = rng.range(1, 1 << 40) * valid.base_address_align();
        if let Ok(u) = valid.map_update(base, &dims, &strides) {
            return u;
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
    ctx.bind_to_thread().unwrap(); // encode_args below needs a current context
    let mut rng = XorShift::new(0x2600 ^ u64::from(std::process::id()));
    println!("seed {:#x}", 0x2600 ^ u64::from(std::process::id()));
    let encode = |bound: &tma::BoundSpec, base: u64| -> TensorMap {
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
            let (was, update) = (
                random_update(&mut rng, &tiles[k]),
                random_update(&mut rng, &tiles[k]),
            );
            before.push(encode(was.bound(), was.base()));
            expected.push(encode(update.bound(), update.base()));
            tile_of.push(k as u32);
            bases.push(update.base());
            let rank = tiles[k].spec().rank();
            let fields = update.shape_fields();
            let mut d = fields[..rank].to_vec();
            d.resize(5, 0);
            let mut s = fields[rank..].to_vec();
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
        let mode = if in_shared == 1 {
            "update_shared"
        } else {
            "update_global"
        };
        println!(
            "{mode}: {} of {MAPS} maps equal the host encode",
            MAPS - wrong
        );
        assert_eq!(wrong, 0, "{mode}: {wrong} of {MAPS} maps differ");
    }
}

// ---- one tile end to end, and the debug checks -----------------------------------------

/// u32 `[M][K]`, 16 x 32 boxes (128 B rows, the 128B swizzle), M, K and M's pitch at run time.
fn e_tile() -> ValidSpec {
    tma::validate(
        &TileSpec::new("mu_e", tma::DType::U32, [1, 1], [16, 32])
            .dim_names(["M", "K"])
            .swizzle(tma::Swizzle::B128)
            .global_extents([Extent::Runtime, Extent::Runtime])
            .stride_extents([Extent::Runtime, Extent::Static(1)]),
    )
    .unwrap()
}

fn misuse_plan() -> ValidKernelPlan {
    KernelPlan::new("map_misuse")
        .tile("E", &e_tile())
        .staging("box", &e_tile(), 1)
        .scratch("smem_map", 128, 128)
        .block_threads(32)
        .validate()
        .unwrap()
}

/// mode 0: update_global, acquire, load at (m0, k0), dump the box; 1: the same through
/// update_shared; 2: a load armed on a barrier that cannot complete (two arrivals expected, one
/// made), then an update of its map; 3: update_global alone (the bad-argument cases).
const MISUSE: &str = r#"
extern "C" __global__ void TMA_PLAN_MAP_MISUSE_LAUNCH_BOUNDS
map_misuse(CUtensorMap* maps, int mode, unsigned long long base, unsigned long long m, unsigned long long k,
           unsigned long long pitch, int m0, int k0, unsigned char* dump, int* out) {
  typedef tma_plan_map_misuse P;
  extern __shared__ __align__(16) unsigned char raw[];
  unsigned char* smem = P::base(raw);
  CUtensorMap* smem_map = reinterpret_cast<CUtensorMap*>(P::smem_map(smem));
  unsigned char* box = P::box(smem, 0u);
  __shared__ __align__(8) tma_mbarrier bar;
  if (threadIdx.x == 0) { tma_mbarrier_init(&bar, mode == 2 ? 2u : 1u); tma_fence_mbarrier_init(); }
  __syncthreads();
  const void* b = reinterpret_cast<const void*>(base);
  const E::map_shape shape{.M = m, .K = k, .stride_M = pitch};
  if (mode == 1) E::update_shared(&maps[0], smem_map, b, shape);
  if (threadIdx.x != 0) return;
  if (mode == 2) {
    E::arrive_expect_tx(&bar);
    E::load(&maps[0], &bar, box, {.M = 0, .K = 0});
  }
  if (mode != 1) E::update_global(&maps[0], b, shape);
  if (mode <= 1) {
    E::acquire(&maps[0]);
    E::arrive_expect_tx(&bar);
    E::load(&maps[0], &bar, box, {.M = m0, .K = k0});
    E::wait(&bar, 0);
    for (unsigned i = 0; i < E::SMEM_BYTES; ++i) dump[i] = box[i];
  }
  out[0] = 1;
}
"#;

fn misuse_source() -> Source {
    Source::kernel(&KernelSource::new().plan(&misuse_plan()).body(MISUSE)).unwrap()
}

#[test]
fn the_misuse_kernel_compiles() {
    let test = "the_misuse_kernel_compiles";
    if tma_test_support::skip::require_nvrtc_or_skip(test).is_none() {
        return;
    }
    for debug in [false, true] {
        let options = CompileOptions::new(Arch::Sm90a).debug_waits(debug);
        Compiler::global()
            .unwrap()
            .compile_source(&misuse_source(), &options)
            .unwrap_or_else(|e| panic!("{e}"));
    }
}

/// What one launch of `map_misuse` does.
struct Call {
    mode: i32,
    base: u64,
    m: u64,
    k: u64,
    pitch: u64,
    at: [i32; 2],
}

/// The old buffer (64 x 64 u32, dense) and the new one (48 rows of pitch 48, 40 used), random.
const OLD: (u64, u64) = (64, 64);
const NEW: (u64, u64, u64) = (48, 40, 48);

/// What a launch gave: the box's bytes or the error, the new buffer's bytes, its address.
type Launched = (Result<Vec<u8>, Error>, Vec<u8>, u64);

/// Runs `call` after encoding map 0 over the old buffer.
fn launch(test: &str, debug: bool, call: impl FnOnce(u64) -> Call) -> Option<Launched> {
    launch_n(test, debug, 1, call)
}

/// [`launch`], `times` launches of the module in a row (the first error ends them).
fn launch_n(
    test: &str,
    debug: bool,
    times: usize,
    call: impl FnOnce(u64) -> Call,
) -> Option<Launched> {
    tma_test_support::skip::require_gpu_or_skip(test)?;
    let ctx = cudarc::driver::CudaContext::new(0).unwrap();
    let stream = ctx.default_stream();
    let options = CompileOptions::new(Arch::Sm90a).debug_waits(debug);
    let module = Module::compile_and_load(
        &ctx,
        Compiler::global().unwrap(),
        &misuse_source(),
        &options,
    )
    .unwrap();
    let kernel = module.kernel("map_misuse").unwrap();
    let mut rng = XorShift::new(0x26e ^ u64::from(std::process::id()));
    let mut fill = |n: u64| -> Vec<u32> { (0..n).map(|_| rng.next_u64() as u32).collect() };
    let old = stream.clone_htod(&fill(OLD.0 * OLD.1)).unwrap();
    let new_host = fill(NEW.0 * NEW.2);
    let new = stream.clone_htod(&new_host).unwrap();
    let bound = e_tile().bind(&[OLD.0, OLD.1], Some(&[OLD.1, 1])).unwrap();
    let maps = vec![TensorMap::new(&bound, &old).unwrap()];
    let mut d_maps = stream.clone_htod(&maps).unwrap();
    let new_addr = {
        use cudarc::driver::DevicePtr;
        new.device_ptr(&stream).0
    };
    let c = call(new_addr);
    let smem_bytes = e_tile().plan().footprint_bytes as usize;
    let mut dump = stream.clone_htod(&vec![0xa5u8; smem_bytes]).unwrap();
    let mut out = stream.clone_htod(&[0i32]).unwrap();
    let cfg = kernel.plan_config(&stream, (1, 1, 1)).unwrap();
    // SAFETY: map_misuse(CUtensorMap*, int, u64 x4, int, int, unsigned char*, int*): one map
    // over a live 64 x 64 u32 buffer, a base inside a live buffer (or a deliberately bad one
    // the debug check refuses before any use), a box-sized dump, one int; the plan's launch.
    let result = (0..times).try_for_each(|_| unsafe {
        kernel
            .launch_builder(&cfg)
            .arg(&mut d_maps)
            .arg(&c.mode)
            .arg(&c.base)
            .arg(&c.m)
            .arg(&c.k)
            .arg(&c.pitch)
            .arg(&c.at[0])
            .arg(&c.at[1])
            .arg(&mut dump)
            .arg(&mut out)
            .launch_and_sync()
    });
    let result = result.map(|()| {
        assert_eq!(
            stream.clone_dtoh(&out).unwrap(),
            vec![1],
            "the kernel did not run"
        );
        stream.clone_dtoh(&dump).unwrap()
    });
    let bytes = new_host.iter().flat_map(|v| v.to_le_bytes()).collect();
    Some((result, bytes, new_addr))
}

/// A load through a map the kernel re-pointed reads the new buffer with the new dims: the
/// CPU model of the same spec bound to the new arguments, out-of-bounds fill included.
#[test]
fn gpu_a_load_through_a_device_updated_map_reads_the_new_buffer() {
    let test = "gpu_a_load_through_a_device_updated_map_reads_the_new_buffer";
    for debug in [false, true] {
        for mode in [0, 1] {
            let at = [40, 32]; // the box runs past the new M (48) and K (40)
            let Some((got, global, addr)) = launch(test, debug, |addr| Call {
                mode,
                base: addr,
                m: NEW.0,
                k: NEW.1,
                pitch: NEW.2,
                at,
            }) else {
                return;
            };
            let got = got.unwrap_or_else(|e| panic!("mode {mode}, debug {debug}: {e}"));
            let update = e_tile()
                .map_update(addr, &[NEW.0, NEW.1], &[NEW.2])
                .unwrap();
            let want = tma::model::load(update.bound(), &global, &[40, 32]).unwrap();
            assert_eq!(
                got, want,
                "mode {mode}, debug {debug}: the box differs from the model"
            );
            println!(
                "mode {mode} (debug {debug}): {} bytes as the model says",
                got.len()
            );
        }
    }
}

/// A debug build launched again on the same module: the second launch's CTA 0 updates the map
/// the first one loaded through (its record: CTA 0, a barrier of phase parity 0 that the fresh
/// launch's barrier has not completed). The record is another launch's (`%gridid`), so it is
/// not taken for a load in flight; the second load reads the new buffer as the model says.
#[test]
fn gpu_debug_a_load_of_an_earlier_launch_is_not_in_flight() {
    let test = "gpu_debug_a_load_of_an_earlier_launch_is_not_in_flight";
    let Some((got, global, addr)) = launch_n(test, true, 2, |addr| Call {
        mode: 0,
        base: addr,
        m: NEW.0,
        k: NEW.1,
        pitch: NEW.2,
        at: [40, 32],
    }) else {
        return;
    };
    let got = got.unwrap_or_else(|e| panic!("the second launch: {e}"));
    let update = e_tile()
        .map_update(addr, &[NEW.0, NEW.1], &[NEW.2])
        .unwrap();
    let want = tma::model::load(update.bound(), &global, &[40, 32]).unwrap();
    assert_eq!(got, want, "the second launch's box differs from the model");
    println!(
        "two launches (debug): {} bytes as the model says",
        got.len()
    );
}

/// The record a debug check must give.
fn expect_check(
    r: Option<Launched>,
    want_helper: &str,
    want_rule: Rule,
    want_dim: Option<u32>,
    want_value: impl FnOnce(i64) -> bool,
) {
    let Some((result, _, _)) = r else { return };
    match result {
        Err(e @ Error::DeviceCheck { .. }) => {
            println!("{e}");
            let Error::DeviceCheck {
                tile,
                helper,
                rule,
                dim,
                dim_name,
                value,
                ..
            } = e
            else {
                unreachable!()
            };
            assert_eq!(tile, "mu_e");
            assert_eq!(helper, want_helper);
            assert_eq!(rule, want_rule);
            assert_eq!(dim, want_dim);
            assert_eq!(
                dim_name.as_deref(),
                want_dim.map(|d| ["M", "K"][d as usize])
            );
            assert!(want_value(value), "value {value}");
        }
        other => panic!(
            "expected a DeviceCheck {want_rule:?}, got {:?}",
            other.map(|v| v.len())
        ),
    }
}

fn bad(mode: i32, addr: u64) -> Call {
    Call {
        mode,
        base: addr,
        m: NEW.0,
        k: NEW.1,
        pitch: NEW.2,
        at: [0, 0],
    }
}

#[test]
fn gpu_debug_a_misaligned_base_is_named() {
    let r = launch("gpu_debug_a_misaligned_base_is_named", true, |a| Call {
        base: a + 8,
        ..bad(3, a)
    });
    expect_check(
        r,
        "update_global/update_shared (base address)",
        Rule::BaseAddressAlignment,
        None,
        |v| v % 16 == 8,
    );
}

#[test]
fn gpu_debug_a_misaligned_stride_is_named() {
    let r = launch("gpu_debug_a_misaligned_stride_is_named", true, |a| Call {
        pitch: 50, // 200 B
        ..bad(3, a)
    });
    expect_check(
        r,
        "update_global/update_shared (global stride)",
        Rule::StrideAlignment,
        Some(0),
        |v| v == 50,
    );
}

#[test]
fn gpu_debug_a_dim_out_of_range_is_named() {
    let r = launch("gpu_debug_a_dim_out_of_range_is_named", true, |a| Call {
        k: 1 << 32,
        ..bad(3, a)
    });
    expect_check(
        r,
        "update_global/update_shared (global dim)",
        Rule::GlobalDimRange,
        Some(1),
        |v| v == 1 << 32,
    );
}

#[test]
fn gpu_debug_an_update_under_an_armed_load_is_named() {
    let r = launch(
        "gpu_debug_an_update_under_an_armed_load_is_named",
        true,
        |a| bad(2, a),
    );
    expect_check(
        r,
        "update_global/update_shared",
        Rule::MapUpdateInFlight,
        None,
        |v| v & 1 == 0, // the barrier's first phase (parity 0)
    );
}
