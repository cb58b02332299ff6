//! What a launch is checked against on the host, before the driver sees it: the pushed
//! arguments against the kernel's parameters (their sizes, read once from the driver with
//! `cuFuncGetParamInfo` when the kernel is looked up); and, for a kernel without a plan of a
//! source given with its typed description ([`tma_core::facts::SourceFacts`]), the dynamic
//! shared memory against the tiles the source holds outside its plans and the cluster shape
//! and dynamic shared memory against its pipelines (a plan kernel is checked against its plan,
//! `super::plan`). Without these, a map pushed by value where the kernel takes a pointer, a
//! missing argument, or a tile without its alignment slack dies as an anonymous
//! `ILLEGAL_ADDRESS` / `MISALIGNED_ADDRESS`, or worse, reads garbage. Pure: the comparisons
//! are tested without a GPU.
//!
//! Which of the source's tiles and pipelines a kernel without a plan uses is not described
//! (a plan describes it), so these are necessary conditions for a kernel that keeps any one of
//! them in its dynamic shared memory: the largest tile fits with its alignment slack, and the
//! launch fits at least one pipeline. A kernel that keeps none there opts out
//! (`LaunchConfig::unchecked_dynamic_smem` / `unchecked_pipelines`), or gets a plan.

use tma_core::facts::{PipelineFacts, SourceFacts, TileFacts};
use tma_core::plan::LaunchPlan;
use tma_core::smem::SmemLayout;

use crate::error::Error;

/// The dynamic shared memory a kernel that keeps a tile in it must be given: enough for the
/// largest single tile of those it may keep, with that tile's alignment slack
/// ([`SmemLayout::min_dynamic_smem`] of one tile). A necessary condition, not a sum: the
/// kernel may keep other tiles in static shared memory, share one buffer between tiles, or be
/// one of several kernels of the source that each use some of its tiles. (A kernel that keeps only scratch
/// in dynamic shared memory opts out: `LaunchConfig::unchecked_dynamic_smem`.)
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct SmemNeed {
    /// Bytes; `u64::MAX` when the tile's footprint overflows.
    pub(crate) bytes: u64,
    /// The tile that sets the bound: "`a` 16384 B (align 1024)".
    pub(crate) tiles: String,
    /// `bytes` less its footprint: what aligning it costs.
    pub(crate) slack: u64,
}

impl SmemNeed {
    /// The need of the largest of `tiles`; `None` when there are none.
    pub(crate) fn of<'a>(tiles: impl IntoIterator<Item = &'a TileFacts>) -> Option<SmemNeed> {
        tiles
            .into_iter()
            .map(|t| {
                let (footprint, align) = (t.smem_bytes, t.align_bytes);
                let bytes = SmemLayout::min_dynamic_smem(&[(footprint, align)])
                    .get()
                    .unwrap_or(u64::MAX);
                SmemNeed {
                    bytes,
                    tiles: format!("`{}` {footprint} B (align {align})", t.name),
                    slack: bytes.saturating_sub(footprint),
                }
            })
            // The first of the largest, so the named tile does not depend on ties' order.
            .reduce(|best, n| if n.bytes > best.bytes { n } else { best })
    }
}

/// What the launches of one kernel are checked against, from its source's description.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct KernelNeeds {
    /// Its plan: the launch must be exactly that (`super::plan::check_plan_launch`).
    pub(crate) plan: Option<LaunchPlan>,
    /// Without a plan: the largest tile the source holds outside its plans.
    pub(crate) smem: Option<SmemNeed>,
    /// Without a plan: the pipelines the source holds outside its plans (fit one).
    pub(crate) pipelines: Vec<PipelineFacts>,
}

/// What launches of kernel `name` of a source described by `facts` are checked against: a
/// plan kernel, its plan alone; a kernel without a plan, the tiles and pipelines the source
/// holds outside its plans (a plan's own are its kernel's); text without a description
/// (`None`), nothing.
pub(crate) fn kernel_needs(facts: Option<&SourceFacts>, name: &str) -> KernelNeeds {
    let Some(facts) = facts else {
        return KernelNeeds::default();
    };
    if let Some(plan) = facts.plan(name) {
        return KernelNeeds {
            plan: Some(plan.clone()),
            ..KernelNeeds::default()
        };
    }
    KernelNeeds {
        plan: None,
        smem: SmemNeed::of(facts.tiles.iter().filter(|t| t.outside_plans)),
        pipelines: (facts.pipelines.iter())
            .filter(|p| p.outside_plans)
            .cloned()
            .collect(),
    }
}

