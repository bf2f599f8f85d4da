//! Query tracing, as Cassandra's `tracing` package: a traced request opens a
//! session on its coordinator (`system_traces.sessions`), and every step of
//! it, on the coordinator and on each replica the request reaches, is an
//! event (`system_traces.events`) of that session.
//!
//! The session in progress is a task-local ([`scope`]): code anywhere below
//! the coordinator calls [`trace`] and it is recorded only when the request
//! is traced, at the cost of one task-local lookup otherwise. Messaging
//! carries [`TraceParams`] to a replica, which opens its own
//! [`TraceState`] for the same session (Cassandra's `TRACE_SESSION` and
//! `TRACE_TYPE` message parameters). What is recorded goes to a
//! [`TraceSink`], which writes it to `system_traces` (the node wires one
//! that goes through the coordinator at consistency ANY, as Cassandra's
//! `TraceStateImpl` does).

use futures::future::Either;
use parking_lot::RwLock;
use std::cell::Cell;
use std::collections::BTreeMap;
use std::future::Future;
use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Instant;
use uuid::Uuid;

/// What a session traces (Cassandra's `Tracing.TraceType`): it sets how
/// long its rows live.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TraceType {
    Query,
    Repair,
}

impl TraceType {
    /// The number on the wire (Cassandra's ordinals: NONE 0, QUERY 1, REPAIR 2).
    pub fn code(self) -> u8 {
        match self {
            TraceType::Query => 1,
            TraceType::Repair => 2,
        }
    }

    pub fn from_code(c: u8) -> Option<TraceType> {
        match c {
            1 => Some(TraceType::Query),
            2 => Some(TraceType::Repair),
            _ => None,
        }
    }
}

/// Seconds a session's rows live: `trace_type_query_ttl` (1 day) and
/// `trace_type_repair_ttl` (7 days) by default.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TraceTtls {
    pub query_seconds: i32,
    pub repair_seconds: i32,
}

impl Default for TraceTtls {
    fn default() -> Self {
        TraceTtls {
            query_seconds: 86_400,
            repair_seconds: 604_800,
        }
    }
}

impl TraceTtls {
    pub fn of(&self, kind: TraceType) -> i32 {
        match kind {
            TraceType::Query => self.query_seconds,
            TraceType::Repair => self.repair_seconds,
        }
    }
}

/// What a message carries to a replica of a traced request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TraceParams {
    pub session_id: Uuid,
    pub kind: TraceType,
}

impl TraceParams {
    /// Bytes of the encoded parameters.
    pub const ENCODED_BYTES: usize = 17;

    pub fn encode(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(self.session_id.as_bytes());
        out.push(self.kind.code());
    }

    /// Decodes what [`TraceParams::encode`] wrote; `None` for anything else.
    pub fn decode(b: &[u8]) -> Option<TraceParams> {
        let id: [u8; 16] = b.get(..16)?.try_into().ok()?;
        Some(TraceParams {
            session_id: Uuid::from_bytes(id),
            kind: TraceType::from_code(*b.get(16)?)?,
        })
    }
}

/// A session as it begins on its coordinator (a `system_traces.sessions`
/// row without its duration).
#[derive(Debug, Clone, PartialEq)]
pub struct SessionStart {
    pub session_id: Uuid,
    pub kind: TraceType,
    pub client: IpAddr,
    pub coordinator: IpAddr,
    pub coordinator_port: u16,
    /// `QUERY`, `REPAIR`.
    pub command: &'static str,
    /// "Execute CQL3 query", "Execute CQL3 prepared query", …
    pub request: String,
    pub parameters: BTreeMap<String, String>,
    pub started_at_millis: i64,
}

/// One step of a session, on one node (a `system_traces.events` row).
#[derive(Debug, Clone, PartialEq)]
pub struct TraceEvent {
    pub session_id: Uuid,
    pub kind: TraceType,
    pub event_id: Uuid,
    pub activity: String,
    pub source: IpAddr,
    pub source_port: u16,
    /// Microseconds since the session began on this node.
    pub source_elapsed_micros: i32,
    pub thread: String,
}

