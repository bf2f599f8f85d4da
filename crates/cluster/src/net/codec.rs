//! The internode wire format, version 3: a handshake that names the cluster
//! and the messaging versions each side speaks, then checksummed frames, each
//! one message (a request, its response, or a one-way message) with its
//! request id and verb. Version 2 added traced requests (kinds 3 and 4),
//! which carry their trace session; a node sends them only to peers that
//! speak 2. Version 3 added incremental repair's verbs (prepare, finish,
//! and validation and streaming over a session's pending SSTables); a
//! repair uses them only when every participant speaks 3.
//!
//! ```text
//! handshake   magic "SIBL" u32 | body length u16 | min version u8 | max version u8
//!             | connection type u8 | from address (u8 length, 4 or 16 bytes)
//!             | cluster name (u16 length, UTF-8)
//! reply       magic u32 | status u8 (0 accepted, 1 refused) | version u8
//!             | reason (u16 length, UTF-8)
//! frame       payload length u32 | CRC32 of the payload u32 | payload
//! payload     kind u8 (0 request, 1 response, 2 one-way, 3 traced request,
//!             4 traced one-way) | id u64 | verb u8
//!             | [kinds 3, 4: trace session uuid 16 bytes | trace type u8]
//!             | body
//! ```
//!
//! Every decoder here takes bytes from the network: it checks every length
//! against what is left and never panics.

use crate::messaging::{ReplicaFailure, Request, Response, StreamSet, Verb};
use bytes::Bytes;
use sibyl_db::clustering::ClusteringComparator;
use sibyl_db::paxos::{read_ballot, Commit, Promise};
use sibyl_db::serde::{decode_mutation, encode_mutation, Reader};
use sibyl_db::Mutation;
use sibyl_db::{ReadCommand, ReadResponse};
use sibyl_tracing::TraceParams;
use std::net::IpAddr;
use std::sync::Arc;

/// "SIBL": the first bytes of every internode connection.
pub const MAGIC: u32 = 0x5349_424C;
/// The oldest messaging version this build speaks.
pub const MESSAGING_VERSION_MIN: u8 = 1;
/// The newest messaging version this build speaks (the one it prefers).
pub const MESSAGING_VERSION_CURRENT: u8 = 3;
/// The first version with traced requests (frame kind 3).
pub const MESSAGING_VERSION_TRACING: u8 = 2;
/// The first version with incremental repair's verbs.
pub const MESSAGING_VERSION_INCREMENTAL_REPAIR: u8 = 3;
/// Bytes of a frame header: payload length and checksum.
pub const FRAME_HEADER_BYTES: usize = 8;
/// A handshake body is small; anything longer is not a Sibyl node.
pub const MAX_HANDSHAKE_BYTES: usize = 1024;

/// Why bytes from a peer could not be understood.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CodecError {
    #[error("not a Sibyl internode connection (magic {0:#010x})")]
    BadMagic(u32),
    #[error("frame of {0} bytes exceeds the limit of {1}")]
    FrameTooLarge(usize, usize),
    #[error("frame checksum mismatch (expected {expected:#010x}, computed {computed:#010x})")]
    Checksum { expected: u32, computed: u32 },
    #[error("malformed message: {0}")]
    Malformed(String),
}

impl From<sibyl_db::DecodeError> for CodecError {
    fn from(e: sibyl_db::DecodeError) -> Self {
        CodecError::Malformed(e.0)
    }
}

/// Which of a peer's connections a message travels on: small urgent ones
/// (gossip, cluster metadata) apart from the rest, and large messages apart
/// from small ones, so that one big mutation does not hold up the others
/// (Cassandra 4's urgent, small and large connections).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ConnectionType {
    Urgent,
    Small,
    Large,
}

impl ConnectionType {
    fn byte(self) -> u8 {
        match self {
            ConnectionType::Urgent => 0,
            ConnectionType::Small => 1,
            ConnectionType::Large => 2,
        }
    }

    fn of(b: u8) -> Result<Self, CodecError> {
        Ok(match b {
            0 => ConnectionType::Urgent,
            1 => ConnectionType::Small,
            2 => ConnectionType::Large,
            b => {
                return Err(CodecError::Malformed(format!(
                    "unknown connection type {b}"
                )))
            }
        })
    }
}

/// What the connecting node says first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Handshake {
    pub min_version: u8,
    pub max_version: u8,
    pub connection: ConnectionType,
    /// The sender's address as the cluster knows it (its broadcast address).
    pub from: IpAddr,
    pub cluster_name: String,
}

fn put_str16(out: &mut Vec<u8>, s: &str) {
    let b = &s.as_bytes()[..s.len().min(u16::MAX as usize)];
    out.extend_from_slice(&(b.len() as u16).to_be_bytes());
    out.extend_from_slice(b);
}

fn get_u16(r: &mut Reader) -> Result<u16, CodecError> {
    let b = r.take(2)?;
    Ok(u16::from_be_bytes([b[0], b[1]]))
}

fn get_str16(r: &mut Reader) -> Result<String, CodecError> {
    let n = get_u16(r)? as usize;
    String::from_utf8(r.take(n)?.to_vec())
        .map_err(|_| CodecError::Malformed("a name is not UTF-8".into()))
}

fn get_u64(r: &mut Reader) -> Result<u64, CodecError> {
    Ok(r.i64()? as u64)
}

fn get_uuid(r: &mut Reader) -> Result<uuid::Uuid, CodecError> {
    let mut id = [0u8; 16];
    id.copy_from_slice(r.take(16)?);
    Ok(uuid::Uuid::from_bytes(id))
}

/// An address: its length (4 or 16) and its octets.
fn put_ip(out: &mut Vec<u8>, a: IpAddr) {
    match a {
        IpAddr::V4(a) => {
            out.push(4);
            out.extend_from_slice(&a.octets());
        }
        IpAddr::V6(a) => {
            out.push(16);
            out.extend_from_slice(&a.octets());
        }
    }
}

fn get_ip(r: &mut Reader) -> Result<IpAddr, CodecError> {
    match r.u8()? {
        4 => {
            let b = r.take(4)?;
            Ok(IpAddr::from([b[0], b[1], b[2], b[3]]))
        }
        16 => {
            let mut a = [0u8; 16];
            a.copy_from_slice(r.take(16)?);
            Ok(IpAddr::from(a))
        }
        n => Err(CodecError::Malformed(format!("address of {n} bytes"))),
    }
}

