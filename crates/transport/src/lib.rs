//! The CQL native protocol server: connections, STARTUP/OPTIONS, v5 segment
//! framing, compression, many requests in flight per connection (bounded),
//! events, and the one place where errors become CQL error codes.

mod budget;
pub mod clients;
pub mod event_loops;
mod outbox;

use budget::{Budget, Taken};
use bytes::{Buf, Bytes, BytesMut};
use futures::FutureExt;
use sibyl_cql::{BatchType, ParsedStatement, Statement};
use sibyl_cql3::error::Error;
use sibyl_cql3::query::{BatchChild, ClientState, Outcome, QueryOptions, QueryProcessor};
use sibyl_protocol::segment::{FrameReassembler, SegmentDecoder};
use sibyl_protocol::{
    decode_request_frame, encode_response_frame, BatchQueryKind, Compression, ErrorKind,
    ErrorResponse, Event, FrameHeader, Opcode, ProtocolError, Request, Response, ResultBody, Value,
    Values, HEADER_LEN,
};
use sibyl_service::ServiceError;
use sibyl_tracing::{TraceState, TraceType, Tracer};
use std::collections::{BTreeMap, HashMap};
use std::net::IpAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use tokio::io::AsyncReadExt;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::broadcast;

/// Requests in flight per connection before reading pauses (back-pressure).
pub const MAX_IN_FLIGHT_PER_CONNECTION: usize = 1024;

/// Maps a node error to its CQL error response, in one place.
pub fn error_response(e: &Error) -> ErrorResponse {
    let msg = e.to_string();
    let kind = match e {
        Error::Syntax(_) => ErrorKind::SyntaxError,
        Error::Invalid(_) => ErrorKind::Invalid,
        Error::Config(_) => ErrorKind::ConfigError,
        Error::FunctionFailure {
            keyspace,
            function,
            arg_types,
            ..
        } => ErrorKind::FunctionFailure {
            keyspace: keyspace.clone(),
            function: function.clone(),
            arg_types: arg_types.clone(),
        },
        Error::AlreadyExists {
            keyspace, table, ..
        } => ErrorKind::AlreadyExists {
            keyspace: keyspace.clone(),
            table: table.clone(),
        },
        Error::Unprepared(id) => ErrorKind::Unprepared { id: id.clone() },
        Error::Service(e) => service_error_kind(e),
        Error::Protocol(_) => ErrorKind::ProtocolError,
        Error::Unauthorized(_) => ErrorKind::Unauthorized,
        Error::Server(_) => ErrorKind::ServerError,
    };
    ErrorResponse::new(kind, msg)
}

/// The coordinator's errors as the protocol carries them.
fn service_error_kind(e: &ServiceError) -> ErrorKind {
    let n = |x: usize| i32::try_from(x).unwrap_or(i32::MAX);
    match e {
        ServiceError::Unavailable {
            consistency,
            required,
            alive,
        }
        | ServiceError::UnavailableInDatacenter {
            consistency,
            required,
            alive,
            ..
        } => ErrorKind::Unavailable {
            consistency: *consistency,
            required: n(*required),
            alive: n(*alive),
        },
        ServiceError::WriteTimeout {
            consistency,
            received,
            block_for,
            write_type,
        } => ErrorKind::WriteTimeout {
            consistency: *consistency,
            received: n(*received),
            block_for: n(*block_for),
            write_type: write_type.as_str().to_string(),
            contentions: None,
        },
        ServiceError::ReadTimeout {
            consistency,
            received,
            block_for,
            data_present,
        } => ErrorKind::ReadTimeout {
            consistency: *consistency,
            received: n(*received),
            block_for: n(*block_for),
            data_present: *data_present,
        },
        ServiceError::ReadFailure {
            consistency,
            received,
            block_for,
            failures,
            data_present,
        } => ErrorKind::ReadFailure {
            consistency: *consistency,
            received: n(*received),
            block_for: n(*block_for),
            reasons: failures.clone(),
            data_present: *data_present,
        },
        ServiceError::Overloaded(_) => ErrorKind::Overloaded,
        ServiceError::Truncate(_) => ErrorKind::TruncateError,
        ServiceError::Invalid(_) => ErrorKind::Invalid,
        ServiceError::Replica(_) | ServiceError::Metadata(_) | ServiceError::SchemaConflict => {
            ErrorKind::ServerError
        }
    }
}

/// Bytes a client may hold in the node.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// `native_transport_max_request_data_in_flight`: bytes of requests being
    /// processed, for the whole node.
    pub request_bytes: usize,
    /// `native_transport_max_request_data_in_flight_per_ip`: the same, per
    /// client address.
    pub request_bytes_per_ip: usize,
    /// Responses not yet written to a connection's socket, plus an estimate
    /// for its requests still running: reading pauses above it, so a client
    /// that pipelines and never reads pins this much, not its whole backlog.
    pub response_bytes_per_connection: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            request_bytes: 256 << 20,
            request_bytes_per_ip: 64 << 20,
            response_bytes_per_connection: 16 << 20,
        }
    }
}

/// Shared server state.
pub struct Server {
    pub qp: Arc<QueryProcessor>,
    pub events: broadcast::Sender<Event>,
    pub max_frame_bytes: usize,
    pub release_version: String,
    pub limits: Limits,
    request_bytes: Arc<Budget>,
    /// Per client address: its request-bytes budget and its connections.
    request_bytes_per_ip: std::sync::Mutex<HashMap<IpAddr, (Arc<Budget>, usize)>>,
    pub metrics: TransportMetrics,
    /// The open connections.
    pub clients: clients::Clients,
    /// Opens the trace sessions of traced requests.
    pub tracer: Arc<Tracer>,
    /// The threads connections run on, started with the first listener.
    event_loops: std::sync::OnceLock<Option<event_loops::EventLoops>>,
}

/// Cassandra's `Client` and `CQL` metrics.
#[derive(Debug, Default)]
pub struct TransportMetrics {
    /// Open CQL connections (`connectedNativeClients`).
    pub connections: sibyl_metrics::Gauge,
    pub auth_successes: sibyl_metrics::Counter,
    /// Statements executed as QUERY (or unprepared in a BATCH) and as
    /// EXECUTE (or prepared in a BATCH).
    pub regular_executed: sibyl_metrics::Counter,
    pub prepared_executed: sibyl_metrics::Counter,
}

