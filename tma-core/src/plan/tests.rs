#![allow(clippy::unwrap_used, clippy::panic)]

use super::*;
use crate::pipeline::{Consumers, PipelineSpec, WarpRoles};
use crate::{validate, DType, Swizzle, TileSpec};

fn tile(name: &str, rows: u32, swizzle: Swizzle) -> ValidSpec {
    validate(&TileSpec::new(name, DType::BF16, [4096, 4096], [rows, 64]).swizzle(swizzle)).unwrap()
}

/// A GEMM-like plan: a two-tile ring of 4 stages, two consumer warpgroups, one D tile per
/// consumer warpgroup, 256 B of scratch.
fn gemm() -> KernelPlan {
    let a = tile("a", 128, Swizzle::B128);
    let b = tile("b", 128, Swizzle::B128);
    let d = tile("d", 64, Swizzle::B128);
    let ring = PipelineSpec::new("ring", 4, Consumers::Warpgroups(2))
        .tile("a", &a)
        .tile("b", &b)
        .validate()
        .unwrap();
    let roles = WarpRoles::new("gemm", 40, 2, 232).validate().unwrap();
    KernelPlan::new("gemm")
        .pipeline(&ring)
        .roles(&roles)
        .staging("d", &d, 2)
        .scratch("flags", 256, 16)
}

#[test]
fn one_layout_for_every_region() {
    let v = gemm().validate().unwrap();
    let l = v.layout();
    // Ring: 4 stages x 32 KB + 64 B of mbarriers, at 0; D: 2 x 8 KB at the next 1 KB; the
    // scratch after it at 16.
    let ring: u64 = 4 * 32768 + 64;
    let d_at = ring.next_multiple_of(1024);
    let got: Vec<(&str, u64, u64, u64)> = l
        .regions
        .iter()
        .map(|r| (r.name.as_str(), r.offset, r.bytes, r.align))
        .collect();
    assert_eq!(
        got,
        vec![
            ("ring", 0, ring, 1024),
            ("d", d_at, 2 * 8192, 1024),
            ("flags", d_at + 16384, 256, 16),
        ]
    );
    assert_eq!(v.region("d").unwrap().stride, 8192);
    assert_eq!(l.total_bytes(), d_at + 16384 + 256);
    assert_eq!(l.align_bytes(), 1024);
    // The base is at least 16-byte aligned: aligning it to 1 KB skips at most 1008 bytes.
    assert_eq!(l.dynamic_smem_bytes(), l.total_bytes() + 1008);
    let launch = v.launch();
    assert_eq!(launch.block, [384, 1, 1]);
    assert_eq!(launch.cluster, [1, 1, 1]);
    assert_eq!(u64::from(launch.dynamic_smem_bytes), l.dynamic_smem_bytes());
    assert!(launch.smem_opt_in);
    // Every region aligned, none overlapping.
    for w in l.regions.windows(2) {
        assert!(w[0].offset + w[0].bytes <= w[1].offset, "{w:?}");
    }
    assert!(l.regions.iter().all(|r| r.offset % r.align == 0));
    // The regions' offsets are the layout's, and the ring is the pipeline's own layout.
    let offsets: Vec<u64> = l.regions.iter().map(|r| r.offset).collect();
    assert_eq!(l.layout.offsets, offsets);
    let ring = v.plan().pipelines[0].layout();
    assert_eq!(
        (ring.total_bytes(), ring.align_bytes()),
        (l.regions[0].bytes, 1024)
    );
}

#[test]
fn a_small_plan_needs_no_opt_in_and_an_empty_one_no_smem() {
    let t = tile("t", 64, Swizzle::B128);
    let v = KernelPlan::new("copy")
        .staging("slots", &t, 3)
        .block_threads(32)
        .validate()
        .unwrap();
    // 3 x 8 KB + 1 KB - 16 B of slack.
    assert_eq!(v.launch().dynamic_smem_bytes, 3 * 8192 + 1008);
    assert!(!v.launch().smem_opt_in);
    // 36 rows of 128 B under the 128B swizzle: 4608 B a call, each copy at a multiple of 1 KB.
    let odd =
        validate(&TileSpec::new("o", DType::BF16, [4096, 4096], [36, 64]).swizzle(Swizzle::B128))
            .unwrap();
    let v = KernelPlan::new("odd")
        .staging("o", &odd, 3)
        .block_threads(32)
        .validate()
        .unwrap();
    let o = v.region("o").unwrap();
    assert_eq!((o.stride, o.bytes, o.align), (5120, 2 * 5120 + 4608, 1024));
    let none = KernelPlan::new("plain")
        .block_threads(64)
        .validate()
        .unwrap();
    assert_eq!(none.launch().dynamic_smem_bytes, 0);
    assert_eq!(none.launch().block, [64, 1, 1]);
}

