//! Code generation for `tma_pipeline!` and `tma_warp_roles!` from checked declarations: each
//! stage tile as its tile macro expands it, then a unit struct implementing
//! `::tma::Pipeline` (or `::tma::Roles`).

use super::{tile_impl, variant};
use crate::check::pipeline::{self as checks, CheckedPipeline, CheckedRoles};
use crate::fallback;
use crate::parse::{Header, PipelineDecl, RolesDecl};
use crate::paths::{private, unit_struct};
use proc_macro2::TokenStream;
use quote::quote;
use tma_core::pipeline::{Consumers, RegisterSplit, RoleWarps};

/// `tma_pipeline! { .. }`.
pub fn pipeline(decl: PipelineDecl) -> TokenStream {
    match checks::pipeline(&decl) {
        Ok(checked) => pipeline_impl(&decl, &checked),
        Err(errors) => fallback::pipeline(&decl, errors),
    }
}

/// `tma_warp_roles! { .. }`.
pub fn roles(decl: RolesDecl) -> TokenStream {
    match checks::roles(&decl) {
        Ok(checked) => roles_impl(&decl.header, &checked),
        Err(errors) => fallback::roles(&decl.header, errors),
    }
}

fn pipeline_impl(decl: &PipelineDecl, checked: &CheckedPipeline<'_>) -> TokenStream {
    let p = private();
    let Header { attrs, vis, ident } = &decl.header;
    let valid = &checked.valid;
    let spec = valid.spec();
    let layout = valid.layout();
    let tiles: TokenStream = checked
        .members
        .iter()
        .map(|m| tile_impl(&m.member.decl, &m.tile))
        .collect();
    let name = &spec.name;
    let cuda_name = format!("tma_pipe_{name}");
    let stages = spec.stages;
    let (tx, stage_bytes, stride, total, align, dynamic) = (
        valid.stage_tx_bytes(),
        layout.stage.total_bytes,
        layout.stage_stride,
        layout.total_bytes(),
        layout.align_bytes(),
        layout.dynamic_smem_bytes(),
    );
    let (max_stages, reserve, peers, empty) = (
        valid.max_stages(),
        spec.reserve_smem,
        valid.peers(),
        valid.empty_arrivals(),
    );
    let [cx, cy, cz] = spec.cluster;
    let axis = |a: Option<tma_core::pipeline::ClusterAxis>| match a {
        Some(a) => {
            let v = variant(&a);
            quote!(#p::Some(#p::ClusterAxis::#v))
        }
        None => quote!(#p::None),
    };
    let infos = spec
        .tiles
        .iter()
        .zip(&checked.members)
        .enumerate()
        .map(|(i, (t, m))| {
            let plan = t.tile.plan();
            let (member, tile_name, tile_cuda) =
                (&t.member, &t.tile.spec().name, &m.tile.cuda_name);
            let (ttx, smem, talign) = (plan.tx_bytes, plan.footprint_bytes, plan.align_bytes);
            let offset = layout.stage.offsets.get(i).copied().unwrap_or(0);
            let multicast = axis(t.multicast);
            quote! {
                #p::StageTileInfo {
                    member: #member,
                    name: #tile_name,
                    cuda_name: #tile_cuda,
                    tx_bytes: #ttx,
                    smem_bytes: #smem,
                    smem_align: #talign,
                    smem_offset: #offset,
                    multicast: #multicast,
                }
            }
        });
    let stage_tiles = spec.tiles.iter().zip(&checked.members).map(|(t, m)| {
        let member = &t.member;
        let ty = &m.member.decl.ident;
        let multicast = axis(t.multicast);
        quote! {
            #p::StageTile {
                member: #p::String::from(#member),
                tile: <#ty as #p::Tile>::valid().clone(),
                multicast: #multicast,
            }
        }
    });
    let consumers = consumers_expr(spec.consumers);
    let in_turn = spec.in_turn;
    let target = variant(&spec.target);
    let unit = unit_struct(attrs, vis, ident);
    quote! {
        #tiles

        #unit

        impl #p::Pipeline for #ident {
            const NAME: &'static str = #name;
            const CUDA_NAME: &'static str = #cuda_name;
            const STAGES: u32 = #stages;
            const STAGE_TX_BYTES: u64 = #tx;
            const STAGE_BYTES: u64 = #stage_bytes;
            const STAGE_STRIDE: u64 = #stride;
            const SMEM_BYTES: u64 = #total;
            const SMEM_ALIGN: u64 = #align;
            const DYNAMIC_SMEM_BYTES: u64 = #dynamic;
            const MAX_STAGES: u64 = #max_stages;
            const RESERVE_SMEM: u64 = #reserve;
            const CLUSTER: [u32; 3] = [#cx, #cy, #cz];
            const CONSUMERS: #p::Consumers = #consumers;
            const TARGET: #p::Arch = #p::Arch::#target;
            const PEERS: u32 = #peers;
            const EMPTY_ARRIVALS: u32 = #empty;
            const TILES: &'static [#p::StageTileInfo] = &[#(#infos),*];

            fn spec() -> #p::PipelineSpec {
                #p::PipelineSpec {
                    name: #p::String::from(#name),
                    stages: #stages,
                    tiles: #p::Vec::from([#(#stage_tiles),*]),
                    consumers: #consumers,
                    cluster: [#cx, #cy, #cz],
                    target: #p::Arch::#target,
                    reserve_smem: #reserve,
                    in_turn: #in_turn,
                }
            }

            fn valid() -> &'static #p::ValidPipeline {
                static VALID: #p::OnceLock<#p::ValidPipeline> = #p::OnceLock::new();
                #p::pipeline_once(&VALID, <Self as #p::Pipeline>::spec)
            }
        }
    }
}

