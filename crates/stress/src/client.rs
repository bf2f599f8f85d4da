//! A light CQL client on Sibyl's own protocol codec: one connection carries
//! many requests at once (stream ids), a reader task hands each response to
//! its waiter. Enough for load generation against any CQL server: STARTUP
//! with LZ4/Snappy compression, SASL PLAIN authentication
//! (PasswordAuthenticator), QUERY, PREPARE, EXECUTE, BATCH (protocol v4), and
//! token-aware routing over the nodes it was given ([`Cluster`]).

use bytes::{Buf, Bytes, BytesMut};
use sibyl_protocol::{
    decode_response_frame, encode_request_frame, Batch, BatchQueryKind, BatchStatement,
    Compression, Consistency, ErrorResponse, FrameHeader, PreparedMetadata, QueryParameters,
    Request, Response, ResultBody, Value, Values, HEADER_LEN,
};
use std::collections::HashMap;
use std::sync::atomic::{AtomicI16, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::{mpsc, oneshot};

const VERSION: u8 = 4;

#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("connection to {0} failed: {1}")]
    Connect(String, std::io::Error),
    #[error("connection closed")]
    Closed,
    #[error("server error {code:#06x}: {message}")]
    Server { code: i32, message: String },
    #[error("protocol error: {0}")]
    Protocol(String),
    #[error("{0}")]
    Auth(String),
}

type Waiters = Arc<Mutex<HashMap<i16, oneshot::Sender<Result<Response, ClientError>>>>>;

/// How to open connections: `-mode user= password= compression=`.
#[derive(Debug, Clone, Default)]
pub struct ConnectOptions {
    pub user: Option<String>,
    pub password: Option<String>,
    pub compression: Option<Compression>,
}

/// One connection.
pub struct Connection {
    tx: mpsc::Sender<Vec<u8>>,
    waiters: Waiters,
    next_stream: AtomicI16,
    compression: Option<Compression>,
    pub addr: String,
}

/// What a request returned that load generation cares about.
#[derive(Debug)]
pub enum Reply {
    Rows(Vec<Vec<Option<Bytes>>>),
    Other,
}

impl Reply {
    pub fn row_count(&self) -> usize {
        match self {
            Reply::Rows(r) => r.len(),
            Reply::Other => 0,
        }
    }
}

/// A prepared statement: its id and the bind markers' names, types and
/// partition-key positions.
#[derive(Debug, Clone)]
pub struct Prepared {
    pub id: Bytes,
    pub metadata: PreparedMetadata,
}

