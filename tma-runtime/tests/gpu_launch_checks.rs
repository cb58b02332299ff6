//! Launches the runtime refuses on the host, before the driver (ISSUE 12, item 3): arguments
//! whose number or sizes differ from the kernel's parameters (read with
//! `cuFuncGetParamInfo`), and dynamic shared memory that cannot hold the tiles the source
//! declares with their alignment slack (the source goes with its typed description,
//! `Source::kernel`; which kernel keeps a tile where is not described without a plan, so a
//! kernel that keeps none in dynamic shared memory says so: `unchecked_dynamic_smem`). Each test also runs the right launch and checks its
//! output exactly, so a check that refused everything, or nothing, fails. The outputs start
//! poisoned: a refused launch must leave them so. Skips visibly without a GPU (fails with
//! TMA_REQUIRE_GPU=1).
#![allow(clippy::panic, clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use cudarc::driver::{CudaContext, CudaSlice, CudaStream};
use half::bf16;
use tma_core::render::KernelSource;
use tma_core::{validate, DType, Swizzle, TileSpec, ValidSpec};
use tma_runtime::{
    CompileOptions, Compiler, Error, Kernel, LaunchConfig, Module, Source, TensorMap,
};
use tma_test_support::skip::require_gpu_or_skip;

const POISON: u64 = 0xdead_beef_dead_beef;
const POISON_BITS: u16 = 0xffff;

/// A 64 x 64 bf16 tile with the 128-byte swizzle (8 KB, 1024-byte aligned) of a 128 x 128
/// matrix.
fn tile() -> ValidSpec {
    let spec = TileSpec::new("swz", DType::BF16, [128, 128], [64, 64]).swizzle(Swizzle::B128);
    validate(&spec).expect("valid")
}

/// The kernels (`gpu_launch_checks.cu`), after the tile's helpers, numbered as their file,
/// with the source's description.
fn source(valid: &ValidSpec) -> Source {
    Source::kernel(&KernelSource::new().tile(valid).body_at(
        concat!(env!("CARGO_MANIFEST_DIR"), "/tests/gpu_launch_checks.cu"),
        1,
        include_str!("gpu_launch_checks.cu"),
    ))
    .expect("render")
}

struct Gpu {
    stream: Arc<CudaStream>,
    module: Arc<Module>,
}

fn setup(test: &str) -> Option<Gpu> {
    let info = require_gpu_or_skip(test)?;
    let ctx = CudaContext::new(0).expect("context");
    let arch = info.arch.expect("tma arch");
    let spec = tile().spec().clone().target(arch);
    let valid = validate(&spec).expect("valid");
    let module = Module::compile_and_load(
        &ctx,
        Compiler::global().expect("nvrtc"),
        &source(&valid),
        &CompileOptions::new(arch),
    )
    .expect("load");
    Some(Gpu {
        stream: ctx.default_stream(),
        module,
    })
}

/// Fresh random bf16 bits (never the poison).
fn random_bits(n: usize) -> Vec<bf16> {
    let mut s = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0x9e37_79b9, |d| d.as_nanos() as u64)
        | 1;
    eprintln!("seed {s:#x}");
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            bf16::from_bits((s >> 32) as u16 & 0x7fff)
        })
        .collect()
}

fn map_over(data: &CudaSlice<bf16>) -> TensorMap {
    let bound = tile().bound().expect("static dims");
    TensorMap::new(&bound, data).expect("encode")
}