impl TransportMetrics {
    pub fn collect(&self, c: &mut sibyl_metrics::Collection) {
        use sibyl_metrics::MetricName;
        c.gauge(
            MetricName::new("Client", "connectedNativeClients"),
            self.connections.get().max(0) as f64,
        );
        c.counter(
            MetricName::new("Client", "AuthSuccess"),
            self.auth_successes.get(),
        );
        // every AUTH_RESPONSE succeeds: there is no authenticator yet
        c.counter(MetricName::new("Client", "AuthFailure"), 0);
        c.counter(
            MetricName::new("CQL", "RegularStatementsExecuted"),
            self.regular_executed.get(),
        );
        c.counter(
            MetricName::new("CQL", "PreparedStatementsExecuted"),
            self.prepared_executed.get(),
        );
    }
}

/// Permits clamped to what one acquisition can ask for, and never more than
/// the whole budget (a request larger than the budget runs alone, as in
/// Cassandra, instead of never).
fn permits(n: usize, limit: usize) -> usize {
    n.min(limit)
}

impl Server {
    pub fn new(
        qp: Arc<QueryProcessor>,
        events: broadcast::Sender<Event>,
        max_frame_bytes: usize,
        release_version: String,
        tracer: Arc<Tracer>,
        limits: Limits,
    ) -> Server {
        Server {
            qp,
            tracer,
            events,
            max_frame_bytes,
            release_version,
            limits,
            request_bytes: Budget::new(limits.request_bytes),
            request_bytes_per_ip: std::sync::Mutex::new(HashMap::new()),
            metrics: TransportMetrics::default(),
            clients: Default::default(),
            event_loops: std::sync::OnceLock::new(),
        }
    }

    fn ip_budget(&self, ip: IpAddr) -> Arc<Budget> {
        let mut m = self
            .request_bytes_per_ip
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        let e = m
            .entry(ip)
            .or_insert_with(|| (Budget::new(self.limits.request_bytes_per_ip), 0));
        e.1 += 1;
        e.0.clone()
    }

    fn release_ip(&self, ip: IpAddr) {
        let mut m = self
            .request_bytes_per_ip
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        if let Some(e) = m.get_mut(&ip) {
            e.1 -= 1;
            if e.1 == 0 {
                m.remove(&ip);
            }
        }
    }

    /// The event loop the next connection runs on; none when there are none
    /// or they could not be started (connections then run on the caller's
    /// runtime).
    fn event_loop(&self) -> Option<(&tokio::runtime::Handle, event_loops::Placed)> {
        let loops = self.event_loops.get_or_init(|| {
            match event_loops::EventLoops::start(event_loops::EventLoops::default_count()) {
                Ok(l) => Some(l),
                Err(e) => {
                    tracing::warn!("cannot start the native transport's event loops: {e}");
                    None
                }
            }
        });
        loops.as_ref().and_then(|l| l.next())
    }

    /// Accepts connections until `shutdown` fires; each runs on one of the
    /// event loops.
    pub async fn serve(
        self: Arc<Self>,
        listener: TcpListener,
        mut shutdown: tokio::sync::watch::Receiver<bool>,
    ) {
        loop {
            tokio::select! {
                r = listener.accept() => match r {
                    Ok((sock, peer)) => {
                        let _ = sock.set_nodelay(true);
                        let s = self.clone();
                        let sd = shutdown.clone();
                        let run = move |sock: TcpStream, placed: Option<event_loops::Placed>| async move {
                            let ip_budget = s.ip_budget(peer.ip());
                            s.metrics.connections.add(1);
                            let info = s.clients.open(peer);
                            if let Err(e) = s.clone().connection(sock, info, ip_budget, placed, sd).await {
                                tracing::debug!("connection {peer} closed: {e}");
                            }
                            s.clients.close(&peer);
                            s.metrics.connections.add(-1);
                            s.release_ip(peer.ip());
                        };
                        match self.event_loop() {
                            // the socket moves to the reactor of the loop that owns it
                            Some((h, placed)) => match sock.into_std() {
                                Ok(std_sock) => {
                                    h.spawn(async move {
                                        match TcpStream::from_std(std_sock) {
                                            Ok(sock) => run(sock, Some(placed)).await,
                                            Err(e) => tracing::warn!("connection from {peer} dropped: {e}"),
                                        }
                                    });
                                }
                                Err(e) => tracing::warn!("connection from {peer} dropped: {e}"),
                            },
                            None => {
                                tokio::spawn(run(sock, None));
                            }
                        }
                    }
                    Err(e) => {
                        tracing::warn!("accept failed: {e}");
                        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                    }
                },
                _ = shutdown.changed() => break,
            }
        }
    }

