//! JIT costs of one realistic kernel source: examples/01-quickstart.rs's, the MPK tile's
//! helpers (bf16, 128B swizzle, two boxes per call) and its TMA round-trip kernel, ~540 lines
//! of CUDA, compiled for the GPU's arch (sm_90a without a GPU) with default `CompileOptions`.
//!
//! Rows, each against a baseline measured in the same run:
//! - raw NVRTC (cudarc's `nvrtc` API, the runtime's arguments from
//!   `CompileOptions::nvrtc_args`, create + compile + log + PTX + CUBIN) vs a tma cold compile
//!   (fresh `Compiler`, empty temporary cache dir, so it also writes the disk entry) and with
//!   the caches off (as `TMA_JIT_NO_CACHE=1`); the three are interleaved so a busy machine
//!   slows them alike (goal: within 10%);
//! - in-process cache hit of a held `Source`, of a `&str` at an address the compiler saw
//!   (compared with the cached text), and of a `&str` at a new address (hashed) (median of
//!   batches; goal < 5 us);
//! - disk cache hit in a fresh process: this binary re-runs itself (`TMA_JIT_BENCH_CHILD` =
//!   the warm cache dir) 20 times; each child times one `compile_source` (goal < 1 ms), and
//!   also reports what building its `Compiler` cost (first `dlopen` of libnvrtc, not a goal);
//! - GPU only: `Module::compile_and_load` (compile already cached, module not yet loaded) vs raw
//!   `cuModuleLoadData` of the same CUBIN (goal, this bench's own: within 10%), and the
//!   loaded-module cache hit (goal < 5 us).
//! - warm start of the GEMM example (examples/05-gemm, configuration L5, its file by path) with
//!   a precompiled cache: this binary re-runs itself (`TMA_JIT_BENCH_WARM_START` = the warm
//!   dir) 10 times; each child declares and renders the kernel, compiles it (a disk hit: every
//!   child must report 0 NVRTC compiles), creates the CUDA context, loads the module, allocates
//!   a small problem and encodes its maps, and prints READY when its first launch is ready;
//!   the parent times spawn to READY (goal: <= 50 ms), the child its phases. Then the child
//!   launches once and checks every output element was written. Without a GPU the children
//!   stop after the compile (the CPU part of the row).
//!
//! Nothing touches the user's cache: every `Compiler` here has its own temporary directory
//! (removed at the end). Without NVRTC: prints SKIP and exits 0; without a GPU the GPU rows
//! say "no GPU".
//! Run: `eval "$(scripts/cuda-tools.sh)"; cargo bench --bench jit`

use std::error::Error;
use std::ffi::CString;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use cudarc::driver::CudaContext;
use cudarc::nvrtc::{result as nv, sys as nvsys, Ptx};
use tma::plan::KernelPlan;
use tma::render::KernelSource;
use tma::runtime::{CompileOptions, Compiler, JitConfig, Module, Source, TensorMap};
use tma::{Arch, Tile};

type Res<T> = Result<T, Box<dyn Error>>;

/// Set in the children: the warm cache dir to time one disk hit against.
const CHILD_ENV: &str = "TMA_JIT_BENCH_CHILD";
/// Set in the children: the arch name (`sm_90a`, ...) the parent compiled for.
const CHILD_ARCH_ENV: &str = "TMA_JIT_BENCH_ARCH";
/// Set in the warm-start children: the warm cache dir holding the GEMM's compile.
const WARM_START_ENV: &str = "TMA_JIT_BENCH_WARM_START";
/// Set in the warm-start children when the parent found no usable GPU.
const WARM_START_NO_GPU_ENV: &str = "TMA_JIT_BENCH_WARM_START_NO_GPU";
const WARM_CHILDREN: usize = 10;

/// The GEMM example's configurations and kernel source (its file, by path).
#[allow(dead_code)]
#[path = "../examples/05-gemm/kernel.rs"]
mod gemm;

