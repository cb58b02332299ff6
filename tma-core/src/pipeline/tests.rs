#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use super::*;
use crate::{validate, DType, Swizzle, TileSpec};

fn gemm_tile(name: &str, rows: u32, repeat: u32) -> ValidSpec {
    validate(
        &TileSpec::new(name, DType::BF16, [4096, 4096], [rows, 64])
            .dim_names(["MN", "K"])
            .swizzle(Swizzle::B128)
            .repeat([repeat, 1]),
    )
    .unwrap()
}

#[test]
fn a_gemm_ring_lays_out_and_counts_its_bytes() {
    let a = gemm_tile("a", 128, 1);
    let b = gemm_tile("b", 256, 1);
    let p = PipelineSpec::new("ring", 4, Consumers::Warpgroups(2))
        .tile("a", &a)
        .tile("b", &b)
        .validate()
        .unwrap();
    assert_eq!(p.stage_tx_bytes(), 16384 + 32768);
    assert_eq!(p.layout().stage.offsets, vec![0, 16384]);
    assert_eq!(p.layout().stage_stride, 49152);
    assert_eq!(p.layout().full_offset(), 4 * 49152);
    assert_eq!(p.empty_arrivals(), 8);
    assert_eq!(p.max_stages(), 4);
    let five = PipelineSpec::new("ring", 5, Consumers::Warpgroups(2))
        .tile("a", &a)
        .tile("b", &b)
        .validate()
        .unwrap_err();
    assert_eq!(five.errors.len(), 1);
    assert_eq!(five.errors[0].rule, Rule::PipelineStagesFit);
    assert!(
        five.errors[0].message.contains("at most 4 stages fit"),
        "{}",
        five
    );
}

#[test]
fn multicast_counts_every_box_at_every_cta_and_every_peer_releases() {
    // A: 128 rows as 2 boxes of 64, shared by the 2 CTAs along y; B loaded alone.
    let a = gemm_tile("a", 64, 2);
    let b = gemm_tile("b", 128, 1);
    let p = PipelineSpec::new("mc", 3, Consumers::Warps(4))
        .multicast_tile("a", &a, ClusterAxis::Y)
        .tile("b", &b)
        .cluster([1, 2, 1])
        .validate()
        .unwrap();
    assert_eq!(p.stage_tx_bytes(), 16384 + 16384);
    assert_eq!(p.peers(), 2);
    assert_eq!(p.empty_arrivals(), 8);
    assert_eq!(p.consumer_arrivals(), 4);
    assert_eq!(
        p.split(0),
        Some(MulticastSplit {
            axis: ClusterAxis::Y,
            ctas: 2,
            boxes_per_cta: 1
        })
    );
    // Two axes of a 2 x 2 cluster: the row and the column through a CTA, 3 peers.
    let p = PipelineSpec::new("mc2", 2, Consumers::Warpgroups(1))
        .multicast_tile("a", &a, ClusterAxis::Y)
        .multicast_tile("b", &gemm_tile("b2", 64, 2), ClusterAxis::X)
        .cluster([2, 2, 1])
        .validate()
        .unwrap();
    assert_eq!((p.peers(), p.empty_arrivals()), (3, 12));
}

/// A pipeline taken in turn is released by one consumer: a warpgroup's 4 warps (or one warp);
/// several, or threads, are refused (PipelineConsumers).
#[test]
fn taken_in_turn_by_one_consumer() {
    let a = gemm_tile("a", 64, 1);
    let p = PipelineSpec::new("pp", 4, Consumers::Warpgroups(1))
        .tile("a", &a)
        .in_turn()
        .validate()
        .unwrap();
    assert!(p.spec().in_turn);
    assert_eq!((p.consumer_arrivals(), p.empty_arrivals()), (4, 4));
    assert!(PipelineSpec::new("pp", 4, Consumers::Warps(1))
        .tile("a", &a)
        .in_turn()
        .validate()
        .is_ok());
    for c in [
        Consumers::Warpgroups(2),
        Consumers::Warps(4),
        Consumers::Threads(128),
    ] {
        let e = PipelineSpec::new("pp", 4, c)
            .tile("a", &a)
            .in_turn()
            .validate()
            .unwrap_err();
        assert_eq!(e.errors.len(), 1, "{e}");
        assert_eq!(e.errors[0].rule, Rule::PipelineConsumers, "{e}");
        assert!(e.to_string().contains("taken in turn"), "{e}");
    }
}