    async fn connection(
        self: Arc<Self>,
        sock: TcpStream,
        info: Arc<clients::ClientInfo>,
        ip_budget: Arc<Budget>,
        placed: Option<event_loops::Placed>,
        mut shutdown: tokio::sync::watch::Receiver<bool>,
    ) -> std::io::Result<()> {
        let (mut rd, wr) = sock.into_split();
        // the writer: what the requests queued since its last write goes in
        // one write; what a response holds is given back once written
        let per_turn = requests_per_turn();
        let (outbox, write_loop) = outbox::Outbox::<Held>::new(wr, per_turn == Some(0));
        let writer = tokio::spawn(write_loop);
        let budget = self.limits.response_bytes_per_connection;
        let mut conn = Conn {
            server: Arc::new(self.clone()),
            version: 0,
            compression: None,
            v5_framing: false,
            ready: false,
            throw_on_overload: false,
            client: Arc::new(parking_lot::Mutex::new(ClientState::default())),
            outbox: outbox.clone(),
            slots: Budget::new(MAX_IN_FLIGHT_PER_CONNECTION),
            response_budget: Budget::new(budget),
            response_estimate: Arc::new(AtomicUsize::new(budget / 8)),
            ip_budget,
            events: None,
            info,
            placed,
        };
        let mut buf = BytesMut::with_capacity(64 * 1024);
        let mut seg_decoder = SegmentDecoder::new(false);
        let mut reassembler = FrameReassembler::new(self.max_frame_bytes);
        let mut event_rx: Option<broadcast::Receiver<Event>> = None;
        // an oversized v4 frame: its header, and the bytes still to skip
        let mut discarding: Option<(FrameHeader, ProtocolError, usize)> = None;
        let mut turn = Turn::default();
        'read: loop {
            // process everything buffered
            loop {
                if let Some((h, e, left)) = discarding.as_mut() {
                    let n = (*left).min(buf.len());
                    buf.advance(n);
                    *left -= n;
                    if *left > 0 {
                        break;
                    }
                    // answered once the whole frame is gone, as Cassandra does
                    let err = ErrorResponse::from(&*e);
                    conn.send(h.stream, &Response::Error(err), &[]).await;
                    discarding = None;
                }
                if conn.v5_framing {
                    match seg_decoder.decode(&mut buf) {
                        Ok(Some(seg)) => match reassembler.push(seg) {
                            Ok(frames) => {
                                for (h, e) in reassembler.take_oversized() {
                                    let err = ErrorResponse::from(&e);
                                    conn.send(h.stream, &Response::Error(err), &[]).await;
                                }
                                for (h, body) in frames {
                                    if !conn.handle_frame(h, body).await {
                                        break 'read;
                                    }
                                    turn.take(per_turn, &conn.slots).await;
                                }
                            }
                            Err(e) => {
                                conn.fatal(0, &e).await;
                                break 'read;
                            }
                        },
                        Ok(None) => break,
                        Err(e) => {
                            conn.fatal(0, &e).await;
                            break 'read;
                        }
                    }
                } else {
                    match FrameHeader::parse(&buf) {
                        Ok(Some(h)) => {
                            if let Err(e) = h.check_length(self.max_frame_bytes) {
                                conn.version = conn.version.max(h.version);
                                discarding = Some((h, e, h.frame_len()));
                                continue;
                            }
                            let total = HEADER_LEN + h.length as usize;
                            if buf.len() < total {
                                break;
                            }
                            buf.advance(HEADER_LEN);
                            let body = buf.split_to(h.length as usize).freeze();
                            let was_v5 = conn.v5_framing;
                            if !conn.handle_frame(h, body).await {
                                break 'read;
                            }
                            turn.take(per_turn, &conn.slots).await;
                            if conn.v5_framing && !was_v5 {
                                seg_decoder =
                                    SegmentDecoder::new(conn.compression == Some(Compression::Lz4));
                            }
                        }
                        Ok(None) => break,
                        Err(e) => {
                            if let ProtocolError::UnsupportedVersion(v) = &e {
                                // answer in a version the client can read, so drivers negotiate down
                                conn.version = if (3..=5).contains(v) { *v } else { 4 };
                            }
                            // on stream 0, as Cassandra 5.0.4 answers (the header
                            // of an unknown version cannot be trusted)
                            conn.fatal(0, &e).await;
                            break 'read;
                        }
                    }
                }
            }
            if conn.events.is_some() && event_rx.is_none() {
                event_rx = Some(self.events.subscribe());
            }
            if buf.capacity() - buf.len() < 16 * 1024 {
                buf.reserve(64 * 1024);
            }
            turn.reading();
            tokio::select! {
                n = rd.read_buf(&mut buf) => {
                    match n {
                        Ok(0) | Err(_) => break,
                        Ok(_) => {}
                    }
                }
                ev = async {
                    match event_rx.as_mut() {
                        Some(r) => r.recv().await.ok(),
                        None => std::future::pending().await,
                    }
                } => {
                    if let Some(ev) = ev {
                        if conn.events.as_ref().map(|s: &Vec<String>| s.iter().any(|x| x == ev.type_name())).unwrap_or(false) {
                            conn.send(-1, &Response::Event(ev), &[]).await;
                        }
                    }
                }
                _ = shutdown.changed() => break,
            }
        }
        // every sender must go for the writer to finish: the connection's own,
        // then those of requests still running; the socket closes after
        drop(conn);
        drop(outbox);
        let _ = writer.await;
        Ok(())
    }
}

/// Requests a connection's reader starts before it lets them run (and the
/// writer send the responses of those done): the client gets the first
/// responses while the server works on the rest, instead of the two taking
/// turns a whole batch at a time. `SIBYL_NATIVE_REQUESTS_PER_TURN` fixes
/// it (0: the reader starts everything it has read, and the writer waits
/// for all of it); unset, a turn is the connection's requests in flight
/// ([`Turn::size`], [`TURNS_PER_ROUND`]).
fn requests_per_turn() -> Option<usize> {
    static N: std::sync::OnceLock<Option<usize>> = std::sync::OnceLock::new();
    *N.get_or_init(|| {
        std::env::var("SIBYL_NATIVE_REQUESTS_PER_TURN")
            .ok()
            .and_then(|v| v.parse().ok())
    })
}

/// The requests of a connection's reader's turn, and what it knows of the
/// client's requests in flight.
#[derive(Default)]
struct Turn {
    started: usize,
    size: usize,
    /// requests started since the reader last read the socket
    read: usize,
    /// the most requests one read brought, decaying by an eighth a read.
    /// A read brings about half of the client's requests in flight (it
    /// reads the other half's responses meanwhile: latte's reads at 32, 128
    /// and 512 in flight brought 16, 50-100 and 140-180). The slots held
    /// are no measure of them: a request done at once gives back its slot
    /// when written, before the next read
    burst: usize,
}

/// Turns per round of a connection's requests in flight, and the bounds of
/// a turn. One: a turn is what the client has in flight (up to
/// [`MAX_TURN`]), so the writer sends a read's responses together. Four
/// (the client reads a quarter of its responses while the server works on
/// the next) was the better one while a write cost the server 3.2 µs
/// (bench/README.md, 2026-12-02, late); at 2.2-2.6 µs the client's reads
/// cost more than the overlap gains: writes at 128 in flight from two latte
/// processes cost 2.17-2.29 µs with one turn, 2.33-2.47 with two and
/// 2.32-2.73 with four, in alternated runs, and the matrix's points are as
/// fast or faster, with p99 as low or lower (bench/README.md, 2026-12-06).
/// At least 8: with fewer in flight, shorter turns only add writes (32 in
/// flight: turns of 8 made 284k reads/s, of 16 181k).
const TURNS_PER_ROUND: usize = 1;

