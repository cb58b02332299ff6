#!/usr/bin/env bash
# Runs the interleave probe (tests/gpu_interleave_probe.rs) on a GPU machine. A case that
# faults ends its process (a sticky CUDA error); this starts the next process at the case
# after it. Output under $OUT: interleave_raw.txt (one line per case) and probe.log.
#   bash tests/gpu/run-interleave-probe.sh [gpu-bundle/bin/test-gpu_interleave_probe]
set -uo pipefail
bin="${1:-gpu-bundle/bin/test-gpu_interleave_probe}"
out="${OUT:-$PWD}"
mkdir -p "$out"
export OUT="$out" TMA_REQUIRE_GPU=1 TMA_CACHE_DIR="${TMA_CACHE_DIR:-/tmp/tma-cache}"
for cand in /usr/local/cuda/lib64/libnvrtc.so.13 /usr/local/cuda/targets/x86_64-linux/lib/libnvrtc.so.13; do
  [ -e "$cand" ] && { export TMA_NVRTC_PATH="${TMA_NVRTC_PATH:-$cand}"; break; }
done
rm -f "$out/interleave_raw.txt" "$out/probe_next"
from=0
for attempt in $(seq 1 100); do
  PROBE_FROM=$from "$bin" --ignored --exact probe_interleaved_layouts --nocapture >> "$out/probe.log" 2>&1
  rc=$?
  next="$(cat "$out/probe_next" 2>/dev/null || echo done)"
  echo "process $attempt from $from: rc=$rc next=$next" | tee -a "$out/probe.log"
  [ "$rc" -eq 42 ] && [ "$next" != done ] || break
  from=$next
done
echo "cases: $(wc -l < "$out/interleave_raw.txt"); faults: $(grep -c '^F ' "$out/interleave_raw.txt"); encode errors: $(grep -c '^E ' "$out/interleave_raw.txt")"
