//! Internode messaging over TCP (Cassandra's `net.MessagingService`): each
//! node listens on `listen_address:storage_port`; to each peer it keeps
//! outbound connections, bound to its own listen address so that firewall
//! rules can tell nodes apart on one machine, one for small urgent messages
//! (gossip, cluster metadata), one for other small messages and one for
//! large ones. A connection starts with a handshake (cluster name and
//! messaging versions; see [`codec`]) and carries checksummed frames.
//!
//! Requests wait for their response at most their timeout. Each outbound
//! connection has a bounded queue: a message that finds it full is dropped
//! and counted per verb, as are messages lost to an unreachable peer or to an
//! operator's partition. A connection that fails is reopened on the next
//! message, after a backoff that grows from 100 ms to 5 s while the peer
//! stays unreachable.

pub mod codec;

use crate::messaging::{
    BoxFuture, MessagingError, MessagingService, ReplicaFailure, Request, Response, Verb,
    VerbHandler,
};
use bytes::Bytes;
use codec::{
    decode_frame_header, decode_payload, decode_request, decode_response, encode_frame,
    encode_request, encode_response, ConnectionType, FrameKind, Handshake, HandshakeReply,
    FRAME_HEADER_BYTES, MESSAGING_VERSION_CURRENT, MESSAGING_VERSION_MIN,
    MESSAGING_VERSION_TRACING,
};
use parking_lot::{Mutex, RwLock};
use rand::Rng;
use sibyl_db::clustering::ClusteringComparator;
use sibyl_tracing::{Stage, Tracer};
use std::collections::{HashMap, HashSet};
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt, BufWriter};
use tokio::net::{TcpListener, TcpSocket, TcpStream};
use tokio::sync::{mpsc, oneshot};

/// Looks up the clustering comparator of a table (messages carry rows whose
/// clusterings decode by their table's types).
pub type ComparatorLookup =
    Arc<dyn Fn(uuid::Uuid) -> Option<Arc<ClusteringComparator>> + Send + Sync>;

/// How often dropped messages are logged (Cassandra's
/// `LOG_DROPPED_INTERVAL_IN_MS`).
const LOG_DROPPED_INTERVAL: Duration = Duration::from_secs(5);

/// Settings of the messaging service.
#[derive(Debug, Clone)]
pub struct MessagingConfig {
    /// The address this node listens on and binds its outbound sockets to.
    pub listen_address: IpAddr,
    /// The address other nodes know this node by (Cassandra's
    /// `broadcast_address`; the listen address unless set).
    pub broadcast_address: IpAddr,
    pub storage_port: u16,
    pub cluster_name: String,
    /// Messages queued per outbound connection before new ones are dropped.
    pub queue_capacity: usize,
    /// The largest frame accepted from a peer.
    pub max_frame_bytes: usize,
    /// Messages at least this large travel on the large-message connection
    /// (Cassandra: 64 KiB).
    pub large_message_bytes: usize,
    pub connect_timeout: Duration,
    /// The newest messaging version this node speaks: the build's, or an
    /// older one while a rolling upgrade is under way
    /// (`-Dsibyl.messaging_version=N`), so that a new build can stand in
    /// for an old one and new verbs are not sent until every node has them.
    pub max_version: u8,
}

impl MessagingConfig {
    pub fn new(listen_address: IpAddr, storage_port: u16, cluster_name: &str) -> Self {
        MessagingConfig {
            listen_address,
            broadcast_address: listen_address,
            storage_port,
            cluster_name: cluster_name.to_string(),
            queue_capacity: 4096,
            max_frame_bytes: 128 << 20,
            large_message_bytes: 64 << 10,
            connect_timeout: Duration::from_secs(2),
            max_version: MESSAGING_VERSION_CURRENT,
        }
    }
}

/// Faults an operator injects through the admin interface (`sibyl cluster
/// partition` / `delay`): messages to and from these peers are lost, or
/// held back.
#[derive(Debug, Default, Clone)]
pub struct NetFaults {
    pub dropped_peers: HashSet<IpAddr>,
    /// Per peer: delay and jitter (a random extra of up to the jitter).
    pub delayed_peers: HashMap<IpAddr, (Duration, Duration)>,
}