/// [`TURNS_PER_ROUND`], or `SIBYL_NATIVE_TURNS_PER_ROUND` when set (at
/// least 1): for measuring other sizes without a build.
fn turns_per_round() -> usize {
    static N: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *N.get_or_init(|| {
        std::env::var("SIBYL_NATIVE_TURNS_PER_ROUND")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(TURNS_PER_ROUND)
            .max(1)
    })
}
const MIN_TURN: usize = 8;
const MAX_TURN: usize = 128;

impl Turn {
    /// A turn's size when it starts: `fixed`, or the requests holding
    /// one of the connection's `slots` over [`TURNS_PER_ROUND`].
    fn size(&self, fixed: Option<usize>, slots: &Budget) -> usize {
        fixed.unwrap_or_else(|| {
            let held = MAX_IN_FLIGHT_PER_CONNECTION.saturating_sub(slots.available());
            (held.max(2 * self.burst) / turns_per_round()).clamp(MIN_TURN, MAX_TURN)
        })
    }

    /// The reader is about to read the socket: what the last read brought
    /// is counted in the client's requests in flight.
    fn reading(&mut self) {
        // (rounded up: a quiet client's estimate goes down to nothing)
        self.burst = self.read.max(self.burst - self.burst.div_ceil(8));
        self.read = 0;
    }

    /// Counts a request started; at the end of a turn, lets the others run.
    async fn take(&mut self, fixed: Option<usize>, slots: &Budget) {
        if fixed == Some(0) {
            return;
        }
        if self.started == 0 {
            self.size = self.size(fixed, slots);
        }
        self.read += 1;
        self.started += 1;
        if self.started >= self.size {
            self.started = 0;
            tokio::task::yield_now().await;
        }
    }
}

/// What a response keeps from its request until it is written: its slot
/// among the connection's requests in flight, its request's bytes from the
/// node's and the client address's budgets, its own bytes from the
/// connection's response budget.
struct Held {
    _slot: Taken,
    _request: (Taken, Taken),
    _response: Taken,
}

struct Conn {
    /// The server, behind a count of the connection's own: each request
    /// holds the server while it runs, and a count shared by every
    /// connection would be written from every event loop twice a request.
    #[allow(clippy::redundant_allocation)] // the outer count is the point
    server: Arc<Arc<Server>>,
    version: u8,
    compression: Option<Compression>,
    v5_framing: bool,
    /// STARTUP has been answered.
    ready: bool,
    /// STARTUP's THROW_ON_OVERLOAD=1: refuse with Overloaded instead of
    /// pausing when a request-bytes budget is spent.
    throw_on_overload: bool,
    client: Arc<parking_lot::Mutex<ClientState>>,
    outbox: outbox::Outbox<Held>,
    slots: Arc<Budget>,
    response_budget: Arc<Budget>,
    /// Size of the last response: what a new request is expected to need.
    response_estimate: Arc<AtomicUsize>,
    ip_budget: Arc<Budget>,
    events: Option<Vec<String>>,
    info: Arc<clients::ClientInfo>,
    /// Its place on its event loop (none off the loops).
    placed: Option<event_loops::Placed>,
}

fn encode(
    version: u8,
    stream: i16,
    resp: &Response,
    compression: Option<Compression>,
    warnings: &[String],
    tracing_id: Option<[u8; 16]>,
) -> Vec<u8> {
    let mut out = Vec::with_capacity(256);
    encode_response_frame(
        version,
        stream,
        resp,
        compression,
        warnings,
        tracing_id,
        &mut out,
    );
    out
}

/// A message type as Cassandra names it in errors (`QUERY`, `STARTUP`, …).
fn opcode_name(op: u8) -> String {
    sibyl_protocol::Opcode::try_from(op)
        .map(|o| o.name().to_string())
        .unwrap_or_else(|_| op.to_string())
}

/// STARTUP's CQL_VERSION, checked as Cassandra's `StartupMessage` does.
fn check_cql_version(v: Option<&String>) -> Result<(), String> {
    let Some(v) = v else {
        return Err("Missing value CQL_VERSION in STARTUP message".into());
    };
    let invalid = || format!("Invalid version value: {v}");
    let core = v.split(['-', '+']).next().unwrap_or("");
    let parts: Vec<&str> = core.split('.').collect();
    if !(2..=3).contains(&parts.len()) {
        return Err(invalid());
    }
    let mut n = [0u64; 3];
    for (i, p) in parts.iter().enumerate() {
        if p.is_empty() || !p.bytes().all(|b| b.is_ascii_digit()) {
            return Err(invalid());
        }
        n[i] = p.parse().map_err(|_| invalid())?;
    }
    if (n[0], n[1], n[2]) < (2, 99, 0) {
        return Err(format!(
            "CQL version {v} is not supported by the binary protocol (supported version are >= 3.0.0)"
        ));
    }
    Ok(())
}

impl Conn {
    fn body_compression(&self) -> Option<Compression> {
        if self.version >= 5 {
            None
        } else {
            self.compression
        }
    }

    async fn send(&self, stream: i16, resp: &Response, warnings: &[String]) {
        let (version, compression) = (self.version.max(3), self.body_compression());
        self.outbox
            .push_unbudgeted(|out| {
                encode_response_frame(version, stream, resp, compression, warnings, None, out)
            })
            .await;
    }

    async fn send_error(&self, stream: i16, e: ErrorResponse) {
        self.send(stream, &Response::Error(e), &[]).await;
    }

    /// Answers an error after which the connection is closed.
    async fn fatal(&self, stream: i16, e: &ProtocolError) {
        let err = ErrorResponse::from(e);
        let version = if self.version == 0 { 4 } else { self.version };
        let resp = Response::Error(err);
        self.outbox
            .push_unbudgeted(|out| {
                encode_response_frame(version, stream, &resp, None, &[], None, out)
            })
            .await;
    }

    /// The request-bytes budgets of the node and of the client's address, in
    /// that order (so no two requests wait on each other). `None`: spent,
    /// and the client asked to be told rather than made to wait.
    async fn admit(&self, len: usize) -> Option<(Taken, Taken)> {
        let l = self.server.limits;
        let node = &self.server.request_bytes;
        let ip = &self.ip_budget;
        let (a, b) = (
            permits(len, l.request_bytes),
            permits(len, l.request_bytes_per_ip),
        );
        if self.throw_on_overload {
            let n = node.try_take(a)?;
            let i = ip.try_take(b)?;
            return Some((n, i));
        }
        let n = node.take(a).await;
        let i = ip.take(b).await;
        Some((n, i))
    }

