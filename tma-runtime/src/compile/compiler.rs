//! [`Compiler`]: NVRTC behind an in-process cache and a content-addressed disk cache.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock, RwLock};
use std::time::{Instant, SystemTime};

use crate::cuda_libs::{nvrtc_available, NvrtcInfo};
use crate::error::Error;

use super::compiled::Compiled;
use super::disk::{DiskCache, EntryInfo};
use super::hash::fingerprint;
use super::key::CacheKey;
use super::nvrtc::{dump, nvrtc_compile};
use super::options::CompileOptions;
use super::resources::split_log;
use super::source::Source;
use tma_core::facts::SourceFacts;
use tma_core::Arch;

/// Refuses a source whose tiles (its description's) were validated for another arch than the
/// compile's: the arch is stated once. Text without a description states nothing.
pub(super) fn check_targets(facts: Option<&SourceFacts>, arch: Arch) -> Result<(), Error> {
    let tiles = facts.map_or(&[][..], |f| &f.tiles);
    match tiles.iter().find(|t| t.target != arch) {
        Some(t) => Err(Error::TargetMismatch {
            tile: t.name.clone(),
            tile_target: t.target,
            compile_arch: arch,
        }),
        None => Ok(()),
    }
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

/// An on/off environment variable: set and not `""`, `0`, `false`, `no` or `off`.
pub(super) fn env_flag(var: &str) -> bool {
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
    /// `TMA_JIT_DEBUG`, `TMA_JIT_DUMP`, `TMA_JIT_NO_CACHE` and [`default_cache_dir`].
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

/// The in-process cache.
#[derive(Default)]
struct MemoryCache {
    /// Source fingerprint -> the source and the outputs compiled from it.
    entries: HashMap<u128, MemoryEntry>,
    /// Where a `&str` given to [`Compiler::compile`] lay (address, length) -> the fingerprint
    /// of the text it held then. A hint only: the text is compared with the entry's before it
    /// is trusted (the address may hold other text by now).
    by_address: HashMap<(usize, usize), u128>,
}

/// One source's text and its outputs, one per distinct options.
struct MemoryEntry {
    text: Arc<str>,
    outputs: Vec<(CompileOptions, Arc<Compiled>)>,
}

/// At most this many `&str` addresses are remembered (then forgotten all at once): a caller
/// that formats a new `String` per call gets a fingerprint per call, as without them.
const MAX_ADDRESSES: usize = 256;

/// Where a compile's output came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Origin {
    /// The in-process cache.
    Memory,
    /// The disk cache (no NVRTC compile).
    Disk,
    /// An NVRTC compile.
    Nvrtc,
}

/// The slow paths a compiler took since it was made: a warm start shows
/// `nvrtc_compiles == 0` ([`Compiler::stats`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CompileStats {
    /// `nvrtcCompileProgram` calls (failed compiles included).
    pub nvrtc_compiles: u64,
    /// Outputs read from the disk cache.
    pub disk_hits: u64,
}

/// One item of [`Compiler::precompile`] done.
#[derive(Clone, Debug)]
pub struct Precompiled {
    pub compiled: Arc<Compiled>,
    /// [`Origin::Nvrtc`]: compiled now; else it was cached already.
    pub origin: Origin,
    /// Seconds this item took (a cache hit: well under a millisecond).
    pub seconds: f64,
}

/// NVRTC with caches. Cheap to share (`&Compiler` is `Sync`); [`Compiler::global`] gives a
/// process-wide one.
pub struct Compiler {
    nvrtc: NvrtcInfo,
    config: JitConfig,
    disk: Option<DiskCache>,
    /// Source fingerprint -> (options, output) pairs, and `&str` addresses -> fingerprints.
    memory: RwLock<MemoryCache>,
    nvrtc_compiles: AtomicU64,
    disk_hits: AtomicU64,
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
            memory: RwLock::new(MemoryCache::default()),
            nvrtc_compiles: AtomicU64::new(0),
            disk_hits: AtomicU64::new(0),
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

    /// The NVRTC this compiler runs (its version is part of every cache key).
    pub fn nvrtc(&self) -> &NvrtcInfo {
        &self.nvrtc
    }
    /// The settings it was made with.
    pub fn config(&self) -> &JitConfig {
        &self.config
    }
    /// The disk cache it reads and writes (`None`: `TMA_JIT_NO_CACHE`, or no directory).
    pub fn disk_cache(&self) -> Option<&DiskCache> {
        self.disk.as_ref()
    }
    /// NVRTC compiles and disk hits so far.
    pub fn stats(&self) -> CompileStats {
        CompileStats {
            nvrtc_compiles: self.nvrtc_compiles.load(Ordering::Relaxed),
            disk_hits: self.disk_hits.load(Ordering::Relaxed),
        }
    }

