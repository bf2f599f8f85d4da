//! [`ClusterMetadataService`]: one node's member of the cluster metadata log.

use crate::error::{TcmError, TransportError};
use crate::log_store::LogStore;
use crate::network::{self, Network, Reachability};
use crate::policy;
use crate::record::{self, kind};
use crate::state_machine::{SnapshotFile, StateMachineStore};
use crate::types::{
    ApplyOutcome, Epoch, MemberNode, Members, NodeAddr, Transformation, TypeConfig,
};
use crate::wire::{self, Failure, Request, RequestBody, Response};
use crate::{MetadataStateMachine, MetadataTransport};
use openraft::error::{ClientWriteError, RaftError};
use openraft::{ChangeMembers, Raft, RaftMetrics, ServerState, SnapshotPolicy};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;
use tokio::time::Instant;

type NodeId = u64;

/// Timing and log-size settings.
#[derive(Debug, Clone)]
pub struct TcmConfig {
    /// How often the leader sends heartbeats; also the timeout of one
    /// AppendEntries message, so it must exceed a round trip plus an fsync.
    pub heartbeat_interval: Duration,
    /// A follower that hears nothing from a leader for a random time between
    /// these two starts an election.
    pub election_timeout_min: Duration,
    /// See `election_timeout_min`.
    pub election_timeout_max: Duration,
    /// The time allowed for one snapshot message.
    pub install_snapshot_timeout: Duration,
    /// A snapshot is taken after this many entries since the last one.
    pub snapshot_every_entries: u64,
    /// Entries kept in the log behind a snapshot, so that a briefly lagging
    /// member catches up from the log instead of a whole snapshot.
    pub entries_kept_after_snapshot: u64,
    /// The most voters the metadata log has (see the voter policy in the
    /// crate documentation).
    pub max_voters: usize,
}

impl Default for TcmConfig {
    fn default() -> Self {
        TcmConfig {
            heartbeat_interval: Duration::from_millis(250),
            election_timeout_min: Duration::from_millis(1500),
            election_timeout_max: Duration::from_millis(3000),
            install_snapshot_timeout: Duration::from_secs(10),
            snapshot_every_entries: 1000,
            entries_kept_after_snapshot: 1000,
            max_voters: 7,
        }
    }
}

impl TcmConfig {
    fn to_openraft(&self) -> Result<openraft::Config, TcmError> {
        let ms = |d: Duration| d.as_millis() as u64;
        openraft::Config {
            cluster_name: "sibyl-cluster-metadata".to_string(),
            heartbeat_interval: ms(self.heartbeat_interval),
            election_timeout_min: ms(self.election_timeout_min),
            election_timeout_max: ms(self.election_timeout_max),
            install_snapshot_timeout: ms(self.install_snapshot_timeout),
            snapshot_policy: SnapshotPolicy::LogsSinceLast(self.snapshot_every_entries.max(1)),
            max_in_snapshot_log_to_keep: self.entries_kept_after_snapshot,
            ..Default::default()
        }
        .validate()
        .map_err(|e| TcmError::Config(e.to_string()))
    }

    /// How recently a voter must have been heard from to count as answering:
    /// a leader hears its followers every heartbeat, a follower its leader, a
    /// candidate (cut off) retries every election timeout.
    fn answer_window(&self) -> Duration {
        self.election_timeout_max.max(self.heartbeat_interval * 4)
    }
}

/// The identity file's name in the metadata directory.
const IDENTITY_FILE: &str = "identity";

#[derive(Serialize, Deserialize)]
struct Identity {
    node_id: NodeId,
    incarnation: String,
}

/// Reads the directory's identity, or makes one for a new directory.
fn load_identity(dir: &Path, node_id: NodeId) -> Result<String, TcmError> {
    let path = dir.join(IDENTITY_FILE);
    if let Some(r) = record::read_single(&path, kind::IDENTITY)? {
        let id: Identity = serde_json::from_slice(&r.payload).map_err(|e| TcmError::Corrupt {
            path: path.clone(),
            offset: r.offset,
            reason: format!("undecodable identity: {e}"),
        })?;
        if id.node_id != node_id {
            return Err(TcmError::NodeIdMismatch {
                dir: dir.to_path_buf(),
                stored: id.node_id,
                given: node_id,
            });
        }
        return Ok(id.incarnation);
    }
    // A directory with a log but no identity was not made by `open`: refuse
    // rather than give an existing log a new incarnation.
    for f in [
        crate::log_store::LOG_FILE,
        crate::log_store::VOTE_FILE,
        crate::state_machine::SNAPSHOT_FILE,
    ] {
        if dir.join(f).exists() {
            return Err(TcmError::Corrupt {
                path: path.clone(),
                offset: 0,
                reason: format!("missing, although the directory holds `{f}`"),
            });
        }
    }
    let id = Identity {
        node_id,
        incarnation: uuid::Uuid::new_v4().to_string(),
    };
    let json = serde_json::to_vec(&id).map_err(|e| TcmError::Malformed(e.to_string()))?;
    record::write_atomic(&path, &record::encode(kind::IDENTITY, &json))
        .map_err(|e| TcmError::io(&path, e))?;
    Ok(id.incarnation)
}

