//! Code generation for `tma_kernel!` from a checked declaration: each inline part (a tile as
//! its tile macro expands it; a pipeline or warp roles handed to their own macro, which checks
//! and reports them), a unit struct implementing `::tma::Plan` whose constants are `const fn`
//! calls over the parts' constants (`tma_core::plan::consts`), and one `const` item per
//! cross-part rule, spanned at the part it is about: a rule broken by a part named by type is
//! a compile error there (`evaluation panicked: <the finding>`).

use super::tile_impl;
use crate::check::kernel::{self as checks, tile_decl, CheckedKernel, CheckedRegion};
use crate::fallback::tile_stub;
use crate::parse::{Header, KernelDecl, KernelValue, Part, TileDecl};
use crate::paths::{private, unit_struct};
use proc_macro2::{Span, TokenStream};
use quote::{quote, quote_spanned};
use syn::ext::IdentExt;
use tma_core::pipeline::Consumers;

/// `tma_kernel! { .. }`.
pub fn kernel(decl: KernelDecl) -> TokenStream {
    let parts = inline_parts(&decl);
    match checks::kernel(&decl) {
        Ok(checked) => {
            let tiles: TokenStream = checked
                .tiles
                .iter()
                .chain(checked.regions.iter().filter_map(|r| match r {
                    CheckedRegion::Staging { tile, .. } => Some(tile),
                    CheckedRegion::Scratch { .. } | CheckedRegion::WorkQueue { .. } => None,
                }))
                .filter_map(|t| {
                    let decl = tile_decl(&t.item.tile)?;
                    t.checked.as_deref().map(|c| tile_impl(decl, c))
                })
                .collect();
            let plan = kernel_impl(&checked);
            quote! {
                #parts
                #tiles
                #plan
            }
        }
        Err(errors) => {
            let errors = errors.map(|e| e.to_compile_error());
            let stubs: TokenStream = inline_tiles(&decl).map(tile_stub).collect();
            let stub = kernel_stub(&decl.header);
            quote! {
                #errors
                #parts
                #stubs
                #stub
            }
        }
    }
}

