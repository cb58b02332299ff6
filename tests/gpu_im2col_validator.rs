//! im2col validator == driver: thousands of random im2col specs, valid and pushed to (or just
//! past) every documented edge (rank, corners per rank, empty bounding boxes, pixels per
//! column around 256 and 1024, channels around 256, 16-byte channel multiples, swizzle spans,
//! traversal strides, global dims and strides, base addresses, NaN fill, shared-memory size),
//! each judged by `tma_core::validate_im2col` + `bind` + the base-address check and by
//! `cuTensorMapEncodeIm2col`. Only the rules the driver enforces (`Rule::checked_by_driver`)
//! are compared; every disagreement is printed with its spec and arguments (and written to
//! `$OUT/im2col_validator_disagreements.txt`). Skips visibly without a GPU.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

#[path = "gpu/support.rs"]
mod support;

use std::collections::BTreeMap;
use tma_core::limits::im2col_corner_range;
use tma_core::{
    validate_im2col, DType, Extent, Im2colEncodeArgs, Im2colSpec, OobFill, Rule, Swizzle,
};
use tma_test_support::testgen::{random_im2col, XorShift};

/// One field pushed to (or just past) a documented edge. Returns what was done.
fn mutate(
    rng: &mut XorShift,
    spec: &mut Im2colSpec,
    global: &mut [u64],
    strides: &mut [u64],
    base_offset: &mut u64,
) -> String {
    let rank = spec.rank();
    let k = spec.spatial_rank();
    let i = rng.below(k as u64) as usize;
    let (lo, hi) = im2col_corner_range(k);
    let elem = spec.dtype.size_bytes().unwrap_or(1);
    match rng.below(14) {
        0 => {
            let v = [lo - 1, lo, lo + 1, hi - 1, hi, hi + 1][rng.below(6) as usize];
            spec.lower_corner[i] = v;
            format!("lower_corner[{i}] = {v}")
        }
        1 => {
            let v = [lo - 1, lo, lo + 1, hi - 1, hi, hi + 1][rng.below(6) as usize];
            spec.upper_corner[i] = v;
            format!("upper_corner[{i}] = {v}")
        }
        2 => {
            // The bounding box around empty: extent + upper - lower in {-1, 0, 1, 2}.
            let want = rng.range(0, 3) as i64 - 1;
            let dim = global[i + 1] as i64;
            let upper = (want - dim + i64::from(spec.lower_corner[i])).clamp(-40000, 40000);
            spec.upper_corner[i] = upper as i32;
            format!(
                "upper_corner[{i}] = {upper} (box of {} positions)",
                dim + upper - i64::from(spec.lower_corner[i])
            )
        }
        3 => {
            let v = [0u32, 1, 255, 256, 257, 512, 1023, 1024, 1025, 2048][rng.below(10) as usize];
            spec.pixels_per_column = v;
            format!("pixels_per_column = {v}")
        }
        4 => {
            let bytes = [8u64, 16, 24, 32, 48, 64, 80, 128, 144, 256, 512][rng.below(11) as usize];
            let v = (bytes / elem).max(1) as u32;
            spec.channels_per_pixel = v;
            format!("channels_per_pixel = {v} ({} B)", u64::from(v) * elem)
        }
        5 => {
            let v = [0u32, 1, 255, 256, 257][rng.below(5) as usize];
            spec.channels_per_pixel = v;
            format!("channels_per_pixel = {v}")
        }
        6 => {
            let v = [0u32, 1, 7, 8, 9, 16][rng.below(6) as usize];
            spec.element_strides[i] = v;
            format!("element_strides[{i}] = {v}")
        }
        7 => {
            let s =
                [Swizzle::None, Swizzle::B32, Swizzle::B64, Swizzle::B128][rng.below(4) as usize];
            spec.swizzle = s;
            format!("swizzle = {}", s.name())
        }
        8 => {
            let d = rng.below(rank as u64 - 1) as usize;
            let bytes = [16u64, 24, 32, 48, 8, 4096 + 16, 4096 + 8][rng.below(7) as usize];
            strides[d] = (bytes / elem).max(1);
            format!("strides[{d}] = {} ({} B)", strides[d], strides[d] * elem)
        }
        9 => {
            let d = rng.below(rank as u64) as usize;
            let v = [0u64, 1, 1 << 32, (1 << 32) + 1][rng.below(4) as usize];
            global[d] = v;
            format!("global[{d}] = {v}")
        }
        10 => {
            spec.oob_fill = OobFill::NanRequestZeroFma;
            "oob_fill = nan".into()
        }
        11 => {
            // Every type but the packed ones (Blackwell only).
            let t = *rng
                .pick(&[&DType::ALL[..13], &DType::ALL[16..]].concat())
                .unwrap();
            spec.dtype = t;
            format!("dtype = {t}")
        }
        12 => {
            *base_offset = [8u64, 16, 24][rng.below(3) as usize];
            format!("base address + {base_offset}")
        }
        _ => {
            // Loads of about one SM: pixels x channels x size around 228 KB.
            spec.dtype = DType::F64;
            spec.channels_per_pixel = 32;
            spec.swizzle = Swizzle::None;
            spec.pixels_per_column = [896u32, 911, 912, 913, 1024][rng.below(5) as usize];
            format!(
                "f64 x 32 channels x {} pixels = {} B",
                spec.pixels_per_column,
                u64::from(spec.pixels_per_column) * 256
            )
        }
    }
}

