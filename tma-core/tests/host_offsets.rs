//! The generated `position()` / `offset()` are plain C++20 (`TMA_HOST_DEVICE`): the host
//! header of thousands of random valid specs (every swizzle, repeats, element strides,
//! interleave, Blackwell's modes) compiles with `g++ -std=c++20 -Werror`, and for every spec
//! the offsets it computes, at compile time (`static_assert`) and at run time, equal where the
//! CPU model places each element. The same text is in each tile's device struct (`T::at`).
//! Needs `g++` (or `$CXX`) on PATH; skips visibly without one, and fails instead when
//! `CI=true`.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::HashMap;
use std::fmt::Write as _;
use std::path::PathBuf;
use std::process::Command;

use tma_core::model::{self, ModelOptions};
use tma_core::render::{host_header, CXX_STANDARD};
use tma_core::smem::ElementOffsets;
use tma_core::{validate, Arch, BoundSpec, ValidSpec};
use tma_test_support::testgen::{random_valid_spec, XorShift};

/// Positions checked per spec at most (all of them for smaller calls).
const SAMPLES: u64 = 192;

fn compiler(test: &str) -> Option<PathBuf> {
    let name = std::env::var("CXX").unwrap_or_else(|_| "g++".into());
    let found = if name.contains('/') {
        Some(PathBuf::from(&name)).filter(|p| p.is_file())
    } else {
        std::env::var_os("PATH").and_then(|paths| {
            std::env::split_paths(&paths)
                .map(|dir| dir.join(&name))
                .find(|p| p.is_file())
        })
    };
    if found.is_none() {
        let why = format!("no host C++ compiler `{name}` on PATH (set CXX)");
        assert!(
            std::env::var("CI").map_or(true, |v| v != "true"),
            "{test}: {why}"
        );
        println!("SKIP {test}: {why}");
    }
    found
}

/// A spec of the generator, renamed so that its struct is unique in the header.
fn renamed(bound: &BoundSpec, name: String) -> ValidSpec {
    let mut spec = bound.spec().clone();
    spec.name = name;
    validate(&spec).unwrap_or_else(|e| panic!("{e}"))
}

struct Case {
    valid: ValidSpec,
    /// (position index n, element in its chunk, the model's offset).
    samples: Vec<(u64, u64, u64)>,
    what: String,
}

fn case(rng: &mut XorShift, arch: Arch, i: usize) -> Case {
    let (bound, coords) = random_valid_spec(rng, arch);
    let valid = renamed(&bound, format!("gen_{i}"));
    let offsets = ElementOffsets::new(&valid).unwrap();
    let placed: HashMap<(Vec<u64>, u64), u64> =
        model::elements(&bound, &coords, ModelOptions::default())
            .unwrap()
            .into_iter()
            .map(|e| ((e.position, e.in_chunk), e.smem))
            .collect();
    let total = offsets.positions() * offsets.chunk_elems;
    let picks: Vec<u64> = if total <= SAMPLES {
        (0..total).collect()
    } else {
        let mut v: Vec<u64> = (0..SAMPLES - 2).map(|_| rng.below(total)).collect();
        v.extend([0, total - 1]);
        v
    };
    let samples = picks
        .into_iter()
        .map(|m| {
            let (n, k) = (m / offsets.chunk_elems, m % offsets.chunk_elems);
            let want = placed[&(offsets.position(n), k)];
            (n, k, want)
        })
        .collect();
    let s = valid.spec();
    let what = format!(
        "{} {:?} box {:?} estr {:?} rep {:?} swz {} il {} stride {} B",
        s.dtype,
        bound.global(),
        s.boxed,
        s.element_strides,
        s.repeat,
        s.swizzle.name(),
        s.interleave.name(),
        valid.plan().stride_bytes
    );
    Case {
        valid,
        samples,
        what,
    }
}

