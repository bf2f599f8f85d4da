//! Messaging between nodes (Cassandra's `net.MessagingService`): a request
//! carries a verb to an endpoint, whose handler answers, or the sender gives
//! up at the verb's timeout.
//!
//! The coordinator depends only on [`MessagingService`]. This module has the
//! in-process implementation, [`LocalNetwork`], with which a test runs
//! several nodes in one process and drops, delays or partitions the messages
//! between them; the TCP implementation (versioned framing, connections per
//! peer) is another implementation of the same trait.

use bytes::Bytes;
use parking_lot::{Mutex, RwLock};
use sibyl_db::paxos::{Ballot, Commit, Promise};
use sibyl_db::{Mutation, ReadCommand, ReadResponse};
use std::collections::HashMap;
use std::future::Future;
use std::net::IpAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

/// A boxed future, as trait methods return them.
pub type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send + 'static>>;

/// What a message asks of its receiver (Cassandra's `Verb`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Verb {
    /// Apply mutations (`MUTATION_REQ`).
    Mutation,
    /// Serve a single-partition read (`READ_REQ`).
    Read,
    /// Serve a partition-range or index read (`RANGE_REQ`).
    RangeRead,
    /// Truncate a table (`TRUNCATE_REQ`).
    Truncate,
    /// A gossip message (`GOSSIP_DIGEST_SYN`, `_ACK`, `_ACK2`), one way.
    Gossip,
    /// A cluster metadata (Raft) request and its response (`TCM_*`).
    Metadata,
    /// Wait until the receiver has applied an epoch of the cluster metadata
    /// log (a schema change's coordinator asks every live node before it
    /// answers its client).
    MetadataCatchUp,
    /// A counter update for its leader replica to apply and replicate
    /// (`COUNTER_MUTATION_REQ`).
    CounterMutation,
    /// Paxos: prepare, propose and commit (`PAXOS_PREPARE_REQ`, …).
    PaxosPrepare,
    PaxosPropose,
    PaxosCommit,
    /// Store and remove a logged batch in the batchlog (`BATCH_STORE_REQ`,
    /// `BATCH_REMOVE_REQ`).
    BatchStore,
    BatchRemove,
    /// Mutations delivered from hints (`HINT_REQ`).
    Hint,
    /// One page of a token range's partitions, for streaming.
    StreamPage,
    /// Fetch token ranges of tables from a source and make them durable
    /// (Cassandra's `STREAM_INIT` / prepare, driven by the receiver).
    StreamSession,
    /// Hashes of a table's data over token ranges (`VALIDATION_REQ`).
    Validation,
    /// Ranges of a table a repair made consistent, and when it started
    /// (for `tombstone_gc` mode `repair`).
    RepairSynced,
    /// Incremental repair (messaging version 3): set a table's unrepaired
    /// data of some ranges aside for a session (`PREPARE_CONSISTENT_REQ`:
    /// flush and anticompaction).
    RepairPrepare,
    /// Incremental repair: the session's pending SSTables become repaired,
    /// or unrepaired again when it failed (`FINALIZE_COMMIT_MSG`).
    RepairFinish,
    /// [`Verb::Validation`] and [`Verb::StreamSession`] over a session's
    /// pending SSTables only.
    PendingValidation,
    /// [`Verb::StreamPage`] over one repair set of the source's data.
    StreamSetPage,
    PendingStreamSession,
}

impl Verb {
    /// Every verb.
    pub const ALL: [Verb; 23] = [
        Verb::Mutation,
        Verb::Read,
        Verb::RangeRead,
        Verb::Truncate,
        Verb::Gossip,
        Verb::Metadata,
        Verb::MetadataCatchUp,
        Verb::CounterMutation,
        Verb::PaxosPrepare,
        Verb::PaxosPropose,
        Verb::PaxosCommit,
        Verb::BatchStore,
        Verb::BatchRemove,
        Verb::Hint,
        Verb::StreamPage,
        Verb::StreamSession,
        Verb::Validation,
        Verb::RepairSynced,
        Verb::RepairPrepare,
        Verb::RepairFinish,
        Verb::PendingValidation,
        Verb::StreamSetPage,
        Verb::PendingStreamSession,
    ];

