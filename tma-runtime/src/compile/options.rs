//! How to compile: [`CompileOptions`], turned into NVRTC arguments in one place.

use tma_core::Arch;

use crate::error::Error;

/// How to compile. Every field goes into the cache key.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct CompileOptions {
    /// The target. CUBIN when this NVRTC supports it, else PTX only
    /// (see [`Compiled::cubin`](super::Compiled::cubin)).
    pub arch: Arch,
    /// `-DTMA_DEBUG`, the device-side debug mode: mbarrier waits give up after a timeout,
    /// and every generated helper checks its coordinates and shared memory before it issues
    /// a copy (docs/CONTRACTS.md); either writes the debug record the runtime turns into
    /// [`crate::Error::BarrierTimeout`] or [`crate::Error::DeviceCheck`]. On by default in
    /// debug builds (`cfg!(debug_assertions)` of tma-runtime), off in release builds.
    pub debug_waits: bool,
    /// `-DTMA_BOUNDED_WAITS`: a release build bounds its waits too (off by default): a wait
    /// of the generated helpers gives up after `TMA_WAIT_TIMEOUT_NS` (10 s of `%globaltimer`;
    /// `define` another), writes the hang record and traps, which the runtime returns as
    /// [`crate::Error::BarrierTimeout`] or [`crate::Error::PipelineTimeout`]. Off: the bare
    /// polling loop (a barrier that never completes hangs the kernel). Opt-in because the
    /// bound is not free: up to ~15% of a GEMM's throughput on the H100, and a host-mapped
    /// hang record allocated at every module load (BENCHMARKS.md, "Bounded waits").
    /// `debug_waits` bounds its waits either way.
    pub bounded_waits: bool,
    /// `-DTMA_TIMELINE`: the pipeline helpers record a per-role timeline (acquire, load,
    /// wait, release per warp and stage, `%globaltimer` stamps) into the buffer a
    /// [`crate::timeline::Timeline`] attaches. Off by default: every recording site is
    /// inside `#if defined(TMA_TIMELINE)`, so the SASS is the same as without the feature.
    pub timeline: bool,
    /// `-D<name>=<value>` (value empty: `-D<name>`). Names must be identifiers.
    pub defines: Vec<(String, String)>,
    /// `--maxrregcount=<n>`.
    pub max_registers: Option<u32>,
    /// `--generate-line-info` (source lines in profilers and SASS).
    pub line_info: bool,
    /// `--use_fast_math`.
    pub fast_math: bool,
    /// `--device-debug` (`-G`): no optimisation, full debug info.
    pub device_debug: bool,
    /// Extra NVRTC options, passed as they are (after every other). Include paths and
    /// pre-included headers are refused: the cache key holds the source's text, not files read
    /// from disk, so an edited header would hand back a stale binary.
    pub extra: Vec<String>,
}

impl Default for CompileOptions {
    fn default() -> Self {
        CompileOptions::new(Arch::Sm90a)
    }
}

impl CompileOptions {
    /// Options for `arch`, everything else off.
    pub fn new(arch: Arch) -> CompileOptions {
        CompileOptions {
            arch,
            debug_waits: cfg!(debug_assertions),
            bounded_waits: false,
            timeline: false,
            defines: Vec::new(),
            max_registers: None,
            line_info: false,
            fast_math: false,
            device_debug: false,
            extra: Vec::new(),
        }
    }
    /// Sets [`CompileOptions::debug_waits`].
    pub fn debug_waits(mut self, on: bool) -> Self {
        self.debug_waits = on;
        self
    }
    /// Sets [`CompileOptions::bounded_waits`].
    pub fn bounded_waits(mut self, on: bool) -> Self {
        self.bounded_waits = on;
        self
    }
    /// Sets [`CompileOptions::timeline`].
    pub fn timeline(mut self, on: bool) -> Self {
        self.timeline = on;
        self
    }
    /// Adds a `-D<name>=<value>`.
    pub fn define(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.defines.push((name.into(), value.into()));
        self
    }
    /// Sets [`CompileOptions::max_registers`].
    pub fn max_registers(mut self, n: u32) -> Self {
        self.max_registers = Some(n);
        self
    }
    /// Sets [`CompileOptions::line_info`].
    pub fn line_info(mut self, on: bool) -> Self {
        self.line_info = on;
        self
    }
    /// Sets [`CompileOptions::fast_math`].
    pub fn fast_math(mut self, on: bool) -> Self {
        self.fast_math = on;
        self
    }