impl Connection {
    pub async fn connect(
        addr: &str,
        opts: &ConnectOptions,
    ) -> Result<Arc<Connection>, ClientError> {
        let sock = TcpStream::connect(addr)
            .await
            .map_err(|e| ClientError::Connect(addr.to_string(), e))?;
        let _ = sock.set_nodelay(true);
        let (mut rd, mut wr) = sock.into_split();
        let (tx, mut rx) = mpsc::channel::<Vec<u8>>(4096);
        let waiters: Waiters = Arc::new(Mutex::new(HashMap::new()));
        // writer: batches whatever is queued into one write
        tokio::spawn(async move {
            let mut buf = Vec::with_capacity(64 * 1024);
            while let Some(f) = rx.recv().await {
                // let the other workers queue their requests first: one send per batch
                tokio::task::yield_now().await;
                buf.extend_from_slice(&f);
                while buf.len() < 256 * 1024 {
                    match rx.try_recv() {
                        Ok(f) => buf.extend_from_slice(&f),
                        Err(_) => break,
                    }
                }
                if wr.write_all(&buf).await.is_err() {
                    break;
                }
                buf.clear();
            }
        });
        let w2 = waiters.clone();
        let compression = opts.compression;
        tokio::spawn(async move {
            let mut buf = BytesMut::with_capacity(64 * 1024);
            loop {
                while let Ok(Some(h)) = FrameHeader::parse(&buf) {
                    let total = HEADER_LEN + h.length as usize;
                    if buf.len() < total {
                        break;
                    }
                    buf.advance(HEADER_LEN);
                    let body = buf.split_to(h.length as usize);
                    // the body is decompressed only when its COMPRESSION flag is set
                    let r = decode_response_frame(&h, &body, compression)
                        .map(|e| e.response)
                        .map_err(|e| ClientError::Protocol(e.to_string()));
                    let waiter = w2.lock().ok().and_then(|mut w| w.remove(&h.stream));
                    if let Some(w) = waiter {
                        let _ = w.send(r);
                    }
                }
                if buf.capacity() - buf.len() < 16 * 1024 {
                    buf.reserve(64 * 1024);
                }
                match rd.read_buf(&mut buf).await {
                    Ok(0) | Err(_) => break,
                    Ok(_) => {}
                }
            }
            if let Ok(mut w) = w2.lock() {
                for (_, s) in w.drain() {
                    let _ = s.send(Err(ClientError::Closed));
                }
            }
        });
        let c = Arc::new(Connection {
            tx,
            waiters,
            next_stream: AtomicI16::new(0),
            compression: opts.compression,
            addr: addr.to_string(),
        });
        let mut startup = HashMap::new();
        startup.insert("CQL_VERSION".to_string(), "3.0.0".to_string());
        if let Some(comp) = opts.compression {
            startup.insert("COMPRESSION".to_string(), comp.name().to_string());
        }
        match c.send(Request::Startup(startup)).await? {
            Response::Ready => Ok(c),
            Response::Authenticate(class) => {
                let (Some(user), Some(password)) = (&opts.user, &opts.password) else {
                    return Err(ClientError::Auth(format!(
                        "{addr} requires authentication ({class}): give -mode user=NAME password=SECRET"
                    )));
                };
                // SASL PLAIN: authzid NUL authcid NUL password
                let mut token = Vec::with_capacity(user.len() + password.len() + 2);
                token.push(0);
                token.extend_from_slice(user.as_bytes());
                token.push(0);
                token.extend_from_slice(password.as_bytes());
                match c
                    .send(Request::AuthResponse(Some(Bytes::from(token))))
                    .await
                {
                    Ok(Response::AuthSuccess(_)) => Ok(c),
                    Ok(Response::AuthChallenge(_)) => Err(ClientError::Auth(format!(
                        "{addr}: {class} asked for more than a user name and password"
                    ))),
                    Ok(other) => Err(ClientError::Protocol(format!(
                        "unexpected answer to AUTH_RESPONSE: {other:?}"
                    ))),
                    Err(ClientError::Server { message, .. }) => Err(ClientError::Auth(format!(
                        "{addr}: authentication failed: {message}"
                    ))),
                    Err(e) => Err(e),
                }
            }
            other => Err(ClientError::Protocol(format!(
                "unexpected answer to STARTUP: {other:?}"
            ))),
        }
    }

    async fn send(&self, req: Request) -> Result<Response, ClientError> {
        let (tx, rx) = oneshot::channel();
        let mut tx = Some(tx);
        let mut stream = 0;
        for _ in 0..0x8000 {
            let s = self.next_stream.fetch_add(1, Ordering::Relaxed) & 0x7fff;
            let taken = {
                let mut w = self.waiters.lock().map_err(|_| ClientError::Closed)?;
                match w.entry(s) {
                    std::collections::hash_map::Entry::Occupied(_) => false,
                    std::collections::hash_map::Entry::Vacant(v) => {
                        if let Some(t) = tx.take() {
                            v.insert(t);
                        }
                        true
                    }
                }
            };
            if taken {
                stream = s;
                break;
            }
        }
        if tx.is_some() {
            return Err(ClientError::Protocol("no free stream id".into()));
        }
        let mut frame = Vec::with_capacity(128);
        encode_request_frame(VERSION, stream, &req, self.compression, &mut frame);
        self.tx.send(frame).await.map_err(|_| ClientError::Closed)?;
        let resp = rx.await.map_err(|_| ClientError::Closed)??;
        if let Response::Error(e) = &resp {
            let ErrorResponse { message, .. } = e;
            return Err(ClientError::Server {
                code: e.code(),
                message: message.clone(),
            });
        }
        Ok(resp)
    }