    /// Cassandra's name of the verb, as `nodetool tpstats` shows dropped messages.
    pub fn name(self) -> &'static str {
        match self {
            Verb::Mutation => "MUTATION_REQ",
            Verb::Read => "READ_REQ",
            Verb::RangeRead => "RANGE_REQ",
            Verb::Truncate => "TRUNCATE_REQ",
            Verb::Gossip => "GOSSIP_DIGEST",
            Verb::Metadata => "TCM_REQ",
            Verb::MetadataCatchUp => "TCM_CATCHUP_REQ",
            Verb::CounterMutation => "COUNTER_MUTATION_REQ",
            Verb::PaxosPrepare => "PAXOS_PREPARE_REQ",
            Verb::PaxosPropose => "PAXOS_PROPOSE_REQ",
            Verb::PaxosCommit => "PAXOS_COMMIT_REQ",
            Verb::BatchStore => "BATCH_STORE_REQ",
            Verb::BatchRemove => "BATCH_REMOVE_REQ",
            Verb::Hint => "HINT_REQ",
            Verb::StreamPage => "STREAM_PAGE_REQ",
            Verb::StreamSession => "STREAM_INIT",
            Verb::Validation => "VALIDATION_REQ",
            Verb::RepairSynced => "REPAIR_SYNCED_REQ",
            Verb::RepairPrepare => "PREPARE_CONSISTENT_REQ",
            Verb::RepairFinish => "FINALIZE_COMMIT_MSG",
            Verb::PendingValidation => "PENDING_VALIDATION_REQ",
            Verb::StreamSetPage => "STREAM_SET_PAGE_REQ",
            Verb::PendingStreamSession => "PENDING_STREAM_INIT",
        }
    }
}

impl Verb {
    /// The stage a replica runs the verb in, as its trace events name it.
    pub fn stage(self) -> sibyl_tracing::Stage {
        use sibyl_tracing::Stage;
        match self {
            Verb::Read | Verb::RangeRead => Stage::Read,
            Verb::CounterMutation => Stage::Counter,
            Verb::Validation
            | Verb::RepairSynced
            | Verb::RepairPrepare
            | Verb::RepairFinish
            | Verb::PendingValidation => Stage::Repair,
            Verb::Gossip | Verb::Metadata | Verb::MetadataCatchUp => Stage::Messaging,
            _ => Stage::Mutation,
        }
    }

    /// Cassandra's name of the verb's response (`READ_RSP`), as traces show it.
    pub fn response_name(self) -> String {
        match self.name().strip_suffix("_REQ") {
            Some(stem) => format!("{stem}_RSP"),
            None => format!("{}_RSP", self.name()),
        }
    }
}

