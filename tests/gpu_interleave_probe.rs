//! Probe of interleaved layouts on a GPU: the raw data the model of interleave is fitted to.
//! Not a pass/fail test of the toolkit: for hand-picked and random interleaved encode
//! arguments it records, for loads, the exact transaction bytes the copy counts on the
//! mbarrier and every byte it wrote into a poisoned shared-memory window, and for stores,
//! every global word written and where in shared memory it came from.
//!
//! Global memory holds self-describing words (word `w` of the buffer = `w | 0x5a000000`), the
//! tensor starts 2 MiB into the buffer, and strides are padded, so every byte names its
//! origin. A case that faults ends its process: the runner (`tests/gpu/run-interleave-probe.sh`)
//! starts the next process after it. Output: `$OUT/interleave_raw.txt`, one line per case,
//! replayed against the CPU model without a GPU by `tests/interleave_dumps.rs` (docs/INTERLEAVE.md).
//!
//! `probe_kernels_compile` (no GPU needed) keeps the probe kernels compiling in CI.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

#[path = "gpu/support.rs"]
mod support;

use std::io::Write as _;

use cudarc::driver::{CudaSlice, DevicePtr};
use tma_core::plan::{KernelPlan, ValidKernelPlan, MAX_SCRATCH_ALIGN};
use tma_core::render::KernelSource;
use tma_core::{Arch, DType, EncodeArgs, Interleave, L2Promotion, OobFill, Swizzle};
use tma_runtime::ByValue;
use tma_runtime::{CompileOptions, Compiler, Module, Source};

/// Bytes of poisoned shared memory each load writes into and returns.
const WINDOW: u64 = 200 * 1024;
/// The probe kernels.
const KERNELS: [&str; 2] = ["probe_load", "probe_store"];

/// The plan of probe kernel `kernel`: the window (scratch, aligned to the 128B swizzle's
/// period as the harness aligns its shared memory, so offsets are the model's) on 128 threads.
fn plan(kernel: &str) -> ValidKernelPlan {
    KernelPlan::new(kernel)
        .scratch("window", WINDOW, MAX_SCRATCH_ALIGN)
        .block_threads(128)
        .validate()
        .unwrap()
}

/// The probe kernels and their plans, after the harness whose copy functions they use.
fn probe_source() -> Source {
    let source = KERNELS
        .into_iter()
        .fold(KernelSource::new(), |s, k| s.plan(&plan(k)))
        .body_at("tests/gpu/harness.cu", 1, include_str!("gpu/harness.cu"))
        .body_at(
            "tests/gpu/interleave_probe.cu",
            1,
            include_str!("gpu/interleave_probe.cu"),
        );
    Source::kernel(&source).unwrap()
}
/// Bytes of the global buffer, and where in it the tensor starts.
const GLOBAL_BYTES: usize = 8 << 20;
const BASE: u64 = 2 << 20;

/// `Coords` of the probe kernels: TMA order, innermost first.
#[repr(C)]
#[derive(Clone, Copy)]
struct Coords {
    c: [i32; 5],
}
// SAFETY: plain old data with the CUDA struct's layout.
unsafe impl cudarc::driver::DeviceRepr for Coords {}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Op {
    Load,
    Store,
}

/// One probe: encode arguments in TMA order (innermost first), byte strides without dim 0.
#[derive(Clone, Debug)]
struct Case {
    op: Op,
    dtype: DType,
    dims: Vec<u64>,
    strides: Vec<u64>,
    boxd: Vec<u32>,
    estrides: Vec<u32>,
    interleave: Interleave,
    swizzle: Swizzle,
    coords: Vec<i32>,
    /// Cases the driver may accept but the hardware may fault on go last.
    risky: bool,
}

impl Case {
    fn args(&self) -> EncodeArgs {
        EncodeArgs {
            data_type: self.dtype,
            rank: self.dims.len() as u32,
            global_dim: self.dims.clone(),
            global_strides: self.strides.clone(),
            box_dim: self.boxd.clone(),
            element_strides: self.estrides.clone(),
            interleave: self.interleave,
            swizzle: self.swizzle,
            l2_promotion: L2Promotion::None,
            oob_fill: OobFill::Zero,
        }
    }
    fn json(&self, index: usize) -> String {
        format!(
            "{{\"i\":{index},\"op\":\"{:?}\",\"dtype\":\"{}\",\"esize\":{},\"dims\":{:?},\"strides\":{:?},\"box\":{:?},\"es\":{:?},\"il\":{},\"sw\":{},\"coords\":{:?}}}",
            self.op,
            self.dtype,
            self.dtype.size_bytes().unwrap_or(0),
            self.dims,
            self.strides,
            self.boxd,
            self.estrides,
            self.interleave.chunk_bytes().unwrap_or(0),
            self.swizzle.span_bytes().unwrap_or(0),
            self.coords
        )
    }
}

