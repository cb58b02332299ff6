//! `tma` on im2col tiles (`tma_im2col! { .. }`), as a shell user runs it: `explain` (encode
//! arguments, TX_BYTES, the walk of an example load, the shared-memory picture, the SVG),
//! `header` (device helpers and `tma_encode_<tile>` over `cuTensorMapEncodeIm2col`, built with
//! nvcc where it is installed), errors at their tokens. Snapshots in tests/snapshots.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::process::Command;
use tma_test_support::nvcc::nvcc_with_headers;

mod run;
use run::{scratch, tma};

/// ResNet-50's 3x3 64 -> 64 layer at 56x56 (pad 1), its batch at run time.
const ACT: &str = "tma_im2col! { pub Act: bf16, global = [N = _, H = 56, W = 56, C = 64], channels_per_pixel = 64, pixels_per_column = 128, lower_corner = [-1, -1], upper_corner = [-1, -1], swizzle = 128 }";

/// A tiled tile and two im2col tiles in one file.
const CONV: &str = "// a convolution's operands
tma_2d! { Filter: bf16, global = [K = 64, RSC = 576], boxed = [64, 64], swizzle = 128 }
tma_im2col! {
    Act: bf16,
    global = [N = _, H = 56, W = 56, C = 64],
    channels_per_pixel = 64,
    pixels_per_column = 128,
    lower_corner = [H = -1, W = -1],
    upper_corner = [-1, -1],
    swizzle = 128,
}
tma_im2col! { Seq: u8, global = [N = 4, W = _, C = 32], channels_per_pixel = 32, pixels_per_column = 64, element_strides = [2] }
";

