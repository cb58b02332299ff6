//! The artifact of one compile: PTX, CUBIN and what the driver layer needs to load and
//! explain it (the source's typed description, never anything read out of its text; from the
//! PTX only what spares the driver a query that fails by design). Plain data: it can be
//! cached, written to disk and loaded into any context.

use std::sync::Arc;

use tma_core::facts::{PipelineFacts, SourceFacts, TileFacts};
use tma_core::plan::LaunchPlan;
use tma_core::Arch;

use super::resources::KernelResources;
use crate::error::Error;

/// The output of one compile.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Compiled {
    /// The PTX (always present from NVRTC and the disk cache). A `Compiled` built by hand gives
    /// its CUBIN's own PTX or none: the driver layer reads each kernel's parameter count and
    /// whether the hang record exists from it ([`Compiled::entry_param_count`],
    /// [`Compiled::ptx_names`]), and without it asks the driver as before.
    pub ptx: String,
    /// The CUBIN for [`Compiled::arch`]; empty when this NVRTC cannot target it (PTX only:
    /// the driver JIT-compiles the PTX at load).
    pub cubin: Vec<u8>,
    /// NVRTC's log (warnings; empty when clean), without ptxas's verbose report (that is
    /// [`Compiled::kernel_resources`]).
    pub log: String,
    /// The arch compiled for; a CUBIN loads only on a device of this arch.
    pub arch: Arch,
    /// Compiled with `-DTMA_DEBUG` (the module has `tma_debug_record`).
    pub debug_waits: bool,
    /// What the source declares, when it was given with its description
    /// ([`super::Source::kernel`]): names for hang and check records, what launches are
    /// checked against. `None` for text alone (records then name ids; launches are checked
    /// against the kernel's parameters and the hardware only).
    pub facts: Option<Arc<SourceFacts>>,
    /// The NVRTC arguments used.
    pub args: Vec<String>,
    /// What ptxas allocated for each kernel of the CUBIN (its verbose report in NVRTC's
    /// log); empty when PTX only. See [`Compiled::resources`].
    pub kernel_resources: Vec<KernelResources>,
    /// The cache key (hex), also the disk-cache file stem.
    pub key: String,
}

impl Compiled {
    /// True when a CUBIN was produced (else PTX only).
    pub fn has_cubin(&self) -> bool {
        !self.cubin.is_empty()
    }
    /// Registers, spills, local and static shared memory of kernel `name` (its name in the
    /// module: mangled unless `extern "C"`), as ptxas allocated them for the CUBIN.
    /// [`Error::NoResources`] when the module is PTX only (ptxas then runs in the driver, at
    /// load) or has no such kernel.
    ///
    /// ```no_run
    /// # fn main() -> Result<(), tma_runtime::Error> {
    /// use tma_runtime::{CompileOptions, Compiler};
    /// let src = "extern \"C\" __global__ void k(float* p) { __shared__ float s[64]; s[threadIdx.x] = 1; __syncthreads(); *p = s[3]; }";
    /// let c = Compiler::global()?.compile(src, &CompileOptions::default())?;
    /// let r = c.resources("k")?;
    /// assert_eq!((r.static_smem_bytes, r.spills()), (256, false));
    /// println!("{r}"); // k: 10 registers, 0 B spill stores, ...
    /// # Ok(()) }
    /// ```
    pub fn resources(&self, name: &str) -> Result<&KernelResources, Error> {
        self.kernel_resources
            .iter()
            .find(|k| k.kernel == name)
            .ok_or_else(|| Error::NoResources {
                kernel: name.to_string(),
                ptx_only: !self.has_cubin(),
                available: self
                    .kernel_resources
                    .iter()
                    .map(|k| k.kernel.clone())
                    .collect(),
            })
    }
    /// ptxas's performance advisories in [`Compiled::log`] (`Potential Performance Loss`, such
    /// as C7515 and C7520: every wgmma of the kernel serialized), one line each. A kernel built
    /// around overlapped wgmmas runs at about half speed with one: refuse or report it.
    pub fn performance_losses(&self) -> impl Iterator<Item = &str> {
        self.log
            .lines()
            .filter(|l| l.contains("Performance Loss"))
            .map(str::trim)
    }
    /// How many parameters kernel `name` (its name in the module) has, as its PTX's `.entry`
    /// declares them; `None` when the PTX has no such entry. The driver still reports each
    /// parameter's size: this count only spares asking it past the last one, an API error
    /// that compute-sanitizer reports in every run.
    pub fn entry_param_count(&self, name: &str) -> Option<usize> {
        let head = format!(".entry {name}(");
        let start = self.ptx.find(&head)? + head.len();
        let params = &self.ptx[start..];
        Some(params[..params.find(')')?].matches(".param").count())
    }
    /// Whether the PTX names `symbol` anywhere as a whole identifier (a declaration or a use):
    /// a module is asked for a global only when this is true (a failed lookup is an API error
    /// under compute-sanitizer). It errs towards true: a false one would lose the global.
    pub fn ptx_names(&self, symbol: &str) -> bool {
        let ident = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == '$';
        self.ptx.match_indices(symbol).any(|(at, _)| {
            let before = self.ptx[..at].chars().next_back();
            let after = self.ptx[at + symbol.len()..].chars().next();
            !before.is_some_and(ident) && !after.is_some_and(ident)
        })
    }
    /// Tile `id` of the source's description.
    pub fn tile(&self, id: u32) -> Option<&TileFacts> {
        self.facts.as_deref()?.tile(id)
    }
    /// The name of tile `id`, if the source's description has it.
    pub fn tile_name(&self, id: u32) -> Option<&str> {
        self.tile(id).map(|t| t.name.as_str())
    }
    /// Pipeline `id` of the source's description.
    pub fn pipeline(&self, id: u32) -> Option<&PipelineFacts> {
        self.facts.as_deref()?.pipeline(id)
    }
    /// The name of pipeline `id`, if the source's description has it.
    pub fn pipeline_name(&self, id: u32) -> Option<&str> {
        self.pipeline(id).map(|p| p.name.as_str())
    }
    /// Work queue `id` of the source's kernel plans, if its description has one.
    pub fn queue(&self, id: u32) -> Option<&tma_core::facts::QueueFacts> {
        self.facts.as_deref()?.queue(id)
    }
    /// The plan of kernel `name`, if the source's description has one.
    pub fn plan(&self, name: &str) -> Option<&LaunchPlan> {
        self.facts.as_deref()?.plan(name)
    }
    /// The launches of the source's kernel plans (none without a description).
    pub fn plans(&self) -> &[LaunchPlan] {
        self.facts.as_deref().map_or(&[], |f| &f.plans)
    }
}
