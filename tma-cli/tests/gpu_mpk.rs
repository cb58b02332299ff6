//! The MPK example (tma-cli/examples/mpk): a kernel written against Mirage MPK's documented
//! TMA API (4096 x 1024 bf16, 64 x 64 boxes, B = 3, repeat 1 x 2), built against the
//! `tma header --mpk` of its tiles.tma.
//!
//! Without a GPU (CI): nvcc builds the whole program (host encode + kernel) and its `check`
//! mode shows tma_encode_mpk_a refusing bad arguments before the driver; NVRTC compiles the
//! kernel to sm_90a SASS with its TMA instructions. On a GPU: the kernel runs both ways (NVRTC
//! with maps encoded by tma-runtime; the nvcc binary with maps encoded by the generated
//! tma_encode_mpk_a) on fresh random data with poisoned outputs, and every block's shared
//! memory and the tensor stored back are compared with the CPU model bit for bit.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::{Path, PathBuf};
use std::process::Command;

use tma_cli::diag::Source;
use tma_core::model;
use tma_core::{Arch, BoundSpec};
use tma_runtime::{CompileOptions, Compiler, LaunchConfig, Module, TensorMap};

const TILES: &str = include_str!("../examples/mpk/tiles.tma");
const KERNEL: &str = include_str!("../examples/mpk/mpk_copy.cu");
const INCLUDE: &str = "#include \"tiles.cuh\"";
const ROWS: usize = 4096;
const COLS: usize = 1024;
const TILE_R: usize = 64;
const TILE_C: usize = 128;

fn source() -> Source {
    Source {
        name: "tiles.tma".into(),
        text: TILES.into(),
    }
}

fn header() -> String {
    match tma_cli::header_text(&source(), true) {
        Ok((text, _)) => text,
        Err(d) => panic!("{d:?}"),
    }
}

fn bound() -> BoundSpec {
    let read = tma_cli::decl::read(&source()).unwrap_or_else(|d| panic!("{d:?}"));
    read.tiles[0].checked.valid.bound().expect("static dims")
}

/// The kernel for NVRTC: the header in place of its include, the kernel at its own lines.
fn nvrtc_source() -> String {
    assert!(KERNEL.contains(INCLUDE));
    format!(
        "{}\n#line 1 \"mpk_copy.cu\"\n{}",
        header(),
        KERNEL.replacen(INCLUDE, "", 1)
    )
}

fn required(var: &str) -> bool {
    std::env::var("CI").is_ok_and(|v| v == "true") || std::env::var_os(var).is_some()
}

/// nvcc with the CUDA headers beside it: PATH, then /usr/local/cuda.
fn nvcc(test: &str) -> Option<PathBuf> {
    let on_path = std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|dir| dir.join("nvcc"))
            .find(|p| p.is_file())
    });
    let found = on_path
        .into_iter()
        .chain([PathBuf::from("/usr/local/cuda/bin/nvcc")])
        .find(|n| {
            n.is_file()
                && n.parent()
                    .and_then(Path::parent)
                    .is_some_and(|top| top.join("include").join("cuda_runtime.h").is_file())
        });
    if found.is_none() {
        let why = "no nvcc with cuda_runtime.h beside it (eval \"$(scripts/cuda-tools.sh --headers)\" installs them)";
        assert!(!required("TMA_REQUIRE_NVCC"), "{test}: {why}");
        println!("SKIP {test}: {why}");
    }
    found
}

/// Builds the example with nvcc in a fresh directory; returns the binary.
fn build(nvcc: &Path, tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("tma-mpk-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("tiles.cuh"), header()).unwrap();
    std::fs::write(dir.join("mpk_copy.cu"), KERNEL).unwrap();
    let exe = dir.join("mpk_copy");
    let out = Command::new(nvcc)
        .current_dir(&dir)
        .args(["-std=c++20", "-arch=sm_90a", "-o"])
        .arg(&exe)
        .arg("mpk_copy.cu")
        .output()
        .unwrap();
    let log =
        String::from_utf8_lossy(&out.stderr).to_string() + &String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "nvcc failed:\n{log}");
    assert!(!log.contains("warning"), "nvcc warned:\n{log}");
    exe
}

