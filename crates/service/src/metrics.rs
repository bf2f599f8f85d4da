//! The coordinator's metrics: Cassandra's `ClientRequest` metrics (per
//! operation, and per consistency level for reads and writes), its
//! `ReadRepair` counts, and the counts Sibyl's operator views add.

use crate::error::ServiceError;
pub use sibyl_metrics::Counter;
use sibyl_metrics::{Collection, MetricName, Timer};
use sibyl_protocol::Consistency;
use std::sync::Arc;

/// One kind of client request's figures (Cassandra's `ClientRequestMetrics`).
#[derive(Debug, Default)]
pub struct RequestMetrics {
    pub latency: Timer,
    pub timeouts: Counter,
    pub unavailables: Counter,
    pub failures: Counter,
}

impl RequestMetrics {
    fn record(
        &self,
        started: sibyl_metrics::Instant,
        now: sibyl_metrics::Instant,
        error: Option<&ServiceError>,
    ) {
        self.latency.record_span(started, now);
        match error {
            Some(
                ServiceError::Unavailable { .. } | ServiceError::UnavailableInDatacenter { .. },
            ) => self.unavailables.inc(),
            Some(ServiceError::ReadTimeout { .. } | ServiceError::WriteTimeout { .. }) => {
                self.timeouts.inc()
            }
            Some(ServiceError::ReadFailure { .. } | ServiceError::Replica(_)) => {
                self.failures.inc()
            }
            _ => {}
        }
    }

    fn collect(&self, c: &mut Collection, scope: &str) {
        let n = |name: &str| MetricName::new("ClientRequest", name).scope(scope);
        c.timer(n("Latency"), &self.latency);
        c.counter(n("Timeouts"), self.timeouts.get());
        c.counter(n("Unavailables"), self.unavailables.get());
        c.counter(n("Failures"), self.failures.get());
    }
}

/// What a client request was, as Cassandra's metric scopes name it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Operation {
    Read,
    Write,
    RangeSlice,
    CasRead,
    CasWrite,
}

/// Every client request this node coordinated.
#[derive(Debug, Default)]
pub struct ClientRequestMetrics {
    pub read: RequestMetrics,
    pub write: RequestMetrics,
    pub range_slice: RequestMetrics,
    pub cas_read: RequestMetrics,
    pub cas_write: RequestMetrics,
    /// Reads and writes per consistency level, in `Consistency::ALL`'s order.
    read_by_level: [RequestMetrics; 11],
    write_by_level: [RequestMetrics; 11],
    /// Conditional updates whose conditions did not hold.
    pub cas_condition_not_met: Counter,
}

fn level_index(cl: Consistency) -> usize {
    Consistency::ALL.iter().position(|c| *c == cl).unwrap_or(0)
}

impl ClientRequestMetrics {
    /// Reads (single-partition, range, serial) that timed out.
    pub fn read_timeouts(&self) -> u64 {
        self.read.timeouts.get() + self.range_slice.timeouts.get() + self.cas_read.timeouts.get()
    }

    /// Writes (plain and conditional) that timed out.
    pub fn write_timeouts(&self) -> u64 {
        self.write.timeouts.get() + self.cas_write.timeouts.get()
    }

    pub fn of(&self, op: Operation) -> &RequestMetrics {
        match op {
            Operation::Read => &self.read,
            Operation::Write => &self.write,
            Operation::RangeSlice => &self.range_slice,
            Operation::CasRead => &self.cas_read,
            Operation::CasWrite => &self.cas_write,
        }
    }

    /// Records one request that started at `started`, ended at `now` with
    /// `error` (or none); reads and writes are also counted under their
    /// level.
    pub fn record(
        &self,
        op: Operation,
        cl: Consistency,
        started: sibyl_metrics::Instant,
        now: sibyl_metrics::Instant,
        error: Option<&ServiceError>,
    ) {
        self.of(op).record(started, now, error);
        match op {
            Operation::Read => self.read_by_level[level_index(cl)].record(started, now, error),
            Operation::Write => self.write_by_level[level_index(cl)].record(started, now, error),
            _ => {}
        }
    }

