#!/usr/bin/env bash
# Builds the GPU test, example and benchmark binaries here (release, no GPU needed) and
# packs them with a runner into gpu-bundle/ (git-ignored), for a GPU machine that has the
# CUDA 13 driver but no Rust toolchain, and compresses that into gpu-bundle-packed/bundle.txz
# (xz: about 11 % of the size, 18 MB for 159 MB; gzip's 62 MB no longer left room under the
# device tool's 64 MB for the tree beside it):
#
#   scripts/gpu-bundle.sh                     # here: build and pack
#   bash gpu-bundle/run.sh [filter]           # there: run everything (or names matching filter)
#
# With the device tool: run(command="tar -xJf gpu-bundle-packed/bundle.txz -C /tmp &&
# bash /tmp/gpu-bundle/run.sh", carry=["gpu-bundle-packed"]).
# The runner sets TMA_REQUIRE_GPU=1, so a GPU test that cannot find the GPU fails rather
# than skips, and writes every log under $OUT (or gpu-bundle/logs).
set -euo pipefail
cd "$(dirname "$0")/.."
out=gpu-bundle
rm -rf "$out"
mkdir -p "$out/bin"

collect() { # reads cargo's JSON messages, copies the executables of the named kind
  python3 -c '
import json, sys, shutil, os
dest = sys.argv[1]
for line in sys.stdin:
    try:
        m = json.loads(line)
    except ValueError:
        continue
    exe = m.get("executable")
    if m.get("reason") != "compiler-artifact" or not exe:
        continue
    t = m["target"]
    kinds = t["kind"]
    name = t["name"]
    if "test" in kinds and name.startswith("gpu_"):
        prefix = "test-"
    elif "bench" in kinds:
        prefix = "bench-"
    elif "example" in kinds:
        prefix = "example-"
    else:
        continue  # unit tests of the libraries and non-GPU integration tests stay here
    shutil.copy(exe, os.path.join(dest, prefix + name))
    print("packed", prefix + name)
' "$out/bin"
}

# A build error must stop the bundle, not leave it silently short of binaries.
set -o pipefail
cargo test --release --workspace --no-run --message-format=json | collect
cargo build --release --examples --message-format=json | collect
cargo bench --no-run --message-format=json | collect
strip "$out"/bin/* 2>/dev/null || true

cat > "$out/run.sh" <<'RUN'
#!/usr/bin/env bash
# Runs every packed binary on a GPU machine; logs under $OUT (or gpu-bundle/logs).
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
logs="${OUT:-$here/logs}"
mkdir -p "$logs"
export TMA_REQUIRE_GPU=1 TMA_REQUIRE_NVRTC=1
for cand in /usr/local/cuda/lib64/libnvrtc.so.13 /usr/local/cuda/targets/x86_64-linux/lib/libnvrtc.so.13; do
  [ -e "$cand" ] && { export TMA_NVRTC_PATH="${TMA_NVRTC_PATH:-$cand}"; break; }
done
export TMA_CACHE_DIR="${TMA_CACHE_DIR:-/tmp/tma-cache}"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1 | tee "$logs/device.txt"
filter="${1:-}"
status=0
for bin in "$here"/bin/*; do
  name="$(basename "$bin")"
  [ -n "$filter" ] && [[ "$name" != *$filter* ]] && continue
  echo "=== $name"
  start=$(date +%s%N)
  if [[ "$name" == test-* ]]; then
    # One process per test: a sticky CUDA error (a trap, an illegal instruction) in one
    # test must not fail the others.
    rc=0
    : > "$logs/$name.log"
    for t in $("$bin" --list 2>/dev/null | sed -n 's/: test$//p'); do
      "$bin" --exact "$t" --test-threads=1 --nocapture >> "$logs/$name.log" 2>&1 || rc=$?
    done
  else
    "$bin" > "$logs/$name.log" 2>&1; rc=$?
  fi
  end=$(date +%s%N)
  grep -E "^(test |SKIP|MISMATCH|DISAGREEMENT|loads:|stores:|reduce-add:|validator vs|rejections by|driver rejections|thread .* panicked|FAILED|  [0-9]+/)" "$logs/$name.log" | tail -n 40
  echo "=== $name rc=$rc ($(( (end - start) / 1000000 )) ms)"
  [ "$rc" -ne 0 ] && status=1
done
exit $status
RUN
chmod +x "$out/run.sh"
du -sh "$out"
mkdir -p gpu-bundle-packed
rm -f gpu-bundle-packed/bundle.tgz
tar -cf - "$out" | xz -6 -T0 > gpu-bundle-packed/bundle.txz
du -sh gpu-bundle-packed/bundle.txz
