//! Real NVRTC compiles (no GPU needed). Skips visibly without NVRTC; run with
//! `eval "$(scripts/cuda-tools.sh)"` first.
#![allow(clippy::panic, clippy::unwrap_used)]

use std::sync::Arc;
use std::time::Instant;

use tma_core::Arch;
use tma_runtime::Error;
use tma_runtime::{CompileOptions, Compiler, JitConfig, Source};
use tma_test_support::skip::{require_nvrtc_or_skip, require_tool_or_skip, run_cuobjdump};

const KERNEL: &str = r#"
// tma-tile 0 small (a comment: text declares nothing to the runtime)
extern "C" __global__ void scale(float* out, const float* in, float k, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
#ifdef TMA_DEBUG
    if (i == 0) out[0] = -1.0f;
#endif
    if (i < n) out[i] = in[i] * k * SCALE_EXTRA;
}
"#;

fn config(tag: &str) -> JitConfig {
    JitConfig {
        debug: false,
        dump_dir: None,
        cache: true,
        cache_dir: Some(
            std::env::temp_dir().join(format!("tma-nvrtc-test-{tag}-{}", std::process::id())),
        ),
    }
}

#[test]
fn compiles_to_cubin_for_sm90a() -> Result<(), Error> {
    let Some(info) = require_nvrtc_or_skip("compiles_to_cubin_for_sm90a") else {
        return Ok(());
    };
    assert!(info.version.0 >= 12, "{info:?}");
    let cfg = config("cubin");
    let dir = cfg.cache_dir.clone();
    let compiler = Compiler::with_config(cfg)?;
    let opts = CompileOptions::new(Arch::Sm90a).define("SCALE_EXTRA", "2.0f");
    let c = compiler.compile(KERNEL, &opts)?;
    assert!(c.ptx.contains(".target sm_90a"), "{}", c.ptx);
    assert!(c.ptx.contains(".entry scale"));
    assert!(c.cubin.starts_with(b"\x7fELF"), "CUBIN is an ELF image");
    assert_eq!((c.tile_name(0), c.facts.as_ref()), (None, None));
    // In-process hit: same Arc, fast.
    let src = Source::new(KERNEL);
    let again = compiler.compile_source(&src, &opts)?;
    assert!(std::sync::Arc::ptr_eq(&c, &again));
    let t = Instant::now();
    for _ in 0..1000 {
        let _ = compiler.compile_source(&src, &opts)?;
    }
    let per = t.elapsed() / 1000;
    // Timing is the JIT benchmark's business (benches/jit.rs); a busy CI machine made a
    // 5 us bound here flaky. The same Arc above proves the hit.
    eprintln!("in-process hit: {per:?}");
    // Disk hit from a fresh compiler: same bytes, no NVRTC.
    let fresh = Compiler::with_config(config("cubin"))?;
    let from_disk = fresh.compile(KERNEL, &opts)?;
    assert_eq!(from_disk.cubin, c.cubin);
    assert_eq!(from_disk.ptx, c.ptx);
    // Different options, different binary (the device debug mode flipped either way: its
    // default follows the build profile).
    let flipped = !opts.debug_waits;
    let dbg = compiler.compile(KERNEL, &opts.clone().debug_waits(flipped))?;
    assert_ne!(dbg.key, c.key);
    assert_eq!(dbg.debug_waits, flipped);
    if let Some(d) = dir {
        let _ = std::fs::remove_dir_all(d);
    }
    Ok(())
}

#[test]
fn compile_error_carries_log_and_numbered_source() -> Result<(), Error> {
    if require_nvrtc_or_skip("compile_error_carries_log_and_numbered_source").is_none() {
        return Ok(());
    }
    let compiler = Compiler::with_config(JitConfig {
        cache: false,
        ..config("err")
    })?;
    // SCALE_EXTRA undefined: an error on line 8.
    match compiler.compile(KERNEL, &CompileOptions::new(Arch::Sm90a)) {
        Err(Error::Compile {
            log,
            numbered_source,
            ..
        }) => {
            assert!(log.contains("SCALE_EXTRA"), "{log}");
            assert!(
                numbered_source.contains("8 |     if (i < n)"),
                "{numbered_source}"
            );
        }
        other => panic!("expected a compile error, got {other:?}"),
    }
    Ok(())
}

