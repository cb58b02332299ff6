//! The CPU model of interleaved layouts against what an H200 did: the raw dumps of
//! `tests/gpu_interleave_probe.rs` (`tests/data/interleave_probe_h200.txt.gz`), replayed
//! without a GPU. For every load, the model's shared-memory bytes must equal the hardware's,
//! the hardware must have written nothing the model does not, and the transaction bytes the
//! copy counted on the mbarrier must equal the plan's. For every store, the global words
//! written and the shared-memory words they came from must match exactly.
//!
//! The probe's global buffer held self-describing words (word `w` = `w | 0x5a000000`), the
//! tensor starting 2 MiB in; shared memory was poisoned with 0xCD before loads and held
//! `k | 0xa5000000` in word `k` before stores.
//!
//! Most probe boxes have a box larger than 1 along dim 1, which the hardware ignores; they
//! are replayed with a box of 1 there (what validation demands), so every such dump matching
//! is itself the evidence for `Rule::InterleaveDim1BoxIsOne`.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeMap;
use std::io::Read;

use serde_json::Value;
use tma_core::model;
use tma_core::{to_tma_order, validate, DType, Interleave, Rule, Swizzle, TileSpec};

const DUMP: &[u8] = include_bytes!("data/interleave_probe_h200.txt.gz");
/// Where the tensor started in the probe's global buffer.
const BASE: u64 = 2 << 20;

fn dump_lines() -> Vec<String> {
    let mut text = String::new();
    flate2::read::GzDecoder::new(DUMP)
        .read_to_string(&mut text)
        .expect("the dump decompresses");
    text.lines().map(str::to_owned).collect()
}

/// Byte `i` of the probe's self-describing global buffer.
fn pattern_byte(i: u64) -> u8 {
    let word = (i / 4) as u32 | 0x5a00_0000;
    word.to_le_bytes()[(i % 4) as usize]
}

fn list(v: &Value) -> Vec<i64> {
    v.as_array()
        .expect("a list")
        .iter()
        .map(|x| x.as_i64().expect("an integer"))
        .collect()
}

struct Case {
    kind: char,
    index: i64,
    spec: TileSpec,
    global: Vec<u64>,
    strides: Vec<u64>,
    coords: Vec<i64>,
    rest: String,
}

/// One dump line as a user-order spec: the probe wrote encode arguments in TMA order.
fn case(line: &str) -> Case {
    let kind = line.chars().next().expect("a kind");
    let end = line.find('}').expect("a JSON header") + 1;
    let meta: Value = serde_json::from_str(&line[2..end]).expect("JSON");
    let dtype = DType::parse(meta["dtype"].as_str().expect("dtype")).expect("a known dtype");
    let esize = dtype.size_bytes().expect("whole bytes");
    let rev = |v: &Value| -> Vec<i64> { to_tma_order(&list(v)) };
    let global: Vec<u64> = rev(&meta["dims"]).iter().map(|&x| x as u64).collect();
    let mut boxed: Vec<u32> = rev(&meta["box"]).iter().map(|&x| x as u32).collect();
    let mut estrides: Vec<u32> = rev(&meta["es"]).iter().map(|&x| x as u32).collect();
    // The hardware takes one position along dim 1 whatever the box says.
    boxed[1] = 1;
    estrides[1] = 1;
    let mut strides: Vec<u64> = rev(&meta["strides"])
        .iter()
        .map(|&b| b as u64 / esize)
        .collect();
    strides.push(1);
    let interleave = match meta["il"].as_i64() {
        Some(16) => Interleave::B16,
        Some(32) => Interleave::B32,
        other => panic!("interleave {other:?}"),
    };
    let swizzle = match meta["sw"].as_i64() {
        Some(0) => Swizzle::None,
        Some(32) => Swizzle::B32,
        Some(64) => Swizzle::B64,
        Some(128) => Swizzle::B128,
        other => panic!("swizzle {other:?}"),
    };
    let spec = TileSpec::new("probe", dtype, global.clone(), boxed)
        .strides(strides.clone())
        .element_strides(estrides)
        .interleave(interleave)
        .swizzle(swizzle);
    Case {
        kind,
        index: meta["i"].as_i64().expect("index"),
        spec,
        global,
        strides,
        coords: rev(&meta["coords"]),
        rest: line[end..].trim().to_owned(),
    }
}

