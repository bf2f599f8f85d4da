//! The node as a member of a cluster: internode messaging over TCP, gossip
//! (liveness and the application states operators and drivers read), and
//! the cluster metadata log, whose entries are the cluster's schema changes
//! and topology changes, applied on every node in one order.
//!
//! The ring is built from the log's directory of nodes, never from gossip:
//! every node that has applied the same epoch has the same ring. Gossip says
//! who is up.
//!
//! How a node joins:
//! - a node whose metadata directory is empty and that is the first of its
//!   seeds (or has no seeds) starts a new cluster: it becomes the only voter
//!   of the metadata log and registers itself;
//! - any other new node asks its seeds to add it to the metadata log (as a
//!   learner, promoted to voter by the log's voter policy), catches up,
//!   chooses tokens from the ring it now has, and commits its registration;
//!   two nodes that join at once are serialised by the log (a registration
//!   whose tokens collide is rejected and the node chooses again);
//! - a restarted node has its log on disk: it replays it and catches up.
//!
//! A registration for an address that another host id holds is rejected: a
//! node whose data directory was wiped must be replaced explicitly.

use crate::config::Config;
use parking_lot::{Mutex, RwLock};
use serde::{Deserialize, Serialize};
use sibyl_cluster::endpoint_state::ApplicationState;
use sibyl_cluster::gossiper::{GossipEvent, GossipMessage, GossipOutput, Gossiper};
use sibyl_cluster::messaging::StreamPlan;
use sibyl_cluster::messaging::{
    BoxFuture, MessagingError, MessagingService, ReplicaFailure, Request, Response, VerbHandler,
};
use sibyl_cluster::net::TcpMessaging;
use sibyl_cluster::token_allocator::allocate_tokens;
use sibyl_cluster::{Clock, Endpoint, SystemClock, TokenMetadata};
use sibyl_db::serde::{decode_mutation, encode_mutation};
use sibyl_db::Mutation;
use sibyl_protocol::{Event, SchemaChange, SchemaChangeTarget};
use sibyl_schema::schema::Schema;
use sibyl_service::error::ServiceError;
use sibyl_service::proxy::StorageVerbs;
use sibyl_service::proxy::{SchemaLog, StorageProxy};
use sibyl_service::replica::Replica;
use sibyl_service::topology::{movements, replicated_ranges, stream_plans, Movement};
use sibyl_tcm::{
    ClusterMetadataService, Epoch, MetadataStateMachine, MetadataTransport, NodeAddr, TcmError,
    Transformation, TransformationKind, TransportError,
};
use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;
use tokio::sync::broadcast;

/// How long a node waits for the metadata log when it joins or commits.
pub const METADATA_TIMEOUT: Duration = Duration::from_secs(10);

/// How long a schema change's coordinator waits for the other live nodes
/// to apply it before it answers (they normally take milliseconds).
pub const CATCH_UP_TIMEOUT: Duration = Duration::from_secs(2);

/// Format version of this module's log entries.
const ENTRY_VERSION: u8 = 1;

/// A node of the cluster as the metadata log records it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeRecord {
    pub host_id: uuid::Uuid,
    pub address: IpAddr,
    pub datacenter: String,
    pub rack: String,
    pub tokens: Vec<i64>,
    /// Its internode port.
    pub storage_port: u16,
    /// Where drivers reach it.
    pub native_address: SocketAddr,
    pub release_version: String,
    /// Joining, normal or leaving (entries of older builds: normal).
    #[serde(default)]
    pub state: NodeState,
    /// The dead node this one replaces (`replace_address_first_boot`) while
    /// it joins with that node's tokens; it leaves the ring when this one
    /// becomes normal.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replacing: Option<uuid::Uuid>,
}

/// Where a node is in its life in the ring (`nodetool status`'s State).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub enum NodeState {
    /// Bootstrapping: takes writes for its future ranges, serves no reads.
    Joining,
    #[default]
    Normal,
    /// Decommissioning or being removed: still a replica while its ranges
    /// stream to their new owners.
    Leaving,
}

impl NodeState {
    /// The name Cassandra's logs and tools give the state.
    pub fn name(self) -> &'static str {
        match self {
            NodeState::Joining => "JOINING",
            NodeState::Normal => "NORMAL",
            NodeState::Leaving => "LEAVING",
        }
    }

    /// The letter `nodetool status` shows.
    pub fn letter(self) -> &'static str {
        match self {
            NodeState::Joining => "J",
            NodeState::Normal => "N",
            NodeState::Leaving => "L",
        }
    }
}

/// Every node of the cluster, by host id.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Directory {
    pub nodes: BTreeMap<uuid::Uuid, NodeRecord>,
}

impl NodeRecord {
    fn endpoint(&self) -> Endpoint {
        Endpoint {
            host_id: self.host_id,
            address: self.address,
            datacenter: self.datacenter.clone(),
            rack: self.rack.clone(),
        }
    }
}

impl Directory {
    /// The token ring of the nodes that own ranges now: normal and leaving
    /// ones.
    pub fn ring(&self) -> TokenMetadata {
        self.ring_of(|s| s != NodeState::Joining)
    }

    /// The ring once the joining nodes have joined and the leaving ones
    /// left; `None` when no node is joining or leaving.
    pub fn future_ring(&self) -> Option<TokenMetadata> {
        let replaced = self.replaced();
        self.nodes
            .values()
            .any(|n| n.state != NodeState::Normal)
            .then(|| {
                let mut ring = TokenMetadata::new();
                for n in self.nodes.values() {
                    if n.state != NodeState::Leaving && !replaced.contains(&n.host_id) {
                        ring.add(n.endpoint(), &n.tokens);
                    }
                }
                ring
            })
    }

    /// The nodes that joining nodes replace.
    pub fn replaced(&self) -> Vec<uuid::Uuid> {
        self.nodes.values().filter_map(|n| n.replacing).collect()
    }

    /// Every node of the directory, whatever its state.
    pub fn ring_of_all(&self) -> TokenMetadata {
        self.ring_of(|_| true)
    }

    fn ring_of(&self, member: impl Fn(NodeState) -> bool) -> TokenMetadata {
        let mut ring = TokenMetadata::new();
        for n in self.nodes.values().filter(|n| member(n.state)) {
            ring.add(n.endpoint(), &n.tokens);
        }
        ring
    }

    /// The node at `address`: while a node replaces a dead one at the same
    /// address, the replacement.
    pub fn by_address(&self, address: IpAddr) -> Option<&NodeRecord> {
        let mut at = self.nodes.values().filter(|n| n.address == address);
        let first = at.next()?;
        Some(
            std::iter::once(first)
                .chain(at)
                .find(|n| n.replacing.is_some())
                .unwrap_or(first),
        )
    }
}

/// A topology change, as a log entry.
#[derive(Debug, Clone, Serialize, Deserialize)]
enum TopologyChange {
    /// A node joins with its tokens (or a known node changes address).
    Register(NodeRecord),
    /// A node becomes joining, normal or leaving.
    SetState {
        host_id: uuid::Uuid,
        state: NodeState,
    },
    /// A node leaves the ring (decommissioned, removed, assassinated).
    Remove { host_id: uuid::Uuid },
}

#[derive(Debug, Serialize, Deserialize)]
struct TopologyEntry {
    version: u8,
    change: TopologyChange,
}

/// A schema change, as a log entry: the `system_schema` mutations planned
/// against schema version `base`, and the event drivers get.
fn encode_schema_entry(
    base: uuid::Uuid,
    mutations: &[Mutation],
    event: &Option<SchemaChange>,
) -> Vec<u8> {
    let mut out = vec![ENTRY_VERSION];
    out.extend_from_slice(base.as_bytes());
    let ev = event.as_ref().map(|e| {
        serde_json::json!({
            "change_type": e.change_type,
            "target": e.target.name(),
            "keyspace": e.keyspace,
            "name": e.name,
            "arg_types": e.arg_types,
        })
        .to_string()
    });
    let ev = ev.unwrap_or_default();
    out.extend_from_slice(&(ev.len() as u32).to_be_bytes());
    out.extend_from_slice(ev.as_bytes());
    out.extend_from_slice(&(mutations.len() as u32).to_be_bytes());
    let mut buf = Vec::new();
    for m in mutations {
        buf.clear();
        encode_mutation(m, &mut buf);
        out.extend_from_slice(&(buf.len() as u32).to_be_bytes());
        out.extend_from_slice(&buf);
    }
    out
}

struct SchemaEntry {
    base: uuid::Uuid,
    event: Option<SchemaChange>,
    mutations: Vec<Mutation>,
}

fn target_of(name: &str) -> Option<SchemaChangeTarget> {
    Some(match name {
        "KEYSPACE" => SchemaChangeTarget::Keyspace,
        "TABLE" => SchemaChangeTarget::Table,
        "TYPE" => SchemaChangeTarget::Type,
        "FUNCTION" => SchemaChangeTarget::Function,
        "AGGREGATE" => SchemaChangeTarget::Aggregate,
        _ => return None,
    })
}

fn decode_schema_entry(b: &[u8], schema: &Schema) -> Result<SchemaEntry, String> {
    let mut r = sibyl_db::serde::Reader::new(b);
    let err = |e: sibyl_db::DecodeError| format!("bad schema entry: {}", e.0);
    let v = r.u8().map_err(err)?;
    if v != ENTRY_VERSION {
        return Err(format!(
            "schema entry format version {v} (this build reads {ENTRY_VERSION})"
        ));
    }
    let mut id = [0u8; 16];
    id.copy_from_slice(r.take(16).map_err(err)?);
    let ev = r.bytes().map_err(err)?;
    let event = if ev.is_empty() {
        None
    } else {
        let j: serde_json::Value =
            serde_json::from_slice(&ev).map_err(|e| format!("bad schema event: {e}"))?;
        Some(SchemaChange {
            change_type: j["change_type"].as_str().unwrap_or_default().to_string(),
            target: target_of(j["target"].as_str().unwrap_or_default())
                .ok_or("bad schema event target")?,
            keyspace: j["keyspace"].as_str().unwrap_or_default().to_string(),
            name: j["name"].as_str().map(str::to_string),
            arg_types: j["arg_types"]
                .as_array()
                .map(|a| {
                    a.iter()
                        .filter_map(|x| x.as_str().map(str::to_string))
                        .collect()
                })
                .unwrap_or_default(),
        })
    };
    let n = r.count().map_err(err)?;
    let mut mutations = Vec::with_capacity(n);
    for _ in 0..n {
        let m = r.bytes().map_err(err)?;
        let comparator = |id| schema.table_by_id(id).map(|t| t.comparator.clone());
        match decode_mutation(&m, &comparator).map_err(err)? {
            Some(m) => mutations.push(m),
            None => return Err("a schema entry writes to an unknown table".into()),
        }
    }
    Ok(SchemaEntry {
        base: uuid::Uuid::from_bytes(id),
        event,
        mutations,
    })
}