    fn reply(resp: Response) -> Reply {
        match resp {
            Response::Result(ResultBody::Rows { rows, .. }) => Reply::Rows(rows),
            _ => Reply::Other,
        }
    }

    /// A simple statement.
    pub async fn query(&self, q: &str, cl: Consistency) -> Result<Reply, ClientError> {
        let params = QueryParameters {
            consistency: cl,
            ..Default::default()
        };
        self.send(Request::Query {
            query: q.to_string(),
            params,
        })
        .await
        .map(Self::reply)
    }

    pub async fn prepare(&self, q: &str) -> Result<Prepared, ClientError> {
        match self
            .send(Request::Prepare {
                query: q.to_string(),
                keyspace: None,
            })
            .await?
        {
            Response::Result(ResultBody::Prepared { id, metadata, .. }) => Ok(Prepared {
                id,
                metadata: *metadata,
            }),
            other => Err(ClientError::Protocol(format!(
                "unexpected answer to PREPARE: {other:?}"
            ))),
        }
    }

    pub async fn execute(
        &self,
        id: &Bytes,
        values: Vec<Value>,
        cl: Consistency,
    ) -> Result<Reply, ClientError> {
        let params = QueryParameters {
            consistency: cl,
            values: Values::Positional(values),
            skip_metadata: true,
            ..Default::default()
        };
        self.send(Request::Execute {
            id: id.clone(),
            result_metadata_id: None,
            params,
        })
        .await
        .map(Self::reply)
    }

    /// A batch of executions of prepared statements.
    pub async fn batch(
        &self,
        batch_type: u8,
        statements: Vec<(Bytes, Vec<Value>)>,
        cl: Consistency,
    ) -> Result<Reply, ClientError> {
        let statements = statements
            .into_iter()
            .map(|(id, values)| BatchStatement {
                kind: BatchQueryKind::Prepared(id),
                values,
            })
            .collect();
        let b = Batch {
            batch_type,
            statements,
            consistency: cl,
            serial_consistency: None,
            timestamp: None,
            keyspace: None,
            now_in_seconds: None,
        };
        self.send(Request::Batch(b)).await.map(Self::reply)
    }
}

/// The text in a cell.
pub fn text(cell: &Option<Bytes>) -> String {
    cell.as_ref()
        .map(|b| String::from_utf8_lossy(b).into_owned())
        .unwrap_or_default()
}

/// The connections to every `-node` host and the token ring, to send each
/// statement to a replica of its partition.
pub struct Cluster {
    /// Per node, its connections.
    pub nodes: Vec<Vec<Arc<Connection>>>,
    /// (token, node index) sorted by token; empty when the ring is unknown.
    ring: Vec<(i64, usize)>,
    rr: AtomicUsize,
}

/// The first column of each row `cql` answers (none when it answers no rows).
async fn first_column(c: &Connection, cql: &str) -> Result<Vec<Option<Bytes>>, ClientError> {
    Ok(match c.query(cql, Consistency::One).await? {
        Reply::Rows(rows) => rows
            .into_iter()
            .map(|r| r.into_iter().next().flatten())
            .collect(),
        Reply::Other => Vec::new(),
    })
}

fn addr_of(cell: &Option<Bytes>) -> Option<std::net::IpAddr> {
    let b = cell.as_ref()?;
    match b.len() {
        4 => Some(std::net::IpAddr::from(<[u8; 4]>::try_from(&b[..]).ok()?)),
        16 => Some(std::net::IpAddr::from(<[u8; 16]>::try_from(&b[..]).ok()?)),
        _ => None,
    }
}

fn tokens_of(cell: &Option<Bytes>) -> Vec<i64> {
    let Some(b) = cell else { return Vec::new() };
    sibyl_types::value::deserialize_collection(b)
        .map(|items| {
            items
                .iter()
                .filter_map(|t| std::str::from_utf8(t).ok()?.parse::<i64>().ok())
                .collect()
        })
        .unwrap_or_default()
}