/// A message waiting in an outbound queue.
struct Outgoing {
    frame: Vec<u8>,
    id: u64,
    verb: Verb,
    reply: Option<oneshot::Sender<Result<Bytes, MessagingError>>>,
}

struct Inner {
    config: MessagingConfig,
    comparators: ComparatorLookup,
    handler: RwLock<Option<Arc<dyn VerbHandler>>>,
    outbound: Mutex<HashMap<(IpAddr, ConnectionType), mpsc::Sender<Outgoing>>>,
    /// Requests sent and not yet answered, by request id.
    pending: Mutex<HashMap<u64, oneshot::Sender<Result<Bytes, MessagingError>>>>,
    next_id: AtomicU64,
    dropped: Mutex<HashMap<Verb, u64>>,
    /// Dropped since the last "messages were dropped" line.
    dropped_recent: Mutex<HashMap<Verb, u64>>,
    faults: RwLock<NetFaults>,
    /// Per peer: how long its answers took and how many never came in time.
    peers: Mutex<HashMap<IpAddr, Arc<PeerStats>>>,
    /// Per peer: the messaging version its last connection agreed on.
    versions: Mutex<HashMap<IpAddr, u8>>,
    /// Traced requests from peers open their sessions here.
    tracer: RwLock<Option<Arc<Tracer>>>,
    /// Per connection type, over every peer (`nodetool netstats`' pools).
    pools: [Arc<PoolStats>; 3],
}

/// The messages of one kind of connection, to every peer (Cassandra's
/// "Large messages", "Small messages", "Gossip messages" pools).
#[derive(Debug, Default)]
pub struct PoolStats {
    pub pending: sibyl_metrics::Gauge,
    pub completed: sibyl_metrics::Counter,
    pub dropped: sibyl_metrics::Counter,
}

fn pool_index(kind: ConnectionType) -> usize {
    match kind {
        ConnectionType::Large => 0,
        ConnectionType::Small => 1,
        ConnectionType::Urgent => 2,
    }
}

/// What this node measured of one peer: the time from sending a request to
/// its response (the round trip, the peer's work included) and the requests
/// that timed out.
#[derive(Debug, Default)]
pub struct PeerStats {
    pub latency: sibyl_metrics::Timer,
    pub timeouts: sibyl_metrics::Counter,
    /// Messages to the peer (Cassandra's `OutboundConnections` figures).
    pub outbound: OutboundStats,
    /// Messages from the peer (`InboundMessageHandlers`).
    pub inbound: InboundStats,
}

/// A count of messages and of their bytes.
#[derive(Debug, Default)]
pub struct Messages {
    pub count: sibyl_metrics::Counter,
    pub bytes: sibyl_metrics::Counter,
}

impl Messages {
    fn add(&self, bytes: usize) {
        self.count.inc();
        self.bytes.add(bytes as u64);
    }
}

#[derive(Debug, Default)]
pub struct OutboundStats {
    /// Written to the peer's connection.
    pub sent: Messages,
    /// Queued and not yet written.
    pub pending_count: sibyl_metrics::Gauge,
    pub pending_bytes: sibyl_metrics::Gauge,
    /// Refused because the peer's queue was full.
    pub overload: Messages,
    /// Lost: the connection failed or could not be made.
    pub error: Messages,
    pub connection_attempts: sibyl_metrics::Counter,
    pub successful_connection_attempts: sibyl_metrics::Counter,
    pub active_connections: sibyl_metrics::Gauge,
}

#[derive(Debug, Default)]
pub struct InboundStats {
    /// Frames read from the peer.
    pub received: Messages,
    /// Requests handled (answered, or one-way and done).
    pub processed: Messages,
    /// Requests that could not be decoded.
    pub error: Messages,
    /// Frames whose checksum or header was wrong (the connection closes).
    pub corrupt_frames: sibyl_metrics::Counter,
}

/// The TCP messaging service of one node.
#[derive(Clone)]
pub struct TcpMessaging {
    inner: Arc<Inner>,
}