/// A request to a replica.
#[derive(Debug, Clone)]
pub enum Request {
    Mutation(Vec<Mutation>),
    Read(ReadCommand),
    Truncate {
        table_id: uuid::Uuid,
        timestamp_micros: i64,
    },
    /// An encoded gossip message; gets no response.
    Gossip(Vec<u8>),
    /// An encoded cluster metadata request.
    Metadata(Vec<u8>),
    /// Answer once this epoch of the cluster metadata log is applied here.
    MetadataCatchUp(u64),
    /// Lead a counter update: apply it to this replica's shards and
    /// replicate it at the consistency level (its protocol code).
    CounterMutation {
        mutation: Mutation,
        consistency: u16,
    },
    PaxosPrepare {
        ballot: Ballot,
        table_id: uuid::Uuid,
        key: Bytes,
    },
    PaxosPropose(Commit),
    PaxosCommit(Commit),
    BatchStore {
        id: uuid::Uuid,
        mutations: Vec<Mutation>,
    },
    BatchRemove(uuid::Uuid),
    Hint(Vec<Mutation>),
    /// The partitions of a table whose tokens are in `range` (both ends
    /// included), after the partition key `after`, up to about `max_bytes`.
    StreamPage {
        table_id: uuid::Uuid,
        range: (i64, i64),
        after: Option<Bytes>,
        max_bytes: u32,
        /// Which of the source's data.
        set: StreamSet,
    },
    /// Fetch `ranges` of tables from `source`, write them, flush them, and
    /// answer once they are durable.
    StreamSession(StreamPlan),
    /// One hash per range of the table's data (repair's validation).
    Validation {
        table_id: uuid::Uuid,
        ranges: Vec<(i64, i64)>,
        /// Only the SSTables pending in this incremental repair session.
        pending: Option<uuid::Uuid>,
    },
    /// `ranges` (`(start, end]`) of the table are consistent as of a
    /// repair that started at `repaired_at` (seconds).
    RepairSynced {
        table_id: uuid::Uuid,
        ranges: Vec<(i64, i64)>,
        repaired_at: i32,
    },
    /// Incremental repair: flush the table and set what its unrepaired
    /// SSTables hold of `ranges` (`(start, end]`) aside for `session`.
    RepairPrepare {
        session: uuid::Uuid,
        table_id: uuid::Uuid,
        ranges: Vec<(i64, i64)>,
    },
    /// Incremental repair: the session's pending SSTables of the table are
    /// repaired as of `repaired_at` (ms), or unrepaired again (0: failed).
    RepairFinish {
        session: uuid::Uuid,
        table_id: uuid::Uuid,
        repaired_at: i64,
    },
}

/// Which of a table's data a stream page reads. A stream keeps the repaired
/// status of what it moves, as Cassandra's does (its streamed SSTables keep
/// their `repairedAt`): the receiver asks for the repaired data and the rest
/// apart, and writes the repaired part into repaired SSTables, so that the
/// next incremental repair does not compare it again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StreamSet {
    /// Everything: memtables and every SSTable (the only one of version 2).
    All,
    /// The SSTables pending in an incremental repair session.
    Pending(uuid::Uuid),
    /// The repaired SSTables.
    Repaired,
    /// The rest: memtables, unrepaired and pending SSTables.
    NotRepaired,
}

/// What a stream session moves: token ranges (both ends included) of tables
/// from one source, for an operation (`Bootstrap`, `Decommission`,
/// `Removenode`, `Repair`, `Rebuild`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StreamPlan {
    pub id: uuid::Uuid,
    pub operation: String,
    pub source: std::net::IpAddr,
    pub tables: Vec<(uuid::Uuid, Vec<(i64, i64)>)>,
    /// An incremental repair session: the source serves its pending
    /// SSTables only, and the receiver writes into that session's pending set.
    pub pending: Option<uuid::Uuid>,
}

impl Request {
    pub fn verb(&self) -> Verb {
        match self {
            Request::Mutation(_) => Verb::Mutation,
            Request::Read(c) if c.token().is_some() => Verb::Read,
            Request::Read(_) => Verb::RangeRead,
            Request::Truncate { .. } => Verb::Truncate,
            Request::Gossip(_) => Verb::Gossip,
            Request::Metadata(_) => Verb::Metadata,
            Request::MetadataCatchUp(_) => Verb::MetadataCatchUp,
            Request::CounterMutation { .. } => Verb::CounterMutation,
            Request::PaxosPrepare { .. } => Verb::PaxosPrepare,
            Request::PaxosPropose(_) => Verb::PaxosPropose,
            Request::PaxosCommit(_) => Verb::PaxosCommit,
            Request::BatchStore { .. } => Verb::BatchStore,
            Request::BatchRemove(_) => Verb::BatchRemove,
            Request::Hint(_) => Verb::Hint,
            Request::StreamPage {
                set: StreamSet::All,
                ..
            } => Verb::StreamPage,
            Request::StreamPage { .. } => Verb::StreamSetPage,
            Request::StreamSession(p) if p.pending.is_none() => Verb::StreamSession,
            Request::StreamSession(_) => Verb::PendingStreamSession,
            Request::Validation { pending: None, .. } => Verb::Validation,
            Request::Validation { .. } => Verb::PendingValidation,
            Request::RepairSynced { .. } => Verb::RepairSynced,
            Request::RepairPrepare { .. } => Verb::RepairPrepare,
            Request::RepairFinish { .. } => Verb::RepairFinish,
        }
    }
}

