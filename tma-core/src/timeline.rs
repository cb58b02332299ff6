//! The per-role timeline's vocabulary: what the generated pipeline helpers record when a
//! kernel is compiled with `TMA_TIMELINE` (and nothing at all without it), in the one table
//! the templates' codes and the runtime's decoder (`tma_runtime::timeline`) both read.
//!
//! Each pipeline helper a warp calls records one event per pass through a stage: the
//! producer's `acquire` (its wait on the empty barrier: a span) and `load` (the issue: an
//! instant); a consumer's `wait` (on the full barrier: a span) and `release` (an instant; from
//! the end of the wait to it, the warp held the stage: its compute). One lane per warp records
//! (the first active one), into a slot of its own: no atomics, no ordering between warps.

/// What a timeline event records. Its device code is also its slot within a pass.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum TimelineKind {
    /// The producer's `acquire(s)`: from the start of its wait on stage `s`'s empty barrier
    /// to the end (the consumers had released the stage).
    Acquire,
    /// The producer's `load(s)`: the moment it arms the full barrier and issues the copies.
    Load,
    /// A consumer's `wait(s)`: from the start of its wait on the full barrier to the end (the
    /// stage's bytes had landed).
    Wait,
    /// A consumer's `release(s)` (or `release_after_store`): the moment it gives the stage
    /// back.
    Release,
}

impl TimelineKind {
    /// Every kind with its device code (`TMA_TIMELINE_<KIND>`), which is its slot in a pass.
    pub const ALL: [(TimelineKind, u32); 4] = [
        (TimelineKind::Acquire, 0),
        (TimelineKind::Load, 1),
        (TimelineKind::Wait, 2),
        (TimelineKind::Release, 3),
    ];

    /// The kind of a device code.
    pub fn from_device_code(code: u32) -> Option<TimelineKind> {
        Self::ALL.iter().find(|(_, c)| *c == code).map(|(k, _)| *k)
    }

    /// Its device code and slot in a pass.
    pub fn code(self) -> u32 {
        Self::ALL
            .iter()
            .find(|(k, _)| *k == self)
            .map_or(0, |(_, c)| *c)
    }

    /// The name of the pipeline helper that records it.
    pub fn name(self) -> &'static str {
        match self {
            TimelineKind::Acquire => "acquire",
            TimelineKind::Load => "load",
            TimelineKind::Wait => "wait",
            TimelineKind::Release => "release",
        }
    }

    /// A wait with a duration (the others are instants).
    pub fn is_wait(self) -> bool {
        matches!(self, TimelineKind::Acquire | TimelineKind::Wait)
    }

    /// Recorded by the producer (else by a consumer).
    pub fn is_producer(self) -> bool {
        matches!(self, TimelineKind::Acquire | TimelineKind::Load)
    }
}

/// Slots of one pass of one warp through one pipeline: one per kind.
pub const KINDS: u32 = TimelineKind::ALL.len() as u32;

/// Bytes of one event (the device's 16-byte store): the start (`%globaltimer`, ns, u64), the
/// duration (ns, u32), then `stage | sm << 16 | kind << 28` (u32).
pub const EVENT_BYTES: u64 = 16;

/// Bytes of the device's `tma_timeline_config` (the `__constant__` the runtime writes):
/// the events' and the drop counter's device addresses (u64 each), then blocks, warps,
/// pipelines and passes (u32 each).
pub const CONFIG_BYTES: usize = 32;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_are_the_slots_in_order() {
        for (i, (k, c)) in TimelineKind::ALL.iter().enumerate() {
            assert_eq!(*c as usize, i);
            assert_eq!(TimelineKind::from_device_code(*c), Some(*k));
            assert_eq!(k.code(), *c);
        }
        assert_eq!(TimelineKind::from_device_code(KINDS), None);
    }
}