#[test]
fn gpu_a_map_pushed_where_the_kernel_takes_a_pointer_is_refused() {
    let Some(gpu) = setup("gpu_a_map_pushed_where_the_kernel_takes_a_pointer_is_refused") else {
        return;
    };
    let s = &gpu.stream;
    let data = s.clone_htod(&random_bits(128 * 128)).unwrap();
    let map = map_over(&data);
    let value = s.clone_htod(&[41u64]).unwrap();
    let mut out = s.clone_htod(&[POISON]).unwrap();
    let kernel = gpu.module.kernel("read_ptr").unwrap();
    assert_eq!(kernel.param_bytes(), [8, 8]);
    // No shared memory at all: nothing of the source's tile to hold.
    let cfg = LaunchConfig::new(s, (1, 1, 1), (32, 1, 1)).unchecked_dynamic_smem();
    // SAFETY: refused before the driver (a 128-byte map for an 8-byte pointer).
    let r = unsafe {
        kernel
            .launch_builder(&cfg)
            .arg(&map)
            .arg(&mut out)
            .launch_and_sync()
    };
    match r {
        Err(e @ Error::ArgumentSize { .. }) => {
            assert!(
                matches!(
                    e,
                    Error::ArgumentSize {
                        index: 0,
                        expected_bytes: 8,
                        given_bytes: 128,
                        ..
                    }
                ),
                "{e:?}"
            );
            let text = e.to_string();
            assert!(
                text.contains("launch of `read_ptr`: argument 0 is 128 bytes"),
                "{text}"
            );
        }
        other => panic!("expected ArgumentSize, got {other:?}"),
    }
    assert_eq!(s.clone_dtoh(&out).unwrap(), [POISON], "nothing ran");
    // SAFETY: read_ptr(const u64*, u64*), one u64 each.
    unsafe {
        kernel
            .launch_builder(&cfg)
            .arg(&value)
            .arg(&mut out)
            .launch_and_sync()
    }
    .unwrap();
    assert_eq!(s.clone_dtoh(&out).unwrap(), [42]);
}

#[test]
fn gpu_a_pointer_pushed_where_the_kernel_takes_a_map_is_refused() {
    let Some(gpu) = setup("gpu_a_pointer_pushed_where_the_kernel_takes_a_map_is_refused") else {
        return;
    };
    let s = &gpu.stream;
    let data = s.clone_htod(&random_bits(128 * 128)).unwrap();
    let map = map_over(&data);
    let mut out = s.clone_htod(&[POISON; 16]).unwrap();
    let kernel = gpu.module.kernel("copy_map").unwrap();
    assert_eq!(kernel.param_bytes(), [128, 8]);
    // No shared memory at all: nothing of the source's tile to hold.
    let cfg = LaunchConfig::new(s, (1, 1, 1), (32, 1, 1)).unchecked_dynamic_smem();
    // SAFETY: refused before the driver (an 8-byte pointer for a 128-byte map).
    let r = unsafe {
        kernel
            .launch_builder(&cfg)
            .arg(&data)
            .arg(&mut out)
            .launch_and_sync()
    };
    assert!(
        matches!(
            r,
            Err(Error::ArgumentSize {
                index: 0,
                expected_bytes: 128,
                given_bytes: 8,
                ..
            })
        ),
        "{r:?}"
    );
    assert_eq!(s.clone_dtoh(&out).unwrap(), [POISON; 16], "nothing ran");
    // SAFETY: copy_map(CUtensorMap, u64*) with 16 u64 of output.
    unsafe {
        kernel
            .launch_builder(&cfg)
            .arg(&map)
            .arg(&mut out)
            .launch_and_sync()
    }
    .unwrap();
    assert_eq!(s.clone_dtoh(&out).unwrap(), map.as_raw().opaque);
}

