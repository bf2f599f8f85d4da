//! The phi-accrual failure detector (Hayashibara et al.), as Cassandra's
//! `FailureDetector` and `ArrivalWindow` compute it.
//!
//! Every time gossip brings a newer heartbeat of a node, the time since the
//! previous one is recorded (the last 1000 such intervals, each at most
//! `max_interval`). The suspicion of a node is
//!
//! ```text
//! phi = (now - last arrival) / mean(intervals) * PHI_FACTOR,  PHI_FACTOR = 1 / ln 10
//! ```
//!
//! which is `-log10` of the probability that a heartbeat is still coming if
//! arrivals are exponentially distributed; a node is convicted when phi
//! exceeds `phi_convict_threshold` (8 by default: with heartbeats every
//! second, about 18.4 seconds of silence).
//!
//! Time is passed in, as monotonic nanoseconds, so a test or a simulation
//! decides what "now" is.

use std::collections::HashMap;
use std::net::IpAddr;

/// Intervals kept per node (Cassandra's `SAMPLE_SIZE`).
pub const SAMPLE_SIZE: usize = 1000;

/// Cassandra's gossip round, `Gossiper.intervalInMillis`, in nanoseconds.
pub const GOSSIP_INTERVAL_NANOS: u64 = 1_000_000_000;

/// The interval recorded for a node's first heartbeat: twice the gossip
/// interval (`cassandra.fd_initial_value_ms` defaults to 2000). Erring high
/// delays the first conviction a little rather than flapping a node that
/// was just discovered.
pub const DEFAULT_INITIAL_VALUE_NANOS: u64 = 2 * GOSSIP_INTERVAL_NANOS;

/// Longer intervals are not recorded (`cassandra.fd_max_interval_ms`,
/// defaulting to the initial value, 2000 ms): after a long partition the
/// node should still be convicted quickly next time instead of the mean
/// adapting to the outage. (For a while Cassandra's code read this
/// default in nanoseconds and then converted it as milliseconds, a cap of
/// about 23 days; its fix restored 2 s, which is what is used here.)
pub const DEFAULT_MAX_INTERVAL_NANOS: u64 = DEFAULT_INITIAL_VALUE_NANOS;

/// If this node itself did not interpret for longer than this, it was
/// paused (GC, suspended VM) and its silence is not the others' fault: no
/// conviction until as long again has passed (`cassandra.max_local_pause_in_ms`,
/// 5000).
pub const DEFAULT_MAX_LOCAL_PAUSE_NANOS: u64 = 5_000_000_000;

/// The default `phi_convict_threshold`.
pub const DEFAULT_PHI_CONVICT_THRESHOLD: f64 = 8.0;

/// `1 / ln 10`: turns `t / mean` (a natural-log suspicion) into the base-10
/// scale `phi_convict_threshold` has always been expressed in.
pub const PHI_FACTOR: f64 = std::f64::consts::LOG10_E;

/// The detector's tunables; [`Default`] is Cassandra's.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FailureDetectorConfig {
    /// Convict when phi exceeds this.
    pub phi_convict_threshold: f64,
    /// The interval recorded for a node's first heartbeat.
    pub initial_value_nanos: u64,
    /// Longer intervals are ignored.
    pub max_interval_nanos: u64,
    /// A gap this long between two interprets is a local pause.
    pub max_local_pause_nanos: u64,
}

impl Default for FailureDetectorConfig {
    fn default() -> Self {
        FailureDetectorConfig {
            phi_convict_threshold: DEFAULT_PHI_CONVICT_THRESHOLD,
            initial_value_nanos: DEFAULT_INITIAL_VALUE_NANOS,
            max_interval_nanos: DEFAULT_MAX_INTERVAL_NANOS,
            max_local_pause_nanos: DEFAULT_MAX_LOCAL_PAUSE_NANOS,
        }
    }
}

