#!/usr/bin/env bash
# The main job: the quickstart example. Validates the seed tiles, prints their layouts and
# a swizzled-tile picture from the CPU model, renders the CUDA helpers and compiles them
# with NVRTC 13.0 (installed into .cache/ on first use). On a GPU it also runs the kernel
# and checks it bit for bit against the model.
set -euo pipefail
cd "$(dirname "$0")/.."
eval "$(scripts/cuda-tools.sh)"
cargo run --release --example 01-quickstart "$@"
