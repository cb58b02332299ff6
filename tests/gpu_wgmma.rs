//! wgmma through the generated descriptors, on the GPU: for every supported operand
//! combination (type pair x A major x B major x swizzle), TMA loads an A and a B operand tile
//! of random shape on one barrier, one warpgroup issues `tma_wgmma<A, B>` over every k-slice
//! (and 64-row block of A) with the tiles' descriptors, then again as one run
//! (`tma_wgmma_k<A, B>`), then as one run on A's descriptors made first
//! (`tma_wgmma_a_descs<A>`) (`render::wgmma_exercise_body`, its shared memory and launch from the
//! plan `render::wgmma_exercise_plan`), and D must equal
//! the CPU product exactly: small integers (|x| <= 3), so every product and sum is
//! exact in f32; fresh random data per run; D poisoned with NaN before the launch. Prints the
//! combinations run and the mismatches (0). Skips visibly without a GPU.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use cudarc::driver::CudaSlice;
use tma::model;
use tma::plan::ValidKernelPlan;
use tma::render::{wgmma_exercise_body, wgmma_exercise_plan, KernelSource};
use tma::runtime::{CompileOptions, Compiler, Module, Source, TensorMap};
use tma::spec::{Major, Operand, WgmmaOperand};
use tma::{Arch, BoundSpec, DType, Swizzle};
use tma_test_support::testgen::{operand_case, XorShift};

/// The element bits of small integer `v` (|v| <= 3) in `dtype`, little-endian.
fn encode(dtype: DType, v: i32) -> Vec<u8> {
    let f = v as f32;
    match dtype {
        DType::BF16 => half::bf16::from_f32(f).to_bits().to_le_bytes().to_vec(),
        DType::F16 => half::f16::from_f32(f).to_bits().to_le_bytes().to_vec(),
        DType::TF32 => f.to_bits().to_le_bytes().to_vec(),
        DType::E4M3 | DType::E5M2 => {
            // e4m3: bias 7, 3 mantissa bits; e5m2: bias 15, 2 mantissa bits.
            let (one, two, three) = if dtype == DType::E4M3 {
                (0x38u8, 0x40u8, 0x44u8)
            } else {
                (0x3c, 0x40, 0x42)
            };
            let mag = match v.abs() {
                0 => 0,
                1 => one,
                2 => two,
                _ => three,
            };
            vec![if v < 0 { mag | 0x80 } else { mag }]
        }
        other => panic!("{other} is no operand type"),
    }
}

/// A global matrix of small integers: its values and its bytes.
fn matrix(bound: &BoundSpec, rng: &mut XorShift) -> (Vec<i32>, Vec<u8>) {
    let dtype = bound.spec().dtype;
    let e = dtype.size_bytes().unwrap() as usize;
    let n = bound.extent_bytes() as usize / e;
    let values: Vec<i32> = (0..n).map(|_| rng.range(0, 6) as i32 - 3).collect();
    let bytes = values.iter().flat_map(|&v| encode(dtype, v)).collect();
    (values, bytes)
}

/// A device buffer of the tile's element type holding `bytes`, and its tensor map.
fn upload(
    stream: &std::sync::Arc<cudarc::driver::CudaStream>,
    bound: &BoundSpec,
    bytes: &[u8],
) -> (TensorMap, Box<dyn std::any::Any>) {
    match bound.spec().dtype {
        DType::BF16 => {
            let v: Vec<half::bf16> = bytes
                .chunks_exact(2)
                .map(|x| half::bf16::from_bits(u16::from_le_bytes([x[0], x[1]])))
                .collect();
            let d: CudaSlice<half::bf16> = stream.clone_htod(&v).unwrap();
            (TensorMap::new(bound, &d).unwrap(), Box::new(d))
        }
        DType::F16 => {
            let v: Vec<half::f16> = bytes
                .chunks_exact(2)
                .map(|x| half::f16::from_bits(u16::from_le_bytes([x[0], x[1]])))
                .collect();
            let d: CudaSlice<half::f16> = stream.clone_htod(&v).unwrap();
            (TensorMap::new(bound, &d).unwrap(), Box::new(d))
        }
        DType::TF32 => {
            let v: Vec<f32> = bytes
                .chunks_exact(4)
                .map(|x| f32::from_le_bytes([x[0], x[1], x[2], x[3]]))
                .collect();
            let d: CudaSlice<f32> = stream.clone_htod(&v).unwrap();
            (TensorMap::new(bound, &d).unwrap(), Box::new(d))
        }
        _ => {
            let d: CudaSlice<u8> = stream.clone_htod(bytes).unwrap();
            (TensorMap::new(bound, &d).unwrap(), Box::new(d))
        }
    }
}

