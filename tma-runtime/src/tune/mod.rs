//! Autotuning: the fastest of several candidate kernels for one problem, kept on disk per
//! (problem, device, builds) and reused by the next process.
//!
//! A candidate ([`Candidate`]: any kernel-plan parameters) gives a name, a source and compile
//! options; a [`Bench`] sets one up on the GPU, checks its result (a wrong candidate never
//! wins) and launches it. [`Tuner::best_or_tune`] then:
//! 1. renders every source and names each build ([`Compiler::cache_key`]: source, options,
//!    arch, NVRTC and crate versions, plus [`Candidate::launch_params`]: what the bench reads
//!    beyond them); when the tune cache holds a pick for the
//!    [`TuneKey`] and device tuned over exactly these builds, returns it: nothing compiled
//!    or timed ([`CacheUse::Hit`]); an edited, added or removed candidate re-tunes;
//! 2. compiles them all in parallel on the CPU cores ([`Compiler::compile_all`]; a progress
//!    bar on a terminal, quiet otherwise);
//! 3. loads, sets up, checks and warms up each; a kernel under ~20 us is captured many times
//!    into a CUDA graph and timed by replays, so launch overhead does not count;
//! 4. races them in rounds, one block of event-timed back-to-back repetitions (~5 ms) per
//!    candidate per round, in rotating order (the card's clock drifts with heat: every
//!    candidate sees the same drift). A candidate's time is the median of its block
//!    medians and its spread their interquartile range; from round 3 one whose spread lies
//!    wholly above the leader's drops out. The race ends when one is left (the pick is
//!    *separated*), or at the time budget ([`Tuner::budget`]) or 40 rounds (the pick is the
//!    lowest median; [`TuneReport::ties`] are the ones within its spread);
//! 5. writes the pick and the report to `<cache dir>/tune/<kernel>-<hash>.json` (temp file
//!    and rename; a failed write is a warning).
//!
//! Failures of one candidate (render, compile, setup, check, run) are rows of the
//! [`TuneReport`], never errors; only no candidate passing is ([`Error::NoCandidatePassed`]).
//!
//! ```no_run
//! use std::sync::Arc;
//! use cudarc::driver::{CudaContext, CudaStream};
//! use tma_core::Arch;
//! use tma_runtime::tune::{Bench, BoxError, Candidate, TuneKey, Tuner};
//! use tma_runtime::{CompileOptions, Kernel, LaunchConfig, Module, Source};
//!
//! struct Block(u32); // a candidate: threads per block
//! impl Candidate for Block {
//!     fn name(&self) -> String { format!("block{}", self.0) }
//!     fn source(&self) -> Result<Source, BoxError> {
//!         Ok(Source::new(format!("#define BLOCK {}\n{}", self.0, "/* kernel `k` */")))
//!     }
//!     fn options(&self) -> CompileOptions { CompileOptions::new(Arch::Sm90a) }
//! }
//! struct Scale { n: u32 } // what every candidate runs on
//! impl Bench<Block> for Scale {
//!     type Trial = (Kernel, LaunchConfig);
//!     fn setup(&mut self, c: &Block, m: &Arc<Module>, s: &Arc<CudaStream>)
//!         -> Result<Self::Trial, BoxError> {
//!         Ok((m.kernel("k")?, LaunchConfig::new(s, (self.n.div_ceil(c.0), 1, 1), (c.0, 1, 1))))
//!     }
//!     fn run(&mut self, (k, cfg): &mut Self::Trial, _: &Arc<CudaStream>) -> Result<(), BoxError> {
//!         // SAFETY: k(int n) as the source declares.
//!         unsafe { k.launch_builder(cfg).arg(&self.n).launch() }?;
//!         Ok(())
//!     }
//! }
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let stream = CudaContext::new(0)?.new_stream()?; // not the legacy default stream: graphs
//! let n = 1 << 24;
//! let key = TuneKey::new("scale", &[n as u64], &["f32"])?;
//! let tuned = Tuner::new(&stream)?.best_or_tune(&key, &[Block(128), Block(256)], &mut Scale { n })?;
//! println!("{}", tuned.report); // every candidate's median and spread; the pick marked
//! # Ok(()) }
//! ```

mod key;
mod report;
mod stats;
mod store;
mod timing;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use cudarc::driver::CudaStream;

use crate::compile::{CompileOptions, Compiled, Compiler, Source};
use crate::driver::Module;
use crate::error::Error;

