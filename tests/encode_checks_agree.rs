//! The C++ encode checks agree with the Rust ones. A generated header's `tma_encode_<tile>`
//! (templates `encode*.cuh.tera`) checks the base alignment, the dims, the strides and the
//! buffer's length before it calls the driver; tma-runtime checks the same in Rust
//! (`ValidSpec::bind`, then `check_buffer_bits` of `TensorMap::new`). They are written twice on
//! purpose (a C++ user links no Rust); this test holds them to one verdict.
//!
//! Random specs with run-time dims and strides (`testgen::random_runtime_spec`, Hopper and
//! Blackwell, packed sub-byte types included), each called with random run-time values around
//! the rules' boundaries (0, 1, 2^32, 2^32 + 1, strides at 2^40 bytes, misaligned strides and
//! bases, a buffer one byte short of the tensor, ...), all in one C++ program built with nvcc
//! and run here. No GPU is needed: a call that passes the checks reaches the driver lookup,
//! which reports its own status (no driver here; the driver's verdict on a GPU machine), so
//! "accepted by the checks" is observable either way. For each call: accepted by both or
//! refused by both, and the C++ refusal (the first rule it checks that breaks) is one the Rust
//! side reports too (it reports every one), with the same dim (user order) and value.
//!
//! Needs nvcc and the CUDA headers (`eval "$(scripts/cuda-tools.sh --headers)"`); skips
//! visibly without them, fails instead with `CI=true` or `TMA_REQUIRE_NVCC=1`.
//! `TMA_ENCODE_AGREE_SEED=<n>` runs other specs and values.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::fmt::Write as _;
use std::process::Command;

use tma::runtime::driver::check_buffer_bits;
use tma::spec::{Extent, Field};
use tma::{render, Arch, BoundSpec};
use tma_test_support::nvcc::nvcc_with_headers;
use tma_test_support::testgen::{random_runtime_spec, RuntimeSpec, XorShift};

const SPECS_PER_ARCH: usize = 40;
const CASES_PER_SPEC: u64 = 24;

/// One call of `tma_encode_<tile>`: every dim and stride (user order; static ones as declared).
#[derive(Debug)]
struct Case {
    tile: usize,
    global: Vec<u64>,
    strides: Option<Vec<u64>>,
    base: u64,
    len: u64,
}

/// A refusal: the rule (`Rule`'s name; `BufferTooSmall` for the buffer's length), the dim
/// (user order) and the value when the refusal names them.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Refusal {
    rule: String,
    dim: Option<usize>,
    value: Option<u64>,
}

/// Both sides' number parsing: decimal, or `0x` hex (the Rust base-address finding).
fn number(s: &str) -> Option<u64> {
    match s.strip_prefix("0x") {
        Some(hex) => u64::from_str_radix(hex, 16).ok(),
        None => s.parse().ok(),
    }
}

/// Values around the boundaries of the global-dim rule, else the one that binds.
fn dim_value(rng: &mut XorShift, nominal: u64) -> u64 {
    if rng.chance(3, 5) {
        return nominal;
    }
    match rng.below(10) {
        0 => 0,
        1 => 1,
        2 => nominal + 1,
        3 => nominal * 2,
        4 => 1 << 32,
        5 => (1 << 32) + 1,
        6 => rng.range(2, 1 << 32),
        7 => rng.next_u64(),
        8 => u64::MAX,
        _ => nominal.saturating_sub(1).max(1),
    }
}