/// Deletes the temporary files an interrupted atomic replacement left.
fn remove_leftovers(dir: &Path) -> Result<(), TcmError> {
    let entries = std::fs::read_dir(dir).map_err(|e| TcmError::io(dir, e))?;
    for entry in entries {
        let entry = entry.map_err(|e| TcmError::io(dir, e))?;
        let path = entry.path();
        if path.extension().is_some_and(|x| x == "tmp") {
            tracing::info!(
                "cluster metadata: removing {} left by an interrupted write",
                path.display()
            );
            std::fs::remove_file(&path).map_err(|e| TcmError::io(&path, e))?;
        }
    }
    Ok(())
}

/// Where a request for the leader goes.
enum Route {
    Local,
    Remote(NodeAddr),
    Unknown,
}

struct Inner {
    node_id: NodeId,
    addr: NodeAddr,
    incarnation: String,
    dir: PathBuf,
    raft: Raft<TypeConfig>,
    transport: Arc<dyn MetadataTransport>,
    epoch: watch::Receiver<Epoch>,
    reach: Arc<Reachability>,
    config: TcmConfig,
}

/// This node's member of the cluster metadata log: commits transformations,
/// applies every committed one to the node's [`MetadataStateMachine`] in log
/// order, and answers the other members' messages ([`handle`](Self::handle)).
/// Clones share one member.
#[derive(Clone)]
pub struct ClusterMetadataService {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for ClusterMetadataService {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClusterMetadataService")
            .field("node_id", &self.inner.node_id)
            .field("addr", &self.inner.addr)
            .field("dir", &self.inner.dir)
            .finish()
    }
}

impl ClusterMetadataService {
    /// Opens this node's metadata directory `dir` (created if missing):
    /// reads and checks the log, restores the state machine from the latest
    /// snapshot (calling [`MetadataStateMachine::restore`], with the empty
    /// state when there is none), re-applies the committed entries after it,
    /// and starts the Raft member. A new directory is not a member of any
    /// cluster until [`initialize_single`](Self::initialize_single) or
    /// [`join`](Self::join).
    ///
    /// `node_id` must stay the same for the life of the directory; a reused
    /// directory with another id is refused.
    pub async fn open(
        dir: impl AsRef<Path>,
        node_id: NodeId,
        addr: NodeAddr,
        transport: Arc<dyn MetadataTransport>,
        state_machine: Arc<dyn MetadataStateMachine>,
        config: TcmConfig,
    ) -> Result<Self, TcmError> {
        let dir = dir.as_ref().to_path_buf();
        let raft_config = Arc::new(config.to_openraft()?);
        std::fs::create_dir_all(&dir).map_err(|e| TcmError::io(&dir, e))?;
        remove_leftovers(&dir)?;
        let incarnation = load_identity(&dir, node_id)?;
        let log = LogStore::open(&dir)?;
        let snapshots = Arc::new(SnapshotFile::open(&dir)?);
        let (epoch_tx, epoch_rx) = watch::channel(Epoch::EMPTY);
        let sm = StateMachineStore::restore(state_machine, snapshots, epoch_tx)?;
        let reach = Arc::new(Reachability::default());
        let network = Network {
            transport: transport.clone(),
            me: node_id,
            reach: reach.clone(),
            backoff: config.heartbeat_interval * 2,
        };
        let raft = Raft::new(node_id, raft_config, network, log, sm)
            .await
            .map_err(|e| TcmError::Stopped(e.to_string()))?;
        tracing::info!(
            "cluster metadata: node {node_id} at {addr} opened {} at {}",
            dir.display(),
            *epoch_rx.borrow()
        );
        Ok(ClusterMetadataService {
            inner: Arc::new(Inner {
                node_id,
                addr,
                incarnation,
                dir,
                raft,
                transport,
                epoch: epoch_rx,
                reach,
                config,
            }),
        })
    }

    /// This node's id.
    pub fn node_id(&self) -> NodeId {
        self.inner.node_id
    }

    /// This node's address.
    pub fn addr(&self) -> &NodeAddr {
        &self.inner.addr
    }

    fn me(&self) -> MemberNode {
        MemberNode {
            addr: self.inner.addr.clone(),
            incarnation: self.inner.incarnation.clone(),
        }
    }

    /// Whether this node belongs to a metadata cluster (its log holds a
    /// membership), as known from its directory right after `open`.
    pub async fn is_member(&self) -> Result<bool, TcmError> {
        self.inner
            .raft
            .is_initialized()
            .await
            .map_err(|e| TcmError::Stopped(e.to_string()))
    }

