//! The disk cache under conditions a JIT user meets: damaged or foreign entries, a cache
//! directory that cannot be used, other threads and processes writing the same entry, odd
//! environment values. Every case compiles for real (NVRTC, no GPU) and must give the same PTX
//! as a clean compile: a bad entry is compiled again, a bad directory only costs the cache.
//! (Tests run as root in CI, so a chmod 0500 directory stays writable there: that case only
//! checks the compile succeeds.)
#![allow(clippy::panic, clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::mpsc;
use std::time::Duration;

use tma_core::Arch;
use tma_runtime::compile::{default_cache_dir, EntryState};
use tma_runtime::{CompileOptions, Compiler, JitConfig};
use tma_test_support::jit::cache_compiler;
use tma_test_support::skip::require_nvrtc_or_skip;

/// Set in a child process of this test binary: the child test it names does its part.
const CHILD_ENV: &str = "TMA_HOSTILE_CACHE_CHILD";

fn kernel(name: &str) -> String {
    format!(
        "extern \"C\" __global__ void {name}(float* out, int n) {{\n\
         \x20 int i = blockIdx.x * blockDim.x + threadIdx.x;\n\
         \x20 if (i < n) out[i] = i * 3.0f;\n}}\n"
    )
}

fn options() -> CompileOptions {
    CompileOptions::new(Arch::Sm90a).debug_waits(false)
}