#[test]
fn every_finding_at_once() {
    let a = gemm_tile("a", 64, 1);
    let e = PipelineSpec::new("bad name", 0, Consumers::Threads(0))
        .tile("a", &a)
        .multicast_tile("a", &a, ClusterAxis::X)
        .cluster([2, 1, 0])
        .validate()
        .unwrap_err();
    let rules: Vec<Rule> = e.errors.iter().map(|f| f.rule).collect();
    for r in [
        Rule::NameIsIdentifier,
        Rule::PipelineStageCount,
        Rule::PipelineTiles,
        Rule::ClusterShape,
        Rule::MulticastSlices,
        Rule::PipelineConsumers,
    ] {
        assert!(rules.contains(&r), "{r:?} missing from {e}");
    }
}

#[test]
fn register_split_is_checked_against_the_register_file() {
    // DeepGEMM's split: 1 producer warpgroup at 40, 2 consumers at 232, 384 threads.
    let ok = WarpRoles::new("gemm", 40, 2, 232)
        .barrier("consumers", 256)
        .barrier("epilogue", 128)
        .validate()
        .unwrap();
    assert_eq!(ok.launch_regs(), 168);
    let ids: Vec<u32> = ok.barriers().map(|(_, id)| id).collect();
    assert_eq!(ids, vec![1, 2]);
    let e = WarpRoles::new("gemm", 40, 2, 240).validate().unwrap_err();
    assert_eq!(e.errors[0].rule, Rule::RegisterBudget);
    assert!(e.to_string().contains("64512"), "{e}");
    // Reversed: within the budget, but setmaxnreg.dec cannot raise nor .inc lower.
    let e = WarpRoles::new("r", 240, 2, 128).validate().unwrap_err();
    let found: Vec<_> = e
        .errors
        .iter()
        .map(|f| (f.rule, f.field.to_string()))
        .collect();
    assert_eq!(
        found,
        vec![
            (Rule::SetmaxnregDirection, "producer_regs".to_string()),
            (Rule::SetmaxnregDirection, "consumer_regs".to_string()),
        ],
        "{e}"
    );
    assert!(e.to_string().contains("at most 168"), "{e}");
    let e = WarpRoles::new("gemm", 20, 2, 232).validate().unwrap_err();
    assert_eq!(e.errors[0].rule, Rule::SetmaxnregRange);
    let mut many = WarpRoles::new("gemm", 40, 2, 232);
    for i in 0..16 {
        many = many.barrier(format!("b{i}"), 128);
    }
    let e = many.validate().unwrap_err();
    assert_eq!(e.errors.len(), 1);
    assert_eq!(e.errors[0].rule, Rule::NamedBarrierIds);
    assert_eq!(e.errors[0].value, "id 16");
}