/// Element (`mn`, `k`) of the operand a call at `coords` loads, from the global values.
fn element(bound: &BoundSpec, values: &[i32], coords: &[i64], mn: u64, k: u64) -> i64 {
    let spec = bound.spec();
    let rank = spec.rank();
    let major = spec.wgmma.unwrap().major;
    let (mn_dim, k_dim) = match major {
        Major::K => (rank - 2, rank - 1),
        Major::MN => (rank - 1, rank - 2),
    };
    let mut index: Vec<u64> = coords.iter().map(|&c| c as u64).collect();
    index[mn_dim] += mn;
    index[k_dim] += k;
    let e = spec.dtype.size_bytes().unwrap();
    let offset: u64 = (0..rank)
        .map(|d| {
            if d + 1 == rank {
                index[d]
            } else {
                index[d] * bound.byte_strides()[d] / e
            }
        })
        .sum();
    i64::from(values[offset as usize])
}

/// The type pairs one instruction takes: the same 16-bit or tf32 type, any two fp8 types.
const PAIRS: [(DType, DType); 7] = [
    (DType::BF16, DType::BF16),
    (DType::F16, DType::F16),
    (DType::TF32, DType::TF32),
    (DType::E4M3, DType::E4M3),
    (DType::E4M3, DType::E5M2),
    (DType::E5M2, DType::E4M3),
    (DType::E5M2, DType::E5M2),
];

/// One operand combination: A and B tiles (bound, with the coordinates of one call; batch
/// dims at 0, as the kernel loads them) and a description.
struct Case {
    what: String,
    a: BoundSpec,
    ac: Vec<i64>,
    b: BoundSpec,
    bc: Vec<i64>,
}

/// Every supported combination (type pair x A major x B major x swizzle), random shapes: M 64
/// or 128, N a multiple of 8 (of the swizzle atom when MN-major), 1-4 k-slices on both.
fn cases(rng: &mut XorShift) -> Vec<Case> {
    let mut out = Vec::new();
    for (ta, tb) in PAIRS {
        let majors: &[Major] = if ta.size_bytes() == Some(2) {
            &[Major::K, Major::MN]
        } else {
            &[Major::K]
        };
        for &a_major in majors {
            for &b_major in majors {
                for swizzle in [Swizzle::None, Swizzle::B32, Swizzle::B64, Swizzle::B128] {
                    let wa = WgmmaOperand {
                        operand: Operand::A,
                        major: a_major,
                    };
                    let wb = WgmmaOperand {
                        operand: Operand::B,
                        major: b_major,
                    };
                    let ((a, mut ac), (b, mut bc)) = loop {
                        let k_slices = rng.range(1, 4);
                        let m = 64 * rng.range(1, 2);
                        let atom = match b_major {
                            Major::K => 8,
                            Major::MN => {
                                swizzle.span_bytes().unwrap_or(16) / tb.size_bytes().unwrap()
                            }
                        };
                        let n = atom * rng.range(1, 256 / atom).min(rng.range(1, 256 / atom));
                        let a = operand_case(rng, ta, wa, swizzle, m, k_slices);
                        let b = operand_case(rng, tb, wb, swizzle, n, k_slices);
                        if let (Some(a), Some(b)) = (a, b) {
                            break (a, b);
                        }
                    };
                    for c in [&mut ac, &mut bc] {
                        let outer = c.len() - 2;
                        c[..outer].iter_mut().for_each(|x| *x = 0);
                    }
                    let what = format!(
                        "{ta} {wa} x {tb} {wb}, swizzle {}: A box {:?} repeat {:?}, B box {:?} repeat {:?}",
                        swizzle.name(),
                        a.spec().boxed,
                        a.spec().repeat,
                        b.spec().boxed,
                        b.spec().repeat
                    );
                    out.push(Case { what, a, ac, b, bc });
                }
            }
        }
    }
    out
}

