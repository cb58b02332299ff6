#!/usr/bin/env bash
# On the GPU machine: every packed GPU test and example of gpu-bundle-packed/bundle.txz
# (built here by scripts/gpu-bundle.sh), then each benchmark twice back to back: the bundle's
# ("new") and one built from another commit ("base": bench binaries in $BASE_BIN, e.g. copied
# from `cargo bench --no-run` of a worktree at that commit). Logs go to $OUT/logs.tgz; the
# summary lines are printed last. With the device tool:
#   run(command="bash scripts/gpu-compare.sh", carry=["gpu-bundle-packed", ".base-bin"])
set -uo pipefail
out="${OUT:-$PWD/gpu-compare-logs}"; mkdir -p "$out"
repo="$(pwd)"; base="${BASE_BIN:-$repo/.base-bin}"
tar -xJf gpu-bundle-packed/bundle.txz -C /tmp || exit 1
logs=/tmp/logs; mkdir -p "$logs"
cd /tmp/gpu-bundle
OUT=$logs timeout "${T_TESTS:-300}" bash run.sh test- > "$out/summary.txt" 2>&1
OUT=$logs timeout "${T_EX:-120}" bash run.sh example- >> "$out/summary.txt" 2>&1
cd bin
export TMA_REQUIRE_GPU=1 TMA_CACHE_DIR=/tmp/tma-cache
export TMA_NVRTC_PATH="${TMA_NVRTC_PATH:-/usr/local/cuda/lib64/libnvrtc.so.13}"
for b in ${BENCHES:-tile_copy jit msda gemm}; do
  for v in new base; do
    if [ "$v" = new ]; then x="./bench-$b"; else x="$base/bench-$b"; fi
    [ -x "$x" ] || { echo "##### $b $v: no binary $x" >> "$logs/benches.txt"; continue; }
    echo "##### $b $v" >> "$logs/benches.txt"
    timeout 150 "$x" >> "$logs/benches.txt" 2>&1; echo "rc=$?" >> "$logs/benches.txt"
  done
done
tar -czf "$out/logs.tgz" -C /tmp logs
grep -E "^=== .* rc=" "$out/summary.txt" | grep -v "rc=0"
echo "$(grep -cE '^=== .* rc=0' "$out/summary.txt") binaries exited 0"
grep -E "^#####|^rc=|best:|MISSED|^\| L5|^\| [0-9]+x[0-9]+x[0-9]+ \|" "$logs/benches.txt" | head -80
