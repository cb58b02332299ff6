//! Compiling many configurations at once: each rendered, then all NVRTC-compiled in parallel
//! on the CPU cores by tma's runtime (`Compiler::compile_all`: a progress bar when stderr is a
//! terminal).

use std::sync::Arc;

use tma::runtime::{Compiled, Compiler};

use crate::kernel::{options, Plan, Res};

/// One compiled configuration.
pub struct Built {
    pub plan: Plan,
    pub compiled: Arc<Compiled>,
}

/// Renders and compiles every plan. Results in the plans' order; a failure stops nothing
/// but is returned for its plan.
pub fn compile_all(compiler: &Compiler, plans: Vec<Plan>) -> Vec<Res<Built>> {
    let mut out: Vec<Option<Res<Built>>> = Vec::with_capacity(plans.len());
    let mut jobs = Vec::new();
    let mut waiting = Vec::new();
    for plan in plans {
        match plan.source() {
            Ok(src) => {
                jobs.push((src, options()));
                waiting.push((out.len(), plan));
                out.push(None);
            }
            Err(e) => out.push(Some(Err(e))),
        }
    }
    for ((i, plan), r) in waiting.into_iter().zip(compiler.compile_all(&jobs)) {
        out[i] = Some(
            r.map(|compiled| Built { plan, compiled })
                .map_err(Into::into),
        );
    }
    out.into_iter()
        .map(|r| r.unwrap_or_else(|| Err("not compiled".into())))
        .collect()
}
