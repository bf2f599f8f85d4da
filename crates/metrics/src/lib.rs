//! What an operator watches, under Cassandra's metric names
//! (`org.apache.cassandra.metrics:type=…,keyspace=…,scope=…,name=…`).
//!
//! The parts of the node keep their own counts in the types here
//! ([`Counter`], [`Gauge`], [`Histogram`], [`Timer`], and the thread pools'
//! [`Stage`]s); a node's [`Registry`] holds collectors that read them at
//! scrape time, so recording never takes a lock and never allocates. The
//! [`prometheus`] module renders one collection in the Prometheus text
//! format, with the families and labels of instaclustr's
//! `cassandra-exporter`, so that its dashboards work as they are.

pub mod histogram;
pub mod pauses;
pub mod prometheus;

use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::OnceLock;
use std::time::Duration;

/// The clock latencies are measured with: the CPU's time-stamp counter
/// where it is invariant, scaled to nanoseconds (quanta), else the OS's
/// monotonic clock. A reading costs 9-10 ns on this project's machine
/// against 22 ns for `std::time::Instant` (a vDSO call), and a write reads
/// it four times for its latencies. [`calibrate`] it at start.
pub type Instant = quanta::Instant;

/// Calibrates the latency clock against the OS's (10-20 ms, once per
/// process): at start, so the first request does not pay for it.
pub fn calibrate() {
    let _ = Instant::now();
}

pub use histogram::{bucket_offsets, percentile_of, use_stripe, Histogram};

/// A count that only grows (Cassandra's `Counter` and `Meter` counts).
#[derive(Debug, Default)]
pub struct Counter(AtomicU64);

impl Counter {
    pub fn inc(&self) {
        self.add(1);
    }
    pub fn add(&self, n: u64) {
        self.0.fetch_add(n, Ordering::Relaxed);
    }
    pub fn get(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

/// A value that goes up and down.
#[derive(Debug, Default)]
pub struct Gauge(AtomicI64);

impl Gauge {
    pub fn add(&self, n: i64) {
        self.0.fetch_add(n, Ordering::Relaxed);
    }
    pub fn set(&self, n: i64) {
        self.0.store(n, Ordering::Relaxed);
    }
    pub fn get(&self) -> i64 {
        self.0.load(Ordering::Relaxed)
    }
}

/// The percentiles Cassandra's metrics publish (and nodetool prints).
pub const QUANTILES: [f64; 6] = [0.5, 0.75, 0.95, 0.98, 0.99, 0.999];

/// One histogram or timer read at once.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Snapshot {
    /// Values recorded since start, and their sum.
    pub count: u64,
    pub sum: f64,
    /// [`QUANTILES`] of the recent values (a timer) or of all of them.
    pub quantiles: [f64; 6],
    pub min: f64,
    pub max: f64,
    /// A timer's values per second over this minute and the one before
    /// (what Cassandra's latency tables call `per_second`); 0 for a
    /// histogram.
    pub rate: f64,
}

impl Snapshot {
    /// Everything `h` holds.
    pub fn of(h: &Histogram) -> Snapshot {
        let counts = h.counts();
        Snapshot {
            count: h.count(),
            sum: h.sum() as f64,
            quantiles: QUANTILES.map(|q| percentile_of(&counts, q * 100.0, h.max()) as f64),
            min: h.min() as f64,
            max: h.max() as f64,
            rate: 0.0,
        }
    }
}

static START: OnceLock<Instant> = OnceLock::new();

fn minute_of(at: Instant) -> u64 {
    // every timer of every request asks: the thread remembers the minute it
    // last computed, from when to when it runs (comparing instants is
    // cheaper than subtracting them)
    thread_local! {
        static LAST: std::cell::Cell<Option<(Instant, Instant, u64)>> = const { std::cell::Cell::new(None) };
    }
    LAST.with(|last| match last.get() {
        Some((from, to, minute)) if from <= at && at < to => minute,
        _ => {
            let start = *START.get_or_init(Instant::now);
            let minute = at.saturating_duration_since(start).as_secs() / 60;
            let from = start + Duration::from_secs(minute * 60);
            last.set(Some((from, from + Duration::from_secs(60), minute)));
            minute
        }
    })
}

fn minute_now() -> u64 {
    minute_of(Instant::now())
}

/// A latency in microseconds (Cassandra's `Timer`): the count and sum since
/// start, every value in [`all`](Self::all), and the recent ones (this
/// minute and the one before) for percentiles that follow the load, as
/// Cassandra's decaying reservoir does.
///
/// The recent values are not recorded apart: they are what `all` counts
/// beyond its counts when the minute before this one began, kept when the
/// minute turns (a request's timers record once each, not twice).
#[derive(Debug, Default)]
pub struct Timer {
    all: Histogram,
    /// The largest value of this minute (`maxes[current]`) and of the
    /// minute before.
    maxes: [AtomicU64; 2],
    /// The minute `maxes[current]` and `marks.this` are of.
    minute: AtomicU64,
    current: AtomicU64,
    marks: parking_lot::Mutex<Marks>,
}

/// `all`'s bucket counts when the minute before the timer's began
/// (`before`) and when its own did (`this`); empty: none yet.
#[derive(Debug, Default)]
struct Marks {
    before: Vec<u64>,
    this: Vec<u64>,
}

impl Timer {
    pub fn record(&self, micros: u64) {
        self.record_in_minute(micros, minute_now());
    }

