#!/usr/bin/env bash
# Installs NVRTC 13.0, ptxas 13.0 and cuobjdump/nvdisasm (disassemblers; 13.2, the oldest on PyPI) from NVIDIA's PyPI wheels into
# .cache/cuda-13.0 (pinned by hash; about 130 MB, a few seconds) when missing, and prints
# the environment that points tma at them. Usage: eval "$(scripts/cuda-tools.sh)".
# Pin 13.0: newer NVRTC emits PTX that the 13.0 driver and ptxas reject.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
dest="${TMA_CUDA_TOOLS:-$root/.cache/cuda-13.0}"
lib="$dest/nvidia/cu13/lib"
bin="$dest/nvidia/cu13/bin"
if [ ! -e "$lib/libnvrtc.so.13" ] || [ ! -x "$bin/ptxas" ] || [ ! -x "$bin/cuobjdump" ] || [ ! -x "$bin/nvdisasm" ]; then
  mkdir -p "$dest"
  req="$dest/requirements.txt"
  cat > "$req" <<'REQ'
nvidia-cuda-nvrtc==13.0.88 --hash=sha256:ad9b6d2ead2435f11cbb6868809d2adeeee302e9bb94bcf0539c7a40d80e8575
nvidia-cuda-nvcc==13.0.88 --hash=sha256:56fe502eb77625a12f25172caa3cdddb4e4c8ba2c8c17dba44b164761b380f03
nvidia-cuda-cuobjdump==13.2.86 --hash=sha256:d332c2ffe78e703ca0a3894be927f83124244e2acf0d792b8c12b4362d44d837
nvidia-cuda-nvdisasm==13.2.86 --hash=sha256:53606e719ecae07a2335f95902d5a1393a0cc1c317499ee7ffcf628a44385f2c
REQ
  python3 -m pip install --quiet --disable-pip-version-check --no-deps --only-binary=:all: \
    --require-hashes --upgrade --target "$dest" -r "$req" >&2
fi
echo "export TMA_NVRTC_PATH='$lib/libnvrtc.so.13'"
echo "export LD_LIBRARY_PATH='$lib'\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}"
echo "export PATH='$bin':\$PATH"
