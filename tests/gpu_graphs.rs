//! CUDA graphs of tma launches. A graph of three chained TMA kernels (each loads a 128 x 128
//! u32 tile through an mbarrier, adds a number, stores it with a TMA store; its maps are
//! `__grid_constant__` parameters, so their 128 bytes are copied into the graph's nodes) is
//! captured with `Capture`, instantiated and replayed five times on fresh random input, every
//! output poisoned first and checked against the CPU's sums element by element (ragged edges:
//! TMA zero-fills the loads and clips the stores). The tile needs 64 KB of dynamic shared
//! memory, so the kernel's first launch, inside the capture, also opts it in.
//!
//! Inside the capture, what it cannot take is refused by name before the driver
//! (`Error::Capture`), and the capture survives it: compiling and loading a module not loaded
//! yet, `Module::load`, `launch_and_sync` (its launch is not recorded: the graph's result
//! would show it), `Module::synchronize`, a map array upload. What a capture can take is not
//! refused: `compile_and_load` of a module held, and a map encoded during the capture (used by
//! the last launch). A capture dropped without `end` leaves the stream usable.
//!
//! With cudarc's event tracking on, `Capture::begin` is refused, and under a capture begun
//! through cudarc a launch with a buffer argument and a map encode are refused (taking the
//! buffer's address would wait on an event recorded before the capture).
//!
//! Without a GPU the kernels still compile (NVRTC); the GPU tests skip visibly.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;

use cudarc::driver::sys::{CUgraphInstantiate_flags, CUstreamCaptureMode};
use cudarc::driver::{CudaContext, CudaSlice, CudaStream};
use tma::plan::{KernelPlan, ValidKernelPlan};
use tma::render::KernelSource;
use tma::runtime::driver::is_capturing;
use tma::runtime::{
    Capture, CompileOptions, Compiler, Error, Kernel, LaunchConfig, Module, Source, TensorMap,
    TensorMapArray,
};
use tma::{Arch, Tile};

const R: u64 = 3 * 128 + 40;
const C: u64 = 2 * 128 + 8;
const POISON: u32 = 0xdead_beef;
const REPLAYS: usize = 5;

tma::tma_2d! {
    /// u32, 128 x 128 boxes: 64 KB of shared memory per call (more than 48 KB: an opt-in).
    pub Step: u32,
    global = [R = 424, C = 264],
    boxed = [128, 128],
}

/// dst = src + add, one 128 x 128 tile per block; its shared memory and launch are its plan's.
const STEP: &str = r#"
extern "C" __global__ void TMA_PLAN_STEP_LAUNCH_BOUNDS step(const __grid_constant__ CUtensorMap src,
                                const __grid_constant__ CUtensorMap dst, unsigned add) {
  typedef tma_plan_step P;
  extern __shared__ __align__(16) unsigned char raw[];
  __shared__ alignas(8) tma_mbarrier bar;
  unsigned char* smem = P::box(P::base(raw), 0u);
  const int r = (int)blockIdx.y * T::BOX_R, c = (int)blockIdx.x * T::BOX_C;
  if (threadIdx.x == 0) { tma_mbarrier_init(&bar, 1u); tma_fence_mbarrier_init(); }
  __syncthreads();
  if (threadIdx.x == 0) {
    tma_expect<T>(&bar);
    T::load(&src, &bar, smem, {.R = r, .C = c});
  }
  tma_group<T>::wait(&bar, 0u);
  unsigned* v = reinterpret_cast<unsigned*>(smem);
  for (unsigned i = threadIdx.x; i < T::SMEM_BYTES / 4u; i += blockDim.x) v[i] += add;
  tma_store_token token = T::store_committed_by<tma_sync_block>(&dst, smem, {.R = r, .C = c}, threadIdx.x == 0);
  token.wait_read_by<tma_sync_block>();
  token.wait_complete();
}
"#;

/// A kernel with a buffer argument (cudarc tracks buffers, not maps).
const FILL: &str = r#"
extern "C" __global__ void TMA_PLAN_FILL_LAUNCH_BOUNDS fill(unsigned* out, unsigned v, unsigned n) {
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = v;
}
"#;