#[test]
fn every_arch_compiles_or_falls_back_to_ptx() -> Result<(), Error> {
    let Some(info) = require_nvrtc_or_skip("every_arch_compiles_or_falls_back_to_ptx") else {
        return Ok(());
    };
    let compiler = Compiler::with_config(JitConfig {
        cache: false,
        ..config("arch")
    })?;
    for arch in [Arch::Sm90a, Arch::Sm100a, Arch::Sm120a] {
        let c = compiler.compile(
            KERNEL,
            &CompileOptions::new(arch).define("SCALE_EXTRA", "1"),
        )?;
        assert_eq!(c.has_cubin(), info.supports_cubin(arch), "{arch}");
        assert!(
            c.ptx.contains(&format!(".target {}", arch.nvrtc_name())),
            "{arch}"
        );
    }
    Ok(())
}

#[test]
fn dump_dir_gets_source_ptx_and_cubin() -> Result<(), Error> {
    if require_nvrtc_or_skip("dump_dir_gets_source_ptx_and_cubin").is_none() {
        return Ok(());
    }
    let dump = std::env::temp_dir().join(format!("tma-dump-test-{}", std::process::id()));
    let compiler = Compiler::with_config(JitConfig {
        debug: true,
        dump_dir: Some(dump.clone()),
        cache: false,
        cache_dir: None,
    })?;
    let c = compiler.compile(
        KERNEL,
        &CompileOptions::new(Arch::Sm90a).define("SCALE_EXTRA", "3"),
    )?;
    for ext in ["cu", "ptx", "cubin", "log", "args"] {
        let p = dump.join(format!("{}.{ext}", c.key));
        assert!(p.exists(), "{} missing", p.display());
    }
    assert_eq!(
        std::fs::read(dump.join(format!("{}.cubin", c.key))).ok(),
        Some(c.cubin.clone())
    );
    let _ = std::fs::remove_dir_all(&dump);
    Ok(())
}

/// A struct holding two maps, pushed by value (`ByValue`) it would have this host layout.
#[repr(C)]
struct MapsAndCount {
    a: tma_runtime::TensorMap,
    n: i32,
    b: tma_runtime::TensorMap,
}

/// The rendered prelude, then `static_assert`s that the device `CUtensorMap` is `size` bytes
/// and `align`-aligned, and that the device twin of [`MapsAndCount`] is `pair_size` bytes
/// (NVRTC has no constant `offsetof`; the size shows where `b` went).
fn layout_probe(size: usize, align: usize, pair_size: usize) -> String {
    format!(
        r#"{prelude}
static_assert(sizeof(CUtensorMap) == {size} && alignof(CUtensorMap) == {align}, "tma-layout-probe: CUtensorMap");
struct MapsAndCount {{ CUtensorMap a; int n; CUtensorMap b; }};
static_assert(sizeof(MapsAndCount) == {pair_size}, "tma-layout-probe: MapsAndCount");
extern "C" __global__ void probe(const __grid_constant__ MapsAndCount m, unsigned long long* out) {{
    out[0] = m.b.opaque[0] + m.n;
}}
"#,
        prelude = tma_core::render::prelude()
    )
}

