//! The recorded events, typed: where each slot sits ([`TimelineShape`]), what it holds
//! ([`TimelineEvent`]), and a launch's events with what they add up to ([`Trace`]). No GPU.

use tma_core::timeline::{TimelineKind, EVENT_BYTES, KINDS};

use crate::error::Error;

/// The extents of a timeline's slots: one slot per kind for each (block, warp, pipeline,
/// pass), in that order (the device's `tma_timeline_record` computes the same index).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct TimelineShape {
    /// Blocks of the launch (the linear block index, x fastest).
    pub blocks: u32,
    /// Warps per block (the linear thread index / 32).
    pub warps: u32,
    /// Pipelines of the source (their `PIPELINE_ID`s, 0 ..).
    pub pipelines: u32,
    /// Passes through stages each warp's state may make (`state::pass`): the k-iterations of
    /// every tile a block works on. Later passes count as dropped.
    pub passes: u32,
}

impl TimelineShape {
    /// Slots in all; [`Error::InvalidTimeline`] for a zero extent or a count past `u64`.
    pub fn slots(&self) -> Result<u64, Error> {
        let mut n = u64::from(KINDS);
        for (field, v) in [
            ("blocks", self.blocks),
            ("warps", self.warps),
            ("pipelines", self.pipelines),
            ("passes", self.passes),
        ] {
            if v == 0 {
                return Err(Error::InvalidTimeline {
                    field,
                    value: 0,
                    rule: "every extent of the slots is at least 1",
                });
            }
            n = n.checked_mul(u64::from(v)).ok_or(Error::InvalidTimeline {
                field,
                value: u64::from(v),
                rule: "the slots in all pass 2^64",
            })?;
        }
        Ok(n)
    }

    /// Bytes of the slots ([`EVENT_BYTES`] each).
    pub fn bytes(&self) -> Result<u64, Error> {
        self.slots()?
            .checked_mul(EVENT_BYTES)
            .ok_or(Error::InvalidTimeline {
                field: "passes",
                value: u64::from(self.passes),
                rule: "the slots' bytes pass 2^64",
            })
    }

    /// (block, warp, pipeline, pass, kind code) of slot `i`: the device's index, undone.
    fn place(&self, i: u64) -> (u32, u32, u32, u32, u32) {
        let mut rest = i;
        let mut next = |extent: u32| {
            let v = rest % u64::from(extent);
            rest /= u64::from(extent);
            u32::try_from(v).unwrap_or(u32::MAX)
        };
        let kind = next(KINDS);
        let pass = next(self.passes);
        let pipeline = next(self.pipelines);
        let warp = next(self.warps);
        let block = u32::try_from(rest).unwrap_or(u32::MAX);
        (block, warp, pipeline, pass, kind)
    }
}

/// One recorded event.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TimelineEvent {
    /// What recorded it.
    pub kind: TimelineKind,
    /// The block (linear index) and its warp (linear thread index / 32) that recorded it.
    pub block: u32,
    pub warp: u32,
    /// The SM the block ran on (`%smid`).
    pub sm: u32,
    /// The pipeline (`PIPELINE_ID`), its stage, and the warp's pass through the ring.
    pub pipeline: u32,
    pub stage: u32,
    pub pass: u32,
    /// `%globaltimer` (ns) at the start of a wait, or at an instant.
    pub start_ns: u64,
    /// A wait's length (ns); 0 for an instant. [`TimelineEvent::SATURATED_NS`]: 4.29 s or
    /// more (the device clamps it; a hang being debugged).
    pub duration_ns: u32,
}

impl TimelineEvent {
    /// The duration the device writes for a wait of 4.29 s or more (it clamps, never wraps).
    pub const SATURATED_NS: u32 = u32::MAX;

    /// Where a wait ended (the start of an instant).
    pub fn end_ns(&self) -> u64 {
        self.start_ns.saturating_add(u64::from(self.duration_ns))
    }
}

/// The events of a launch (or several: slots are overwritten, not appended), in slot order
/// (block, warp, pipeline, pass, kind), with the pipelines' names for pictures.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Trace {
    pub events: Vec<TimelineEvent>,
    /// Events that found no slot (a pass, warp, block or pipeline past the shape).
    pub dropped: u32,
    /// Each pipeline's name, by id (from the source's description).
    pub pipelines: Vec<String>,
}

