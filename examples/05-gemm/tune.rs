//! The GEMM on tma's tuning API (`tma::runtime::tune`): a kernel plan is a candidate, and
//! `GemmBench` sets one up on a problem, checks it against cuBLAS and the exact f64 samples
//! (a wrong configuration never wins) and launches it.

use std::sync::Arc;

use cudarc::driver::CudaStream;
use tma::runtime::tune::{Bench, BoxError, Candidate, TuneKey};
use tma::runtime::{CompileOptions, Module, Source};

use crate::eval::{check, Reference};
use crate::gpu::{Gpu, Launch, Loaded, OutBuf, Problem};
use crate::kernel::{options, Out, Plan, Res};

impl Candidate for Plan {
    fn name(&self) -> String {
        self.config.to_string()
    }
    fn source(&self) -> Result<Source, BoxError> {
        Plan::source(self)
    }
    fn options(&self) -> CompileOptions {
        options()
    }
}

/// What the best configuration depends on: the shape, the types, the raster group.
pub fn key(p: &Problem, out: Out, group: i32) -> Res<TuneKey> {
    let shape = [p.m as u64, p.n as u64, p.k as u64];
    Ok(TuneKey::new("tma-gemm", &shape, &[p.input.name(), out.name()])?.with("group", group)?)
}

/// Candidates run on one problem, its cuBLAS reference and an output buffer.
pub struct GemmBench<'a> {
    pub gpu: &'a Gpu,
    pub p: &'a Problem,
    pub r: &'a Reference,
    pub d: &'a mut OutBuf,
    pub group: i32,
}

impl Bench<Plan> for GemmBench<'_> {
    type Trial = Launch;
    fn setup(
        &mut self,
        plan: &Plan,
        module: &Arc<Module>,
        _: &Arc<CudaStream>,
    ) -> Result<Launch, BoxError> {
        let loaded = Loaded::from_module(self.gpu, plan, module)?;
        Launch::new(self.gpu, &loaded, self.p, self.d, self.r.out)
    }
    fn check(&mut self, launch: &mut Launch, _: &Arc<CudaStream>) -> Result<(), BoxError> {
        let v = check(self.gpu, launch, self.d, self.r, self.p, self.group)?;
        match v.ok() {
            true => Ok(()),
            false => Err(v.describe(self.p.m * self.p.n).into()),
        }
    }
    fn run(&mut self, launch: &mut Launch, _: &Arc<CudaStream>) -> Result<(), BoxError> {
        launch.run(self.group)
    }
}