#[test]
fn every_finding_at_once() {
    let t = tile("t", 64, Swizzle::B128);
    let e = KernelPlan::new("bad kernel")
        .staging("x", &t, 0)
        .scratch("x", 0, 24)
        .validate()
        .unwrap_err();
    let rules: Vec<Rule> = e.errors.iter().map(|f| f.rule).collect();
    assert_eq!(
        rules,
        vec![
            Rule::NameIsIdentifier,
            Rule::PlanRegions, // two regions named x
            Rule::PlanRegions, // no copies
            Rule::PlanRegions, // no bytes
            Rule::PlanRegions, // align 24
            Rule::PlanBlockThreads,
        ],
        "{e}"
    );
    assert!(e.to_string().contains("kernel plan `bad kernel`"), "{e}");
}

#[test]
fn a_staging_region_past_the_block_names_every_region() {
    let t = tile("t", 256, Swizzle::B128); // 32 KB a call
    let e = KernelPlan::new("big")
        .staging("slots", &t, 8)
        .block_threads(32)
        .validate()
        .unwrap_err();
    assert_eq!(e.errors.len(), 1);
    assert_eq!(e.errors[0].rule, Rule::PlanSmemFits);
    assert_eq!(e.errors[0].field, Field::Plan("smem"));
    let text = e.errors[0].to_string();
    assert!(
        text.contains("`slots` 262144 B at +0 (align 1024)") && text.contains("232448"),
        "{text}"
    );
    // Seven fit: 229376 + 1024.
    assert!(KernelPlan::new("big")
        .staging("slots", &t, 7)
        .block_threads(32)
        .validate()
        .is_ok());
}

#[test]
fn warp_granular_roles_give_the_block() {
    // One producer warp and four consumer warps: 160 threads, the plan's block.
    let t = tile("t", 64, Swizzle::B128);
    let ring = PipelineSpec::new("ring", 2, Consumers::Warps(4))
        .tile("a", &t)
        .validate()
        .unwrap();
    let roles = WarpRoles::warps("epi", 1, 4)
        .per_consumer_barrier("slice", 32)
        .validate()
        .unwrap();
    let v = KernelPlan::new("epi")
        .pipeline(&ring)
        .roles(&roles)
        .validate()
        .unwrap();
    assert_eq!(v.launch().block, [160, 1, 1]);
    assert_eq!(v.blocks_per_sm(), Some(1), "the roles'");
    // A declared block must be the roles'.
    let e = KernelPlan::new("epi")
        .roles(&roles)
        .block_threads(128)
        .validate()
        .unwrap_err();
    assert_eq!(e.errors[0].rule, Rule::PlanBlockThreads);
    assert!(e.to_string().contains("160"), "{e}");
}

#[test]
fn a_tile_set_member_sits_where_its_struct_says() {
    // A ring first, so the set's region does not start at 0; members of different sizes and
    // alignments, so the second one's offset within the set is not 0 either.
    let small = validate(&TileSpec::new("small", DType::F32, [4096], [8])).unwrap(); // 32 B, align 128
    let big = tile("big", 64, Swizzle::B128); // 8 KB, align 1024
    let ring = PipelineSpec::new("ring", 2, Consumers::Threads(128))
        .tile("a", &big)
        .validate()
        .unwrap();
    let v = KernelPlan::new("setk")
        .pipeline(&ring)
        .tile_set("pair", &[("s", &small), ("b", &big)])
        .scratch("flags", 48, 16)
        .block_threads(128)
        .validate()
        .unwrap();
    let set = v.region("pair").unwrap();
    let code = crate::render::TileSetCode::new("pair", &[("s", &small), ("b", &big)]).unwrap();
    assert_eq!(set.members.len(), 2);
    for (m, &within) in ["s", "b"].iter().zip(&set.members) {
        // The set's own struct states the same offset within it.
        let line = format!("static constexpr unsigned OFFSET_{m} = {within}u;");
        assert!(code.source().contains(&line), "{line}\n{}", code.source());
        assert_eq!(v.set_member("pair", m), Some(set.offset + within));
    }
    // The ring: 2 x 8 KB + 32 B of mbarriers; the set at the next 1 KB, `b` 1 KB into it.
    assert_eq!(set.offset, 17408);
    assert_eq!(v.set_member("pair", "b"), Some(17408 + 1024));
    // No such member, no such set, and a region that is no set.
    assert_eq!(v.set_member("pair", "c"), None);
    assert_eq!(v.set_member("other", "s"), None);
    assert_eq!(v.set_member("flags", "s"), None);
    assert!(v.region("flags").unwrap().members.is_empty());
}