/// One (block, warp, pipeline, pass) of a consumer: the end of its wait and its release.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Held {
    pub block: u32,
    pub warp: u32,
    pub pipeline: u32,
    pub stage: u32,
    pub pass: u32,
    /// The wait's end: the stage's bytes had landed.
    pub from_ns: u64,
    /// The release.
    pub to_ns: u64,
}

impl Trace {
    /// Decodes the slots `bytes` of `shape` (all zero: no event; else the 16 bytes the device
    /// writes, whose kind must be the slot's: [`Error::TimelineCorrupt`] otherwise).
    pub fn decode(
        bytes: &[u8],
        shape: TimelineShape,
        dropped: u32,
        pipelines: Vec<String>,
    ) -> Result<Trace, Error> {
        let want = shape.bytes()?;
        if u64::try_from(bytes.len()).ok() != Some(want) {
            return Err(Error::InvalidTimeline {
                field: "bytes",
                value: u64::try_from(bytes.len()).unwrap_or(u64::MAX),
                rule: "the slots read back are the shape's bytes",
            });
        }
        let mut events = Vec::new();
        for (i, e) in (0u64..).zip(bytes.chunks_exact(EVENT_BYTES as usize)) {
            if e.iter().all(|b| *b == 0) {
                continue;
            }
            let word = |at: usize| u32::from_le_bytes([e[at], e[at + 1], e[at + 2], e[at + 3]]);
            let start_ns = u64::from(word(0)) | (u64::from(word(4)) << 32);
            let duration_ns = word(8);
            let packed = word(12);
            let (block, warp, pipeline, pass, code) = shape.place(i);
            let slot_kind = TimelineKind::from_device_code(code).unwrap_or(TimelineKind::Acquire);
            let corrupt = |found: String| Error::TimelineCorrupt {
                slot: i,
                block,
                warp,
                pipeline,
                pass,
                kind: slot_kind.name(),
                found,
            };
            if packed >> 28 != code {
                return Err(corrupt(format!("an event of kind code {}", packed >> 28)));
            }
            if start_ns == 0 {
                return Err(corrupt("an event with no start time".to_string()));
            }
            if !slot_kind.is_wait() && duration_ns != 0 {
                return Err(corrupt(format!("an instant lasting {duration_ns} ns")));
            }
            events.push(TimelineEvent {
                kind: slot_kind,
                block,
                warp,
                sm: (packed >> 16) & 0xfff,
                pipeline,
                stage: packed & 0xffff,
                pass,
                start_ns,
                duration_ns,
            });
        }
        Ok(Trace {
            events,
            dropped,
            pipelines,
        })
    }

    /// Pipeline `id`'s name (`pipeline <id>` when the source did not describe it).
    pub fn pipeline_name(&self, id: u32) -> String {
        usize::try_from(id)
            .ok()
            .and_then(|i| self.pipelines.get(i))
            .cloned()
            .unwrap_or_else(|| format!("pipeline {id}"))
    }

    /// Every event as CSV, one line each after a header: block, warp, pipeline (its name),
    /// stage, pass, kind, start and duration in ns.
    pub fn csv(&self) -> String {
        use std::fmt::Write as _;
        let mut csv = String::from("block,warp,pipeline,stage,pass,kind,start_ns,duration_ns\n");
        for e in &self.events {
            let _ = writeln!(
                csv,
                "{},{},{},{},{},{},{},{}",
                e.block,
                e.warp,
                self.pipeline_name(e.pipeline),
                e.stage,
                e.pass,
                e.kind.name(),
                e.start_ns,
                e.duration_ns
            );
        }
        csv
    }

    /// The same trace with only the blocks `keep` accepts (a picture of a few).
    pub fn filter_blocks(&self, keep: impl Fn(u32) -> bool) -> Trace {
        Trace {
            events: self
                .events
                .iter()
                .filter(|e| keep(e.block))
                .copied()
                .collect(),
            dropped: self.dropped,
            pipelines: self.pipelines.clone(),
        }
    }

    /// The blocks with events, ascending.
    pub fn blocks(&self) -> Vec<u32> {
        let mut b: Vec<u32> = self.events.iter().map(|e| e.block).collect();
        b.sort_unstable();
        b.dedup();
        b
    }

    /// The earliest start and the latest end (ns), or None without events.
    pub fn span_ns(&self) -> Option<(u64, u64)> {
        let start = self.events.iter().map(|e| e.start_ns).min()?;
        let end = self.events.iter().map(TimelineEvent::end_ns).max()?;
        Some((start, end))
    }