#[test]
fn prelude_tensor_map_has_the_host_size_and_alignment() -> Result<(), Error> {
    if require_nvrtc_or_skip("prelude_tensor_map_has_the_host_size_and_alignment").is_none() {
        return Ok(());
    }
    let compiler = Compiler::with_config(JitConfig {
        cache: false,
        ..config("layout")
    })?;
    let opts = CompileOptions::new(Arch::Sm90a);
    let size = std::mem::size_of::<cudarc::driver::sys::CUtensorMap>();
    let align = std::mem::align_of::<cudarc::driver::sys::CUtensorMap>();
    let pair = std::mem::size_of::<MapsAndCount>();
    eprintln!("host CUtensorMap: {size} bytes, {align}-aligned; MapsAndCount: {pair} bytes");
    let c = compiler.compile(&layout_probe(size, align, pair), &opts)?;
    assert!(c.ptx.contains(".entry probe"));
    // The probe can fail: any other size or alignment is a compile error. (The old
    // `alignas(64)` declaration made MapsAndCount 320 bytes, `b` at 192, not 384 and 256.)
    for (s, a, o) in [
        (size, align / 2, pair),
        (size, align * 2, pair),
        (size + 8, align, pair),
        (size, align, pair - align / 2),
    ] {
        match compiler.compile(&layout_probe(s, a, o), &opts) {
            Err(Error::Compile { log, .. }) => {
                assert!(log.contains("tma-layout-probe"), "({s}, {a}, {o}): {log}")
            }
            other => panic!("({s}, {a}, {o}) should not compile: {other:?}"),
        }
    }
    Ok(())
}

/// A 128B-swizzled bf16 tile, as a user declares one (target sm_90a by default).
fn user_tile() -> tma_core::ValidSpec {
    let spec = tma_core::TileSpec::new("user_tile", tma_core::DType::BF16, [256, 256], [64, 64])
        .swizzle(tma_core::Swizzle::B128);
    tma_core::validate(&spec).unwrap()
}

/// The prelude's helpers are `inline`, not `static`: a kernel that uses none of them gets an
/// empty log, so the warnings a user sees are about their own code (NVRTC used to print
/// warning #177 "declared but never referenced" once per unused helper).
#[test]
fn an_unused_prelude_and_tile_give_no_warnings() -> Result<(), Error> {
    if require_nvrtc_or_skip("an_unused_prelude_and_tile_give_no_warnings").is_none() {
        return Ok(());
    }
    let compiler = Compiler::with_config(JitConfig {
        cache: false,
        ..config("warnings")
    })?;
    let empty = "extern \"C\" __global__ void k(int* p) { *p = 1; }\n";
    let with_tile = tma_core::render::KernelSource::new()
        .tile(&user_tile())
        .body(empty)
        .build()
        .unwrap();
    for text in [tma_core::render::prelude() + empty, with_tile] {
        for debug in [false, true] {
            let c =
                compiler.compile(&text, &CompileOptions::new(Arch::Sm90a).debug_waits(debug))?;
            assert_eq!(c.log.trim(), "", "debug waits {debug}");
        }
    }
    // The test can fail: an unused static function still warns.
    let c = compiler.compile(
        &format!("static __device__ void unused() {{}}\n{empty}"),
        &CompileOptions::new(Arch::Sm90a),
    )?;
    assert!(c.log.contains("#177"), "{}", c.log);
    Ok(())
}

