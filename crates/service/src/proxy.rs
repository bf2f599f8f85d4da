//! StorageProxy: the coordinator. Every read and write of the statement
//! layer comes here. It picks the replicas of each partition from the ring
//! and the keyspace's replication strategy, checks that the consistency
//! level can be met, sends the request to the replicas (this node's own
//! replica side is called directly, others through the messaging service),
//! and waits for as many answers as the level needs, until the request's
//! timeout. A single node is a ring of one: the same path.

use crate::consistency::{self, block_for, is_datacenter_local};
use crate::error::{Result, ServiceError, WriteType};
use crate::hints::HintsService;
use crate::metrics::Operation;
use crate::replica::{Replica, SharedSchema};
use parking_lot::RwLock;
use sibyl_cluster::messaging::{MessagingService, ReplicaFailure, Request, Response};
use sibyl_cluster::snitch::DynamicSnitch;
use sibyl_cluster::{Clock, TokenMetadata};
use sibyl_db::{
    counter, ColumnData, DecoratedKey, KeyBound, Mutation, Partition, ReadCommand, ReadKind,
    ReadResponse, Row,
};
use sibyl_protocol::Consistency;
use sibyl_schema::schema::{KeyspaceMetadata, Schema, SpeculativeRetry, TableMetadata};
use sibyl_schema::ReplicationStrategy;
use sibyl_tracing::Stage;
use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

/// Stripes of the locks that serialise a partition's read-modify-writes
/// (counter leadership, lightweight transactions) on this coordinator.
const LOCK_STRIPES: usize = 1024;

/// The coordinator's timeouts (`cassandra.yaml`'s `*_request_timeout`).
#[derive(Debug, Clone, Copy)]
pub struct Timeouts {
    pub read: Duration,
    pub range: Duration,
    pub write: Duration,
    pub counter_write: Duration,
    pub cas_contention: Duration,
    pub truncate: Duration,
}

impl Default for Timeouts {
    /// Cassandra's defaults.
    fn default() -> Self {
        Timeouts {
            read: Duration::from_secs(5),
            range: Duration::from_secs(10),
            write: Duration::from_secs(2),
            counter_write: Duration::from_secs(5),
            cas_contention: Duration::from_secs(1),
            truncate: Duration::from_secs(60),
        }
    }
}

/// The failure detector's judgement of an address.
type IsAlive = Arc<dyn Fn(IpAddr) -> bool + Send + Sync>;

pub struct StorageProxy {
    /// This node's replica side, called directly when this node is a replica.
    pub(crate) replica: Arc<Replica>,
    pub(crate) messaging: Arc<dyn MessagingService>,
    pub(crate) clock: Arc<dyn Clock>,
    schema: SharedSchema,
    local_dc: String,
    pub timeouts: Timeouts,
    /// The ring.
    /// Read on every request: loaded without a lock (see [`SharedSchema`]);
    /// replaced whole on each change.
    pub ring: arc_swap::ArcSwap<TokenMetadata>,
    /// The ring after the nodes joining or leaving now are done: writes
    /// also go to the replicas it adds (pending replicas).
    future_ring: arc_swap::ArcSwapOption<TokenMetadata>,
    locks: Vec<tokio::sync::Mutex<()>>,
    /// Where schema changes go in a cluster (none on a single node).
    schema_log: RwLock<Option<Arc<dyn SchemaLog>>>,
    /// Response times of the other nodes, to read from the fastest.
    pub(crate) snitch: Arc<DynamicSnitch>,
    /// Whether a node is up (gossip's failure detector, in a cluster).
    /// Read on every request: loaded without a lock (see [`SharedSchema`]).
    failure_detector: arc_swap::ArcSwapOption<IsAlive>,
    /// Hinted handoff (none: writes a replica misses are not hinted).
    hints: RwLock<Option<Arc<HintsService>>>,
    /// The last Paxos ballot's time on this coordinator (ballots only grow).
    pub(crate) last_ballot_micros: std::sync::atomic::AtomicI64,
    pub metrics: ProxyMetrics,
    /// Coordinator read latencies per table, for `speculative_retry`'s
    /// percentiles.
    latencies: parking_lot::Mutex<sibyl_types::fast_map::FastHashMap<uuid::Uuid, LatencyHistogram>>,
    /// Stream sessions and the outbound stream throttle.
    pub(crate) streams: crate::streaming::StreamManager,
    /// The incremental repair sessions this node takes part in.
    pub repair_sessions: crate::repair::LocalSessions,
}

/// Read latencies in buckets 20% apart, halved every 10,000 samples so that
/// recent reads weigh most.
#[derive(Debug, Clone)]
struct LatencyHistogram {
    buckets: Vec<u32>,
    total: u32,
}

impl LatencyHistogram {
    const BUCKETS: usize = 128;

    fn new() -> Self {
        LatencyHistogram {
            buckets: vec![0; Self::BUCKETS],
            total: 0,
        }
    }

    fn bucket_of(micros: u64) -> usize {
        ((micros.max(1) as f64).ln() / 1.2f64.ln()) as usize
    }

    fn record(&mut self, d: Duration) {
        let i = Self::bucket_of(d.as_micros() as u64).min(Self::BUCKETS - 1);
        self.buckets[i] += 1;
        self.total += 1;
        if self.total >= 10_000 {
            self.buckets.iter_mut().for_each(|b| *b /= 2);
            self.total = self.buckets.iter().sum();
        }
    }

    /// The upper bound of the bucket holding the `p`th percentile, once
    /// there are enough samples to say.
    fn percentile(&self, p: f64) -> Option<Duration> {
        if self.total < 20 {
            return None;
        }
        let want = (self.total as f64 * p / 100.0).ceil() as u32;
        let mut seen = 0;
        for (i, b) in self.buckets.iter().enumerate() {
            seen += b;
            if seen >= want {
                return Some(Duration::from_micros(1.2f64.powi(i as i32 + 1) as u64));
            }
        }
        None
    }
}

pub use crate::metrics::{Counter, ProxyMetrics};

/// Where a cluster's schema changes go: the cluster metadata log, which
/// applies each committed change on every node in the same order.
pub trait SchemaLog: Send + Sync {
    /// Commits `mutations` (rows of `system_schema`) planned against the
    /// schema whose version is `base`; resolves once this node has applied
    /// them, with the schema after them, or with
    /// [`ServiceError::SchemaConflict`] if another change came first.
    /// `event` is what every node tells its registered clients.
    fn commit(
        &self,
        base: uuid::Uuid,
        mutations: Vec<Mutation>,
        event: Option<sibyl_protocol::SchemaChange>,
    ) -> sibyl_cluster::messaging::BoxFuture<Result<Arc<Schema>>>;
}

/// A plan's replicas: on the stack up to three (a replication factor of
/// three, the usual, allocates nothing on a request's path).
pub(crate) type PlanReplicas = smallvec::SmallVec<[IpAddr; 3]>;

/// Where one request goes: its replicas and how many must answer.
pub(crate) struct Plan {
    pub(crate) replicas: PlanReplicas,
    pub(crate) block_for: usize,
    /// EACH_QUORUM: each data center's replicas and the answers it must
    /// give (empty for every other level, which counts answers in total).
    pub(crate) per_datacenter: Vec<(String, Vec<IpAddr>, usize)>,
}

impl Plan {
    /// Replicas counted as one total.
    pub(crate) fn new(replicas: PlanReplicas, block_for: usize) -> Plan {
        Plan {
            replicas,
            block_for,
            per_datacenter: Vec::new(),
        }
    }

    /// Whether answers from `answered` satisfy the level: `block_for` in
    /// total, or each data center's quorum for EACH_QUORUM.
    pub(crate) fn satisfied_by(&self, answered: &[IpAddr]) -> bool {
        if self.per_datacenter.is_empty() {
            answered.len() >= self.block_for
        } else {
            self.per_datacenter.iter().all(|(_, replicas, need)| {
                answered.iter().filter(|a| replicas.contains(a)).count() >= *need
            })
        }
    }

    /// The replicas a read asks, in the order given: the first
    /// `block_for`, or for EACH_QUORUM the first ones of each data center
    /// up to its quorum.
    pub(crate) fn read_targets(&self) -> Vec<IpAddr> {
        if self.per_datacenter.is_empty() {
            return self.replicas.iter().take(self.block_for).copied().collect();
        }
        let mut taken = vec![0usize; self.per_datacenter.len()];
        let mut out = Vec::new();
        for r in &self.replicas {
            if let Some(d) = self
                .per_datacenter
                .iter()
                .position(|(_, replicas, _)| replicas.contains(r))
            {
                if taken[d] < self.per_datacenter[d].2 {
                    taken[d] += 1;
                    out.push(*r);
                }
            }
        }
        out
    }
}