/// Why the messaging service could not start.
#[derive(Debug, thiserror::Error)]
#[error("cannot listen for other nodes on {address}: {source}")]
pub struct BindError {
    pub address: SocketAddr,
    #[source]
    pub source: std::io::Error,
}

impl TcpMessaging {
    /// Binds `listen_address:storage_port` and starts accepting peers; until
    /// [`TcpMessaging::set_handler`] is called, requests are answered with a
    /// failure.
    pub async fn bind(
        config: MessagingConfig,
        comparators: ComparatorLookup,
    ) -> Result<TcpMessaging, BindError> {
        let address = SocketAddr::new(config.listen_address, config.storage_port);
        let listener = TcpListener::bind(address)
            .await
            .map_err(|source| BindError { address, source })?;
        let inner = Arc::new(Inner {
            config,
            comparators,
            handler: RwLock::new(None),
            outbound: Mutex::new(HashMap::new()),
            pending: Mutex::new(HashMap::new()),
            next_id: AtomicU64::new(1),
            dropped: Mutex::new(HashMap::new()),
            dropped_recent: Mutex::new(HashMap::new()),
            faults: RwLock::new(NetFaults::default()),
            peers: Mutex::new(HashMap::new()),
            versions: Mutex::new(HashMap::new()),
            tracer: RwLock::new(None),
            pools: Default::default(),
        });
        tokio::spawn(accept_loop(Arc::downgrade(&inner), listener));
        let weak = Arc::downgrade(&inner);
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(LOG_DROPPED_INTERVAL);
            tick.tick().await;
            loop {
                tick.tick().await;
                let Some(inner) = weak.upgrade() else { break };
                inner.log_dropped();
            }
        });
        Ok(TcpMessaging { inner })
    }

    /// The large, small and gossip (urgent) connections' messages, in
    /// `nodetool netstats` order.
    pub fn pools(&self) -> [(&'static str, &PoolStats); 3] {
        let p = &self.inner.pools;
        [
            ("Large messages", &p[0]),
            ("Small messages", &p[1]),
            ("Gossip messages", &p[2]),
        ]
    }

    /// Sets the tracing that traced requests from peers take part in.
    pub fn set_tracer(&self, tracer: Arc<Tracer>) {
        *self.inner.tracer.write() = Some(tracer);
    }

    /// Sets the verb handlers that answer requests from peers.
    pub fn set_handler(&self, handler: Arc<dyn VerbHandler>) {
        *self.inner.handler.write() = Some(handler);
    }

    /// Messages dropped so far, per verb.
    pub fn dropped(&self) -> HashMap<Verb, u64> {
        self.inner.dropped.lock().clone()
    }

    /// Every peer this node has exchanged messages with, and its figures.
    pub fn peers(&self) -> Vec<(IpAddr, Arc<PeerStats>)> {
        let mut v: Vec<_> = self
            .inner
            .peers
            .lock()
            .iter()
            .map(|(a, s)| (*a, s.clone()))
            .collect();
        v.sort_by_key(|(a, _)| *a);
        v
    }

    /// The peers' round trips and timeouts (Cassandra's `Connection`
    /// metrics), and the dropped messages per verb (`DroppedMessage`).
    pub fn collect(&self, c: &mut sibyl_metrics::Collection) {
        use sibyl_metrics::MetricName;
        for (addr, s) in self.peers() {
            let n = |name: &str| MetricName::new("Connection", name).scope(addr.to_string());
            c.timer(n("Latency"), &s.latency);
            c.counter(n("Timeouts"), s.timeouts.get());
        }
        let dropped = self.dropped();
        for verb in Verb::ALL {
            c.counter(
                MetricName::new("DroppedMessage", "Dropped").scope(verb.name()),
                dropped.get(&verb).copied().unwrap_or(0),
            );
        }
    }

    /// The injected faults.
    pub fn faults(&self) -> NetFaults {
        self.inner.faults.read().clone()
    }

    /// Replaces the injected faults.
    pub fn set_faults(&self, faults: NetFaults) {
        *self.inner.faults.write() = faults;
    }

    pub fn config(&self) -> &MessagingConfig {
        &self.inner.config
    }
}

