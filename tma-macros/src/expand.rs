//! Code generation from checked specs. Everything generated names `::tma::__private`
//! paths, so it works whatever the user imported.

use crate::check::{self, Checked, CheckedField, CheckedStruct};
use crate::fallback;
use crate::parse::{self, TileDecl};
use crate::paths::{private, unit_struct};
use proc_macro2::{Span, TokenStream};
use quote::{format_ident, quote, quote_spanned};
use syn::ext::IdentExt;
use syn::spanned::Spanned;
use syn::{DeriveInput, Ident};
use tma_core::{Extent, TileSpec, ValidSpec};

pub mod im2col;
pub mod kernel;
pub mod pipeline;

/// `tma_Nd! { .. }`: a unit struct implementing `::tma::Tile`.
pub fn tile_macro(rank: usize, mac: &'static str, decl: TileDecl) -> TokenStream {
    match check::tile_macro(rank, mac, &decl) {
        Ok(checked) => tile_impl(&decl, &checked),
        Err(errors) => fallback::tile(&decl, errors),
    }
}

/// `#[derive(TmaTiles)]`: the struct's tiles as inherent items.
pub fn derive(input: &DeriveInput) -> TokenStream {
    match parse::tiles_struct(input).and_then(check::derive) {
        Ok(checked) => derive_impl(input, &checked),
        Err(errors) => fallback::derive(input, errors),
    }
}

fn tile_impl(decl: &TileDecl, checked: &Checked) -> TokenStream {
    let p = private();
    let TileDecl {
        attrs, vis, ident, ..
    } = decl;
    let valid = &checked.valid;
    let plan = valid.plan();
    let spec = spec_expr(valid.spec());
    let name = &valid.spec().name;
    let cuda_name = &checked.cuda_name;
    let source = &checked.cuda_source;
    let rank = valid.spec().rank();
    let target = variant(&valid.spec().target);
    let (tx, smem, align, box_bytes) = (
        plan.tx_bytes,
        plan.footprint_bytes,
        plan.align_bytes,
        plan.box_bytes,
    );
    let warnings = warnings(&checked.warnings);
    let unit = unit_struct(attrs, vis, ident);
    quote! {
        #unit

        impl #p::Tile for #ident {
            const NAME: &'static str = #name;
            const CUDA_NAME: &'static str = #cuda_name;
            const RANK: usize = #rank;
            const TX_BYTES: u64 = #tx;
            const SMEM_BYTES: u64 = #smem;
            const SMEM_ALIGN: u64 = #align;
            const BOX_BYTES: u64 = #box_bytes;
            const CUDA_SOURCE: &'static str = #source;
            const TARGET: #p::Arch = #p::Arch::#target;

            fn spec() -> #p::TileSpec {
                #spec
            }

            fn valid() -> &'static #p::ValidSpec {
                static VALID: #p::OnceLock<#p::ValidSpec> = #p::OnceLock::new();
                #p::valid_once(&VALID, <Self as #p::Tile>::spec)
            }
        }

        #warnings
    }
}

/// The spec as a struct literal: every field written out, so a new `TileSpec` field is a
/// compile error here rather than a silent default.
fn spec_expr(s: &TileSpec) -> TokenStream {
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
    let boxed = &s.boxed;
    let element_strides = &s.element_strides;
    let repeat = &s.repeat;
    let interleave = variant(&s.interleave);
    let swizzle = variant(&s.swizzle);
    let l2 = variant(&s.l2_promotion);
    let oob = variant(&s.oob_fill);
    let smem_stride = match s.smem_stride {
        Some(v) => quote!(#p::Some(#v)),
        None => quote!(#p::None),
    };
    let target = variant(&s.target);
    let wgmma = match s.wgmma {
        Some(w) => {
            let (operand, major) = (variant(&w.operand), variant(&w.major));
            quote!(#p::Some(#p::WgmmaOperand {
                operand: #p::Operand::#operand,
                major: #p::Major::#major,
            }))
        }
        None => quote!(#p::None),
    };
    quote! {
        #p::TileSpec {
            name: #p::String::from(#name),
            dtype: #p::DType::#dtype,
            dim_names: #p::Vec::from([#(#names),*]),
            global: #p::Vec::from([#(#global),*]),
            strides: #strides,
            boxed: #p::Vec::from([#(#boxed),*]),
            element_strides: #p::Vec::from([#(#element_strides),*]),
            interleave: #p::Interleave::#interleave,
            swizzle: #p::Swizzle::#swizzle,
            l2_promotion: #p::L2Promotion::#l2,
            oob_fill: #p::OobFill::#oob,
            repeat: #p::Vec::from([#(#repeat),*]),
            smem_stride: #smem_stride,
            target: #p::Arch::#target,
            wgmma: #wgmma,
        }
    }
}