#[test]
fn interleave_model_matches_the_h200_dumps() {
    let (mut loads, mut stores) = (0, 0);
    let mut refused = BTreeMap::<String, usize>::new();
    let mut mismatches = Vec::new();
    for line in dump_lines() {
        let c = case(&line);
        assert!(
            matches!(c.kind, 'L' | 'S'),
            "#{}: the probe recorded {}",
            c.index,
            line
        );
        let bound = match validate(&c.spec).and_then(|v| v.bind(&c.global, Some(&c.strides))) {
            Ok(b) => b,
            Err(e) => {
                for err in e.errors {
                    *refused.entry(format!("{:?}", err.rule)).or_default() += 1;
                }
                continue;
            }
        };
        let global: Vec<u8> = (0..bound.extent_bytes())
            .map(|i| pattern_byte(BASE + i))
            .collect();
        let problem = if c.kind == 'L' {
            loads += 1;
            check_load(&bound, &global, &c)
        } else {
            stores += 1;
            check_store(&bound, &global, &c)
        };
        if let Some(p) = problem {
            mismatches.push(format!("#{} {:?}: {p}", c.index, c.spec));
        }
    }
    println!("interleave dumps: {loads} loads, {stores} stores checked; refused by validation: {refused:?}");
    assert!(
        mismatches.is_empty(),
        "{} dumps disagree with the model:\n{}",
        mismatches.len(),
        mismatches.join("\n")
    );
    // The only dumps validation refuses are 32-byte interleave without the 32B swizzle
    // (the documented rule; the H200 ran them as the model says).
    assert_eq!(
        refused.keys().collect::<Vec<_>>(),
        vec![&format!("{:?}", Rule::Interleave32NeedsSwizzle32)]
    );
    assert!(
        loads >= 190 && stores >= 90,
        "{loads} loads, {stores} stores"
    );
}

fn check_load(bound: &tma_core::BoundSpec, global: &[u8], c: &Case) -> Option<String> {
    let (counted, hex) = c.rest.split_once(' ').unwrap_or((c.rest.as_str(), ""));
    let counted: u64 = counted.parse().expect("tx count");
    let hw: Vec<u8> = (0..hex.len() / 2)
        .map(|i| u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).expect("hex"))
        .collect();
    let tx = bound.plan().tx_bytes;
    if counted != tx {
        return Some(format!(
            "the copy counted {counted} tx bytes; the plan says {tx}"
        ));
    }
    let want = model::load(bound, global, &c.coords)
        .unwrap_or_else(|e| panic!("#{} {:?}: {e}", c.index, c.spec));
    let places = model::elements(bound, &c.coords, Default::default()).expect("the model places");
    let esize = bound.spec().dtype.size_bytes().expect("whole bytes");
    let mut written = vec![false; want.len().max(hw.len())];
    for p in &places {
        for b in p.smem..p.smem + esize {
            written[b as usize] = true;
        }
    }
    for (i, &w) in written.iter().enumerate() {
        let got = hw.get(i).copied().unwrap_or(0xcd);
        let expect = if w { want[i] } else { 0xcd };
        if got != expect {
            return Some(format!(
                "smem byte {i}: hardware {got:#04x}, model {expect:#04x} ({})",
                if w { "written" } else { "untouched" }
            ));
        }
    }
    None
}

fn check_store(bound: &tma_core::BoundSpec, global: &[u8], c: &Case) -> Option<String> {
    // Global byte offset (from the base) -> shared-memory word, as the hardware wrote.
    let mut hw = BTreeMap::<i64, i64>::new();
    for run in c.rest.split(',').filter(|r| !r.is_empty()) {
        let v: Vec<i64> = run.split(':').map(|x| x.parse().expect("run")).collect();
        for k in 0..v[2] {
            hw.insert(v[0] + 4 * k, v[1] + k);
        }
    }
    let len = model::smem_len(bound).expect("layout") as usize;
    let smem: Vec<u8> = (0..len / 4)
        .flat_map(|k| (k as u32 | 0xa500_0000).to_le_bytes())
        .collect();
    let mut after = global.to_vec();
    model::store(bound, &smem, &c.coords, &mut after).expect("the model stores");
    let mut want = BTreeMap::<i64, i64>::new();
    for (w, (a, b)) in after.chunks(4).zip(global.chunks(4)).enumerate() {
        if a != b {
            let v = u32::from_le_bytes([a[0], a[1], a[2], a[3]]);
            want.insert(4 * w as i64, i64::from(v & 0x00ff_ffff));
        }
    }
    (hw != want).then(|| {
        let first = hw
            .iter()
            .zip(&want)
            .find(|(a, b)| a != b)
            .map(|(a, b)| format!("hardware {a:?}, model {b:?}"));
        format!(
            "{} words written by the hardware, {} by the model; first difference: {first:?}",
            hw.len(),
            want.len()
        )
    })
}
