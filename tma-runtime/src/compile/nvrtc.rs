//! One NVRTC compile, and the `TMA_JIT_DUMP` files of it. The only code here that calls NVRTC.

use std::ffi::CString;
use std::path::Path;

use cudarc::nvrtc::{result as nv, sys as nvsys};

use crate::cuda_libs::nvrtc_available;
use crate::error::Error;

use super::compiled::Compiled;
use super::compiler::env_flag;
use super::diagnostics::{error_context, FULL_SOURCE_ENV};
use super::source::numbered_source;

/// Writes `TMA_JIT_DUMP`'s files of one compile (`raw_log`: NVRTC's whole log, ptxas's
/// report included); a failure is a warning (a debugging aid must not fail the compile it
/// describes).
pub(super) fn dump(dir: &Path, text: &str, c: &Compiled, raw_log: &str) {
    let res = std::fs::create_dir_all(dir).and_then(|_| {
        let stem = dir.join(&c.key);
        std::fs::write(stem.with_extension("cu"), text)?;
        std::fs::write(stem.with_extension("ptx"), &c.ptx)?;
        std::fs::write(stem.with_extension("log"), raw_log)?;
        std::fs::write(stem.with_extension("args"), c.args.join("\n"))?;
        if c.has_cubin() {
            std::fs::write(stem.with_extension("cubin"), &c.cubin)?;
        }
        Ok(())
    });
    if let Err(e) = res {
        eprintln!(
            "tma jit: warning: TMA_JIT_DUMP to {} failed: {e}",
            dir.display()
        );
    }
}

fn nvrtc_err(call: &'static str) -> impl FnOnce(nv::NvrtcError) -> Error {
    move |e| Error::Nvrtc {
        call,
        result: format!("{:?}", e.0),
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

fn c_text(v: Vec<std::ffi::c_char>) -> String {
    let bytes: Vec<u8> = v
        .into_iter()
        .map(|c| c as u8)
        .take_while(|&b| b != 0)
        .collect();
    String::from_utf8_lossy(&bytes).into_owned()
}

/// One NVRTC compile: (PTX, CUBIN or empty, log).
pub(super) fn nvrtc_compile(
    text: &str,
    args: &[String],
    want_cubin: bool,
) -> Result<(String, Vec<u8>, String), Error> {
    // Loads libnvrtc ourselves first so cudarc cannot panic.
    nvrtc_available()?;
    let src = CString::new(text).map_err(|e| Error::SourceHasNul {
        offset: e.nul_position(),
    })?;
    let prog = Program(
        nv::create_program(&src, Some(c"tma.cu")).map_err(nvrtc_err("nvrtcCreateProgram"))?,
    );
    // SAFETY: `prog` is a live program; the options are valid C strings (CString checks).
    let compiled = unsafe { nv::compile_program(prog.0, args) };
    // SAFETY: `prog` is live.
    let log =
        c_text(unsafe { nv::get_program_log(prog.0) }.map_err(nvrtc_err("nvrtcGetProgramLog"))?);
    match compiled {
        Ok(()) => {}
        Err(nv::NvrtcError(nvsys::nvrtcResult::NVRTC_ERROR_COMPILATION)) => {
            return Err(Error::Compile {
                context: error_context(text, &log, env_flag(FULL_SOURCE_ENV)),
                log,
                numbered_source: numbered_source(text),
            })
        }
        Err(e) => {
            return Err(Error::Nvrtc {
                call: "nvrtcCompileProgram",
                result: format!("{:?} (options: {}) {log}", e.0, args.join(" ")),
            })
        }
    }
    // SAFETY: `prog` compiled successfully.
    let ptx = c_text(unsafe { nv::get_ptx(prog.0) }.map_err(nvrtc_err("nvrtcGetPTX"))?);
    let mut cubin = Vec::new();
    if want_cubin {
        let mut size = 0usize;
        // SAFETY: `prog` compiled for a real arch; valid out-pointer.
        unsafe { nvsys::nvrtcGetCUBINSize(prog.0, &mut size) }
            .result()
            .map_err(nvrtc_err("nvrtcGetCUBINSize"))?;
        cubin = vec![0u8; size];
        // SAFETY: the buffer holds exactly `size` bytes, as NVRTC reported.
        unsafe { nvsys::nvrtcGetCUBIN(prog.0, cubin.as_mut_ptr().cast()) }
            .result()
            .map_err(nvrtc_err("nvrtcGetCUBIN"))?;
    }
    Ok((ptx, cubin, log))
}