impl Inner {
    fn peer(&self, addr: IpAddr) -> Arc<PeerStats> {
        self.peers.lock().entry(addr).or_default().clone()
    }

    /// The messaging version of the last connection to `peer` (the oldest
    /// until one is made).
    fn version_of(&self, peer: IpAddr) -> u8 {
        self.versions
            .lock()
            .get(&peer)
            .copied()
            .unwrap_or(MESSAGING_VERSION_MIN)
    }

    fn count_dropped(&self, verb: Verb) {
        *self.dropped.lock().entry(verb).or_default() += 1;
        *self.dropped_recent.lock().entry(verb).or_default() += 1;
    }

    /// Cassandra's line per verb with messages dropped in the last
    /// interval. Sibyl drops messages on the sending node (a full queue,
    /// an unreachable peer) at once: they are internal, with no wait.
    fn log_dropped(&self) {
        let recent = std::mem::take(&mut *self.dropped_recent.lock());
        for verb in Verb::ALL {
            if let Some(n) = recent.get(&verb).filter(|n| **n > 0) {
                tracing::info!(
                    "{} messages were dropped in last {} ms: {n} internal and 0 cross node. \
                     Mean internal dropped latency: 0 ms and Mean cross-node dropped latency: 0 ms",
                    verb.name(),
                    LOG_DROPPED_INTERVAL.as_millis()
                );
            }
        }
    }

    /// The delay for messages to or from `peer`, or `None` if they are lost.
    fn fault_delay(&self, peer: IpAddr) -> Option<Duration> {
        let f = self.faults.read();
        if f.dropped_peers.contains(&peer) {
            return None;
        }
        Some(match f.delayed_peers.get(&peer) {
            Some((d, j)) if !j.is_zero() => {
                *d + Duration::from_micros(rand::thread_rng().gen_range(0..=j.as_micros() as u64))
            }
            Some((d, _)) => *d,
            None => Duration::ZERO,
        })
    }

    fn connection_type(&self, request: &Request, frame_len: usize) -> ConnectionType {
        match request {
            Request::Gossip(_) | Request::Metadata(_) | Request::MetadataCatchUp(_) => {
                ConnectionType::Urgent
            }
            _ if frame_len >= self.config.large_message_bytes => ConnectionType::Large,
            _ => ConnectionType::Small,
        }
    }

    /// Queues a message for `to`; false if it was dropped.
    fn enqueue(self: &Arc<Self>, to: IpAddr, kind: ConnectionType, message: Outgoing) -> bool {
        let verb = message.verb;
        let sender = {
            let mut out = self.outbound.lock();
            out.entry((to, kind))
                .or_insert_with(|| {
                    let (tx, rx) = mpsc::channel(self.config.queue_capacity);
                    tokio::spawn(outbound_loop(Arc::downgrade(self), to, kind, rx));
                    tx
                })
                .clone()
        };
        let bytes = message.frame.len();
        let out = &self.peer(to).outbound;
        let pool = &self.pools[pool_index(kind)];
        match sender.try_send(message) {
            Ok(()) => {
                out.pending_count.add(1);
                out.pending_bytes.add(bytes as i64);
                pool.pending.add(1);
                true
            }
            Err(_) => {
                out.overload.add(bytes);
                pool.dropped.inc();
                self.count_dropped(verb);
                false
            }
        }
    }

