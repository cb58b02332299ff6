//! The wgmma register fragments ([`tma_core::wgmma::fragment`]) against the PTX ISA's figures,
//! as bijections over every instruction N, and in use: an epilogue checked on the CPU through
//! them, the stmatrix pairing a 16-bit epilogue stores with, and the accumulator read as A.
#![allow(clippy::unwrap_used, clippy::panic)]

use tma_core::wgmma::fragment::{d_owner, d_position, WARPGROUP_THREADS};
use tma_core::wgmma::{AccumulatorType, Fragment, FragmentError};
use tma_core::Rule;

fn every_n() -> impl Iterator<Item = u32> {
    (8..=256).step_by(8)
}

/// Pinned from PTX ISA Figure 149 ("WGMMA .m64nNk16 register fragment layout for accumulator
/// matrix D"): row 0 holds T0 d0 d1, T1 d0 d1, T2, T3, then T0 d4 d5 at columns 8 and 9; row 8
/// holds T0 d2 d3; warp 1 starts at row 16; T127 (warp 3, lane 31) ends the tile.
#[test]
fn positions_are_the_isa_figure() {
    let cases = [
        ((0, 0), (0, 0)),
        ((0, 1), (0, 1)),
        ((0, 2), (8, 0)),
        ((0, 3), (8, 1)),
        ((0, 4), (0, 8)),
        ((0, 5), (0, 9)),
        ((1, 0), (0, 2)),
        ((3, 1), (0, 7)),
        ((4, 0), (1, 0)),
        ((31, 3), (15, 7)),
        ((32, 0), (16, 0)),
        ((127, 0), (55, 6)),
        ((127, 127), (63, 255)),
    ];
    for ((t, i), want) in cases {
        assert_eq!(d_position(t, i), want, "thread {t} element {i}");
        assert_eq!(d_owner(want.0, want.1), (t, i), "D{want:?}");
    }
}

/// For every N of the instruction set and both accumulator types, the 128 threads' N / 2
/// elements cover the 64 x N tile exactly once, `owner` inverts `position`, and the registers
/// hold each element once.
#[test]
fn d_fragment_is_a_bijection_over_every_n() {
    for n in every_n() {
        for dtype in [AccumulatorType::F32, AccumulatorType::F16] {
            let f = Fragment::accumulator(n, dtype).unwrap();
            assert_eq!(
                (f.rows(), f.cols(), f.elements_per_thread()),
                (64, n, n / 2)
            );
            let regs = match dtype {
                AccumulatorType::F32 => n / 2,
                AccumulatorType::F16 => n / 4,
            };
            assert_eq!(f.registers_per_thread(), regs, "N {n} {dtype:?}");
            let mut seen = vec![false; (64 * n) as usize];
            let mut count = 0;
            for e in f.iter() {
                assert!(e.row < 64 && e.col < n, "N {n}: {e:?} outside the tile");
                let slot = &mut seen[(e.row * n + e.col) as usize];
                assert!(!*slot, "N {n}: D[{}][{}] held twice", e.row, e.col);
                *slot = true;
                assert_eq!(f.position(e.thread, e.element), Some(e));
                assert_eq!(f.owner(e.row, e.col), Some(e));
                count += 1;
            }
            assert_eq!(count, 64 * n);
            assert!(seen.iter().all(|s| *s), "N {n}: holes");
            // Registers: each (register, half) of a thread holds one element.
            let mut halves = vec![false; (regs * 2) as usize];
            for i in 0..f.elements_per_thread() {
                let (r, h) = f.register_of(i);
                assert!(r < regs, "N {n} {dtype:?}: element {i} in register {r}");
                let slot = &mut halves[(r * 2 + h) as usize];
                assert!(!*slot);
                *slot = true;
            }
            // Out of range is None, not a wrapped position.
            assert_eq!(f.position(WARPGROUP_THREADS, 0), None);
            assert_eq!(f.position(0, n / 2), None);
            assert_eq!(f.owner(64, 0), None);
            assert_eq!(f.owner(0, n), None);
        }
    }
}

/// A from registers (Figure 148): the same layout over 64 x 16, 8 elements in 4 `.f16x2`.
#[test]
fn a_fragment_is_a_bijection_over_64_by_16() {
    let a = Fragment::a_16bit();
    assert_eq!(
        (a.cols(), a.elements_per_thread(), a.registers_per_thread()),
        (16, 8, 4)
    );
    // a0 a1: row groupID, columns 2 tig, +1; a2 a3: 8 rows down; a4..a7: 8 columns right.
    let t = 37; // warp 1, lane 5: groupID 1, threadID_in_group 1
    let got: Vec<(u32, u32)> = (0..8)
        .map(|i| a.position(t, i).map(|e| (e.row, e.col)).unwrap())
        .collect();
    assert_eq!(
        got,
        [
            (17, 2),
            (17, 3),
            (25, 2),
            (25, 3),
            (17, 10),
            (17, 11),
            (25, 10),
            (25, 11)
        ]
    );
    assert_eq!(a.register_of(5), (2, 1));
    let mut seen = [false; 64 * 16];
    for e in a.iter() {
        let slot = &mut seen[(e.row * 16 + e.col) as usize];
        assert!(!*slot);
        *slot = true;
    }
    assert!(seen.iter().all(|s| *s));
}