    /// The cache key of compiling `source` with `options` with this compiler's NVRTC: what
    /// names its disk entry ([`Compiled::key`] is its hex).
    pub fn cache_key(&self, source: &Source, options: &CompileOptions) -> Result<CacheKey, Error> {
        let args = options.nvrtc_args(self.nvrtc.supports_cubin(options.arch))?;
        Ok(CacheKey::new(
            self.nvrtc.version,
            source.fingerprint(),
            args,
        ))
    }

    /// Compiles every item into the caches (in-process and disk), on as many threads as the
    /// machine has cores: the warm-up before a program (or a graph capture) needs no NVRTC.
    /// Results in the items' order, each with where it came from ([`Origin::Nvrtc`]: compiled
    /// now) and its time; a failed item does not stop the others.
    pub fn precompile(
        &self,
        items: &[(Source, CompileOptions)],
    ) -> Vec<Result<Precompiled, Error>> {
        self.precompile_with(items, 0, &|_, _| {})
    }

    /// [`Compiler::precompile`] on `threads` threads (0: one per core), calling `done(i,
    /// result)` as item `i` finishes (from the thread that compiled it): a progress line.
    pub fn precompile_with(
        &self,
        items: &[(Source, CompileOptions)],
        threads: usize,
        done: &(dyn Fn(usize, &Result<Precompiled, Error>) + Sync),
    ) -> Vec<Result<Precompiled, Error>> {
        let threads = match threads {
            0 => std::thread::available_parallelism().map_or(1, |t| t.get()),
            n => n,
        }
        .clamp(1, items.len().max(1));
        let next = AtomicUsize::new(0);
        let results: Vec<Mutex<Option<Result<Precompiled, Error>>>> =
            items.iter().map(|_| Mutex::new(None)).collect();
        std::thread::scope(|s| {
            for _ in 0..threads {
                s.spawn(|| loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some((source, options)) = items.get(i) else {
                        break;
                    };
                    let start = Instant::now();
                    let r = self
                        .compile_traced(source, options)
                        .map(|(compiled, origin)| Precompiled {
                            compiled,
                            origin,
                            seconds: start.elapsed().as_secs_f64(),
                        });
                    done(i, &r);
                    if let Ok(mut slot) = results[i].lock() {
                        *slot = Some(r);
                    }
                });
            }
        });
        results
            .into_iter()
            .map(|m| {
                m.into_inner().ok().flatten().unwrap_or(Err(Error::Nvrtc {
                    call: "Compiler::precompile",
                    result: "a compile thread panicked".into(),
                }))
            })
            .collect()
    }

    /// [`Compiler::precompile`] with a progress bar when stderr is a terminal (quiet
    /// otherwise), the outputs only: what a tuner or an example compiling its candidates wants.
    pub fn compile_all(
        &self,
        jobs: &[(Source, CompileOptions)],
    ) -> Vec<Result<Arc<Compiled>, Error>> {
        let bar = crate::progress::bar(jobs.len() as u64, "compiling");
        let out = self.precompile_with(jobs, 0, &|_, _| bar.inc(1));
        bar.finish_and_clear();
        out.into_iter().map(|r| r.map(|p| p.compiled)).collect()
    }

    /// Compiles `source`. A cached compile of text given at the same address before is a
    /// comparison of the text with the cached one (no hash, no copy); other text is hashed
    /// (a few microseconds for a 50 KB source). [`Compiler::compile_source`] with a held
    /// [`Source`] skips both.
    pub fn compile(&self, source: &str, options: &CompileOptions) -> Result<Arc<Compiled>, Error> {
        if !self.config.cache {
            return self.compile_source(&Source::new(source), options);
        }
        let address = (source.as_ptr() as usize, source.len());
        let (fp, known) = match self.fingerprint_at(address, source) {
            Some(fp) => (fp, true),
            None => (fingerprint(source.as_bytes()), false),
        };
        let compiled = match self.memory_get(fp, options) {
            Some(hit) => hit,
            None => self.compile_source(&Source::with_fingerprint(source, fp), options)?,
        };
        if !known {
            self.remember_address(address, fp);
        }
        Ok(compiled)
    }

    /// The fingerprint of `text` when the cache holds it and saw it at `address` before.
    fn fingerprint_at(&self, address: (usize, usize), text: &str) -> Option<u128> {
        let m = self.memory.read().ok()?;
        let fp = *m.by_address.get(&address)?;
        (*m.entries.get(&fp)?.text == *text).then_some(fp)
    }

    fn remember_address(&self, address: (usize, usize), fp: u128) {
        if let Ok(mut m) = self.memory.write() {
            if !m.entries.contains_key(&fp) {
                return;
            }
            if m.by_address.len() >= MAX_ADDRESSES {
                m.by_address.clear();
            }
            m.by_address.insert(address, fp);
        }
    }

    /// Compiles `source`: in-process cache, then disk cache, then NVRTC.
    pub fn compile_source(
        &self,
        source: &Source,
        options: &CompileOptions,
    ) -> Result<Arc<Compiled>, Error> {
        self.compile_traced(source, options).map(|(c, _)| c)
    }

    /// [`Compiler::compile_source`], and where the output came from.
    fn compile_traced(
        &self,
        source: &Source,
        options: &CompileOptions,
    ) -> Result<(Arc<Compiled>, Origin), Error> {
        if self.config.cache {
            if let Some(hit) = self.memory_get(source.fingerprint(), options) {
                return Ok((hit, Origin::Memory));
            }
        }
        check_targets(source.facts(), options.arch)?;
        let facts = source.facts().map(|f| Arc::new(f.clone()));
        let cubin = self.nvrtc.supports_cubin(options.arch);
        let key = self.cache_key(source, options)?;
        let hex = key.hex();
        let mut compiled = None;
        if let Some(disk) = &self.disk {
            if let Some(entry) = disk.load(&key) {
                self.disk_hits.fetch_add(1, Ordering::Relaxed);
                if self.config.debug {
                    eprintln!("tma jit: disk cache hit {}", disk.path(&hex).display());
                }
                let (log, kernel_resources) = split_log(&entry.log);
                compiled = Some(Compiled {
                    ptx: entry.ptx,
                    cubin: entry.cubin,
                    log,
                    arch: options.arch,
                    debug_waits: options.debug_waits,
                    facts: facts.clone(),
                    args: key.args.clone(),
                    key: hex.clone(),
                    kernel_resources,
                });
            }
        }
        let (compiled, origin) = match compiled {
            Some(c) => (c, Origin::Disk),
            None => {
                let (c, raw_log) =
                    self.run_nvrtc(source.text(), options, facts, key.args.clone(), cubin, hex)?;
                if let Some(disk) = &self.disk {
                    disk.store(&key, &entry_info(&c), &c.ptx, &c.cubin, &raw_log);
                }
                (c, Origin::Nvrtc)
            }
        };
        let compiled = Arc::new(compiled);
        if self.config.cache {
            if let Ok(mut m) = self.memory.write() {
                let e = m
                    .entries
                    .entry(source.fingerprint())
                    .or_insert_with(|| MemoryEntry {
                        text: source.shared_text(),
                        outputs: Vec::new(),
                    });
                if !e.outputs.iter().any(|(o, _)| o == options) {
                    e.outputs.push((options.clone(), compiled.clone()));
                }
            }
        }
        Ok((compiled, origin))
    }

    fn memory_get(&self, fp: u128, options: &CompileOptions) -> Option<Arc<Compiled>> {
        let m = self.memory.read().ok()?;
        m.entries
            .get(&fp)?
            .outputs
            .iter()
            .find(|(o, _)| o == options)
            .map(|(_, c)| c.clone())
    }

    fn run_nvrtc(
        &self,
        text: &str,
        options: &CompileOptions,
        facts: Option<Arc<SourceFacts>>,
        args: Vec<String>,
        want_cubin: bool,
        key: String,
    ) -> Result<(Compiled, String), Error> {
        let start = Instant::now();
        if self.config.debug {
            eprintln!("tma jit: nvrtc {} {}", key, args.join(" "));
        }
        self.nvrtc_compiles.fetch_add(1, Ordering::Relaxed);
        let (ptx, cubin, raw_log) = nvrtc_compile(text, &args, want_cubin)?;
        let (log, kernel_resources) = split_log(&raw_log);
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
            facts,
            args,
            key,
            kernel_resources,
        };
        if let Some(dir) = &self.config.dump_dir {
            dump(dir, text, &compiled, &raw_log);
        }
        Ok((compiled, raw_log))
    }
}

