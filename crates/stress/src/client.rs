//! A light CQL client on Sibyl's own protocol codec: one connection carries
//! many requests at once (stream ids), a reader task hands each response to
//! its waiter. Enough for load generation against any CQL server: STARTUP,
//! QUERY, PREPARE, EXECUTE (protocol v4).

use bytes::{Buf, Bytes, BytesMut};
use sibyl_protocol::{
    decode_response_frame, encode_request_frame, Consistency, ErrorResponse, FrameHeader, QueryParameters, Request, Response, ResultBody, Value,
    Values, HEADER_LEN,
};
use std::collections::HashMap;
use std::sync::atomic::{AtomicI16, Ordering};
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
}

type Waiters = Arc<Mutex<HashMap<i16, oneshot::Sender<Result<Response, ClientError>>>>>;

/// One connection.
pub struct Connection {
    tx: mpsc::Sender<Vec<u8>>,
    waiters: Waiters,
    next_stream: AtomicI16,
}

/// What a request returned that load generation cares about.
#[derive(Debug)]
pub enum Reply {
    Rows(usize),
    Prepared(Bytes),
    Other,
}

impl Connection {
    pub async fn connect(addr: &str) -> Result<Arc<Connection>, ClientError> {
        let sock = TcpStream::connect(addr).await.map_err(|e| ClientError::Connect(addr.to_string(), e))?;
        let _ = sock.set_nodelay(true);
        let (mut rd, mut wr) = sock.into_split();
        let (tx, mut rx) = mpsc::channel::<Vec<u8>>(4096);
        let waiters: Waiters = Arc::new(Mutex::new(HashMap::new()));
        // writer: batches whatever is queued into one write
        tokio::spawn(async move {
            let mut buf = Vec::with_capacity(64 * 1024);
            while let Some(f) = rx.recv().await {
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
                    let r = decode_response_frame(&h, &body, None).map(|e| e.response).map_err(|e| ClientError::Protocol(e.to_string()));
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
        let c = Arc::new(Connection { tx, waiters, next_stream: AtomicI16::new(0) });
        let mut opts = HashMap::new();
        opts.insert("CQL_VERSION".to_string(), "3.0.0".to_string());
        match c.send(Request::Startup(opts)).await? {
            Response::Ready => Ok(c),
            Response::Authenticate(_) => Err(ClientError::Protocol("authentication is not supported by sibyl stress yet".into())),
            other => Err(ClientError::Protocol(format!("unexpected answer to STARTUP: {other:?}"))),
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
                if w.contains_key(&s) {
                    false
                } else {
                    if let Some(t) = tx.take() {
                        w.insert(s, t);
                    }
                    true
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
        encode_request_frame(VERSION, stream, &req, None, &mut frame);
        self.tx.send(frame).await.map_err(|_| ClientError::Closed)?;
        let resp = rx.await.map_err(|_| ClientError::Closed)??;
        if let Response::Error(ErrorResponse { message, .. }) = &resp {
            let code = match &resp {
                Response::Error(e) => e.code(),
                _ => 0,
            };
            return Err(ClientError::Server { code, message: message.clone() });
        }
        Ok(resp)
    }

    fn reply(resp: Response) -> Reply {
        match resp {
            Response::Result(ResultBody::Rows { rows, .. }) => Reply::Rows(rows.len()),
            Response::Result(ResultBody::Prepared { id, .. }) => Reply::Prepared(id),
            _ => Reply::Other,
        }
    }

    /// A simple statement.
    pub async fn query(&self, q: &str, cl: Consistency) -> Result<Reply, ClientError> {
        let params = QueryParameters { consistency: cl, ..Default::default() };
        self.send(Request::Query { query: q.to_string(), params }).await.map(Self::reply)
    }

    pub async fn prepare(&self, q: &str) -> Result<Bytes, ClientError> {
        match self.send(Request::Prepare { query: q.to_string(), keyspace: None }).await.map(Self::reply)? {
            Reply::Prepared(id) => Ok(id),
            other => Err(ClientError::Protocol(format!("unexpected answer to PREPARE: {other:?}"))),
        }
    }

    pub async fn execute(&self, id: &Bytes, values: Vec<Bytes>, cl: Consistency) -> Result<Reply, ClientError> {
        let params = QueryParameters {
            consistency: cl,
            values: Values::Positional(values.into_iter().map(Value::Set).collect()),
            skip_metadata: true,
            ..Default::default()
        };
        self.send(Request::Execute { id: id.clone(), result_metadata_id: None, params }).await.map(Self::reply)
    }
}