/// What a request to a replica needs, owned, to move into a task: this
/// node's replica (called directly when it is the target), the messaging
/// service, and the snitch that times the answers.
#[derive(Clone)]
pub(crate) struct ReplicaSender {
    replica: Arc<Replica>,
    messaging: Arc<dyn MessagingService>,
    snitch: Arc<DynamicSnitch>,
}

impl ReplicaSender {
    /// Sends `request` to `to`: this node's replica directly, others through
    /// messaging.
    pub(crate) async fn send(
        &self,
        to: IpAddr,
        request: Request,
        timeout: Duration,
    ) -> Option<Response> {
        if to == self.messaging.local_address() {
            let stage = request.verb().stage();
            Some(sibyl_tracing::scope_in_stage(stage, self.replica.handle(request)).await)
        } else {
            let started = tokio::time::Instant::now();
            let r = self.messaging.send_and_receive(to, request, timeout).await;
            // a lost or late answer counts as the whole timeout
            self.snitch.record(to, started.elapsed());
            r.ok()
        }
    }
}

impl ReplicaSender {
    /// Sends `request` to `to` without waiting for an answer (Cassandra's
    /// one-way messages: a batch's removal).
    pub(crate) fn send_one_way(&self, to: IpAddr, request: Request) {
        if to == self.messaging.local_address() {
            let replica = self.replica.clone();
            let stage = request.verb().stage();
            tokio::spawn(sibyl_tracing::traced(sibyl_tracing::scope_in_stage(
                stage,
                async move { replica.handle(request).await },
            )));
        } else {
            self.messaging.send_one_way(to, request);
        }
    }
}

impl StorageProxy {
    pub fn new(
        replica: Arc<Replica>,
        messaging: Arc<dyn MessagingService>,
        clock: Arc<dyn Clock>,
        schema: SharedSchema,
        local_dc: String,
        timeouts: Timeouts,
    ) -> Self {
        StorageProxy {
            replica,
            messaging,
            clock,
            schema,
            local_dc,
            timeouts,
            ring: arc_swap::ArcSwap::from_pointee(TokenMetadata::new()),
            future_ring: arc_swap::ArcSwapOption::empty(),
            locks: (0..LOCK_STRIPES)
                .map(|_| tokio::sync::Mutex::new(()))
                .collect(),
            schema_log: RwLock::new(None),
            failure_detector: arc_swap::ArcSwapOption::empty(),
            snitch: Arc::new(DynamicSnitch::default()),
            hints: RwLock::new(None),
            last_ballot_micros: std::sync::atomic::AtomicI64::new(0),
            metrics: ProxyMetrics::default(),
            latencies: parking_lot::Mutex::new(Default::default()),
            streams: crate::streaming::StreamManager::default(),
            repair_sessions: crate::repair::LocalSessions::default(),
        }
    }

    /// The current schema.
    pub fn schema(&self) -> crate::replica::SchemaGuard {
        self.schema.load()
    }

    /// The schema holder shared with the statement layer.
    pub fn shared_schema(&self) -> &SharedSchema {
        &self.schema
    }

    pub fn local_address(&self) -> IpAddr {
        self.messaging.local_address()
    }

    /// The data center of a node of the ring.
    pub fn datacenter_of(&self, address: IpAddr) -> Option<String> {
        let ring = self.ring.load();
        ring.endpoint_of(address)
            .map(|i| ring.endpoints[i].datacenter.clone())
    }

    pub fn local_dc(&self) -> &str {
        &self.local_dc
    }

    /// This node's host id.
    pub fn host_id(&self) -> uuid::Uuid {
        let ring = self.ring.load();
        ring.endpoint_of(self.local_address())
            .map(|i| ring.endpoints[i].host_id)
            .unwrap_or_default()
    }

