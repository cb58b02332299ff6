//! A generated header builds with nvcc against CUDA 13's own `cuda.h` and `cuda_runtime.h`
//! (what a C++ user of `tma::render::header` does): the prelude's `static_assert`s on
//! `CUtensorMap` then check the real driver type, and the program links. Needs the headers of
//! `eval "$(scripts/cuda-tools.sh --headers)"` (scripts/test.sh installs them); skips visibly
//! without them, fails instead with `CI=true` or `TMA_REQUIRE_NVCC=1`. No GPU needed.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::process::Command;

use tma::render::{self, corpus::corpus};
use tma::Arch;
use tma_test_support::nvcc::nvcc_with_headers;

/// Uses the prelude's helpers and the tiles' constants; `main` so that the link runs too.
const PROGRAM: &str = r#"#include "tma_tiles.cuh"
#include <cstdio>

static_assert(tma_mpk_a::TX_BYTES == 16384u, "two 64 x 64 bf16 boxes");

__global__ void touch(const __grid_constant__ CUtensorMap map, unsigned* out) {
  __shared__ tma_mbarrier bar;
  if (threadIdx.x == 0) {
    tma_mbarrier_init(&bar, 1);
    tma_fence_mbarrier_init();
    tma_prefetch_tensormap(&map);
    tma_mbarrier_arrive(&bar);
  }
  __syncthreads();
  tma_mbarrier_wait(&bar, 0);
  out[threadIdx.x] = tma_mpk_a::SMEM_BYTES;
}

int main() {
  std::printf("%zu\n", sizeof(CUtensorMap));
  return 0;
}
"#;

