//! Every generated kernel compiles for real: each corpus tile's helpers plus a kernel that
//! calls all of them go through NVRTC 13.0 to sm_90a PTX, through ptxas to SASS, and the
//! SASS must hold the TMA instructions the helpers stand for, with no local-memory spills.
//! Runs without a GPU (CI does it); with `CI=true` a missing NVRTC, ptxas or cuobjdump is a
//! failure, not a skip. `scripts/test.sh` installs them from NVIDIA's wheels.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::{Path, PathBuf};
use std::process::Command;

use tma::render::{self, corpus::corpus, exercise_body, KernelSource};
use tma::runtime::testing::require_nvrtc_or_skip;
use tma::runtime::{CompileOptions, Compiler, Source};
use tma::{Arch, TmaTiles, ValidSpec};

/// A CUDA tool on PATH, or None (after printing why) when it may be skipped.
fn tool(test: &str, name: &str) -> Option<PathBuf> {
    let found = std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|dir| dir.join(name))
            .find(|p| p.is_file())
    });
    if found.is_none() {
        let required = std::env::var("CI").is_ok_and(|v| v == "true")
            || std::env::var_os("TMA_REQUIRE_NVRTC").is_some();
        let why =
            format!("`{name}` is not on PATH (eval \"$(scripts/cuda-tools.sh)\" installs it)");
        assert!(!required, "{test}: {why}");
        println!("SKIP {test}: {why}");
    }
    found
}

/// What ptxas and the disassembler say about one compiled kernel.
struct Sass {
    text: String,
    spill_bytes: u64,
    stack_bytes: u64,
}

fn assemble(ptxas: &Path, cuobjdump: &Path, ptx: &str, dir: &Path, stem: &str) -> Sass {
    let ptx_path = dir.join(format!("{stem}.ptx"));
    let cubin = dir.join(format!("{stem}.cubin"));
    std::fs::write(&ptx_path, ptx).unwrap();
    let out = Command::new(ptxas)
        .args(["-arch=sm_90a", "-v", "-o"])
        .arg(&cubin)
        .arg(&ptx_path)
        .output()
        .unwrap();
    let log = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(out.status.success(), "ptxas failed on {stem}:\n{log}");
    // "N bytes stack frame, N bytes spill stores, N bytes spill loads"
    let number_before = |key: &str| -> u64 {
        log.lines()
            .filter_map(|l| l.find(key).map(|i| &l[..i]))
            .filter_map(|head| head.split_whitespace().last()?.parse::<u64>().ok())
            .sum()
    };
    let spill_bytes = number_before(" bytes spill stores") + number_before(" bytes spill loads");
    let stack_bytes = number_before(" bytes stack frame");
    let dump = Command::new(cuobjdump)
        .arg("-sass")
        .arg(&cubin)
        .output()
        .unwrap();
    assert!(
        dump.status.success(),
        "cuobjdump failed: {}",
        String::from_utf8_lossy(&dump.stderr)
    );
    Sass {
        text: String::from_utf8_lossy(&dump.stdout).to_string(),
        spill_bytes,
        stack_bytes,
    }
}

fn count(sass: &str, op: &str) -> usize {
    sass.split(|c: char| !c.is_ascii_alphanumeric() && c != '.')
        .filter(|w| w.split('.').next() == Some(op))
        .count()
}

