//! Interleaved activations (NC/8HWC8 f16, the layout of cuDNN/TensorRT's `kHWC8`-style
//! convolution inputs) loaded by TMA: one declaration whose innermost dim counts 16-byte
//! chunks (8 channels of one pixel), one channel slice per box, `repeat` for two slices per
//! call. The kernel unpacks each tile to plain NCHW, and the result must equal the logical
//! tensor exactly.
//!
//! Without a GPU it still validates the tile, prints its layout, compiles the kernel with
//! NVRTC for sm_90a, and runs the kernel's unpacking on the CPU model of TMA, checking that
//! it reads every element from the right place. Exits non-zero on any wrong result.
//! Run: `eval "$(scripts/cuda-tools.sh)"; cargo run --release --example 04-interleaved`.

use std::error::Error;

use half::f16;
use tma::model;
use tma::plan::KernelPlan;
use tma::render::KernelSource;
use tma::runtime::{CompileOptions, Compiler, Module, Source};
use tma::smem::ElementOffsets;
use tma::{Arch, EncodeArgs, Tile};

const N: usize = 2;
const C: usize = 64;
const H: usize = 32;
const W: usize = 32;

tma::tma_4d! {
    /// NC/8HWC8 f16 activations. `W` counts 16-byte chunks: chunk `w` holds the 8 channels
    /// of pixel `w` in one channel slice. A box is one slice (the hardware takes one position
    /// along dim 1) of 8 rows x 16 pixels; `repeat` brings two slices per call.
    pub Nc8hwc8: f16,
    global = [N = 2, C8 = 8, H = 32, W = 32],
    boxed = [1, 1, 8, 16],
    interleave = 16,
    swizzle = 128,
    repeat = [1, 2, 1, 1],
}

const BODY: &str = include_str!("04-interleaved.cu");

/// Index of logical element (n, c, h, w) in the packed NC/8HWC8 array.
fn packed_index(n: usize, c: usize, h: usize, w: usize) -> usize {
    (((n * (C / 8) + c / 8) * H + h) * W + w) * 8 + c % 8
}

/// What the kernel does with one tile in shared memory, on the CPU: the value it writes for
/// tile element (c, h, w), read where `Act::at` reads it (its arithmetic is
/// `ElementOffsets::offset`): channel c % 8 of the chunk at position (0, c / 8, h, w).
fn unpack(smem: &[u8], offsets: &ElementOffsets, c: usize, h: usize, w: usize) -> Option<u16> {
    let position = [0, c as u64 / 8, h as u64, w as u64];
    let o = offsets.offset(&position, c as u64 % 8)? as usize;
    Some(u16::from_le_bytes([*smem.get(o)?, *smem.get(o + 1)?]))
}