/// What happens on this node when the log applies a change.
pub struct ClusterState {
    replica: Arc<Replica>,
    proxy: Arc<StorageProxy>,
    pub directory: RwLock<Directory>,
    /// CQL events for this node's registered clients.
    events: broadcast::Sender<Event>,
    local_host_id: uuid::Uuid,
    /// Called with the schema after each change (system.local, prepared
    /// statements, gossip's SCHEMA state).
    pub on_schema: RwLock<Option<Box<dyn Fn(&Schema) + Send + Sync>>>,
    /// Called after each topology change (system.peers).
    pub on_topology: RwLock<Option<Box<dyn Fn(&Directory) + Send + Sync>>>,
    /// Called with the address of a node that left the ring (gossip
    /// forgets it).
    pub on_removed: RwLock<Option<Box<dyn Fn(IpAddr) + Send + Sync>>>,
    /// The newest write timestamp of the schema this state holds: of the
    /// last schema entry applied, or of the snapshot restored. A snapshot
    /// writes its rows at this time, not at the time it is taken: the
    /// entries after it were planned after this one, but may have been
    /// planned before the snapshot was built, and must still win.
    schema_timestamp: AtomicI64,
}

impl ClusterState {
    fn new(
        replica: Arc<Replica>,
        proxy: Arc<StorageProxy>,
        events: broadcast::Sender<Event>,
        local_host_id: uuid::Uuid,
    ) -> Self {
        ClusterState {
            replica,
            proxy,
            directory: RwLock::new(Directory::default()),
            events,
            local_host_id,
            on_schema: RwLock::new(None),
            on_topology: RwLock::new(None),
            on_removed: RwLock::new(None),
            schema_timestamp: AtomicI64::new(i64::MIN),
        }
    }

    fn set_directory(&self, d: Directory) {
        self.proxy.ring.store(Arc::new(d.ring()));
        self.proxy.set_future_ring(d.future_ring());
        *self.directory.write() = d.clone();
        if let Some(f) = self.on_topology.read().as_ref() {
            f(&d);
        }
    }

    fn apply_topology(&self, payload: &[u8]) -> Result<Vec<u8>, String> {
        let entry: TopologyEntry =
            serde_json::from_slice(payload).map_err(|e| format!("bad topology entry: {e}"))?;
        if entry.version != ENTRY_VERSION {
            return Err(format!("topology entry format version {}", entry.version));
        }
        match entry.change {
            TopologyChange::Register(rec) => {
                let mut d = self.directory.read().clone();
                if let Some(old) = rec.replacing {
                    match d.nodes.get(&old) {
                        None => {
                            return Err(format!(
                                "Cannot replace host {old}: it is not in the cluster"
                            ))
                        }
                        Some(o) if o.state != NodeState::Normal || o.replacing.is_some() => {
                            return Err(format!(
                                "Cannot replace /{}: it is {}",
                                o.address,
                                o.state.name()
                            ))
                        }
                        Some(_) => {}
                    }
                    if let Some(other) = d
                        .nodes
                        .values()
                        .find(|n| n.replacing == Some(old) && n.host_id != rec.host_id)
                    {
                        return Err(format!(
                            "Node /{} is already replacing host {old}",
                            other.address
                        ));
                    }
                }
                let replaced = |n: &NodeRecord| Some(n.host_id) == rec.replacing;
                if let Some(other) = d
                    .nodes
                    .values()
                    .find(|n| n.address == rec.address && n.host_id != rec.host_id && !replaced(n))
                {
                    return Err(format!(
                        "address {} belongs to host {} in the cluster; a node with a new host id ({}) cannot take it over: \
                         replace the old node explicitly (its data directory was wiped?)",
                        rec.address, other.host_id, rec.host_id
                    ));
                }
                if let Some(clash) = d.nodes.values().find(|n| {
                    n.host_id != rec.host_id
                        && !replaced(n)
                        && n.tokens.iter().any(|t| rec.tokens.contains(t))
                }) {
                    return Err(format!(
                        "token collision with {} ({})",
                        clash.address, clash.host_id
                    ));
                }
                let new = !d.nodes.contains_key(&rec.host_id);
                let mut rec = rec;
                // nothing to bootstrap from: the first node of a ring
                if rec.state == NodeState::Joining && !d.nodes.keys().any(|h| *h != rec.host_id) {
                    rec.state = NodeState::Normal;
                }
                let native = rec.native_address;
                let is_local = rec.host_id == self.local_host_id;
                d.nodes.insert(rec.host_id, rec);
                self.set_directory(d);
                if new && !is_local {
                    let _ = self.events.send(Event::TopologyChange {
                        change: "NEW_NODE".into(),
                        addr: native,
                    });
                }
                Ok(Vec::new())
            }
            TopologyChange::SetState { host_id, state } => {
                let mut d = self.directory.read().clone();
                let Some(n) = d.nodes.get_mut(&host_id) else {
                    return Err(format!("host {host_id} is not in the cluster"));
                };
                let joined = n.state == NodeState::Joining && state == NodeState::Normal;
                n.state = state;
                let native = n.native_address;
                let address = n.address;
                // a replacement that becomes normal takes the replaced
                // node's place in the same entry: the ring never lacks its
                // tokens
                let replaced = if joined { n.replacing.take() } else { None };
                // Cassandra's words (StorageService: "state jump to")
                tracing::info!(
                    "Node /{} state jump to {}",
                    std::net::SocketAddr::new(n.address, n.storage_port),
                    state.name()
                );
                let replaced = replaced.and_then(|old| d.nodes.remove(&old));
                self.set_directory(d);
                if let Some(old) = &replaced {
                    tracing::info!(
                        "Node /{} replaced /{} ({}), which left the ring",
                        SocketAddr::new(address, old.storage_port),
                        SocketAddr::new(old.address, old.storage_port),
                        old.host_id
                    );
                }
                if joined && host_id != self.local_host_id {
                    if let Some(old) = replaced.as_ref().filter(|o| o.address != address) {
                        let _ = self.events.send(Event::TopologyChange {
                            change: "REMOVED_NODE".into(),
                            addr: old.native_address,
                        });
                    }
                    let _ = self.events.send(Event::TopologyChange {
                        change: "NEW_NODE".into(),
                        addr: native,
                    });
                }
                // (at the same address gossip's state is the replacement's)
                if let Some(old) = replaced.filter(|o| o.address != address) {
                    if let Some(f) = self.on_removed.read().as_ref() {
                        f(old.address);
                    }
                }
                Ok(Vec::new())
            }
            TopologyChange::Remove { host_id } => {
                let mut d = self.directory.read().clone();
                let Some(n) = d.nodes.remove(&host_id) else {
                    return Ok(Vec::new());
                };
                tracing::info!("node {} ({host_id}) left the ring", n.address);
                self.set_directory(d);
                if host_id != self.local_host_id {
                    let _ = self.events.send(Event::TopologyChange {
                        change: "REMOVED_NODE".into(),
                        addr: n.native_address,
                    });
                }
                if let Some(f) = self.on_removed.read().as_ref() {
                    f(n.address);
                }
                Ok(Vec::new())
            }
        }
    }

    fn apply_schema(&self, payload: &[u8]) -> Result<Vec<u8>, String> {
        let entry = decode_schema_entry(payload, &self.replica.schema())?;
        let mut written = i64::MIN;
        for m in &entry.mutations {
            m.update.timestamps(&mut |t| written = written.max(t));
        }
        let replica = self.replica.clone();
        // openraft applies entries on a task of the node's multi-threaded
        // runtime; storing the rows is asynchronous
        let applied = tokio::task::block_in_place(|| {
            tokio::runtime::Handle::current()
                .block_on(replica.apply_schema_mutations(entry.base, entry.mutations))
        })
        .map_err(|e| e.to_string())?;
        let Some(schema) = applied else {
            return Err(CONFLICT.into());
        };
        self.schema_timestamp.fetch_max(written, Ordering::Relaxed);
        if let Some(f) = self.on_schema.read().as_ref() {
            f(&schema);
        }
        if let Some(ev) = entry.event {
            let _ = self.events.send(Event::SchemaChange(ev));
        }
        Ok(Vec::new())
    }
}

/// The state machine's answer to a schema change planned against a schema
/// another change had replaced.
const CONFLICT: &str = "schema conflict: planned against a replaced schema";

#[derive(Serialize, Deserialize)]
struct Snapshot {
    version: u8,
    directory: Directory,
    /// The user keyspaces' `system_schema` rows, written at
    /// `schema_timestamp`, encoded as a schema entry.
    #[serde(default)]
    schema: Vec<u8>,
    #[serde(default)]
    schema_timestamp: i64,
}

impl ClusterState {
    /// Makes this node's user schema the snapshot's: keyspaces it has and
    /// the snapshot lacks are dropped, the snapshot's are written, all at the
    /// snapshot's timestamp, so that the entries after the snapshot (planned
    /// later) still win.
    fn restore_schema(&self, encoded: &[u8], ts: i64) -> Result<(), String> {
        let current = self.replica.schema();
        let entry = decode_schema_entry(encoded, &current)?;
        let now = self.replica.clock().now_seconds();
        let mut mutations = Vec::new();
        for (name, ks) in &current.keyspaces {
            if !ks.is_system && !ks.is_virtual {
                mutations.extend(sibyl_schema::schema_tables::drop_keyspace_mutations(
                    name,
                    ts - 1,
                    now,
                ));
            }
        }
        mutations.extend(entry.mutations);
        let replica = self.replica.clone();
        let applied = tokio::task::block_in_place(|| {
            tokio::runtime::Handle::current()
                .block_on(replica.apply_schema_mutations(current.version, mutations))
        })
        .map_err(|e| e.to_string())?;
        match applied {
            Some(schema) => {
                if let Some(f) = self.on_schema.read().as_ref() {
                    f(&schema);
                }
                Ok(())
            }
            None => Err("the schema changed while a metadata snapshot was restored".into()),
        }
    }
}

impl MetadataStateMachine for ClusterState {
    fn apply(&self, _epoch: Epoch, t: &Transformation) -> Result<Vec<u8>, String> {
        match t.kind {
            TransformationKind::Topology => self.apply_topology(&t.payload),
            TransformationKind::Schema => self.apply_schema(&t.payload),
        }
    }

