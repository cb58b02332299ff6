//! Code generation from checked specs. Everything generated names `::tma::__private`
//! paths, so it works whatever the user imported.

use crate::check::{self, Checked, Errors, TileInput};
use crate::fallback;
use crate::parse::{self, TileDecl};
use crate::render::{self, TileCuda};
use proc_macro2::{Span, TokenStream};
use quote::{format_ident, quote, quote_spanned};
use syn::ext::IdentExt;
use syn::spanned::Spanned;
use syn::{Data, DeriveInput, Fields, Ident};
use tma_core::{Extent, TileSpec, ValidSpec};

/// `tma_Nd! { .. }`: a unit struct implementing `::tma::Tile`.
pub fn tile_macro(rank: usize, mac: &'static str, decl: TileDecl) -> TokenStream {
    let mut errs = Errors::default();
    let checked = check::tile(
        TileInput {
            ident: &decl.ident,
            default_name: check::snake_case(&decl.ident.unraw().to_string()),
            dtype: Some(&decl.dtype),
            entries: &decl.entries,
            rank: Some((rank, mac)),
            flags: &[],
        },
        &mut errs,
    );
    let rendered = checked.and_then(|c| rendered(c, 0, decl.ident.span(), &mut errs));
    match (errs.take(), rendered) {
        (None, Some((checked, cuda))) => tile_impl(&decl, &checked, &cuda),
        (Some(e), _) => fallback::tile(&decl, e),
        (None, None) => fallback::tile(
            &decl,
            syn::Error::new(decl.ident.span(), "tile declaration rejected"),
        ),
    }
}

fn rendered(
    checked: Checked,
    tile_id: u32,
    span: Span,
    errs: &mut Errors,
) -> Option<(Checked, TileCuda)> {
    match render::tile(&checked.valid, tile_id) {
        Ok(cuda) => Some((checked, cuda)),
        Err(e) => {
            errs.push(span, format!("rendering the CUDA helpers failed: {e}"));
            None
        }
    }
}

fn tile_impl(decl: &TileDecl, checked: &Checked, cuda: &TileCuda) -> TokenStream {
    let p = private();
    let TileDecl {
        attrs, vis, ident, ..
    } = decl;
    let valid = &checked.valid;
    let plan = valid.plan();
    let spec = spec_expr(valid.spec());
    let name = &valid.spec().name;
    let cuda_name = &cuda.cuda_name;
    let source = &cuda.source;
    let rank = valid.spec().rank();
    let (tx, smem, align, box_bytes) = (
        plan.tx_bytes,
        plan.footprint_bytes,
        plan.align_bytes,
        plan.box_bytes,
    );
    let warnings = warnings(&checked.warnings);
    quote! {
        #(#attrs)*
        #[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
        #vis struct #ident;

        impl #p::Tile for #ident {
            const NAME: &'static str = #name;
            const CUDA_NAME: &'static str = #cuda_name;
            const RANK: usize = #rank;
            const TX_BYTES: u64 = #tx;
            const SMEM_BYTES: u64 = #smem;
            const SMEM_ALIGN: u64 = #align;
            const BOX_BYTES: u64 = #box_bytes;
            const CUDA_SOURCE: &'static str = #source;

            fn spec() -> #p::TileSpec {
                #spec
            }

            fn valid() -> #p::Result<&'static #p::ValidSpec, #p::SpecErrors> {
                static VALID: #p::OnceLock<#p::Result<#p::ValidSpec, #p::SpecErrors>> =
                    #p::OnceLock::new();
                #p::cached_valid(&VALID, <Self as #p::Tile>::spec)
            }
        }

        #warnings
    }
}

pub(crate) fn private() -> TokenStream {
    quote!(::tma::__private)
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
    let extents = |v: &[Extent]| -> Vec<TokenStream> {
        v.iter()
            .map(|e| match e {
                Extent::Static(v) => quote!(#p::Extent::Static(#v)),
                Extent::Runtime => quote!(#p::Extent::Runtime),
            })
            .collect()
    };
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
        }
    }
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

/// One annotated field of a `#[derive(TmaTiles)]` struct.
struct FieldTile<'a> {
    ident: &'a Ident,
    ty: &'a syn::Type,
    checked: Checked,
    cuda: TileCuda,
    offset: u64,
}