fn put_bytes(out: &mut Vec<u8>, b: &[u8]) {
    out.extend_from_slice(&(b.len() as u32).to_be_bytes());
    out.extend_from_slice(b);
}

impl Handshake {
    /// The handshake as sent: magic, body length, body.
    pub fn encode(&self) -> Vec<u8> {
        let mut body = vec![self.min_version, self.max_version, self.connection.byte()];
        put_ip(&mut body, self.from);
        put_str16(&mut body, &self.cluster_name);
        let mut out = MAGIC.to_be_bytes().to_vec();
        out.extend_from_slice(&(body.len() as u16).to_be_bytes());
        out.extend_from_slice(&body);
        out
    }

    /// Checks the six bytes that precede the body; returns the body length.
    pub fn body_len(prefix: [u8; 6]) -> Result<usize, CodecError> {
        let magic = u32::from_be_bytes([prefix[0], prefix[1], prefix[2], prefix[3]]);
        if magic != MAGIC {
            return Err(CodecError::BadMagic(magic));
        }
        let n = u16::from_be_bytes([prefix[4], prefix[5]]) as usize;
        if n > MAX_HANDSHAKE_BYTES {
            return Err(CodecError::FrameTooLarge(n, MAX_HANDSHAKE_BYTES));
        }
        Ok(n)
    }

    /// Decodes a handshake body.
    pub fn decode_body(body: &[u8]) -> Result<Handshake, CodecError> {
        let mut r = Reader::new(body);
        let min_version = r.u8()?;
        let max_version = r.u8()?;
        let connection = ConnectionType::of(r.u8()?)?;
        let from = get_ip(&mut r)?;
        let cluster_name = get_str16(&mut r)?;
        if !r.is_empty() {
            return Err(CodecError::Malformed(
                "trailing bytes in a handshake".into(),
            ));
        }
        Ok(Handshake {
            min_version,
            max_version,
            connection,
            from,
            cluster_name,
        })
    }

    /// The version both sides speak (the highest), or why they cannot talk.
    pub fn negotiate(&self, local_name: &str) -> Result<u8, String> {
        self.negotiate_up_to(local_name, MESSAGING_VERSION_CURRENT)
    }

    /// [`Self::negotiate`] for a node that speaks versions up to `local_max`
    /// (a node held at an older version during a rolling upgrade).
    pub fn negotiate_up_to(&self, local_name: &str, local_max: u8) -> Result<u8, String> {
        if self.cluster_name != local_name {
            return Err(format!(
                "cluster name '{}' of {} differs from this node's '{}'",
                self.cluster_name, self.from, local_name
            ));
        }
        let local_max = local_max.min(MESSAGING_VERSION_CURRENT);
        let version = self.max_version.min(local_max);
        if version < self.min_version.max(MESSAGING_VERSION_MIN) {
            return Err(format!(
                "{} speaks messaging versions {}..={}, this node {}..={}",
                self.from, self.min_version, self.max_version, MESSAGING_VERSION_MIN, local_max
            ));
        }
        Ok(version)
    }
}

/// The accepting node's answer to a handshake.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HandshakeReply {
    Accepted { version: u8 },
    Refused { reason: String },
}

impl HandshakeReply {
    pub fn encode(&self) -> Vec<u8> {
        let mut out = MAGIC.to_be_bytes().to_vec();
        match self {
            HandshakeReply::Accepted { version } => {
                out.extend_from_slice(&[0, *version]);
                put_str16(&mut out, "");
            }
            HandshakeReply::Refused { reason } => {
                out.extend_from_slice(&[1, 0]);
                put_str16(&mut out, reason);
            }
        }
        out
    }

    /// Bytes before the reason's text: magic, status, version, reason length.
    pub const PREFIX_BYTES: usize = 8;

    /// Decodes the prefix; returns the reply without its reason and the
    /// reason's length.
    pub fn decode_prefix(p: [u8; 8]) -> Result<(HandshakeReply, usize), CodecError> {
        let magic = u32::from_be_bytes([p[0], p[1], p[2], p[3]]);
        if magic != MAGIC {
            return Err(CodecError::BadMagic(magic));
        }
        let n = u16::from_be_bytes([p[6], p[7]]) as usize;
        match p[4] {
            0 => Ok((HandshakeReply::Accepted { version: p[5] }, n)),
            1 => Ok((
                HandshakeReply::Refused {
                    reason: String::new(),
                },
                n,
            )),
            s => Err(CodecError::Malformed(format!(
                "unknown handshake status {s}"
            ))),
        }
    }
}

/// What a frame carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FrameKind {
    Request,
    Response,
    /// A request that gets no response (gossip).
    OneWay,
}

/// One decoded frame, its body still encoded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Frame {
    pub kind: FrameKind,
    pub id: u64,
    pub verb: Verb,
    /// The trace session of a traced request.
    pub trace: Option<TraceParams>,
    pub body: Bytes,
}

fn verb_byte(v: Verb) -> u8 {
    // a verb's number is its place in `Verb::ALL`: new verbs go at the end
    Verb::ALL.iter().position(|x| *x == v).unwrap_or(0) as u8
}

fn verb_of(b: u8) -> Result<Verb, CodecError> {
    Verb::ALL
        .get(b as usize)
        .copied()
        .ok_or_else(|| CodecError::Malformed(format!("unknown verb {b}")))
}

/// Appends a whole frame (header and payload) to `out`; a request or a
/// one-way message with `trace` is traced (only for peers that speak
/// version 2).
pub fn encode_frame(
    kind: FrameKind,
    id: u64,
    verb: Verb,
    trace: Option<&TraceParams>,
    body: &[u8],
    out: &mut Vec<u8>,
) {
    let start = out.len();
    out.extend_from_slice(&[0; FRAME_HEADER_BYTES]);
    let trace = trace.filter(|_| kind != FrameKind::Response);
    out.push(match kind {
        FrameKind::Request if trace.is_some() => 3,
        FrameKind::OneWay if trace.is_some() => 4,
        FrameKind::Request => 0,
        FrameKind::Response => 1,
        FrameKind::OneWay => 2,
    });
    out.extend_from_slice(&id.to_be_bytes());
    out.push(verb_byte(verb));
    if let Some(t) = trace {
        t.encode(out);
    }
    out.extend_from_slice(body);
    let payload = &out[start + FRAME_HEADER_BYTES..];
    let len = (payload.len() as u32).to_be_bytes();
    let crc = crc32fast::hash(payload).to_be_bytes();
    out[start..start + 4].copy_from_slice(&len);
    out[start + 4..start + 8].copy_from_slice(&crc);
}

