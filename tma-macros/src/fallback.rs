//! What a rejected declaration expands to: the errors, plus a stub with the same API so
//! uses of the type do not add errors of their own (thiserror's `fallback.rs`).

use crate::parse::{Header, PipeValue, PipelineDecl, TileDecl};
use crate::paths::{private, unit_struct};
use proc_macro2::TokenStream;
use quote::quote;
use syn::ext::IdentExt;
use syn::DeriveInput;

/// The errors and a unit struct implementing `Tile` with empty values.
pub fn tile(decl: &TileDecl, errors: syn::Error) -> TokenStream {
    let errors = errors.to_compile_error();
    let stub = tile_stub(decl);
    quote! {
        #errors
        #stub
    }
}

/// A unit struct implementing `Tile` with empty values.
pub(crate) fn tile_stub(decl: &TileDecl) -> TokenStream {
    let p = private();
    let TileDecl {
        attrs, vis, ident, ..
    } = decl;
    let name = ident.unraw().to_string();
    let unit = unit_struct(attrs, vis, ident);
    quote! {
        #unit

        impl #p::Tile for #ident {
            const NAME: &'static str = #name;
            const CUDA_NAME: &'static str = "";
            const RANK: usize = 0;
            const TX_BYTES: u64 = 0;
            const SMEM_BYTES: u64 = 0;
            const SMEM_ALIGN: u64 = 1;
            const BOX_BYTES: u64 = 0;
            const CUDA_SOURCE: &'static str = "";
            const TARGET: #p::Arch = #p::Arch::Sm90a;

            fn spec() -> #p::TileSpec {
                #p::stub_spec(#name)
            }

            fn valid() -> &'static #p::ValidSpec {
                #p::stub_valid()
            }
        }
    }
}

/// The errors and a unit struct implementing `Im2colTile` with empty values.
pub fn im2col(decl: &TileDecl, errors: syn::Error) -> TokenStream {
    let p = private();
    let errors = errors.to_compile_error();
    let TileDecl {
        attrs, vis, ident, ..
    } = decl;
    let name = ident.unraw().to_string();
    let unit = unit_struct(attrs, vis, ident);
    quote! {
        #errors
        #unit

        impl #p::Im2colTile for #ident {
            const NAME: &'static str = #name;
            const CUDA_NAME: &'static str = "";
            const RANK: usize = 0;
            const CHANNELS_PER_PIXEL: u32 = 0;
            const PIXELS_PER_COLUMN: u32 = 0;
            const TX_BYTES: u64 = 0;
            const SMEM_BYTES: u64 = 0;
            const SMEM_ALIGN: u64 = 1;
            const CUDA_SOURCE: &'static str = "";
            const TARGET: #p::Arch = #p::Arch::Sm90a;

            fn spec() -> #p::Im2colSpec {
                #p::stub_im2col_spec(#name)
            }

            fn valid() -> &'static #p::ValidIm2col {
                #p::stub_im2col_valid()
            }
        }
    }
}

/// The errors and the derive's inherent items, every one, with empty values.
pub fn derive(input: &DeriveInput, errors: syn::Error) -> TokenStream {
    let p = private();
    let errors = errors.to_compile_error();
    let ident = &input.ident;
    let (impl_generics, ty_generics, where_clause) = input.generics.split_for_impl();
    quote! {
        #errors
        impl #impl_generics #ident #ty_generics #where_clause {
            pub const TILES: &'static [#p::TileInfo] = &[];
            pub const SMEM_BYTES: u64 = 0;
            pub const SMEM_ALIGN: u64 = 1;
            pub const CUDA_PARAMS: &'static str = "";
            pub const CUDA_HELPERS: &'static str = "";
            pub const CUDA_NAME: &'static str = "";
            pub const CUDA_PARAMS_MACRO: &'static str = "";
            pub fn kernel_source() -> #p::KernelSource {
                #p::KernelSource::new()
            }
            pub fn cuda_params() -> &'static str {
                ""
            }
            pub fn cuda_helpers() -> &'static str {
                ""
            }
            pub fn smem_layout() -> #p::SmemLayout {
                #p::SmemLayout { offsets: #p::Vec::new(), total_bytes: 0, align_bytes: 1 }
            }
            pub fn tile_specs() -> #p::Vec<#p::TileSpec> {
                #p::Vec::new()
            }
            pub fn valid_specs() -> &'static [#p::ValidSpec] {
                &[]
            }
            pub fn bound_specs(&self) -> #p::Result<#p::Vec<#p::BoundSpec>, #p::SpecErrors> {
                #p::Ok(#p::Vec::new())
            }
            pub fn encode_args(&self) -> #p::Result<#p::Vec<#p::EncodeArgs>, #p::SpecErrors> {
                #p::Ok(#p::Vec::new())
            }
            pub fn tensor_maps(
                &self,
                _buffers: &[&dyn #p::TileBuffer],
            ) -> #p::Result<#p::Vec<#p::TensorMap>, #p::RuntimeError> {
                #p::Ok(#p::Vec::new())
            }
        }
    }
}