const COMPILE_REPS: usize = 15;
const CHILDREN: usize = 20;
const HIT_BATCH: usize = 200;
const HIT_BATCHES: usize = 200;
const LOAD_REPS: usize = 30;
/// Buffers holding the same text, cycled so that the compiler never saw the address before
/// (more than the in-process cache remembers).
const NEW_ADDRESS_BUFFERS: usize = 600;

tma::tma_2d! {
    /// Mirage MPK's example tile, as in examples/01-quickstart.rs.
    pub MpkTile: bf16,
    global = [M = 4096, K = 1024],
    boxed = [64, 64],
    swizzle = 128,
    repeat = [1, 2],
    smem_stride = 4096,
}

/// The quickstart's kernel.
const BODY: &str = include_str!("../examples/01-quickstart.cu");

/// The quickstart's source: its plan (as in examples/01-quickstart.rs) and its kernel.
fn kernel_source() -> Res<String> {
    let plan = KernelPlan::new("quickstart_roundtrip")
        .tile("MpkTile", MpkTile::valid())
        .staging("boxes", MpkTile::valid(), 1)
        .block_threads(128)
        .validate()?;
    Ok(KernelSource::new().plan(&plan).body(BODY).build()?)
}

/// Default options (tma-runtime passes the `-std=c++20` the helpers need).
fn options_for(arch: Arch) -> CompileOptions {
    CompileOptions::new(arch)
}

fn arch_from_name(name: &str) -> Option<Arch> {
    [Arch::Sm90a, Arch::Sm100a, Arch::Sm120a]
        .into_iter()
        .find(|a| a.nvrtc_name() == name)
}

/// A compiler with its own cache dir (never the user's), caches on, no debug/dump.
fn compiler_at(dir: &Path) -> Res<Compiler> {
    Ok(Compiler::with_config(JitConfig {
        debug: false,
        dump_dir: None,
        cache: true,
        cache_dir: Some(dir.to_path_buf()),
    })?)
}

/// A compiler with no cache at all (what `TMA_JIT_NO_CACHE=1` gives).
fn compiler_uncached() -> Res<Compiler> {
    Ok(Compiler::with_config(JitConfig {
        debug: false,
        dump_dir: None,
        cache: false,
        cache_dir: None,
    })?)
}

fn us(start: Instant) -> f64 {
    start.elapsed().as_secs_f64() * 1e6
}

/// Median, p10, p90 (linear interpolation) and count.
#[derive(Clone, Copy, Debug)]
struct Stats {
    median: f64,
    p10: f64,
    p90: f64,
    n: usize,
}

impl Stats {
    fn of(mut v: Vec<f64>) -> Stats {
        v.sort_by(f64::total_cmp);
        let q = |p: f64| {
            if v.is_empty() {
                return f64::NAN;
            }
            let x = p * (v.len() - 1) as f64;
            let (lo, hi) = (x.floor() as usize, x.ceil() as usize);
            v[lo] + (v[hi] - v[lo]) * (x - lo as f64)
        };
        Stats {
            median: q(0.5),
            p10: q(0.1),
            p90: q(0.9),
            n: v.len(),
        }
    }
}

/// Goal of a row: at most `limit_us`, or at most `ratio` x the baseline.
#[derive(Clone, Copy)]
enum Goal {
    None,
    Below(f64),
    RatioAtMost(f64),
}

struct Row {
    name: String,
    result: Result<(Stats, Option<f64>), String>,
    goal: Goal,
}

fn fmt_time(us: f64) -> String {
    if us >= 1e6 {
        format!("{:.2} s", us / 1e6)
    } else if us >= 1e3 {
        format!("{:.1} ms", us / 1e3)
    } else if us >= 10.0 {
        format!("{us:.1} us")
    } else {
        format!("{us:.3} us")
    }
}

