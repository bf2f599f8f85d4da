//! Request messages (spec section 4.1).

use std::collections::HashMap;

use bytes::Bytes;

use crate::wire::{self, Reader};
use crate::{Consistency, Opcode, ProtocolError, Value, Values};

/// Query flags (v3/v4: a byte; v5: an int).
mod qflags {
    pub const VALUES: u32 = 0x01;
    pub const SKIP_METADATA: u32 = 0x02;
    pub const PAGE_SIZE: u32 = 0x04;
    pub const PAGING_STATE: u32 = 0x08;
    pub const SERIAL_CONSISTENCY: u32 = 0x10;
    pub const TIMESTAMP: u32 = 0x20;
    pub const NAMES_FOR_VALUES: u32 = 0x40;
    pub const KEYSPACE: u32 = 0x80;
    pub const NOW_IN_SECONDS: u32 = 0x100;
}

/// `<query_parameters>` of QUERY and EXECUTE.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct QueryParameters {
    pub consistency: Consistency,
    pub values: Values,
    pub skip_metadata: bool,
    pub page_size: Option<i32>,
    pub paging_state: Option<Bytes>,
    pub serial_consistency: Option<Consistency>,
    /// Default write timestamp, microseconds.
    pub timestamp: Option<i64>,
    /// v5 only.
    pub keyspace: Option<String>,
    /// v5 only.
    pub now_in_seconds: Option<i32>,
}

impl Default for QueryParameters {
    fn default() -> Self {
        QueryParameters {
            consistency: Consistency::One,
            values: Values::default(),
            skip_metadata: false,
            page_size: None,
            paging_state: None,
            serial_consistency: None,
            timestamp: None,
            keyspace: None,
            now_in_seconds: None,
        }
    }
}

fn read_flags(r: &mut Reader<'_>, version: u8) -> Result<u32, ProtocolError> {
    if version >= 5 {
        Ok(r.i32()? as u32)
    } else {
        Ok(u32::from(r.u8()?))
    }
}

fn put_flags(out: &mut Vec<u8>, version: u8, f: u32) {
    if version >= 5 {
        wire::put_i32(out, f as i32);
    } else {
        wire::put_u8(out, f as u8);
    }
}

impl QueryParameters {
    pub(crate) fn read(r: &mut Reader<'_>, version: u8) -> Result<Self, ProtocolError> {
        let consistency = r.consistency()?;
        let f = read_flags(r, version)?;
        let values = if f & qflags::VALUES != 0 {
            let n = r.u16()?;
            if f & qflags::NAMES_FOR_VALUES != 0 {
                // (bounded: `n` comes from the network)
                let mut v = Vec::with_capacity(usize::from(n).min(64));
                for _ in 0..n {
                    let name = r.string()?;
                    v.push((name, r.value(version)?));
                }
                Values::Named(v)
            } else {
                let mut v = Vec::with_capacity(usize::from(n).min(64));
                for _ in 0..n {
                    v.push(r.value(version)?);
                }
                Values::Positional(v)
            }
        } else {
            Values::Positional(Vec::new())
        };
        let page_size = if f & qflags::PAGE_SIZE != 0 {
            Some(r.i32()?)
        } else {
            None
        };
        let paging_state = if f & qflags::PAGING_STATE != 0 {
            r.bytes()?
        } else {
            None
        };
        let serial_consistency = if f & qflags::SERIAL_CONSISTENCY != 0 {
            Some(r.consistency()?)
        } else {
            None
        };
        let timestamp = if f & qflags::TIMESTAMP != 0 {
            Some(r.i64()?)
        } else {
            None
        };
        let keyspace = if version >= 5 && f & qflags::KEYSPACE != 0 {
            Some(r.string()?)
        } else {
            None
        };
        let now_in_seconds = if version >= 5 && f & qflags::NOW_IN_SECONDS != 0 {
            Some(r.i32()?)
        } else {
            None
        };
        Ok(QueryParameters {
            consistency,
            values,
            skip_metadata: f & qflags::SKIP_METADATA != 0,
            page_size,
            paging_state,
            serial_consistency,
            timestamp,
            keyspace,
            now_in_seconds,
        })
    }