#[test]
fn the_mpk_example_builds_with_nvcc_and_its_encode_refuses_bad_arguments() {
    let test = "the_mpk_example_builds_with_nvcc_and_its_encode_refuses_bad_arguments";
    let Some(nvcc) = nvcc(test) else {
        return;
    };
    let exe = build(&nvcc, "check");
    let out = Command::new(&exe).arg("check").output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    println!("{text}");
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for line in [
        "misaligned base: refused (rule broken, rule \"BaseAddressAlignment\")",
        "buffer too small: refused (buffer too small",
        "null base: refused (null argument",
        "good arguments: passed the checks",
    ] {
        assert!(text.contains(line), "missing `{line}` in:\n{text}");
    }
    let _ = std::fs::remove_dir_all(exe.parent().unwrap());
}

#[test]
fn the_mpk_example_compiles_with_nvrtc_to_tma_instructions() {
    let test = "the_mpk_example_compiles_with_nvrtc_to_tma_instructions";
    if tma_test_support::skip::require_nvrtc_or_skip(test).is_none() {
        return;
    }
    let compiled = Compiler::global()
        .unwrap()
        .compile(&nvrtc_source(), &CompileOptions::new(Arch::Sm90a))
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(compiled.ptx.contains(".entry mpk_copy"));
    // Two boxes per call: two loads and two stores, rank 2.
    assert_eq!(
        compiled
            .ptx
            .matches("cp.async.bulk.tensor.2d.shared::cluster.global")
            .count(),
        2,
        "{}",
        compiled.ptx
    );
    assert_eq!(
        compiled
            .ptx
            .matches("cp.async.bulk.tensor.2d.global.shared::cta")
            .count(),
        2
    );
    // set_barrier_transaction_bytes: one expect_tx arrival, by the warp's lane 0 as %laneid
    // names it (as MPK's barrier.cuh; not threadIdx.x % 32, which is no lane in a 2-D block).
    assert!(compiled.ptx.contains("%laneid"), "{}", compiled.ptx);
    assert_eq!(
        compiled.ptx.matches("mbarrier.arrive.expect_tx").count(),
        1,
        "{}",
        compiled.ptx
    );
}

fn random_tensor() -> Vec<u8> {
    let mut seed = 0x2545f4914f6cdd1du64
        ^ u64::from(std::process::id())
        ^ std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
    (0..ROWS * COLS * 2)
        .map(|_| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            (seed >> 32) as u8
        })
        .collect()
}

/// The tensor stored back equals the input, and each block's shared memory is the model's.
fn compare(what: &str, input: &[u8], out: &[u8], dump: &[u8]) {
    let bound = bound();
    let smem = bound.plan().footprint_bytes as usize;
    assert_eq!(out.len(), input.len());
    let wrong = out.iter().zip(input).filter(|(a, b)| a != b).count();
    let (gx, gy) = (COLS / TILE_C, ROWS / TILE_R);
    assert_eq!(dump.len(), gx * gy * smem);
    let mut bad_blocks = 0;
    let mut first = None;
    for by in 0..gy {
        for bx in 0..gx {
            let want =
                model::load(&bound, input, &[(by * TILE_R) as i64, (bx * TILE_C) as i64]).unwrap();
            let block = by * gx + bx;
            let got = &dump[block * smem..(block + 1) * smem];
            if want.as_slice() != &got[..want.len()] {
                bad_blocks += 1;
                first.get_or_insert((by, bx));
            }
        }
    }
    println!(
        "{what}: {} blocks, shared memory == model in {} of them; tensor stored back: {wrong} of {} bytes differ",
        gx * gy,
        gx * gy - bad_blocks,
        out.len()
    );
    assert_eq!(
        bad_blocks, 0,
        "{what}: first differing block (row, col) {first:?}"
    );
    assert_eq!(wrong, 0, "{what}: the tensor stored back differs");
}

