//! Kernel plans on the driver side: a launch built from a plan ([`LaunchConfig::from_plan`],
//! [`Kernel::plan_config`]), the host check that refuses a launch disagreeing with the plan
//! ([`check_plan_launch`], [`Error::PlanLaunch`]), and the driver's occupancy for a launch
//! ([`Kernel::max_active_clusters`], [`Kernel::max_active_blocks_per_sm`]).
//!
//! A plan kernel's launch facts come from its typed [`LaunchPlan`] (carried with the
//! compiled module in the source's description, [`crate::Compiled::plans`]), never from the
//! source's text or its PTX.

use std::sync::Arc;

use cudarc::driver::sys;
use cudarc::driver::CudaStream;
use tma_core::plan::LaunchPlan;

use crate::error::{CuResult, Error};

use super::launch::LaunchConfig;
use super::module::Kernel;

type Dims = (u32, u32, u32);

fn dims(d: Dims) -> String {
    format!("{}x{}x{}", d.0, d.1, d.2)
}

/// Refuses a launch of `kernel` whose block, cluster (`None`: 1x1x1) or dynamic shared
/// memory is not its plan's, naming both values. Pure: tested without a GPU.
pub fn check_plan_launch(
    kernel: &str,
    plan: &LaunchPlan,
    block: Dims,
    cluster: Option<Dims>,
    dynamic_smem_bytes: u32,
) -> Result<(), Error> {
    let refuse = |field, plan: String, launch: String| Error::PlanLaunch {
        kernel: kernel.to_string(),
        field,
        plan,
        launch,
    };
    let [bx, by, bz] = plan.block;
    if block != (bx, by, bz) {
        return Err(refuse("block", dims((bx, by, bz)), dims(block)));
    }
    let [cx, cy, cz] = plan.cluster;
    let launched = cluster.unwrap_or((1, 1, 1));
    if launched != (cx, cy, cz) {
        let none = |c: Dims| {
            if c == (1, 1, 1) {
                " (no cluster)"
            } else {
                ""
            }
        };
        return Err(refuse(
            "cluster",
            format!("{}{}", dims((cx, cy, cz)), none((cx, cy, cz))),
            format!("{}{}", dims(launched), none(launched)),
        ));
    }
    if dynamic_smem_bytes != plan.dynamic_smem_bytes {
        return Err(refuse(
            "dynamic shared memory",
            format!("{} bytes", plan.dynamic_smem_bytes),
            format!("{dynamic_smem_bytes} bytes"),
        ));
    }
    Ok(())
}

impl LaunchConfig {
    /// The launch `plan` describes over `grid` blocks on `stream`: its block, cluster (none
    /// for 1x1x1) and dynamic shared memory; only the grid is yours.
    pub fn from_plan(stream: &Arc<CudaStream>, grid: Dims, plan: &LaunchPlan) -> LaunchConfig {
        let [bx, by, bz] = plan.block;
        let mut cfg =
            LaunchConfig::new(stream, grid, (bx, by, bz)).dynamic_smem(plan.dynamic_smem_bytes);
        if plan.has_cluster() {
            let [cx, cy, cz] = plan.cluster;
            cfg = cfg.cluster((cx, cy, cz));
        }
        cfg
    }
}

impl Kernel {
    /// The launch of this plan kernel over `grid` blocks ([`LaunchConfig::from_plan`]);
    /// [`Error::PlanLaunch`] (field `plan`) when its source gave it no plan.
    pub fn plan_config(&self, stream: &Arc<CudaStream>, grid: Dims) -> Result<LaunchConfig, Error> {
        match self.plan() {
            Some(plan) => Ok(LaunchConfig::from_plan(stream, grid, plan)),
            None => Err(Error::PlanLaunch {
                kernel: self.name().to_string(),
                field: "plan",
                plan: "none (the source was not given one: Source::kernel / Source::described)"
                    .into(),
                launch: "built from a plan".into(),
            }),
        }
    }