/// A plan's launch bounds ask for what an SM holds, and a plan with `setmaxnreg` warp roles
/// asks for the blocks per SM the roles checked their registers for. All three were accepted: 1000
/// blocks of 1024 threads, and GEMM roles checked for one block (168 registers a thread, the
/// consumers' `setmaxnreg.inc` to 232 in budget) under `__launch_bounds__(384, 2)`, which
/// leaves 80 a thread: the consumers' increase would never be granted.
#[test]
fn launch_bounds_fit_an_sm_and_keep_the_roles_budget() {
    let refused = |plan: KernelPlan, rule: Rule| {
        let e = plan.validate().unwrap_err();
        let found: Vec<(Field, Rule)> =
            e.errors.iter().map(|f| (f.field.clone(), f.rule)).collect();
        assert_eq!(found, vec![(Field::Plan("blocks_per_sm"), rule)], "{e}");
        e.to_string()
    };
    let msg = refused(
        KernelPlan::new("k").block_threads(1024).blocks_per_sm(1000),
        Rule::BlocksPerSm,
    );
    assert!(msg.contains("at most 32 resident blocks"), "{msg}");
    let msg = refused(
        KernelPlan::new("k").block_threads(1024).blocks_per_sm(3),
        Rule::ThreadsPerSm,
    );
    assert!(
        msg.contains("3072 threads") && msg.contains("at most 2 block(s)"),
        "{msg}"
    );
    let msg = refused(gemm().blocks_per_sm(2), Rule::PlanBlockThreads);
    assert!(
        msg.contains("registers for 1 block(s) per SM") && msg.contains("declare 1"),
        "{msg}"
    );
    // Roles without setmaxnreg checked no registers: the plan asks for its own count, within
    // the SM (160 threads x 12 = 1920).
    let warps = WarpRoles::warps("w", 1, 4).validate().unwrap();
    let plan = || KernelPlan::new("k").roles(&warps);
    assert_eq!(
        plan().blocks_per_sm(12).validate().unwrap().blocks_per_sm(),
        Some(12)
    );
    refused(plan().blocks_per_sm(13), Rule::ThreadsPerSm);
    // The edges are accepted: 32 blocks of 64 threads, 2 of 1024, the roles' own count.
    assert!(KernelPlan::new("k")
        .block_threads(64)
        .blocks_per_sm(32)
        .validate()
        .is_ok());
    assert!(KernelPlan::new("k")
        .block_threads(1024)
        .blocks_per_sm(2)
        .validate()
        .is_ok());
    assert_eq!(
        gemm().blocks_per_sm(1).validate().unwrap().blocks_per_sm(),
        Some(1)
    );
}

/// A work queue is a region of its bytes at 8 (after the others, as declared); the plan's code
/// names its type and accessor, numbering queues from the id it is given; two queues' names
/// clash as any regions' do.
#[test]
fn a_work_queue_is_a_region_with_its_type() {
    use crate::pipeline::WorkQueue;
    use crate::render::PlanCode;
    let q = WorkQueue::new(4, Consumers::Warpgroups(2))
        .validate()
        .unwrap();
    let v = gemm()
        .work_queue("tiles", &q)
        .work_queue("more", &q)
        .validate()
        .unwrap();
    let r = v.region("tiles").unwrap();
    assert_eq!((r.bytes, r.align, r.role), (80, 8, RegionRole::Scratch(2)));
    assert_eq!(r.offset % 8, 0);
    let code = PlanCode::with_queue_ids(&v, 5).unwrap();
    let text = code.source();
    assert!(
        text.contains("typedef tma_work_queue<4u, 8u, true, 5u> queue_tiles;"),
        "{text}"
    );
    assert!(
        text.contains("typedef tma_work_queue<4u, 8u, true, 6u> queue_more;"),
        "{text}"
    );
    assert!(
        text.contains("queue_tiles tiles(unsigned char* base)"),
        "{text}"
    );
    assert!(
        text.contains("work queue tma_work_queue<4u, 8u, true, 5u> at +"),
        "{text}"
    );
    // A queue's `queue_<name>` is another region's accessor: refused, naming both.
    let e = gemm()
        .work_queue("tiles", &q)
        .scratch("queue_tiles", 4, 4)
        .validate()
        .unwrap_err();
    assert!(
        e.errors.iter().any(|f| f.rule == Rule::PlanRegions
            && f.message.contains("region `tiles`")
            && f.message.contains("queue_tiles")),
        "{e}"
    ); // Readers the block cannot hold beside the producer thread: refused.
    let all = WorkQueue::new(2, Consumers::Warpgroups(3))
        .validate()
        .unwrap();
    let e = gemm().work_queue("tiles", &all).validate().unwrap_err();
    assert!(
        e.errors.iter().any(|f| f.rule == Rule::PlanBlockThreads
            && f.message
                .contains("384 reader threads pop each slot, but the block has 384")),
        "{e}"
    );
}
