//! The CQL native protocol server: connections, STARTUP/OPTIONS, v5 segment
//! framing, compression, many requests in flight per connection (bounded),
//! events, and the one place where errors become CQL error codes.

use bytes::{Buf, Bytes, BytesMut};
use sibyl_cql::{BatchType, ParsedStatement, Statement};
use sibyl_cql3::error::Error;
use sibyl_cql3::query::{BatchChild, ClientState, Outcome, QueryOptions, QueryProcessor};
use sibyl_protocol::segment::{encode_segments, FrameReassembler, SegmentDecoder};
use sibyl_protocol::{
    decode_request_frame, encode_response_frame, BatchQueryKind, Compression, ErrorKind,
    ErrorResponse, Event, FrameHeader, ProtocolError, Request, Response, ResultBody, Value, Values,
    HEADER_LEN,
};
use sibyl_service::ServiceError;
use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{broadcast, mpsc, Semaphore};

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
        ServiceError::Overloaded(_) => ErrorKind::Overloaded,
        ServiceError::Truncate(_) => ErrorKind::TruncateError,
        ServiceError::Invalid(_) => ErrorKind::Invalid,
        ServiceError::Replica(_) | ServiceError::Metadata(_) | ServiceError::SchemaConflict => {
            ErrorKind::ServerError
        }
    }
}

/// Shared server state.
pub struct Server {
    pub qp: Arc<QueryProcessor>,
    pub events: broadcast::Sender<Event>,
    pub max_frame_bytes: usize,
    pub release_version: String,
}

