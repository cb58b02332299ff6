//! GPU paths: tensor-map encode and by-value push, cluster launch, large dynamic shared
//! memory, and hang-to-error. Skips visibly without a GPU (fails with TMA_REQUIRE_GPU=1).
//! The hang test traps the context, so it runs in its own process:
//! `cargo test -p tma-runtime --test gpu_runtime -- --ignored hang` (or with TMA_REQUIRE_GPU=1).
#![allow(clippy::panic, clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use cudarc::driver::CudaContext;
use tma_core::{validate, DType, TileSpec};
use tma_runtime::LaunchConfig;
use tma_runtime::{CompileOptions, Compiler, Module, Source};
use tma_runtime::{Error, TensorMap};
use tma_test_support::skip::require_gpu_or_skip;

/// The test kernels; [`src`] puts the tma prelude (`CUtensorMap`, the hang record) first.
const KERNELS: &str = r#"
extern "C" __global__ void copy_map(const __grid_constant__ CUtensorMap map, unsigned long long* out) {
    if (threadIdx.x < 16) out[threadIdx.x] = map.opaque[threadIdx.x];
}
extern "C" __global__ void cluster_rank(unsigned int* out) {
    unsigned int r;
    asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
    extern __shared__ unsigned char smem[];
    smem[threadIdx.x] = (unsigned char)r;
    __syncthreads();
    if (threadIdx.x == 0) out[blockIdx.x] = smem[0];
}
#ifdef TMA_DEBUG
extern "C" __global__ void fake_hang() {
    if (blockIdx.x == 1 && threadIdx.x == 5) {
        tma_hang_record* r = tma_debug_record;
        if (atomicCAS(&r->kind, 0u, 1u) == 0u) {
            r->block_x = blockIdx.x; r->block_y = 0; r->block_z = 0; r->thread = threadIdx.x;
            r->barrier = 0x40; r->phase = 1; r->expected_tx = 4096; r->tile_id = 0; r->waited_ns = 123;
            __threadfence_system();
        }
        __trap();
    }
}
#endif
"#;

fn src() -> String {
    tma_core::render::prelude() + KERNELS
}

fn setup(test: &str, debug: bool) -> Option<(Arc<CudaContext>, Arc<tma_runtime::Module>)> {
    let info = require_gpu_or_skip(test)?;
    let ctx = CudaContext::new(0).expect("context");
    let compiler = Compiler::global().expect("nvrtc");
    let opts = CompileOptions::new(info.arch.expect("tma arch")).debug_waits(debug);
    let module =
        Module::compile_and_load(&ctx, compiler, &Source::new(src()), &opts).expect("load");
    Some((ctx, module))
}

#[test]
fn tensor_map_is_pushed_by_value() -> Result<(), Error> {
    let Some((ctx, module)) = setup("tensor_map_is_pushed_by_value", false) else {
        return Ok(());
    };
    let stream = ctx.default_stream();
    let spec = TileSpec::new("probe", DType::F16, [64, 128], [16, 64]);
    let bound = validate(&spec)?.bound().expect("static");
    let buf = stream.alloc_zeros::<half::f16>(64 * 128).expect("alloc");
    let map = TensorMap::new(&bound, &buf)?;
    // Wrong element type and short buffers are refused before the driver.
    let wrong = stream.alloc_zeros::<f32>(64 * 128).expect("alloc");
    assert!(matches!(
        TensorMap::new(&bound, &wrong),
        Err(Error::DTypeMismatch { .. })
    ));
    let short = stream.alloc_zeros::<half::f16>(64 * 127).expect("alloc");
    assert!(matches!(
        TensorMap::new(&bound, &short),
        Err(Error::BufferTooSmall { .. })
    ));

    let mut out = stream.alloc_zeros::<u64>(16).expect("alloc");
    let kernel = module.kernel("copy_map")?;
    let cfg = LaunchConfig::new(&stream, (1, 1, 1), (32, 1, 1));
    // SAFETY: copy_map(CUtensorMap, u64*) with 16 u64 of output.
    unsafe {
        kernel
            .launch_builder(&cfg)
            .arg(&map)
            .arg(&mut out)
            .launch_and_sync()
    }?;
    let host = stream.clone_dtoh(&out).expect("copy");
    assert_eq!(host.as_slice(), &map.as_raw().opaque[..]);
    Ok(())
}