/// `KernelSource::body_at` puts a `#line` before the body: NVRTC's messages name the user's
/// file and line, and the error shows the lines around each reported one, numbered the same
/// way and marked, not the whole unit (the prelude and tile helpers: hundreds of lines); the
/// whole unit is the error's `numbered_source`, or its message with `TMA_FULL_SOURCE=1` (checked
/// in a child process of this test, so no other test sees the variable).
#[test]
fn compile_errors_point_into_the_users_file() -> Result<(), Error> {
    const TEST: &str = "compile_errors_point_into_the_users_file";
    if require_nvrtc_or_skip(TEST).is_none() {
        return Ok(());
    }
    let full_source = std::env::var_os("TMA_FULL_SOURCE").is_some_and(|v| v == "1");
    let compiler = Compiler::with_config(JitConfig {
        cache: false,
        ..config("line")
    })?;
    let body = "extern \"C\" __global__ void k(int* p) {\n  *p = first_undefined;\n  *p = second_undefined;\n}\n";
    let text = tma_core::render::KernelSource::new()
        .tile(&user_tile())
        .body_at("kernels/user.cu", 40, body)
        .build()
        .unwrap();
    let e = match compiler.compile(&text, &CompileOptions::new(Arch::Sm90a)) {
        Err(e) => e,
        Ok(_) => panic!("undefined identifiers compiled"),
    };
    let shown = e.to_string();
    let Error::Compile {
        log,
        numbered_source,
        ..
    } = e
    else {
        panic!("expected a compile error, got {e:?}")
    };
    assert!(
        log.contains("kernels/user.cu(41): error: identifier \"first_undefined\" is undefined"),
        "{log}"
    );
    assert!(log.contains("kernels/user.cu(42): error"), "{log}");
    // Line numbers are right-aligned to the widest one of the unit (the prelude and tile
    // helpers grow; past 999 lines the column widens).
    let unit_lines = numbered_source.lines().count();
    assert!(unit_lines > 300, "the generated unit: {unit_lines} lines");
    let w = unit_lines.to_string().len();
    assert!(
        numbered_source.contains(&format!(
            "--- kernels/user.cu ---\n{:>w$} | extern \"C\" __global__ void k(int* p) {{\n{:>w$} |   *p = first_undefined;\n",
            40, 41
        )),
        "{numbered_source}"
    );
    if full_source {
        // The child: the whole unit, once.
        assert!(shown.contains(&numbered_source), "{shown}");
        assert_eq!(shown.matches(" 41 |   *p = first_undefined;").count(), 1);
        return Ok(());
    }
    // The two reported lines, marked, with three lines around them, under the user's file.
    let want = format!(
        " --- kernels/user.cu ---\n  {:>w$} | extern \"C\" __global__ void k(int* p) {{\n> {:>w$} |   *p = first_undefined;\n> {:>w$} |   *p = second_undefined;\n  {:>w$} | }}\n",
        40, 41, 42, 43
    );
    assert!(shown.contains(&want), "{shown}");
    assert!(shown.contains("TMA_FULL_SOURCE=1"), "{shown}");
    let shown_lines = shown.lines().count();
    assert!(
        shown_lines < log.lines().count() + 20,
        "{shown_lines} lines shown for a {unit_lines}-line unit:\n{shown}"
    );
    // The whole unit, one variable away.
    let exe = std::env::current_exe().unwrap();
    let child = std::process::Command::new(exe)
        .args([TEST, "--exact", "--nocapture", "--test-threads=1"])
        .env("TMA_FULL_SOURCE", "1")
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&child.stdout);
    assert!(
        child.status.success() && out.contains("1 passed"),
        "{out}\n{}",
        String::from_utf8_lossy(&child.stderr)
    );
    Ok(())
}

/// The arch is stated once: a source whose tiles were validated for sm_90a does not compile
/// for sm_100a, and one declared for sm_100a does.
#[test]
fn tiles_and_compile_options_must_agree_on_the_arch() -> Result<(), Error> {
    if require_nvrtc_or_skip("tiles_and_compile_options_must_agree_on_the_arch").is_none() {
        return Ok(());
    }
    let compiler = Compiler::with_config(JitConfig {
        cache: false,
        ..config("target")
    })?;
    let body = "extern \"C\" __global__ void k(int* p) { *p = 1; }\n";
    let hopper = Source::kernel(
        &tma_core::render::KernelSource::new()
            .tile(&user_tile())
            .body(body),
    )
    .unwrap();
    match compiler.compile_source(&hopper, &CompileOptions::new(Arch::Sm100a)) {
        Err(e @ Error::TargetMismatch { .. }) => assert_eq!(
            e.to_string(),
            "tile `user_tile` targets sm_90a but the source is compiled for sm_100a; state the arch once: \
             declare the tile with `target = sm_100a` (TileSpec::target), or compile with \
             CompileOptions::new(Arch::Sm90a)"
        ),
        other => panic!("expected TargetMismatch, got {other:?}"),
    }
    compiler.compile_source(&hopper, &CompileOptions::new(Arch::Sm90a))?;
    let blackwell = tma_core::validate(&user_tile().spec().clone().target(Arch::Sm100a)).unwrap();
    let source = Source::kernel(
        &tma_core::render::KernelSource::new()
            .tile(&blackwell)
            .body(body),
    )
    .unwrap();
    compiler.compile_source(&source, &CompileOptions::new(Arch::Sm100a))?;
    assert!(matches!(
        compiler.compile_source(&source, &CompileOptions::new(Arch::Sm90a)),
        Err(Error::TargetMismatch { .. })
    ));
    Ok(())
}