    /// The directory and the user schema as `system_schema` rows.
    fn snapshot(&self) -> Vec<u8> {
        let schema = self.replica.schema();
        // (none before the first schema entry: the system keyspaces'
        // defaults, which any change overrides)
        let ts = self.schema_timestamp.load(Ordering::Relaxed).max(0);
        let now = self.replica.clock().now_seconds();
        let mut mutations: Vec<Mutation> = schema
            .keyspaces
            .values()
            .filter(|ks| !ks.is_system && !ks.is_virtual)
            .flat_map(|ks| sibyl_schema::schema_tables::keyspace_mutations(ks, ts, now))
            .collect();
        // and the replication of the system keyspaces an operator may alter
        for name in sibyl_schema::schema_tables::REPLICATED_SYSTEM_KEYSPACES {
            if let Some(ks) = schema.keyspace(name) {
                mutations.push(sibyl_schema::schema_tables::keyspace_params_mutation(
                    ks, ts, now,
                ));
            }
        }
        serde_json::to_vec(&Snapshot {
            version: ENTRY_VERSION,
            directory: self.directory.read().clone(),
            schema: encode_schema_entry(schema.version, &mutations, &None),
            schema_timestamp: ts,
        })
        .unwrap_or_default()
    }

    fn restore(&self, epoch: Epoch, snapshot: &[u8]) -> Result<(), String> {
        if snapshot.is_empty() {
            self.set_directory(Directory::default());
            self.schema_timestamp.store(i64::MIN, Ordering::Relaxed);
            return Ok(());
        }
        let s: Snapshot =
            serde_json::from_slice(snapshot).map_err(|e| format!("bad metadata snapshot: {e}"))?;
        if s.version != ENTRY_VERSION {
            return Err(format!("metadata snapshot format version {}", s.version));
        }
        self.set_directory(s.directory);
        if !s.schema.is_empty() {
            self.restore_schema(&s.schema, s.schema_timestamp)?;
        }
        self.schema_timestamp
            .store(s.schema_timestamp, Ordering::Relaxed);
        tracing::info!(
            "cluster metadata restored from a snapshot at epoch {}",
            epoch.0
        );
        Ok(())
    }
}

/// Carries the metadata log's messages over internode messaging.
struct MessagingTransport(Arc<TcpMessaging>);

impl MetadataTransport for MessagingTransport {
    fn call(
        &self,
        to: &NodeAddr,
        request: Vec<u8>,
        timeout: Duration,
    ) -> futures::future::BoxFuture<'static, Result<Vec<u8>, TransportError>> {
        let messaging = self.0.clone();
        let to_s = to.0.clone();
        Box::pin(async move {
            let ip: IpAddr = to_s
                .parse::<SocketAddr>()
                .map(|s| s.ip())
                .or_else(|_| to_s.parse::<IpAddr>())
                .map_err(|_| TransportError::Unreachable(format!("bad address {to_s}")))?;
            match messaging
                .send_and_receive(ip, Request::Metadata(request), timeout)
                .await
            {
                Ok(Response::Metadata(b)) => Ok(b),
                Ok(other) => Err(TransportError::Failed(format!(
                    "unexpected answer {other:?}"
                ))),
                Err(MessagingError::Refused(a, reason)) => {
                    Err(TransportError::Failed(format!("refused by {a}: {reason}")))
                }
                Err(MessagingError::Unreachable(a)) | Err(MessagingError::Overloaded(a)) => {
                    Err(TransportError::Unreachable(a.to_string()))
                }
                Err(e) => Err(TransportError::Failed(e.to_string())),
            }
        })
    }
}

/// Schema changes through the metadata log.
struct LogSchema {
    metadata: ClusterMetadataService,
    proxy: Arc<StorageProxy>,
    gossip: Arc<GossipDriver>,
}

impl SchemaLog for LogSchema {
    fn commit(
        &self,
        base: uuid::Uuid,
        mutations: Vec<Mutation>,
        event: Option<SchemaChange>,
    ) -> BoxFuture<Result<Arc<Schema>, ServiceError>> {
        let metadata = self.metadata.clone();
        let proxy = self.proxy.clone();
        let gossip = self.gossip.clone();
        Box::pin(async move {
            let payload = encode_schema_entry(base, &mutations, &event);
            match metadata
                .commit(Transformation::schema(payload), METADATA_TIMEOUT)
                .await
            {
                Ok((epoch, _)) => {
                    // every live node has the change before the client
                    // hears of it, so any node it asks next knows it
                    let peers = gossip.live_peers();
                    let waits = peers.iter().map(|p| {
                        gossip.messaging.send_and_receive(
                            *p,
                            Request::MetadataCatchUp(epoch.0),
                            CATCH_UP_TIMEOUT,
                        )
                    });
                    for (p, r) in peers.iter().zip(futures::future::join_all(waits).await) {
                        if !matches!(r, Ok(Response::Done)) {
                            tracing::warn!(
                                "{p} has not applied schema epoch {} in {CATCH_UP_TIMEOUT:?}",
                                epoch.0
                            );
                        }
                    }
                    Ok(proxy.shared_schema().load_full())
                }
                Err(TcmError::Rejected { message, .. }) if message == CONFLICT => {
                    Err(ServiceError::SchemaConflict)
                }
                Err(TcmError::Rejected { message, .. }) => Err(ServiceError::Invalid(message)),
                Err(e) => Err(ServiceError::Metadata(format!(
                    "Cannot commit the schema change to the cluster metadata log: {e}"
                ))),
            }
        })
    }
}

/// Gossip on this node: rounds every second, messages in and out.
pub struct GossipDriver {
    pub gossiper: Mutex<Gossiper>,
    pub messaging: Arc<TcpMessaging>,
    clock: SystemClock,
    events: broadcast::Sender<Event>,
    state: Arc<ClusterState>,
    /// Called when what gossip knows of another node changes (system.peers).
    on_change: RwLock<Option<Box<dyn Fn(IpAddr, &GossipDriver) + Send + Sync>>>,
}

impl GossipDriver {
    /// The gossip clock (monotonic nanoseconds).
    pub fn now(&self) -> u64 {
        self.clock.monotonic_nanos()
    }

    fn dispatch(&self, out: GossipOutput) {
        for (to, m) in out.messages {
            let mut b = Vec::new();
            m.encode(&mut b);
            self.messaging.send_one_way(to, Request::Gossip(b));
        }
        let local = self.messaging.local_address();
        for e in out.events {
            let (change, endpoint) = match &e {
                GossipEvent::Alive { endpoint, .. } => ("UP", *endpoint),
                GossipEvent::Dead { endpoint, .. } => ("DOWN", *endpoint),
                GossipEvent::Join { endpoint, .. }
                | GossipEvent::Change {
                    endpoint,
                    state: ApplicationState::Schema,
                    ..
                } if *endpoint != local => {
                    if let Some(f) = self.on_change.read().as_ref() {
                        f(*endpoint, self);
                    }
                    continue;
                }
                _ => continue,
            };
            self.state.proxy.note_liveness(endpoint, change == "UP");
            if let Some(f) = self.on_change.read().as_ref() {
                f(endpoint, self);
            }
            if let Some(n) = self.state.directory.read().by_address(endpoint) {
                let _ = self.events.send(Event::StatusChange {
                    change: change.into(),
                    addr: n.native_address,
                });
            }
        }
    }

    fn on_message(&self, from: IpAddr, bytes: &[u8]) {
        match GossipMessage::decode(bytes) {
            Ok(m) => {
                let out = self.gossiper.lock().handle(from, m, self.now());
                self.dispatch(out);
            }
            Err(e) => tracing::warn!("bad gossip message from {from}: {e}"),
        }
    }

    /// Drops a node that left the ring from gossip (quarantined, so that
    /// peers cannot gossip it back).
    pub fn forget(&self, endpoint: IpAddr) {
        let out = self.gossiper.lock().evict_endpoint(endpoint, self.now());
        self.dispatch(out);
    }

    /// Sets this node's application states.
    pub fn set_states(&self, states: Vec<(ApplicationState, String)>) {
        let out = self.gossiper.lock().add_local_application_states(states);
        self.dispatch(out);
    }

    /// The other nodes gossip has up.
    pub fn live_peers(&self) -> Vec<IpAddr> {
        let g = self.gossiper.lock();
        let me = g.local_address();
        g.live_members().into_iter().filter(|a| *a != me).collect()
    }

    /// Sends this node's whole state to every live peer at once, instead of
    /// waiting for gossip rounds to spread it (after a schema change, so
    /// that `system.peers` everywhere shows the new version within
    /// milliseconds).
    pub fn push_local_state(&self) {
        let peers = self.live_peers();
        let (me, state) = {
            let g = self.gossiper.lock();
            let me = g.local_address();
            (me, g.endpoint_state(me).cloned())
        };
        let Some(state) = state else { return };
        let mut out = GossipOutput::default();
        for p in peers {
            out.messages.push((
                p,
                GossipMessage::Ack2 {
                    states: vec![(me, state.clone())],
                },
            ));
        }
        self.dispatch(out);
    }

    /// Sets what to do when gossip learns something new about another node.
    pub fn set_on_change(&self, f: Box<dyn Fn(IpAddr, &GossipDriver) + Send + Sync>) {
        *self.on_change.write() = Some(f);
    }

    /// The schema version `endpoint` announced, while it is up. A node that
    /// is down has none in `system.peers`: drivers leave peers without a
    /// schema version out of their schema agreement wait, and a driver that
    /// has not yet seen the node go down would otherwise wait for it.
    pub fn schema_version_of(&self, endpoint: IpAddr) -> Option<uuid::Uuid> {
        let g = self.gossiper.lock();
        if !g.is_alive(endpoint) {
            return None;
        }
        g.application_state(endpoint, ApplicationState::Schema)
            .and_then(|v| v.parse().ok())
    }

    /// Whether gossip has `endpoint` up (this node always is).
    pub fn is_alive(&self, endpoint: IpAddr) -> bool {
        // this node is alive to itself without the gossiper's lock (every
        // request asks about its replicas, this node often among them)
        if endpoint == self.messaging.local_address() {
            return true;
        }
        let g = self.gossiper.lock();
        endpoint == g.local_address() || g.is_alive(endpoint)
    }