    /// Records the time since `since`, reading the clock once.
    pub fn record_elapsed(&self, since: Instant) {
        self.record_span(since, Instant::now());
    }

    /// Records the time from `since` to `now` (several timers of one
    /// request share one reading of the clock).
    pub fn record_span(&self, since: Instant, now: Instant) {
        self.record_in_minute(
            now.saturating_duration_since(since).as_micros() as u64,
            minute_of(now),
        );
    }

    fn record_in_minute(&self, micros: u64, minute: u64) {
        self.roll_to(minute);
        self.all
            .record_in(histogram::bucket_of(micros), micros, true);
        let max = &self.maxes[self.current.load(Ordering::Acquire) as usize & 1];
        if micros > max.load(Ordering::Relaxed) {
            max.fetch_max(micros, Ordering::Relaxed);
        }
    }

    /// Makes `minute` the timer's: what `all` counts now is where it
    /// begins.
    fn roll_to(&self, minute: u64) {
        if self.minute.load(Ordering::Acquire) == minute {
            return;
        }
        let mut marks = self.marks.lock();
        let was = self.minute.load(Ordering::Acquire);
        if was >= minute {
            return;
        }
        let cur = self.current.load(Ordering::Acquire) as usize & 1;
        let counts = self.all.counts();
        if minute == was + 1 {
            marks.before = std::mem::replace(&mut marks.this, counts);
            self.maxes[cur ^ 1].store(0, Ordering::Relaxed);
            self.current.store((cur ^ 1) as u64, Ordering::Release);
        } else {
            // the minute before this one saw nothing
            marks.before = counts.clone();
            marks.this = counts;
            self.maxes[0].store(0, Ordering::Relaxed);
            self.maxes[1].store(0, Ordering::Relaxed);
        }
        self.minute.store(minute, Ordering::Release);
    }

    /// Bucket counts of this minute and the one before, and their maximum.
    fn recent(&self, minute: u64) -> (Vec<u64>, u64) {
        self.roll_to(minute);
        let marks = self.marks.lock();
        let mut counts = self.all.counts();
        for (c, m) in counts.iter_mut().zip(&marks.before) {
            *c = c.saturating_sub(*m);
        }
        let max = self
            .maxes
            .iter()
            .map(|m| m.load(Ordering::Relaxed))
            .max()
            .unwrap_or(0);
        (counts, max)
    }

    /// Every value since start (`nodetool tablehistograms` and the means).
    pub fn all(&self) -> &Histogram {
        &self.all
    }

    pub fn count(&self) -> u64 {
        self.all.count()
    }

    /// Count and sum since start; percentiles, minimum, maximum and rate
    /// of the values of this minute and the one before.
    pub fn snapshot(&self) -> Snapshot {
        let now = Instant::now();
        let minute = minute_of(now);
        let (mut s, recent) = self.snapshot_in_minute(minute);
        let into_minute = START
            .get()
            .map(|s| now.saturating_duration_since(*s).as_secs_f64() % 60.0)
            .unwrap_or(0.0);
        let span = if minute == 0 {
            into_minute
        } else {
            60.0 + into_minute
        };
        if span > 0.0 {
            s.rate = recent as f64 / span;
        }
        s
    }

