//! `tma precompile` and `tma cache`: warming the runtime's JIT disk cache ahead of time, and
//! listing, sizing, clearing and pruning it. Both go through tma-runtime (`Compiler`,
//! `DiskCache`, `CacheKey`): one key function, one file format, the cache a program reads.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use tma_core::echo::shown;
use tma_runtime::compile::{
    default_cache_dir, CacheEntry, DiskCache, EntryState, Origin, Removed, CACHE_FORMAT,
};
use tma_runtime::{Compiler, JitConfig};

use crate::{
    assemble_kernel, read_decl_args, read_text, BuildArgs, Outcome, EXIT_ENVIRONMENT,
    EXIT_REJECTED, EXIT_USAGE, MAX_KERNEL_BYTES,
};

/// `tma precompile`: every kernel, in parallel, into the disk cache; one line per kernel
/// (compiled now, or cached already) and a summary.
pub(crate) fn precompile_cmd(
    kernels: &[PathBuf],
    build: &BuildArgs,
    cache_dir: Option<&Path>,
) -> Outcome {
    let arch = match build.arch() {
        Ok(a) => a,
        Err(o) => return o,
    };
    let mut out = Outcome::default();
    let reads = match read_decl_args(&build.tiles, &mut out) {
        Ok(r) => r,
        Err(o) => return o,
    };
    let mut items = Vec::new();
    let mut names = Vec::new();
    for path in kernels {
        let kernel = match read_text(path, MAX_KERNEL_BYTES) {
            Ok(k) => k,
            Err(o) => return o,
        };
        let Some(source) = assemble_kernel(&reads, &kernel, &mut out) else {
            return out;
        };
        items.push((source, build.options(arch)));
        names.push(kernel.name);
    }
    let compiler = match compiler(cache_dir) {
        Ok(c) => c,
        Err(o) => return o,
    };
    let dir = compiler
        .disk_cache()
        .map_or_else(String::new, |d| d.dir().display().to_string());
    let start = std::time::Instant::now();
    let results = compiler.precompile(&items);
    let (mut compiled, mut cached, mut failed, mut unsaved) = (0, 0, 0, 0);
    let width = names.iter().map(String::len).max().unwrap_or(0);
    let arch = arch.nvrtc_name();
    for ((name, r), (source, options)) in names.iter().zip(&results).zip(&items) {
        match r {
            Ok(p) => {
                // A failed cache write is only a warning to a program; here the entry is the
                // whole point: one that cannot be read back is an environment failure.
                let saved = compiler.disk_cache().is_some_and(|d| {
                    compiler
                        .cache_key(source, options)
                        .is_ok_and(|k| d.load(&k).is_some())
                });
                let what = match p.origin {
                    _ if !saved => {
                        unsaved += 1;
                        out.code = out.code.max(EXIT_ENVIRONMENT);
                        let _ = writeln!(
                            out.stderr,
                            "error: {name}: compiled, but its cache entry is not in {dir} (the \
                             warning above says why): nothing was warmed"
                        );
                        "unsaved "
                    }
                    Origin::Nvrtc => {
                        compiled += 1;
                        "compiled"
                    }
                    Origin::Disk | Origin::Memory => {
                        cached += 1;
                        "cached  "
                    }
                };
                let _ = writeln!(
                    out.stdout,
                    "{what} {name:<width$} {arch:<8} {:>9}  {}",
                    seconds(p.seconds),
                    p.compiled.key
                );
            }
            Err(e) => {
                failed += 1;
                let code = match e {
                    tma_runtime::Error::CudaLibraryMissing { .. } => EXIT_ENVIRONMENT,
                    _ => EXIT_REJECTED,
                };
                out.code = out.code.max(code);
                let text = e.to_string();
                let _ = writeln!(out.stderr, "error: {name}: {}", text.trim_end());
                let _ = writeln!(out.stdout, "failed   {name:<width$} {arch:<8}");
            }
        }
    }
    let _ = writeln!(
        out.stdout,
        "{} kernel{}: {compiled} compiled, {cached} already cached{}{} in {}; cache {dir}",
        results.len(),
        if results.len() == 1 { "" } else { "s" },
        if unsaved > 0 {
            format!(", {unsaved} not saved")
        } else {
            String::new()
        },
        if failed > 0 {
            format!(", {failed} failed,")
        } else {
            ",".to_string()
        },
        seconds(start.elapsed().as_secs_f64()),
    );
    out
}

/// The runtime's compiler, or one writing to `dir`. The cache must be on: warming nothing
/// is refused.
fn compiler(dir: Option<&Path>) -> Result<Compiler, Outcome> {
    let mut config = JitConfig::from_env();
    match dir {
        Some(d) => {
            config.cache_dir = Some(d.to_path_buf());
            config.cache = true;
        }
        None if !config.cache => {
            return Err(Outcome::fail(
                EXIT_USAGE,
                "TMA_JIT_NO_CACHE is set: the runtime reads no cache, so there is nothing to \
                 warm; unset it, or name a directory with --cache-dir",
            ))
        }
        None => {}
    }
    if config.cache_dir.is_none() {
        return Err(no_cache_dir());
    }
    Compiler::with_config(config).map_err(|e| Outcome::fail(EXIT_ENVIRONMENT, e.to_string()))
}