    /// Borrowed from `schema`: no count taken on the keyspace (a cache
    /// line every event loop would write on every request).
    pub(crate) fn keyspace_of<'s>(
        &self,
        schema: &'s Schema,
        table_id: uuid::Uuid,
    ) -> Option<&'s Arc<KeyspaceMetadata>> {
        let t = schema.table_by_id(table_id)?;
        schema.keyspace(&t.keyspace)
    }

    /// The natural replicas of `token`, this node first when it is one (it
    /// is the closest), and the number of answers `cl` needs from them.
    pub(crate) fn plan(&self, strategy: &ReplicationStrategy, token: i64, cl: Consistency) -> Plan {
        let local = self.local_address();
        if *strategy == ReplicationStrategy::Local {
            return Plan::new(smallvec::smallvec![local], 1);
        }
        let ring = self.ring.load();
        let natural = ring.replicas(token, strategy);
        let mut replicas: PlanReplicas = natural
            .iter()
            .filter(|i| !is_datacenter_local(cl) || ring.endpoints[**i].datacenter == self.local_dc)
            .map(|i| ring.endpoints[*i].address)
            .collect();
        if let Some(p) = replicas.iter().position(|a| *a == local) {
            replicas[..=p].rotate_right(1);
        }
        let mut plan = Plan::new(
            replicas,
            block_for(strategy, cl, &self.local_dc, ring.endpoints.len()),
        );
        if let (Consistency::EachQuorum, ReplicationStrategy::NetworkTopology { datacenters }) =
            (cl, strategy)
        {
            plan.per_datacenter = datacenters
                .iter()
                .filter(|(_, rf)| **rf > 0)
                .map(|(dc, rf)| {
                    let in_dc = natural
                        .iter()
                        .filter(|i| ring.endpoints[**i].datacenter == *dc)
                        .map(|i| ring.endpoints[*i].address)
                        .collect();
                    (dc.clone(), in_dc, consistency::quorum_for(*rf))
                })
                .collect();
        }
        plan
    }

    /// A write's plan: the natural replicas and the pending ones (those a
    /// joining or leaving node's ranges move to), each pending replica
    /// adding one to the answers needed, as in Cassandra.
    pub(crate) fn write_plan(
        &self,
        strategy: &ReplicationStrategy,
        token: i64,
        cl: Consistency,
    ) -> Plan {
        let mut plan = self.plan(strategy, token, cl);
        let future = self.future_ring.load();
        let Some(future) = future.as_ref() else {
            return plan;
        };
        if *strategy == ReplicationStrategy::Local {
            return plan;
        }
        for i in future.replicas(token, strategy) {
            let e = &future.endpoints[i];
            if plan.replicas.contains(&e.address)
                || (is_datacenter_local(cl) && e.datacenter != self.local_dc)
            {
                continue;
            }
            plan.replicas.push(e.address);
            plan.block_for += 1;
            if let Some((_, replicas, need)) = plan
                .per_datacenter
                .iter_mut()
                .find(|(dc, _, _)| *dc == e.datacenter)
            {
                replicas.push(e.address);
                *need += 1;
            }
        }
        plan
    }

    /// The replicas a read asks first: this node when it is one, then the
    /// live ones, fastest first (the dynamic snitch), then those believed
    /// down.
    fn order_for_read(&self, mut plan: Plan) -> Plan {
        let local = self.local_address();
        let fd = self.failure_detector.load();
        let alive = |a: &IpAddr| *a == local || fd.as_ref().is_none_or(|f| f(*a));
        let (mut up, down): (PlanReplicas, PlanReplicas) =
            plan.replicas.iter().copied().partition(|a| alive(a));
        let start = usize::from(up.first() == Some(&local));
        self.snitch.sort(&mut up[start..]);
        up.extend(down);
        plan.replicas = up;
        plan
    }

    /// UNAVAILABLE when fewer replicas than needed are alive, as the
    /// failure detector judges (every replica counts as alive without one).
    pub(crate) fn check_available(&self, plan: &Plan, cl: Consistency) -> Result<()> {
        let fd = self.failure_detector.load();
        let live = |replicas: &[IpAddr]| match &*fd {
            Some(is_alive) => replicas.iter().filter(|a| is_alive(**a)).count(),
            None => replicas.len(),
        };
        // EACH_QUORUM: every data center on its own (Cassandra names the
        // first one short of its quorum)
        for (dc, replicas, need) in &plan.per_datacenter {
            let alive = live(replicas);
            if alive < *need {
                return Err(ServiceError::UnavailableInDatacenter {
                    consistency: cl,
                    datacenter: dc.clone(),
                    required: *need,
                    alive,
                });
            }
        }
        let alive = live(&plan.replicas);
        if plan.block_for > alive || alive == 0 {
            return Err(ServiceError::Unavailable {
                consistency: cl,
                required: plan.block_for.max(1),
                alive,
            });
        }
        Ok(())
    }

    /// A sender to replicas that tasks can own.
    pub(crate) fn sender(&self) -> ReplicaSender {
        ReplicaSender {
            replica: self.replica.clone(),
            messaging: self.messaging.clone(),
            snitch: self.snitch.clone(),
        }
    }

    // ---------- writes ----------

    /// Applies mutations at `cl` (Cassandra's `StorageProxy.mutate`):
    /// each goes to every replica of its partition; the write succeeds once
    /// `cl`'s number of replicas acknowledged each mutation.
    pub async fn mutate(&self, mutations: Vec<Mutation>, cl: Consistency) -> Result<()> {
        self.mutate_with(mutations, cl, WriteType::Simple).await
    }

    /// [`mutate`](Self::mutate) for a write of the given type.
    pub async fn mutate_with(
        &self,
        mutations: Vec<Mutation>,
        cl: Consistency,
        write_type: WriteType,
    ) -> Result<()> {
        consistency::validate_for_write(cl)?;
        if mutations.is_empty() {
            return Ok(());
        }
        // where the memtables hold these partitions, asked for now: the
        // planning below overlaps the miss (a replica of them or not)
        self.replica.prefetch(&mutations);
        let started = sibyl_metrics::Instant::now();
        let mut tables: smallvec::SmallVec<[uuid::Uuid; 2]> =
            mutations.iter().map(|m| m.table_id).collect();
        tables.sort_unstable();
        tables.dedup();
        let r = self.mutate_inner(mutations, cl, write_type).await;
        let now = sibyl_metrics::Instant::now();
        self.metrics
            .requests
            .record(Operation::Write, cl, started, now, r.as_ref().err());
        for id in tables {
            self.metrics
                .with_table(id, |t| t.write.record_span(started, now));
        }
        r
    }

    async fn mutate_inner(
        &self,
        mutations: Vec<Mutation>,
        cl: Consistency,
        write_type: WriteType,
    ) -> Result<()> {
        let schema = self.schema();
        if let Some(t) = mutations
            .iter()
            .find_map(|m| schema.table_by_id(m.table_id).filter(|t| t.is_counter))
        {
            if cl == Consistency::Any {
                return Err(ServiceError::Invalid(format!(
                    "Consistency level ANY is not yet supported for counter table {}",
                    t.name
                )));
            }
            // boxed, as every path but the plain write: a request's task
            // holds the largest of its possible futures, and plain writes
            // should not pay for counters', batches' and LWTs' state
            return Box::pin(self.mutate_counters(&schema, mutations, cl)).await;
        }
        if write_type == WriteType::Batch {
            let first = (&mutations[0].key, mutations[0].table_id);
            if mutations
                .iter()
                .any(|m| m.key != *first.0 || m.table_id != first.1)
            {
                return Box::pin(self.mutate_atomically(mutations, cl)).await;
            }
        }
        sibyl_tracing::trace(|| "Determining replicas for mutation");
        self.write(&schema, mutations, cl, write_type).await
    }

    pub(crate) async fn write(
        &self,
        schema: &Schema,
        mutations: Vec<Mutation>,
        cl: Consistency,
        write_type: WriteType,
    ) -> Result<()> {
        let timeout = if write_type == WriteType::Counter {
            self.timeouts.counter_write
        } else {
            self.timeouts.write
        };
        let local = self.local_address();
        // (replicas, block_for) of each mutation (nearly always one: on the
        // stack)
        let mut plans = smallvec::SmallVec::<[Plan; 1]>::with_capacity(mutations.len());
        for m in &mutations {
            let Some(ks) = self.keyspace_of(schema, m.table_id) else {
                return Err(ServiceError::Invalid(format!(
                    "unknown table {}",
                    m.table_id
                )));
            };
            let plan = self.write_plan(&ks.replication.strategy, m.key.token, cl);
            // ANY: a hint counts; the coordinator always has one to give
            if cl != Consistency::Any {
                self.check_available(&plan, cl)?;
            }
            plans.push(plan);
        }
        let all_local = plans.iter().all(|p| p.replicas.as_slice() == [local]);
        if all_local {
            // the ring of one, and local keyspaces: one local batch, done
            // here when it need not wait (nearly always); a write that waits
            // (for room in the memtables, for a synced commit log) gets a
            // future and a deadline, boxed: every write's future (and its
            // callers') would otherwise hold and copy its room
            let mutations = match sibyl_tracing::in_stage(Stage::Mutation, || {
                self.replica.try_apply_now(mutations)
            }) {
                Ok(r) => return r.map_err(Self::replica_failure),
                Err(m) => m,
            };
            let local_write =
                sibyl_tracing::scope_in_stage(Stage::Mutation, self.replica.apply(mutations));
            return match Box::pin(timeout_when_pending(timeout, local_write)).await {
                Ok(Ok(())) => Ok(()),
                Ok(Err(f)) => Err(Self::replica_failure(f)),
                Err(_) => Err(ServiceError::WriteTimeout {
                    consistency: cl,
                    received: 0,
                    block_for: plans.first().map_or(1, |p| p.block_for),
                    write_type,
                }),
            };
        }
        // boxed, for the reason given in `read_from`
        Box::pin(self.write_to_replicas(mutations, plans.into_vec(), cl, write_type, timeout)).await
    }

    /// [`write`](Self::write) when other replicas are written.
    async fn write_to_replicas(
        &self,
        mutations: Vec<Mutation>,
        plans: Vec<Plan>,
        cl: Consistency,
        write_type: WriteType,
        timeout: Duration,
    ) -> Result<()> {
        let local = self.local_address();
        // one message per endpoint with the mutations it replicates
        let mut per_endpoint: Vec<(IpAddr, Vec<usize>)> = Vec::new();
        for (i, p) in plans.iter().enumerate() {
            for r in &p.replicas {
                match per_endpoint.iter_mut().find(|(a, _)| a == r) {
                    Some((_, v)) => v.push(i),
                    None => per_endpoint.push((*r, vec![i])),
                }
            }
        }
        let mut acks: Vec<Vec<IpAddr>> = vec![Vec::new(); mutations.len()];
        let mut tasks = tokio::task::JoinSet::new();
        for (to, idx) in &per_endpoint {
            let batch: Vec<Mutation> = idx.iter().map(|i| mutations[*i].clone()).collect();
            let hint_to = self.hint_target(*to);
            if *to != local && !self.is_alive(*to) {
                // a replica known down gets a hint, not a message; with
                // ANY, a hint is an acknowledgement
                if let Some(target) = hint_to {
                    self.store_hint(target, &batch);
                    if cl == Consistency::Any {
                        for i in idx {
                            acks[*i].push(*to);
                        }
                    }
                }
                continue;
            }
            let (sender, to) = (self.sender(), *to);
            let hints = self.hints.read().clone();
            let request = Request::Mutation(batch.clone());
            tasks.spawn(sibyl_tracing::traced(async move {
                let r = sender.send(to, request, timeout).await;
                if r.is_none() {
                    // no answer in time: the replica gets a hint
                    if let (Some(h), Some(host)) = (hints, hint_to) {
                        h.store(host, &batch);
                    }
                }
                (to, r)
            }));
        }
        let mut failure: Option<ReplicaFailure> = None;
        let need = |acks: &[Vec<IpAddr>]| acks.iter().zip(&plans).all(|(a, p)| p.satisfied_by(a));
        let deadline = tokio::time::Instant::now() + timeout;
        while !need(&acks) {
            match tokio::time::timeout_at(deadline, tasks.join_next()).await {
                Ok(Some(Ok((to, Some(Response::Done))))) => {
                    if let Some((_, idx)) = per_endpoint.iter().find(|(a, _)| *a == to) {
                        for i in idx {
                            acks[*i].push(to);
                        }
                    }
                }
                Ok(Some(Ok((_, Some(Response::Failure(f)))))) => {
                    failure.get_or_insert(f);
                }
                Ok(Some(_)) => {}
                Ok(None) | Err(_) => break,
            }
        }
        // the other replicas' writes go on without a waiter
        tasks.detach_all();
        if need(&acks) {
            return Ok(());
        }
        if let Some(f) = failure {
            return Err(Self::replica_failure(f));
        }
        let (received, block_for) = acks
            .iter()
            .zip(&plans)
            .filter(|(a, p)| !p.satisfied_by(a))
            .map(|(a, p)| (a.len(), p.block_for))
            .next()
            .unwrap_or((0, 1));
        Err(ServiceError::WriteTimeout {
            consistency: cl,
            received,
            block_for,
            write_type,
        })
    }

    fn record_latency(&self, table_id: uuid::Uuid, d: Duration) {
        self.latencies
            .lock()
            .entry(table_id)
            .or_insert_with(LatencyHistogram::new)
            .record(d);
    }

    /// Whether the failure detector has `addr` up (always, without one).
    pub fn is_alive(&self, addr: IpAddr) -> bool {
        addr == self.local_address()
            || self
                .failure_detector
                .load()
                .as_ref()
                .is_none_or(|f| f(addr))
    }

    /// The host to hint for a write `addr` misses, if it is to be hinted.
    fn hint_target(&self, addr: IpAddr) -> Option<uuid::Uuid> {
        let hints = self.hints.read().clone()?;
        let ring = self.ring.load();
        let e = &ring.endpoints[ring.endpoint_of(addr)?];
        hints.should_hint(addr, &e.datacenter).then_some(e.host_id)
    }

    fn store_hint(&self, host: uuid::Uuid, mutations: &[Mutation]) {
        if let Some(h) = self.hints.read().as_ref() {
            h.store(host, mutations);
        }
    }

    /// Keeps hints for the writes replicas miss from now on.
    pub fn set_hints(&self, hints: Arc<HintsService>) {
        *self.hints.write() = Some(hints);
    }

    /// The stream sessions this node takes part in, recent ones included.
    pub fn stream_sessions(&self) -> Vec<Arc<crate::streaming::SessionState>> {
        self.streams.sessions()
    }

    pub fn hints(&self) -> Option<Arc<HintsService>> {
        self.hints.read().clone()
    }

    /// The failure detector saw `addr` go down or come up: hints are kept
    /// for at most `max_hint_window` of downtime, and delivered once it is
    /// up.
    pub fn note_liveness(self: &Arc<Self>, addr: IpAddr, alive: bool) {
        if let Some(h) = self.hints() {
            h.note_liveness(addr, alive);
        }
        if alive {
            let me = self.clone();
            tokio::spawn(async move { me.deliver_hints().await });
        }
    }

    /// Delivers the hints of every host that is up (Cassandra's
    /// `HintsDispatchExecutor`): hosts in parallel, as many at once as
    /// `max_hints_delivery_threads` allows, each at the throttle divided
    /// by the number of other nodes; run every ten seconds and when a host
    /// comes up. Returns how many hints were delivered.
    pub async fn deliver_hints(self: &Arc<Self>) -> usize {
        let Some(hints) = self.hints() else {
            return 0;
        };
        let mut deliveries = tokio::task::JoinSet::new();
        for p in hints.pending() {
            let (addr, others) = {
                let ring = self.ring.load();
                let addr = ring
                    .endpoints
                    .iter()
                    .find(|e| e.host_id == p.host_id)
                    .map(|e| e.address);
                (addr, ring.endpoints.len().saturating_sub(1))
            };
            let Some(addr) = addr else {
                continue;
            };
            if addr == self.local_address() || !self.is_alive(addr) {
                continue;
            }
            let (me, hints) = (self.clone(), hints.clone());
            deliveries.spawn(async move {
                let schema = me.schema();
                let gc_grace = |id| schema.table_by_id(id).map(|t| t.params.gc_grace_seconds);
                let comparator = |id| schema.table_by_id(id).map(|t| t.comparator.clone());
                let timeout = me.timeouts.write;
                let n = hints
                    .deliver(p.host_id, addr, others, gc_grace, &comparator, |ms| {
                        let sender = me.sender();
                        async move {
                            matches!(
                                sender.send(addr, Request::Hint(ms), timeout).await,
                                Some(Response::Done)
                            )
                        }
                    })
                    .await;
                n
            });
        }
        let mut total = 0;
        while let Some(n) = deliveries.join_next().await {
            total += n.unwrap_or(0);
        }
        total
    }

    /// A replica could not read its data (a corrupt SSTable, an I/O error):
    /// Cassandra's READ_FAILURE, with the replica and reason UNKNOWN (0).
    fn read_failed(
        from: IpAddr,
        message: &str,
        (cl, block_for): (Consistency, usize),
        received: usize,
        data_present: bool,
    ) -> ServiceError {
        tracing::warn!("read failed on {from}: {message}");
        ServiceError::ReadFailure {
            consistency: cl,
            received,
            block_for,
            failures: vec![(from, 0)],
            data_present,
        }
    }

    pub(crate) fn replica_failure(f: ReplicaFailure) -> ServiceError {
        match f {
            ReplicaFailure::WriteTimeout {
                received,
                block_for,
            } => ServiceError::Replica(format!(
                "the counter leader timed out with {received} of {block_for} acknowledgements"
            )),
            ReplicaFailure::Unavailable { required, alive } => ServiceError::Replica(format!(
                "the counter leader saw {alive} replicas alive of {required} required"
            )),
            ReplicaFailure::Overloaded(m) => ServiceError::Overloaded(m),
            ReplicaFailure::UnknownTable(id) => {
                ServiceError::Invalid(format!("unknown table {id}"))
            }
            ReplicaFailure::Error(m) => ServiceError::Replica(m),
        }
    }

    fn lock_of(&self, table_id: uuid::Uuid, key: &DecoratedKey) -> &tokio::sync::Mutex<()> {
        let t = u64::from_le_bytes(table_id.as_bytes()[..8].try_into().unwrap_or([0; 8]));
        &self.locks[((key.token as u64) ^ t) as usize % LOCK_STRIPES]
    }

    /// Counter updates (Cassandra's `CounterMutation`): each is led by a
    /// replica of its partition, this node when it is one, otherwise the
    /// closest live one, which gets it as `COUNTER_MUTATION_REQ`.
    async fn mutate_counters(
        &self,
        schema: &Schema,
        mutations: Vec<Mutation>,
        cl: Consistency,
    ) -> Result<()> {
        let local = self.local_address();
        for m in mutations {
            let Some(ks) = self.keyspace_of(schema, m.table_id) else {
                return Err(ServiceError::Invalid(format!(
                    "unknown table {}",
                    m.table_id
                )));
            };
            let plan = self.write_plan(&ks.replication.strategy, m.key.token, cl);
            self.check_available(&plan, cl)?;
            if plan.replicas.contains(&local) || !has_deltas(&m) {
                self.lead_counter_write(schema, m, cl).await?;
                continue;
            }
            // the leader: a live replica of this data center, fastest first
            let mut candidates: Vec<IpAddr> = {
                let ring = self.ring.load();
                let all = ring.replicas(m.key.token, &ks.replication.strategy);
                let in_dc: Vec<IpAddr> = all
                    .iter()
                    .filter(|i| ring.endpoints[**i].datacenter == self.local_dc)
                    .map(|i| ring.endpoints[*i].address)
                    .collect();
                if in_dc.is_empty() {
                    all.iter().map(|i| ring.endpoints[*i].address).collect()
                } else {
                    in_dc
                }
            };
            candidates.retain(|a| self.is_alive(*a));
            self.snitch.sort(&mut candidates);
            let Some(leader) = candidates.first().copied() else {
                return Err(ServiceError::Unavailable {
                    consistency: cl,
                    required: plan.block_for,
                    alive: 0,
                });
            };
            self.metrics.counter_forwards.inc();
            let request = Request::CounterMutation {
                mutation: m,
                consistency: cl as u16,
            };
            let timeout = self.timeouts.counter_write;
            match self.sender().send(leader, request, timeout).await {
                Some(Response::Done) => {}
                Some(Response::Failure(ReplicaFailure::WriteTimeout {
                    received,
                    block_for,
                })) => {
                    return Err(ServiceError::WriteTimeout {
                        consistency: cl,
                        received: received as usize,
                        block_for: block_for as usize,
                        write_type: WriteType::Counter,
                    })
                }
                Some(Response::Failure(ReplicaFailure::Unavailable { required, alive })) => {
                    return Err(ServiceError::Unavailable {
                        consistency: cl,
                        required: required as usize,
                        alive: alive as usize,
                    })
                }
                Some(Response::Failure(f)) => return Err(Self::replica_failure(f)),
                _ => {
                    return Err(ServiceError::WriteTimeout {
                        consistency: cl,
                        received: 0,
                        block_for: plan.block_for,
                        write_type: WriteType::Counter,
                    })
                }
            }
        }
        Ok(())
    }

    /// Leads one counter update on this replica: under the partition's
    /// lock, reads this node's shard of each updated counter and turns the
    /// delta into that shard one clock tick later, then replicates the
    /// result like any write. Deletions of counters go through unchanged.
    async fn lead_counter_write(
        &self,
        schema: &Schema,
        mut m: Mutation,
        cl: Consistency,
    ) -> Result<()> {
        let id = *self.host_id().as_bytes();
        let _guard = self.lock_of(m.table_id, &m.key).lock().await;
        if has_deltas(&m) {
            let cmd = ReadCommand::single(m.table_id, m.key.clone(), self.clock.now_seconds());
            let current = match sibyl_tracing::in_stage(Stage::Counter, || self.replica.read(&cmd))
            {
                Ok(ReadResponse::Data(mut d)) => d.pop().map(|(_, p)| p),
                Ok(ReadResponse::Digest(_)) => None,
                Err(f) => return Err(Self::replica_failure(f)),
            };
            lead_counter_update(current, &mut m, &id, cmd.now);
        }
        self.write(schema, vec![m], cl, WriteType::Counter).await
    }

    /// Serves `COUNTER_MUTATION_REQ`: this node leads the update.
    pub async fn serve_counter_mutation(&self, m: Mutation, consistency: u16) -> Response {
        let Ok(cl) = Consistency::try_from(consistency) else {
            return Response::Failure(ReplicaFailure::Error(format!(
                "unknown consistency {consistency}"
            )));
        };
        let schema = self.schema();
        match self.lead_counter_write(&schema, m, cl).await {
            Ok(()) => Response::Done,
            Err(ServiceError::WriteTimeout {
                received,
                block_for,
                ..
            }) => Response::Failure(ReplicaFailure::WriteTimeout {
                received: received as u32,
                block_for: block_for as u32,
            }),
            Err(ServiceError::Unavailable {
                required, alive, ..
            }) => Response::Failure(ReplicaFailure::Unavailable {
                required: required as u32,
                alive: alive as u32,
            }),
            Err(e) => Response::Failure(ReplicaFailure::Error(e.to_string())),
        }
    }

    // ---------- reads ----------

    /// Reads at `cl` (Cassandra's `StorageProxy.read` and `getRangeSlice`):
    /// the partitions the command selects, reconciled over the replicas
    /// that answered, unresolved (call `Partition::resolve`).
    pub async fn read(
        &self,
        cmd: ReadCommand,
        cl: Consistency,
    ) -> Result<Vec<(DecoratedKey, Partition)>> {
        consistency::validate_for_read(cl)?;
        let started = sibyl_metrics::Instant::now();
        let table_id = cmd.table_id;
        let op = match (&cmd.kind, cl.is_serial()) {
            (_, true) => Operation::CasRead,
            (ReadKind::PartitionRange { .. }, false) => Operation::RangeSlice,
            _ => Operation::Read,
        };
        let r = if cl.is_serial() {
            let schema = self.schema();
            match schema.table_by_id(cmd.table_id).cloned() {
                Some(t) => Box::pin(self.serial_read(&t, cmd, cl)).await,
                None => Err(ServiceError::Invalid(format!(
                    "unknown table {}",
                    cmd.table_id
                ))),
            }
        } else {
            self.read_plain(cmd, cl).await
        };
        self.record_read(op, cl, table_id, started, &r);
        r
    }

    /// A coordinator read's latencies: the client request's, and the
    /// table's (its scans apart).
    fn record_read<T>(
        &self,
        op: Operation,
        cl: Consistency,
        table_id: uuid::Uuid,
        started: sibyl_metrics::Instant,
        r: &Result<T>,
    ) {
        let now = sibyl_metrics::Instant::now();
        self.metrics
            .requests
            .record(op, cl, started, now, r.as_ref().err());
        self.metrics.with_table(table_id, |table| match op {
            Operation::RangeSlice => table.scan.record_span(started, now),
            _ => table.read.record_span(started, now),
        });
    }

    /// A read this node answers alone and at once (one partition, at a
    /// level one replica satisfies, this node the replica asked): what
    /// [`read`](Self::read) answers, metrics included, without making its
    /// future (every future above a request's read holds it, and is copied
    /// with it). `None` for any other read, or one that fails before a
    /// replica is asked: `read` answers those. It records what `read`
    /// records (`record_read`).
    pub fn read_now(
        &self,
        cmd: &ReadCommand,
        cl: Consistency,
    ) -> Option<Result<Vec<(DecoratedKey, Partition)>>> {
        let ReadKind::SinglePartition { key } = &cmd.kind else {
            return None;
        };
        if cl.is_serial() || consistency::validate_for_read(cl).is_err() {
            return None;
        }
        let started = sibyl_metrics::Instant::now();
        let schema = self.schema();
        let ks = self.keyspace_of(&schema, cmd.table_id)?;
        let plan = self.plan(&ks.replication.strategy, key.token, cl);
        let local = self.local_address();
        // this node alone when it is a replica (`plan` puts it first, and
        // the order for a read keeps it there) and one answer is enough:
        // then it is available too, as a node is alive to itself (as
        // Cassandra's failure detector answers for its own address)
        if !(plan.per_datacenter.is_empty()
            && plan.block_for == 1
            && plan.replicas.first() == Some(&local))
        {
            return None;
        }
        let r = self.read_locally(cmd, cl, &plan, local);
        self.record_read(Operation::Read, cl, cmd.table_id, started, &r);
        Some(r)
    }

    /// The read of `cmd` by this node alone (the ring of one, and ONE or
    /// LOCAL_ONE on a replica).
    fn read_locally(
        &self,
        cmd: &ReadCommand,
        cl: Consistency,
        plan: &Plan,
        local: IpAddr,
    ) -> Result<Vec<(DecoratedKey, Partition)>> {
        match sibyl_tracing::in_stage(Stage::Read, || self.replica.read(cmd)) {
            Ok(ReadResponse::Data(d)) => Ok(d),
            Ok(ReadResponse::Digest(_)) => Ok(Vec::new()),
            Err(ReplicaFailure::Error(m)) => {
                Err(Self::read_failed(local, &m, (cl, plan.block_for), 0, false))
            }
            Err(f) => Err(Self::replica_failure(f)),
        }
    }

    /// A read at a level that is not serial.
    pub(crate) async fn read_plain(
        &self,
        cmd: ReadCommand,
        cl: Consistency,
    ) -> Result<Vec<(DecoratedKey, Partition)>> {
        let schema = self.schema();
        let Some(ks) = self.keyspace_of(&schema, cmd.table_id) else {
            return Err(ServiceError::Invalid(format!(
                "unknown table {}",
                cmd.table_id
            )));
        };
        let strategy = &ks.replication.strategy;
        match &cmd.kind {
            ReadKind::SinglePartition { key } => {
                let plan = self.plan(strategy, key.token, cl);
                self.read_from(plan, cmd, cl, self.timeouts.read).await
            }
            ReadKind::PartitionRange { .. } => Box::pin(self.range_read(strategy, cmd, cl)).await,
            ReadKind::Index { limit, .. } => {
                let limit = *limit;
                Box::pin(self.index_read(strategy, cmd, cl, limit)).await
            }
        }
    }

    /// An index read: every node searches its own index; each is asked,
    /// each partition kept once, in token order.
    async fn index_read(
        &self,
        strategy: &ReplicationStrategy,
        cmd: ReadCommand,
        cl: Consistency,
        limit: usize,
    ) -> Result<Vec<(DecoratedKey, Partition)>> {
        let endpoints: Vec<IpAddr> = if *strategy == ReplicationStrategy::Local {
            vec![self.local_address()]
        } else {
            self.ring
                .load()
                .endpoints
                .iter()
                .map(|e| e.address)
                .collect()
        };
        let mut all: Vec<(DecoratedKey, Partition)> = Vec::new();
        for to in endpoints {
            let plan = Plan::new(smallvec::smallvec![to], 1);
            let part = self
                .read_from(plan, cmd.clone(), cl, self.timeouts.range)
                .await?;
            all = merge_sorted(all, part, cmd.now);
        }
        all.truncate(limit);
        Ok(all)
    }

    /// A partition range read: the range is cut at the ring's tokens, and
    /// each piece is read from its own replicas, in token order, until the
    /// limit is reached.
    async fn range_read(
        &self,
        strategy: &ReplicationStrategy,
        cmd: ReadCommand,
        cl: Consistency,
    ) -> Result<Vec<(DecoratedKey, Partition)>> {
        let ReadKind::PartitionRange {
            start,
            start_token,
            end_token,
            limit,
        } = cmd.kind.clone()
        else {
            return Ok(Vec::new());
        };
        let local = self.local_address();
        let everything_local = *strategy == ReplicationStrategy::Local || {
            let ring = self.ring.load();
            ring.endpoints.len() <= 1
                || strategy.replication_factor(ring.endpoints.len()) >= ring.endpoints.len()
                    && ring.endpoint_of(local).is_some()
        };
        let first = start.as_ref().map_or(start_token, |b| b.key.token);
        sibyl_tracing::trace(|| "Computing ranges to query");
        let pieces: Vec<(i64, i64)> = if everything_local {
            vec![(first, end_token)]
        } else {
            self.ring.load().split(first, end_token)
        };
        // one range at a time: each continues after the last key read
        sibyl_tracing::trace(|| {
            format!(
                "Submitting range requests on {} ranges with a concurrency of 1",
                pieces.len()
            )
        });
        let mut out: Vec<(DecoratedKey, Partition)> = Vec::new();
        for (lo, hi) in pieces {
            if out.len() >= limit {
                break;
            }
            let piece_start = match (&start, out.last()) {
                (_, Some((k, _))) => Some(KeyBound {
                    key: k.clone(),
                    inclusive: false,
                }),
                (Some(b), None) if b.key.token >= lo => Some(b.clone()),
                _ => None,
            };
            let piece = ReadCommand {
                kind: ReadKind::PartitionRange {
                    start: piece_start,
                    start_token: lo.max(start_token),
                    end_token: hi,
                    limit: limit - out.len(),
                },
                ..cmd.clone()
            };
            let plan = if everything_local && *strategy == ReplicationStrategy::Local {
                Plan::new(smallvec::smallvec![local], 1)
            } else {
                self.plan(strategy, hi, cl)
            };
            out.extend(self.read_from(plan, piece, cl, self.timeouts.range).await?);
        }
        Ok(out)
    }

    /// Reads a command from `plan`'s replicas: data from the first, digests
    /// from the others it needs; on a digest mismatch, data from all of
    /// them, reconciled.
    async fn read_from(
        &self,
        plan: Plan,
        cmd: ReadCommand,
        cl: Consistency,
        timeout: Duration,
    ) -> Result<Vec<(DecoratedKey, Partition)>> {
        self.check_available(&plan, cl)?;
        let local = self.local_address();
        let plan = self.order_for_read(plan);
        let targets = plan.read_targets();
        if targets == [local] {
            return self.read_locally(&cmd, cl, &plan, local);
        }
        // boxed: the state of a read across replicas (tasks, timers, read
        // repair) is large, and every future a request's task holds above
        // this one would hold it too, and be copied with it, for local reads
        Box::pin(self.read_from_replicas(plan, targets, cmd, cl, timeout)).await
    }

    /// [`read_from`](Self::read_from) when other replicas are read.
    async fn read_from_replicas(
        &self,
        plan: Plan,
        targets: Vec<IpAddr>,
        cmd: ReadCommand,
        cl: Consistency,
        timeout: Duration,
    ) -> Result<Vec<(DecoratedKey, Partition)>> {
        let timeout_error = |received: usize, data_present: bool| ServiceError::ReadTimeout {
            consistency: cl,
            received,
            block_for: plan.block_for,
            data_present,
        };
        let deadline = tokio::time::Instant::now() + timeout;
        // speculative retry: a replica that has not answered when the
        // slowest expected answer should have come is backed up by the next
        // replica, asked for data (Cassandra's `speculative_retry`)
        let started = std::time::Instant::now();
        let table = self.schema().table_by_id(cmd.table_id).cloned();
        let policy = table
            .as_ref()
            .and_then(|t| SpeculativeRetry::parse(&t.params.speculative_retry))
            .unwrap_or(SpeculativeRetry::Percentile(99.0));
        let percentile = |p: f64| {
            self.latencies
                .lock()
                .get(&cmd.table_id)
                .and_then(|h| h.percentile(p))
                .unwrap_or_else(|| {
                    // no reads measured yet: three times the slowest
                    // replica's average answer, at least 20 ms
                    let expected = targets
                        .iter()
                        .filter_map(|t| self.snitch.score(*t))
                        .fold(0.0f64, f64::max);
                    Duration::from_micros((expected * 3.0) as u64).max(Duration::from_millis(20))
                })
        };
        let (spare, speculate_after) = match policy {
            SpeculativeRetry::None => (None, timeout),
            SpeculativeRetry::Always => {
                (plan.replicas.get(plan.block_for).copied(), Duration::ZERO)
            }
            SpeculativeRetry::Percentile(p) => {
                (plan.replicas.get(plan.block_for).copied(), percentile(p))
            }
            SpeculativeRetry::Fixed(ms) => (
                plan.replicas.get(plan.block_for).copied(),
                Duration::from_millis(ms),
            ),
            SpeculativeRetry::Min(p, ms) => (
                plan.replicas.get(plan.block_for).copied(),
                percentile(p).min(Duration::from_millis(ms)),
            ),
            SpeculativeRetry::Max(p, ms) => (
                plan.replicas.get(plan.block_for).copied(),
                percentile(p).max(Duration::from_millis(ms)),
            ),
        };
        // EACH_QUORUM counts answers per data center: no spare stands in
        let spare = spare.filter(|_| plan.per_datacenter.is_empty());
        let speculate_after = speculate_after.min(timeout / 2);
        let responses = self
            .gather_reads(
                (cl, plan.block_for),
                &targets,
                true,
                spare,
                &cmd,
                speculate_after,
                deadline,
            )
            .await?;
        let data = responses.iter().find_map(|(_, r)| match r {
            ReadResponse::Data(d) => Some(d.clone()),
            _ => None,
        });
        if responses.len() < targets.len() {
            return Err(timeout_error(responses.len(), data.is_some()));
        }
        let targets: Vec<IpAddr> = responses.iter().map(|(to, _)| *to).collect();
        let Some(data) = data else {
            return Err(timeout_error(responses.len(), false));
        };
        let digest = sibyl_db::read::digest(&data);
        if responses.iter().all(|(_, r)| r.digest() == digest) {
            self.record_latency(cmd.table_id, started.elapsed());
            return Ok(data);
        }
        // digests disagree: full data from each, reconciled cell by cell
        let responses = self
            .gather_reads(
                (cl, plan.block_for),
                &targets,
                false,
                None,
                &cmd,
                timeout,
                deadline,
            )
            .await?;
        if responses.len() < targets.len() {
            return Err(timeout_error(responses.len(), true));
        }
        let mut merged: Vec<(DecoratedKey, Partition)> = Vec::new();
        let mut answers: Vec<(IpAddr, Vec<(DecoratedKey, Partition)>)> = Vec::new();
        for (to, r) in responses {
            if let ReadResponse::Data(d) = r {
                merged = merge_sorted(merged, d.clone(), cmd.now);
                answers.push((to, d));
            }
        }
        if let ReadKind::PartitionRange { limit, .. } | ReadKind::Index { limit, .. } = cmd.kind {
            merged.truncate(limit);
        }
        // `read_repair = 'NONE'`: the answer is reconciled, replicas are
        // left as they are
        if table.is_none_or(|t| t.params.read_repair != "NONE") {
            self.metrics.read_repairs.inc();
            self.read_repair(&cmd, &merged, answers, deadline).await;
        }
        self.record_latency(cmd.table_id, started.elapsed());
        Ok(merged)
    }

    /// A read's requests: data from the first target, digests from the
    /// others (data from all unless `digests`), and, if they are not all
    /// answered after `speculate_after`, data from `spare` as well. Returns the first `targets.len()` answers
    /// that arrive by `deadline`, with who gave them. A failed replica makes
    /// the read fail with its reason.
    #[allow(clippy::too_many_arguments)]
    async fn gather_reads(
        &self,
        (cl, block_for): (Consistency, usize),
        targets: &[IpAddr],
        digests: bool,
        spare: Option<IpAddr>,
        cmd: &ReadCommand,
        speculate_after: Duration,
        deadline: tokio::time::Instant,
    ) -> Result<Vec<(IpAddr, ReadResponse)>> {
        let mut tasks = tokio::task::JoinSet::new();
        let spawn = |tasks: &mut tokio::task::JoinSet<_>, to: IpAddr, command: ReadCommand| {
            let sender = self.sender();
            let timeout = deadline.saturating_duration_since(tokio::time::Instant::now());
            if to != sender.messaging.local_address() {
                sibyl_tracing::trace_with(|t| {
                    let what = if command.digest { "digest" } else { "data" };
                    format!("reading {what} from {}", t.peer(to))
                });
            }
            // a single-partition read this node serves itself warns its
            // client (a range read's own part does not, as in Cassandra)
            let own = matches!(command.kind, ReadKind::SinglePartition { .. });
            let read = sibyl_tracing::traced(async move {
                (to, sender.send(to, Request::Read(command), timeout).await)
            });
            if own {
                tasks.spawn(crate::client_warn::propagate(read));
            } else {
                tasks.spawn(read);
            }
        };
        for (i, to) in targets.iter().enumerate() {
            let command = if i > 0 && digests {
                cmd.as_digest()
            } else {
                cmd.clone()
            };
            spawn(&mut tasks, *to, command);
        }
        let speculate_at = tokio::time::Instant::now() + speculate_after;
        let mut spare = spare;
        let mut out: Vec<(IpAddr, ReadResponse)> = Vec::new();
        while out.len() < targets.len() {
            let next = tokio::select! {
                r = tokio::time::timeout_at(deadline, tasks.join_next()) => r,
                _ = tokio::time::sleep_until(speculate_at), if spare.is_some() => {
                    if let Some(to) = spare.take() {
                        self.metrics.speculative_retries.inc();
                        spawn(&mut tasks, to, cmd.clone());
                    }
                    continue;
                }
            };
            match next {
                Ok(Some(Ok((to, Some(Response::Read(r)))))) => out.push((to, r)),
                Ok(Some(Ok((to, Some(Response::Failure(f)))))) => {
                    return Err(match f {
                        // the replica could not read its data: Cassandra's
                        // ReadFailure, not a server error
                        ReplicaFailure::Error(m) => Self::read_failed(
                            to,
                            &m,
                            (cl, block_for),
                            out.len(),
                            out.iter().any(|(_, r)| matches!(r, ReadResponse::Data(_))),
                        ),
                        f => Self::replica_failure(f),
                    });
                }
                Ok(Some(_)) => {
                    // no answer from one: the spare, if not yet asked, now
                    if let Some(to) = spare.take() {
                        spawn(&mut tasks, to, cmd.clone());
                    }
                }
                Ok(None) | Err(_) => break,
            }
        }
        tasks.detach_all();
        Ok(out)
    }

    /// Blocking read repair (Cassandra's `BlockingReadRepair`): every
    /// replica whose answer differs from the reconciled data gets, for each
    /// partition it lacked or held stale, the reconciled partition as a
    /// mutation (timestamps and tombstones kept, so applying it twice is
    /// harmless), and the read waits for those writes until its deadline,
    /// so that a later read at the same level cannot see older data.
    async fn read_repair(
        &self,
        cmd: &ReadCommand,
        merged: &[(DecoratedKey, Partition)],
        answers: Vec<(IpAddr, Vec<(DecoratedKey, Partition)>)>,
        deadline: tokio::time::Instant,
    ) {
        let mut tasks = tokio::task::JoinSet::new();
        for (to, data) in answers {
            let mutations: Vec<Mutation> = merged
                .iter()
                .filter(|(k, p)| {
                    let theirs = data.iter().find(|(dk, _)| dk == k);
                    theirs.is_none_or(|(_, q)| {
                        sibyl_db::read::digest(&[(k.clone(), q.clone())])
                            != sibyl_db::read::digest(&[(k.clone(), p.clone())])
                    })
                })
                .map(|(k, p)| Mutation {
                    table_id: cmd.table_id,
                    key: k.clone(),
                    update: p.clone(),
                })
                .collect();
            if mutations.is_empty() {
                continue;
            }
            tracing::debug!("read repair: {} partitions to {to}", mutations.len());
            let sender = self.sender();
            let timeout = deadline.saturating_duration_since(tokio::time::Instant::now());
            tasks.spawn(sibyl_tracing::traced(async move {
                sender.send(to, Request::Mutation(mutations), timeout).await
            }));
        }
        let _ = tokio::time::timeout_at(deadline, async {
            while tasks.join_next().await.is_some() {}
        })
        .await;
        tasks.detach_all();
    }

    // ---------- truncate and schema ----------

    /// Truncates a table on every node (Cassandra's `StorageProxy.truncateBlocking`):
    /// all must be up and answer within `truncate_request_timeout`.
    pub async fn truncate(&self, table_id: uuid::Uuid) -> Result<()> {
        let endpoints: Vec<IpAddr> = self
            .ring
            .load()
            .endpoints
            .iter()
            .map(|e| e.address)
            .collect();
        let endpoints = if endpoints.is_empty() {
            vec![self.local_address()]
        } else {
            endpoints
        };
        let ts = self.clock.now_micros();
        let mut tasks = tokio::task::JoinSet::new();
        for to in &endpoints {
            let (sender, to) = (self.sender(), *to);
            let request = Request::Truncate {
                table_id,
                timestamp_micros: ts,
            };
            let timeout = self.timeouts.truncate;
            tasks.spawn(sibyl_tracing::traced(async move {
                sender.send(to, request, timeout).await
            }));
        }
        let mut done = 0;
        while let Some(r) = tasks.join_next().await {
            match r {
                Ok(Some(Response::Done)) => done += 1,
                Ok(Some(Response::Failure(f))) => {
                    return Err(ServiceError::Truncate(format!(
                        "Error during truncate: {}",
                        Self::replica_failure(f)
                    )))
                }
                _ => {}
            }
        }
        if done < endpoints.len() {
            return Err(ServiceError::Truncate(format!(
                "Truncate timed out - received only {done} responses"
            )));
        }
        Ok(())
    }

    /// Makes `next` the schema, storing `mutations` in `system_schema`, and
    /// builds the index `build`, if any.
    ///
    /// `base` is the version of the schema the change was planned against.
    /// In a cluster the change goes through the cluster metadata log, which
    /// applies it on every node in one order (see
    /// [`Replica::apply_schema_mutations`]); if another change came first,
    /// the answer is [`ServiceError::SchemaConflict`] and the caller plans
    /// again. A single node applies it directly.
    pub async fn apply_schema_change(
        &self,
        base: uuid::Uuid,
        mutations: Vec<Mutation>,
        next: Schema,
        build: Option<(TableMetadata, sibyl_schema::index::IndexMetadata)>,
        event: Option<sibyl_protocol::SchemaChange>,
    ) -> Result<Arc<Schema>> {
        let log = self.schema_log.read().clone();
        if let Some(log) = log {
            return log.commit(base, mutations, event).await;
        }
        if self.schema().version != base {
            return Err(ServiceError::SchemaConflict);
        }
        Ok(self
            .replica
            .apply_schema_change(mutations, next, build)
            .await?)
    }

    /// Judges replicas alive or down with `is_alive` from now on.
    /// The ring after the current range movements (None: none under way).
    pub fn set_future_ring(&self, future: Option<TokenMetadata>) {
        self.future_ring.store(future.map(Arc::new));
    }

    pub fn future_ring(&self) -> Option<TokenMetadata> {
        self.future_ring.load().as_deref().cloned()
    }

    pub fn set_failure_detector(&self, is_alive: Arc<dyn Fn(IpAddr) -> bool + Send + Sync>) {
        self.failure_detector.store(Some(Arc::new(is_alive)));
    }

    /// Sends schema changes through the cluster metadata log from now on.
    pub fn set_schema_log(&self, log: Arc<dyn SchemaLog>) {
        *self.schema_log.write() = Some(log);
    }
}