    async fn run(self: Arc<Self>) {
        let mut tick = tokio::time::interval(Duration::from_secs(1));
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            let out = self.gossiper.lock().tick(self.now());
            self.dispatch(out);
        }
    }

    /// Whether this node gossips (`nodetool statusgossip`).
    pub fn is_enabled(&self) -> bool {
        self.gossiper.lock().is_enabled()
    }

    /// `nodetool disablegossip`: the others are told this node is down, and
    /// it stops gossiping (it goes on serving clients).
    pub fn disable(&self) {
        if self.is_enabled() {
            tracing::warn!("Stopping gossip by operator request");
            self.announce_shutdown();
        }
    }

    /// `nodetool enablegossip`: gossip again, with a newer generation, so
    /// that the others take this node back as restarted.
    pub fn enable(&self) {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs() as i32)
            .unwrap_or(0);
        let out = self.gossiper.lock().restart(now);
        if !out.events.is_empty() {
            tracing::warn!("Starting gossip by operator request");
        }
        self.dispatch(out);
    }

    /// Tells the others this node is stopping.
    pub fn announce_shutdown(&self) {
        let out = self.gossiper.lock().announce_shutdown();
        self.dispatch(out);
    }
}

/// Every verb this node answers.
struct NodeVerbs {
    replica: StorageVerbs,
    gossip: OnceLock<Arc<GossipDriver>>,
    metadata: OnceLock<ClusterMetadataService>,
}

/// The thread pool Cassandra runs a verb in, for the pools' metrics.
fn stage_of(request: &Request) -> &'static sibyl_metrics::Stage {
    use sibyl_metrics::stages;
    match request {
        Request::Read(_) => &stages::READ,
        Request::CounterMutation { .. } => &stages::COUNTER_MUTATION,
        Request::Gossip(_) => &stages::GOSSIP,
        Request::Metadata(_) | Request::MetadataCatchUp(_) => &stages::MIGRATION,
        Request::StreamPage { .. }
        | Request::StreamSession(_)
        | Request::Validation { .. }
        | Request::RepairPrepare { .. }
        | Request::RepairFinish { .. } => &stages::ANTI_ENTROPY,
        _ => &stages::MUTATION,
    }
}

impl VerbHandler for NodeVerbs {
    fn handle(&self, from: IpAddr, request: Request) -> BoxFuture<Response> {
        let running = stage_of(&request).start();
        let served = self.serve(from, request);
        Box::pin(async move {
            let _running = running;
            served.await
        })
    }
}

impl NodeVerbs {
    fn serve(&self, from: IpAddr, request: Request) -> BoxFuture<Response> {
        match request {
            Request::Gossip(b) => {
                if let Some(g) = self.gossip.get() {
                    g.on_message(from, &b);
                }
                Box::pin(async { Response::Done })
            }
            Request::MetadataCatchUp(epoch) => match self.metadata.get() {
                Some(m) => {
                    let m = m.clone();
                    Box::pin(async move {
                        match m.wait_for_epoch(Epoch(epoch), CATCH_UP_TIMEOUT).await {
                            Ok(_) => Response::Done,
                            Err(e) => Response::Failure(ReplicaFailure::Error(e.to_string())),
                        }
                    })
                }
                None => Box::pin(async {
                    Response::Failure(ReplicaFailure::Error("cluster metadata is starting".into()))
                }),
            },
            Request::Metadata(b) => match self.metadata.get() {
                Some(m) => {
                    let m = m.clone();
                    Box::pin(async move { Response::Metadata(m.handle(b).await) })
                }
                None => Box::pin(async {
                    Response::Failure(ReplicaFailure::Error("cluster metadata is starting".into()))
                }),
            },
            other => self.replica.handle(from, other),
        }
    }
}

/// The node's cluster services, running.
pub struct ClusterServices {
    pub messaging: Arc<TcpMessaging>,
    pub gossip: Arc<GossipDriver>,
    pub metadata: ClusterMetadataService,
    pub state: Arc<ClusterState>,
    /// This node's tokens, as registered.
    pub tokens: Vec<i64>,
    pub datacenter: String,
    pub rack: String,
    /// A `nodetool rebuild` is running.
    rebuilding: std::sync::atomic::AtomicBool,
    /// The `nodetool removenode` this node runs.
    removal: Mutex<Option<Removal>>,
}

/// A removal in process (`nodetool removenode status`).
struct Removal {
    /// One of the removed node's tokens.
    token: i64,
    /// The nodes still streaming the removed node's ranges (`None` until
    /// they are known: no removal shows before, as in Cassandra).
    replicating: Option<std::collections::BTreeSet<IpAddr>>,
    /// `removenode force`.
    force: Arc<tokio::sync::Notify>,
}

/// What `nodetool rebuild` is asked to stream.
#[derive(Debug, Clone, Default)]
pub struct RebuildRequest {
    /// `<src-dc-name>`: sources only in this DC.
    pub source_dc: Option<String>,
    /// `-ks`: one keyspace (default: every keyspace on the ring).
    pub keyspace: Option<String>,
    /// `-ts`: these ranges of `keyspace` only, as `(start,end]` pieces.
    pub tokens: Option<String>,
    /// `-s`: sources only among these nodes.
    pub sources: Option<String>,
    /// `--exclude-local-dc`.
    pub exclude_local_dc: bool,
}

/// Parses `(a,b],(c,d]` as Cassandra's `rebuild -ts` does.
fn parse_token_ranges(text: &str) -> Result<Vec<(i64, i64)>, String> {
    let mut out = Vec::new();
    let mut rest = text.trim();
    while !rest.is_empty() {
        let open = rest
            .find('(')
            .filter(|i| rest[..*i].trim_matches([',', ' ']).is_empty());
        let close = rest.find(']');
        let (Some(open), Some(close)) = (open, close) else {
            return Err(format!("Unexpected string: {rest}"));
        };
        let inner = &rest[open + 1..close];
        let (a, b) = inner
            .split_once(',')
            .ok_or_else(|| format!("Unexpected string: {rest}"))?;
        let parse = |t: &str| {
            t.trim()
                .parse::<i64>()
                .map_err(|_| format!("Unexpected string: {rest}"))
        };
        out.push((parse(a)?, parse(b)?));
        rest = rest[close + 1..].trim_start_matches([',', ' ']);
    }
    Ok(out)
}

/// Whether `outer` holds all of `inner` (both `(start, end]`).
fn range_contains(outer: (i64, i64), inner: (i64, i64)) -> bool {
    use sibyl_storage::repaired::pieces;
    let outer = pieces(outer);
    pieces(inner)
        .iter()
        .all(|(s, e)| outer.iter().any(|(os, oe)| os <= s && e <= oe))
}

/// Why the node could not join its cluster.
#[derive(Debug, thiserror::Error)]
pub enum ClusterError {
    #[error(transparent)]
    Bind(#[from] sibyl_cluster::net::BindError),
    #[error("cluster metadata: {0}")]
    Metadata(#[from] TcmError),
    #[error("cannot join the cluster: {0}")]
    Join(String),
}

/// The node's data center and rack from its snitch.
pub fn location(config: &Config) -> (String, String) {
    let default = (
        sibyl_cluster::snitch::DEFAULT_DATACENTER.to_string(),
        sibyl_cluster::snitch::DEFAULT_RACK.to_string(),
    );
    if !config
        .endpoint_snitch
        .ends_with("GossipingPropertyFileSnitch")
    {
        return default;
    }
    let Some(dir) = &config.config_directory else {
        return default;
    };
    let path = dir.join("cassandra-rackdc.properties");
    let Ok(text) = std::fs::read_to_string(&path) else {
        tracing::warn!(
            "GossipingPropertyFileSnitch: cannot read {}; using {}/{}",
            path.display(),
            default.0,
            default.1
        );
        return default;
    };
    let mut dc = default.0.clone();
    let mut rack = default.1.clone();
    for line in text.lines() {
        let line = line.trim();
        if line.starts_with('#') {
            continue;
        }
        if let Some((k, v)) = line.split_once('=') {
            match k.trim() {
                "dc" => dc = v.trim().to_string(),
                "rack" => rack = v.trim().to_string(),
                _ => {}
            }
        }
    }
    (dc, rack)
}

/// The internode messaging service of this node (bound before anything
/// else, so that a node that cannot listen fails at once).
pub async fn bind_messaging(
    config: &Config,
    listen: IpAddr,
    broadcast: IpAddr,
    schema: sibyl_service::replica::SharedSchema,
) -> Result<Arc<TcpMessaging>, ClusterError> {
    let mut mc =
        sibyl_cluster::net::MessagingConfig::new(listen, config.storage_port, &config.cluster_name);
    mc.broadcast_address = broadcast;
    if let Some(v) = config.messaging_version {
        mc.max_version = v;
    }
    let lookup: sibyl_cluster::net::ComparatorLookup =
        Arc::new(move |id| schema.load().table_by_id(id).map(|t| t.comparator.clone()));
    Ok(Arc::new(TcpMessaging::bind(mc, lookup).await?))
}

/// The metadata log's id for a host (stable for the life of its data).
pub fn node_id_of(host_id: uuid::Uuid) -> u64 {
    let b = host_id.as_bytes();
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[..8]);
    u64::from_be_bytes(a)
        ^ u64::from_be_bytes([b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15]])
}

