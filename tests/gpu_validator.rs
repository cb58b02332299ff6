//! Validator == driver: thousands of random specs, valid and invalid near every boundary the
//! driver documents, each judged by `tma_core::validate` + `bind` and by
//! `cuTensorMapEncodeTiled`. Only the rules the driver itself enforces
//! (`Rule::checked_by_driver`) are compared; this toolkit's extra rules (ignored inner
//! element strides, shared-memory plans, target-arch rules) are counted separately.
//! Every disagreement is listed. Skips visibly without a GPU.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

#[path = "gpu/support.rs"]
mod support;

use std::collections::BTreeMap;
use tma_core::{
    validate, Arch, DType, EncodeArgs, Extent, Interleave, OobFill, Rule, Swizzle, TileSpec,
};
use tma_test_support::testgen::{random_valid_spec, XorShift};

/// One field pushed to (or just past) a documented boundary.
fn mutate(
    rng: &mut XorShift,
    spec: &mut TileSpec,
    global: &mut [u64],
    strides: &mut [u64],
) -> String {
    let rank = spec.rank();
    let d = rng.below(rank as u64) as usize;
    let inner = rank - 1;
    match rng.below(13) {
        0 => {
            let v = [0u32, 1, 2, 255, 256, 257, 300][rng.below(7) as usize];
            spec.boxed[d] = v;
            format!("boxed[{d}] = {v}")
        }
        1 => {
            let v = [0u32, 1, 7, 8, 9, 16][rng.below(6) as usize];
            spec.element_strides[d] = v;
            format!("element_strides[{d}] = {v}")
        }
        2 if d < inner => {
            // byte strides around multiples of 16 / 32
            let elem = spec.dtype.size_bytes().unwrap_or(1);
            let bytes = [16u64, 24, 32, 48, 8, 4096 + 16, 4096 + 8][rng.below(7) as usize];
            let v = (bytes / elem).max(1);
            strides[d] = v;
            format!("strides[{d}] = {v} ({} B)", v * elem)
        }
        3 if d < inner => {
            let elem = spec.dtype.size_bytes().unwrap_or(1);
            let bytes = [(1u64 << 40) - 16, 1 << 40, (1 << 40) + 16][rng.below(3) as usize];
            strides[d] = bytes / elem;
            format!("strides[{d}] = 2^40 {:+} B", bytes as i128 - (1i128 << 40))
        }
        4 => {
            let v = [0u64, 1, 1 << 32, (1 << 32) + 1][rng.below(4) as usize];
            global[d] = v;
            format!("global[{d}] = {v}")
        }
        5 => {
            let s = Swizzle::ALL[rng.below(7) as usize];
            spec.swizzle = s;
            format!("swizzle = {}", s.name())
        }
        6 => {
            let i = [Interleave::None, Interleave::B16, Interleave::B32][rng.below(3) as usize];
            spec.interleave = i;
            format!("interleave = {}", i.name())
        }
        7 => {
            spec.oob_fill = OobFill::NanRequestZeroFma;
            "oob_fill = nan".into()
        }
        8 => {
            // inner box bytes around 16-multiples and swizzle spans
            let elem = spec.dtype.size_bytes().unwrap_or(1);
            let bytes = [8u64, 16, 24, 32, 48, 64, 80, 128, 144, 256][rng.below(10) as usize];
            let v = (bytes / elem).max(1) as u32;
            spec.boxed[inner] = v;
            format!("boxed[inner] = {v} ({} B)", u64::from(v) * elem)
        }
        9 => {
            let t = DType::ALL[rng.below(13) as usize];
            spec.dtype = t;
            format!("dtype = {t}")
        }
        10 => {
            strides[inner] = 2;
            "innermost stride = 2".into()
        }
        11 => {
            // rank changes are not expressible through EncodeArgs of this spec; base offsets are
            let off = [0u64, 8, 16, 24, 32][rng.below(5) as usize];
            spec.name = format!("base_offset_{off}");
            format!("base address + {off}")
        }
        _ => {
            spec.boxed[d] = spec.boxed[d].saturating_mul(2).min(512);
            format!("boxed[{d}] doubled to {}", spec.boxed[d])
        }
    }
}

