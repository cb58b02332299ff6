//! Expansion snapshots of `tma_kernel!`.

use super::pretty;
use crate::expand;
use quote::quote;

fn kernel(input: proc_macro2::TokenStream) -> String {
    match syn::parse2(input) {
        Ok(d) => pretty(expand::kernel::kernel(d)),
        Err(e) => format!("parse error: {e}"),
    }
}

#[test]
fn kernel_gemm() {
    insta::assert_snapshot!(kernel(quote! {
        /// A GEMM's plan.
        pub Gemm,
        roles = GemmRoles,
        pipelines = [GemmRing],
        staging = [d: tma_2d! { pub GemmD: bf16, global = [M = _, N = _], boxed = [64, 64], swizzle = 128 } x 2],
        scratch = [flags = 256 align 128],
    }));
}

#[test]
fn rejected_kernel_expands_to_errors_and_stubs() {
    insta::assert_snapshot!(kernel(quote! {
        pub Copy,
        pipelines = [tma_pipeline! { pub Ring, stages = 2, consumers = threads(128), tiles = {} }],
        staging = [slots: tma_2d! { pub Slot: u32, global = [r = _, c = _], boxed = [32, 32] } x 0],
        block_threads = 32,
    }));
}