/// The test driver: per spec a table of (n, in_chunk, model offset), one `static_assert` on
/// its first row, and a loop printing every row the header gets wrong.
fn driver(cases: &[Case]) -> String {
    let mut out = String::from(
        "#include \"shapes.hpp\"\n#include <cstdio>\n\nint main() {\n  unsigned wrong = 0;\n",
    );
    for (i, c) in cases.iter().enumerate() {
        let chunked = c.valid.spec().interleave.chunk_bytes().is_some();
        let call = |n: &str, k: &str| {
            if chunked {
                format!("T::offset(T::position({n}), {k})")
            } else {
                format!("T::offset(T::position({n}))")
            }
        };
        let rows: Vec<String> = c
            .samples
            .iter()
            .map(|(n, k, w)| format!("{{{n}u, {k}, {w}u}}"))
            .collect();
        let (n0, k0, w0) = c.samples[0];
        let _ = write!(
            out,
            "  {{\n    using T = tma_{name};\n    static_assert({first} == {w0}u, \"{name}: offset() at compile time\");\n    static const struct {{ unsigned n; int k; unsigned want; }} rows[] = {{{rows}}};\n    for (const auto& r : rows) {{\n      const unsigned got = {each};\n      if (got != r.want) {{ std::printf(\"{i} %u %d %u %u\\n\", r.n, r.k, got, r.want); ++wrong; }}\n    }}\n  }}\n",
            name = c.valid.spec().name,
            first = call(&format!("{n0}u"), &k0.to_string()),
            rows = rows.join(", "),
            each = call("r.n", "r.k"),
        );
    }
    out.push_str("  std::printf(\"wrong %u\\n\", wrong);\n  return wrong != 0;\n}\n");
    out
}

#[test]
fn host_offsets_match_the_model_for_random_specs() {
    let test = "host_offsets_match_the_model_for_random_specs";
    let Some(cxx) = compiler(test) else {
        return;
    };
    let mut cases = Vec::new();
    for (arch, seed) in [(Arch::Sm90a, 0x5eed_0090u64), (Arch::Sm100a, 0x5eed_0100)] {
        let mut rng = XorShift::new(seed);
        for _ in 0..1000 {
            let i = cases.len();
            cases.push(case(&mut rng, arch, i));
        }
    }
    let specs: Vec<ValidSpec> = cases.iter().map(|c| c.valid.clone()).collect();
    let dir = std::env::temp_dir().join(format!("tma-host-offsets-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("shapes.hpp"), host_header(&specs).unwrap()).unwrap();
    std::fs::write(dir.join("main.cpp"), driver(&cases)).unwrap();
    let exe = dir.join("offsets");
    let out = Command::new(&cxx)
        .arg(format!("-std={CXX_STANDARD}"))
        .args(["-O0", "-Wall", "-Wextra", "-pedantic", "-Werror", "-o"])
        .arg(&exe)
        .arg(dir.join("main.cpp"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{} failed on the host header:\n{}",
        cxx.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    let run = Command::new(&exe).output().unwrap();
    let stdout = String::from_utf8_lossy(&run.stdout);
    let mut report = Vec::new();
    for line in stdout.lines().filter(|l| !l.starts_with("wrong")) {
        let f: Vec<&str> = line.split_whitespace().collect();
        let c = &cases[f[0].parse::<usize>().unwrap()];
        report.push(format!(
            "{}: position {} in_chunk {}: header {} model {}",
            c.what, f[1], f[2], f[3], f[4]
        ));
    }
    let checked: usize = cases.iter().map(|c| c.samples.len()).sum();
    println!(
        "{} specs, {checked} element offsets checked; last line: {}",
        cases.len(),
        stdout.lines().last().unwrap_or_default()
    );
    assert!(
        report.is_empty() && run.status.success(),
        "{} offsets differ from the model:\n{}",
        report.len(),
        report
            .iter()
            .take(20)
            .cloned()
            .collect::<Vec<_>>()
            .join("\n")
    );
    let _ = std::fs::remove_dir_all(&dir);
}