/// Extents as `::tma::__private::Extent` expressions.
fn extents(v: &[Extent]) -> Vec<TokenStream> {
    let p = private();
    v.iter()
        .map(|e| match e {
            Extent::Static(v) => quote!(#p::Extent::Static(#v)),
            Extent::Runtime => quote!(#p::Extent::Runtime),
        })
        .collect()
}

/// The enum variant's identifier (`Swizzle::B128` -> `B128`): the core's own names.
fn variant(v: &impl std::fmt::Debug) -> Ident {
    format_ident!("{}", format!("{v:?}"))
}

/// Validation warnings as deprecation warnings at their tokens: stable Rust has no other
/// way for a proc macro to warn.
fn warnings(list: &[(Span, String)]) -> TokenStream {
    list.iter()
        .map(|(span, msg)| {
            let msg = format!("tma: {msg}");
            let warning = quote_spanned!(*span=> tma_warning);
            quote! {
                const _: () = {
                    #[deprecated(note = #msg)]
                    #[allow(non_upper_case_globals)]
                    const tma_warning: () = ();
                    #warning
                };
            }
        })
        .collect()
}

fn derive_impl(input: &DeriveInput, checked: &CheckedStruct<'_>) -> TokenStream {
    let p = private();
    let tiles = &checked.fields;
    let (end, align) = (checked.smem_bytes, checked.smem_align);
    let infos = tiles.iter().map(|t| tile_info(t));
    let params = tiles
        .iter()
        .map(|t| format!("const __grid_constant__ CUtensorMap {}", map_param(t.ident)))
        .collect::<Vec<_>>()
        .join(", ");
    let helpers = tiles
        .iter()
        .map(|t| t.tile.cuda_source.as_str())
        .chain([checked.set.source()])
        .collect::<Vec<_>>()
        .join("\n");
    let set_cuda_name = checked.set.cuda_name();
    let params_macro = checked.set.params_macro();
    let set_name = &checked.set_name;
    let field_names = tiles.iter().map(|t| t.ident.unraw().to_string());
    let specs = tiles.iter().map(|t| spec_expr(t.tile.valid.spec()));
    let encodes = tiles.iter().enumerate().map(|(i, t)| {
        let field = t.ident;
        // Spanned on the field's type: a type that is not a `TileArg` errors there.
        quote_spanned!(t.ty.span()=> #p::bind_field(valid, #i, &self.#field)?)
    });
    let warnings: TokenStream = tiles.iter().map(|t| warnings(&t.tile.warnings)).collect();
    let runtime = runtime_methods(tiles);
    let ident = &input.ident;
    let (impl_generics, ty_generics, where_clause) = input.generics.split_for_impl();
    quote! {
        impl #impl_generics #ident #ty_generics #where_clause {
            /// Each tile, in field order, with its shared-memory offset.
            pub const TILES: &'static [#p::TileInfo] = &[#(#infos),*];
            /// Bytes of shared memory all tiles span, from a base aligned to `SMEM_ALIGN`.
            pub const SMEM_BYTES: u64 = #end;
            pub const SMEM_ALIGN: u64 = #align;
            /// The kernel parameters, in field order.
            pub const CUDA_PARAMS: &'static str = #params;
            /// The CUDA helpers of every tile, in field order, then the tile set struct
            /// (`CUDA_NAME`) and the parameter-list macro (`CUDA_PARAMS_MACRO`).
            pub const CUDA_HELPERS: &'static str = #helpers;
            /// The tile set struct: `tma_<struct>`, each field's tile as a member type and its
            /// `OFFSET_<field>` in shared memory, `SMEM_BYTES`, `SMEM_ALIGN`.
            pub const CUDA_NAME: &'static str = #set_cuda_name;
            /// The macro holding `CUDA_PARAMS`: `TMA_<STRUCT>_PARAMS`.
            pub const CUDA_PARAMS_MACRO: &'static str = #params_macro;

            /// A kernel source holding the prelude, every tile's helpers and the tile set
            /// (`CUDA_NAME`, `CUDA_PARAMS_MACRO`): add the kernel with `.body(..)` and build.
            pub fn kernel_source() -> #p::KernelSource {
                let names = [#(#field_names),*];
                let members: #p::Vec<(&str, &#p::ValidSpec)> =
                    names.iter().copied().zip(Self::valid_specs().iter()).collect();
                #p::KernelSource::new().tile_set(#set_name, &members)
            }

            /// The kernel parameter list: `const __grid_constant__ CUtensorMap <field>_map, ..`.
            pub fn cuda_params() -> &'static str {
                Self::CUDA_PARAMS
            }

            /// The CUDA helpers `tma_<struct>_<field>` of every tile.
            pub fn cuda_helpers() -> &'static str {
                Self::CUDA_HELPERS
            }

            /// The tiles' shared-memory layout, computed at compile time: each field's offset
            /// (`TILES`' `smem_offset`), `SMEM_BYTES` and `SMEM_ALIGN`.
            pub fn smem_layout() -> #p::SmemLayout {
                #p::SmemLayout {
                    offsets: Self::TILES.iter().map(|t| t.smem_offset).collect(),
                    total_bytes: Self::SMEM_BYTES,
                    align_bytes: Self::SMEM_ALIGN,
                }
            }

            /// The declared specs, in field order.
            pub fn tile_specs() -> #p::Vec<#p::TileSpec> {
                #p::Vec::from([#(#specs),*])
            }

            /// The validated specs, in field order (validated at compile time; computed once).
            pub fn valid_specs() -> &'static [#p::ValidSpec] {
                static VALID: #p::OnceLock<#p::Vec<#p::ValidSpec>> = #p::OnceLock::new();
                #p::valid_once_all(&VALID, Self::tile_specs)
            }

            /// Every tile bound to its field's run-time shape, in field order: all rules
            /// checked on the concrete dims and strides.
            pub fn bound_specs(&self) -> #p::Result<#p::Vec<#p::BoundSpec>, #p::SpecErrors> {
                let valid = Self::valid_specs();
                #p::Ok(#p::Vec::from([#(#encodes),*]))
            }

            /// `cuTensorMapEncodeTiled` arguments of every tile, in field order, from the
            /// fields' run-time shapes.
            pub fn encode_args(&self) -> #p::Result<#p::Vec<#p::EncodeArgs>, #p::SpecErrors> {
                #p::Ok(self.bound_specs()?.iter().map(#p::EncodeArgs::new).collect())
            }

            #runtime
        }

        #warnings
    }
}