/// Reads a frame header: the payload's length (checked against `max`) and
/// its checksum.
pub fn decode_frame_header(h: [u8; 8], max: usize) -> Result<(usize, u32), CodecError> {
    let len = u32::from_be_bytes([h[0], h[1], h[2], h[3]]) as usize;
    if len > max {
        return Err(CodecError::FrameTooLarge(len, max));
    }
    Ok((len, u32::from_be_bytes([h[4], h[5], h[6], h[7]])))
}

/// Checks a payload against its checksum and splits it.
pub fn decode_payload(payload: Bytes, crc: u32) -> Result<Frame, CodecError> {
    let computed = crc32fast::hash(&payload);
    if computed != crc {
        return Err(CodecError::Checksum {
            expected: crc,
            computed,
        });
    }
    if payload.len() < 10 {
        return Err(CodecError::Malformed(format!(
            "payload of {} bytes is shorter than its header",
            payload.len()
        )));
    }
    let kind = match payload[0] {
        0 | 3 => FrameKind::Request,
        1 => FrameKind::Response,
        2 | 4 => FrameKind::OneWay,
        k => return Err(CodecError::Malformed(format!("unknown frame kind {k}"))),
    };
    let mut id = [0u8; 8];
    id.copy_from_slice(&payload[1..9]);
    let (trace, body) = if payload[0] >= 3 {
        let t = payload
            .get(10..10 + TraceParams::ENCODED_BYTES)
            .and_then(TraceParams::decode)
            .ok_or_else(|| CodecError::Malformed("bad trace parameters".into()))?;
        (Some(t), payload.slice(10 + TraceParams::ENCODED_BYTES..))
    } else {
        (None, payload.slice(10..))
    };
    Ok(Frame {
        kind,
        id: u64::from_be_bytes(id),
        verb: verb_of(payload[9])?,
        trace,
        body,
    })
}

/// Decodes a whole frame from a buffer (header and payload), as a fuzzer
/// or a test feeds it.
pub fn decode_frame(buf: &[u8], max: usize) -> Result<Frame, CodecError> {
    if buf.len() < FRAME_HEADER_BYTES {
        return Err(CodecError::Malformed("truncated frame header".into()));
    }
    let mut h = [0u8; 8];
    h.copy_from_slice(&buf[..8]);
    let (len, crc) = decode_frame_header(h, max)?;
    let payload = buf
        .get(8..8 + len)
        .ok_or_else(|| CodecError::Malformed("truncated frame".into()))?;
    decode_payload(Bytes::copy_from_slice(payload), crc)
}

/// Looks up the clustering comparator of a table id (`None` if unknown).
pub type ComparatorOf<'a> = &'a dyn Fn(uuid::Uuid) -> Option<Arc<ClusteringComparator>>;

/// Appends the body of `request` (its verb goes in the frame).
pub fn encode_request(request: &Request, out: &mut Vec<u8>) {
    match request {
        Request::Mutation(ms) | Request::Hint(ms) => put_mutations(out, ms),
        Request::Read(c) => c.encode(out),
        Request::Truncate {
            table_id,
            timestamp_micros,
        } => {
            out.extend_from_slice(table_id.as_bytes());
            out.extend_from_slice(&timestamp_micros.to_be_bytes());
        }
        Request::Gossip(b) | Request::Metadata(b) => out.extend_from_slice(b),
        Request::MetadataCatchUp(epoch) => out.extend_from_slice(&epoch.to_be_bytes()),
        Request::CounterMutation {
            mutation,
            consistency,
        } => {
            out.extend_from_slice(&consistency.to_be_bytes());
            put_mutations(out, std::slice::from_ref(mutation));
        }
        Request::PaxosPrepare {
            ballot,
            table_id,
            key,
        } => {
            out.extend_from_slice(ballot.0.as_bytes());
            out.extend_from_slice(table_id.as_bytes());
            put_bytes(out, key);
        }
        Request::PaxosPropose(c) | Request::PaxosCommit(c) => put_commit(out, c),
        Request::BatchStore { id, mutations } => {
            out.extend_from_slice(id.as_bytes());
            put_mutations(out, mutations);
        }
        Request::BatchRemove(id) => out.extend_from_slice(id.as_bytes()),
        Request::StreamPage {
            table_id,
            range,
            after,
            max_bytes,
            set,
        } => {
            out.extend_from_slice(table_id.as_bytes());
            out.extend_from_slice(&range.0.to_be_bytes());
            out.extend_from_slice(&range.1.to_be_bytes());
            match after {
                Some(k) => {
                    out.push(1);
                    put_bytes(out, k);
                }
                None => out.push(0),
            }
            out.extend_from_slice(&max_bytes.to_be_bytes());
            // (the set goes at the end, under STREAM_SET_PAGE_REQ only)
            match set {
                StreamSet::All => {}
                StreamSet::Pending(s) => {
                    out.push(0);
                    out.extend_from_slice(s.as_bytes());
                }
                StreamSet::Repaired => out.push(1),
                StreamSet::NotRepaired => out.push(2),
            }
        }
        Request::StreamSession(p) => {
            out.extend_from_slice(p.id.as_bytes());
            put_bytes(out, p.operation.as_bytes());
            put_ip(out, p.source);
            out.extend_from_slice(&(p.tables.len() as u32).to_be_bytes());
            for (id, ranges) in &p.tables {
                out.extend_from_slice(id.as_bytes());
                put_ranges(out, ranges);
            }
            put_session(out, &p.pending);
        }
        Request::Validation {
            table_id,
            ranges,
            pending,
        } => {
            out.extend_from_slice(table_id.as_bytes());
            put_ranges(out, ranges);
            put_session(out, pending);
        }
        Request::RepairPrepare {
            session,
            table_id,
            ranges,
        } => {
            out.extend_from_slice(session.as_bytes());
            out.extend_from_slice(table_id.as_bytes());
            put_ranges(out, ranges);
        }
        Request::RepairFinish {
            session,
            table_id,
            repaired_at,
        } => {
            out.extend_from_slice(session.as_bytes());
            out.extend_from_slice(table_id.as_bytes());
            out.extend_from_slice(&repaired_at.to_be_bytes());
        }
        Request::RepairSynced {
            table_id,
            ranges,
            repaired_at,
        } => {
            out.extend_from_slice(table_id.as_bytes());
            put_ranges(out, ranges);
            out.extend_from_slice(&repaired_at.to_be_bytes());
        }
    }
}