#[test]
fn gpu_a_missing_argument_is_refused() {
    let Some(gpu) = setup("gpu_a_missing_argument_is_refused") else {
        return;
    };
    let s = &gpu.stream;
    let data = s.clone_htod(&random_bits(128 * 128)).unwrap();
    let map = map_over(&data);
    let mut out = s.clone_htod(&[POISON; 16]).unwrap();
    let kernel = gpu.module.kernel("copy_map").unwrap();
    // No shared memory at all: nothing of the source's tile to hold.
    let cfg = LaunchConfig::new(s, (1, 1, 1), (32, 1, 1)).unchecked_dynamic_smem();
    // SAFETY: refused before the driver (the output pointer is missing).
    let r = unsafe { kernel.launch_builder(&cfg).arg(&map).launch_and_sync() };
    match r {
        Err(Error::ArgumentCount {
            index,
            expected,
            given,
            ..
        }) => assert_eq!((index, expected, given), (1, vec![128, 8], vec![128])),
        other => panic!("expected ArgumentCount, got {other:?}"),
    }
    // One too many.
    let extra = 7i32;
    // SAFETY: refused before the driver.
    let r = unsafe {
        kernel
            .launch_builder(&cfg)
            .arg(&map)
            .arg(&mut out)
            .arg(&extra)
            .launch_and_sync()
    };
    assert!(
        matches!(r, Err(Error::ArgumentCount { index: 2, .. })),
        "{r:?}"
    );
    assert_eq!(s.clone_dtoh(&out).unwrap(), [POISON; 16], "nothing ran");
    // SAFETY: copy_map(CUtensorMap, u64*) with 16 u64 of output.
    unsafe {
        kernel
            .launch_builder(&cfg)
            .arg(&map)
            .arg(&mut out)
            .launch_and_sync()
    }
    .unwrap();
    assert_eq!(s.clone_dtoh(&out).unwrap(), map.as_raw().opaque);
}

/// A 128 x 128 source of fresh random bits, a poisoned destination, and a map over each:
/// what the round-trip kernels copy box (64, 64) between.
struct Roundtrip {
    host: Vec<bf16>,
    dst: CudaSlice<bf16>,
    src_map: TensorMap,
    dst_map: TensorMap,
    _src: CudaSlice<bf16>,
}

impl Roundtrip {
    fn new(s: &Arc<CudaStream>) -> Roundtrip {
        let host = random_bits(128 * 128);
        let src = s.clone_htod(&host).unwrap();
        let dst = s
            .clone_htod(&vec![bf16::from_bits(POISON_BITS); 128 * 128])
            .unwrap();
        Roundtrip {
            src_map: map_over(&src),
            dst_map: map_over(&dst),
            host,
            dst,
            _src: src,
        }
    }

    /// Launches a round-trip `kernel`: (src map, dst map, [align,] tx bytes, r0, c0) with
    /// the box at (64, 64); `align` only for `dynamic_roundtrip`.
    fn launch(&self, kernel: &Kernel, cfg: &LaunchConfig, align: Option<u32>) -> Result<(), Error> {
        let (tx, r0, c0) = (tile().tx_bytes() as u32, 64i32, 64i32);
        let mut b = kernel.launch_builder(cfg);
        b.arg(&self.src_map).arg(&self.dst_map);
        if let Some(align) = &align {
            b.arg(align);
        }
        b.arg(&tx).arg(&r0).arg(&c0);
        // SAFETY: the round-trip kernels take (CUtensorMap x2, [unsigned,] unsigned, int x2);
        // both maps cover live 128 x 128 buffers; a launch that gives too little shared
        // memory is refused before the driver (or the kernel holds no tile there).
        unsafe { b.launch_and_sync() }
    }

    /// The destination is still all poison: nothing ran.
    fn check_untouched(&self, s: &Arc<CudaStream>) {
        let dst = s.clone_dtoh(&self.dst).unwrap();
        assert!(
            dst.iter().all(|v| v.to_bits() == POISON_BITS),
            "nothing ran"
        );
    }

    /// After one launch: box (64, 64) equals the source, everything else is still poison.
    fn check_copied(&self, s: &Arc<CudaStream>) {
        let dst = s.clone_dtoh(&self.dst).unwrap();
        let mut wrong = 0;
        for r in 0..128 {
            for c in 0..128 {
                let i = r * 128 + c;
                let want = if r >= 64 && c >= 64 {
                    self.host[i].to_bits()
                } else {
                    POISON_BITS
                };
                wrong += usize::from(dst[i].to_bits() != want);
            }
        }
        assert_eq!(wrong, 0, "{wrong} of {} elements wrong", 128 * 128);
    }
}