impl Cluster {
    /// Opens `per_node` connections to each host and reads the ring from the
    /// first node's `system.local` and `system.peers`; each node is known by
    /// the `rpc_address` its own `system.local` reports.
    pub async fn connect(
        hosts: &[String],
        port: u16,
        per_node: usize,
        opts: &ConnectOptions,
    ) -> Result<Cluster, String> {
        let mut nodes = Vec::new();
        for h in hosts {
            let addr = if h.contains(':') && !h.starts_with('[') && h.matches(':').count() == 1 {
                h.clone()
            } else {
                format!("{h}:{port}")
            };
            let mut conns = Vec::new();
            for _ in 0..per_node.max(1) {
                conns.push(
                    Connection::connect(&addr, opts)
                        .await
                        .map_err(|e| e.to_string())?,
                );
            }
            nodes.push(conns);
        }
        let mut c = Cluster {
            nodes,
            ring: Vec::new(),
            rr: AtomicUsize::new(0),
        };
        if c.nodes.len() > 1 {
            // a server without these tables (or tokens) just gets round-robin
            c.ring = c.read_ring().await.unwrap_or_default();
        }
        Ok(c)
    }

    /// Connects to the nodes the first node knows of (`system.peers`) that
    /// were not given, as the drivers do; those that cannot be reached are
    /// left out. The number of nodes added.
    pub async fn discover(&mut self, port: u16, per_node: usize, opts: &ConnectOptions) -> usize {
        let mut known = std::collections::HashSet::new();
        for conns in &self.nodes {
            let local = first_column(&conns[0], "SELECT rpc_address FROM system.local").await;
            known.extend(local.unwrap_or_default().iter().filter_map(addr_of));
        }
        let peers = first_column(&self.nodes[0][0], "SELECT rpc_address FROM system.peers")
            .await
            .unwrap_or_default();
        let mut added = 0;
        for p in peers.iter().filter_map(addr_of) {
            if !known.insert(p) {
                continue;
            }
            let addr = std::net::SocketAddr::new(p, port).to_string();
            let mut conns = Vec::new();
            for _ in 0..per_node.max(1) {
                match Connection::connect(&addr, opts).await {
                    Ok(c) => conns.push(c),
                    Err(_) => break,
                }
            }
            if conns.len() == per_node.max(1) {
                self.nodes.push(conns);
                added += 1;
            }
        }
        if added > 0 {
            self.ring = self.read_ring().await.unwrap_or_default();
        }
        added
    }

    async fn read_ring(&self) -> Result<Vec<(i64, usize)>, ClientError> {
        let one = Consistency::One;
        let mut node_of: HashMap<std::net::IpAddr, usize> = HashMap::new();
        for (i, conns) in self.nodes.iter().enumerate() {
            let local = first_column(&conns[0], "SELECT rpc_address FROM system.local").await?;
            if let Some(a) = local.first().and_then(addr_of) {
                node_of.entry(a).or_insert(i);
            }
        }
        let first = &self.nodes[0][0];
        let mut owners: Vec<(std::net::IpAddr, Vec<i64>)> = Vec::new();
        if let Reply::Rows(rows) = first
            .query("SELECT rpc_address, tokens FROM system.local", one)
            .await?
        {
            for r in rows {
                if let (Some(a), Some(t)) = (r.first().and_then(addr_of), r.get(1)) {
                    owners.push((a, tokens_of(t)));
                }
            }
        }
        if let Reply::Rows(rows) = first
            .query("SELECT rpc_address, tokens FROM system.peers", one)
            .await?
        {
            for r in rows {
                if let (Some(a), Some(t)) = (r.first().and_then(addr_of), r.get(1)) {
                    owners.push((a, tokens_of(t)));
                }
            }
        }
        let mut ring: Vec<(i64, usize)> = Vec::new();
        for (a, tokens) in owners {
            // tokens of nodes we were not given are routed round-robin
            let node = node_of.get(&a).copied().unwrap_or(usize::MAX);
            ring.extend(tokens.into_iter().map(|t| (t, node)));
        }
        ring.sort_unstable();
        if ring.iter().all(|(_, n)| *n == usize::MAX) {
            ring.clear();
        }
        Ok(ring)
    }

    /// Whether statements are routed by token.
    pub fn token_aware(&self) -> bool {
        !self.ring.is_empty()
    }