    /// Handles one frame; false when the connection must close.
    async fn handle_frame(&mut self, h: FrameHeader, body: Bytes) -> bool {
        if h.is_response {
            let e = ProtocolError::Malformed(format!(
                "Wrong protocol direction (expected REQUEST, got RESPONSE) for opcode {} ({})",
                h.opcode,
                opcode_name(h.opcode)
            ));
            self.fatal(h.stream, &e).await;
            return false;
        }
        if self.version == 0 {
            self.version = h.version;
        } else if h.version != self.version {
            let e = ErrorResponse::protocol_error(format!(
                "Invalid message version. Got {} but previous messages on this connection had version {}",
                h.version, self.version
            ));
            self.send_error(h.stream, e).await;
            return true;
        }
        // the handshake comes first, once
        let op = h.opcode;
        if !self.ready && op != Opcode::Startup as u8 && op != Opcode::Options as u8 {
            let e = ErrorResponse::protocol_error(format!(
                "Unexpected message {}, expecting STARTUP or OPTIONS",
                opcode_name(op)
            ));
            self.send_error(0, e).await;
            return true;
        }
        if self.ready && op == Opcode::Startup as u8 {
            let e = ErrorResponse::protocol_error(
                "Unexpected message STARTUP, the connection is already initialized",
            );
            self.send_error(h.stream, e).await;
            return true;
        }
        // v5 is final in Cassandra 4.0+: the beta flag is not required
        let env = match decode_request_frame(&h, &body, self.body_compression()) {
            Ok(env) => env,
            Err(e) => {
                self.send_error(h.stream, ErrorResponse::from(&e)).await;
                return true;
            }
        };
        match env.request {
            Request::Options => {
                let mut m = HashMap::new();
                m.insert("CQL_VERSION".to_string(), vec!["3.4.7".to_string()]);
                m.insert(
                    "COMPRESSION".to_string(),
                    vec!["lz4".to_string(), "snappy".to_string()],
                );
                m.insert(
                    "PROTOCOL_VERSIONS".to_string(),
                    vec!["3/v3".to_string(), "4/v4".to_string(), "5/v5".to_string()],
                );
                self.send(h.stream, &Response::Supported(m), &[]).await;
            }
            Request::Startup(opts) => {
                let opts: HashMap<String, String> = opts
                    .into_iter()
                    .map(|(k, v)| (k.to_ascii_uppercase(), v))
                    .collect();
                if let Err(m) = check_cql_version(opts.get("CQL_VERSION")) {
                    self.send_error(h.stream, ErrorResponse::protocol_error(m))
                        .await;
                    return true;
                }
                if let Some(c) = opts.get("COMPRESSION") {
                    match Compression::from_name(c) {
                        Some(c) => self.compression = Some(c),
                        None => {
                            let e = ErrorResponse::protocol_error(format!(
                                "Unknown compression algorithm: {c}"
                            ));
                            self.send_error(h.stream, e).await;
                            return true;
                        }
                    }
                }
                self.throw_on_overload =
                    opts.get("THROW_ON_OVERLOAD").map(String::as_str) == Some("1");
                self.ready = true;
                self.info
                    .started(self.version, &opts, clients::Stage::Ready);
                // READY itself is never compressed in v3/v4 (the client may not know yet)
                let f = encode(self.version, h.stream, &Response::Ready, None, &[], None);
                if self.version >= 5 {
                    self.v5_framing = true;
                    self.outbox
                        .push_switch_to_v5(&f, self.compression == Some(Compression::Lz4));
                } else {
                    self.outbox.push_frame(&f, None);
                }
            }
            Request::AuthResponse(token) => {
                self.server.metrics.auth_successes.inc();
                self.info
                    .authenticated(token.as_deref().unwrap_or_default());
                self.send(h.stream, &Response::AuthSuccess(None), &[]).await;
            }
            Request::Register(types) => {
                for t in &types {
                    if !matches!(
                        t.as_str(),
                        "TOPOLOGY_CHANGE" | "STATUS_CHANGE" | "SCHEMA_CHANGE"
                    ) {
                        let e =
                            ErrorResponse::protocol_error(format!("Invalid value '{t}' for Type"));
                        self.send_error(h.stream, e).await;
                        return true;
                    }
                }
                self.events = Some(types);
                // a control connection: it weighs little on its loop
                if let Some(p) = &self.placed {
                    p.uncount();
                }
                self.send(h.stream, &Response::Ready, &[]).await;
            }
            req => self.dispatch(h, body.len(), req, env.tracing).await,
        }
        true
    }