    /// Every consumer pass with both its wait and its release: from the wait's end to the
    /// release, the warp held the stage (its compute on it), in event order.
    pub fn held(&self) -> Vec<Held> {
        let mut out = Vec::new();
        let mut wait: Option<&TimelineEvent> = None;
        for e in &self.events {
            match e.kind {
                TimelineKind::Wait => wait = Some(e),
                TimelineKind::Release => {
                    if let Some(w) = wait.filter(|w| {
                        (w.block, w.warp, w.pipeline, w.pass)
                            == (e.block, e.warp, e.pipeline, e.pass)
                    }) {
                        out.push(Held {
                            block: e.block,
                            warp: e.warp,
                            pipeline: e.pipeline,
                            stage: e.stage,
                            pass: e.pass,
                            from_ns: w.end_ns(),
                            to_ns: e.start_ns.max(w.end_ns()),
                        });
                    }
                }
                _ => {}
            }
        }
        out
    }

    /// Where the time went, summed over warps: see [`TimelineStats`].
    pub fn stats(&self) -> TimelineStats {
        let mut s = TimelineStats {
            dropped: self.dropped,
            ..TimelineStats::default()
        };
        // Each warp's active time: from its first event's start to its last event's end.
        let mut warps: std::collections::BTreeMap<(u32, u32), (u64, u64, bool)> =
            std::collections::BTreeMap::new();
        for e in &self.events {
            s.events += 1;
            let w = warps.entry((e.block, e.warp)).or_insert((
                e.start_ns,
                e.end_ns(),
                e.kind.is_producer(),
            ));
            w.0 = w.0.min(e.start_ns);
            w.1 = w.1.max(e.end_ns());
            w.2 &= e.kind.is_producer();
            match e.kind {
                TimelineKind::Acquire => s.acquire_wait_ns += u64::from(e.duration_ns),
                TimelineKind::Wait => s.full_wait_ns += u64::from(e.duration_ns),
                TimelineKind::Load => s.loads += 1,
                TimelineKind::Release => s.releases += 1,
            }
        }
        for (first, last, producer) in warps.values() {
            if *producer {
                s.producer_warps += 1;
                s.producer_ns += last - first;
            } else {
                s.consumer_warps += 1;
                s.consumer_ns += last - first;
            }
        }
        s.held_ns = self.held().iter().map(|h| h.to_ns - h.from_ns).sum();
        if let Some((a, b)) = self.span_ns() {
            s.span_ns = b - a;
            // Each block's loads and last end, for the balance of the grid's work.
            let mut blocks: std::collections::BTreeMap<u32, (u64, u64)> =
                std::collections::BTreeMap::new();
            for e in &self.events {
                let blk = blocks.entry(e.block).or_insert((0, 0));
                blk.0 += u64::from(e.kind == TimelineKind::Load);
                blk.1 = blk.1.max(e.end_ns() - a);
            }
            s.blocks = blocks.len() as u32;
            s.block_loads_min = blocks.values().map(|b| b.0).min().unwrap_or(0);
            s.block_loads_max = blocks.values().map(|b| b.0).max().unwrap_or(0);
            s.block_end_min_ns = blocks.values().map(|b| b.1).min().unwrap_or(0);
            s.block_end_max_ns = blocks.values().map(|b| b.1).max().unwrap_or(0);
        }
        s
    }
}

/// Where a trace's time went. A warp's time is from its first event's start to its last
/// event's end; a warp that records only acquire and load is a producer, any other a consumer.
/// The blocks' loads and ends show how evenly the grid's work was dealt (a persistent
/// kernel's schedule: two halves of a grid at 614 and 469 loads a block were how a weight
/// gradient's tiles were seen to be walked, not claimed).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TimelineStats {
    pub events: u64,
    pub dropped: u32,
    /// From the earliest event to the latest end.
    pub span_ns: u64,
    pub producer_warps: u32,
    pub consumer_warps: u32,
    /// The producer warps' time, and how much of it they waited on empty barriers.
    pub producer_ns: u64,
    pub acquire_wait_ns: u64,
    pub loads: u64,
    /// The consumer warps' time, how much of it they waited on full barriers, and how much
    /// they held stages (wait end -> release).
    pub consumer_ns: u64,
    pub full_wait_ns: u64,
    pub held_ns: u64,
    pub releases: u64,
    /// The blocks with an event, the fewest and most loads a block issued, and the earliest
    /// and latest a block's last event ended (ns after the trace's first event).
    pub blocks: u32,
    pub block_loads_min: u64,
    pub block_loads_max: u64,
    pub block_end_min_ns: u64,
    pub block_end_max_ns: u64,
}