    /// The snapshot (its rate left at 0), and how many values it has of
    /// this minute and the one before.
    fn snapshot_in_minute(&self, minute: u64) -> (Snapshot, u64) {
        let (counts, max) = self.recent(minute);
        let min = counts
            .iter()
            .position(|c| *c > 0)
            .map(|i| {
                if i == 0 {
                    0
                } else {
                    bucket_offsets()[i - 1] + 1
                }
            })
            .unwrap_or(0);
        let snapshot = Snapshot {
            count: self.all.count(),
            sum: self.all.sum() as f64,
            quantiles: QUANTILES.map(|q| percentile_of(&counts, q * 100.0, max) as f64),
            min: min as f64,
            max: max as f64,
            rate: 0.0,
        };
        (snapshot, counts.iter().sum())
    }
}

/// Events and their rates (Cassandra's `Meter`, after Codahale's): the
/// count, the mean rate since start, and the one-, five- and fifteen-minute
/// exponentially weighted moving averages, ticked every 5 seconds. Meant
/// for rare events (compactions): marking takes a lock.
#[derive(Debug)]
pub struct Meter {
    started: Instant,
    state: parking_lot::Mutex<MeterState>,
}

#[derive(Debug)]
struct MeterState {
    count: u64,
    /// Events since the last tick.
    uncounted: u64,
    last_tick: Instant,
    /// Per-second rates of the 1, 5 and 15 minute averages; None before
    /// the first tick.
    rates: [Option<f64>; 3],
}

/// Codahale's tick interval and averaging windows.
const METER_TICK_SECS: f64 = 5.0;
const METER_WINDOWS_MINUTES: [f64; 3] = [1.0, 5.0, 15.0];

impl Default for Meter {
    fn default() -> Self {
        Meter::starting_at(Instant::now())
    }
}

impl Meter {
    fn starting_at(at: Instant) -> Meter {
        Meter {
            started: at,
            state: parking_lot::Mutex::new(MeterState {
                count: 0,
                uncounted: 0,
                last_tick: at,
                rates: [None; 3],
            }),
        }
    }

    pub fn mark(&self) {
        self.mark_at(1, Instant::now());
    }

    fn mark_at(&self, n: u64, at: Instant) {
        let mut s = self.state.lock();
        Self::tick_until(&mut s, at);
        s.count += n;
        s.uncounted += n;
    }

    /// Applies the ticks due by `at`: the first folds the events since the
    /// last tick, the others decay the averages towards zero.
    fn tick_until(s: &mut MeterState, at: Instant) {
        let due =
            (at.saturating_duration_since(s.last_tick).as_secs_f64() / METER_TICK_SECS) as u64;
        for _ in 0..due {
            let instant = s.uncounted as f64 / METER_TICK_SECS;
            s.uncounted = 0;
            for (rate, minutes) in s.rates.iter_mut().zip(METER_WINDOWS_MINUTES) {
                let alpha = 1.0 - (-METER_TICK_SECS / 60.0 / minutes).exp();
                *rate = Some(match *rate {
                    None => instant,
                    Some(r) => r + alpha * (instant - r),
                });
            }
        }
        s.last_tick += std::time::Duration::from_secs_f64(due as f64 * METER_TICK_SECS);
    }

    pub fn count(&self) -> u64 {
        self.state.lock().count
    }

    /// Events per second since start.
    pub fn mean_rate(&self) -> f64 {
        self.mean_rate_at(Instant::now())
    }

    fn mean_rate_at(&self, at: Instant) -> f64 {
        let count = self.state.lock().count;
        let secs = at.saturating_duration_since(self.started).as_secs_f64();
        if count == 0 || secs == 0.0 {
            0.0
        } else {
            count as f64 / secs
        }
    }

    /// Events per second, averaged over the last fifteen minutes.
    pub fn fifteen_minute_rate(&self) -> f64 {
        self.rate_at(2, Instant::now())
    }