fn no_cache_dir() -> Outcome {
    Outcome::fail(
        EXIT_ENVIRONMENT,
        "no cache directory: none of TMA_CACHE_DIR, XDG_CACHE_HOME or HOME is set; set \
         TMA_CACHE_DIR or pass --cache-dir",
    )
}

/// A `tma cache` action.
pub enum CacheCmd {
    List,
    Size,
    Clear,
    Prune {
        older_than: Option<String>,
        max_size: Option<String>,
    },
}

/// `tma cache <action>`.
pub fn cache_cmd(action: &CacheCmd, dir: Option<&Path>) -> Outcome {
    let Some(dir) = dir.map(Path::to_path_buf).or_else(default_cache_dir) else {
        return no_cache_dir();
    };
    let cache = DiskCache::new(dir);
    let shown_dir = cache.dir().display().to_string();
    let env_fail = |e: tma_runtime::Error| Outcome::fail(EXIT_ENVIRONMENT, e.to_string());
    match action {
        CacheCmd::List => match cache.entries() {
            Ok(entries) => Outcome {
                stdout: list(&shown_dir, &entries, SystemTime::now()),
                ..Outcome::default()
            },
            Err(e) => env_fail(e),
        },
        CacheCmd::Size => match cache.entries() {
            Ok(entries) => Outcome {
                stdout: format!("{}\n", summary(&shown_dir, &entries)),
                ..Outcome::default()
            },
            Err(e) => env_fail(e),
        },
        CacheCmd::Clear => match cache.clear() {
            Ok(r) => Outcome {
                stdout: format!("removed {} from {shown_dir}\n", removed(r)),
                ..Outcome::default()
            },
            Err(e) => env_fail(e),
        },
        CacheCmd::Prune {
            older_than,
            max_size,
        } => {
            let age = match older_than.as_deref().map(parse_age).transpose() {
                Ok(a) => a,
                Err(o) => return o,
            };
            let size = match max_size.as_deref().map(parse_size).transpose() {
                Ok(s) => s,
                Err(o) => return o,
            };
            match cache
                .prune(age, size)
                .and_then(|r| Ok((r, cache.entries()?)))
            {
                Ok((r, left)) => Outcome {
                    stdout: format!(
                        "removed {}; left: {}\n",
                        removed(r),
                        summary(&shown_dir, &left)
                    ),
                    ..Outcome::default()
                },
                Err(e) => env_fail(e),
            }
        }
    }
}

fn removed(r: Removed) -> String {
    format!(
        "{} file{} ({})",
        r.entries,
        if r.entries == 1 { "" } else { "s" },
        bytes(r.bytes)
    )
}

/// `cache <dir>: <n> entries, <size>`.
fn summary(dir: &str, entries: &[CacheEntry]) -> String {
    let total: u64 = entries.iter().map(|e| e.bytes).sum();
    format!(
        "cache {dir}: {} entr{}, {}",
        entries.len(),
        if entries.len() == 1 { "y" } else { "ies" },
        bytes(total)
    )
}

/// The table of `tma cache list`, oldest entry first.
pub fn list(dir: &str, entries: &[CacheEntry], now: SystemTime) -> String {
    let mut sorted: Vec<&CacheEntry> = entries.iter().collect();
    sorted.sort_by(|a, b| a.modified.cmp(&b.modified).then(a.path.cmp(&b.path)));
    let mut rows = vec![[
        "KEY", "SIZE", "AGE", "ARCH", "KERNELS", "OPTIONS", "NVRTC", "TMA",
    ]
    .map(String::from)];
    for e in sorted {
        let key = e.path.file_stem().map_or_else(String::new, |s| {
            s.to_string_lossy().chars().take(12).collect()
        });
        let age = e
            .modified
            .and_then(|m| now.duration_since(m).ok())
            .map_or_else(|| "?".to_string(), age);
        let rest = match &e.state {
            EntryState::Valid { key, info, .. } => {
                let options = key.options().join(" ");
                [
                    info.arch.clone(),
                    if info.kernels.is_empty() {
                        "(PTX only)".to_string()
                    } else {
                        info.kernels.join(",")
                    },
                    if options.is_empty() {
                        "-".to_string()
                    } else {
                        options
                    },
                    format!("{}.{}", key.nvrtc.0, key.nvrtc.1),
                    key.tma_version.clone(),
                ]
            }
            EntryState::OtherFormat(f) => [
                format!("(format {f}: another version of tma wrote it)"),
                String::new(),
                String::new(),
                String::new(),
                String::new(),
            ],
            EntryState::Corrupt => [
                "(corrupt: never read; prune removes it)".to_string(),
                String::new(),
                String::new(),
                String::new(),
                String::new(),
            ],
        };
        let [a, k, o, n, t] = rest;
        rows.push([key, bytes(e.bytes), age, a, k, o, n, t]);
    }
    let mut widths = [0usize; 8];
    for r in &rows {
        for (w, c) in widths.iter_mut().zip(r) {
            *w = (*w).max(c.chars().count());
        }
    }
    let mut s = format!("{}\n", summary(dir, entries));
    if entries.is_empty() {
        return s;
    }
    for r in &rows {
        let mut line = String::new();
        for (i, (c, w)) in r.iter().zip(widths).enumerate() {
            if i > 0 {
                line.push_str("  ");
            }
            // Size right-aligned; the rest left.
            if i == 1 {
                let _ = write!(line, "{c:>w$}");
            } else {
                let _ = write!(line, "{c:<w$}");
            }
        }
        s.push_str(line.trim_end());
        s.push('\n');
    }
    let _ = writeln!(
        s,
        "(this tma: {}, cache format {CACHE_FORMAT}; it reads the entries of its own version and \
         its NVRTC's)",
        env!("CARGO_PKG_VERSION")
    );
    s
}