    /// Starts a new metadata cluster whose only voter is this node, and waits
    /// until this node leads it. Does nothing when this node is already a
    /// member of a metadata cluster (so it is safe to call at every start of
    /// the cluster's first node).
    pub async fn initialize_single(&self) -> Result<(), TcmError> {
        let raft = &self.inner.raft;
        let initialized = raft
            .is_initialized()
            .await
            .map_err(|e| TcmError::Stopped(e.to_string()))?;
        if initialized {
            return Ok(());
        }
        let mut nodes = BTreeMap::new();
        nodes.insert(self.inner.node_id, self.me());
        match raft.initialize(nodes).await {
            Ok(()) => {}
            Err(RaftError::APIError(openraft::error::InitializeError::NotAllowed(_))) => {
                return Ok(())
            }
            Err(e) => return Err(TcmError::Raft(e.to_string())),
        }
        let limit = self.inner.config.election_timeout_max * 4 + Duration::from_secs(1);
        let me = self.inner.node_id;
        if !self
            .wait_metrics(limit, |m| m.current_leader == Some(me))
            .await
        {
            return Err(self.timeout_error("initialize_single: waiting to lead", limit));
        }
        Ok(())
    }

    /// Asks the metadata cluster, through the member at `via`, to add this
    /// node (as [`add_node`](Self::add_node) does on a member). Call it when a
    /// node with a new metadata directory joins; calling it again after a
    /// restart is harmless.
    ///
    /// It returns once this node's state machine has applied the log up to
    /// the membership that admits it: what the cluster knew when it joined
    /// is then known here (the leader answers as soon as the entries are
    /// replicated; applying them here can lag a heartbeat behind).
    pub async fn join(&self, via: &NodeAddr, timeout: Duration) -> Result<(), TcmError> {
        let deadline = Instant::now() + timeout;
        self.ask_via(via, timeout, "join", |remaining| RequestBody::AddNode {
            node_id: self.inner.node_id,
            addr: self.inner.addr.clone(),
            timeout_ms: remaining.as_millis() as u64,
        })
        .await?;
        let me = self.inner.node_id;
        let remaining = deadline.saturating_duration_since(Instant::now());
        let caught_up = self
            .wait_metrics(remaining.max(Duration::from_secs(5)), |m| {
                let config = &m.membership_config;
                config.membership().get_node(&me).is_some()
                    && config.log_id().is_some()
                    && m.last_applied >= *config.log_id()
            })
            .await;
        if !caught_up {
            return Err(self.timeout_error(
                "join: applying the log up to this node's membership",
                timeout,
            ));
        }
        Ok(())
    }

    /// Asks the metadata cluster, through the member at `via`, to remove the
    /// member `node_id` (as [`remove_node`](Self::remove_node) does on a
    /// member), from a node that is not a member yet: a node that replaces a
    /// dead one at the same address removes the dead one's membership before
    /// it joins.
    pub async fn remove_via(
        &self,
        via: &NodeAddr,
        node_id: NodeId,
        timeout: Duration,
    ) -> Result<(), TcmError> {
        self.ask_via(via, timeout, "remove_node", |remaining| {
            RequestBody::RemoveNode {
                node_id,
                timeout_ms: remaining.as_millis() as u64,
            }
        })
        .await
    }

    /// Sends a membership request to `via` until it answers or `timeout`
    /// passes (an unreachable member is tried again).
    async fn ask_via(
        &self,
        via: &NodeAddr,
        timeout: Duration,
        what: &str,
        body: impl Fn(Duration) -> RequestBody,
    ) -> Result<(), TcmError> {
        let deadline = Instant::now() + timeout;
        loop {
            let remaining = deadline.saturating_duration_since(Instant::now());
            if remaining.is_zero() {
                return Err(TcmError::Transport {
                    addr: via.clone(),
                    source: TransportError::Unreachable(format!(
                        "no answer to {what} within {timeout:?}"
                    )),
                });
            }
            let request = self.request(body(remaining));
            match network::call(&self.inner.transport, via, &request, remaining).await {
                Ok(Response::Done) => return Ok(()),
                Ok(Response::Failed(f)) => return Err(f.into_error(via)),
                Ok(_) => {
                    return Err(TcmError::Malformed(format!(
                        "{via} answered a {what} with the wrong message"
                    )))
                }
                Err(TransportError::Unreachable(_)) => self.pause(deadline).await,
                Err(source) => {
                    return Err(TcmError::Transport {
                        addr: via.clone(),
                        source,
                    })
                }
            }
        }
    }

