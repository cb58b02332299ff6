//! What a launch is checked against on the host, before the driver sees it: the pushed
//! arguments against the kernel's parameters (their sizes, read once from the driver with
//! `cuFuncGetParamInfo` when the kernel is looked up), and the dynamic shared memory against
//! the tiles its source declares, and the cluster shape and dynamic shared memory against the
//! pipelines it declares ([`tma_core::manifest`]). Without these, a map pushed by
//! value where the kernel takes a pointer, a missing argument, or a tile without its
//! alignment slack dies as an anonymous `ILLEGAL_ADDRESS` / `MISALIGNED_ADDRESS`, or worse,
//! reads garbage. Pure: the comparisons are tested without a GPU.

use tma_core::manifest::{DeclaredPipeline, DeclaredTile};
use tma_core::smem::min_dynamic_smem;

use crate::error::Error;

/// The dynamic shared memory a kernel that keeps a tile in it must be given: enough for the
/// largest single tile its source declares, with that tile's alignment slack
/// ([`min_dynamic_smem`] of one tile). A necessary condition, not a sum: the kernel may keep
/// other tiles in static shared memory, share one buffer between tiles, or be one of several
/// kernels of the source that each use some of its tiles. (A kernel that keeps only scratch
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
    /// The need of the largest of the tiles that state their footprint and alignment; `None`
    /// when none do (a hand-written tile line checks nothing).
    pub(crate) fn of(tiles: &[DeclaredTile]) -> Option<SmemNeed> {
        tiles
            .iter()
            .filter_map(|t| {
                let (footprint, align) = (t.smem_bytes?, t.align_bytes?);
                let bytes = min_dynamic_smem(&[(footprint, align)])
                    .get()
                    .unwrap_or(u64::MAX);
                Some(SmemNeed {
                    bytes,
                    tiles: format!("`{}` {footprint} B (align {align})", t.name),
                    slack: bytes.saturating_sub(footprint),
                })
            })
            // The first of the largest, so the named tile does not depend on ties' order.
            .reduce(|best, n| if n.bytes > best.bytes { n } else { best })
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

/// The pipelines a kernel's launches are checked against, and how.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct PipelineNeed {
    pub(crate) pipelines: Vec<DeclaredPipeline>,
    /// The kernel initialises each of `pipelines` (its PTX declares `%tma_pipeline_use_<id>`),
    /// rather than may use one of them.
    pub(crate) exact: bool,
}

