#!/usr/bin/env bash
# Runs every check of the workspace, cheapest first, and stops at the first failure:
# formatting, clippy (warnings are errors), docs (warnings are errors), packaging
# (scripts/check-package.sh), then every test. Installs the pinned NVRTC 13.0 / ptxas /
# cuobjdump wheels and the CUDA headers nvcc needs into .cache/ first (a few seconds, once),
# so generated CUDA is compiled for real, by NVRTC and, as a header, by nvcc. GPU tests skip with a printed reason on machines without a GPU
# (TMA_REQUIRE_GPU=1 makes them fail instead); NVRTC tests never skip when CI=true or
# TMA_REQUIRE_NVRTC=1. Arguments go to both `cargo test` runs; the tests run last, so the
# output ends with their summary lines.
set -euo pipefail
cd "$(dirname "$0")/.."
eval "$(scripts/cuda-tools.sh --headers)"
export TMA_CACHE_DIR="${TMA_CACHE_DIR:-$PWD/target/tma-cache}"
step() { echo "==> [${SECONDS}s] $*" >&2; }

step "cargo fmt --all --check"
cargo fmt --all --check
step "cargo clippy --workspace --all-targets -- -D warnings"
cargo clippy --workspace --all-targets -- -D warnings
step "cargo doc --workspace --no-deps (RUSTDOCFLAGS=-D warnings)"
RUSTDOCFLAGS="-D warnings" cargo doc --workspace --no-deps
step "scripts/check-package.sh"
scripts/check-package.sh
step "cargo test --workspace --all-targets $*"
cargo test --workspace --all-targets "$@"
step "cargo test --workspace --doc $*"
cargo test --workspace --doc "$@"