/// Runtime encoding: one `CUtensorMap` per field, over the field's device buffer, in field
/// (= kernel parameter) order.
fn runtime_methods(tiles: &[CheckedField<'_>]) -> TokenStream {
    let p = private();
    let n = tiles.len();
    quote! {
        /// One `CUtensorMap` per tile, in field order (the order of `CUDA_PARAMS`), each
        /// encoded over `buffers[i]` with field `i`'s run-time shape. Push them to the
        /// kernel in that order: `for map in &maps { launch.arg(map); }`.
        pub fn tensor_maps(
            &self,
            buffers: &[&dyn #p::TileBuffer],
        ) -> #p::Result<#p::Vec<#p::TensorMap>, #p::RuntimeError> {
            if buffers.len() != #n {
                return #p::Err(#p::buffer_count(#n, buffers.len()));
            }
            let mut maps = #p::Vec::with_capacity(#n);
            for (bound, buffer) in self.bound_specs()?.iter().zip(buffers) {
                maps.push(buffer.encode(bound)?);
            }
            #p::Ok(maps)
        }
    }
}

fn map_param(field: &Ident) -> String {
    format!("{}_map", field.unraw())
}

fn tile_info(t: &CheckedField<'_>) -> TokenStream {
    let p = private();
    let valid: &ValidSpec = &t.tile.valid;
    let plan = valid.plan();
    let field = t.ident.unraw().to_string();
    let name = &valid.spec().name;
    let cuda_name = &t.tile.cuda_name;
    let map = map_param(t.ident);
    let role = match (
        t.tile.flags.iter().any(|f| f == "load"),
        t.tile.flags.iter().any(|f| f == "store"),
    ) {
        (true, true) => quote!(LoadStore),
        (false, true) => quote!(Store),
        _ => quote!(Load),
    };
    let rank = valid.spec().rank();
    let (tx, box_bytes, smem, align, offset) = (
        plan.tx_bytes,
        plan.box_bytes,
        plan.footprint_bytes,
        plan.align_bytes,
        t.smem_offset,
    );
    quote! {
        #p::TileInfo {
            field: #field,
            name: #name,
            cuda_name: #cuda_name,
            map_param: #map,
            role: #p::Role::#role,
            rank: #rank,
            tx_bytes: #tx,
            box_bytes: #box_bytes,
            smem_bytes: #smem,
            smem_align: #align,
            smem_offset: #offset,
        }
    }
}