impl Server {
    /// Accepts connections until `shutdown` fires.
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
                        tokio::spawn(async move {
                            if let Err(e) = s.connection(sock, peer, sd).await {
                                tracing::debug!("connection {peer} closed: {e}");
                            }
                        });
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
        peer: SocketAddr,
        mut shutdown: tokio::sync::watch::Receiver<bool>,
    ) -> std::io::Result<()> {
        let (mut rd, mut wr) = sock.into_split();
        // writer task: frames (already encoded) are batched into one write
        let (tx, mut rx) = mpsc::channel::<Outgoing>(MAX_IN_FLIGHT_PER_CONNECTION);
        let writer = tokio::spawn(async move {
            let mut v5 = false;
            let mut lz4 = false;
            let mut buf = Vec::with_capacity(64 * 1024);
            let mut frames = Vec::with_capacity(64 * 1024);
            while let Some(first) = rx.recv().await {
                // let the requests already running finish first, so their
                // responses go out in the same write (one send per batch
                // instead of one per response)
                tokio::task::yield_now().await;
                let mut item = Some(first);
                while let Some(o) = item.take() {
                    match o {
                        Outgoing::Frame(f) => frames.extend_from_slice(&f),
                        Outgoing::SwitchToV5(f, with_lz4) => {
                            lz4 = with_lz4;
                            // the READY/AUTHENTICATE that precedes segment framing is sent as a plain frame
                            frames.extend_from_slice(&f);
                            buf.extend_from_slice(&frames);
                            frames.clear();
                            v5 = true;
                        }
                    }
                    if frames.len() < 256 * 1024 {
                        item = rx.try_recv().ok();
                    }
                }
                if v5 && !frames.is_empty() {
                    encode_segments(&frames, lz4, &mut buf);
                } else {
                    buf.extend_from_slice(&frames);
                }
                frames.clear();
                if wr.write_all(&buf).await.is_err() {
                    break;
                }
                buf.clear();
            }
        });
        let mut conn = Conn {
            server: self.clone(),
            version: 0,
            compression: None,
            v5_framing: false,
            client: Arc::new(tokio::sync::Mutex::new(ClientState::default())),
            tx: tx.clone(),
            slots: Arc::new(Semaphore::new(MAX_IN_FLIGHT_PER_CONNECTION)),
            events: None,
            peer,
        };
        let mut buf = BytesMut::with_capacity(64 * 1024);
        let mut seg_decoder = SegmentDecoder::new(false);
        let mut reassembler = FrameReassembler::new(self.max_frame_bytes);
        let mut event_rx: Option<broadcast::Receiver<Event>> = None;
        loop {
            // process everything buffered
            loop {
                if conn.v5_framing {
                    match seg_decoder.decode(&mut buf) {
                        Ok(Some(seg)) => match reassembler.push(seg) {
                            Ok(frames) => {
                                for (h, body) in frames {
                                    conn.handle_frame(h, body).await;
                                }
                            }
                            Err(e) => {
                                conn.fatal(0, &e).await;
                                drop(tx);
                                let _ = writer.await;
                                return Ok(());
                            }
                        },
                        Ok(None) => break,
                        Err(e) => {
                            conn.fatal(0, &e).await;
                            drop(tx);
                            let _ = writer.await;
                            return Ok(());
                        }
                    }
                } else {
                    match FrameHeader::parse(&buf) {
                        Ok(Some(h)) => {
                            if let Err(e) = h.check_length(self.max_frame_bytes) {
                                conn.version = conn.version.max(h.version);
                                conn.fatal(h.stream, &e).await;
                                drop(tx);
                                let _ = writer.await;
                                return Ok(());
                            }
                            let total = HEADER_LEN + h.length as usize;
                            if buf.len() < total {
                                break;
                            }
                            buf.advance(HEADER_LEN);
                            let body = buf.split_to(h.length as usize).freeze();
                            let was_v5 = conn.v5_framing;
                            conn.handle_frame(h, body).await;
                            if conn.v5_framing && !was_v5 {
                                seg_decoder =
                                    SegmentDecoder::new(conn.compression == Some(Compression::Lz4));
                            }
                        }
                        Ok(None) => break,
                        Err(e) => {
                            let stream = if buf.len() >= 4 {
                                i16::from_be_bytes([buf[2], buf[3]])
                            } else {
                                0
                            };
                            if let ProtocolError::UnsupportedVersion(v) = &e {
                                // answer in a version the client can read, so drivers negotiate down
                                conn.version = if (3..=5).contains(v) { *v } else { 4 };
                            }
                            conn.fatal(stream, &e).await;
                            drop(tx);
                            let _ = writer.await;
                            return Ok(());
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
        drop(conn);
        drop(tx);
        let _ = writer.await;
        Ok(())
    }
}

enum Outgoing {
    Frame(Vec<u8>),
    /// This frame is the last before v5 segment framing starts.
    SwitchToV5(Vec<u8>, bool),
}

struct Conn {
    server: Arc<Server>,
    version: u8,
    compression: Option<Compression>,
    v5_framing: bool,
    client: Arc<tokio::sync::Mutex<ClientState>>,
    tx: mpsc::Sender<Outgoing>,
    slots: Arc<Semaphore>,
    events: Option<Vec<String>>,
    peer: SocketAddr,
}

fn encode(
    version: u8,
    stream: i16,
    resp: &Response,
    compression: Option<Compression>,
    warnings: &[String],
) -> Vec<u8> {
    let mut out = Vec::with_capacity(128);
    encode_response_frame(version, stream, resp, compression, warnings, None, &mut out);
    out
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
        let f = encode(
            self.version.max(3),
            stream,
            resp,
            self.body_compression(),
            warnings,
        );
        let _ = self.tx.send(Outgoing::Frame(f)).await;
    }

    async fn fatal(&self, stream: i16, e: &ProtocolError) {
        let err = ErrorResponse::from(e);
        let f = encode(
            if self.version == 0 { 4 } else { self.version },
            stream,
            &Response::Error(err),
            None,
            &[],
        );
        let _ = self.tx.send(Outgoing::Frame(f)).await;
    }

    async fn handle_frame(&mut self, h: FrameHeader, body: Bytes) {
        if self.version == 0 {
            self.version = h.version;
        } else if h.version != self.version {
            let e = ErrorResponse::protocol_error(format!(
                "Invalid message version. Got {} but previous messages on this connection had version {}",
                h.version, self.version
            ));
            self.send(h.stream, &Response::Error(e), &[]).await;
            return;
        }
        // v5 is final in Cassandra 4.0+: the beta flag is not required
        let env = match decode_request_frame(&h, &body, self.body_compression()) {
            Ok(env) => env,
            Err(e) => {
                let err = ErrorResponse::from(&e);
                self.send(h.stream, &Response::Error(err), &[]).await;
                return;
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
                if let Some(c) = opts.get("COMPRESSION") {
                    match Compression::from_name(c) {
                        Some(c) => self.compression = Some(c),
                        None => {
                            let e = ErrorResponse::protocol_error(format!(
                                "Unknown compression algorithm: {c}"
                            ));
                            self.send(h.stream, &Response::Error(e), &[]).await;
                            return;
                        }
                    }
                }
                // READY itself is never compressed in v3/v4 (the client may not know yet)
                let f = encode(self.version, h.stream, &Response::Ready, None, &[]);
                if self.version >= 5 {
                    self.v5_framing = true;
                    let _ = self
                        .tx
                        .send(Outgoing::SwitchToV5(
                            f,
                            self.compression == Some(Compression::Lz4),
                        ))
                        .await;
                } else {
                    let _ = self.tx.send(Outgoing::Frame(f)).await;
                }
            }
            Request::AuthResponse(_) => {
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
                        self.send(h.stream, &Response::Error(e), &[]).await;
                        return;
                    }
                }
                self.events = Some(types);
                self.send(h.stream, &Response::Ready, &[]).await;
            }
            req => {
                // run concurrently; bounded in-flight
                let permit = match self.slots.clone().acquire_owned().await {
                    Ok(p) => p,
                    Err(_) => return,
                };
                let server = self.server.clone();
                let client = self.client.clone();
                let tx = self.tx.clone();
                let version = self.version;
                let compression = self.body_compression();
                let stream = h.stream;
                let is_use = matches!(&req, Request::Query { query, .. } if query.trim_start().len() >= 3 && query.trim_start()[..3].eq_ignore_ascii_case("use"));
                let fut = async move {
                    let (resp, warnings) =
                        match Box::pin(server.process(req, &client, version)).await {
                            Ok(o) => {
                                if let Some(ev) = o.event {
                                    let _ = server.events.send(Event::SchemaChange(ev));
                                }
                                (Response::Result(o.body), o.warnings)
                            }
                            Err(e) => (Response::Error(error_response(&e)), Vec::new()),
                        };
                    let f = encode(version, stream, &resp, compression, &warnings);
                    let _ = tx.send(Outgoing::Frame(f)).await;
                    drop(permit);
                };
                if is_use {
                    // USE changes connection state: finish it before reading further requests
                    fut.await;
                } else {
                    tokio::spawn(fut);
                }
            }
        }
        let _ = self.peer;
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

impl Server {
    async fn process(
        &self,
        req: Request,
        client: &tokio::sync::Mutex<ClientState>,
        version: u8,
    ) -> Result<Outcome, Error> {
        let qp = &self.qp;
        match req {
            Request::Query { query, params } => {
                let st = sibyl_cql::parse_statement(&query)?;
                let opts = options_of(params);
                let mut c = client.lock().await.clone();
                let out = qp.execute(&st, &mut c, &opts).await;
                if let Statement::Use(_) = &st.statement {
                    if out.is_ok() {
                        *client.lock().await = c;
                    }
                }
                out
            }
            Request::Prepare { query, keyspace } => {
                let c = client.lock().await.clone();
                let p = qp.prepare(&query, &c, keyspace.as_deref())?;
                Ok(Outcome {
                    body: qp.prepared_result(&p),
                    warnings: Vec::new(),
                    event: None,
                })
            }
            Request::Execute {
                id,
                result_metadata_id,
                params,
            } => {
                let Some(p) = qp.get_prepared(&id) else {
                    return Err(Error::Unprepared(id));
                };
                let mut opts = options_of(params);
                if opts.keyspace.is_none() {
                    opts.keyspace = p.keyspace.clone();
                }
                let mut c = client.lock().await.clone();
                let mut out = qp.execute(&p.statement, &mut c, &opts).await?;
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
            Request::Batch(b) => {
                let c = client.lock().await.clone();
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
                        BatchQueryKind::Query(q) => (sibyl_cql::parse_statement(&q)?, None),
                        BatchQueryKind::Prepared(id) => {
                            let Some(p) = qp.get_prepared(&id) else {
                                return Err(Error::Unprepared(id));
                            };
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
                qp.execute_batch(bt, &children, &c, &opts, None, ts, now)
                    .await
            }
            _ => Err(Error::Protocol("Unexpected message".into())),
        }
    }
}
