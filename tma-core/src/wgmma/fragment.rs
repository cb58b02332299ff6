//! Register fragments of `wgmma.mma_async.m64nNk16`: which element of the matrix each thread
//! of the warpgroup holds in each of its registers. The CPU side of an epilogue (or of a
//! register-sourced A operand) uses it to put a CPU-computed D where each thread's registers
//! hold it, and to read back what a kernel's threads wrote.
//!
//! PTX ISA 9.7.15.5.1.1.1, "Matrix Fragments for wgmma.mma_async.m64nNk16" (Figure 148, A in
//! registers; Figure 149, the accumulator D). Thread `t` of the warpgroup (`t = threadIdx.x %
//! 128`) is lane `l = t % 32` of warp `w = t / 32`; `groupID = l / 4`, `threadID_in_group =
//! l % 4`. Element `i` of its fragment (`d_i`, `a_i`) is
//!
//! ```text
//! row = 16 w + groupID + 8 ((i / 2) % 2)
//! col = 8 (i / 4) + 2 threadID_in_group + i % 2
//! ```
//!
//! Warp `w` owns rows `16 w .. 16 w + 15`; each 8-column block of D is one 16 x 8 `mma`-style
//! fragment (4 elements per thread: two rows, two adjacent columns). D of `.f32` is `N / 2`
//! `.f32` registers, element `i` in register `i`; D of `.f16` is `N / 4` `.f16x2` registers,
//! element `i` in the low (`i` even) or high half of register `i / 2`. A from registers (`.f16`
//! / `.bf16`) is the same layout over its 64 x 16 (M x K) matrix: 8 elements in 4 `.f16x2`
//! registers. The CuTe layouts say the same (`CLayout_64xN`, `ALayout_64x16` of
//! `cute/atom/mma_traits_sm90_gmma.hpp`), and so do the generated CUDA helpers
//! `tma_wgmma_d_row` / `tma_wgmma_d_col` (templates/wgmma.cuh.tera; tests/gpu_wgmma.rs checks
//! them against [`d_position`] with NVRTC, and the GPU writes D through them).
//!
//! One consequence, the base of flash-attention's register reuse: the accumulator's columns
//! `16 s .. 16 s + 15` are, element for element, an A fragment (`d_{8 s + e}` is `a_e` of the
//! k-slice `s`), so a converted accumulator feeds the next wgmma as A without a shuffle
//! ([`Fragment::accumulator_to_a`]).

use crate::operand::{WgmmaType, N_MAX, N_MIN, N_STEP};
use crate::rules::Rule;

/// Threads of a warpgroup, which one wgmma spreads its fragments over.
pub const WARPGROUP_THREADS: u32 = 128;
/// Rows of every m64nNk16 fragment (A's M, D's M).
pub const FRAGMENT_ROWS: u32 = 64;
/// Columns of an A fragment from registers: K of k16.
pub const A_COLS: u32 = 16;

/// Row and column of element `element` of thread `thread` of the warpgroup in an m64nNk16
/// fragment (D, or A from registers): the formula of the module docs. Total for `thread <
/// 128`; `element` must be below the fragment's elements per thread ([`Fragment::position`]
/// checks both).
pub const fn d_position(thread: u32, element: u32) -> (u32, u32) {
    let (warp, lane) = (thread / 32, thread % 32);
    let row = 16 * warp + lane / 4 + 8 * ((element / 2) % 2);
    let col = 8 * (element / 4) + 2 * (lane % 4) + element % 2;
    (row, col)
}

/// The inverse of [`d_position`]: the (thread, element) holding `(row, col)`, for `row < 64`.
pub const fn d_owner(row: u32, col: u32) -> (u32, u32) {
    let (warp, in_warp) = (row / 16, row % 16);
    let lane = (in_warp % 8) * 4 + (col % 8) / 2;
    let element = 4 * (col / 8) + 2 * (in_warp / 8) + col % 2;
    (warp * 32 + lane, element)
}

/// The accumulator's element type.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AccumulatorType {
    /// `.f32`: one element per register.
    F32,
    /// `.f16`: two elements per `.f16x2` register.
    F16,
}

