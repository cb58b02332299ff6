//! Quickstart: Mirage MPK's tile (4096 x 1024 bf16, 64 x 64 boxes, 128B swizzle, two boxes
//! per call) declared once, then validated, laid out, pictured, rendered to CUDA, compiled
//! with NVRTC for sm_90a and — on a GPU — loaded and stored by TMA and checked bit for bit
//! against the CPU model of TMA.
//!
//! Run: `scripts/run.sh` (installs NVRTC 13.0 from NVIDIA's wheels into .cache/ first).
//! Without a GPU it stops after the compiled CUBIN and says so; it exits non-zero on any
//! wrong result.

use std::error::Error;

use tma::model::{self, picture};
use tma::plan::KernelPlan;
use tma::render::KernelSource;
use tma::runtime::{CompileOptions, Compiler, Module, Source};
use tma::{Arch, EncodeArgs, Tile};

tma::tma_2d! {
    /// Mirage MPK's example tile: a row-major bf16 matrix, two 64 x 64 boxes per call.
    pub MpkTile: bf16,
    global = [M = 4096, K = 1024],
    boxed = [64, 64],
    swizzle = 128,
    repeat = [1, 2],
    smem_stride = 4096,
}

/// One block per call: load two boxes into shared memory, dump block (0, 0)'s raw shared
/// memory, store the boxes to the output tensor at the same coordinates.
const BODY: &str = include_str!("01-quickstart.cu");

fn main() -> Result<(), Box<dyn Error>> {
    // 1. The declaration is validated at compile time; here is what it became.
    let valid = MpkTile::valid();
    let bound = MpkTile::bind(&[4096, 1024])?;
    let plan = valid.plan();
    println!(
        "tile {} -> CUDA struct {}",
        MpkTile::NAME,
        MpkTile::CUDA_NAME
    );
    println!(
        "  {} boxes of {} B each, {} B apart; footprint {} B, aligned to {} B",
        plan.boxes, plan.box_bytes, plan.stride_bytes, plan.footprint_bytes, plan.align_bytes
    );
    println!(
        "  TX_BYTES = {} (what the mbarrier must expect per call)",
        MpkTile::TX_BYTES
    );
    if MpkTile::TX_BYTES != 16384 {
        return Err(format!("TX_BYTES is {}, expected 16384", MpkTile::TX_BYTES).into());
    }
    println!("{}", EncodeArgs::new(&bound));

    // 2. What the 128B swizzle does to the first box, from the CPU model of TMA.
    println!("\nshared-memory picture of one box (global (row, col) of each 16-byte chunk):");
    println!("{}", picture::smem_picture(&bound));

    // 3. The kernel's plan: the tile (named `MpkTile` for the kernel, a `using` alias), one
    // staging copy of it in shared memory, 128 threads. The kernel takes its shared memory
    // from the plan's struct and the launch comes from the plan: nobody adds offsets by hand.
    let kernel_plan = KernelPlan::new("quickstart_roundtrip")
        .tile("MpkTile", valid)
        .staging("boxes", valid, 1)
        .block_threads(128)
        .validate()?;
    println!(
        "  kernel plan: {} threads, {} B of dynamic shared memory",
        kernel_plan.launch().block[0],
        kernel_plan.launch().dynamic_smem_bytes
    );

    // 4. Render the helpers, the plan and the kernel; compile with NVRTC for sm_90a.
    // `Source::kernel` carries what the source declares to the runtime: a hang names the tile,
    // and a launch that disagrees with the plan is refused.
    let source = Source::kernel(&KernelSource::new().plan(&kernel_plan).body(BODY))?;
    let compiler = match Compiler::global() {
        Ok(c) => c,
        Err(e) => {
            println!("\nNVRTC is not available, so the kernel was not compiled:\n  {e}");
            println!("get it with: eval \"$(scripts/cuda-tools.sh)\" (NVRTC 13.0 from NVIDIA's PyPI wheels)");
            return Err(e.into());
        }
    };
    let options = CompileOptions::new(Arch::Sm90a);
    // The helpers take coordinates as C++20 designated initializers ({.M = m0, .K = k0}).
    let compiled = compiler.compile_source(&source, &options)?;
    let tma_ops = compiled.ptx.matches("cp.async.bulk.tensor.2d").count();
    println!(
        "\ncompiled {} lines of CUDA with NVRTC: {} B of CUBIN for sm_90a, {tma_ops} TMA instructions in the PTX",
        source.text().lines().count(),
        compiled.cubin.len()
    );
    if compiled.cubin.is_empty() || tma_ops < 4 {
        return Err("the compiled kernel lacks its CUBIN or its TMA instructions".into());
    }

    // 5. On a GPU: run it and check every byte.
    match tma::runtime::gpu_available() {
        Ok(gpu) => run_on_gpu(&gpu, &bound, compiler, &source, &options),
        Err(e) => {
            println!("\nno GPU here ({e});\neverything up to the compiled CUBIN is done. On an sm_90 GPU this example also runs the kernel.");
            Ok(())
        }
    }
}