/// `412 B`, `3.5 KiB`, `12.0 MiB`, `1.2 GiB`.
pub fn bytes(n: u64) -> String {
    const UNITS: [&str; 4] = ["KiB", "MiB", "GiB", "TiB"];
    if n < 1024 {
        return format!("{n} B");
    }
    let mut v = n as f64 / 1024.0;
    let mut unit = UNITS[0];
    for u in &UNITS[1..] {
        if v < 1024.0 {
            break;
        }
        v /= 1024.0;
        unit = u;
    }
    format!("{v:.1} {unit}")
}

/// `35 s`, `12 min`, `3 h`, `2 d`.
fn age(d: Duration) -> String {
    let s = d.as_secs();
    match s {
        0..=119 => format!("{s} s"),
        120..=7199 => format!("{} min", s / 60),
        7200..=172_799 => format!("{} h", s / 3600),
        _ => format!("{} d", s / 86_400),
    }
}

fn seconds(s: f64) -> String {
    if s < 1.0 {
        format!("{:.1} ms", s * 1e3)
    } else {
        format!("{s:.2} s")
    }
}

/// `30d`, `12h`, `45m`, `90s`.
pub fn parse_age(text: &str) -> Result<Duration, Outcome> {
    let t = text.trim();
    let unit = |suffix: char, secs: u64| {
        t.strip_suffix(suffix)
            .and_then(|n| n.trim().parse::<u64>().ok())
            .and_then(|n| n.checked_mul(secs))
    };
    [('s', 1), ('m', 60), ('h', 3600), ('d', 86_400)]
        .iter()
        .find_map(|&(c, secs)| unit(c, secs))
        .map(Duration::from_secs)
        .ok_or_else(|| {
            Outcome::fail(
                EXIT_USAGE,
                format!(
                    "--older-than takes a whole number with a unit s, m, h or d (30d), not `{}`",
                    shown(text)
                ),
            )
        })
}

/// `4096`, `64K`, `500M`, `2G` (binary units).
pub fn parse_size(text: &str) -> Result<u64, Outcome> {
    let t = text.trim();
    let (digits, shift) = match t.char_indices().last() {
        Some((i, 'K' | 'k')) => (&t[..i], 10),
        Some((i, 'M' | 'm')) => (&t[..i], 20),
        Some((i, 'G' | 'g')) => (&t[..i], 30),
        _ => (t, 0),
    };
    digits
        .trim()
        .parse::<u64>()
        .ok()
        .and_then(|n| n.checked_mul(1u64 << shift))
        .ok_or_else(|| {
            Outcome::fail(
                EXIT_USAGE,
                format!(
                    "--max-size takes a whole number of bytes, optionally with K, M or G (500M), \
                     not `{}`",
                    shown(text)
                ),
            )
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ages_and_sizes_parse_or_say_what_they_take() {
        assert_eq!(
            parse_age("30d").ok(),
            Some(Duration::from_secs(30 * 86_400))
        );
        assert_eq!(parse_age("90s").ok(), Some(Duration::from_secs(90)));
        assert_eq!(parse_age("2h").ok(), Some(Duration::from_secs(7200)));
        for bad in ["30", "d", "-1d", "1.5h", "99999999999999999999d"] {
            let e = parse_age(bad).err().map(|o| (o.code, o.stderr));
            assert!(
                matches!(&e, Some((2, m)) if m.contains("--older-than takes")),
                "{bad}: {e:?}"
            );
        }
        assert_eq!(parse_size("4096").ok(), Some(4096));
        assert_eq!(parse_size("500M").ok(), Some(500 << 20));
        assert_eq!(parse_size("2g").ok(), Some(2 << 30));
        for bad in ["M", "1.5G", "-3K", "20000000000G", "5T"] {
            assert!(parse_size(bad).is_err(), "{bad}");
        }
        assert_eq!(bytes(412), "412 B");
        assert_eq!(bytes(3584), "3.5 KiB");
        assert_eq!(bytes(12 << 20), "12.0 MiB");
        assert_eq!(age(Duration::from_secs(35)), "35 s");
        assert_eq!(age(Duration::from_secs(3 * 3600 + 5)), "3 h");
    }
}
