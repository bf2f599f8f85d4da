//! Time behind a seam: the coordinator and the replicas read wall-clock time
//! (write timestamps, `nowInSec`) through a [`Clock`], so a test or a
//! simulation can run nodes on a clock it controls. Durations and timeouts
//! use tokio's timer, which tests pause and advance.

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::OnceLock;
use std::time::Instant;

/// Wall-clock time.
pub trait Clock: Send + Sync {
    /// Microseconds since the epoch, strictly increasing across calls (write
    /// timestamps are taken from it).
    fn now_micros(&self) -> i64;

    /// Seconds since the epoch (Cassandra's `nowInSec`).
    fn now_seconds(&self) -> i32 {
        (self.now_micros() / 1_000_000).clamp(0, i32::MAX as i64) as i32
    }

    /// Nanoseconds from an arbitrary origin on a clock that the wall
    /// clock's adjustments do not move (Cassandra's `nanoTime`): the
    /// failure detector measures heartbeat intervals with it.
    fn monotonic_nanos(&self) -> u64;
}

/// The system's clock.
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now_micros(&self) -> i64 {
        sibyl_types::timeuuid::timestamp_micros_now()
    }

    /// Time since the first reading in this process.
    fn monotonic_nanos(&self) -> u64 {
        static START: OnceLock<Instant> = OnceLock::new();
        let start = *START.get_or_init(Instant::now);
        u64::try_from(start.elapsed().as_nanos()).unwrap_or(u64::MAX)
    }
}

/// A clock that moves only when told to; each reading still advances it by
/// one microsecond so timestamps stay distinct.
#[derive(Debug)]
pub struct ManualClock {
    micros: AtomicI64,
}

impl ManualClock {
    pub fn new(start_micros: i64) -> Self {
        ManualClock {
            micros: AtomicI64::new(start_micros),
        }
    }

    /// Moves the clock forward (or back: clocks of different nodes disagree).
    pub fn advance(&self, by_micros: i64) {
        self.micros.fetch_add(by_micros, Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now_micros(&self) -> i64 {
        self.micros.fetch_add(1, Ordering::SeqCst)
    }

    /// The clock's microseconds in nanoseconds, without the step that
    /// [`Clock::now_micros`] takes: it moves only with
    /// [`ManualClock::advance`] (and goes back if that is given a negative
    /// step; 0 before the epoch).
    fn monotonic_nanos(&self) -> u64 {
        u64::try_from(self.micros.load(Ordering::SeqCst))
            .unwrap_or(0)
            .saturating_mul(1000)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_manual_clock_moves_when_told_and_never_repeats_a_timestamp() {
        let c = ManualClock::new(5_000_000);
        let a = c.now_micros();
        let b = c.now_micros();
        assert!(b > a);
        assert_eq!(c.now_seconds(), 5);
        c.advance(2_000_000);
        assert_eq!(c.now_seconds(), 7);
        let s = SystemClock;
        assert!(s.now_micros() < s.now_micros());
        assert!(s.monotonic_nanos() <= s.monotonic_nanos());
        let m = c.monotonic_nanos();
        assert_eq!(m, c.monotonic_nanos());
        c.advance(3);
        assert_eq!(c.monotonic_nanos(), m + 3000);
    }
}
