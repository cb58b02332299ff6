//! The on-disk cache: one content-addressed, checksummed file per compile, which says what it
//! is (its key's text, arch, kernels, when it was made), and the listing, clearing and pruning
//! of them (`tma cache`).

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime};

use super::hash::fingerprint;
use super::key::CacheKey;
use crate::error::Error;

/// The file header; its last byte is the entry format: 3 since entries store their key's text
/// and what they hold (2: the XXH3-128 checksum; an entry of another format is never read as
/// a valid one, whatever its name).
const MAGIC: &[u8; 8] = b"TMAJIT\x00\x03";
/// The header without its format byte.
const MAGIC_STEM: &[u8] = b"TMAJIT\x00";
/// An entry's file name: `<32 hex digits>.tmajit`.
const EXTENSION: &str = "tmajit";
/// A temp file older than this is a crashed writer's leftover: [`DiskCache::prune`] removes it.
const STALE_TEMP: Duration = Duration::from_secs(3600);

/// What an entry holds beside its key, for `tma cache list`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EntryInfo {
    /// The arch compiled for (`sm_90a`).
    pub arch: String,
    /// The kernels in the module (ptxas's report; empty for a PTX-only entry).
    pub kernels: Vec<String>,
    /// When it was compiled: seconds since the Unix epoch.
    pub created: u64,
}

impl EntryInfo {
    /// One field per line: `arch <name>`, `created <secs>`, then `kernel <name>` per kernel.
    fn text(&self) -> String {
        let mut s = format!("arch {}\ncreated {}\n", self.arch, self.created);
        for k in &self.kernels {
            s.push_str("kernel ");
            s.push_str(k);
            s.push('\n');
        }
        s
    }
    fn parse(text: &str) -> Option<EntryInfo> {
        let mut lines = text.lines();
        let arch = lines.next()?.strip_prefix("arch ")?.to_string();
        let created = lines.next()?.strip_prefix("created ")?.parse().ok()?;
        let kernels = lines
            .map(|l| l.strip_prefix("kernel ").map(str::to_string))
            .collect::<Option<Vec<_>>>()?;
        Some(EntryInfo {
            arch,
            kernels,
            created,
        })
    }
}

/// One entry read back: its key, what it holds, and the compile's outputs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    pub key: CacheKey,
    pub info: EntryInfo,
    pub ptx: String,
    pub cubin: Vec<u8>,
    /// NVRTC's whole log (ptxas's report included).
    pub log: String,
}

/// A file of the cache directory, as [`DiskCache::entries`] finds it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CacheEntry {
    pub path: PathBuf,
    /// The file's size.
    pub bytes: u64,
    /// The file's modification time: when it was written.
    pub modified: Option<SystemTime>,
    pub state: EntryState,
}

/// What a cache file is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum EntryState {
    /// An entry of this format, checksum and key intact.
    Valid {
        key: CacheKey,
        info: EntryInfo,
        ptx_bytes: usize,
        cubin_bytes: usize,
    },
    /// An entry of another format (another version of tma wrote it; this one never reads it).
    OtherFormat(u8),
    /// Unreadable, truncated, or its checksum or key text is wrong: never read, and removed by
    /// [`DiskCache::prune`].
    Corrupt,
}

/// What a [`DiskCache::clear`] or [`DiskCache::prune`] removed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Removed {
    pub entries: usize,
    pub bytes: u64,
}

/// Content-addressed files of compiled outputs. Written to a temp file then renamed, so
/// concurrent processes never see half a file; unreadable, corrupt or mismatching entries are
/// ignored (and rebuilt); failed writes are reported on stderr, never returned.
#[derive(Clone, Debug)]
pub struct DiskCache {
    dir: PathBuf,
}

static TMP_COUNTER: AtomicU64 = AtomicU64::new(0);

/// Writes `bytes` to `path` whole or not at all: into `.<stem>.<pid>.<n>.tmp` beside it (its
/// directory created), then renamed over it, so a concurrent reader never sees half a file. A
/// failed write leaves no temp file. The JIT cache's entries and the tune cache's picks.
pub(crate) fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    // The stem: an entry `<key>.tmajit` writes `.<key>.<pid>.<n>.tmp`, what `file_kind` knows.
    let name = path
        .file_stem()
        .map_or("entry".into(), |n| n.to_string_lossy());
    let tmp = dir.join(format!(
        ".{name}.{}.{}.tmp",
        std::process::id(),
        TMP_COUNTER.fetch_add(1, Ordering::Relaxed)
    ));
    let res = std::fs::create_dir_all(dir)
        .map_err(|e| match e.kind() {
            // Said of the directory, not of the entry the caller names.
            std::io::ErrorKind::AlreadyExists => std::io::Error::new(
                e.kind(),
                format!("{} exists and is not a directory", dir.display()),
            ),
            _ => e,
        })
        .and_then(|_| std::fs::write(&tmp, bytes))
        .and_then(|_| std::fs::rename(&tmp, path));
    if res.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    res
}

