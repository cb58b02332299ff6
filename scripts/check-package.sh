#!/usr/bin/env bash
# Checks that every crate of the workspace packages, as `cargo publish` would build it:
#
# 1. `cargo package --workspace` packs each crate and builds its library from the packed
#    files alone (about 8 s with a warm target dir, 1.5 min cold, on 2 cores);
# 2. every file that a packed .rs file embeds with `include_str!`/`include_bytes!` (tests,
#    examples and benches too, which step 1 does not build) is in that crate's package.
#
# --allow-dirty: it checks the working tree, committed or not.
set -euo pipefail
cd "$(dirname "$0")/.."

# Verification builds the packed crates as registry crates, and cargo never rebuilds a
# registry crate whose version it has built before: with the shared target dir a changed
# tma-core 0.1.0 was verified against its stale build. So verify in a target dir of its own
# and drop our crates' artifacts there first (their dependencies stay warm).
# Cargo also unpacks the packed crates once per local registry path (under
# $CARGO_HOME/registry/src/-<hash>/) and reuses that copy: drop ours there too.
verify_dir="target/package-verify"
rm -rf "$verify_dir"/debug/.fingerprint/tma* "$verify_dir"/debug/deps/*tma*
for crate in tma tma-core tma-syntax tma-macros tma-runtime tma-cli; do
  rm -rf "${CARGO_HOME:-$HOME/.cargo}"/registry/src/-*/"$crate"-[0-9]*
done
# Packed crates are built as registry crates, which the workspace's dev profile does not
# reach: no debug info there either (it only checks that they build).
CARGO_PROFILE_DEV_DEBUG=0 CARGO_TARGET_DIR="$verify_dir" cargo package --workspace --allow-dirty --quiet

python3 - <<'PY'
import json, os, re, subprocess, sys

def cargo(*args):
    return subprocess.run(["cargo", *args], check=True, capture_output=True, text=True).stdout

# A literal path only; include_str!(concat!(...)) is not checked.
INCLUDE = re.compile(r'include_(?:str|bytes)!\(\s*"([^"]+)"\s*\)')
bad = []
for pkg in json.loads(cargo("metadata", "--no-deps", "--format-version", "1"))["packages"]:
    name, root = pkg["name"], os.path.dirname(pkg["manifest_path"])
    listed = cargo("package", "-p", name, "--allow-dirty", "--list", "--quiet").split()
    files = set(listed)
    for rel in listed:
        path = os.path.join(root, rel)
        if not rel.endswith(".rs") or not os.path.isfile(path):
            continue
        with open(path, encoding="utf-8") as f:
            text = f.read()
        for m in INCLUDE.finditer(text):
            target = os.path.normpath(os.path.join(os.path.dirname(rel), m.group(1)))
            if target not in files:
                line = text.count("\n", 0, m.start()) + 1
                bad.append(f"{name}: {rel}:{line} includes {m.group(1)}, not in the package")
for b in bad:
    print(b, file=sys.stderr)
sys.exit(1 if bad else 0)
PY
echo "check-package: every crate packs, builds from its package, and holds the files it includes"
