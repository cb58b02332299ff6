//! Ahead-of-time warm-up with real NVRTC compiles (no GPU needed): `Compiler::precompile`
//! fills the disk cache; a fresh compiler (a later process) on the same directory finds every
//! item there and runs NVRTC for none; a change to the source, an option or the arch is
//! another key (compiled), and a corrupt or truncated entry is compiled again, never read.
//! (A change to the NVRTC or tma version or the cache format is another key too: key.rs and
//! disk.rs test those parts, which a test cannot swap here.)
#![allow(clippy::panic, clippy::unwrap_used)]

use tma_core::Arch;
use tma_runtime::compile::{EntryState, Origin};
use tma_runtime::{CompileOptions, Compiler, Error, JitConfig, Source};
use tma_test_support::jit::cache_compiler;
use tma_test_support::skip::require_nvrtc_or_skip;

fn kernel(name: &str) -> String {
    format!(
        "extern \"C\" __global__ void {name}(float* out, int n) {{\n\
         \x20 int i = blockIdx.x * blockDim.x + threadIdx.x;\n\
         \x20 if (i < n) out[i] = i * SCALE;\n}}\n"
    )
}

fn options() -> CompileOptions {
    CompileOptions::new(Arch::Sm90a)
        .debug_waits(false)
        .define("SCALE", "2.0f")
}

fn origins(r: &[Result<tma_runtime::compile::Precompiled, Error>]) -> Vec<Origin> {
    r.iter()
        .map(|x| match x {
            Ok(p) => p.origin,
            Err(e) => panic!("{e}"),
        })
        .collect()
}

#[test]
fn a_precompiled_cache_serves_a_fresh_compiler_without_nvrtc() {
    let test = "a_precompiled_cache_serves_a_fresh_compiler_without_nvrtc";
    if require_nvrtc_or_skip(test).is_none() {
        return;
    }
    let dir = std::env::temp_dir().join(format!("tma-precompile-test-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let items: Vec<(Source, CompileOptions)> = ["a", "b", "c"]
        .iter()
        .map(|n| (Source::new(kernel(n)), options()))
        .collect();

    // Cold: every item compiled, on several threads, and written to disk.
    let cold = cache_compiler(&dir);
    let done = std::sync::atomic::AtomicUsize::new(0);
    let first = cold.precompile_with(&items, 2, &|_, r| {
        assert!(r.is_ok());
        done.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    });
    assert_eq!(origins(&first), [Origin::Nvrtc; 3]);
    assert_eq!(done.into_inner(), 3);
    assert_eq!(cold.stats().nvrtc_compiles, 3);
    // The same compiler again: its in-process cache.
    assert_eq!(origins(&cold.precompile(&items)), [Origin::Memory; 3]);

    // A fresh compiler (a later process): every item from disk, no NVRTC compile.
    let warm = cache_compiler(&dir);
    let second = warm.precompile(&items);
    assert_eq!(origins(&second), [Origin::Disk; 3]);
    let stats = warm.stats();
    assert_eq!((stats.nvrtc_compiles, stats.disk_hits), (0, 3));
    for (a, b) in first.iter().zip(&second) {
        let (a, b) = (a.as_ref().unwrap(), b.as_ref().unwrap());
        assert_eq!(a.compiled.key, b.compiled.key);
        assert_eq!(a.compiled.cubin, b.compiled.cubin);
        assert_eq!(a.compiled.kernel_resources, b.compiled.kernel_resources);
    }
    // The key a compile is cached under is the compiler's cache_key.
    let key = warm.cache_key(&items[0].0, &items[0].1).unwrap();
    assert_eq!(key.hex(), second[0].as_ref().unwrap().compiled.key);

    // Each entry says what it is.
    let listed = warm.disk_cache().unwrap().entries().unwrap();
    assert_eq!(listed.len(), 3);
    let mut kernels: Vec<String> = listed
        .iter()
        .map(|e| match &e.state {
            EntryState::Valid { key, info, .. } => {
                assert_eq!(info.arch, "sm_90a");
                assert_eq!(key.options(), ["-DSCALE=2.0f"]);
                assert_eq!(key.nvrtc, warm.nvrtc().version);
                info.kernels.join(",")
            }
            other => panic!("{other:?}"),
        })
        .collect();
    kernels.sort();
    assert_eq!(kernels, ["a", "b", "c"]);

    // Any change to the source, an option or the arch is another key: compiled.
    let fresh = cache_compiler(&dir);
    let mut byte = kernel("a");
    byte.push(' ');
    let changed = [
        (Source::new(byte), options()),
        (Source::new(kernel("a")), options().define("SCALE", "3.0f")),
        (Source::new(kernel("a")), options().debug_waits(true)),
        (Source::new(kernel("a")), options().line_info(true)),
        (
            Source::new(kernel("a")),
            CompileOptions::new(Arch::Sm100a)
                .debug_waits(false)
                .define("SCALE", "2.0f"),
        ),
    ];
    assert_eq!(origins(&fresh.precompile(&changed)), [Origin::Nvrtc; 5]);

    // A corrupt or truncated entry is compiled again (and rewritten), never read.
    let path = fresh
        .disk_cache()
        .unwrap()
        .path(&second[1].as_ref().unwrap().compiled.key);
    let whole = std::fs::read(&path).unwrap();
    for (what, bytes) in [
        ("truncated", whole[..whole.len() / 2].to_vec()),
        ("bit flipped", {
            let mut b = whole.clone();
            let last = b.len() - 1;
            b[last] ^= 1;
            b
        }),
    ] {
        std::fs::write(&path, &bytes).unwrap();
        let again = cache_compiler(&dir);
        let r = again.precompile(&items[1..2]);
        assert_eq!(origins(&r), [Origin::Nvrtc], "{what}");
        // Rewritten whole: the next process reads it.
        let next = cache_compiler(&dir).precompile(&items[1..2]);
        assert_eq!(origins(&next), [Origin::Disk], "{what}: rewritten");
        let (a, b) = (next[0].as_ref().unwrap(), second[1].as_ref().unwrap());
        assert!(
            a.compiled.cubin == b.compiled.cubin,
            "{what}: the same binary"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_failed_item_does_not_stop_the_others() {
    let test = "a_failed_item_does_not_stop_the_others";
    if require_nvrtc_or_skip(test).is_none() {
        return;
    }
    let c = Compiler::with_config(JitConfig {
        debug: false,
        dump_dir: None,
        cache: false,
        cache_dir: None,
    })
    .unwrap();
    let items = vec![
        (Source::new(kernel("ok1")), options()),
        (Source::new("this is not CUDA"), options()),
        (Source::new(kernel("ok2")), options().define("A B", "1")),
        (Source::new(kernel("ok3")), options()),
    ];
    let r = c.precompile(&items);
    assert!(r[0].is_ok() && r[3].is_ok());
    assert!(matches!(r[1], Err(Error::Compile { .. })), "{:?}", r[1]);
    assert!(
        matches!(r[2], Err(Error::InvalidOption { .. })),
        "{:?}",
        r[2]
    );
    // No cache: every good item ran NVRTC, and so did the bad source.
    assert_eq!(c.stats().nvrtc_compiles, 3);
}
