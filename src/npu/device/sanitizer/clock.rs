//! Vector clocks: the happens-before order between the device's lanes.
//!
//! A lane is anything that runs work in its own order: a stream, a model's stream, a host
//! thread. Each lane counts the tasks it has run (its epoch); a lane's clock says, for every
//! lane, how many of that lane's tasks are ordered before the lane's current point. Task
//! `(lane l, epoch e)` happens before a point with clock `c` exactly when `e <= c[l]`. This
//! is the classic construction (Lamport, Mattern; FastTrack's epochs): synchronization joins
//! clocks, running a task ticks the lane's own entry.

/// A dense lane index (see `Sanitizer::lane`).
pub(crate) type Lane = u32;

/// One clock entry per lane; missing entries are zero (nothing of that lane is ordered
/// before).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Clock(Vec<u32>);

impl Clock {
    /// The entry of `lane`.
    pub fn get(&self, lane: Lane) -> u32 {
        self.0.get(lane as usize).copied().unwrap_or(0)
    }

    /// Advances `lane`'s own entry: the next task of the lane. Returns the new epoch.
    pub fn tick(&mut self, lane: Lane) -> u32 {
        let i = lane as usize;
        if self.0.len() <= i {
            self.0.resize(i + 1, 0);
        }
        self.0[i] += 1;
        self.0[i]
    }

    /// Orders everything `other` has seen before this clock's point (pointwise maximum).
    pub fn join(&mut self, other: &Clock) {
        if self.0.len() < other.0.len() {
            self.0.resize(other.0.len(), 0);
        }
        for (a, &b) in self.0.iter_mut().zip(&other.0) {
            *a = (*a).max(b);
        }
    }

    /// Whether task `(lane, epoch)` happens before this clock's point.
    pub fn has_seen(&self, lane: Lane, epoch: u32) -> bool {
        epoch <= self.get(lane)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn join_is_the_pointwise_maximum_and_tick_advances_one_lane() {
        let mut a = Clock::default();
        assert_eq!(a.tick(2), 1);
        assert_eq!(a.tick(2), 2);
        let mut b = Clock::default();
        b.tick(0);
        b.join(&a);
        assert_eq!((b.get(0), b.get(1), b.get(2)), (1, 0, 2));
        assert!(b.has_seen(2, 2));
        assert!(!b.has_seen(2, 3));
        assert!(!a.has_seen(0, 1), "a never synchronized with lane 0");
        assert!(a.has_seen(7, 0), "epoch 0 is before everything");
    }
}
