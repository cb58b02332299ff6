//! Compiling many configurations at once: each rendered here, then NVRTC-compiled by tma's
//! runtime on the CPU cores (`Compiler::precompile_with`: in parallel, each from the in-process
//! or disk cache when it is there), with a progress line when stderr is a terminal.

use std::io::{IsTerminal, Write};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Instant;

use tma::runtime::compile::Origin;
use tma::runtime::{Compiled, Compiler};

use crate::kernel::{options, Plan, Res};

/// One compiled configuration.
pub struct Built {
    pub plan: Plan,
    pub compiled: Arc<Compiled>,
    /// Seconds its render + compile took (a cache hit takes milliseconds).
    pub seconds: f64,
    /// Where the compile came from: NVRTC, or the in-process or disk cache.
    pub origin: Origin,
}

impl Built {
    /// ptxas's report of `kernel`: `168 registers at entry, 0 B spilled`; in a release build
    /// an error when it spills or takes local memory (a consumer that spills its accumulators
    /// is slow: with three consumer warpgroups ptxas allocates the whole kernel within a
    /// 512-thread launch's 128 registers). Debug builds (`GEMM_DEBUG=1`: device checks,
    /// bounded waits) keep their records in local memory and are reported, not refused: the
    /// caller says which it built (`debug`).
    pub fn registers(&self, kernel: &str, debug: bool) -> Res<String> {
        let r = self.compiled.resources(kernel)?;
        if r.spills() || r.local_bytes > 0 {
            if debug {
                return Ok(format!("{r} (debug build)"));
            }
            return Err(format!("{}: spills ({r})", self.plan.config).into());
        }
        // ptxas's performance advisories (C7515, C7520: every wgmma serialized) would cost
        // half the speed.
        let losses: Vec<&str> = self.compiled.performance_losses().collect();
        if !losses.is_empty() && !debug {
            return Err(format!("{}: {}", self.plan.config, losses.join("; ")).into());
        }
        Ok(format!("{} registers at entry, 0 B spilled", r.registers))
    }
}

/// Renders every plan, then compiles them on the machine's cores.
/// Results in the plans' order; an error stops nothing but is returned for its plan.
pub fn compile_all(compiler: &Compiler, plans: Vec<Plan>) -> Vec<Res<Built>> {
    let mut rendered = Vec::with_capacity(plans.len());
    let mut items = Vec::new();
    for plan in plans {
        let t0 = Instant::now();
        let source = plan.source();
        let seconds = t0.elapsed().as_secs_f64();
        if let Ok(s) = &source {
            items.push((s.clone(), options()));
        }
        rendered.push((plan, source.map(|_| seconds)));
    }
    let n = items.len();
    let done = AtomicUsize::new(0);
    let tty = std::io::stderr().is_terminal();
    let start = Instant::now();
    let progress = |_: usize, _: &Result<_, _>| {
        let k = done.fetch_add(1, Ordering::Relaxed) + 1;
        if tty {
            let mut e = std::io::stderr().lock();
            let _ = write!(
                e,
                "\r  compiling: {k}/{n} configurations, {:.1} s",
                start.elapsed().as_secs_f64()
            );
            let _ = e.flush();
        }
    };
    let mut compiled = compiler.precompile_with(&items, 0, &progress).into_iter();
    if tty && n > 0 {
        eprintln!();
    }
    rendered
        .into_iter()
        .map(|(plan, render)| {
            let render_seconds = render?;
            let p = compiled.next().ok_or("not compiled")??;
            Ok(Built {
                plan,
                compiled: p.compiled,
                seconds: render_seconds + p.seconds,
                origin: p.origin,
            })
        })
        .collect()
}
