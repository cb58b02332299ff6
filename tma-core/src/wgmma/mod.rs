//! wgmma operands from a tile: the stage after [`crate::smem`] and [`crate::validate()`] for a
//! tile declared a `wgmma.mma_async` operand ([`crate::TileSpec::wgmma`]).
//!
//! - [`MatrixDescriptor`]: the 64-bit shared-memory matrix descriptor, named fields and one
//!   encoder (PTX ISA 9.7.15.5.1.2.2).
//! - [`OperandPlan`]: from a [`crate::ValidSpec`]'s shared-memory plan to the descriptor's
//!   fields, the step of each k-slice and 64-row block, the instruction shape.
//! - [`fragment`]: which element of D (and of A from registers) each thread of the warpgroup
//!   holds in each register ([`Fragment`]), for CPU checks of epilogues.
//! - [`registers`]: what the generated accumulator helpers do thread by thread (row max, row
//!   sum, row scale, the softmax exponential, the accumulator packed into A fragments for a
//!   register-A wgmma), for bit-exact checks of an attention kernel's softmax.
//! - [`read`]: a CPU model of what wgmma reads through a descriptor, written from the ISA's
//!   shared-memory layouts independently of the plan; tma-core/tests/wgmma_props.rs shows
//!   that TMA's model writing a tile and this model reading it give back the global matrix.
//!
//! ```
//! use tma_core::wgmma::OperandPlan;
//! use tma_core::{validate, DType, Major, Operand, Swizzle, TileSpec};
//! // A 128 x 64 bf16 A tile, K-major, 128B swizzle: 2 blocks of 64 rows, 4 k-slices of k16.
//! let spec = TileSpec::new("a", DType::BF16, [4096, 4096], [128, 64])
//!     .swizzle(Swizzle::B128)
//!     .wgmma(Operand::A, Major::K);
//! let valid = validate(&spec)?;
//! let plan = OperandPlan::new(&valid).ok_or("not a wgmma operand tile")?;
//! assert_eq!((plan.sbo, plan.k_slices, plan.slice_step, plan.m_block_step), (1024, 4, 32, 8192));
//! let desc = plan.descriptor(&valid, 0x400, 1, 0)?.encode()?;
//! assert_eq!(desc, 0x4000_0040_0001_0042);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod descriptor;
pub mod fragment;
mod plan;
pub mod read;
pub mod registers;

pub use descriptor::{
    DescriptorField, EncodeError, LayoutType, MatrixDescriptor, ADDRESS_LIMIT, FIELDS,
};
pub use fragment::{AccumulatorType, Fragment, FragmentElement, FragmentError};
pub use plan::{InstructionShape, OperandPlan};