#[test]
fn warp_granular_roles_count_warps_and_give_per_consumer_ids() {
    // One producer warp, four consumer warps: 160 threads, no setmaxnreg.
    let r = WarpRoles::warps("epi", 1, 4)
        .barrier("all", 128)
        .per_consumer_barrier("slice", 32)
        .barrier("last", 160)
        .validate()
        .unwrap();
    assert_eq!(r.roles().threads(), 160);
    assert_eq!(r.roles().consumer_count(), 4);
    assert_eq!(r.launch_regs(), 256);
    let ids: Vec<(String, u32, u32)> = r
        .barrier_ids()
        .map(|(b, ids)| (b.name.clone(), *ids.start(), *ids.end()))
        .collect();
    assert_eq!(
        ids,
        vec![
            ("all".to_string(), 1, 1),
            ("slice".to_string(), 2, 5),
            ("last".to_string(), 6, 6),
        ]
    );
    assert_eq!(r.ids_used(), 6);
    // A per-consumer barrier over warpgroup consumers: one id per warpgroup.
    let g = WarpRoles::new("gemm", 40, 2, 232)
        .per_consumer_barrier("epi", 128)
        .barrier("both", 256)
        .validate()
        .unwrap();
    let firsts: Vec<u32> = g.barriers().map(|(_, id)| id).collect();
    assert_eq!(firsts, vec![1, 3]);
    // Warps of whole warpgroups take setmaxnreg: 4 producer warps, 8 consumer warps are the
    // GEMM's warpgroups, with the same budget.
    let same = WarpRoles::warps("gemm", 4, 8).setmaxnreg(40, 232);
    assert_eq!(same.validate().unwrap().launch_regs(), 168);
    let e = WarpRoles::warps("gemm", 4, 8)
        .setmaxnreg(40, 240)
        .validate()
        .unwrap_err();
    assert_eq!(e.errors[0].rule, Rule::RegisterBudget);
    assert!(e.to_string().contains("64512"), "{e}");
}

#[test]
fn setmaxnreg_and_consumer_warpgroups_need_whole_warpgroups() {
    // setmaxnreg over 1 producer warp and 6 consumer warps: both roles split warpgroups.
    let e = WarpRoles::warps("w", 1, 6)
        .setmaxnreg(40, 232)
        .validate()
        .unwrap_err();
    let found: Vec<_> = e
        .errors
        .iter()
        .map(|f| (f.rule, f.field.to_string(), f.value.clone()))
        .collect();
    assert_eq!(
        found,
        vec![
            (
                Rule::SetmaxnregWarpgroups,
                "producer_warps".to_string(),
                "1".to_string()
            ),
            (
                Rule::SetmaxnregWarpgroups,
                "consumer_warps".to_string(),
                "6".to_string()
            ),
        ],
        "{e}"
    );
    assert!(e.to_string().contains("all warps of a warpgroup"), "{e}");
    // Consumer warpgroups after 2 producer warps start mid-warpgroup.
    let e = WarpRoles::warps("w", 2, 0)
        .consumers(RoleWarps::Warpgroups(1))
        .validate()
        .unwrap_err();
    assert_eq!(e.errors.len(), 1, "{e}");
    assert_eq!(e.errors[0].rule, Rule::WarpgroupAlignment);
    assert_eq!(e.errors[0].field, Field::WarpRoles("producer_warps"));
    // 4 producer warps are a warpgroup: consumer warpgroups after them are fine.
    assert!(WarpRoles::warps("w", 4, 0)
        .consumers(RoleWarps::Warpgroups(1))
        .validate()
        .is_ok());
    // Past a block in warps: the field names warps.
    let e = WarpRoles::warps("w", 1, 32).validate().unwrap_err();
    assert_eq!(e.errors[0].field, Field::WarpRoles(BLOCK_WARPS));
    assert_eq!(e.errors[0].value, "33");
    // Barrier constants that would clash (`BARRIER_a_THREADS` twice).
    let e = WarpRoles::warps("w", 1, 1)
        .barrier("a", 32)
        .barrier("a_THREADS", 32)
        .validate()
        .unwrap_err();
    assert_eq!(e.errors[0].rule, Rule::NamedBarrierIds);
    assert!(e.to_string().contains("`BARRIER_a_THREADS`"), "{e}");
    // The same for a per-consumer barrier (its names are a plain one's, with a parameter).
    let e = WarpRoles::warps("w", 1, 2)
        .per_consumer_barrier("a_THREADS", 32)
        .per_consumer_barrier("a", 32)
        .validate()
        .unwrap_err();
    assert_eq!(e.errors.len(), 1, "{e}");
    assert_eq!(e.errors[0].rule, Rule::NamedBarrierIds);
    assert!(e.to_string().contains("`BARRIER_a_THREADS`"), "{e}");
}