/// A register fragment (A or D) is refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum FragmentError {
    /// The accumulator's N is not an instruction's.
    #[error(
        "wgmma accumulator N = {n}: the instruction's N is a multiple of {N_STEP} from {N_MIN} to \
         {N_MAX} (rule {:?}, PTX ISA 9.7.15.2)",
        Rule::WgmmaMnExtent
    )]
    N { n: u32 },
    /// A matrix or register list of the wrong size for the fragment.
    #[error("{what}: expected {expected} elements, got {given}")]
    Length {
        /// What was passed: "D (64 x 128, row-major)", "registers of thread 3".
        what: String,
        expected: usize,
        given: usize,
    },
    /// A from registers of a type other than f16 / bf16 (tf32 and fp8 register A are not
    /// modelled or rendered).
    #[error(
        "A from registers of type {kind}: only f16 and bf16 are supported (PTX ISA 9.7.15.5.1.1.1)"
    )]
    RegisterA { kind: WgmmaType },
    /// An accumulator fed back as A, or an A matrix, whose N (columns) is not whole k16
    /// slices. `u64`: an A matrix's columns are a `usize`, named as given.
    #[error(
        "N = {n} columns as A (an accumulator fed back, or an A matrix): the k-slices of A are 16 columns, so N must be a nonzero multiple of 16"
    )]
    KSlices { n: u64 },
    /// A share of a row's exponentials on the polynomial that is not 0..=8 of every 8.
    #[error(
        "{poly_of_8} of every 8 exponentials on the polynomial: the share is 0 to 8 (tma_wgmma_row_exp2_poly<N, POLY_OF_8, DEG>)"
    )]
    PolyShare { poly_of_8: u32 },
    /// A lazy max's headroom that is negative, infinite or NaN: a negative one moves every
    /// row on every block (the warp never skips its rescale), NaN or infinity none ever (its
    /// exponentials overflow). Held as bits: an f32 has no `Eq` (`f32::from_bits` gives it).
    #[error(
        "headroom_log2 = {}: a lazy max's headroom is a finite log2 of at least 0 (tma_wgmma_row_max_lazy<N>; 0 moves every max that grew)",
        f32::from_bits(*.headroom_log2_bits)
    )]
    Headroom { headroom_log2_bits: u32 },
}

impl FragmentError {
    /// The rule broken, when a rule of [`Rule`] states it.
    pub fn rule(&self) -> Option<Rule> {
        match self {
            FragmentError::N { .. } => Some(Rule::WgmmaMnExtent),
            FragmentError::Length { .. }
            | FragmentError::RegisterA { .. }
            | FragmentError::KSlices { .. }
            | FragmentError::PolyShare { .. }
            | FragmentError::Headroom { .. } => None,
        }
    }
}

/// One element of a fragment: which thread holds it, as which element (register `i`, or half
/// of one: [`Fragment::register_of`]), and where it is in the matrix.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct FragmentElement {
    /// Thread of the warpgroup, `threadIdx.x % 128`.
    pub thread: u32,
    /// Index in the thread's fragment (`d_i` / `a_i`).
    pub element: u32,
    pub row: u32,
    /// Column: N of D, K of A.
    pub col: u32,
}

/// The register fragment of one m64nNk16 matrix over a warpgroup: D (64 x N) or A from
/// registers (64 x 16).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Fragment {
    cols: u32,
    /// Elements per register: 1 (`.f32`), 2 (`.f16x2`).
    per_register: u32,
}

impl Fragment {
    /// The accumulator D of `wgmma.mma_async.m64n<n>k16` (also of k8 tf32 and k32 fp8: D's
    /// layout depends on N only). `n` must be an instruction's N (8 to 256, step 8).
    pub fn accumulator(n: u32, dtype: AccumulatorType) -> Result<Fragment, FragmentError> {
        let ok = (N_MIN..=N_MAX).contains(&u64::from(n)) && u64::from(n) % N_STEP == 0;
        if !ok {
            return Err(FragmentError::N { n });
        }
        Ok(Fragment {
            cols: n,
            per_register: match dtype {
                AccumulatorType::F32 => 1,
                AccumulatorType::F16 => 2,
            },
        })
    }

    /// A of `wgmma.mma_async.m64nNk16` from registers (`.f16` / `.bf16`): 64 x 16, 8 elements
    /// in 4 `.f16x2` registers per thread.
    pub const fn a_16bit() -> Fragment {
        Fragment {
            cols: A_COLS,
            per_register: 2,
        }
    }