#[test]
fn every_corpus_tile_compiles_to_sm90a_sass_with_its_tma_instructions() {
    let test = "every_corpus_tile_compiles_to_sm90a_sass_with_its_tma_instructions";
    let Some(_) = require_nvrtc_or_skip(test) else {
        return;
    };
    let (Some(ptxas), Some(cuobjdump)) = (tool(test, "ptxas"), tool(test, "cuobjdump")) else {
        return;
    };
    let dir = std::env::temp_dir().join(format!("tma-generated-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let compiler = Compiler::global().unwrap();
    let specs: Vec<ValidSpec> = corpus();
    assert!(specs.len() >= 9, "the corpus shrank to {}", specs.len());
    for valid in &specs {
        let name = &valid.spec().name;
        let body = render::exercise_body_checked(valid).unwrap();
        assert_eq!(body, exercise_body(valid));
        let source = Source::new(KernelSource::new().tile(valid).body(&body).build().unwrap());
        for debug_waits in [false, true] {
            let options = CompileOptions::new(Arch::Sm90a).debug_waits(debug_waits);
            let compiled = compiler.compile_source(&source, &options).unwrap();
            assert!(compiled.cubin.starts_with(b"\x7fELF"), "{name}: no CUBIN");
            let sass = assemble(
                &ptxas,
                &cuobjdump,
                &compiled.ptx,
                &dir,
                &format!("{name}_{debug_waits}"),
            );
            let boxes = valid.plan().boxes as usize;
            // Each helper issues one instruction per repeated box.
            assert!(
                count(&sass.text, "UTMALDG") >= 2 * boxes,
                "{name}: loads\n{}",
                sass.text
            );
            assert!(count(&sass.text, "UTMASTG") >= boxes, "{name}: stores");
            assert!(
                count(&sass.text, "UTMAPF") >= boxes,
                "{name}: tile prefetch"
            );
            assert!(
                count(&sass.text, "UTMACCTL") >= 1,
                "{name}: tensormap prefetch/fence"
            );
            if !render::reduce_ops(valid.spec().dtype).is_empty() {
                assert!(count(&sass.text, "UTMAREDG") >= boxes, "{name}: reductions");
            }
            assert!(count(&sass.text, "SYNCS") >= 1, "{name}: mbarrier waits");
            assert_eq!(sass.spill_bytes, 0, "{name}: spills");
            assert_eq!(
                count(&sass.text, "LDL") + count(&sass.text, "STL"),
                0,
                "{name}: local memory"
            );
            println!(
                "{name} (debug waits {debug_waits}): {} B CUBIN, UTMALDG {} UTMASTG {} UTMAREDG {} UTMAPF {} UTMACCTL {}, stack {} B, spills 0",
                compiled.cubin.len(),
                count(&sass.text, "UTMALDG"),
                count(&sass.text, "UTMASTG"),
                count(&sass.text, "UTMAREDG"),
                count(&sass.text, "UTMAPF"),
                count(&sass.text, "UTMACCTL"),
                sass.stack_bytes
            );
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// A kernel's four operands described once, as the README's attention example does.
#[derive(TmaTiles)]
#[allow(dead_code)]
struct AttentionTiles {
    #[tma(dtype = bf16, global = [S = _, D = 64], boxed = [64, 64], swizzle = 128, load)]
    q: [u64; 2],
    #[tma(dtype = bf16, global = [S = _, D = 64], boxed = [64, 64], swizzle = 128, load)]
    k: [u64; 2],
    #[tma(dtype = bf16, global = [S = _, D = 64], boxed = [64, 64], swizzle = 128, load)]
    v: [u64; 2],
    #[tma(dtype = bf16, global = [S = _, D = 64], boxed = [64, 64], swizzle = 128, store)]
    o: [u64; 2],
}

/// The derive's parameter list and helpers make a kernel that NVRTC compiles, and the host
/// side encodes the four maps in the same order.
#[test]
fn a_four_tile_struct_gives_a_kernel_that_compiles() {
    let test = "a_four_tile_struct_gives_a_kernel_that_compiles";
    let Some(_) = require_nvrtc_or_skip(test) else {
        return;
    };
    let body = format!(
        r#"
extern "C" __global__ void attention_copy({params}) {{
  extern __shared__ unsigned char raw[];
  __shared__ __align__(8) tma_mbarrier bar;
  const unsigned base = tma_smem_addr(raw);
  unsigned char* smem = raw + (((base + 1023u) & ~1023u) - base);
  if (threadIdx.x == 0) {{ tma_mbarrier_init(&bar, 1); tma_fence_mbarrier_init(); }}
  __syncthreads();
  const int s0 = blockIdx.x * 64;
  if (threadIdx.x == 0) {{
    tma_mbarrier_arrive_expect_tx(&bar, tma_attention_tiles_q::TX_BYTES * 3);
    tma_attention_tiles_q::load(&q_map, &bar, smem + {q}, s0, 0);
    tma_attention_tiles_k::load(&k_map, &bar, smem + {k}, s0, 0);
    tma_attention_tiles_v::load(&v_map, &bar, smem + {v}, s0, 0);
  }}
  tma_mbarrier_wait(&bar, 0);
  if (threadIdx.x == 0) {{
    tma_attention_tiles_o::store(&o_map, smem + {v}, s0, 0);
    tma_store_commit_group();
    tma_store_async_wait<0>();
  }}
}}
"#,
        params = AttentionTiles::cuda_params(),
        q = AttentionTiles::TILES[0].smem_offset,
        k = AttentionTiles::TILES[1].smem_offset,
        v = AttentionTiles::TILES[2].smem_offset,
    );
    assert!(AttentionTiles::cuda_params().contains("const __grid_constant__ CUtensorMap q_map"));
    let source = format!(
        "{}\n{}\n{body}",
        render::prelude(),
        AttentionTiles::cuda_helpers()
    );
    let compiled = Compiler::global()
        .unwrap()
        .compile(&source, &CompileOptions::new(Arch::Sm90a))
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(compiled.ptx.contains(".entry attention_copy"));
    assert_eq!(
        compiled
            .ptx
            .matches("cp.async.bulk.tensor.2d.shared::cluster")
            .count(),
        3
    );
    let tiles = AttentionTiles {
        q: [4096, 64],
        k: [4096, 64],
        v: [4096, 64],
        o: [4096, 64],
    };
    let args = tiles.encode_args().unwrap();
    assert_eq!(args.len(), 4);
    assert!(args
        .iter()
        .all(|a| a.global_dim == vec![64, 4096] && a.global_strides == vec![128]));
    assert_eq!(AttentionTiles::SMEM_BYTES, 4 * 8192);
}

/// The source with every `#if defined(TMA_DEBUG)` block cut out (its `#else` branch kept):
/// what the helpers were before the debug checks existed.
fn without_debug_blocks(source: &str) -> String {
    // One entry per open #if: whether its current branch is kept.
    let mut keep: Vec<(bool, bool)> = Vec::new(); // (is a TMA_DEBUG block, keeping now)
    let mut out = String::new();
    for line in source.lines() {
        let t = line.trim_start();
        let outer = keep.iter().all(|&(_, k)| k);
        if t.starts_with("#if defined(TMA_DEBUG)") || t.starts_with("#ifdef TMA_DEBUG") {
            keep.push((true, false));
            continue;
        }
        if t.starts_with("#if") {
            keep.push((false, true));
        } else if t.starts_with("#else") && keep.last().is_some_and(|&(d, _)| d) {
            if let Some(last) = keep.last_mut() {
                last.1 = true;
            }
            continue;
        } else if t.starts_with("#endif") {
            if let Some((debug, _)) = keep.pop() {
                if debug {
                    continue;
                }
            }
        }
        if outer {
            out.push_str(line);
            out.push('\n');
        }
    }
    out
}

/// With the device debug mode off, the checks compile to nothing: every corpus kernel's
/// SASS equals the SASS of the same source with the debug blocks cut out.
#[test]
fn debug_checks_compile_to_nothing_when_off() {
    let test = "debug_checks_compile_to_nothing_when_off";
    let Some(_) = require_nvrtc_or_skip(test) else {
        return;
    };
    let (Some(ptxas), Some(cuobjdump)) = (tool(test, "ptxas"), tool(test, "cuobjdump")) else {
        return;
    };
    let dir = std::env::temp_dir().join(format!("tma-debug-off-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let compiler = Compiler::global().unwrap();
    let options = CompileOptions::new(Arch::Sm90a).debug_waits(false);
    for valid in corpus() {
        let name = &valid.spec().name;
        let full = KernelSource::new()
            .tile(&valid)
            .body(&exercise_body(&valid))
            .build()
            .unwrap();
        let cut = without_debug_blocks(&full);
        assert!(full.contains("debug_check(") && !cut.contains("debug_check("));
        let sass = |src: &str, stem: &str| {
            let c = compiler
                .compile_source(&Source::new(src), &options)
                .unwrap();
            assemble(&ptxas, &cuobjdump, &c.ptx, &dir, stem).text
        };
        assert_eq!(
            sass(&full, &format!("{name}_full")),
            sass(&cut, &format!("{name}_cut")),
            "{name}: the debug checks change the release SASS"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}
