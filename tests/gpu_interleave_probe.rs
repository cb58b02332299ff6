//! Probe of interleaved layouts on a GPU, which this toolkit refuses until its model matches
//! the hardware (`Rule::InterleaveLayoutUnverified`). Not a pass/fail test: it records, for a
//! few interleaved specs, which transaction byte count completes the mbarrier and where each
//! 4-byte group of global memory lands in shared memory, under $OUT/interleave_probe.txt.
//! Run it explicitly: `TMA_REQUIRE_GPU=1 ./bin/test-gpu_interleave_probe --ignored`.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

#[path = "gpu/support.rs"]
mod support;

use std::fmt::Write;
use tma_core::{DType, EncodeArgs, Interleave, Swizzle, TileSpec};

/// Global bytes that say where they came from: 4-byte group `q` holds (q as u24, 0x5a).
fn self_describing(len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| {
            let q = i / 4;
            match i % 4 {
                0 => q as u8,
                1 => (q >> 8) as u8,
                2 => (q >> 16) as u8,
                _ => 0x5a,
            }
        })
        .collect()
}

/// dtype, global (outer -> inner), strides (elements), box, interleave, swizzle, coords.
type Case = (
    DType,
    Vec<u64>,
    Vec<u64>,
    Vec<u32>,
    Interleave,
    Swizzle,
    Vec<i64>,
);

#[test]
#[ignore = "a probe: run with --ignored on a GPU"]
fn probe_interleaved_layouts() {
    let Some(gpu) = support::Gpu::open("probe_interleaved_layouts") else {
        return;
    };
    let mut report = String::new();
    // (dtype, global outer->inner, strides (elements), box, interleave, swizzle, coords user order)
    let cases: Vec<Case> = vec![
        (
            DType::U8,
            vec![4, 6, 16],
            vec![96, 16, 1],
            vec![2, 3, 16],
            Interleave::B16,
            Swizzle::None,
            vec![0, 0, 0],
        ),
        (
            DType::U8,
            vec![4, 6, 16],
            vec![96, 16, 1],
            vec![2, 3, 16],
            Interleave::B16,
            Swizzle::None,
            vec![1, 2, 0],
        ),
        (
            DType::F16,
            vec![4, 6, 8],
            vec![48, 8, 1],
            vec![2, 3, 8],
            Interleave::B16,
            Swizzle::None,
            vec![0, 0, 0],
        ),
        (
            DType::F32,
            vec![4, 6, 8],
            vec![48, 8, 1],
            vec![2, 3, 8],
            Interleave::B32,
            Swizzle::B32,
            vec![0, 0, 0],
        ),
        (
            DType::U8,
            vec![4, 6, 16],
            vec![96, 16, 1],
            vec![2, 3, 16],
            Interleave::B16,
            Swizzle::B32,
            vec![0, 0, 0],
        ),
        (
            DType::U8,
            vec![4, 6, 16],
            vec![96, 16, 1],
            vec![2, 3, 16],
            Interleave::B16,
            Swizzle::B128,
            vec![0, 0, 0],
        ),
        (
            DType::U8,
            vec![2, 8, 16],
            vec![128, 16, 1],
            vec![1, 8, 16],
            Interleave::B16,
            Swizzle::B128,
            vec![0, 0, 0],
        ),
        (
            DType::U8,
            vec![4, 6, 32],
            vec![192, 32, 1],
            vec![2, 3, 32],
            Interleave::B16,
            Swizzle::None,
            vec![0, 0, 0],
        ),
    ];
    for (dtype, global, strides, boxed, il, swz, coords) in cases {
        let spec = TileSpec::new("probe", dtype, global.clone(), boxed.clone())
            .interleave(il)
            .swizzle(swz);
        let args = EncodeArgs::from_parts(&spec, &global, &strides);
        let esize = dtype.size_bytes().unwrap();
        let extent = (global
            .iter()
            .zip(&strides)
            .map(|(&g, &s)| (g - 1) * s)
            .sum::<u64>()
            + 1)
            * esize;
        let data = self_describing(extent as usize + 64);
        let user: Vec<i32> = coords.iter().map(|&c| c as i32).collect();
        let mut tma = tma_core::to_tma_order(&user);
        tma.resize(5, 0);
        let c5: [i32; 5] = tma.try_into().unwrap();
        let data_bytes = boxed.iter().map(|&b| u64::from(b)).product::<u64>() * esize;
        let window = 16384u32;
        writeln!(report, "== {dtype} global {global:?} strides {strides:?} box {boxed:?} {} swizzle {} coords {coords:?}; data bytes {data_bytes}", il.name(), swz.name()).unwrap();
        writeln!(report, "{args}").unwrap();
        let mut found = None;
        for tx in [
            data_bytes,
            data_bytes * 2,
            data_bytes * 4,
            data_bytes / 2,
            256,
            512,
            1024,
            2048,
        ] {
            match gpu.load_raw(&args, &data, &[(c5, 0)], tx as u32, window, 0xcd) {
                Ok(smem) if smem.iter().all(|&b| b == 0xee) => {
                    writeln!(report, "  tx {tx}: timed out").unwrap();
                }
                Ok(smem) => {
                    writeln!(report, "  tx {tx}: completed").unwrap();
                    found = Some(smem);
                    break;
                }
                Err(e) => {
                    writeln!(report, "  tx {tx}: {e}").unwrap();
                    break;
                }
            }
        }
        if let Some(smem) = found {
            let last = smem.iter().rposition(|&b| b != 0xcd).map_or(0, |p| p + 1);
            writeln!(report, "  bytes written up to {last}").unwrap();
            for (i, g) in smem[..last.div_ceil(16) * 16].chunks(4).enumerate() {
                let cell = if g == [0xcd; 4] {
                    "  ----".to_string()
                } else if g[3] == 0x5a {
                    format!(
                        "{:6}",
                        u32::from(g[0]) | u32::from(g[1]) << 8 | u32::from(g[2]) << 16
                    )
                } else {
                    format!(" {:02x}{:02x}{:02x}{:02x}", g[0], g[1], g[2], g[3])
                };
                if i % 8 == 0 {
                    write!(report, "\n  {:5}:", i * 4).unwrap();
                }
                report.push_str(&cell);
            }
            report.push('\n');
        }
    }
    println!("{report}");
    gpu.write_text("interleave_probe.txt", &report);
}
