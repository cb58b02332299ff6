//! Kernel plans end to end: one `KernelPlan` (a 3-stage ring of 32 x 32 u32 tiles, two
//! staging copies of the same tile for the TMA store, a scratch counter; block 160 = 128
//! consumer threads + a producer warp; cluster 2x1x1 from the ring) gives both the kernel's
//! shared-memory layout (`struct tma_plan_plan_copy`: the kernel computes no offset) and its
//! launch (`Kernel::plan_config`: block, cluster and dynamic shared memory from the plan, the
//! grid from the test). The kernel adds 1 to every element of a matrix on its way through the
//! ring and a staging copy; the output, poisoned first, is compared with the CPU's, and each
//! block's scratch counter with the tiles it owned. Then the same kernel launched with another
//! block, cluster or dynamic shared memory is refused on the host with `Error::PlanLaunch`,
//! naming both values, and the output stays as it was.
//!
//! Without a GPU the kernel still compiles (NVRTC, sm_90a, with and without debug checks), and
//! the compiled module carries the plan's launch.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use tma::pipeline::{Consumers, PipelineSpec};
use tma::plan::{KernelPlan, ValidKernelPlan};
use tma::render::KernelSource;
use tma::runtime::{CompileOptions, Compiler, Error, Module, Source, TensorMap};
use tma::{validate, Arch, DType, TileSpec, ValidSpec};

const ROWS: u64 = 32 * 37;
const COLS: u64 = 32 * 9;
const GRID: u32 = 16;
const POISON: u32 = 0xdead_beef;

fn tile() -> ValidSpec {
    validate(&TileSpec::new("pt", DType::U32, [ROWS, COLS], [32, 32]).dim_names(["r", "c"]))
        .unwrap()
}

fn plan() -> ValidKernelPlan {
    let ring = PipelineSpec::new("ring", 3, Consumers::Threads(128))
        .tile("a", &tile())
        .cluster([2, 1, 1])
        .validate()
        .unwrap();
    KernelPlan::new("plan_copy")
        .tile("PT", &tile())
        .pipeline(&ring)
        .staging("staged", &tile(), 2)
        .scratch("count", 4, 16)
        .block_threads(160)
        .validate()
        .unwrap()
}

const BODY: &str = include_str!("gpu/plan_copy.cu");

fn kernel_source() -> KernelSource {
    let plan = plan();
    // The struct's numbers are the plan's (the kernel body states none of them).
    let launch = plan.launch();
    let check = format!(
        "static_assert(tma_plan_plan_copy::DYNAMIC_SMEM_BYTES == {}u, \"the plan's launch\");\n",
        launch.dynamic_smem_bytes
    );
    KernelSource::new()
        .plan(&plan)
        .body(&check)
        .body_at("tests/gpu/plan_copy.cu", 1, BODY)
}

fn options(debug: bool) -> CompileOptions {
    CompileOptions::new(Arch::Sm90a).debug_waits(debug)
}

#[test]
fn the_plan_kernel_compiles_and_its_module_carries_the_plan() {
    let test = "the_plan_kernel_compiles_and_its_module_carries_the_plan";
    if tma_test_support::skip::require_nvrtc_or_skip(test).is_none() {
        return;
    }
    let compiler = Compiler::global().unwrap();
    let source = Source::kernel(&kernel_source()).unwrap();
    assert_eq!(source.plans(), std::slice::from_ref(plan().launch()));
    for debug in [false, true] {
        let compiled = compiler
            .compile_source(&source, &options(debug))
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(compiled.plan("plan_copy"), Some(plan().launch()));
        assert_eq!(compiled.plan("other"), None);
        // The same text without its description is another compile (its key covers the
        // description), with no plan: nothing is read back out of the text.
        let bare = compiler
            .compile_source(&Source::new(source.text()), &options(debug))
            .unwrap();
        assert_ne!(bare.key, compiled.key);
        assert!(bare.plans().is_empty() && bare.facts.is_none());
        assert_eq!(bare.plan("plan_copy"), None);
    }
    let launch = plan().launch().clone();
    println!("{launch}");
    assert_eq!((launch.block, launch.cluster), ([160, 1, 1], [2, 1, 1]));
}

