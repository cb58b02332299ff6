//! The per-role timeline (`CompileOptions::timeline`, `tma::runtime::timeline`).
//!
//! Without a GPU (CI: NVRTC and cuobjdump never skip under `CI=true`):
//! - off, it is compiled out: a ring kernel of this file and two GEMM configurations of
//!   examples/05-gemm (L5, warp-specialized; L1, one warpgroup), each rendered as tma renders
//!   it and again with every `#if defined(TMA_TIMELINE)` block taken out of the text, compile
//!   with the option off to the same CUBIN, byte for byte (and so the same SASS); outside those
//!   blocks the source names nothing of the timeline, so a recording site outside its `#if`
//!   makes the two differ or the text check fail;
//! - on, the SASS differs: it reads `%globaltimer` and stores events.
//!
//! On the GPU: a ring (one producer warp, two consumer warps, 3 stages, 40 passes per block over
//! 6 blocks) whose consumers sum every stage (checked against the CPU) records a timeline that
//! makes sense: per block and pass one acquire and one load of the producer and one wait and
//! one release per consumer warp, stage = pass mod 3; acquire ends before the load, the load
//! before the waits end, each wait ends before its release, and the producer's acquire of a
//! stage's next use ends after every consumer released it. A buffer of fewer passes drops
//! (and counts) exactly the rest; a module compiled without the timeline refuses a buffer.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

#[allow(dead_code)]
#[path = "../examples/05-gemm/kernel.rs"]
mod gemm;

use std::collections::BTreeMap;
use std::path::PathBuf;

use tma::pipeline::{Consumers, PipelineSpec, WarpRoles};
use tma::plan::{KernelPlan, ValidKernelPlan};
use tma::render::KernelSource;
use tma::runtime::timeline::{SvgOptions, Timeline, TimelineEvent, TimelineKind};
use tma::runtime::{CompileOptions, Compiler, Error, Module, Source, TensorMap};
use tma::{validate, Arch, DType, TileSpec, ValidSpec};

const ROWS: u64 = 16 * 29;
const STAGES: u32 = 3;
const PASSES: i32 = 40;
const GRID: u32 = 6;

fn tile() -> ValidSpec {
    validate(&TileSpec::new("tl", DType::U32, [ROWS, 32], [16, 32]).dim_names(["r", "c"])).unwrap()
}

fn plan() -> ValidKernelPlan {
    let ring = PipelineSpec::new("ring", STAGES, Consumers::Warps(2))
        .tile("x", &tile())
        .validate()
        .unwrap();
    let roles = WarpRoles::warps("tl", 1, 2).validate().unwrap();
    KernelPlan::new("timeline_ring")
        .pipeline(&ring)
        .roles(&roles)
        .validate()
        .unwrap()
}

/// The line `BODY`'s text starts on (compile errors name this file's lines).
const BODY_LINE: u32 = line!() + 1;
const BODY: &str = r#"
// The rows pass k of block b loads.
__device__ __forceinline__ int tl_row(int k, int b) { return ((k * 7 + b * 3) % 29) * 16; }

extern "C" __global__ void TMA_PLAN_TIMELINE_RING_LAUNCH_BOUNDS
timeline_ring(const __grid_constant__ CUtensorMap in, int passes, unsigned* sums) {
  typedef tma_plan_timeline_ring P;
  typedef tma_roles_tl R;
  extern __shared__ __align__(16) unsigned char raw[];
  const tma_pipe_ring pipe = P::ring(P::base(raw));
  pipe.init();
  tma_pipe_ring::state s;
  if (R::is_producer()) {
    for (int k = 0; k < passes; ++k, ++s) {
      pipe.acquire(s);
      if (tma_elect_one()) pipe.load(s, &in, {.r = tl_row(k, (int)blockIdx.x), .c = 0});
      __syncwarp();
    }
  } else {
    const unsigned lane = R::thread_in_consumer();
    unsigned sum = 0u;
    for (int k = 0; k < passes; ++k, ++s) {
      pipe.wait(s);
      const unsigned* x = reinterpret_cast<const unsigned*>(pipe.smem_x(s));
      for (unsigned i = lane; i < 16u * 32u; i += 32u) sum += x[i] * (unsigned)(k + 1);
      pipe.release(s);
    }
    for (int o = 16; o > 0; o /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, o);
    if (lane == 0u) sums[blockIdx.x * R::CONSUMERS + R::consumer_index()] = sum;
  }
  pipe.finish();
}
"#;

fn ring_source() -> Source {
    Source::kernel(
        &KernelSource::new()
            .plan(&plan())
            .body_at(file!(), BODY_LINE, BODY),
    )
    .unwrap()
}