/// Dense-ish padded byte strides: dim 1 starts at `row` bytes, each outer dim adds `pad`.
fn padded_strides(dims: &[u64], row: u64, pad: u64) -> Vec<u64> {
    let mut out = vec![row];
    for d in 1..dims.len() - 1 {
        let prev = out[d - 1];
        out.push(prev * dims[d] + pad);
    }
    out
}

#[allow(clippy::too_many_arguments)]
fn case(
    op: Op,
    dtype: DType,
    dims: &[u64],
    strides: Vec<u64>,
    boxd: &[u32],
    estrides: &[u32],
    interleave: Interleave,
    swizzle: Swizzle,
    coords: &[i32],
) -> Case {
    let risky =
        dtype.size_bytes() == Some(1) || (interleave == Interleave::B32 && swizzle != Swizzle::B32);
    Case {
        op,
        dtype,
        dims: dims.to_vec(),
        strides,
        boxd: boxd.to_vec(),
        estrides: estrides.to_vec(),
        interleave,
        swizzle,
        coords: coords.to_vec(),
        risky,
    }
}

/// Hand-picked cases, one question each (what box dims 0 / 1 / 2 select, the inner
/// coordinate, several chunks and a partial last one, OOB at every edge, element sizes,
/// element strides, swizzles, 32-byte chunks, ranks 4 and 5, stores), one per line:
/// `op dtype dims strides box element-strides interleave swizzle coords`, all TMA order;
/// `strides` is `row+pad` (padded: dim 1 at `row` bytes, each outer dim adds `pad`) or an
/// explicit byte list. One-byte elements (a public report saw an H100 fault on them) and
/// 32-byte chunks without the 32B swizzle come last.
const TARGETED: &str = "
L u16 8,5,4    48+32  8,3,2   1,1,1 16 0   0,1,1
L u16 8,5,4    48+32  8,5,3   1,1,1 16 0   0,0,0
L u16 8,5,4    48+32  8,1,1   1,1,1 16 0   0,2,3
L u16 8,5,4    48+32  8,2,4   1,1,1 16 0   0,0,0
L u16 8,5,4    48+32  8,4,1   1,1,1 16 0   0,3,1
L u16 8,5,4    48+32  8,3,2   1,1,1 16 0   0,-2,0
L u16 8,5,4    48+32  8,3,2   1,1,1 16 0   0,0,-1
L u16 8,5,4    48+32  8,3,3   1,1,1 16 0   0,1,3
L u16 8,5,4    48+32  8,3,2   1,1,1 16 0   -8,0,0
L u16 8,5,4    48+32  8,3,2   1,1,1 16 0   8,0,0
L u16 8,5,4    48+32  16,3,2  1,1,1 16 0   0,0,0
L u16 16,5,4   64+48  16,3,2  1,1,1 16 0   0,1,1
L u16 16,5,4   64+48  8,3,2   1,1,1 16 0   8,1,1
L u16 16,5,4   64+48  8,3,2   1,1,1 16 0   0,1,1
L u16 16,5,4   64+48  24,2,2  1,1,1 16 0   0,0,0
L u16 12,5,4   64+48  16,3,2  1,1,1 16 0   0,0,0
L u32 4,5,4    48+32  4,3,2   1,1,1 16 0   0,1,1
L u64 2,5,4    48+32  2,3,2   1,1,1 16 0   0,1,1
L f16 8,5,4    48+32  8,3,2   1,1,1 16 0   0,1,1
L u16 8,5,4    48+32  8,4,2   1,2,1 16 0   0,0,0
L u16 8,5,4    48+32  8,3,4   1,1,2 16 0   0,0,0
L u16 16,5,4   64+48  16,3,2  2,1,1 16 0   0,0,0
L u16 8,8,3    32+16  8,8,2   1,1,1 16 0   0,0,0
L u16 8,8,3    32+16  8,8,2   1,1,1 16 32  0,0,0
L u16 8,8,3    32+16  8,8,2   1,1,1 16 64  0,0,0
L u16 8,8,3    32+16  8,8,2   1,1,1 16 128 0,0,0
L u16 16,5,4   64+32  16,3,2  1,1,1 32 32  0,1,1
L u32 8,5,4    64+32  8,3,2   1,1,1 32 32  0,1,1
L u16 16,8,3   64+32  16,8,2  1,1,1 32 32  0,0,0
L u16 8,5,4    32+32  8,3,2   1,1,1 32 32  0,1,1
L u16 8,4,3,3  48+32  8,3,2,2 1,1,1,1 16 0 0,1,1,1
L u16 8,3,3,2,2 32+16 8,2,2,2,2 1,1,1,1,1 16 0 0,1,1,0,1
L f16 8,6,4    16,96  8,3,2   1,1,1 16 0   0,0,0
S u16 8,5,4    48+32  8,3,2   1,1,1 16 0   0,1,1
S u16 8,5,4    48+32  8,4,2   1,1,1 16 0   0,3,3
S u16 8,5,4    48+32  8,2,2   1,1,1 16 0   8,0,0
S u16 16,5,4   64+48  16,3,2  1,1,1 16 0   0,1,1
S u16 8,8,3    32+16  8,8,2   1,1,1 16 128 0,0,0
S u16 16,5,4   64+32  16,3,2  1,1,1 32 32  0,1,1
S u16 8,5,4    48+32  8,4,2   1,2,1 16 0   0,0,0
L u8  16,5,4   48+32  16,3,2  1,1,1 16 0   0,1,1
L u8  16,6,4   16,96  16,3,2  1,1,1 16 0   0,0,0
S u8  16,5,4   48+32  16,3,2  1,1,1 16 0   0,1,1
L u16 16,5,4   64+32  16,3,2  1,1,1 32 0   0,1,1
L u16 16,5,4   64+32  16,3,2  1,1,1 32 128 0,1,1
";