/// Merges two lists of partitions in token order, reconciling partitions
/// both hold.
fn merge_sorted(
    a: Vec<(DecoratedKey, Partition)>,
    b: Vec<(DecoratedKey, Partition)>,
    now: i32,
) -> Vec<(DecoratedKey, Partition)> {
    if a.is_empty() {
        return b;
    }
    let mut out: Vec<(DecoratedKey, Partition)> = Vec::with_capacity(a.len() + b.len());
    let mut a = a.into_iter().peekable();
    let mut b = b.into_iter().peekable();
    loop {
        let next = match (a.peek(), b.peek()) {
            (Some(x), Some(y)) => match x.0.cmp(&y.0) {
                std::cmp::Ordering::Less => a.next(),
                std::cmp::Ordering::Greater => b.next(),
                std::cmp::Ordering::Equal => {
                    let (Some((k, mut p)), Some((_, q))) = (a.next(), b.next()) else {
                        break;
                    };
                    p.merge(q, now);
                    Some((k, p))
                }
            },
            (Some(_), None) => a.next(),
            (None, Some(_)) => b.next(),
            (None, None) => None,
        };
        match next {
            Some(x) => out.push(x),
            None => break,
        }
    }
    out
}

fn has_deltas(m: &Mutation) -> bool {
    let row_has = |r: &Row| {
        r.cells.values().any(|d| matches!(d, ColumnData::Counter(c) if c.value.as_deref().is_some_and(|v| !counter::is_context(v))))
    };
    m.update.static_row.as_deref().is_some_and(row_has) || m.update.rows.values().any(row_has)
}