/// A pending session goes at the end of the body, and only under the
/// pending verbs: the version 2 bodies are unchanged.
fn put_session(out: &mut Vec<u8>, session: &Option<uuid::Uuid>) {
    if let Some(s) = session {
        out.extend_from_slice(s.as_bytes());
    }
}

fn get_session(r: &mut Reader, verb: Verb) -> Result<Option<uuid::Uuid>, CodecError> {
    match verb {
        Verb::PendingStreamSession | Verb::PendingValidation => Ok(Some(get_uuid(r)?)),
        _ => Ok(None),
    }
}

fn put_ranges(out: &mut Vec<u8>, ranges: &[(i64, i64)]) {
    out.extend_from_slice(&(ranges.len() as u32).to_be_bytes());
    for (a, b) in ranges {
        out.extend_from_slice(&a.to_be_bytes());
        out.extend_from_slice(&b.to_be_bytes());
    }
}

fn get_ranges(r: &mut Reader) -> Result<Vec<(i64, i64)>, CodecError> {
    let n = r.count()?;
    let mut out = Vec::with_capacity(n.min(1 << 16));
    for _ in 0..n {
        out.push((r.i64()?, r.i64()?));
    }
    Ok(out)
}

fn put_mutations(out: &mut Vec<u8>, ms: &[Mutation]) {
    out.extend_from_slice(&(ms.len() as u32).to_be_bytes());
    let mut m_buf = Vec::new();
    for m in ms {
        m_buf.clear();
        encode_mutation(m, &mut m_buf);
        put_bytes(out, &m_buf);
    }
}

fn put_commit(out: &mut Vec<u8>, c: &Commit) {
    out.extend_from_slice(c.ballot.0.as_bytes());
    let mut m_buf = Vec::new();
    encode_mutation(&c.update, &mut m_buf);
    put_bytes(out, &m_buf);
}

fn put_opt_commit(out: &mut Vec<u8>, c: &Option<Commit>) {
    match c {
        Some(c) => {
            out.push(1);
            put_commit(out, c);
        }
        None => out.push(0),
    }
}

/// Mutations, or the id of a table this node does not know.
fn get_mutations(
    r: &mut Reader,
    comparator_of: ComparatorOf,
) -> Result<Result<Vec<Mutation>, uuid::Uuid>, CodecError> {
    let n = r.count()?;
    let mut ms = Vec::with_capacity(n);
    for _ in 0..n {
        match get_mutation(r, comparator_of)? {
            Ok(m) => ms.push(m),
            Err(id) => return Ok(Err(id)),
        }
    }
    Ok(Ok(ms))
}

fn get_mutation(
    r: &mut Reader,
    comparator_of: ComparatorOf,
) -> Result<Result<Mutation, uuid::Uuid>, CodecError> {
    let m = r.bytes()?;
    if m.len() < 16 {
        return Err(CodecError::Malformed("truncated mutation".into()));
    }
    match decode_mutation(&m, comparator_of)? {
        Some(m) => Ok(Ok(m)),
        None => Ok(Err(get_uuid(&mut Reader::new(&m))?)),
    }
}

fn get_commit(
    r: &mut Reader,
    comparator_of: ComparatorOf,
) -> Result<Result<Commit, uuid::Uuid>, CodecError> {
    let ballot = read_ballot(r)?;
    Ok(get_mutation(r, comparator_of)?.map(|update| Commit { ballot, update }))
}

fn get_opt_commit(
    r: &mut Reader,
    comparator_of: ComparatorOf,
) -> Result<Option<Commit>, CodecError> {
    match r.u8()? {
        0 => Ok(None),
        1 => match get_commit(r, comparator_of)? {
            Ok(c) => Ok(Some(c)),
            Err(id) => Err(CodecError::Malformed(format!(
                "a proposal for unknown table {id}"
            ))),
        },
        k => Err(CodecError::Malformed(format!("bad proposal flag {k}"))),
    }
}

fn no_trailing(r: &Reader, what: &str) -> Result<(), CodecError> {
    if r.is_empty() {
        Ok(())
    } else {
        Err(CodecError::Malformed(format!(
            "trailing bytes after {what}"
        )))
    }
}

