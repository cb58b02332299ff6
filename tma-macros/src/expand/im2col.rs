//! `tma_im2col!`: a unit struct implementing `::tma::Im2colTile`, as `tma_Nd!` implements
//! `::tma::Tile`: the validated spec, its byte counts, its CUDA helpers and its encode.

use super::{extents, variant, warnings};
use crate::check::im2col::{self, CheckedIm2col};
use crate::fallback;
use crate::parse::TileDecl;
use crate::paths::{private, unit_struct};
use proc_macro2::TokenStream;
use quote::quote;
use tma_core::Im2colSpec;

/// `tma_im2col! { .. }`.
pub fn im2col_macro(decl: TileDecl) -> TokenStream {
    match im2col::im2col_macro(&decl) {
        Ok(checked) => im2col_impl(&decl, &checked),
        Err(errors) => fallback::im2col(&decl, errors),
    }
}

fn im2col_impl(decl: &TileDecl, checked: &CheckedIm2col) -> TokenStream {
    let p = private();
    let TileDecl {
        attrs, vis, ident, ..
    } = decl;
    let valid = &checked.valid;
    let s = valid.spec();
    let plan = valid.plan();
    let spec = spec_expr(s);
    let name = &s.name;
    let cuda_name = &checked.cuda_name;
    let source = &checked.cuda_source;
    let rank = s.rank();
    let (channels, pixels) = (s.channels_per_pixel, s.pixels_per_column);
    let target = variant(&s.target);
    let (tx, smem, align) = (valid.tx_bytes(), plan.footprint_bytes, plan.align_bytes);
    let warnings = warnings(&checked.warnings);
    let unit = unit_struct(attrs, vis, ident);
    quote! {
        #unit

        impl #p::Im2colTile for #ident {
            const NAME: &'static str = #name;
            const CUDA_NAME: &'static str = #cuda_name;
            const RANK: usize = #rank;
            const CHANNELS_PER_PIXEL: u32 = #channels;
            const PIXELS_PER_COLUMN: u32 = #pixels;
            const TX_BYTES: u64 = #tx;
            const SMEM_BYTES: u64 = #smem;
            const SMEM_ALIGN: u64 = #align;
            const CUDA_SOURCE: &'static str = #source;
            const TARGET: #p::Arch = #p::Arch::#target;

            fn spec() -> #p::Im2colSpec {
                #spec
            }

            fn valid() -> &'static #p::ValidIm2col {
                static VALID: #p::OnceLock<#p::ValidIm2col> = #p::OnceLock::new();
                #p::valid_im2col_once(&VALID, <Self as #p::Im2colTile>::spec)
            }
        }

        #warnings
    }
}

/// The spec as a struct literal, every field written out (a new field is a compile error
/// here, not a silent default).
fn spec_expr(s: &Im2colSpec) -> TokenStream {
    let p = private();
    let name = &s.name;
    let dtype = variant(&s.dtype);
    let names = s.dim_names.iter().map(|n| match n {
        Some(n) => quote!(#p::Some(#p::String::from(#n))),
        None => quote!(#p::None),
    });
    let global = extents(&s.global);
    let strides = match &s.strides {
        Some(v) => {
            let v = extents(v);
            quote!(#p::Some(#p::Vec::from([#(#v),*])))
        }
        None => quote!(#p::None),
    };
    let (channels, pixels) = (s.channels_per_pixel, s.pixels_per_column);
    let (lower, upper, estrides) = (&s.lower_corner, &s.upper_corner, &s.element_strides);
    let swizzle = variant(&s.swizzle);
    let l2 = variant(&s.l2_promotion);
    let oob = variant(&s.oob_fill);
    let target = variant(&s.target);
    quote! {
        #p::Im2colSpec {
            name: #p::String::from(#name),
            dtype: #p::DType::#dtype,
            dim_names: #p::Vec::from([#(#names),*]),
            global: #p::Vec::from([#(#global),*]),
            strides: #strides,
            channels_per_pixel: #channels,
            pixels_per_column: #pixels,
            lower_corner: #p::Vec::<i32>::from([#(#lower),*]),
            upper_corner: #p::Vec::<i32>::from([#(#upper),*]),
            element_strides: #p::Vec::<u32>::from([#(#estrides),*]),
            swizzle: #p::Swizzle::#swizzle,
            l2_promotion: #p::L2Promotion::#l2,
            oob_fill: #p::OobFill::#oob,
            target: #p::Arch::#target,
            // (A wgmma operand is declared with the builder, `Im2colSpec::wgmma`.)
            wgmma: ::core::option::Option::None,
        }
    }
}