/// The bytes of the regular file at `path` (a symlink followed). Anything else is an error
/// without being opened: reading a FIFO waits for a writer forever, and a device such as
/// `/dev/zero` never ends. The JIT cache's entries and the tune cache's picks.
pub(crate) fn read_file(path: &Path) -> std::io::Result<Vec<u8>> {
    if !std::fs::metadata(path)?.is_file() {
        return Err(std::io::Error::other("not a regular file"));
    }
    std::fs::read(path)
}

impl DiskCache {
    /// The cache in `dir` (created at the first store).
    pub fn new(dir: PathBuf) -> DiskCache {
        DiskCache { dir }
    }
    /// The directory holding the entries.
    pub fn dir(&self) -> &Path {
        &self.dir
    }
    /// The file of the entry whose key is `hex` ([`CacheKey::hex`]).
    pub fn path(&self, hex: &str) -> PathBuf {
        self.dir.join(format!("{hex}.{EXTENSION}"))
    }

    /// Reads the entry of `key`: `None` when absent, unreadable, corrupt, or holding another
    /// key's text (a renamed or copied file, a fingerprint collision): never another
    /// compile's output.
    pub fn load(&self, key: &CacheKey) -> Option<Entry> {
        let bytes = read_file(&self.path(&key.hex())).ok()?;
        let d = decode(&bytes).ok()?;
        if d.key != key.text() {
            return None;
        }
        Some(Entry {
            key: key.clone(),
            info: EntryInfo::parse(d.info)?,
            ptx: String::from_utf8(d.ptx.to_vec()).ok()?,
            cubin: d.cubin.to_vec(),
            log: String::from_utf8(d.log.to_vec()).ok()?,
        })
    }

    /// Writes the entry of `key` atomically (temp file + rename). Failures go to stderr.
    pub fn store(&self, key: &CacheKey, info: &EntryInfo, ptx: &str, cubin: &[u8], log: &str) {
        let path = self.path(&key.hex());
        if let Err(e) = write_atomic(&path, &encode(key, info, ptx, cubin, log)) {
            eprintln!(
                "tma jit: warning: could not write cache entry {}: {e} (continuing without it)",
                path.display()
            );
        }
    }

    /// Every entry file of the directory (`<key>.tmajit`; other files are not the cache's),
    /// read and checked, sorted by name. A directory that does not exist is an empty cache.
    pub fn entries(&self) -> Result<Vec<CacheEntry>, Error> {
        let mut out: Vec<CacheEntry> = self
            .files()?
            .into_iter()
            .filter(|(_, kind)| *kind == FileKind::Entry)
            .map(|(path, _)| {
                let meta = std::fs::metadata(&path).ok();
                let stem = path.file_stem().map(|s| s.to_string_lossy().into_owned());
                let state = match read_file(&path) {
                    Ok(bytes) => state_of(&bytes, stem.as_deref().unwrap_or_default()),
                    Err(_) => EntryState::Corrupt,
                };
                CacheEntry {
                    bytes: meta.as_ref().map_or(0, |m| m.len()),
                    modified: meta.and_then(|m| m.modified().ok()),
                    path,
                    state,
                }
            })
            .collect();
        out.sort_by(|a, b| a.path.cmp(&b.path));
        Ok(out)
    }

    /// Removes every entry and temp file of the cache (other files in the directory stay).
    pub fn clear(&self) -> Result<Removed, Error> {
        let mut removed = Removed::default();
        for (path, _) in self.files()? {
            self.remove(&path, &mut removed)?;
        }
        Ok(removed)
    }

