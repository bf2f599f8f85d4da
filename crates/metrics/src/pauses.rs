//! Pauses of the node (Cassandra's `GCInspector`, for a process without a
//! garbage collector): times the node could not run its work on time, such
//! as a stalled event loop or a slow fsync. `nodetool gcstats` reads and
//! resets them, as Cassandra's does.

use parking_lot::Mutex;
use std::time::{Duration, Instant};

#[derive(Debug)]
struct Since {
    start: Instant,
    max_ms: f64,
    total_ms: f64,
    sum_squares_ms: f64,
    count: u64,
}

impl Since {
    fn new() -> Since {
        Since {
            start: Instant::now(),
            max_ms: 0.0,
            total_ms: 0.0,
            sum_squares_ms: 0.0,
            count: 0,
        }
    }
}

/// Pauses since the last check, and in all.
#[derive(Debug)]
pub struct Pauses {
    since: Mutex<Since>,
    /// Every pause since start (the `Pauses` metric).
    pub total: crate::Counter,
}

impl Default for Pauses {
    fn default() -> Self {
        Pauses {
            since: Mutex::new(Since::new()),
            total: crate::Counter::default(),
        }
    }
}

/// What `nodetool gcstats` prints, as Cassandra's `GCInspector.getAndResetStats`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PauseStats {
    pub interval_ms: f64,
    pub max_ms: f64,
    pub total_ms: f64,
    pub sum_squares_ms: f64,
    pub reclaimed_mb: f64,
    pub count: f64,
}

impl PauseStats {
    /// The standard deviation of the pauses (NaN when there were none, as
    /// Cassandra prints it).
    pub fn stdev_ms(&self) -> f64 {
        let mean = self.total_ms / self.count;
        (self.sum_squares_ms / self.count - mean * mean).sqrt()
    }
}

/// The process's pauses (there is one event loop and one commit log per
/// process, as Cassandra has one garbage collector).
pub fn global() -> &'static Pauses {
    static PAUSES: std::sync::OnceLock<Pauses> = std::sync::OnceLock::new();
    PAUSES.get_or_init(Pauses::default)
}

/// A pause this long is logged in system.log (Cassandra's
/// `gc_log_threshold`), and this long as a warning (`gc_warn_threshold`).
pub const LOG_THRESHOLD: Duration = Duration::from_millis(200);
pub const WARN_THRESHOLD: Duration = Duration::from_millis(1000);

impl Pauses {
    pub fn record(&self, pause: Duration) {
        let ms = pause.as_secs_f64() * 1000.0;
        let mut s = self.since.lock();
        s.max_ms = s.max_ms.max(ms);
        s.total_ms += ms;
        s.sum_squares_ms += ms * ms;
        s.count += 1;
        self.total.inc();
    }

    /// The pauses since the last call, and a new interval from now.
    pub fn get_and_reset(&self) -> PauseStats {
        let s = std::mem::replace(&mut *self.since.lock(), Since::new());
        PauseStats {
            interval_ms: s.start.elapsed().as_millis() as f64,
            max_ms: s.max_ms,
            total_ms: s.total_ms,
            sum_squares_ms: s.sum_squares_ms,
            reclaimed_mb: 0.0,
            count: s.count as f64,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stats_cover_the_interval_and_reset() {
        let p = Pauses::default();
        let none = p.get_and_reset();
        assert_eq!(none.count, 0.0);
        assert!(none.stdev_ms().is_nan());
        p.record(Duration::from_millis(10));
        p.record(Duration::from_millis(30));
        let s = p.get_and_reset();
        assert_eq!((s.count, s.max_ms, s.total_ms), (2.0, 30.0, 40.0));
        assert!((s.stdev_ms() - 10.0).abs() < 1e-9);
        assert_eq!(p.get_and_reset().count, 0.0);
        assert_eq!(p.total.get(), 2);
    }
}