    /// The most clusters of `cfg`'s shape that can be co-resident on the device
    /// (`cuOccupancyMaxActiveClusters`), for a persistent kernel's grid. The kernel is opted
    /// in to `cfg`'s dynamic shared memory first, as a launch would.
    pub fn max_active_clusters(&self, cfg: &LaunchConfig) -> Result<u32, Error> {
        self.prepare(cfg.dynamic_smem_bytes, cfg.cluster)?;
        let (cx, cy, cz) = cfg.cluster.unwrap_or((1, 1, 1));
        // SAFETY: an all-zero attribute is a valid starting value (plain C struct/union).
        let mut attr: sys::CUlaunchAttribute = unsafe { std::mem::zeroed() };
        attr.id = sys::CUlaunchAttributeID::CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
        attr.value.clusterDim.x = cx;
        attr.value.clusterDim.y = cy;
        attr.value.clusterDim.z = cz;
        let config = sys::CUlaunchConfig {
            gridDimX: cfg.grid.0,
            gridDimY: cfg.grid.1,
            gridDimZ: cfg.grid.2,
            blockDimX: cfg.block.0,
            blockDimY: cfg.block.1,
            blockDimZ: cfg.block.2,
            sharedMemBytes: cfg.dynamic_smem_bytes,
            hStream: cfg.stream.cu_stream(),
            attrs: &mut attr,
            numAttrs: 1,
        };
        let mut n: i32 = 0;
        // SAFETY: a live function of a loaded module (its context bound by prepare), a valid
        // out-pointer, `config` and `attr` alive for the call.
        let r = unsafe {
            sys::cuOccupancyMaxActiveClusters(&mut n, self.function().cu_function(), &config)
        };
        r.result().map_err(|e| Error::Driver {
            call: "cuOccupancyMaxActiveClusters",
            result: CuResult::from(e),
        })?;
        Ok(u32::try_from(n).unwrap_or(0))
    }

    /// The most blocks of `cfg`'s block and dynamic shared memory one SM holds at once
    /// (`cuOccupancyMaxActiveBlocksPerMultiprocessor`).
    pub fn max_active_blocks_per_sm(&self, cfg: &LaunchConfig) -> Result<u32, Error> {
        self.prepare(cfg.dynamic_smem_bytes, cfg.cluster)?;
        let threads = u64::from(cfg.block.0) * u64::from(cfg.block.1) * u64::from(cfg.block.2);
        let threads = i32::try_from(threads).unwrap_or(i32::MAX);
        let mut n: i32 = 0;
        // SAFETY: a live function of a loaded module (context bound by prepare), a valid
        // out-pointer.
        let r = unsafe {
            sys::cuOccupancyMaxActiveBlocksPerMultiprocessor(
                &mut n,
                self.function().cu_function(),
                threads,
                cfg.dynamic_smem_bytes as usize,
            )
        };
        r.result().map_err(|e| Error::Driver {
            call: "cuOccupancyMaxActiveBlocksPerMultiprocessor",
            result: CuResult::from(e),
        })?;
        Ok(u32::try_from(n).unwrap_or(0))
    }
}

#[cfg(test)]
#[allow(clippy::panic)]
mod tests {
    use super::*;
    use tma_core::Arch;

    fn plan() -> LaunchPlan {
        LaunchPlan {
            kernel: "copy".into(),
            target: Arch::Sm90a,
            block: [160, 1, 1],
            cluster: [2, 1, 1],
            dynamic_smem_bytes: 25600,
            smem_opt_in: false,
        }
    }

    #[test]
    fn a_launch_off_its_plan_is_refused_naming_both_values() {
        let p = plan();
        assert!(check_plan_launch("copy", &p, (160, 1, 1), Some((2, 1, 1)), 25600).is_ok());
        let cases: [(Dims, Option<Dims>, u32, &str); 5] = [
            (
                (128, 1, 1),
                Some((2, 1, 1)),
                25600,
                "block is 128x1x1 but the kernel's plan says 160x1x1",
            ),
            (
                (160, 1, 1),
                None,
                25600,
                "cluster is 1x1x1 (no cluster) but the kernel's plan says 2x1x1",
            ),
            (
                (160, 1, 1),
                Some((1, 2, 1)),
                25600,
                "cluster is 1x2x1 but the kernel's plan says 2x1x1",
            ),
            (
                (160, 1, 1),
                Some((2, 1, 1)),
                25599,
                "dynamic shared memory is 25599 bytes but the kernel's plan says 25600 bytes",
            ),
            // More is a disagreement too: the plan owns every byte.
            (
                (160, 1, 1),
                Some((2, 1, 1)),
                26624,
                "dynamic shared memory is 26624 bytes",
            ),
        ];
        for (block, cluster, smem, want) in cases {
            match check_plan_launch("copy", &p, block, cluster, smem) {
                Err(e @ Error::PlanLaunch { .. }) => {
                    let text = e.to_string();
                    assert!(
                        text.starts_with("launch of `copy`: ") && text.contains(want),
                        "{text}"
                    );
                }
                other => panic!("{block:?} {cluster:?} {smem}: {other:?}"),
            }
        }
        // A plan without a cluster takes a launch without one, or with 1x1x1.
        let p = LaunchPlan {
            cluster: [1, 1, 1],
            ..plan()
        };
        assert!(check_plan_launch("copy", &p, (160, 1, 1), None, 25600).is_ok());
        assert!(check_plan_launch("copy", &p, (160, 1, 1), Some((1, 1, 1)), 25600).is_ok());
    }
}
