//! NVRTC compilation of generated CUDA to PTX and CUBIN, with an in-process cache and a
//! content-addressed disk cache. Needs libnvrtc, never a GPU.
//!
//! Environment (read once by [`JitConfig::from_env`], in the spirit of DeepGEMM's JIT):
//! - `TMA_JIT_DEBUG=1`: print the NVRTC options, compile time and cache hits to stderr.
//! - `TMA_JIT_DUMP=<dir>`: write `<key>.cu`, `.ptx`, `.cubin` (for `cuobjdump -sass`),
//!   `.log` and `.args` of every NVRTC compile into `<dir>`.
//! - `TMA_JIT_NO_CACHE=1`: no in-process or disk cache; every compile runs NVRTC.
//! - `TMA_CACHE_DIR=<dir>`: the disk cache (default `$XDG_CACHE_HOME/tma`, else `~/.cache/tma`).

use std::collections::HashMap;
use std::ffi::CString;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock, RwLock};
use std::time::Instant;

use cudarc::nvrtc::{result as nv, sys as nvsys};
use tma_core::Arch;

use crate::cuda_libs::{nvrtc_available, NvrtcInfo};
use crate::error::Error;
use crate::hash::{fingerprint, fingerprint_seeded};

/// Bump when the disk format or anything else that changes cached binaries changes.
const CACHE_FORMAT: u32 = 1;
const MAGIC: &[u8; 8] = b"TMAJIT\x00\x01";

/// How to compile. Every field goes into the cache key.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct CompileOptions {
    /// The target. CUBIN when this NVRTC supports it, else PTX only (see [`Compiled::cubin`]).
    pub arch: Arch,
    /// `-DTMA_DEBUG`: mbarrier waits give up after a timeout and write the hang record.
    pub debug_waits: bool,
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
    /// Extra NVRTC options, passed as they are (after every other).
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
            debug_waits: false,
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
            "-std=c++17".to_string(),
            "-default-device".to_string(),
        ];
        if self.debug_waits {
            a.push("-DTMA_DEBUG".to_string());
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
            if value.contains('\n') {
                return Err(Error::InvalidOption {
                    option: "defines",
                    value: value.clone(),
                    reason: "a macro value must be one line",
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
        a.extend(self.extra.iter().cloned());
        Ok(a)
    }
}

/// A CUDA source with its fingerprint computed once. Hold one for hot paths: a cached
/// compile of a `Source` costs a hash-map lookup, not a pass over the text.
#[derive(Clone, Debug)]
pub struct Source {
    text: Arc<str>,
    fingerprint: u128,
}

impl Source {
    pub fn new(text: impl Into<Arc<str>>) -> Source {
        let text = text.into();
        let fingerprint = fingerprint(text.as_bytes());
        Source { text, fingerprint }
    }
    pub fn text(&self) -> &str {
        &self.text
    }
}

impl From<&str> for Source {
    fn from(s: &str) -> Self {
        Source::new(s)
    }
}
impl From<String> for Source {
    fn from(s: String) -> Self {
        Source::new(s)
    }
}

/// The output of one compile.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Compiled {
    /// The PTX (always present).
    pub ptx: String,
    /// The CUBIN for [`Compiled::arch`]; empty when this NVRTC cannot target it (PTX only:
    /// the driver JIT-compiles the PTX at load).
    pub cubin: Vec<u8>,
    /// NVRTC's log (warnings; empty when clean).
    pub log: String,
    pub arch: Arch,
    /// Compiled with `-DTMA_DEBUG` (the module has `tma_debug_record`).
    pub debug_waits: bool,
    /// Tiles named by the source's `// tma-tile <id> <name>` lines, for hang reports.
    pub tiles: Vec<(u32, String)>,
    /// The NVRTC arguments used.
    pub args: Vec<String>,
    /// The cache key (hex), also the disk-cache file stem.
    pub key: String,
}

impl Compiled {
    /// True when a CUBIN was produced (else PTX only).
    pub fn has_cubin(&self) -> bool {
        !self.cubin.is_empty()
    }
    /// The name of tile `id`, if the source listed it.
    pub fn tile_name(&self, id: u32) -> Option<&str> {
        self.tiles
            .iter()
            .find(|(i, _)| *i == id)
            .map(|(_, n)| n.as_str())
    }
}

/// Parses `// tma-tile <id> <name>` lines.
pub fn tile_names(source: &str) -> Vec<(u32, String)> {
    source
        .lines()
        .filter_map(|l| {
            let rest = l.trim_start().strip_prefix("// tma-tile ")?;
            let mut it = rest.split_whitespace();
            let id = it.next()?.parse().ok()?;
            Some((id, it.next()?.to_string()))
        })
        .collect()
}

/// `source` with right-aligned line numbers, to read beside NVRTC's `(line)` references.
pub fn numbered_source(source: &str) -> String {
    let n = source.lines().count().max(1);
    let w = n.to_string().len();
    let mut out = String::with_capacity(source.len() + n * (w + 3));
    for (i, l) in source.lines().enumerate() {
        let _ = writeln!(out, "{:>w$} | {l}", i + 1);
    }
    out
}

/// JIT settings; [`JitConfig::from_env`] reads them from the environment.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JitConfig {
    /// `TMA_JIT_DEBUG`.
    pub debug: bool,
    /// `TMA_JIT_DUMP`.
    pub dump_dir: Option<PathBuf>,
    /// Not `TMA_JIT_NO_CACHE`.
    pub cache: bool,
    /// `TMA_CACHE_DIR` or the user cache dir; `None`: no disk cache.
    pub cache_dir: Option<PathBuf>,
}