/// Decodes a request body; `Ok(Err(id))` when it names a table this node
/// does not know.
pub fn decode_request(
    verb: Verb,
    body: &Bytes,
    comparator_of: ComparatorOf,
) -> Result<Result<Request, uuid::Uuid>, CodecError> {
    Ok(Ok(match verb {
        Verb::Mutation | Verb::Hint => {
            let mut r = Reader::new(body);
            let ms = match get_mutations(&mut r, comparator_of)? {
                Ok(ms) => ms,
                Err(id) => return Ok(Err(id)),
            };
            no_trailing(&r, "mutations")?;
            if verb == Verb::Hint {
                Request::Hint(ms)
            } else {
                Request::Mutation(ms)
            }
        }
        Verb::Read | Verb::RangeRead => match ReadCommand::decode(body, comparator_of)? {
            Ok(c) => Request::Read(c),
            Err(id) => return Ok(Err(id)),
        },
        Verb::Truncate => {
            let mut r = Reader::new(body);
            let table_id = get_uuid(&mut r)?;
            let timestamp_micros = r.i64()?;
            if !r.is_empty() {
                return Err(CodecError::Malformed(
                    "trailing bytes after a truncate".into(),
                ));
            }
            Request::Truncate {
                table_id,
                timestamp_micros,
            }
        }
        Verb::Gossip => Request::Gossip(body.to_vec()),
        Verb::Metadata => Request::Metadata(body.to_vec()),
        Verb::MetadataCatchUp => {
            let mut r = Reader::new(body);
            let epoch = get_u64(&mut r)?;
            if !r.is_empty() {
                return Err(CodecError::Malformed(
                    "trailing bytes after an epoch".into(),
                ));
            }
            Request::MetadataCatchUp(epoch)
        }
        Verb::CounterMutation => {
            let mut r = Reader::new(body);
            let c = r.take(2)?;
            let consistency = u16::from_be_bytes([c[0], c[1]]);
            let mut ms = match get_mutations(&mut r, comparator_of)? {
                Ok(ms) => ms,
                Err(id) => return Ok(Err(id)),
            };
            no_trailing(&r, "a counter mutation")?;
            let (Some(mutation), None) = (ms.pop(), ms.pop()) else {
                return Err(CodecError::Malformed(
                    "a counter mutation request carries one mutation".into(),
                ));
            };
            Request::CounterMutation {
                mutation,
                consistency,
            }
        }
        Verb::PaxosPrepare => {
            let mut r = Reader::new(body);
            let ballot = read_ballot(&mut r)?;
            let table_id = get_uuid(&mut r)?;
            let key = r.bytes()?;
            no_trailing(&r, "a prepare")?;
            Request::PaxosPrepare {
                ballot,
                table_id,
                key,
            }
        }
        Verb::PaxosPropose | Verb::PaxosCommit => {
            let mut r = Reader::new(body);
            let c = match get_commit(&mut r, comparator_of)? {
                Ok(c) => c,
                Err(id) => return Ok(Err(id)),
            };
            no_trailing(&r, "a proposal")?;
            if verb == Verb::PaxosPropose {
                Request::PaxosPropose(c)
            } else {
                Request::PaxosCommit(c)
            }
        }
        Verb::BatchStore => {
            let mut r = Reader::new(body);
            let id = get_uuid(&mut r)?;
            let mutations = match get_mutations(&mut r, comparator_of)? {
                Ok(ms) => ms,
                Err(id) => return Ok(Err(id)),
            };
            no_trailing(&r, "a batch")?;
            Request::BatchStore { id, mutations }
        }
        Verb::BatchRemove => {
            let mut r = Reader::new(body);
            let id = get_uuid(&mut r)?;
            no_trailing(&r, "a batch id")?;
            Request::BatchRemove(id)
        }
        Verb::StreamPage | Verb::StreamSetPage => {
            let mut r = Reader::new(body);
            let table_id = get_uuid(&mut r)?;
            let range = (r.i64()?, r.i64()?);
            let after = match r.u8()? {
                0 => None,
                1 => Some(r.bytes()?),
                k => return Err(CodecError::Malformed(format!("bad key flag {k}"))),
            };
            let max_bytes = r.u32()?;
            let set = if verb == Verb::StreamPage {
                StreamSet::All
            } else {
                match r.u8()? {
                    0 => StreamSet::Pending(get_uuid(&mut r)?),
                    1 => StreamSet::Repaired,
                    2 => StreamSet::NotRepaired,
                    k => return Err(CodecError::Malformed(format!("bad stream set {k}"))),
                }
            };
            no_trailing(&r, "a stream page request")?;
            Request::StreamPage {
                table_id,
                range,
                after,
                max_bytes,
                set,
            }
        }
        Verb::StreamSession | Verb::PendingStreamSession => {
            let mut r = Reader::new(body);
            let id = get_uuid(&mut r)?;
            let operation = String::from_utf8_lossy(&r.bytes()?).into_owned();
            let source = get_ip(&mut r)?;
            let n = r.count()?;
            let mut tables = Vec::with_capacity(n.min(1 << 12));
            for _ in 0..n {
                tables.push((get_uuid(&mut r)?, get_ranges(&mut r)?));
            }
            let pending = get_session(&mut r, verb)?;
            no_trailing(&r, "a stream session")?;
            Request::StreamSession(crate::messaging::StreamPlan {
                id,
                operation,
                source,
                tables,
                pending,
            })
        }
        Verb::Validation | Verb::PendingValidation => {
            let mut r = Reader::new(body);
            let table_id = get_uuid(&mut r)?;
            let ranges = get_ranges(&mut r)?;
            let pending = get_session(&mut r, verb)?;
            no_trailing(&r, "a validation request")?;
            Request::Validation {
                table_id,
                ranges,
                pending,
            }
        }
        Verb::RepairPrepare => {
            let mut r = Reader::new(body);
            let session = get_uuid(&mut r)?;
            let table_id = get_uuid(&mut r)?;
            let ranges = get_ranges(&mut r)?;
            no_trailing(&r, "a repair prepare message")?;
            Request::RepairPrepare {
                session,
                table_id,
                ranges,
            }
        }
        Verb::RepairFinish => {
            let mut r = Reader::new(body);
            let session = get_uuid(&mut r)?;
            let table_id = get_uuid(&mut r)?;
            let repaired_at = r.i64()?;
            no_trailing(&r, "a repair finish message")?;
            Request::RepairFinish {
                session,
                table_id,
                repaired_at,
            }
        }
        Verb::RepairSynced => {
            let mut r = Reader::new(body);
            let table_id = get_uuid(&mut r)?;
            let ranges = get_ranges(&mut r)?;
            let repaired_at = r.i32()?;
            no_trailing(&r, "a repair synced message")?;
            Request::RepairSynced {
                table_id,
                ranges,
                repaired_at,
            }
        }
    }))
}