/// `Compiler` is shared by threads (the GEMM example's autotune compiles its configurations
/// on every core): 8 threads compile 16 distinct sources at once, each twice (the second time
/// racing the first's cache entries), through one compiler with memory and disk caches. Every
/// result must be the PTX a lone compile of the same source gives, and a fresh process-like
/// compiler must find each on disk.
#[test]
fn one_compiler_is_safe_to_share_between_threads() -> Result<(), Error> {
    if require_nvrtc_or_skip("one_compiler_is_safe_to_share_between_threads").is_none() {
        return Ok(());
    }
    let cfg = config("threads");
    let dir = cfg.cache_dir.clone();
    let shared = Compiler::with_config(cfg.clone())?;
    let alone = Compiler::with_config(JitConfig {
        cache: false,
        ..config("threads-alone")
    })?;
    let sources: Vec<Source> = (0..16)
        .map(|i| Source::new(KERNEL.replace("scale(", &format!("scale_{i}("))))
        .collect();
    let opts = CompileOptions::new(Arch::Sm90a).define("SCALE_EXTRA", "3.0f");
    let next = std::sync::atomic::AtomicUsize::new(0);
    let results: Vec<std::sync::Mutex<Vec<String>>> =
        (0..16).map(|_| std::sync::Mutex::new(Vec::new())).collect();
    std::thread::scope(|s| {
        for _ in 0..8 {
            s.spawn(|| loop {
                let j = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                if j >= 32 {
                    break;
                }
                let i = j % 16;
                let c = shared.compile_source(&sources[i], &opts).unwrap();
                results[i].lock().unwrap().push(c.ptx.clone());
            });
        }
    });
    for (i, r) in results.into_iter().enumerate() {
        let got = r.into_inner().unwrap();
        let want = alone.compile_source(&sources[i], &opts)?.ptx.clone();
        assert_eq!(got.len(), 2, "source {i}");
        assert!(want.contains(&format!(".entry scale_{i}(")), "{want}");
        for ptx in got {
            assert_eq!(
                ptx, want,
                "source {i}: a shared compile differs from a lone one"
            );
        }
        // On disk: a new compiler (as the next process) reads it back.
        let later = Compiler::with_config(cfg.clone())?;
        assert_eq!(later.compile_source(&sources[i], &opts)?.ptx, want);
    }
    if let Some(d) = dir {
        let entries = std::fs::read_dir(&d).map(|r| r.count()).unwrap_or(0);
        assert_eq!(entries, 16, "one cache file per source, no temp files left");
        let _ = std::fs::remove_dir_all(d);
    }
    Ok(())
}

/// Two kernels with known resources: 1264 bytes of static shared memory (1200 + 64, the
/// doubles 8-aligned right after the floats), and one held to 32 registers by its launch
/// bounds (1024 threads, 2 blocks per SM) while it keeps 96 floats live: it spills.
const RESOURCE_KERNELS: &str = r#"
extern "C" __global__ void static_smem(float* out) {
  __shared__ float tile[300];
  __shared__ double pad[8];
  tile[threadIdx.x % 300] = threadIdx.x;
  pad[threadIdx.x % 8] = threadIdx.x;
  __syncthreads();
  out[threadIdx.x] = tile[(threadIdx.x + 1) % 300] + (float)pad[(threadIdx.x + 3) % 8];
}
extern "C" __global__ void __launch_bounds__(1024, 2) spills(float* out, const float* in, int n) {
  float acc[96];
#pragma unroll
  for (int j = 0; j < 96; ++j) acc[j] = in[threadIdx.x * 96 + j];
  for (int it = 0; it < n; ++it) {
#pragma unroll
    for (int j = 0; j < 96; ++j) acc[j] = acc[j] * acc[(j * 7 + 3) % 96] + in[(j + it) % 300];
  }
  float s = 0;
#pragma unroll
  for (int j = 0; j < 96; ++j) s += acc[j];
  out[threadIdx.x] = s;
}
"#;