/// The last [`SAMPLE_SIZE`] intervals of one node in a ring buffer, with
/// their running mean (Cassandra's `ArrayBackedBoundedStats`).
#[derive(Debug, Clone)]
struct BoundedStats {
    intervals: Vec<u64>,
    // The next slot to overwrite once the buffer is full.
    next: usize,
    // u128: 1000 intervals of up to u64::MAX each cannot overflow it.
    sum: u128,
}

impl BoundedStats {
    fn new() -> Self {
        BoundedStats {
            intervals: Vec::new(),
            next: 0,
            sum: 0,
        }
    }

    fn add(&mut self, interval: u64) {
        if self.intervals.len() < SAMPLE_SIZE {
            self.intervals.push(interval);
        } else if let Some(slot) = self.intervals.get_mut(self.next) {
            self.sum -= u128::from(*slot);
            *slot = interval;
            self.next = (self.next + 1) % SAMPLE_SIZE;
        }
        self.sum += u128::from(interval);
    }

    fn mean(&self) -> f64 {
        if self.intervals.is_empty() {
            0.0
        } else {
            self.sum as f64 / self.intervals.len() as f64
        }
    }
}

/// The arrivals of one node's heartbeats.
#[derive(Debug, Clone)]
struct ArrivalWindow {
    last_arrival: Option<u64>,
    intervals: BoundedStats,
    // Raw t/mean of the last interpret, for `phi_values` (Cassandra's
    // `lastReportedPhi`).
    last_reported_phi: Option<f64>,
}

impl ArrivalWindow {
    fn new() -> Self {
        ArrivalWindow {
            last_arrival: None,
            intervals: BoundedStats::new(),
            last_reported_phi: None,
        }
    }

    fn add(&mut self, now_nanos: u64, config: &FailureDetectorConfig) {
        match self.last_arrival {
            Some(last) => {
                let interval = now_nanos.saturating_sub(last);
                if interval <= config.max_interval_nanos {
                    self.intervals.add(interval);
                } else {
                    tracing::trace!(interval, "failure detector: ignoring interval");
                }
            }
            None => self.intervals.add(config.initial_value_nanos),
        }
        self.last_arrival = Some(now_nanos);
    }

    /// `t / mean`, unscaled, as Cassandra's `ArrivalWindow.phi`.
    fn phi(&self, now_nanos: u64) -> f64 {
        let Some(last) = self.last_arrival else {
            return 0.0;
        };
        let t = now_nanos.saturating_sub(last) as f64;
        let mean = self.intervals.mean();
        if mean > 0.0 {
            t / mean
        } else if t > 0.0 {
            // Only reachable with an initial value of 0 and nothing but
            // zero-length intervals: any silence is then infinitely long.
            f64::INFINITY
        } else {
            0.0
        }
    }
}

/// Per-node phi-accrual suspicion. Not thread-safe by itself: the gossiper
/// that owns it serializes access.
#[derive(Debug, Clone)]
pub struct FailureDetector {
    config: FailureDetectorConfig,
    windows: HashMap<IpAddr, ArrivalWindow>,
    last_interpret: Option<u64>,
    last_pause: Option<u64>,
}

impl FailureDetector {
    /// A detector with Cassandra's defaults and the given threshold.
    pub fn new(phi_convict_threshold: f64) -> Self {
        Self::with_config(FailureDetectorConfig {
            phi_convict_threshold,
            ..FailureDetectorConfig::default()
        })
    }

    /// A detector with every tunable given.
    pub fn with_config(config: FailureDetectorConfig) -> Self {
        FailureDetector {
            config,
            windows: HashMap::new(),
            last_interpret: None,
            last_pause: None,
        }
    }

    /// The tunables.
    pub fn config(&self) -> &FailureDetectorConfig {
        &self.config
    }

    /// The current conviction threshold.
    pub fn phi_convict_threshold(&self) -> f64 {
        self.config.phi_convict_threshold
    }

    /// Changes the conviction threshold (`nodetool` / JMX can, in Cassandra).
    pub fn set_phi_convict_threshold(&mut self, phi: f64) {
        self.config.phi_convict_threshold = phi;
    }