    /// Runs a request concurrently with the others of the connection, within
    /// its budgets: a slot, the request bytes of the node and of the client's
    /// address, and room for its response.
    async fn dispatch(&mut self, h: FrameHeader, len: usize, req: Request, traced: bool) {
        let queued = sibyl_metrics::stages::NATIVE_TRANSPORT_REQUESTS.enqueue();
        self.info.request();
        let slot = self.slots.take(1).await;
        let Some(request) = self.admit(HEADER_LEN + len).await else {
            let e = ErrorResponse::new(
                ErrorKind::Overloaded,
                "Server is in overloaded state. Cannot accept more requests at this point",
            );
            self.send_error(h.stream, e).await;
            return;
        };
        let cap = self.server.limits.response_bytes_per_connection;
        let estimate = self.response_estimate.load(Ordering::Relaxed).clamp(1, cap);
        let budget = self.response_budget.clone();
        let mut reserved = budget.take(permits(estimate, cap)).await;
        let estimates = self.response_estimate.clone();
        let server = self.server.clone();
        let client = self.client.clone();
        let outbox = self.outbox.clone();
        let version = self.version;
        let compression = self.body_compression();
        let stream = h.stream;
        let is_use = matches!(&req, Request::Query { query, .. }
            if query.trim_start().get(..3).is_some_and(|w| w.eq_ignore_ascii_case("use")));
        let client_ip = self.info.address.ip();
        let fut = async move {
            let _running = queued.start();
            // traced when the client asks (the frame's TRACING flag) or, at
            // the node's trace probability, when it does not
            let trace = (traced || server.tracer.sampled())
                .then(|| server.begin_trace(&req, client_ip))
                .flatten();
            // boxed where it is made: each wrapper around it (the panic's
            // catch, the trace's and the warnings' scopes) and this
            // future's state then hold a pointer, not a copy of the
            // request's future (2.5 KB, moved into each as it is built)
            let collector = sibyl_service::client_warn::Collector::default();
            let processed = answered(
                sibyl_service::client_warn::collecting(
                    &collector,
                    sibyl_tracing::scope(
                        trace.clone(),
                        std::panic::AssertUnwindSafe(Box::pin(
                            server.process(req, &client, version),
                        ))
                        .catch_unwind(),
                    ),
                )
                .await,
            );
            let mut warned = collector.take();
            let (resp, warnings, tracing_id) = match processed {
                Ok(mut o) => {
                    // the statement's own warnings first: they are decided
                    // before it runs (Cassandra's order)
                    o.warnings.append(&mut warned);
                    if let Some(ev) = o.event {
                        let _ = server.events.send(Event::SchemaChange(*ev));
                    }
                    // only a client that asked learns the session
                    let id = trace
                        .as_ref()
                        .filter(|_| traced)
                        .map(|t| *t.session_id.as_bytes());
                    (Response::Result(o.body), o.warnings, id)
                }
                // an error carries the warnings gathered until then, as
                // Cassandra's (a read failing past the tombstone threshold)
                Err(e) => (Response::Error(error_response(&e)), warned, None),
            };
            if let Some(t) = &trace {
                t.stop();
            }
            // encoded straight into the connection's outbox; the response
            // holds its real size from the budget until written
            let pushed = outbox.push_response(
                |out| {
                    encode_response_frame(
                        version,
                        stream,
                        &resp,
                        compression,
                        &warnings,
                        tracing_id,
                        out,
                    )
                },
                |len| {
                    estimates.store(len, Ordering::Relaxed);
                    let need = permits(len, cap);
                    if need > reserved.units() && !reserved.try_grow(need - reserved.units()) {
                        return Err((slot, request, reserved));
                    }
                    Ok(Held {
                        _slot: slot,
                        _request: request,
                        _response: reserved,
                    })
                },
            );
            if let Err(refused) = pushed {
                let (slot, request, reserved) = refused.back;
                // give back what is held before waiting: no two responses
                // each hold part of the budget while waiting for the rest
                drop(reserved);
                let need = permits(refused.frame.len(), cap);
                let held = Held {
                    _slot: slot,
                    _request: request,
                    _response: budget.take(need).await,
                };
                outbox.push_frame(&refused.frame, Some(held));
            }
        };
        // boxed: the task then holds a pointer, and tokio's moves of the
        // task's state (when spawned, when its output is stored) copy 16
        // bytes, not the whole request's future; nor does this function's
        // own future (nor its callers') hold one
        let mut fut = Box::pin(fut);
        if is_use {
            // USE changes connection state: finish it before reading further requests
            fut.await;
            self.info.set_keyspace(self.client.lock().keyspace.clone());
        } else {
            // polled once here: a request done at once (a read served from
            // memory) needs no task of its own. One that waits is spawned;
            // its task's first poll registers the task's own waker (a wake
            // meant for this first poll only wakes the reader, harmlessly)
            let done = std::future::poll_fn(|cx| {
                std::task::Poll::Ready(std::future::Future::poll(fut.as_mut(), cx).is_ready())
            })
            .await;
            if !done {
                tokio::spawn(fut);
            }
        }
    }
}

/// The answer to a request whose processing may have panicked: a panic is
/// answered with a server error (and logged), never left without an
/// answer; a bug in one statement's path must not hang the client or take
/// the connection down.
fn answered(
    r: Result<Result<Outcome, Error>, Box<dyn std::any::Any + Send>>,
) -> Result<Outcome, Error> {
    match r {
        Ok(r) => r,
        Err(panic) => {
            let what = panic
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "unknown panic".into());
            tracing::error!("Unexpected exception during request: {what}");
            Err(Error::Server(format!("java.lang.RuntimeException: {what}")))
        }
    }
}

fn options_of(p: sibyl_protocol::QueryParameters) -> QueryOptions {
    let (values, names) = match p.values {
        Values::Positional(v) => (v, None),
        Values::Named(n) => {
            let names = n.iter().map(|(k, _)| k.to_lowercase()).collect();
            (n.into_iter().map(|(_, v)| v).collect(), Some(names))
        }
    };
    QueryOptions {
        consistency: p.consistency,
        serial_consistency: p.serial_consistency,
        values,
        names,
        page_size: p.page_size,
        paging_state: p.paging_state,
        timestamp: p.timestamp,
        keyspace: p.keyspace,
        now_in_seconds: p.now_in_seconds,
        skip_metadata: p.skip_metadata,
    }
}

/// Cassandra's warning about `USE` with prepared statements, once per
/// connection.
fn use_warning(
    client: &parking_lot::Mutex<ClientState>,
    id: &[u8],
    statement_keyspace: Option<&str>,
) -> Option<String> {
    let mut c = client.lock();
    if c.use_warning_issued {
        return None;
    }
    c.use_warning_issued = true;
    let hex: String = id.iter().map(|b| format!("{b:02x}")).collect();
    Some(format!(
        "`USE <keyspace>` with prepared statements is considered to be an anti-pattern due to ambiguity in non-qualified table names. Please consider removing instances of `Session#setKeyspace(<keyspace>)`, `Session#execute(\"USE <keyspace>\")` and `cluster.newSession(<keyspace>)` from your code, and always use fully qualified table names (e.g. <keyspace>.<table>). Keyspace used: {}, statement keyspace: {}, statement id: {hex}",
        c.keyspace.as_deref().unwrap_or("null"),
        statement_keyspace.unwrap_or("null")
    ))
}