    /// Adds the node `node_id` at `addr` to the metadata cluster: as a
    /// learner, then, once it has caught up with the log, as a voter if the
    /// voter policy wants one more (an odd number of voters, at most
    /// [`TcmConfig::max_voters`]). Runs on the leader; on another member the
    /// request is forwarded to it. Refuses an id that belongs to a member
    /// with another metadata directory ([`TcmError::NodeIdInUse`]).
    pub async fn add_node(
        &self,
        node_id: NodeId,
        addr: NodeAddr,
        timeout: Duration,
    ) -> Result<(), TcmError> {
        let operation = format!("add_node({node_id}, {addr})");
        let body = |remaining: Duration| RequestBody::AddNode {
            node_id,
            addr: addr.clone(),
            timeout_ms: remaining.as_millis() as u64,
        };
        self.on_leader(&operation, timeout, body, |deadline| {
            self.add_node_here(node_id, addr.clone(), deadline)
        })
        .await
    }

    /// Removes the node `node_id` from the metadata cluster: first out of the
    /// voters (the policy then keeps the voter count odd), then out of the
    /// members. Runs on the leader, forwarded there from other members.
    /// Removing a node that is not a member succeeds.
    pub async fn remove_node(&self, node_id: NodeId, timeout: Duration) -> Result<(), TcmError> {
        let operation = format!("remove_node({node_id})");
        let body = |remaining: Duration| RequestBody::RemoveNode {
            node_id,
            timeout_ms: remaining.as_millis() as u64,
        };
        self.on_leader(&operation, timeout, body, |deadline| {
            self.remove_node_here(node_id, deadline)
        })
        .await
    }

    /// Commits `transformation` to the metadata log and returns once it is
    /// committed and applied on this node: its epoch and what the state
    /// machine answered. From a member that is not the leader the
    /// transformation is forwarded to the leader.
    ///
    /// Errors: [`TcmError::NoQuorum`] when a majority of the voters cannot be
    /// reached within `timeout` (it was then not committed, or will be only
    /// if the cluster heals before a new leader drops it);
    /// [`TcmError::Timeout`] when the time ran out for another reason (the
    /// outcome is unknown); [`TcmError::Rejected`] when the state machine
    /// refused it (on every node alike; the epoch is used up).
    pub async fn commit(
        &self,
        transformation: Transformation,
        timeout: Duration,
    ) -> Result<(Epoch, Vec<u8>), TcmError> {
        let deadline = Instant::now() + timeout;
        let outcome = self
            .commit_on_leader(transformation, deadline, timeout)
            .await?;
        let remaining = deadline.saturating_duration_since(Instant::now());
        if self.wait_for_epoch(outcome.epoch, remaining).await.is_err() {
            return Err(TcmError::NotAppliedLocally {
                epoch: outcome.epoch,
                timeout,
            });
        }
        match outcome.rejected {
            Some(message) => Err(TcmError::Rejected {
                epoch: outcome.epoch,
                message,
            }),
            None => Ok((outcome.epoch, outcome.output)),
        }
    }

    /// The epoch this node's state machine has reached.
    pub fn epoch(&self) -> Epoch {
        *self.inner.epoch.borrow()
    }

    /// Waits until this node's state machine reaches `epoch`; returns the
    /// epoch reached.
    pub async fn wait_for_epoch(&self, epoch: Epoch, timeout: Duration) -> Result<Epoch, TcmError> {
        let mut rx = self.inner.epoch.clone();
        let deadline = Instant::now() + timeout;
        loop {
            let now = *rx.borrow_and_update();
            if now >= epoch {
                return Ok(now);
            }
            match tokio::time::timeout_at(deadline, rx.changed()).await {
                Ok(Ok(())) => {}
                Ok(Err(_)) => {
                    return Err(TcmError::Stopped(
                        "the state machine was dropped".to_string(),
                    ))
                }
                Err(_) => {
                    return Err(TcmError::EpochTimeout {
                        wanted: epoch,
                        current: *rx.borrow(),
                        timeout,
                    })
                }
            }
        }
    }

    /// The voters and learners of the metadata log, as this node last learnt
    /// them.
    pub fn members(&self) -> Members {
        let metrics = self.inner.raft.metrics();
        let m = metrics.borrow();
        let membership = m.membership_config.membership();
        let voters: BTreeSet<NodeId> = membership.voter_ids().collect();
        let mut out = Members::default();
        for (id, node) in membership.nodes() {
            if voters.contains(id) {
                out.voters.insert(*id, node.addr.clone());
            } else {
                out.learners.insert(*id, node.addr.clone());
            }
        }
        out
    }

    /// The leader as this node knows it: its id and address.
    pub fn leader(&self) -> Option<(NodeId, NodeAddr)> {
        let metrics = self.inner.raft.metrics();
        let m = metrics.borrow();
        let id = m.current_leader?;
        let node = m.membership_config.membership().get_node(&id)?;
        Some((id, node.addr.clone()))
    }

    /// Stops the Raft member. Call it before dropping the last clone (and
    /// before reopening the directory in the same process).
    pub async fn shutdown(&self) -> Result<(), TcmError> {
        self.inner
            .raft
            .shutdown()
            .await
            .map_err(|e| TcmError::Stopped(e.to_string()))
    }