#[test]
fn explain_an_im2col_tile() {
    let r = tma(&["explain", ACT, "--dims", "N=8"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(r.stderr, "");
    insta::assert_snapshot!("explain_im2col", r.stdout);
    // The numbers are the core's: TMA order, the pixels' walk, the picture.
    for want in [
        "TX_BYTES = 16384",
        "globalDim           = [64, 56, 56, 8]",
        "pixelBoxLowerCorner = [-1, -1]",
        "rows 0..55: (0, -1, -1..54), 56 filled",
        "(0,-1,0,8)   (0,-1,0,0)",
    ] {
        assert!(r.stdout.contains(want), "no `{want}`:\n{}", r.stdout);
    }
    // Without the batch: an example binding for the walk, the encode bound at run time.
    let r = tma(&["explain", ACT]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(
        r.stdout
            .contains("bound at run time (tma_encode_act takes the run-time dims); run-time values not given (--dims NAME=..): the walk and the picture take N = 1"),
        "{}",
        r.stdout
    );
    // --dims names the run-time dims of im2col tiles too.
    let r = tma(&["explain", ACT, "--dims", "H=56"]);
    assert_eq!(r.code, 2);
    assert!(r.stderr.contains("`H` is a static dim"), "{}", r.stderr);
    let r = tma(&["explain", ACT, "--dims", "N=0"]);
    assert_eq!(r.code, 1);
    assert!(
        r.stderr
            .contains("im2col tile `act`: the dims given are refused"),
        "{}",
        r.stderr
    );
}

#[test]
fn explain_a_file_of_tiled_and_im2col_tiles() {
    let file = scratch("conv.tma");
    std::fs::write(&file, CONV).unwrap();
    let r = tma(&["explain", file.to_str().unwrap(), "--dims", "N=8,W=100"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(
        r.stdout.starts_with("tile `filter` (Filter)"),
        "{}",
        r.stdout
    );
    assert!(r.stdout.contains("\nim2col tile `act` (Act)"));
    assert!(r.stdout.contains("\nim2col tile `seq` (Seq)"));
    // Seq walks W by 2 from its lower corner 0: rows 0..49 take W = 0, 2, .., 98, then the
    // next image.
    assert!(
        r.stdout.contains("rows 0..49: (0, 0..98) step 2"),
        "{}",
        r.stdout
    );
    assert!(
        r.stdout.contains("rows 50..63: (1, 0..26) step 2"),
        "{}",
        r.stdout
    );
}

#[test]
fn explain_errors_point_at_the_im2col_token() {
    let file = scratch("bad.tma");
    std::fs::write(
        &file,
        "tma_im2col! {\n    Act: bf16,\n    global = [N = 8, H = 56, W = 56, C = 64],\n    channels_per_pixel = 64,\n    pixels_per_column = 1025,\n    lower_corner = [-129, 0],\n}\n",
    )
    .unwrap();
    let r = tma(&["explain", file.to_str().unwrap()]);
    assert_eq!(r.code, 1);
    assert_eq!(r.stdout, "");
    let stderr = r.stderr.replace(file.to_str().unwrap(), "bad.tma");
    insta::assert_snapshot!("explain_im2col_errors", stderr);
    // A macro the reader does not know names the ones it does.
    let r = tma(&["explain", "tma_im2cols! { A: u8 }"]);
    assert_eq!(r.code, 1);
    assert!(
        r.stderr
            .contains("expected one of: tma_1d, tma_2d, tma_3d, tma_4d, tma_5d, tma_im2col"),
        "{}",
        r.stderr
    );
}

#[test]
fn explain_writes_the_svg_of_one_load() {
    let svg = scratch("act.svg");
    let r = tma(&[
        "explain",
        ACT,
        "--dims",
        "N=8",
        "--svg",
        svg.to_str().unwrap(),
    ]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let text = std::fs::read_to_string(&svg).unwrap();
    assert!(text.starts_with("<svg"));
    assert!(text.contains("im2col tile act: bf16 [128 pixels][64 channels], swizzle 128B"));
    // Pixel 1 (line 1) has its chunks 0 and 1 swapped by the 128B swizzle.
    assert!(text.contains(">(0,-1,0,8)<") && text.contains(">(0,-1,-1,0)<"));
    // 128 lines of 8 cells (one pixel a line), and the frame.
    assert_eq!(text.matches("<rect").count(), 128 * 8 + 1);
    // A file of several tiles: one SVG each, named after the tile.
    let file = scratch("conv.tma");
    std::fs::write(&file, CONV).unwrap();
    let many = scratch("conv.svg");
    let r = tma(&[
        "explain",
        file.to_str().unwrap(),
        "--dims",
        "N=8,W=100",
        "--svg",
        many.to_str().unwrap(),
    ]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    for t in ["filter", "act", "seq"] {
        assert!(scratch(&format!("conv-{t}.svg")).is_file(), "no SVG of {t}");
    }
}

#[test]
fn header_holds_the_im2col_helpers_and_encode_and_builds_with_nvcc() {
    let test = "header_holds_the_im2col_helpers_and_encode_and_builds_with_nvcc";
    let file = scratch("conv.tma");
    std::fs::write(&file, CONV).unwrap();
    let out = scratch("conv.cuh");
    let r = tma(&[
        "header",
        file.to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
    ]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let text = std::fs::read_to_string(&out).unwrap();
    for want in [
        "struct tma_filter {",
        "// im2col tile 1: `act` -> struct tma_act",
        "// im2col tile 2: `seq` -> struct tma_seq",
        "inline CUresult tma_encode_filter(",
        "inline CUresult tma_encode_im2col_tile(",
    ] {
        assert!(text.contains(want), "no `{want}` in the header");
    }
    let encode = text.find("#ifndef TMA_ENCODE_act_DEFINED").unwrap();
    insta::assert_snapshot!("header_im2col_encode", &text[encode..]);
    // --mpk adds MPK's names for the tiled tile only: MPK has no im2col tiles.
    let mpk = tma(&["header", file.to_str().unwrap(), "--mpk"]);
    assert_eq!(mpk.code, 0, "{}", mpk.stderr);
    let mpk_part = &mpk.stdout[mpk.stdout.find("// Mirage MPK's contract").unwrap()..];
    assert!(mpk_part.contains("tma_filter") && !mpk_part.contains("tma_act"));
    let Some(nvcc) = nvcc_with_headers(test) else {
        return;
    };
    let cu = scratch("conv.cu");
    std::fs::write(
        &cu,
        r#"#include "conv.cuh"
__global__ void conv_load(const __grid_constant__ CUtensorMap act, const __grid_constant__ CUtensorMap seq) {
  extern __shared__ __align__(1024) unsigned char smem[];
  __shared__ tma_mbarrier bar;
  if (threadIdx.x == 0) { tma_mbarrier_init(&bar, 1); tma_fence_mbarrier_init(); }
  __syncthreads();
  if (threadIdx.x == 0) {
    tma_mbarrier_arrive_expect_tx(&bar, tma_act::TX_BYTES + tma_seq::TX_BYTES);
    tma_act::load(&act, &bar, smem, {.N = 0, .H = -1, .W = -1, .C = 0}, {.H = 0, .W = 0});
    tma_seq::load(&seq, &bar, smem + tma_act::SMEM_BYTES, {.N = 0, .W = 0, .C = 0}, {.W = 1});
  }
  tma_mbarrier_wait(&bar, 0);
}
int host(void* act, void* seq) {
  CUtensorMap a, s;
  tma_encode_error e;
  return (int)tma_encode_act(&a, act, 8ull << 20, 8ull, &e) + (int)tma_encode_seq(&s, seq, 1ull << 20, 100ull, &e);
}
"#,
    )
    .unwrap();
    for debug in [false, true] {
        let mut cmd = Command::new(&nvcc);
        cmd.current_dir(cu.parent().unwrap())
            .args(["-arch=sm_90a", "-std=c++20", "-c", "-o"])
            .arg(cu.with_extension(format!("{debug}.o")))
            .arg(&cu);
        if debug {
            cmd.arg("-DTMA_DEBUG");
        }
        let o = cmd.output().unwrap();
        let log = String::from_utf8_lossy(&o.stderr);
        assert!(o.status.success(), "nvcc (TMA_DEBUG {debug}):\n{log}");
    }
}

#[test]
fn one_name_one_tile_and_compile_refuses_im2col() {
    let file = scratch("clash.tma");
    std::fs::write(
        &file,
        "tma_2d! { Act: bf16, global = [M = 64, K = 64], boxed = [64, 64] }\ntma_im2col! { Act: bf16, global = [8, 8, 8, 64], channels_per_pixel = 64, pixels_per_column = 8 }\n",
    )
    .unwrap();
    let r = tma(&["header", file.to_str().unwrap()]);
    assert_eq!(r.code, 1);
    assert!(
        r.stderr.contains("two tiles are named `act`"),
        "{}",
        r.stderr
    );
    assert!(r.stderr.contains(":2:15"), "{}", r.stderr);
    let kernel = scratch("k.cu");
    std::fs::write(&kernel, "__global__ void k() {}\n").unwrap();
    let r = tma(&["compile", kernel.to_str().unwrap(), "--tile", ACT]);
    assert_eq!(r.code, 1);
    assert!(
        r.stderr
            .contains("`Act` is an im2col tile: `tma compile` and `tma precompile` take tiled tiles and pipelines only"),
        "{}",
        r.stderr
    );
}