impl Server {
    /// Opens the trace session of a request, named and with the parameters
    /// Cassandra's messages give theirs (`QueryMessage.traceQuery`, …);
    /// requests that are not statements are not traced.
    fn begin_trace(&self, req: &Request, client: IpAddr) -> Option<Arc<TraceState>> {
        let mut params = BTreeMap::new();
        let mut options = |consistency: sibyl_protocol::Consistency,
                           serial: Option<sibyl_protocol::Consistency>,
                           page_size: Option<i32>| {
            if let Some(n) = page_size.filter(|n| *n > 0) {
                params.insert("page_size".to_string(), n.to_string());
            }
            params.insert(
                "consistency_level".to_string(),
                consistency.name().to_string(),
            );
            params.insert(
                "serial_consistency_level".to_string(),
                serial
                    .unwrap_or(sibyl_protocol::Consistency::Serial)
                    .name()
                    .to_string(),
            );
        };
        let request = match req {
            Request::Query { query, params: p } => {
                options(p.consistency, p.serial_consistency, p.page_size);
                params.insert("query".to_string(), query.clone());
                "Execute CQL3 query"
            }
            Request::Execute { id, params: p, .. } => {
                options(p.consistency, p.serial_consistency, p.page_size);
                if let Some(prepared) = self.qp.get_prepared(id) {
                    params.insert("query".to_string(), prepared.query.clone());
                    // the bound values as CQL literals, as Cassandra's ExecuteMessage
                    if let Values::Positional(values) = &p.values {
                        for (i, (spec, v)) in prepared.bind_specs.iter().zip(values).enumerate() {
                            let mut literal = match v {
                                Value::Set(b) => spec.typ.to_cql_literal(b),
                                Value::Null => "null".to_string(),
                                Value::Unset => continue,
                            };
                            if literal.len() > 1000 {
                                let mut cut = 1000;
                                while !literal.is_char_boundary(cut) {
                                    cut -= 1;
                                }
                                literal.truncate(cut);
                                literal.push_str("...'");
                            }
                            params.insert(format!("bound_var_{i}_{}", spec.name), literal);
                        }
                    }
                }
                "Execute CQL3 prepared query"
            }
            Request::Batch(b) => {
                options(b.consistency, b.serial_consistency, None);
                "Execute batch of CQL3 queries"
            }
            Request::Prepare { query, .. } => {
                params.insert("query".to_string(), query.clone());
                "Preparing CQL3 query"
            }
            _ => return None,
        };
        self.tracer
            .begin(TraceType::Query, client, request.to_string(), params)
    }