    /// The NVRTC arguments, in order. `cubin`: target the real `sm_XXa` (PTX + CUBIN);
    /// else the virtual `compute_XXa` (PTX only).
    pub fn nvrtc_args(&self, cubin: bool) -> Result<Vec<String>, Error> {
        let arch = self.arch.nvrtc_name();
        let target = if cubin {
            arch.to_string()
        } else {
            arch.replacen("sm_", "compute_", 1)
        };
        let mut a = vec![
            format!("--gpu-architecture={target}"),
            // The generated helpers take coordinates as C++20 designated initializers.
            format!("-std={}", tma_core::render::CXX_STANDARD),
            "-default-device".to_string(),
            // NVRTC 12.9+ keeps its own compile cache (CUDA_CACHE_PATH); a hit there skips
            // ptxas, so its report (registers, spills: Compiled::resources) is missing, and a
            // "cold" compile is not one. tma's cache (the key covers everything) is the one
            // cache: found on the H100, where a second process's first GEMM lost its report.
            "--no-cache".to_string(),
        ];
        if cubin {
            // ptxas's verbose report: registers, spills, local and static shared memory
            // per kernel (Compiled::resources); kept out of Compiled::log.
            a.push("--ptxas-options=-v".to_string());
        }
        if self.debug_waits {
            a.push("-DTMA_DEBUG".to_string());
        }
        if self.bounded_waits {
            a.push("-DTMA_BOUNDED_WAITS".to_string());
        }
        if self.timeline {
            a.push("-DTMA_TIMELINE".to_string());
        }
        for (name, value) in &self.defines {
            let ok = name
                .chars()
                .next()
                .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
                && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
            if !ok {
                return Err(Error::InvalidOption {
                    option: "defines",
                    value: name.clone(),
                    reason: "a macro name must be a C identifier",
                });
            }
            if value.chars().any(char::is_control) {
                return Err(Error::InvalidOption {
                    option: "defines",
                    value: value.clone(),
                    reason: "a macro value must be one line, without control characters",
                });
            }
            a.push(if value.is_empty() {
                format!("-D{name}")
            } else {
                format!("-D{name}={value}")
            });
        }
        if let Some(n) = self.max_registers {
            a.push(format!("--maxrregcount={n}"));
        }
        if self.line_info {
            a.push("--generate-line-info".to_string());
        }
        if self.fast_math {
            a.push("--use_fast_math".to_string());
        }
        if self.device_debug {
            a.push("--device-debug".to_string());
        }
        for x in &self.extra {
            // The cache key holds one argument per line (compile/key.rs).
            if x.chars().any(char::is_control) {
                return Err(Error::InvalidOption {
                    option: "extra",
                    value: x.clone(),
                    reason: "an NVRTC option holds no line break or other control character",
                });
            }
            if reads_a_file(x) {
                return Err(Error::InvalidOption {
                    option: "extra",
                    value: x.clone(),
                    reason: "an include path or pre-included header is read from disk, outside the cache key (the source's text): an edited header would hand back a stale binary; put the header's text in the source (KernelSource::body, Source::new)",
                });
            }
            a.push(x.clone());
        }
        Ok(a)
    }
}

/// NVRTC options that make it read a file from disk: `-I`, `--include-path`, `-include`,
/// `--pre-include`.
fn reads_a_file(option: &str) -> bool {
    ["-I", "--include-path", "-include", "--pre-include"]
        .iter()
        .any(|p| option.starts_with(p))
}

#[cfg(test)]
#[allow(clippy::panic)]
mod tests {
    use super::*;

    #[test]
    fn args_are_built_in_one_place() {
        let o = CompileOptions::new(Arch::Sm90a)
            .debug_waits(true)
            .define("TILE", "64")
            .define("FLAG", "")
            .max_registers(128)
            .line_info(true)
            .fast_math(true);
        let a = match o.nvrtc_args(true) {
            Ok(a) => a,
            Err(e) => panic!("{e}"),
        };
        assert_eq!(
            a,
            [
                "--gpu-architecture=sm_90a",
                "-std=c++20",
                "-default-device",
                "--no-cache",
                "--ptxas-options=-v",
                "-DTMA_DEBUG",
                "-DTILE=64",
                "-DFLAG",
                "--maxrregcount=128",
                "--generate-line-info",
                "--use_fast_math"
            ]
        );
        // The bare loop is the release default (no define); bounded waits are opt-in.
        let bare = CompileOptions::new(Arch::Sm90a)
            .debug_waits(false)
            .nvrtc_args(true);
        assert!(
            matches!(&bare, Ok(a) if !a.iter().any(|x| x.contains("WAITS") || x.contains("DEBUG"))),
            "{bare:?}"
        );
        let bounded = CompileOptions::new(Arch::Sm90a)
            .debug_waits(false)
            .bounded_waits(true)
            .nvrtc_args(true);
        assert!(
            matches!(bounded.as_deref(), Ok([.., last]) if last == "-DTMA_BOUNDED_WAITS"),
            "{bounded:?}"
        );
        let timeline = CompileOptions::new(Arch::Sm90a)
            .debug_waits(false)
            .timeline(true)
            .nvrtc_args(true);
        assert!(
            matches!(timeline.as_deref(), Ok([.., last]) if last == "-DTMA_TIMELINE"),
            "{timeline:?}"
        );
        assert!(!bare.iter().flatten().any(|a| a.contains("TIMELINE")));
        let ptx_only = CompileOptions::new(Arch::Sm100a).nvrtc_args(false);
        assert!(
            matches!(ptx_only.as_deref(), Ok([first, ..]) if first == "--gpu-architecture=compute_100a")
        );
        // No ptxas runs for PTX: no report asked of it.
        assert!(!ptx_only.iter().flatten().any(|a| a.contains("ptxas")));
        let bad = CompileOptions::new(Arch::Sm90a)
            .define("A B", "1")
            .nvrtc_args(true);
        assert!(matches!(
            bad,
            Err(Error::InvalidOption {
                option: "defines",
                ..
            })
        ));
        for file in [
            "-I/usr/include",
            "--include-path=x",
            "-include",
            "--pre-include=h.cuh",
        ] {
            let mut o = CompileOptions::new(Arch::Sm90a);
            o.extra.push(file.into());
            assert!(
                matches!(
                    o.nvrtc_args(true),
                    Err(Error::InvalidOption {
                        option: "extra",
                        ..
                    })
                ),
                "{file} taken"
            );
        }
        let mut newline = CompileOptions::new(Arch::Sm90a);
        newline.extra.push("-DA\narg -DB".into());
        assert!(matches!(
            newline.nvrtc_args(true),
            Err(Error::InvalidOption {
                option: "extra",
                ..
            })
        ));
    }
}