fn targeted() -> Vec<Case> {
    fn nums<T: std::str::FromStr>(field: &str) -> Vec<T>
    where
        T::Err: std::fmt::Debug,
    {
        field.split(',').map(|x| x.parse().unwrap()).collect()
    }
    TARGETED
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|line| {
            let f: Vec<&str> = line.split_whitespace().collect();
            let dims: Vec<u64> = nums(f[2]);
            let strides = match f[3].split_once('+') {
                Some((row, pad)) => {
                    padded_strides(&dims, row.parse().unwrap(), pad.parse().unwrap())
                }
                None => nums(f[3]),
            };
            let interleave = match f[6] {
                "16" => Interleave::B16,
                _ => Interleave::B32,
            };
            let swizzle = match f[7] {
                "0" => Swizzle::None,
                "32" => Swizzle::B32,
                "64" => Swizzle::B64,
                _ => Swizzle::B128,
            };
            let op = if f[0] == "S" { Op::Store } else { Op::Load };
            let dtype = DType::parse(f[1]).unwrap();
            let boxd: Vec<u32> = nums(f[4]);
            let estrides: Vec<u32> = nums(f[5]);
            let coords: Vec<i32> = nums(f[8]);
            case(
                op, dtype, &dims, strides, &boxd, &estrides, interleave, swizzle, &coords,
            )
        })
        .collect()
}

/// xorshift64*: deterministic random cases.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    fn range(&mut self, lo: i64, hi: i64) -> i64 {
        lo + self.below((hi - lo + 1) as u64) as i64
    }
    fn pick<T: Copy>(&mut self, xs: &[T]) -> T {
        xs[self.below(xs.len() as u64) as usize]
    }
}