    /// The node owning `token` (the first ring token >= it, wrapping around),
    /// if it is one of ours.
    fn owner(&self, token: i64) -> Option<usize> {
        if self.ring.is_empty() {
            return None;
        }
        let i = self.ring.partition_point(|(rt, _)| *rt < token);
        let (_, n) = self.ring[if i == self.ring.len() { 0 } else { i }];
        (n != usize::MAX).then_some(n)
    }

    /// A connection to a replica of `token` when known, else the next one in
    /// turn.
    pub fn pick(&self, token: Option<i64>) -> &Arc<Connection> {
        let spin = self.rr.fetch_add(1, Ordering::Relaxed);
        let node = token
            .and_then(|t| self.owner(t))
            .unwrap_or(spin % self.nodes.len());
        let conns = &self.nodes[node];
        &conns[(spin / self.nodes.len().max(1)) % conns.len()]
    }

    pub fn any(&self) -> &Arc<Connection> {
        &self.nodes[0][0]
    }

    /// Waits until every node that is up reports the schema version of the
    /// first (`system.local` and `system.peers`, peers without a version
    /// left out, as the drivers do), or until `max` has passed.
    pub async fn wait_for_schema_agreement(&self, max: std::time::Duration) -> bool {
        let deadline = std::time::Instant::now() + max;
        loop {
            if self.schema_agrees().await.unwrap_or(false) {
                return true;
            }
            if std::time::Instant::now() >= deadline {
                return false;
            }
            tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        }
    }

    async fn schema_agrees(&self) -> Result<bool, ClientError> {
        let mut versions = std::collections::HashSet::new();
        for (i, conns) in self.nodes.iter().enumerate() {
            let c = &conns[0];
            versions.extend(first_column(c, "SELECT schema_version FROM system.local").await?);
            if i == 0 {
                versions.extend(first_column(c, "SELECT schema_version FROM system.peers").await?);
            }
        }
        // peers without a version are left out
        versions.remove(&None);
        Ok(versions.len() <= 1)
    }

    pub fn all(&self) -> impl Iterator<Item = &Arc<Connection>> {
        self.nodes.iter().flatten()
    }

    /// Prepares on every connection (ids are the same everywhere).
    pub async fn prepare(&self, q: &str) -> Result<Prepared, String> {
        let mut p = None;
        for c in self.all() {
            p = Some(
                c.prepare(q)
                    .await
                    .map_err(|e| format!("cannot prepare '{q}': {e}"))?,
            );
        }
        p.ok_or_else(|| "no connection".to_string())
    }
}