pub use key::{TuneDevice, TuneKey};
pub use report::{CacheUse, Outcome, Row, Stage, Timing, TuneReport};

use stats::{Race, Spread, MAX_ROUNDS, MIN_ROUNDS};
use store::{Build, TuneStore};
use timing::{Clock, Unit, GRAPH_BELOW_US};

/// The errors of the user's side (sources, setup, checks, launches): any error type.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// Launches before a candidate's first timing (after its check).
const WARMUP: usize = 3;

/// One candidate: what to compile. Rendered and compiled on the compile threads.
pub trait Candidate: Sync {
    /// Its name in reports and in the tune cache; distinct among one tuning's candidates.
    fn name(&self) -> String;
    /// The CUDA source (with its description when rendered by tma: [`Source::kernel`]).
    fn source(&self) -> Result<Source, BoxError>;
    /// How to compile it.
    fn options(&self) -> CompileOptions;
    /// What else of it the [`Bench`] reads and that is in neither its source nor its options
    /// (a grid, a split count, a persistence factor), as text: part of its build in the tune
    /// cache, so changing it re-tunes. Empty by default (everything is in the source).
    fn launch_params(&self) -> String {
        String::new()
    }
}

/// Runs candidates on one problem: set up (buffers, tensor maps, launch shape), check,
/// launch. Launches go on the tuner's stream, which [`Bench::setup`] is given.
pub trait Bench<C> {
    /// A candidate ready to launch.
    type Trial;
    /// Readies candidate `c`, compiled and loaded as `module`, to launch on `stream`.
    fn setup(
        &mut self,
        c: &C,
        module: &Arc<Module>,
        stream: &Arc<CudaStream>,
    ) -> Result<Self::Trial, BoxError>;
    /// Checks the candidate's result (e.g. against a reference); an error is the reason it
    /// is wrong, and a wrong candidate never wins. By default nothing is checked.
    fn check(
        &mut self,
        _trial: &mut Self::Trial,
        _stream: &Arc<CudaStream>,
    ) -> Result<(), BoxError> {
        Ok(())
    }
    /// Launches once, asynchronously. Kernels under ~20 us are captured into a CUDA graph
    /// through this: launch only, no synchronisation, copies or allocations, and device
    /// addresses taken in `setup` (`device_ptr`), not `&CudaSlice` arguments: cudarc records
    /// an event per use, which under capture becomes a graph node and fails a later call.
    fn run(&mut self, trial: &mut Self::Trial, stream: &Arc<CudaStream>) -> Result<(), BoxError>;
}

/// The pick: `candidates[index]`, and the report (timings and spreads, failures, whether it
/// came from the tune cache).
#[derive(Clone, Debug)]
pub struct Tuned {
    pub index: usize,
    pub report: TuneReport,
}

/// Tunes on one stream's device; keeps picks in `<cache dir>/tune` (the compiler's cache
/// dir: `TMA_CACHE_DIR`, else the user cache dir).
#[derive(Debug)]
pub struct Tuner<'c> {
    compiler: &'c Compiler,
    stream: Arc<CudaStream>,
    device: TuneDevice,
    store: Option<TuneStore>,
    budget: Duration,
    retune: bool,
}

/// A candidate set up and warmed up, and what a timed repetition replays.
struct Contender<T> {
    trial: T,
    unit: Unit,
    reps: usize,
    graph_refused: Option<String>,
    /// Kept loaded while timed.
    _module: Arc<Module>,
}

impl Tuner<'static> {
    /// A tuner on `stream` with the process-wide compiler ([`Compiler::global`]). Use a
    /// stream of your own (`ctx.new_stream()`): the legacy default stream cannot be captured
    /// into graphs, so short kernels would be timed with their launch overhead.
    pub fn new(stream: &Arc<CudaStream>) -> Result<Tuner<'static>, Error> {
        Tuner::with_compiler(Compiler::global()?, stream)
    }
}