    /// Removes corrupt entries and crashed writers' temp files (older than an hour), then the
    /// entries written more than `older_than` ago, then the oldest until the entries total at
    /// most `max_bytes`.
    pub fn prune(
        &self,
        older_than: Option<Duration>,
        max_bytes: Option<u64>,
    ) -> Result<Removed, Error> {
        let now = SystemTime::now();
        let age = |t: Option<SystemTime>| t.and_then(|t| now.duration_since(t).ok());
        let mut removed = Removed::default();
        for (path, kind) in self.files()? {
            let modified = std::fs::metadata(&path).and_then(|m| m.modified()).ok();
            if kind == FileKind::Temp && age(modified).is_some_and(|a| a > STALE_TEMP) {
                self.remove(&path, &mut removed)?;
            }
        }
        let mut kept = Vec::new();
        for e in self.entries()? {
            let old = older_than.is_some_and(|limit| age(e.modified).is_some_and(|a| a > limit));
            if e.state == EntryState::Corrupt || old {
                self.remove(&e.path, &mut removed)?;
            } else {
                kept.push(e);
            }
        }
        if let Some(max) = max_bytes {
            kept.sort_by(|a, b| a.modified.cmp(&b.modified).then(a.path.cmp(&b.path)));
            let mut total: u64 = kept.iter().map(|e| e.bytes).sum();
            for e in &kept {
                if total <= max {
                    break;
                }
                self.remove(&e.path, &mut removed)?;
                total = total.saturating_sub(e.bytes);
            }
        }
        Ok(removed)
    }

    /// The cache's files: entries and temp files, by their names.
    fn files(&self) -> Result<Vec<(PathBuf, FileKind)>, Error> {
        let io = |action: &'static str| {
            let path = self.dir.display().to_string();
            move |e: std::io::Error| Error::CacheIo {
                path,
                action,
                reason: e.to_string(),
            }
        };
        let dir = match std::fs::read_dir(&self.dir) {
            Ok(d) => d,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(io("read the directory")(e)),
        };
        let mut out = Vec::new();
        for item in dir {
            let item = item.map_err(io("read the directory"))?;
            let name = item.file_name();
            // A directory is never the cache's, whatever its name: removing it would fail
            // (and stop a prune or clear).
            if item.file_type().is_ok_and(|t| t.is_dir()) {
                continue;
            }
            if let Some(kind) = name.to_str().and_then(file_kind) {
                out.push((item.path(), kind));
            }
        }
        Ok(out)
    }

    fn remove(&self, path: &Path, removed: &mut Removed) -> Result<(), Error> {
        let bytes = std::fs::metadata(path).map_or(0, |m| m.len());
        match std::fs::remove_file(path) {
            Ok(()) => {
                removed.entries += 1;
                removed.bytes += bytes;
                Ok(())
            }
            // Another process removed or replaced it first.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(Error::CacheIo {
                path: path.display().to_string(),
                action: "remove",
                reason: e.to_string(),
            }),
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum FileKind {
    Entry,
    Temp,
}

fn is_key(s: &str) -> bool {
    s.len() == 32
        && s.bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// `<key>.tmajit` is an entry, `.<key>.<pid>.<n>.tmp` a writer's temp file; nothing else is
/// the cache's.
fn file_kind(name: &str) -> Option<FileKind> {
    if let Some(stem) = name.strip_suffix(".tmajit") {
        return is_key(stem).then_some(FileKind::Entry);
    }
    let rest = name.strip_prefix('.')?.strip_suffix(".tmp")?;
    let mut parts = rest.split('.');
    let ok = parts.next().is_some_and(is_key)
        && parts.next().is_some_and(|p| p.parse::<u32>().is_ok())
        && parts.next().is_some_and(|n| n.parse::<u64>().is_ok())
        && parts.next().is_none();
    ok.then_some(FileKind::Temp)
}

/// What the entry file `<name>.tmajit` holds: a key it is not named by (a renamed or copied
/// file, never loaded) is corrupt, as the loader sees it.
fn state_of(bytes: &[u8], name: &str) -> EntryState {
    match decode(bytes) {
        Ok(d) => match (CacheKey::parse(d.key), EntryInfo::parse(d.info)) {
            (Some(key), Some(info)) if key.hex() == name => EntryState::Valid {
                key,
                info,
                ptx_bytes: d.ptx.len(),
                cubin_bytes: d.cubin.len(),
            },
            _ => EntryState::Corrupt,
        },
        Err(Some(format)) => EntryState::OtherFormat(format),
        Err(None) => EntryState::Corrupt,
    }
}

/// An entry's parts, borrowed from its bytes.
struct Decoded<'a> {
    key: &'a str,
    info: &'a str,
    ptx: &'a [u8],
    cubin: &'a [u8],
    log: &'a [u8],
}