    pub fn collect(&self, c: &mut Collection) {
        self.read.collect(c, "Read");
        self.write.collect(c, "Write");
        self.range_slice.collect(c, "RangeSlice");
        self.cas_read.collect(c, "CASRead");
        self.cas_write.collect(c, "CASWrite");
        for (i, cl) in Consistency::ALL.iter().enumerate() {
            self.read_by_level[i].collect(c, &format!("Read-{}", cl.name()));
            self.write_by_level[i].collect(c, &format!("Write-{}", cl.name()));
        }
        c.counter(
            MetricName::new("ClientRequest", "ConditionNotMet").scope("CASWrite"),
            self.cas_condition_not_met.get(),
        );
    }
}

/// A table's requests as their coordinator saw them (Cassandra's table
/// metrics `CoordinatorReadLatency`, `CoordinatorWriteLatency` and
/// `CoordinatorScanLatency`).
#[derive(Debug, Default)]
pub struct CoordinatorTableMetrics {
    pub read: Timer,
    pub write: Timer,
    pub scan: Timer,
}

/// The coordinator's counts (Cassandra's `ClientRequestMetrics`,
/// `ReadRepairMetrics` and the table metrics' speculative retries), kept
/// for the operator's views.
#[derive(Debug, Default)]
pub struct ProxyMetrics {
    pub requests: ClientRequestMetrics,
    pub cas_contention: Counter,
    pub read_repairs: Counter,
    pub speculative_retries: Counter,
    pub batchlog_replays: Counter,
    pub counter_forwards: Counter,
    /// Looked in on every request: loaded without a lock; a table's
    /// first request replaces the map with a copy that has it (`rcu`).
    tables: arc_swap::ArcSwap<
        sibyl_types::fast_map::FastHashMap<uuid::Uuid, Arc<CoordinatorTableMetrics>>,
    >,
}

impl ProxyMetrics {
    /// The coordinator's figures of one table.
    pub fn table(&self, id: uuid::Uuid) -> Arc<CoordinatorTableMetrics> {
        if let Some(t) = self.tables.load().get(&id) {
            return t.clone();
        }
        self.add_table(id)
    }

    /// Runs `f` on a table's figures without taking a reference to them
    /// (on every request's path: a shared reference count would be written
    /// by every thread).
    pub fn with_table<R>(
        &self,
        id: uuid::Uuid,
        f: impl FnOnce(&CoordinatorTableMetrics) -> R,
    ) -> R {
        if let Some(t) = self.tables.load().get(&id) {
            return f(t);
        }
        f(&self.add_table(id))
    }

    /// A table's figures, made if it has none yet.
    fn add_table(&self, id: uuid::Uuid) -> Arc<CoordinatorTableMetrics> {
        let mut t = None;
        self.tables.rcu(|tables| {
            let mut tables = sibyl_types::fast_map::FastHashMap::clone(tables);
            t = Some(tables.entry(id).or_default().clone());
            tables
        });
        // (rcu runs the closure at least once)
        t.unwrap_or_default()
    }

    /// Every table's figures so far.
    pub fn tables(&self) -> Vec<(uuid::Uuid, Arc<CoordinatorTableMetrics>)> {
        self.tables
            .load()
            .iter()
            .map(|(id, t)| (*id, t.clone()))
            .collect()
    }

    /// Everything, tables named by `name_of` (tables it does not name
    /// are gone and left out).
    pub fn collect(
        &self,
        c: &mut Collection,
        name_of: &dyn Fn(uuid::Uuid) -> Option<(String, String)>,
    ) {
        // a dropped table's figures go with it
        self.tables.rcu(|tables| {
            let mut tables = sibyl_types::fast_map::FastHashMap::clone(tables);
            tables.retain(|id, _| name_of(*id).is_some());
            tables
        });
        for (id, t) in self.tables.load().iter() {
            let Some((ks, table)) = name_of(*id) else {
                continue;
            };
            let n = |name: &str| MetricName::table(&ks, &table, name);
            c.timer(n("CoordinatorReadLatency"), &t.read);
            c.timer(n("CoordinatorWriteLatency"), &t.write);
            c.timer(n("CoordinatorScanLatency"), &t.scan);
        }
        self.requests.collect(c);
        c.counter(
            MetricName::new("ReadRepair", "RepairedBlocking"),
            self.read_repairs.get(),
        );
        c.counter(
            MetricName::new("ReadRepair", "SpeculatedRead"),
            self.speculative_retries.get(),
        );
    }
}