fn print_table(rows: &[Row]) {
    println!(
        "| {:<48} | {:>10} | {:>10} | {:>10} | {:>4} | {:>8} | {:>10} | {:<6} |",
        "row", "median", "p10", "p90", "n", "ratio", "goal", "met"
    );
    println!(
        "| {:-<48} | {:->10} | {:->10} | {:->10} | {:->4} | {:->8} | {:->10} | {:-<6} |",
        "", "", "", "", "", "", "", ""
    );
    for r in rows {
        let goal = match r.goal {
            Goal::None => "-".to_string(),
            Goal::Below(l) => format!("< {}", fmt_time(l)),
            Goal::RatioAtMost(x) => format!("<= {x:.2}x"),
        };
        match &r.result {
            Ok((s, ratio)) => {
                let met = match r.goal {
                    Goal::None => "-",
                    Goal::Below(l) if s.median < l => "met",
                    Goal::RatioAtMost(x) if ratio.is_some_and(|q| q <= x) => "met",
                    _ => "MISSED",
                };
                let ratio = match ratio {
                    None => "-".to_string(),
                    Some(q) if *q < 0.01 => format!("{q:.1e}x"),
                    Some(q) => format!("{q:.3}x"),
                };
                println!(
                    "| {:<48} | {:>10} | {:>10} | {:>10} | {:>4} | {:>8} | {:>10} | {:<6} |",
                    r.name,
                    fmt_time(s.median),
                    fmt_time(s.p10),
                    fmt_time(s.p90),
                    s.n,
                    ratio,
                    goal,
                    met
                );
            }
            Err(why) => println!(
                "| {:<48} | {:>10} | {:>10} | {:>10} | {:>4} | {:>8} | {:>10} | {:<6} |",
                r.name, why, "", "", "", "", goal, "-"
            ),
        }
    }
}

/// Destroys the program on every path out.
struct Program(nvsys::nvrtcProgram);
impl Drop for Program {
    fn drop(&mut self) {
        // SAFETY: created by nvrtcCreateProgram, destroyed once, here.
        let _ = unsafe { nv::destroy_program(self.0) };
    }
}

/// One raw NVRTC compile to CUBIN doing what the runtime must: create, compile, log, PTX,
/// CUBIN. Returns the CUBIN.
fn raw_nvrtc(src: &CString, args: &[String]) -> Res<Vec<u8>> {
    let prog = Program(nv::create_program(src, Some(c"tma.cu")).map_err(|e| format!("{e:?}"))?);
    // SAFETY: `prog` is a live program; the options are plain strings.
    let compiled = unsafe { nv::compile_program(prog.0, args) };
    // SAFETY: `prog` is live.
    let log = unsafe { nv::get_program_log(prog.0) }.map_err(|e| format!("{e:?}"))?;
    if let Err(e) = compiled {
        let log: String = log.iter().map(|&c| c as u8 as char).collect();
        return Err(format!("raw NVRTC compile failed: {e:?}\n{log}").into());
    }
    // SAFETY: `prog` compiled successfully.
    let ptx = unsafe { nv::get_ptx(prog.0) }.map_err(|e| format!("{e:?}"))?;
    std::hint::black_box(&ptx);
    let mut size = 0usize;
    // SAFETY: `prog` compiled for a real arch; valid out-pointer.
    unsafe { nvsys::nvrtcGetCUBINSize(prog.0, &mut size) }
        .result()
        .map_err(|e| format!("{e:?}"))?;
    let mut cubin = vec![0u8; size];
    // SAFETY: the buffer holds exactly `size` bytes, as NVRTC reported.
    unsafe { nvsys::nvrtcGetCUBIN(prog.0, cubin.as_mut_ptr().cast()) }
        .result()
        .map_err(|e| format!("{e:?}"))?;
    Ok(cubin)
}

/// Child mode: one disk-cache hit against the warm dir; prints `<compile us> <new us> <key>`.
fn child(dir: &Path) -> Res<()> {
    let arch = std::env::var(CHILD_ARCH_ENV)
        .ok()
        .and_then(|a| arch_from_name(&a))
        .unwrap_or(Arch::Sm90a);
    let source = Source::new(kernel_source()?);
    let options = options_for(arch);
    let t = Instant::now();
    let compiler = compiler_at(dir)?;
    let new_us = us(t);
    let t = Instant::now();
    let out = compiler.compile_source(&source, &options)?;
    let compile_us = us(t);
    println!("{compile_us} {new_us} {}", out.key);
    Ok(())
}

