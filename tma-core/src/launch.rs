//! The shape of a kernel launch against the hardware's limits ([`check_launch_shape`]): each
//! grid and block extent, the block's threads, the cluster's CTAs, the grid a multiple of the
//! cluster. Pure, so the rules are tested without a GPU; the runtime's
//! `LaunchConfig::check` calls it before the driver sees a launch.
//!
//! ```
//! use tma_core::launch::check_launch_shape;
//! use tma_core::{Field, Rule};
//! assert!(check_launch_shape((132, 1, 1), (384, 1, 1), None).is_ok());
//! // z of a block holds at most 64 threads.
//! let err = check_launch_shape((1, 1, 1), (1, 1, 65), None).unwrap_err();
//! assert_eq!((err.errors[0].field.clone(), err.errors[0].rule), (Field::Block { axis: 2 }, Rule::BlockDims));
//! ```

use std::fmt;

use crate::error::{write_breaks, Field, Severity, SpecError};
use crate::limits::{MAX_BLOCK_DIM, MAX_BLOCK_THREADS, MAX_CLUSTER_CTAS, MAX_GRID_DIM};
use crate::rules::Rule;
use crate::size::Size;

/// Extents along x, y and z.
pub type Dims = (u32, u32, u32);

/// Every finding of a launch shape, reported at once.
#[derive(Clone, Debug, PartialEq, Eq, Hash, thiserror::Error)]
pub struct LaunchShapeErrors {
    pub grid: Dims,
    pub block: Dims,
    pub cluster: Option<Dims>,
    pub errors: Vec<SpecError>,
}

impl fmt::Display for LaunchShapeErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let cluster = self
            .cluster
            .map_or_else(String::new, |c| format!(", cluster {c:?}"));
        write_breaks(
            f,
            format_args!("grid {:?}, block {:?}{cluster}", self.grid, self.block),
            "launch rule",
            &self.errors,
        )
    }
}

const AXES: [&str; 3] = ["x", "y", "z"];

fn axes(d: Dims) -> [u32; 3] {
    [d.0, d.1, d.2]
}

fn volume(d: Dims) -> Size {
    axes(d).into_iter().map(u64::from).product()
}

fn finding(field: Field, value: impl ToString, rule: Rule, message: String) -> SpecError {
    SpecError {
        field,
        value: value.to_string(),
        rule,
        message,
        severity: Severity::Error,
    }
}