fn options(timeline: bool) -> CompileOptions {
    CompileOptions::new(Arch::Sm90a)
        .debug_waits(false)
        .timeline(timeline)
}

/// The sources of the SASS comparison: the ring, and the GEMM's L5 and L1 configurations.
fn sources() -> Vec<(String, Source)> {
    let mut v = vec![("timeline_ring".to_string(), ring_source())];
    let l1 = gemm::Config::ladder(gemm::In::BF16)[0].1;
    for c in [gemm::Config::L5, l1] {
        v.push((
            format!("gemm {c}"),
            gemm::Plan::new(c).unwrap().source().unwrap(),
        ));
    }
    v
}

/// `src` without its `#if defined(TMA_TIMELINE)` blocks (each up to its own `#endif`; none
/// may hold an `#else`), and how many there were.
fn strip_timeline(src: &str) -> (String, usize) {
    let mut out = String::new();
    let mut blocks = 0;
    let mut depth = 0usize; // inside a timeline block: its nesting of #if
    for line in src.lines() {
        let t = line.trim_start();
        if depth == 0 {
            if t.trim_end() == "#if defined(TMA_TIMELINE)" {
                depth = 1;
                blocks += 1;
            } else {
                out.push_str(line);
                out.push('\n');
            }
            continue;
        }
        if t.starts_with("#if") {
            depth += 1;
        } else if t.starts_with("#endif") {
            depth -= 1;
        } else if depth == 1 && (t.starts_with("#else") || t.starts_with("#elif")) {
            panic!(
                "a timeline block has an `{t}`: its other branch is compiled without the timeline"
            );
        }
    }
    assert_eq!(depth, 0, "an unclosed timeline block");
    (out, blocks)
}

/// `src` less its `//` comments (what the text check reads).
fn code_of(src: &str) -> String {
    src.lines()
        .map(|l| l.split_once("//").map_or(l, |(code, _)| code))
        .collect::<Vec<_>>()
        .join("\n")
}

/// SASS instructions of `sass` whose opcode starts with `op` (e.g. `STG`).
fn count(sass: &str, op: &str) -> usize {
    sass.split(|c: char| !c.is_ascii_alphanumeric() && c != '.' && c != '_')
        .filter(|w| w.split('.').next().is_some_and(|o| o == op))
        .count()
}

#[test]
fn timeline_off_is_the_sass_without_it_and_on_reads_the_globaltimer() {
    let test = "timeline_off_is_the_sass_without_it_and_on_reads_the_globaltimer";
    if tma_test_support::skip::require_nvrtc_or_skip(test).is_none() {
        return;
    }
    let Some(cuobjdump) = tma_test_support::skip::require_tool_or_skip(test, "cuobjdump") else {
        return;
    };
    let compiler = Compiler::global().unwrap();
    let compile = |text: &str, timeline: bool| {
        compiler
            .compile_source(&Source::new(text), &options(timeline))
            .unwrap_or_else(|e| panic!("{e}"))
    };
    for (name, source) in sources() {
        let full = source.text();
        let (stripped, blocks) = strip_timeline(full);
        // The state's pass (field, advance), the recorder, and acquire, load, wait, release.
        assert!(blocks >= 7, "{name}: {blocks} timeline blocks");
        let code = code_of(&stripped);
        for word in ["tma_timeline", "TMA_TIMELINE_", ".pass"] {
            assert!(
                !code.contains(word),
                "{name}: `{word}` outside the #if defined(TMA_TIMELINE) blocks"
            );
        }
        let off = compile(full, false);
        let without = compile(&stripped, false);
        assert!(off.cubin.starts_with(b"\x7fELF"), "{name}: no CUBIN");
        let (sass_off, sass_without) = (
            tma_test_support::skip::sass(&cuobjdump, &off.cubin, "timeline-off"),
            tma_test_support::skip::sass(&cuobjdump, &without.cubin, "timeline-without"),
        );
        if let Some((i, (a, b))) = (sass_off.lines().zip(sass_without.lines()))
            .enumerate()
            .find(|(_, (a, b))| a != b)
        {
            panic!("{name}: the timeline off changes the SASS at line {i}:\n  with the blocks:    {a}\n  without them:      {b}");
        }
        assert_eq!(
            sass_off.lines().count(),
            sass_without.lines().count(),
            "{name}: the timeline off changes the SASS's length"
        );
        assert!(
            off.cubin == without.cubin,
            "{name}: the timeline off changes the CUBIN ({} vs {} bytes) though not its SASS",
            off.cubin.len(),
            without.cubin.len()
        );
        let on = compile(full, true);
        let sass_on = tma_test_support::skip::sass(&cuobjdump, &on.cubin, "timeline-on");
        let timer = |s: &str| s.matches("SR_GLOBALTIMER").count();
        println!(
            "{name}: {blocks} timeline blocks; off {} B CUBIN (= without them), on {} B; \
             globaltimer reads off {} / on {}, STG off {} / on {}",
            off.cubin.len(),
            on.cubin.len(),
            timer(&sass_off),
            timer(&sass_on),
            count(&sass_off, "STG"),
            count(&sass_on, "STG")
        );
        assert_eq!(timer(&sass_off), 0, "{name}: off reads the globaltimer");
        assert!(timer(&sass_on) > 0, "{name}: on reads no globaltimer");
        assert!(
            count(&sass_on, "STG") > count(&sass_off, "STG"),
            "{name}: on stores no events"
        );
        assert!(
            !sass_on.contains("LDL") && !sass_on.contains("STL"),
            "{name}: the timeline spills to local memory"
        );
    }
}

