//! Test support: skip GPU/NVRTC tests visibly, or fail them when the environment says the
//! hardware must be there.
//!
//! - `TMA_REQUIRE_GPU=1`: [`require_gpu_or_skip`] panics instead of skipping.
//! - `TMA_REQUIRE_NVRTC=1` or `CI=true`: [`require_nvrtc_or_skip`] panics instead of skipping
//!   (CI compiles every generated kernel, so NVRTC must be there).
//!
//! Panicking is this module's job: a test that requires hardware must fail loudly.
#![allow(clippy::panic)]

use tma_runtime::cuda_libs::{gpu_available, nvrtc_available, GpuInfo, NvrtcInfo};
use tma_runtime::error::Error;

/// Prints past the test harness's output capture, so skips show in a normal `cargo test`.
fn say(line: &str) {
    use std::io::Write as _;
    let _ = writeln!(std::io::stderr(), "{line}");
}

/// One line for a skip: the library errors list every place searched, which is too long here.
fn short(e: &Error) -> String {
    match e {
        Error::CudaLibraryMissing { library, searched, hint } => format!(
            "CUDA library `{library}` not found ({} places searched; the error lists them); hint: {hint}",
            searched.len()
        ),
        other => other.to_string(),
    }
}

fn env_true(var: &str) -> bool {
    std::env::var(var).is_ok_and(|v| matches!(v.as_str(), "1" | "true" | "TRUE" | "yes"))
}

/// The GPU (device 0, with TMA), or `None` after printing `SKIP <test>: <reason>`.
/// Panics instead when `TMA_REQUIRE_GPU=1`.
pub fn require_gpu_or_skip(test: &str) -> Option<GpuInfo> {
    let reason = match gpu_available() {
        Ok(info) if info.arch.is_some() => return Some(info),
        Ok(info) => format!(
            "device `{}` (compute capability {}.{}) has no TMA",
            info.name, info.compute_capability.0, info.compute_capability.1
        ),
        Err(e) => short(&e),
    };
    if env_true("TMA_REQUIRE_GPU") {
        panic!("{test}: TMA_REQUIRE_GPU=1 but no usable GPU: {reason}");
    }
    say(&format!("SKIP {test}: {reason}"));
    None
}

/// NVRTC, or `None` after printing `SKIP <test>: <reason>`. Panics instead when
/// `TMA_REQUIRE_NVRTC=1` or `CI=true`.
pub fn require_nvrtc_or_skip(test: &str) -> Option<NvrtcInfo> {
    match nvrtc_available() {
        Ok(info) => Some(info),
        Err(e) => {
            if env_true("TMA_REQUIRE_NVRTC") || env_true("CI") {
                panic!("{test}: NVRTC required (TMA_REQUIRE_NVRTC / CI) but unavailable: {e}");
            }
            say(&format!("SKIP {test}: {}", short(&e)));
            None
        }
    }
}

/// A CUDA tool on PATH (`ptxas`, `cuobjdump`: `eval "$(scripts/cuda-tools.sh)"` puts them
/// there), or `None` after printing `SKIP <test>: <reason>`. Panics instead when
/// `TMA_REQUIRE_NVRTC=1` or `CI=true` (CI installs them with NVRTC).
pub fn require_tool_or_skip(test: &str, name: &str) -> Option<std::path::PathBuf> {
    let found = std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|dir| dir.join(name))
            .find(|p| p.is_file())
    });
    if found.is_none() {
        let why =
            format!("`{name}` is not on PATH (eval \"$(scripts/cuda-tools.sh)\" installs it)");
        if env_true("TMA_REQUIRE_NVRTC") || env_true("CI") {
            panic!("{test}: {why}");
        }
        say(&format!("SKIP {test}: {why}"));
    }
    found
}

/// `cuobjdump -sass` of a CUBIN (written to a temporary file named by `tag` and the process).
pub fn sass(cuobjdump: &std::path::Path, cubin: &[u8], tag: &str) -> String {
    run_cuobjdump(cuobjdump, &["-sass"], cubin, tag)
}

/// The tensor-core instructions named `op` ("HGMMA", "QGMMA") in `cuobjdump -sass` text, in
/// order: each with its operands, without its address and encoding, and with its uniform
/// registers unnamed (`UR12` -> `UR`: which one holds a descriptor is ptxas's choice, and a
/// debug build's checks move them). Two forms of one product issue the same instructions when
/// these agree (operands, accumulate flags, scoreboards).
pub fn mma_instructions(sass: &str, op: &str) -> Vec<String> {
    sass.lines()
        .filter(|l| l.contains(op))
        .filter_map(|l| l.split("*/").nth(1)?.split(';').next())
        .map(|i| {
            let mut out = String::with_capacity(i.len());
            let mut rest = i.trim();
            while let Some(at) = rest.find("UR") {
                out.push_str(&rest[..at + 2]);
                rest = rest[at + 2..].trim_start_matches(|c: char| c.is_ascii_digit());
            }
            out.push_str(rest);
            out
        })
        .collect()
}

/// `cuobjdump <args>` of a CUBIN, for what [`sass`] does not ask: `-res-usage`, one kernel
/// (`-fun <name>`). The CUBIN goes to a temporary file named by `tag` (unique among the
/// process's concurrent tests) and the process; panics if cuobjdump fails.
pub fn run_cuobjdump(
    cuobjdump: &std::path::Path,
    args: &[&str],
    cubin: &[u8],
    tag: &str,
) -> String {
    let path = std::env::temp_dir().join(format!("tma-sass-{}-{tag}.cubin", std::process::id()));
    if let Err(e) = std::fs::write(&path, cubin) {
        panic!("writing {}: {e}", path.display());
    }
    let out = std::process::Command::new(cuobjdump)
        .args(args)
        .arg(&path)
        .output();
    let _ = std::fs::remove_file(&path);
    match out {
        Ok(out) if out.status.success() => String::from_utf8_lossy(&out.stdout).into_owned(),
        Ok(out) => panic!(
            "cuobjdump {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr)
        ),
        Err(e) => panic!("running {}: {e}", cuobjdump.display()),
    }
}