/// Appends the body of a response.
pub fn encode_response(response: &Response, out: &mut Vec<u8>) {
    match response {
        Response::Done => out.push(0),
        Response::Read(r) => {
            out.push(1);
            r.encode(out);
        }
        Response::Failure(f) => {
            out.push(2);
            match f {
                ReplicaFailure::Overloaded(m) => {
                    out.push(0);
                    put_bytes(out, m.as_bytes());
                }
                ReplicaFailure::UnknownTable(id) => {
                    out.push(1);
                    out.extend_from_slice(id.as_bytes());
                }
                ReplicaFailure::Error(m) => {
                    out.push(2);
                    put_bytes(out, m.as_bytes());
                }
                ReplicaFailure::WriteTimeout {
                    received,
                    block_for,
                } => {
                    out.push(3);
                    out.extend_from_slice(&received.to_be_bytes());
                    out.extend_from_slice(&block_for.to_be_bytes());
                }
                ReplicaFailure::Unavailable { required, alive } => {
                    out.push(4);
                    out.extend_from_slice(&required.to_be_bytes());
                    out.extend_from_slice(&alive.to_be_bytes());
                }
            }
        }
        Response::Metadata(b) => {
            out.push(3);
            out.extend_from_slice(b);
        }
        Response::Promise(p) => {
            out.push(4);
            out.push(u8::from(p.promised));
            out.extend_from_slice(p.most_recent_promise.0.as_bytes());
            put_opt_commit(out, &p.accepted);
            put_opt_commit(out, &p.committed);
        }
        Response::Accepted(a) => {
            out.push(5);
            out.push(u8::from(*a));
        }
        Response::StreamPage {
            mutations,
            more,
            repaired_at,
        } => {
            // 9: a page of the repaired set (version 3), with its time
            match repaired_at {
                None => out.push(6),
                Some(at) => {
                    out.push(9);
                    out.extend_from_slice(&at.to_be_bytes());
                }
            }
            out.push(u8::from(*more));
            put_mutations(out, mutations);
        }
        Response::Streamed { partitions, bytes } => {
            out.push(8);
            out.extend_from_slice(&partitions.to_be_bytes());
            out.extend_from_slice(&bytes.to_be_bytes());
        }
        Response::Validation(hashes) => {
            out.push(7);
            out.extend_from_slice(&(hashes.len() as u32).to_be_bytes());
            for h in hashes {
                out.extend_from_slice(h);
            }
        }
    }
}

/// Decodes the body of a response to `request`.
pub fn decode_response(
    body: &Bytes,
    request: &Request,
    comparator_of: ComparatorOf,
) -> Result<Response, CodecError> {
    let mut r = Reader::new(body);
    let text = |r: &mut Reader| -> Result<String, CodecError> {
        Ok(String::from_utf8_lossy(&r.bytes()?).into_owned())
    };
    let out = match r.u8()? {
        0 => Response::Done,
        1 => {
            let Request::Read(c) = request else {
                return Err(CodecError::Malformed(
                    "read data for a request that is not a read".into(),
                ));
            };
            let cmp = comparator_of(c.table_id).ok_or_else(|| {
                CodecError::Malformed(format!("read data for unknown table {}", c.table_id))
            })?;
            return Ok(Response::Read(ReadResponse::decode(&body[1..], &cmp)?));
        }
        2 => Response::Failure(match r.u8()? {
            0 => ReplicaFailure::Overloaded(text(&mut r)?),
            1 => ReplicaFailure::UnknownTable(get_uuid(&mut r)?),
            2 => ReplicaFailure::Error(text(&mut r)?),
            3 => ReplicaFailure::WriteTimeout {
                received: r.u32()?,
                block_for: r.u32()?,
            },
            4 => ReplicaFailure::Unavailable {
                required: r.u32()?,
                alive: r.u32()?,
            },
            k => return Err(CodecError::Malformed(format!("unknown failure kind {k}"))),
        }),
        3 => return Ok(Response::Metadata(body[1..].to_vec())),
        4 => {
            let promised = match r.u8()? {
                0 => false,
                1 => true,
                k => return Err(CodecError::Malformed(format!("bad promise flag {k}"))),
            };
            Response::Promise(Box::new(Promise {
                promised,
                most_recent_promise: read_ballot(&mut r)?,
                accepted: get_opt_commit(&mut r, comparator_of)?,
                committed: get_opt_commit(&mut r, comparator_of)?,
            }))
        }
        5 => Response::Accepted(match r.u8()? {
            0 => false,
            1 => true,
            k => return Err(CodecError::Malformed(format!("bad accept flag {k}"))),
        }),
        tag @ (6 | 9) => {
            let repaired_at = if tag == 9 { Some(r.i64()?) } else { None };
            let more = match r.u8()? {
                0 => false,
                1 => true,
                k => return Err(CodecError::Malformed(format!("bad page flag {k}"))),
            };
            match get_mutations(&mut r, comparator_of)? {
                Ok(mutations) => Response::StreamPage {
                    mutations,
                    more,
                    repaired_at,
                },
                Err(id) => {
                    return Err(CodecError::Malformed(format!(
                        "streamed partitions of unknown table {id}"
                    )))
                }
            }
        }
        7 => {
            let n = r.count()?;
            let mut hashes = Vec::with_capacity(n.min(1 << 16));
            for _ in 0..n {
                let mut h = [0u8; 16];
                h.copy_from_slice(r.take(16)?);
                hashes.push(h);
            }
            Response::Validation(hashes)
        }
        8 => Response::Streamed {
            partitions: get_u64(&mut r)?,
            bytes: get_u64(&mut r)?,
        },
        k => return Err(CodecError::Malformed(format!("unknown response kind {k}"))),
    };
    if !r.is_empty() {
        return Err(CodecError::Malformed(
            "trailing bytes after a response".into(),
        ));
    }
    Ok(out)
}