    fn rate_at(&self, window: usize, at: Instant) -> f64 {
        let mut s = self.state.lock();
        Self::tick_until(&mut s, at);
        s.rates[window].unwrap_or(0.0)
    }
}

/// A thread pool's counts (Cassandra's `ThreadPoolMetrics`): Sibyl runs
/// tasks on one async runtime, so a stage is the kind of work, counted
/// where that work is queued, runs and ends.
#[derive(Debug)]
pub struct Stage {
    /// Cassandra's pool name (`ReadStage`) and path (`request`).
    pub name: &'static str,
    pub path: &'static str,
    // counts that only grow, one write per event (pending is queued less
    // dequeued, active started less completed): every request passes
    // through two stages from every thread, so each thread counts in its
    // own stripe (as histograms do) and reads add the stripes up
    counts: [StageCounts; histogram::STRIPES],
    blocked: AtomicI64,
    blocked_total: AtomicU64,
}

/// A stage's counts from the threads of one stripe, on a cache line of
/// their own.
#[derive(Debug)]
#[repr(align(64))]
struct StageCounts {
    queued: AtomicU64,
    dequeued: AtomicU64,
    started: AtomicU64,
    completed: AtomicU64,
}

impl StageCounts {
    const fn new() -> StageCounts {
        StageCounts {
            queued: AtomicU64::new(0),
            dequeued: AtomicU64::new(0),
            started: AtomicU64::new(0),
            completed: AtomicU64::new(0),
        }
    }
}

/// Work waiting in a stage; [`start`](Queued::start) it to run it.
pub struct Queued(&'static Stage);
/// Work running in a stage; dropping it completes it.
pub struct Running(&'static Stage);
/// Work held back by a bound (Cassandra's blocked tasks), while it lives.
pub struct Blocked(&'static Stage);

impl Stage {
    pub const fn new(name: &'static str, path: &'static str) -> Stage {
        Stage {
            name,
            path,
            counts: [const { StageCounts::new() }; histogram::STRIPES],
            blocked: AtomicI64::new(0),
            blocked_total: AtomicU64::new(0),
        }
    }

    /// The calling thread's stripe.
    fn mine(&self) -> &StageCounts {
        &self.counts[histogram::stripe_of_thread()]
    }

    /// One count summed over the stripes.
    fn sum(&self, count: impl Fn(&StageCounts) -> &AtomicU64) -> u64 {
        self.counts
            .iter()
            .map(|c| count(c).load(Ordering::Relaxed))
            .fold(0, u64::wrapping_add)
    }

    pub fn enqueue(&'static self) -> Queued {
        self.mine().queued.fetch_add(1, Ordering::Relaxed);
        Queued(self)
    }

    /// Work that starts at once.
    pub fn start(&'static self) -> Running {
        self.mine().started.fetch_add(1, Ordering::Relaxed);
        Running(self)
    }

    pub fn block(&'static self) -> Blocked {
        self.blocked.fetch_add(1, Ordering::Relaxed);
        self.blocked_total.fetch_add(1, Ordering::Relaxed);
        Blocked(self)
    }

    pub fn active(&self) -> i64 {
        // the end is read first: a task that starts and ends between the
        // two reads is not counted as running
        let completed = self.sum(|c| &c.completed);
        (self.sum(|c| &c.started) as i64 - completed as i64).max(0)
    }
    pub fn pending(&self) -> i64 {
        let dequeued = self.sum(|c| &c.dequeued);
        (self.sum(|c| &c.queued) as i64 - dequeued as i64).max(0)
    }
    pub fn completed(&self) -> u64 {
        self.sum(|c| &c.completed)
    }
    pub fn blocked(&self) -> i64 {
        self.blocked.load(Ordering::Relaxed)
    }
    pub fn blocked_total(&self) -> u64 {
        self.blocked_total.load(Ordering::Relaxed)
    }
}

impl Queued {
    pub fn start(self) -> Running {
        let s = self.0;
        drop(self);
        s.start()
    }
}

impl Drop for Queued {
    fn drop(&mut self) {
        self.0.mine().dequeued.fetch_add(1, Ordering::Relaxed);
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.0.mine().completed.fetch_add(1, Ordering::Relaxed);
    }
}

impl Drop for Blocked {
    fn drop(&mut self) {
        self.0.blocked.fetch_sub(1, Ordering::Relaxed);
    }
}

/// The stages Sibyl counts, under Cassandra's names: one set per process,
/// as Cassandra's `Stage` enum.
pub mod stages {
    use super::Stage;

    pub static NATIVE_TRANSPORT_REQUESTS: Stage =
        Stage::new("Native-Transport-Requests", "transport");
    pub static READ: Stage = Stage::new("ReadStage", "request");
    pub static MUTATION: Stage = Stage::new("MutationStage", "request");
    pub static COUNTER_MUTATION: Stage = Stage::new("CounterMutationStage", "request");
    pub static REQUEST_RESPONSE: Stage = Stage::new("RequestResponseStage", "request");
    pub static GOSSIP: Stage = Stage::new("GossipStage", "internal");
    pub static MIGRATION: Stage = Stage::new("MigrationStage", "internal");
    pub static ANTI_ENTROPY: Stage = Stage::new("AntiEntropyStage", "internal");
    pub static COMPACTION: Stage = Stage::new("CompactionExecutor", "internal");
    pub static MEMTABLE_FLUSH: Stage = Stage::new("MemtableFlushWriter", "internal");
    pub static HINTS_DISPATCHER: Stage = Stage::new("HintsDispatcher", "internal");

    /// Every stage, in `nodetool tpstats`'s order (by name).
    pub fn all() -> [&'static Stage; 11] {
        let mut v = [
            &ANTI_ENTROPY,
            &COMPACTION,
            &COUNTER_MUTATION,
            &GOSSIP,
            &HINTS_DISPATCHER,
            &MEMTABLE_FLUSH,
            &MIGRATION,
            &MUTATION,
            &NATIVE_TRANSPORT_REQUESTS,
            &READ,
            &REQUEST_RESPONSE,
        ];
        v.sort_by_key(|s| s.name);
        v
    }
}

/// A metric's name as Cassandra registers it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct MetricName {
    /// `type=` (`ClientRequest`, `Table`, `ThreadPools`, …).
    pub kind: &'static str,
    pub keyspace: Option<String>,
    /// `scope=` (`Read-QUORUM`, a table, a pool, a verb, …).
    pub scope: Option<String>,
    /// `path=` (thread pools only).
    pub path: Option<String>,
    pub name: String,
}

impl MetricName {
    pub fn new(kind: &'static str, name: impl Into<String>) -> MetricName {
        MetricName {
            kind,
            keyspace: None,
            scope: None,
            path: None,
            name: name.into(),
        }
    }

    pub fn scope(mut self, scope: impl Into<String>) -> MetricName {
        self.scope = Some(scope.into());
        self
    }

    /// A table's metric (`type=Table,keyspace=…,scope=<table>`).
    pub fn table(keyspace: &str, table: &str, name: impl Into<String>) -> MetricName {
        MetricName {
            keyspace: Some(keyspace.to_string()),
            ..MetricName::new("Table", name).scope(table)
        }
    }
}

impl std::fmt::Display for MetricName {
    /// The JMX object name Cassandra registers.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "org.apache.cassandra.metrics:type={}", self.kind)?;
        if let Some(k) = &self.keyspace {
            write!(f, ",keyspace={k}")?;
        }
        if let Some(p) = &self.path {
            write!(f, ",path={p}")?;
        }
        if let Some(s) = &self.scope {
            write!(f, ",scope={s}")?;
        }
        write!(f, ",name={}", self.name)
    }
}

/// A metric's value when collected.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Counter(u64),
    Gauge(f64),
    /// Values without a unit (sizes, counts).
    Histogram(Snapshot),
    /// Microseconds.
    Timer(Snapshot),
}

/// A family outside Cassandra's metrics registry (its JMX beans for the
/// failure detector, gossip, the ring and the operating system), in the
/// exporter's own name and labels.
#[derive(Debug, Clone, PartialEq)]
pub struct Family {
    pub name: &'static str,
    pub help: &'static str,
    pub counter: bool,
    pub samples: Vec<(Vec<(&'static str, String)>, f64)>,
}

/// Everything one scrape read.
#[derive(Debug, Default)]
pub struct Collection {
    pub metrics: Vec<(MetricName, Value)>,
    pub families: Vec<Family>,
}

impl Collection {
    pub fn counter(&mut self, name: MetricName, v: u64) {
        self.metrics.push((name, Value::Counter(v)));
    }
    pub fn gauge(&mut self, name: MetricName, v: f64) {
        self.metrics.push((name, Value::Gauge(v)));
    }
    pub fn timer(&mut self, name: MetricName, t: &Timer) {
        self.metrics.push((name, Value::Timer(t.snapshot())));
    }
    pub fn histogram(&mut self, name: MetricName, h: &Histogram) {
        self.metrics.push((name, Value::Histogram(Snapshot::of(h))));
    }
    /// The counts of every [`stages`] stage.
    pub fn stages(&mut self) {
        for s in stages::all() {
            let n = |name: &str| MetricName {
                path: Some(s.path.to_string()),
                ..MetricName::new("ThreadPools", name).scope(s.name)
            };
            self.gauge(n("ActiveTasks"), s.active() as f64);
            self.gauge(n("PendingTasks"), s.pending().max(0) as f64);
            self.counter(n("CompletedTasks"), s.completed());
            self.gauge(n("CurrentlyBlockedTasks"), s.blocked().max(0) as f64);
            self.counter(n("TotalBlockedTasks"), s.blocked_total());
        }
    }
}

type Collector = Box<dyn Fn(&mut Collection) + Send + Sync>;

/// A node's metrics: collectors registered at wiring time, each reading
/// one part's counts when scraped.
#[derive(Default)]
pub struct Registry {
    collectors: parking_lot::RwLock<Vec<Collector>>,
}

impl Registry {
    pub fn register(&self, f: impl Fn(&mut Collection) + Send + Sync + 'static) {
        self.collectors.write().push(Box::new(f));
    }

    pub fn collect(&self) -> Collection {
        let mut c = Collection::default();
        for f in self.collectors.read().iter() {
            f(&mut c);
        }
        c
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_meter_averages_as_codahales() {
        let t0 = Instant::now();
        let m = Meter::starting_at(t0);
        let secs = |s: f64| t0 + std::time::Duration::from_secs_f64(s);
        m.mark_at(3, secs(1.0));
        assert_eq!(m.rate_at(2, secs(4.0)), 0.0, "no tick yet");
        // the first tick: the events of its 5 s
        assert!((m.rate_at(2, secs(5.0)) - 0.6).abs() < 1e-12);
        // 15 minutes (180 ticks) without events decay it by (1-alpha)^180 = e^-1
        let decayed = m.rate_at(2, secs(5.0 + 900.0));
        assert!((decayed - 0.6 * (-1.0f64).exp()).abs() < 1e-9, "{decayed}");
        assert_eq!(m.count(), 3);
        assert!((m.mean_rate_at(secs(30.0)) - 0.1).abs() < 1e-12);
    }

    #[test]
    fn a_timer_reports_recent_percentiles_and_counts_since_start() {
        let t = Timer::default();
        for v in 1..=100 {
            t.record_in_minute(v * 1000, 5);
        }
        let (s, recent) = t.snapshot_in_minute(5);
        assert_eq!((s.count, recent), (100, 100));
        assert_eq!(s.sum, 5_050_000.0);
        assert!((45_000.0..=60_000.0).contains(&s.quantiles[0]), "{s:?}");
        assert_eq!(s.max, 100_000.0);
        // the next minute still sees them; two minutes on, only the count
        let (next, recent) = t.snapshot_in_minute(6);
        assert_eq!(
            (next.quantiles, next.max, recent),
            (s.quantiles, s.max, 100)
        );
        t.record_in_minute(7, 7);
        let (later, recent) = t.snapshot_in_minute(7);
        assert_eq!((later.count, recent), (101, 1));
        assert_eq!(later.quantiles, [7.0; 6]);
        assert_eq!(later.max, 7.0);
        let (idle, recent) = t.snapshot_in_minute(20);
        assert_eq!((idle.quantiles, idle.max, recent), ([0.0; 6], 0.0, 0));
        // values after an idle spell are counted from where it ended
        t.record_in_minute(3, 21);
        let (back, recent) = t.snapshot_in_minute(21);
        assert_eq!((back.quantiles, recent), ([3.0; 6], 1));
        assert_eq!(t.all().count(), 102);
    }

    #[test]
    fn stage_counts_follow_the_work() {
        static S: Stage = Stage::new("TestStage", "internal");
        let q = S.enqueue();
        assert_eq!((S.pending(), S.active()), (1, 0));
        let r = q.start();
        assert_eq!((S.pending(), S.active()), (0, 1));
        let b = S.block();
        assert_eq!((S.blocked(), S.blocked_total()), (1, 1));
        drop(b);
        drop(r);
        assert_eq!((S.active(), S.completed(), S.blocked()), (0, 1, 0));
        drop(S.enqueue());
        assert_eq!((S.pending(), S.completed()), (0, 1));
    }

    #[test]
    fn names_print_as_cassandras_object_names() {
        let n = MetricName::table("ks", "t", "ReadLatency");
        assert_eq!(
            n.to_string(),
            "org.apache.cassandra.metrics:type=Table,keyspace=ks,scope=t,name=ReadLatency"
        );
        let p = MetricName {
            path: Some("request".into()),
            ..MetricName::new("ThreadPools", "ActiveTasks").scope("ReadStage")
        };
        assert_eq!(
            p.to_string(),
            "org.apache.cassandra.metrics:type=ThreadPools,path=request,scope=ReadStage,name=ActiveTasks"
        );
    }
}