/// Where sessions and events go. Implementations must not block: they
/// queue, and drop what does not fit (a trace is never worth a request).
pub trait TraceSink: Send + Sync {
    fn session_started(&self, start: SessionStart);
    /// The session ended on its coordinator after `duration_micros`.
    fn session_ended(&self, session_id: Uuid, kind: TraceType, duration_micros: i32);
    fn event(&self, event: TraceEvent);
}

/// The stage a traced step runs in, named as Cassandra names its threads
/// (`cqlsh` shows "activity [thread]").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stage {
    NativeTransport,
    Messaging,
    Read,
    Mutation,
    Counter,
    RequestResponse,
    Repair,
}

impl Stage {
    fn prefix(self) -> &'static str {
        match self {
            Stage::NativeTransport => "Native-Transport-Requests-",
            Stage::Messaging => "Messaging-EventLoop-3-",
            Stage::Read => "ReadStage-",
            Stage::Mutation => "MutationStage-",
            Stage::Counter => "CounterMutationStage-",
            Stage::RequestResponse => "RequestResponseStage-",
            Stage::Repair => "AntiEntropyStage:",
        }
    }

    /// The thread name: the stage and a small number for the OS thread
    /// that runs the step.
    pub fn thread_name(self) -> String {
        format!("{}{}", self.prefix(), thread_number())
    }
}

static THREADS: AtomicUsize = AtomicUsize::new(0);

thread_local! {
    static THREAD_NUMBER: Cell<usize> = const { Cell::new(0) };
}

fn thread_number() -> usize {
    THREAD_NUMBER.with(|n| {
        if n.get() == 0 {
            n.set(THREADS.fetch_add(1, Ordering::Relaxed) + 1);
        }
        n.get()
    })
}

/// A session as one node takes part in it (Cassandra's `TraceState`).
pub struct TraceState {
    pub session_id: Uuid,
    pub kind: TraceType,
    /// The session's coordinator.
    pub coordinator: IpAddr,
    /// This node, as events name their source.
    pub source: IpAddr,
    pub source_port: u16,
    started: Instant,
    /// Where the steps run unless a step names its own stage.
    stage: Stage,
    sink: Arc<dyn TraceSink>,
}

impl TraceState {
    /// What messages to replicas carry.
    pub fn params(&self) -> TraceParams {
        TraceParams {
            session_id: self.session_id,
            kind: self.kind,
        }
    }

    /// Records a step in this state's stage.
    pub fn trace(&self, activity: impl Into<String>) {
        self.trace_in(self.stage, activity);
    }

    /// Records a step that runs in `stage`.
    pub fn trace_in(&self, stage: Stage, activity: impl Into<String>) {
        let elapsed = self.elapsed_micros();
        self.sink.event(TraceEvent {
            session_id: self.session_id,
            kind: self.kind,
            event_id: sibyl_types::timeuuid::now_timeuuid(),
            activity: activity.into(),
            source: self.source,
            source_port: self.source_port,
            source_elapsed_micros: elapsed,
            thread: stage.thread_name(),
        });
    }

    /// How activities name a peer: `/127.0.0.2:7000` (every node of a
    /// cluster listens on the same storage port).
    pub fn peer(&self, address: IpAddr) -> String {
        endpoint(address, self.source_port)
    }

    /// Microseconds since the session began here.
    pub fn elapsed_micros(&self) -> i32 {
        self.started.elapsed().as_micros().min(i32::MAX as u128) as i32
    }

    /// This state with steps run in `stage` (a replica's handler moving from
    /// the messaging thread to its stage).
    pub fn in_stage(self: &Arc<Self>, stage: Stage) -> Arc<TraceState> {
        Arc::new(TraceState {
            session_id: self.session_id,
            kind: self.kind,
            coordinator: self.coordinator,
            source: self.source,
            source_port: self.source_port,
            started: self.started,
            stage,
            sink: self.sink.clone(),
        })
    }

    /// Ends the session on its coordinator: its duration is recorded.
    pub fn stop(&self) {
        self.sink
            .session_ended(self.session_id, self.kind, self.elapsed_micros());
    }
}

/// This node's tracing (Cassandra's `Tracing` singleton): it opens
/// sessions, and holds the probability with which requests that did not
/// ask for it are traced (`nodetool settraceprobability`).
pub struct Tracer {
    address: IpAddr,
    port: u16,
    sink: RwLock<Option<Arc<dyn TraceSink>>>,
    /// The probability as f64 bits.
    probability: AtomicU64,
}

