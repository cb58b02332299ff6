//! A [`Trace`] as Chrome trace event JSON, which Perfetto (ui.perfetto.dev) and
//! chrome://tracing open: a process per block, three tracks per warp (its producer events,
//! its full-barrier waits, the stages it held), durations for waits and held stages, instants
//! for loads and releases. Times in microseconds from the trace's first event.

use serde_json::{json, Value};
use tma_core::timeline::TimelineKind;

use super::trace::{TimelineEvent, Trace};

/// A warp's track: what it shows.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Track {
    Producer = 0,
    Waits = 1,
    Held = 2,
}

impl Track {
    fn of(kind: TimelineKind) -> Track {
        if kind.is_producer() {
            Track::Producer
        } else {
            Track::Waits
        }
    }
    fn tid(self, warp: u32) -> u64 {
        u64::from(warp) * 4 + self as u64
    }
    fn name(self, warp: u32) -> String {
        match self {
            Track::Producer => format!("warp {warp} producer: empty waits, loads"),
            Track::Waits => format!("warp {warp} consumer: full waits, releases"),
            Track::Held => format!("warp {warp} consumer: stage held (wait end -> release)"),
        }
    }
}

impl Trace {
    /// The Chrome trace event JSON of every event (`{"traceEvents": [..]}`; `otherData` holds
    /// the dropped count and the clock). Large launches make large files: keep a few blocks
    /// with [`Trace::filter_blocks`] first.
    pub fn chrome_json(&self) -> String {
        let t0 = self.span_ns().map_or(0, |(a, _)| a);
        let mut out: Vec<Value> = Vec::new();
        let mut named: std::collections::BTreeSet<(u32, Track, u32)> = Default::default();
        let mut blocks: std::collections::BTreeMap<u32, u32> = Default::default();
        let mut track = |out: &mut Vec<Value>, block: u32, warp: u32, t: Track| {
            if named.insert((block, t, warp)) {
                out.push(json!({
                    "name": "thread_name", "ph": "M", "pid": block, "tid": t.tid(warp),
                    "args": {"name": t.name(warp)}
                }));
                out.push(json!({
                    "name": "thread_sort_index", "ph": "M", "pid": block, "tid": t.tid(warp),
                    "args": {"sort_index": t.tid(warp)}
                }));
            }
            t.tid(warp)
        };
        for e in &self.events {
            blocks.entry(e.block).or_insert(e.sm);
            let tid = track(&mut out, e.block, e.warp, Track::of(e.kind));
            out.push(event_json(self, e, t0, tid));
        }
        for h in self.held() {
            let tid = track(&mut out, h.block, h.warp, Track::Held);
            out.push(json!({
                "name": format!("{} compute stage {}", self.pipeline_name(h.pipeline), h.stage),
                "cat": "consumer", "ph": "X", "ts": us(h.from_ns, t0), "dur": (h.to_ns - h.from_ns) as f64 / 1e3,
                "pid": h.block, "tid": tid,
                "args": {"pipeline": self.pipeline_name(h.pipeline), "stage": h.stage, "pass": h.pass}
            }));
        }
        for (block, sm) in blocks {
            out.push(json!({"name": "process_name", "ph": "M", "pid": block, "args": {"name": format!("block {block} (SM {sm})")}}));
            out.push(json!({"name": "process_sort_index", "ph": "M", "pid": block, "args": {"sort_index": block}}));
        }
        json!({
            "traceEvents": out,
            "displayTimeUnit": "ns",
            "otherData": {
                "source": "tma timeline (CompileOptions::timeline)",
                "clock": "%globaltimer, microseconds from the first event",
                "t0_ns": t0,
                "dropped_events": self.dropped,
            }
        })
        .to_string()
    }
}

/// Microseconds from `t0` to `ns`.
fn us(ns: u64, t0: u64) -> f64 {
    ns.saturating_sub(t0) as f64 / 1e3
}

/// One recorded event: a wait's span ("X") or an instant ("i", on its thread).
fn event_json(trace: &Trace, e: &TimelineEvent, t0: u64, tid: u64) -> Value {
    let pipeline = trace.pipeline_name(e.pipeline);
    let name = format!("{pipeline} {} stage {}", e.kind.name(), e.stage);
    let args = json!({"pipeline": pipeline, "stage": e.stage, "pass": e.pass, "sm": e.sm});
    let cat = if e.kind.is_producer() {
        "producer"
    } else {
        "consumer"
    };
    if e.kind.is_wait() {
        json!({"name": name, "cat": cat, "ph": "X", "ts": us(e.start_ns, t0),
               "dur": f64::from(e.duration_ns) / 1e3, "pid": e.block, "tid": tid, "args": args})
    } else {
        json!({"name": name, "cat": cat, "ph": "i", "s": "t", "ts": us(e.start_ns, t0),
               "pid": e.block, "tid": tid, "args": args})
    }
}

#[cfg(test)]
#[allow(clippy::panic, clippy::unwrap_used)]
mod tests {
    use super::super::trace::tests::sample;
    use super::*;

    #[test]
    fn the_json_parses_back_with_a_track_per_role_and_durations_in_us() {
        let (shape, bytes) = sample();
        let t = Trace::decode(&bytes, shape, 2, vec!["ring \"q\"".into()]).unwrap();
        let v: Value = serde_json::from_str(&t.chrome_json()).unwrap();
        let events = v["traceEvents"].as_array().unwrap();
        assert_eq!(v["otherData"]["dropped_events"], 2);
        let named = |ph: &str, name: &str| {
            events
                .iter()
                .filter(|e| e["ph"] == ph && e["name"].as_str().unwrap().contains(name))
                .count()
        };
        // 2 blocks x 3 passes: acquire and wait spans, load and release instants, and a held span.
        assert_eq!(named("X", "acquire stage"), 6);
        assert_eq!(named("X", "wait stage"), 6);
        assert_eq!(named("X", "compute stage"), 6);
        assert_eq!(named("i", "load stage"), 6);
        assert_eq!(named("i", "release stage"), 6);
        // Names escape: the pipeline's quote survives the round trip.
        assert!(events
            .iter()
            .any(|e| e["name"] == "ring \"q\" wait stage 1"));
        // Tracks: the producer, waits and held of each block's warps, named once each.
        assert_eq!(named("M", "thread_name"), 2 * 3);
        assert_eq!(named("M", "process_name"), 2);
        let p = events
            .iter()
            .find(|e| e["name"] == "process_name" && e["pid"] == 1)
            .unwrap();
        assert_eq!(p["args"]["name"], "block 1 (SM 8)");
        // Block 1's wait of pass 2: at 2110 ns from the first event, 250 ns long.
        let w = events
            .iter()
            .find(|e| {
                e["ph"] == "X"
                    && e["pid"] == 1
                    && e["args"]["pass"] == 2
                    && e["name"].as_str().unwrap().contains("wait")
            })
            .unwrap();
        assert_eq!(
            (w["ts"].as_f64(), w["dur"].as_f64()),
            (Some(2.11), Some(0.25))
        );
        // Waits and held stages of one warp sit on different tracks (they overlap in a GEMM).
        let tid = |name: &str| {
            events
                .iter()
                .find(|e| e["pid"] == 0 && e["name"].as_str().unwrap().contains(name))
                .map(|e| e["tid"].as_u64().unwrap())
                .unwrap()
        };
        assert_ne!(tid("wait stage"), tid("compute stage"));
        assert_ne!(tid("wait stage"), tid("acquire stage"));
    }
}