/// A replica's answer.
#[derive(Debug, Clone)]
pub enum Response {
    /// Mutations applied, or a table truncated.
    Done,
    Read(ReadResponse),
    /// The replica could not serve the request (Cassandra's `FAILURE_RSP`).
    Failure(ReplicaFailure),
    /// An encoded cluster metadata response.
    Metadata(Vec<u8>),
    /// A replica's answer to a Paxos prepare.
    Promise(Box<Promise>),
    /// Whether a replica accepted a Paxos proposal.
    Accepted(bool),
    /// A page of streamed partitions, and whether the range has more; of
    /// the repaired set, the oldest repair of the SSTables it comes from (ms).
    StreamPage {
        mutations: Vec<Mutation>,
        more: bool,
        repaired_at: Option<i64>,
    },
    /// Repair's hashes, one per range asked.
    Validation(Vec<[u8; 16]>),
    /// A stream session's receiver is done: what it received, durable.
    Streamed {
        partitions: u64,
        bytes: u64,
    },
}

/// Why a replica failed a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReplicaFailure {
    /// Writes are held back by memtable memory past the timeout.
    Overloaded(String),
    /// The table does not exist on the replica.
    UnknownTable(uuid::Uuid),
    /// Any other error, with its message.
    Error(String),
    /// A counter leader's write did not get enough acknowledgements.
    WriteTimeout { received: u32, block_for: u32 },
    /// A counter leader found too few replicas alive.
    Unavailable { required: u32, alive: u32 },
}

/// Why no response came.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MessagingError {
    #[error("no response from {0} in time")]
    Timeout(IpAddr),
    #[error("{0} is unreachable")]
    Unreachable(IpAddr),
    /// The peer refused this node's connection (another cluster, or no
    /// messaging version in common), with its reason.
    #[error("{0} refused the connection: {1}")]
    Refused(IpAddr, String),
    /// The queue of messages to the peer is full: the message was dropped.
    #[error("the queue of messages to {0} is full")]
    Overloaded(IpAddr),
    /// The response could not be decoded.
    #[error("bad response from {0}: {1}")]
    Malformed(IpAddr, String),
}

/// Answers requests that arrive at a node (its verb handlers).
pub trait VerbHandler: Send + Sync {
    fn handle(&self, from: IpAddr, request: Request) -> BoxFuture<Response>;
}

/// Sends requests to other nodes.
pub trait MessagingService: Send + Sync {
    /// This node's address (the `from` of what it sends).
    fn local_address(&self) -> IpAddr;

    /// Sends `request` to `to` and waits for the response, at most `timeout`.
    fn send_and_receive(
        &self,
        to: IpAddr,
        request: Request,
        timeout: Duration,
    ) -> BoxFuture<Result<Response, MessagingError>>;

    /// The newest messaging version `peer` and this node both speak (this
    /// node's own for itself): a verb newer than that is not sent to it.
    fn messaging_version(&self, _peer: IpAddr) -> u8 {
        crate::net::codec::MESSAGING_VERSION_CURRENT
    }

    /// Sends a message that gets no response (gossip); it may be lost.
    fn send_one_way(&self, to: IpAddr, request: Request) {
        let sent = self.send_and_receive(to, request, Duration::from_secs(1));
        tokio::spawn(async move {
            let _ = sent.await;
        });
    }
}

/// A node that has no peers (a single node before it joins a cluster):
/// every other endpoint is unreachable.
pub struct NoPeers(pub IpAddr);

impl MessagingService for NoPeers {
    fn local_address(&self) -> IpAddr {
        self.0
    }