/// Turns each delta in `m` into this node's new shard. The clock continues from
/// the highest clock ever written for the shard (deleted versions included, so
/// the new shard supersedes them when merged), the count from the live value.
fn lead_counter_update(raw: Option<Partition>, m: &mut Mutation, id: &[u8; 16], now: i32) {
    let live = raw.clone().map(|mut p| {
        p.resolve(now);
        p
    });
    let shard = |p: &Option<Partition>, ck: Option<&sibyl_db::ClusteringKey>, name: &str| {
        let p = p.as_ref()?;
        let row = match ck {
            None => p.static_row.as_deref(),
            Some(ck) => p.rows.get(ck),
        }?;
        match row.cells.get(name)? {
            ColumnData::Counter(c) => counter::shard_of(c.value.as_deref()?, id),
            _ => None,
        }
    };
    let lead = |row: &mut Row, ck: Option<&sibyl_db::ClusteringKey>| {
        let names: Vec<sibyl_db::data::ColumnName> = row.cells.iter().map(|(n, _)| *n).collect();
        for name in names {
            let Some(ColumnData::Counter(c)) = row.cells.get_mut(&name) else {
                continue;
            };
            let Some(delta) = c
                .value
                .as_deref()
                .filter(|v| !counter::is_context(v))
                .and_then(counter::as_delta)
            else {
                continue;
            };
            let clock = shard(&raw, ck, &name).map_or(0, |s| s.clock);
            let count = shard(&live, ck, &name).map_or(0, |s| s.count);
            c.value = Some(counter::encode(&[counter::Shard {
                id: *id,
                clock: clock + 1,
                count: count.wrapping_add(delta),
            }]));
        }
    };
    if let Some(sr) = &mut m.update.static_row {
        lead(sr, None);
    }
    m.update.rows.retain(|ck, row| {
        lead(row, Some(ck));
        true
    });
}

