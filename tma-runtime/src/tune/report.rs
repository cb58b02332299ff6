//! What a tuning found, per candidate: its time and spread, or the stage it failed at. Kept
//! in the tune cache with the pick and printed as a table.

use std::fmt;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::key::{TuneDevice, TuneKey};

/// One tuning: every candidate's outcome and the pick.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TuneReport {
    pub key: TuneKey,
    pub device: TuneDevice,
    /// One per candidate, in the candidates' order.
    pub rows: Vec<Row>,
    /// The row of the pick: the lowest median among those that passed.
    pub pick: usize,
    /// The pick's spread lies below every other timed candidate's: the next tuning is
    /// expected to make the same pick. When false, the candidates whose spreads meet the
    /// pick's are as fast within the measurement ([`TuneReport::ties`]).
    pub separated: bool,
    /// Timing rounds run (one block per candidate still in the race each).
    pub rounds: u32,
    /// Seconds spent timing.
    pub seconds: f64,
    /// Whether the pick came from the tune cache, and why not.
    pub cache: CacheUse,
}

/// One candidate's outcome.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Row {
    pub name: String,
    pub outcome: Outcome,
}

/// Timed, or failed at a stage (which never stops the other candidates).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum Outcome {
    Timed(Timing),
    Failed { stage: Stage, message: String },
}

/// Where a candidate failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Stage {
    /// [`super::Candidate::source`].
    Source,
    /// NVRTC.
    Compile,
    /// Loading the module or [`super::Bench::setup`].
    Setup,
    /// [`super::Bench::check`]: a wrong result never wins.
    Check,
    /// [`super::Bench::run`], or the stream after it.
    Run,
}

/// A candidate's time per launch, from blocks of event-timed repetitions.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Timing {
    /// Median of the block medians, microseconds per launch.
    pub median_us: f64,
    /// 25th and 75th percentiles of the block medians: the spread.
    pub q25_us: f64,
    pub q75_us: f64,
    /// Blocks timed (one per round it ran).
    pub blocks: u32,
    /// Timed repetitions per block.
    pub reps: u32,
    /// Launches per repetition: 1 timed by events alone; more for kernels under
    /// ~20 us, a CUDA graph of that many launches replayed and divided.
    pub launches: u32,
    /// Why a short kernel was not timed through a graph (capture refused).
    pub graph_refused: Option<String>,
    /// The round after which it dropped out, clearly slower than the leader.
    pub dropped_after: Option<u32>,
}

impl Timing {
    /// The spread relative to the median, in percent (interquartile range / median).
    pub fn spread_pct(&self) -> f64 {
        100.0 * (self.q75_us - self.q25_us) / self.median_us
    }
}

/// Whether a tuning used the tune cache.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum CacheUse {
    /// Read from this file: nothing was compiled or timed.
    Hit { path: PathBuf },
    /// No entry for the key and device yet.
    Missing,
    /// An entry was tuned over other candidates: these were added, removed, or their build
    /// changed (source, options, arch, NVRTC or crate version).
    Stale { changed: Vec<String> },
    /// The entry could not be read (it is replaced).
    Unreadable { reason: String },
    /// Timed again on request ([`super::Tuner::retune`]).
    Retuned,
    /// No cache directory: the pick is not kept.
    Off,
}

impl TuneReport {
    /// The pick's name.
    pub fn pick_name(&self) -> &str {
        self.rows.get(self.pick).map_or("", |r| r.name.as_str())
    }
    /// The pick's timing.
    pub fn pick_timing(&self) -> Option<&Timing> {
        match self.rows.get(self.pick).map(|r| &r.outcome) {
            Some(Outcome::Timed(t)) => Some(t),
            _ => None,
        }
    }
    /// Candidates other than the pick whose spread meets the pick's: as fast within the
    /// measurement.
    pub fn ties(&self) -> Vec<&str> {
        let Some(p) = self.pick_timing() else {
            return Vec::new();
        };
        self.rows
            .iter()
            .enumerate()
            .filter(|&(i, _)| i != self.pick)
            .filter_map(|(_, r)| match &r.outcome {
                Outcome::Timed(t) if t.q25_us <= p.q75_us => Some(r.name.as_str()),
                _ => None,
            })
            .collect()
    }
    /// Candidates that failed, with stage and message.
    pub fn failures(&self) -> Vec<(&str, Stage, &str)> {
        self.rows
            .iter()
            .filter_map(|r| match &r.outcome {
                Outcome::Failed { stage, message } => {
                    Some((r.name.as_str(), *stage, message.as_str()))
                }
                _ => None,
            })
            .collect()
    }
}

impl fmt::Display for Stage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Stage::Source => "source",
            Stage::Compile => "compile",
            Stage::Setup => "setup",
            Stage::Check => "check",
            Stage::Run => "run",
        })
    }
}

impl fmt::Display for CacheUse {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CacheUse::Hit { path } => write!(f, "from the tune cache {}", path.display()),
            CacheUse::Missing => f.write_str("tuned (not in the tune cache)"),
            CacheUse::Stale { changed } => {
                write!(
                    f,
                    "tuned again (candidates changed: {})",
                    changed.join(", ")
                )
            }
            CacheUse::Unreadable { reason } => {
                write!(f, "tuned again (tune cache entry unreadable: {reason})")
            }
            CacheUse::Retuned => f.write_str("tuned again on request"),
            CacheUse::Off => f.write_str("tuned (no tune cache)"),
        }
    }
}