/// The step kernel's plan: the tile `T`, one call's staging, 128 threads.
fn step_plan() -> ValidKernelPlan {
    KernelPlan::new("step")
        .tile("T", Step::valid())
        .staging("box", Step::valid(), 1)
        .block_threads(128)
        .validate()
        .unwrap()
}

fn step_source() -> Source {
    Source::kernel(&KernelSource::new().plan(&step_plan()).body(STEP)).unwrap()
}

/// The fill kernel's plan: no shared memory, 256 threads.
fn fill_source() -> Source {
    let plan = KernelPlan::new("fill")
        .block_threads(256)
        .validate()
        .unwrap();
    Source::kernel(&KernelSource::new().plan(&plan).body(FILL)).unwrap()
}

fn options() -> CompileOptions {
    CompileOptions::new(Arch::Sm90a)
}

#[test]
fn graph_kernels_compile() {
    let test = "graph_kernels_compile";
    if tma_test_support::skip::require_nvrtc_or_skip(test).is_none() {
        return;
    }
    let compiler = Compiler::global().unwrap();
    for debug in [false, true] {
        let c = compiler
            .compile_source(&step_source(), &options().debug_waits(debug))
            .unwrap_or_else(|e| panic!("{e}"));
        assert!(c.ptx.contains(".entry step"));
    }
    let fill = compiler.compile_source(&fill_source(), &options()).unwrap();
    assert!(fill.ptx.contains(".entry fill"));
    assert_eq!(Step::SMEM_BYTES, 128 * 128 * 4);
}

fn random(n: usize, seed: &mut u64) -> Vec<u32> {
    (0..n)
        .map(|_| {
            *seed ^= *seed << 13;
            *seed ^= *seed >> 7;
            *seed ^= *seed << 17;
            (*seed >> 33) as u32
        })
        .collect()
}

fn map(buf: &CudaSlice<u32>) -> TensorMap {
    TensorMap::new(&Step::valid().bind(&[R, C], None).unwrap(), buf).unwrap()
}

/// One block per tile; block and dynamic shared memory from the step kernel's plan.
fn config(kernel: &Kernel, stream: &Arc<CudaStream>) -> LaunchConfig {
    let grid = (C.div_ceil(128) as u32, R.div_ceil(128) as u32, 1);
    kernel.plan_config(stream, grid).unwrap()
}

fn expect_capture_error<T: std::fmt::Debug>(what: &str, r: Result<T, Error>, operation: &str) {
    match r {
        Err(e @ Error::Capture { .. }) => {
            let s = e.to_string();
            println!("{what}: {s}");
            assert!(s.starts_with(operation), "{what}: {s}");
        }
        other => panic!("{what}: expected Error::Capture, got {other:?}"),
    }
}