/// The verbs a node serves: the replica's, and the counter leader's,
/// which needs the coordinator.
pub struct StorageVerbs(pub Arc<StorageProxy>);

impl sibyl_cluster::messaging::VerbHandler for StorageVerbs {
    fn handle(
        &self,
        from: IpAddr,
        request: Request,
    ) -> sibyl_cluster::messaging::BoxFuture<Response> {
        let proxy = self.0.clone();
        Box::pin(async move {
            match request {
                Request::CounterMutation {
                    mutation,
                    consistency,
                } => proxy.serve_counter_mutation(mutation, consistency).await,
                Request::StreamPage {
                    table_id,
                    range,
                    after,
                    max_bytes,
                    set,
                } => {
                    proxy
                        .serve_stream_page(from, table_id, range, after, max_bytes, set)
                        .await
                }
                Request::StreamSession(plan) => match proxy.run_stream_session(plan).await {
                    Ok(s) => Response::Streamed {
                        partitions: s.partitions,
                        bytes: s.bytes,
                    },
                    Err(e) => Response::Failure(ReplicaFailure::Error(e)),
                },
                Request::Validation {
                    table_id,
                    ranges,
                    pending,
                } => {
                    // hashing reads every partition: off the async workers
                    let p = proxy.clone();
                    match tokio::task::spawn_blocking(move || {
                        p.validate(table_id, &ranges, pending)
                    })
                    .await
                    {
                        Ok(Ok(h)) => Response::Validation(h),
                        Ok(Err(f)) => Response::Failure(f),
                        Err(e) => Response::Failure(ReplicaFailure::Error(e.to_string())),
                    }
                }
                r @ (Request::RepairSynced { .. }
                | Request::RepairPrepare { .. }
                | Request::RepairFinish { .. }) => match proxy.carry_out_repair_message(r).await {
                    Ok(()) => Response::Done,
                    Err(f) => Response::Failure(f),
                },
                other => proxy.replica.handle(other).await,
            }
        })
    }
}