/// `cuobjdump -res-usage`'s `Function <name>:` lines: name -> (REG, STACK, SHARED).
fn res_usage_rows(text: &str) -> Vec<(String, u64, u64, u64)> {
    let mut rows = Vec::new();
    let mut lines = text.lines();
    while let Some(l) = lines.next() {
        let Some(name) = l.trim().strip_prefix("Function ") else {
            continue;
        };
        let usage = lines.next().unwrap_or("");
        let field = |key: &str| -> u64 {
            usage
                .split_whitespace()
                .find_map(|w| w.strip_prefix(key))
                .and_then(|v| v.parse().ok())
                .unwrap_or_else(|| panic!("no {key} in `{usage}`"))
        };
        rows.push((
            name.trim_end_matches(':').to_string(),
            field("REG:"),
            field("STACK:"),
            field("SHARED:"),
        ));
    }
    rows
}

/// `Compiled::resources` on real NVRTC output: the static shared memory the source declares,
/// the spills its launch bounds force, the same figures after a disk-cache hit, and (where
/// cuobjdump is on PATH) the same registers and stack as `cuobjdump -res-usage` reads from the
/// CUBIN.
#[test]
fn resources_report_registers_spills_local_and_static_smem() -> Result<(), Error> {
    const TEST: &str = "resources_report_registers_spills_local_and_static_smem";
    if require_nvrtc_or_skip(TEST).is_none() {
        return Ok(());
    }
    let cfg = config("resources");
    let dir = cfg.cache_dir.clone();
    let compiler = Compiler::with_config(cfg.clone())?;
    let opts = CompileOptions::new(Arch::Sm90a).debug_waits(false);
    let c = compiler.compile(RESOURCE_KERNELS, &opts)?;
    assert_eq!(c.log, "", "ptxas's report stays out of the log");
    let smem = c.resources("static_smem")?;
    eprintln!("{smem}");
    assert_eq!(smem.static_smem_bytes, 1264);
    assert!(!smem.spills() && smem.local_bytes == 0, "{smem}");
    assert!(smem.registers > 0 && smem.barriers == 1, "{smem}");
    let sp = c.resources("spills")?;
    eprintln!("{sp}");
    assert!(
        sp.registers <= 32,
        "launch bounds cap registers at 32: {sp}"
    );
    assert!(sp.spill_stores > 0 && sp.spill_loads > 0, "{sp}");
    // Spilled registers live in the stack frame (the byte counts are of instructions: a slot
    // stored twice counts twice).
    assert!(sp.local_bytes > 0, "{sp}");
    assert_eq!(sp.static_smem_bytes, 0);
    // A name the module lacks, and a module without CUBIN, are named errors.
    match c.resources("spill") {
        Err(
            e @ Error::NoResources {
                ptx_only: false, ..
            },
        ) => {
            let m = e.to_string();
            assert!(m.contains("`static_smem`") && m.contains("`spills`"), "{m}");
        }
        other => panic!("{other:?}"),
    }
    let ptx_only = tma_runtime::Compiled {
        cubin: Vec::new(),
        kernel_resources: Vec::new(),
        ..(*c).clone()
    };
    assert!(matches!(
        ptx_only.resources("spills"),
        Err(Error::NoResources { ptx_only: true, .. })
    ));
    // A disk hit (a fresh compiler, as the next process) reads the same figures.
    let later = Compiler::with_config(cfg)?.compile(RESOURCE_KERNELS, &opts)?;
    assert_eq!(later.kernel_resources, c.kernel_resources);
    assert_eq!(later.log, "");
    if let Some(d) = dir {
        let _ = std::fs::remove_dir_all(d);
    }
    // cuobjdump reads registers and the stack from the CUBIN's attributes; its SHARED is the
    // `.nv.shared.<kernel>` section, which on sm_90 may include the 1 KB the system reserves.
    // Missing, cuobjdump skips the cross-check (fails under CI, which installs it with NVRTC).
    if let Some(cuobjdump) = require_tool_or_skip(&format!("{TEST} cross-check"), "cuobjdump") {
        let text = run_cuobjdump(&cuobjdump, &["-res-usage"], &c.cubin, "res-cross");
        let rows = res_usage_rows(&text);
        assert_eq!(rows.len(), 2, "{rows:?}");
        for (name, reg, stack, shared) in rows {
            let r = c.resources(&name)?;
            assert_eq!(u64::from(r.registers), reg, "{name}: registers");
            assert_eq!(r.local_bytes, stack, "{name}: local memory vs STACK");
            assert!(
                shared == r.static_smem_bytes || shared == r.static_smem_bytes + 1024,
                "{name}: static smem {} vs SHARED {shared}",
                r.static_smem_bytes
            );
        }
        eprintln!("{TEST}: cuobjdump -res-usage agrees");
    }
    Ok(())
}