impl std::fmt::Display for TimelineStats {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let pct = |a: u64, b: u64| {
            if b == 0 {
                0.0
            } else {
                100.0 * a as f64 / b as f64
            }
        };
        write!(
            f,
            "{} events over {:.1} us ({} dropped); {} producer warp(s) waited {:.1}% of their time on empty barriers ({} loads); \
             {} consumer warp(s) waited {:.1}% of theirs on full barriers and held stages {:.1}% ({} releases); \
             {} block(s): {}-{} loads a block (mean {:.1}), each done {:.1}-{:.1} us in",
            self.events,
            self.span_ns as f64 / 1e3,
            self.dropped,
            self.producer_warps,
            pct(self.acquire_wait_ns, self.producer_ns),
            self.loads,
            self.consumer_warps,
            pct(self.full_wait_ns, self.consumer_ns),
            pct(self.held_ns, self.consumer_ns),
            self.releases,
            self.blocks,
            self.block_loads_min,
            self.block_loads_max,
            if self.blocks == 0 {
                0.0
            } else {
                self.loads as f64 / f64::from(self.blocks)
            },
            self.block_end_min_ns as f64 / 1e3,
            self.block_end_max_ns as f64 / 1e3
        )
    }
}

#[cfg(test)]
#[allow(clippy::panic, clippy::unwrap_used)]
pub(super) mod tests {
    use super::*;

    /// The 16 bytes the device writes for an event.
    pub fn device_bytes(kind: TimelineKind, stage: u32, sm: u32, start: u64, dur: u32) -> [u8; 16] {
        let mut b = [0u8; 16];
        b[..8].copy_from_slice(&start.to_le_bytes());
        b[8..12].copy_from_slice(&dur.to_le_bytes());
        b[12..].copy_from_slice(&(stage | (sm << 16) | (kind.code() << 28)).to_le_bytes());
        b
    }

    /// The device's slot index (the template's formula, written out again on purpose).
    pub fn device_slot(
        s: TimelineShape,
        block: u32,
        warp: u32,
        pipeline: u32,
        pass: u32,
        kind: TimelineKind,
    ) -> usize {
        let v = (((u64::from(block) * u64::from(s.warps) + u64::from(warp))
            * u64::from(s.pipelines)
            + u64::from(pipeline))
            * u64::from(s.passes)
            + u64::from(pass))
            * 4
            + u64::from(kind.code());
        v as usize
    }

    /// A producer warp 0 and a consumer warp 1 of 2 blocks over a 2-stage ring, 3 passes (of
    /// 4 slots), block b on pipeline b (of 2): acquire 100 ns at 1000 + 1000 p, the load after
    /// it, a wait of 50 + 100 p ns, the release at +500.
    pub fn sample() -> (TimelineShape, Vec<u8>) {
        let shape = TimelineShape {
            blocks: 2,
            warps: 2,
            pipelines: 2,
            passes: 4,
        };
        let mut bytes = vec![0u8; shape.bytes().unwrap() as usize];
        let mut put = |block, warp, pass, kind, start, dur| {
            let at = device_slot(shape, block, warp, block, pass, kind) * 16;
            bytes[at..at + 16].copy_from_slice(&device_bytes(
                kind,
                pass % 2,
                7 + block,
                start,
                dur,
            ));
        };
        for block in 0..2u32 {
            for pass in 0..3u32 {
                let t = 1_000_000 + u64::from(block) * 10 + u64::from(pass) * 1000;
                put(block, 0, pass, TimelineKind::Acquire, t, 100);
                put(block, 0, pass, TimelineKind::Load, t + 110, 0);
                put(block, 1, pass, TimelineKind::Wait, t + 100, 50 + pass * 100);
                put(block, 1, pass, TimelineKind::Release, t + 500, 0);
            }
        }
        (shape, bytes)
    }