impl<'c> Tuner<'c> {
    /// A tuner on `stream` compiling with `compiler`, keeping picks in its cache dir.
    pub fn with_compiler(compiler: &'c Compiler, stream: &Arc<CudaStream>) -> Result<Self, Error> {
        Ok(Tuner {
            compiler,
            stream: stream.clone(),
            device: TuneDevice::of(stream.context())?,
            store: compiler
                .config()
                .cache_dir
                .as_ref()
                .map(|d| TuneStore::new(d.join("tune"))),
            budget: Duration::from_secs(2),
            retune: false,
        })
    }
    /// Time spent racing per tuning (default 2 s) before the lowest median is picked
    /// unseparated; every candidate still runs at least 3 rounds.
    pub fn budget(mut self, budget: Duration) -> Self {
        self.budget = budget;
        self
    }
    /// Time again even when the tune cache holds a pick (and replace it).
    pub fn retune(mut self, retune: bool) -> Self {
        self.retune = retune;
        self
    }
    /// Keep picks in `<dir>/tune` instead (`None`: keep none).
    pub fn cache_dir(mut self, dir: Option<PathBuf>) -> Self {
        self.store = dir.map(|d| TuneStore::new(d.join("tune")));
        self
    }
    /// Where picks are kept.
    pub fn tune_dir(&self) -> Option<&Path> {
        self.store.as_ref().map(TuneStore::dir)
    }
    /// The device timed on (part of every pick's key).
    pub fn device(&self) -> &TuneDevice {
        &self.device
    }

    /// The fastest of `candidates` that passes `bench`'s check, for `key` on this device:
    /// from the tune cache when it holds a pick among exactly these builds, else tuned and
    /// kept. See the [module](self) for how.
    pub fn best_or_tune<C: Candidate, B: Bench<C>>(
        &self,
        key: &TuneKey,
        candidates: &[C],
        bench: &mut B,
    ) -> Result<Tuned, Error> {
        let names: Vec<String> = candidates.iter().map(Candidate::name).collect();
        for (i, n) in names.iter().enumerate() {
            if names[..i].contains(n) {
                return Err(Error::DuplicateCandidate {
                    kernel: key.kernel().to_string(),
                    name: n.clone(),
                });
            }
        }
        let rendered: Vec<Result<(Source, CompileOptions), String>> = candidates
            .iter()
            .map(|c| {
                c.source()
                    .map(|s| (s, c.options()))
                    .map_err(|e| e.to_string())
            })
            .collect();
        let builds: Vec<Build> = names
            .iter()
            .zip(&rendered)
            .zip(candidates)
            .map(|((name, r), c)| Build {
                name: name.clone(),
                key: r.as_ref().ok().and_then(|(s, o)| {
                    let build = self.compiler.cache_key(s, o).ok()?.hex();
                    Some(match c.launch_params() {
                        p if p.is_empty() => build,
                        p => format!("{build} {p}"),
                    })
                }),
            })
            .collect();
        let cache = match (&self.store, self.retune) {
            (None, _) => CacheUse::Off,
            (Some(_), true) => CacheUse::Retuned,
            (Some(store), false) => match store.load(key, &self.device, &builds) {
                Ok((index, report)) => return Ok(Tuned { index, report }),
                Err(why) => why,
            },
        };

        // Compile every rendered source, in parallel.
        let mut failed: Vec<Option<(Stage, String)>> = rendered
            .iter()
            .map(|r| r.as_ref().err().map(|e| (Stage::Source, e.clone())))
            .collect();
        let jobs: Vec<(usize, (Source, CompileOptions))> = rendered
            .into_iter()
            .enumerate()
            .filter_map(|(i, r)| r.ok().map(|j| (i, j)))
            .collect();
        let sources: Vec<(Source, CompileOptions)> = jobs.iter().map(|(_, j)| j.clone()).collect();
        let mut compiled: Vec<Option<Arc<Compiled>>> = vec![None; candidates.len()];
        for ((i, _), r) in jobs.iter().zip(self.compiler.compile_all(&sources)) {
            match r {
                Ok(c) => compiled[*i] = Some(c),
                Err(e) => failed[*i] = Some((Stage::Compile, e.to_string())),
            }
        }

        // Set up, check, warm up; then race.
        let clock = Clock::new(&self.stream)?;
        let mut contenders: Vec<Option<Contender<B::Trial>>> = Vec::new();
        for (i, c) in candidates.iter().enumerate() {
            let ready = compiled[i]
                .take()
                .map(|m| self.prepare(c, m, bench, &clock));
            contenders.push(match ready {
                Some(Ok(ready)) => Some(ready),
                Some(Err(f)) => {
                    failed[i] = Some(f);
                    None
                }
                None => None,
            });
        }
        let entrants: Vec<bool> = contenders.iter().map(Option::is_some).collect();
        let mut race = Race::new(&entrants);
        let start = Instant::now();
        let bar = crate::progress::bar(u64::from(MAX_ROUNDS), "timing");
        let s = &self.stream;
        while !race.decided()
            && race.rounds() < MAX_ROUNDS
            && !(race.rounds() >= MIN_ROUNDS && start.elapsed() > self.budget)
        {
            let active = race.active();
            let first = race.rounds() as usize;
            for k in 0..active.len() {
                let i = active[(first + k) % active.len()];
                let Some(c) = contenders.get_mut(i).and_then(Option::as_mut) else {
                    continue;
                };
                match clock.block(c.reps, &c.unit, &mut || bench.run(&mut c.trial, s)) {
                    Ok(samples) => race.record(i, Spread::of(&samples).median),
                    Err(e) => {
                        failed[i] = Some((Stage::Run, e.to_string()));
                        race.remove(i);
                    }
                }
            }
            race.end_round();
            bar.inc(1);
            bar.set_message(format!("timing ({} in the race)", race.active().len()));
        }
        bar.finish_and_clear();
        let seconds = start.elapsed().as_secs_f64();

        let rows: Vec<Row> = names
            .iter()
            .enumerate()
            .map(|(i, name)| Row {
                name: name.clone(),
                outcome: match (&failed[i], race.spread(i), contenders[i].as_ref()) {
                    (None, Some(sp), Some(c)) => Outcome::Timed(Timing {
                        median_us: sp.median,
                        q25_us: sp.q25,
                        q75_us: sp.q75,
                        blocks: race.blocks(i).len() as u32,
                        reps: c.reps as u32,
                        launches: c.unit.launches(),
                        graph_refused: c.graph_refused.clone(),
                        dropped_after: race.dropped_after(i),
                    }),
                    (Some((stage, message)), _, _) => Outcome::Failed {
                        stage: *stage,
                        message: message.clone(),
                    },
                    _ => Outcome::Failed {
                        stage: Stage::Run,
                        message: "not timed".into(),
                    },
                },
            })
            .collect();
        let Some(pick) = race.leader() else {
            return Err(Error::NoCandidatePassed {
                kernel: key.to_string(),
                failures: rows
                    .iter()
                    .filter_map(|r| match &r.outcome {
                        Outcome::Failed { stage, message } => {
                            Some(format!("{}: {stage}: {}", r.name, first_line(message)))
                        }
                        Outcome::Timed(_) => None,
                    })
                    .collect(),
            });
        };
        let report = TuneReport {
            key: key.clone(),
            device: self.device.clone(),
            rows,
            pick,
            separated: race.separated(),
            rounds: race.rounds(),
            seconds,
            cache,
        };
        if let Some(store) = &self.store {
            store.save(&builds, &report);
        }
        Ok(Tuned {
            index: pick,
            report,
        })
    }