/// A `&str` cache hit at an address seen before compares the text instead of hashing it: new
/// text at the same address (same length, edited in place) is compiled anew, never served the
/// old text's module, and the old text at another address still hits.
#[test]
fn a_str_at_a_known_address_is_compared_not_trusted() -> Result<(), Error> {
    if require_nvrtc_or_skip("a_str_at_a_known_address_is_compared_not_trusted").is_none() {
        return Ok(());
    }
    let compiler = Compiler::with_config(JitConfig {
        cache_dir: None,
        ..config("address")
    })?;
    let opts = CompileOptions::new(Arch::Sm90a).define("SCALE_EXTRA", "2.0f");
    let mut text = KERNEL.to_string();
    let first = compiler.compile(&text, &opts)?;
    assert!(Arc::ptr_eq(&first, &compiler.compile(&text, &opts)?));
    let (at, len) = (text.as_ptr(), text.len());
    let i = text.find("scale(").unwrap();
    text.replace_range(i..i + 5, "scalf");
    assert_eq!((text.as_ptr(), text.len()), (at, len), "edited in place");
    let second = compiler.compile(&text, &opts)?;
    assert!(second.ptx.contains(".entry scalf"), "{}", second.ptx);
    assert!(!Arc::ptr_eq(&first, &second));
    assert!(Arc::ptr_eq(&second, &compiler.compile(&text, &opts)?));
    // The first text, from another buffer: a hit on its fingerprint, the same module.
    assert!(Arc::ptr_eq(&first, &compiler.compile(KERNEL, &opts)?));
    assert!(Arc::ptr_eq(
        &first,
        &compiler.compile_source(&Source::new(KERNEL), &opts)?
    ));
    // Other options at a known address: compiled, not the cached options' module.
    let other = compiler.compile(&text, &opts.clone().define("SCALE_EXTRA", "3.0f"))?;
    assert!(!Arc::ptr_eq(&other, &second));
    Ok(())
}