/// Inline pipelines and warp roles, handed to their own macros (which check them and
/// report their errors at the same tokens).
fn inline_parts(decl: &KernelDecl) -> TokenStream {
    let mut out = TokenStream::new();
    for e in &decl.entries {
        match &e.value {
            Some(KernelValue::Roles(part)) => {
                if let Part::Inline { mac, name, .. } = &**part {
                    let tokens = &mac.tokens;
                    out.extend(quote_spanned!(name.span()=> ::tma::tma_warp_roles! { #tokens }));
                }
            }
            Some(KernelValue::Pipelines(list)) => {
                for p in &list.items {
                    if let Part::Inline { mac, name, .. } = p {
                        let tokens = &mac.tokens;
                        out.extend(quote_spanned!(name.span()=> ::tma::tma_pipeline! { #tokens }));
                    }
                }
            }
            _ => {}
        }
    }
    out
}

/// Every inline tile declaration (aliased or staging).
fn inline_tiles(decl: &KernelDecl) -> impl Iterator<Item = &TileDecl> {
    decl.entries.iter().flat_map(|e| match &e.value {
        Some(KernelValue::Tiles(list)) => list
            .items
            .iter()
            .filter_map(|t| tile_decl(&t.tile))
            .collect::<Vec<_>>(),
        _ => Vec::new(),
    })
}

/// The type a part names: its path, or the type its inline declaration declares.
fn part_type<D>(part: &Part<D>, ident: impl Fn(&D) -> &syn::Ident) -> TokenStream {
    match part {
        Part::Path(p) => quote!(#p),
        Part::Inline { decl, .. } => {
            let i = ident(decl);
            quote!(#i)
        }
    }
}

/// `<T as ::tma::__private::Trait>`, spanned at the part (a type that is no such part is an
/// error there).
fn as_trait(ty: &TokenStream, span: Span, trait_name: &str) -> TokenStream {
    let p = private();
    let tr = syn::Ident::new(trait_name, Span::call_site());
    quote_spanned!(span=> <#ty as #p::#tr>)
}

fn opt<T: quote::ToTokens>(v: Option<T>) -> TokenStream {
    let p = private();
    match v {
        Some(v) => quote!(#p::Some(#v)),
        None => quote!(#p::None),
    }
}

fn kernel_impl(c: &CheckedKernel<'_>) -> TokenStream {
    let p = private();
    let Header { attrs, vis, ident } = &c.decl.header;
    let name = &c.name;
    let cuda_name = format!("tma_plan_{name}");
    let launch_macro = format!("TMA_PLAN_{}_LAUNCH_BOUNDS", name.to_ascii_uppercase());
    let target = syn::Ident::new(&format!("{:?}", c.target), Span::call_site());

    // Each pipeline, tile and the roles as `<T as Trait>`.
    let pipes: Vec<(TokenStream, Span)> = c
        .pipelines
        .iter()
        .map(|part| {
            let ty = part_type(part, |d| &d.header.ident);
            (as_trait(&ty, part.span(), "Pipeline"), part.span())
        })
        .collect();
    let tile_of = |item: &crate::parse::NamedTile| {
        let ty = part_type(&item.tile, |d| &d.ident);
        as_trait(&ty, item.tile.span(), "Tile")
    };
    let roles = c.roles.map(|r| {
        let ty = part_type(r, |d| &d.header.ident);
        as_trait(&ty, r.span(), "Roles")
    });

    // The regions, laid out by `plan_layout` in the plan's order.
    let mut regions: Vec<TokenStream> = pipes
        .iter()
        .enumerate()
        .map(|(j, (t, _))| {
            quote!(#p::RegionInfo::pipeline(#t::NAME, #t::SMEM_BYTES, #t::SMEM_ALIGN, #j))
        })
        .collect();
    let mut tiles_in: Vec<(TokenStream, Span)> = c
        .tiles
        .iter()
        .map(|t| {
            let ty = tile_of(t.item);
            let label = t.item.label.unraw().to_string();
            (
                quote!(#p::TileIn { what: "tile", label: #label, tile: #ty::NAME, target: #ty::TARGET, stub: #ty::CUDA_NAME.is_empty() }),
                t.item.tile.span(),
            )
        })
        .collect();
    let mut builder = Vec::new();
    // Each work queue's readers against the block (its name, its readers' token).
    let mut queue_sites: Vec<(Span, String, TokenStream)> = Vec::new();
    for t in &c.tiles {
        let ty = tile_of(t.item);
        let label = t.item.label.unraw().to_string();
        builder.push(quote!(.tile(#label, #ty::valid())));
    }
    for (t, _) in &pipes {
        builder.push(quote!(.pipeline(#t::valid())));
    }
    if let Some(r) = &roles {
        builder.push(quote!(.roles(#r::valid())));
    }
    for (i, r) in c.regions.iter().enumerate() {
        let rname = r.name();
        match r {
            CheckedRegion::Staging { tile, copies } => {
                let ty = tile_of(tile.item);
                regions.push(quote!(#p::RegionInfo::staging(#rname, #ty::SMEM_BYTES, #ty::SMEM_ALIGN, #copies, #i)));
                tiles_in.push((
                    quote!(#p::TileIn { what: "staging", label: #rname, tile: #ty::NAME, target: #ty::TARGET, stub: #ty::CUDA_NAME.is_empty() }),
                    tile.item.tile.span(),
                ));
                builder.push(quote!(.staging(#rname, #ty::valid(), #copies)));
            }
            CheckedRegion::Scratch { bytes, align, .. } => {
                regions.push(quote!(#p::RegionInfo::scratch(#rname, #bytes, #align, #i)));
                builder.push(quote!(.scratch(#rname, #bytes, #align)));
            }
            CheckedRegion::WorkQueue { item, queue } => {
                let (bytes, align, slots) =
                    (queue.smem_bytes(), queue.align_bytes(), queue.slots());
                let readers = match queue.queue().readers {
                    Consumers::Threads(n) => quote!(#p::Consumers::Threads(#n)),
                    Consumers::Warps(n) => quote!(#p::Consumers::Warps(#n)),
                    Consumers::Warpgroups(n) => quote!(#p::Consumers::Warpgroups(#n)),
                };
                regions.push(quote!(#p::RegionInfo::scratch(#rname, #bytes, #align, #i)));
                builder.push(quote!(.work_queue(#rname, &#p::work_queue(#slots, #readers))));
                let at = item
                    .readers
                    .as_ref()
                    .map_or(item.name.span(), |(_, c)| c.span);
                queue_sites.push((at, rname.clone(), readers));
            }
        }
    }
    if let Some((t, _)) = c.block_threads {
        builder.push(quote!(.block_threads(#t)));
    }
    if let Some(([x, y, z], _)) = c.cluster {
        builder.push(quote!(.cluster([#x, #y, #z])));
    }
    if let Some((n, _)) = c.blocks_per_sm {
        builder.push(quote!(.blocks_per_sm(#n)));
    }
    let pipelines_in: Vec<TokenStream> = pipes
        .iter()
        .map(|(t, _)| {
            quote!(#p::PipelineIn { name: #t::NAME, target: #t::TARGET, cluster: #t::CLUSTER, consumers: #t::CONSUMERS, stub: #t::CUDA_NAME.is_empty() })
        })
        .collect();
    let roles_in = opt(roles.as_ref().map(|r| {
        quote!(#p::RolesIn { name: #r::NAME, threads: #r::THREADS, blocks_per_sm: #r::BLOCKS_PER_SM, setmaxnreg: #r::SETMAXNREG.is_some(), stub: #r::CUDA_NAME.is_empty() })
    }));
    let blocks_per_sm = match (c.blocks_per_sm, &roles) {
        (Some((n, _)), _) => quote!(#n),
        (None, Some(r)) => quote!(#r::BLOCKS_PER_SM),
        (None, None) => quote!(0u32),
    };
    let block_threads = opt(c.block_threads.map(|b| b.0));
    let cluster = opt(c.cluster.map(|([x, y, z], _)| quote!([#x, #y, #z])));
    let declared_blocks_per_sm = opt(c.blocks_per_sm.map(|b| b.0));
    let (n_regions, n_pipes, n_tiles) = (regions.len(), pipelines_in.len(), tiles_in.len());
    let tile_items = tiles_in.iter().map(|t| &t.0);

    // One const item per rule and part, at the part's token.
    let site = |span: Span, check: TokenStream| {
        quote_spanned! {span=>
            const _: () = {
                let m = #check;
                if !m.is_empty() {
                    ::core::panic!("{}", m.as_str())
                }
            };
        }
    };
    let mut sites = Vec::new();
    for (k, (_, span)) in tiles_in.iter().enumerate() {
        sites.push(site(*span, quote!(#p::check_tile_target(&__TMA_PLAN, #k))));
    }
    for (j, (_, span)) in pipes.iter().enumerate() {
        sites.push(site(
            *span,
            quote!(#p::check_pipeline_target(&__TMA_PLAN, #j)),
        ));
        sites.push(site(
            *span,
            quote!(#p::check_pipeline_cluster(&__TMA_PLAN, #j)),
        ));
        sites.push(site(
            *span,
            quote!(#p::check_pipeline_consumers(&__TMA_PLAN, #j)),
        ));
    }
    for (i, span) in c.region_spans().into_iter().enumerate() {
        sites.push(site(span, quote!(#p::check_region_name(&__TMA_PLAN, #i))));
        sites.push(site(span, quote!(#p::check_smem(&__TMA_PLAN, #i))));
    }
    for (span, name, readers) in &queue_sites {
        sites.push(site(
            *span,
            quote!(#p::check_queue_readers(&__TMA_PLAN, #name, #readers)),
        ));
    }
    sites.push(site(
        c.block_threads_span(),
        quote!(#p::check_block_threads(&__TMA_PLAN)),
    ));
    sites.push(site(
        c.blocks_per_sm
            .map_or_else(|| c.block_threads_span(), |b| b.1),
        quote!(#p::check_blocks_per_sm(&__TMA_PLAN)),
    ));
    sites.push(site(
        c.cluster_span(),
        quote!(#p::check_cluster(&__TMA_PLAN)),
    ));

    let unit = unit_struct(attrs, vis, ident);
    quote! {
        #unit

        const _: () = {
            const __TMA_LAYOUT: #p::PlanLayoutConst<#n_regions> =
                #p::plan_layout([#(#regions),*]);
            const __TMA_PIPELINES: [#p::PipelineIn; #n_pipes] = [#(#pipelines_in),*];
            const __TMA_TILES: [#p::TileIn; #n_tiles] = [#(#tile_items),*];
            const __TMA_PLAN: #p::PlanIn<'static> = #p::PlanIn {
                name: #name,
                target: #p::Arch::#target,
                regions: &__TMA_LAYOUT.regions,
                placed: __TMA_LAYOUT.placed,
                pipelines: &__TMA_PIPELINES,
                tiles: &__TMA_TILES,
                roles: #roles_in,
                block_threads: #block_threads,
                cluster: #cluster,
                blocks_per_sm: #declared_blocks_per_sm,
            };

            impl #p::Plan for #ident {
                const NAME: &'static str = #name;
                const CUDA_NAME: &'static str = #cuda_name;
                const LAUNCH_BOUNDS_MACRO: &'static str = #launch_macro;
                const TARGET: #p::Arch = #p::Arch::#target;
                const BLOCK_THREADS: u32 = __TMA_PLAN.threads();
                const BLOCKS_PER_SM: u32 = #blocks_per_sm;
                const CLUSTER: [u32; 3] = __TMA_PLAN.cluster_shape();
                const SMEM_BYTES: u64 = __TMA_LAYOUT.placed.total_bytes;
                const SMEM_ALIGN: u64 = __TMA_LAYOUT.placed.align_bytes;
                const DYNAMIC_SMEM_BYTES: u32 = __TMA_LAYOUT.placed.dynamic_u32();
                const SMEM_OPT_IN: bool = __TMA_LAYOUT.placed.opt_in();
                const REGIONS: &'static [#p::RegionInfo] = &__TMA_LAYOUT.regions;

                fn plan() -> #p::KernelPlan {
                    #p::KernelPlan::new(#name)
                        .target(#p::Arch::#target)
                        #(#builder)*
                }

                fn valid() -> &'static #p::ValidKernelPlan {
                    static VALID: #p::OnceLock<#p::ValidKernelPlan> = #p::OnceLock::new();
                    #p::plan_once(&VALID, <Self as #p::Plan>::plan)
                }
            }

            #(#sites)*
        };
    }
}

/// The errors' companion: a unit struct implementing `Plan` with empty values.
fn kernel_stub(header: &Header) -> TokenStream {
    let p = private();
    let Header { attrs, vis, ident } = header;
    let name = ident.unraw().to_string();
    let unit = unit_struct(attrs, vis, ident);
    quote! {
        #unit

        impl #p::Plan for #ident {
            const NAME: &'static str = #name;
            const CUDA_NAME: &'static str = "";
            const LAUNCH_BOUNDS_MACRO: &'static str = "";
            const TARGET: #p::Arch = #p::Arch::Sm90a;
            const BLOCK_THREADS: u32 = 0;
            const BLOCKS_PER_SM: u32 = 0;
            const CLUSTER: [u32; 3] = [1, 1, 1];
            const SMEM_BYTES: u64 = 0;
            const SMEM_ALIGN: u64 = 1;
            const DYNAMIC_SMEM_BYTES: u32 = 0;
            const SMEM_OPT_IN: bool = false;
            const REGIONS: &'static [#p::RegionInfo] = &[];

            fn plan() -> #p::KernelPlan {
                #p::KernelPlan::new(#name)
            }

            fn valid() -> &'static #p::ValidKernelPlan {
                #p::stub_plan()
            }
        }
    }
}