    /// A request's processing. A plain function returning the future of
    /// its kind of request: each kind is processed by a function of its
    /// own, and this future is only as large as the largest of theirs
    /// (every request's future, boxed and copied once, holds it). The kinds
    /// other than EXECUTE are boxed: a prepared statement's execution is
    /// what most requests are.
    fn process<'a>(
        &'a self,
        req: Request,
        client: &'a parking_lot::Mutex<ClientState>,
        version: u8,
    ) -> impl std::future::Future<Output = Result<Outcome, Error>> + 'a {
        use futures::future::Either;
        type Boxed<'b> = std::pin::Pin<
            Box<dyn std::future::Future<Output = Result<Outcome, Error>> + Send + 'b>,
        >;
        match req {
            Request::Execute {
                id,
                result_metadata_id,
                params,
            } => {
                Either::Left(self.process_execute(id, result_metadata_id, params, client, version))
            }
            Request::Query { query, params } => {
                Either::Right(Box::pin(self.process_query(query, params, client)) as Boxed<'a>)
            }
            Request::Prepare { query, keyspace } => {
                Either::Right(Box::pin(self.process_prepare(query, keyspace, client)) as Boxed<'a>)
            }
            Request::Batch(b) => {
                Either::Right(Box::pin(self.process_batch(b, client)) as Boxed<'a>)
            }
            other => {
                let e = Error::Protocol(format!(
                    "Unexpected message {}",
                    opcode_name(other.opcode())
                ));
                Either::Right(Box::pin(std::future::ready(Err(e))) as Boxed<'a>)
            }
        }
    }

    async fn process_query(
        &self,
        query: String,
        params: sibyl_protocol::QueryParameters,
        client: &parking_lot::Mutex<ClientState>,
    ) -> Result<Outcome, Error> {
        let qp = &self.qp;
        sibyl_tracing::trace(|| format!("Parsing {query}"));
        let st = sibyl_cql::parse_statement(&query)?;
        sibyl_tracing::trace(|| "Preparing statement");
        let opts = options_of(params);
        // Cassandra's `QueryProcessor.process`, for a query with
        // its values
        if opts.names.is_none() && opts.values.len() != st.bind_markers.len() {
            return Err(Error::Invalid("Invalid amount of bind variables".into()));
        }
        let mut c = client.lock().clone();
        self.metrics.regular_executed.inc();
        let out = qp.execute(&st, &mut c, &opts).await;
        if let Statement::Use(_) = &st.statement {
            if out.is_ok() {
                *client.lock() = c;
            }
        }
        out
    }

    async fn process_prepare(
        &self,
        query: String,
        keyspace: Option<String>,
        client: &parking_lot::Mutex<ClientState>,
    ) -> Result<Outcome, Error> {
        let qp = &self.qp;
        let c = client.lock().clone();
        let p = qp.prepare(&query, &c, keyspace.as_deref())?;
        let mut warnings = Vec::new();
        if !p.statement.statement.is_fully_qualified() {
            let id = sibyl_cql3::query::prepared_id(&query, c.keyspace.as_deref());
            warnings.extend(use_warning(client, &id, c.keyspace.as_deref()));
        }
        Ok(Outcome {
            body: qp.prepared_result(&p),
            warnings,
            event: None,
        })
    }

    async fn process_execute(
        &self,
        id: Bytes,
        result_metadata_id: Option<Bytes>,
        params: sibyl_protocol::QueryParameters,
        client: &parking_lot::Mutex<ClientState>,
        version: u8,
    ) -> Result<Outcome, Error> {
        let qp = &self.qp;
        let Some(p) = qp.get_prepared(&id) else {
            return Err(Error::Unprepared(id));
        };
        let mut opts = options_of(params);
        if opts.keyspace.is_none() {
            opts.keyspace = p.keyspace.clone();
        }
        let mut c = client.lock().clone();
        self.metrics.prepared_executed.inc();
        // an unqualified statement run under another keyspace than it
        // was prepared under (batches are not checked, as in Cassandra)
        let warned = if !p.statement.statement.is_fully_qualified()
            && c.keyspace != p.keyspace
            && !matches!(p.statement.statement, Statement::Batch(_))
        {
            use_warning(client, &id, p.keyspace.as_deref())
        } else {
            None
        };
        let mut out = qp.execute(&p.statement, &mut c, &opts).await?;
        out.warnings.splice(0..0, warned);
        if let ResultBody::Rows { metadata, .. } = &mut out.body {
            if version >= 5 {
                if let Some(rid) = &result_metadata_id {
                    if rid != &p.result_metadata_id {
                        metadata.new_metadata_id = Some(p.result_metadata_id.clone());
                        metadata.no_metadata = false;
                    }
                }
            }
        }
        Ok(out)
    }

    async fn process_batch(
        &self,
        b: sibyl_protocol::Batch,
        client: &parking_lot::Mutex<ClientState>,
    ) -> Result<Outcome, Error> {
        let qp = &self.qp;
        let c = client.lock().clone();
        let bt = match b.batch_type {
            0 => BatchType::Logged,
            1 => BatchType::Unlogged,
            2 => BatchType::Counter,
            x => return Err(Error::Protocol(format!("Unknown batch type {x}"))),
        };
        let now = b.now_in_seconds.unwrap_or_else(sibyl_db::now_in_seconds);
        let ts = b
            .timestamp
            .unwrap_or_else(sibyl_types::timeuuid::timestamp_micros_now);
        let mut parsed: Vec<(ParsedStatement, Option<String>, Vec<Value>)> = Vec::new();
        for s in b.statements {
            let (p, pks): (ParsedStatement, Option<String>) = match s.kind {
                BatchQueryKind::Query(q) => {
                    self.metrics.regular_executed.inc();
                    (sibyl_cql::parse_statement(&q)?, None)
                }
                BatchQueryKind::Prepared(id) => {
                    let Some(p) = qp.get_prepared(&id) else {
                        return Err(Error::Unprepared(id));
                    };
                    self.metrics.prepared_executed.inc();
                    (p.statement.clone(), p.keyspace.clone())
                }
            };
            if s.values.len() != p.bind_markers.len() {
                return Err(Error::Invalid(format!(
                    "There were {} markers(?) in CQL but {} bound variables",
                    p.bind_markers.len(),
                    s.values.len()
                )));
            }
            parsed.push((p, pks, s.values));
        }
        let bindings: Vec<sibyl_cql3::terms::Bindings<'_>> = parsed
            .iter()
            .map(|(_, _, values)| sibyl_cql3::terms::Bindings { values })
            .collect();
        let evs: Vec<sibyl_cql3::terms::Eval<'_>> = bindings
            .iter()
            .map(|bindings| sibyl_cql3::terms::Eval { bindings })
            .collect();
        let children: Vec<BatchChild<'_>> = parsed
            .iter()
            .zip(&evs)
            .map(|((p, pks, _), ev)| BatchChild {
                statement: &p.statement,
                memo: &p.memo,
                ev,
                keyspace: b.keyspace.clone().or(pks.clone()),
            })
            .collect();
        let opts = QueryOptions {
            consistency: b.consistency,
            serial_consistency: b.serial_consistency,
            keyspace: b.keyspace.clone(),
            now_in_seconds: Some(now),
            ..Default::default()
        };
        // (this whole function is boxed by `process`)
        qp.execute_batch(bt, &children, &c, &opts, None, ts, now)
            .await
    }
}

#[cfg(test)]
mod panics {
    use super::*;

    fn boom() -> Result<Outcome, Error> {
        panic!("index out of bounds: the len is 1 but the index is 1")
    }

    /// No panic on a statement's path goes unanswered: it becomes a server
    /// error the client reads (and the connection lives on).
    #[test]
    fn a_panicking_request_is_answered_with_a_server_error() {
        let r = answered(futures::executor::block_on(
            std::panic::AssertUnwindSafe(async { boom() }).catch_unwind(),
        ));
        match r {
            Err(Error::Server(m)) => assert!(m.contains("index out of bounds"), "{m}"),
            Err(e) => panic!("unexpected error {e}"),
            Ok(_) => panic!("expected an error"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_turn_is_the_requests_in_flight_within_its_bounds() {
        let slots = Budget::new(MAX_IN_FLIGHT_PER_CONNECTION);
        let held = |n| slots.try_take(n).unwrap();
        let turn = Turn::default();
        assert_eq!(turn.size(None, &slots), MIN_TURN);
        let a = held(4);
        assert_eq!(turn.size(None, &slots), MIN_TURN);
        let b = held(28);
        assert_eq!(turn.size(None, &slots), 32);
        let b2 = held(64);
        assert_eq!(turn.size(None, &slots), 96, "96 in flight");
        let c = held(896);
        assert_eq!(turn.size(None, &slots), MAX_TURN, "every slot held");
        // a fixed size is kept whatever is in flight
        assert_eq!(turn.size(Some(16), &slots), 16);
        drop((a, b, b2, c));
        assert_eq!(turn.size(None, &slots), MIN_TURN, "all given back");
    }

    #[tokio::test]
    async fn the_requests_one_read_brings_count_as_half_of_the_clients_in_flight() {
        let slots = Budget::new(MAX_IN_FLIGHT_PER_CONNECTION);
        let mut turn = Turn::default();
        // a read brings 64 requests: 128 in flight at the client, nothing
        // held (each was answered at once)
        for _ in 0..64 {
            turn.take(None, &slots).await;
        }
        turn.reading();
        assert_eq!(turn.size(None, &slots), MAX_TURN);
        // the estimate decays by an eighth a read that brings fewer
        turn.reading();
        assert_eq!(turn.burst, 56);
        assert_eq!(turn.size(None, &slots), 112);
        for _ in 0..40 {
            turn.reading();
        }
        assert_eq!(turn.size(None, &slots), MIN_TURN, "the client went quiet");
        // the next turn takes its size from the reads so far (twelve
        // turns of 8 end where a turn starts)
        for _ in 0..96 {
            turn.take(None, &slots).await;
        }
        assert_eq!(turn.started, 0);
        turn.reading();
        turn.take(None, &slots).await;
        assert_eq!(turn.size, MAX_TURN);
    }

    #[tokio::test]
    async fn a_turn_counts_its_requests_and_starts_again_at_its_size() {
        let slots = Budget::new(MAX_IN_FLIGHT_PER_CONNECTION);
        let _held = slots.try_take(64).unwrap();
        let mut turn = Turn::default();
        for i in 1..=128 {
            turn.take(None, &slots).await;
            assert_eq!(turn.size, 64);
            assert_eq!(turn.started, i % 64, "request {i}");
        }
        // a fixed size of 0 has no turns: nothing is counted
        let mut all = Turn::default();
        all.take(Some(0), &slots).await;
        assert_eq!(all.started, 0);
    }
}