    /// Answers a message from another node's metadata service (what its
    /// [`MetadataTransport::call`] delivered); the returned bytes go back as
    /// the answer.
    pub async fn handle(&self, request: Vec<u8>) -> Vec<u8> {
        let response = match wire::decode_request(&request) {
            Err(e) => Response::Failed(Failure::Malformed(e)),
            Ok(r) => {
                self.inner.reach.heard_from(r.from);
                match &r.to {
                    Some(t) if t.node_id != self.inner.node_id || t.incarnation != self.inner.incarnation => {
                        Response::Failed(Failure::WrongTarget(format!(
                            "message for node {} (directory {}) reached node {} (directory {}); \
                             a node whose metadata directory was recreated must be removed and join again",
                            t.node_id, t.incarnation, self.inner.node_id, self.inner.incarnation
                        )))
                    }
                    _ => self.dispatch(r.body).await,
                }
            }
        };
        wire::encode_response(&response)
    }

    async fn dispatch(&self, body: RequestBody) -> Response {
        let raft = &self.inner.raft;
        match body {
            RequestBody::AppendEntries(r) => Response::AppendEntries(raft.append_entries(r).await),
            RequestBody::Vote(r) => Response::Vote(raft.vote(r).await),
            RequestBody::InstallSnapshot(r) => {
                Response::InstallSnapshot(raft.install_snapshot(r).await)
            }
            RequestBody::Identify => Response::Identity {
                node_id: self.inner.node_id,
                incarnation: self.inner.incarnation.clone(),
            },
            RequestBody::Commit {
                transformation,
                timeout_ms,
            } => {
                let timeout = Duration::from_millis(timeout_ms);
                match self.commit_here(transformation, timeout).await {
                    Ok(Some(outcome)) => Response::Committed(outcome),
                    Ok(None) => self.not_leader(),
                    Err(e) => Response::Failed(Failure::from_error(&e)),
                }
            }
            RequestBody::AddNode {
                node_id,
                addr,
                timeout_ms,
            } => match self
                .add_node(node_id, addr, Duration::from_millis(timeout_ms))
                .await
            {
                Ok(()) => Response::Done,
                Err(e) => Response::Failed(Failure::from_error(&e)),
            },
            RequestBody::RemoveNode {
                node_id,
                timeout_ms,
            } => {
                match self
                    .remove_node(node_id, Duration::from_millis(timeout_ms))
                    .await
                {
                    Ok(()) => Response::Done,
                    Err(e) => Response::Failed(Failure::from_error(&e)),
                }
            }
        }
    }

    fn not_leader(&self) -> Response {
        let leader = self.leader();
        Response::NotLeader {
            leader: leader.as_ref().map(|l| l.0),
            leader_addr: leader.map(|l| l.1),
        }
    }

    fn request(&self, body: RequestBody) -> Request {
        Request {
            from: self.inner.node_id,
            to: None,
            body,
        }
    }

    fn route(&self) -> Route {
        match self.leader() {
            Some((id, _)) if id == self.inner.node_id => Route::Local,
            Some((_, addr)) => Route::Remote(addr),
            None => Route::Unknown,
        }
    }

    /// Sleeps a heartbeat (or until `deadline`) before trying again.
    async fn pause(&self, deadline: Instant) {
        let until = (Instant::now() + self.inner.config.heartbeat_interval).min(deadline);
        tokio::time::sleep_until(until).await;
    }

    /// Waits until `f` holds for the Raft metrics; false on timeout.
    async fn wait_metrics(
        &self,
        timeout: Duration,
        mut f: impl FnMut(&RaftMetrics<NodeId, MemberNode>) -> bool,
    ) -> bool {
        let mut rx = self.inner.raft.metrics();
        let deadline = Instant::now() + timeout;
        loop {
            let holds = {
                let m = rx.borrow_and_update();
                f(&m)
            };
            if holds {
                return true;
            }
            match tokio::time::timeout_at(deadline, rx.changed()).await {
                Ok(Ok(())) => {}
                _ => return false,
            }
        }
    }

    /// The error for an operation that ran out of time: [`TcmError::NoQuorum`]
    /// when too few voters answer, [`TcmError::Timeout`] otherwise.
    fn timeout_error(&self, operation: &str, timeout: Duration) -> TcmError {
        let voters: Vec<NodeId> = {
            let metrics = self.inner.raft.metrics();
            let m = metrics.borrow();
            let mut v: BTreeSet<NodeId> = BTreeSet::new();
            for config in m.membership_config.membership().get_joint_config() {
                v.extend(config.iter().copied());
            }
            v.into_iter().collect()
        };
        if voters.is_empty() {
            return TcmError::NotInitialized;
        }
        let answered = self.inner.reach.answered(
            self.inner.node_id,
            &voters,
            self.inner.config.answer_window(),
        );
        let needed = voters.len() / 2 + 1;
        if answered < needed {
            TcmError::NoQuorum {
                operation: operation.to_string(),
                timeout,
                answered,
                voters: voters.len(),
                needed,
            }
        } else {
            TcmError::Timeout {
                operation: operation.to_string(),
                timeout,
                answered,
                voters: voters.len(),
            }
        }
    }