    fn send(
        self: &Arc<Self>,
        to: IpAddr,
        request: Request,
        timeout: Duration,
        one_way: bool,
    ) -> BoxFuture<Result<Response, MessagingError>> {
        let inner = self.clone();
        // the session of the caller's task: the future may run elsewhere
        let trace = sibyl_tracing::current();
        Box::pin(async move {
            let verb = request.verb();
            let deadline = tokio::time::Instant::now() + timeout;
            let Some(delay) = inner.fault_delay(to) else {
                inner.count_dropped(verb);
                tokio::time::sleep_until(deadline).await;
                inner.peer(to).timeouts.inc();
                return Err(MessagingError::Timeout(to));
            };
            if !delay.is_zero() {
                tokio::time::sleep(delay).await;
            }
            let id = inner.next_id.fetch_add(1, Ordering::Relaxed);
            let mut body = Vec::new();
            encode_request(&request, &mut body);
            let mut frame = Vec::with_capacity(body.len() + 35);
            let kind = if one_way {
                FrameKind::OneWay
            } else {
                FrameKind::Request
            };
            let params = trace
                .as_ref()
                .filter(|_| inner.version_of(to) >= MESSAGING_VERSION_TRACING)
                .map(|t| t.params());
            encode_frame(kind, id, verb, params.as_ref(), &body, &mut frame);
            drop(body);
            let port = inner.config.storage_port;
            if let Some(t) = &trace {
                t.trace_in(
                    Stage::Messaging,
                    format!(
                        "Sending {} message to {} message size {} bytes",
                        verb.name(),
                        sibyl_tracing::endpoint(to, port),
                        frame.len()
                    ),
                );
            }
            let conn = inner.connection_type(&request, frame.len());
            let (tx, rx) = oneshot::channel();
            let message = Outgoing {
                frame,
                id,
                verb,
                reply: (!one_way).then_some(tx),
            };
            if !inner.enqueue(to, conn, message) {
                return Err(MessagingError::Overloaded(to));
            }
            if one_way {
                return Ok(Response::Done);
            }
            let sent = sibyl_metrics::Instant::now();
            let body = match tokio::time::timeout_at(deadline, rx).await {
                Ok(Ok(Ok(body))) => body,
                Ok(Ok(Err(e))) => return Err(e),
                Ok(Err(_)) => return Err(MessagingError::Unreachable(to)),
                Err(_) => {
                    inner.pending.lock().remove(&id);
                    inner.peer(to).timeouts.inc();
                    return Err(MessagingError::Timeout(to));
                }
            };
            inner.peer(to).latency.record_elapsed(sent);
            if let Some(t) = &trace {
                let from = sibyl_tracing::endpoint(to, port);
                t.trace_in(
                    Stage::Messaging,
                    format!("{} message received from {from}", verb.response_name()),
                );
                t.trace_in(
                    Stage::RequestResponse,
                    format!("Processing response from {from}"),
                );
            }
            decode_response(&body, &request, &*inner.comparators)
                .map_err(|e| MessagingError::Malformed(to, e.to_string()))
        })
    }
}

impl MessagingService for TcpMessaging {
    fn messaging_version(&self, peer: IpAddr) -> u8 {
        if peer == self.inner.config.broadcast_address || peer == self.inner.config.listen_address {
            self.inner.config.max_version
        } else {
            self.inner.version_of(peer)
        }
    }

    fn local_address(&self) -> IpAddr {
        self.inner.config.broadcast_address
    }

    fn send_and_receive(
        &self,
        to: IpAddr,
        request: Request,
        timeout: Duration,
    ) -> BoxFuture<Result<Response, MessagingError>> {
        self.inner.send(to, request, timeout, false)
    }

    fn send_one_way(&self, to: IpAddr, request: Request) {
        let sent = self.inner.send(to, request, Duration::from_secs(2), true);
        tokio::spawn(sent);
    }
}

