//! What a launch is checked against on the host, before the driver sees it: the pushed
//! arguments against the kernel's parameters (their sizes, read once from the driver with
//! `cuFuncGetParamInfo` when the kernel is looked up), and the dynamic shared memory against
//! the tiles its source declares ([`tma_core::manifest`]). Without these, a map pushed by
//! value where the kernel takes a pointer, a missing argument, or a tile without its
//! alignment slack dies as an anonymous `ILLEGAL_ADDRESS` / `MISALIGNED_ADDRESS`, or worse,
//! reads garbage. Pure: the comparisons are tested without a GPU.

use tma_core::manifest::DeclaredTile;
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
}