/// What a disk entry says it holds: the arch, the kernels (ptxas's report), when.
fn entry_info(c: &Compiled) -> EntryInfo {
    EntryInfo {
        arch: c.arch.nvrtc_name().to_string(),
        kernels: c
            .kernel_resources
            .iter()
            .map(|k| k.kernel.clone())
            .collect(),
        created: SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs()),
    }
}

#[cfg(test)]
#[allow(clippy::panic)]
mod tests {
    use super::*;
    use tma_core::render::KernelSource;
    use tma_core::{validate, DType, Swizzle, TileSpec};

    #[test]
    fn tiles_must_target_the_compile_arch() {
        let a = validate(
            &TileSpec::new("a", DType::BF16, [4096, 1024], [64, 64]).swizzle(Swizzle::B128),
        )
        .unwrap_or_else(|e| panic!("{e}"));
        let facts = KernelSource::new().tile(&a).facts();
        assert!(check_targets(Some(&facts), Arch::Sm90a).is_ok());
        match check_targets(Some(&facts), Arch::Sm100a) {
            Err(e @ Error::TargetMismatch { .. }) => assert_eq!(
                e.to_string(),
                "tile `a` targets sm_90a but the source is compiled for sm_100a; state the arch once: \
                 declare the tile with `target = sm_100a` (TileSpec::target), or compile with \
                 CompileOptions::new(Arch::Sm90a)"
            ),
            other => panic!("{other:?}"),
        }
        // Text without a description states nothing, whatever its comments say.
        assert!(check_targets(None, Arch::Sm120a).is_ok());
    }
}
