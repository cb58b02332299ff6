//! Timing on the GPU: blocks of back-to-back repetitions between CUDA events (one stream,
//! one synchronisation per block); a kernel under [`GRAPH_BELOW_US`] is captured many times
//! into a CUDA graph and the graph's replays are timed, so launch overhead does not count.

use std::sync::Arc;

use cudarc::driver::sys::CUevent_flags;
use cudarc::driver::{CudaEvent, CudaGraph, CudaStream};

use super::BoxError;
use crate::driver::Capture;
use crate::error::Error;

/// Kernels measured below this (microseconds per launch) are timed through a graph.
pub(crate) const GRAPH_BELOW_US: f64 = 20.0;
/// A graph holds about this much work (microseconds), at most [`MAX_GRAPH_LAUNCHES`].
const GRAPH_TARGET_US: f64 = 200.0;
const MAX_GRAPH_LAUNCHES: u32 = 1000;
/// A block holds about this much work (microseconds), in [`MIN_REPS`]..=[`MAX_REPS`] reps.
const BLOCK_TARGET_US: f64 = 5_000.0;
const MIN_REPS: usize = 3;
pub(crate) const MAX_REPS: usize = 100;

/// What one timed repetition replays.
pub(crate) enum Unit {
    /// One call of the bench's `run`.
    Launch,
    /// A graph of `launches` calls.
    Graph { graph: CudaGraph, launches: u32 },
}

impl Unit {
    pub fn launches(&self) -> u32 {
        match self {
            Unit::Launch => 1,
            Unit::Graph { launches, .. } => *launches,
        }
    }
}

/// Events for blocks of up to [`MAX_REPS`] repetitions, made once per tuning.
pub(crate) struct Clock {
    stream: Arc<CudaStream>,
    events: Vec<CudaEvent>,
}

impl Clock {
    pub fn new(stream: &Arc<CudaStream>) -> Result<Clock, Error> {
        let ctx = stream.context();
        let events = (0..=MAX_REPS)
            .map(|_| ctx.new_event(Some(CUevent_flags::CU_EVENT_DEFAULT)))
            .collect::<Result<_, _>>()
            .map_err(Error::driver("cuEventCreate"))?;
        Ok(Clock {
            stream: stream.clone(),
            events,
        })
    }

    /// Microseconds per launch of `reps` back-to-back repetitions of `unit`; `run` launches
    /// once.
    pub fn block(
        &self,
        reps: usize,
        unit: &Unit,
        run: &mut dyn FnMut() -> Result<(), BoxError>,
    ) -> Result<Vec<f64>, BoxError> {
        let reps = reps.clamp(1, MAX_REPS);
        let ev = &self.events[..=reps];
        ev[0].record(&self.stream)?;
        for e in &ev[1..] {
            match unit {
                Unit::Launch => run()?,
                Unit::Graph { graph, .. } => graph.launch()?,
            }
            e.record(&self.stream)?;
        }
        let per = f64::from(unit.launches());
        ev.windows(2)
            .map(|w| Ok(f64::from(w[0].elapsed_ms(&w[1])?) * 1e3 / per))
            .collect()
    }

    /// Repetitions per block for a unit of `unit_us`.
    pub fn reps_for(unit_us: f64) -> usize {
        if unit_us.is_finite() && unit_us > 0.0 {
            ((BLOCK_TARGET_US / unit_us).ceil() as usize).clamp(MIN_REPS, MAX_REPS)
        } else {
            MIN_REPS
        }
    }

    /// A graph of enough launches of `run` to hold [`GRAPH_TARGET_US`] of a kernel of `us`
    /// microseconds, or why the stream would not capture it.
    pub fn capture(
        &self,
        us: f64,
        run: &mut dyn FnMut() -> Result<(), BoxError>,
    ) -> Result<Unit, String> {
        let launches = ((GRAPH_TARGET_US / us.max(0.1)).ceil() as u32).clamp(2, MAX_GRAPH_LAUNCHES);
        // tma's capture: a compile or load inside `run` is refused by name (Error::Capture).
        let capture = Capture::begin_tracked(&self.stream).map_err(|e| match e {
            Error::Capture { .. } => {
                "the legacy default stream cannot be captured: tune on ctx.new_stream()".to_string()
            }
            e => e.to_string(),
        })?;
        let mut ran = Ok(());
        for _ in 0..launches {
            ran = run();
            if ran.is_err() {
                break;
            }
        }
        // Always end the capture: the stream must leave capture mode whatever happened.
        let graph = capture.end();
        ran.map_err(|e| format!("a launch failed under capture: {e}"))?;
        let graph = graph.map_err(|e| e.to_string())?;
        graph.upload().map_err(|e| e.to_string())?;
        Ok(Unit::Graph { graph, launches })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_hold_about_five_milliseconds() {
        assert_eq!(Clock::reps_for(2000.0), MIN_REPS);
        assert_eq!(Clock::reps_for(500.0), 10);
        assert_eq!(Clock::reps_for(1.0), MAX_REPS);
        assert_eq!(Clock::reps_for(f64::NAN), MIN_REPS);
    }
}