fn main() -> Result<(), Box<dyn Error>> {
    let valid = Nc8hwc8::valid();
    let bound = Nc8hwc8::bind(&[N as u64, (C / 8) as u64, H as u64, W as u64])?;
    let plan = valid.plan();
    println!(
        "tile {} -> CUDA struct {}",
        Nc8hwc8::NAME,
        Nc8hwc8::CUDA_NAME
    );
    println!(
        "  {} boxes (channel slices) of {} B, {} B apart; TX_BYTES = {}",
        plan.boxes,
        plan.box_bytes,
        plan.stride_bytes,
        Nc8hwc8::TX_BYTES
    );
    // 2 slices x 8 rows x 16 chunks x 16 B.
    if Nc8hwc8::TX_BYTES != 4096 {
        return Err(format!("TX_BYTES is {}, expected 4096", Nc8hwc8::TX_BYTES).into());
    }
    println!("{}", EncodeArgs::new(&bound));

    // Fresh random activations every run, logical NCHW, packed to NC/8HWC8.
    let mut state = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)?
        .as_nanos() as u64
        | 1;
    let logical: Vec<f16> = (0..N * C * H * W)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            f16::from_bits((state >> 16) as u16 & 0x7bff)
        })
        .collect();
    let mut packed = vec![f16::ZERO; logical.len()];
    for n in 0..N {
        for c in 0..C {
            for h in 0..H {
                for w in 0..W {
                    packed[packed_index(n, c, h, w)] = logical[((n * C + c) * H + h) * W + w];
                }
            }
        }
    }

    // The kernel's unpacking, on the CPU model of TMA, for every tile.
    let packed_bytes: Vec<u8> = packed
        .iter()
        .flat_map(|x| x.to_bits().to_le_bytes())
        .collect();
    let offsets = ElementOffsets::new(valid).ok_or("no element offsets")?;
    let mut wrong = 0usize;
    for (n, pair, hb, wb) in tiles() {
        let smem = model::load(
            &bound,
            &packed_bytes,
            &[n as i64, 2 * pair as i64, 8 * hb as i64, 16 * wb as i64],
        )?;
        for c in 0..16 {
            for h in 0..8 {
                for w in 0..16 {
                    let want = logical
                        [((n * C + 16 * pair + c) * H + 8 * hb + h) * W + 16 * wb + w]
                        .to_bits();
                    wrong += usize::from(unpack(&smem, &offsets, c, h, w) != Some(want));
                }
            }
        }
    }
    println!(
        "CPU model: the kernel's unpacking reads {wrong} of {} elements wrong",
        logical.len()
    );
    if wrong != 0 {
        return Err("the unpacking disagrees with the model of TMA".into());
    }

    // The kernel's plan: the tile (named `Act` for the kernel, a `using` alias), one staging
    // copy of it, 128 threads. The kernel's shared memory and its launch are the plan's.
    // `Source::kernel` carries the plan to the runtime: a hang names the tile, and a launch
    // that disagrees with the plan is refused.
    let kernel_plan = KernelPlan::new("nc8hwc8_to_nchw")
        .tile("Act", valid)
        .staging("act", valid, 1)
        .block_threads(128)
        .validate()?;
    let source = Source::kernel(&KernelSource::new().plan(&kernel_plan).body(BODY))?;
    let compiler = Compiler::global()?;
    let options = CompileOptions::new(Arch::Sm90a);
    // The helpers take coordinates as C++20 designated initializers. Until tma-runtime
    // passes -std=c++20 itself:
    let compiled = compiler.compile_source(&source, &options)?;
    println!(
        "compiled with NVRTC: {} B of CUBIN for sm_90a, {} TMA loads in the PTX",
        compiled.cubin.len(),
        compiled.ptx.matches("cp.async.bulk.tensor.4d").count()
    );
    if compiled.cubin.is_empty() {
        return Err("no CUBIN".into());
    }
    match tma::runtime::gpu_available() {
        Ok(gpu) => {
            println!(
                "GPU: {} (compute capability {:?})",
                gpu.name, gpu.compute_capability
            );
            run_on_gpu(&bound, &packed, &logical, compiler, &source, &options)
        }
        Err(e) => {
            println!("no GPU here ({e}); on an sm_90 GPU this example also runs the kernel.");
            Ok(())
        }
    }
}

/// Every tile: (n, pair of channel slices, 8-row band, 16-pixel strip).
fn tiles() -> impl Iterator<Item = (usize, usize, usize, usize)> {
    (0..N).flat_map(|n| {
        (0..C / 16).flat_map(move |p| {
            (0..H / 8).flat_map(move |hb| (0..W / 16).map(move |wb| (n, p, hb, wb)))
        })
    })
}

fn run_on_gpu(
    bound: &tma::BoundSpec,
    packed: &[f16],
    logical: &[f16],
    compiler: &Compiler,
    source: &Source,
    options: &CompileOptions,
) -> Result<(), Box<dyn Error>> {
    use cudarc::driver::CudaContext;
    use tma::runtime::TensorMap;

    let ctx = CudaContext::new(0)?;
    let stream = ctx.default_stream();
    let d_act = stream.clone_htod(packed)?;
    // Poisoned output (NaN bits): any element the kernel misses shows.
    let mut d_out = stream.clone_htod(&vec![0xffffu16; logical.len()])?;
    let map = TensorMap::new(bound, &d_act)?;
    let module = Module::compile_and_load(&ctx, compiler, source, options)?;
    let kernel = module.kernel("nc8hwc8_to_nchw")?;
    let grid = ((W / 16) as u32, (H / 8) as u32, (N * C / 16) as u32);
    let cfg = kernel.plan_config(&stream, grid)?; // block and shared memory: the plan's
    let (c, h, w) = (C as i32, H as i32, W as i32);
    // SAFETY: nc8hwc8_to_nchw(CUtensorMap, unsigned short*, int, int, int); the launch is
    // the plan's, which covers the kernel's shared memory.
    unsafe {
        kernel
            .launch_builder(&cfg)
            .arg(&map)
            .arg(&mut d_out)
            .arg(&c)
            .arg(&h)
            .arg(&w)
            .launch_and_sync()
    }?;
    let out = stream.clone_dtoh(&d_out)?;
    let wrong = out
        .iter()
        .zip(logical)
        .filter(|(o, l)| **o != l.to_bits())
        .count();
    println!(
        "GPU: NC/8HWC8 -> NCHW through TMA: {wrong} of {} elements differ",
        logical.len()
    );
    if wrong != 0 {
        return Err("the GPU result differs from the logical tensor".into());
    }
    println!("OK: bit for bit");
    Ok(())
}
