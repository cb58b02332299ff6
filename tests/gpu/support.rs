//! Shared support of the GPU tests: one context, the harness kernels, raw buffers, and the
//! mismatch report. Every GPU test starts with `Gpu::open` (or `Device::open`, for a test that
//! brings its own kernel), which prints a visible SKIP when there is no GPU (and fails instead
//! when `TMA_REQUIRE_GPU=1`); its NVRTC twin, `compile_or_skip`, runs without one.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant};

use cudarc::driver::{CudaContext, CudaSlice, CudaStream, DevicePtr};
use tma_core::model::ReduceOp;
use tma_core::{to_tma_order, Arch, BoundSpec, EncodeArgs};
use tma_runtime::ByValue;
use tma_runtime::{CompileOptions, Compiled, Compiler, Source};
use tma_runtime::{Kernel, LaunchConfig, Module, TensorMap};

/// Boxes per call the harness supports (MAX_BOXES in harness.cu).
pub const MAX_BOXES: usize = 64;

/// The harness kernels align their dynamic shared memory up to this (harness.cu's
/// `aligned_smem`: the 128B swizzle's period), so their offsets are the CPU model's.
pub const HARNESS_ALIGN: u64 = 1024;
/// The harness's own static shared memory: one mbarrier (harness.cu's `bar`, 8 bytes), with
/// the 16 bytes the model tests have always left it.
const HARNESS_STATIC_SMEM: u64 = 16;

/// The dynamic shared memory a harness launch gives a `window` of bytes from its aligned base:
/// the window placed as one region, alignment slack included (`SmemLayout` computes both).
pub fn harness_dynamic_smem(window: u32) -> u32 {
    tma_core::smem::SmemLayout::place([(u64::from(window), HARNESS_ALIGN)])
        .map(|l| l.dynamic_smem_bytes())
        .ok()
        .and_then(|b| u32::try_from(b).ok())
        .unwrap_or(u32::MAX)
}

/// The largest window one harness launch holds on `arch`: what the block may use, less the
/// harness's static mbarrier and the alignment slack of its dynamic base.
pub fn harness_max_window(arch: Arch) -> u64 {
    let room = arch.max_smem_per_block() - HARNESS_STATIC_SMEM;
    // dynamic_smem_bytes(window) = window + HARNESS_ALIGN, so the window is the room less that.
    let window = room - HARNESS_ALIGN;
    debug_assert_eq!(u64::from(harness_dynamic_smem(window as u32)), room);
    window
}

/// The `BoxPlan` struct of harness.cu: per box, TMA-order coordinates and a smem offset.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct BoxPlan {
    pub coords: [[i32; 5]; MAX_BOXES],
    pub smem_offset: [u32; MAX_BOXES],
}

// SAFETY: plain old data, the same layout as the CUDA struct.
unsafe impl cudarc::driver::DeviceRepr for BoxPlan {}
// SAFETY: all-zero bytes are a valid BoxPlan.
unsafe impl cudarc::driver::ValidAsZeroBits for BoxPlan {}

/// A file's `*_compiles` test: `source` compiled by NVRTC with `options` (a compile error
/// fails the test with NVRTC's log), or None after a visible SKIP without NVRTC.
pub fn compile_or_skip(
    test: &str,
    source: &Source,
    options: &CompileOptions,
) -> Option<Arc<Compiled>> {
    tma_test_support::skip::require_nvrtc_or_skip(test)?;
    Some(
        Compiler::global()
            .unwrap()
            .compile_source(source, options)
            .unwrap_or_else(|e| panic!("{e}")),
    )
}

/// Device 0 and its default stream, for a test that brings its own kernel.
pub struct Device {
    pub ctx: Arc<CudaContext>,
    pub stream: Arc<CudaStream>,
}

impl Device {
    /// Opens device 0, or prints why not and returns None.
    pub fn open(test: &str) -> Option<Device> {
        tma_test_support::skip::require_gpu_or_skip(test)?;
        let ctx = CudaContext::new(0).unwrap();
        let stream = ctx.default_stream();
        Some(Device { ctx, stream })
    }

    /// `source` compiled with `options` and loaded.
    pub fn load(&self, source: &Source, options: &CompileOptions) -> Arc<Module> {
        Module::compile_and_load(&self.ctx, Compiler::global().unwrap(), source, options).unwrap()
    }
}