#[test]
fn gpu_im2col_validator_agrees_with_the_driver() {
    let Some(gpu) = support::Device::open("gpu_im2col_validator_agrees_with_the_driver") else {
        return;
    };
    let n: usize = std::env::var("TMA_GPU_SPECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(3000)
        * 2;
    let seed = std::env::var("TMA_GPU_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0x0012_c07a_11d0);
    let mut rng = XorShift::new(seed);
    let buffer: cudarc::driver::CudaSlice<u8> = gpu.stream.alloc_zeros(1 << 16).unwrap();
    let base = {
        use cudarc::driver::DevicePtr;
        buffer.device_ptr(&gpu.stream).0
    };
    gpu.ctx.bind_to_thread().unwrap();
    let encode = |args: &Im2colEncodeArgs, addr: u64| -> Result<(), String> {
        // SAFETY: a context is current; the driver only reads the arguments.
        unsafe { tma::runtime::driver::encode_im2col_args(args, addr) }
            .map(|_| ())
            .map_err(|e| match e {
                tma::runtime::Error::EncodeIm2col { result, .. } => format!("{result:?}"),
                other => other.to_string(),
            })
    };
    let mut disagreements = Vec::new();
    let mut verdicts = BTreeMap::<&str, usize>::new();
    let mut own_rules = BTreeMap::<String, usize>::new();
    let mut by_mutation = BTreeMap::<String, (usize, usize)>::new();
    for _ in 0..n {
        let (bound, _, _) = random_im2col(&mut rng);
        let mut spec = bound.spec().clone();
        let mut global = bound.global().to_vec();
        let mut strides = bound.strides().to_vec();
        let mut base_offset = 0u64;
        let what = if rng.below(5) == 0 {
            "unchanged".to_string()
        } else {
            mutate(
                &mut rng,
                &mut spec,
                &mut global,
                &mut strides,
                &mut base_offset,
            )
        };
        // The shape goes through `bind` (the run-time path), so mutated dims are judged.
        spec.global = vec![Extent::Runtime; spec.rank()];
        spec.strides = Some(vec![Extent::Runtime; spec.rank()]);
        let ours: Result<(), Vec<Rule>> = match validate_im2col(&spec) {
            Err(e) => Err(e.errors.iter().map(|e| e.rule).collect()),
            Ok(v) => match v.bind(&global, Some(&strides)) {
                Err(e) => Err(e.errors.iter().map(|e| e.rule).collect()),
                Ok(b) => b
                    .check_base_address(base + base_offset)
                    .map_err(|e| e.errors.iter().map(|e| e.rule).collect()),
            },
        };
        let driver_rules: Vec<Rule> = match &ours {
            Ok(()) => vec![],
            Err(r) => r
                .iter()
                .copied()
                .filter(|r| r.checked_by_driver())
                .collect(),
        };
        let args = Im2colEncodeArgs::from_parts(&spec, &global, &strides);
        let driver = encode(&args, base + base_offset);
        let ours_ok = driver_rules.is_empty();
        let label = match (ours_ok, driver.is_ok()) {
            (true, true) => "both accept",
            (false, false) => "both reject",
            (true, false) => "driver rejects, we accept",
            (false, true) => "we reject, driver accepts",
        };
        *verdicts.entry(label).or_default() += 1;
        let key = what.split([' ', '[']).next().unwrap_or("").to_string();
        let entry = by_mutation.entry(key).or_default();
        entry.0 += usize::from(driver.is_ok());
        entry.1 += 1;
        if let Err(rules) = &ours {
            for r in rules.iter().filter(|r| !r.checked_by_driver()) {
                *own_rules.entry(format!("{r:?}")).or_default() += 1;
            }
        }
        if ours_ok != driver.is_ok() {
            let msg = format!(
                "{label}: {what}; ours {:?}; driver {:?}\n{args}",
                ours.as_ref().err(),
                driver.as_ref().err()
            );
            // A spec refused only by this toolkit's own rules is not a disagreement.
            let own_only = ours.as_ref().is_err() && ours_ok;
            if !own_only {
                disagreements.push(msg);
            }
        }
    }
    // Exact probes: rank, and pixels per column / channels at their documented limits on a
    // small u8 NHWC tensor.
    let probe = |spec: &Im2colSpec, global: &[u64]| {
        let strides = tma_core::validate::dense_strides(global, 1).unwrap();
        let ours = validate_im2col(spec)
            .and_then(|v| v.bind(global, Some(&strides)))
            .map(|_| ())
            .map_err(|e| e.errors.iter().map(|e| e.rule).collect::<Vec<_>>());
        let args = Im2colEncodeArgs::from_parts(spec, global, &strides);
        (ours, args)
    };
    for pixels in [255u32, 256, 257, 1024, 1025] {
        let spec = Im2colSpec::new("probe", DType::U8, [2, 8, 8, 16], 16, pixels);
        let (ours, args) = probe(&spec, &[2, 8, 8, 16]);
        let driver = encode(&args, base);
        println!("probe pixels {pixels}: ours {ours:?}, driver {driver:?}");
        if ours.is_ok() != driver.is_ok() {
            disagreements.push(format!("pixels {pixels}: ours {ours:?}, driver {driver:?}"));
        }
    }
    // Each dim of a u8 NHWC tensor at the edges of 2^31 and 2^32 (the random mutations found
    // the driver refusing 2^32 for the spatial dims, which tiled mode takes).
    for d in 0..4usize {
        for v in [
            (1u64 << 31) - 1,
            1 << 31,
            (1 << 31) + 1,
            (1 << 32) - 1,
            1 << 32,
        ] {
            let mut global = [2u64, 8, 8, 16];
            global[d] = v;
            let mut spec = Im2colSpec::new("probe", DType::U8, [2, 8, 8, 16], 16, 16);
            spec.global = vec![Extent::Runtime; 4];
            let (ours, args) = probe(&spec, &global);
            let driver = encode(&args, base);
            println!("probe global[{d}] = {v}: ours {ours:?}, driver {driver:?}");
            if ours.is_ok() != driver.is_ok() {
                disagreements.push(format!(
                    "global[{d}] = {v}: ours {ours:?}, driver {driver:?}"
                ));
            }
        }
    }
    for (rank, global) in [(2usize, vec![8u64, 16]), (6, vec![2, 2, 2, 2, 2, 16])] {
        let mut args = Im2colEncodeArgs::from_parts(
            &Im2colSpec::new("probe", DType::U8, [2, 8, 8, 16], 16, 16),
            &[2, 8, 8, 16],
            &[1024, 128, 16, 1],
        );
        args.rank = rank as u32;
        args.global_dim = global.clone();
        args.global_strides = (1..rank).map(|d| 16u64 << d).collect();
        args.element_strides = vec![1; rank];
        let spatial = rank.saturating_sub(2).min(3);
        args.lower_corner = vec![0; spatial];
        args.upper_corner = vec![0; spatial];
        let driver = encode(&args, base);
        let ours = validate_im2col(&Im2colSpec::new("probe", DType::U8, global, 16, 16)).is_ok();
        println!("probe rank {rank}: ours {ours}, driver {driver:?}");
        if ours != driver.is_ok() {
            disagreements.push(format!("rank {rank}: ours {ours}, driver {driver:?}"));
        }
    }
    println!("im2col validator vs driver over {n} specs: {verdicts:?}");
    println!("driver acceptances per mutation (accepted, tried): {by_mutation:?}");
    println!("rejections by this toolkit's own rules: {own_rules:?}");
    for d in disagreements.iter().take(30) {
        println!("DISAGREEMENT {d}");
    }
    if let Some(dir) = std::env::var_os("OUT") {
        let _ = std::fs::write(
            std::path::Path::new(&dir).join("im2col_validator_disagreements.txt"),
            disagreements.join("\n\n"),
        );
    }
    assert!(
        disagreements.is_empty(),
        "{} disagreements",
        disagreements.len()
    );
}