    /// Commits on this node if it leads; `Ok(None)` if it does not.
    async fn commit_here(
        &self,
        t: Transformation,
        timeout: Duration,
    ) -> Result<Option<ApplyOutcome>, TcmError> {
        match tokio::time::timeout(timeout, self.inner.raft.client_write(t)).await {
            Err(_) => Err(self.timeout_error("commit", timeout)),
            Ok(Ok(response)) => Ok(Some(response.data)),
            Ok(Err(RaftError::APIError(ClientWriteError::ForwardToLeader(_)))) => Ok(None),
            Ok(Err(RaftError::APIError(e))) => Err(TcmError::Raft(e.to_string())),
            Ok(Err(RaftError::Fatal(e))) => Err(TcmError::Stopped(e.to_string())),
        }
    }

    async fn commit_on_leader(
        &self,
        t: Transformation,
        deadline: Instant,
        timeout: Duration,
    ) -> Result<ApplyOutcome, TcmError> {
        // A leader named by a NotLeader answer, tried before the metrics learn it.
        let mut hint: Option<NodeAddr> = None;
        loop {
            let remaining = deadline.saturating_duration_since(Instant::now());
            if remaining.is_zero() {
                return Err(self.timeout_error("commit", timeout));
            }
            let route = match hint.take() {
                Some(addr) => Route::Remote(addr),
                None => self.route(),
            };
            match route {
                Route::Local => {
                    if let Some(outcome) =
                        self.commit_here(t.clone(), remaining)
                            .await
                            .map_err(|e| match e {
                                TcmError::NoQuorum { .. } | TcmError::Timeout { .. } => {
                                    self.timeout_error("commit", timeout)
                                }
                                e => e,
                            })?
                    {
                        return Ok(outcome);
                    }
                    self.pause(deadline).await;
                }
                Route::Remote(addr) => {
                    // The leader gets a little less time than we wait, so
                    // that its answer (with its count of the voters) wins the
                    // race against our own timeout.
                    let request = self.request(RequestBody::Commit {
                        transformation: t.clone(),
                        timeout_ms: (remaining * 9 / 10).as_millis() as u64,
                    });
                    match network::call(&self.inner.transport, &addr, &request, remaining).await {
                        Ok(Response::Committed(outcome)) => return Ok(outcome),
                        Ok(Response::NotLeader { leader_addr, .. }) => {
                            // Not appended there: safe to send again.
                            if leader_addr.as_ref() != Some(&addr) {
                                hint = leader_addr;
                            }
                            self.pause(deadline).await;
                        }
                        Ok(Response::Failed(f)) => {
                            // The leader's count of the voters it hears is
                            // better than ours; the timeout is the caller's.
                            return Err(match f.into_error(&addr) {
                                TcmError::NoQuorum {
                                    operation,
                                    answered,
                                    voters,
                                    needed,
                                    ..
                                } => TcmError::NoQuorum {
                                    operation,
                                    timeout,
                                    answered,
                                    voters,
                                    needed,
                                },
                                TcmError::Timeout {
                                    operation,
                                    answered,
                                    voters,
                                    ..
                                } => TcmError::Timeout {
                                    operation,
                                    timeout,
                                    answered,
                                    voters,
                                },
                                e => e,
                            });
                        }
                        Ok(_) => {
                            return Err(TcmError::Malformed(format!(
                                "{addr} answered a commit with the wrong message"
                            )))
                        }
                        // Not delivered: safe to send again.
                        Err(TransportError::Unreachable(_)) => self.pause(deadline).await,
                        Err(TransportError::Failed(m)) => {
                            if Instant::now() >= deadline {
                                return Err(self.timeout_error("commit", timeout));
                            }
                            // Delivered or not, we cannot tell: a retry could
                            // commit the transformation twice.
                            return Err(TcmError::Transport {
                                addr,
                                source: TransportError::Failed(format!(
                                    "{m}; the commit may still take effect"
                                )),
                            });
                        }
                    }
                }
                Route::Unknown => {
                    let wait = remaining.min(self.inner.config.heartbeat_interval);
                    self.wait_metrics(wait, |m| m.current_leader.is_some())
                        .await;
                }
            }
        }
    }

