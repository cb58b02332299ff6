//! A generated header builds with nvcc against CUDA 13's own `cuda.h` and `cuda_runtime.h`
//! (what a C++ user of `tma::render::header` does): the prelude's `static_assert`s on
//! `CUtensorMap` then check the real driver type, and the program links. Needs the headers of
//! `eval "$(scripts/cuda-tools.sh --headers)"` (scripts/test.sh installs them); skips visibly
//! without them, fails instead with `CI=true` or `TMA_REQUIRE_NVCC=1`. No GPU needed.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::process::Command;

use tma::render::{self, corpus::corpus};
use tma::Arch;
use tma_test_support::nvcc::nvcc_with_headers;

/// Uses the prelude's helpers and the tiles' constants; `main` so that the link runs too.
const PROGRAM: &str = r#"#include "tma_tiles.cuh"
#include <cstdio>

static_assert(tma_mpk_a::TX_BYTES == 16384u, "two 64 x 64 bf16 boxes");

__global__ void touch(const __grid_constant__ CUtensorMap map, unsigned* out) {
  __shared__ tma_mbarrier bar;
  if (threadIdx.x == 0) {
    tma_mbarrier_init(&bar, 1);
    tma_fence_mbarrier_init();
    tma_prefetch_tensormap(&map);
    tma_mbarrier_arrive(&bar);
  }
  __syncthreads();
  tma_mbarrier_wait(&bar, 0);
  out[threadIdx.x] = tma_mpk_a::SMEM_BYTES;
}

int main() {
  std::printf("%zu\n", sizeof(CUtensorMap));
  return 0;
}
"#;

#[test]
fn a_generated_header_builds_with_nvcc_and_cuda_13_headers() {
    let test = "a_generated_header_builds_with_nvcc_and_cuda_13_headers";
    let Some(nvcc) = nvcc_with_headers(test) else {
        return;
    };
    let tiles: Vec<_> = corpus()
        .into_iter()
        .filter(|v| v.spec().target == Arch::Sm90a)
        .collect();
    assert!(tiles.len() >= 8, "the corpus shrank to {}", tiles.len());
    let header = render::header(&tiles).unwrap();
    let dir = std::env::temp_dir().join(format!("tma-nvcc-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("tma_tiles.cuh"), header).unwrap();
    std::fs::write(dir.join("program.cu"), PROGRAM).unwrap();
    // The disassembler beside nvcc (scripts/cuda-tools.sh installs both).
    let cuobjdump = nvcc.with_file_name("cuobjdump");
    // The header's default is the bare wait loop; TMA_BOUNDED_WAITS or TMA_DEBUG bound it.
    for (define, bounded) in [
        (None, false),
        (Some("-DTMA_BOUNDED_WAITS"), true),
        (Some("-DTMA_DEBUG"), true),
    ] {
        let exe = dir.join(format!(
            "program_{}",
            define.unwrap_or("-bare").trim_start_matches('-')
        ));
        let mut cmd = Command::new(&nvcc);
        cmd.current_dir(&dir)
            .args(["-arch=sm_90a", "-std=c++20", "-o"])
            .arg(&exe)
            .arg("program.cu");
        cmd.args(define);
        let out = cmd.output().unwrap();
        let log = String::from_utf8_lossy(&out.stderr).to_string()
            + &String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "nvcc ({define:?}) failed:\n{log}");
        assert!(!log.contains("warning"), "nvcc warned:\n{log}");
        // The host side agrees with the device side on the map's size.
        let run = Command::new(&exe).output().unwrap();
        assert!(run.status.success(), "{run:?}");
        assert_eq!(String::from_utf8_lossy(&run.stdout).trim(), "128");
        // The wait's bound (the clock, the trap) is in the device code iff asked for.
        let ptx = Command::new(&cuobjdump)
            .arg("-ptx")
            .arg(&exe)
            .output()
            .unwrap();
        assert!(ptx.status.success(), "cuobjdump -ptx: {ptx:?}");
        let ptx = String::from_utf8_lossy(&ptx.stdout);
        assert!(ptx.contains(".entry"), "no PTX embedded ({define:?})");
        assert_eq!(
            ptx.contains("%globaltimer") && ptx.contains("trap;"),
            bounded,
            "{define:?}"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// What a generated header includes (`prelude.cuh.tera`, `encode.cuh.tera`; nvcc adds
/// `cuda_runtime.h` itself, named here too).
const INCLUDES: &str = "#include <cuda.h>\n#include <cuda_runtime.h>\n#include <cstdio>\n";

/// The committed list of those headers' macros (`tma::ident::generated::HEADER_MACROS`).
const MACROS_FILE: &str = "tma-core/src/ident/header_macros.txt";

/// `tma-core/src/ident/header_macros.txt` holds every macro of the headers a generated header
/// includes that could be a user name (no leading `_`, no `tma_`): regenerated here with nvcc,
/// a missing macro fails. `TMA_UPDATE_MACROS=1` rewrites the file instead.
#[test]
fn header_macros_list_holds_every_macro_of_the_included_headers() {
    let test = "header_macros_list_holds_every_macro_of_the_included_headers";
    let Some(nvcc) = nvcc_with_headers(test) else {
        return;
    };
    let dir = std::env::temp_dir().join(format!("tma-macros-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let src = dir.join("includes.cu");
    std::fs::write(&src, INCLUDES).unwrap();
    let out = Command::new(&nvcc)
        .args([
            "-E",
            "-Xcompiler",
            "-dM",
            "-x",
            "cu",
            "-std=c++20",
            "-arch=sm_90a",
        ])
        .arg(&src)
        .output()
        .unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    assert!(
        out.status.success(),
        "nvcc -E -dM failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let found: std::collections::BTreeSet<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.strip_prefix("#define "))
        .filter_map(|l| l.split(|c: char| c == '(' || c.is_whitespace()).next())
        .filter(|n| {
            n.starts_with(|c: char| c.is_ascii_alphabetic())
                && n.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
                && !n.to_ascii_lowercase().starts_with("tma_")
        })
        .map(str::to_string)
        .collect();
    assert!(
        found.contains("EOF") && found.contains("CUDA_VERSION"),
        "{found:?}"
    );
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(MACROS_FILE);
    if std::env::var_os("TMA_UPDATE_MACROS").is_some() {
        let text: String = found.iter().map(|n| format!("{n}\n")).collect();
        std::fs::write(&path, text).unwrap();
        println!("wrote {} macros to {MACROS_FILE}", found.len());
        return;
    }
    let committed = tma_core::ident::generated::HEADER_MACROS;
    assert_eq!(
        committed,
        std::fs::read_to_string(&path).unwrap(),
        "the embedded list is the file"
    );
    let known: std::collections::BTreeSet<&str> = committed.lines().collect();
    let missing: Vec<&String> = found
        .iter()
        .filter(|n| !known.contains(n.as_str()))
        .collect();
    assert!(
        missing.is_empty(),
        "{MACROS_FILE} misses macros of the headers a generated header includes: {missing:?}\n\
         refresh it: eval \"$(scripts/cuda-tools.sh --headers)\"; TMA_UPDATE_MACROS=1 cargo test --test nvcc_header header_macros"
    );
}