/// Opens a connection to `to` from this node's listen address and shakes
/// hands.
async fn connect(inner: &Inner, to: IpAddr, kind: ConnectionType) -> Result<TcpStream, String> {
    let c = &inner.config;
    let socket = match to {
        IpAddr::V4(_) => TcpSocket::new_v4(),
        IpAddr::V6(_) => TcpSocket::new_v6(),
    }
    .map_err(|e| e.to_string())?;
    // outbound connections come from this node's own address (not from
    // whatever the kernel picks), so peers and firewall rules see who it is
    socket
        .bind(SocketAddr::new(c.listen_address, 0))
        .map_err(|e| format!("cannot bind to {}: {e}", c.listen_address))?;
    let _ = socket.set_nodelay(true);
    let mut stream = tokio::time::timeout(
        c.connect_timeout,
        socket.connect(SocketAddr::new(to, c.storage_port)),
    )
    .await
    .map_err(|_| "connection timed out".to_string())?
    .map_err(|e| e.to_string())?;
    let _ = stream.set_nodelay(true);
    let hello = Handshake {
        min_version: MESSAGING_VERSION_MIN,
        max_version: c.max_version,
        connection: kind,
        from: c.broadcast_address,
        cluster_name: c.cluster_name.clone(),
    };
    let exchange = async {
        stream
            .write_all(&hello.encode())
            .await
            .map_err(|e| e.to_string())?;
        let mut p = [0u8; HandshakeReply::PREFIX_BYTES];
        stream.read_exact(&mut p).await.map_err(|e| e.to_string())?;
        let (reply, n) = HandshakeReply::decode_prefix(p).map_err(|e| e.to_string())?;
        let mut reason = vec![0u8; n];
        stream
            .read_exact(&mut reason)
            .await
            .map_err(|e| e.to_string())?;
        match reply {
            HandshakeReply::Accepted { version } => {
                inner.versions.lock().insert(to, version);
                Ok(())
            }
            HandshakeReply::Refused { .. } => {
                Err(format!("refused: {}", String::from_utf8_lossy(&reason)))
            }
        }
    };
    tokio::time::timeout(c.connect_timeout, exchange)
        .await
        .map_err(|_| "handshake timed out".to_string())??;
    Ok(stream)
}

/// Reads one frame; `Ok(None)` at a clean end of the stream.
async fn read_frame<R: AsyncReadExt + Unpin>(
    r: &mut R,
    max: usize,
) -> Result<Option<codec::Frame>, String> {
    let mut h = [0u8; FRAME_HEADER_BYTES];
    match r.read_exact(&mut h).await {
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(None),
        Err(e) => return Err(e.to_string()),
    }
    let (len, crc) = decode_frame_header(h, max).map_err(|e| e.to_string())?;
    let mut payload = vec![0u8; len];
    r.read_exact(&mut payload)
        .await
        .map_err(|e| e.to_string())?;
    decode_payload(Bytes::from(payload), crc)
        .map(Some)
        .map_err(|e| e.to_string())
}