fn ms(start: Instant) -> f64 {
    start.elapsed().as_secs_f64() * 1e3
}

/// Warm-start child: the GEMM (L5) from the precompiled cache in `dir`, from `main` to its
/// first launch ready; prints `READY key=value ...` (milliseconds), then launches once and
/// prints `LAUNCHED <elements written> of <elements>`. Without a GPU, stops after the compile.
fn warm_start_child(dir: &Path, main_start: Instant) -> Res<()> {
    use std::io::Write as _;
    let t = Instant::now();
    let plan = gemm::Plan::new(gemm::Config::L5).map_err(|e| e.to_string())?;
    let source = plan.source().map_err(|e| e.to_string())?;
    let render = ms(t);
    let t = Instant::now();
    let compiler = compiler_at(dir)?; // loads libnvrtc: its version is part of the key
    let nvrtc_load = ms(t);
    let t = Instant::now();
    let compiled = compiler.compile_source(&source, &gemm::options())?;
    let compile = ms(t);
    let stats = compiler.stats();
    let cpu = format!(
        "render={render:.3} nvrtc_load={nvrtc_load:.3} compile={compile:.3} nvrtc_compiles={} disk_hits={}",
        stats.nvrtc_compiles, stats.disk_hits
    );
    if std::env::var_os(WARM_START_NO_GPU_ENV).is_some() {
        println!("READY total={:.3} {cpu}", ms(main_start));
        return Ok(());
    }
    let t = Instant::now();
    let ctx = CudaContext::new(0)?;
    let stream = ctx.default_stream();
    let context = ms(t);
    let t = Instant::now();
    let module = Module::load(&ctx, compiled)?;
    let kernel = module.kernel("gemm")?;
    let load = ms(t);
    // A small problem (its data is the program's, not set-up): zeros in, D poisoned (NaN).
    let (m, n, k) = (512usize, 512usize, 256usize);
    let a = stream.alloc_zeros::<u16>(m * k)?;
    let b = stream.alloc_zeros::<u16>(n * k)?;
    let d = stream.clone_htod(&vec![0xffffu16; m * n])?;
    stream.synchronize()?;
    let t = Instant::now();
    let (mu, nu, ku) = (m as u64, n as u64, k as u64);
    let ma = TensorMap::new_raw_bits(&plan.a.bind(&[mu, ku], None)?, &a)?;
    let mb = TensorMap::new_raw_bits(&plan.b.bind(&[nu, ku], None)?, &b)?;
    let pd = plan.d.as_ref().ok_or("L5 has a TMA epilogue")?;
    let md = TensorMap::new_raw_bits(&pd.bind(&[mu, nu], None)?, &d)?;
    let c = plan.config;
    let clusters = m.div_ceil(c.bm as usize).div_ceil(c.cm as usize)
        * n.div_ceil(c.bn as usize).div_ceil(c.cn as usize);
    let cfg = kernel.plan_config(&stream, (clusters as u32 * c.cluster(), 1, 1))?;
    let maps = ms(t);
    println!(
        "READY total={:.3} {cpu} context={context:.3} load={load:.3} maps={maps:.3}",
        ms(main_start)
    );
    std::io::stdout().flush()?;
    let d_addr = {
        use cudarc::driver::DevicePtr;
        d.device_ptr(&stream).0
    };
    let (mi, ni, ki, group) = (m as i32, n as i32, k as i32, 8i32);
    // SAFETY: gemm(CUtensorMap x 3, void*, int M, int N, int K, int group) as kernel.cu
    // declares; the maps cover the live A, B and D, D's address is the live M x N output.
    unsafe {
        kernel
            .launch_builder(&cfg)
            .arg(&ma)
            .arg(&mb)
            .arg(&md)
            .arg(&d_addr)
            .arg(&mi)
            .arg(&ni)
            .arg(&ki)
            .arg(&group)
            .launch()
    }?;
    module.synchronize(&stream)?;
    let out = stream.clone_dtoh(&d)?;
    let written = out.iter().filter(|&&x| x == 0).count();
    println!("LAUNCHED {written} of {}", out.len());
    Ok(())
}