    /// A heartbeat of `endpoint` arrived at `now_nanos`.
    pub fn report(&mut self, endpoint: IpAddr, now_nanos: u64) {
        let config = self.config;
        self.windows
            .entry(endpoint)
            .or_insert_with(ArrivalWindow::new)
            .add(now_nanos, &config);
    }

    /// The suspicion of `endpoint` at `now_nanos`, on the threshold's scale
    /// (`t / mean * PHI_FACTOR`); `None` for a node never reported.
    pub fn phi(&self, endpoint: IpAddr, now_nanos: u64) -> Option<f64> {
        self.windows
            .get(&endpoint)
            .map(|w| w.phi(now_nanos) * PHI_FACTOR)
    }

    /// The mean recorded interval of `endpoint`, in nanoseconds.
    pub fn mean_interval_nanos(&self, endpoint: IpAddr) -> Option<f64> {
        self.windows.get(&endpoint).map(|w| w.intervals.mean())
    }

    /// Decides whether `endpoint` is to be convicted at `now_nanos` (true:
    /// mark it down). As Cassandra, a node never reported is not convicted,
    /// and nothing is convicted for a while after this node itself was
    /// paused: a gap of more than `max_local_pause` since the previous
    /// interpret (of any node) means the silence was ours.
    pub fn interpret(&mut self, endpoint: IpAddr, now_nanos: u64) -> bool {
        let max_pause = self.config.max_local_pause_nanos;
        let threshold = self.config.phi_convict_threshold;
        let Some(window) = self.windows.get_mut(&endpoint) else {
            return false;
        };
        let previous = self.last_interpret.replace(now_nanos);
        if let Some(previous) = previous {
            let diff = now_nanos.saturating_sub(previous);
            if diff > max_pause {
                tracing::warn!(
                    "Not marking nodes down due to local pause of {diff}ns > {max_pause}ns"
                );
                self.last_pause = Some(now_nanos);
                return false;
            }
        }
        if let Some(pause) = self.last_pause {
            if now_nanos.saturating_sub(pause) < max_pause {
                tracing::debug!("Still not marking nodes down due to local pause");
                return false;
            }
        }
        let phi = window.phi(now_nanos);
        window.last_reported_phi = Some(phi);
        let convicted = PHI_FACTOR * phi > threshold;
        if convicted {
            tracing::trace!(
                %endpoint,
                phi = PHI_FACTOR * phi,
                threshold,
                mean_nanos = window.intervals.mean(),
                "convicting"
            );
        }
        convicted
    }

    /// Forgets `endpoint` (it left, or restarted while down: its intervals
    /// are relearned).
    pub fn remove(&mut self, endpoint: IpAddr) {
        self.windows.remove(&endpoint);
    }

    /// The phi of each node at its last interpret, on the threshold's scale
    /// (what `nodetool failuredetector` shows), sorted by address.
    pub fn phi_values(&self) -> Vec<(IpAddr, f64)> {
        let mut out: Vec<(IpAddr, f64)> = self
            .windows
            .iter()
            .filter(|(_, w)| w.intervals.mean() > 0.0)
            .filter_map(|(ep, w)| w.last_reported_phi.map(|phi| (*ep, phi * PHI_FACTOR)))
            .collect();
        out.sort_by_key(|a| a.0);
        out
    }
}

