//! The cache key, in one place: everything that changes a compile's output. The disk cache,
//! the loaded-module cache, [`Compiler::precompile`](super::Compiler::precompile) and the
//! `tma` command's `precompile` all key by [`CacheKey`], so a cache one warms is the cache the
//! other reads. (The in-process compile cache finds an output by the source's fingerprint and
//! equal `CompileOptions`: the same inputs within one process and one NVRTC, compared rather
//! than hashed into text.)
//!
//! The key is the fingerprint of a canonical text ([`CacheKey::text`]) that each disk entry
//! also stores whole: a load compares the text it asked for with the entry's, so a renamed,
//! copied or colliding file is a miss, never another compile's binary.

use super::hash::fingerprint_seeded;

/// Bump when the disk format, the fingerprint (compile/hash.rs) or anything else that changes
/// cache keys or cached binaries changes. 3: entries store their key's text and what they
/// hold (disk.rs); 2: XXH3-128 fingerprints; 1: a hand-written hash.
pub const CACHE_FORMAT: u32 = 3;

/// The seed of the key's fingerprint (`"tma_jit"`).
const KEY_SEED: u64 = 0x0074_6d61_5f6a_6974;

/// Everything a compile's output depends on. Two compiles with equal keys give the same
/// binary; a change to any part is another key.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct CacheKey {
    /// tma-runtime's version: its prelude and checks change with it.
    pub tma_version: String,
    /// [`CACHE_FORMAT`].
    pub format: u32,
    /// NVRTC's version (major, minor).
    pub nvrtc: (i32, i32),
    /// The source's fingerprint: its text and its typed description ([`super::Source`]).
    pub source: u128,
    /// The NVRTC arguments: the arch (`--gpu-architecture=`) and every option, in order
    /// ([`super::CompileOptions::nvrtc_args`]).
    pub args: Vec<String>,
}

impl CacheKey {
    /// The key of this runtime (its version, [`CACHE_FORMAT`]) for a compile with NVRTC
    /// `nvrtc` of source `source` with `args`.
    pub fn new(nvrtc: (i32, i32), source: u128, args: Vec<String>) -> CacheKey {
        CacheKey {
            tma_version: env!("CARGO_PKG_VERSION").to_string(),
            format: CACHE_FORMAT,
            nvrtc,
            source,
            args,
        }
    }

    /// The canonical text: one part per line (`tma <version>`, `format <n>`, `nvrtc <a>.<b>`,
    /// `source <hex>`, then `arg <argument>` per argument). Arguments hold no line break or
    /// other control character ([`super::CompileOptions::nvrtc_args`] refuses them), so the
    /// text reads back unambiguously.
    pub fn text(&self) -> String {
        let mut s = format!(
            "tma {}\nformat {}\nnvrtc {}.{}\nsource {:032x}\n",
            self.tma_version, self.format, self.nvrtc.0, self.nvrtc.1, self.source
        );
        for a in &self.args {
            s.push_str("arg ");
            s.push_str(a);
            s.push('\n');
        }
        s
    }

    /// Reads [`CacheKey::text`] back; `None` for anything else.
    pub fn parse(text: &str) -> Option<CacheKey> {
        let mut lines = text.lines();
        let mut field = |name: &str| lines.next()?.strip_prefix(name)?.strip_prefix(' ');
        let tma_version = field("tma")?.to_string();
        let format = field("format")?.parse().ok()?;
        let (major, minor) = field("nvrtc")?.split_once('.')?;
        let nvrtc = (major.parse().ok()?, minor.parse().ok()?);
        let source = u128::from_str_radix(field("source")?, 16).ok()?;
        let args = lines
            .map(|l| l.strip_prefix("arg ").map(str::to_string))
            .collect::<Option<Vec<_>>>()?;
        let key = CacheKey {
            tma_version,
            format,
            nvrtc,
            source,
            args,
        };
        // Only the canonical form: no trailing text, no other spelling of a number.
        (key.text() == text).then_some(key)
    }

