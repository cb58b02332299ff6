//! The `tma` binary as a shell user runs it: output, files written, exit codes. Snapshots of
//! `explain` and `header` (tests/snapshots). Runs from the crate directory.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::process::Command;
use tma_test_support::nvcc::nvcc_with_headers;

mod run;
use run::{scratch, tma};

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
    // A number the lexer refuses is named as a number, at its place (a proptest found `0x`).
    for (number, column) in [("0x", 32), ("0b2", 32)] {
        let decl = format!("tma_2d! {{ A: u8, global = [M = {number}, K = 64], boxed = [8, 8] }}");
        let r = tma(&["explain", &decl]);
        assert_eq!(r.code, 1);
        assert!(
            r.stderr.contains(&format!("`{number}` is no Rust number"))
                && r.stderr.contains(&format!("<argument>:1:{column}")),
            "{}",
            r.stderr
        );
    }
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
    let tile_end = text.find("// tma host encoding").unwrap();
    insta::assert_snapshot!("header_mpk_host_and_mpk", &text[tile_end..]);
    assert!(text[..tile_end].contains("struct tma_mpk_a {"));
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
    for sub in ["explain", "header", "compile", "precompile", "cache"] {
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
    if tma_test_support::skip::require_nvrtc_or_skip(test).is_none() {
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

    // Taken in turn (ping-pong): said so; with two releasing warpgroups, refused at the count.
    let turn = ring.replace("warpgroups(2)", "warpgroups(1)").replace(
        "reserve_smem = 32768,",
        "reserve_smem = 32768,\n    in_turn = true,",
    );
    let r = tma(&["explain", &turn]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(
        r.stdout.contains("taken in turn: each stage"),
        "{}",
        r.stdout
    );
    assert!(!tma(&["explain", ring]).stdout.contains("taken in turn"));
    let r = tma(&["explain", &turn.replace("warpgroups(1)", "warpgroups(2)")]);
    assert_eq!(r.code, 1, "{}", r.stdout);
    assert!(
        r.stderr
            .contains("a pipeline taken in turn is released by the one consumer"),
        "{}",
        r.stderr
    );
}

/// A file of deeply nested brackets is refused at the bracket too deep, with file, line and
/// column: syn's parser recurses per bracket, so without the limit this aborts on a stack
/// overflow. Too long a file and bytes that are not UTF-8 are refused where they start.
#[test]
fn untrusted_text_is_bounded_before_it_is_parsed() {
    let deep = scratch("deep.tma");
    let n = 100_000;
    std::fs::write(
        &deep,
        format!(
            "// nested\ntma_1d! {{ A: u8, global = {}{}, boxed = [1] }}\n",
            "[".repeat(n),
            "]".repeat(n)
        ),
    )
    .unwrap();
    for cmd in ["explain", "header"] {
        let r = tma(&[cmd, deep.to_str().unwrap()]);
        assert_eq!(r.code, 1, "{cmd}: {}", r.stderr);
        assert!(
            r.stderr
                .contains("brackets nested too deep: more than 32 levels"),
            "{}",
            r.stderr
        );
        // Level 33 (the macro's braces are level 1): the 32nd bracket, column 27 + 31.
        let at = format!("--> {}:2:58", deep.display());
        assert!(r.stderr.contains(&at), "{}", r.stderr);
        // The line is shown around the span, not whole.
        assert!(r.stderr.len() < 2_000, "{} bytes", r.stderr.len());
    }
    // The same nesting inside a pipeline's stage tile.
    let ring = format!(
        "tma_pipeline! {{ pub R, stages = 2, consumers = warps(1), tiles = {{ a: tma_1d! {{ A: u8, global = {}{} }} }} }}",
        "(".repeat(n),
        ")".repeat(n)
    );
    let ring_file = scratch("deep_ring.tma");
    std::fs::write(&ring_file, ring).unwrap();
    let r = tma(&["explain", ring_file.to_str().unwrap()]);
    assert_eq!(r.code, 1, "{}", r.stderr);
    assert!(r.stderr.contains("nested too deep"), "{}", r.stderr);

    let big = scratch("big.tma");
    std::fs::write(&big, format!("// {}\n", "x".repeat(2 << 20))).unwrap();
    let r = tma(&["header", big.to_str().unwrap()]);
    assert_eq!(r.code, 1, "{}", r.stderr);
    assert!(
        r.stderr.contains("is longer than 1048576 bytes") && r.stderr.contains(":1:1048577"),
        "{}",
        r.stderr
    );
    let binary = scratch("binary.tma");
    std::fs::write(&binary, b"tma_1d! { A: u8,\n  global = [\xff] }\n").unwrap();
    let r = tma(&["explain", binary.to_str().unwrap()]);
    assert_eq!(r.code, 1, "{}", r.stderr);
    assert!(
        r.stderr.contains("is not UTF-8 text: byte 0xff")
            && r.stderr.contains(&format!("--> {}:2:13", binary.display())),
        "{}",
        r.stderr
    );
}

/// Every refusal exits non-zero: a `--dims` value a tile refuses (1), a name no tile has or a
/// static dim's (2, naming it and the run-time names there are).
#[test]
fn dims_refusals_exit_non_zero_and_name_what_is_known() {
    let decl = "tma_2d! { Q: bf16, global = [S = _, D = 64], boxed = [64, 64], strides = [_, 1], swizzle = 128 }";
    let ok = tma(&["explain", decl, "--dims", "S=4096,stride_S=64"]);
    assert_eq!(ok.code, 0, "{}", ok.stderr);
    let zero = tma(&["explain", decl, "--dims", "S=0"]);
    assert_eq!(zero.code, 1, "{}", zero.stderr);
    assert!(
        zero.stderr
            .contains("error: tile `q`: the dims given are refused")
            && zero.stderr.contains("global[0] (S) = 0"),
        "{}",
        zero.stderr
    );
    let typo = tma(&["explain", decl, "--dims", "SS=4096"]);
    assert_eq!(typo.code, 2, "{}", typo.stderr);
    assert_eq!(
        typo.stderr,
        "error: --dims: `SS` names no dim or stride of these tiles; --dims takes the run-time ones: S, stride_S\n"
    );
    let fixed = tma(&["explain", decl, "--dims", "D=64"]);
    assert_eq!(fixed.code, 2, "{}", fixed.stderr);
    assert!(
        fixed.stderr.contains("`D` is a static dim"),
        "{}",
        fixed.stderr
    );
    let huge = tma(&["explain", decl, "--dims", "S=99999999999999999999999"]);
    assert_eq!(huge.code, 2, "{}", huge.stderr);
    let long = format!("{}=1", "N".repeat(10_000));
    let r = tma(&["explain", decl, "--dims", &long]);
    assert_eq!(r.code, 2);
    assert!(
        r.stderr.contains("... (10000 chars)") && r.stderr.len() < 400,
        "{}",
        r.stderr
    );
}

/// Parse errors name the field and the value; a literal must fit its own suffix; a huge bad
/// name is cut where it is echoed.
#[test]
fn parse_errors_name_the_field_and_the_value() {
    let cases = [
        (
            "tma_1d! { A: u8, global = [256u8], boxed = [64] }",
            "`global`: `256u8` does not fit its own suffix `u8` (u8 holds 0..=255)",
        ),
        (
            "tma_1d! { A: u8, global = [64], boxed = [64], smem_stride = 70000u16 }",
            "`smem_stride`: `70000u16` does not fit its own suffix `u16` (u16 holds 0..=65535)",
        ),
        (
            "tma_1d! { A: u8, global = [64], boxed = [64.0] }",
            "`boxed`: expected an integer, `_`, a name or a string; found the float literal `64.0`",
        ),
        (
            "tma_1d! { A: u8, global = [fn = 64], boxed = [64] }",
            "`global`: the dim name `fn` is a Rust keyword: write `r#fn = ..`",
        ),
        (
            "tma_1d! { A: u8, global = [64i32], boxed = [64] }",
            "`global` takes unsigned integers: `64i32` has the suffix `i32`",
        ),
        (
            "tma_1d! { A: 1.5, global = [64], boxed = [64] }",
            "the dtype: expected an integer, `_`, a name or a string; found the float literal `1.5`",
        ),
        // `_` is a run-time value: as a name it made `struct tma__`.
        (
            "tma_1d! { A: u8, global = [64], boxed = [64], name = _ }",
            "`name` takes a name or a string (`name = \"ring\"`), not `_`",
        ),
    ];
    for (decl, want) in cases {
        let r = tma(&["explain", decl]);
        assert_eq!(r.code, 1, "{decl}: {}", r.stderr);
        assert!(r.stderr.contains(want), "{decl}:\n{}", r.stderr);
        assert!(r.stderr.contains(" --> <argument>:1:"), "{}", r.stderr);
    }
    // `r#fn` is the way to name a dim `fn`.
    let r = tma(&[
        "explain",
        "tma_1d! { A: u8, global = [r#fn = 64], boxed = [64] }",
    ]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let name = "x-".repeat(5_000);
    let r = tma(&[
        "explain",
        &format!("tma_1d! {{ A: u8, global = [64], boxed = [64], name = \"{name}\" }}"),
    ]);
    assert_eq!(r.code, 1);
    assert!(
        r.stderr.contains("... (10002 chars)") && r.stderr.len() < 1_000,
        "{}",
        r.stderr
    );
}

/// Two tiles with one name: an error at the second, with a note of where the first is; across
/// `--tile` sources of `compile` too (refused before NVRTC is needed).
#[test]
fn two_tiles_with_one_name_are_located() {
    let file = scratch("twice.tma");
    std::fs::write(
        &file,
        "tma_1d! { A: u8, global = [64], boxed = [64] }\ntma_1d! {\n  B: u8, global = [64], boxed = [64], name = \"a\" }\n",
    )
    .unwrap();
    let r = tma(&["header", file.to_str().unwrap()]);
    assert_eq!(r.code, 1, "{}", r.stderr);
    let f = file.display();
    assert!(
        r.stderr.contains(&format!("--> {f}:3:3"))
            && r.stderr
                .contains(&format!("= note: the first is declared at {f}:1:11")),
        "{}",
        r.stderr
    );
    let kernel = scratch("empty.cu");
    std::fs::write(&kernel, "").unwrap();
    let r = tma(&[
        "compile",
        kernel.to_str().unwrap(),
        "--tile",
        "tma_1d! { A: u8, global = [64], boxed = [64] }",
        "--tile",
        "tma_1d! { A: u8, global = [128], boxed = [64] }",
    ]);
    assert_eq!(r.code, 1, "{}", r.stderr);
    assert!(
        r.stderr.contains("two tiles are named `a`")
            && r.stderr.contains("--> <--tile 2>:1:11")
            && r.stderr
                .contains("= note: the first is declared at <--tile 1>:1:11"),
        "{}",
        r.stderr
    );
}

/// A pipeline beside other declarations, before them or after: refused at its macro's name,
/// saying a pipeline source holds the pipeline alone (it was "unknown macro `tma_pipeline`",
/// though a source may be one).
#[test]
fn a_pipeline_beside_other_declarations_is_refused_as_such() {
    let tile = "tma_1d! { A: u8, global = [64], boxed = [64] }";
    let pipe = "tma_pipeline! { pub R, stages = 2, consumers = warps(1), tiles = { b: tma_1d! { B: u8, global = [64], boxed = [64] } } }";
    for (text, line) in [
        (format!("{tile}\n{pipe}\n"), 2),
        (format!("{pipe}\n{tile}\n"), 1),
    ] {
        let file = scratch(&format!("pipe_beside_{line}.tma"));
        std::fs::write(&file, &text).unwrap();
        let r = tma(&["header", file.to_str().unwrap()]);
        assert_eq!(r.code, 1, "{}", r.stderr);
        assert!(
            r.stderr
                .contains("error: a `tma_pipeline! { .. }` source holds the pipeline alone")
                && r.stderr
                    .contains(&format!("--> {}:{line}:1", file.display()))
                && !r.stderr.contains("unknown macro"),
            "{}",
            r.stderr
        );
    }
}

/// The `--tile` sources of `compile` and `precompile` hold at most 1 MiB together, as one
/// source may (60 files of 4,000 tiles took 6 GB and 100 s before); refused before NVRTC, at
/// the source that passes the limit.
#[test]
fn tile_sources_are_bounded_together() {
    let pad = format!("// {}\n", "x".repeat(76)).repeat(7_000);
    let (a, b) = (scratch("half_a.tma"), scratch("half_b.tma"));
    std::fs::write(
        &a,
        format!("tma_1d! {{ A: u8, global = [64], boxed = [64] }}\n{pad}"),
    )
    .unwrap();
    std::fs::write(
        &b,
        format!("tma_1d! {{ B: u8, global = [64], boxed = [64] }}\n{pad}"),
    )
    .unwrap();
    let kernel = scratch("bounded.cu");
    std::fs::write(&kernel, "").unwrap();
    let (a, b, k) = (
        a.to_str().unwrap(),
        b.to_str().unwrap(),
        kernel.to_str().unwrap(),
    );
    for cmd in ["compile", "precompile"] {
        let r = tma(&[cmd, k, "--tile", a, "--tile", b]);
        assert_eq!(r.code, 1, "{cmd}: {}", r.stderr);
        assert!(
            r.stderr
                .starts_with("error: the --tile sources hold more than 1048576 bytes together")
                && r.stderr.contains(&format!("with {b} (--tile 2)")),
            "{cmd}: {}",
            r.stderr
        );
    }
}

/// An attribute of 5,000 closures (`#[doc = || || .. 1]`) overflowed the stack (exit 134);
/// now refused at its `#`.
#[test]
fn a_long_attribute_is_refused_not_a_stack_overflow() {
    let decl = format!(
        "tma_1d! {{ #[doc = {}1] A: u8, global = [64], boxed = [64] }}",
        "|| ".repeat(5_000)
    );
    let r = tma(&["explain", &decl]);
    assert_eq!(r.code, 1, "{}", r.stderr);
    assert!(
        r.stderr
            .starts_with("error: this attribute holds more than 128 tokens")
            && r.stderr.contains(" --> <argument>:1:11"),
        "{}",
        r.stderr
    );
}

const RING: &str = "tma_pipeline! {
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
}
";

/// A producer warp loads stages, two consumer warpgroups wait, read and release them. `Ring`,
/// `A` and `B` are the kernel's names for the pipeline and its tiles.
const RING_KERNEL: &str = r#"extern "C" __global__ void ring_sum(const __grid_constant__ CUtensorMap a_map,
                                    const __grid_constant__ CUtensorMap b_map, int k_tiles, float* out) {
  extern __shared__ __align__(16) unsigned char raw[];
  const Ring pipe(raw);
  pipe.init();
  const int m = 128 * (int)(blockIdx.x / 2u), n = 128 * (int)(blockIdx.x / 2u);
  if (threadIdx.x >= Ring::CONSUMER_THREADS) {
    if (threadIdx.x < Ring::CONSUMER_THREADS + 32u) {
      Ring::state s;
      for (int k = 0; k < k_tiles; ++k, ++s) {
        pipe.acquire(s);
        if (tma_elect_one()) {
          pipe.load(s, &a_map, {.M = m, .K = 64 * k}, &b_map, {.N = n, .K = 64 * k});
        }
        __syncwarp();
      }
    }
  } else {
    Ring::state s;
    float acc = 0.0f;
    for (int k = 0; k < k_tiles; ++k, ++s) {
      pipe.wait(s);
      acc += (float)reinterpret_cast<const unsigned short*>(pipe.smem_a(s))[threadIdx.x] + (float)B::TX_BYTES;
      pipe.release(s);
    }
    out[blockIdx.x * blockDim.x + threadIdx.x] = acc;
  }
  pipe.finish();
}
"#;

/// `header` of a pipeline file holds the pipeline's struct and its tiles (helpers and encode
/// functions) and compiles with nvcc, with and without TMA_DEBUG and --mpk.
#[test]
fn header_of_a_pipeline_holds_its_struct_and_builds_with_nvcc() {
    let test = "header_of_a_pipeline_holds_its_struct_and_builds_with_nvcc";
    let file = scratch("ring.tma");
    std::fs::write(&file, RING).unwrap();
    for mpk in [false, true] {
        let out = scratch(&format!("ring_{mpk}.cuh"));
        let mut args = vec![
            "header",
            file.to_str().unwrap(),
            "-o",
            out.to_str().unwrap(),
        ];
        if mpk {
            args.push("--mpk");
        }
        let r = tma(&args);
        assert_eq!(r.code, 0, "{}", r.stderr);
        let text = std::fs::read_to_string(&out).unwrap();
        for want in [
            "struct tma_pipe_gemm_ring {",
            "static constexpr unsigned PIPELINE_ID = 0u;",
            "struct tma_gemm_a {",
            "struct tma_gemm_b {",
            "inline CUresult tma_encode_gemm_a(",
            "inline CUresult tma_encode_gemm_b(",
        ] {
            assert!(text.contains(want), "no `{want}` in the header");
        }
        assert_eq!(text.contains("namespace kernel"), mpk);
        let Some(nvcc) = nvcc_with_headers(test) else {
            return;
        };
        let cu = scratch(&format!("ring_{mpk}.cu"));
        std::fs::write(
            &cu,
            format!(
                "#include \"ring_{mpk}.cuh\"\nusing Ring = tma_pipe_gemm_ring;\nusing B = tma_gemm_b;\n{RING_KERNEL}"
            ),
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
            assert!(
                o.status.success(),
                "nvcc (mpk {mpk}, TMA_DEBUG {debug}):\n{}",
                String::from_utf8_lossy(&o.stderr)
            );
        }
    }
}

/// `compile` with a pipeline file: the kernel names the pipeline and its tiles by their
/// declared types, and NVRTC compiles it to TMA loads (multicast included).
#[test]
fn compile_a_kernel_over_a_pipeline() {
    let file = scratch("ring_c.tma");
    std::fs::write(&file, RING).unwrap();
    let kernel = scratch("ring.cu");
    std::fs::write(
        &kernel,
        RING_KERNEL
            .replace("Ring", "GemmRing")
            .replace("B::", "GemmB::"),
    )
    .unwrap();
    let source = scratch("ring_full.cu");
    // The assembled source needs no NVRTC: written before the compile.
    let r = tma(&[
        "compile",
        kernel.to_str().unwrap(),
        "--tile",
        file.to_str().unwrap(),
        "--source",
        source.to_str().unwrap(),
    ]);
    let text = std::fs::read_to_string(&source).unwrap();
    assert!(
        text.contains("using GemmRing = tma_pipe_gemm_ring;")
            && text.contains("using GemmA = tma_gemm_a;")
            && text.contains("struct tma_pipe_gemm_ring {"),
        "{text}"
    );
    let test = "compile_a_kernel_over_a_pipeline";
    if tma_test_support::skip::require_nvrtc_or_skip(test).is_none() {
        return;
    }
    assert_eq!(r.code, 0, "{}", r.stderr);
    let ptx = scratch("ring.ptx");
    for debug in [false, true] {
        let mut args = vec![
            "compile",
            kernel.to_str().unwrap(),
            "--tile",
            file.to_str().unwrap(),
            "--ptx",
            ptx.to_str().unwrap(),
        ];
        if debug {
            args.push("--debug");
        }
        let r = tma(&args);
        assert_eq!(r.code, 0, "debug {debug}: {}", r.stderr);
        let ptx = std::fs::read_to_string(&ptx).unwrap();
        assert!(ptx.contains(".entry ring_sum"), "debug {debug}");
        assert!(
            ptx.contains(".multicast::cluster"),
            "debug {debug}: no multicast"
        );
    }
}
