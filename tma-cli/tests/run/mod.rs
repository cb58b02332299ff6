//! Running the `tma` binary from a test, as a shell user runs it (shared by the CLI tests).

use std::path::PathBuf;
use std::process::Command;

/// What a run printed and how it exited.
pub struct Run {
    pub stdout: String,
    pub stderr: String,
    pub code: i32,
}

/// `tma <args>`, run from the crate directory.
pub fn tma(args: &[&str]) -> Run {
    let out = Command::new(env!("CARGO_BIN_EXE_tma"))
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .unwrap_or_else(|e| panic!("running tma: {e}"));
    Run {
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        code: out.status.code().unwrap_or(-1),
    }
}

/// A path for file `name` in this test process's scratch directory (made on first use).
#[allow(dead_code)] // not every test file writes files
pub fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("tma-cli-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    dir.join(name)
}