    /// Runs `here` on the leader: on this node if it leads, otherwise sends
    /// `body` to the leader, until `timeout`.
    async fn on_leader<F, Fut>(
        &self,
        operation: &str,
        timeout: Duration,
        body: impl Fn(Duration) -> RequestBody,
        here: F,
    ) -> Result<(), TcmError>
    where
        F: Fn(Instant) -> Fut,
        Fut: std::future::Future<Output = Result<Step, TcmError>>,
    {
        let deadline = Instant::now() + timeout;
        loop {
            let remaining = deadline.saturating_duration_since(Instant::now());
            if remaining.is_zero() {
                return Err(self.timeout_error(operation, timeout));
            }
            match self.route() {
                Route::Local => match here(deadline).await? {
                    Step::Done => return Ok(()),
                    Step::Again => self.pause(deadline).await,
                },
                Route::Remote(addr) => {
                    let request = self.request(body(remaining));
                    match network::call(&self.inner.transport, &addr, &request, remaining).await {
                        Ok(Response::Done) => return Ok(()),
                        Ok(Response::NotLeader { .. }) => self.pause(deadline).await,
                        Ok(Response::Failed(f)) => return Err(f.into_error(&addr)),
                        Ok(_) => {
                            return Err(TcmError::Malformed(format!(
                                "{addr} answered {operation} with the wrong message"
                            )))
                        }
                        Err(TransportError::Unreachable(_)) => self.pause(deadline).await,
                        Err(source) => {
                            if Instant::now() >= deadline {
                                return Err(self.timeout_error(operation, timeout));
                            }
                            return Err(TcmError::Transport { addr, source });
                        }
                    }
                }
                Route::Unknown => {
                    let wait = remaining.min(self.inner.config.heartbeat_interval);
                    self.wait_metrics(wait, |m| m.current_leader.is_some())
                        .await;
                }
            }
        }
    }

    fn leader_metrics(&self) -> Option<RaftMetrics<NodeId, MemberNode>> {
        let m = self.inner.raft.metrics().borrow().clone();
        (m.state == ServerState::Leader).then_some(m)
    }

    /// A membership change on this node as leader; `Again` when leadership
    /// moved or another change is in progress.
    async fn change_membership(
        &self,
        changes: ChangeMembers<NodeId, MemberNode>,
        retain: bool,
        deadline: Instant,
        operation: &str,
    ) -> Result<Step, TcmError> {
        let remaining = deadline.saturating_duration_since(Instant::now());
        match tokio::time::timeout(
            remaining,
            self.inner.raft.change_membership(changes, retain),
        )
        .await
        {
            Err(_) => Err(self.timeout_error(operation, remaining)),
            Ok(Ok(_)) => Ok(Step::Done),
            Ok(Err(RaftError::APIError(ClientWriteError::ForwardToLeader(_)))) => Ok(Step::Again),
            Ok(Err(RaftError::APIError(ClientWriteError::ChangeMembershipError(
                openraft::error::ChangeMembershipError::InProgress(_),
            )))) => Ok(Step::Again),
            Ok(Err(RaftError::APIError(e))) => Err(TcmError::Raft(e.to_string())),
            Ok(Err(RaftError::Fatal(e))) => Err(TcmError::Stopped(e.to_string())),
        }
    }

