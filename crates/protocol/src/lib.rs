//! The CQL native protocol codec, versions 3, 4 and 5: frame headers, v5
//! segments (CRC24/CRC32 framing, optional LZ4), v3/v4 body compression, and
//! every request and response message.
//!
//! Pure encode/decode over byte slices: no I/O and no server logic. Nothing
//! here panics on input bytes; every decode returns [`ProtocolError`].
//!
//! Counterpart of Cassandra's `transport` / `transport.messages` codecs. The
//! spec is `shared/reference/native_protocol_v{4,5}.spec`.
//!
//! Typical server read path (v3/v4): [`FrameHeader::parse`] → wait for
//! `HEADER_LEN + length` bytes → [`decode_request_frame`] (decompresses,
//! strips a custom payload) → dispatch the [`Request`]. v5 adds a
//! [`segment::SegmentDecoder`] and [`segment::FrameReassembler`] in front.

use std::collections::HashMap;
use std::fmt;

use bytes::Bytes;

mod compression;
mod request;
mod response;
pub mod segment;
mod types;
pub mod wire;

pub use compression::{compress_body, decompress_body, Compression};
pub use request::{Batch, BatchQueryKind, BatchStatement, QueryParameters, Request};
pub use response::{
    ColumnSpec, ErrorKind, ErrorResponse, Event, PreparedMetadata, Response, ResultBody,
    RowsMetadata, SchemaChange, SchemaChangeTarget,
};
pub use types::{decode_type_option, encode_type_option, marshal_class_name, parse_marshal_class};

/// Length of a frame header in v3, v4 and v5.
pub const HEADER_LEN: usize = 9;

/// Lowest protocol version supported.
pub const MIN_VERSION: u8 = 3;
/// Highest protocol version supported.
pub const MAX_VERSION: u8 = 5;

/// Errors from decoding (and the few checks made while encoding).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProtocolError {
    /// Bad bytes: becomes a PROTOCOL_ERROR (0x000A) with this message.
    #[error("{0}")]
    Malformed(String),
    /// Unsupported version: reply PROTOCOL_ERROR with this message, with the
    /// client's stream id, in version `min(requested, 4)` (or 4 if < 3).
    #[error(
        "Invalid or unsupported protocol version ({0}); supported versions are (3/v3, 4/v4, 5/v5)"
    )]
    UnsupportedVersion(u8),
    /// Frame bigger than allowed. Cassandra answers this with an INVALID
    /// (0x2200) error carrying this message, then discards the frame.
    #[error("Request is too big: length {length} exceeds maximum allowed length {max}.")]
    FrameTooLarge { length: usize, max: usize },
    /// Opcode not known (or not a request when decoding requests).
    #[error("Unknown opcode {0}")]
    UnknownOpcode(u8),
    /// A compressed body or segment that does not decompress.
    #[error("Compression error: {0}")]
    Compression(String),
    /// A v5 segment whose header CRC24 or payload CRC32 does not match.
    #[error("Checksum mismatch: {0}")]
    BadCrc(String),
}

/// Message opcodes (spec section 2.4).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum Opcode {
    Error = 0,
    Startup = 1,
    Ready = 2,
    Authenticate = 3,
    Options = 5,
    Supported = 6,
    Query = 7,
    Result = 8,
    Prepare = 9,
    Execute = 0x0A,
    Register = 0x0B,
    Event = 0x0C,
    Batch = 0x0D,
    AuthChallenge = 0x0E,
    AuthResponse = 0x0F,
    AuthSuccess = 0x10,
}

impl Opcode {
    /// True for the opcodes a client sends.
    pub fn is_request(self) -> bool {
        matches!(
            self,
            Opcode::Startup
                | Opcode::Options
                | Opcode::Query
                | Opcode::Prepare
                | Opcode::Execute
                | Opcode::Register
                | Opcode::Batch
                | Opcode::AuthResponse
        )
    }

    /// Cassandra's name for the message type (`QUERY`, `AUTH_RESPONSE`, ...).
    pub fn name(self) -> &'static str {
        match self {
            Opcode::Error => "ERROR",
            Opcode::Startup => "STARTUP",
            Opcode::Ready => "READY",
            Opcode::Authenticate => "AUTHENTICATE",
            Opcode::Options => "OPTIONS",
            Opcode::Supported => "SUPPORTED",
            Opcode::Query => "QUERY",
            Opcode::Result => "RESULT",
            Opcode::Prepare => "PREPARE",
            Opcode::Execute => "EXECUTE",
            Opcode::Register => "REGISTER",
            Opcode::Event => "EVENT",
            Opcode::Batch => "BATCH",
            Opcode::AuthChallenge => "AUTH_CHALLENGE",
            Opcode::AuthResponse => "AUTH_RESPONSE",
            Opcode::AuthSuccess => "AUTH_SUCCESS",
        }
    }
}