#[test]
fn gpu_dynamic_smem_without_the_alignment_slack_is_refused() {
    let Some(gpu) = setup("gpu_dynamic_smem_without_the_alignment_slack_is_refused") else {
        return;
    };
    let s = &gpu.stream;
    let valid = tile();
    let (footprint, align) = (valid.plan().footprint_bytes, valid.plan().align_bytes);
    assert_eq!((footprint, align), (8192, 1024));
    let rt = Roundtrip::new(s);
    let kernel = gpu.module.kernel("dynamic_roundtrip").unwrap();
    assert_eq!(kernel.min_dynamic_smem(), footprint + align - 16);
    let align = Some(align as u32);
    for given in [0, footprint as u32, (footprint + 1024) as u32 - 17] {
        let cfg = LaunchConfig::new(s, (1, 1, 1), (128, 1, 1)).dynamic_smem(given);
        match rt.launch(&kernel, &cfg, align) {
            Err(e @ Error::DynamicSmemTooSmall { .. }) => {
                let text = e.to_string();
                assert!(
                    text.contains(&format!(
                        "launch of `dynamic_roundtrip`: {given} bytes of dynamic shared memory, but the \
                         largest tile its source declares needs at least 9200: `swz` 8192 B (align 1024) \
                         and 1008 bytes to align it"
                    )),
                    "{text}"
                );
            }
            other => panic!("{given} bytes: expected DynamicSmemTooSmall, got {other:?}"),
        }
    }
    rt.check_untouched(s);
    let cfg =
        LaunchConfig::new(s, (1, 1, 1), (128, 1, 1)).dynamic_smem(kernel.min_dynamic_smem() as u32);
    rt.launch(&kernel, &cfg, align).unwrap();
    rt.check_copied(s);
}

/// A kernel whose tile lives in static shared memory is held to the tile's dynamic shared
/// memory like any kernel of the source without a plan (nothing says where it keeps it: no
/// PTX is read), refused without the memory, and says so with
/// `LaunchConfig::unchecked_dynamic_smem`, which lets it run.
#[test]
fn gpu_a_kernel_without_dynamic_smem_opts_out_of_the_tiles() {
    let Some(gpu) = setup("gpu_a_kernel_without_dynamic_smem_opts_out_of_the_tiles") else {
        return;
    };
    let s = &gpu.stream;
    let rt = Roundtrip::new(s);
    let kernel = gpu.module.kernel("static_roundtrip").unwrap();
    assert_eq!(kernel.min_dynamic_smem(), 9200);
    let cfg = LaunchConfig::new(s, (1, 1, 1), (128, 1, 1));
    let r = rt.launch(&kernel, &cfg, None);
    assert!(
        matches!(
            r,
            Err(Error::DynamicSmemTooSmall {
                needed: 9200,
                given: 0,
                ..
            })
        ),
        "{r:?}"
    );
    rt.check_untouched(s);
    rt.launch(&kernel, &cfg.unchecked_dynamic_smem(), None)
        .unwrap();
    rt.check_copied(s);
}

/// A kernel that keeps its tile in static shared memory but also has a dynamic scratch array
/// uses dynamic shared memory, so the host check holds it to the tile; the launch opts out
/// (`LaunchConfig::unchecked_dynamic_smem`) and runs with only its scratch. The check still
/// refuses the same launch without the opt-out, so the opt-out is what lets it through.
#[test]
fn gpu_a_launch_can_opt_out_of_the_dynamic_smem_check() {
    let Some(gpu) = setup("gpu_a_launch_can_opt_out_of_the_dynamic_smem_check") else {
        return;
    };
    let s = &gpu.stream;
    let rt = Roundtrip::new(s);
    let kernel = gpu.module.kernel("static_tile_dynamic_scratch").unwrap();
    assert_eq!(kernel.min_dynamic_smem(), 9200);
    // 128 threads x 4 bytes of scratch: all the kernel's dynamic shared memory holds.
    let checked = LaunchConfig::new(s, (1, 1, 1), (128, 1, 1)).dynamic_smem(128 * 4);
    assert!(checked.check_dynamic_smem);
    let r = rt.launch(&kernel, &checked, None);
    assert!(
        matches!(
            r,
            Err(Error::DynamicSmemTooSmall {
                needed: 9200,
                given: 512,
                ..
            })
        ),
        "{r:?}"
    );
    rt.check_untouched(s);
    rt.launch(&kernel, &checked.unchecked_dynamic_smem(), None)
        .unwrap();
    rt.check_copied(s);
}