/// `tokio::time::timeout` for a local write, whose timer is made only if
/// the write is pending when polled. A write in periodic commit log mode is
/// done at its first poll (its entry copied into the mapped segment, the
/// memtable updated): a timer made, registered and cancelled for each write
/// was 2.6% of a write's instructions. One that waits (for room in the
/// memtables, or for the fsync of a batch commit log) gets its timer then.
///
/// A future of its own, not an `async fn`: one would hold the write's future
/// twice (as its argument and pinned), and every future above it (the
/// request's, boxed and copied once) would carry both.
fn timeout_when_pending<F: std::future::Future>(after: Duration, fut: F) -> TimeoutWhenPending<F> {
    TimeoutWhenPending {
        fut,
        after,
        timer: None,
    }
}

/// The local write's deadline passed.
#[derive(Debug, PartialEq, Eq)]
struct TimedOut;

pin_project_lite::pin_project! {
    /// The future of [`timeout_when_pending`].
    struct TimeoutWhenPending<F> {
        #[pin]
        fut: F,
        after: Duration,
        // boxed: made only for the writes that wait
        timer: Option<std::pin::Pin<Box<tokio::time::Sleep>>>,
    }
}

impl<F: std::future::Future> std::future::Future for TimeoutWhenPending<F> {
    type Output = std::result::Result<F::Output, TimedOut>;