/// Refuses a launch of `kernel` whose dynamic shared memory `given` is below `need`.
pub(crate) fn check_dynamic_smem(
    kernel: &str,
    need: Option<&SmemNeed>,
    given: u32,
) -> Result<(), Error> {
    match need {
        Some(n) if u64::from(given) < n.bytes => Err(Error::DynamicSmemTooSmall {
            kernel: kernel.to_string(),
            given,
            needed: n.bytes,
            tiles: n.tiles.clone(),
            slack: n.slack,
        }),
        _ => Ok(()),
    }
}

/// Refuses a launch of `kernel` that none of `pipelines` (those it may run) can run under: the
/// necessary condition for a kernel that runs one of them is the shape of at least one
/// (`cluster`, `None`: 1x1x1) and dynamic shared memory (`smem`, `None`: unchecked) at least
/// the smallest `DYNAMIC_SMEM_BYTES` among those of that shape. No pipelines, no check.
pub(crate) fn check_pipelines(
    kernel: &str,
    pipelines: &[PipelineFacts],
    cluster: Option<(u32, u32, u32)>,
    smem: Option<u32>,
) -> Result<(), Error> {
    if pipelines.is_empty() {
        return Ok(());
    }
    let launched = cluster.map_or([1, 1, 1], |(x, y, z)| [x, y, z]);
    let shape = |[x, y, z]: [u32; 3]| format!("{x}x{y}x{z}");
    let names = |ps: &[&PipelineFacts]| {
        let names: Vec<String> = ps.iter().map(|p| format!("`{}`", p.name)).collect();
        match names.len() {
            1 => format!("pipeline {}", names[0]),
            _ => format!("pipelines {}", names.join(", ")),
        }
    };
    let fits: Vec<&PipelineFacts> = pipelines.iter().filter(|p| p.cluster == launched).collect();
    if fits.is_empty() {
        let all: Vec<&PipelineFacts> = pipelines.iter().collect();
        let declared: Vec<String> = all.iter().map(|p| shape(p.cluster)).collect();
        return Err(Error::PipelineLaunch {
            kernel: kernel.to_string(),
            pipeline: names(&all),
            what: "cluster",
            declared: format!(
                "{} declared for cluster {}",
                if all.len() == 1 { "was" } else { "were" },
                declared.join(", ")
            ),
            launched: format!(
                "{}{}",
                shape(launched),
                if cluster.is_none() {
                    " (no cluster)"
                } else {
                    ""
                }
            ),
        });
    }
    let Some(given) = smem else {
        return Ok(());
    };
    // The first of the smallest, so the named pipeline does not depend on ties' order.
    let least = fits.iter().copied().reduce(|best, p| {
        if p.dynamic_smem_bytes < best.dynamic_smem_bytes {
            p
        } else {
            best
        }
    });
    match least {
        Some(p) if u64::from(given) < p.dynamic_smem_bytes => Err(Error::PipelineLaunch {
            kernel: kernel.to_string(),
            pipeline: names(&[p]),
            what: "dynamic shared memory",
            declared: format!("needs DYNAMIC_SMEM_BYTES = {} bytes", p.dynamic_smem_bytes),
            launched: format!("{given} bytes"),
        }),
        _ => Ok(()),
    }
}

/// Refuses arguments of `given` sizes for parameters of `expected` sizes (bytes, in order):
/// another count first, then the first argument of another size.
pub(crate) fn check_args(kernel: &str, expected: &[usize], given: &[usize]) -> Result<(), Error> {
    if expected.len() != given.len() {
        return Err(Error::ArgumentCount {
            kernel: kernel.to_string(),
            index: expected.len().min(given.len()),
            expected: expected.to_vec(),
            given: given.to_vec(),
        });
    }
    match expected.iter().zip(given).position(|(e, g)| e != g) {
        Some(index) => Err(Error::ArgumentSize {
            kernel: kernel.to_string(),
            index,
            expected_bytes: expected[index],
            given_bytes: given[index],
        }),
        None => Ok(()),
    }
}

#[cfg(test)]
#[allow(clippy::panic)]
mod tests {
    use super::*;