impl Tracer {
    pub fn new(address: IpAddr, port: u16) -> Tracer {
        Tracer {
            address,
            port,
            sink: RwLock::new(None),
            probability: AtomicU64::new(0f64.to_bits()),
        }
    }

    /// Where sessions go from now on; until one is set nothing is traced.
    pub fn set_sink(&self, sink: Arc<dyn TraceSink>) {
        *self.sink.write() = Some(sink);
    }

    pub fn probability(&self) -> f64 {
        f64::from_bits(self.probability.load(Ordering::Relaxed))
    }

    /// Sets the trace probability; Cassandra's bounds are 0 and 1.
    pub fn set_probability(&self, p: f64) -> Result<(), String> {
        if !(0.0..=1.0).contains(&p) {
            return Err("Trace probability must be between 0 and 1".into());
        }
        self.probability.store(p.to_bits(), Ordering::Relaxed);
        Ok(())
    }

    /// Whether a request that did not ask to be traced is traced anyway.
    pub fn sampled(&self) -> bool {
        let p = self.probability();
        p > 0.0 && (p >= 1.0 || rand::random::<f64>() < p)
    }

    /// Opens a session coordinated by this node.
    pub fn begin(
        &self,
        kind: TraceType,
        client: IpAddr,
        request: String,
        parameters: BTreeMap<String, String>,
    ) -> Option<Arc<TraceState>> {
        let sink = self.sink.read().clone()?;
        let session_id = sibyl_types::timeuuid::now_timeuuid();
        sink.session_started(SessionStart {
            session_id,
            kind,
            client,
            coordinator: self.address,
            coordinator_port: self.port,
            command: match kind {
                TraceType::Query => "QUERY",
                TraceType::Repair => "REPAIR",
            },
            request,
            parameters,
            started_at_millis: sibyl_types::timeuuid::timeuuid_timestamp_millis(
                session_id.as_bytes(),
            ),
        });
        Some(Arc::new(TraceState {
            session_id,
            kind,
            coordinator: self.address,
            source: self.address,
            source_port: self.port,
            started: Instant::now(),
            stage: Stage::NativeTransport,
            sink,
        }))
    }

    /// Takes part, as a replica, in a session `coordinator` opened.
    pub fn join(&self, params: TraceParams, coordinator: IpAddr) -> Option<Arc<TraceState>> {
        let sink = self.sink.read().clone()?;
        Some(Arc::new(TraceState {
            session_id: params.session_id,
            kind: params.kind,
            coordinator,
            source: self.address,
            source_port: self.port,
            started: Instant::now(),
            stage: Stage::Messaging,
            sink,
        }))
    }
}

tokio::task_local! {
    static CURRENT: Arc<TraceState>;
}

/// Runs `fut` as part of `state`'s session: [`trace`] within it records.
///
/// A plain function returning a future of `fut`'s size (not an `async fn`,
/// whose state would hold `fut` twice: as its argument and as the future it
/// awaits): every request passes through several such wrappers, and each
/// one would double what the request's task allocates and copies.
pub fn scope<F: Future>(state: Option<Arc<TraceState>>, fut: F) -> impl Future<Output = F::Output> {
    match state {
        Some(s) => Either::Left(CURRENT.scope(s, fut)),
        None => Either::Right(fut),
    }
}

/// `fut` as part of the running task's session, if it has one: for work a
/// traced request hands to another task (a spawned send to a replica).
pub fn traced<F: Future>(fut: F) -> impl Future<Output = F::Output> {
    scope(current(), fut)
}

/// Runs `f` with the running task's session moved to `stage` (a replica's
/// work the coordinator does itself, as Cassandra runs it on its stage).
pub fn in_stage<R>(stage: Stage, f: impl FnOnce() -> R) -> R {
    match current() {
        Some(s) => CURRENT.sync_scope(s.in_stage(stage), f),
        None => f(),
    }
}

/// `fut` with the running task's session moved to `stage`.
pub fn scope_in_stage<F: Future>(stage: Stage, fut: F) -> impl Future<Output = F::Output> {
    scope(current().map(|s| s.in_stage(stage)), fut)
}

/// The session the running task is part of, if it is traced.
pub fn current() -> Option<Arc<TraceState>> {
    CURRENT.try_with(|s| s.clone()).ok()
}