/// sm_90a with debug waits: a wait that never completes ends in an error, not a hung test.
pub fn debug_waits() -> CompileOptions {
    CompileOptions::new(Arch::Sm90a).debug_waits(true)
}

/// The bound of [`short_debug_waits`]: 200 ms.
pub const SHORT_DEBUG_TIMEOUT_NS: u64 = 200_000_000;

/// Debug waits that give up after 200 ms instead of the default second: a hang test stays
/// short (a debug option, not a tile fact).
pub fn short_debug_waits() -> CompileOptions {
    debug_waits().define(
        "TMA_DEBUG_TIMEOUT_NS",
        format!("{SHORT_DEBUG_TIMEOUT_NS}ull"),
    )
}

/// Runs a launch meant to hang until the debug waits give up, and prints how it ended and
/// when: `after {elapsed:?}: {result:?}`.
pub fn timed<T: fmt::Debug>(launch: impl FnOnce() -> T) -> (T, Duration) {
    let start = Instant::now();
    let result = launch();
    let elapsed = start.elapsed();
    println!("after {elapsed:?}: {result:?}");
    (result, elapsed)
}

/// `n` bytes of xorshift64 (each the high byte of a 32-bit window), advancing `seed`.
pub fn random_bytes(n: usize, seed: &mut u64) -> Vec<u8> {
    (0..n)
        .map(|_| {
            *seed ^= *seed << 13;
            *seed ^= *seed >> 7;
            *seed ^= *seed << 17;
            (*seed >> 24) as u8
        })
        .collect()
}

pub struct Gpu {
    pub ctx: Arc<CudaContext>,
    pub stream: Arc<CudaStream>,
    pub module: Arc<Module>,
    load: Kernel,
    store: Kernel,
    out_dir: Option<std::path::PathBuf>,
}

/// The harness kernels after the tma prelude (its `CUtensorMap`, the host type's layout).
pub fn harness_source() -> String {
    format!(
        "{}{}",
        tma_core::render::prelude(),
        include_str!("harness.cu")
    )
}

impl Gpu {
    /// Opens device 0 and compiles the harness, or prints why not and returns None.
    pub fn open(test: &str) -> Option<Gpu> {
        let info = tma_test_support::skip::require_gpu_or_skip(test)?;
        println!(
            "device: {} (cc {:?}, {:?})",
            info.name, info.compute_capability, info.arch
        );
        let ctx = CudaContext::new(0).expect("context");
        let stream = ctx.default_stream();
        let source = Source::new(harness_source());
        let module = Module::compile_and_load(
            &ctx,
            Compiler::global().expect("NVRTC"),
            &source,
            &CompileOptions::new(Arch::Sm90a),
        )
        .expect("harness compiles");
        let load = module.kernel("harness_load").expect("harness_load");
        let store = module.kernel("harness_store").expect("harness_store");
        let out_dir = std::env::var_os("OUT").map(std::path::PathBuf::from);
        Some(Gpu {
            ctx,
            stream,
            module,
            load,
            store,
            out_dir,
        })
    }

    /// Device scratch memory whose address the validator test encodes over.
    pub fn scratch(&self, bytes: usize) -> u64 {
        let buf: CudaSlice<u8> = self.stream.alloc_zeros(bytes).expect("alloc");
        let ptr = {
            let (ptr, _g) = buf.device_ptr(&self.stream);
            ptr
        };
        std::mem::forget(buf); // lives for the whole test process
        ptr
    }

    /// `cuTensorMapEncodeTiled` on raw arguments: Ok or the driver's error text.
    pub fn encode_result(&self, args: &EncodeArgs, addr: u64) -> Result<TensorMap, String> {
        self.ctx.bind_to_thread().expect("bind");
        // SAFETY: a context is current; the driver only reads the arguments (it never
        // touches the memory at `addr` when encoding).
        unsafe { tma_runtime::driver::encode_args(args, addr) }.map_err(|e| match e {
            tma_runtime::Error::Encode { result, .. } => format!("{result:?}"),
            other => other.to_string(),
        })
    }