#[test]
fn gpu_the_mpk_example_matches_the_model_through_nvrtc() {
    let test = "gpu_the_mpk_example_matches_the_model_through_nvrtc";
    if tma_test_support::skip::require_gpu_or_skip(test).is_none() {
        return;
    }
    let bound = bound();
    let input = random_tensor();
    let words: Vec<u16> = input
        .chunks(2)
        .map(|c| u16::from_le_bytes([c[0], c[1]]))
        .collect();
    let ctx = cudarc::driver::CudaContext::new(0).unwrap();
    let stream = ctx.default_stream();
    let d_in = stream.clone_htod(&words).unwrap();
    let d_out = stream.clone_htod(&vec![0xa5a5u16; words.len()]).unwrap();
    let smem = bound.plan().footprint_bytes as usize;
    let (gx, gy) = (COLS / TILE_C, ROWS / TILE_R);
    let d_dump = stream.clone_htod(&vec![0xa5u8; gx * gy * smem]).unwrap();
    let in_map = TensorMap::new_raw_bits(&bound, &d_in).unwrap();
    let out_map = TensorMap::new_raw_bits(&bound, &d_out).unwrap();
    let module = Module::compile_and_load(
        &ctx,
        Compiler::global().unwrap(),
        &tma_runtime::Source::new(nvrtc_source()),
        &CompileOptions::new(Arch::Sm90a),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let kernel = module.kernel("mpk_copy").unwrap();
    let cfg = LaunchConfig::new(&stream, (gx as u32, gy as u32, 1), (128, 1, 1))
        .dynamic_smem((bound.plan().footprint_bytes + bound.plan().align_bytes) as u32);
    let mut launch = kernel.launch_builder(&cfg);
    launch.arg(&in_map).arg(&out_map).arg(&d_dump);
    // SAFETY: mpk_copy takes (CUtensorMap in, CUtensorMap out, unsigned char* dump), the dump
    // holding one footprint per block of this grid.
    unsafe { launch.launch_and_sync() }.unwrap_or_else(|e| panic!("{e}"));
    let out: Vec<u8> = stream
        .clone_dtoh(&d_out)
        .unwrap()
        .iter()
        .flat_map(|w| w.to_le_bytes())
        .collect();
    let dump = stream.clone_dtoh(&d_dump).unwrap();
    compare("NVRTC, maps from tma-runtime", &input, &out, &dump);
}

#[test]
fn gpu_the_mpk_example_matches_the_model_through_nvcc_and_its_own_encode() {
    let test = "gpu_the_mpk_example_matches_the_model_through_nvcc_and_its_own_encode";
    if tma_test_support::skip::require_gpu_or_skip(test).is_none() {
        return;
    }
    let Some(nvcc) = nvcc(test) else {
        return;
    };
    let exe = build(&nvcc, "run");
    let dir = exe.parent().unwrap().to_path_buf();
    let check = Command::new(&exe).arg("check").output().unwrap();
    let text = String::from_utf8_lossy(&check.stdout).to_string();
    println!("{text}");
    assert!(
        check.status.success() && text.contains("good arguments: passed the checks (ok)"),
        "{text}"
    );
    let input = random_tensor();
    std::fs::write(dir.join("in.bin"), &input).unwrap();
    let run = Command::new(&exe)
        .arg("run")
        .arg(dir.join("in.bin"))
        .arg(dir.join("out.bin"))
        .arg(dir.join("dump.bin"))
        .output()
        .unwrap();
    assert!(
        run.status.success(),
        "{}{}",
        String::from_utf8_lossy(&run.stdout),
        String::from_utf8_lossy(&run.stderr)
    );
    let out = std::fs::read(dir.join("out.bin")).unwrap();
    let dump = std::fs::read(dir.join("dump.bin")).unwrap();
    compare("nvcc, maps from tma_encode_mpk_a", &input, &out, &dump);
    let _ = std::fs::remove_dir_all(&dir);
}
