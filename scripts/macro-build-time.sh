#!/usr/bin/env bash
# Time what 100 `tma_2d!` declarations add to `cargo build` of one crate.
#
# Generates two crates in $WORK (default /tmp/tma-macro-build-time) depending on this
# checkout's `tma`: `bare` (no declarations) and `tiles` (100 varied `tma_2d!` tiles,
# each with a run-time dim). Builds the dependencies once (shared target dir), then times
# rebuilding each crate alone (`touch src/lib.rs && cargo build`), $RUNS times, and prints
# the best and median of each and the difference.
#
#   scripts/macro-build-time.sh            # debug profile (what `cargo build` does)
#   PROFILE=release scripts/macro-build-time.sh
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
WORK=${WORK:-/tmp/tma-macro-build-time}
RUNS=${RUNS:-5}
N=${N:-100}
PROFILE=${PROFILE:-dev}
export CARGO_TARGET_DIR="$WORK/target"

mkcrate() { # name, body file
  local dir="$WORK/$1"
  mkdir -p "$dir/src"
  cat >"$dir/Cargo.toml" <<TOML
[package]
name = "$1"
version = "0.0.0"
edition = "2021"
publish = false

[dependencies]
tma = { path = "$ROOT" }

[workspace]
TOML
  cp "$2" "$dir/src/lib.rs"
}

mkdir -p "$WORK"
cat >"$WORK/bare.rs" <<'RS'
pub fn tx_bytes() -> u64 {
    0
}
RS
{
  echo 'use tma::Tile;'
  dtypes=(bf16 f16 f32 u8)
  swz=(none 32 64 128)
  for i in $(seq 0 $((N - 1))); do
    d=${dtypes[$((i % 4))]}
    s=${swz[$(((i / 4) % 4))]}
    case $d in f32) inner=8 ;; u8) inner=32 ;; *) inner=16 ;; esac
    echo "tma::tma_2d! { pub T$i: $d, global = [M = _, K = $((1024 + i * 16))], boxed = [$((1 + i % 128)), $inner], swizzle = $s, l2_promotion = 128 }"
  done
  echo 'pub fn tx_bytes() -> u64 {'
  echo -n '    0'
  for i in $(seq 0 $((N - 1))); do echo -n " + T$i::TX_BYTES"; done
  echo
  echo '}'
} >"$WORK/tiles.rs"
mkcrate bare "$WORK/bare.rs"
mkcrate tiles "$WORK/tiles.rs"

build() { (cd "$WORK/$1" && cargo build -q --profile "$PROFILE"); }
echo "building dependencies once ($PROFILE) ..." >&2
build bare
build tiles

time_one() { # crate -> seconds
  touch "$WORK/$1/src/lib.rs"
  local t0 t1
  t0=$(date +%s.%N)
  build "$1"
  t1=$(date +%s.%N)
  echo "$t1 - $t0" | python3 -c 'print(f"{eval(input()):.3f}")'
}

stats() { # name, times...
  local name=$1
  shift
  python3 - "$name" "$@" <<'PY'
import sys, statistics
name, ts = sys.argv[1], sorted(map(float, sys.argv[2:]))
print(f"{name:>6}: best {ts[0]:.3f} s  median {statistics.median(ts):.3f} s  ({' '.join(f'{t:.3f}' for t in ts)})")
PY
}

bare=() tiles=()
for _ in $(seq "$RUNS"); do
  bare+=("$(time_one bare)")
  tiles+=("$(time_one tiles)")
done
stats bare "${bare[@]}"
stats tiles "${tiles[@]}"
python3 - "${bare[*]}" "${tiles[*]}" "$N" <<'PY'
import sys, statistics
b = list(map(float, sys.argv[1].split()))
t = list(map(float, sys.argv[2].split()))
n = int(sys.argv[3])
d_best, d_med = min(t) - min(b), statistics.median(t) - statistics.median(b)
print(f"added by {n} tma_2d! declarations: best {d_best:.3f} s, median {d_med:.3f} s ({1000 * d_med / n:.1f} ms per tile)")
PY
