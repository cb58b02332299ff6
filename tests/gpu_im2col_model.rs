//! im2col model == hardware, bit for bit: thousands of random im2col specs and loads (ranks
//! 3-5, element sizes 1/2/4/8, every sm_90 swizzle, corners, traversal strides, filter
//! offsets, pixels that wrap rows and images and leave the tensor, channel coordinates past
//! C, zero and NaN fill) are loaded by TMA (`cp.async.bulk.tensor ... .im2col`) into shared
//! memory pre-filled with zeros and copied out raw, on fresh random data, and compared with
//! `tma_core::model::im2col`. The mbarrier must complete on exactly the model's byte count
//! (and, every 50th load, must not complete on 16 bytes more). A smaller corpus goes through
//! the rendered helpers (`T::load(&map, &bar, smem, {.N = ..}, {.H = ..})`), also under
//! `TMA_DEBUG`. Without a GPU the kernels are still compiled by NVRTC for sm_90a (visible skip
//! of the rest); `TMA_REQUIRE_GPU=1` fails instead.
//!
//! `TMA_GPU_SPECS` (default 3000), `TMA_GPU_SEED` (replay), `TMA_GPU_TRACE=1` (each load
//! before its launch). A mismatch prints the spec, the load, the first differing byte, the
//! element the model put there (n, spatial..., c) and the tensor elements whose bytes the
//! hardware wrote there instead; all of them go to `$OUT/im2col_mismatches.txt`.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

#[path = "gpu/support.rs"]
mod support;

use cudarc::driver::{CudaSlice, DevicePtr};
use std::sync::Arc;
use support::Device;
use tma::runtime::{ByValue, CompileOptions, LaunchConfig, Module, Source};
use tma_core::model::im2col::{self, Im2colElement};
use tma_core::render::Im2colCode;
use tma_core::{to_tma_order, Arch, BoundIm2col, Im2colEncodeArgs};
use tma_test_support::testgen::{gpu_seed, random_im2col, XorShift};

/// The harness's call, as `I2cCall` in im2col_harness.cu (TMA order).
#[repr(C)]
#[derive(Clone, Copy)]
struct I2cCall {
    coords: [i32; 5],
    offsets: [u16; 3],
}
// SAFETY: plain old data with the CUDA struct's layout.
unsafe impl cudarc::driver::DeviceRepr for I2cCall {}

fn harness_source() -> Source {
    Source::new(format!(
        "{}{}",
        tma_core::render::prelude(),
        include_str!("gpu/im2col_harness.cu")
    ))
}