/// The errors, every stage tile as a stub, and a unit struct implementing `Pipeline` with
/// empty values.
pub fn pipeline(decl: &PipelineDecl, errors: syn::Error) -> TokenStream {
    let p = private();
    let errors = errors.to_compile_error();
    let tiles: TokenStream = decl
        .entries
        .iter()
        .filter_map(|e| match &e.value {
            Some(PipeValue::Tiles(block)) => Some(block),
            _ => None,
        })
        .flat_map(|block| &block.members)
        .map(|m| tile_stub(&m.decl))
        .collect();
    let Header { attrs, vis, ident } = &decl.header;
    let name = ident.unraw().to_string();
    let unit = unit_struct(attrs, vis, ident);
    quote! {
        #errors
        #tiles
        #unit

        impl #p::Pipeline for #ident {
            const NAME: &'static str = #name;
            const CUDA_NAME: &'static str = "";
            const STAGES: u32 = 0;
            const STAGE_TX_BYTES: u64 = 0;
            const STAGE_BYTES: u64 = 0;
            const STAGE_STRIDE: u64 = 0;
            const SMEM_BYTES: u64 = 0;
            const SMEM_ALIGN: u64 = 1;
            const DYNAMIC_SMEM_BYTES: u64 = 0;
            const MAX_STAGES: u64 = 0;
            const RESERVE_SMEM: u64 = 0;
            const CLUSTER: [u32; 3] = [1, 1, 1];
            const CONSUMERS: #p::Consumers = #p::Consumers::Threads(0);
            const TARGET: #p::Arch = #p::Arch::Sm90a;
            const PEERS: u32 = 1;
            const EMPTY_ARRIVALS: u32 = 0;
            const TILES: &'static [#p::StageTileInfo] = &[];

            fn spec() -> #p::PipelineSpec {
                #p::stub_pipeline_spec(#name)
            }

            fn valid() -> &'static #p::ValidPipeline {
                #p::stub_pipeline()
            }
        }
    }
}

/// The errors and a unit struct implementing `Roles` with empty values.
pub fn roles(header: &Header, errors: syn::Error) -> TokenStream {
    let p = private();
    let errors = errors.to_compile_error();
    let Header { attrs, vis, ident } = header;
    let name = ident.unraw().to_string();
    let unit = unit_struct(attrs, vis, ident);
    quote! {
        #errors
        #unit

        impl #p::Roles for #ident {
            const NAME: &'static str = #name;
            const CUDA_NAME: &'static str = "";
            const LAUNCH_BOUNDS_MACRO: &'static str = "";
            const PRODUCERS: #p::RoleWarps = #p::RoleWarps::Warpgroups(0);
            const CONSUMERS: #p::RoleWarps = #p::RoleWarps::Warpgroups(0);
            const SETMAXNREG: #p::Option<#p::RegisterSplit> = #p::None;
            const BLOCKS_PER_SM: u32 = 0;
            const THREADS: u64 = 0;
            const LAUNCH_REGS: u64 = 0;
            const BARRIERS: &'static [#p::BarrierInfo] = &[];

            fn spec() -> #p::WarpRoles {
                #p::stub_roles_spec(#name)
            }

            fn valid() -> &'static #p::ValidWarpRoles {
                #p::stub_roles()
            }
        }
    }
}