impl TryFrom<u8> for Opcode {
    type Error = ProtocolError;
    fn try_from(v: u8) -> Result<Self, ProtocolError> {
        Ok(match v {
            0 => Opcode::Error,
            1 => Opcode::Startup,
            2 => Opcode::Ready,
            3 => Opcode::Authenticate,
            5 => Opcode::Options,
            6 => Opcode::Supported,
            7 => Opcode::Query,
            8 => Opcode::Result,
            9 => Opcode::Prepare,
            0x0A => Opcode::Execute,
            0x0B => Opcode::Register,
            0x0C => Opcode::Event,
            0x0D => Opcode::Batch,
            0x0E => Opcode::AuthChallenge,
            0x0F => Opcode::AuthResponse,
            0x10 => Opcode::AuthSuccess,
            _ => return Err(ProtocolError::UnknownOpcode(v)),
        })
    }
}

/// Header flags (spec section 2.2).
pub mod flags {
    /// Body compressed with the negotiated algorithm (v3/v4 only).
    pub const COMPRESSION: u8 = 0x01;
    /// Request: trace it. Response: body starts with a tracing `[uuid]`.
    pub const TRACING: u8 = 0x02;
    /// Body (after tracing id / warnings) starts with a `[bytes map]` (v4+).
    pub const CUSTOM_PAYLOAD: u8 = 0x04;
    /// Response body (after tracing id) starts with a `[string list]` (v4+).
    pub const WARNING: u8 = 0x08;
    /// Client opts in to a beta protocol version (v5).
    pub const USE_BETA: u8 = 0x10;
}

/// A frame header (9 bytes in v3+).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FrameHeader {
    /// Protocol version, without the direction bit.
    pub version: u8,
    /// Direction bit (0x80 of the first byte).
    pub is_response: bool,
    pub flags: u8,
    pub stream: i16,
    pub opcode: u8,
    /// Body length in bytes.
    pub length: u32,
}

impl FrameHeader {
    /// Parses a header from the start of `buf`.
    ///
    /// Like Cassandra, the version is checked on the first byte before a whole
    /// header is available (v1/v2 headers are shorter): any version outside
    /// 3..=5 is [`ProtocolError::UnsupportedVersion`]. `Ok(None)` means fewer
    /// than [`HEADER_LEN`] bytes are available yet. The opcode is not checked.
    pub fn parse(buf: &[u8]) -> Result<Option<FrameHeader>, ProtocolError> {
        let Some(&first) = buf.first() else {
            return Ok(None);
        };
        let version = first & 0x7F;
        if !(MIN_VERSION..=MAX_VERSION).contains(&version) {
            return Err(ProtocolError::UnsupportedVersion(version));
        }
        let Some(h) = buf.get(..HEADER_LEN) else {
            return Ok(None);
        };
        let mut r = wire::Reader::new(h);
        let _ = r.u8()?;
        let flags = r.u8()?;
        let stream = r.i16()?;
        let opcode = r.u8()?;
        let length = r.i32()? as u32;
        Ok(Some(FrameHeader {
            version,
            is_response: first & 0x80 != 0,
            flags,
            stream,
            opcode,
            length,
        }))
    }

    /// Appends the 9 header bytes.
    pub fn encode(&self, out: &mut Vec<u8>) {
        out.push((self.version & 0x7F) | if self.is_response { 0x80 } else { 0 });
        out.push(self.flags);
        out.extend_from_slice(&self.stream.to_be_bytes());
        out.push(self.opcode);
        out.extend_from_slice(&self.length.to_be_bytes());
    }

    /// Header length plus body length.
    pub fn frame_len(&self) -> usize {
        HEADER_LEN + self.length as usize
    }

    /// [`ProtocolError::FrameTooLarge`] if the whole frame exceeds `max` bytes.
    pub fn check_length(&self, max: usize) -> Result<(), ProtocolError> {
        if self.frame_len() > max {
            return Err(ProtocolError::FrameTooLarge {
                length: self.frame_len(),
                max,
            });
        }
        Ok(())
    }

    pub fn has_flag(&self, flag: u8) -> bool {
        self.flags & flag != 0
    }
}