/// Writes the queue of one connection to `to`, reconnecting as needed.
async fn outbound_loop(
    inner: std::sync::Weak<Inner>,
    to: IpAddr,
    kind: ConnectionType,
    mut rx: mpsc::Receiver<Outgoing>,
) {
    let mut backoff = Duration::from_millis(100);
    let mut retry_at: Option<Instant> = None;
    while let Some(first) = rx.recv().await {
        let Some(node) = inner.upgrade() else { return };
        let stats = node.peer(to);
        let out = &stats.outbound;
        let pool = node.pools[pool_index(kind)].clone();
        // a message leaves the queue: written, or lost
        let unqueue = |m: &Outgoing| {
            out.pending_count.add(-1);
            out.pending_bytes.add(-(m.frame.len() as i64));
            pool.pending.add(-1);
        };
        let lost = |m: &Outgoing| {
            unqueue(m);
            out.error.add(m.frame.len());
            pool.dropped.inc();
        };
        if retry_at.is_some_and(|t| Instant::now() < t) {
            // still backing off: the peer was unreachable a moment ago
            lost(&first);
            node.count_dropped(first.verb);
            continue;
        }
        out.connection_attempts.inc();
        let stream = match connect(&node, to, kind).await {
            Ok(s) => s,
            Err(e) => {
                tracing::debug!("cannot connect to {to} ({kind:?}): {e}");
                // a refusal is final for the messages waiting (they learn
                // why); other failures leave them unreachable
                let refused = e.strip_prefix("refused: ").map(str::to_string);
                let fail = |m: Outgoing| {
                    lost(&m);
                    node.count_dropped(m.verb);
                    if let (Some(reply), Some(reason)) = (m.reply, &refused) {
                        let _ = reply.send(Err(MessagingError::Refused(to, reason.clone())));
                    }
                };
                fail(first);
                while let Ok(m) = rx.try_recv() {
                    fail(m);
                }
                if let Some(reason) = &refused {
                    tracing::warn!("{to} refused this node's connection: {reason}");
                }
                retry_at = Some(Instant::now() + backoff);
                backoff = (backoff * 2).min(Duration::from_secs(5));
                continue;
            }
        };
        retry_at = None;
        backoff = Duration::from_millis(100);
        out.successful_connection_attempts.inc();
        out.active_connections.add(1);
        tracing::debug!("connected to {to} ({kind:?})");
        let (mut read, write) = stream.into_split();
        // responses come back on the same connection
        let reader_node = Arc::downgrade(&node);
        let max = node.config.max_frame_bytes;
        let mut reader = tokio::spawn(async move {
            loop {
                match read_frame(&mut read, max).await {
                    Ok(Some(f)) if f.kind == FrameKind::Response => {
                        let Some(n) = reader_node.upgrade() else {
                            return;
                        };
                        let waiting = n.pending.lock().remove(&f.id);
                        if let Some(w) = waiting {
                            let _ = w.send(Ok(f.body));
                        }
                    }
                    Ok(Some(f)) => {
                        tracing::warn!("{to} sent a {:?} frame on a reply channel", f.kind);
                        return;
                    }
                    Ok(None) => return,
                    Err(e) => {
                        tracing::warn!("connection to {to} failed: {e}");
                        return;
                    }
                }
            }
        });
        drop(node);
        let mut w = BufWriter::with_capacity(64 << 10, write);
        let mut next = Some(first);
        'conn: while let Some(m) = next.take() {
            let Some(node) = inner.upgrade() else { break };
            let mut m = m;
            loop {
                if let Some(reply) = m.reply.take() {
                    node.pending.lock().insert(m.id, reply);
                }
                if w.write_all(&m.frame).await.is_err() {
                    lost(&m);
                    node.count_dropped(m.verb);
                    break 'conn;
                }
                unqueue(&m);
                out.sent.add(m.frame.len());
                pool.completed.inc();
                match rx.try_recv() {
                    Ok(more) => m = more,
                    Err(_) => break,
                }
            }
            if w.flush().await.is_err() || reader.is_finished() {
                break;
            }
            drop(node);
            tokio::select! {
                m = rx.recv() => match m {
                    Some(m) => next = Some(m),
                    None => break,
                },
                // the reader ends when the connection does
                _ = &mut reader => break,
            }
        }
        reader.abort();
        out.active_connections.add(-1);
    }
}

