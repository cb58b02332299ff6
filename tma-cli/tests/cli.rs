//! The `tma` binary as a shell user runs it: output, files written, exit codes. Snapshots of
//! `explain` and `header` (tests/snapshots). Runs from the crate directory.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::PathBuf;
use std::process::Command;

struct Run {
    stdout: String,
    stderr: String,
    code: i32,
}

fn tma(args: &[&str]) -> Run {
    let out = Command::new(env!("CARGO_BIN_EXE_tma"))
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .unwrap();
    Run {
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        code: out.status.code().unwrap_or(-1),
    }
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("tma-cli-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir.join(name)
}

const MPK: &str = "examples/mpk/tiles.tma";

#[test]
fn explain_the_mpk_example() {
    let r = tma(&["explain", MPK]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(r.stderr, "");
    insta::assert_snapshot!("explain_mpk", r.stdout);
}

#[test]
fn explain_a_run_time_dim_with_and_without_dims() {
    let decl = "tma_2d! { Q: bf16, global = [S = _, D = 64], boxed = [64, 64], swizzle = 128 }";
    let without = tma(&["explain", decl]);
    assert_eq!(without.code, 0, "{}", without.stderr);
    assert!(
        without
            .stdout
            .contains("bound at run time (tma_encode_q takes the run-time dims)"),
        "{}",
        without.stdout
    );
    let with = tma(&["explain", decl, "--dims", "S=4096"]);
    assert_eq!(with.code, 0, "{}", with.stderr);
    assert!(
        with.stdout.contains("globalDim      = [64, 4096]"),
        "{}",
        with.stdout
    );
    // A bare declaration (no macro) reads the same; its rank is its `global` list's length.
    let bare = tma(&[
        "explain",
        "Q: bf16, global = [S = _, D = 64], boxed = [64, 64], swizzle = 128",
        "--dims",
        "S=4096",
    ]);
    assert_eq!(bare.stdout, with.stdout);
    let bad = tma(&["explain", decl, "--dims", "S"]);
    assert_eq!(bad.code, 2);
    assert!(
        bad.stderr.contains("--dims takes NAME=VALUE"),
        "{}",
        bad.stderr
    );
}

#[test]
fn explain_errors_underline_the_token_and_name_the_line() {
    let r = tma(&[
        "explain",
        "tma_2d! { A: f32, global = [0, 64], boxed = [300, 64], swizle = 128 }",
    ]);
    assert_eq!(r.code, 1);
    assert_eq!(r.stdout, "");
    insta::assert_snapshot!("explain_error_argument", r.stderr);
    let file = scratch("bad.tma");
    std::fs::write(
        &file,
        "// two tiles, the second one bad\ntma_1d! { Ok: u8, global = [4096], boxed = [256] }\ntma_2d! {\n    Bad: f32,\n    global = [M = _, K = 64],\n    boxed = [300, 64],\n    swizzle = 96,\n}\n",
    )
    .unwrap();
    let r = tma(&["explain", file.to_str().unwrap()]);
    assert_eq!(r.code, 1);
    let shown = r.stderr.replace(file.to_str().unwrap(), "bad.tma");
    insta::assert_snapshot!("explain_error_file", shown);
}

#[test]
fn explain_writes_an_svg_with_one_box_per_repeat() {
    let svg = scratch("mpk.svg");
    let r = tma(&["explain", MPK, "--svg", svg.to_str().unwrap()]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let text = std::fs::read_to_string(&svg).unwrap();
    assert!(text.starts_with("<svg"));
    assert!(
        text.contains("box [0, 0] at smem +0 B") && text.contains("box [0, 1] at smem +8192 B")
    );
    assert!(text.contains("banks 0-3") && text.contains("banks 28-31"));
    // Line 1 of the 128B swizzle starts with row 1's chunk 1 (elements 8..16).
    assert!(text.contains(">(1,8)<"));
    // Every 16-byte chunk of both boxes is a cell: 2 x 64 lines x 8.
    assert_eq!(text.matches("<rect").count(), 2 * 64 * 8 + 2);
}

#[test]
fn header_for_mpk_and_for_c_plus_plus() {
    let out = scratch("tiles.cuh");
    let r = tma(&["header", MPK, "--mpk", "-o", out.to_str().unwrap()]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let text = std::fs::read_to_string(&out).unwrap();
    // The prelude and the device helpers have snapshots of their own (tma-core).
    let from = text.find("// tiles of this translation unit").unwrap();
    let tile_end = text.find("// tma host encoding").unwrap();
    insta::assert_snapshot!("header_mpk_host_and_mpk", &text[tile_end..]);
    assert!(text[from..tile_end].contains("struct tma_mpk_a {"));
    // Without --mpk: the device helpers and the encode functions, no MPK names.
    let empty = tma(&["header", "-"]); // standard input: empty here
    assert_eq!(empty.code, 1, "{}", empty.stderr);
    assert!(
        empty.stderr.contains("<stdin>: no tile declaration"),
        "{}",
        empty.stderr
    );
    let plain = tma(&["header", MPK]);
    assert_eq!(plain.code, 0);
    assert!(plain.stdout.contains("inline CUresult tma_encode_mpk_a(CUtensorMap* map, const void* base, unsigned long long base_bytes,"));
    assert!(!plain.stdout.contains("namespace kernel"));
}

#[test]
fn header_of_run_time_dims_takes_them_as_parameters() {
    let file = scratch("rt.tma");
    std::fs::write(
        &file,
        "tma_3d! { V: f16, global = [B = _, H = 94, C = 32], boxed = [2, 2, 32], strides = [_, 32, 1] }\n",
    )
    .unwrap();
    let r = tma(&["header", file.to_str().unwrap()]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let encode = r.stdout.find("#ifndef TMA_ENCODE_v_DEFINED").unwrap();
    insta::assert_snapshot!("header_run_time_encode", &r.stdout[encode..]);
}

#[test]
fn shell_conventions() {
    let help = tma(&["--help"]);
    assert_eq!(help.code, 0);
    assert!(help.stdout.contains("Examples:") && help.stdout.contains("Exit codes:"));
    for sub in ["explain", "header", "compile"] {
        let h = tma(&[sub, "--help"]);
        assert_eq!(h.code, 0);
        assert!(h.stdout.contains("Examples:"), "{sub}: {}", h.stdout);
    }
    let usage = tma(&["frobnicate"]);
    assert_eq!(usage.code, 2);
    assert!(usage.stderr.contains("unrecognized subcommand"));
    let missing = tma(&["header", "no/such/file.tma"]);
    assert_eq!(missing.code, 3);
    assert!(
        missing
            .stderr
            .starts_with("error: cannot read no/such/file.tma"),
        "{}",
        missing.stderr
    );
    let version = tma(&["--version"]);
    assert_eq!(version.code, 0);
    assert!(version.stdout.starts_with("tma "));
}

const KERNEL: &str = r#"extern "C" __global__ void copy(const __grid_constant__ CUtensorMap map) {
  extern __shared__ unsigned char raw[];
  __shared__ alignas(8) tma_mbarrier bar;
  unsigned char* smem = tma_align_smem<MpkA>(raw);
  if (threadIdx.x == 0) { tma_mbarrier_init(&bar, 1); tma_fence_mbarrier_init(); }
  __syncthreads();
  if (threadIdx.x == 0) {
    tma_expect<MpkA>(&bar);
    MpkA::load(&map, &bar, smem, {.ROW = 64 * (int)blockIdx.x, .COL = 0});
  }
  tma_group<MpkA>::wait(&bar, 0);
  tma_store_token t = MpkA::store_committed(&map, smem, {.ROW = 64 * (int)blockIdx.x, .COL = 0});
  t.wait_read();
}
"#;

#[test]
fn compile_reports_resources_and_tma_instructions() {
    let test = "compile_reports_resources_and_tma_instructions";
    if tma_runtime::testing::require_nvrtc_or_skip(test).is_none() {
        return;
    }
    let kernel = scratch("copy.cu");
    std::fs::write(&kernel, KERNEL).unwrap();
    let ptx = scratch("copy.ptx");
    let r = tma(&[
        "compile",
        kernel.to_str().unwrap(),
        "--tile",
        MPK,
        "--ptx",
        ptx.to_str().unwrap(),
    ]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stdout.contains("compiled for sm_90a"), "{}", r.stdout);
    assert!(std::fs::read_to_string(&ptx)
        .unwrap()
        .contains(".entry copy"));
    // ptxas and cuobjdump come with NVRTC (scripts/cuda-tools.sh); CI has them.
    if r.stdout.contains("not on PATH") {
        println!("SKIP {test} (resources): {}", r.stdout);
        return;
    }
    assert!(
        r.stdout.contains("kernel copy:") && r.stdout.contains("0 B spill stores"),
        "{}",
        r.stdout
    );
    assert!(
        r.stdout.contains("copy: UTMALDG x2, UTMASTG x2"),
        "{}",
        r.stdout
    );
    // A wrong coordinate name is NVRTC's error at the kernel file's own line.
    std::fs::write(&kernel, KERNEL.replace(".COL = 0}", ".CL = 0}")).unwrap();
    let r = tma(&["compile", kernel.to_str().unwrap(), "--tile", MPK]);
    assert_eq!(r.code, 1);
    assert!(
        r.stderr
            .contains("copy.cu(9): error: class \"tma_mpk_a::coords\" has no field \"CL\""),
        "{}",
        r.stderr
    );
    assert!(!r.stderr.contains("--- source ---"));
}

#[test]
fn explain_a_pipeline_prints_its_stage_layout_and_budget() {
    let ring = "tma_pipeline! {
    pub GemmRing,
    stages = 4,
    consumers = warpgroups(2),
    cluster = [2, 1, 1],
    reserve_smem = 32768,
    tiles = {
        a: tma_2d! { pub GemmA: bf16, global = [M = _, K = _], boxed = [128, 64], swizzle = 128 },
        b: tma_2d! { pub GemmB: bf16, global = [N = _, K = _], boxed = [64, 64], swizzle = 128,
                     repeat = [2, 1] } multicast(x),
    },
}";
    let r = tma(&["explain", ring]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    insta::assert_snapshot!("explain_pipeline", r.stdout);

    // Too many stages: the macro's error, at the `9`.
    let r = tma(&["explain", &ring.replace("stages = 4", "stages = 9")]);
    assert_eq!(r.code, 1, "{}", r.stdout);
    assert!(
        r.stderr.contains("at most 6 stages fit") && r.stderr.contains("3 |     stages = 9,"),
        "{}",
        r.stderr
    );
    assert!(r.stderr.contains("\n  |              ^\n"), "{}", r.stderr);
}