#[test]
fn gpu_validator_agrees_with_the_driver() {
    let Some(gpu) = support::Gpu::open("gpu_validator_agrees_with_the_driver") else {
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
        .unwrap_or(0x7a11d);
    let mut rng = XorShift::new(seed);
    let mut disagreements = Vec::new();
    let mut verdicts = BTreeMap::<&str, usize>::new();
    let mut own_rules = BTreeMap::<String, usize>::new();
    let mut driver_only = BTreeMap::<String, usize>::new();
    let buffer = gpu.scratch(1 << 16);
    let mut csv = String::from("verdict,what,dtype,rank,interleave,swizzle,oob,global,strides_bytes,box,estrides,inner_box_bytes,box_bytes,driver\n");
    for _ in 0..n {
        let (bound, _) = random_valid_spec(&mut rng, Arch::Sm90a);
        let mut spec = bound.spec().clone();
        let mut global = bound.global().to_vec();
        let mut strides = bound.strides().to_vec();
        let what = if rng.below(5) == 0 {
            "unchanged".to_string()
        } else {
            mutate(&mut rng, &mut spec, &mut global, &mut strides)
        };
        // The shape goes through `bind` (the run-time path) so that mutated dims and strides
        // are judged by the rules; left static, every one was refused as a mismatch with the
        // declared shape (RuntimeShapeMismatch, a rule of ours) and never compared.
        spec.global = vec![Extent::Runtime; spec.rank()];
        spec.strides = Some(vec![Extent::Runtime; spec.rank()]);
        let base_offset: u64 = spec
            .name
            .strip_prefix("base_offset_")
            .and_then(|s| s.parse().ok())
            .unwrap_or(0);
        // Our verdict, on the driver's rules only.
        let ours: Result<(), Vec<Rule>> = match validate(&spec) {
            Err(e) => Err(e.errors.iter().map(|e| e.rule).collect()),
            Ok(v) => match v.bind(&global, Some(&strides)) {
                Err(e) => Err(e.errors.iter().map(|e| e.rule).collect()),
                Ok(b) => match b.check_base_address(buffer + base_offset) {
                    Err(e) => Err(e.errors.iter().map(|e| e.rule).collect()),
                    Ok(()) => Ok(()),
                },
            },
        };
        let driver_rules: Vec<Rule> = match &ours {
            Ok(()) => vec![],
            Err(rules) => rules
                .iter()
                .copied()
                .filter(|r| r.checked_by_driver())
                .collect(),
        };
        let ours_by_driver_rules_ok = driver_rules.is_empty();
        let args = EncodeArgs::from_parts(&spec, &global, &strides);
        let driver = gpu.encode_result(&args, buffer + base_offset);
        let label = match (ours_by_driver_rules_ok, driver.is_ok()) {
            (true, true) => "both accept",
            (false, false) => "both reject",
            (true, false) => "driver rejects, we accept",
            (false, true) => "we reject, driver accepts",
        };
        *verdicts.entry(label).or_default() += 1;
        let elem = spec.dtype.size_bytes().unwrap_or(1);
        let box_elems: u64 = spec.boxed.iter().map(|&b| u64::from(b)).product();
        csv.push_str(
            &format!(
                "{label},{what},{},{},{},{},{},{:?},{:?},{:?},{:?},{},{},{:?}\n",
                spec.dtype,
                spec.rank(),
                spec.interleave.name(),
                spec.swizzle.name(),
                spec.oob_fill.name(),
                args.global_dim,
                args.global_strides,
                args.box_dim,
                args.element_strides,
                u64::from(args.box_dim.first().copied().unwrap_or(0)) * elem,
                box_elems * elem,
                driver.as_ref().err()
            )
            .replace(", ", " "),
        );
        if let Err(rules) = &ours {
            for r in rules.iter().filter(|r| !r.checked_by_driver()) {
                *own_rules.entry(format!("{r:?}")).or_default() += 1;
            }
        }
        if ours_by_driver_rules_ok != driver.is_ok() {
            let msg = format!(
                "{label}: {what}; ours {:?}; driver {:?}\n{args}",
                driver_rules,
                driver.as_ref().err()
            );
            if ours.is_ok() || !ours_by_driver_rules_ok {
                disagreements.push(msg);
            } else {
                *driver_only.entry(what).or_default() += 1;
            }
        }
    }
    // Exact probes around the box-size limit the driver enforces (227 KB on sm_90):
    // u8 boxes [k][4][256] of k KB.
    for k in [168u32, 192, 200, 224, 226, 227, 228, 230, 232, 240, 256] {
        let spec = TileSpec::new("probe", DType::U8, [256, 4, 256], [k, 4, 256]);
        let ours = validate(&spec).is_ok();
        let args = EncodeArgs::from_parts(&spec, &[256, 4, 256], &[1024, 256, 1]);
        let driver = gpu.encode_result(&args, buffer).is_ok();
        println!("probe box {k} KB: ours {ours}, driver {driver}");
        if ours != driver {
            disagreements.push(format!("box of {k} KB: ours {ours}, driver {driver}"));
        }
    }
    assert!(
        !own_rules.contains_key("RuntimeShapeMismatch"),
        "a mutated shape was refused as a mismatch instead of judged: {own_rules:?}"
    );
    interleaved_box_probes(&gpu, buffer, &mut disagreements);
    element_stride_box_probes(&gpu, buffer, &mut disagreements);
    println!("validator vs driver over {n} specs: {verdicts:?}");
    println!(
        "rejections by this toolkit's own rules (the driver does not check these): {own_rules:?}"
    );
    println!("driver rejections of specs we rejected by our own rules only: {driver_only:?}");
    for d in disagreements.iter().take(30) {
        println!("DISAGREEMENT {d}");
    }
    gpu.write_text("validator_disagreements.txt", &disagreements.join("\n\n"));
    gpu.write_text("validator_verdicts.csv", &csv);
    assert!(
        disagreements.is_empty(),
        "{} disagreements",
        disagreements.len()
    );
}

/// How the driver sizes an interleaved box against the shared-memory limit: boxes over 228 KB
/// when counted in chunks but not in elements, and with or without the dim-1 box the
/// hardware ignores. Each line gives the driver's verdict beside every way of counting; a
/// spec our validator accepts must be one the driver accepts, and the other way round.
fn interleaved_box_probes(gpu: &support::Gpu, buffer: u64, disagreements: &mut Vec<String>) {
    use tma_core::{L2Promotion, OobFill};
    /// dtype, TMA-order dims, byte strides, box.
    type Probe = (DType, [u64; 3], [u64; 2], [u32; 3]);
    let probes: [Probe; 10] = [
        (DType::U8, [256, 4, 256], [4096, 16384], [256, 1, 56]),
        (DType::U8, [256, 4, 256], [4096, 16384], [256, 1, 57]),
        (DType::U8, [256, 4, 256], [4096, 16384], [256, 1, 58]),
        (DType::U64, [256, 4, 256], [4096, 16384], [256, 1, 57]),
        (DType::U64, [256, 4, 256], [4096, 16384], [256, 1, 58]),
        (DType::U64, [256, 256, 4], [4096, 1 << 20], [256, 256, 1]),
        (DType::U64, [256, 256, 4], [4096, 1 << 20], [256, 128, 1]),
        (DType::U8, [16, 256, 64], [256, 65536], [16, 256, 60]),
        (DType::U8, [16, 256, 64], [256, 65536], [16, 256, 56]),
        (DType::U16, [256, 8, 64], [4096, 32768], [256, 8, 57]),
    ];
    for (dtype, dims, strides, boxd) in probes {
        let esize = dtype.size_bytes().unwrap_or(1);
        let b: Vec<u64> = boxd.iter().map(|&x| u64::from(x)).collect();
        let elements_all = b.iter().product::<u64>() * esize;
        let chunks_all = b.iter().product::<u64>() * 16;
        let chunks_no_dim1 = b[0] * b[2] * 16;
        let elements_no_dim1 = b[0] * b[2] * esize;
        let args = EncodeArgs {
            data_type: dtype,
            rank: 3,
            global_dim: dims.to_vec(),
            global_strides: strides.to_vec(),
            box_dim: boxd.to_vec(),
            element_strides: vec![1, 1, 1],
            interleave: Interleave::B16,
            swizzle: Swizzle::None,
            l2_promotion: L2Promotion::None,
            oob_fill: OobFill::Zero,
        };
        let driver = gpu.encode_result(&args, buffer);
        // Our verdict on the same map, as a user would declare it (dim 1's box as given).
        // to_tma_order reverses: applied to TMA order it gives the user's.
        let user_box: Vec<u32> = tma_core::to_tma_order(&boxd);
        let user_global: Vec<u64> = tma_core::to_tma_order(&dims);
        let mut user_strides: Vec<u64> =
            tma_core::to_tma_order(&strides.map(|bytes| bytes / esize));
        user_strides.push(1);
        let spec = TileSpec::new("ilbox", dtype, user_global.clone(), user_box)
            .strides(user_strides.clone())
            .interleave(Interleave::B16);
        let ours: Vec<Rule> =
            match validate(&spec).and_then(|v| v.bind(&user_global, Some(&user_strides))) {
                Ok(_) => vec![],
                Err(e) => e.errors.iter().map(|e| e.rule).collect(),
            };
        let ours_driver_rules: Vec<Rule> = ours
            .iter()
            .copied()
            .filter(|r| r.checked_by_driver())
            .collect();
        println!(
            "interleaved box probe {dtype} box {boxd:?}: driver {}; bytes as elements {elements_all} (without dim 1 {elements_no_dim1}), as chunks {chunks_all} (without dim 1 {chunks_no_dim1}); ours {ours:?}",
            if driver.is_ok() { "accepts" } else { "rejects" },
        );
        if ours_driver_rules.is_empty() != driver.is_ok() {
            disagreements.push(format!(
                "interleaved box {dtype} {boxd:?}: ours {ours:?}, driver {:?}",
                driver.err()
            ));
        }
    }
}

/// How the driver sizes a box with element strides against the shared-memory limit
/// (233472 B on sm_90): each probe prints the driver's verdict beside the box counted with
/// `ceil(box / element_stride)` per dim (what the copy moves), with `floor`, and without
/// element strides. u64 elements, inner box 16 (128 B), dense `[256][256][256]`.
fn element_stride_box_probes(gpu: &support::Gpu, buffer: u64, disagreements: &mut Vec<String>) {
    // User order: box of the two outer dims, their element strides.
    let probes: [([u32; 2], [u32; 2]); 10] = [
        ([57, 32], [1, 1]),   // exactly 1824 rows of 128 B: at the limit
        ([57, 33], [1, 1]),   // one over
        ([57, 64], [2, 1]),   // ceil 29 x 64 = 1856 over; floor 28 x 64 = 1792 under
        ([64, 57], [1, 2]),   // the same on the other dim
        ([59, 64], [2, 1]),   // ceil 1920, floor 1856: both over
        ([85, 64], [3, 1]),   // ceil 29 x 64 over, floor 28 x 64 under
        ([58, 64], [2, 1]),   // exact: 29 x 64 = 1856, over
        ([56, 64], [2, 1]),   // exact: 28 x 64 = 1792, under
        ([255, 255], [8, 8]), // ceil 32 x 32 = 1024, floor 31 x 31
        ([7, 256], [8, 2]),   // ceil 1 x 128, floor 0 x 128
    ];
    let limit = Arch::Sm90a.smem_per_sm();
    for (boxed, estrides) in probes {
        let spec = TileSpec::new(
            "esbox",
            DType::U64,
            [256, 256, 256],
            [boxed[0], boxed[1], 16],
        )
        .element_strides([estrides[0], estrides[1], 1]);
        let count = |f: fn(u64, u64) -> u64| -> u64 {
            (0..2)
                .map(|d| f(u64::from(boxed[d]), u64::from(estrides[d])))
                .product::<u64>()
                * 16
                * 8
        };
        let (ceil, floor) = (count(u64::div_ceil), count(|b, e| b / e));
        let full = u64::from(boxed[0]) * u64::from(boxed[1]) * 128;
        let ours: Vec<Rule> = match validate(&spec).and_then(|v| v.bind(&[256, 256, 256], None)) {
            Ok(_) => vec![],
            Err(e) => e.errors.iter().map(|e| e.rule).collect(),
        };
        let args = EncodeArgs::from_parts(&spec, &[256, 256, 256], &[65536, 256, 1]);
        let driver = gpu.encode_result(&args, buffer);
        println!(
            "element-stride box probe box {boxed:?}x16 estrides {estrides:?}: driver {}; bytes with ceil {ceil}{}, floor {floor}{}, no strides {full}{}; ours {ours:?}",
            if driver.is_ok() { "accepts" } else { "rejects" },
            if ceil > limit { " (over)" } else { "" },
            if floor > limit { " (over)" } else { "" },
            if full > limit { " (over)" } else { "" },
        );
        let ours_by_driver_rules = ours.iter().all(|r| !r.checked_by_driver());
        if ours_by_driver_rules != driver.is_ok() {
            disagreements.push(format!(
                "element-stride box {boxed:?} {estrides:?}: ours {ours:?}, driver {:?}",
                driver.err()
            ));
        }
    }
}