    /// Appends `<query_parameters>`. Keyspace and now_in_seconds are only
    /// written in v5.
    pub fn encode(&self, version: u8, out: &mut Vec<u8>) {
        let mut f = 0u32;
        if !self.values.is_empty() {
            f |= qflags::VALUES;
            if matches!(self.values, Values::Named(_)) {
                f |= qflags::NAMES_FOR_VALUES;
            }
        }
        if self.skip_metadata {
            f |= qflags::SKIP_METADATA;
        }
        if self.page_size.is_some() {
            f |= qflags::PAGE_SIZE;
        }
        if self.paging_state.is_some() {
            f |= qflags::PAGING_STATE;
        }
        if self.serial_consistency.is_some() {
            f |= qflags::SERIAL_CONSISTENCY;
        }
        if self.timestamp.is_some() {
            f |= qflags::TIMESTAMP;
        }
        if version >= 5 && self.keyspace.is_some() {
            f |= qflags::KEYSPACE;
        }
        if version >= 5 && self.now_in_seconds.is_some() {
            f |= qflags::NOW_IN_SECONDS;
        }
        wire::put_consistency(out, self.consistency);
        put_flags(out, version, f);
        match &self.values {
            Values::Positional(v) if !v.is_empty() => {
                let n = wire::put_count(out, v.len());
                for x in v.iter().take(n) {
                    wire::put_value(out, x);
                }
            }
            Values::Named(v) if !v.is_empty() => {
                let n = wire::put_count(out, v.len());
                for (name, x) in v.iter().take(n) {
                    wire::put_string(out, name);
                    wire::put_value(out, x);
                }
            }
            _ => {}
        }
        if let Some(p) = self.page_size {
            wire::put_i32(out, p);
        }
        if let Some(p) = &self.paging_state {
            wire::put_bytes(out, Some(p));
        }
        if let Some(c) = self.serial_consistency {
            wire::put_consistency(out, c);
        }
        if let Some(t) = self.timestamp {
            wire::put_i64(out, t);
        }
        if version >= 5 {
            if let Some(k) = &self.keyspace {
                wire::put_string(out, k);
            }
            if let Some(n) = self.now_in_seconds {
                wire::put_i32(out, n);
            }
        }
    }
}

/// What a batch statement runs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BatchQueryKind {
    /// kind 0: a query string.
    Query(String),
    /// kind 1: a prepared statement id.
    Prepared(Bytes),
}

/// One statement of a BATCH.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BatchStatement {
    pub kind: BatchQueryKind,
    pub values: Vec<Value>,
}

/// A BATCH request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Batch {
    /// 0 logged, 1 unlogged, 2 counter.
    pub batch_type: u8,
    pub statements: Vec<BatchStatement>,
    pub consistency: Consistency,
    pub serial_consistency: Option<Consistency>,
    pub timestamp: Option<i64>,
    /// v5 only.
    pub keyspace: Option<String>,
    /// v5 only.
    pub now_in_seconds: Option<i32>,
}

/// A request message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Request {
    Startup(HashMap<String, String>),
    Options,
    Query {
        query: String,
        params: QueryParameters,
    },
    /// `keyspace` is v5 only.
    Prepare {
        query: String,
        keyspace: Option<String>,
    },
    /// `result_metadata_id` is present in v5 only.
    Execute {
        id: Bytes,
        result_metadata_id: Option<Bytes>,
        params: QueryParameters,
    },
    Batch(Batch),
    Register(Vec<String>),
    AuthResponse(Option<Bytes>),
}

impl Request {
    /// Decodes a request body (after decompression and custom payload, see
    /// [`crate::decode_request_frame`]). Query flags are a byte in v3/v4 and
    /// an int in v5. Trailing bytes are ignored, as Cassandra does.
    pub fn decode(version: u8, opcode: u8, body: &[u8]) -> Result<Request, ProtocolError> {
        Self::read(version, opcode, Reader::new(body))
    }

    /// As [`Request::decode`], but values, ids and paging states are
    /// zero-copy slices of `body`.
    pub fn decode_bytes(version: u8, opcode: u8, body: &Bytes) -> Result<Request, ProtocolError> {
        Self::read(version, opcode, Reader::from_bytes(body))
    }

    pub(crate) fn read(
        version: u8,
        opcode: u8,
        mut r: Reader<'_>,
    ) -> Result<Request, ProtocolError> {
        let op = Opcode::try_from(opcode)?;
        let r = &mut r;
        Ok(match op {
            Opcode::Startup => Request::Startup(r.string_map()?),
            Opcode::Options => Request::Options,
            Opcode::Query => {
                let query = r.long_string()?;
                Request::Query {
                    query,
                    params: QueryParameters::read(r, version)?,
                }
            }
            Opcode::Prepare => {
                let query = r.long_string()?;
                let keyspace = if version >= 5 {
                    let f = r.i32()?;
                    if f & 0x01 != 0 {
                        Some(r.string()?)
                    } else {
                        None
                    }
                } else {
                    None
                };
                Request::Prepare { query, keyspace }
            }
            Opcode::Execute => {
                let id = r.short_bytes()?;
                let result_metadata_id = if version >= 5 {
                    Some(r.short_bytes()?)
                } else {
                    None
                };
                Request::Execute {
                    id,
                    result_metadata_id,
                    params: QueryParameters::read(r, version)?,
                }
            }
            Opcode::Batch => Request::Batch(read_batch(r, version)?),
            Opcode::Register => Request::Register(r.string_list()?),
            Opcode::AuthResponse => Request::AuthResponse(r.bytes()?),
            other => {
                return Err(ProtocolError::Malformed(format!(
                    "Wrong protocol direction (expected REQUEST, got RESPONSE) for opcode {} ({})",
                    other as u8,
                    other.name()
                )))
            }
        })
    }

    /// The opcode of this message.
    pub fn opcode(&self) -> u8 {
        (match self {
            Request::Startup(_) => Opcode::Startup,
            Request::Options => Opcode::Options,
            Request::Query { .. } => Opcode::Query,
            Request::Prepare { .. } => Opcode::Prepare,
            Request::Execute { .. } => Opcode::Execute,
            Request::Batch(_) => Opcode::Batch,
            Request::Register(_) => Opcode::Register,
            Request::AuthResponse(_) => Opcode::AuthResponse,
        }) as u8
    }