/// Random interleaved cases over element sizes, ranks, chunks of C, padded strides, element
/// strides, swizzles and coordinates at and past every edge.
fn random(count: usize, seed: u64) -> Vec<Case> {
    let mut rng = Rng(seed);
    let mut out = Vec::new();
    while out.len() < count {
        let il = if rng.below(4) == 0 {
            Interleave::B32
        } else {
            Interleave::B16
        };
        let chunk = il.chunk_bytes().unwrap_or(16);
        let dtype = rng.pick(&[
            DType::U16,
            DType::U16,
            DType::U32,
            DType::U64,
            DType::F16,
            DType::BF16,
            DType::F32,
            DType::U8,
        ]);
        let esize = dtype.size_bytes().unwrap_or(1);
        let rank = rng.range(3, 5) as usize;
        let chunk_elems = chunk / esize;
        // dim 0: whole chunks, sometimes a partial last chunk (whole words).
        let chunks = rng.range(1, 3) as u64;
        let mut d0 = chunks * chunk_elems;
        if rng.below(4) == 0 {
            let cut = (4 / esize).max(1) * rng.range(1, 2) as u64;
            d0 = d0.saturating_sub(cut).max(1);
        }
        let mut dims = vec![d0];
        for _ in 1..rank {
            dims.push(rng.range(1, 6) as u64);
        }
        let align = if il == Interleave::B32 { 32 } else { 16 };
        let row = (d0 * esize).next_multiple_of(align) + align * rng.below(3);
        let pad = align * rng.below(3);
        let strides = padded_strides(&dims, row, pad);
        let extent = strides[rank - 2] * dims[rank - 1];
        if extent > 1 << 20 {
            continue;
        }
        // box dim 0: a multiple of 16 bytes (the driver demands it).
        let b0 = (16 / esize).max(1) * rng.range(1, (2 * chunk / 16) as i64) as u64;
        let mut boxd = vec![b0 as u32];
        let mut estrides = vec![1u32];
        for d in 1..rank {
            boxd.push(rng.range(1, 5) as u32);
            estrides.push(if rng.below(5) == 0 {
                rng.range(2, 3) as u32
            } else {
                1
            });
            let _ = d;
        }
        if rng.below(8) == 0 {
            estrides[0] = 2;
        }
        let swizzle = if il == Interleave::B32 {
            Swizzle::B32
        } else {
            rng.pick(&[Swizzle::None, Swizzle::B32, Swizzle::B64, Swizzle::B128])
        };
        let op = if rng.below(3) == 0 {
            Op::Store
        } else {
            Op::Load
        };
        let step = (16 / esize).max(1) as i64;
        let mut coords = vec![step * rng.range(-1, chunks as i64)];
        for &dim in &dims[1..] {
            coords.push(rng.range(-2, dim as i64 + 1) as i32 as i64);
        }
        if op == Op::Store {
            for c in &mut coords {
                *c = (*c).max(0);
            }
        }
        let coords: Vec<i32> = coords.iter().map(|&c| c as i32).collect();
        out.push(case(
            op, dtype, &dims, strides, &boxd, &estrides, il, swizzle, &coords,
        ));
    }
    out
}

fn all_cases() -> Vec<Case> {
    let mut cases = targeted();
    cases.extend(random(240, 0x1a7e_41ea_5eed_0001));
    // Safe cases first, so a fault costs as little as possible.
    cases.sort_by_key(|c| c.risky);
    cases
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[test]
fn probe_kernels_compile() {
    if tma_test_support::skip::require_nvrtc_or_skip("probe_kernels_compile").is_none() {
        return;
    }
    let compiled = Compiler::global()
        .expect("NVRTC")
        .compile_source(&probe_source(), &CompileOptions::new(Arch::Sm90a))
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(compiled.ptx.contains("mbarrier.complete_tx"));
    for k in KERNELS {
        assert_eq!(compiled.plan(k), Some(plan(k).launch()));
    }
    assert!(!all_cases().is_empty());
}

/// The cases are the ones the committed H200 dump was made from, in the same order, so a
/// rerun reproduces it line for line (it did, byte for byte).
#[test]
fn probe_cases_are_the_dumped_ones() {
    use std::io::Read;
    let mut text = String::new();
    flate2::read::GzDecoder::new(&include_bytes!("data/interleave_probe_h200.txt.gz")[..])
        .read_to_string(&mut text)
        .unwrap();
    let cases = all_cases();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), cases.len());
    for (i, (line, c)) in lines.iter().zip(&cases).enumerate() {
        let header = &line[2..=line.find('}').unwrap()];
        assert_eq!(header, c.json(i), "case {i}");
    }
}