/// `#[derive(TmaTiles)]`: one tile per `#[tma(..)]` field.
pub fn derive(input: &DeriveInput) -> TokenStream {
    let mut errs = Errors::default();
    let fields = match &input.data {
        Data::Struct(s) => match &s.fields {
            Fields::Named(f) => Some(&f.named),
            _ => None,
        },
        _ => None,
    };
    let Some(fields) = fields else {
        errs.push(
            input.ident.span(),
            "`TmaTiles` needs a struct with named fields, one `#[tma(..)]` tile per field",
        );
        return fallback::derive(input, errs.take());
    };
    let struct_name = check::snake_case(&input.ident.unraw().to_string());
    let mut tiles = Vec::new();
    for field in fields {
        let Some(field_ident) = &field.ident else {
            continue;
        };
        let mut attrs = field.attrs.iter().filter(|a| a.path().is_ident("tma"));
        let first = attrs.next();
        for extra in attrs {
            errs.push_error(syn::Error::new_spanned(
                extra,
                "one `#[tma(..)]` per field: a field is one tile",
            ));
        }
        if let Some(attr) = first {
            let entries = match attr.parse_args_with(parse::entries) {
                Ok(e) => e,
                Err(e) => {
                    errs.push_error(e);
                    continue;
                }
            };
            let id = tiles.len() as u32;
            let checked = check::tile(
                TileInput {
                    ident: field_ident,
                    default_name: format!("{struct_name}_{}", field_ident.unraw()),
                    dtype: None,
                    entries: &entries,
                    rank: None,
                    flags: &["load", "store"],
                },
                &mut errs,
            );
            if let Some((checked, cuda)) =
                checked.and_then(|c| rendered(c, id, field_ident.span(), &mut errs))
            {
                tiles.push(FieldTile {
                    ident: field_ident,
                    ty: &field.ty,
                    checked,
                    cuda,
                    offset: 0,
                });
            }
        }
    }
    if tiles.is_empty() && errs.is_empty() {
        errs.push(
            input.ident.span(),
            "`TmaTiles` found no tile: annotate fields with `#[tma(dtype = .., global = [..], boxed = [..])]`",
        );
    }
    if let Some(e) = errs.take() {
        return fallback::derive(input, Some(e));
    }
    derive_impl(input, tiles)
}

fn derive_impl(input: &DeriveInput, mut tiles: Vec<FieldTile<'_>>) -> TokenStream {
    let p = private();
    // The shared-memory layout: fields in order, each at its alignment.
    let mut span = tma_core::Size::ZERO;
    let mut align = 1u64;
    for t in &mut tiles {
        let plan = t.checked.valid.plan();
        let offset = span.next_multiple_of(plan.align_bytes);
        span = offset + plan.footprint_bytes;
        align = align.max(plan.align_bytes);
        let (Some(offset), Some(_)) = (offset.get(), span.get()) else {
            let e = syn::Error::new(
                t.ident.span(),
                format!(
                    "the tiles up to this field span {span} bytes of shared memory: more than any GPU has"
                ),
            );
            return fallback::derive(input, Some(e));
        };
        t.offset = offset;
    }
    let end = span.get().unwrap_or_default();
    let infos = tiles.iter().map(|t| tile_info(t));
    let params = tiles
        .iter()
        .map(|t| format!("const __grid_constant__ CUtensorMap {}", map_param(t.ident)))
        .collect::<Vec<_>>()
        .join(", ");
    let helpers = tiles
        .iter()
        .map(|t| t.cuda.source.as_str())
        .collect::<Vec<_>>()
        .join("\n");
    let specs = tiles.iter().map(|t| spec_expr(t.checked.valid.spec()));
    let encodes = tiles.iter().enumerate().map(|(i, t)| {
        let field = t.ident;
        // Spanned on the field's type: a type that is not a `TileArg` errors there.
        quote_spanned!(t.ty.span()=> #p::bind_field(valid, #i, &self.#field)?)
    });
    let warnings: TokenStream = tiles
        .iter()
        .map(|t| warnings(&t.checked.warnings))
        .collect();
    let runtime = runtime_methods(&tiles);
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
            /// The CUDA helpers of every tile, in field order.
            pub const CUDA_HELPERS: &'static str = #helpers;

            /// The kernel parameter list: `const __grid_constant__ CUtensorMap <field>_map, ..`.
            pub fn cuda_params() -> &'static str {
                Self::CUDA_PARAMS
            }

            /// The CUDA helpers `tma_<struct>_<field>` of every tile.
            pub fn cuda_helpers() -> &'static str {
                Self::CUDA_HELPERS
            }

            /// Per-field shared-memory offsets and the total, computed at compile time.
            pub fn smem_plan() -> #p::SmemLayout {
                #p::SmemLayout {
                    tiles: Self::TILES,
                    total_bytes: Self::SMEM_BYTES,
                    align_bytes: Self::SMEM_ALIGN,
                }
            }

            /// The declared specs, in field order.
            pub fn tile_specs() -> #p::Vec<#p::TileSpec> {
                #p::Vec::from([#(#specs),*])
            }

            /// The validated specs, in field order (validated at compile time; computed once).
            pub fn valid_specs() -> #p::Result<&'static [#p::ValidSpec], #p::SpecErrors> {
                static VALID: #p::OnceLock<#p::Result<#p::Vec<#p::ValidSpec>, #p::SpecErrors>> =
                    #p::OnceLock::new();
                #p::cached_valid_all(&VALID, Self::tile_specs)
            }

            /// Every tile bound to its field's run-time shape, in field order: all rules
            /// checked on the concrete dims and strides.
            pub fn bound_specs(&self) -> #p::Result<#p::Vec<#p::BoundSpec>, #p::SpecErrors> {
                let valid = Self::valid_specs()?;
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
fn runtime_methods(tiles: &[FieldTile<'_>]) -> TokenStream {
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

fn tile_info(t: &FieldTile<'_>) -> TokenStream {
    let p = private();
    let valid: &ValidSpec = &t.checked.valid;
    let plan = valid.plan();
    let field = t.ident.unraw().to_string();
    let name = &valid.spec().name;
    let cuda_name = &t.cuda.cuda_name;
    let map = map_param(t.ident);
    let role = match (
        t.checked.flags.iter().any(|f| f == "load"),
        t.checked.flags.iter().any(|f| f == "store"),
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
        t.offset,
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