    fn plan(&self, bound: &BoundSpec, coords: &[i64]) -> (BoxPlan, u32) {
        let mut plan = BoxPlan {
            coords: [[0; 5]; MAX_BOXES],
            smem_offset: [0; MAX_BOXES],
        };
        let places = bound.valid().repeat_placements();
        assert!(places.len() <= MAX_BOXES, "{} boxes", places.len());
        for (k, p) in places.iter().enumerate() {
            let user: Vec<i32> = coords
                .iter()
                .zip(&p.global_offset)
                .map(|(&c, &o)| i32::try_from(c + o).expect("coords fit i32"))
                .collect();
            for (t, c) in to_tma_order(&user).into_iter().enumerate() {
                plan.coords[k][t] = c;
            }
            plan.smem_offset[k] = p.smem_offset as u32;
        }
        (plan, places.len() as u32)
    }

    /// Uploads a tensor and encodes its map (raw bytes: any element type).
    pub fn upload_tensor(&self, bound: &BoundSpec, bytes: &[u8]) -> (CudaSlice<u8>, TensorMap) {
        // 256 B of slack on both sides keeps every address 256-aligned like cudaMalloc's.
        let buf = self.stream.clone_htod(bytes).expect("upload");
        let ptr = {
            let (ptr, _g) = buf.device_ptr(&self.stream);
            ptr
        };
        bound
            .check_base_address(ptr)
            .expect("cudaMalloc is 256-aligned");
        let args = EncodeArgs::new(bound);
        let map = self
            .encode_result(&args, ptr)
            .unwrap_or_else(|e| panic!("encode: {e}\n{args}"));
        (buf, map)
    }

    /// TMA load of one call; returns the raw shared-memory bytes (footprint long).
    pub fn load(
        &self,
        bound: &BoundSpec,
        global: &[u8],
        coords: &[i64],
    ) -> Result<Vec<u8>, String> {
        let footprint = bound.plan().footprint_bytes as u32;
        self.load_window(bound, global, coords, footprint, 0)
    }

    /// TMA load of one call into shared memory pre-filled with `fill`, returning `window`
    /// bytes: a window larger than the footprint shows where the hardware really writes.
    pub fn load_window(
        &self,
        bound: &BoundSpec,
        global: &[u8],
        coords: &[i64],
        window: u32,
        fill: u32,
    ) -> Result<Vec<u8>, String> {
        let (gbuf, map) = self.upload_tensor(bound, global);
        let (plan, boxes) = self.plan(bound, coords);
        let tx = bound.plan().tx_bytes as u32;
        let rank = bound.spec().rank() as i32;
        let out = self.launch_load(&map, &plan, rank, boxes, tx, window, fill);
        drop(gbuf);
        out
    }

    /// One harness_load launch: the copies of `plan` into shared memory pre-filled with
    /// `fill`, `window` bytes back.
    #[allow(clippy::too_many_arguments)]
    fn launch_load(
        &self,
        map: &TensorMap,
        plan: &BoxPlan,
        rank: i32,
        boxes: u32,
        tx: u32,
        window: u32,
        fill: u32,
    ) -> Result<Vec<u8>, String> {
        let mut out: CudaSlice<u8> = self
            .stream
            .clone_htod(&vec![0xA5u8; window as usize])
            .map_err(|e| e.to_string())?;
        let cfg = LaunchConfig::new(&self.stream, (1, 1, 1), (128, 1, 1))
            .dynamic_smem(harness_dynamic_smem(window));
        // SAFETY: harness_load(CUtensorMap, BoxPlan, int, unsigned x4, unsigned char*), both
        // structs by value with the CUDA layout.
        unsafe {
            self.load
                .launch_builder(&cfg)
                .arg(map)
                .arg(ByValue(plan))
                .arg(&rank)
                .arg(&boxes)
                .arg(&tx)
                .arg(&window)
                .arg(&fill)
                .arg(&mut out)
                .launch_and_sync()
        }
        .map_err(|e| e.to_string())?;
        self.stream.clone_dtoh(&out).map_err(|e| e.to_string())
    }