/// `MAGIC`, the XXH3-128 of the payload, and the payload: key text, info text, PTX, CUBIN and
/// log, each after its length (u64, little-endian).
fn encode(key: &CacheKey, info: &EntryInfo, ptx: &str, cubin: &[u8], log: &str) -> Vec<u8> {
    let (key, info) = (key.text(), info.text());
    let parts = [
        key.as_bytes(),
        info.as_bytes(),
        ptx.as_bytes(),
        cubin,
        log.as_bytes(),
    ];
    let mut payload = Vec::with_capacity(parts.iter().map(|p| p.len() + 8).sum());
    for part in parts {
        payload.extend_from_slice(&(part.len() as u64).to_le_bytes());
        payload.extend_from_slice(part);
    }
    let mut out = Vec::with_capacity(payload.len() + 24);
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&fingerprint(&payload).to_le_bytes());
    out.extend_from_slice(&payload);
    out
}

/// The parts of an entry of this format; `Err(Some(f))` for an entry of format `f`, `Err(None)`
/// for anything else that is not a whole, intact entry.
fn decode(bytes: &[u8]) -> Result<Decoded<'_>, Option<u8>> {
    let Some(rest) = bytes.strip_prefix(MAGIC.as_slice()) else {
        let other = bytes
            .strip_prefix(MAGIC_STEM)
            .and_then(|r| r.first().copied());
        return Err(other);
    };
    let (sum, payload) = rest.split_at_checked(16).ok_or(None)?;
    let mut s = [0u8; 16];
    s.copy_from_slice(sum);
    if u128::from_le_bytes(s) != fingerprint(payload) {
        return Err(None);
    }
    let mut parts: Vec<&[u8]> = Vec::with_capacity(5);
    let mut p = payload;
    for _ in 0..5 {
        let (len, rest) = p.split_at_checked(8).ok_or(None)?;
        let mut l = [0u8; 8];
        l.copy_from_slice(len);
        let len = usize::try_from(u64::from_le_bytes(l)).map_err(|_| None)?;
        let (part, rest) = rest.split_at_checked(len).ok_or(None)?;
        parts.push(part);
        p = rest;
    }
    if !p.is_empty() {
        return Err(None);
    }
    fn text(b: &[u8]) -> Result<&str, Option<u8>> {
        std::str::from_utf8(b).map_err(|_| None)
    }
    Ok(Decoded {
        key: text(parts[0])?,
        info: text(parts[1])?,
        ptx: parts[2],
        cubin: parts[3],
        log: parts[4],
    })
}

#[cfg(test)]
#[allow(clippy::panic)]
mod tests {
    use super::*;

    fn temp_dir(tag: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!(
            "tma-runtime-test-{tag}-{}-{}",
            std::process::id(),
            TMP_COUNTER.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&d);
        d
    }

    fn key(source: u128) -> CacheKey {
        CacheKey::new(
            (13, 0),
            source,
            vec!["--gpu-architecture=sm_90a".into(), "-DX=1".into()],
        )
    }

    fn info() -> EntryInfo {
        EntryInfo {
            arch: "sm_90a".into(),
            kernels: vec!["k".into(), "copy".into()],
            created: 1_700_000_000,
        }
    }

    fn outputs(e: Option<Entry>) -> Option<(String, Vec<u8>, String)> {
        e.map(|e| (e.ptx, e.cubin, e.log))
    }

    #[test]
    fn disk_round_trip_and_corrupt_entries_are_ignored() {
        let cache = DiskCache::new(temp_dir("corrupt"));
        let k = key(7);
        assert_eq!(cache.load(&k), None);
        cache.store(&k, &info(), "ptx text", &[1, 2, 3], "log");
        let e = cache.load(&k);
        assert_eq!(e.as_ref().map(|e| &e.info), Some(&info()));
        assert_eq!(
            outputs(e),
            Some(("ptx text".into(), vec![1, 2, 3], "log".into()))
        );
        let path = cache.path(&k.hex());
        let mut bytes = std::fs::read(&path).unwrap_or_default();
        // An entry of an older format (its header's last byte) is not read, checksum or not.
        let mut old = bytes.clone();
        old[MAGIC.len() - 1] = 2;
        let _ = std::fs::write(&path, &old);
        assert_eq!(cache.load(&k), None, "a format-2 entry must not be read");
        let last = bytes.len() - 1;
        bytes[last] ^= 0x40;
        let _ = std::fs::write(&path, &bytes);
        assert_eq!(cache.load(&k), None, "flipped bit must be caught");
        let _ = std::fs::write(&path, b"garbage");
        assert_eq!(cache.load(&k), None);
        // Truncated anywhere: never read.
        cache.store(&k, &info(), "ptx text", &[1, 2, 3], "log");
        let whole = std::fs::read(&path).unwrap_or_default();
        for cut in [0, 7, 8, 23, 24, 40, whole.len() / 2, whole.len() - 1] {
            let _ = std::fs::write(&path, &whole[..cut]);
            assert_eq!(cache.load(&k), None, "truncated to {cut} bytes");
        }
        cache.store(&k, &info(), "new", &[], "");
        assert_eq!(
            outputs(cache.load(&k)),
            Some(("new".into(), vec![], String::new()))
        );
        let _ = std::fs::remove_dir_all(cache.dir());
    }