fn scratch(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("tma-hostile-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    let _ = std::fs::remove_file(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Runs `f` on a thread and fails the test if it takes longer than `secs` (a hang).
fn within<T: Send + 'static>(secs: u64, what: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(Duration::from_secs(secs))
        .unwrap_or_else(|e| panic!("{what}: no answer in {secs} s ({e}): it hangs"))
}

fn mkfifo(path: &Path) -> bool {
    Command::new("mkfifo")
        .arg(path)
        .status()
        .is_ok_and(|s| s.success())
}

#[test]
fn damaged_or_foreign_entries_are_compiled_again() {
    let test = "damaged_or_foreign_entries_are_compiled_again";
    if require_nvrtc_or_skip(test).is_none() {
        return;
    }
    let dir = scratch("damaged");
    let (a, b) = (kernel("hostile_a"), kernel("hostile_b"));
    let clean = cache_compiler(&dir).compile(&a, &options()).unwrap();
    let other = cache_compiler(&dir).compile(&b, &options()).unwrap();
    let path = cache_compiler(&dir).disk_cache().unwrap().path(&clean.key);
    let whole = std::fs::read(&path).unwrap();
    let b_entry = std::fs::read(path.with_file_name(format!("{}.tmajit", other.key))).unwrap();
    let mut other_format = whole.clone();
    other_format[7] = 99;

    type Damage = Box<dyn Fn(&Path)>;
    let write =
        |bytes: Vec<u8>| -> Damage { Box::new(move |p| std::fs::write(p, &bytes).unwrap()) };
    let cases: Vec<(&str, Damage)> = vec![
        ("truncated", write(whole[..whole.len() / 2].to_vec())),
        ("one byte short", write(whole[..whole.len() - 1].to_vec())),
        ("zero-length", write(Vec::new())),
        (
            "garbage",
            write((0..4096u32).map(|i| (i * 31) as u8).collect()),
        ),
        ("another key's entry renamed into place", write(b_entry)),
        ("another format's header", write(other_format)),
        (
            "a FIFO (reading one waits for a writer)",
            Box::new(|p| assert!(mkfifo(p), "mkfifo {}", p.display())),
        ),
        (
            "a symlink to /dev/zero (never ends)",
            Box::new(|p| std::os::unix::fs::symlink("/dev/zero", p).unwrap()),
        ),
    ];
    for (what, damage) in cases {
        let _ = std::fs::remove_file(&path);
        damage(&path);
        let (d, src) = (dir.clone(), a.clone());
        let (c, stats) = within(30, what, move || {
            let fresh = cache_compiler(&d);
            let c = fresh.compile(&src, &options());
            (c, fresh.stats())
        });
        let c = c.unwrap_or_else(|e| panic!("{what}: {e}"));
        assert_eq!(stats.nvrtc_compiles, 1, "{what}: compiled again, not read");
        assert_eq!((&c.ptx, &c.cubin), (&clean.ptx, &clean.cubin), "{what}");
        // The compile rewrote a whole entry: the next process reads it.
        let warm = cache_compiler(&dir);
        let again = warm.compile(&a, &options()).unwrap();
        assert_eq!(warm.stats().disk_hits, 1, "{what}: entry rewritten");
        assert_eq!(again.ptx, clean.ptx, "{what}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn special_files_in_the_cache_do_not_hang_or_stop_list_prune_clear() {
    let test = "special_files_in_the_cache_do_not_hang_or_stop_list_prune_clear";
    if require_nvrtc_or_skip(test).is_none() {
        return;
    }
    let root = scratch("special");
    let dir = root.join("cache");
    let outside = root.join("outside");
    std::fs::create_dir_all(&outside).unwrap();
    let c = cache_compiler(&dir)
        .compile(&kernel("special"), &options())
        .unwrap();
    let keep_file = outside.join("precious.tmajit");
    std::fs::write(&keep_file, b"the user's file").unwrap();
    std::fs::write(outside.join("inner"), b"the user's file").unwrap();
    let name = |n: u32| dir.join(format!("{n:032x}.tmajit"));
    // Named like entries: a FIFO, a device, a directory, links to a file and a directory
    // outside the cache, a dangling link, and a temp-named link to the outside file.
    assert!(mkfifo(&name(1)));
    std::os::unix::fs::symlink("/dev/zero", name(2)).unwrap();
    std::fs::create_dir(name(3)).unwrap();
    std::fs::write(name(3).join("inner"), b"x").unwrap();
    std::os::unix::fs::symlink(&keep_file, name(4)).unwrap();
    std::os::unix::fs::symlink(&outside, name(5)).unwrap();
    std::os::unix::fs::symlink(root.join("nowhere"), name(6)).unwrap();
    std::os::unix::fs::symlink(&keep_file, dir.join(format!(".{:032x}.1.0.tmp", 7))).unwrap();

    let cache = cache_compiler(&dir).disk_cache().unwrap().clone();
    let listed = within(10, "entries()", {
        let cache = cache.clone();
        move || cache.entries()
    })
    .unwrap();
    let valid = listed
        .iter()
        .filter(|e| matches!(e.state, EntryState::Valid { .. }))
        .count();
    assert_eq!(valid, 1, "{listed:?}");
    assert!(
        !listed.iter().any(|e| e.path == name(3)),
        "a directory is not an entry"
    );
    // Size-pruning to nothing, then clearing: only the cache's own names go, links and not
    // what they point at.
    let pruned = within(10, "prune", {
        let cache = cache.clone();
        move || cache.prune(Some(Duration::ZERO), Some(0))
    });
    assert!(pruned.is_ok(), "{pruned:?}");
    let cleared = within(10, "clear", {
        let cache = cache.clone();
        move || cache.clear()
    });
    assert!(cleared.is_ok(), "{cleared:?}");
    assert_eq!(std::fs::read(&keep_file).unwrap(), b"the user's file");
    assert_eq!(
        std::fs::read(outside.join("inner")).unwrap(),
        b"the user's file"
    );
    assert!(
        name(3).join("inner").exists(),
        "a directory in the cache is left alone"
    );
    assert!(!dir.join(format!("{}.tmajit", c.key)).exists());
    let _ = std::fs::remove_dir_all(&root);
}

#[test]
fn an_unusable_cache_dir_costs_only_the_cache() {
    let test = "an_unusable_cache_dir_costs_only_the_cache";
    if require_nvrtc_or_skip(test).is_none() {
        return;
    }
    let root = scratch("unusable");
    let src = kernel("unusable");
    let clean = Compiler::with_config(JitConfig {
        debug: false,
        dump_dir: None,
        cache: false,
        cache_dir: None,
    })
    .unwrap()
    .compile(&src, &options())
    .unwrap();

    let file = root.join("a file");
    std::fs::write(&file, b"not a directory").unwrap();
    let looped = root.join("loop");
    std::os::unix::fs::symlink(&looped, &looped).unwrap();
    let read_only = root.join("read-only");
    std::fs::create_dir(&read_only).unwrap();
    let _ = Command::new("chmod").arg("0500").arg(&read_only).status();
    // (dir, whether a second compiler must find the entry on disk)
    let cases = [
        (file.clone(), false),
        (file.join("below a file"), false),
        (looped.clone(), false),
        (looped.join("below a loop"), false),
        (read_only.clone(), false),
        (root.join("missing/parents/of the cache"), true),
        (root.join("spaces and ünïcode ✓/キャッシュ"), true),
    ];
    for (dir, persists) in cases {
        let what = dir.display().to_string();
        let first = cache_compiler(&dir).compile(&src, &options());
        let first = first.unwrap_or_else(|e| panic!("{what}: {e}"));
        assert_eq!(first.ptx, clean.ptx, "{what}");
        let second = cache_compiler(&dir);
        assert_eq!(second.compile(&src, &options()).unwrap().ptx, clean.ptx);
        if persists {
            assert_eq!(second.stats().disk_hits, 1, "{what}");
        }
        // Listing an unusable directory is a typed error or a listing, never a panic.
        let cache = second.disk_cache().unwrap();
        match cache.entries() {
            Ok(_) => {}
            Err(tma_runtime::Error::CacheIo { path, .. }) => assert_eq!(path, what),
            Err(e) => panic!("{what}: {e}"),
        }
    }
    // TMA_JIT_DUMP at a regular file: a warning, the compile stands.
    let dumped = Compiler::with_config(JitConfig {
        debug: false,
        dump_dir: Some(file.clone()),
        cache: false,
        cache_dir: None,
    })
    .unwrap()
    .compile(&src, &options());
    assert_eq!(dumped.map(|c| c.ptx.clone()).ok(), Some(clean.ptx.clone()));
    let _ = Command::new("chmod").arg("0700").arg(&read_only).status();
    let _ = std::fs::remove_dir_all(&root);
}

#[test]
fn two_threads_compiling_one_source_into_one_dir_agree() {
    let test = "two_threads_compiling_one_source_into_one_dir_agree";
    if require_nvrtc_or_skip(test).is_none() {
        return;
    }
    let dir = scratch("threads");
    let src = kernel("threads");
    let outs: Vec<_> = std::thread::scope(|s| {
        let hs: Vec<_> = (0..2)
            .map(|_| s.spawn(|| cache_compiler(&dir).compile(&src, &options()).unwrap()))
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).collect()
    });
    assert_eq!(
        (&outs[0].ptx, &outs[0].cubin),
        (&outs[1].ptx, &outs[1].cubin)
    );
    let warm = cache_compiler(&dir);
    assert_eq!(warm.compile(&src, &options()).unwrap().ptx, outs[0].ptx);
    assert_eq!(warm.stats().disk_hits, 1);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Runs this test binary's `child` test in a child process with `env` set; its stdout.
fn child(name: &str, env: &[(&str, &str)]) -> Command {
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.args(["--exact", name, "--nocapture", "--test-threads=1"]);
    cmd.env(CHILD_ENV, name);
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd
}

/// The line `<tag> <value>` a child printed.
fn said(stdout: &[u8], tag: &str) -> Option<String> {
    String::from_utf8_lossy(stdout)
        .lines()
        .find_map(|l| l.strip_prefix(tag)?.strip_prefix(' ').map(str::to_string))
}

/// In a child: compiles the kernel into `TMA_CACHE_DIR` and prints its PTX's fingerprint.
#[test]
fn child_compile_into_env_cache_dir() {
    if std::env::var(CHILD_ENV).as_deref() != Ok("child_compile_into_env_cache_dir") {
        return;
    }
    let c = Compiler::new().unwrap();
    println!(); // after the harness's `test <name> ... `
    let out = c.compile(&kernel("processes"), &options()).unwrap();
    println!(
        "ptx {:032x}",
        xxhash_rust::xxh3::xxh3_128(out.ptx.as_bytes())
    );
    println!("cubin {:032x}", xxhash_rust::xxh3::xxh3_128(&out.cubin));
}

#[test]
fn two_processes_compiling_one_source_into_one_dir_agree() {
    let test = "two_processes_compiling_one_source_into_one_dir_agree";
    if require_nvrtc_or_skip(test).is_none() {
        return;
    }
    let dir = scratch("processes");
    let d = dir.to_str().unwrap();
    let kids: Vec<_> = (0..2)
        .map(|_| {
            child("child_compile_into_env_cache_dir", &[("TMA_CACHE_DIR", d)])
                .stdout(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    let outs: Vec<_> = kids
        .into_iter()
        .map(|k| k.wait_with_output().unwrap())
        .collect();
    let here = cache_compiler(&dir)
        .compile(&kernel("processes"), &options())
        .unwrap();
    for o in &outs {
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        assert_eq!(
            said(&o.stdout, "ptx"),
            Some(format!(
                "{:032x}",
                xxhash_rust::xxh3::xxh3_128(here.ptx.as_bytes())
            ))
        );
        assert_eq!(
            said(&o.stdout, "cubin"),
            Some(format!("{:032x}", xxhash_rust::xxh3::xxh3_128(&here.cubin)))
        );
    }
    let leftovers: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .filter_map(Result::ok)
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".tmp"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// In a child: prints what the runtime makes of its environment.
#[test]
fn child_report_env() {
    if std::env::var(CHILD_ENV).as_deref() != Ok("child_report_env") {
        return;
    }
    println!(); // after the harness's `test <name> ... `
    println!("cache_dir {:?}", default_cache_dir());
    println!("config {:?}", JitConfig::from_env());
    match Compiler::new() {
        Ok(_) => println!("compiler ok"),
        Err(e) => println!("compiler error {e}"),
    }
}

#[test]
fn odd_environment_values_are_refused_or_ignored_by_name() {
    // Empty TMA_CACHE_DIR: unset, the next place is used (not the working directory).
    let o = child(
        "child_report_env",
        &[
            ("TMA_CACHE_DIR", ""),
            ("XDG_CACHE_HOME", "/xdg"),
            ("HOME", "/home/u"),
        ],
    )
    .output()
    .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(
        said(&o.stdout, "cache_dir").as_deref(),
        Some("Some(\"/xdg/tma\")")
    );
    // TMA_NVRTC_PATH at a file that is no library: a typed error naming it, no panic.
    let root = scratch("env");
    let fake = root.join("libnvrtc.so.13");
    std::fs::write(&fake, b"not an ELF file").unwrap();
    for (var, val) in [
        ("TMA_NVRTC_PATH", fake.to_str().unwrap()),
        ("TMA_NVRTC_PATH", root.to_str().unwrap()),
        ("TMA_NVRTC_PATH", "/dev/null"),
    ] {
        let o = child("child_report_env", &[(var, val)]).output().unwrap();
        assert!(
            o.status.success(),
            "{var}={val}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        let e = said(&o.stdout, "compiler").unwrap_or_default();
        assert!(
            e.starts_with("error ") && e.contains("libnvrtc"),
            "{var}={val}: {e}"
        );
    }
    // The on/off knobs (the runtime parses no numbers from its environment): any text but
    // "", 0, false, no, off is on; none of it panics.
    for val in ["garbage", "-1", "99999999999999999999999", "0", "\u{7f}"] {
        let o = child(
            "child_report_env",
            &[("TMA_JIT_NO_CACHE", val), ("TMA_JIT_DEBUG", val)],
        )
        .output()
        .unwrap();
        assert!(
            o.status.success(),
            "{val:?}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        let config = said(&o.stdout, "config").unwrap_or_default();
        let on = val != "0";
        assert!(
            config.contains(&format!("debug: {on}")),
            "{val:?}: {config}"
        );
        assert!(
            config.contains(&format!("cache: {}", !on)),
            "{val:?}: {config}"
        );
    }
    let _ = std::fs::remove_dir_all(&root);
}