    #[test]
    fn arguments_must_match_the_parameters_in_count_and_size() {
        assert!(check_args("k", &[128, 8], &[128, 8]).is_ok());
        assert!(check_args("k", &[], &[]).is_ok());
        // A map pushed by value where the kernel takes a pointer.
        match check_args("copy", &[8, 8], &[128, 8]) {
            Err(e @ Error::ArgumentSize { .. }) => assert_eq!(
                e.to_string(),
                "launch of `copy`: argument 0 is 128 bytes but parameter 0 of the kernel takes 8; a \
                 TensorMap goes by value: declare the parameter `const __grid_constant__ CUtensorMap`, \
                 or push a device array of maps (TensorMapArray::device) for a `const CUtensorMap*`"
            ),
            other => panic!("{other:?}"),
        }
        // A pointer pushed where the kernel takes the map by value.
        match check_args("copy", &[128, 8], &[8, 8]) {
            Err(e @ Error::ArgumentSize { index: 0, .. }) => {
                assert!(
                    e.to_string().contains("push the TensorMap (`.arg(&map)`)"),
                    "{e}"
                )
            }
            other => panic!("{other:?}"),
        }
        match check_args("k", &[8, 4, 4], &[8, 8, 4]) {
            Err(
                e @ Error::ArgumentSize {
                    index: 1,
                    expected_bytes: 4,
                    given_bytes: 8,
                    ..
                },
            ) => {
                assert!(
                    e.to_string()
                        .contains("argument 1 is 8 bytes but parameter 1 of the kernel takes 4"),
                    "{e}"
                )
            }
            other => panic!("{other:?}"),
        }
        // A missing argument.
        match check_args("copy", &[128, 8], &[128]) {
            Err(e @ Error::ArgumentCount { index: 1, .. }) => assert_eq!(
                e.to_string(),
                "launch of `copy`: 1 argument(s) pushed but the kernel takes 2: parameter 1 (8 bytes) has \
                 no argument; push one argument per parameter, in order (parameter bytes [128, 8], pushed [128])"
            ),
            other => panic!("{other:?}"),
        }
        match check_args("copy", &[128, 8], &[8]) {
            Err(e @ Error::ArgumentCount { index: 1, .. }) => {
                assert!(
                    e.to_string()
                        .contains("2: parameter 1 (8 bytes) has no argument"),
                    "{e}"
                )
            }
            other => panic!("{other:?}"),
        }
        match check_args("k", &[8], &[8, 4]) {
            Err(e @ Error::ArgumentCount { index: 1, .. }) => {
                assert!(e.to_string().contains("argument 1 has no parameter"), "{e}")
            }
            other => panic!("{other:?}"),
        }
        match check_args("k", &[128], &[]) {
            Err(e @ Error::ArgumentCount { index: 0, .. }) => assert!(
                e.to_string()
                    .contains("parameter 0 (128 bytes, a CUtensorMap by value?) has no argument"),
                "{e}"
            ),
            other => panic!("{other:?}"),
        }
    }

    fn tile(id: u32, name: &str, smem_bytes: u64, align_bytes: u64) -> TileFacts {
        TileFacts {
            id,
            name: name.into(),
            dim_names: vec![None, None],
            smem_bytes,
            align_bytes,
            target: tma_core::Arch::Sm90a,
            outside_plans: true,
        }
    }

    fn pipe(id: u32, name: &str, cluster: [u32; 3], dynamic_smem_bytes: u64) -> PipelineFacts {
        PipelineFacts {
            id,
            name: name.into(),
            stages: 2,
            cluster,
            dynamic_smem_bytes,
            tiles: vec![0],
            outside_plans: true,
        }
    }