/// A header line, then one line per candidate (`*` marks the pick), e.g.
/// ```text
/// tune gemm 4096x4096x4096 bf16,bf16 on NVIDIA H100 (sm 9.0, driver 13000): pick ws_a,
/// 412.3 us, spread 0.2%, separated from the rest; 3 rounds in 0.41 s; tuned (not in the tune cache)
///   candidate      median us   spread (q25..q75)         blocks x reps x launches
/// * ws_a               412.3   411.9..412.8 (0.2%)       5 x 5 x 1
///   ws_b               498.0   497.1..498.9 (0.4%)       3 x 5 x 1  dropped after round 3
///   wg1                FAILED check: 12 of 16777216 elements wrong
/// ```
impl fmt::Display for TuneReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "tune {} on {}: pick {}",
            self.key,
            self.device,
            self.pick_name()
        )?;
        if let Some(t) = self.pick_timing() {
            write!(f, ", {:.1} us, spread {:.1}%", t.median_us, t.spread_pct())?;
        }
        if self.separated {
            f.write_str(", separated from the rest")?;
        } else {
            write!(f, ", within the spread of {}", self.ties().join(", "))?;
        }
        writeln!(
            f,
            "; {} rounds in {:.2} s; {}",
            self.rounds, self.seconds, self.cache
        )?;
        let w = self
            .rows
            .iter()
            .map(|r| r.name.len())
            .max()
            .unwrap_or(0)
            .max(9);
        writeln!(
            f,
            "  {:<w$}  {:>10}   {:<28} blocks x reps x launches",
            "candidate", "median us", "spread (q25..q75)"
        )?;
        for (i, r) in self.rows.iter().enumerate() {
            let mark = if i == self.pick { '*' } else { ' ' };
            match &r.outcome {
                Outcome::Timed(t) => {
                    let spread =
                        format!("{:.1}..{:.1} ({:.1}%)", t.q25_us, t.q75_us, t.spread_pct());
                    write!(
                        f,
                        "{mark} {:<w$}  {:>10.1}   {spread:<28} {} x {} x {}",
                        r.name, t.median_us, t.blocks, t.reps, t.launches
                    )?;
                    if let Some(d) = t.dropped_after {
                        write!(f, "  dropped after round {d}")?;
                    }
                    if let Some(g) = &t.graph_refused {
                        write!(f, "  (no graph: {g})")?;
                    }
                    writeln!(f)?;
                }
                Outcome::Failed { stage, message } => {
                    let first = message.lines().next().unwrap_or("");
                    writeln!(f, "{mark} {:<w$}  FAILED {stage}: {first}", r.name)?;
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn timed(median_us: f64, half: f64, dropped_after: Option<u32>) -> Outcome {
        Outcome::Timed(Timing {
            median_us,
            q25_us: median_us - half,
            q75_us: median_us + half,
            blocks: 3,
            reps: 25,
            launches: 100,
            graph_refused: None,
            dropped_after,
        })
    }

    #[test]
    fn the_table_marks_the_pick_and_prints_spreads_and_failures() {
        let row = |name: &str, outcome| Row {
            name: name.into(),
            outcome,
        };
        let mut r = TuneReport {
            key: TuneKey::new("scale", &[65536], &["f32"]).unwrap(),
            device: TuneDevice {
                name: "NVIDIA H100 80GB HBM3".into(),
                compute_capability: (9, 0),
                driver_version: 13000,
            },
            rows: vec![
                row("block128", timed(2.5, 0.05, None)),
                row("block256", timed(2.0, 0.01, None)),
                row("block1024", timed(3.0, 0.02, Some(3))),
                row(
                    "triples",
                    Outcome::Failed {
                        stage: Stage::Check,
                        message: "x[0] = 4.5 (want 3)\nmore".into(),
                    },
                ),
            ],
            pick: 1,
            separated: true,
            rounds: 5,
            seconds: 0.25,
            cache: CacheUse::Missing,
        };
        let text = r.to_string();
        assert!(
            text.starts_with(
                "tune scale 65536 f32 on NVIDIA H100 80GB HBM3 (sm 9.0, driver 13000): pick block256, \
                 2.0 us, spread 1.0%, separated from the rest; 5 rounds in 0.25 s; tuned (not in the tune cache)\n"
            ),
            "{text}"
        );
        assert!(text.contains("\n* block256 "), "{text}");
        assert!(
            text.contains("2.5..2.5 (4.0%)") || text.contains("2.5..2.6 (4.0%)"),
            "{text}"
        );
        assert!(text.contains("dropped after round 3"), "{text}");
        assert!(
            text.contains("  triples    FAILED check: x[0] = 4.5 (want 3)\n"),
            "{text}"
        );
        assert_eq!(
            r.failures(),
            vec![("triples", Stage::Check, "x[0] = 4.5 (want 3)\nmore")]
        );
        assert!(r.ties().is_empty());
        // Unseparated: the ties are named.
        r.rows[0] = row("block128", timed(2.1, 0.2, None));
        r.separated = false;
        assert_eq!(r.ties(), vec!["block128"]);
        assert!(r.to_string().contains("within the spread of block128;"));
    }
}