/// Every kernel of gpu_launch_checks.cu (its name in the module) and its parameters.
const KERNELS: [(&str, usize); 8] = [
    ("read_ptr", 2),
    ("copy_map", 2),
    ("dynamic_roundtrip", 6),
    ("static_roundtrip", 5),
    ("static_tile_dynamic_scratch", 5),
    ("no_params", 0),
    ("by_value", 2),
    ("_Z7mangledPii", 2),
];

/// The parameter count the runtime takes from the PTX (so that it never asks the driver past
/// the last parameter, an API error under compute-sanitizer) is the driver's, and so are the
/// sizes, for every kind of parameter here: none, pointers, `__grid_constant__` maps, a
/// 160-byte struct by value, and a kernel with a C++ (mangled) name.
#[test]
fn gpu_the_ptx_parameter_count_is_the_drivers() {
    let Some(gpu) = setup("gpu_the_ptx_parameter_count_is_the_drivers") else {
        return;
    };
    use cudarc::driver::sys;
    for (name, _) in KERNELS {
        let kernel = gpu.module.kernel(name).expect(name);
        // The driver's own answer: asked until it refuses, as the runtime no longer does.
        let mut sizes = Vec::new();
        loop {
            let (mut offset, mut size) = (0usize, 0usize);
            // SAFETY: a function of the loaded module; valid out-pointers.
            let r = unsafe {
                sys::cuFuncGetParamInfo(
                    kernel.function().cu_function(),
                    sizes.len(),
                    &mut offset,
                    &mut size,
                )
            };
            if r != sys::CUresult::CUDA_SUCCESS {
                assert_eq!(r, sys::CUresult::CUDA_ERROR_INVALID_VALUE, "{name}");
                break;
            }
            sizes.push(size);
        }
        assert_eq!(
            gpu.module.compiled().entry_param_count(name),
            Some(sizes.len()),
            "{name}"
        );
        assert_eq!(kernel.param_bytes(), sizes.as_slice(), "{name}");
    }
    assert_eq!(
        gpu.module
            .kernel("by_value")
            .expect("by_value")
            .param_bytes(),
        [160, 8]
    );
}

/// The kernels above compile on any machine with NVRTC (each with its parameters in the PTX);
/// the module carries the source's description (the tile's name, footprint and alignment), and
/// the text says nothing for the runtime to read back.
#[test]
fn launch_check_sources_compile_without_gpu() {
    if tma_test_support::skip::require_nvrtc_or_skip("launch_check_sources_compile_without_gpu")
        .is_none()
    {
        return;
    }
    let source = source(&tile());
    assert!(!source.text().contains("tma-tile"));
    let c = Compiler::global()
        .unwrap()
        .compile_source(&source, &CompileOptions::new(tma_core::Arch::Sm90a))
        .unwrap();
    assert!(c.log.is_empty(), "{}", c.log);
    let counts: Vec<_> = KERNELS
        .iter()
        .map(|(k, _)| c.entry_param_count(k))
        .collect();
    let declared: Vec<_> = KERNELS.iter().map(|(_, n)| Some(*n)).collect();
    assert_eq!(counts, declared);
    let t = c.tile(0).expect("tile 0");
    assert_eq!(
        (t.name.as_str(), t.smem_bytes, t.align_bytes),
        ("swz", 8192, 1024)
    );
    assert!(c.plans().is_empty() && c.tile(1).is_none());
}