fn env_flag(var: &str) -> bool {
    std::env::var(var)
        .map(|v| !matches!(v.as_str(), "" | "0" | "false" | "no" | "off"))
        .unwrap_or(false)
}

/// `$TMA_CACHE_DIR`, else `$XDG_CACHE_HOME/tma`, else `$HOME/.cache/tma`.
pub fn default_cache_dir() -> Option<PathBuf> {
    let get = |k: &str| std::env::var_os(k).filter(|v| !v.is_empty());
    if let Some(d) = get("TMA_CACHE_DIR") {
        return Some(PathBuf::from(d));
    }
    if let Some(d) = get("XDG_CACHE_HOME") {
        return Some(PathBuf::from(d).join("tma"));
    }
    get("HOME").map(|h| PathBuf::from(h).join(".cache").join("tma"))
}

impl JitConfig {
    pub fn from_env() -> JitConfig {
        JitConfig {
            debug: env_flag("TMA_JIT_DEBUG"),
            dump_dir: std::env::var_os("TMA_JIT_DUMP")
                .filter(|v| !v.is_empty())
                .map(PathBuf::from),
            cache: !env_flag("TMA_JIT_NO_CACHE"),
            cache_dir: default_cache_dir(),
        }
    }
}

/// Source fingerprint -> the outputs compiled from it, one per distinct options.
type MemoryCache = HashMap<u128, Vec<(CompileOptions, Arc<Compiled>)>>;

/// NVRTC with caches. Cheap to share (`&Compiler` is `Sync`); [`Compiler::global`] gives a
/// process-wide one.
pub struct Compiler {
    nvrtc: NvrtcInfo,
    config: JitConfig,
    disk: Option<DiskCache>,
    /// Source fingerprint -> (options, output) pairs.
    memory: RwLock<MemoryCache>,
    pub(crate) modules: crate::launch::ModuleCache,
}