/// Checks a launch of `grid` blocks of `block` threads, in clusters of `cluster` (`None`: no
/// cluster) against the limits of [`crate::limits`] ([`Rule::GridDims`], [`Rule::BlockDims`],
/// [`Rule::ClusterShape`]); every finding at once, each naming the axis and its value. Every
/// product is a [`Size`]: no shape wraps to one that passes.
pub fn check_launch_shape(
    grid: Dims,
    block: Dims,
    cluster: Option<Dims>,
) -> Result<(), LaunchShapeErrors> {
    let mut errors = Vec::new();
    for (axis, (&n, &max)) in axes(grid).iter().zip(&MAX_GRID_DIM).enumerate() {
        if n == 0 || n > max {
            errors.push(finding(
                Field::Grid { axis },
                n,
                Rule::GridDims,
                format!(
                    "a grid has 1 to {max} blocks along {} (sm_90: {:?} along x, y, z)",
                    AXES[axis], MAX_GRID_DIM
                ),
            ));
        }
    }
    let mut block_axes_ok = true;
    for (axis, (&n, &max)) in axes(block).iter().zip(&MAX_BLOCK_DIM).enumerate() {
        if n == 0 || n > max {
            block_axes_ok = false;
            errors.push(finding(
                Field::Block { axis },
                n,
                Rule::BlockDims,
                format!(
                    "a block has 1 to {max} threads along {} (sm_90: {:?} along x, y, z)",
                    AXES[axis], MAX_BLOCK_DIM
                ),
            ));
        }
    }
    let threads = volume(block);
    if block_axes_ok && !threads.is_below(u64::from(MAX_BLOCK_THREADS) + 1) {
        errors.push(finding(
            Field::BlockThreads,
            threads,
            Rule::BlockDims,
            format!(
                "block {block:?} has {threads} threads; a block has at most {MAX_BLOCK_THREADS}"
            ),
        ));
    }
    if let Some(c) = cluster {
        let mut cluster_axes_ok = true;
        for (axis, &n) in axes(c).iter().enumerate() {
            if n == 0 {
                cluster_axes_ok = false;
                errors.push(finding(
                    Field::Cluster { axis },
                    n,
                    Rule::ClusterShape,
                    "each cluster extent is at least 1".into(),
                ));
            }
        }
        let ctas = volume(c);
        if !ctas.is_below(u64::from(MAX_CLUSTER_CTAS) + 1) {
            let axis = (0..3).max_by_key(|&a| axes(c)[a]).unwrap_or(0);
            errors.push(finding(
                Field::Cluster { axis },
                axes(c)[axis],
                Rule::ClusterShape,
                format!(
                    "a cluster of {c:?} has {ctas} CTAs; at most {MAX_CLUSTER_CTAS} (8 portably)"
                ),
            ));
        }
        if cluster_axes_ok {
            for (axis, (&g, &n)) in axes(grid).iter().zip(&axes(c)).enumerate() {
                if g % n != 0 {
                    errors.push(finding(
                        Field::Grid { axis },
                        g,
                        Rule::GridDims,
                        format!(
                            "the grid is a multiple of the cluster {c:?}: {g} blocks along {} do not make whole clusters of {n}",
                            AXES[axis]
                        ),
                    ));
                }
            }
        }
    }
    if errors.is_empty() {
        Ok(())
    } else {
        Err(LaunchShapeErrors {
            grid,
            block,
            cluster,
            errors,
        })
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn rules(g: Dims, b: Dims, c: Option<Dims>) -> Vec<(Field, Rule)> {
        check_launch_shape(g, b, c).map_or_else(
            |e| e.errors.iter().map(|f| (f.field.clone(), f.rule)).collect(),
            |()| Vec::new(),
        )
    }

    #[test]
    fn each_axis_against_its_limit() {
        let ok = (1, 1, 1);
        assert!(rules(((1 << 31) - 1, 65535, 65535), (1024, 1, 1), None).is_empty());
        assert!(rules(ok, (1, 1024, 1), None).is_empty());
        assert!(rules(ok, (16, 1, 64), None).is_empty());
        assert_eq!(
            rules((1 << 31, 65536, 0), ok, None),
            vec![
                (Field::Grid { axis: 0 }, Rule::GridDims),
                (Field::Grid { axis: 1 }, Rule::GridDims),
                (Field::Grid { axis: 2 }, Rule::GridDims),
            ]
        );
        assert_eq!(
            rules(ok, (1, 1, 65), None),
            vec![(Field::Block { axis: 2 }, Rule::BlockDims)]
        );
        assert_eq!(
            rules(ok, (32, 32, 2), None),
            vec![(Field::BlockThreads, Rule::BlockDims)]
        );
        // 2^22 x 2^21 x 2^21 = 2^64 threads wrapped to 0 in `u64` and passed.
        assert_eq!(
            rules(ok, (1 << 22, 1 << 21, 1 << 21), None),
            vec![
                (Field::Block { axis: 0 }, Rule::BlockDims),
                (Field::Block { axis: 1 }, Rule::BlockDims),
                (Field::Block { axis: 2 }, Rule::BlockDims),
            ]
        );
        // A cluster of 2^64 CTAs (its grid a multiple of it) wrapped to 0 the same way.
        let huge = (1 << 22, 1 << 21, 1 << 21);
        assert_eq!(
            rules(huge, ok, Some(huge)),
            vec![
                (Field::Grid { axis: 1 }, Rule::GridDims),
                (Field::Grid { axis: 2 }, Rule::GridDims),
                (Field::Cluster { axis: 0 }, Rule::ClusterShape),
            ]
        );
        let e = check_launch_shape(ok, (1, 1, 65), None).unwrap_err();
        assert_eq!(
            e.to_string(),
            "grid (1, 1, 1), block (1, 1, 65) breaks 1 launch rule:\n  - block[2] = 65: a block has \
             1 to 64 threads along z (sm_90: [1024, 1024, 64] along x, y, z)"
        );
    }
}
