//! Model == hardware, bit for bit: thousands of random valid specs (ranks 1-5, element sizes
//! 1/2/4/8, every sm_90 swizzle, interleave, element strides, repeats, boxes straddling every
//! edge, negative coordinates) are loaded by TMA into shared memory and copied out raw, and
//! stored / reduce-added from raw shared memory, on fresh random data with poisoned outputs,
//! and compared with `tma_core::model`. Skips visibly without a GPU (fails when
//! `TMA_REQUIRE_GPU=1`).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

#[path = "gpu/support.rs"]
mod support;

use support::{Gpu, Mismatch};
use tma_core::model::{self, ReduceOp};
use tma_core::{Arch, BoundSpec, DType, Interleave, Swizzle};
use tma_test_support::testgen::{gpu_seed, random_valid_spec, XorShift};

/// How many random specs each direction checks (override with `TMA_GPU_SPECS`).
fn spec_count() -> usize {
    std::env::var("TMA_GPU_SPECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(3000)
}

/// `TMA_GPU_ONLY=plain|strided|interleave|repeat|swizzle|tf32`: only specs of one kind, to
/// isolate a fault. `TMA_GPU_TRACE=1`: print each spec before its launch.
fn wanted(b: &BoundSpec) -> bool {
    let s = b.spec();
    match std::env::var("TMA_GPU_ONLY").as_deref() {
        Ok("plain") => {
            s.interleave == Interleave::None
                && s.element_strides.iter().all(|&e| e == 1)
                && b.plan().boxes == 1
                && s.swizzle == Swizzle::None
        }
        Ok("swizzle") => s.interleave == Interleave::None && s.swizzle != Swizzle::None,
        Ok("strided") => s.element_strides.iter().any(|&e| e != 1),
        Ok("interleave") => s.interleave != Interleave::None,
        Ok("repeat") => b.plan().boxes > 1,
        Ok("no-interleave") => s.interleave == Interleave::None,
        Ok("tf32") => matches!(s.dtype, DType::TF32 | DType::TF32Ftz),
        _ => true,
    }
}

/// Shared memory the harness can give one call on an H100 (`support::harness_max_window`: a
/// block's 227 KB less the alignment slack and the mbarrier). Larger specs (the validator warns
/// about them) are counted and skipped.
fn harness_smem() -> u64 {
    support::harness_max_window(tma_core::Arch::Sm90a)
}

fn too_big(b: &BoundSpec, skipped: &mut usize) -> bool {
    let big = b.plan().footprint_bytes > harness_smem();
    *skipped += usize::from(big);
    big
}

fn trace(i: usize, b: &BoundSpec, coords: &[i64]) {
    if std::env::var_os("TMA_GPU_TRACE").is_some() {
        println!("spec #{i}: {}", describe(b, coords));
    }
}

/// A short description of a spec for the mismatch report.
fn describe(b: &BoundSpec, coords: &[i64]) -> String {
    let s = b.spec();
    format!(
        "{} rank {} global {:?} strides {:?} box {:?} estr {:?} swz {} il {} oob {} rep {:?} smem_stride {} coords {:?}",
        s.dtype,
        s.rank(),
        b.global(),
        b.strides(),
        s.boxed,
        s.element_strides,
        s.swizzle.name(),
        s.interleave.name(),
        s.oob_fill.name(),
        s.repeat,
        b.plan().stride_bytes,
        coords
    )
}

/// Counts of what the random specs covered, so the report shows the coverage.
#[derive(Default, Debug)]
struct Coverage {
    ranks: [usize; 6],
    swizzles: [usize; 7],
    interleaved: usize,
    strided: usize,
    repeated: usize,
    out_of_bounds: usize,
    negative: usize,
    nan_fill: usize,
    sizes: std::collections::BTreeMap<u64, usize>,
}

impl Coverage {
    fn add(&mut self, b: &BoundSpec, coords: &[i64]) {
        let s = b.spec();
        self.ranks[s.rank()] += 1;
        self.swizzles[s.swizzle as usize] += 1;
        self.interleaved += usize::from(s.interleave != Interleave::None);
        self.strided += usize::from(s.element_strides.iter().any(|&e| e != 1));
        self.repeated += usize::from(b.plan().boxes > 1);
        self.negative += usize::from(coords.iter().any(|&c| c < 0));
        self.nan_fill += usize::from(s.oob_fill != tma_core::OobFill::Zero);
        let oob = coords.iter().enumerate().any(|(d, &c)| {
            c < 0 || c + i64::from(s.boxed[d]) * i64::from(s.repeat[d]) > b.global()[d] as i64
        });
        self.out_of_bounds += usize::from(oob);
        *self
            .sizes
            .entry(s.dtype.size_bytes().unwrap_or(0))
            .or_default() += 1;
    }
}

fn report(name: &str, checked: usize, cov: &Coverage, mismatches: &[Mismatch], skipped: usize) {
    println!(
        "{name}: {checked} specs, {} mismatches ({skipped} larger than a block's shared memory skipped); coverage {cov:?}",
        mismatches.len()
    );
    for m in mismatches.iter().take(20) {
        println!("  MISMATCH {m}");
    }
}

#[test]
fn gpu_loads_match_the_model_bit_for_bit() {
    let Some(gpu) = Gpu::open("gpu_loads_match_the_model_bit_for_bit") else {
        return;
    };
    let seed = gpu_seed();
    println!("seed {seed} (set TMA_GPU_SEED to replay)");
    let mut rng = XorShift::new(seed);
    let mut cov = Coverage::default();
    let mut mismatches = Vec::new();
    let mut skipped = 0usize;
    let n = spec_count();
    let sanity = sanity_spec();
    let global = random_bytes(&mut rng, sanity.extent_bytes() as usize);
    let want = model::load(&sanity, &global, &[3, 4]).expect("model");
    assert_eq!(
        gpu.load(&sanity, &global, &[3, 4]),
        Ok(want),
        "sanity: a plain 2-D f32 box"
    );
    let mut i = 0;
    while i < n {
        let (bound, coords) = random_valid_spec(&mut rng, Arch::Sm90a);
        if !wanted(&bound) || too_big(&bound, &mut skipped) {
            continue;
        }
        i += 1;
        trace(i, &bound, &coords);
        cov.add(&bound, &coords);
        let global = random_bytes(&mut rng, bound.extent_bytes() as usize);
        let mut want =
            model::load(&bound, &global, &coords).expect("model handles every sm_90 spec");
        // Twice the footprint comes back: the hardware must leave the second half untouched
        // (zero), or the plan is too small for what TMA really writes.
        let footprint = bound.plan().footprint_bytes as usize;
        // (at most what a block may have: 227 KB less the 1 KB of alignment slack)
        let window = (2 * footprint as u64)
            .min(harness_smem())
            .max(footprint as u64) as u32;
        want.resize(window as usize, 0);
        let got = gpu.load_window(&bound, &global, &coords, window, 0);
        match got {
            Ok(got) if got == want => {}
            Ok(got) => mismatches.push(Mismatch::new(i, describe(&bound, &coords), &want, &got)),
            Err(e) => {
                // A sticky CUDA error: nothing after it can run in this process.
                println!(
                    "launch failed on spec #{i}: {}: {e}",
                    describe(&bound, &coords)
                );
                mismatches.push(Mismatch::error(i, describe(&bound, &coords), e));
                break;
            }
        }
        if i > 0 && i % 500 == 0 {
            println!("  {i}/{n} loads, {} mismatches so far", mismatches.len());
        }
    }
    gpu.dump_mismatches("loads", &mismatches);
    report("loads", i, &cov, &mismatches, skipped);
    assert!(
        mismatches.is_empty(),
        "{} of {n} loads differ from the model",
        mismatches.len()
    );
}

#[test]
fn gpu_stores_match_the_model_bit_for_bit() {
    let Some(gpu) = Gpu::open("gpu_stores_match_the_model_bit_for_bit") else {
        return;
    };
    let seed = gpu_seed() ^ 0x5eed;
    println!("seed {seed}");
    let mut rng = XorShift::new(seed);
    let mut cov = Coverage::default();
    let mut mismatches = Vec::new();
    let mut skipped = 0usize;
    let n = spec_count();
    let mut i = 0;
    while i < n {
        let (bound, coords) = random_valid_spec(&mut rng, Arch::Sm90a);
        if !wanted(&bound) || too_big(&bound, &mut skipped) {
            continue;
        }
        // Stores take no negative coordinate (the hardware traps): past-the-end ones stay.
        let coords: Vec<i64> = coords.iter().map(|&c| c.max(0)).collect();
        i += 1;
        trace(i, &bound, &coords);
        cov.add(&bound, &coords);
        let before = random_bytes(&mut rng, bound.extent_bytes() as usize);
        let smem = random_bytes(&mut rng, bound.plan().footprint_bytes as usize);
        let mut want = before.clone();
        model::store(&bound, &smem, &coords, &mut want).expect("model store");
        match gpu.store(&bound, &before, &smem, &coords, None) {
            Ok(got) if got == want => {}
            Ok(got) => mismatches.push(Mismatch::new(i, describe(&bound, &coords), &want, &got)),
            Err(e) => {
                println!(
                    "launch failed on spec #{i}: {}: {e}",
                    describe(&bound, &coords)
                );
                mismatches.push(Mismatch::error(i, describe(&bound, &coords), e));
                break;
            }
        }
    }
    gpu.dump_mismatches("stores", &mismatches);
    report("stores", i, &cov, &mismatches, skipped);
    assert!(
        mismatches.is_empty(),
        "{} of {n} stores differ from the model",
        mismatches.len()
    );
}

/// Reduce-add on the types whose addition the model defines; data are small finite values
/// so every sum is exact or rounds the way the model says.
#[test]
fn gpu_reduce_add_matches_the_model_bit_for_bit() {
    let Some(gpu) = Gpu::open("gpu_reduce_add_matches_the_model_bit_for_bit") else {
        return;
    };
    let seed = gpu_seed() ^ 0xadd;
    println!("seed {seed}");
    let mut rng = XorShift::new(seed);
    let mut cov = Coverage::default();
    let mut mismatches = Vec::new();
    let mut skipped = 0usize;
    let mut checked = 0;
    let mut unsupported = std::collections::BTreeMap::<String, usize>::new();
    let n = spec_count() / 2;
    while checked < n {
        let (bound, coords) = random_valid_spec(&mut rng, Arch::Sm90a);
        if !wanted(&bound) || too_big(&bound, &mut skipped) {
            continue;
        }
        // Stores take no negative coordinate (the hardware traps): past-the-end ones stay.
        let coords: Vec<i64> = coords.iter().map(|&c| c.max(0)).collect();
        trace(checked, &bound, &coords);
        let dtype = bound.spec().dtype;
        let before = finite_values(&mut rng, dtype, bound.extent_bytes() as usize);
        let smem = finite_values(&mut rng, dtype, bound.plan().footprint_bytes as usize);
        let mut want = before.clone();
        if let Err(e) = model::reduce(&bound, ReduceOp::Add, &smem, &coords, &mut want) {
            *unsupported.entry(format!("{dtype}: {e}")).or_default() += 1;
            continue;
        }
        cov.add(&bound, &coords);
        checked += 1;
        match gpu.store(&bound, &before, &smem, &coords, Some(ReduceOp::Add)) {
            Ok(got) if got == want => {}
            Ok(got) => mismatches.push(Mismatch::new(
                checked,
                describe(&bound, &coords),
                &want,
                &got,
            )),
            Err(e) => {
                println!(
                    "launch failed on spec #{checked}: {}: {e}",
                    describe(&bound, &coords)
                );
                mismatches.push(Mismatch::error(checked, describe(&bound, &coords), e));
                break;
            }
        }
    }
    println!("skipped as unsupported by reduce-add: {unsupported:?}");
    gpu.dump_mismatches("reduce_add", &mismatches);
    report("reduce-add", checked, &cov, &mismatches, skipped);
    assert!(
        mismatches.is_empty(),
        "{} of {checked} reduce-adds differ",
        mismatches.len()
    );
}

fn random_bytes(rng: &mut XorShift, len: usize) -> Vec<u8> {
    let mut v = vec![0u8; len];
    rng.fill(&mut v);
    v
}

/// Random bytes that decode to small finite numbers of `dtype` (no NaN/inf, no overflow).
fn finite_values(rng: &mut XorShift, dtype: DType, len: usize) -> Vec<u8> {
    let mut out = random_bytes(rng, len);
    match dtype {
        DType::F16 => {
            for ch in out.chunks_exact_mut(2) {
                // exponent field 0b01xxx at most: |x| < 2^3
                ch[1] &= 0b1010_0011;
                ch[1] |= 0b0011_1000 & (ch[0] << 3);
            }
        }
        DType::BF16 => {
            for ch in out.chunks_exact_mut(2) {
                ch[1] = (ch[1] & 0x80) | 0x3f;
            }
        }
        DType::F32 | DType::F32Ftz | DType::TF32 | DType::TF32Ftz => {
            for ch in out.chunks_exact_mut(4) {
                ch[3] = (ch[3] & 0x80) | 0x3f;
            }
        }
        DType::F64 => {
            for ch in out.chunks_exact_mut(8) {
                ch[7] = (ch[7] & 0x80) | 0x3f;
                ch[6] &= 0xef;
            }
        }
        _ => {}
    }
    out
}

/// A window whose dynamic shared memory is exactly 48 KB: with the harness's static mbarrier
/// the block needs more than a block gets without the opt-in, so the runtime must opt in. It
/// did not (it opted in above 48 KB of dynamic memory alone): the launch was
/// CUDA_ERROR_INVALID_VALUE (H100, `TMA_GPU_SEED=1795655312674227616`, spec #31).
#[test]
fn gpu_a_48_kb_dynamic_window_beside_static_shared_memory_launches() {
    let Some(gpu) = Gpu::open("gpu_a_48_kb_dynamic_window_beside_static_shared_memory_launches")
    else {
        return;
    };
    let window = (48 * 1024 - support::HARNESS_ALIGN) as u32;
    assert_eq!(support::harness_dynamic_smem(window), 48 * 1024);
    let sanity = sanity_spec();
    let mut rng = XorShift::new(11);
    let global = random_bytes(&mut rng, sanity.extent_bytes() as usize);
    let mut want = model::load(&sanity, &global, &[3, 4]).expect("model");
    want.resize(window as usize, 0);
    assert_eq!(
        gpu.load_window(&sanity, &global, &[3, 4], window, 0),
        Ok(want)
    );
}

/// A plain 2-D f32 tile: if this fails, the harness is broken, not the model.
fn sanity_spec() -> BoundSpec {
    let spec = tma_core::TileSpec::new("sanity", DType::F32, [40, 48], [8, 16]);
    tma_core::validate(&spec).unwrap().bound().unwrap()
}

#[test]
fn harness_covers_every_sm90_swizzle() {
    // Runs without a GPU: the generator used above must reach every mode the H100 has.
    let mut rng = XorShift::new(7);
    let mut seen = [false; 4];
    for _ in 0..2000 {
        let (b, _) = random_valid_spec(&mut rng, Arch::Sm90a);
        let s = b.spec().swizzle;
        assert!(!s.is_blackwell_only());
        if let Some(i) = [Swizzle::None, Swizzle::B32, Swizzle::B64, Swizzle::B128]
            .iter()
            .position(|&x| x == s)
        {
            seen[i] = true;
        }
    }
    assert_eq!(seen, [true; 4]);
}
