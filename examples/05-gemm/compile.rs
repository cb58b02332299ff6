//! Compiling many configurations at once: each rendered and NVRTC-compiled by tma's runtime
//! (`Compiler` is `Sync`: its caches sit behind locks and NVRTC programs are per call), on
//! scoped threads over the CPU cores, with a progress line when stderr is a terminal.

use std::io::{IsTerminal, Write};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use tma::runtime::{Compiled, Compiler};

use crate::kernel::{options, Plan, Res};

/// One compiled configuration.
pub struct Built {
    pub plan: Plan,
    pub compiled: Arc<Compiled>,
    /// Seconds its render + compile took (a cache hit takes milliseconds).
    pub seconds: f64,
}

/// Renders and compiles every plan on `threads` threads (0: the machine's cores). Results in
/// the plans' order; the first error stops nothing but is returned for its plan.
pub fn compile_all(compiler: &Compiler, plans: Vec<Plan>, threads: usize) -> Vec<Res<Built>> {
    let n = plans.len();
    let threads = if threads == 0 {
        std::thread::available_parallelism().map_or(1, |t| t.get())
    } else {
        threads
    }
    .clamp(1, n.max(1));
    let jobs: Vec<Mutex<Option<Plan>>> = plans.into_iter().map(|p| Mutex::new(Some(p))).collect();
    let results: Vec<Mutex<Option<Res<Built>>>> = (0..n).map(|_| Mutex::new(None)).collect();
    let next = AtomicUsize::new(0);
    let done = AtomicUsize::new(0);
    let tty = std::io::stderr().is_terminal();
    let start = Instant::now();
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= n {
                    break;
                }
                let Some(plan) = jobs[i].lock().ok().and_then(|mut j| j.take()) else {
                    continue;
                };
                let t0 = Instant::now();
                let r = plan.source().and_then(|src| {
                    let compiled = compiler.compile_source(&src, &options())?;
                    Ok(Built {
                        plan,
                        compiled,
                        seconds: t0.elapsed().as_secs_f64(),
                    })
                });
                if let Ok(mut slot) = results[i].lock() {
                    *slot = Some(r);
                }
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
            });
        }
    });
    if tty {
        eprintln!();
    }
    results
        .into_iter()
        .map(|m| {
            m.into_inner()
                .ok()
                .flatten()
                .unwrap_or_else(|| Err("not compiled".into()))
        })
        .collect()
}