impl std::fmt::Debug for Compiler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Compiler")
            .field("nvrtc", &self.nvrtc)
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl Compiler {
    /// A compiler configured from the environment. Fails with
    /// [`Error::CudaLibraryMissing`] when NVRTC cannot be loaded.
    pub fn new() -> Result<Compiler, Error> {
        Compiler::with_config(JitConfig::from_env())
    }

    /// A compiler with explicit settings.
    pub fn with_config(config: JitConfig) -> Result<Compiler, Error> {
        let nvrtc = nvrtc_available()?;
        let disk = match (&config.cache_dir, config.cache) {
            (Some(d), true) => Some(DiskCache::new(d.clone())),
            _ => None,
        };
        Ok(Compiler {
            nvrtc,
            config,
            disk,
            memory: RwLock::new(HashMap::new()),
            modules: Default::default(),
        })
    }

    /// The process-wide compiler (configured from the environment on first use).
    pub fn global() -> Result<&'static Compiler, Error> {
        static GLOBAL: OnceLock<Result<Compiler, Error>> = OnceLock::new();
        GLOBAL
            .get_or_init(Compiler::new)
            .as_ref()
            .map_err(Clone::clone)
    }

    pub fn nvrtc(&self) -> &NvrtcInfo {
        &self.nvrtc
    }
    pub fn config(&self) -> &JitConfig {
        &self.config
    }

    /// Compiles `source` (hashing it; prefer [`Compiler::compile_source`] on hot paths).
    pub fn compile(&self, source: &str, options: &CompileOptions) -> Result<Arc<Compiled>, Error> {
        self.compile_source(&Source::new(source), options)
    }

    /// Compiles `source`: in-process cache, then disk cache, then NVRTC.
    pub fn compile_source(
        &self,
        source: &Source,
        options: &CompileOptions,
    ) -> Result<Arc<Compiled>, Error> {
        if self.config.cache {
            if let Some(hit) = self.memory_get(source.fingerprint, options) {
                return Ok(hit);
            }
        }
        let cubin = self.nvrtc.supports_cubin(options.arch);
        let args = options.nvrtc_args(cubin)?;
        let key = self.key(source, &args);
        let hex = format!("{key:032x}");
        let mut compiled = None;
        if let Some(disk) = &self.disk {
            if let Some((ptx, cubin_bytes, log)) = disk.load(&hex) {
                if self.config.debug {
                    eprintln!("tma jit: disk cache hit {}", disk.path(&hex).display());
                }
                compiled = Some(Compiled {
                    ptx,
                    cubin: cubin_bytes,
                    log,
                    arch: options.arch,
                    debug_waits: options.debug_waits,
                    tiles: tile_names(source.text()),
                    args: args.clone(),
                    key: hex.clone(),
                });
            }
        }
        let compiled = match compiled {
            Some(c) => c,
            None => {
                let c = self.run_nvrtc(source.text(), options, args, cubin, hex)?;
                if let Some(disk) = &self.disk {
                    disk.store(&c.key, &c.ptx, &c.cubin, &c.log);
                }
                c
            }
        };
        let compiled = Arc::new(compiled);
        if self.config.cache {
            if let Ok(mut m) = self.memory.write() {
                let e = m.entry(source.fingerprint).or_default();
                if !e.iter().any(|(o, _)| o == options) {
                    e.push((options.clone(), compiled.clone()));
                }
            }
        }
        Ok(compiled)
    }

    fn memory_get(&self, fp: u128, options: &CompileOptions) -> Option<Arc<Compiled>> {
        let m = self.memory.read().ok()?;
        m.get(&fp)?
            .iter()
            .find(|(o, _)| o == options)
            .map(|(_, c)| c.clone())
    }

    /// The cache key: source, NVRTC args (options and arch), NVRTC version, crate version,
    /// cache format.
    fn key(&self, source: &Source, args: &[String]) -> u128 {
        let mut s = format!(
            "tma-runtime {} format {CACHE_FORMAT} nvrtc {}.{} src {:032x}\n",
            env!("CARGO_PKG_VERSION"),
            self.nvrtc.version.0,
            self.nvrtc.version.1,
            source.fingerprint
        );
        for a in args {
            s.push_str(a);
            s.push('\0');
        }
        fingerprint_seeded(s.as_bytes(), 0x0074_6d61_5f6a_6974)
    }

    fn run_nvrtc(
        &self,
        text: &str,
        options: &CompileOptions,
        args: Vec<String>,
        want_cubin: bool,
        key: String,
    ) -> Result<Compiled, Error> {
        let start = Instant::now();
        if self.config.debug {
            eprintln!("tma jit: nvrtc {} {}", key, args.join(" "));
        }
        let (ptx, cubin, log) = nvrtc_compile(text, &args, want_cubin)?;
        if self.config.debug {
            eprintln!(
                "tma jit: compiled {key} in {:.1} ms ({} B PTX, {} B CUBIN)",
                start.elapsed().as_secs_f64() * 1e3,
                ptx.len(),
                cubin.len()
            );
        }
        let compiled = Compiled {
            ptx,
            cubin,
            log,
            arch: options.arch,
            debug_waits: options.debug_waits,
            tiles: tile_names(text),
            args,
            key,
        };
        if let Some(dir) = &self.config.dump_dir {
            dump(dir, text, &compiled);
        }
        Ok(compiled)
    }
}

