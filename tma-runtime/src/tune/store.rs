//! The tune cache: one JSON file per (key, device) in `<cache dir>/tune/`, holding the pick,
//! the builds it was chosen among and the report. Written to a temp file and renamed (a
//! reader never sees half a file); a failed write is a warning on stderr, never an error.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use xxhash_rust::xxh3::xxh3_128;

use super::key::{TuneDevice, TuneKey};
use super::report::{CacheUse, TuneReport};
use crate::compile::{read_file, write_atomic};

/// Bump when the entry's meaning changes: older entries are then stale, never misread.
const FORMAT: u32 = 1;

/// A candidate's name and its build: [`crate::Compiler::cache_key`] of its source and
/// options (`None`: its source did not render).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub(crate) struct Build {
    pub name: String,
    pub key: Option<String>,
}

#[derive(Serialize, Deserialize)]
struct Entry {
    format: u32,
    key: TuneKey,
    device: TuneDevice,
    /// Sorted by name.
    builds: Vec<Build>,
    pick: String,
    report: TuneReport,
}

/// The directory of entries.
#[derive(Clone, Debug)]
pub(crate) struct TuneStore {
    dir: PathBuf,
}

/// What a lookup found: the pick's row in `builds` and its report, or why not.
pub(crate) type Lookup = Result<(usize, TuneReport), CacheUse>;

impl TuneStore {
    pub fn new(dir: PathBuf) -> TuneStore {
        TuneStore { dir }
    }

    /// The entry's file: the kernel's name (file-safe) and a hash of key and device.
    pub fn path(&self, key: &TuneKey, device: &TuneDevice) -> PathBuf {
        let id = serde_json::to_string(&(key, device)).unwrap_or_default();
        let stem: String = key
            .kernel()
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                    c
                } else {
                    '_'
                }
            })
            .take(40)
            .collect();
        self.dir
            .join(format!("{stem}-{:032x}.json", xxh3_128(id.as_bytes())))
    }

    /// The pick for `key` on `device` among `builds` (in the caller's order), when an entry
    /// was tuned over exactly these builds.
    pub fn load(&self, key: &TuneKey, device: &TuneDevice, builds: &[Build]) -> Lookup {
        let path = self.path(key, device);
        let text = read_file(&path).and_then(|bytes| {
            String::from_utf8(bytes)
                .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))
        });
        let text = match text {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Err(CacheUse::Missing),
            Err(e) => {
                return Err(CacheUse::Unreadable {
                    reason: e.to_string(),
                })
            }
        };
        let entry: Entry = serde_json::from_str(&text).map_err(|e| CacheUse::Unreadable {
            reason: format!("{}: {e}", path.display()),
        })?;
        if entry.format != FORMAT || entry.key != *key || entry.device != *device {
            // An older format, or another key under the same hash: not this key's entry.
            return Err(CacheUse::Missing);
        }
        let changed = changed(&entry.builds, builds);
        if !changed.is_empty() {
            return Err(CacheUse::Stale { changed });
        }
        let pick = builds
            .iter()
            .position(|b| b.name == entry.pick)
            .ok_or_else(|| CacheUse::Stale {
                changed: vec![entry.pick.clone()],
            })?;
        let mut report = entry.report;
        // The report's rows follow the caller's order, whatever order it was tuned in.
        let mut rows = Vec::with_capacity(builds.len());
        for b in builds {
            match report.rows.iter().find(|r| r.name == b.name) {
                Some(r) => rows.push(r.clone()),
                None => {
                    return Err(CacheUse::Stale {
                        changed: vec![b.name.clone()],
                    })
                }
            }
        }
        report.rows = rows;
        report.pick = pick;
        report.cache = CacheUse::Hit { path };
        Ok((pick, report))
    }

    /// Keeps `report`'s pick for its key and device, tuned among `builds`.
    pub fn save(&self, builds: &[Build], report: &TuneReport) {
        let path = self.path(&report.key, &report.device);
        let mut sorted = builds.to_vec();
        sorted.sort();
        let entry = Entry {
            format: FORMAT,
            key: report.key.clone(),
            device: report.device.clone(),
            builds: sorted,
            pick: report.pick_name().to_string(),
            report: report.clone(),
        };
        let res = serde_json::to_vec_pretty(&entry)
            .map_err(std::io::Error::other)
            .and_then(|bytes| write_atomic(&path, &bytes));
        if let Err(e) = res {
            eprintln!(
                "tma tune: warning: could not write {}: {e} (the pick is not kept)",
                path.display()
            );
        }
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }
}

