//! What a pick depends on: the problem ([`TuneKey`], filled by the caller, shape required)
//! and the device it was timed on ([`TuneDevice`], read from the tuner's stream).

use std::fmt;
use std::sync::Arc;

use cudarc::driver::sys::CUdevice_attribute;
use cudarc::driver::CudaContext;
use serde::{Deserialize, Serialize};

use crate::error::Error;

/// The problem a pick is for: the kernel's name, the problem's shape, its data types, and
/// any other parameter that can change which candidate is fastest ([`TuneKey::with`]). The
/// constructor takes the shape, so a key without it cannot be built: one shape is never
/// handed another's pick. The device and every candidate's build (source, options, arch,
/// NVRTC and crate versions) are added by the [`super::Tuner`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TuneKey {
    kernel: String,
    shape: Vec<u64>,
    dtypes: Vec<String>,
    /// `(name, value)` in the order given.
    extra: Vec<(String, String)>,
}

impl TuneKey {
    /// `kernel` (not empty), `shape` (at least one dim, none 0), `dtypes` (at least one, none
    /// empty: inputs and outputs, e.g. `["bf16", "bf16", "f32"]`).
    pub fn new(kernel: &str, shape: &[u64], dtypes: &[&str]) -> Result<TuneKey, Error> {
        let bad = |field, value: String, rule| Err(Error::InvalidTuneKey { field, value, rule });
        if kernel.trim().is_empty() {
            return bad("kernel", kernel.into(), "name the kernel being tuned");
        }
        if shape.is_empty() || shape.contains(&0) {
            return bad(
                "shape",
                format!("{shape:?}"),
                "give the problem's dims (at least one, none 0): the best candidate depends on them",
            );
        }
        if dtypes.is_empty() || dtypes.iter().any(|d| d.trim().is_empty()) {
            return bad(
                "dtypes",
                format!("{dtypes:?}"),
                "name the data types (at least one, none empty): the best candidate depends on them",
            );
        }
        Ok(TuneKey {
            kernel: kernel.into(),
            shape: shape.to_vec(),
            dtypes: dtypes.iter().map(|d| d.to_string()).collect(),
            extra: Vec::new(),
        })
    }

    /// Adds another parameter the pick depends on (a layout, a batch count, a flag).
    pub fn with(mut self, name: &str, value: impl fmt::Display) -> Result<TuneKey, Error> {
        if name.trim().is_empty() || self.extra.iter().any(|(n, _)| n == name) {
            return Err(Error::InvalidTuneKey {
                field: "extra",
                value: name.into(),
                rule: "each extra parameter needs a name of its own",
            });
        }
        self.extra.push((name.into(), value.to_string()));
        Ok(self)
    }

    /// The kernel's name.
    pub fn kernel(&self) -> &str {
        &self.kernel
    }
    /// The problem's dims.
    pub fn shape(&self) -> &[u64] {
        &self.shape
    }
    /// The data types.
    pub fn dtypes(&self) -> &[String] {
        &self.dtypes
    }
    /// The other parameters, `(name, value)`.
    pub fn extra(&self) -> &[(String, String)] {
        &self.extra
    }
}

/// `gemm 4096x4096x4096 bf16,bf16 group=8`.
impl fmt::Display for TuneKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let shape: Vec<String> = self.shape.iter().map(u64::to_string).collect();
        write!(
            f,
            "{} {} {}",
            self.kernel,
            shape.join("x"),
            self.dtypes.join(",")
        )?;
        for (n, v) in &self.extra {
            write!(f, " {n}={v}")?;
        }
        Ok(())
    }
}

/// The device a pick was timed on: another card, arch or driver times differently.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TuneDevice {
    /// `cuDeviceGetName`.
    pub name: String,
    /// (major, minor).
    pub compute_capability: (i32, i32),
    /// `cuDriverGetVersion`, e.g. 13000.
    pub driver_version: i32,
}

impl TuneDevice {
    /// The device of `ctx`.
    pub fn of(ctx: &Arc<CudaContext>) -> Result<TuneDevice, Error> {
        let name = ctx.name().map_err(Error::driver("cuDeviceGetName"))?;
        let attr = |a| {
            ctx.attribute(a)
                .map_err(Error::driver("cuDeviceGetAttribute"))
        };
        let major = attr(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)?;
        let minor = attr(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)?;
        let mut driver_version: std::ffi::c_int = 0;
        // SAFETY: a valid out-pointer; the driver is initialised (the context exists).
        unsafe { cudarc::driver::sys::cuDriverGetVersion(&mut driver_version) }
            .result()
            .map_err(Error::driver("cuDriverGetVersion"))?;
        Ok(TuneDevice {
            name,
            compute_capability: (major, minor),
            driver_version,
        })
    }
}

/// `NVIDIA H100 80GB HBM3 (sm 9.0, driver 13000)`.
impl fmt::Display for TuneDevice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (major, minor) = self.compute_capability;
        write!(
            f,
            "{} (sm {major}.{minor}, driver {})",
            self.name, self.driver_version
        )
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn a_key_needs_kernel_shape_and_dtypes() {
        let k = TuneKey::new("gemm", &[4096, 4096, 1024], &["bf16", "bf16"])
            .and_then(|k| k.with("group", 8))
            .unwrap();
        assert_eq!(k.to_string(), "gemm 4096x4096x1024 bf16,bf16 group=8");
        let field = |r: Result<TuneKey, Error>| match r {
            Err(Error::InvalidTuneKey { field, .. }) => field,
            other => unreachable!("{other:?}"),
        };
        assert_eq!(field(TuneKey::new("gemm", &[], &["bf16"])), "shape");
        assert_eq!(field(TuneKey::new("gemm", &[4096, 0], &["bf16"])), "shape");
        assert_eq!(field(TuneKey::new(" ", &[8], &["bf16"])), "kernel");
        assert_eq!(field(TuneKey::new("gemm", &[8], &[])), "dtypes");
        assert_eq!(field(TuneKey::new("gemm", &[8], &["bf16", ""])), "dtypes");
        assert_eq!(field(k.clone().with("group", 4)), "extra");
        assert_eq!(field(k.with("", 4)), "extra");
        let msg = TuneKey::new("gemm", &[], &["bf16"])
            .unwrap_err()
            .to_string();
        assert!(
            msg.starts_with("tune key field shape = \"[]\": give the problem's dims"),
            "{msg}"
        );
    }
}
