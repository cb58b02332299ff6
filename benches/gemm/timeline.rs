//! What the per-role timeline costs the GEMM: a configuration compiled with the timeline
//! (`CompileOptions::timeline`, recording every launch into a buffer attached for the run) and
//! the same configuration without it, both checked, then timed paired on the same problem
//! (alternating blocks of launches: both see the card in the same thermal state). The goal:
//! within 3% (issue 24).

use std::sync::Arc;

use tma::runtime::timeline::Timeline;
use tma::runtime::{Compiler, Module};

use crate::eval::{check, reference};
use crate::gpu::{Gpu, Launch, Loaded, OutBuf, Problem};
use crate::kernel::{options, Config, Plan, Res};
use crate::rng::Rng;
use crate::timing::paired;

/// One shape's timing: milliseconds without and with the timeline (paired medians).
pub struct Cost {
    pub shape: (usize, usize, usize),
    pub config: Config,
    pub off_ms: f64,
    pub on_ms: f64,
    pub flops: f64,
    /// Both outputs correct, no event dropped.
    pub ok: bool,
    pub stats: String,
}

/// Times `off`'s configuration with and without the timeline on each shape.
pub fn cost(
    gpu: &Gpu,
    compiler: &Compiler,
    off: &Arc<Loaded>,
    shapes: &[(usize, usize, usize)],
    reps: usize,
    rng: &mut Rng,
) -> Res<Vec<Cost>> {
    let config = off.config;
    let plan = Plan::new(config)?;
    let compiled = compiler.compile_source(&plan.source()?, &options().timeline(true))?;
    let on = Loaded::from_module(gpu, &plan, &Module::load(&gpu.ctx, compiled)?)?;
    let group = 8;
    let mut rows = Vec::new();
    for &shape in shapes {
        let p = Problem::new(gpu, shape, config.input, rng.next())?;
        let r = reference(gpu, &p, config.out, rng)?;
        let mut d = OutBuf::new(gpu, p.m * p.n, config.out)?;
        let launch_on = Launch::new(gpu, &on, &p, &d, config.out)?;
        let launch_off = Launch::new(gpu, off, &p, &d, config.out)?;
        let timeline = Timeline::attach(on.kernel.module(), launch_on.config(), on.passes(&p))?;
        let ok_off = check(gpu, &launch_off, &mut d, &r, &p, group)?.ok();
        let ok_on = check(gpu, &launch_on, &mut d, &r, &p, group)?.ok();
        let (on_ms, off_ms) = paired(gpu, 5, reps, 5, &mut || launch_on.run(group), &mut || {
            launch_off.run(group)
        })?;
        let trace = timeline.read()?;
        println!(
            "  timeline {config} {}x{}x{}: {:.1} TFLOP/s without, {:.1} with ({:.3}x the time) | {}",
            p.m,
            p.n,
            p.k,
            p.flops() / off_ms / 1e9,
            p.flops() / on_ms / 1e9,
            on_ms / off_ms,
            trace.stats()
        );
        rows.push(Cost {
            shape,
            config,
            off_ms,
            on_ms,
            flops: p.flops(),
            ok: ok_off && ok_on && trace.dropped == 0 && !trace.events.is_empty(),
            stats: trace.stats().to_string(),
        });
    }
    Ok(rows)
}

/// The section's table.
pub fn print(rows: &[Cost]) {
    println!("\n## the per-role timeline's cost (paired with the same kernel without it)\n");
    println!("| shape | configuration | TFLOP/s without | TFLOP/s with | time with / without | where the time went |\n| --- | --- | --- | --- | --- | --- |");
    for r in rows {
        println!(
            "| {}x{}x{} | {} | {:.1} | {:.1} | {:.3} | {} |",
            r.shape.0,
            r.shape.1,
            r.shape.2,
            r.config,
            r.flops / r.off_ms / 1e9,
            r.flops / r.on_ms / 1e9,
            r.on_ms / r.off_ms,
            r.stats
        );
    }
}