/// Warm-start rows: the GEMM compiled into `warm_dir` here, then `WARM_CHILDREN` fresh
/// processes each timed from spawn to READY, their phases, and a check that none ran NVRTC.
fn warm_start_rows(warm_dir: &Path, no_gpu: Option<&str>) -> Res<Vec<Row>> {
    use std::io::BufRead as _;
    let plan = gemm::Plan::new(gemm::Config::L5).map_err(|e| e.to_string())?;
    let source = plan.source().map_err(|e| e.to_string())?;
    compiler_at(warm_dir)?.compile_source(&source, &gemm::options())?;
    let exe = std::env::current_exe()?;
    let mut ready = Vec::new();
    let mut phases: Vec<(String, Vec<f64>)> = Vec::new();
    for i in 0..=WARM_CHILDREN {
        let mut cmd = Command::new(&exe);
        cmd.env(WARM_START_ENV, warm_dir)
            .stdout(std::process::Stdio::piped());
        if no_gpu.is_some() {
            cmd.env(WARM_START_NO_GPU_ENV, "1");
        }
        let t = Instant::now();
        let mut child = cmd.spawn()?;
        let stdout = child.stdout.take().ok_or("no child stdout")?;
        let mut lines = std::io::BufReader::new(stdout).lines();
        let first = lines.next().transpose()?.unwrap_or_default();
        let spawn_to_ready = us(t);
        let rest: Vec<String> = lines.collect::<Result<_, _>>()?;
        let status = child.wait()?;
        let fields: Vec<(String, f64)> = first
            .strip_prefix("READY ")
            .ok_or_else(|| format!("warm-start child {i} ({status}): {first} {rest:?}"))?
            .split_whitespace()
            .filter_map(|kv| kv.split_once('='))
            .map(|(k, v)| Ok((k.to_string(), v.parse::<f64>()?)))
            .collect::<Res<_>>()?;
        let field = |k: &str| fields.iter().find(|(n, _)| n == k).map(|(_, v)| *v);
        if field("nvrtc_compiles") != Some(0.0) || field("disk_hits") != Some(1.0) {
            return Err(format!("warm-start child {i} did not start warm: {first}").into());
        }
        if no_gpu.is_none() {
            let launched = rest.iter().find_map(|l| l.strip_prefix("LAUNCHED "));
            let ok = launched.is_some_and(|l| {
                let mut w = l.split(" of ");
                w.next() == w.next() && !l.is_empty()
            });
            if !status.success() || !ok {
                return Err(format!("warm-start child {i} ({status}): launch {launched:?}").into());
            }
        }
        if i == 0 {
            continue; // the first also warms the OS's file cache
        }
        ready.push(spawn_to_ready);
        for (k, v) in fields {
            if k == "nvrtc_compiles" || k == "disk_hits" {
                continue;
            }
            match phases.iter_mut().find(|(n, _)| *n == k) {
                Some((_, vs)) => vs.push(v * 1e3),
                None => phases.push((k, vec![v * 1e3])),
            }
        }
    }
    let what = if no_gpu.is_some() {
        "GEMM warm start to the compiled kernel (no GPU)"
    } else {
        "GEMM warm start: spawn to first launch ready"
    };
    let mut rows = vec![Row {
        name: what.into(),
        result: Ok((Stats::of(ready), None)),
        goal: if no_gpu.is_some() {
            Goal::None
        } else {
            Goal::Below(50_000.0)
        },
    }];
    for (k, v) in phases {
        let name = match k.as_str() {
            "total" => "  child: main to ready",
            "render" => "  child: declare + render (tera)",
            "nvrtc_load" => "  child: load libnvrtc (version for the key)",
            "compile" => "  child: compile_source (disk hit, 0 NVRTC)",
            "context" => "  child: CUDA context (cuInit, primary context)",
            "load" => "  child: Module::load + kernel",
            "maps" => "  child: 3 maps + plan_config",
            other => other,
        };
        rows.push(Row {
            name: name.into(),
            result: Ok((Stats::of(v), None)),
            goal: Goal::None,
        });
    }
    Ok(rows)
}