/// A bf16 map takes `half::bf16` buffers; `half::f16` and `u16` ones (same size, other
/// meaning) only through `new_raw_bits`, which encodes exactly the map `new` would.
#[test]
fn a_bf16_map_refuses_f16_and_u16_buffers_unless_raw_bits() -> Result<(), Error> {
    let Some((ctx, _module)) = setup(
        "a_bf16_map_refuses_f16_and_u16_buffers_unless_raw_bits",
        false,
    ) else {
        return Ok(());
    };
    let stream = ctx.default_stream();
    let spec = TileSpec::new("q", DType::BF16, [64, 128], [16, 64]);
    let bound = validate(&spec)?.bound().expect("static");
    let f16_buf = stream.alloc_zeros::<half::f16>(64 * 128).expect("alloc");
    let u16_buf = stream.alloc_zeros::<u16>(64 * 128).expect("alloc");
    for r in [
        TensorMap::new(&bound, &f16_buf),
        TensorMap::new(&bound, &u16_buf),
    ] {
        assert!(
            matches!(
                r,
                Err(Error::ElementTypeMismatch {
                    spec_dtype: DType::BF16,
                    ..
                })
            ),
            "{r:?}"
        );
    }
    let raw = TensorMap::new_raw_bits(&bound, &u16_buf)?;
    let (ptr, _record) = cudarc::driver::DevicePtr::device_ptr(&u16_buf, &stream);
    // SAFETY: the u16 buffer is live device memory of this context, 64 * 128 elements.
    let typed = unsafe { TensorMap::from_raw::<half::bf16>(&bound, ptr, 64 * 128 * 2) }?;
    assert_eq!(raw, typed, "raw bits encode the same map");
    let bf16_buf = stream.alloc_zeros::<half::bf16>(64 * 128).expect("alloc");
    TensorMap::new(&bound, &bf16_buf)?;
    Ok(())
}

#[test]
fn cluster_launch_with_large_dynamic_smem() -> Result<(), Error> {
    let Some((ctx, module)) = setup("cluster_launch_with_large_dynamic_smem", false) else {
        return Ok(());
    };
    let stream = ctx.default_stream();
    let mut out = stream.alloc_zeros::<u32>(8).expect("alloc");
    let kernel = module.kernel("cluster_rank")?;
    let cfg = LaunchConfig::new(&stream, (8, 1, 1), (128, 1, 1))
        .cluster((4, 1, 1))
        .dynamic_smem(100 * 1024);
    // SAFETY: cluster_rank(u32*) with one u32 per block.
    unsafe { kernel.launch_builder(&cfg).arg(&mut out).launch_and_sync() }?;
    assert_eq!(
        stream.clone_dtoh(&out).expect("copy"),
        vec![0, 1, 2, 3, 0, 1, 2, 3]
    );
    let bad = LaunchConfig::new(&stream, (6, 1, 1), (128, 1, 1)).cluster((4, 1, 1));
    // SAFETY: refused before the launch.
    let r = unsafe { kernel.launch_builder(&bad).arg(&mut out).launch() };
    assert!(matches!(r, Err(Error::LaunchShape { .. })), "{r:?}");
    Ok(())
}

