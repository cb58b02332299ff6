//! Expansion snapshots (prettyplease over the generated tokens).

use crate::expand;
use quote::quote;

mod kernel;

/// The expansion, pretty-printed, with the rendered CUDA elided: `tma_core::render` has
/// its own snapshots, and these should change only when the expansion does.
fn pretty(tokens: proc_macro2::TokenStream) -> String {
    let text = match syn::parse2::<syn::File>(tokens.clone()) {
        Ok(file) => prettyplease::unparse(&file),
        Err(e) => return format!("unparsable expansion ({e}):\n{tokens}"),
    };
    text.lines()
        .map(|line| {
            let cuda = [
                "const CUDA_SOURCE: &'static str = \"",
                "const CUDA_HELPERS: &'static str = \"",
            ]
            .iter()
            .find_map(|k| line.find(k).map(|i| i + k.len()));
            match cuda {
                Some(i) if line.len() > i + 2 => {
                    format!("{}<rendered by tma_core::render>\";", &line[..i])
                }
                _ => line.to_owned(),
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}

fn tile(rank: usize, input: proc_macro2::TokenStream) -> String {
    let decl = match syn::parse2(input) {
        Ok(d) => d,
        Err(e) => return format!("parse error: {e}"),
    };
    pretty(expand::tile_macro(rank, "tma_test", decl))
}

fn derive(input: proc_macro2::TokenStream) -> String {
    match syn::parse2(input) {
        Ok(d) => pretty(expand::derive(&d)),
        Err(e) => format!("parse error: {e}"),
    }
}

#[test]
fn deformable_attention_seed() {
    insta::assert_snapshot!(tile(
        3,
        quote! {
            /// The value tensor of deformable attention.
            pub DeformValue: f16,
            global = [H = 94, W = 162, C = 32],
            boxed = [2, 2, 32],
        }
    ));
}

#[test]
fn mpk_seed_with_every_option() {
    insta::assert_snapshot!(tile(
        2,
        quote! {
            pub(crate) MpkA: bf16,
            global = [ROW = _, COL = 1024],
            boxed = [64, 64],
            strides = [_, 1],
            element_strides = [1, 1],
            mpk_b = 3,
            interleave = none,
            l2_promotion = 128,
            oob_fill = nan,
            repeat = [1, 2],
            smem_stride = 4096,
            target = sm_90a,
            name = "mpk_a",
        }
    ));
}

#[test]
fn rejected_tile_expands_to_errors_and_a_stub() {
    insta::assert_snapshot!(tile(
        2,
        quote! {
            Bad: f32,
            global = [0, 64],
            boxed = [300, 64],
        }
    ));
}

#[test]
fn warning_becomes_a_deprecation() {
    insta::assert_snapshot!(tile(
        1,
        quote! {
            Small: u8,
            global = [16],
            boxed = [32],
        }
    ));
}

#[test]
fn derive_attention() {
    insta::assert_snapshot!(derive(quote! {
        struct Attn<'a> {
            #[tma(dtype = bf16, global = [S = _, D = 64], boxed = [128, 64], swizzle = 128, load)]
            q: &'a [u64],
            #[tma(dtype = bf16, global = [S = _, D = 64], boxed = [64, 64], swizzle = 128, load)]
            k: [u64; 2],
            #[tma(dtype = f32, global = [S = _, D = 64], boxed = [128, 16], store)]
            o: Vec<u64>,
            scale: f32,
        }
    }));
}

fn pipeline(input: proc_macro2::TokenStream) -> String {
    match syn::parse2(input) {
        Ok(d) => pretty(expand::pipeline::pipeline(d)),
        Err(e) => format!("parse error: {e}"),
    }
}

fn roles(input: proc_macro2::TokenStream) -> String {
    match syn::parse2(input) {
        Ok(d) => pretty(expand::pipeline::roles(d)),
        Err(e) => format!("parse error: {e}"),
    }
}

#[test]
fn pipeline_gemm_ring() {
    insta::assert_snapshot!(pipeline(quote! {
        /// A GEMM's operand ring.
        pub GemmRing,
        stages = 4,
        consumers = warpgroups(2),
        cluster = [2, 1, 1],
        reserve_smem = 32768,
        tiles = {
            a: tma_2d! { pub GemmA: bf16, global = [M = _, K = _], boxed = [128, 64], swizzle = 128 },
            b: tma_2d! {
                pub GemmB: bf16, global = [N = _, K = _], boxed = [64, 64], swizzle = 128,
                repeat = [2, 1],
            } multicast(x),
        },
    }));
}

#[test]
fn rejected_pipeline_expands_to_errors_and_stubs() {
    insta::assert_snapshot!(pipeline(quote! {
        Ring,
        stages = 9,
        consumers = warps(4),
        reserve_smem = 200000,
        tiles = {
            a: tma_2d! { RingA: f32, global = [M = _, K = 64], boxed = [64, 64] },
        },
    }));
}

#[test]
fn warp_roles() {
    insta::assert_snapshot!(roles(quote! {
        pub(crate) GemmRoles,
        producer_regs = 40,
        consumer_warpgroups = 2,
        consumer_regs = 232,
        barriers = [epilogue = 256, mainloop = 128],
    }));
}

#[test]
fn warp_granular_roles() {
    insta::assert_snapshot!(roles(quote! {
        pub EpiRoles,
        producer_warps = 1,
        consumer_warps = 4,
        barriers = [all = 128, slice = per_consumer(32)],
    }));
}

#[test]
fn rejected_warp_roles_expand_to_errors_and_a_stub() {
    insta::assert_snapshot!(roles(quote! {
        Roles,
        producer_regs = 40,
        consumer_warpgroups = 2,
        consumer_regs = 256,
    }));
}

fn im2col(input: proc_macro2::TokenStream) -> String {
    match syn::parse2(input) {
        Ok(d) => pretty(expand::im2col::im2col_macro(d)),
        Err(e) => format!("parse error: {e}"),
    }
}

#[test]
fn im2col_resnet_layer() {
    insta::assert_snapshot!(im2col(quote! {
        /// ResNet-50's 3x3 layer at 56x56.
        pub Act: bf16,
        global = [N = _, H = 56, W = 56, C = 64],
        channels_per_pixel = 64,
        pixels_per_column = 128,
        lower_corner = [H = -1, W = -1],
        upper_corner = [-1, -1],
        element_strides = [1, 1],
        swizzle = 128,
    }));
}

#[test]
fn rejected_im2col_expands_to_errors_and_a_stub() {
    insta::assert_snapshot!(im2col(quote! {
        pub Act: bf16,
        global = [N = 8, H = 56, W = 56, C = 64],
        channels_per_pixel = 64,
        pixels_per_column = 2048,
        lower_corner = [-200, 0],
    }));
}