#[test]
fn gpu_a_plan_kernel_launches_from_its_plan_and_only_so() {
    let test = "gpu_a_plan_kernel_launches_from_its_plan_and_only_so";
    let Some(_) = tma_test_support::skip::require_gpu_or_skip(test) else {
        return;
    };
    let ctx = cudarc::driver::CudaContext::new(0).unwrap();
    let stream = ctx.default_stream();
    let source = Source::kernel(&kernel_source()).unwrap();
    let module =
        Module::compile_and_load(&ctx, Compiler::global().unwrap(), &source, &options(false))
            .unwrap();
    let kernel = module.kernel("plan_copy").unwrap();
    assert_eq!(kernel.plan(), Some(plan().launch()));

    let n = (ROWS * COLS) as usize;
    let mut seed = 0x9e37_79b9_7f4a_7c15u64 ^ u64::from(std::process::id());
    let input: Vec<u32> = (0..n)
        .map(|_| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            (seed >> 32) as u32 & 0x7fff_ffff
        })
        .collect();
    let d_in = stream.clone_htod(&input).unwrap();
    let mut d_out = stream.clone_htod(&vec![POISON; n]).unwrap();
    let mut counts = stream.clone_htod(&vec![POISON; GRID as usize]).unwrap();
    let bound = tile().bind(&[ROWS, COLS], None).unwrap();
    let map_in = TensorMap::new(&bound, &d_in).unwrap();
    let map_out = TensorMap::new(&bound, &d_out).unwrap();
    let (tiles_r, tiles_c) = ((ROWS / 32) as i32, (COLS / 32) as i32);

    let cfg = kernel.plan_config(&stream, (GRID, 1, 1)).unwrap();
    println!(
        "{}; at most {} clusters at once",
        plan().launch(),
        kernel.max_active_clusters(&cfg).unwrap()
    );
    // SAFETY: plan_copy(CUtensorMap, CUtensorMap, int, int, unsigned*): two maps of the
    // tile over live ROWS x COLS buffers, the tile counts, GRID counters; the plan's launch.
    unsafe {
        kernel
            .launch_builder(&cfg)
            .arg(&map_in)
            .arg(&map_out)
            .arg(&tiles_r)
            .arg(&tiles_c)
            .arg(&mut counts)
            .launch()
    }
    .unwrap();
    module.synchronize(&stream).unwrap();
    let out = stream.clone_dtoh(&d_out).unwrap();
    let wrong = input
        .iter()
        .zip(&out)
        .filter(|(i, o)| i.wrapping_add(1) != **o)
        .count();
    assert_eq!(wrong, 0, "{wrong} of {n} elements wrong");
    let total = (tiles_r * tiles_c) as u32;
    let want: Vec<u32> = (0..GRID).map(|b| (total - b).div_ceil(GRID)).collect();
    assert_eq!(stream.clone_dtoh(&counts).unwrap(), want);

    // Off the plan: refused before the driver, naming both values; nothing ran.
    stream.memcpy_htod(&vec![POISON; n], &mut d_out).unwrap();
    let off = [
        ("block", cfg.clone().block_x(128)),
        ("cluster", {
            let mut c = cfg.clone();
            c.cluster = None;
            c
        }),
        ("dynamic shared memory", {
            let c = cfg.clone();
            let smem = c.dynamic_smem_bytes - 1024;
            c.dynamic_smem(smem)
        }),
    ];
    for (field, bad) in off {
        // SAFETY: refused on the host (checked below).
        let r = unsafe {
            kernel
                .launch_builder(&bad)
                .arg(&map_in)
                .arg(&map_out)
                .arg(&tiles_r)
                .arg(&tiles_c)
                .arg(&mut counts)
                .launch()
        };
        match r {
            Err(e @ Error::PlanLaunch { field: f, .. }) if f == field => println!("refused: {e}"),
            other => panic!("{field}: {other:?}"),
        }
    }
    module.synchronize(&stream).unwrap();
    assert!(stream
        .clone_dtoh(&d_out)
        .unwrap()
        .iter()
        .all(|&o| o == POISON));
}

trait BlockX {
    fn block_x(self, x: u32) -> Self;
}
impl BlockX for tma::runtime::LaunchConfig {
    fn block_x(mut self, x: u32) -> Self {
        self.block.0 = x;
        self
    }
}