/// The exercise's plan: tile set `operands` (`a`, `b`) on one warpgroup, kernel `mma`.
fn plan(case: &Case) -> ValidKernelPlan {
    wgmma_exercise_plan("mma", "operands", case.a.valid(), case.b.valid())
        .validate()
        .unwrap()
}

fn source(case: &Case) -> Source {
    let plan = plan(case);
    let body = wgmma_exercise_body(&plan, "operands").unwrap();
    Source::kernel(&KernelSource::new().plan(&plan).body(&body)).unwrap()
}

/// Every combination's kernel compiles (NVRTC only: runs without a GPU).
#[test]
fn every_operand_combination_compiles() {
    let test = "every_operand_combination_compiles";
    if tma_test_support::skip::require_nvrtc_or_skip(test).is_none() {
        return;
    }
    let mut rng = XorShift::new(0x0013_c0de);
    let all = cases(&mut rng);
    assert_eq!(all.len(), 52);
    for case in &all {
        let compiled = Compiler::global()
            .unwrap()
            .compile_source(&source(case), &CompileOptions::new(Arch::Sm90a))
            .unwrap_or_else(|e| panic!("{}: {e}", case.what));
        assert!(compiled.ptx.contains("wgmma.mma_async"), "{}", case.what);
        assert_eq!(
            compiled.plan("mma"),
            Some(plan(case).launch()),
            "{}",
            case.what
        );
    }
    println!("{} combinations compile", all.len());
}

#[test]
fn gpu_wgmma_through_generated_descriptors_matches_the_cpu_product() {
    let test = "gpu_wgmma_through_generated_descriptors_matches_the_cpu_product";
    let Some(info) = tma_test_support::skip::require_gpu_or_skip(test) else {
        return;
    };
    println!("device: {}", info.name);
    let ctx = cudarc::driver::CudaContext::new(0).unwrap();
    let stream = ctx.default_stream();
    let seed = tma_test_support::testgen::gpu_seed();
    println!("seed {seed} (set TMA_GPU_SEED to replay)");
    let mut rng = XorShift::new(seed);
    let options = CompileOptions::new(Arch::Sm90a);
    let (mut combos, mut mismatches, mut elements) = (0u64, 0u64, 0u64);
    for case in cases(&mut rng) {
        let Case { what, a, ac, b, bc } = &case;
        let pa = tma::wgmma::OperandPlan::new(a.valid()).unwrap();
        let pb = tma::wgmma::OperandPlan::new(b.valid()).unwrap();
        let (m, n, k) = (pa.mn, pb.mn, pa.k);
        let (av, ab) = matrix(a, &mut rng);
        let (bv, bb) = matrix(b, &mut rng);
        // The coordinates are ones the model (and the hardware) takes.
        model::load(a, &ab, ac).unwrap();
        model::load(b, &bb, bc).unwrap();
        let (a_map, _a_buf) = upload(&stream, a, &ab);
        let (b_map, _b_buf) = upload(&stream, b, &bb);
        let module =
            Module::compile_and_load(&ctx, Compiler::global().unwrap(), &source(&case), &options)
                .unwrap_or_else(|e| panic!("{what}: {e}"));
        let kernel = module.kernel("mma").unwrap();
        let (a_mn, a_k) = mn_k(ac, pa.operand.major);
        let (b_mn, b_k) = mn_k(bc, pb.operand.major);
        let cfg = kernel.plan_config(&stream, (1, 1, 1)).unwrap();
        let mut wrong = 0u64;
        for run in [0i32, 1, 2] {
            let form = match run {
                0 => "one call a slice",
                1 => "one run",
                _ => "one run on A's descriptors made first",
            };
            let mut d = stream
                .clone_htod(&vec![f32::NAN; (m * n) as usize])
                .unwrap();
            {
                let mut launch = kernel.launch_builder(&cfg);
                launch.arg(&a_map);
                launch.arg(&b_map);
                launch.arg(&mut d);
                launch.arg(&a_mn);
                launch.arg(&a_k);
                launch.arg(&b_mn);
                launch.arg(&b_k);
                launch.arg(&run);
                // SAFETY: mma(two CUtensorMap, float* of M x N floats, five ints), one block of
                // the plan's launch (one warpgroup, the set's shared memory).
                unsafe { launch.launch_and_sync() }
                    .unwrap_or_else(|e| panic!("{what} ({form}): {e}"));
            }
            let got = stream.clone_dtoh(&d).unwrap();
            for i in 0..m {
                for j in 0..n {
                    let want: i64 = (0..k)
                        .map(|kk| element(a, &av, ac, i, kk) * element(b, &bv, bc, j, kk))
                        .sum();
                    let g = got[(i * n + j) as usize];
                    if g != want as f32 {
                        if wrong < 4 {
                            println!("  {what} ({form}): D[{i}][{j}] = {g}, want {want}");
                        }
                        wrong += 1;
                    }
                }
            }
            elements += m * n;
        }
        combos += 1;
        mismatches += wrong;
        println!(
            "{what}: M {m} N {n} K {k} ({} k-slices), a call a slice, a run, a run on descriptors made first: {wrong} mismatches",
            pa.k_slices
        );
    }
    println!("{combos} combinations x 3 forms, {elements} elements of D, {mismatches} mismatches");
    assert_eq!(combos, 52);
    assert_eq!(mismatches, 0);
}