impl Default for FailureDetector {
    fn default() -> Self {
        Self::with_config(FailureDetectorConfig::default())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::Ipv4Addr;

    const S: u64 = 1_000_000_000;

    fn ip(n: u8) -> IpAddr {
        IpAddr::V4(Ipv4Addr::new(10, 0, 0, n))
    }

    #[test]
    fn phi_matches_cassandras_formula_on_a_hand_computed_example() {
        let mut fd = FailureDetector::default();
        let a = ip(1);
        // First arrival records the initial 2 s; then two 1 s intervals.
        fd.report(a, 10 * S);
        fd.report(a, 11 * S);
        fd.report(a, 12 * S);
        // mean = (2 + 1 + 1) / 3 = 4/3 s
        assert_eq!(fd.mean_interval_nanos(a), Some(4.0 * S as f64 / 3.0));
        // 4 s after the last arrival: t/mean = 3, phi = 3 / ln 10 = 1.30288...
        let phi = fd.phi(a, 16 * S).unwrap();
        assert!((phi - 3.0 / std::f64::consts::LN_10).abs() < 1e-12, "{phi}");
        assert!((phi - 1.302_883_445_9).abs() < 1e-9, "{phi}");
        // Conviction at phi 8: t = 8 * ln 10 * 4/3 s = 24.56 s after the
        // last arrival. Interpret every second, as the gossip task does, so
        // the local-pause guard stays quiet.
        let convict_at = 8.0 * std::f64::consts::LN_10 * 4.0 / 3.0;
        assert!((convict_at - 24.560_2).abs() < 1e-3);
        for second in 13..=36 {
            assert!(!fd.interpret(a, second * S), "convicted early at {second}");
        }
        assert!(
            !fd.interpret(a, 36 * S + S / 2),
            "12 + 24.5 s is still below 8"
        );
        assert!(
            fd.interpret(a, 36 * S + 6 * S / 10),
            "12 + 24.6 s is above 8"
        );
        assert!(fd.interpret(a, 37 * S));
        let values = fd.phi_values();
        assert_eq!(values.len(), 1);
        assert!(values[0].1 > 8.0);
    }

    #[test]
    fn unknown_nodes_are_never_convicted() {
        let mut fd = FailureDetector::default();
        assert!(!fd.interpret(ip(9), 1000 * S));
        assert_eq!(fd.phi(ip(9), 1000 * S), None);
    }

    #[test]
    fn intervals_above_the_maximum_are_not_recorded() {
        let mut fd = FailureDetector::default();
        let a = ip(1);
        fd.report(a, 0);
        fd.report(a, S);
        // a 10 s gap (a partition) is not learned
        fd.report(a, 11 * S);
        assert_eq!(fd.mean_interval_nanos(a), Some(1.5 * S as f64));
        // exactly the maximum is
        fd.report(a, 13 * S);
        assert_eq!(fd.mean_interval_nanos(a), Some(5.0 * S as f64 / 3.0));
    }

    #[test]
    fn the_window_keeps_the_last_thousand_intervals() {
        let mut fd = FailureDetector::default();
        let a = ip(1);
        let mut now = 0;
        fd.report(a, now);
        for _ in 0..1500 {
            now += S / 2;
            fd.report(a, now);
        }
        // The initial 2 s sample has been pushed out: only 0.5 s remain.
        assert_eq!(fd.mean_interval_nanos(a), Some(0.5 * S as f64));
        for _ in 0..600 {
            now += S;
            fd.report(a, now);
        }
        // 400 of 0.5 s and 600 of 1 s
        assert_eq!(fd.mean_interval_nanos(a), Some(0.8 * S as f64));
    }

    #[test]
    fn a_local_pause_suppresses_convictions_for_as_long_again() {
        let mut fd = FailureDetector::default();
        let a = ip(1);
        for s in 0..10 {
            fd.report(a, s * S);
            assert!(!fd.interpret(a, s * S));
        }
        // We were paused for 60 s: phi is huge but nothing is convicted...
        assert!(!fd.interpret(a, 69 * S));
        assert!(fd.phi(a, 69 * S).unwrap() > 8.0);
        // ...until 5 s have passed since the pause ended.
        assert!(!fd.interpret(a, 70 * S));
        assert!(!fd.interpret(a, 73 * S));
        assert!(fd.interpret(a, 74 * S + 1));
    }

    #[test]
    fn remove_forgets_the_intervals_and_the_threshold_can_change() {
        let mut fd = FailureDetector::new(5.0);
        let a = ip(1);
        fd.report(a, 0);
        fd.report(a, S);
        fd.remove(a);
        assert_eq!(fd.phi(a, 10 * S), None);
        assert_eq!(fd.phi_convict_threshold(), 5.0);
        fd.set_phi_convict_threshold(12.0);
        assert_eq!(fd.phi_convict_threshold(), 12.0);
    }
}