/// Values around the boundaries of the stride rules (contiguous inner dim, whole bytes, 2^40
/// bytes, alignment), else the one that binds.
fn stride_value(rng: &mut XorShift, nominal: u64, bits: u64, align: u64, inner: bool) -> u64 {
    if rng.chance(1, 2) {
        return nominal;
    }
    // Elements in `align` bytes (at least 1), and the first stride of 2^40 bytes.
    let step = (align * 8).div_ceil(bits).max(1);
    let max = (1u64 << 40) * 8 / bits;
    match rng.below(if inner { 4 } else { 12 }) {
        0 => 0,
        1 => nominal + 1,
        2 => 2,
        3 => rng.next_u64(),
        4 => nominal + step,
        5 => nominal.saturating_sub(1),
        6 => max,
        7 => max - step,
        8 => max - 1,
        9 => u64::MAX,
        10 => rng.range(1, 1 << 20) * step,
        _ => rng.range(1, 1 << 30),
    }
}

fn case(rng: &mut XorShift, tile: usize, t: &RuntimeSpec) -> Case {
    let spec = t.valid.spec();
    let rank = spec.rank();
    let global = (0..rank)
        .map(|d| match spec.global[d] {
            Extent::Static(v) => v,
            Extent::Runtime => dim_value(rng, t.global[d]),
        })
        .collect();
    let bits = u64::from(spec.dtype.global_bits());
    let (align, _) = t.valid.stride_align();
    let strides = spec.strides.as_ref().map(|declared| {
        let nominal = t.strides.as_ref().expect("declared strides have values");
        (0..rank)
            .map(|d| match declared[d] {
                Extent::Static(v) => v,
                Extent::Runtime => stride_value(rng, nominal[d], bits, align, d + 1 == rank),
            })
            .collect()
    });
    // A base far from 0 (null is C++'s own refusal), misaligned one time in four.
    let base_align = t.valid.base_address_align();
    let mut base = 0x7f00_0000_0000 + 256 * rng.below(1 << 20);
    if rng.chance(1, 4) {
        base += *rng
            .pick(&[1, 2, 8, 16, base_align / 2, base_align + 16])
            .unwrap();
    }
    let mut c = Case {
        tile,
        global,
        strides,
        base,
        len: 0,
    };
    // The buffer's length around the tensor's extent where the shape binds.
    c.len = match t.valid.bind(&c.global, c.strides.as_deref()) {
        Ok(bound) => {
            let extent = bound.extent_bytes();
            match rng.below(6) {
                0 => extent - 1,
                1 => extent + 1,
                2 => rng.below(extent),
                3 => u64::MAX,
                _ => extent,
            }
        }
        Err(_) => *rng.pick(&[0, 1 << 20, u64::MAX]).unwrap(),
    };
    c
}

/// The Rust verdict: every finding of `bind`, of the base-address and buffer checks
/// `TensorMap::new` makes (through `check_buffer_bits` over a buffer of the element's size).
/// `Ok` when the driver would be called.
fn rust_verdict(t: &RuntimeSpec, c: &Case) -> Result<(), Vec<Refusal>> {
    let of_spec = |errors: &tma::SpecErrors| -> Vec<Refusal> {
        errors
            .errors
            .iter()
            .map(|e| Refusal {
                rule: format!("{:?}", e.rule),
                dim: match e.field {
                    Field::Global { dim, .. } | Field::Stride { dim, .. } => Some(dim),
                    _ => None,
                },
                value: number(&e.value),
            })
            .collect()
    };
    let buffer = |bound: &BoundSpec| match bound.spec().dtype.size_bytes() {
        Some(2) => check_buffer_bits::<u16>(bound, c.base, c.len),
        Some(4) => check_buffer_bits::<u32>(bound, c.base, c.len),
        Some(8) => check_buffer_bits::<u64>(bound, c.base, c.len),
        _ => check_buffer_bits::<u8>(bound, c.base, c.len),
    };
    match t.valid.bind(&c.global, c.strides.as_deref()) {
        Ok(bound) => match buffer(&bound) {
            Ok(()) => Ok(()),
            Err(tma::runtime::Error::Spec(errors)) => Err(of_spec(&errors)),
            Err(tma::runtime::Error::BufferTooSmall { buffer_bytes, .. }) => Err(vec![Refusal {
                rule: "BufferTooSmall".into(),
                dim: None,
                value: Some(buffer_bytes),
            }]),
            Err(e) => panic!("the test's buffer type should fit every spec: {e}"),
        },
        // Binding and the buffer checks are two steps in Rust; the base address is a
        // finding beside the shape's.
        Err(errors) => {
            let mut out = of_spec(&errors);
            let align = t.valid.base_address_align();
            if c.base % align != 0 {
                out.push(Refusal {
                    rule: "BaseAddressAlignment".into(),
                    dim: None,
                    value: Some(c.base),
                });
            }
            Err(out)
        }
    }
}

