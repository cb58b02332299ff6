//! The numbers behind a pick: a candidate's time is the median of its block medians and its
//! spread their interquartile range; candidates are raced in rounds of one block each, and
//! one clearly slower than the leader (its 25th percentile above the leader's 75th) drops
//! out. Plain numbers in, no GPU: tested on the CPU.

/// Rounds every timed candidate runs before any drops out or the race ends.
pub(crate) const MIN_ROUNDS: u32 = 3;
/// Rounds after which the race ends even when no candidate is separated.
pub(crate) const MAX_ROUNDS: u32 = 40;

/// The `q` quantile (0..=1) of sorted `v`, linear between neighbours; NaN when empty.
pub(crate) fn quantile(sorted: &[f64], q: f64) -> f64 {
    let Some(last) = sorted.len().checked_sub(1) else {
        return f64::NAN;
    };
    let pos = q.clamp(0.0, 1.0) * last as f64;
    let (lo, frac) = (pos.floor() as usize, pos.fract());
    let hi = (lo + 1).min(last);
    sorted[lo] + (sorted[hi] - sorted[lo]) * frac
}

/// Median and interquartile range of some values.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Spread {
    pub median: f64,
    pub q25: f64,
    pub q75: f64,
}

impl Spread {
    pub fn of(values: &[f64]) -> Spread {
        let mut v = values.to_vec();
        v.sort_by(f64::total_cmp);
        Spread {
            median: quantile(&v, 0.5),
            q25: quantile(&v, 0.25),
            q75: quantile(&v, 0.75),
        }
    }
    /// True when all of this spread lies below all of `other`'s.
    pub fn clears(&self, other: &Spread) -> bool {
        self.q75 < other.q25
    }
}

/// Candidates raced in rounds: each round times one block of every candidate still in.
#[derive(Clone, Debug)]
pub(crate) struct Race {
    /// Block medians per candidate.
    blocks: Vec<Vec<f64>>,
    /// Still timed.
    active: Vec<bool>,
    /// The round after which a candidate dropped out as clearly slower.
    dropped_after: Vec<Option<u32>>,
    rounds: u32,
}