#[test]
fn gpu_a_graph_of_tma_launches_replays_and_the_capture_refuses_what_it_cannot_take() {
    let test = "gpu_a_graph_of_tma_launches_replays_and_the_capture_refuses_what_it_cannot_take";
    if tma_test_support::skip::require_gpu_or_skip(test).is_none() {
        return;
    }
    let ctx = CudaContext::new(0).unwrap();
    let stream = ctx.new_stream().unwrap();
    // One stream orders the graph's work: no event tracking (Capture::begin requires it off).
    // SAFETY: every buffer of this test is used on `stream` only.
    unsafe { ctx.disable_event_tracking() };
    let compiler = Compiler::global().unwrap();
    // Warm first: compile, load, kernel, buffers, maps (all but one).
    let module = Module::compile_and_load(&ctx, compiler, &step_source(), &options()).unwrap();
    let kernel = module.kernel("step").unwrap();
    let n = (R * C) as usize;
    let mut seed = 0x9e37_79b9_7f4a_7c15u64 ^ u64::from(std::process::id());
    let mut a = stream.clone_htod(&random(n, &mut seed)).unwrap();
    let mut b = stream.clone_htod(&vec![POISON; n]).unwrap();
    let mut c = stream.clone_htod(&vec![POISON; n]).unwrap();
    let mut d = stream.clone_htod(&vec![POISON; n]).unwrap();
    let (map_a, map_b, map_c) = (map(&a), map(&b), map(&c));
    let cfg = config(&kernel, &stream);
    let (one, two, three, hundred) = (1u32, 2u32, 3u32, 100u32);

    assert!(!is_capturing(&stream).unwrap());
    let capture = Capture::begin(&stream).unwrap();
    assert!(is_capturing(&stream).unwrap());
    // SAFETY (each launch): step(CUtensorMap, CUtensorMap, unsigned) over live R x C buffers.
    unsafe {
        kernel
            .launch_builder(&cfg)
            .arg(&map_a)
            .arg(&map_b)
            .arg(&one)
            .launch()
    }
    .unwrap();
    unsafe {
        kernel
            .launch_builder(&cfg)
            .arg(&map_b)
            .arg(&map_c)
            .arg(&two)
            .launch()
    }
    .unwrap();

    // Refused by name; the capture goes on.
    let other = Source::kernel(
        &KernelSource::new()
            .tile_as(Step::valid(), "T")
            .body(&STEP.replace("v[i] += add", "v[i] += 2u * add")),
    )
    .unwrap();
    expect_capture_error(
        "compile_and_load of a module not loaded",
        Module::compile_and_load(&ctx, compiler, &other, &options()),
        "Module::compile_and_load during a CUDA graph capture",
    );
    expect_capture_error(
        "Module::load",
        Module::load(&ctx, module.compiled().clone()),
        "Module::load during a CUDA graph capture",
    );
    let map_d_self = map(&d);
    expect_capture_error(
        "launch_and_sync",
        // SAFETY: as above (d -> d + 100: recorded, it would show in the graph's result).
        unsafe {
            kernel
                .launch_builder(&cfg)
                .arg(&map_d_self)
                .arg(&map_d_self)
                .arg(&hundred)
                .launch_and_sync()
        },
        "synchronising a stream that is being captured",
    );
    expect_capture_error(
        "Module::synchronize",
        module.synchronize(&stream),
        "synchronising a stream that is being captured",
    );
    expect_capture_error(
        "TensorMapArray::upload",
        TensorMapArray::upload(&stream, vec![map_a]),
        "TensorMapArray upload or set during a CUDA graph capture",
    );
    // Taken: the module held, and a map encoded now (host only), used by the last launch.
    let held = Module::compile_and_load(&ctx, compiler, &step_source(), &options()).unwrap();
    assert!(Arc::ptr_eq(&held, &module));
    let map_d = map(&d);
    unsafe {
        kernel
            .launch_builder(&cfg)
            .arg(&map_c)
            .arg(&map_d)
            .arg(&three)
            .launch()
    }
    .unwrap();
    let graph = capture.end().unwrap();
    assert!(!is_capturing(&stream).unwrap());
    // Nothing ran while capturing.
    assert!(stream.clone_dtoh(&d).unwrap().iter().all(|&x| x == POISON));

    for replay in 0..REPLAYS {
        let input = random(n, &mut seed);
        stream.memcpy_htod(&input, &mut a).unwrap();
        for buf in [&mut b, &mut c, &mut d] {
            stream.memcpy_htod(&vec![POISON; n], buf).unwrap();
        }
        graph.launch().unwrap();
        module.synchronize(&stream).unwrap();
        for (name, buf, add) in [("b", &b, 1u32), ("c", &c, 3), ("d", &d, 6)] {
            let got = stream.clone_dtoh(buf).unwrap();
            let bad: Vec<usize> = (0..n)
                .filter(|&i| got[i] != input[i].wrapping_add(add))
                .collect();
            if let Some(&i) = bad.first() {
                panic!(
                    "replay {replay}: {name} wrong at {} of {n} elements; first at ({}, {}): {:#x}, \
                     want {:#x}",
                    bad.len(),
                    i as u64 / C,
                    i as u64 % C,
                    got[i],
                    input[i].wrapping_add(add)
                );
            }
        }
    }
    println!("{REPLAYS} replays of 3 launches ({R} x {C} u32, 64 KB tiles): every element right");

    // A capture dropped without `end`: ended, its graph discarded, the stream usable.
    {
        let dropped = Capture::begin(&stream).unwrap();
        unsafe {
            kernel
                .launch_builder(&cfg)
                .arg(&map_d)
                .arg(&map_d)
                .arg(&hundred)
                .launch()
        }
        .unwrap();
        drop(dropped);
    }
    assert!(!is_capturing(&stream).unwrap());
    let before = stream.clone_dtoh(&d).unwrap();
    unsafe {
        kernel
            .launch_builder(&cfg)
            .arg(&map_a)
            .arg(&map_d)
            .arg(&one)
            .launch_and_sync()
    }
    .unwrap();
    let a_now = stream.clone_dtoh(&a).unwrap();
    let d_now = stream.clone_dtoh(&d).unwrap();
    assert!(
        (0..n).all(|i| d_now[i] == a_now[i].wrapping_add(1)),
        "the dropped capture's launch ran, or the stream is stuck"
    );
    assert_ne!(before, d_now);
}

