//! nvcc for the tests that compile generated headers as a C++ user does (no GPU needed).

use std::path::PathBuf;

/// nvcc, when the CUDA headers sit beside it (`<bin>/../include/cuda_runtime.h`); `None`
/// after printing `SKIP <test>: <reason>`. Panics instead with `CI=true` or
/// `TMA_REQUIRE_NVCC` set: `eval "$(scripts/cuda-tools.sh --headers)"` installs both.
#[allow(clippy::panic)] // a test that requires nvcc must fail loudly
pub fn nvcc_with_headers(test: &str) -> Option<PathBuf> {
    let nvcc = std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|dir| dir.join("nvcc"))
            .find(|p| p.is_file())
    });
    let ready = nvcc.filter(|n| {
        n.parent()
            .and_then(|bin| bin.parent())
            .is_some_and(|top| top.join("include").join("cuda_runtime.h").is_file())
    });
    if ready.is_none() {
        let required = std::env::var("CI").is_ok_and(|v| v == "true")
            || std::env::var_os("TMA_REQUIRE_NVCC").is_some();
        let why = "no nvcc with cuda_runtime.h beside it on PATH (eval \"$(scripts/cuda-tools.sh --headers)\" installs them)";
        if required {
            panic!("{test}: {why}");
        }
        println!("SKIP {test}: {why}");
    }
    ready
}