/// Consistency levels (`[consistency]`, a `[short]`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u16)]
pub enum Consistency {
    Any = 0,
    One = 1,
    Two = 2,
    Three = 3,
    Quorum = 4,
    All = 5,
    LocalQuorum = 6,
    EachQuorum = 7,
    Serial = 8,
    LocalSerial = 9,
    LocalOne = 10,
}

impl Consistency {
    /// All levels, in code order.
    pub const ALL: [Consistency; 11] = [
        Consistency::Any,
        Consistency::One,
        Consistency::Two,
        Consistency::Three,
        Consistency::Quorum,
        Consistency::All,
        Consistency::LocalQuorum,
        Consistency::EachQuorum,
        Consistency::Serial,
        Consistency::LocalSerial,
        Consistency::LocalOne,
    ];

    /// Cassandra's name: `ONE`, `LOCAL_QUORUM`, ...
    pub fn name(self) -> &'static str {
        match self {
            Consistency::Any => "ANY",
            Consistency::One => "ONE",
            Consistency::Two => "TWO",
            Consistency::Three => "THREE",
            Consistency::Quorum => "QUORUM",
            Consistency::All => "ALL",
            Consistency::LocalQuorum => "LOCAL_QUORUM",
            Consistency::EachQuorum => "EACH_QUORUM",
            Consistency::Serial => "SERIAL",
            Consistency::LocalSerial => "LOCAL_SERIAL",
            Consistency::LocalOne => "LOCAL_ONE",
        }
    }

    /// SERIAL or LOCAL_SERIAL.
    pub fn is_serial(self) -> bool {
        matches!(self, Consistency::Serial | Consistency::LocalSerial)
    }
}

impl fmt::Display for Consistency {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl TryFrom<u16> for Consistency {
    type Error = ProtocolError;
    fn try_from(v: u16) -> Result<Self, ProtocolError> {
        Consistency::ALL.get(v as usize).copied().ok_or_else(|| {
            ProtocolError::Malformed(format!("Unknown code {v} for a consistency level"))
        })
    }
}

impl std::str::FromStr for Consistency {
    type Err = ProtocolError;
    /// Case-insensitive name, as cqlsh's `CONSISTENCY` takes it.
    fn from_str(s: &str) -> Result<Self, ProtocolError> {
        Consistency::ALL
            .iter()
            .copied()
            .find(|c| c.name().eq_ignore_ascii_case(s))
            .ok_or_else(|| ProtocolError::Malformed(format!("Unknown consistency level {s}")))
    }
}

/// A bound value (`[value]`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Value {
    Null,
    /// "Not set" (length -2, v4+): leave the column untouched.
    Unset,
    Set(Bytes),
}

/// Bound values of a QUERY or EXECUTE.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Values {
    Positional(Vec<Value>),
    /// Flag 0x40: each value preceded by its marker's name.
    Named(Vec<(String, Value)>),
}

impl Values {
    pub fn len(&self) -> usize {
        match self {
            Values::Positional(v) => v.len(),
            Values::Named(v) => v.len(),
        }
    }
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl Default for Values {
    fn default() -> Self {
        Values::Positional(Vec::new())
    }
}

/// A request frame's body, decoded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RequestEnvelope {
    pub request: Request,
    /// TRACING flag: the client asks for this request to be traced.
    pub tracing: bool,
    /// CUSTOM_PAYLOAD flag (v4+).
    pub custom_payload: Option<HashMap<String, Option<Bytes>>>,
}

/// Decodes a whole request frame body given its header: decompresses it when
/// the COMPRESSION flag is set (`compression` is the negotiated algorithm;
/// flag set without one is Malformed, as is the flag in v5), strips the custom
/// payload, decodes the message. Response opcodes are
/// [`ProtocolError::Malformed`], unknown ones [`ProtocolError::UnknownOpcode`].
///
/// Bound values, prepared ids and paging states are slices of `body` (of
/// the decompressed body when compressed), not copies: a write's values are
/// copied once, when the storage engine detaches its mutation, and a value
/// cloned on the way there costs a reference count, not an allocation.
pub fn decode_request_frame(
    header: &FrameHeader,
    body: &Bytes,
    compression: Option<Compression>,
) -> Result<RequestEnvelope, ProtocolError> {
    let decompressed;
    let mut body = body;
    if header.has_flag(flags::COMPRESSION) {
        match compression {
            Some(c) if header.version < 5 => {
                decompressed = Bytes::from(decompress_body(c, body)?);
                body = &decompressed;
            }
            _ => {
                return Err(ProtocolError::Malformed(
                    "Received frame with COMPRESSION flag but compression is not enabled".into(),
                ))
            }
        }
    }
    let mut r = wire::Reader::from_bytes(body);
    let custom_payload = if header.has_flag(flags::CUSTOM_PAYLOAD) && header.version >= 4 {
        Some(r.bytes_map()?)
    } else {
        None
    };
    let request = Request::read(header.version, header.opcode, r)?;
    Ok(RequestEnvelope {
        request,
        tracing: header.has_flag(flags::TRACING),
        custom_payload,
    })
}