/// Names whose build differs between `stored` and `now`, or that only one holds.
fn changed(stored: &[Build], now: &[Build]) -> Vec<String> {
    let mut names: Vec<String> = Vec::new();
    for b in now {
        if !stored.contains(b) {
            names.push(b.name.clone());
        }
    }
    for b in stored {
        if !now.iter().any(|n| n.name == b.name) {
            names.push(b.name.clone());
        }
    }
    names.sort();
    names.dedup();
    names
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::super::report::{Outcome, Row, Stage, Timing};
    use super::*;
    use std::sync::atomic::{AtomicU64, Ordering};

    static TMP_COUNTER: AtomicU64 = AtomicU64::new(0);

    fn temp_store(tag: &str) -> TuneStore {
        let d = std::env::temp_dir().join(format!(
            "tma-tune-test-{tag}-{}-{}",
            std::process::id(),
            TMP_COUNTER.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&d);
        TuneStore::new(d)
    }

    fn device() -> TuneDevice {
        TuneDevice {
            name: "NVIDIA H100 80GB HBM3".into(),
            compute_capability: (9, 0),
            driver_version: 13000,
        }
    }

    fn timed(median_us: f64) -> Outcome {
        Outcome::Timed(Timing {
            median_us,
            q25_us: median_us - 1.0,
            q75_us: median_us + 1.0,
            blocks: 3,
            reps: 5,
            launches: 1,
            graph_refused: None,
            dropped_after: None,
        })
    }

    fn builds(keys: &[(&str, &str)]) -> Vec<Build> {
        keys.iter()
            .map(|(n, k)| Build {
                name: n.to_string(),
                key: Some(k.to_string()),
            })
            .collect()
    }

    fn report(key: &TuneKey, b: &[Build], pick: usize) -> TuneReport {
        TuneReport {
            key: key.clone(),
            device: device(),
            rows: b
                .iter()
                .enumerate()
                .map(|(i, b)| Row {
                    name: b.name.clone(),
                    outcome: if i == 2 {
                        Outcome::Failed {
                            stage: Stage::Check,
                            message: "3 elements wrong".into(),
                        }
                    } else if i == 0 {
                        // A median the H100 gave that serde_json's fast float parser read
                        // back one ulp off (its `float_roundtrip` parser is exact).
                        timed(1.190_530_630_398_769_7)
                    } else {
                        timed(100.0 + 10.0 * i as f64)
                    },
                })
                .collect(),
            pick,
            separated: true,
            rounds: 3,
            seconds: 0.1,
            cache: CacheUse::Missing,
        }
    }

    #[test]
    fn a_pick_survives_the_round_trip_in_any_candidate_order() {
        let store = temp_store("roundtrip");
        let key = TuneKey::new("gemm", &[4096, 4096, 4096], &["bf16", "bf16"]).unwrap();
        let b = builds(&[("a", "k1"), ("b", "k2"), ("c", "k3")]);
        assert_eq!(
            store.load(&key, &device(), &b).unwrap_err(),
            CacheUse::Missing
        );
        let r = report(&key, &b, 1);
        store.save(&b, &r);
        // A new process: a new store over the same directory.
        let again = TuneStore::new(store.dir().to_path_buf());
        let (pick, got) = again.load(&key, &device(), &b).unwrap();
        assert_eq!((pick, got.pick_name()), (1, "b"));
        assert_eq!(got.rows, r.rows);
        assert_eq!(
            got.cache,
            CacheUse::Hit {
                path: store.path(&key, &device())
            }
        );
        // The same candidates listed in another order: the pick is found by name.
        let rev: Vec<Build> = b.iter().rev().cloned().collect();
        let (pick, got) = again.load(&key, &device(), &rev).unwrap();
        assert_eq!(
            (pick, got.pick_name(), got.rows[0].name.as_str()),
            (1, "b", "c")
        );
        let _ = std::fs::remove_dir_all(store.dir());
    }

    #[test]
    fn an_edited_added_or_removed_candidate_misses() {
        let store = temp_store("stale");
        let key = TuneKey::new("conv", &[64, 56, 56], &["f16"]).unwrap();
        let b = builds(&[("a", "k1"), ("b", "k2"), ("c", "k3")]);
        store.save(&b, &report(&key, &b, 0));
        let stale = |now: &[Build]| match store.load(&key, &device(), now) {
            Err(CacheUse::Stale { changed }) => changed,
            other => unreachable!("{other:?}"),
        };
        // b's source (so its build key) changed.
        assert_eq!(
            stale(&builds(&[("a", "k1"), ("b", "k2'"), ("c", "k3")])),
            ["b"]
        );
        assert_eq!(
            stale(&builds(&[
                ("a", "k1"),
                ("b", "k2"),
                ("c", "k3"),
                ("d", "k4")
            ])),
            ["d"]
        );
        assert_eq!(stale(&builds(&[("a", "k1"), ("b", "k2")])), ["c"]);
        assert!(store.load(&key, &device(), &b).is_ok());
        let _ = std::fs::remove_dir_all(store.dir());
    }

    #[test]
    fn another_shape_dtype_device_or_driver_never_gets_the_pick() {
        let store = temp_store("shape");
        let key = TuneKey::new("gemm", &[4096, 4096, 4096], &["bf16", "bf16"]).unwrap();
        let b = builds(&[("a", "k1"), ("b", "k2"), ("c", "k3")]);
        store.save(&b, &report(&key, &b, 1));
        let other_shape = TuneKey::new("gemm", &[4096, 4096, 1024], &["bf16", "bf16"]).unwrap();
        let other_type = TuneKey::new("gemm", &[4096, 4096, 4096], &["f16", "f16"]).unwrap();
        let other_extra = key.clone().with("group", 8).unwrap();
        for k in [&other_shape, &other_type, &other_extra] {
            assert_ne!(store.path(k, &device()), store.path(&key, &device()));
            assert_eq!(
                store.load(k, &device(), &b).unwrap_err(),
                CacheUse::Missing,
                "{k}"
            );
        }
        let driver = TuneDevice {
            driver_version: 13010,
            ..device()
        };
        let card = TuneDevice {
            name: "NVIDIA H200".into(),
            ..device()
        };
        for d in [driver, card] {
            assert_eq!(store.load(&key, &d, &b).unwrap_err(), CacheUse::Missing);
        }
        // An entry of another key found under this key's file (a hash collision, or a file
        // copied by hand) is not this key's.
        let _ = std::fs::copy(
            store.path(&key, &device()),
            store.path(&other_shape, &device()),
        );
        assert_eq!(
            store.load(&other_shape, &device(), &b).unwrap_err(),
            CacheUse::Missing
        );
        let _ = std::fs::remove_dir_all(store.dir());
    }

    #[test]
    fn unreadable_entries_and_failed_writes_are_not_errors() {
        let store = temp_store("unreadable");
        let key = TuneKey::new("attn", &[8, 1024, 128], &["bf16"]).unwrap();
        let b = builds(&[("a", "k1"), ("b", "k2"), ("c", "k3")]);
        let _ = std::fs::create_dir_all(store.dir());
        let _ = std::fs::write(store.path(&key, &device()), "{ not json");
        assert!(matches!(
            store.load(&key, &device(), &b),
            Err(CacheUse::Unreadable { .. })
        ));
        store.save(&b, &report(&key, &b, 0));
        assert!(store.load(&key, &device(), &b).is_ok());
        // A file where the directory should be: the write fails with a warning.
        let file = store.dir().join("not-a-dir");
        let _ = std::fs::write(&file, b"x");
        let blocked = TuneStore::new(file.join("tune"));
        blocked.save(&b, &report(&key, &b, 0));
        assert_eq!(
            blocked.load(&key, &device(), &b).unwrap_err(),
            CacheUse::Unreadable {
                reason: std::fs::read_to_string(file.join("tune").join("x"))
                    .unwrap_err()
                    .to_string(),
            }
        );
        let _ = std::fs::remove_dir_all(store.dir());
    }

    #[test]
    fn a_fifo_at_an_entry_is_unreadable_not_a_hang() {
        let store = temp_store("fifo");
        let key = TuneKey::new("attn", &[8, 1024, 128], &["bf16"]).unwrap();
        let b = builds(&[("a", "k1")]);
        let _ = std::fs::create_dir_all(store.dir());
        let made = std::process::Command::new("mkfifo")
            .arg(store.path(&key, &device()))
            .status();
        assert!(made.is_ok_and(|s| s.success()));
        let (tx, rx) = std::sync::mpsc::channel();
        let (s, k, bs) = (store.clone(), key.clone(), b.clone());
        std::thread::spawn(move || {
            let _ = tx.send(s.load(&k, &device(), &bs).map(|_| ()));
        });
        let got = rx.recv_timeout(std::time::Duration::from_secs(10));
        assert!(
            matches!(got, Ok(Err(CacheUse::Unreadable { .. }))),
            "{got:?}"
        );
        // Saving replaces it with a whole entry.
        store.save(&b, &report(&key, &b, 0));
        assert!(store.load(&key, &device(), &b).is_ok());
        let _ = std::fs::remove_dir_all(store.dir());
    }
}