/// A stripper that can fail: a block with an `#else` is refused, a nested `#if` is kept whole.
#[test]
fn the_stripper_takes_out_whole_blocks_only() {
    let (s, n) = strip_timeline(
        "a\n#if defined(TMA_TIMELINE)\n#if X\nb\n#endif\nc\n#endif\nd\n#if defined(TMA_DEBUG)\ne\n#endif\n",
    );
    assert_eq!(
        (s.as_str(), n),
        ("a\nd\n#if defined(TMA_DEBUG)\ne\n#endif\n", 1)
    );
    let r = std::panic::catch_unwind(|| {
        strip_timeline("#if defined(TMA_TIMELINE)\na\n#else\nb\n#endif\n")
    });
    assert!(r.is_err());
}

/// Per block, the events of (warp, pass, kind).
type ByBlock = BTreeMap<u32, BTreeMap<(u32, u32, TimelineKind), TimelineEvent>>;

fn by_block(events: &[TimelineEvent]) -> ByBlock {
    let mut m: ByBlock = BTreeMap::new();
    for e in events {
        let old = m
            .entry(e.block)
            .or_default()
            .insert((e.warp, e.pass, e.kind), *e);
        assert!(old.is_none(), "two events in one slot: {e:?}");
    }
    m
}

#[test]
fn gpu_the_ring_records_an_ordered_timeline() {
    let test = "gpu_the_ring_records_an_ordered_timeline";
    let Some(_) = tma_test_support::skip::require_gpu_or_skip(test) else {
        return;
    };
    let ctx = cudarc::driver::CudaContext::new(0).unwrap();
    let stream = ctx.default_stream();
    let compiler = Compiler::global().unwrap();
    let module = Module::compile_and_load(&ctx, compiler, &ring_source(), &options(true)).unwrap();
    let kernel = module.kernel("timeline_ring").unwrap();

    let n = (ROWS * 32) as usize;
    let mut seed = 0x9e37_79b9_7f4a_7c15u64 ^ u64::from(std::process::id());
    println!("seed {seed:#x}");
    let input: Vec<u32> = (0..n)
        .map(|_| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            (seed >> 32) as u32
        })
        .collect();
    let d_in = stream.clone_htod(&input).unwrap();
    let map = TensorMap::new(&tile().bind(&[ROWS, 32], None).unwrap(), &d_in).unwrap();
    let mut sums = stream.alloc_zeros::<u32>(GRID as usize * 2).unwrap();
    let cfg = kernel.plan_config(&stream, (GRID, 1, 1)).unwrap();
    let launch = |timeline: &Timeline, sums: &mut cudarc::driver::CudaSlice<u32>| {
        // SAFETY: timeline_ring(CUtensorMap, int, unsigned*): a map of the ring's tile over a
        // live ROWS x 32 buffer, the passes, GRID x 2 sums; the plan's launch.
        unsafe {
            kernel
                .launch_builder(&cfg)
                .arg(&map)
                .arg(&PASSES)
                .arg(sums)
                .launch()
        }
        .unwrap();
        timeline.read().unwrap()
    };

    let timeline = Timeline::attach(&module, &cfg, PASSES as u32).unwrap();
    let shape = timeline.shape();
    assert_eq!((shape.blocks, shape.warps, shape.pipelines), (GRID, 3, 1));
    let trace = launch(&timeline, &mut sums);
    println!("{}", trace.stats());

    // The consumers read what the producer loaded: every stage's sum, as the CPU sums it.
    let got = stream.clone_dtoh(&sums).unwrap();
    for b in 0..GRID as usize {
        let mut want = 0u32;
        for k in 0..PASSES as usize {
            let row = ((k * 7 + b * 3) % 29) * 16;
            for v in &input[row * 32..(row + 16) * 32] {
                want = want.wrapping_add(v.wrapping_mul(k as u32 + 1));
            }
        }
        assert_eq!(
            (got[2 * b], got[2 * b + 1]),
            (want, want),
            "block {b}'s sums"
        );
    }

    assert_eq!(trace.dropped, 0);
    assert_eq!(trace.pipelines, ["ring"]);
    let passes = PASSES as u32;
    assert_eq!(trace.events.len(), (GRID * passes * 6) as usize);
    let blocks = by_block(&trace.events);
    assert_eq!(blocks.len(), GRID as usize);
    let mut resolution = u64::MAX;
    for (b, ev) in &blocks {
        let get = |warp: u32, pass: u32, kind: TimelineKind| {
            ev.get(&(warp, pass, kind))
                .copied()
                .unwrap_or_else(|| panic!("block {b}: no {kind:?} of warp {warp}, pass {pass}"))
        };
        let sm = get(0, 0, TimelineKind::Acquire).sm;
        for (&(warp, pass, kind), e) in ev {
            assert_eq!(e.stage, pass % STAGES, "{e:?}");
            assert_eq!(e.sm, sm, "a block's events name its SM: {e:?}");
            assert_eq!(e.pipeline, 0);
            let producer = warp == 0;
            assert_eq!(kind.is_producer(), producer, "{e:?}");
        }
        for p in 0..passes {
            let (acq, load) = (
                get(0, p, TimelineKind::Acquire),
                get(0, p, TimelineKind::Load),
            );
            assert!(
                acq.end_ns() <= load.start_ns,
                "block {b} pass {p}: load before its acquire ended"
            );
            if p > 0 {
                let prev = get(0, p - 1, TimelineKind::Load).start_ns;
                assert!(
                    prev <= load.start_ns,
                    "block {b}: loads out of order at pass {p}"
                );
                if load.start_ns > prev {
                    resolution = resolution.min(load.start_ns - prev);
                }
            }
            for warp in 1..=2 {
                let (wait, rel) = (
                    get(warp, p, TimelineKind::Wait),
                    get(warp, p, TimelineKind::Release),
                );
                assert!(
                    load.start_ns <= wait.end_ns(),
                    "block {b} pass {p} warp {warp}: full before its load"
                );
                assert!(
                    wait.end_ns() <= rel.start_ns,
                    "block {b} pass {p} warp {warp}: released before full"
                );
                if p + STAGES < passes {
                    let reuse = get(0, p + STAGES, TimelineKind::Acquire);
                    assert!(
                        rel.start_ns <= reuse.end_ns(),
                        "block {b} pass {p} warp {warp}: stage reacquired before this release"
                    );
                }
            }
        }
    }
    println!("globaltimer: smallest step seen between loads {resolution} ns");
    let json = trace.chrome_json();
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert!(v["traceEvents"].as_array().unwrap().len() > trace.events.len());
    let dir = std::env::var_os("TMA_TIMELINE_OUT").map_or_else(std::env::temp_dir, PathBuf::from);
    std::fs::write(dir.join("timeline_ring.json"), &json).unwrap();
    std::fs::write(
        dir.join("timeline_ring.svg"),
        trace.svg(&SvgOptions::default()),
    )
    .unwrap();
    println!("wrote {}/timeline_ring.json and .svg", dir.display());

    // Fewer passes than the kernel makes: the rest are dropped and counted, none written.
    drop(timeline);
    let short = Timeline::attach(&module, &cfg, passes - 5).unwrap();
    let cut = launch(&short, &mut sums);
    assert_eq!(
        cut.dropped,
        GRID * 5 * 6,
        "every event past the passes is counted"
    );
    assert_eq!(cut.events.len(), (GRID * (passes - 5) * 6) as usize);
    assert!(cut.events.iter().all(|e| e.pass < passes - 5));
    drop(short);
    // No timeline attached: the kernel records nothing and runs as before.
    // SAFETY: as above.
    unsafe {
        kernel
            .launch_builder(&cfg)
            .arg(&map)
            .arg(&PASSES)
            .arg(&mut sums)
            .launch()
    }
    .unwrap();
    module.synchronize(&stream).unwrap();

    // Compiled without the timeline, a module refuses a buffer (and allocates none).
    let off = Module::compile_and_load(&ctx, compiler, &ring_source(), &options(false)).unwrap();
    match Timeline::attach(&off, &cfg, passes) {
        Err(e @ Error::TimelineMissing { .. }) => {
            assert!(
                e.to_string().contains("CompileOptions::timeline(true)"),
                "{e}"
            )
        }
        other => panic!("{other:?}"),
    }
}