#[test]
fn a_generated_header_builds_with_nvcc_and_cuda_13_headers() {
    let test = "a_generated_header_builds_with_nvcc_and_cuda_13_headers";
    let Some(nvcc) = nvcc_with_headers(test) else {
        return;
    };
    let tiles: Vec<_> = corpus()
        .into_iter()
        .filter(|v| v.spec().target == Arch::Sm90a)
        .collect();
    assert!(tiles.len() >= 8, "the corpus shrank to {}", tiles.len());
    let header = render::header(&tiles).unwrap();
    let dir = std::env::temp_dir().join(format!("tma-nvcc-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("tma_tiles.cuh"), header).unwrap();
    std::fs::write(dir.join("program.cu"), PROGRAM).unwrap();
    // The disassembler beside nvcc (scripts/cuda-tools.sh installs both).
    let cuobjdump = nvcc.with_file_name("cuobjdump");
    // The header's default is the bare wait loop; TMA_BOUNDED_WAITS or TMA_DEBUG bound it.
    for (define, bounded) in [
        (None, false),
        (Some("-DTMA_BOUNDED_WAITS"), true),
        (Some("-DTMA_DEBUG"), true),
    ] {
        let exe = dir.join(format!(
            "program_{}",
            define.unwrap_or("-bare").trim_start_matches('-')
        ));
        let mut cmd = Command::new(&nvcc);
        cmd.current_dir(&dir)
            .args(["-arch=sm_90a", "-std=c++20", "-o"])
            .arg(&exe)
            .arg("program.cu");
        cmd.args(define);
        let out = cmd.output().unwrap();
        let log = String::from_utf8_lossy(&out.stderr).to_string()
            + &String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "nvcc ({define:?}) failed:\n{log}");
        assert!(!log.contains("warning"), "nvcc warned:\n{log}");
        // The host side agrees with the device side on the map's size.
        let run = Command::new(&exe).output().unwrap();
        assert!(run.status.success(), "{run:?}");
        assert_eq!(String::from_utf8_lossy(&run.stdout).trim(), "128");
        // The wait's bound (the clock, the trap) is in the device code iff asked for.
        let ptx = Command::new(&cuobjdump)
            .arg("-ptx")
            .arg(&exe)
            .output()
            .unwrap();
        assert!(ptx.status.success(), "cuobjdump -ptx: {ptx:?}");
        let ptx = String::from_utf8_lossy(&ptx.stdout);
        assert!(ptx.contains(".entry"), "no PTX embedded ({define:?})");
        assert_eq!(
            ptx.contains("%globaltimer") && ptx.contains("trap;"),
            bounded,
            "{define:?}"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// What a generated header includes (`prelude.cuh.tera`, `encode.cuh.tera`; nvcc adds
/// `cuda_runtime.h` itself, named here too).
const INCLUDES: &str = "#include <cuda.h>\n#include <cuda_runtime.h>\n#include <cstdio>\n";

/// The committed list of those headers' macros (`tma::ident::generated::HEADER_MACROS`).
const MACROS_FILE: &str = "tma-core/src/ident/header_macros.txt";

/// `tma-core/src/ident/header_macros.txt` holds every macro of the headers a generated header
/// includes that could be a user name (no leading `_`, no `tma_`): regenerated here with nvcc,
/// a missing macro fails. `TMA_UPDATE_MACROS=1` rewrites the file instead.
#[test]
fn header_macros_list_holds_every_macro_of_the_included_headers() {
    let test = "header_macros_list_holds_every_macro_of_the_included_headers";
    let Some(nvcc) = nvcc_with_headers(test) else {
        return;
    };
    let dir = std::env::temp_dir().join(format!("tma-macros-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let src = dir.join("includes.cu");
    std::fs::write(&src, INCLUDES).unwrap();
    let out = Command::new(&nvcc)
        .args([
            "-E",
            "-Xcompiler",
            "-dM",
            "-x",
            "cu",
            "-std=c++20",
            "-arch=sm_90a",
        ])
        .arg(&src)
        .output()
        .unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    assert!(
        out.status.success(),
        "nvcc -E -dM failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let found: std::collections::BTreeSet<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.strip_prefix("#define "))
        .filter_map(|l| l.split(|c: char| c == '(' || c.is_whitespace()).next())
        .filter(|n| {
            n.starts_with(|c: char| c.is_ascii_alphabetic())
                && n.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
                && !n.to_ascii_lowercase().starts_with("tma_")
        })
        .map(str::to_string)
        .collect();
    assert!(
        found.contains("EOF") && found.contains("CUDA_VERSION"),
        "{found:?}"
    );
    check_committed_list(
        &found,
        MACROS_FILE,
        tma_core::ident::generated::HEADER_MACROS,
        "TMA_UPDATE_MACROS",
        "macros of the headers a generated header includes",
        "header_macros",
    );
}

/// The committed list of the names those headers declare at namespace scope
/// (`tma::ident::generated::CUDA_NAMES`).
const NAMES_FILE: &str = "tma-core/src/ident/cuda_names.txt";

/// `tma-core/src/ident/cuda_names.txt` holds every name the headers a generated header
/// includes declare at namespace scope (what a kernel `extern "C" __global__ void <name>`
/// meets), read from nvcc's preprocessed text of both passes: the device pass (`__CUDA_ARCH__`,
/// what NVRTC builds in too) and the host pass. A missing name fails; `TMA_UPDATE_NAMES=1`
/// rewrites the file instead.
#[test]
fn cuda_names_list_holds_every_name_the_headers_declare() {
    let test = "cuda_names_list_holds_every_name_the_headers_declare";
    let Some(nvcc) = nvcc_with_headers(test) else {
        return;
    };
    let dir = std::env::temp_dir().join(format!("tma-names-list-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let src = dir.join("includes.cu");
    std::fs::write(&src, INCLUDES).unwrap();
    let mut found = std::collections::BTreeSet::new();
    // nvcc -E gives the device pass; -U__CUDA_ARCH__ the host's.
    for pass in [None, Some("-U__CUDA_ARCH__")] {
        let out = Command::new(&nvcc)
            .args(["-E", "-x", "cu", "-std=c++20", "-arch=sm_90a"])
            .args(pass)
            .arg(&src)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "nvcc -E {pass:?} failed:\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        found.extend(namespace_scope_names(&String::from_utf8_lossy(&out.stdout)));
    }
    let _ = std::fs::remove_dir_all(&dir);
    found.retain(|n| tma_core::ident::check_name(n).is_ok());
    for n in [
        "j0", "printf", "puts", "exit", "free", "malloc", "min", "max", "sqrtf",
    ] {
        assert!(
            found.contains(n),
            "{n} not found among {} names",
            found.len()
        );
    }
    for n in [
        "float4",
        "dim3",
        "size_t",
        "cudaSuccess",
        "CUresult",
        "cuInit",
        "FILE",
    ] {
        assert!(
            found.contains(n),
            "{n} not found among {} names",
            found.len()
        );
    }
    check_committed_list(
        &found,
        NAMES_FILE,
        tma_core::ident::generated::CUDA_NAMES,
        "TMA_UPDATE_NAMES",
        "names the headers a generated header includes declare at namespace scope",
        "cuda_names",
    );
}

/// C++20's keywords and alternative tokens: never a declared name.
fn is_keyword(t: &str) -> bool {
    tma_core::ident::check_name(t) == Err(tma_core::ident::NameProblem::Keyword)
}

/// The tokens of preprocessed C++ (line markers and pragmas left out): identifiers, numbers,
/// string and character literals, `::`, `->` and single punctuation characters.
fn tokens(code: &str) -> Vec<&str> {
    let mut toks = Vec::new();
    for line in code.lines().filter(|l| !l.trim_start().starts_with('#')) {
        let b = line.as_bytes();
        let mut i = 0;
        while i < b.len() {
            let c = b[i];
            let start = i;
            if c.is_ascii_whitespace() {
                i += 1;
                continue;
            } else if c.is_ascii_alphanumeric() || c == b'_' {
                while i < b.len()
                    && (b[i].is_ascii_alphanumeric()
                        || b[i] == b'_'
                        || b[i] == b'.' && c.is_ascii_digit())
                {
                    i += 1;
                }
            } else if c == b'"' || c == b'\'' {
                i += 1;
                while i < b.len() && b[i] != c {
                    i += if b[i] == b'\\' { 2 } else { 1 };
                }
                i = (i + 1).min(b.len());
            } else if line[i..].starts_with("::") || line[i..].starts_with("->") {
                i += 2;
            } else {
                i += 1;
            }
            toks.push(&line[start..i]);
        }
    }
    toks
}

fn is_ident(t: &str) -> bool {
    t.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
}

/// Whether the `{` at `i` opens an unscoped enum's body (`enum [attributes] [name] [: type]
/// {`), whose enumerators are names of the enclosing scope.
fn opens_enum_body(toks: &[&str], i: usize) -> bool {
    let mut j = i;
    while j > 0 {
        j -= 1;
        match toks[j] {
            ";" | "{" | "}" => return false,
            "enum" => return !matches!(toks.get(j + 1), Some(&"class") | Some(&"struct")),
            ")" => {
                // Only an attribute's parentheses: a function's make this its body.
                let mut depth = 1;
                while depth > 0 && j > 0 {
                    j -= 1;
                    depth += match toks[j] {
                        ")" => 1,
                        "(" => -1,
                        _ => 0,
                    };
                }
                if j == 0 || !toks[j - 1].starts_with("__attribute__") {
                    return false;
                }
            }
            _ => {}
        }
    }
    false
}

/// The names preprocessed C++ declares at the global namespace scope (`extern "C"` blocks and
/// unnamed namespaces are that scope; named namespaces, classes and functions are not): every
/// identifier there outside parentheses and brackets that is no member lookup (`x::n`,
/// `x.n`), no keyword and no template parameter, the declarators of function pointers
/// (`(*n)(..)`), enumerators of unscoped enums and the names of using-declarations. A lexer,
/// not a parser: it also keeps the names such declarations use (`size_t`, `std`), every one
/// of them declared there too.
fn namespace_scope_names(code: &str) -> std::collections::BTreeSet<String> {
    let toks = tokens(code);
    let at = |i: usize| toks.get(i).copied().unwrap_or("");
    let mut out = std::collections::BTreeSet::new();
    let mut scopes: Vec<bool> = Vec::new(); // per open brace: still namespace scope
    let (mut paren, mut bracket) = (0i32, 0i32);
    let mut template_params: std::collections::BTreeSet<&str> = Default::default();
    let mut i = 0;
    while i < toks.len() {
        let t = toks[i];
        let prev = if i > 0 { toks[i - 1] } else { "" };
        let global = scopes.iter().all(|s| *s);
        match t {
            "{" => {
                let extern_block = prev.starts_with('"') && i >= 2 && toks[i - 2] == "extern";
                let open = global
                    && paren == 0
                    && (extern_block || prev == "namespace" || opens_enum_body(&toks, i));
                scopes.push(open);
            }
            "}" => {
                scopes.pop();
                if scopes.iter().all(|s| *s) && paren == 0 {
                    template_params.clear();
                }
            }
            "(" => paren += 1,
            ")" => paren -= 1,
            "[" => bracket += 1,
            "]" => bracket -= 1,
            ";" if global && paren == 0 => template_params.clear(),
            "template" if global && paren == 0 && at(i + 1) == "<" => {
                // The parameter list: its names are the declaration's own.
                let mut depth = 0;
                let mut nested = 0;
                i += 1;
                while i < toks.len() {
                    match toks[i] {
                        "(" => nested += 1,
                        ")" => nested -= 1,
                        "<" if nested == 0 => depth += 1,
                        ">" if nested == 0 => {
                            depth -= 1;
                            if depth == 0 {
                                break;
                            }
                        }
                        p if is_ident(p) => {
                            template_params.insert(p);
                        }
                        _ => {}
                    }
                    i += 1;
                }
            }
            "using" if global && paren == 0 && bracket == 0 && at(i + 1) != "namespace" => {
                // `using a::b::n;` declares `n` here (`using X = ..;` is caught below).
                let end = toks[i..]
                    .iter()
                    .position(|t| *t == ";" || *t == "=")
                    .map_or(toks.len(), |p| i + p);
                if at(end) == ";" && end > i + 1 && is_ident(toks[end - 1]) {
                    out.insert(toks[end - 1].to_string());
                }
            }
            _ if global
                && bracket == 0
                && is_ident(t)
                && !is_keyword(t)
                && !template_params.contains(t)
                && !matches!(prev, "::" | "." | "->") =>
            {
                let pointer_declarator = paren == 1
                    && prev == "*"
                    && i >= 2
                    && toks[i - 2] == "("
                    && (at(i + 1) == "(" || at(i + 1) == ")" && matches!(at(i + 2), "(" | "["));
                if paren == 0 || pointer_declarator {
                    out.insert(t.to_string());
                }
            }
            _ => {}
        }
        i += 1;
    }
    out
}

/// The scan on a sample of what the headers hold: what it takes and what it leaves.
#[test]
fn namespace_scope_names_are_read_from_declarations() {
    let code = r#"# 1 "x.h"
extern "C" {
extern __attribute__((host)) __attribute__((device)) double j0(double x) noexcept (true);
typedef void (*cudaHostFn_t)(void *userData);
}
typedef struct __attribute__((aligned(16))) { float x, y, z, w; } float4;
enum __attribute__((device_builtin)) cudaError { cudaSuccess = 0, cudaErrorMissing = 1 };
enum class cudaScoped : int { inner };
extern const uint3 threadIdx;
namespace std { int hidden(int); template <class T> T inside(T); }
using std::hidden;
template <typename T, int N = (3 > 2)> static inline T pick(T a, int b) { int local = b; return a; }
struct dim3 { unsigned x; dim3(unsigned v); };
static inline enum cudaError status(int code) { int body = code; return cudaSuccess; }
const char* s = "not_a_name(";
int arr[kSize];
namespace { int unnamed_helper(); }
"#;
    let names = namespace_scope_names(code);
    for n in [
        "j0",
        "cudaHostFn_t",
        "float4",
        "cudaError",
        "cudaSuccess",
        "cudaErrorMissing",
        "cudaScoped",
        "threadIdx",
        "uint3",
        "std",
        "hidden",
        "pick",
        "dim3",
        "status",
        "s",
        "arr",
        "unnamed_helper",
    ] {
        assert!(names.contains(n), "{n} missing from {names:?}");
    }
    for n in [
        "x",
        "userData",
        "host",
        "device",
        "aligned",
        "w",
        "inner",
        "inside",
        "T",
        "N",
        "a",
        "b",
        "local",
        "v",
        "code",
        "body",
        "not_a_name",
        "kSize",
        "noexcept",
        "double",
    ] {
        assert!(!names.contains(n), "{n} taken from {names:?}");
    }
}

/// Each of `PTXAS_SYMBOLS` still breaks ptxas as a kernel's name (drop it when one no longer
/// does), and a name beside it does not.
#[test]
fn ptxas_still_fails_on_each_ptxas_symbol() {
    let test = "ptxas_still_fails_on_each_ptxas_symbol";
    let Some(nvcc) = nvcc_with_headers(test) else {
        return;
    };
    let ptxas = nvcc.with_file_name("ptxas");
    let dir = std::env::temp_dir().join(format!("tma-ptxas-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let builds = |name: &str| {
        let ptx = dir.join(format!("{name}.ptx"));
        std::fs::write(
            &ptx,
            format!(
                ".version 9.0\n.target sm_90a\n.address_size 64\n.visible .entry {name}()\n{{\nret;\n}}\n"
            ),
        )
        .unwrap();
        let out = Command::new(&ptxas)
            .args(["-arch=sm_90a", "-o"])
            .arg(dir.join(format!("{name}.cubin")))
            .arg(&ptx)
            .output()
            .unwrap();
        out.status.success()
    };
    assert!(builds("A6"), "a plain kernel name builds");
    for name in tma_core::ident::generated::PTXAS_SYMBOLS {
        assert!(
            !builds(name),
            "ptxas now takes a kernel `{name}`: drop it from PTXAS_SYMBOLS"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// A list committed in tma-core (`file`, embedded as `embedded`) against what nvcc `found`:
/// with `update_env` set, rewrites the file; else fails on any name `found` that it misses.
fn check_committed_list(
    found: &std::collections::BTreeSet<String>,
    file: &str,
    embedded: &str,
    update_env: &str,
    what: &str,
    test_filter: &str,
) {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(file);
    if std::env::var_os(update_env).is_some() {
        let text: String = found.iter().map(|n| format!("{n}\n")).collect();
        std::fs::write(&path, text).unwrap();
        println!("wrote {} names to {file}", found.len());
        return;
    }
    assert_eq!(
        embedded,
        std::fs::read_to_string(&path).unwrap(),
        "the embedded list is the file"
    );
    let known: std::collections::BTreeSet<&str> = embedded.lines().collect();
    let missing: Vec<&String> = found
        .iter()
        .filter(|n| !known.contains(n.as_str()))
        .collect();
    assert!(
        missing.is_empty(),
        "{file} misses {what}: {missing:?}\n\
         refresh it: eval \"$(scripts/cuda-tools.sh --headers)\"; {update_env}=1 cargo test --test nvcc_header {test_filter}"
    );
}

/// An im2col header: three im2col tiles (NWC, NHWC, NDHWC; run-time dims and strides) beside a
/// tiled one build with nvcc, device and host; a kernel's `tma_<tile>::load` is the im2col
/// instruction, and the host encode refuses what the Rust bind refuses, naming the same rule,
/// dim and value (each case once on both sides). No GPU: a call the checks accept reaches the
/// driver lookup, whose own verdict (no driver here) says the checks passed.
#[test]
fn an_im2col_header_builds_with_nvcc_and_refuses_what_rust_refuses() {
    use tma::spec::{Extent, Field};
    use tma::{validate_im2col, DType, Im2colSpec, Swizzle, ValidIm2col};
    let test = "an_im2col_header_builds_with_nvcc_and_refuses_what_rust_refuses";
    let Some(nvcc) = nvcc_with_headers(test) else {
        return;
    };
    let run = Extent::Runtime;
    let nhwc = Im2colSpec::new("act", DType::BF16, [1, 1, 1, 64], 64, 128)
        .global_extents([run, run, run, Extent::Static(64)])
        .corners([-1, -1], [-1, -1])
        .swizzle(Swizzle::B128);
    let nwc = Im2colSpec::new("seq", DType::U8, [1, 1, 32], 32, 64)
        .global_extents([Extent::Static(4), run, Extent::Static(32)])
        .corners([0], [-2]);
    let ndhwc = Im2colSpec::new("vol", DType::F32, [2, 4, 8, 8, 16], 16, 32)
        .stride_extents([
            run,
            run,
            Extent::Static(128),
            Extent::Static(16),
            Extent::Static(1),
        ])
        .corners([0, -1, -1], [0, -1, -1])
        .swizzle(Swizzle::B64);
    let tiles: Vec<ValidIm2col> = [nhwc, nwc, ndhwc]
        .iter()
        .map(|s| validate_im2col(s).unwrap_or_else(|e| panic!("{e}")))
        .collect();
    let tiled = corpus()
        .into_iter()
        .find(|v| v.spec().name == "mpk_a")
        .unwrap();
    let header =
        render::header_with_im2col(&[tiled], &tiles, &[], render::HeaderOptions::default())
            .unwrap();
    // Each case: tile, run-time arguments (the encode function's, user order), strides for
    // the bind (elements, user order; None: dense), base address, buffer bytes.
    type Case = (usize, Vec<u64>, Vec<u64>, Option<Vec<u64>>, u64, u64);
    let cases: Vec<Case> = vec![
        (
            0,
            vec![8, 56, 56],
            vec![8, 56, 56, 64],
            None,
            0x10000,
            1 << 30,
        ),
        (
            0,
            vec![8, 56, 56],
            vec![8, 56, 56, 64],
            None,
            0x10008,
            1 << 30,
        ),
        (
            0,
            vec![0, 56, 56],
            vec![0, 56, 56, 64],
            None,
            0x10000,
            1 << 30,
        ),
        (0, vec![8, 56, 56], vec![8, 56, 56, 64], None, 0x10000, 1000),
        (
            0,
            vec![1, 1, 1 << 33],
            vec![1, 1, 1 << 33, 64],
            None,
            0x10000,
            u64::MAX,
        ),
        (1, vec![3], vec![4, 3, 32], None, 0x10000, 1 << 20),
        (1, vec![2], vec![4, 2, 32], None, 0x10000, 1 << 20),
        (
            2,
            vec![4096, 1024],
            vec![2, 4, 8, 8, 16],
            Some(vec![4096, 1024, 128, 16, 1]),
            0x10000,
            1 << 20,
        ),
        (
            2,
            vec![4096, 1023],
            vec![2, 4, 8, 8, 16],
            Some(vec![4096, 1023, 128, 16, 1]),
            0x10000,
            1 << 20,
        ),
    ];
    let names = ["act", "seq", "vol"];
    let mut calls = String::new();
    for (i, (t, args, ..)) in cases.iter().enumerate() {
        let (base, len) = (cases[i].4, cases[i].5);
        let args: String = args.iter().map(|a| format!(", {a}ull")).collect();
        calls.push_str(&format!(
            "  {{ tma_encode_error e; CUtensorMap map; tma_encode_{}(&map, reinterpret_cast<const void*>({base}ull), {len}ull{args}, &e);\n    std::printf(\"case {i}: %d %s %d %llu\\n\", (int)e.status, e.rule[0] ? e.rule : \"-\", e.dim, e.value); }}\n",
            names[*t]
        ));
    }
    let program = format!(
        r#"#include "tma_tiles.cuh"
#include <cstdio>

static_assert(tma_act::TX_BYTES == 128u * 64u * 2u, "128 pixels of 64 bf16 channels");

__global__ void load_act(const __grid_constant__ CUtensorMap map, unsigned short* out) {{
  extern __shared__ __align__(1024) unsigned char smem[];
  __shared__ tma_mbarrier bar;
  if (threadIdx.x == 0) {{ tma_mbarrier_init(&bar, 1); tma_fence_mbarrier_init(); }}
  __syncthreads();
  if (threadIdx.x == 0) {{
    tma_act::arrive_expect_tx(&bar);
    tma_act::load(&map, &bar, smem, {{.N = 0, .H = -1, .W = -1, .C = 0}}, {{.H = 1, .W = 1}});
  }}
  tma_act::wait(&bar, 0);
  out[threadIdx.x] = *reinterpret_cast<const unsigned short*>(&tma_act::at(static_cast<const void*>(smem), threadIdx.x, 0));
}}

int main() {{
{calls}  return 0;
}}
"#
    );
    let dir = std::env::temp_dir().join(format!("tma-nvcc-im2col-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("tma_tiles.cuh"), header).unwrap();
    std::fs::write(dir.join("program.cu"), program).unwrap();
    let exe = dir.join("program");
    let out = Command::new(&nvcc)
        .current_dir(&dir)
        .args(["-arch=sm_90a", "-std=c++20", "-o"])
        .arg(&exe)
        .arg("program.cu")
        .output()
        .unwrap();
    let log =
        String::from_utf8_lossy(&out.stderr).to_string() + &String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "nvcc failed (files in {}):\n{log}",
        dir.display()
    );
    assert!(!log.contains("warning"), "nvcc warned:\n{log}");
    let ptx = Command::new(nvcc.with_file_name("cuobjdump"))
        .arg("-ptx")
        .arg(&exe)
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&ptx.stdout)
        .contains("cp.async.bulk.tensor.4d.shared::cluster.global.im2col"));
    let run = Command::new(&exe).output().unwrap();
    assert!(run.status.success(), "{run:?}");
    let stdout = String::from_utf8_lossy(&run.stdout).to_string();
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), cases.len(), "{stdout}");
    let mut refused = 0;
    for (i, ((t, _, global, strides, base, len), line)) in cases.iter().zip(&lines).enumerate() {
        // status rule dim value
        let f: Vec<&str> = line.split(": ").nth(1).unwrap().split(' ').collect();
        let status: u32 = f[0].parse().unwrap();
        // The Rust side: bind (every rule on the dims and strides), the base, the length.
        let rust = tiles[*t]
            .bind(global, strides.as_deref())
            .and_then(|b| b.check_base_address(*base).map(|()| b));
        match rust {
            Err(e) => {
                refused += 1;
                assert_eq!(status, 2, "case {i}: C++ `{line}`, Rust refuses:\n{e}");
                let same = e.errors.iter().any(|r| {
                    let dim = match &r.field {
                        Field::Global { dim, .. } | Field::Stride { dim, .. } => Some(*dim as i64),
                        Field::Spatial { index, .. } => Some(*index as i64 + 1),
                        _ => None,
                    };
                    format!("{:?}", r.rule) == f[1] && dim.is_none_or(|d| d.to_string() == f[2])
                });
                assert!(
                    same,
                    "case {i}: C++ `{line}` names no rule Rust reports:\n{e}"
                );
            }
            Ok(b) if b.extent_bytes() > *len => {
                refused += 1;
                assert_eq!(status, 3, "case {i}: C++ `{line}`; Rust: buffer too small");
            }
            // Accepted by the checks: the driver lookup or the driver decides (4: no driver).
            Ok(_) => assert!(status == 0 || status >= 4, "case {i}: C++ refused `{line}`"),
        }
    }
    assert_eq!(refused, 6, "{stdout}");
    let _ = std::fs::remove_dir_all(&dir);
}
