//! Every generated kernel compiles for real: each corpus tile's helpers plus a kernel that
//! calls all of them go through NVRTC 13.0 to sm_90a PTX, through ptxas to SASS, and the
//! SASS must hold the TMA instructions the helpers stand for, with no local-memory spills.
//! Runs without a GPU (CI does it); with `CI=true` a missing NVRTC, ptxas or cuobjdump is a
//! failure, not a skip. `scripts/test.sh` installs them from NVIDIA's wheels.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::Path;
use std::process::Command;

use tma::render::{self, corpus::corpus, exercise_body, KernelSource};
use tma::runtime::{CompileOptions, Compiler, Error, Source};
use tma::{Arch, TmaTiles, ValidSpec};
use tma_test_support::skip::require_nvrtc_or_skip;

/// Options for generated helpers (tma-runtime passes `-std=c++20`, `render::CXX_STANDARD`).
fn options(arch: Arch) -> CompileOptions {
    CompileOptions::new(arch)
}

/// What ptxas and the disassembler say about one compiled kernel.
struct Sass {
    text: String,
    /// What ptxas said (`-v`: registers, stack, spills, performance notes).
    log: String,
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
    let kernels = tma::runtime::parse_ptxas_report(&log);
    assert!(
        !kernels.is_empty(),
        "ptxas reported no kernel of {stem}:\n{log}"
    );
    let spill_bytes = kernels.iter().map(|k| k.spill_stores + k.spill_loads).sum();
    let stack_bytes = kernels.iter().map(|k| k.local_bytes).sum();
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
        log,
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
    let (Some(ptxas), Some(cuobjdump)) = (
        tma_test_support::skip::require_tool_or_skip(test, "ptxas"),
        tma_test_support::skip::require_tool_or_skip(test, "cuobjdump"),
    ) else {
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
            let options = options(Arch::Sm90a).debug_waits(debug_waits);
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

/// Each pair of the corpus's wgmma operand tiles makes a kernel (`render::wgmma_exercise_body`:
/// TMA loads, `tma_wgmma<A, B>` over every k-slice, fences, commit, wait) whose sm_90a SASS
/// holds the tensor-core instruction (HGMMA, QGMMA for fp8) once per k-slice and 64-row
/// block, and no local memory.
#[test]
fn wgmma_operand_pairs_compile_to_hgmma_without_local_memory() {
    let test = "wgmma_operand_pairs_compile_to_hgmma_without_local_memory";
    let Some(_) = require_nvrtc_or_skip(test) else {
        return;
    };
    let (Some(ptxas), Some(cuobjdump)) = (
        tma_test_support::skip::require_tool_or_skip(test, "ptxas"),
        tma_test_support::skip::require_tool_or_skip(test, "cuobjdump"),
    ) else {
        return;
    };
    let dir = std::env::temp_dir().join(format!("tma-wgmma-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let compiler = Compiler::global().unwrap();
    let specs = corpus();
    let find = |name: &str| specs.iter().find(|v| v.spec().name == name).unwrap();
    let pairs = render::corpus::operand_pairs();
    assert!(!pairs.is_empty());
    for (a_name, b_name) in pairs {
        let (a, b) = (find(a_name), find(b_name));
        let plan = tma::wgmma::OperandPlan::new(a).unwrap();
        let exercise = render::wgmma_exercise_plan("mma", "operands", a, b)
            .validate()
            .unwrap();
        let text = KernelSource::new()
            .plan(&exercise)
            .body(&render::wgmma_exercise_body(&exercise, "operands").unwrap())
            .build()
            .unwrap();
        // The exercise issues its product a call a k-slice or, `run` 1, as one run
        // (tma_wgmma_k), or, `run` 2, as one run on A's descriptors made first
        // (tma_wgmma_a_descs): each form alone, the others folded away.
        let choices = ["if (run == 2) {", "} else if (run == 1) {"];
        for choice in choices {
            assert_eq!(
                text.matches(choice).count(),
                1,
                "{a_name} x {b_name}: the exercise's choice of form moved"
            );
        }
        let form = |run: u32| {
            Source::new(
                text.replace(choices[0], &format!("if ({}) {{", run == 2))
                    .replace(choices[1], &format!("}} else if ({}) {{", run == 1)),
            )
        };
        let compiled = compiler
            .compile_source(&form(0), &options(Arch::Sm90a))
            .unwrap_or_else(|e| panic!("{a_name} x {b_name}: {e}"));
        let stem = format!("{a_name}_{b_name}");
        let sass = assemble(&ptxas, &cuobjdump, &compiled.ptx, &dir, &stem);
        let runs =
            [(1, "one run"), (2, "one run on A's descriptors made first")].map(|(run, what)| {
                let compiled_run = compiler
                    .compile_source(&form(run), &options(Arch::Sm90a))
                    .unwrap_or_else(|e| panic!("{a_name} x {b_name}, {what}: {e}"));
                assert!(
                    compiled_run.ptx.contains("wgmma.mma_async")
                        && compiled.ptx != compiled_run.ptx,
                    "{stem}: {what}: the source compiled to the calls' PTX"
                );
                let sass_run = assemble(
                    &ptxas,
                    &cuobjdump,
                    &compiled_run.ptx,
                    &dir,
                    &format!("{stem}_run{run}"),
                );
                (what, sass_run)
            });
        let op = if a.spec().dtype.size_bytes() == Some(1) {
            "QGMMA"
        } else {
            "HGMMA"
        };
        let issued = count(&sass.text, op);
        assert!(
            issued as u64 >= plan.k_slices,
            "{stem}: {issued} {op} for {} k-slices\n{}",
            plan.k_slices,
            sass.text
        );
        assert_eq!(sass.spill_bytes, 0, "{stem}: spills");
        assert_eq!(
            count(&sass.text, "LDL") + count(&sass.text, "STL"),
            0,
            "{stem}: local memory\n{}",
            sass.text
        );
        assert!(count(&sass.text, "WARPGROUP") >= 1, "{stem}: wgmma.fence");
        // Every tensor-core instruction with its operands (no address, no encoding).
        let mma = |text: &str| tma_test_support::skip::mma_instructions(text, op);
        for (what, sass_run) in &runs {
            assert_eq!(
                mma(&sass.text),
                mma(&sass_run.text),
                "{stem}: {what}: the instructions"
            );
            assert_eq!(
                count(&sass_run.text, "LDL") + count(&sass_run.text, "STL"),
                0,
                "{stem}: {what}: local memory"
            );
        }
        println!(
            "{stem}: {issued} {op} ({} k-slices x {} blocks), stack {} B, no local memory",
            plan.k_slices, plan.m_blocks, sass.stack_bytes
        );
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

/// The derive's kernel source (tiles, the set struct `tma_attention_tiles`, the parameter
/// macro) makes a kernel that NVRTC compiles with no name or offset pasted into it, and the
/// host side encodes the four maps in the same order.
#[test]
fn a_four_tile_struct_gives_a_kernel_that_compiles() {
    let test = "a_four_tile_struct_gives_a_kernel_that_compiles";
    let Some(_) = require_nvrtc_or_skip(test) else {
        return;
    };
    const BODY: &str = r#"
extern "C" __global__ void attention_copy(TMA_ATTENTION_TILES_PARAMS) {
  using S = tma_attention_tiles;
  extern __shared__ unsigned char raw[];
  __shared__ __align__(8) tma_mbarrier bar;
  unsigned char* smem = tma_align_smem<S>(raw);
  if (threadIdx.x == 0) { tma_mbarrier_init(&bar, 1); tma_fence_mbarrier_init(); }
  __syncthreads();
  const int s0 = blockIdx.x * S::q::BOX_S;
  if (threadIdx.x == 0) {
    tma_expect<S::q, S::k, S::v>(&bar);
    S::q::load(&q_map, &bar, smem + S::OFFSET_q, {.S = s0, .D = 0});
    S::k::load(&k_map, &bar, smem + S::OFFSET_k, {.S = s0, .D = 0});
    S::v::load(&v_map, &bar, smem + S::OFFSET_v, {.S = s0, .D = 0});
  }
  tma_group<S::q, S::k, S::v>::wait(&bar, 0);
  if (threadIdx.x == 0) {
    S::o::store(&o_map, smem + S::OFFSET_v, {.S = s0, .D = 0});
    tma_store_commit_group();
    tma_store_async_wait<0>();
  }
}
"#;
    assert_eq!(AttentionTiles::CUDA_NAME, "tma_attention_tiles");
    assert_eq!(
        AttentionTiles::CUDA_PARAMS_MACRO,
        "TMA_ATTENTION_TILES_PARAMS"
    );
    let source = AttentionTiles::kernel_source().body(BODY).build().unwrap();
    assert!(source.contains(&format!(
        "#define TMA_ATTENTION_TILES_PARAMS {}\n",
        AttentionTiles::cuda_params()
    )));
    // The compile-time helpers hold the same set struct.
    let set_at = AttentionTiles::CUDA_HELPERS
        .find("struct tma_attention_tiles {")
        .unwrap();
    assert!(source.contains(&AttentionTiles::CUDA_HELPERS[set_at..]));
    let compiled = Compiler::global()
        .unwrap()
        .compile(&source, &options(Arch::Sm90a))
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
    let (Some(ptxas), Some(cuobjdump)) = (
        tma_test_support::skip::require_tool_or_skip(test, "ptxas"),
        tma_test_support::skip::require_tool_or_skip(test, "cuobjdump"),
    ) else {
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
    // An operand pair: desc()'s k-slice and block check (WgmmaSliceRange) compiles to
    // nothing as well.
    let specs = corpus();
    let find = |name: &str| specs.iter().find(|v| v.spec().name == name).unwrap();
    for (a_name, b_name) in render::corpus::operand_pairs() {
        let (a, b) = (find(a_name), find(b_name));
        let exercise = render::wgmma_exercise_plan("mma", "operands", a, b)
            .validate()
            .unwrap();
        let full = KernelSource::new()
            .plan(&exercise)
            .body(&render::wgmma_exercise_body(&exercise, "operands").unwrap())
            .build()
            .unwrap();
        let cut = without_debug_blocks(&full);
        assert!(
            full.contains("TMA_RULE_WgmmaSliceRange") && !cut.contains("TMA_RULE_WgmmaSliceRange")
        );
        let sass = |src: &str, stem: &str| {
            let c = compiler
                .compile_source(&Source::new(src), &options)
                .unwrap();
            assemble(&ptxas, &cuobjdump, &c.ptx, &dir, stem).text
        };
        let stem = format!("{a_name}_{b_name}");
        assert_eq!(
            sass(&full, &format!("{stem}_full")),
            sass(&cut, &format!("{stem}_cut")),
            "{stem}: desc()'s debug check changes the release SASS"
        );
    }
    // A multicast pipeline: init()'s launch check, the multicast branch's mask and mbarrier
    // checks and the debug waits compile to nothing as well.
    let full = multicast_pipeline_kernel();
    let cut = without_debug_blocks(&full);
    assert!(full.contains("tma_debug_check_pipeline_launch(PIPELINE_ID"));
    assert!(!cut.contains("tma_debug_check_pipeline_launch(PIPELINE_ID"));
    let sass = |src: &str, stem: &str| {
        let c = compiler
            .compile_source(&Source::new(src), &options)
            .unwrap();
        assemble(&ptxas, &cuobjdump, &c.ptx, &dir, stem).text
    };
    let (full_sass, cut_sass) = (sass(&full, "pipe_full"), sass(&cut, "pipe_cut"));
    assert!(count(&full_sass, "UTMALDG") >= 2, "{full_sass}");
    assert_eq!(
        full_sass, cut_sass,
        "the pipeline's debug checks change the release SASS"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// The release bound of the waits keeps the hot path lean: compiled with bounded waits
/// (opted in, `bounded_waits(true)`) and with the bare loop (the default), every corpus kernel, the
/// multicast pipeline kernel and a warp-specialised kernel (setmaxnreg, a pipeline's acquire
/// and wait) issue the same TMA, mbarrier-arrive and setmaxnreg instructions; the bounded
/// build adds a %globaltimer read and a trap (the slow path) and no call, no stack, no local
/// memory, and ptxas keeps the setmaxnreg (a call would make it drop them: C7507); the bare
/// build has neither timer nor trap.
#[test]
fn bounded_waits_keep_the_release_sass_lean() {
    let test = "bounded_waits_keep_the_release_sass_lean";
    let Some(_) = require_nvrtc_or_skip(test) else {
        return;
    };
    let (Some(ptxas), Some(cuobjdump)) = (
        tma_test_support::skip::require_tool_or_skip(test, "ptxas"),
        tma_test_support::skip::require_tool_or_skip(test, "cuobjdump"),
    ) else {
        return;
    };
    let dir = std::env::temp_dir().join(format!("tma-bounded-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let compiler = Compiler::global().unwrap();
    let mut sources: Vec<(String, String)> = corpus()
        .iter()
        .map(|v| {
            let src = KernelSource::new()
                .tile(v)
                .body(&exercise_body(v))
                .build()
                .unwrap();
            (v.spec().name.clone(), src)
        })
        .collect();
    sources.push(("multicast_pipe".into(), multicast_pipeline_kernel()));
    sources.push(("roles_pipe".into(), warp_roles_pipeline_kernel()));
    let release = CompileOptions::new(Arch::Sm90a).debug_waits(false);
    for (name, src) in &sources {
        let sass = |bounded: bool| {
            // The bare loop is the release default: no option asks for it.
            let options = if bounded {
                release.clone().bounded_waits(true)
            } else {
                release.clone()
            };
            let c = compiler
                .compile_source(&Source::new(src.as_str()), &options)
                .unwrap();
            assemble(
                &ptxas,
                &cuobjdump,
                &c.ptx,
                &dir,
                &format!("{name}_{bounded}"),
            )
        };
        let (bounded, bare) = (sass(true), sass(false));
        for op in ["UTMALDG", "UTMASTG", "UTMAREDG", "UTMAPF", "USETMAXREG"] {
            assert_eq!(
                count(&bounded.text, op),
                count(&bare.text, op),
                "{name}: {op}"
            );
        }
        let arrives = |t: &str| t.matches("SYNCS.ARRIVE").count();
        assert_eq!(
            arrives(&bounded.text),
            arrives(&bare.text),
            "{name}: arrives"
        );
        assert!(bounded.text.contains("SR_GLOBALTIMER"), "{name}: no timer");
        assert!(bounded.text.contains("BPT.TRAP"), "{name}: no trap");
        assert!(
            !bare.text.contains("SR_GLOBALTIMER") && !bare.text.contains("BPT.TRAP"),
            "{name}: bare"
        );
        assert_eq!(
            count(&bounded.text, "CALL"),
            0,
            "{name}: a call\n{}",
            bounded.text
        );
        assert_eq!((bounded.spill_bytes, bounded.stack_bytes), (0, 0), "{name}");
        assert_eq!(
            count(&bounded.text, "LDL") + count(&bounded.text, "STL"),
            0,
            "{name}: local memory"
        );
        assert!(!bounded.log.contains("C7507"), "{name}: {}", bounded.log);
        println!(
            "{name}: {} instructions bounded, {} bare",
            bounded.text.matches(" ;").count(),
            bare.text.matches(" ;").count()
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// A warp-specialised kernel shaped like the GEMM's: a producer warpgroup at 40 registers
/// acquiring and loading the stages of a 4-stage ring, two consumer warpgroups at 232 waiting
/// and releasing them.
fn warp_roles_pipeline_kernel() -> String {
    use tma::pipeline::{Consumers, PipelineSpec, WarpRoles};
    use tma::{validate, DType, Swizzle, TileSpec};
    let a = validate(
        &TileSpec::new("la", DType::BF16, [4096, 64], [64, 64])
            .dim_names(["r", "c"])
            .swizzle(Swizzle::B128),
    )
    .unwrap();
    let pipe = PipelineSpec::new("lean", 4, Consumers::Warpgroups(2))
        .tile("a", &a)
        .validate()
        .unwrap();
    let roles = WarpRoles::new("lean", 40, 2, 232).validate().unwrap();
    KernelSource::new()
        .pipeline(&pipe)
        .warp_roles(&roles)
        .body(
            r#"
extern "C" __global__ void TMA_ROLES_LEAN_LAUNCH_BOUNDS roles_kernel(const __grid_constant__ CUtensorMap a, int n,
                                                                     float* out) {
  extern __shared__ __align__(16) unsigned char raw[];
  const tma_pipe_lean pipe(raw);
  pipe.init();
  tma_pipe_lean::state s;
  if (tma_roles_lean::is_producer()) {
    tma_roles_lean::producer_setmaxnreg();
    if (threadIdx.x == 0u) {
      for (int k = 0; k < n; ++k, ++s) {
        pipe.acquire(s);
        pipe.load(s, &a, {.r = k * 64, .c = 0});
      }
    }
  } else {
    tma_roles_lean::consumer_setmaxnreg();
    float acc = 0.0f;
    for (int k = 0; k < n; ++k, ++s) {
      pipe.wait(s);
      acc += static_cast<float>(pipe.stage(s)[threadIdx.x]);
      pipe.release(s);
    }
    out[blockIdx.x * blockDim.x + threadIdx.x] = acc;
  }
}
"#,
        )
        .build()
        .unwrap()
}

/// A kernel streaming a 2-CTA multicast pipeline (one tile multicast along x, one alone).
fn multicast_pipeline_kernel() -> String {
    use tma::pipeline::{ClusterAxis, Consumers, PipelineSpec};
    use tma::{validate, DType, Swizzle, TileSpec};
    let a = validate(
        &TileSpec::new("pa", DType::BF16, [4096, 64], [32, 64])
            .dim_names(["r", "c"])
            .swizzle(Swizzle::B128)
            .repeat([2, 1]),
    )
    .unwrap();
    let b = validate(&TileSpec::new("pb", DType::U32, [4096, 16], [32, 16]).dim_names(["r", "c"]))
        .unwrap();
    let pipe = PipelineSpec::new("sass", 3, Consumers::Threads(128))
        .multicast_tile("a", &a, ClusterAxis::X)
        .tile("b", &b)
        .cluster([2, 1, 1])
        .validate()
        .unwrap();
    KernelSource::new()
        .pipeline(&pipe)
        .body(
            r#"
extern "C" __global__ void pipe_kernel(const __grid_constant__ CUtensorMap a, const __grid_constant__ CUtensorMap b,
                                       int n, unsigned* out) {
  extern __shared__ __align__(16) unsigned char raw[];
  const tma_pipe_sass pipe(raw);
  pipe.init();
  tma_pipe_sass::state s;
  unsigned acc = 0u;
  for (int k = 0; k < n; ++k, ++s) {
    if (threadIdx.x == 0u) {
      pipe.acquire(s);
      pipe.load(s, &a, {.r = k * 64, .c = 0}, &b, {.r = k * 32, .c = 0});
    }
    pipe.wait(s);
    acc += pipe.stage(s)[threadIdx.x];
    pipe.release(s);
  }
  out[blockIdx.x * blockDim.x + threadIdx.x] = acc;
  pipe.finish();
}
"#,
        )
        .build()
        .unwrap()
}

/// A kernel loading one `[M][K]` tile at the coordinates `coords` (a brace list).
fn coordinate_kernel(coords: &str) -> String {
    let valid = tma::validate(
        &tma::TileSpec::new("rows", tma::DType::F32, [1024, 256], [32, 32]).dim_names(["M", "K"]),
    )
    .unwrap();
    KernelSource::new()
        .tile_as(&valid, "Rows")
        .body(&format!(
            r#"
extern "C" __global__ void load_rows(const __grid_constant__ CUtensorMap map, int m0, int k0) {{
  extern __shared__ unsigned char raw[];
  __shared__ alignas(8) tma_mbarrier bar;
  unsigned char* smem = tma_align_smem<Rows>(raw);
  if (threadIdx.x == 0) {{
    tma_mbarrier_init(&bar, 1);
    tma_fence_mbarrier_init();
    tma_expect<Rows>(&bar);
    Rows::load(&map, &bar, smem, {coords});
  }}
  tma_group<Rows>::wait(&bar, 0);
}}
"#
        ))
        .build()
        .unwrap()
}

/// Coordinates are named, and C++20 takes designated initializers only in declaration
/// order: `{.M = m0, .K = k0}` compiles; swapped, positional or misnamed, it does not, and
/// NVRTC says why.
#[test]
fn swapped_coordinates_do_not_compile() {
    let test = "swapped_coordinates_do_not_compile";
    if require_nvrtc_or_skip(test).is_none() {
        return;
    }
    let compiler = Compiler::global().unwrap();
    let compile =
        |coords: &str| compiler.compile(&coordinate_kernel(coords), &options(Arch::Sm90a));
    let ok = compile("{.M = m0, .K = k0}").unwrap_or_else(|e| panic!("{e}"));
    assert!(ok.ptx.contains("cp.async.bulk.tensor.2d"));
    for (coords, says) in [
        ("{.K = k0, .M = m0}", "out-of-order initializers"),
        ("{m0, k0}", "tma_name_each_coordinate"),
        ("{.m = m0, .K = k0}", "has no field \"m\""),
    ] {
        match compile(coords) {
            Err(Error::Compile { log, .. }) => {
                assert!(log.contains(says), "{coords}: NVRTC said\n{log}");
                println!(
                    "{coords}: {}",
                    log.lines().find(|l| l.contains("error")).unwrap_or(&log)
                );
            }
            Ok(_) => panic!("{coords} compiled"),
            Err(other) => panic!("{coords}: {other}"),
        }
    }
}

/// `tma_group<A, B, A>` arms a barrier for the sum of the tiles' TX_BYTES, computed at
/// compile time, and names each tile in its hang-record id (bit 31, then bit `TILE_ID`).
#[test]
fn a_group_expects_the_sum_of_its_tiles() {
    let test = "a_group_expects_the_sum_of_its_tiles";
    if require_nvrtc_or_skip(test).is_none() {
        return;
    }
    let a = tma::validate(&tma::TileSpec::new(
        "a",
        tma::DType::BF16,
        [256, 256],
        [64, 64],
    ))
    .unwrap();
    let b = tma::validate(
        &tma::TileSpec::new("b", tma::DType::F32, [64, 64, 64], [2, 8, 16]).repeat([1, 2, 1]),
    )
    .unwrap();
    let sum = 2 * a.tx_bytes() + b.tx_bytes();
    assert_eq!(sum, 2 * 8192 + 2048);
    let kernel = |want: u64| {
        KernelSource::new()
            .tile_as(&a, "A")
            .tile_as(&b, "B")
            .body(&format!(
                r#"
static_assert(tma_group<A, B, A>::TX_BYTES == {want}u, "the group's bytes");
static_assert(tma_group<A, B, A>::TILE_ID == 0x80000003u, "tiles 0 and 1");
static_assert(tma_group<B>::TX_BYTES == B::TX_BYTES, "one tile");
extern "C" __global__ void arm(unsigned* out) {{
  __shared__ alignas(8) tma_mbarrier bar;
  tma_mbarrier_init(&bar, 1);
  tma_expect<A, B, A>(&bar);
  out[0] = tma_group<A, B, A>::TX_BYTES;
}}
"#
            ))
            .build()
            .unwrap()
    };
    let compiler = Compiler::global().unwrap();
    let compiled = compiler
        .compile(&kernel(sum), &options(Arch::Sm90a))
        .unwrap_or_else(|e| panic!("{e}"));
    // The sum is an immediate: no run-time arithmetic.
    assert!(
        compiled.ptx.contains(&format!(", {sum};")),
        "{}",
        compiled.ptx
    );
    // The same check refuses a wrong sum, so it is a check.
    match compiler.compile(&kernel(sum + 16), &options(Arch::Sm90a)) {
        Err(Error::Compile { log, .. }) => assert!(log.contains("the group's bytes"), "{log}"),
        other => panic!("a wrong sum compiled: {other:?}"),
    }
}

/// A group's hang-record id lists tiles 0 to 29 one bit each and sets bit 30 for the rest:
/// 31 tiles in one source, a group of tiles 1, 29 and 30, decoded by `render::HangTiles`.
#[test]
fn a_group_id_lists_low_tiles_and_flags_the_rest() {
    let test = "a_group_id_lists_low_tiles_and_flags_the_rest";
    if require_nvrtc_or_skip(test).is_none() {
        return;
    }
    let mut source = KernelSource::new();
    for i in 0..31 {
        let spec = tma::TileSpec::new(format!("t{i}"), tma::DType::U8, [64], [16]);
        let valid = tma::validate(&spec).unwrap();
        source = match i {
            1 => source.tile_as(&valid, "T1"),
            29 => source.tile_as(&valid, "T29"),
            30 => source.tile_as(&valid, "T30"),
            _ => source.tile(&valid),
        };
    }
    let id = render::GROUP_TILE_ID_FLAG | 1 << 1 | 1 << 29 | render::GROUP_MORE_TILES;
    assert_eq!(
        render::HangTiles::decode(id),
        render::HangTiles::Group {
            tiles: vec![1, 29],
            more: true
        }
    );
    let text = source
        .body(&format!(
            "static_assert(tma_group<T1, T29, T30>::TILE_ID == {id:#x}u, \"tiles 1, 29 and more\");\n"
        ))
        .build()
        .unwrap();
    Compiler::global()
        .unwrap()
        .compile(&text, &options(Arch::Sm90a))
        .unwrap_or_else(|e| panic!("{e}"));
}

/// Two headers rendered apart and included in one translation unit, each with B tiles of the
/// same instruction shape (bf16, N = 64) but another k-slice count (8 and 16): each run
/// (`tma_wgmma_run<..., 64, S>`) has its own include guard, so the second header adds the count
/// the first lacks and a kernel issues both through `tma_wgmma_k`. NVRTC only.
#[test]
fn a_second_header_adds_the_runs_the_first_lacks() {
    let test = "a_second_header_adds_the_runs_the_first_lacks";
    let Some(_) = require_nvrtc_or_skip(test) else {
        return;
    };
    use tma::spec::{Major, Operand};
    let tile = |name: &str, rows: u64, d: u64, operand| {
        tma::validate(
            &tma::TileSpec::new(name, tma::DType::BF16, [rows, d], [rows as u32, 64])
                .dim_names(["S", "D"])
                .swizzle(tma::Swizzle::B128)
                .repeat([1, (d / 64) as u32])
                .wgmma(operand, Major::K),
        )
        .unwrap()
    };
    let first = render::header(&[
        tile("q8", 64, 128, Operand::A),
        tile("k8", 64, 128, Operand::B),
    ])
    .unwrap();
    let second = render::header(&[
        tile("q16", 64, 256, Operand::A),
        tile("k16", 64, 256, Operand::B),
    ])
    .unwrap();
    for (header, s) in [(&first, 8), (&second, 16)] {
        assert!(
            header.contains(&format!("TMA_WGMMA_RUN_M64N64K16_BF16_BF16_S{s}")),
            "the header of {s} k-slices renders its run"
        );
    }
    let kernel = r#"
extern "C" __global__ void both(float* out) {
  extern __shared__ __align__(1024) unsigned char smem[];
  float a[32], b[32];
  tma_wgmma_fence();
  tma_wgmma_k<tma_q8, tma_k8>(a, smem, 0u, smem + 16384, 0);
  tma_wgmma_k<tma_q16, tma_k16>(b, smem, 0u, smem + 32768, 0);
  tma_wgmma_commit_group();
  tma_wgmma_wait_group<0>();
  for (int i = 0; i < 32; ++i) out[threadIdx.x * 32 + i] = a[i] + b[i];
}
"#;
    let compiled = Compiler::global()
        .unwrap()
        .compile_source(
            &Source::new(format!("{first}\n{second}\n{kernel}")),
            &options(Arch::Sm90a),
        )
        .unwrap_or_else(|e| panic!("two headers in one translation unit: {e}"));
    assert_eq!(
        compiled.ptx.matches("wgmma.mma_async").count(),
        8 + 16,
        "both runs issued"
    );
}
