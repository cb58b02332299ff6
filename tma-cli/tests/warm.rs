//! `tma precompile` and `tma cache` as a shell user runs them. The test that matters: a cache
//! the command warms is the cache the runtime library reads, under the same key, for a source
//! the library builds on its own (the tile declared by hand, the kernel file by its path), with
//! no NVRTC compile; and another option or source byte is another key.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::PathBuf;

use tma_core::render::KernelSource;
use tma_core::{validate, Arch, DType, Swizzle, TileSpec};
use tma_runtime::{CompileOptions, Source};
use tma_test_support::jit::cache_compiler;

mod run;
use run::tma;

fn scratch(tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("tma-cli-warm-test-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

const MPK: &str = "examples/mpk/tiles.tma";

const KERNEL: &str = r#"extern "C" __global__ void copy(const __grid_constant__ CUtensorMap map) {
  extern __shared__ unsigned char raw[];
  __shared__ alignas(8) tma_mbarrier bar;
  unsigned char* smem = tma_align_smem<MpkA>(raw);
  if (threadIdx.x == 0) { tma_mbarrier_init(&bar, 1); tma_fence_mbarrier_init(); }
  __syncthreads();
  if (threadIdx.x == 0) {
    tma_expect<MpkA>(&bar);
    MpkA::load(&map, &bar, smem, {.ROW = 64 * (int)blockIdx.x, .COL = 0});
  }
  tma_group<MpkA>::wait(&bar, 0);
}
"#;

/// The source a Rust program would build for the same kernel: MPK's tile declared with the
/// runtime builder (as `tma_2d! { MpkA: bf16, .. }` in examples/mpk/tiles.tma declares it),
/// named `MpkA` in the kernel, the kernel file by the path the command was given.
fn library_source(kernel_path: &str, kernel: &str) -> Source {
    let tile = validate(
        &TileSpec::new("mpk_a", DType::BF16, [4096, 1024], [64, 64])
            .dim_names(["ROW", "COL"])
            .swizzle(Swizzle::B128)
            .repeat([1, 2])
            .smem_stride(4096),
    )
    .unwrap();
    Source::kernel(
        &KernelSource::new()
            .tile_as(&tile, "MpkA")
            .body_at(kernel_path, 1, kernel),
    )
    .unwrap()
}

/// The key `tma precompile` printed for its one kernel.
fn printed_key(stdout: &str) -> String {
    stdout
        .lines()
        .next()
        .and_then(|l| l.split_whitespace().last())
        .unwrap_or_default()
        .to_string()
}

#[test]
fn a_cache_the_command_warms_is_hit_by_the_library() {
    let test = "a_cache_the_command_warms_is_hit_by_the_library";
    if tma_test_support::skip::require_nvrtc_or_skip(test).is_none() {
        return;
    }
    let dir = scratch("hit");
    let cache = dir.join("cache");
    let kernel = dir.join("copy.cu");
    std::fs::write(&kernel, KERNEL).unwrap();
    let k = kernel.to_str().unwrap();
    let c = cache.to_str().unwrap();

    let cold = tma(&["precompile", k, "--tile", MPK, "--cache-dir", c]);
    assert_eq!(cold.code, 0, "{}", cold.stderr);
    assert!(cold.stdout.starts_with("compiled "), "{}", cold.stdout);
    assert!(
        cold.stdout
            .contains("1 kernel: 1 compiled, 0 already cached, in"),
        "{}",
        cold.stdout
    );
    let key = printed_key(&cold.stdout);
    assert_eq!(key.len(), 32, "{}", cold.stdout);
    // Again: cached, the same key.
    let again = tma(&["precompile", k, "--tile", MPK, "--cache-dir", c]);
    assert_eq!(again.code, 0, "{}", again.stderr);
    assert!(again.stdout.starts_with("cached "), "{}", again.stdout);
    assert_eq!(printed_key(&again.stdout), key);

    // The library, building the same source itself, with the command's default options
    // (release waits: no --debug): a disk hit, no NVRTC compile, the same key.
    let release = CompileOptions::new(Arch::Sm90a).debug_waits(false);
    let lib = cache_compiler(&cache);
    let source = library_source(k, KERNEL);
    let compiled = lib.compile_source(&source, &release).unwrap();
    let stats = lib.stats();
    assert_eq!(
        (stats.nvrtc_compiles, stats.disk_hits),
        (0, 1),
        "the library missed the command's entry"
    );
    assert_eq!(compiled.key, key);
    assert!(compiled.has_cubin());

    // Another option, or another byte of the kernel: another key, compiled.
    let lib = cache_compiler(&cache);
    let debug = lib.compile_source(&source, &release.clone().debug_waits(true));
    let byte = lib.compile_source(&library_source(k, &KERNEL.replace("64 *", "64*")), &release);
    assert!(debug.is_ok() && byte.is_ok());
    assert_eq!(lib.stats().nvrtc_compiles, 2);
    // ... and `--debug` warms the debug one: the command and the library agree again.
    let warm_debug = tma(&["precompile", k, "--tile", MPK, "--cache-dir", c, "--debug"]);
    assert!(
        warm_debug.stdout.starts_with("cached "),
        "{}",
        warm_debug.stdout
    );
    assert_eq!(printed_key(&warm_debug.stdout), debug.unwrap().key);

    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn precompile_reports_each_kernel_and_refuses_what_it_cannot_do() {
    let dir = scratch("refuse");
    let kernel = dir.join("copy.cu");
    std::fs::write(&kernel, KERNEL).unwrap();
    let k = kernel.to_str().unwrap();
    let c = dir.join("cache");
    let c = c.to_str().unwrap();
    let arch = tma(&[
        "precompile",
        k,
        "--tile",
        MPK,
        "--arch",
        "sm_91",
        "--cache-dir",
        c,
    ]);
    assert_eq!(arch.code, 2);
    assert!(
        arch.stderr.contains("unknown arch `sm_91`"),
        "{}",
        arch.stderr
    );
    let missing = tma(&["precompile", "no/such.cu", "--tile", MPK, "--cache-dir", c]);
    assert_eq!(missing.code, 3, "{}", missing.stderr);
    let no_tile = tma(&["precompile", k]);
    assert_eq!(no_tile.code, 2);
    if tma_test_support::skip::require_nvrtc_or_skip("precompile_reports_each_kernel").is_none() {
        return;
    }
    // One good kernel and one that does not compile: both reported, exit 1.
    let bad = dir.join("bad.cu");
    std::fs::write(&bad, KERNEL.replace(".COL = 0", ".CL = 0")).unwrap();
    let r = tma(&[
        "precompile",
        k,
        bad.to_str().unwrap(),
        "--tile",
        MPK,
        "--cache-dir",
        c,
    ]);
    assert_eq!(r.code, 1, "{}", r.stderr);
    assert!(
        r.stdout.contains("failed   ") && r.stdout.contains("1 failed"),
        "{}",
        r.stdout
    );
    assert!(r.stderr.contains("has no field \"CL\""), "{}", r.stderr);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn cache_lists_sizes_prunes_and_clears_only_its_own_files() {
    let test = "cache_lists_sizes_prunes_and_clears_only_its_own_files";
    let dir = scratch("manage");
    let cache = dir.join("cache");
    let c = cache.to_str().unwrap();
    // An empty (absent) cache.
    let empty = tma(&["cache", "list", "--cache-dir", c]);
    assert_eq!(empty.code, 0, "{}", empty.stderr);
    assert_eq!(empty.stdout, format!("cache {c}: 0 entries, 0 B\n"));
    if tma_test_support::skip::require_nvrtc_or_skip(test).is_none() {
        return;
    }
    let kernel = dir.join("copy.cu");
    std::fs::write(&kernel, KERNEL).unwrap();
    let k = kernel.to_str().unwrap();
    for extra in [None, Some("--debug")] {
        let mut args = vec!["precompile", k, "--tile", MPK, "--cache-dir", c];
        args.extend(extra);
        assert_eq!(tma(&args).code, 0);
    }
    let foreign = cache.join("README");
    std::fs::write(&foreign, "not the cache's").unwrap();
    let corrupt = cache.join(format!("{:032x}.tmajit", 0xbad));
    std::fs::write(&corrupt, "TMAJIT\0\x03 cut short").unwrap();

    let list = tma(&["cache", "list", "--cache-dir", c]);
    assert_eq!(list.code, 0, "{}", list.stderr);
    let lines: Vec<&str> = list.stdout.lines().collect();
    assert!(
        lines[0].starts_with(&format!("cache {c}: 3 entries, ")),
        "{}",
        list.stdout
    );
    assert!(
        lines[1].starts_with("KEY ") && lines[1].contains("KERNELS"),
        "{}",
        list.stdout
    );
    let rows: Vec<&&str> = lines.iter().filter(|l| l.contains("sm_90a")).collect();
    assert_eq!(rows.len(), 2, "{}", list.stdout);
    assert!(rows
        .iter()
        .all(|r| r.contains(" copy ") && r.contains(" 13.")));
    assert_eq!(rows.iter().filter(|r| r.contains("-DTMA_DEBUG")).count(), 1);
    assert!(
        list.stdout
            .contains("(corrupt: never read; prune removes it)"),
        "{}",
        list.stdout
    );

    let size = tma(&["cache", "size", "--cache-dir", c]);
    assert!(
        size.stdout.starts_with(&format!("cache {c}: 3 entries, ")),
        "{}",
        size.stdout
    );
    let prune = tma(&["cache", "prune", "--cache-dir", c]);
    assert_eq!(prune.code, 0, "{}", prune.stderr);
    assert!(
        prune.stdout.starts_with("removed 1 file ("),
        "{}",
        prune.stdout
    );
    assert!(!corrupt.exists());
    let prune = tma(&["cache", "prune", "--older-than", "1d", "--cache-dir", c]);
    assert!(
        prune.stdout.starts_with("removed 0 files (0 B)"),
        "{}",
        prune.stdout
    );
    let bad = tma(&["cache", "prune", "--max-size", "lots", "--cache-dir", c]);
    assert_eq!(bad.code, 2);
    let prune = tma(&["cache", "prune", "--max-size", "0", "--cache-dir", c]);
    assert!(
        prune.stdout.starts_with("removed 2 files ("),
        "{}",
        prune.stdout
    );
    assert!(
        prune.stdout.ends_with(": 0 entries, 0 B\n"),
        "{}",
        prune.stdout
    );
    let again = tma(&["precompile", k, "--tile", MPK, "--cache-dir", c]);
    assert!(again.stdout.starts_with("compiled "), "{}", again.stdout);
    let clear = tma(&["cache", "clear", "--cache-dir", c]);
    assert!(
        clear.stdout.starts_with("removed 1 file ("),
        "{}",
        clear.stdout
    );
    assert!(foreign.exists(), "other files stay");
    let _ = std::fs::remove_dir_all(&dir);
}

/// `tma <args>`, failed after `secs` seconds (a hang), as [`tma`] otherwise.
fn tma_within(secs: u64, args: &[&str]) -> run::Run {
    use std::process::{Command, Stdio};
    let mut child = Command::new(env!("CARGO_BIN_EXE_tma"))
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let start = std::time::Instant::now();
    while child.try_wait().unwrap().is_none() {
        if start.elapsed().as_secs() >= secs {
            let _ = child.kill();
            let _ = child.wait();
            panic!("tma {args:?}: no answer in {secs} s: it hangs");
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let out = child.wait_with_output().unwrap();
    run::Run {
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        code: out.status.code().unwrap_or(-1),
    }
}

#[test]
fn cache_commands_on_a_hostile_dir_neither_hang_nor_reach_outside_it() {
    let dir = scratch("hostile");
    let cache = dir.join("cache");
    let outside = dir.join("outside");
    std::fs::create_dir_all(&cache).unwrap();
    std::fs::create_dir_all(&outside).unwrap();
    let precious = outside.join("precious");
    std::fs::write(&precious, "the user's file").unwrap();
    let name = |n: u32| cache.join(format!("{n:032x}.tmajit"));
    // Named like entries: a FIFO, a directory, links to a file and a directory outside the
    // cache, a dangling link; and a temp-named link to the outside file.
    let fifo = std::process::Command::new("mkfifo").arg(name(1)).status();
    assert!(fifo.is_ok_and(|s| s.success()));
    std::fs::create_dir(name(2)).unwrap();
    std::os::unix::fs::symlink(&precious, name(3)).unwrap();
    std::os::unix::fs::symlink(&outside, name(4)).unwrap();
    std::os::unix::fs::symlink(dir.join("nowhere"), name(5)).unwrap();
    std::os::unix::fs::symlink(&precious, cache.join(format!(".{:032x}.1.0.tmp", 6))).unwrap();
    let c = cache.to_str().unwrap();
    let list = tma_within(20, &["cache", "list", "--cache-dir", c]);
    assert_eq!(list.code, 0, "{}", list.stderr);
    assert!(
        list.stdout.starts_with(&format!("cache {c}: 4 entries")),
        "{}",
        list.stdout
    );
    let size = tma_within(20, &["cache", "size", "--cache-dir", c]);
    assert_eq!(size.code, 0, "{}", size.stderr);
    for prune in [
        &["--older-than", "0s"][..],
        &["--max-size", "0"],
        &["--older-than", "99999999999d"],
    ] {
        let mut args = vec!["cache", "prune", "--cache-dir", c];
        args.extend(prune);
        let r = tma_within(20, &args);
        assert_eq!(r.code, 0, "{prune:?}: {}", r.stderr);
    }
    let clear = tma_within(20, &["cache", "clear", "--cache-dir", c]);
    assert_eq!(clear.code, 0, "{}", clear.stderr);
    assert_eq!(
        std::fs::read_to_string(&precious).unwrap(),
        "the user's file"
    );
    assert!(outside.is_dir() && name(2).is_dir());
    // A cache dir that is a regular file: an error naming it, not a panic.
    let file = dir.join("a file");
    std::fs::write(&file, "x").unwrap();
    for action in ["list", "size", "clear", "prune"] {
        let r = tma_within(
            20,
            &["cache", action, "--cache-dir", file.to_str().unwrap()],
        );
        assert_ne!(r.code, 0, "{action}");
        assert!(
            r.stderr.contains("a file") && !r.stderr.contains("panicked"),
            "{action}: {}",
            r.stderr
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn precompile_into_a_cache_it_cannot_write_fails() {
    let test = "precompile_into_a_cache_it_cannot_write_fails";
    if tma_test_support::skip::require_nvrtc_or_skip(test).is_none() {
        return;
    }
    let dir = scratch("unwritable");
    let kernel = dir.join("copy.cu");
    std::fs::write(&kernel, KERNEL).unwrap();
    let file = dir.join("a file");
    std::fs::write(&file, "not a directory").unwrap();
    let k = kernel.to_str().unwrap();
    for cache in [file.clone(), file.join("below")] {
        let c = cache.to_str().unwrap();
        let r = tma(&["precompile", k, "--tile", MPK, "--cache-dir", c]);
        assert_eq!(r.code, 3, "{c}: {}\n{}", r.stdout, r.stderr);
        assert!(r.stdout.starts_with("unsaved "), "{}", r.stdout);
        assert!(
            r.stdout
                .contains("0 compiled, 0 already cached, 1 not saved,"),
            "{}",
            r.stdout
        );
        assert!(
            r.stderr.contains("could not write cache entry"),
            "{}",
            r.stderr
        );
        assert!(r.stderr.contains("nothing was warmed"), "{}", r.stderr);
    }
    let r = tma(&[
        "precompile",
        k,
        "--tile",
        MPK,
        "--cache-dir",
        file.to_str().unwrap(),
    ]);
    assert!(
        r.stderr.contains("a file exists and is not a directory"),
        "{}",
        r.stderr
    );
    // A usable directory with spaces and non-ASCII: warmed, then found.
    let good = dir.join("spaces ü/キャッシュ");
    let c = good.to_str().unwrap();
    let cold = tma(&["precompile", k, "--tile", MPK, "--cache-dir", c]);
    assert_eq!(cold.code, 0, "{}", cold.stderr);
    assert!(cold.stdout.starts_with("compiled "), "{}", cold.stdout);
    let warm = tma(&["precompile", k, "--tile", MPK, "--cache-dir", c]);
    assert!(warm.stdout.starts_with("cached "), "{}", warm.stdout);
    let _ = std::fs::remove_dir_all(&dir);
}