    #[test]
    fn slots_decode_to_their_place() {
        let (shape, bytes) = sample();
        let t = Trace::decode(&bytes, shape, 0, vec!["ring".into()]).unwrap();
        assert_eq!(t.events.len(), 2 * 3 * 4);
        let w = t
            .events
            .iter()
            .find(|e| (e.block, e.warp, e.pass, e.kind) == (1, 1, 2, TimelineKind::Wait))
            .unwrap();
        assert_eq!(
            (
                w.sm,
                w.stage,
                w.pipeline,
                w.start_ns,
                w.duration_ns,
                w.end_ns()
            ),
            (8, 0, 1, 1_002_110, 250, 1_002_360)
        );
        // Slot order: block, warp, pipeline, pass, kind.
        let order: Vec<_> = t
            .events
            .iter()
            .map(|e| (e.block, e.warp, e.pass, e.kind))
            .collect();
        let mut sorted = order.clone();
        sorted.sort();
        assert_eq!(order, sorted);
        assert_eq!(t.blocks(), [0, 1]);
        assert_eq!(t.span_ns(), Some((1_000_000, 1_002_510)));
        let held = t.held();
        assert_eq!(held.len(), 6);
        assert_eq!((held[0].from_ns, held[0].to_ns), (1_000_150, 1_000_500));
        let s = t.stats();
        assert_eq!(
            (s.producer_warps, s.consumer_warps, s.loads, s.releases),
            (2, 2, 6, 6)
        );
        assert_eq!(s.acquire_wait_ns, 600);
        assert_eq!(s.full_wait_ns, 2 * (50 + 150 + 250));
        assert!(s.to_string().contains("2 consumer warp(s)"), "{s}");
        // Both blocks: 3 loads; block 0's last release at 1_002_500, block 1's at 1_002_510.
        assert_eq!(
            (
                s.blocks,
                s.block_loads_min,
                s.block_loads_max,
                s.block_end_min_ns,
                s.block_end_max_ns
            ),
            (2, 3, 3, 2_500, 2_510)
        );
        assert!(
            s.to_string()
                .contains("2 block(s): 3-3 loads a block (mean 3.0), each done 2.5-2.5 us in"),
            "{s}"
        );
        // One block's loads dropped: the balance shows it.
        let uneven = Trace {
            events: t
                .events
                .iter()
                .filter(|e| !(e.block == 1 && e.kind == TimelineKind::Load && e.pass > 0))
                .copied()
                .collect(),
            ..t.clone()
        }
        .stats();
        assert_eq!((uneven.block_loads_min, uneven.block_loads_max), (1, 3));
        assert_eq!(t.filter_blocks(|b| b == 1).blocks(), [1]);
        assert_eq!(t.pipeline_name(0), "ring");
        assert_eq!(t.pipeline_name(3), "pipeline 3");
        let csv = t.csv();
        let lines: Vec<&str> = csv.lines().collect();
        assert_eq!(lines.len(), 1 + t.events.len());
        assert_eq!(
            lines[0],
            "block,warp,pipeline,stage,pass,kind,start_ns,duration_ns"
        );
        let w = t.events[0];
        assert_eq!(
            lines[1],
            format!(
                "{},{},{},{},{},{},{},{}",
                w.block,
                w.warp,
                t.pipeline_name(w.pipeline),
                w.stage,
                w.pass,
                w.kind.name(),
                w.start_ns,
                w.duration_ns
            )
        );
    }

    #[test]
    fn a_slot_of_another_kind_or_size_is_refused() {
        let (shape, mut bytes) = sample();
        // Slot of block 0, warp 1, pass 0, Wait: write a release there.
        let at = device_slot(shape, 0, 1, 0, 0, TimelineKind::Wait) * 16;
        bytes[at..at + 16].copy_from_slice(&device_bytes(TimelineKind::Release, 0, 1, 5, 0));
        match Trace::decode(&bytes, shape, 0, Vec::new()) {
            Err(Error::TimelineCorrupt {
                block: 0,
                warp: 1,
                pass: 0,
                kind: "wait",
                found,
                ..
            }) => assert!(found.contains("kind code 3"), "{found}"),
            other => panic!("{other:?}"),
        }
        let (shape, bytes) = sample();
        assert!(matches!(
            Trace::decode(&bytes[16..], shape, 0, Vec::new()),
            Err(Error::InvalidTimeline { field: "bytes", .. })
        ));
        let zero = TimelineShape { passes: 0, ..shape };
        assert!(matches!(
            zero.slots(),
            Err(Error::InvalidTimeline {
                field: "passes",
                value: 0,
                ..
            })
        ));
        let huge = TimelineShape {
            blocks: u32::MAX,
            warps: 32,
            pipelines: u32::MAX,
            passes: u32::MAX,
        };
        assert!(matches!(huge.bytes(), Err(Error::InvalidTimeline { .. })));
    }
}