    /// Appends the body (for clients, tools and tests). Fields that do not
    /// exist in `version` are left out.
    pub fn encode(&self, version: u8, out: &mut Vec<u8>) {
        match self {
            Request::Startup(m) => wire::put_string_map(out, m),
            Request::Options => {}
            Request::Query { query, params } => {
                wire::put_long_string(out, query);
                params.encode(version, out);
            }
            Request::Prepare { query, keyspace } => {
                wire::put_long_string(out, query);
                if version >= 5 {
                    match keyspace {
                        Some(k) => {
                            wire::put_i32(out, 0x01);
                            wire::put_string(out, k);
                        }
                        None => wire::put_i32(out, 0),
                    }
                }
            }
            Request::Execute {
                id,
                result_metadata_id,
                params,
            } => {
                wire::put_short_bytes(out, id);
                if version >= 5 {
                    wire::put_short_bytes(out, result_metadata_id.as_deref().unwrap_or(&[]));
                }
                params.encode(version, out);
            }
            Request::Batch(b) => write_batch(b, version, out),
            Request::Register(l) => wire::put_string_list(out, l),
            Request::AuthResponse(t) => wire::put_bytes(out, t.as_deref()),
        }
    }
}

fn read_batch(r: &mut Reader<'_>, version: u8) -> Result<Batch, ProtocolError> {
    let batch_type = r.u8()?;
    if batch_type > 2 {
        return Err(ProtocolError::Malformed(format!(
            "Unknown BATCH type {batch_type}"
        )));
    }
    let n = r.u16()?;
    let mut statements = Vec::new();
    for _ in 0..n {
        let kind = match r.u8()? {
            0 => BatchQueryKind::Query(r.long_string()?),
            1 => BatchQueryKind::Prepared(r.short_bytes()?),
            k => {
                return Err(ProtocolError::Malformed(format!(
                    "Invalid query kind in BATCH messages. Must be 0 or 1 but got {k}"
                )))
            }
        };
        let nv = r.u16()?;
        let mut values = Vec::new();
        for _ in 0..nv {
            values.push(r.value(version)?);
        }
        statements.push(BatchStatement { kind, values });
    }
    let consistency = r.consistency()?;
    let f = read_flags(r, version)?;
    if f & qflags::NAMES_FOR_VALUES != 0 {
        // The spec itself says this cannot be implemented (CASSANDRA-10246).
        return Err(ProtocolError::Malformed(
            "Named values in batch messages are not supported (see CASSANDRA-10246)".into(),
        ));
    }
    let serial_consistency = if f & qflags::SERIAL_CONSISTENCY != 0 {
        Some(r.consistency()?)
    } else {
        None
    };
    let timestamp = if f & qflags::TIMESTAMP != 0 {
        Some(r.i64()?)
    } else {
        None
    };
    let keyspace = if version >= 5 && f & qflags::KEYSPACE != 0 {
        Some(r.string()?)
    } else {
        None
    };
    let now_in_seconds = if version >= 5 && f & qflags::NOW_IN_SECONDS != 0 {
        Some(r.i32()?)
    } else {
        None
    };
    Ok(Batch {
        batch_type,
        statements,
        consistency,
        serial_consistency,
        timestamp,
        keyspace,
        now_in_seconds,
    })
}

fn write_batch(b: &Batch, version: u8, out: &mut Vec<u8>) {
    wire::put_u8(out, b.batch_type);
    let n = wire::put_count(out, b.statements.len());
    for s in b.statements.iter().take(n) {
        match &s.kind {
            BatchQueryKind::Query(q) => {
                wire::put_u8(out, 0);
                wire::put_long_string(out, q);
            }
            BatchQueryKind::Prepared(id) => {
                wire::put_u8(out, 1);
                wire::put_short_bytes(out, id);
            }
        }
        let nv = wire::put_count(out, s.values.len());
        for v in s.values.iter().take(nv) {
            wire::put_value(out, v);
        }
    }
    wire::put_consistency(out, b.consistency);
    let mut f = 0u32;
    if b.serial_consistency.is_some() {
        f |= qflags::SERIAL_CONSISTENCY;
    }
    if b.timestamp.is_some() {
        f |= qflags::TIMESTAMP;
    }
    if version >= 5 && b.keyspace.is_some() {
        f |= qflags::KEYSPACE;
    }
    if version >= 5 && b.now_in_seconds.is_some() {
        f |= qflags::NOW_IN_SECONDS;
    }
    put_flags(out, version, f);
    if let Some(c) = b.serial_consistency {
        wire::put_consistency(out, c);
    }
    if let Some(t) = b.timestamp {
        wire::put_i64(out, t);
    }
    if version >= 5 {
        if let Some(k) = &b.keyspace {
            wire::put_string(out, k);
        }
        if let Some(n) = b.now_in_seconds {
            wire::put_i32(out, n);
        }
    }
}