/// The (MN, K) coordinates of a call at `c` (user order) of a tile of `major`.
fn mn_k(c: &[i64], major: Major) -> (i32, i32) {
    let r = c.len();
    match major {
        Major::K => (c[r - 2] as i32, c[r - 1] as i32),
        Major::MN => (c[r - 1] as i32, c[r - 2] as i32),
    }
}

/// The CPU's fragment layout (`tma::wgmma::fragment::d_position`) is the generated CUDA's
/// (`tma_wgmma_d_row` / `tma_wgmma_d_col`, through which the GPU test above writes D): NVRTC
/// evaluates the helpers for all 128 threads x 128 elements (N = 256) against a table of the
/// Rust positions, in a `static_assert`. NVRTC only: runs without a GPU.
#[test]
fn the_cpu_fragment_layout_is_the_generated_helpers() {
    let test = "the_cpu_fragment_layout_is_the_generated_helpers";
    if tma_test_support::skip::require_nvrtc_or_skip(test).is_none() {
        return;
    }
    let mut rng = XorShift::new(0x0013_c0de);
    let case = &cases(&mut rng)[0];
    let table = |rows: &dyn Fn(u32, u32) -> (u32, u32)| -> String {
        (0..128u32)
            .flat_map(|t| (0..128u32).map(move |i| (t, i)))
            .map(|(t, i)| {
                let (r, c) = rows(t, i);
                (r * 256 + c).to_string()
            })
            .collect::<Vec<_>>()
            .join(",")
    };
    let source = |want: &str| {
        let body = format!(
            "constexpr unsigned short frag_want[] = {{{want}}};\n\
             constexpr bool frag_check() {{\n\
               for (unsigned t = 0; t < 128u; ++t)\n\
                 for (unsigned i = 0; i < 128u; ++i)\n\
                   if (tma_wgmma_d_row(t, i) * 256u + tma_wgmma_d_col(t, i) != frag_want[t * 128u + i]) return false;\n\
               return true;\n\
             }}\n\
             static_assert(frag_check(), \"frag-layout: the helpers differ from tma::wgmma::fragment\");\n\
             extern \"C\" __global__ void frag(int* p) {{ *p = 0; }}\n"
        );
        KernelSource::new()
            .tile_set("operands", &[("a", case.a.valid()), ("b", case.b.valid())])
            .body(&body)
            .build()
            .unwrap()
    };
    let compiler = Compiler::global().unwrap();
    let options = CompileOptions::new(Arch::Sm90a);
    let good = table(&tma::wgmma::fragment::d_position);
    compiler
        .compile(&source(&good), &options)
        .unwrap_or_else(|e| panic!("{e}"));
    // The check can fail: the table with two columns swapped is refused.
    let swapped = table(&|t, i| {
        let (r, c) = tma::wgmma::fragment::d_position(t, i);
        (r, c ^ 1)
    });
    match compiler.compile(&source(&swapped), &options) {
        Err(tma::runtime::Error::Compile { log, .. }) => {
            assert!(log.contains("frag-layout"), "{log}")
        }
        other => panic!("a wrong table compiled: {other:?}"),
    }
    println!("128 threads x 128 elements: the Rust and CUDA layouts agree");
}