impl Race {
    /// A race over the candidates marked `true` (the others never run: they failed before).
    pub fn new(entrants: &[bool]) -> Race {
        Race {
            blocks: vec![Vec::new(); entrants.len()],
            active: entrants.to_vec(),
            dropped_after: vec![None; entrants.len()],
            rounds: 0,
        }
    }
    /// The candidates to time this round.
    pub fn active(&self) -> Vec<usize> {
        (0..self.active.len()).filter(|&i| self.active[i]).collect()
    }
    /// A block median of candidate `i`.
    pub fn record(&mut self, i: usize, block_median: f64) {
        if let Some(b) = self.blocks.get_mut(i) {
            b.push(block_median);
        }
    }
    /// Candidate `i` failed: it leaves the race and its blocks.
    pub fn remove(&mut self, i: usize) {
        if let (Some(a), Some(b)) = (self.active.get_mut(i), self.blocks.get_mut(i)) {
            *a = false;
            b.clear();
        }
    }
    /// Ends a round: from [`MIN_ROUNDS`] on, candidates clearly slower than the leader drop out.
    pub fn end_round(&mut self) {
        self.rounds += 1;
        if self.rounds < MIN_ROUNDS {
            return;
        }
        let Some(lead) = self.leader().and_then(|l| self.spread(l)) else {
            return;
        };
        for i in self.active() {
            if self.spread(i).is_some_and(|s| lead.clears(&s)) {
                self.active[i] = false;
                self.dropped_after[i] = Some(self.rounds);
            }
        }
    }
    /// Rounds run.
    pub fn rounds(&self) -> u32 {
        self.rounds
    }
    /// True when one candidate (or none) is left after [`MIN_ROUNDS`].
    pub fn decided(&self) -> bool {
        self.rounds >= MIN_ROUNDS && self.active().len() <= 1
    }
    /// The spread of candidate `i`'s block medians (`None`: never timed, or failed).
    pub fn spread(&self, i: usize) -> Option<Spread> {
        let b = self.blocks.get(i)?;
        (!b.is_empty()).then(|| Spread::of(b))
    }
    /// Candidate `i`'s block medians.
    pub fn blocks(&self, i: usize) -> &[f64] {
        self.blocks.get(i).map_or(&[], Vec::as_slice)
    }
    /// When candidate `i` dropped out.
    pub fn dropped_after(&self, i: usize) -> Option<u32> {
        self.dropped_after.get(i).copied().flatten()
    }
    /// The fastest by median among those still in (all timed ones when none is).
    pub fn leader(&self) -> Option<usize> {
        let pool: Vec<usize> = match self.active() {
            a if a.iter().any(|&i| self.spread(i).is_some()) => a,
            _ => (0..self.blocks.len()).collect(),
        };
        pool.into_iter()
            .filter_map(|i| self.spread(i).map(|s| (i, s.median)))
            .min_by(|a, b| a.1.total_cmp(&b.1))
            .map(|(i, _)| i)
    }
    /// True when the leader's spread clears every other timed candidate's.
    pub fn separated(&self) -> bool {
        let Some(l) = self.leader() else {
            return false;
        };
        let Some(lead) = self.spread(l) else {
            return false;
        };
        (0..self.blocks.len())
            .filter(|&i| i != l)
            .filter_map(|i| self.spread(i))
            .all(|s| lead.clears(&s))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_interpolate() {
        assert!(quantile(&[], 0.5).is_nan());
        assert_eq!(quantile(&[7.0], 0.25), 7.0);
        assert_eq!(quantile(&[1.0, 2.0, 3.0], 0.5), 2.0);
        assert_eq!(quantile(&[1.0, 2.0, 3.0], 0.25), 1.5);
        assert_eq!(quantile(&[1.0, 2.0, 3.0, 4.0], 0.5), 2.5);
        assert_eq!(quantile(&[1.0, 2.0, 3.0, 4.0, 5.0], 0.75), 4.0);
        let s = Spread::of(&[5.0, 1.0, 3.0, 2.0, 4.0]);
        assert_eq!((s.median, s.q25, s.q75), (3.0, 2.0, 4.0));
        // One wild block moves the median and the quartiles little.
        let s = Spread::of(&[10.0, 10.1, 9.9, 10.0, 50.0]);
        assert_eq!((s.median, s.q25, s.q75), (10.0, 10.0, 10.1));
    }

    /// Runs a race on fixed block medians per candidate (round r takes the r-th, cycling).
    fn race(times: &[&[f64]], entrants: &[bool]) -> Race {
        let mut r = Race::new(entrants);
        while !r.decided() && r.rounds() < MAX_ROUNDS {
            let round = r.rounds() as usize;
            for i in r.active() {
                r.record(i, times[i][round % times[i].len()]);
            }
            r.end_round();
        }
        r
    }

    #[test]
    fn a_clear_winner_is_separated_and_the_others_drop_out() {
        let r = race(
            &[&[12.0, 12.1, 11.9], &[10.0, 10.2, 9.9], &[30.0, 31.0, 29.0]],
            &[true; 3],
        );
        assert_eq!(r.leader(), Some(1));
        assert!(r.separated());
        assert_eq!(r.rounds(), MIN_ROUNDS, "decided as soon as allowed");
        assert_eq!((r.dropped_after(0), r.dropped_after(2)), (Some(3), Some(3)));
        assert_eq!(r.blocks(1).len(), 3);
    }

    #[test]
    fn overlapping_candidates_race_to_the_limit_unseparated() {
        // Two candidates whose blocks interleave: neither clears the other.
        let r = race(
            &[
                &[10.0, 10.3, 10.1, 10.4],
                &[10.2, 10.0, 10.35, 10.05],
                &[20.0],
            ],
            &[true; 3],
        );
        assert_eq!(r.rounds(), MAX_ROUNDS);
        assert!(!r.separated());
        assert_eq!(r.dropped_after(2), Some(MIN_ROUNDS));
        assert_eq!(r.active(), vec![0, 1]);
        // The leader is the lower median.
        let (a, b) = (r.spread(0).map(|s| s.median), r.spread(1).map(|s| s.median));
        assert_eq!(r.leader(), Some(if a < b { 0 } else { 1 }));
    }

    #[test]
    fn failed_and_absent_candidates_never_lead() {
        let mut r = Race::new(&[false, true, true]);
        assert_eq!(r.active(), vec![1, 2]);
        r.record(1, 1.0);
        r.record(2, 5.0);
        r.remove(1);
        r.end_round();
        assert_eq!(r.leader(), Some(2));
        assert_eq!(r.spread(0), None);
        assert_eq!(r.spread(1), None);
        // A lone candidate is decided after the minimum rounds, and separated from nobody.
        let r = race(&[&[1.0], &[2.0, 2.1]], &[false, true]);
        assert_eq!(
            (r.rounds(), r.leader(), r.separated()),
            (MIN_ROUNDS, Some(1), true)
        );
        assert_eq!(Race::new(&[false]).leader(), None);
    }
}
