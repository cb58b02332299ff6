//! A JIT compiler for cache tests: release code, no dumps, its disk cache in a folder the
//! test owns (not the user's `TMA_CACHE_DIR`).
#![allow(clippy::panic)] // a test whose compiler cannot start must fail loudly

use std::path::Path;

use tma_runtime::{Compiler, JitConfig};

/// A compiler whose disk cache is `dir` (created when it compiles).
pub fn cache_compiler(dir: &Path) -> Compiler {
    Compiler::with_config(JitConfig {
        debug: false,
        dump_dir: None,
        cache: true,
        cache_dir: Some(dir.to_path_buf()),
    })
    .unwrap_or_else(|e| panic!("a compiler caching in {}: {e}", dir.display()))
}