/// Per-call cost of `f`: one warm-up batch, then `HIT_BATCHES` timed batches of `HIT_BATCH`.
fn per_call(f: &dyn Fn() -> Res<()>) -> Res<Stats> {
    for _ in 0..HIT_BATCH {
        f()?;
    }
    let mut v = Vec::with_capacity(HIT_BATCHES);
    for _ in 0..HIT_BATCHES {
        let t = Instant::now();
        for _ in 0..HIT_BATCH {
            f()?;
        }
        v.push(us(t) / HIT_BATCH as f64);
    }
    Ok(Stats::of(v))
}

fn temp_root() -> PathBuf {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    std::env::temp_dir().join(format!("tma-bench-jit-{}-{nanos}", std::process::id()))
}

fn main() -> Res<()> {
    let process_main = Instant::now();
    if let Some(dir) = std::env::var_os(WARM_START_ENV) {
        return warm_start_child(Path::new(&dir), process_main);
    }
    if let Some(dir) = std::env::var_os(CHILD_ENV) {
        return child(Path::new(&dir));
    }
    let started = Instant::now();
    let nvrtc = match tma::runtime::nvrtc_available() {
        Ok(n) => n,
        Err(e) => {
            println!("SKIP: NVRTC is not available ({e})");
            println!("get it with: eval \"$(scripts/cuda-tools.sh)\"");
            return Ok(());
        }
    };
    let gpu = tma::runtime::gpu_available();
    let arch = gpu
        .as_ref()
        .ok()
        .and_then(|g| g.arch)
        .unwrap_or(Arch::Sm90a);
    let text = kernel_source()?;
    let source = Source::new(text.clone());
    let options = options_for(arch);
    if !nvrtc.supports_cubin(arch) {
        println!(
            "SKIP: NVRTC {:?} cannot emit CUBIN for {}",
            nvrtc.version,
            arch.nvrtc_name()
        );
        return Ok(());
    }
    let args = options.nvrtc_args(true)?;
    println!(
        "JIT costs: {} lines / {} B of CUDA (the quickstart's MPK tile helpers + kernel), {}",
        text.lines().count(),
        text.len(),
        arch.nvrtc_name()
    );
    println!(
        "NVRTC {}.{} at {}; args: {}",
        nvrtc.version.0,
        nvrtc.version.1,
        nvrtc.location,
        args.join(" ")
    );
    match &gpu {
        Ok(g) => println!(
            "GPU: {} (sm {:?}), driver {}",
            g.name, g.compute_capability, g.driver_version
        ),
        Err(e) => println!("no GPU: {e}"),
    }

    let root = temp_root();
    let no_gpu = match &gpu {
        Err(_) => Some("no GPU"),
        Ok(g) if g.arch.is_none() => Some("GPU < sm_90"),
        Ok(_) => None,
    };
    let result = run(&root, &text, &source, &options, &args, no_gpu);
    let _ = std::fs::remove_dir_all(&root);
    let rows = result?;
    println!();
    print_table(&rows);
    println!(
        "\np10/p90 interpolate between sorted samples; ratio = median / the baseline above it \
         (raw NVRTC, or raw cuModuleLoadData for the load rows); in-process rows are per \
         call, from batches of {HIT_BATCH}. Total {:.1} s.",
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

fn run(
    root: &Path,
    text: &str,
    source: &Source,
    options: &CompileOptions,
    args: &[String],
    no_gpu: Option<&str>,
) -> Res<Vec<Row>> {
    let mut rows = Vec::new();
    let csrc = CString::new(text)?;

    // 1. Raw NVRTC vs tma cold compiles, interleaved, after one warm-up of each.
    let (mut raw, mut cold, mut nocache) = (Vec::new(), Vec::new(), Vec::new());
    let mut cubin = Vec::new();
    for rep in 0..=COMPILE_REPS {
        let t = Instant::now();
        cubin = raw_nvrtc(&csrc, args)?;
        let raw_us = us(t);
        let dir = root.join(format!("cold-{rep}"));
        let t = Instant::now();
        let compiler = compiler_at(&dir)?;
        let out = compiler.compile_source(source, options)?;
        let cold_us = us(t);
        let t = Instant::now();
        let uncached = compiler_uncached()?.compile_source(source, options)?;
        let nocache_us = us(t);
        for o in [&out, &uncached] {
            if o.cubin.len() != cubin.len() {
                return Err(format!(
                    "tma compiled {} B of CUBIN, raw NVRTC {} B",
                    o.cubin.len(),
                    cubin.len()
                )
                .into());
            }
        }
        if rep > 0 {
            raw.push(raw_us);
            cold.push(cold_us);
            nocache.push(nocache_us);
        }
    }
    let raw = Stats::of(raw);
    rows.push(Row {
        name: format!("raw NVRTC -> CUBIN ({} B) [baseline]", cubin.len()),
        result: Ok((raw, Some(1.0))),
        goal: Goal::None,
    });
    for (name, v) in [
        ("tma cold compile (fresh Compiler, empty dir)", cold),
        ("tma compile, caches off (TMA_JIT_NO_CACHE)", nocache),
    ] {
        let s = Stats::of(v);
        rows.push(Row {
            name: name.into(),
            result: Ok((s, Some(s.median / raw.median))),
            goal: Goal::RatioAtMost(1.10),
        });
    }

    // 2. In-process hits, on a compiler whose cache holds the compile.
    let warm_dir = root.join("warm");
    let compiler = compiler_at(&warm_dir)?;
    let key = compiler.compile_source(source, options)?.key.clone();
    let hit = per_call(&|| {
        std::hint::black_box(compiler.compile_source(std::hint::black_box(source), options)?);
        Ok(())
    })?;
    let hit_str = per_call(&|| {
        std::hint::black_box(compiler.compile(std::hint::black_box(text), options)?);
        Ok(())
    })?;
    // The same text from buffers the compiler has not seen (more than it remembers, cycled):
    // each call hashes the text.
    let copies: Vec<String> = (0..NEW_ADDRESS_BUFFERS).map(|_| text.to_string()).collect();
    let next = std::cell::Cell::new(0usize);
    let hit_new = per_call(&|| {
        let i = next.get();
        next.set((i + 1) % copies.len());
        std::hint::black_box(compiler.compile(std::hint::black_box(&copies[i]), options)?);
        Ok(())
    })?;
    rows.push(Row {
        name: "in-process hit, held Source".into(),
        result: Ok((hit, Some(hit.median / raw.median))),
        goal: Goal::Below(5.0),
    });
    rows.push(Row {
        name: format!(
            "in-process hit, &str ({} KB, address seen: compared)",
            text.len() / 1024
        ),
        result: Ok((hit_str, Some(hit_str.median / raw.median))),
        goal: Goal::Below(5.0),
    });
    rows.push(Row {
        name: format!(
            "in-process hit, &str at a new address ({} KB hashed)",
            text.len() / 1024
        ),
        result: Ok((hit_new, Some(hit_new.median / raw.median))),
        goal: Goal::Below(5.0),
    });

    // 3. Disk hits in fresh processes.
    let exe = std::env::current_exe()?;
    let mut disk = Vec::new();
    let mut new = Vec::new();
    let mut process = Vec::new();
    for i in 0..=CHILDREN {
        let t = Instant::now();
        let out = Command::new(&exe)
            .env(CHILD_ENV, &warm_dir)
            .env(CHILD_ARCH_ENV, options.arch.nvrtc_name())
            .output()?;
        let process_us = us(t);
        let stdout = String::from_utf8_lossy(&out.stdout);
        let mut it = stdout.split_whitespace();
        let (Some(c), Some(n), Some(k)) = (it.next(), it.next(), it.next()) else {
            return Err(format!(
                "child {i} failed ({}): {stdout} {}",
                out.status,
                String::from_utf8_lossy(&out.stderr)
            )
            .into());
        };
        if k != key {
            return Err(format!("child {i} compiled key {k}, the parent {key}").into());
        }
        if i > 0 {
            disk.push(c.parse::<f64>()?);
            new.push(n.parse::<f64>()?);
            process.push(process_us);
        }
    }
    let disk = Stats::of(disk);
    rows.push(Row {
        name: "disk hit, fresh process (compile_source)".into(),
        result: Ok((disk, Some(disk.median / raw.median))),
        goal: Goal::Below(1000.0),
    });
    let new = Stats::of(new);
    rows.push(Row {
        name: "  fresh process: Compiler::with_config (dlopen)".into(),
        result: Ok((new, Some(new.median / raw.median))),
        goal: Goal::None,
    });
    let process = Stats::of(process);
    rows.push(Row {
        name: "  fresh process: whole child, spawn to exit".into(),
        result: Ok((process, Some(process.median / raw.median))),
        goal: Goal::None,
    });

    // 4. The GEMM example's warm start in fresh processes (GPU rows without a GPU: its CPU part).
    match warm_start_rows(&root.join("warm-gemm"), no_gpu) {
        Ok(r) => rows.extend(r),
        Err(e) => rows.push(Row {
            name: "GEMM warm start".into(),
            result: Err(format!("failed: {e}")),
            goal: Goal::Below(50_000.0),
        }),
    }

    // 5. Module loads (GPU only); a GPU failure fills these rows instead of ending the run.
    let gpu_result = match no_gpu {
        Some(why) => Err(why.to_string()),
        None => gpu_rows(&warm_dir, source, options, &cubin).map_err(|e| {
            println!("GPU rows failed: {e}");
            "GPU error".to_string()
        }),
    };
    match gpu_result {
        Ok(r) => rows.extend(r),
        Err(why) => {
            for name in [
                "raw cuModuleLoadData [baseline]",
                "Module::compile_and_load (compiled, not yet loaded)",
                "Module::compile_and_load, loaded-module hit",
            ] {
                rows.push(Row {
                    name: name.into(),
                    result: Err(why.clone()),
                    goal: Goal::None,
                });
            }
        }
    }
    Ok(rows)
}

fn gpu_rows(
    warm_dir: &Path,
    source: &Source,
    options: &CompileOptions,
    cubin: &[u8],
) -> Res<Vec<Row>> {
    let ctx = CudaContext::new(0)?;
    let mut raw = Vec::new();
    let mut load = Vec::new();
    for rep in 0..LOAD_REPS + 3 {
        let image = Ptx::from_binary(cubin.to_vec());
        let t = Instant::now();
        let module = ctx.load_module(image)?;
        let raw_us = us(t);
        drop(module);
        // Compile cached (in-process), module not loaded: a fresh compiler per rep, and the
        // last rep's module dropped (the loaded-module cache holds none).
        let compiler = compiler_at(warm_dir)?;
        compiler.compile_source(source, options)?;
        let t = Instant::now();
        let module = Module::compile_and_load(&ctx, &compiler, source, options)?;
        let load_us = us(t);
        drop(module);
        drop(compiler);
        if rep >= 3 {
            raw.push(raw_us);
            load.push(load_us);
        }
    }
    let raw = Stats::of(raw);
    let load = Stats::of(load);
    let compiler = compiler_at(warm_dir)?;
    let first = Module::compile_and_load(&ctx, &compiler, source, options)?;
    let hit = per_call(&|| {
        std::hint::black_box(Module::compile_and_load(
            &ctx,
            &compiler,
            std::hint::black_box(source),
            options,
        )?);
        Ok(())
    })?;
    drop(first);
    Ok(vec![
        Row {
            name: "raw cuModuleLoadData [baseline]".into(),
            result: Ok((raw, Some(1.0))),
            goal: Goal::None,
        },
        Row {
            name: "Module::compile_and_load (compiled, not yet loaded)".into(),
            result: Ok((load, Some(load.median / raw.median))),
            goal: Goal::RatioAtMost(1.10),
        },
        Row {
            name: "Module::compile_and_load, loaded-module hit".into(),
            result: Ok((hit, Some(hit.median / raw.median))),
            goal: Goal::Below(5.0),
        },
    ])
}