/// Two kernels of one wgmma helper: `serialized` issues a second wgmma under a branch, which
/// ptxas serializes (its numbered advisory C7515, an `info` line naming the function);
/// `clean` issues one with nothing conditional before its wait, and gets none.
const WGMMA_KERNELS: &str = r#"
__device__ __forceinline__ void mma(float (&d)[8], unsigned long long a, unsigned long long b) {
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, 0, 0;\n"
               "wgmma.mma_async.sync.aligned.m64n16k16.f32.bf16.bf16 {%0,%1,%2,%3,%4,%5,%6,%7}, %8, %9, p, 1, 1, 0, 0;\n}\n"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7])
               : "l"(a), "l"(b));
}
extern "C" __global__ void serialized(float* out, unsigned long long a, unsigned long long b, int n) {
  float d[8] = {0, 0, 0, 0, 0, 0, 0, 0}, e[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  asm volatile("wgmma.fence.sync.aligned;\n");
  mma(d, a, b);
  if (n > 3) mma(e, a + 2, b + 2);
  asm volatile("wgmma.commit_group.sync.aligned;\n");
  asm volatile("wgmma.wait_group.sync.aligned 0;\n");
  for (int i = 0; i < 8; ++i) out[threadIdx.x * 8 + i] = d[i] + e[i];
}
extern "C" __global__ void clean(float* out, unsigned long long a, unsigned long long b) {
  float d[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  asm volatile("wgmma.fence.sync.aligned;\n");
  mma(d, a, b);
  asm volatile("wgmma.commit_group.sync.aligned;\n");
  asm volatile("wgmma.wait_group.sync.aligned 0;\n");
  for (int i = 0; i < 8; ++i) out[threadIdx.x * 8 + i] = d[i];
}
"#;

/// ptxas's performance advisories reach `Compiled::log` and `performance_losses` (they are
/// `ptxas info` lines, like the verbose report kept out of the log), on a fresh compile and
/// on a disk hit: one, for the serialized kernel, none for the clean one.
#[test]
fn performance_losses_reach_the_log() -> Result<(), Error> {
    if require_nvrtc_or_skip("performance_losses_reach_the_log").is_none() {
        return Ok(());
    }
    let cfg = config("perf-loss");
    let dir = cfg.cache_dir.clone();
    let opts = CompileOptions::new(Arch::Sm90a).debug_waits(false);
    let c = Compiler::with_config(cfg.clone())?.compile(WGMMA_KERNELS, &opts)?;
    let losses: Vec<&str> = c.performance_losses().collect();
    assert_eq!(losses.len(), 1, "{}", c.log);
    assert!(losses[0].contains("function 'serialized'"), "{}", losses[0]);
    assert!(
        c.resources("serialized")?.registers > 0 && c.resources("clean")?.registers > 0,
        "the report is still parsed"
    );
    let later = Compiler::with_config(cfg)?.compile(WGMMA_KERNELS, &opts)?;
    assert_eq!(
        later.performance_losses().collect::<Vec<_>>(),
        losses,
        "a disk hit: {}",
        later.log
    );
    if let Some(d) = dir {
        let _ = std::fs::remove_dir_all(d);
    }
    Ok(())
}

/// What the driver layer reads from the PTX so that it asks the driver only for what exists
/// (a failed query is an API error under compute-sanitizer): each kernel's parameter count,
/// and whether the module has the hang record.
#[test]
fn ptx_tells_each_kernels_parameters_and_the_record() -> Result<(), Error> {
    if require_nvrtc_or_skip("ptx_tells_each_kernels_parameters_and_the_record").is_none() {
        return Ok(());
    }
    let compiler = Compiler::with_config(JitConfig {
        cache: false,
        ..config("params")
    })?;
    let kernels = r#"
struct Big { float v[40]; };
extern "C" __global__ void k() {}
extern "C" __global__ void k2(float* a, int n, double d) { if (n) a[0] = d; }
extern "C" __global__ void k_map(const __grid_constant__ CUtensorMap m, float* out) {
    out[0] = (float)(unsigned long long)&m;
}
extern "C" __global__ void kbig(Big b, int* o) { o[0] = (int)b.v[3]; }
__global__ void mangled(int a, int b) {}
"#;
    let text = tma_core::render::KernelSource::new()
        .tile(&user_tile())
        .body(kernels)
        .build()
        .unwrap();
    // The record: in debug builds, and in release ones with bounded waits.
    for (debug, bounded) in [(false, false), (true, false), (false, true)] {
        let opts = CompileOptions::new(Arch::Sm90a)
            .debug_waits(debug)
            .bounded_waits(bounded);
        let c = compiler.compile(&text, &opts)?;
        let counts: Vec<_> = ["k", "k2", "k_map", "kbig", "_Z7mangledii", "k3", "mangled"]
            .iter()
            .map(|k| c.entry_param_count(k))
            .collect();
        assert_eq!(
            counts,
            [Some(0), Some(3), Some(2), Some(2), Some(2), None, None],
            "debug {debug}, bounded {bounded}: {}",
            c.ptx
        );
        assert_eq!(
            c.ptx_names(tma_runtime::driver::DEBUG_RECORD_SYMBOL),
            debug || bounded,
            "debug {debug}, bounded {bounded}: {}",
            c.ptx
        );
        assert!(!c.ptx_names("tma_debug"), "a prefix is not the symbol");
        assert!(!c.ptx_names("debug_record"), "nor a suffix");
    }
    Ok(())
}