fn spec_count() -> usize {
    std::env::var("TMA_GPU_SPECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(3000)
}

/// Everything needed to replay one load: the spec and the call.
fn describe(b: &BoundIm2col, coords: &[i64], offsets: &[i64]) -> String {
    let s = b.spec();
    format!(
        "{} rank {} global {:?} strides {:?} channels {} pixels {} lower {:?} upper {:?} estr {:?} swz {} oob {} | coords {:?} offsets {:?}",
        s.dtype,
        s.rank(),
        b.global(),
        b.strides(),
        s.channels_per_pixel,
        s.pixels_per_column,
        s.lower_corner,
        s.upper_corner,
        s.element_strides,
        s.swizzle.name(),
        s.oob_fill.name(),
        coords,
        offsets
    )
}

/// The tensor elements (user-order index) whose bytes equal `bytes`: the hardware's guess of
/// which element it wrote. At most 4.
fn tensor_matches(b: &BoundIm2col, global: &[u8], bytes: &[u8]) -> Vec<Vec<u64>> {
    let dims = b.global();
    let esize = bytes.len();
    let strides: Vec<u64> = b.strides().iter().map(|&s| s * esize as u64).collect();
    let total: u64 = dims.iter().product();
    let mut out = Vec::new();
    for lin in 0..total {
        let mut rest = lin;
        let mut idx = vec![0u64; dims.len()];
        for d in (0..dims.len()).rev() {
            idx[d] = rest % dims[d];
            rest /= dims[d];
        }
        let off: u64 = idx.iter().zip(&strides).map(|(i, s)| i * s).sum::<u64>() as u64;
        let off = off as usize;
        if global.get(off..off + esize) == Some(bytes) {
            out.push(idx);
            if out.len() == 4 {
                break;
            }
        }
    }
    out
}

/// The precise report of a differing load: first differing byte, the model's element there
/// and the hardware's guesses.
fn explain(
    b: &BoundIm2col,
    global: &[u8],
    elements: &[Im2colElement],
    want: &[u8],
    got: &[u8],
) -> String {
    let esize = b.spec().dtype.size_bytes().unwrap_or(1) as usize;
    let differing = want.iter().zip(got).filter(|(a, b)| a != b).count();
    let Some(first) = want.iter().zip(got).position(|(a, b)| a != b) else {
        return format!("lengths {} vs {}", want.len(), got.len());
    };
    let slot = first / esize * esize;
    let model = elements
        .iter()
        .find(|e| e.smem as usize == slot)
        .map(|e| {
            format!(
                "pixel {} channel {} = tensor {:?}{}",
                e.pixel,
                e.channel,
                e.index,
                if e.global.is_some() {
                    ""
                } else {
                    " (out of bounds: fill)"
                }
            )
        })
        .unwrap_or_else(|| "no element (padding, expected 0)".into());
    let hw_bytes = &got[slot..(slot + esize).min(got.len())];
    let hw = if hw_bytes.iter().all(|&x| x == 0) {
        "zeros (fill, padding or untouched)".to_string()
    } else if hw_bytes == tma_core::model::oob_nan_bytes(b.spec().dtype).as_slice() {
        "the OOB NaN".to_string()
    } else {
        format!("tensor elements {:?}", tensor_matches(b, global, hw_bytes))
    };
    format!(
        "{differing} of {} bytes differ; first at byte {first} (row {} of {} B pitch): model {:02x?} = {model}; hardware {:02x?} = {hw}",
        want.len(),
        first as u64 / (b.plan().box_bytes / u64::from(b.spec().pixels_per_column).max(1)).max(1),
        b.plan().box_bytes / u64::from(b.spec().pixels_per_column).max(1),
        &want[slot..(slot + esize).min(want.len())],
        hw_bytes,
    )
}

struct Loader {
    dev: Device,
    module: Arc<Module>,
}

impl Loader {
    /// Uploads `global`, encodes the map, launches one harness load expecting `tx` bytes;
    /// returns `window` bytes of shared memory and whether the phase completed.
    fn load(
        &self,
        b: &BoundIm2col,
        global: &[u8],
        coords: &[i64],
        offsets: &[i64],
        tx: u32,
        window: u32,
    ) -> Result<(Vec<u8>, bool), String> {
        let stream = &self.dev.stream;
        let gbuf = stream.clone_htod(global).map_err(|e| e.to_string())?;
        let ptr = gbuf.device_ptr(stream).0;
        let map = {
            self.dev.ctx.bind_to_thread().map_err(|e| e.to_string())?;
            // SAFETY: a context is current; the encode only reads the arguments.
            unsafe { tma::runtime::driver::encode_im2col_args(&Im2colEncodeArgs::new(b), ptr) }
                .map_err(|e| e.to_string())?
        };
        let mut call = I2cCall {
            coords: [0; 5],
            offsets: [0; 3],
        };
        for (t, &c) in to_tma_order(coords).iter().enumerate() {
            call.coords[t] = i32::try_from(c).map_err(|e| e.to_string())?;
        }
        for (t, &o) in to_tma_order(offsets).iter().enumerate() {
            call.offsets[t] = u16::try_from(o).map_err(|e| e.to_string())?;
        }
        let mut out: CudaSlice<u8> = stream
            .clone_htod(&vec![0xA5u8; window as usize])
            .map_err(|e| e.to_string())?;
        let mut status: CudaSlice<i32> = stream.alloc_zeros(1).map_err(|e| e.to_string())?;
        let kernel = self
            .module
            .kernel("im2col_harness_load")
            .map_err(|e| e.to_string())?;
        let cfg = LaunchConfig::new(stream, (1, 1, 1), (128, 1, 1))
            .dynamic_smem(support::harness_dynamic_smem(window));
        let rank = b.spec().rank() as i32;
        let fill = 0u32;
        // SAFETY: im2col_harness_load(CUtensorMap, I2cCall, int, unsigned x3, unsigned char*,
        // int*), the structs by value with the CUDA layout.
        unsafe {
            kernel
                .launch_builder(&cfg)
                .arg(&map)
                .arg(ByValue(&call))
                .arg(&rank)
                .arg(&tx)
                .arg(&window)
                .arg(&fill)
                .arg(&mut out)
                .arg(&mut status)
                .launch_and_sync()
        }
        .map_err(|e| e.to_string())?;
        let bytes = stream.clone_dtoh(&out).map_err(|e| e.to_string())?;
        let status = stream.clone_dtoh(&status).map_err(|e| e.to_string())?;
        drop(gbuf);
        Ok((bytes, status[0] == 1))
    }
}

#[test]
fn im2col_harness_compiles() {
    support::compile_or_skip(
        "im2col_harness_compiles",
        &harness_source(),
        &CompileOptions::new(Arch::Sm90a),
    );
}

#[test]
fn gpu_im2col_loads_match_the_model_bit_for_bit() {
    let Some(dev) = Device::open("gpu_im2col_loads_match_the_model_bit_for_bit") else {
        return;
    };
    let module = dev.load(&harness_source(), &CompileOptions::new(Arch::Sm90a));
    let loader = Loader { dev, module };
    let seed = gpu_seed();
    println!("seed {seed} (set TMA_GPU_SEED to replay)");
    let mut rng = XorShift::new(seed);
    let n = spec_count();
    let mut mismatches: Vec<String> = Vec::new();
    let mut coverage = std::collections::BTreeMap::<String, usize>::new();
    for i in 0..n {
        let (b, coords, offsets) = random_im2col(&mut rng);
        let what = describe(&b, &coords, &offsets);
        if std::env::var_os("TMA_GPU_TRACE").is_some() {
            println!("load #{i}: {what}");
        }
        let s = b.spec();
        *coverage.entry(format!("rank {}", s.rank())).or_default() += 1;
        *coverage
            .entry(format!("swizzle {}", s.swizzle.name()))
            .or_default() += 1;
        *coverage
            .entry(format!("{}-byte", s.dtype.size_bytes().unwrap_or(0)))
            .or_default() += 1;
        if s.element_strides.iter().any(|&e| e > 1) {
            *coverage.entry("strided".into()).or_default() += 1;
        }
        let mut global = vec![0u8; b.extent_bytes() as usize];
        rng.fill(&mut global);
        let elements = im2col::elements(&b, &coords, &offsets).expect("model");
        if elements.iter().any(|e| e.global.is_none()) {
            *coverage.entry("some out of bounds".into()).or_default() += 1;
        }
        if elements.iter().any(|e| e.index[0] != coords[0]) {
            *coverage
                .entry("wraps into the next image".into())
                .or_default() += 1;
        }
        let mut want = im2col::load(&b, &global, &coords, &offsets).expect("model");
        let footprint = b.plan().footprint_bytes;
        let window = (2 * footprint).min(support::harness_max_window(Arch::Sm90a)) as u32;
        want.resize(window as usize, 0);
        let tx = b.valid().tx_bytes() as u32;
        match loader.load(&b, &global, &coords, &offsets, tx, window) {
            Ok((got, true)) if got == want => {}
            Ok((got, true)) => mismatches.push(format!(
                "#{i} {what}\n    {}",
                explain(&b, &global, &elements, &want, &got)
            )),
            Ok((_, false)) => mismatches.push(format!(
                "#{i} {what}\n    the mbarrier did not complete on the model's {tx} bytes: the hardware delivers another count"
            )),
            Err(e) => {
                mismatches.push(format!("#{i} {what}\n    launch failed: {e}"));
                println!("launch failed on load #{i} (a sticky error ends the run): {what}: {e}");
                break;
            }
        }
        // More bytes than the model's must leave the phase open.
        if i % 50 == 0 {
            match loader.load(&b, &global, &coords, &offsets, tx + 16, window) {
                Ok((_, false)) => {}
                Ok((_, true)) => mismatches.push(format!(
                    "#{i} {what}\n    the mbarrier completed expecting {} bytes, 16 more than the model's: the hardware delivers more",
                    tx + 16
                )),
                Err(e) => {
                    mismatches.push(format!("#{i} {what}\n    launch failed: {e}"));
                    break;
                }
            }
        }
        if i > 0 && i % 500 == 0 {
            println!("  {i}/{n} loads, {} mismatches so far", mismatches.len());
        }
    }
    println!(
        "im2col loads: {n}, {} mismatches; coverage {coverage:?}",
        mismatches.len()
    );
    for m in mismatches.iter().take(20) {
        println!("MISMATCH {m}");
    }
    if let Some(dir) = std::env::var_os("OUT") {
        let _ = std::fs::write(
            std::path::Path::new(&dir).join("im2col_mismatches.txt"),
            mismatches.join("\n"),
        );
    }
    assert!(
        mismatches.is_empty(),
        "{} of {n} im2col loads differ from the model",
        mismatches.len()
    );
}

/// The kernel that loads through the rendered helpers of `b`: `T::load` with the coordinates
/// and offsets as designated initializers, user order.
fn helper_source(b: &BoundIm2col) -> Source {
    let code = Im2colCode::new(b.valid(), 0).unwrap();
    let s = b.spec();
    let k = s.spatial_rank();
    let coords: Vec<String> = (0..s.rank())
        .map(|d| format!(".{} = c[{d}]", s.dim_label(d)))
        .collect();
    let offsets: Vec<String> = (0..k)
        .map(|i| format!(".{} = o[{i}]", s.dim_label(i + 1)))
        .collect();
    let body = format!(
        r#"
struct I2cUser {{ int coords[5]; int offsets[3]; }};
extern "C" __global__ void im2col_helper(const __grid_constant__ CUtensorMap map, const __grid_constant__ I2cUser call,
                                         unsigned window, unsigned char* out, int* status) {{
  using T = {name};
  extern __shared__ __align__(16) unsigned char i2c_raw[];
  unsigned char* smem = i2c_raw + ((1024u - (tma_smem_addr(i2c_raw) & 1023u)) & 1023u);
  __shared__ tma_mbarrier bar;
  for (unsigned i = threadIdx.x; i < window; i += blockDim.x) smem[i] = 0;
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
  if (threadIdx.x == 0) {{ tma_mbarrier_init(&bar, 1); tma_fence_mbarrier_init(); }}
  __syncthreads();
  const int* c = call.coords;
  const int* o = call.offsets;
  if (threadIdx.x == 0) {{
    T::arrive_expect_tx(&bar);
    T::load(&map, &bar, smem, T::coords{{{coords}}}, T::offsets{{{offsets}}});
  }}
  T::wait(&bar, 0);
  if (threadIdx.x == 0) status[0] = 1;
  for (unsigned i = threadIdx.x; i < window; i += blockDim.x) out[i] = smem[i];
}}
"#,
        name = code.cuda_name(),
        coords = coords.join(", "),
        offsets = offsets.join(", "),
    );
    Source::new(format!(
        "{}{}{}",
        tma_core::render::prelude(),
        code.source(),
        body
    ))
}

/// Every third helper kernel under `TMA_DEBUG` (its checks, a 1 s wait bound); the others with
/// bounded waits (10 s): a byte count the hardware does not deliver is an error, not a hang.
fn helper_options(k: usize) -> CompileOptions {
    let opts = CompileOptions::new(Arch::Sm90a);
    if k % 3 == 0 {
        opts.define("TMA_DEBUG", "1")
    } else {
        opts.bounded_waits(true)
    }
}

/// A corpus of random im2col specs through the rendered helpers: NVRTC compiles each for
/// sm_90a (with and without `TMA_DEBUG`) on any machine; on a GPU each load equals the model.
#[test]
fn gpu_im2col_rendered_helpers_match_the_model() {
    let mut rng = XorShift::new(0x0001_2c01);
    let corpus: Vec<_> = (0..24).map(|_| random_im2col(&mut rng)).collect();
    let mut compiled = 0;
    for (k, (b, _, _)) in corpus.iter().enumerate() {
        let src = helper_source(b);
        let opts = helper_options(k);
        if support::compile_or_skip("gpu_im2col_rendered_helpers_match_the_model", &src, &opts)
            .is_none()
        {
            return;
        }
        compiled += 1;
    }
    println!("{compiled} rendered im2col helpers compiled for sm_90a");
    let Some(dev) = Device::open("gpu_im2col_rendered_helpers_match_the_model") else {
        return;
    };
    let mut mismatches = Vec::new();
    for (k, (b, coords, offsets)) in corpus.iter().enumerate() {
        let opts = helper_options(k);
        let module = dev.load(&helper_source(b), &opts);
        let mut global = vec![0u8; b.extent_bytes() as usize];
        rng.fill(&mut global);
        let footprint = b.plan().footprint_bytes as u32;
        let mut want = im2col::load(b, &global, coords, offsets).unwrap();
        want.resize(footprint as usize, 0);
        let stream = &dev.stream;
        let gbuf = stream.clone_htod(&global).unwrap();
        let map = tma::runtime::TensorMap::new_im2col_raw_bits::<u8, _>(b, &gbuf);
        // Element types wider than a byte: encode over the raw address.
        let map = match map {
            Ok(m) => m,
            Err(_) => {
                let ptr = gbuf.device_ptr(stream).0;
                dev.ctx.bind_to_thread().unwrap();
                // SAFETY: a context is current; the buffer holds the tensor.
                unsafe { tma::runtime::driver::encode_im2col_args(&Im2colEncodeArgs::new(b), ptr) }
                    .unwrap()
            }
        };
        #[repr(C)]
        #[derive(Clone, Copy)]
        struct I2cUser {
            coords: [i32; 5],
            offsets: [i32; 3],
        }
        // SAFETY: plain old data with the CUDA struct's layout.
        unsafe impl cudarc::driver::DeviceRepr for I2cUser {}
        let mut call = I2cUser {
            coords: [0; 5],
            offsets: [0; 3],
        };
        for (d, &c) in coords.iter().enumerate() {
            call.coords[d] = c as i32;
        }
        for (d, &o) in offsets.iter().enumerate() {
            call.offsets[d] = o as i32;
        }
        let mut out: CudaSlice<u8> = stream
            .clone_htod(&vec![0xA5u8; footprint as usize])
            .unwrap();
        let mut status: CudaSlice<i32> = stream.alloc_zeros(1).unwrap();
        let kernel = module.kernel("im2col_helper").unwrap();
        let cfg = LaunchConfig::new(stream, (1, 1, 1), (128, 1, 1))
            .dynamic_smem(support::harness_dynamic_smem(footprint));
        // SAFETY: im2col_helper(CUtensorMap, I2cUser, unsigned, unsigned char*, int*).
        let r = unsafe {
            kernel
                .launch_builder(&cfg)
                .arg(&map)
                .arg(ByValue(&call))
                .arg(&footprint)
                .arg(&mut out)
                .arg(&mut status)
                .launch_and_sync()
        };
        let what = describe(b, coords, offsets);
        match r {
            Err(e) => {
                mismatches.push(format!("#{k} {what}: {e}"));
                break;
            }
            Ok(()) => {
                let got = stream.clone_dtoh(&out).unwrap();
                if got != want {
                    let elements = im2col::elements(b, coords, offsets).unwrap();
                    mismatches.push(format!(
                        "#{k} {what}\n    {}",
                        explain(b, &global, &elements, &want, &got)
                    ));
                }
            }
        }
    }
    for m in &mismatches {
        println!("MISMATCH {m}");
    }
    assert!(
        mismatches.is_empty(),
        "{} rendered loads differ",
        mismatches.len()
    );
}