/// The C++ verdict from its output line `<case> <status> <rule> <dim> <value>`: `Ok` when
/// the checks passed (`TMA_ENCODE_OK`, `_NO_DRIVER` or `_DRIVER`).
fn cpp_verdict(line: &str) -> Result<(), Refusal> {
    let f: Vec<&str> = line.split_whitespace().collect();
    let status: u32 = f[1].parse().unwrap();
    let dim: i64 = f[3].parse().unwrap();
    let value: u64 = f[4].parse().unwrap();
    match status {
        0 | 4 | 5 => Ok(()),
        2 => Err(Refusal {
            rule: f[2].to_string(),
            dim: usize::try_from(dim).ok(),
            value: Some(value),
        }),
        3 => Err(Refusal {
            rule: "BufferTooSmall".into(),
            dim: None,
            value: Some(value),
        }),
        _ => Err(Refusal {
            rule: format!("status {status}"),
            dim: None,
            value: None,
        }),
    }
}

/// The C++ refusal is one of the Rust findings: same rule, dim and value. A size overflow
/// names the whole shape in Rust and the dim whose product overflowed in C++: rule only.
fn agrees(cpp: &Refusal, rust: &[Refusal]) -> bool {
    rust.iter().any(|r| {
        r.rule == cpp.rule
            && (cpp.rule == "SizeOverflow" || (r.dim == cpp.dim && r.value == cpp.value))
    })
}

/// `tma_encode_<tile>(&map, base, len, <run-time dims>, <run-time strides>, &e)`, printing
/// the verdict.
fn call(i: usize, t: &RuntimeSpec, c: &Case) -> String {
    let spec = t.valid.spec();
    let mut args = format!(
        "reinterpret_cast<const void*>({:#x}ull), {}ull",
        c.base, c.len
    );
    for (d, e) in spec.global.iter().enumerate() {
        if *e == Extent::Runtime {
            write!(args, ", {}ull", c.global[d]).unwrap();
        }
    }
    if let (Some(declared), Some(values)) = (&spec.strides, &c.strides) {
        for (d, e) in declared.iter().enumerate() {
            if *e == Extent::Runtime {
                write!(args, ", {}ull", values[d]).unwrap();
            }
        }
    }
    format!(
        "  e = tma_encode_error{{}};\n  tma_encode_{}(&map, {args}, &e);\n  \
         std::printf(\"{i} %d %s %d %llu\\n\", (int)e.status, e.rule[0] ? e.rule : \"-\", e.dim, e.value);\n",
        spec.name
    )
}