    /// Rows of the matrix: 64.
    pub const fn rows(&self) -> u32 {
        FRAGMENT_ROWS
    }
    /// Columns of the matrix: N of D, 16 (K) of A.
    pub const fn cols(&self) -> u32 {
        self.cols
    }
    /// Elements each thread holds: `cols / 2`.
    pub const fn elements_per_thread(&self) -> u32 {
        self.cols / 2
    }
    /// Registers each thread gives the instruction: `cols / 2` `.f32` or `cols / 4` `.f16x2`.
    pub const fn registers_per_thread(&self) -> u32 {
        self.elements_per_thread() / self.per_register
    }
    /// The register holding element `element` and its half in it (0: the whole `.f32`, or
    /// the low half of an `.f16x2`; 1: the high half).
    pub const fn register_of(&self, element: u32) -> (u32, u32) {
        (element / self.per_register, element % self.per_register)
    }

    /// Where element `element` of thread `thread` is; `None` past the warpgroup's 128 threads
    /// or the thread's elements.
    pub fn position(&self, thread: u32, element: u32) -> Option<FragmentElement> {
        if thread >= WARPGROUP_THREADS || element >= self.elements_per_thread() {
            return None;
        }
        let (row, col) = d_position(thread, element);
        Some(FragmentElement {
            thread,
            element,
            row,
            col,
        })
    }

    /// Who holds `(row, col)`; `None` outside the matrix.
    pub fn owner(&self, row: u32, col: u32) -> Option<FragmentElement> {
        if row >= FRAGMENT_ROWS || col >= self.cols {
            return None;
        }
        let (thread, element) = d_owner(row, col);
        Some(FragmentElement {
            thread,
            element,
            row,
            col,
        })
    }

    /// Every element, thread by thread (thread 0's elements 0, 1, ..., then thread 1's).
    pub fn iter(&self) -> impl Iterator<Item = FragmentElement> {
        let per = self.elements_per_thread();
        (0..WARPGROUP_THREADS).flat_map(move |t| {
            (0..per).map(move |i| {
                let (row, col) = d_position(t, i);
                FragmentElement {
                    thread: t,
                    element: i,
                    row,
                    col,
                }
            })
        })
    }

    /// A row-major `64 x cols` matrix spread over the warpgroup: each thread's elements, in
    /// element order (what its registers hold after the wgmma).
    pub fn scatter<T: Copy>(&self, matrix: &[T]) -> Result<Vec<Vec<T>>, FragmentError> {
        let cols = self.cols as usize;
        let expected = FRAGMENT_ROWS as usize * cols;
        if matrix.len() != expected {
            return Err(FragmentError::Length {
                what: format!("matrix ({FRAGMENT_ROWS} x {cols}, row-major)"),
                expected,
                given: matrix.len(),
            });
        }
        Ok((0..WARPGROUP_THREADS)
            .map(|t| {
                (0..self.elements_per_thread())
                    .map(|i| {
                        let (row, col) = d_position(t, i);
                        matrix[row as usize * cols + col as usize]
                    })
                    .collect()
            })
            .collect())
    }

    /// The inverse of [`Fragment::scatter`]: 128 threads' elements back into the row-major
    /// `64 x cols` matrix.
    pub fn gather<T: Copy + Default>(&self, threads: &[Vec<T>]) -> Result<Vec<T>, FragmentError> {
        if threads.len() != WARPGROUP_THREADS as usize {
            return Err(FragmentError::Length {
                what: "threads of the warpgroup".to_string(),
                expected: WARPGROUP_THREADS as usize,
                given: threads.len(),
            });
        }
        let cols = self.cols as usize;
        let per = self.elements_per_thread() as usize;
        let mut out = vec![T::default(); FRAGMENT_ROWS as usize * cols];
        for (t, elements) in threads.iter().enumerate() {
            if elements.len() != per {
                return Err(FragmentError::Length {
                    what: format!("elements of thread {t}"),
                    expected: per,
                    given: elements.len(),
                });
            }
            for (i, &v) in elements.iter().enumerate() {
                let (row, col) = d_position(t as u32, i as u32);
                out[row as usize * cols + col as usize] = v;
            }
        }
        Ok(out)
    }

    /// Which A element of which k-slice accumulator element `element` becomes when the
    /// accumulator (converted to 16 bits) is fed back as A: `(k_slice, a_element)` =
    /// `(element / 8, element % 8)`; the same thread holds it, at the same row, at column
    /// `col - 16 k_slice` of the slice (with N a multiple of 16, each slice is a whole A).
    /// `None` past the accumulator's elements.
    pub fn accumulator_to_a(&self, element: u32) -> Option<(u32, u32)> {
        (element < self.elements_per_thread()).then_some((element / 8, element % 8))
    }
}
