//! `tma compile`: the kernel file after its tiles' helpers (each tile named in the kernel by
//! its declared type name, `using MpkA = tma_mpk_a;`), compiled with NVRTC through
//! tma-runtime's cached compiler, then per kernel what ptxas says (registers, shared memory,
//! spills) and the TMA instructions in the SASS (cuobjdump). ptxas and cuobjdump are found on
//! PATH (`eval "$(scripts/cuda-tools.sh)"` installs them); without them the report says so.

use crate::decl::Tile;
use std::fmt::Write;
use std::path::{Path, PathBuf};
use std::process::Command;
use tma_core::pipeline::ValidPipeline;
use tma_core::render::{KernelSource, RenderError};
use tma_runtime::{Compiled, Compiler, Source};

/// The SASS opcodes TMA issues, and what each is.
pub const TMA_OPCODES: [(&str, &str); 6] = [
    ("UTMALDG", "tensor loads"),
    ("UTMASTG", "tensor stores"),
    ("UTMAREDG", "tensor reductions"),
    ("UTMAPF", "tensor prefetches"),
    ("UTMACCTL", "descriptor prefetches / cache control"),
    ("SYNCS", "mbarrier operations"),
];

/// The translation unit: prelude, the tiles' helpers, the pipelines' structs, the kernel's
/// names for both (each its declared type name: `using MpkA = tma_mpk_a;`, `using GemmRing =
/// tma_pipe_gemm_ring;`), the kernel at its file's line 1, with its typed description (the
/// tiles' target for the compile's arch, their names for debug records). A pipeline's tiles
/// are among `tiles` (a `tma_pipeline!` source's tiles are its stage tiles).
pub fn assemble(
    tiles: &[&Tile],
    pipelines: &[&(String, ValidPipeline)],
    kernel_path: &str,
    kernel: &str,
) -> Result<Source, RenderError> {
    let mut src = KernelSource::new();
    for t in tiles {
        src = src.tile_as(&t.checked.valid, &t.ident);
    }
    for (ident, p) in pipelines {
        src = src.pipeline_as(p, ident);
    }
    Source::kernel(&src.body_at(kernel_path, 1, kernel))
}

/// NVRTC through the runtime's compiler (in-process and disk caches).
pub fn nvrtc(
    source: &Source,
    options: &tma_runtime::CompileOptions,
) -> Result<std::sync::Arc<Compiled>, tma_runtime::Error> {
    Compiler::global()?.compile_source(source, options)
}

/// A tool on PATH.
pub fn tool(name: &str) -> Option<PathBuf> {
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|dir| dir.join(name))
            .find(|p| p.is_file())
    })
}

/// What the report found: its text, the SASS when disassembled.
pub struct Report {
    pub text: String,
    pub sass: Option<String>,
}