async fn accept_loop(inner: std::sync::Weak<Inner>, listener: TcpListener) {
    loop {
        let (stream, peer) = match listener.accept().await {
            Ok(c) => c,
            Err(e) => {
                tracing::warn!("accepting a peer failed: {e}");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let Some(node) = inner.upgrade() else { return };
        let _ = stream.set_nodelay(true);
        tokio::spawn(inbound(node, stream, peer));
    }
}

/// Serves one inbound connection: the handshake, then requests.
async fn inbound(inner: Arc<Inner>, mut stream: TcpStream, peer: SocketAddr) {
    let hello = async {
        let mut p = [0u8; 6];
        stream.read_exact(&mut p).await.map_err(|e| e.to_string())?;
        let n = Handshake::body_len(p).map_err(|e| e.to_string())?;
        let mut body = vec![0u8; n];
        stream
            .read_exact(&mut body)
            .await
            .map_err(|e| e.to_string())?;
        Handshake::decode_body(&body).map_err(|e| e.to_string())
    };
    let hello = match tokio::time::timeout(Duration::from_secs(5), hello).await {
        Ok(Ok(h)) => h,
        Ok(Err(e)) => {
            tracing::warn!("refused a connection from {peer}: {e}");
            return;
        }
        Err(_) => {
            tracing::warn!("refused a connection from {peer}: no handshake in 5 s");
            return;
        }
    };
    let from = hello.from;
    match hello.negotiate_up_to(&inner.config.cluster_name, inner.config.max_version) {
        Ok(version) => {
            if stream
                .write_all(&HandshakeReply::Accepted { version }.encode())
                .await
                .is_err()
            {
                return;
            }
        }
        Err(reason) => {
            tracing::warn!("refused a connection from {peer}: {reason}");
            let _ = stream
                .write_all(&HandshakeReply::Refused { reason }.encode())
                .await;
            return;
        }
    }
    let (mut read, write) = stream.into_split();
    let (tx, mut rx) = mpsc::channel::<Vec<u8>>(inner.config.queue_capacity);
    tokio::spawn(async move {
        let mut w = BufWriter::with_capacity(64 << 10, write);
        while let Some(frame) = rx.recv().await {
            if w.write_all(&frame).await.is_err() {
                return;
            }
            while let Ok(more) = rx.try_recv() {
                if w.write_all(&more).await.is_err() {
                    return;
                }
            }
            if w.flush().await.is_err() {
                return;
            }
        }
    });
    let max = inner.config.max_frame_bytes;
    let stats = inner.peer(from);
    loop {
        let frame = match read_frame(&mut read, max).await {
            Ok(Some(f)) => f,
            Ok(None) => return,
            Err(e) => {
                stats.inbound.corrupt_frames.inc();
                tracing::warn!("closing the connection from {from}: {e}");
                return;
            }
        };
        let frame_bytes = FRAME_HEADER_BYTES + frame.body.len();
        stats.inbound.received.add(frame_bytes);
        if frame.kind == FrameKind::Response {
            tracing::warn!("closing the connection from {from}: a response on a request channel");
            return;
        }
        let node = inner.clone();
        let tx = tx.clone();
        let stats = stats.clone();
        tokio::spawn(async move {
            let Some(delay) = node.fault_delay(from) else {
                node.count_dropped(frame.verb);
                return;
            };
            if !delay.is_zero() {
                tokio::time::sleep(delay).await;
            }
            let port = node.config.storage_port;
            let trace = frame.trace.and_then(|p| {
                let t = node.tracer.read().clone()?.join(p, from)?;
                t.trace(format!(
                    "{} message received from {}",
                    frame.verb.name(),
                    sibyl_tracing::endpoint(from, port)
                ));
                Some(t.in_stage(frame.verb.stage()))
            });
            let response = match decode_request(frame.verb, &frame.body, &*node.comparators) {
                Ok(Ok(request)) => {
                    let handler = node.handler.read().clone();
                    match handler {
                        Some(h) => {
                            sibyl_tracing::scope(trace.clone(), h.handle(from, request)).await
                        }
                        None => {
                            Response::Failure(ReplicaFailure::Error("this node is starting".into()))
                        }
                    }
                }
                Ok(Err(table)) => Response::Failure(ReplicaFailure::UnknownTable(table)),
                Err(e) => {
                    stats.inbound.error.add(frame_bytes);
                    tracing::warn!("bad {} message from {from}: {e}", frame.verb.name());
                    Response::Failure(ReplicaFailure::Error(e.to_string()))
                }
            };
            stats.inbound.processed.add(frame_bytes);
            if frame.kind == FrameKind::OneWay {
                return;
            }
            // an operator's partition loses the response as well
            let Some(delay) = node.fault_delay(from) else {
                node.count_dropped(frame.verb);
                return;
            };
            if !delay.is_zero() {
                tokio::time::sleep(delay).await;
            }
            let mut body = Vec::new();
            encode_response(&response, &mut body);
            let mut out = Vec::with_capacity(body.len() + 18);
            encode_frame(
                FrameKind::Response,
                frame.id,
                frame.verb,
                None,
                &body,
                &mut out,
            );
            if let Some(t) = &trace {
                let to = sibyl_tracing::endpoint(from, port);
                t.trace(format!("Enqueuing response to {to}"));
                t.trace_in(
                    Stage::Messaging,
                    format!(
                        "Sending {} message to {to} message size {} bytes",
                        frame.verb.response_name(),
                        out.len()
                    ),
                );
            }
            if tx.try_send(out).is_err() {
                node.count_dropped(frame.verb);
            }
        });
    }
}