/// Joins (or starts, or rejoins) the cluster.
#[allow(clippy::too_many_arguments)]
pub async fn join(
    config: &Config,
    messaging: Arc<TcpMessaging>,
    replica: Arc<Replica>,
    proxy: Arc<StorageProxy>,
    events: broadcast::Sender<Event>,
    host_id: uuid::Uuid,
    stored_tokens: Option<Vec<i64>>,
    native_address: SocketAddr,
) -> Result<ClusterServices, ClusterError> {
    let (datacenter, rack) = location(config);
    let me = messaging.local_address();
    let verbs = Arc::new(NodeVerbs {
        replica: StorageVerbs(proxy.clone()),
        gossip: OnceLock::new(),
        metadata: OnceLock::new(),
    });
    messaging.set_handler(verbs.clone());
    let state = Arc::new(ClusterState::new(
        replica.clone(),
        proxy.clone(),
        events.clone(),
        host_id,
    ));
    let addr = NodeAddr(SocketAddr::new(me, config.storage_port).to_string());
    let metadata = ClusterMetadataService::open(
        &config.metadata_directory,
        node_id_of(host_id),
        addr,
        Arc::new(MessagingTransport(messaging.clone())),
        state.clone(),
        sibyl_tcm::TcmConfig {
            snapshot_every_entries: config.metadata_snapshot_entries,
            entries_kept_after_snapshot: config.metadata_snapshot_entries,
            ..Default::default()
        },
    )
    .await?;
    let _ = verbs.metadata.set(metadata.clone());

    let seeds: Vec<IpAddr> = config.seeds.clone();
    let first_seed = seeds.first().is_none_or(|s| *s == me);
    // (membership from the log on disk: the metrics Raft publishes may not
    // have it yet right after open)
    let member = metadata.is_member().await?;
    if !member {
        // (a seed that replaces a dead node joins the others: it must not
        // start a cluster of its own)
        if first_seed && config.replace_address.is_none() {
            metadata.initialize_single().await?;
        } else {
            join_via_seeds(
                &metadata,
                &seeds,
                me,
                config.storage_port,
                config.replace_address,
            )
            .await?;
        }
    }
    // caught up with the log: the directory says whether this host is known
    let known = state.directory.read().nodes.get(&host_id).cloned();
    tracing::debug!(
        "cluster metadata member: {member}, first seed: {first_seed}, known: {:?}",
        known.as_ref().map(|k| (k.address, k.tokens.len()))
    );
    let mut gossiper = Gossiper::new(
        me,
        sibyl_storage::now_in_seconds(),
        seeds,
        config.cluster_name.clone(),
        "org.apache.cassandra.dht.Murmur3Partitioner".into(),
        config.phi_convict_threshold,
        rand::random(),
    );
    gossiper.set_log_port(config.storage_port);
    let gossip = Arc::new(GossipDriver {
        gossiper: Mutex::new(gossiper),
        messaging: messaging.clone(),
        clock: SystemClock,
        events,
        state: state.clone(),
        on_change: RwLock::new(None),
    });
    // gossip starts before this node registers: the others see it up
    // before it becomes a pending replica of anything (a replacement at the
    // same address hibernates from the start, so that nobody reads from it)
    let mut states = vec![
        (ApplicationState::Dc, datacenter.clone()),
        (ApplicationState::Rack, rack.clone()),
        (ApplicationState::HostId, host_id.to_string()),
        (
            ApplicationState::ReleaseVersion,
            crate::RELEASE_VERSION.into(),
        ),
        (ApplicationState::NetVersion, "12".into()),
        (
            ApplicationState::RpcAddress,
            native_address.ip().to_string(),
        ),
        (
            ApplicationState::NativeAddressAndPort,
            native_address.to_string(),
        ),
        (
            ApplicationState::InternalAddressAndPort,
            SocketAddr::new(me, config.storage_port).to_string(),
        ),
        (ApplicationState::Schema, proxy.schema().version.to_string()),
        (ApplicationState::Load, "0.0".into()),
        (ApplicationState::SstableVersions, "big-nb".into()),
    ];
    if known.is_none() && config.replace_address == Some(me) {
        states.push((ApplicationState::StatusWithPort, "hibernate,true".into()));
        states.push((ApplicationState::Status, "hibernate,true".into()));
    }
    gossip.set_states(states);
    let _ = verbs.gossip.set(gossip.clone());
    let shadow = gossip.gossiper.lock().shadow_round();
    gossip.dispatch(shadow);
    tokio::spawn(gossip.clone().run());
    {
        let g = gossip.clone();
        proxy.set_failure_detector(Arc::new(move |a| g.is_alive(a)));
    }
    let (tokens, joining) = match known {
        Some(rec)
            if rec.address == me
                && rec.datacenter == datacenter
                && rec.rack == rack
                && rec.native_address == native_address =>
        {
            // a bootstrap that did not finish starts again
            (rec.tokens, rec.state == NodeState::Joining)
        }
        // a new node, or a known one at a new address or location
        other => {
            // a new node that replaces a dead one takes its tokens
            let replaced = match (&other, config.replace_address) {
                (None, Some(address)) => {
                    match prepare_replacement(&state, messaging.as_ref(), address, host_id).await {
                        Ok(old) => Some(old),
                        Err(e) => {
                            // refused before it registered: it leaves the
                            // metadata log it just joined, and forgets it,
                            // so that it can start afresh
                            leave_metadata_log(&metadata, host_id).await;
                            let _ = metadata.shutdown().await;
                            let _ = std::fs::remove_dir_all(&config.metadata_directory);
                            return Err(e);
                        }
                    }
                }
                _ => None,
            };
            // a new node bootstraps (the first seed starts the cluster, as
            // Cassandra's seeds do); the log makes it normal if it finds
            // no other node when it applies the registration
            let node_state = match &other {
                Some(rec) => rec.state,
                None if replaced.is_some() => NodeState::Joining,
                None if config.auto_bootstrap && !first_seed => NodeState::Joining,
                None => NodeState::Normal,
            };
            if node_state == NodeState::Joining {
                settle(&gossip).await;
            }
            let replacing = replaced.as_ref().map(|r| r.host_id);
            let reuse = replaced
                .map(|r| r.tokens)
                .or(other.map(|rec| rec.tokens))
                .or(stored_tokens);
            let tokens = register(
                &metadata,
                &state,
                NodeRecord {
                    host_id,
                    address: me,
                    datacenter: datacenter.clone(),
                    rack: rack.clone(),
                    tokens: Vec::new(),
                    storage_port: config.storage_port,
                    native_address,
                    release_version: crate::RELEASE_VERSION.into(),
                    state: node_state,
                    replacing,
                },
                reuse,
                config,
            )
            .await?;
            // as the log decided (applied here before the commit returned)
            let decided = state.directory.read().nodes.get(&host_id).map(|r| r.state);
            (tokens, decided == Some(NodeState::Joining))
        }
    };

    let mut sorted = tokens.clone();
    sorted.sort_unstable();
    let token_list = sorted
        .iter()
        .map(|t| t.to_string())
        .collect::<Vec<_>>()
        .join(",");
    let first = sorted.first().copied().unwrap_or_default();
    let replacing = state
        .directory
        .read()
        .nodes
        .get(&host_id)
        .and_then(|r| r.replacing);
    let replaced_address =
        replacing.and_then(|old| state.directory.read().nodes.get(&old).map(|r| r.address));
    // Cassandra's statuses: a replacement at the same address hibernates
    // (the others must not take it for the dead node and read from it)
    let status = match replaced_address {
        Some(a) if joining && a == me => {
            tracing::warn!(
                "Writes will not be forwarded to this node during replacement because it has the same address as \
                 the node to be replaced (/{a}). If the previous node has been down for longer than max_hint_window, \
                 repair must be run after the replacement process in order to make this node consistent."
            );
            "hibernate,true".to_string()
        }
        Some(a) if joining => format!("BOOT_REPLACE,{a}"),
        _ if joining => format!("BOOT,{first}"),
        _ => format!("NORMAL,{first}"),
    };
    gossip.set_states(vec![
        (ApplicationState::Tokens, token_list),
        (ApplicationState::StatusWithPort, status.clone()),
        (ApplicationState::Status, status),
        (ApplicationState::RpcReady, "true".into()),
    ]);
    proxy.set_schema_log(Arc::new(LogSchema {
        metadata: metadata.clone(),
        proxy: proxy.clone(),
        gossip: gossip.clone(),
    }));
    {
        let g = gossip.clone();
        *state.on_removed.write() = Some(Box::new(move |a| g.forget(a)));
    }
    if joining {
        bootstrap(&metadata, &state, &proxy, host_id, &sorted).await?;
        gossip.set_states(vec![
            (ApplicationState::StatusWithPort, format!("NORMAL,{first}")),
            (ApplicationState::Status, format!("NORMAL,{first}")),
        ]);
        if let Some(old) = replacing {
            leave_metadata_log(&metadata, old).await;
        }
    }
    Ok(ClusterServices {
        messaging,
        gossip,
        metadata,
        state,
        tokens,
        datacenter,
        rack,
        rebuilding: std::sync::atomic::AtomicBool::new(false),
        removal: Mutex::new(None),
    })
}

async fn join_via_seeds(
    metadata: &ClusterMetadataService,
    seeds: &[IpAddr],
    me: IpAddr,
    storage_port: u16,
    replace_address: Option<IpAddr>,
) -> Result<(), ClusterError> {
    if !seeds.iter().any(|s| *s != me) {
        return Err(ClusterError::Join(
            "this node replaces another, but its seeds name no other node to join through".into(),
        ));
    }
    // seeds may still be starting: try each in turn for a while
    let deadline = tokio::time::Instant::now() + Duration::from_secs(120);
    let mut last = String::new();
    loop {
        for s in seeds.iter().filter(|s| **s != me) {
            let via = NodeAddr(SocketAddr::new(*s, storage_port).to_string());
            match metadata.join(&via, Duration::from_secs(5)).await {
                Ok(()) => {
                    tracing::info!("joined the cluster metadata log through {via}");
                    return Ok(());
                }
                Err(e @ TcmError::NodeIdInUse { .. }) => return Err(e.into()),
                Err(TcmError::Transport {
                    source: TransportError::Failed(m),
                    ..
                }) if m.starts_with("refused by") => {
                    return Err(ClusterError::Join(format!(
                        "the seed {via} does not accept this node: {m}"
                    )))
                }
                // the node replaced at this same address was a member of the
                // metadata log: its membership goes first (it cannot be
                // running: this node holds its address)
                Err(TcmError::AddressInUse { member, .. }) if replace_address == Some(me) => {
                    tracing::info!(
                        "removing the replaced node (cluster metadata member {member}) from the cluster metadata log"
                    );
                    if let Err(e) = metadata
                        .remove_via(&via, member, Duration::from_secs(30))
                        .await
                    {
                        last = format!("{via}: {e}");
                    }
                }
                Err(TcmError::AddressInUse { addr, .. }) => {
                    return Err(ClusterError::Join(format!(
                        "A node with address {addr} already exists, cancelling join. \
                         Use cassandra.replace_address if you want to replace this node."
                    )))
                }
                Err(e) => last = format!("{via}: {e}"),
            }
        }
        if tokio::time::Instant::now() > deadline {
            return Err(ClusterError::Join(format!(
                "no seed added this node to the cluster metadata log ({last})"
            )));
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// The node that `address` names, which this new node is to replace: it
/// must be in the ring, normal, and not answer (Cassandra's
/// `prepareForReplacement`, its words).
async fn prepare_replacement(
    state: &ClusterState,
    messaging: &dyn MessagingService,
    address: IpAddr,
    me: uuid::Uuid,
) -> Result<NodeRecord, ClusterError> {
    tracing::info!("Gathering node replacement information for /{address}");
    let old = state
        .directory
        .read()
        .nodes
        .values()
        .find(|n| n.address == address && n.host_id != me)
        .cloned()
        .ok_or_else(|| {
            ClusterError::Join(format!(
                "Cannot replace_address /{address} because it doesn't exist in gossip"
            ))
        })?;
    if address != messaging.local_address() {
        let mut echo = Vec::new();
        GossipMessage::EchoReq.encode(&mut echo);
        let answer = messaging
            .send_and_receive(address, Request::Gossip(echo), Duration::from_secs(2))
            .await;
        if answer.is_ok() {
            tracing::error!("Unable to replace node /{address}: it is alive");
            return Err(ClusterError::Join("Cannot replace a live node... ".into()));
        }
    }
    Ok(old)
}

/// Waits for gossip to settle (Cassandra's `Gossiper.waitToSettle`): until
/// the nodes seen up have not changed for three polls, at most 15 s.
async fn settle(gossip: &GossipDriver) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(15);
    let mut last = None;
    let mut unchanged = 0;
    while unchanged < 3 && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(500)).await;
        let live = gossip.live_peers();
        if last.as_ref() == Some(&live) && !live.is_empty() {
            unchanged += 1;
        } else {
            unchanged = 0;
        }
        last = Some(live);
    }
}