    fn send_and_receive(
        &self,
        to: IpAddr,
        _: Request,
        _: Duration,
    ) -> BoxFuture<Result<Response, MessagingError>> {
        Box::pin(async move { Err(MessagingError::Unreachable(to)) })
    }
}

/// What happens to messages between two endpoints.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fault {
    /// Lost: the sender waits out its timeout.
    Drop,
    /// Delivered late, by this much (the response as well).
    Delay(Duration),
}

#[derive(Default)]
struct Faults {
    /// Directed (from, to) pairs.
    links: HashMap<(IpAddr, IpAddr), Fault>,
}

/// In-process messaging: several nodes in one process, each registered with
/// its verb handlers; messages are delivered by calling the receiver's
/// handler on a task of its own, unless a fault says otherwise.
#[derive(Default)]
pub struct LocalNetwork {
    handlers: RwLock<HashMap<IpAddr, Arc<dyn VerbHandler>>>,
    faults: Mutex<Faults>,
    /// Messages dropped, per verb (by faults or for want of a handler).
    dropped: Mutex<HashMap<Verb, u64>>,
}

impl LocalNetwork {
    pub fn new() -> Arc<Self> {
        Arc::new(LocalNetwork::default())
    }

    /// Registers (or replaces) the handlers of the node at `address`.
    pub fn register(&self, address: IpAddr, handler: Arc<dyn VerbHandler>) {
        self.handlers.write().insert(address, handler);
    }

    /// Removes a node: messages to it are lost, as to a killed process.
    pub fn unregister(&self, address: IpAddr) {
        self.handlers.write().remove(&address);
    }

    /// The messaging service of the node at `address`.
    pub fn endpoint(self: &Arc<Self>, address: IpAddr) -> Arc<dyn MessagingService> {
        Arc::new(LocalEndpoint {
            network: self.clone(),
            address,
        })
    }

    /// Messages from `from` to `to` are lost (one direction).
    pub fn drop_messages(&self, from: IpAddr, to: IpAddr) {
        self.faults.lock().links.insert((from, to), Fault::Drop);
    }

    /// Messages from `from` to `to` arrive `by` late (one direction).
    pub fn delay_messages(&self, from: IpAddr, to: IpAddr, by: Duration) {
        self.faults
            .lock()
            .links
            .insert((from, to), Fault::Delay(by));
    }

    /// Cuts `a` and `b` off from each other, both ways.
    pub fn partition(&self, a: &[IpAddr], b: &[IpAddr]) {
        let mut f = self.faults.lock();
        for x in a {
            for y in b {
                f.links.insert((*x, *y), Fault::Drop);
                f.links.insert((*y, *x), Fault::Drop);
            }
        }
    }

    /// Removes every fault.
    pub fn heal(&self) {
        self.faults.lock().links.clear();
    }

    /// Messages dropped so far for `verb`.
    pub fn dropped(&self, verb: Verb) -> u64 {
        self.dropped.lock().get(&verb).copied().unwrap_or(0)
    }

    fn fault(&self, from: IpAddr, to: IpAddr) -> Option<Fault> {
        self.faults.lock().links.get(&(from, to)).copied()
    }
}

struct LocalEndpoint {
    network: Arc<LocalNetwork>,
    address: IpAddr,
}

impl MessagingService for LocalEndpoint {
    fn local_address(&self) -> IpAddr {
        self.address
    }