/// Whether the running task is traced: callers build costly activity
/// strings only then.
pub fn is_tracing() -> bool {
    CURRENT.try_with(|_| ()).is_ok()
}

/// Records a step of the running task's session, if it has one; the
/// activity is made only then.
pub fn trace<S: Into<String>>(activity: impl FnOnce() -> S) {
    let _ = CURRENT.try_with(|s| s.trace(activity()));
}

/// Records a step whose activity needs the session (to name a peer, as
/// [`TraceState::peer`] does), if the running task is traced.
pub fn trace_with<S: Into<String>>(activity: impl FnOnce(&TraceState) -> S) {
    let _ = CURRENT.try_with(|s| s.trace(activity(s)));
}

/// Records a step in `stage`, if the running task is traced.
pub fn trace_in<S: Into<String>>(stage: Stage, activity: impl FnOnce() -> S) {
    let _ = CURRENT.try_with(|s| s.trace_in(stage, activity()));
}

/// How an address appears in activities: `/127.0.0.2:7000`.
pub fn endpoint(address: IpAddr, port: u16) -> String {
    format!("/{address}:{port}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use parking_lot::Mutex;

    #[derive(Default)]
    struct Recorded {
        starts: Mutex<Vec<SessionStart>>,
        ends: Mutex<Vec<(Uuid, i32)>>,
        events: Mutex<Vec<TraceEvent>>,
    }

    impl TraceSink for Recorded {
        fn session_started(&self, start: SessionStart) {
            self.starts.lock().push(start);
        }
        fn session_ended(&self, id: Uuid, _: TraceType, d: i32) {
            self.ends.lock().push((id, d));
        }
        fn event(&self, e: TraceEvent) {
            self.events.lock().push(e);
        }
    }

    #[test]
    fn params_round_trip_and_refuse_garbage() {
        let p = TraceParams {
            session_id: Uuid::from_u128(7),
            kind: TraceType::Repair,
        };
        let mut out = Vec::new();
        p.encode(&mut out);
        assert_eq!(out.len(), TraceParams::ENCODED_BYTES);
        assert_eq!(TraceParams::decode(&out), Some(p));
        assert_eq!(TraceParams::decode(&out[..16]), None);
        out[16] = 9;
        assert_eq!(TraceParams::decode(&out), None);
    }

    #[test]
    fn probability_is_bounded_like_cassandras() {
        let t = Tracer::new("127.0.0.1".parse().unwrap(), 7000);
        assert!(!t.sampled());
        assert!(t.set_probability(1.5).is_err());
        assert!(t.set_probability(-0.1).is_err());
        t.set_probability(1.0).unwrap();
        assert!(t.sampled());
        assert_eq!(t.probability(), 1.0);
    }

    #[tokio::test]
    async fn steps_are_recorded_only_inside_a_traced_scope() {
        let sink = Arc::new(Recorded::default());
        let t = Tracer::new("127.0.0.1".parse().unwrap(), 7000);
        assert!(t
            .begin(
                TraceType::Query,
                "127.0.0.9".parse().unwrap(),
                "x".into(),
                BTreeMap::new()
            )
            .is_none());
        t.set_sink(sink.clone());
        trace(|| "not traced");
        let s = t
            .begin(
                TraceType::Query,
                "127.0.0.9".parse().unwrap(),
                "Execute CQL3 query".into(),
                BTreeMap::new(),
            )
            .unwrap();
        scope(Some(s.clone()), async {
            trace(|| "Parsing x");
            trace_in(Stage::Read, || "Executing single-partition query on t");
        })
        .await;
        s.stop();
        let events = sink.events.lock();
        assert_eq!(events.len(), 2);
        assert_eq!(events[0].activity, "Parsing x");
        assert!(events[0].thread.starts_with("Native-Transport-Requests-"));
        assert!(events[1].thread.starts_with("ReadStage-"));
        assert!(events[0].event_id != events[1].event_id);
        assert_eq!(sink.starts.lock()[0].command, "QUERY");
        assert_eq!(sink.ends.lock()[0].0, s.session_id);
        let r = t
            .join(s.params(), "127.0.0.1".parse().unwrap())
            .expect("a replica state");
        assert_eq!(r.session_id, s.session_id);
    }
}