/// Commits this node's registration, choosing tokens again if another node
/// took them first.
async fn register(
    metadata: &ClusterMetadataService,
    state: &ClusterState,
    mut rec: NodeRecord,
    tokens: Option<Vec<i64>>,
    config: &Config,
) -> Result<Vec<i64>, ClusterError> {
    let mut tokens = tokens.filter(|t| !t.is_empty());
    for _ in 0..20 {
        let chosen = match &tokens {
            Some(t) => t.clone(),
            None if !config.initial_tokens.is_empty() => config.initial_tokens.clone(),
            None => {
                // tokens balanced against the ring as it will be (other
                // nodes may be joining too)
                let d = state.directory.read();
                let ring = d.future_ring().unwrap_or_else(|| d.ring());
                allocate_tokens(
                    &ring,
                    &rec.datacenter,
                    config.num_tokens as usize,
                    config
                        .allocate_tokens_for_local_replication_factor
                        .map(|r| r as usize),
                )
            }
        };
        rec.tokens = chosen.clone();
        match commit_topology(metadata, TopologyChange::Register(rec.clone())).await {
            Ok(()) => {
                tracing::info!(
                    "registered in the cluster as {} at {} ({}/{}) with {} tokens, {:?}",
                    rec.host_id,
                    rec.address,
                    rec.datacenter,
                    rec.rack,
                    chosen.len(),
                    rec.state
                );
                return Ok(chosen);
            }
            Err(TcmError::Rejected { message, .. })
                if message.starts_with("token collision") && rec.replacing.is_none() =>
            {
                tracing::info!("{message}; choosing tokens again");
                tokens = None;
            }
            Err(TcmError::Rejected { message, .. }) => return Err(ClusterError::Join(message)),
            Err(e) => return Err(e.into()),
        }
    }
    Err(ClusterError::Join("could not find free tokens".into()))
}

async fn commit_topology(
    metadata: &ClusterMetadataService,
    change: TopologyChange,
) -> Result<(), TcmError> {
    let payload = serde_json::to_vec(&TopologyEntry {
        version: ENTRY_VERSION,
        change,
    })
    .expect("topology entries serialise");
    metadata
        .commit(Transformation::topology(payload), METADATA_TIMEOUT)
        .await
        .map(|_| ())
}

async fn set_state(
    metadata: &ClusterMetadataService,
    host_id: uuid::Uuid,
    state: NodeState,
) -> Result<(), TcmError> {
    commit_topology(metadata, TopologyChange::SetState { host_id, state }).await
}

/// Every table of every keyspace whose data is placed on the ring, with its
/// strategy.
fn ring_tables(schema: &Schema) -> Vec<(sibyl_schema::ReplicationStrategy, Vec<uuid::Uuid>)> {
    ring_keyspaces(schema)
        .into_iter()
        .map(|(_, strategy, tables)| (strategy, tables))
        .collect()
}

/// [`ring_tables`] with each keyspace's name.
fn ring_keyspaces(
    schema: &Schema,
) -> Vec<(String, sibyl_schema::ReplicationStrategy, Vec<uuid::Uuid>)> {
    schema
        .keyspaces
        .values()
        .filter(|k| !k.is_virtual)
        .filter(|k| k.replication.strategy != sibyl_schema::ReplicationStrategy::Local)
        .map(|k| {
            let tables = k.tables.values().map(|t| t.id).collect();
            (k.name.clone(), k.replication.strategy.clone(), tables)
        })
        .collect()
}

/// The stream plans that move every range gained between the directory's
/// ring and its future ring, each from the source `source_of` picks.
fn movement_plans(
    state: &ClusterState,
    proxy: &StorageProxy,
    operation: &str,
    target: Option<IpAddr>,
    source_of: impl Fn(&Movement) -> Option<IpAddr>,
) -> Result<Vec<(IpAddr, StreamPlan)>, ClusterError> {
    let d = state.directory.read().clone();
    let current = d.ring();
    let Some(future) = d.future_ring() else {
        return Ok(Vec::new());
    };
    let schema = proxy.schema();
    let mut moves = Vec::new();
    for (strategy, tables) in ring_tables(&schema) {
        for m in movements(&current, &future, &strategy) {
            if target.is_none_or(|t| t == m.target) {
                moves.push((tables.clone(), m));
            }
        }
    }
    let (plans, unsourced) = stream_plans(operation, &moves, source_of);
    if operation == "Removenode" {
        // the dead node held the only copy: nothing can restore it
        // (Cassandra warns and goes on)
        for m in &unsourced {
            tracing::warn!(
                "removenode: no live replica holds range ({}, {}] (replicas were {:?}); its data is lost",
                m.range.0,
                m.range.1,
                m.current
            );
        }
        return Ok(plans);
    }
    if let Some(m) = unsourced.first() {
        return Err(ClusterError::Join(format!(
            "unable to find a live source for range ({}, {}] for {} (replicas now: {:?}); \
             {} more ranges without one",
            m.range.0,
            m.range.1,
            m.target,
            m.current,
            unsourced.len() - 1
        )));
    }
    Ok(plans)
}

/// The stream plans that give this node every range `old` replicates, each
/// from the replica `source_of` picks (a replacement's bootstrap).
fn replacement_plans(
    state: &ClusterState,
    proxy: &StorageProxy,
    old: &NodeRecord,
    source_of: impl Fn(&Movement) -> Option<IpAddr>,
) -> Result<Vec<(IpAddr, StreamPlan)>, ClusterError> {
    let me = proxy.local_address();
    let current = state.directory.read().ring();
    let schema = proxy.schema();
    let mut plans = Vec::new();
    for (keyspace, strategy, tables) in ring_keyspaces(&schema) {
        let mut moves = Vec::new();
        for (range, replicas) in replicated_ranges(&current, &strategy) {
            if replicas.contains(&old.address) {
                let m = Movement {
                    target: me,
                    range,
                    current: replicas,
                };
                moves.push((tables.clone(), m));
            }
        }
        let (mut found, unsourced) = stream_plans("Bootstrap", &moves, &source_of);
        // (the dead node is among `current`)
        check_unsourced(&keyspace, &unsourced, |m| m.current.len()).map_err(ClusterError::Join)?;
        plans.append(&mut found);
    }
    Ok(plans)
}

/// Ranges no live replica can give (Cassandra's `RangeStreamer`, its
/// words): with RF 1 the only copy is gone, a warning, and the operation
/// goes on; with more replicas, an error. `rf` is a range's replica count.
fn check_unsourced(
    keyspace: &str,
    unsourced: &[Movement],
    rf: impl Fn(&Movement) -> usize,
) -> Result<(), String> {
    for m in unsourced {
        let range = format!("({},{}]", m.range.0, m.range.1);
        if rf(m) > 1 {
            return Err(format!(
                "Unable to find sufficient sources for streaming range {range} in keyspace {keyspace}"
            ));
        }
        tracing::warn!(
            "Unable to find sufficient sources for streaming range {range} in keyspace {keyspace} with RF=1. \
             Keyspace might be missing data."
        );
    }
    Ok(())
}

/// Takes a node that left the ring out of the cluster metadata log's
/// members, so that a dead voter does not count against the majority.
async fn leave_metadata_log(metadata: &ClusterMetadataService, host_id: uuid::Uuid) {
    if let Err(e) = metadata
        .remove_node(node_id_of(host_id), METADATA_TIMEOUT)
        .await
    {
        tracing::warn!(
            "host {host_id} left the ring but is still a member of the cluster metadata log: {e}"
        );
    }
}

/// Runs stream plans: each on its target (this node runs its own), all at
/// once. Fails with the first failure.
async fn run_plans(
    proxy: &Arc<StorageProxy>,
    plans: Vec<(IpAddr, StreamPlan)>,
) -> Result<(), ClusterError> {
    run_plans_tracking(proxy, plans, |_| {}).await
}

/// [`run_plans`], calling `done(target)` when a target has finished all of
/// its plans.
async fn run_plans_tracking(
    proxy: &Arc<StorageProxy>,
    plans: Vec<(IpAddr, StreamPlan)>,
    done: impl Fn(IpAddr),
) -> Result<(), ClusterError> {
    let mut left: BTreeMap<IpAddr, usize> = BTreeMap::new();
    let mut tasks = tokio::task::JoinSet::new();
    for (target, plan) in plans {
        *left.entry(target).or_default() += 1;
        let proxy = proxy.clone();
        tasks.spawn(async move {
            let what = format!(
                "{} stream {} from {} to {target}",
                plan.operation, plan.id, plan.source
            );
            let r = proxy.stream_to(target, plan).await.map(|_| ());
            (target, r.map_err(|e| format!("{what}: {e}")))
        });
    }
    let mut first_error = None;
    while let Some(r) = tasks.join_next().await {
        match r {
            Ok((target, Ok(()))) => {
                let n = left.entry(target).or_default();
                *n = n.saturating_sub(1);
                if *n == 0 {
                    done(target);
                }
            }
            Ok((_, Err(e))) => {
                first_error.get_or_insert(e);
            }
            Err(_) => {}
        }
    }
    match first_error {
        Some(e) => Err(ClusterError::Join(e)),
        None => Ok(()),
    }
}