/// Decodes anything: a frame, then its body as a request and as a response
/// (the fuzz target's entry point; the result is discarded).
pub fn decode_any(buf: &[u8], comparator_of: ComparatorOf) -> Result<(), CodecError> {
    let frame = decode_frame(buf, 1 << 20)?;
    let request = decode_request(frame.verb, &frame.body, comparator_of)?;
    if let Ok(req) = &request {
        let _ = decode_response(&frame.body, req, comparator_of);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};

    fn no_tables(_: uuid::Uuid) -> Option<Arc<ClusteringComparator>> {
        None
    }

    #[test]
    fn a_node_held_at_an_older_version_negotiates_it() {
        let h = Handshake {
            min_version: 1,
            max_version: MESSAGING_VERSION_CURRENT,
            connection: ConnectionType::Small,
            from: IpAddr::from([127, 0, 0, 2]),
            cluster_name: "Test Cluster".into(),
        };
        assert_eq!(h.negotiate_up_to("Test Cluster", 2), Ok(2));
        assert_eq!(
            h.negotiate_up_to("Test Cluster", 9),
            Ok(MESSAGING_VERSION_CURRENT)
        );
        let old = Handshake {
            max_version: 2,
            ..h.clone()
        };
        assert_eq!(old.negotiate("Test Cluster"), Ok(2));
    }

    #[test]
    fn handshakes_round_trip_and_negotiate() {
        let h = Handshake {
            min_version: 1,
            max_version: 3,
            connection: ConnectionType::Large,
            from: IpAddr::from([127, 0, 0, 3]),
            cluster_name: "Test Cluster".into(),
        };
        let b = h.encode();
        let mut pre = [0u8; 6];
        pre.copy_from_slice(&b[..6]);
        let n = Handshake::body_len(pre).expect("prefix");
        assert_eq!(Handshake::decode_body(&b[6..6 + n]), Ok(h.clone()));
        assert_eq!(h.negotiate("Test Cluster"), Ok(MESSAGING_VERSION_CURRENT));
        assert!(h
            .negotiate("Other")
            .is_err_and(|e| e.contains("'Test Cluster'")));
        let v6 = Handshake {
            from: "::1".parse().expect("ip"),
            ..h
        };
        let b = v6.encode();
        assert_eq!(Handshake::decode_body(&b[6..]), Ok(v6));
        for r in [
            HandshakeReply::Accepted { version: 1 },
            HandshakeReply::Refused {
                reason: "no".into(),
            },
        ] {
            let b = r.encode();
            let mut p = [0u8; 8];
            p.copy_from_slice(&b[..8]);
            let (back, n) = HandshakeReply::decode_prefix(p).expect("reply");
            assert_eq!(n, b.len() - 8);
            assert_eq!(std::mem::discriminant(&back), std::mem::discriminant(&r));
        }
    }

    #[test]
    fn a_traced_request_carries_its_session_in_version_2_bytes() {
        let trace = TraceParams {
            session_id: uuid::Uuid::from_u128(0x0102),
            kind: sibyl_tracing::TraceType::Query,
        };
        let mut f = Vec::new();
        encode_frame(
            FrameKind::Request,
            7,
            Verb::Read,
            Some(&trace),
            &[0xAB],
            &mut f,
        );
        // kind 3, id, verb 1 (READ_REQ), the session, type 1 (QUERY), the body
        let mut payload = vec![3, 0, 0, 0, 0, 0, 0, 0, 7, 1];
        payload.extend_from_slice(&0x0102u128.to_be_bytes());
        payload.extend_from_slice(&[1, 0xAB]);
        assert_eq!(&f[8..], &payload[..]);
        let frame = decode_frame(&f, 1 << 20).expect("frame");
        assert_eq!(frame.kind, FrameKind::Request);
        assert_eq!(frame.trace, Some(trace));
        assert_eq!(&frame.body[..], &[0xAB]);
        // responses never carry a session; a truncated session is refused
        let mut r = Vec::new();
        encode_frame(
            FrameKind::Response,
            7,
            Verb::Read,
            Some(&trace),
            &[],
            &mut r,
        );
        assert_eq!(decode_frame(&r, 1 << 20).expect("frame").trace, None);
        let mut o = Vec::new();
        encode_frame(
            FrameKind::OneWay,
            8,
            Verb::BatchRemove,
            Some(&trace),
            &[],
            &mut o,
        );
        assert_eq!(o[8], 4);
        let one_way = decode_frame(&o, 1 << 20).expect("frame");
        assert_eq!(
            (one_way.kind, one_way.trace),
            (FrameKind::OneWay, Some(trace))
        );
        let mut short = vec![3, 0, 0, 0, 0, 0, 0, 0, 7, 1, 9, 9];
        let crc = crc32fast::hash(&short).to_be_bytes();
        let mut framed = (short.len() as u32).to_be_bytes().to_vec();
        framed.extend_from_slice(&crc);
        framed.append(&mut short);
        assert!(matches!(
            decode_frame(&framed, 1 << 20),
            Err(CodecError::Malformed(_))
        ));
    }

    #[test]
    fn frames_round_trip_and_a_flipped_bit_fails_the_checksum() {
        let req = Request::Truncate {
            table_id: uuid::Uuid::from_u128(5),
            timestamp_micros: 77,
        };
        let mut body = Vec::new();
        encode_request(&req, &mut body);
        let mut f = Vec::new();
        encode_frame(FrameKind::Request, 42, Verb::Truncate, None, &body, &mut f);
        let frame = decode_frame(&f, 1 << 20).expect("frame");
        assert_eq!(
            (frame.kind, frame.id, frame.verb),
            (FrameKind::Request, 42, Verb::Truncate)
        );
        let back = decode_request(frame.verb, &frame.body, &no_tables)
            .expect("decodes")
            .expect("no table needed");
        assert_eq!(format!("{back:?}"), format!("{req:?}"));
        let mut bad = f.clone();
        let last = bad.len() - 1;
        bad[last] ^= 1;
        assert!(matches!(
            decode_frame(&bad, 1 << 20),
            Err(CodecError::Checksum { .. })
        ));
        assert!(matches!(
            decode_frame(&f, 4),
            Err(CodecError::FrameTooLarge(..))
        ));
        for r in [
            Response::Done,
            Response::Failure(ReplicaFailure::Overloaded("full".into())),
            Response::Failure(ReplicaFailure::UnknownTable(uuid::Uuid::from_u128(3))),
            Response::Failure(ReplicaFailure::Error("boom".into())),
            Response::Metadata(vec![1, 2]),
        ] {
            let mut b = Vec::new();
            encode_response(&r, &mut b);
            let back = decode_response(&Bytes::from(b), &req, &no_tables).expect("response");
            assert_eq!(format!("{back:?}"), format!("{r:?}"));
        }
    }

    #[test]
    fn the_replication_verbs_round_trip() {
        use sibyl_db::paxos::{Ballot, Commit, Promise};
        let cmp = ClusteringComparator::new(vec![(sibyl_types::CqlType::Int, false)]);
        let tables = move |_: uuid::Uuid| Some(cmp.clone());
        let m = Mutation {
            table_id: uuid::Uuid::from_u128(9),
            key: sibyl_db::DecoratedKey::new(Bytes::from_static(b"k")),
            update: sibyl_db::Partition::new(),
        };
        let commit = Commit {
            ballot: Ballot::at(1_700_000_000_000_000),
            update: m.clone(),
        };
        let requests = [
            Request::CounterMutation {
                mutation: m.clone(),
                consistency: 4,
            },
            Request::PaxosPrepare {
                ballot: commit.ballot,
                table_id: m.table_id,
                key: Bytes::from_static(b"k"),
            },
            Request::PaxosPropose(commit.clone()),
            Request::PaxosCommit(commit.clone()),
            Request::BatchStore {
                id: uuid::Uuid::from_u128(77),
                mutations: vec![m.clone(), m.clone()],
            },
            Request::BatchRemove(uuid::Uuid::from_u128(77)),
            Request::Hint(vec![m.clone()]),
            Request::StreamPage {
                table_id: m.table_id,
                range: (-5, i64::MAX),
                after: Some(Bytes::from_static(b"k")),
                max_bytes: 1 << 20,
                set: StreamSet::All,
            },
            Request::StreamPage {
                table_id: m.table_id,
                range: (-5, i64::MAX),
                after: None,
                max_bytes: 1 << 20,
                set: StreamSet::Pending(uuid::Uuid::from_u128(42)),
            },
            Request::StreamPage {
                table_id: m.table_id,
                range: (-5, 6),
                after: None,
                max_bytes: 1 << 20,
                set: StreamSet::Repaired,
            },
            Request::StreamPage {
                table_id: m.table_id,
                range: (-5, 6),
                after: Some(Bytes::from_static(b"k")),
                max_bytes: 1 << 20,
                set: StreamSet::NotRepaired,
            },
            Request::StreamSession(crate::messaging::StreamPlan {
                id: uuid::Uuid::from_u128(5),
                operation: "Bootstrap".into(),
                source: IpAddr::from([127, 0, 0, 2]),
                tables: vec![(m.table_id, vec![(i64::MIN, -1), (7, 9)])],
                pending: None,
            }),
            Request::StreamSession(crate::messaging::StreamPlan {
                id: uuid::Uuid::from_u128(5),
                operation: "Repair".into(),
                source: IpAddr::from([127, 0, 0, 2]),
                tables: vec![(m.table_id, vec![(7, 9)])],
                pending: Some(uuid::Uuid::from_u128(42)),
            }),
            Request::Validation {
                table_id: m.table_id,
                ranges: vec![(1, 2), (3, 4)],
                pending: None,
            },
            Request::Validation {
                table_id: m.table_id,
                ranges: vec![(1, 2)],
                pending: Some(uuid::Uuid::from_u128(42)),
            },
            Request::RepairPrepare {
                session: uuid::Uuid::from_u128(42),
                table_id: m.table_id,
                ranges: vec![(i64::MIN, 5), (9, -3)],
            },
            Request::RepairFinish {
                session: uuid::Uuid::from_u128(42),
                table_id: m.table_id,
                repaired_at: 1_700_000_000_000,
            },
            Request::RepairSynced {
                table_id: m.table_id,
                ranges: vec![(i64::MIN, 5), (9, -3)],
                repaired_at: 1_700_000_000,
            },
        ];
        for req in &requests {
            let mut body = Vec::new();
            encode_request(req, &mut body);
            let back = decode_request(req.verb(), &Bytes::from(body.clone()), &tables)
                .expect("decodes")
                .expect("table known");
            assert_eq!(format!("{back:?}"), format!("{req:?}"));
            if !matches!(
                req.verb(),
                Verb::BatchRemove
                    | Verb::PaxosPrepare
                    | Verb::StreamPage
                    | Verb::StreamSession
                    | Verb::Validation
                    | Verb::RepairSynced
                    | Verb::StreamSetPage
                    | Verb::PendingStreamSession
                    | Verb::PendingValidation
                    | Verb::RepairPrepare
                    | Verb::RepairFinish
            ) {
                // an unknown table is named, not an error
                let unknown = decode_request(req.verb(), &Bytes::from(body), &no_tables);
                assert!(matches!(unknown, Ok(Err(_))), "{req:?}");
            }
        }
        for r in [
            Response::Promise(Box::new(Promise {
                promised: true,
                most_recent_promise: Ballot::NONE,
                accepted: Some(commit.clone()),
                committed: None,
            })),
            Response::Promise(Box::new(Promise {
                promised: false,
                most_recent_promise: commit.ballot,
                accepted: None,
                committed: Some(commit.clone()),
            })),
            Response::Accepted(true),
            Response::Accepted(false),
            Response::Failure(ReplicaFailure::WriteTimeout {
                received: 1,
                block_for: 2,
            }),
            Response::Failure(ReplicaFailure::Unavailable {
                required: 2,
                alive: 1,
            }),
            Response::StreamPage {
                mutations: vec![m.clone(), m.clone()],
                more: true,
                repaired_at: None,
            },
            Response::StreamPage {
                mutations: vec![m.clone()],
                more: false,
                repaired_at: Some(1_700_000_000_000),
            },
            Response::Validation(vec![[7u8; 16], [0u8; 16]]),
            Response::Streamed {
                partitions: 3,
                bytes: 1 << 40,
            },
        ] {
            let mut b = Vec::new();
            encode_response(&r, &mut b);
            let back = decode_response(&Bytes::from(b), &requests[1], &tables).expect("response");
            assert_eq!(format!("{back:?}"), format!("{r:?}"));
        }
    }

    /// The decoders meet random bytes, truncated frames and frames with
    /// random bodies under a valid checksum, and answer with errors only.
    #[test]
    fn random_and_truncated_bytes_never_panic() {
        let cmp = ClusteringComparator::new(vec![(sibyl_types::CqlType::Int, false)]);
        let any_table = move |_: uuid::Uuid| Some(cmp.clone());
        let mut rng = rand::rngs::StdRng::seed_from_u64(7);
        for i in 0..20_000 {
            let n = rng.gen_range(0..200);
            let mut body: Vec<u8> = (0..n).map(|_| rng.gen()).collect();
            if i % 3 == 0 && !body.is_empty() {
                // plausible small counts and lengths reach deeper
                for b in body.iter_mut().step_by(3) {
                    *b %= 4;
                }
            }
            let verb = Verb::ALL[i % Verb::ALL.len()];
            let mut f = Vec::new();
            encode_frame(FrameKind::Request, i as u64, verb, None, &body, &mut f);
            let _ = decode_any(&f, &any_table);
            let _ = decode_any(&f, &no_tables);
            let cut = rng.gen_range(0..=f.len());
            let _ = decode_any(&f[..cut], &any_table);
            let _ = decode_any(&body, &any_table);
            let _ = Handshake::decode_body(&body);
        }
    }
}
