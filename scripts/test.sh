#!/usr/bin/env bash
# Runs every test of the workspace. Installs the pinned NVRTC 13.0 / ptxas / cuobjdump
# wheels into .cache/ first (a few seconds, once), so generated CUDA is compiled for real.
# GPU tests skip with a printed reason on machines without a GPU (TMA_REQUIRE_GPU=1 makes
# them fail instead); NVRTC tests never skip when CI=true or TMA_REQUIRE_NVRTC=1.
set -euo pipefail
cd "$(dirname "$0")/.."
eval "$(scripts/cuda-tools.sh)"
export TMA_CACHE_DIR="${TMA_CACHE_DIR:-$PWD/target/tma-cache}"
cargo test --workspace --all-targets "$@"
cargo test --workspace --doc "$@"