/// Bootstrap: this node, joining, streams every range it gains from a
/// current replica (the one that loses it when it is up, as Cassandra's
/// strict range movement, else another live one), flushes, and becomes
/// normal. Writes for its ranges reach it as a pending replica meanwhile.
async fn bootstrap(
    metadata: &ClusterMetadataService,
    state: &ClusterState,
    proxy: &Arc<StorageProxy>,
    host_id: uuid::Uuid,
    tokens: &[i64],
) -> Result<(), ClusterError> {
    let me = proxy.local_address();
    let started = std::time::Instant::now();
    // gossip has just started: give it time to see the others up (as
    // Cassandra waits for gossip to settle before it bootstraps)
    // (the others are read again each time: a node that joins meanwhile,
    // as when several start at once, is waited for too)
    let others = || -> Vec<IpAddr> {
        state
            .directory
            .read()
            .nodes
            .values()
            .map(|n| n.address)
            .filter(|a| *a != me)
            .collect()
    };
    let settle = tokio::time::Instant::now() + Duration::from_secs(15);
    while !others().iter().all(|a| proxy.is_alive(*a)) && tokio::time::Instant::now() < settle {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let future = state.directory.read().future_ring();
    let replaced = state
        .directory
        .read()
        .nodes
        .get(&host_id)
        .and_then(|r| r.replacing)
        .and_then(|old| state.directory.read().nodes.get(&old).cloned());
    let live = |a: &IpAddr| *a != me && proxy.is_alive(*a);
    let strategy_of_move = |m: &Movement| -> Option<IpAddr> {
        // prefer the replica that stops replicating the range
        let losing = future.as_ref().map(|f| {
            m.current
                .iter()
                .copied()
                .filter(|a| f.endpoint_of(*a).is_none())
                .collect::<Vec<_>>()
        });
        losing
            .unwrap_or_default()
            .into_iter()
            .find(|a| live(a))
            .or_else(|| m.current.iter().copied().find(|a| live(a)))
    };
    let plans = match &replaced {
        // every range the dead node replicated, from the other replicas
        // (by host: at the same address the rings cannot tell them apart)
        Some(old) => replacement_plans(state, proxy, old, |m| {
            m.current
                .iter()
                .copied()
                .find(|a| *a != old.address && live(a))
        })?,
        None => movement_plans(state, proxy, "Bootstrap", Some(me), strategy_of_move)?,
    };
    // Cassandra's words, then what will be streamed
    tracing::info!("JOINING: Starting to bootstrap...");
    tracing::info!(
        "JOINING: streaming {} ranges from {} nodes",
        plans
            .iter()
            .flat_map(|(_, p)| p.tables.iter().map(|(_, r)| r.len()))
            .sum::<usize>(),
        plans.len()
    );
    run_plans(proxy, plans).await?;
    set_state(metadata, host_id, NodeState::Normal).await?;
    tracing::info!(
        "Bootstrap completed for tokens [{}]",
        tokens
            .iter()
            .map(|t| t.to_string())
            .collect::<Vec<_>>()
            .join(", ")
    );
    tracing::info!(
        "bootstrap complete in {:.1} s: this node is NORMAL",
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

impl ClusterServices {
    /// `nodetool decommission`: this node becomes leaving, streams every
    /// range it replicates to the nodes that take it over, and leaves the
    /// ring. Refused when the remaining nodes are too few for a keyspace's
    /// replication factor (Cassandra's check, same wording).
    pub async fn decommission(&self, proxy: &Arc<StorageProxy>) -> Result<(), ClusterError> {
        let me = self.messaging.local_address();
        let (host_id, n_live) = {
            let d = self.state.directory.read();
            let Some(rec) = d.by_address(me) else {
                return Err(ClusterError::Join("this node is not in the ring".into()));
            };
            if rec.state != NodeState::Normal && rec.state != NodeState::Leaving {
                return Err(ClusterError::Join(format!(
                    "Node {me} is {:?}; only a normal node can be decommissioned",
                    rec.state
                )));
            }
            (rec.host_id, d.nodes.len())
        };
        let schema = proxy.schema();
        for ks in schema
            .keyspaces
            .values()
            .filter(|k| !k.is_system && !k.is_virtual)
        {
            let rf = ks.replication.strategy.replication_factor(n_live);
            if rf > n_live - 1 {
                return Err(ClusterError::Join(format!(
                    "Not enough live nodes to maintain replication factor in keyspace {} (RF = {rf}, N = {n_live}). \
                     Perform a forceful decommission to ignore.",
                    ks.name
                )));
            }
        }
        tracing::debug!("DECOMMISSIONING");
        set_state(&self.metadata, host_id, NodeState::Leaving).await?;
        self.gossip.set_states(vec![
            (ApplicationState::StatusWithPort, "LEAVING".into()),
            (ApplicationState::Status, "LEAVING".into()),
        ]);
        let plans = movement_plans(&self.state, proxy, "Unbootstrap", None, |_| Some(me))?;
        tracing::info!("LEAVING: replaying batch log and streaming data to other nodes");
        run_plans(proxy, plans).await?;
        // hints this node holds go to their targets before it goes
        tracing::info!("LEAVING: streaming hints to other nodes");
        proxy.deliver_hints().await;
        commit_topology(&self.metadata, TopologyChange::Remove { host_id }).await?;
        leave_metadata_log(&self.metadata, host_id).await;
        tracing::info!("DECOMMISSIONED");
        self.gossip.announce_shutdown();
        Ok(())
    }

    /// `nodetool removenode HOST_ID`: a dead node's ranges are streamed to
    /// their new replicas from the remaining live ones, then it leaves the
    /// ring.
    pub async fn removenode(
        &self,
        proxy: &Arc<StorageProxy>,
        host_id: uuid::Uuid,
    ) -> Result<(), ClusterError> {
        let rec = self.state.directory.read().nodes.get(&host_id).cloned();
        // Cassandra's checks and words (StorageService.removeNode)
        let Some(rec) = rec else {
            return Err(ClusterError::Join("Host ID not found.".into()));
        };
        let me = self.messaging.local_address();
        if rec.address == me {
            return Err(ClusterError::Join("Cannot remove self".into()));
        }
        if self.gossip.is_alive(rec.address) {
            return Err(ClusterError::Join(format!(
                "Node /{} is alive and owns this ID. Use decommission command to remove it from the ring",
                SocketAddr::new(rec.address, rec.storage_port)
            )));
        }
        if rec.state == NodeState::Leaving {
            tracing::warn!(
                "Node /{} is already being removed, continuing removal anyway",
                SocketAddr::new(rec.address, rec.storage_port)
            );
        }
        let gone = rec.address;
        let plans = {
            let mut removal = self.removal.lock();
            if removal.is_some() {
                return Err(ClusterError::Join(
                    "This node is already processing a removal. Wait for it to complete, or use \
                     'removenode force' if this has failed."
                        .into(),
                ));
            }
            tracing::info!("removing node {} ({host_id})", rec.address);
            *removal = Some(Removal {
                token: rec.tokens.iter().min().copied().unwrap_or_default(),
                replicating: Default::default(),
                force: Arc::new(tokio::sync::Notify::new()),
            });
            Vec::new()
        };
        let result = async {
            let mut plans = plans;
            set_state(&self.metadata, host_id, NodeState::Leaving).await?;
            plans.extend(movement_plans(&self.state, proxy, "Removenode", None, |m| {
                m.current.iter().copied().find(|a| {
                    *a != gone && *a != m.target && (*a == me || self.gossip.is_alive(*a))
                })
            })?);
            let force = {
                let mut removal = self.removal.lock();
                let r = removal.as_mut().expect("set above");
                r.replicating = Some(plans.iter().map(|(target, _)| *target).collect());
                r.force.clone()
            };
            // streamed until every new replica confirms, or until the
            // operator forces the removal through
            let forced = force.notified();
            tokio::pin!(forced);
            tokio::select! {
                r = run_plans_tracking(proxy, plans, |target| {
                    if let Some(r) = self.removal.lock().as_mut().and_then(|r| r.replicating.as_mut()) {
                        r.remove(&target);
                    }
                }) => r?,
                _ = &mut forced => {
                    let waiting = self.removal.lock().as_ref().and_then(|r| r.replicating.as_ref()).map(|r| {
                        r.iter()
                            .map(|a| format!("/{}", SocketAddr::new(*a, self.storage_port())))
                            .collect::<Vec<_>>()
                            .join(",")
                    });
                    tracing::warn!("Removal not confirmed for for {}", waiting.unwrap_or_default());
                }
            }
            commit_topology(&self.metadata, TopologyChange::Remove { host_id })
                .await
                .map_err(ClusterError::from)
        }
        .await;
        *self.removal.lock() = None;
        result?;
        leave_metadata_log(&self.metadata, host_id).await;
        if let Some(h) = proxy.hints() {
            h.truncate(Some(host_id)).await;
        }
        tracing::info!("removed node {gone} ({host_id})");
        Ok(())
    }

    /// `nodetool removenode status`, in Cassandra's words.
    pub fn removal_status(&self) -> String {
        let removal = self.removal.lock();
        match removal
            .as_ref()
            .and_then(|r| Some((r.token, r.replicating.as_ref()?)))
        {
            None => "No token removals in process.".into(),
            Some((token, replicating)) => format!(
                "Removing token ({token}). Waiting for replication confirmation from [{}].",
                replicating
                    .iter()
                    .map(|a| format!("/{a}"))
                    .collect::<Vec<_>>()
                    .join(",")
            ),
        }
    }

    /// `nodetool removenode force`: the removal in process completes
    /// without waiting for its streams.
    pub fn force_removal(&self) {
        match self.removal.lock().as_ref() {
            Some(r) => r.force.notify_one(),
            None => tracing::warn!("No nodes to force removal on, call 'removenode' first"),
        }
    }

    /// This node's internode port, as the directory records it.
    pub fn storage_port(&self) -> u16 {
        let me = self.messaging.local_address();
        self.state
            .directory
            .read()
            .by_address(me)
            .map_or(7000, |r| r.storage_port)
    }

    /// `nodetool rebuild`: streams every range this node replicates (of
    /// one keyspace, or some of its ranges) from another replica, as a
    /// bootstrap does; for a node added to a new datacenter without
    /// bootstrapping. Checks and words are Cassandra's.
    pub async fn rebuild(
        &self,
        proxy: &Arc<StorageProxy>,
        r: &RebuildRequest,
    ) -> Result<(), ClusterError> {
        use std::sync::atomic::Ordering;
        let err = |m: String| ClusterError::Join(m);
        let me = self.messaging.local_address();
        let d = self.state.directory.read().clone();
        if r.source_dc.as_deref() == Some(self.datacenter.as_str()) && r.exclude_local_dc {
            return Err(err(
                "Cannot set source data center to be local data center, when \
                 excludeLocalDataCenter flag is set"
                    .into(),
            ));
        }
        if let Some(dc) = &r.source_dc {
            let dcs: std::collections::BTreeSet<&str> =
                d.nodes.values().map(|n| n.datacenter.as_str()).collect();
            if !dcs.contains(dc.as_str()) {
                return Err(err(format!(
                    "Provided datacenter '{dc}' is not a valid datacenter, available datacenters are: {}",
                    dcs.into_iter().collect::<Vec<_>>().join(",")
                )));
            }
        }
        if r.keyspace.is_none() && r.tokens.is_some() {
            return Err(err("Cannot specify tokens without keyspace.".into()));
        }
        let schema = proxy.schema();
        let keyspaces: Vec<_> = ring_keyspaces(&schema)
            .into_iter()
            .filter(|(name, _, _)| r.keyspace.as_ref().is_none_or(|k| k == name))
            .collect();
        if let Some(k) = &r.keyspace {
            if keyspaces.is_empty() {
                return Err(err(format!("Unknown keyspace {k}")));
            }
        }
        let wanted = r
            .tokens
            .as_deref()
            .map(parse_token_ranges)
            .transpose()
            .map_err(err)?;
        let sources = match &r.sources {
            None => None,
            Some(list) => {
                let mut set = Vec::new();
                for h in list.split(',').map(str::trim) {
                    let a: IpAddr = h
                        .parse()
                        .map_err(|_| err(format!("Unknown host specified {h}")))?;
                    if a == me {
                        return Err(err(
                            "This host was specified as a source for rebuilding. Sources for a \
                             rebuild can only be other nodes in the cluster."
                                .into(),
                        ));
                    }
                    set.push(a);
                }
                Some(set)
            }
        };
        if self.rebuilding.swap(true, Ordering::SeqCst) {
            return Err(err(
                "Node is still rebuilding. Check nodetool netstats.".into()
            ));
        }
        tracing::info!(
            "rebuild from dc: {}, {}, {}",
            r.source_dc.as_deref().unwrap_or("(any dc)"),
            r.keyspace.as_deref().unwrap_or("(All keyspaces)"),
            r.tokens.as_deref().unwrap_or("(All tokens)")
        );
        let ring = d.ring();
        let dc_of = |a: IpAddr| d.by_address(a).map(|n| n.datacenter.clone());
        let source_of = |m: &Movement| -> Option<IpAddr> {
            let usable = |a: &IpAddr| {
                *a != me
                    && self.gossip.is_alive(*a)
                    && r.source_dc
                        .as_ref()
                        .is_none_or(|dc| dc_of(*a).as_ref() == Some(dc))
                    && (!r.exclude_local_dc || dc_of(*a).as_deref() != Some(&self.datacenter))
                    && sources.as_ref().is_none_or(|s| s.contains(a))
            };
            // the closest first: this datacenter, then the others
            let local = m
                .current
                .iter()
                .copied()
                .find(|a| usable(a) && dc_of(*a).as_deref() == Some(&self.datacenter));
            local.or_else(|| m.current.iter().copied().find(usable))
        };
        let result = async {
            let mut plans = Vec::new();
            for (keyspace, strategy, tables) in keyspaces {
                let mine: Vec<((i64, i64), Vec<IpAddr>)> = replicated_ranges(&ring, &strategy)
                    .into_iter()
                    .filter(|(_, replicas)| replicas.contains(&me))
                    .collect();
                let mut ranges = Vec::new();
                match &wanted {
                    None => ranges.extend(mine.iter().cloned()),
                    Some(wanted) => {
                        for w in wanted {
                            let Some((_, replicas)) =
                                mine.iter().find(|(range, _)| range_contains(*range, *w))
                            else {
                                return Err(err(format!(
                                    "The specified range ({},{}] is not a range that is owned by this node. \
                                     Please ensure that all token ranges specified to be rebuilt belong to this node.",
                                    w.0, w.1
                                )));
                            };
                            ranges.push((*w, replicas.clone()));
                        }
                    }
                }
                let moves: Vec<_> = ranges
                    .into_iter()
                    .map(|(range, replicas)| {
                        let m = Movement {
                            target: me,
                            range,
                            current: replicas.into_iter().filter(|a| *a != me).collect(),
                        };
                        (tables.clone(), m)
                    })
                    .collect();
                let (mut found, unsourced) = stream_plans("Rebuild", &moves, source_of);
                let unsourced: Vec<Movement> =
                    unsourced.into_iter().filter(|m| !m.current.is_empty()).collect();
                // (this node is not among `current`: it counts too)
                check_unsourced(&keyspace, &unsourced, |m| m.current.len() + 1)
                    .map_err(|e| err(format!("Error while rebuilding node: {e}")))?;
                plans.append(&mut found);
            }
            run_plans(proxy, plans).await
        }
        .await;
        self.rebuilding.store(false, Ordering::SeqCst);
        if let Err(e) = &result {
            tracing::error!("Error while rebuilding node: {e}");
        }
        result
    }

    /// `nodetool assassinate ADDRESS`: the node leaves the ring at once,
    /// nothing streamed.
    pub async fn assassinate(&self, address: IpAddr) -> Result<(), ClusterError> {
        let host_id = self
            .state
            .directory
            .read()
            .by_address(address)
            .map(|r| r.host_id)
            .ok_or_else(|| ClusterError::Join(format!("{address} is not in the ring")))?;
        commit_topology(&self.metadata, TopologyChange::Remove { host_id }).await?;
        leave_metadata_log(&self.metadata, host_id).await;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schema_entries_round_trip() {
        let schema = Schema::default();
        let ev = Some(SchemaChange {
            change_type: "CREATED".into(),
            target: SchemaChangeTarget::Table,
            keyspace: "ks".into(),
            name: Some("t".into()),
            arg_types: vec![],
        });
        let base = uuid::Uuid::from_u128(5);
        let b = encode_schema_entry(base, &[], &ev);
        let e = decode_schema_entry(&b, &schema).expect("decodes");
        assert_eq!(e.base, base);
        assert_eq!(format!("{:?}", e.event), format!("{ev:?}"));
        assert!(decode_schema_entry(&b[..b.len() - 1], &schema).is_err());
        assert!(decode_schema_entry(&[9], &schema).is_err());
    }

    #[test]
    fn rebuild_token_ranges_parse_and_nest_as_cassandras() {
        assert_eq!(
            parse_token_ranges("(1,5],(-10, 20]").unwrap(),
            vec![(1, 5), (-10, 20)]
        );
        assert!(parse_token_ranges("(1,5] x").is_err());
        assert!(parse_token_ranges("(a,5]").is_err());
        assert!(range_contains((0, 100), (10, 20)));
        assert!(!range_contains((0, 100), (90, 120)));
        // a range that wraps around the ring holds both of its ends
        assert!(range_contains((100, -100), (200, 300)));
        assert!(range_contains((100, -100), (i64::MAX - 5, -200)));
        assert!(!range_contains((100, -100), (-150, 0)));
    }

    /// A cluster state over its own storage in `dir`, as a node's.
    fn state_in(dir: &std::path::Path) -> ClusterState {
        let storage =
            sibyl_storage::StorageEngine::new(sibyl_storage::store::StorageConfig::small(dir))
                .expect("storage");
        let mut schema =
            sibyl_service::stores::open_system_keyspaces(&storage).expect("system tables");
        storage.start_commitlog(&[]).expect("commit log");
        schema.compute_version();
        let shared = sibyl_service::replica::shared_schema(schema);
        let replica = Arc::new(Replica::new(
            storage,
            shared.clone(),
            Arc::new(SystemClock),
            Duration::from_secs(2),
        ));
        let net = sibyl_cluster::messaging::LocalNetwork::new();
        let proxy = Arc::new(StorageProxy::new(
            replica.clone(),
            net.endpoint(IpAddr::from([127, 0, 0, 1])),
            Arc::new(SystemClock),
            shared,
            "datacenter1".into(),
            sibyl_service::proxy::Timeouts::default(),
        ));
        ClusterState::new(
            replica,
            proxy,
            broadcast::channel(16).0,
            uuid::Uuid::from_u128(1),
        )
    }

    /// A schema entry that makes keyspace `ks` hold `tables` (each `k int
    /// PRIMARY KEY`), planned at `ts` against `state`'s schema, as CREATE
    /// and DROP TABLE plan them (the whole keyspace rewritten).
    fn keyspace_entry(state: &ClusterState, tables: &[&str], ts: i64) -> Transformation {
        use sibyl_schema::schema::{ColumnKind, ColumnMetadata, KeyspaceMetadata, TableMetadata};
        let mut options = BTreeMap::new();
        options.insert("class".to_string(), "SimpleStrategy".to_string());
        options.insert("replication_factor".to_string(), "1".to_string());
        let mut ks = KeyspaceMetadata {
            name: "ks".into(),
            replication: options.into(),
            durable_writes: true,
            tables: BTreeMap::new(),
            types: BTreeMap::new(),
            is_system: false,
            is_virtual: false,
        };
        for (i, t) in tables.iter().enumerate() {
            let column = ColumnMetadata {
                name: "k".into(),
                typ: sibyl_types::CqlType::Int,
                kind: ColumnKind::PartitionKey,
                position: 0,
                reversed: false,
            };
            let id = uuid::Uuid::from_u128(100 + i as u128);
            let table = TableMetadata::new("ks", t, id, vec![column], Default::default());
            ks.tables.insert(t.to_string(), Arc::new(table));
        }
        let base = state.replica.schema().version;
        let mutations = sibyl_schema::schema_tables::keyspace_mutations(&ks, ts, 0);
        Transformation::schema(encode_schema_entry(base, &mutations, &None))
    }

    fn tables(state: &ClusterState) -> Vec<String> {
        let schema = state.replica.schema();
        schema
            .keyspace("ks")
            .map(|ks| ks.tables.keys().cloned().collect())
            .unwrap_or_default()
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_entry_planned_before_a_snapshot_was_built_survives_its_restore() {
        let (d1, d2) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let (leader, behind) = (state_in(d1.path()), state_in(d2.path()));
        // the leader applies two entries, and the second is planned...
        let micros = sibyl_types::now_millis() * 1000;
        let first = keyspace_entry(&leader, &["t"], micros - 3_000_000);
        leader.apply(Epoch(1), &first).expect("first entry");
        let next = keyspace_entry(&leader, &["t", "u"], micros - 2_000_000);
        // ...before the snapshot of the first is built (later, in the
        // background)
        let snapshot = leader.snapshot();
        leader.apply(Epoch(2), &next).expect("second entry");
        // a node behind the log's purge point gets the snapshot, then the
        // entry after it
        behind.restore(Epoch(1), &snapshot).expect("restore");
        assert_eq!(tables(&behind), ["t"]);
        behind.apply(Epoch(2), &next).expect("second entry");
        assert_eq!(tables(&behind), ["t", "u"]);
        assert_eq!(tables(&leader), ["t", "u"]);
        assert_eq!(
            behind.replica.schema().version,
            leader.replica.schema().version
        );
        // and a snapshot of the restored state carries the same time on
        let d3 = tempfile::tempdir().unwrap();
        let again = state_in(d3.path());
        again
            .restore(Epoch(2), &behind.snapshot())
            .expect("restore");
        assert_eq!(tables(&again), ["t", "u"]);
    }

    #[test]
    fn node_ids_differ_for_different_hosts() {
        assert_ne!(
            node_id_of(uuid::Uuid::from_u128(1)),
            node_id_of(uuid::Uuid::from_u128(2))
        );
    }
}