/// Registers, shared memory and spills per kernel (ptxas -v on the PTX), and the TMA
/// instructions of the SASS (cuobjdump -sass on NVRTC's CUBIN, or ptxas's).
pub fn report(compiled: &Compiled, scratch: &Path) -> Report {
    let mut text = String::new();
    let _ = writeln!(
        text,
        "compiled for {} ({}; cache key {}): {} B of PTX, {} B of CUBIN",
        compiled.arch.nvrtc_name(),
        if compiled.has_cubin() {
            "NVRTC CUBIN"
        } else {
            "PTX only"
        },
        compiled.key,
        compiled.ptx.len(),
        compiled.cubin.len()
    );
    if !compiled.log.trim().is_empty() {
        let _ = writeln!(text, "NVRTC log:\n{}", compiled.log.trim_end());
    }
    let _ = std::fs::create_dir_all(scratch);
    let ptx_path = scratch.join("kernel.ptx");
    let ptxas_cubin = scratch.join("kernel.ptxas.cubin");
    let mut cubin: Option<PathBuf> = None;
    if compiled.has_cubin() {
        let p = scratch.join("kernel.cubin");
        if std::fs::write(&p, &compiled.cubin).is_ok() {
            cubin = Some(p);
        }
    }
    match tool("ptxas") {
        None => text.push_str("registers / shared memory / spills: ptxas not on PATH (eval \"$(scripts/cuda-tools.sh)\")\n"),
        Some(ptxas) => {
            let run = std::fs::write(&ptx_path, &compiled.ptx).map_err(|e| e.to_string()).and_then(|()| {
                Command::new(ptxas)
                    .arg(format!("-arch={}", compiled.arch.nvrtc_name()))
                    .args(["-v", "-o"])
                    .arg(&ptxas_cubin)
                    .arg(&ptx_path)
                    .output()
                    .map_err(|e| e.to_string())
            });
            match run {
                Ok(out) if out.status.success() => {
                    text.push_str(&resources(&String::from_utf8_lossy(&out.stderr)));
                    if cubin.is_none() {
                        cubin = Some(ptxas_cubin.clone());
                    }
                }
                Ok(out) => {
                    let _ = writeln!(text, "ptxas failed:\n{}", String::from_utf8_lossy(&out.stderr));
                }
                Err(e) => {
                    let _ = writeln!(text, "ptxas could not run: {e}");
                }
            }
        }
    }
    let mut sass = None;
    match (tool("cuobjdump"), &cubin) {
        (None, _) => text.push_str(
            "TMA instructions: cuobjdump not on PATH (eval \"$(scripts/cuda-tools.sh)\")\n",
        ),
        (_, None) => text.push_str("TMA instructions: no CUBIN to disassemble\n"),
        (Some(cuobjdump), Some(cubin)) => {
            match Command::new(cuobjdump).arg("-sass").arg(cubin).output() {
                Ok(out) if out.status.success() => {
                    let s = String::from_utf8_lossy(&out.stdout).to_string();
                    text.push_str(&tma_instructions(&s));
                    sass = Some(s);
                }
                Ok(out) => {
                    let _ = writeln!(
                        text,
                        "cuobjdump failed:\n{}",
                        String::from_utf8_lossy(&out.stderr)
                    );
                }
                Err(e) => {
                    let _ = writeln!(text, "cuobjdump could not run: {e}");
                }
            }
        }
    }
    Report { text, sass }
}

/// ptxas -v's report per kernel (tma-runtime's one parser of it, as `Compiled::resources`).
fn resources(log: &str) -> String {
    let kernels = tma_runtime::parse_ptxas_report(log);
    if kernels.is_empty() {
        return "ptxas reported no kernel\n".to_string();
    }
    kernels.iter().map(|k| format!("kernel {k}\n")).collect()
}

/// Counts of each TMA opcode in the SASS, per kernel.
pub fn tma_instructions(sass: &str) -> String {
    let mut out = String::new();
    let mut current: Option<(String, Vec<usize>)> = None;
    let flush = |out: &mut String, cur: Option<(String, Vec<usize>)>| {
        if let Some((name, counts)) = cur {
            let parts: Vec<String> = TMA_OPCODES
                .iter()
                .zip(&counts)
                .filter(|(_, n)| **n > 0)
                .map(|((op, _), n)| format!("{op} x{n}"))
                .collect();
            let _ = writeln!(
                out,
                "  {name}: {}",
                if parts.is_empty() {
                    "no TMA instruction".to_string()
                } else {
                    parts.join(", ")
                }
            );
        }
    };
    out.push_str("TMA instructions in the SASS:\n");
    for line in sass.lines() {
        if let Some(rest) = line.trim().strip_prefix("Function : ") {
            flush(&mut out, current.take());
            current = Some((rest.trim().to_string(), vec![0; TMA_OPCODES.len()]));
            continue;
        }
        if let Some((_, counts)) = &mut current {
            // "/*0090*/  UTMALDG.2D [UR8], [UR4] ;": the opcode is the first word after the address.
            let code = line.split("*/").nth(1).unwrap_or("");
            let word = code
                .split_whitespace()
                .find(|w| !w.starts_with('@'))
                .unwrap_or("");
            let base = word.split('.').next().unwrap_or("");
            if let Some(i) = TMA_OPCODES.iter().position(|(o, _)| *o == base) {
                counts[i] += 1;
            }
        }
    }
    flush(&mut out, current.take());
    out
}