    fn poll(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Self::Output> {
        use std::task::Poll;
        let this = self.project();
        if let Poll::Ready(v) = this.fut.poll(cx) {
            return Poll::Ready(Ok(v));
        }
        let after = *this.after;
        let timer = this
            .timer
            .get_or_insert_with(|| Box::pin(tokio::time::sleep(after)));
        match timer.as_mut().poll(cx) {
            Poll::Ready(()) => Poll::Ready(Err(TimedOut)),
            Poll::Pending => Poll::Pending,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Plan;
    use std::net::IpAddr;

    fn a(n: u8) -> IpAddr {
        IpAddr::from([127, 0, 0, n])
    }

    #[test]
    fn each_quorum_counts_answers_per_data_center() {
        // dc1 = .1 .2 .3, dc2 = .4 .5 .6; EACH_QUORUM needs 2 + 2
        let mut plan = Plan::new((1..=6).map(a).collect(), 4);
        plan.per_datacenter = vec![
            ("dc1".into(), vec![a(1), a(2), a(3)], 2),
            ("dc2".into(), vec![a(4), a(5), a(6)], 2),
        ];
        // four answers, three of them from dc1: not enough
        assert!(!plan.satisfied_by(&[a(1), a(2), a(3), a(4)]));
        assert!(plan.satisfied_by(&[a(1), a(3), a(4), a(6)]));
        // reads ask each data center's first replicas up to its quorum
        plan.replicas = smallvec::smallvec![a(5), a(1), a(2), a(3), a(6), a(4)];
        assert_eq!(plan.read_targets(), vec![a(5), a(1), a(2), a(6)]);
        // other levels count the total
        let plan = Plan::new((1..=3).map(a).collect(), 2);
        assert!(plan.satisfied_by(&[a(3), a(1)]));
        assert!(!plan.satisfied_by(&[a(3)]));
        assert_eq!(plan.read_targets(), vec![a(1), a(2)]);
    }
}

#[cfg(test)]
mod local_timeouts {
    use super::timeout_when_pending;
    use std::time::Duration;

    #[tokio::test]
    async fn a_local_write_times_out_only_when_it_waits() {
        let d = Duration::from_millis(50);
        assert_eq!(timeout_when_pending(d, async { 1 }).await.ok(), Some(1));
        let yields_twice = async {
            tokio::task::yield_now().await;
            tokio::task::yield_now().await;
            3
        };
        assert_eq!(timeout_when_pending(d, yields_twice).await.ok(), Some(3));
        let started = std::time::Instant::now();
        // stuck at its first poll (an fsync that never ends): it times out
        let stuck = std::future::pending::<()>();
        assert!(timeout_when_pending(d, stuck).await.is_err());
        assert!(started.elapsed() >= d);
    }
}