    #[test]
    fn an_entry_under_another_key_is_never_returned() {
        let cache = DiskCache::new(temp_dir("renamed"));
        let (a, b) = (key(1), key(2));
        cache.store(&a, &info(), "a's ptx", &[0xa], "");
        // A's file under B's name (a copy, a rename, a fingerprint collision): whole and
        // checksummed, but its key text is A's.
        let _ = std::fs::copy(cache.path(&a.hex()), cache.path(&b.hex()));
        assert_eq!(cache.load(&b), None);
        assert!(cache.load(&a).is_some());
        // And `tma cache list` says so: the copy is corrupt (prune removes it), A's is valid.
        let states: Vec<(String, bool)> = cache
            .entries()
            .unwrap_or_default()
            .into_iter()
            .map(|e| {
                let name = e.path.file_stem().map(|s| s.to_string_lossy().into_owned());
                (name.unwrap_or_default(), e.state == EntryState::Corrupt)
            })
            .collect();
        assert!(states.contains(&(a.hex(), false)), "{states:?}");
        assert!(states.contains(&(b.hex(), true)), "{states:?}");
        // Each part of the key: a key that differs in it misses A's entry, even at A's path.
        let mut variants = Vec::new();
        let mut v = a.clone();
        v.tma_version = "9.9.9".into();
        variants.push(v);
        let mut v = a.clone();
        v.format = 2;
        variants.push(v);
        let mut v = a.clone();
        v.nvrtc = (12, 8);
        variants.push(v);
        let mut v = a.clone();
        v.args[0] = "--gpu-architecture=sm_100a".into();
        variants.push(v);
        let mut v = a.clone();
        v.args[1] = "-DX=2".into();
        variants.push(v);
        for v in variants {
            assert_eq!(cache.load(&v), None, "{v:?}");
            let _ = std::fs::copy(cache.path(&a.hex()), cache.path(&v.hex()));
            assert_eq!(cache.load(&v), None, "A's file under {v:?}'s name");
        }
        let _ = std::fs::remove_dir_all(cache.dir());
    }

    #[test]
    fn concurrent_writers_leave_a_whole_entry() {
        let dir = temp_dir("concurrent");
        let cubin: Vec<u8> = (0..200_000u32).map(|i| i as u8).collect();
        let k = key(3);
        std::thread::scope(|s| {
            for t in 0..8 {
                let (dir, cubin, k) = (dir.clone(), &cubin, &k);
                s.spawn(move || {
                    let cache = DiskCache::new(dir);
                    for _ in 0..10 {
                        cache.store(k, &info(), "ptx", cubin, "log");
                        if let Some(e) = cache.load(k) {
                            assert_eq!(e.cubin.len(), cubin.len(), "thread {t} read a torn entry");
                        }
                    }
                });
            }
        });
        let cache = DiskCache::new(dir.clone());
        assert_eq!(cache.load(&k).map(|e| e.cubin), Some(cubin));
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
        cache.store(&key(1), &info(), "p", &[], "");
        assert_eq!(cache.load(&key(1)), None);
        assert!(matches!(cache.entries(), Err(Error::CacheIo { .. })));
        let _ = std::fs::remove_file(&f);
    }

