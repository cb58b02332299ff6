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
    assert_eq!(p.layout().tile_offsets, vec![0, 16384]);
    assert_eq!(p.layout().stage_stride, 49152);
    assert_eq!(p.layout().full_offset, 4 * 49152);
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
    assert_eq!(e.errors[0].value, "16");
}