/// The routing token of a bound statement: Murmur3 of its partition key
/// (composite when several columns), from the values at `pk_indexes`.
pub fn routing_token(pk_indexes: &[u16], values: &[Value]) -> Option<i64> {
    if pk_indexes.is_empty() {
        return None;
    }
    let parts: Vec<&[u8]> = pk_indexes
        .iter()
        .map(|&i| match values.get(i as usize) {
            Some(Value::Set(b)) => Some(&b[..]),
            _ => None,
        })
        .collect::<Option<Vec<_>>>()?;
    Some(if parts.len() == 1 {
        sibyl_types::murmur3::token(parts[0])
    } else {
        sibyl_types::murmur3::token(&sibyl_types::murmur3::composite_key(&parts))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A server that answers STARTUP with AUTHENTICATE and accepts only
    /// `cassandra`/`secret`; it reports the STARTUP options and the token.
    async fn fake_server(
        compressed: Option<Compression>,
    ) -> (
        String,
        tokio::task::JoinHandle<(HashMap<String, String>, Option<Bytes>)>,
    ) {
        use sibyl_protocol::{decode_request_frame, encode_response_frame};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let addr = listener.local_addr().expect("addr").to_string();
        let h = tokio::spawn(async move {
            let (mut sock, _) = listener.accept().await.expect("accept");
            let mut startup = HashMap::new();
            let mut token = None;
            let mut buf = Vec::new();
            loop {
                let mut chunk = [0u8; 4096];
                let n = sock.read(&mut chunk).await.unwrap_or(0);
                if n == 0 {
                    return (startup, token);
                }
                buf.extend_from_slice(&chunk[..n]);
                while let Ok(Some(h)) = FrameHeader::parse(&buf) {
                    if buf.len() < h.frame_len() {
                        break;
                    }
                    let frame: Vec<u8> = buf.drain(..h.frame_len()).collect();
                    let body = Bytes::copy_from_slice(&frame[HEADER_LEN..]);
                    let req = decode_request_frame(&h, &body, compressed)
                        .expect("request")
                        .request;
                    let resp = match req {
                        Request::Startup(o) => {
                            startup = o;
                            Response::Authenticate(
                                "org.apache.cassandra.auth.PasswordAuthenticator".into(),
                            )
                        }
                        Request::AuthResponse(t) => {
                            token = t.clone();
                            if t.as_deref() == Some(&b"\0cassandra\0secret"[..]) {
                                Response::AuthSuccess(None)
                            } else {
                                Response::Error(ErrorResponse::new(
                                    sibyl_protocol::ErrorKind::AuthenticationError,
                                    "Provided username cassandra and/or password are incorrect",
                                ))
                            }
                        }
                        _ => Response::Ready,
                    };
                    let mut out = Vec::new();
                    // a server compresses everything after STARTUP once compression is negotiated
                    let c = if matches!(resp, Response::Authenticate(_)) {
                        None
                    } else {
                        compressed
                    };
                    encode_response_frame(h.version, h.stream, &resp, c, &[], None, &mut out);
                    sock.write_all(&out).await.expect("write");
                }
            }
        });
        (addr, h)
    }

    #[tokio::test]
    async fn sasl_plain_authentication_and_compression() {
        let (addr, server) = fake_server(Some(Compression::Lz4)).await;
        let opts = ConnectOptions {
            user: Some("cassandra".into()),
            password: Some("secret".into()),
            compression: Some(Compression::Lz4),
        };
        let c = Connection::connect(&addr, &opts)
            .await
            .expect("authenticated");
        drop(c);
        let (startup, token) = server.await.expect("server");
        assert_eq!(startup.get("COMPRESSION").map(String::as_str), Some("lz4"));
        assert_eq!(token.as_deref(), Some(&b"\0cassandra\0secret"[..]));

        let (addr, _server) = fake_server(None).await;
        let e = Connection::connect(&addr, &ConnectOptions::default())
            .await
            .err()
            .expect("refused");
        assert!(e.to_string().contains("requires authentication (org.apache.cassandra.auth.PasswordAuthenticator): give -mode user="), "{e}");

        let (addr, _server) = fake_server(None).await;
        let wrong = ConnectOptions {
            user: Some("cassandra".into()),
            password: Some("nope".into()),
            compression: None,
        };
        let e = Connection::connect(&addr, &wrong)
            .await
            .err()
            .expect("refused");
        assert!(
            e.to_string()
                .contains("authentication failed: Provided username cassandra"),
            "{e}"
        );
    }

    #[test]
    fn routing_tokens_follow_murmur3() {
        let k = Bytes::from_static(b"key1");
        assert_eq!(
            routing_token(&[0], &[Value::Set(k.clone())]),
            Some(sibyl_types::murmur3::token(b"key1"))
        );
        assert_eq!(
            routing_token(&[1], &[Value::Null, Value::Set(k)]),
            Some(sibyl_types::murmur3::token(b"key1"))
        );
        assert_eq!(routing_token(&[], &[]), None);
        assert_eq!(routing_token(&[0], &[Value::Unset]), None);
    }

    #[test]
    fn picks_the_owner_of_a_token() {
        let c = Cluster {
            nodes: Vec::new(),
            ring: vec![(-100, 0), (0, 1), (100, 2), (200, usize::MAX)],
            rr: AtomicUsize::new(0),
        };
        assert_eq!(c.owner(-150), Some(0));
        assert_eq!(c.owner(-100), Some(0));
        assert_eq!(c.owner(-99), Some(1));
        assert_eq!(c.owner(50), Some(2));
        assert_eq!(c.owner(150), None, "owned by a node we were not given");
        assert_eq!(c.owner(201), Some(0), "wraps around");
    }
}