    fn send_and_receive(
        &self,
        to: IpAddr,
        request: Request,
        timeout: Duration,
    ) -> BoxFuture<Result<Response, MessagingError>> {
        let net = self.network.clone();
        let from = self.address;
        Box::pin(async move {
            let verb = request.verb();
            let lost = |net: &LocalNetwork| {
                *net.dropped.lock().entry(verb).or_default() += 1;
            };
            let handler = net.handlers.read().get(&to).cloned();
            let (Some(handler), fault_out) = (handler, net.fault(from, to)) else {
                lost(&net);
                tokio::time::sleep(timeout).await;
                return Err(MessagingError::Timeout(to));
            };
            let exchange = async move {
                match fault_out {
                    Some(Fault::Drop) => {
                        lost(&net);
                        return std::future::pending().await;
                    }
                    Some(Fault::Delay(d)) => tokio::time::sleep(d).await,
                    None => {}
                }
                // the receiver runs the request on a task of its own, as a
                // remote node would, whether or not the sender still waits
                let task = tokio::spawn(handler.handle(from, request));
                let response = match task.await {
                    Ok(r) => r,
                    Err(e) => Response::Failure(ReplicaFailure::Error(e.to_string())),
                };
                match net.fault(to, from) {
                    Some(Fault::Drop) => std::future::pending().await,
                    Some(Fault::Delay(d)) => tokio::time::sleep(d).await,
                    None => {}
                }
                response
            };
            tokio::time::timeout(timeout, exchange)
                .await
                .map_err(|_| MessagingError::Timeout(to))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Echo(IpAddr);

    impl VerbHandler for Echo {
        fn handle(&self, _: IpAddr, request: Request) -> BoxFuture<Response> {
            let me = self.0;
            Box::pin(async move {
                match request {
                    Request::Truncate { .. } => {
                        Response::Failure(ReplicaFailure::Error(me.to_string()))
                    }
                    _ => Response::Done,
                }
            })
        }
    }

    fn ip(i: u8) -> IpAddr {
        IpAddr::from([127, 0, 0, i])
    }

    fn truncate() -> Request {
        Request::Truncate {
            table_id: uuid::Uuid::nil(),
            timestamp_micros: 0,
        }
    }

    #[tokio::test(start_paused = true)]
    async fn messages_arrive_are_dropped_delayed_and_partitioned() {
        let net = LocalNetwork::new();
        for i in 1..=3 {
            net.register(ip(i), Arc::new(Echo(ip(i))));
        }
        let n1 = net.endpoint(ip(1));
        let t = Duration::from_millis(100);
        let r = n1.send_and_receive(ip(2), truncate(), t).await;
        assert_eq!(
            format!("{r:?}"),
            format!(
                "{:?}",
                Ok::<_, MessagingError>(Response::Failure(ReplicaFailure::Error(
                    "127.0.0.2".into()
                )))
            )
        );
        net.drop_messages(ip(1), ip(2));
        assert_eq!(
            n1.send_and_receive(ip(2), truncate(), t).await.err(),
            Some(MessagingError::Timeout(ip(2)))
        );
        assert_eq!(net.dropped(Verb::Truncate), 1);
        // 2's requests to 1 arrive, but 1's responses to 2 are lost too
        let n2 = net.endpoint(ip(2));
        assert!(n2.send_and_receive(ip(1), truncate(), t).await.is_err());
        assert!(n2.send_and_receive(ip(3), truncate(), t).await.is_ok());
        net.heal();
        net.delay_messages(ip(1), ip(3), Duration::from_millis(60));
        assert!(
            n1.send_and_receive(ip(3), truncate(), t).await.is_ok(),
            "60 ms late is in time"
        );
        net.delay_messages(ip(1), ip(3), Duration::from_millis(160));
        assert!(
            n1.send_and_receive(ip(3), truncate(), t).await.is_err(),
            "160 ms late is not"
        );
        net.heal();
        net.partition(&[ip(1)], &[ip(2), ip(3)]);
        assert!(n1.send_and_receive(ip(3), truncate(), t).await.is_err());
        assert!(n2.send_and_receive(ip(1), truncate(), t).await.is_err());
        assert!(n2.send_and_receive(ip(3), truncate(), t).await.is_ok());
        net.unregister(ip(3));
        assert!(
            n2.send_and_receive(ip(3), truncate(), t).await.is_err(),
            "a killed node answers nothing"
        );
        let lone = NoPeers(ip(9));
        assert_eq!(
            lone.send_and_receive(ip(1), truncate(), t).await.err(),
            Some(MessagingError::Unreachable(ip(1)))
        );
    }
}
