#!/usr/bin/env bash
# Installs NVRTC 13.0, ptxas 13.0 and cuobjdump/nvdisasm (disassemblers; 13.2, the oldest on PyPI) from NVIDIA's PyPI wheels into
# .cache/cuda-13.0 (pinned by hash; about 130 MB, a few seconds) when missing, and prints
# the environment that points tma at them. Usage: eval "$(scripts/cuda-tools.sh)".
# Pin 13.0: newer NVRTC emits PTX that the 13.0 driver and ptxas reject.
#
# --headers: also what an nvcc build of a generated header (tma::render::header) needs, all
# 13.0.88: cicc (nvidia-nvvm), cuda.h / cuda_runtime.h and the static runtime
# (nvidia-cuda-runtime), crt/ (nvidia-cuda-crt); about 70 MB more. nvcc finds the headers
# beside itself; LIBRARY_PATH (printed) finds the runtime for the link:
#   eval "$(scripts/cuda-tools.sh --headers)"; nvcc -arch=sm_90a -std=c++20 -o k k.cu
# Once installed they stay (a later run without --headers keeps and exports them).
set -euo pipefail
headers=0
for arg in "$@"; do
  case "$arg" in
    --headers) headers=1 ;;
    *) echo "usage: $0 [--headers]" >&2; exit 2 ;;
  esac
done
root="$(cd "$(dirname "$0")/.." && pwd)"
dest="${TMA_CUDA_TOOLS:-$root/.cache/cuda-13.0}"
lib="$dest/nvidia/cu13/lib"
bin="$dest/nvidia/cu13/bin"
inc="$dest/nvidia/cu13/include"
have_tools() {
  [ -e "$lib/libnvrtc.so.13" ] && [ -x "$bin/ptxas" ] && [ -x "$bin/cuobjdump" ] && [ -x "$bin/nvdisasm" ]
}
have_headers() {
  [ -e "$inc/cuda.h" ] && [ -e "$inc/cuda_runtime.h" ] && [ -e "$inc/crt/host_config.h" ] \
    && [ -x "$dest/nvidia/cu13/nvvm/bin/cicc" ] && [ -e "$lib/libcudart_static.a" ]
}
# pip --target replaces nvidia/ whole: install everything wanted in one call, and keep the
# headers of an earlier --headers run.
if [ -e "$inc/cuda_runtime.h" ]; then headers=1; fi
if ! have_tools || { [ "$headers" = 1 ] && ! have_headers; }; then
  mkdir -p "$dest"
  req="$dest/requirements.txt"
  cat > "$req" <<'REQ'
nvidia-cuda-nvrtc==13.0.88 --hash=sha256:ad9b6d2ead2435f11cbb6868809d2adeeee302e9bb94bcf0539c7a40d80e8575
nvidia-cuda-nvcc==13.0.88 --hash=sha256:56fe502eb77625a12f25172caa3cdddb4e4c8ba2c8c17dba44b164761b380f03
nvidia-cuda-cuobjdump==13.2.86 --hash=sha256:d332c2ffe78e703ca0a3894be927f83124244e2acf0d792b8c12b4362d44d837
nvidia-cuda-nvdisasm==13.2.86 --hash=sha256:53606e719ecae07a2335f95902d5a1393a0cc1c317499ee7ffcf628a44385f2c
REQ
  if [ "$headers" = 1 ]; then
    cat >> "$req" <<'REQ'
nvidia-nvvm==13.0.88 --hash=sha256:c5f41ffeb6466944a026dfa5317d7d85355c119bbec279205d22f1869d1054e0
nvidia-cuda-runtime==13.0.88 --hash=sha256:422a38f7c739ecbdd3a4b6ec7ed0a1d74db43d8e9bc26685f3d845638922b178
nvidia-cuda-crt==13.0.88 --hash=sha256:2c8043c7c9e02492716426e9919fc78d2c5b3b2a7a768a88e952676b08aa55a4
REQ
  fi
  python3 -m pip install --quiet --disable-pip-version-check --no-deps --only-binary=:all: \
    --require-hashes --upgrade --target "$dest" -r "$req" >&2
fi
echo "export TMA_NVRTC_PATH='$lib/libnvrtc.so.13'"
echo "export LD_LIBRARY_PATH='$lib'\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}"
echo "export PATH='$bin':\$PATH"
if [ "$headers" = 1 ]; then
  echo "export LIBRARY_PATH='$lib'\${LIBRARY_PATH:+:\$LIBRARY_PATH}"
fi