/// Builds the calls of `cases` over `tiles` into one program for `arch`, runs it, and returns
/// its output lines (one per case).
fn run_cpp(
    nvcc: &std::path::Path,
    arch: Arch,
    tiles: &[RuntimeSpec],
    cases: &[Case],
) -> Vec<String> {
    let valid: Vec<_> = tiles.iter().map(|t| t.valid.clone()).collect();
    let header = render::header(&valid).unwrap();
    let mut program = String::from(
        "#include \"tiles.cuh\"\n#include <cstdio>\n\nint main() {\n  CUtensorMap map;\n  tma_encode_error e;\n",
    );
    for (i, c) in cases.iter().enumerate() {
        program.push_str(&call(i, &tiles[c.tile], c));
    }
    program.push_str("  return 0;\n}\n");
    let dir = std::env::temp_dir().join(format!(
        "tma-encode-agree-{}-{}",
        std::process::id(),
        arch.nvrtc_name()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("tiles.cuh"), header).unwrap();
    std::fs::write(dir.join("program.cu"), &program).unwrap();
    let exe = dir.join("program");
    let out = Command::new(nvcc)
        .current_dir(&dir)
        .arg(format!("-arch={}", arch.nvrtc_name()))
        .args(["-std=c++20", "-o"])
        .arg(&exe)
        .arg("program.cu")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "nvcc ({arch}) failed (files in {}):\n{}{}",
        dir.display(),
        String::from_utf8_lossy(&out.stderr),
        String::from_utf8_lossy(&out.stdout)
    );
    let run = Command::new(&exe).output().unwrap();
    assert!(run.status.success(), "the program failed: {run:?}");
    let lines: Vec<String> = String::from_utf8_lossy(&run.stdout)
        .lines()
        .map(str::to_string)
        .collect();
    assert_eq!(lines.len(), cases.len(), "one line per call");
    let _ = std::fs::remove_dir_all(&dir);
    lines
}

#[test]
fn cpp_encode_checks_agree_with_rust_bind_checks_on_random_specs() {
    let test = "cpp_encode_checks_agree_with_rust_bind_checks_on_random_specs";
    let Some(nvcc) = nvcc_with_headers(test) else {
        return;
    };
    let seed = std::env::var("TMA_ENCODE_AGREE_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(20);
    let mut disagreements = Vec::new();
    let (mut accepted, mut refused) = (0usize, std::collections::BTreeMap::new());
    for arch in [Arch::Sm90a, Arch::Sm100a] {
        let mut rng = XorShift::new(seed ^ arch as u64);
        let tiles: Vec<RuntimeSpec> = (0..SPECS_PER_ARCH)
            .map(|i| random_runtime_spec(&mut rng, arch, &format!("t{i}")))
            .collect();
        let cases: Vec<Case> = (0..tiles.len())
            .flat_map(|i| (0..CASES_PER_SPEC).map(move |_| i))
            .map(|i| case(&mut rng, i, &tiles[i]))
            .collect();
        let lines = run_cpp(&nvcc, arch, &tiles, &cases);
        for (c, line) in cases.iter().zip(&lines) {
            let t = &tiles[c.tile];
            let rust = rust_verdict(t, c);
            let cpp = cpp_verdict(line);
            let same = match (&rust, &cpp) {
                (Ok(()), Ok(())) => {
                    accepted += 1;
                    true
                }
                (Err(r), Err(p)) => {
                    *refused.entry(p.rule.clone()).or_insert(0usize) += 1;
                    agrees(p, r)
                }
                _ => false,
            };
            if !same {
                disagreements.push(format!(
                    "{arch} tile {:?}\n    global {:?}, strides {:?}, base {:#x}, len {}\n    rust {rust:?}\n    c++  {cpp:?}",
                    t.valid.spec(),
                    c.global,
                    c.strides,
                    c.base,
                    c.len
                ));
            }
        }
    }
    println!("seed {seed}: {accepted} accepted by both; C++ refusals by rule: {refused:?}");
    assert!(
        disagreements.is_empty(),
        "{} calls where the C++ and Rust checks disagree (seed {seed}); the first:\n{}",
        disagreements.len(),
        disagreements[..disagreements.len().min(8)].join("\n")
    );
    // The cases reach every check, and the accepting side too.
    assert!(accepted > 100, "{accepted} accepted");
    for rule in [
        "BaseAddressAlignment",
        "GlobalDimRange",
        "SizeOverflow",
        "InnerStrideIsOne",
        "StrideWholeBytes",
        "StrideMax",
        "StrideAlignment",
        "PackedTypeAlignment",
        "BufferTooSmall",
    ] {
        assert!(
            refused.contains_key(rule),
            "no call refused by {rule}: {refused:?}"
        );
    }
}