#[test]
fn only_an_instructions_n_has_a_fragment() {
    for n in [0, 4, 12, 260, 264, 1024] {
        match Fragment::accumulator(n, AccumulatorType::F32) {
            Err(e @ FragmentError::N { .. }) => {
                assert_eq!(e.rule(), Some(Rule::WgmmaMnExtent));
                assert_eq!(
                    e.to_string(),
                    format!("wgmma accumulator N = {n}: the instruction's N is a multiple of 8 from 8 to 256 (rule WgmmaMnExtent, PTX ISA 9.7.15.2)")
                );
            }
            other => panic!("N {n}: {other:?}"),
        }
    }
}

/// An epilogue checked on the CPU as the kernel runs it: D = A x B (exact small integers) is
/// spread over the warpgroup's registers; each thread adds the bias of its element's column
/// (as a kernel indexes it, `bias[tma_wgmma_d_col(t, i)]`), applies ReLU and scales its
/// element's row; the registers gathered back equal the epilogue applied to D directly.
#[test]
fn an_epilogue_checked_through_the_fragment() {
    let (n, k) = (128u32, 32u32);
    let f = Fragment::accumulator(n, AccumulatorType::F32).unwrap();
    let mut x = 0x2545_f491_u32;
    let mut small = || {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        (x % 7) as f32 - 3.0
    };
    let a: Vec<f32> = (0..64 * k).map(|_| small()).collect();
    let b: Vec<f32> = (0..n * k).map(|_| small()).collect(); // N x K (K-major B)
    let bias: Vec<f32> = (0..n).map(|_| small()).collect();
    let row_scale: Vec<f32> = (0..64).map(|_| small()).collect();
    let mut d = vec![0f32; (64 * n) as usize];
    for r in 0..64 {
        for c in 0..n {
            d[(r * n + c) as usize] = (0..k)
                .map(|kk| a[(r * k + kk) as usize] * b[(c * k + kk) as usize])
                .sum();
        }
    }
    let epilogue =
        |v: f32, row: u32, col: u32| (v + bias[col as usize]).max(0.0) * row_scale[row as usize];
    // The kernel's view: registers per thread.
    let mut regs = f.scatter(&d).unwrap();
    for (t, elements) in regs.iter_mut().enumerate() {
        for (i, v) in elements.iter_mut().enumerate() {
            let e = f.position(t as u32, i as u32).unwrap();
            *v = epilogue(*v, e.row, e.col);
        }
    }
    let got = f.gather(&regs).unwrap();
    let want: Vec<f32> = d
        .iter()
        .enumerate()
        .map(|(j, &v)| epilogue(v, j as u32 / n, j as u32 % n))
        .collect();
    assert_eq!(got, want);
    // Scatter then gather is the identity; wrong sizes are named errors.
    assert_eq!(f.gather(&f.scatter(&d).unwrap()).unwrap(), d);
    assert!(matches!(
        f.scatter(&d[1..]),
        Err(FragmentError::Length {
            expected: 8192,
            given: 8191,
            ..
        })
    ));
    regs[5].pop();
    match f.gather(&regs) {
        Err(e) => assert_eq!(
            e.to_string(),
            "elements of thread 5: expected 64 elements, got 63"
        ),
        Ok(_) => panic!("a short thread gathered"),
    }
}

/// The 16-bit epilogue's store (examples/05-gemm/kernel.cu, `gemm_store_tma`): `stmatrix.x4`
/// stores four 8 x 8 matrices; lane `l` gives row `l / 4`, columns `2 (l % 4)` and `+1` of each
/// in its register `q`. A thread's elements `8 j + 2 q`, `+1` (packed into one `.b32`) are
/// exactly those of matrix `q` at rows `16 w + 8 (q % 2)`, columns `16 j + 8 (q / 2)`: the
/// pairing the kernel uses, for every N.
#[test]
fn stmatrix_x4_takes_accumulator_pairs_in_order() {
    for n in (16..=256).step_by(16) {
        let f = Fragment::accumulator(n, AccumulatorType::F32).unwrap();
        for t in 0..WARPGROUP_THREADS {
            let (w, l) = (t / 32, t % 32);
            for j in 0..n / 16 {
                for q in 0..4 {
                    let (r0, c0) = (16 * w + 8 * (q % 2), 16 * j + 8 * (q / 2));
                    let lo = f.position(t, 8 * j + 2 * q).unwrap();
                    let hi = f.position(t, 8 * j + 2 * q + 1).unwrap();
                    assert_eq!(
                        (lo.row, lo.col),
                        (r0 + l / 4, c0 + 2 * (l % 4)),
                        "N {n} t {t} j {j} q {q}"
                    );
                    assert_eq!((hi.row, hi.col), (lo.row, lo.col + 1));
                }
            }
        }
    }
}

/// Read as A: accumulator element `8 s + e` of a thread is A element `e` of k-slice `s` of the
/// same thread, at the same row and at column `16 s` + A's column.
#[test]
fn the_accumulator_is_a_fragments_of_its_k_slices() {
    let a = Fragment::a_16bit();
    for n in (16..=256).step_by(16) {
        let d = Fragment::accumulator(n, AccumulatorType::F16).unwrap();
        for e in d.iter() {
            let (slice, ae) = d.accumulator_to_a(e.element).unwrap();
            let as_a = a.position(e.thread, ae).unwrap();
            assert_eq!(
                (e.row, e.col),
                (as_a.row, as_a.col + 16 * slice),
                "N {n}: {e:?}"
            );
        }
        assert_eq!(d.accumulator_to_a(n / 2), None);
    }
}