    /// A TMA load straight from encode arguments, no spec: for probing layouts this toolkit
    /// refuses (interleave). `boxes`: TMA-order coordinates and smem offsets of each copy.
    pub fn load_raw(
        &self,
        args: &EncodeArgs,
        global: &[u8],
        boxes: &[([i32; 5], u32)],
        tx: u32,
        window: u32,
        fill: u32,
    ) -> Result<Vec<u8>, String> {
        let gbuf = self.stream.clone_htod(global).map_err(|e| e.to_string())?;
        let ptr = {
            let (ptr, _g) = gbuf.device_ptr(&self.stream);
            ptr
        };
        let map = self.encode_result(args, ptr)?;
        let mut plan = BoxPlan {
            coords: [[0; 5]; MAX_BOXES],
            smem_offset: [0; MAX_BOXES],
        };
        for (k, (c, off)) in boxes.iter().enumerate() {
            plan.coords[k] = *c;
            plan.smem_offset[k] = *off;
        }
        let out = self.launch_load(
            &map,
            &plan,
            args.rank as i32,
            boxes.len() as u32,
            tx,
            window,
            fill,
        );
        drop(gbuf);
        out
    }

    /// TMA store (op None) or reduce (Some(Add)) of one call from raw shared-memory bytes;
    /// returns the whole global tensor afterwards.
    pub fn store(
        &self,
        bound: &BoundSpec,
        before: &[u8],
        smem: &[u8],
        coords: &[i64],
        op: Option<ReduceOp>,
    ) -> Result<Vec<u8>, String> {
        let (gbuf, map) = self.upload_tensor(bound, before);
        let (plan, boxes) = self.plan(bound, coords);
        let footprint = bound.plan().footprint_bytes as u32;
        let smem_dev = self.stream.clone_htod(smem).map_err(|e| e.to_string())?;
        let rank = bound.spec().rank() as i32;
        let op_code: i32 = match op {
            None => 0,
            Some(ReduceOp::Add) => 1,
            Some(other) => return Err(format!("harness has no {other:?}")),
        };
        let cfg = LaunchConfig::new(&self.stream, (1, 1, 1), (128, 1, 1))
            .dynamic_smem(harness_dynamic_smem(footprint));
        // SAFETY: harness_store(CUtensorMap, BoxPlan, int, unsigned x2, const unsigned char*, int).
        unsafe {
            self.store
                .launch_builder(&cfg)
                .arg(&map)
                .arg(ByValue(&plan))
                .arg(&rank)
                .arg(&boxes)
                .arg(&footprint)
                .arg(&smem_dev)
                .arg(&op_code)
                .launch_and_sync()
        }
        .map_err(|e| e.to_string())?;
        self.stream.clone_dtoh(&gbuf).map_err(|e| e.to_string())
    }

    /// Writes a text file under $OUT (when set), for the runs on the GPU machine.
    pub fn write_text(&self, name: &str, text: &str) {
        if let Some(dir) = &self.out_dir {
            let _ = std::fs::write(dir.join(name), text);
        }
    }

    /// Saves every mismatch's spec and bytes under $OUT for offline study of the model.
    pub fn dump_mismatches(&self, what: &str, mismatches: &[Mismatch]) {
        let text: Vec<String> = mismatches.iter().map(|m| m.full()).collect();
        self.write_text(&format!("mismatches_{what}.txt"), &text.join("\n"));
    }
}

/// One spec on which hardware and model disagree.
pub struct Mismatch {
    pub index: usize,
    pub spec: String,
    pub detail: String,
    pub want: Vec<u8>,
    pub got: Vec<u8>,
}

impl Mismatch {
    pub fn new(index: usize, spec: String, want: &[u8], got: &[u8]) -> Mismatch {
        let differing = want.iter().zip(got).filter(|(a, b)| a != b).count();
        let first = want.iter().zip(got).position(|(a, b)| a != b);
        let detail = format!(
            "{differing} of {} bytes differ (lengths {} vs {}), first at {first:?}",
            want.len().min(got.len()),
            want.len(),
            got.len()
        );
        Mismatch {
            index,
            spec,
            detail,
            want: want.to_vec(),
            got: got.to_vec(),
        }
    }
    pub fn error(index: usize, spec: String, e: String) -> Mismatch {
        Mismatch {
            index,
            spec,
            detail: format!("error: {e}"),
            want: vec![],
            got: vec![],
        }
    }
    fn full(&self) -> String {
        fn hex(b: &[u8]) -> String {
            b.iter().map(|x| format!("{x:02x}")).collect()
        }
        format!(
            "#{} {}\n  {}\n  want {}\n  got  {}",
            self.index,
            self.spec,
            self.detail,
            hex(&self.want),
            hex(&self.got)
        )
    }
}

impl fmt::Display for Mismatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "#{} {}: {}", self.index, self.spec, self.detail)
    }
}