/// `Module::compile_and_load` shares a module while someone holds it, and the cache keeps
/// neither the module nor its context alive: once the caller's handles go, the context goes
/// (the cache used to hold every module it loaded, and so every context, until exit).
#[test]
fn loaded_modules_are_shared_while_held_and_keep_no_context_alive() -> Result<(), Error> {
    let Some(info) =
        require_gpu_or_skip("loaded_modules_are_shared_while_held_and_keep_no_context_alive")
    else {
        return Ok(());
    };
    let compiler = Compiler::global()?;
    let source = Source::new(src());
    // A define of its own: no other test (same process, same primary context) holds a
    // module of this compile. Debug waits: the hang record holds the context too.
    let opts = CompileOptions::new(info.arch.expect("tma arch"))
        .debug_waits(true)
        .define("TMA_TEST_MODULE_CACHE", "");
    let ctx = CudaContext::new(0).expect("context");
    let a = Module::compile_and_load(&ctx, compiler, &source, &opts)?;
    let b = Module::compile_and_load(&ctx, compiler, &source, &opts)?;
    assert!(Arc::ptr_eq(&a, &b), "one compile loads once per context");
    let kernel = b.kernel("cluster_rank")?;
    let (weak_ctx, weak_module) = (Arc::downgrade(&ctx), Arc::downgrade(&a));
    drop((a, b, kernel, ctx));
    assert!(weak_module.upgrade().is_none(), "the cache holds no module");
    assert!(
        weak_ctx.upgrade().is_none(),
        "the cache keeps no context alive"
    );

    // The primary context again (likely at the same address): a new module, and it runs.
    let ctx = CudaContext::new(0).expect("context");
    let module = Module::compile_and_load(&ctx, compiler, &source, &opts)?;
    assert!(
        Arc::ptr_eq(module.context(), &ctx),
        "loaded into the new context"
    );
    let stream = ctx.default_stream();
    let mut out = stream.clone_htod(&[7u32, 7]).expect("alloc");
    let cfg = LaunchConfig::new(&stream, (2, 1, 1), (32, 1, 1)).dynamic_smem(32);
    // SAFETY: cluster_rank(u32*) with one u32 per block; 32 bytes of shared memory.
    unsafe {
        module
            .kernel("cluster_rank")?
            .launch_builder(&cfg)
            .arg(&mut out)
            .launch_and_sync()
    }?;
    assert_eq!(stream.clone_dtoh(&out).expect("copy"), vec![0, 0]);
    Ok(())
}

#[test]
#[ignore = "traps the CUDA context: run alone with --ignored"]
fn hang_becomes_barrier_timeout() -> Result<(), Error> {
    let Some((ctx, module)) = setup("hang_becomes_barrier_timeout", true) else {
        return Ok(());
    };
    let stream = ctx.default_stream();
    let kernel = module.kernel("fake_hang")?;
    let cfg = LaunchConfig::new(&stream, (2, 1, 1), (32, 1, 1));
    // SAFETY: fake_hang() takes no arguments.
    match unsafe { kernel.launch_builder(&cfg).launch_and_sync() } {
        Err(Error::BarrierTimeout {
            tile,
            block,
            thread,
            expected_tx,
            ..
        }) => {
            assert_eq!(
                (tile.as_str(), block, thread, expected_tx),
                // Text alone (no description): the record names the tile by its id.
                ("<tile 0>", [1, 0, 0], 5, 4096)
            );
        }
        other => panic!("expected BarrierTimeout, got {other:?}"),
    }
    Ok(())
}

/// The kernels above compile on any machine with NVRTC (CI catches source errors early).
#[test]
fn gpu_sources_compile_without_gpu() -> Result<(), Error> {
    if tma_test_support::skip::require_nvrtc_or_skip("gpu_sources_compile_without_gpu").is_none() {
        return Ok(());
    }
    let compiler = Compiler::global()?;
    // The hang record's global is there whenever the waits are bounded: debug, or release
    // with `bounded_waits(true)` (`-DTMA_BOUNDED_WAITS`); the release default is the bare loop.
    for (debug, bounded, record) in [
        (false, true, true),
        (true, true, true),
        (false, false, false),
        (true, false, true),
    ] {
        let opts = CompileOptions::new(tma_core::Arch::Sm90a)
            .debug_waits(debug)
            .bounded_waits(bounded);
        let c = compiler.compile(&src(), &opts)?;
        assert_eq!(
            c.ptx.contains("tma_debug_record"),
            record,
            "debug {debug}, bounded {bounded}"
        );
    }
    let default = CompileOptions::new(tma_core::Arch::Sm90a).debug_waits(false);
    let c = compiler.compile(&src(), &default)?;
    assert!(
        !c.ptx.contains("tma_debug_record"),
        "a default release build has the bare loop"
    );
    Ok(())
}
