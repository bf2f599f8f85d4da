//! Snitches: where an endpoint is (data center and rack), which
//! `NetworkTopologyStrategy` and `LOCAL_*` consistency levels depend on.

use std::net::IpAddr;

/// Cassandra's default data center and rack names (`SimpleSnitch`).
pub const DEFAULT_DATACENTER: &str = "datacenter1";
pub const DEFAULT_RACK: &str = "rack1";

/// Where endpoints are.
pub trait Snitch: Send + Sync {
    fn datacenter(&self, endpoint: IpAddr) -> String;
    fn rack(&self, endpoint: IpAddr) -> String;
    /// The class name `DESCRIBE CLUSTER` and `nodetool describecluster` show.
    fn name(&self) -> &'static str;
}

/// Every endpoint in `datacenter1`, `rack1` (Cassandra's `SimpleSnitch`).
#[derive(Debug, Default, Clone, Copy)]
pub struct SimpleSnitch;

impl Snitch for SimpleSnitch {
    fn datacenter(&self, _: IpAddr) -> String {
        DEFAULT_DATACENTER.into()
    }
    fn rack(&self, _: IpAddr) -> String {
        DEFAULT_RACK.into()
    }
    fn name(&self) -> &'static str {
        "org.apache.cassandra.locator.SimpleSnitch"
    }
}

/// Cassandra's dynamic snitch, reduced to what the coordinator uses: a
/// moving average of each endpoint's response time, and an ordering of
/// replicas for reads that leaves the static order alone unless its first
/// replica is slower than the fastest by more than the badness threshold
/// (`dynamic_snitch_badness_threshold`, 1.0 = twice as slow, Cassandra's
/// default).
#[derive(Debug)]
pub struct DynamicSnitch {
    scores: parking_lot::Mutex<std::collections::HashMap<IpAddr, f64>>,
    badness_threshold: f64,
}

impl Default for DynamicSnitch {
    fn default() -> Self {
        DynamicSnitch::new(1.0)
    }
}

impl DynamicSnitch {
    pub fn new(badness_threshold: f64) -> Self {
        DynamicSnitch {
            scores: Default::default(),
            badness_threshold,
        }
    }

    /// Records one response time of `endpoint`.
    pub fn record(&self, endpoint: IpAddr, latency: std::time::Duration) {
        let micros = latency.as_secs_f64() * 1e6;
        let mut s = self.scores.lock();
        let e = s.entry(endpoint).or_insert(micros);
        // an exponentially weighted average: recent responses count most
        *e = *e * 0.75 + micros * 0.25;
    }

    /// The average response time of `endpoint` in microseconds, if known.
    pub fn score(&self, endpoint: IpAddr) -> Option<f64> {
        self.scores.lock().get(&endpoint).copied()
    }

    /// Orders `endpoints`, given closest first by the static snitch, by
    /// response time when the first is too slow; endpoints never measured
    /// count as fast, so they get measured.
    pub fn sort(&self, endpoints: &mut [IpAddr]) {
        if endpoints.len() < 2 {
            return;
        }
        let s = self.scores.lock();
        let score = |e: &IpAddr| s.get(e).copied().unwrap_or(0.0);
        let best = endpoints.iter().map(score).fold(f64::INFINITY, f64::min);
        if score(&endpoints[0]) <= best * (1.0 + self.badness_threshold) {
            return;
        }
        endpoints.sort_by(|a, b| score(a).total_cmp(&score(b)));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn ip(i: u8) -> IpAddr {
        IpAddr::from([127, 0, 0, i])
    }

    #[test]
    fn a_slow_first_replica_is_moved_behind_faster_ones() {
        let d = DynamicSnitch::default();
        for _ in 0..10 {
            d.record(ip(2), Duration::from_millis(50));
            d.record(ip(3), Duration::from_millis(1));
            d.record(ip(4), Duration::from_millis(2));
        }
        let mut order = vec![ip(2), ip(3), ip(4)];
        d.sort(&mut order);
        assert_eq!(order, vec![ip(3), ip(4), ip(2)]);
        // within the badness threshold the static order stays
        let mut order = vec![ip(4), ip(3)];
        d.sort(&mut order);
        assert_eq!(order, vec![ip(4), ip(3)]);
        // the average follows the endpoint when it recovers
        for _ in 0..40 {
            d.record(ip(2), Duration::from_millis(1));
        }
        let mut order = vec![ip(2), ip(3), ip(4)];
        d.sort(&mut order);
        assert_eq!(order[0], ip(2));
        assert!(d.score(ip(9)).is_none());
    }
}