    #[test]
    fn entries_list_clear_and_prune() {
        let dir = temp_dir("manage");
        let cache = DiskCache::new(dir.clone());
        assert_eq!(
            cache.entries().map(|e| e.len()).ok(),
            Some(0),
            "no directory: empty"
        );
        for s in 1..=4u128 {
            cache.store(&key(s), &info(), "ptx", &vec![0u8; 1000 * s as usize], "");
        }
        // Not the cache's: other files stay, whatever their names.
        let foreign = ["notes.txt", "abc.tmajit", ".x.tmp"];
        for f in foreign {
            let _ = std::fs::write(dir.join(f), b"keep");
        }
        // Another format's entry, a corrupt one, a crashed writer's temp file.
        let other = dir.join(format!("{:032x}.tmajit", 0xaa));
        let _ = std::fs::write(&other, b"TMAJIT\x00\x02rest");
        let corrupt = dir.join(format!("{:032x}.tmajit", 0xbb));
        let _ = std::fs::write(&corrupt, b"TMAJIT\x00\x03short");
        let temp = dir.join(format!(".{:032x}.12.0.tmp", 0xcc));
        let _ = std::fs::write(&temp, b"half");

        let listed = cache.entries().unwrap_or_default();
        assert_eq!(listed.len(), 6, "{listed:?}");
        let valid: Vec<&CacheEntry> = listed
            .iter()
            .filter(|e| matches!(e.state, EntryState::Valid { .. }))
            .collect();
        assert_eq!(valid.len(), 4);
        let two = listed
            .iter()
            .find(|e| e.path == cache.path(&key(2).hex()))
            .map(|e| &e.state);
        match two {
            Some(EntryState::Valid {
                key: k,
                info: i,
                cubin_bytes,
                ptx_bytes,
            }) => assert_eq!(
                (k, i, *cubin_bytes, *ptx_bytes),
                (&key(2), &info(), 2000, 3)
            ),
            other => panic!("{other:?}"),
        }
        let state = |p: &Path| listed.iter().find(|e| e.path == p).map(|e| e.state.clone());
        assert_eq!(state(&other), Some(EntryState::OtherFormat(2)));
        assert_eq!(state(&corrupt), Some(EntryState::Corrupt));

        // Prune without limits: only the corrupt entry goes (the temp file is fresh).
        let r = cache.prune(None, None);
        assert_eq!(r.map(|r| r.entries).ok(), Some(1));
        assert!(!corrupt.exists() && other.exists() && temp.exists());
        // Entries written 10 minutes ago are older than 5 minutes; the others are not.
        let ten_min_ago = SystemTime::now() - Duration::from_secs(600);
        for s in [1u128, 2] {
            let f = std::fs::File::options()
                .write(true)
                .open(cache.path(&key(s).hex()));
            assert!(f.and_then(|f| f.set_modified(ten_min_ago)).is_ok());
        }
        let r = cache.prune(Some(Duration::from_secs(300)), None);
        assert_eq!(r.map(|r| r.entries).ok(), Some(2));
        assert!(cache.load(&key(1)).is_none() && cache.load(&key(3)).is_some());
        // At most 5000 B: entries 3 (3000 B + header) and 4 (4000 B + header) and the
        // other-format one (12 B) are more; the oldest go first (other, then 3).
        let f = std::fs::File::options().write(true).open(&other);
        assert!(f.and_then(|f| f.set_modified(ten_min_ago)).is_ok());
        let f = std::fs::File::options()
            .write(true)
            .open(cache.path(&key(3).hex()));
        assert!(f
            .and_then(|f| f.set_modified(SystemTime::now() - Duration::from_secs(60)))
            .is_ok());
        let r = cache.prune(None, Some(5000));
        assert_eq!(
            r.map(|r| r.entries).ok(),
            Some(2),
            "the other-format entry, then key 3"
        );
        assert!(cache.load(&key(4)).is_some() && cache.load(&key(3)).is_none());
        assert!(!other.exists());

        let r = cache.clear();
        assert_eq!(
            r.map(|r| r.entries).ok(),
            Some(2),
            "key 4 and the temp file"
        );
        assert_eq!(cache.entries().map(|e| e.len()).ok(), Some(0));
        for f in foreign {
            assert!(dir.join(f).exists(), "{f} is not the cache's");
        }
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn file_names() {
        let k = format!("{:032x}", 0xabcd);
        assert_eq!(file_kind(&format!("{k}.tmajit")), Some(FileKind::Entry));
        assert_eq!(file_kind(&format!(".{k}.77.3.tmp")), Some(FileKind::Temp));
        for not in [
            "x.tmajit".to_string(),
            format!("{}.tmajit", k.to_uppercase()),
            format!("{k}.tmajit.bak"),
            format!(".{k}.77.tmp"),
            format!(".{k}.a.3.tmp"),
            format!("{k}.77.3.tmp"),
            ".tmp".into(),
        ] {
            assert_eq!(file_kind(&not), None, "{not}");
        }
    }
}