fn dump(dir: &Path, text: &str, c: &Compiled) {
    let res = std::fs::create_dir_all(dir).and_then(|_| {
        let stem = dir.join(&c.key);
        std::fs::write(stem.with_extension("cu"), text)?;
        std::fs::write(stem.with_extension("ptx"), &c.ptx)?;
        std::fs::write(stem.with_extension("log"), &c.log)?;
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
fn nvrtc_compile(
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

/// Content-addressed files of compiled outputs. Written to a temp file then renamed, so
/// concurrent processes never see half a file; unreadable or corrupt entries are ignored
/// (and rebuilt); failed writes are reported on stderr, never returned.
#[derive(Clone, Debug)]
pub struct DiskCache {
    dir: PathBuf,
}

static TMP_COUNTER: AtomicU64 = AtomicU64::new(0);

impl DiskCache {
    pub fn new(dir: PathBuf) -> DiskCache {
        DiskCache { dir }
    }
    pub fn dir(&self) -> &Path {
        &self.dir
    }
    /// The file of entry `key`.
    pub fn path(&self, key: &str) -> PathBuf {
        self.dir.join(format!("{key}.tmajit"))
    }

    /// Reads entry `key`: (PTX, CUBIN, log), or `None` when absent, unreadable or corrupt.
    pub fn load(&self, key: &str) -> Option<(String, Vec<u8>, String)> {
        let bytes = std::fs::read(self.path(key)).ok()?;
        decode(&bytes)
    }

    /// Writes entry `key` atomically (temp file + rename). Failures go to stderr.
    pub fn store(&self, key: &str, ptx: &str, cubin: &[u8], log: &str) {
        let path = self.path(key);
        let tmp = self.dir.join(format!(
            ".{key}.{}.{}.tmp",
            std::process::id(),
            TMP_COUNTER.fetch_add(1, Ordering::Relaxed)
        ));
        let res = std::fs::create_dir_all(&self.dir)
            .and_then(|_| std::fs::write(&tmp, encode(ptx, cubin, log)))
            .and_then(|_| std::fs::rename(&tmp, &path));
        if let Err(e) = res {
            let _ = std::fs::remove_file(&tmp);
            eprintln!(
                "tma jit: warning: could not write cache entry {}: {e} (continuing without it)",
                path.display()
            );
        }
    }
}

fn encode(ptx: &str, cubin: &[u8], log: &str) -> Vec<u8> {
    let mut payload = Vec::with_capacity(ptx.len() + cubin.len() + log.len() + 24);
    for part in [ptx.as_bytes(), cubin, log.as_bytes()] {
        payload.extend_from_slice(&(part.len() as u64).to_le_bytes());
        payload.extend_from_slice(part);
    }
    let mut out = Vec::with_capacity(payload.len() + 24);
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&fingerprint(&payload).to_le_bytes());
    out.extend_from_slice(&payload);
    out
}

fn decode(bytes: &[u8]) -> Option<(String, Vec<u8>, String)> {
    let rest = bytes.strip_prefix(MAGIC.as_slice())?;
    let (sum, payload) = rest.split_at_checked(16)?;
    let mut s = [0u8; 16];
    s.copy_from_slice(sum);
    if u128::from_le_bytes(s) != fingerprint(payload) {
        return None;
    }
    let mut parts: Vec<&[u8]> = Vec::with_capacity(3);
    let mut p = payload;
    for _ in 0..3 {
        let (len, rest) = p.split_at_checked(8)?;
        let mut l = [0u8; 8];
        l.copy_from_slice(len);
        let len = usize::try_from(u64::from_le_bytes(l)).ok()?;
        let (part, rest) = rest.split_at_checked(len)?;
        parts.push(part);
        p = rest;
    }
    if !p.is_empty() {
        return None;
    }
    Some((
        String::from_utf8(parts[0].to_vec()).ok()?,
        parts[1].to_vec(),
        String::from_utf8(parts[2].to_vec()).ok()?,
    ))
}

#[cfg(test)]
#[allow(clippy::panic, clippy::unwrap_used)]
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
                "-std=c++17",
                "-default-device",
                "-DTMA_DEBUG",
                "-DTILE=64",
                "-DFLAG",
                "--maxrregcount=128",
                "--generate-line-info",
                "--use_fast_math"
            ]
        );
        let ptx_only = CompileOptions::new(Arch::Sm100a).nvrtc_args(false);
        assert!(
            matches!(ptx_only.as_deref(), Ok([first, ..]) if first == "--gpu-architecture=compute_100a")
        );
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
    }

    #[test]
    fn tile_names_and_numbered_source() {
        let src = "// tma-tile 0 a_tile\n  // tma-tile 7 b\n// tma-tile x bad\nint x;\n";
        assert_eq!(tile_names(src), vec![(0, "a_tile".into()), (7, "b".into())]);
        let n = numbered_source("a\nb\n");
        assert_eq!(n, "1 | a\n2 | b\n");
    }

    fn temp_dir(tag: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!(
            "tma-runtime-test-{tag}-{}-{}",
            std::process::id(),
            TMP_COUNTER.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&d);
        d
    }

    #[test]
    fn disk_round_trip_and_corrupt_entries_are_ignored() {
        let cache = DiskCache::new(temp_dir("corrupt"));
        assert_eq!(cache.load("k"), None);
        cache.store("k", "ptx text", &[1, 2, 3], "log");
        assert_eq!(
            cache.load("k"),
            Some(("ptx text".into(), vec![1, 2, 3], "log".into()))
        );
        let mut bytes = std::fs::read(cache.path("k")).unwrap_or_default();
        let last = bytes.len() - 1;
        bytes[last] ^= 0x40;
        let _ = std::fs::write(cache.path("k"), &bytes);
        assert_eq!(cache.load("k"), None, "flipped bit must be caught");
        let _ = std::fs::write(cache.path("k"), b"garbage");
        assert_eq!(cache.load("k"), None);
        let _ = std::fs::write(cache.path("k"), &bytes[..10]);
        assert_eq!(cache.load("k"), None);
        cache.store("k", "new", &[], "");
        assert_eq!(cache.load("k"), Some(("new".into(), vec![], String::new())));
        let _ = std::fs::remove_dir_all(cache.dir());
    }

    #[test]
    fn concurrent_writers_leave_a_whole_entry() {
        let dir = temp_dir("concurrent");
        let cubin: Vec<u8> = (0..200_000u32).map(|i| i as u8).collect();
        std::thread::scope(|s| {
            for t in 0..8 {
                let (dir, cubin) = (dir.clone(), &cubin);
                s.spawn(move || {
                    let cache = DiskCache::new(dir);
                    for _ in 0..10 {
                        cache.store("same", "ptx", cubin, "log");
                        if let Some(e) = cache.load("same") {
                            assert_eq!(e.1.len(), cubin.len(), "thread {t} read a torn entry");
                        }
                    }
                });
            }
        });
        let cache = DiskCache::new(dir.clone());
        assert_eq!(cache.load("same").map(|e| e.1), Some(cubin));
        let leftovers = std::fs::read_dir(&dir)
            .map(|r| {
                r.filter_map(Result::ok)
                    .filter(|e| e.file_name().to_string_lossy().ends_with(".tmp"))
                    .count()
            })
            .unwrap_or(0);
        assert_eq!(leftovers, 0);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn failed_write_is_not_fatal() {
        // A regular file where the directory should be: create_dir_all fails.
        let f = temp_dir("notadir");
        let _ = std::fs::write(&f, b"x");
        let cache = DiskCache::new(f.join("sub"));
        cache.store("k", "p", &[], "");
        assert_eq!(cache.load("k"), None);
        let _ = std::fs::remove_file(&f);
    }
}