fn consumers_expr(c: Consumers) -> TokenStream {
    let p = private();
    let n = c.count();
    match c {
        Consumers::Threads(_) => quote!(#p::Consumers::Threads(#n)),
        Consumers::Warps(_) => quote!(#p::Consumers::Warps(#n)),
        Consumers::Warpgroups(_) => quote!(#p::Consumers::Warpgroups(#n)),
    }
}

fn roles_impl(header: &Header, checked: &CheckedRoles) -> TokenStream {
    let p = private();
    let Header { attrs, vis, ident } = header;
    let valid = &checked.valid;
    let r = valid.roles();
    let name = &r.name;
    let cuda_name = format!("tma_roles_{name}");
    let launch = format!("TMA_ROLES_{}_LAUNCH_BOUNDS", name.to_ascii_uppercase());
    let bps = r.blocks_per_sm;
    let role_warps = |w: RoleWarps| {
        let n = w.count();
        match w {
            RoleWarps::Warps(_) => quote!(#p::RoleWarps::Warps(#n)),
            RoleWarps::Warpgroups(_) => quote!(#p::RoleWarps::Warpgroups(#n)),
        }
    };
    let (producers, consumers) = (role_warps(r.producers), role_warps(r.consumers));
    let setmaxnreg = match r.setmaxnreg {
        Some(RegisterSplit {
            producer_regs,
            consumer_regs,
        }) => quote!(#p::Some(#p::RegisterSplit {
            producer_regs: #producer_regs,
            consumer_regs: #consumer_regs,
        })),
        None => quote!(#p::None),
    };
    let (threads, launch_regs) = (r.threads(), valid.launch_regs());
    let infos = valid.barrier_ids().map(|(b, ids)| {
        let (bname, threads, per) = (&b.name, b.threads, b.per_consumer);
        let (id, last) = (*ids.start(), *ids.end());
        quote!(#p::BarrierInfo { name: #bname, id: #id, threads: #threads, per_consumer: #per, last: #last })
    });
    let barriers = r.barriers.iter().map(|b| {
        let (bname, threads, per) = (&b.name, b.threads, b.per_consumer);
        quote!(#p::NamedBarrier { name: #p::String::from(#bname), threads: #threads, per_consumer: #per })
    });
    let unit = unit_struct(attrs, vis, ident);
    quote! {
        #unit

        impl #p::Roles for #ident {
            const NAME: &'static str = #name;
            const CUDA_NAME: &'static str = #cuda_name;
            const LAUNCH_BOUNDS_MACRO: &'static str = #launch;
            const PRODUCERS: #p::RoleWarps = #producers;
            const CONSUMERS: #p::RoleWarps = #consumers;
            const SETMAXNREG: #p::Option<#p::RegisterSplit> = #setmaxnreg;
            const BLOCKS_PER_SM: u32 = #bps;
            const THREADS: u64 = #threads;
            const LAUNCH_REGS: u64 = #launch_regs;
            const BARRIERS: &'static [#p::BarrierInfo] = &[#(#infos),*];

            fn spec() -> #p::WarpRoles {
                #p::WarpRoles {
                    name: #p::String::from(#name),
                    producers: <Self as #p::Roles>::PRODUCERS,
                    consumers: <Self as #p::Roles>::CONSUMERS,
                    setmaxnreg: <Self as #p::Roles>::SETMAXNREG,
                    blocks_per_sm: #bps,
                    barriers: #p::Vec::from([#(#barriers),*]),
                }
            }

            fn valid() -> &'static #p::ValidWarpRoles {
                static VALID: #p::OnceLock<#p::ValidWarpRoles> = #p::OnceLock::new();
                #p::roles_once(&VALID, <Self as #p::Roles>::spec)
            }
        }
    }
}