    /// Loads, sets up, checks and warms up one candidate, and measures it once to choose
    /// how it is timed (a graph under [`GRAPH_BELOW_US`]) and how many repetitions a block
    /// holds.
    fn prepare<C, B: Bench<C>>(
        &self,
        c: &C,
        compiled: Arc<Compiled>,
        bench: &mut B,
        clock: &Clock,
    ) -> Result<Contender<B::Trial>, (Stage, String)> {
        let s = &self.stream;
        let setup = |e: &dyn std::fmt::Display| (Stage::Setup, e.to_string());
        let run = |e: &dyn std::fmt::Display| (Stage::Run, e.to_string());
        let module = Module::load(s.context(), compiled).map_err(|e| setup(&e))?;
        let mut trial = bench.setup(c, &module, s).map_err(|e| setup(&e))?;
        bench
            .check(&mut trial, s)
            .map_err(|e| (Stage::Check, e.to_string()))?;
        for _ in 0..WARMUP {
            bench.run(&mut trial, s).map_err(|e| run(&e))?;
        }
        s.synchronize().map_err(|e| run(&e))?;
        let probe = clock
            .block(3, &Unit::Launch, &mut || bench.run(&mut trial, s))
            .map_err(|e| run(&e))?;
        let us = Spread::of(&probe).median;
        let (unit, graph_refused) = if us < GRAPH_BELOW_US {
            match clock.capture(us, &mut || bench.run(&mut trial, s)) {
                Ok(unit) => (unit, None),
                Err(why) => (Unit::Launch, Some(why)),
            }
        } else {
            (Unit::Launch, None)
        };
        let reps = Clock::reps_for(us * f64::from(unit.launches()));
        Ok(Contender {
            trial,
            unit,
            reps,
            graph_refused,
            _module: module,
        })
    }
}

fn first_line(s: &str) -> &str {
    s.lines().next().unwrap_or("")
}