/// Refuses a launch of `kernel` that its pipelines cannot run under.
///
/// When the kernel's PTX names the pipelines it initialises (`need.exact`; every generated
/// `init()` does), the launch's cluster shape (`None`: 1x1x1) is each one's declared shape and
/// its dynamic shared memory (`smem`, `None`: unchecked) at least the largest of their
/// `DYNAMIC_SMEM_BYTES`. Otherwise (a kernel that uses dynamic shared memory in a source whose
/// pipelines it does not name: older PTX, a hand-written `init`), the necessary condition for
/// a kernel that uses one of them: the shape of at least one, and at least the smallest
/// `DYNAMIC_SMEM_BYTES` among those of that shape. Lines that state neither check nothing.
pub(crate) fn check_pipelines(
    kernel: &str,
    need: &PipelineNeed,
    cluster: Option<(u32, u32, u32)>,
    smem: Option<u32>,
) -> Result<(), Error> {
    let pipelines = &need.pipelines[..];
    let launched = cluster.map_or([1, 1, 1], |(x, y, z)| [x, y, z]);
    let shape = |[x, y, z]: [u32; 3]| format!("{x}x{y}x{z}");
    let names = |ps: &[&DeclaredPipeline]| {
        let names: Vec<String> = ps.iter().map(|p| format!("`{}`", p.name)).collect();
        match names.len() {
            1 => format!("pipeline {}", names[0]),
            _ => format!("pipelines {}", names.join(", ")),
        }
    };
    let shaped: Vec<&DeclaredPipeline> = pipelines.iter().filter(|p| p.cluster.is_some()).collect();
    let (fits, misfits): (Vec<&DeclaredPipeline>, Vec<&DeclaredPipeline>) = shaped
        .iter()
        .copied()
        .partition(|p| p.cluster == Some(launched));
    if need.exact && !misfits.is_empty() {
        let p = misfits[0];
        return Err(Error::PipelineLaunch {
            kernel: kernel.to_string(),
            pipeline: names(&[p]),
            what: "cluster",
            declared: format!(
                "was declared for cluster {}",
                p.cluster.map_or_else(String::new, shape)
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
    if !shaped.is_empty() && fits.is_empty() {
        let declared: Vec<String> = shaped.iter().filter_map(|p| p.cluster.map(shape)).collect();
        return Err(Error::PipelineLaunch {
            kernel: kernel.to_string(),
            pipeline: names(&shaped),
            what: "cluster",
            declared: format!(
                "{} declared for cluster {}",
                if shaped.len() == 1 { "was" } else { "were" },
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
    // The pipelines this launch may run: those of its shape, or all when none states one.
    let candidates: Vec<&DeclaredPipeline> = if shaped.is_empty() {
        pipelines.iter().collect()
    } else {
        fits
    };
    let sized = candidates
        .iter()
        .filter_map(|p| Some((p.dynamic_smem_bytes?, *p)));
    // Exact: each pipeline it initialises must fit; else one of those it may use.
    let least = if need.exact {
        sized.reduce(|best, n| if n.0 > best.0 { n } else { best })
    } else {
        sized.min_by_key(|(b, _)| *b)
    };
    match least {
        Some((need, p)) if u64::from(given) < need => Err(Error::PipelineLaunch {
            kernel: kernel.to_string(),
            pipeline: names(&[p]),
            what: "dynamic shared memory",
            declared: format!("needs DYNAMIC_SMEM_BYTES = {need} bytes"),
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
    use tma_core::manifest::declared_tiles;

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

    #[test]
    fn dynamic_smem_must_hold_the_tiles_and_their_slack() {
        let tiles = declared_tiles(
            "// tma-tile 0 a smem=16384 align=1024 target=sm_90a\n// tma-tile 1 hand_written\n",
        );
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
        // Nothing stated, nothing checked.
        assert_eq!(SmemNeed::of(&declared_tiles("// tma-tile 0 a\n")), None);
        assert!(check_dynamic_smem("k", None, 0).is_ok());
        // Several tiles: the largest one alone sets the bound, not their sum (a kernel may
        // keep some in static shared memory, share a buffer, or use only some of them).
        let tiles = declared_tiles(
            "// tma-tile 0 a smem=8192 align=1024\n// tma-tile 1 b smem=16384 align=128\n\
             // tma-tile 2 c smem=256 align=128\n",
        );
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
        let tie = SmemNeed::of(&declared_tiles(
            "// tma-tile 0 x smem=1024 align=128\n// tma-tile 1 y smem=1024 align=128\n",
        ));
        assert_eq!(tie.map(|n| n.tiles), Some("`x` 1024 B (align 128)".into()));
    }

    #[test]
    fn a_pipeline_kernel_launches_with_its_cluster_and_dynamic_smem() {
        use tma_core::manifest::declared_pipelines;
        let any = |src: &str| PipelineNeed {
            pipelines: declared_pipelines(src),
            exact: false,
        };
        let one = any("// tma-pipeline 0 ring stages=4 cluster=2x1x1 smem=66640\n");
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
        let flat = any("// tma-pipeline 0 flat stages=2 cluster=1x1x1 smem=4096\n");
        assert!(check_pipelines("k", &flat, None, Some(4096)).is_ok());
        assert!(check_pipelines("k", &flat, Some((1, 1, 1)), Some(4096)).is_ok());
        assert!(check_pipelines("k", &flat, Some((2, 1, 1)), Some(4096)).is_err());
        // Several pipelines: the launch fits at least one, and the smallest of those.
        let three = "// tma-pipeline 0 a stages=2 cluster=2x1x1 smem=9000\n\
             // tma-pipeline 1 b stages=2 cluster=1x2x1 smem=5000\n\
             // tma-pipeline 2 c stages=2 cluster=2x1x1 smem=7000\n";
        // Which of them the kernel uses is not known (its PTX names none): it may use any.
        let two = any(three);
        assert!(check_pipelines("k", &two, Some((2, 1, 1)), Some(7000)).is_ok());
        assert!(check_pipelines("k", &two, Some((1, 2, 1)), Some(5000)).is_ok());
        match check_pipelines("k", &two, Some((2, 1, 1)), Some(6999)) {
            Err(Error::PipelineLaunch { pipeline, .. }) => assert_eq!(pipeline, "pipeline `c`"),
            other => panic!("{other:?}"),
        }
        match check_pipelines("k", &two, Some((1, 1, 2)), None) {
            Err(Error::PipelineLaunch {
                pipeline, declared, ..
            }) => {
                assert_eq!(pipeline, "pipelines `a`, `b`, `c`");
                assert_eq!(declared, "were declared for cluster 2x1x1, 1x2x1, 2x1x1");
            }
            other => panic!("{other:?}"),
        }
        // Old or hand-written lines check nothing they do not state.
        let old = any("// tma-pipeline 0 ring stages=4\n");
        assert!(check_pipelines("k", &old, Some((4, 1, 1)), Some(0)).is_ok());
        let smem_only = any("// tma-pipeline 0 ring smem=100\n");
        assert!(check_pipelines("k", &smem_only, None, Some(99)).is_err());
        assert!(check_pipelines("k", &PipelineNeed::default(), None, Some(0)).is_ok());
        // Its PTX names the pipelines it initialises: each must fit.
        let used = |ids: &[u32]| PipelineNeed {
            pipelines: declared_pipelines(three)
                .into_iter()
                .filter(|p| ids.contains(&p.id))
                .collect(),
            exact: true,
        };
        assert!(check_pipelines("k", &used(&[2]), Some((2, 1, 1)), Some(7000)).is_ok());
        assert!(check_pipelines("k", &used(&[0, 2]), Some((2, 1, 1)), Some(9000)).is_ok());
        match check_pipelines("k", &used(&[0, 2]), Some((2, 1, 1)), Some(8999)) {
            Err(Error::PipelineLaunch {
                pipeline,
                what: "dynamic shared memory",
                ..
            }) => {
                assert_eq!(pipeline, "pipeline `a`")
            }
            other => panic!("{other:?}"),
        }
        // `b` of the source has 1x2x1, but the kernel initialises `a`.
        match check_pipelines("k", &used(&[0]), Some((1, 2, 1)), Some(9000)) {
            Err(Error::PipelineLaunch {
                pipeline, declared, ..
            }) => {
                assert_eq!(pipeline, "pipeline `a`");
                assert_eq!(declared, "was declared for cluster 2x1x1");
            }
            other => panic!("{other:?}"),
        }
        assert!(check_pipelines("k", &used(&[0, 1]), Some((2, 1, 1)), None).is_err());
    }
}