    #[test]
    fn dynamic_smem_must_hold_the_tiles_and_their_slack() {
        let tiles = [tile(0, "a", 16384, 1024)];
        let need = SmemNeed::of(&tiles);
        assert_eq!(
            need,
            Some(SmemNeed {
                bytes: 16384 + 1008,
                tiles: "`a` 16384 B (align 1024)".into(),
                slack: 1008,
            })
        );
        let need = need.as_ref();
        assert!(check_dynamic_smem("k", need, 16384 + 1008).is_ok());
        assert!(check_dynamic_smem("k", need, 16384 + 1024).is_ok());
        // The footprint alone: no room to align the tile.
        match check_dynamic_smem("k", need, 16384) {
            Err(e @ Error::DynamicSmemTooSmall { .. }) => assert_eq!(
                e.to_string(),
                "launch of `k`: 16384 bytes of dynamic shared memory, but the largest tile its source \
                 declares needs at least 17392: `a` 16384 B (align 1024) and 1008 bytes to align it \
                 (dynamic shared memory starts only 16-byte aligned); give at least 17392 (a tile's \
                 SMEM_BYTES + SMEM_ALIGN always suffice for it), or opt out with \
                 LaunchConfig::unchecked_dynamic_smem() if the kernel keeps no such tile there"
            ),
            other => panic!("{other:?}"),
        }
        assert!(check_dynamic_smem("k", need, 0).is_err());
        // No tiles, nothing checked.
        assert_eq!(SmemNeed::of(&[]), None);
        assert!(check_dynamic_smem("k", None, 0).is_ok());
        // Several tiles: the largest one alone sets the bound, not their sum (a kernel may
        // keep some in static shared memory, share a buffer, or use only some of them).
        let tiles = [
            tile(0, "a", 8192, 1024),
            tile(1, "b", 16384, 128),
            tile(2, "c", 256, 128),
        ];
        let need = SmemNeed::of(&tiles);
        assert_eq!(
            need,
            Some(SmemNeed {
                bytes: 16384 + 112,
                tiles: "`b` 16384 B (align 128)".into(),
                slack: 112,
            })
        );
        assert!(check_dynamic_smem("k", need.as_ref(), 16384 + 112).is_ok());
        assert!(check_dynamic_smem("k", need.as_ref(), 16384 + 111).is_err());
        // A tie names the first.
        let tie = SmemNeed::of(&[tile(0, "x", 1024, 128), tile(1, "y", 1024, 128)]);
        assert_eq!(tie.map(|n| n.tiles), Some("`x` 1024 B (align 128)".into()));
    }

    #[test]
    fn a_pipeline_kernel_launches_with_its_cluster_and_dynamic_smem() {
        let one = [pipe(0, "ring", [2, 1, 1], 66640)];
        assert!(check_pipelines("k", &one, Some((2, 1, 1)), Some(66640)).is_ok());
        assert!(check_pipelines("k", &one, Some((2, 1, 1)), Some(70000)).is_ok());
        // Unchecked shared memory still checks the cluster.
        assert!(check_pipelines("k", &one, Some((2, 1, 1)), None).is_ok());
        match check_pipelines("k", &one, Some((4, 1, 1)), Some(66640)) {
            Err(
                e @ Error::PipelineLaunch {
                    what: "cluster", ..
                },
            ) => assert_eq!(
                e.to_string(),
                "launch of `k`: cluster 4x1x1, but pipeline `ring` of its source was declared for \
                 cluster 2x1x1; launch a pipeline's kernel with the cluster shape \
                 (LaunchConfig::cluster) and at least the DYNAMIC_SMEM_BYTES its pipeline was \
                 declared with, or opt out with LaunchConfig::unchecked_pipelines() if the kernel \
                 uses none of the source's pipelines"
            ),
            other => panic!("{other:?}"),
        }
        match check_pipelines("k", &one, None, Some(66640)) {
            Err(Error::PipelineLaunch { launched, .. }) => {
                assert_eq!(launched, "1x1x1 (no cluster)")
            }
            other => panic!("{other:?}"),
        }
        assert!(check_pipelines("k", &one, Some((1, 2, 1)), None).is_err());
        // The largest tile plus slack passes the tiles' check; the pipeline needs its barriers.
        match check_pipelines("k", &one, Some((2, 1, 1)), Some(66639)) {
            Err(
                e @ Error::PipelineLaunch {
                    what: "dynamic shared memory",
                    ..
                },
            ) => {
                assert!(
                    e.to_string().starts_with(
                        "launch of `k`: dynamic shared memory 66639 bytes, but pipeline `ring` of \
                         its source needs DYNAMIC_SMEM_BYTES = 66640 bytes;"
                    ),
                    "{e}"
                )
            }
            other => panic!("{other:?}"),
        }
        // No cluster declared is 1x1x1: a launch with a cluster is refused.
        let flat = [pipe(0, "flat", [1, 1, 1], 4096)];
        assert!(check_pipelines("k", &flat, None, Some(4096)).is_ok());
        assert!(check_pipelines("k", &flat, Some((1, 1, 1)), Some(4096)).is_ok());
        assert!(check_pipelines("k", &flat, Some((2, 1, 1)), Some(4096)).is_err());
        // Several pipelines: the launch fits at least one, and the smallest of those.
        let three = [
            pipe(0, "a", [2, 1, 1], 9000),
            pipe(1, "b", [1, 2, 1], 5000),
            pipe(2, "c", [2, 1, 1], 7000),
        ];
        assert!(check_pipelines("k", &three, Some((2, 1, 1)), Some(7000)).is_ok());
        assert!(check_pipelines("k", &three, Some((1, 2, 1)), Some(5000)).is_ok());
        match check_pipelines("k", &three, Some((2, 1, 1)), Some(6999)) {
            Err(Error::PipelineLaunch { pipeline, .. }) => assert_eq!(pipeline, "pipeline `c`"),
            other => panic!("{other:?}"),
        }
        match check_pipelines("k", &three, Some((1, 1, 2)), None) {
            Err(Error::PipelineLaunch {
                pipeline, declared, ..
            }) => {
                assert_eq!(pipeline, "pipelines `a`, `b`, `c`");
                assert_eq!(declared, "were declared for cluster 2x1x1, 1x2x1, 2x1x1");
            }
            other => panic!("{other:?}"),
        }
        // A tie names the first.
        let tie = [pipe(0, "x", [1, 1, 1], 100), pipe(1, "y", [1, 1, 1], 100)];
        match check_pipelines("k", &tie, None, Some(99)) {
            Err(Error::PipelineLaunch { pipeline, .. }) => assert_eq!(pipeline, "pipeline `x`"),
            other => panic!("{other:?}"),
        }
        // No pipelines, nothing checked.
        assert!(check_pipelines("k", &[], Some((4, 1, 1)), Some(0)).is_ok());
    }

