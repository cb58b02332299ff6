//! The on-disk cache: one content-addressed, checksummed file per compile.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use super::hash::fingerprint;

/// The file header; its last byte is the entry format: 2 since the checksum is XXH3-128
/// (an entry of format 1 is never read as a valid one, whatever its name).
const MAGIC: &[u8; 8] = b"TMAJIT\x00\x02";

/// Content-addressed files of compiled outputs. Written to a temp file then renamed, so
/// concurrent processes never see half a file; unreadable or corrupt entries are ignored
/// (and rebuilt); failed writes are reported on stderr, never returned.
#[derive(Clone, Debug)]
pub struct DiskCache {
    dir: PathBuf,
}

static TMP_COUNTER: AtomicU64 = AtomicU64::new(0);

impl DiskCache {
    /// The cache in `dir` (created at the first store).
    pub fn new(dir: PathBuf) -> DiskCache {
        DiskCache { dir }
    }
    /// The directory holding the entries.
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
        // An entry of an older format (its header's last byte) is not read, checksum or not.
        let mut old = bytes.clone();
        old[MAGIC.len() - 1] = 1;
        let _ = std::fs::write(cache.path("k"), &old);
        assert_eq!(cache.load("k"), None, "a format-1 entry must not be read");
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