fn run_on_gpu(
    gpu: &tma::runtime::GpuInfo,
    bound: &tma::BoundSpec,
    compiler: &Compiler,
    source: &Source,
    options: &CompileOptions,
) -> Result<(), Box<dyn Error>> {
    use cudarc::driver::CudaContext;
    use half::bf16;
    use tma::runtime::TensorMap;

    println!(
        "\nGPU: {} (compute capability {:?})",
        gpu.name, gpu.compute_capability
    );
    let ctx = CudaContext::new(0)?;
    let stream = ctx.default_stream();
    let (m, k) = (4096usize, 1024usize);
    // Fresh random data every run; the output is poisoned so unwritten tiles show.
    let mut state = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)?
        .as_nanos() as u64
        | 1;
    let input: Vec<bf16> = (0..m * k)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            bf16::from_bits((state >> 16) as u16 & 0x7f7f)
        })
        .collect();
    let d_in = stream.clone_htod(&input)?;
    let d_out = stream.clone_htod(&vec![bf16::from_bits(0xffff); m * k])?;
    let mut d_dump = stream.clone_htod(&vec![0xa5u8; MpkTile::SMEM_BYTES as usize])?;
    let map_in = TensorMap::new(bound, &d_in)?;
    let map_out = TensorMap::new(bound, &d_out)?;
    let module = Module::compile_and_load(&ctx, compiler, source, options)?;
    let kernel = module.kernel("quickstart_roundtrip")?;
    // One block per call (64 x 128 elements); block and shared memory are the plan's.
    let cfg = kernel.plan_config(&stream, ((k / 128) as u32, (m / 64) as u32, 1))?;
    // SAFETY: quickstart_roundtrip(CUtensorMap, CUtensorMap, unsigned char*); the launch is
    // the plan's, which covers the kernel's shared memory.
    unsafe {
        kernel
            .launch_builder(&cfg)
            .arg(&map_in)
            .arg(&map_out)
            .arg(&mut d_dump)
            .launch_and_sync()
    }?;
    let out = stream.clone_dtoh(&d_out)?;
    let dump = stream.clone_dtoh(&d_dump)?;

    // Shared memory of block (0, 0) == the CPU model's load at (0, 0), bit for bit.
    let global_bytes: Vec<u8> = input
        .iter()
        .flat_map(|x| x.to_bits().to_le_bytes())
        .collect();
    let want_smem = model::load(bound, &global_bytes, &[0, 0])?;
    let smem_diff = want_smem.iter().zip(&dump).filter(|(a, b)| a != b).count();
    let out_diff = input
        .iter()
        .zip(&out)
        .filter(|(a, b)| a.to_bits() != b.to_bits())
        .count();
    println!(
        "shared memory vs CPU model: {smem_diff} of {} bytes differ",
        want_smem.len()
    );
    println!(
        "round trip through TMA load + store: {out_diff} of {} elements differ",
        m * k
    );
    if smem_diff != 0 || out_diff != 0 {
        return Err("TMA results differ from the model".into());
    }
    println!("OK: bit for bit");
    Ok(())
}