    /// Which of a source's tiles and pipelines a kernel's launches are checked against: a plan
    /// kernel, its plan alone; another kernel, what the source holds outside its plans.
    #[test]
    fn a_kernel_is_checked_against_its_plan_or_what_no_plan_owns() {
        use tma_core::pipeline::{Consumers, PipelineSpec};
        use tma_core::plan::KernelPlan;
        use tma_core::render::KernelSource;
        use tma_core::{validate, DType, Swizzle, TileSpec};
        let valid = |name: &str, rows| {
            validate(
                &TileSpec::new(name, DType::BF16, [4096, 4096], [rows, 64]).swizzle(Swizzle::B128),
            )
            .unwrap_or_else(|e| panic!("{e}"))
        };
        let (free, ring_tile, planned) = (
            valid("free", 64),
            valid("ring_tile", 128),
            valid("planned", 256),
        );
        let ring = PipelineSpec::new("ring", 2, Consumers::Warpgroups(1))
            .tile("t", &ring_tile)
            .validate()
            .unwrap_or_else(|e| panic!("{e}"));
        let planned_ring = PipelineSpec::new("planned_ring", 3, Consumers::Warpgroups(1))
            .tile("t", &ring_tile)
            .validate()
            .unwrap_or_else(|e| panic!("{e}"));
        let plan = KernelPlan::new("planned_kernel")
            .tile("P", &planned)
            .pipeline(&planned_ring)
            .staging("out", &planned, 1)
            .block_threads(128)
            .validate()
            .unwrap_or_else(|e| panic!("{e}"));
        let facts = KernelSource::new()
            .tile_as(&free, "Free")
            .pipeline(&ring)
            .plan(&plan)
            .facts();
        let need = kernel_needs(Some(&facts), "planned_kernel");
        assert_eq!(need.plan.as_ref(), Some(plan.launch()));
        assert_eq!(
            (need.smem, need.pipelines.len()),
            (None, 0),
            "a plan kernel: its plan alone"
        );
        // Another kernel: the free tile and the ring's (the larger, 16 KB + slack), not the
        // plan's 32 KB tile; the ring.
        let other = kernel_needs(Some(&facts), "helper");
        assert_eq!(other.plan, None);
        assert_eq!(
            other.smem.map(|n| n.tiles),
            Some("`ring_tile` 16384 B (align 1024)".into())
        );
        let names: Vec<&str> = other.pipelines.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(names, ["ring"], "not the plan's `planned_ring`");
        // A source whose tiles and pipelines are all its plans': nothing for other kernels.
        let planned_only = KernelSource::new().plan(&plan).facts();
        assert_eq!(
            kernel_needs(Some(&planned_only), "helper"),
            KernelNeeds::default()
        );
        // Text without a description: nothing.
        assert_eq!(kernel_needs(None, "planned_kernel"), KernelNeeds::default());
    }
}