#[test]
fn gpu_event_tracking_and_the_default_stream_are_refused_before_the_driver() {
    let test = "gpu_event_tracking_and_the_default_stream_are_refused_before_the_driver";
    if tma_test_support::skip::require_gpu_or_skip(test).is_none() {
        return;
    }
    // Its own CudaContext value: cudarc keeps the tracking flag per value.
    let ctx = CudaContext::new(0).unwrap();
    let stream = ctx.new_stream().unwrap();
    assert!(ctx.is_event_tracking());
    expect_capture_error(
        "Capture::begin on the default stream",
        Capture::begin(&ctx.default_stream()),
        "Capture::begin on the context's default stream",
    );
    expect_capture_error(
        "Capture::begin with event tracking on",
        Capture::begin(&stream),
        "Capture::begin with cudarc's event tracking on",
    );
    assert!(
        !is_capturing(&stream).unwrap(),
        "a refused begin begins nothing"
    );

    let compiler = Compiler::global().unwrap();
    let fill = Module::compile_and_load(&ctx, compiler, &fill_source(), &options()).unwrap();
    let fill = fill.kernel("fill").unwrap();
    let n = 1000u32;
    let mut out = stream.clone_htod(&vec![POISON; n as usize]).unwrap();
    let cfg = fill.plan_config(&stream, (4, 1, 1)).unwrap();
    let seven = 7u32;
    let tile_buf = stream.clone_htod(&vec![0u32; (R * C) as usize]).unwrap();

    // A capture begun through cudarc, tracking on: tma refuses what would wait on an event
    // recorded before it, and the capture stays valid.
    stream
        .begin_capture(CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL)
        .unwrap();
    expect_capture_error(
        "a launch with a buffer argument",
        // SAFETY: fill(unsigned*, unsigned, unsigned) over a live buffer of n.
        unsafe {
            fill.launch_builder(&cfg)
                .arg(&mut out)
                .arg(&seven)
                .arg(&n)
                .launch()
        },
        "a buffer used on a stream that is being captured",
    );
    expect_capture_error(
        "TensorMap::new",
        TensorMap::new(&Step::valid().bind(&[R, C], None).unwrap(), &tile_buf),
        "a buffer used on a stream that is being captured",
    );
    // Nothing reached the driver: the capture ends valid (an empty graph).
    let ended = stream.end_capture(CUgraphInstantiate_flags(0));
    assert!(
        matches!(ended, Ok(Some(_))),
        "the capture was invalidated: {:?}",
        ended.err()
    );
    drop(tile_buf);
    // The stream works after it.
    unsafe {
        fill.launch_builder(&cfg)
            .arg(&mut out)
            .arg(&seven)
            .arg(&n)
            .launch_and_sync()
    }
    .unwrap();
    assert!(stream.clone_dtoh(&out).unwrap().iter().all(|&x| x == 7));

    // OBSERVED (not asserted): why the refusal exists. cudarc, tracking on, under a capture:
    // a memset waits on the buffer's events recorded before it.
    stream
        .begin_capture(CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL)
        .unwrap();
    let memset = stream.memset_zeros(&mut out);
    let end = stream.end_capture(CUgraphInstantiate_flags(0));
    println!(
        "OBSERVED: cudarc memset under capture with event tracking on: memset -> {memset:?}, \
         end_capture -> {:?}, context's recorded error -> {:?}",
        end.as_ref().map(|g| g.is_some()),
        ctx.check_err()
    );
}
