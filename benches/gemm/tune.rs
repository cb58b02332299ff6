//! The autotune cache: the best configuration per (device, shape, input, output), one line
//! each in `gemm-tune.txt` of the runtime's cache directory (TMA_CACHE_DIR), written by each
//! run of the benchmark and read by the next (GEMM_BENCH_TUNED=1 skips the sweep for a shape
//! it holds). Lines: `device|MxNxK|in|out|config|TFLOP/s|ratio to cuBLAS`.

use std::collections::BTreeMap;
use std::path::PathBuf;

use crate::kernel::{Config, In, Out};

pub struct TuneCache {
    path: Option<PathBuf>,
    entries: BTreeMap<String, (Config, f64, f64)>,
}

fn key(device: &str, shape: (usize, usize, usize), input: In, out: Out) -> String {
    format!(
        "{}|{}x{}x{}|{}|{}",
        device.replace('|', "/"),
        shape.0,
        shape.1,
        shape.2,
        input.name(),
        out.name()
    )
}

impl TuneCache {
    /// The cache in `dir` (none: nothing is kept).
    pub fn open(dir: Option<PathBuf>) -> TuneCache {
        let path = dir.map(|d| d.join("gemm-tune.txt"));
        let mut entries = BTreeMap::new();
        if let Some(text) = path.as_ref().and_then(|p| std::fs::read_to_string(p).ok()) {
            for line in text.lines() {
                let f: Vec<&str> = line.split('|').collect();
                if f.len() != 7 {
                    continue;
                }
                let (Some(c), Ok(t), Ok(r)) = (Config::parse(f[4]), f[5].parse(), f[6].parse())
                else {
                    continue;
                };
                entries.insert(f[..4].join("|"), (c, t, r));
            }
        }
        TuneCache { path, entries }
    }
    pub fn path(&self) -> Option<&PathBuf> {
        self.path.as_ref()
    }
    pub fn get(
        &self,
        device: &str,
        shape: (usize, usize, usize),
        input: In,
        out: Out,
    ) -> Option<(Config, f64, f64)> {
        self.entries.get(&key(device, shape, input, out)).copied()
    }
    /// Records and writes the file (temp file + rename; a failure is a warning).
    pub fn put(
        &mut self,
        device: &str,
        shape: (usize, usize, usize),
        input: In,
        out: Out,
        best: (Config, f64, f64),
    ) {
        self.entries.insert(key(device, shape, input, out), best);
        let Some(path) = &self.path else { return };
        let text: String = self
            .entries
            .iter()
            .map(|(k, (c, t, r))| format!("{k}|{c}|{t:.1}|{r:.4}\n"))
            .collect();
        let tmp = path.with_extension(format!("tmp{}", std::process::id()));
        let res = path
            .parent()
            .map_or(Ok(()), std::fs::create_dir_all)
            .and_then(|_| std::fs::write(&tmp, text))
            .and_then(|_| std::fs::rename(&tmp, path));
        if let Err(e) = res {
            eprintln!("warning: could not write {}: {e}", path.display());
        }
    }
}
