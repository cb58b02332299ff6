#!/usr/bin/env python3
"""Seeds for the fuzz targets: every `tma_*! { .. }` invocation and `#[derive(TmaTiles)]`
struct in the repository (argument: its root), written as corpus/decl/* (one file each per
entry point that reads it, byte 0 the entry point) and as seeds.txt (the `numbers` target's)."""
import hashlib, os, re, sys

root = sys.argv[1] if len(sys.argv) > 1 else ".."
here = os.path.dirname(os.path.abspath(__file__))
MACROS = ["tma_1d", "tma_2d", "tma_3d", "tma_4d", "tma_5d", "tma_im2col", "tma_pipeline",
          "tma_warp_roles", "tma_kernel"]
MODES = {"Cli": 0, "CliDims": 1, "Tile": 2, "Pipeline": 3, "Roles": 4, "Kernel": 5, "Derive": 6}


def balanced(s, start, brace):
    depth = 0
    for j in range(brace, len(s)):
        if s[j] == "{":
            depth += 1
        elif s[j] == "}":
            depth -= 1
            if depth == 0:
                return s[start:j + 1]
    return None


def found():
    macro = re.compile(r"\b(" + "|".join(MACROS) + r")!\s*\{")
    derive = re.compile(r"#\[derive\([^)]*TmaTiles[^)]*\)\]\s*(?:#\[[^\]]*\]\s*)*(?:pub\s+)?struct\s+\w+\s*\{")
    for d, dirs, files in os.walk(root):
        dirs[:] = [x for x in dirs if x not in ("target", ".git", "fuzz")]
        for f in sorted(files):
            if not f.endswith((".rs", ".md", ".tma")):
                continue
            try:
                s = open(os.path.join(d, f), encoding="utf-8").read()
            except (UnicodeDecodeError, OSError):
                continue
            for m in macro.finditer(s):
                text = balanced(s, m.start(), m.end() - 1)
                if text:
                    # Declarations in doc comments lose their `///` / `//!`.
                    yield m.group(1), re.sub(r"\n\s*//[/!] ?", "\n", text)
            for m in derive.finditer(s):
                text = balanced(s, m.start(), m.end() - 1)
                if text:
                    yield "derive", text


def main():
    out = os.path.join(here, "corpus", "decl")
    os.makedirs(out, exist_ok=True)
    seen, entries = set(), []
    for kind, text in found():
        h = hashlib.sha1(text.encode()).hexdigest()[:16]
        if h in seen:
            continue
        seen.add(h)
        names = sorted(set(re.findall(r"\b([A-Za-z]\w*)\s*=\s*_", text)))
        dims = ",".join([f"{n}=4096" for n in names] + [f"stride_{n}=8192" for n in names])
        if kind in MACROS[:6]:
            modes = [("Cli", text), ("CliDims", dims + "\n" + text), ("Tile", text)]
        elif kind == "tma_pipeline":
            modes = [("Cli", text), ("CliDims", dims + "\n" + text), ("Pipeline", text)]
        else:
            modes = [({"tma_warp_roles": "Roles", "tma_kernel": "Kernel", "derive": "Derive"}[kind], text)]
        for mode, t in modes:
            with open(os.path.join(out, f"{kind}-{h}-{mode}"), "wb") as f:
                f.write(bytes([MODES[mode]]) + t.encode())
            entries.append(f"{MODES[mode]}\n{t}")
    with open(os.path.join(here, "seeds.txt"), "w") as f:
        f.write("\n=====\n".join(entries))
    os.makedirs(os.path.join(here, "corpus", "numbers"), exist_ok=True)
    print(f"{len(entries)} seeds")


main()