/// Encodes a whole request frame (for clients, tests and tools). The body is
/// compressed when `compression` is given, except STARTUP and OPTIONS
/// (compression is not negotiated yet) and in v5.
pub fn encode_request_frame(
    version: u8,
    stream: i16,
    req: &Request,
    compression: Option<Compression>,
    out: &mut Vec<u8>,
) {
    let mut body = Vec::new();
    req.encode(version, &mut body);
    let mut fl = 0u8;
    let opcode = req.opcode();
    let compression = compression.filter(|_| {
        version < 5 && opcode != Opcode::Startup as u8 && opcode != Opcode::Options as u8
    });
    if let Some(c) = compression {
        body = compress_body(c, &body);
        fl |= flags::COMPRESSION;
    }
    FrameHeader {
        version,
        is_response: false,
        flags: fl,
        stream,
        opcode,
        length: body.len() as u32,
    }
    .encode(out);
    out.extend_from_slice(&body);
}

/// Encodes a whole response frame: header, then (compressed, if
/// `compression` is given: v3/v4 only, the caller decides when compression
/// has been negotiated) the body: tracing `[uuid]` if `tracing_id` (TRACING
/// flag), warnings `[string list]` if non-empty and v4+ (WARNING flag), then
/// the message.
pub fn encode_response_frame(
    version: u8,
    stream: i16,
    resp: &Response,
    compression: Option<Compression>,
    warnings: &[String],
    tracing_id: Option<[u8; 16]>,
    out: &mut Vec<u8>,
) {
    // the body is written in place after the header, whose flags and length
    // are filled in once it is known (one buffer, grown once if at all)
    let start = out.len();
    let mut header = FrameHeader {
        version,
        is_response: true,
        flags: 0,
        stream,
        opcode: resp.opcode(),
        length: 0,
    };
    header.encode(out);
    let body = out.len();
    if let Some(id) = tracing_id {
        header.flags |= flags::TRACING;
        out.extend_from_slice(&id);
    }
    if !warnings.is_empty() && version >= 4 {
        header.flags |= flags::WARNING;
        wire::put_string_list(out, warnings);
    }
    resp.encode_body(version, out);
    if let Some(c) = compression.filter(|_| version < 5) {
        let compressed = compress_body(c, &out[body..]);
        out.truncate(body);
        out.extend_from_slice(&compressed);
        header.flags |= flags::COMPRESSION;
    }
    // (the header's layout: version, flags, stream, opcode, length)
    let length = (out.len() - body) as u32;
    out[start + 1] = header.flags;
    out[body - 4..body].copy_from_slice(&length.to_be_bytes());
}

/// A response frame's body, decoded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ResponseEnvelope {
    pub response: Response,
    pub tracing_id: Option<[u8; 16]>,
    pub warnings: Vec<String>,
    pub custom_payload: Option<HashMap<String, Option<Bytes>>>,
}

/// Decodes a response frame body given its header (for clients and tests).
pub fn decode_response_frame(
    header: &FrameHeader,
    body: &[u8],
    compression: Option<Compression>,
) -> Result<ResponseEnvelope, ProtocolError> {
    let decompressed;
    let mut body = body;
    if header.has_flag(flags::COMPRESSION) {
        let c = compression.ok_or_else(|| {
            ProtocolError::Malformed(
                "Received frame with COMPRESSION flag but compression is not enabled".into(),
            )
        })?;
        decompressed = decompress_body(c, body)?;
        body = &decompressed;
    }
    let mut r = wire::Reader::new(body);
    let tracing_id = if header.has_flag(flags::TRACING) {
        Some(r.uuid()?)
    } else {
        None
    };
    let warnings = if header.has_flag(flags::WARNING) {
        r.string_list()?
    } else {
        Vec::new()
    };
    let custom_payload = if header.has_flag(flags::CUSTOM_PAYLOAD) {
        Some(r.bytes_map()?)
    } else {
        None
    };
    let response = Response::decode(header.version, header.opcode, r.rest())?;
    Ok(ResponseEnvelope {
        response,
        tracing_id,
        warnings,
        custom_payload,
    })
}