    /// Which members are caught up with the leader's log.
    fn caught_up(m: &RaftMetrics<NodeId, MemberNode>) -> impl Fn(NodeId) -> bool + '_ {
        // Close enough to be promoted without stalling commits while it
        // fetches the rest.
        const LAG: u64 = 64;
        move |id| {
            if id == m.id {
                return true;
            }
            let last = m.last_log_index.unwrap_or(0);
            m.replication
                .as_ref()
                .and_then(|r| r.get(&id))
                .and_then(|matched| matched.as_ref())
                .is_some_and(|l| l.index + LAG >= last)
        }
    }

    /// Brings the voters in line with the policy; on the leader.
    async fn rebalance(&self, deadline: Instant, operation: &str) -> Result<Step, TcmError> {
        let Some(m) = self.leader_metrics() else {
            return Ok(Step::Again);
        };
        let membership = m.membership_config.membership();
        let voters: BTreeSet<NodeId> = membership.voter_ids().collect();
        let learners: BTreeSet<NodeId> = membership.learner_ids().collect();
        let planned = policy::plan_voters(
            &voters,
            &learners,
            Self::caught_up(&m),
            self.inner.config.max_voters,
            m.id,
        );
        if planned == voters {
            return Ok(Step::Done);
        }
        tracing::info!("cluster metadata: voters {voters:?} -> {planned:?}");
        self.change_membership(
            ChangeMembers::ReplaceAllVoters(planned),
            true,
            deadline,
            operation,
        )
        .await
    }

    async fn add_node_here(
        &self,
        node_id: NodeId,
        addr: NodeAddr,
        deadline: Instant,
    ) -> Result<Step, TcmError> {
        let operation = format!("add_node({node_id}, {addr})");
        let remaining = deadline.saturating_duration_since(Instant::now());
        let identity = match network::call(
            &self.inner.transport,
            &addr,
            &self.request(RequestBody::Identify),
            remaining,
        )
        .await
        {
            Ok(Response::Identity {
                node_id,
                incarnation,
            }) => (node_id, incarnation),
            Ok(Response::Failed(f)) => return Err(f.into_error(&addr)),
            Ok(_) => {
                return Err(TcmError::Malformed(format!(
                    "{addr} answered Identify with the wrong message"
                )))
            }
            Err(source) => return Err(TcmError::Transport { addr, source }),
        };
        if identity.0 != node_id {
            return Err(TcmError::WrongNode {
                addr,
                expected: node_id,
                actual: identity.0,
            });
        }
        let Some(m) = self.leader_metrics() else {
            return Ok(Step::Again);
        };
        let membership = m.membership_config.membership();
        if let Some(existing) = membership.get_node(&node_id) {
            if existing.incarnation != identity.1 || existing.addr != addr {
                return Err(TcmError::NodeIdInUse {
                    node_id,
                    member_addr: existing.addr.clone(),
                });
            }
        } else {
            if let Some((member, _)) = membership.nodes().find(|(_, n)| n.addr == addr) {
                return Err(TcmError::AddressInUse {
                    addr,
                    member: *member,
                });
            }
            let node = MemberNode {
                addr: addr.clone(),
                incarnation: identity.1,
            };
            let remaining = deadline.saturating_duration_since(Instant::now());
            match tokio::time::timeout(remaining, self.inner.raft.add_learner(node_id, node, false))
                .await
            {
                Err(_) => return Err(self.timeout_error(&operation, remaining)),
                Ok(Ok(_)) => {}
                Ok(Err(RaftError::APIError(ClientWriteError::ForwardToLeader(_)))) => {
                    return Ok(Step::Again)
                }
                Ok(Err(RaftError::APIError(ClientWriteError::ChangeMembershipError(
                    openraft::error::ChangeMembershipError::InProgress(_),
                )))) => return Ok(Step::Again),
                Ok(Err(RaftError::APIError(e))) => return Err(TcmError::Raft(e.to_string())),
                Ok(Err(RaftError::Fatal(e))) => return Err(TcmError::Stopped(e.to_string())),
            }
        }
        // Wait until the new member has the log (or leadership moves).
        let target = self
            .inner
            .raft
            .metrics()
            .borrow()
            .last_log_index
            .unwrap_or(0);
        let remaining = deadline.saturating_duration_since(Instant::now());
        let caught_up = self
            .wait_metrics(remaining, |m| {
                m.state != ServerState::Leader
                    || m.replication
                        .as_ref()
                        .and_then(|r| r.get(&node_id))
                        .and_then(|l| l.as_ref())
                        .is_some_and(|l| l.index >= target)
            })
            .await;
        if !caught_up {
            return Err(TcmError::CatchUpTimeout {
                node_id,
                timeout: remaining,
            });
        }
        self.rebalance(deadline, &operation).await
    }

    async fn remove_node_here(&self, node_id: NodeId, deadline: Instant) -> Result<Step, TcmError> {
        let operation = format!("remove_node({node_id})");
        let Some(m) = self.leader_metrics() else {
            return Ok(Step::Again);
        };
        let membership = m.membership_config.membership();
        if membership.get_node(&node_id).is_none() {
            return Ok(Step::Done);
        }
        let voters: BTreeSet<NodeId> = membership.voter_ids().collect();
        if voters.contains(&node_id) {
            let mut rest = voters.clone();
            rest.remove(&node_id);
            let mut learners: BTreeSet<NodeId> = membership.learner_ids().collect();
            learners.remove(&node_id);
            if rest.is_empty() && learners.is_empty() {
                return Err(TcmError::Raft(format!(
                    "node {node_id} is the only member of the cluster metadata log and cannot be removed"
                )));
            }
            let leader = if m.id == node_id {
                rest.iter().next().copied().unwrap_or(m.id)
            } else {
                m.id
            };
            let mut planned = policy::plan_voters(
                &rest,
                &learners,
                Self::caught_up(&m),
                self.inner.config.max_voters,
                leader,
            );
            if planned.is_empty() {
                planned.extend(learners.iter().next().copied());
            }
            tracing::info!(
                "cluster metadata: removing node {node_id}: voters {voters:?} -> {planned:?}"
            );
            // Demoted to learner first (retain): it then learns the change
            // and stops campaigning before it is dropped.
            return match self
                .change_membership(
                    ChangeMembers::ReplaceAllVoters(planned),
                    true,
                    deadline,
                    &operation,
                )
                .await?
            {
                // Now a learner; the next round drops it (on whoever leads).
                Step::Done | Step::Again => Ok(Step::Again),
            };
        }
        let mut ids = BTreeSet::new();
        ids.insert(node_id);
        self.change_membership(ChangeMembers::RemoveNodes(ids), false, deadline, &operation)
            .await
    }
}

/// What a leader-side step tells the retry loop.
enum Step {
    Done,
    /// Leadership moved or a change is in progress: route again.
    Again,
}