    /// The key: the fingerprint of [`CacheKey::text`].
    pub fn fingerprint(&self) -> u128 {
        fingerprint_seeded(self.text().as_bytes(), KEY_SEED)
    }

    /// The key in hex: [`super::Compiled::key`] and the disk entry's file stem.
    pub fn hex(&self) -> String {
        format!("{:032x}", self.fingerprint())
    }

    /// The NVRTC options beyond the ones every compile passes (the arch, `-std`,
    /// `-default-device`, `--no-cache`, ptxas's report): what `tma cache list` shows of an
    /// entry.
    pub fn options(&self) -> Vec<&str> {
        self.args
            .iter()
            .map(String::as_str)
            .filter(|a| {
                !a.starts_with("--gpu-architecture=")
                    && !a.starts_with("-std=")
                    && *a != "-default-device"
                    && *a != "--no-cache"
                    && *a != "--ptxas-options=-v"
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn base() -> CacheKey {
        CacheKey::new(
            (13, 0),
            0x0123_4567_89ab_cdef_0123_4567_89ab_cdef,
            vec![
                "--gpu-architecture=sm_90a".into(),
                "-std=c++20".into(),
                "-DTMA_DEBUG".into(),
            ],
        )
    }

    #[test]
    fn every_part_changes_the_key() {
        let k = base();
        let mut changed: Vec<(&str, CacheKey)> = Vec::new();
        let mut with = |what, f: &dyn Fn(&mut CacheKey)| {
            let mut c = base();
            f(&mut c);
            changed.push((what, c));
        };
        with("tma version", &|c| c.tma_version = "0.1.1".into());
        with("format", &|c| c.format += 1);
        with("nvrtc major", &|c| c.nvrtc.0 = 12);
        with("nvrtc minor", &|c| c.nvrtc.1 = 1);
        with("source", &|c| c.source ^= 1);
        with("arch", &|c| c.args[0] = "--gpu-architecture=sm_100a".into());
        with("option", &|c| c.args[2] = "-DTMA_DEBUGX".into());
        with("option dropped", &|c| {
            c.args.pop();
        });
        with("option added", &|c| c.args.push("--use_fast_math".into()));
        with("options reordered", &|c| c.args.swap(1, 2));
        // Two arguments are not one with a space (the text is line-per-argument).
        with("arguments joined", &|c| {
            c.args = vec![
                "--gpu-architecture=sm_90a".into(),
                "-std=c++20 -DTMA_DEBUG".into(),
            ]
        });
        for (what, c) in &changed {
            assert_ne!(c.fingerprint(), k.fingerprint(), "{what}");
            assert_ne!(c.text(), k.text(), "{what}");
        }
        assert_eq!(base().hex(), k.hex(), "the key is a function of its parts");
        assert_eq!(k.hex().len(), 32);
    }

    #[test]
    fn the_text_reads_back_and_nothing_else_does() {
        let k = base();
        assert_eq!(CacheKey::parse(&k.text()), Some(k.clone()));
        assert_eq!(
            k.text(),
            format!(
                "tma {}\nformat {CACHE_FORMAT}\nnvrtc 13.0\nsource 0123456789abcdef0123456789abcdef\n\
                 arg --gpu-architecture=sm_90a\narg -std=c++20\narg -DTMA_DEBUG\n",
                env!("CARGO_PKG_VERSION")
            )
        );
        let t = k.text();
        for bad in [
            t.replace(
                &format!("format {CACHE_FORMAT}"),
                &format!("format 0{CACHE_FORMAT}"),
            ),
            t.replace("arg -DTMA_DEBUG\n", "arg -DTMA_DEBUG\nextra\n"),
            t.replace("source 0123", "source 123"),
            t.trim_end().to_string(),
            String::new(),
        ] {
            assert_eq!(CacheKey::parse(&bad), None, "{bad:?}");
        }
        assert_eq!(k.options(), ["-DTMA_DEBUG"]);
    }
}