#[test]
#[ignore = "a probe: run with --ignored on a GPU (tests/gpu/run-interleave-probe.sh)"]
fn probe_interleaved_layouts() {
    let Some(gpu) = support::Gpu::open("probe_interleaved_layouts") else {
        return;
    };
    let module = Module::compile_and_load(
        &gpu.ctx,
        Compiler::global().expect("NVRTC"),
        &probe_source(),
        &CompileOptions::new(Arch::Sm90a),
    )
    .expect("probe kernels compile");
    let load = module.kernel("probe_load").expect("probe_load");
    let store = module.kernel("probe_store").expect("probe_store");
    // The window each load returns: the plan's, as its kernel sees it.
    let window = plan("probe_load").region("window").expect("window").bytes as usize;
    let out_dir = std::path::PathBuf::from(std::env::var_os("OUT").unwrap_or_else(|| ".".into()));
    let from: usize = std::env::var("PROBE_FROM")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let mut raw = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(out_dir.join("interleave_raw.txt"))
        .expect("output file");
    let pattern: Vec<u8> = (0..GLOBAL_BYTES / 4)
        .flat_map(|w| (w as u32 | 0x5a00_0000).to_le_bytes())
        .collect();
    let cases = all_cases();
    for (i, c) in cases.iter().enumerate().skip(from) {
        let _ = std::fs::write(out_dir.join("probe_next"), (i + 1).to_string());
        let desc = c.json(i);
        let gbuf: CudaSlice<u8> = gpu.stream.clone_htod(&pattern).expect("upload");
        let base = {
            let (ptr, _g) = gbuf.device_ptr(&gpu.stream);
            ptr
        } + BASE;
        let map = match gpu.encode_result(&c.args(), base) {
            Ok(m) => m,
            Err(e) => {
                writeln!(raw, "E {desc} {e}").unwrap();
                continue;
            }
        };
        let mut coords = Coords { c: [0; 5] };
        coords.c[..c.coords.len()].copy_from_slice(&c.coords);
        let rank = c.dims.len() as i32;
        match c.op {
            Op::Load => {
                let cfg = load.plan_config(&gpu.stream, (1, 1, 1)).expect("the plan");
                let mut out: CudaSlice<u8> = gpu.stream.alloc_zeros(window).expect("alloc");
                let mut info: CudaSlice<i64> = gpu.stream.alloc_zeros(1).expect("alloc");
                // SAFETY: probe_load(CUtensorMap, int, Coords, unsigned char* (the window's
                // bytes), long long*); the plan's launch.
                let r = unsafe {
                    load.launch_builder(&cfg)
                        .arg(&map)
                        .arg(&rank)
                        .arg(ByValue(&coords))
                        .arg(&mut out)
                        .arg(&mut info)
                        .launch_and_sync()
                };
                if let Err(e) = r {
                    writeln!(raw, "F {desc} {}", e.to_string().replace('\n', " ")).unwrap();
                    std::process::exit(42);
                }
                let smem = gpu.stream.clone_dtoh(&out).expect("read smem");
                let counted = gpu.stream.clone_dtoh(&info).expect("read info")[0];
                let last = smem
                    .chunks(16)
                    .rposition(|ch| ch.iter().any(|&b| b != 0xcd))
                    .map_or(0, |p| (p + 1) * 16);
                writeln!(raw, "L {desc} {counted} {}", hex(&smem[..last])).unwrap();
            }
            Op::Store => {
                let cfg = store.plan_config(&gpu.stream, (1, 1, 1)).expect("the plan");
                // SAFETY: probe_store(CUtensorMap, int, Coords); the plan's launch.
                let r = unsafe {
                    store
                        .launch_builder(&cfg)
                        .arg(&map)
                        .arg(&rank)
                        .arg(ByValue(&coords))
                        .launch_and_sync()
                };
                if let Err(e) = r {
                    writeln!(raw, "F {desc} {}", e.to_string().replace('\n', " ")).unwrap();
                    std::process::exit(42);
                }
                let after = gpu.stream.clone_dtoh(&gbuf).expect("read global");
                // Runs of written words: (global byte offset from the base, smem word, words).
                let mut runs: Vec<(i64, u32, u32)> = Vec::new();
                for (w, word) in after.chunks(4).enumerate() {
                    let v = u32::from_le_bytes([word[0], word[1], word[2], word[3]]);
                    if v == w as u32 | 0x5a00_0000 {
                        continue;
                    }
                    let g = (w * 4) as i64 - BASE as i64;
                    let s = if v >> 24 == 0xa5 {
                        v & 0x00ff_ffff
                    } else {
                        u32::MAX
                    };
                    match runs.last_mut() {
                        Some((g0, s0, n))
                            if *g0 + 4 * i64::from(*n) == g && s != u32::MAX && *s0 + *n == s =>
                        {
                            *n += 1
                        }
                        _ => runs.push((g, s, 1)),
                    }
                }
                let text: Vec<String> = runs
                    .iter()
                    .map(|(g, s, n)| format!("{g}:{s}:{n}"))
                    .collect();
                writeln!(raw, "S {desc} {}", text.join(",")).unwrap();
            }
        }
        raw.flush().unwrap();
    }
    let _ = std::fs::write(out_dir.join("probe_next"), "done");
}
