//! Response messages (spec section 4.2) and error bodies (section 9).

use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};

use bytes::Bytes;
use sibyl_types::CqlType;

use crate::types::{encode_type_option, read_type_option};
use crate::wire::{self, Reader};
use crate::{Consistency, Opcode, ProtocolError};

fn malformed(msg: impl Into<String>) -> ProtocolError {
    ProtocolError::Malformed(msg.into())
}

/// Caps counts whose elements take no bytes on the wire (placeholders), so a
/// 4-byte lie cannot make us allocate gigabytes.
const MAX_PLACEHOLDERS: i32 = 65_536;

// ---------------------------------------------------------------- errors

/// An ERROR response: `<code><message>` plus the code's extra fields.
///
/// `kind` holds the code and its extra fields, `message` the human text. Build
/// with [`ErrorResponse::new`] or the shortcuts (`invalid`, `syntax_error`, ...).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ErrorResponse {
    pub message: String,
    pub kind: ErrorKind,
}

/// Error codes and their extra fields (spec section 9).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ErrorKind {
    /// 0x0000
    ServerError,
    /// 0x000A
    ProtocolError,
    /// 0x0100
    AuthenticationError,
    /// 0x1000
    Unavailable {
        consistency: Consistency,
        required: i32,
        alive: i32,
    },
    /// 0x1001
    Overloaded,
    /// 0x1002
    IsBootstrapping,
    /// 0x1003
    TruncateError,
    /// 0x1100. `contentions` is written only in v5 and only when
    /// `write_type == "CAS"` (0 if `None`).
    WriteTimeout {
        consistency: Consistency,
        received: i32,
        block_for: i32,
        write_type: String,
        contentions: Option<u16>,
    },
    /// 0x1200
    ReadTimeout {
        consistency: Consistency,
        received: i32,
        block_for: i32,
        data_present: bool,
    },
    /// 0x1300. v5 writes the reason map; v3/v4 only its size
    /// (`<numfailures>`), and decoding v4 gives that many
    /// `(0.0.0.0, 0)` placeholders. Sent as READ_TIMEOUT in v3.
    ReadFailure {
        consistency: Consistency,
        received: i32,
        block_for: i32,
        reasons: Vec<(IpAddr, u16)>,
        data_present: bool,
    },
    /// 0x1400. Sent as INVALID in v3.
    FunctionFailure {
        keyspace: String,
        function: String,
        arg_types: Vec<String>,
    },
    /// 0x1500. Like ReadFailure for `reasons`. Sent as WRITE_TIMEOUT in v3.
    WriteFailure {
        consistency: Consistency,
        received: i32,
        block_for: i32,
        reasons: Vec<(IpAddr, u16)>,
        write_type: String,
    },
    /// 0x1600
    CdcWriteFailure,
    /// 0x1700 (v5). Sent as WRITE_TIMEOUT with write type CAS before v5.
    CasWriteUnknown {
        consistency: Consistency,
        received: i32,
        block_for: i32,
    },
    /// 0x2000
    SyntaxError,
    /// 0x2100
    Unauthorized,
    /// 0x2200
    Invalid,
    /// 0x2300
    ConfigError,
    /// 0x2400. `table` is empty when a keyspace already exists.
    AlreadyExists { keyspace: String, table: String },
    /// 0x2500
    Unprepared { id: Bytes },
}

impl ErrorKind {
    /// The wire error code.
    pub fn code(&self) -> i32 {
        match self {
            ErrorKind::ServerError => 0x0000,
            ErrorKind::ProtocolError => 0x000A,
            ErrorKind::AuthenticationError => 0x0100,
            ErrorKind::Unavailable { .. } => 0x1000,
            ErrorKind::Overloaded => 0x1001,
            ErrorKind::IsBootstrapping => 0x1002,
            ErrorKind::TruncateError => 0x1003,
            ErrorKind::WriteTimeout { .. } => 0x1100,
            ErrorKind::ReadTimeout { .. } => 0x1200,
            ErrorKind::ReadFailure { .. } => 0x1300,
            ErrorKind::FunctionFailure { .. } => 0x1400,
            ErrorKind::WriteFailure { .. } => 0x1500,
            ErrorKind::CdcWriteFailure => 0x1600,
            ErrorKind::CasWriteUnknown { .. } => 0x1700,
            ErrorKind::SyntaxError => 0x2000,
            ErrorKind::Unauthorized => 0x2100,
            ErrorKind::Invalid => 0x2200,
            ErrorKind::ConfigError => 0x2300,
            ErrorKind::AlreadyExists { .. } => 0x2400,
            ErrorKind::Unprepared { .. } => 0x2500,
        }
    }
}

impl ErrorResponse {
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        ErrorResponse {
            message: message.into(),
            kind,
        }
    }
    pub fn server_error(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::ServerError, message)
    }
    pub fn protocol_error(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::ProtocolError, message)
    }
    pub fn invalid(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Invalid, message)
    }
    pub fn syntax_error(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::SyntaxError, message)
    }
    pub fn unauthorized(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Unauthorized, message)
    }
    pub fn config_error(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::ConfigError, message)
    }
    pub fn authentication_error(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::AuthenticationError, message)
    }
    /// The wire error code.
    pub fn code(&self) -> i32 {
        self.kind.code()
    }

    /// What an older protocol version gets instead (as Cassandra's
    /// `ErrorMessage.getBackwardsCompatibleException`).
    fn for_version(&self, version: u8) -> std::borrow::Cow<'_, ErrorResponse> {
        use std::borrow::Cow;
        let kind = match &self.kind {
            ErrorKind::ReadFailure {
                consistency,
                received,
                block_for,
                data_present,
                ..
            } if version < 4 => ErrorKind::ReadTimeout {
                consistency: *consistency,
                received: *received,
                block_for: *block_for,
                data_present: *data_present,
            },
            ErrorKind::WriteFailure {
                consistency,
                received,
                block_for,
                write_type,
                ..
            } if version < 4 => ErrorKind::WriteTimeout {
                consistency: *consistency,
                received: *received,
                block_for: *block_for,
                write_type: write_type.clone(),
                contentions: None,
            },
            ErrorKind::FunctionFailure { .. } if version < 4 => ErrorKind::Invalid,
            ErrorKind::CasWriteUnknown {
                consistency,
                received,
                block_for,
            } if version < 5 => ErrorKind::WriteTimeout {
                consistency: *consistency,
                received: *received,
                block_for: *block_for,
                write_type: "CAS".into(),
                contentions: None,
            },
            _ => return Cow::Borrowed(self),
        };
        Cow::Owned(ErrorResponse {
            message: self.message.clone(),
            kind,
        })
    }

    fn encode(&self, version: u8, out: &mut Vec<u8>) {
        let e = self.for_version(version);
        wire::put_i32(out, e.kind.code());
        wire::put_string(out, &e.message);
        let put_reasons = |out: &mut Vec<u8>, reasons: &[(IpAddr, u16)]| {
            if version >= 5 {
                wire::put_i32(out, reasons.len().min(i32::MAX as usize) as i32);
                for (ip, code) in reasons {
                    wire::put_inetaddr(out, ip);
                    wire::put_u16(out, *code);
                }
            } else {
                wire::put_i32(out, reasons.len().min(i32::MAX as usize) as i32);
            }
        };
        match &e.kind {
            ErrorKind::Unavailable {
                consistency,
                required,
                alive,
            } => {
                wire::put_consistency(out, *consistency);
                wire::put_i32(out, *required);
                wire::put_i32(out, *alive);
            }
            ErrorKind::WriteTimeout {
                consistency,
                received,
                block_for,
                write_type,
                contentions,
            } => {
                wire::put_consistency(out, *consistency);
                wire::put_i32(out, *received);
                wire::put_i32(out, *block_for);
                wire::put_string(out, write_type);
                if version >= 5 && write_type == "CAS" {
                    wire::put_u16(out, contentions.unwrap_or(0));
                }
            }
            ErrorKind::ReadTimeout {
                consistency,
                received,
                block_for,
                data_present,
            } => {
                wire::put_consistency(out, *consistency);
                wire::put_i32(out, *received);
                wire::put_i32(out, *block_for);
                wire::put_u8(out, u8::from(*data_present));
            }
            ErrorKind::ReadFailure {
                consistency,
                received,
                block_for,
                reasons,
                data_present,
            } => {
                wire::put_consistency(out, *consistency);
                wire::put_i32(out, *received);
                wire::put_i32(out, *block_for);
                put_reasons(out, reasons);
                wire::put_u8(out, u8::from(*data_present));
            }
            ErrorKind::FunctionFailure {
                keyspace,
                function,
                arg_types,
            } => {
                wire::put_string(out, keyspace);
                wire::put_string(out, function);
                wire::put_string_list(out, arg_types);
            }
            ErrorKind::WriteFailure {
                consistency,
                received,
                block_for,
                reasons,
                write_type,
            } => {
                wire::put_consistency(out, *consistency);
                wire::put_i32(out, *received);
                wire::put_i32(out, *block_for);
                put_reasons(out, reasons);
                wire::put_string(out, write_type);
            }
            ErrorKind::CasWriteUnknown {
                consistency,
                received,
                block_for,
            } => {
                wire::put_consistency(out, *consistency);
                wire::put_i32(out, *received);
                wire::put_i32(out, *block_for);
            }
            ErrorKind::AlreadyExists { keyspace, table } => {
                wire::put_string(out, keyspace);
                wire::put_string(out, table);
            }
            ErrorKind::Unprepared { id } => wire::put_short_bytes(out, id),
            _ => {}
        }
    }

    fn read(r: &mut Reader<'_>, version: u8) -> Result<Self, ProtocolError> {
        let code = r.i32()?;
        let message = r.string()?;
        let read_reasons = |r: &mut Reader<'_>| -> Result<Vec<(IpAddr, u16)>, ProtocolError> {
            let n = r.i32()?;
            if n < 0 {
                return Err(malformed(format!("Invalid number of failures {n}")));
            }
            let mut v = Vec::new();
            if version >= 5 {
                for _ in 0..n {
                    let ip = r.inetaddr()?;
                    v.push((ip, r.u16()?));
                }
            } else {
                if n > MAX_PLACEHOLDERS {
                    return Err(malformed(format!("Too many failures {n}")));
                }
                v.resize(n as usize, (IpAddr::V4(Ipv4Addr::UNSPECIFIED), 0));
            }
            Ok(v)
        };
        let kind = match code {
            0x0000 => ErrorKind::ServerError,
            0x000A => ErrorKind::ProtocolError,
            0x0100 => ErrorKind::AuthenticationError,
            0x1000 => ErrorKind::Unavailable {
                consistency: r.consistency()?,
                required: r.i32()?,
                alive: r.i32()?,
            },
            0x1001 => ErrorKind::Overloaded,
            0x1002 => ErrorKind::IsBootstrapping,
            0x1003 => ErrorKind::TruncateError,
            0x1100 => {
                let consistency = r.consistency()?;
                let received = r.i32()?;
                let block_for = r.i32()?;
                let write_type = r.string()?;
                let contentions = if version >= 5 && write_type == "CAS" {
                    Some(r.u16()?)
                } else {
                    None
                };
                ErrorKind::WriteTimeout {
                    consistency,
                    received,
                    block_for,
                    write_type,
                    contentions,
                }
            }
            0x1200 => ErrorKind::ReadTimeout {
                consistency: r.consistency()?,
                received: r.i32()?,
                block_for: r.i32()?,
                data_present: r.u8()? != 0,
            },
            0x1300 => ErrorKind::ReadFailure {
                consistency: r.consistency()?,
                received: r.i32()?,
                block_for: r.i32()?,
                reasons: read_reasons(r)?,
                data_present: r.u8()? != 0,
            },
            0x1400 => ErrorKind::FunctionFailure {
                keyspace: r.string()?,
                function: r.string()?,
                arg_types: r.string_list()?,
            },
            0x1500 => ErrorKind::WriteFailure {
                consistency: r.consistency()?,
                received: r.i32()?,
                block_for: r.i32()?,
                reasons: read_reasons(r)?,
                write_type: r.string()?,
            },
            0x1600 => ErrorKind::CdcWriteFailure,
            0x1700 => ErrorKind::CasWriteUnknown {
                consistency: r.consistency()?,
                received: r.i32()?,
                block_for: r.i32()?,
            },
            0x2000 => ErrorKind::SyntaxError,
            0x2100 => ErrorKind::Unauthorized,
            0x2200 => ErrorKind::Invalid,
            0x2300 => ErrorKind::ConfigError,
            0x2400 => ErrorKind::AlreadyExists {
                keyspace: r.string()?,
                table: r.string()?,
            },
            0x2500 => ErrorKind::Unprepared {
                id: r.short_bytes()?,
            },
            other => return Err(malformed(format!("Unknown error code {other}"))),
        };
        Ok(ErrorResponse { message, kind })
    }
}

impl From<&ProtocolError> for ErrorResponse {
    /// The error the server answers a bad frame with: PROTOCOL_ERROR, except
    /// a too-large frame, which Cassandra answers with INVALID.
    fn from(e: &ProtocolError) -> Self {
        match e {
            ProtocolError::FrameTooLarge { .. } => ErrorResponse::invalid(e.to_string()),
            _ => ErrorResponse::protocol_error(e.to_string()),
        }
    }
}

impl From<ProtocolError> for ErrorResponse {
    fn from(e: ProtocolError) -> Self {
        ErrorResponse::from(&e)
    }
}

// ---------------------------------------------------------------- metadata

/// One column (or bind marker) of result or prepared metadata.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ColumnSpec {
    pub keyspace: String,
    pub table: String,
    pub name: String,
    pub typ: CqlType,
}

/// Metadata of a Rows result (spec 4.2.5.2).
///
/// Encoding sets Global_tables_spec when all columns share keyspace and
/// table, Has_more_pages when `paging_state` is set, and (v5)
/// Metadata_changed when `new_metadata_id` is set. With `no_metadata` the
/// column count is still written (from `columns.len()`) but no specs; decoding
/// such metadata yields that many placeholder columns (empty names, `blob`).
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct RowsMetadata {
    /// Shared: a statement's result columns are the same for every
    /// execution, and each execution's response holds them.
    pub columns: std::sync::Arc<[ColumnSpec]>,
    pub paging_state: Option<Bytes>,
    pub no_metadata: bool,
    /// v5 Metadata_changed.
    pub new_metadata_id: Option<Bytes>,
}

mod rflags {
    pub const GLOBAL_TABLES_SPEC: i32 = 0x0001;
    pub const HAS_MORE_PAGES: i32 = 0x0002;
    pub const NO_METADATA: i32 = 0x0004;
    pub const METADATA_CHANGED: i32 = 0x0008;
}

fn global_spec(columns: &[ColumnSpec]) -> Option<(&str, &str)> {
    let first = columns.first()?;
    columns
        .iter()
        .all(|c| c.keyspace == first.keyspace && c.table == first.table)
        .then_some((first.keyspace.as_str(), first.table.as_str()))
}

fn write_specs(
    columns: &[ColumnSpec],
    global: Option<(&str, &str)>,
    version: u8,
    out: &mut Vec<u8>,
) {
    if let Some((ks, t)) = global {
        wire::put_string(out, ks);
        wire::put_string(out, t);
    }
    for c in columns {
        if global.is_none() {
            wire::put_string(out, &c.keyspace);
            wire::put_string(out, &c.table);
        }
        wire::put_string(out, &c.name);
        encode_type_option(&c.typ, version, out);
    }
}

/// Result column specs a thread encoded last, with the `columns` each
/// came from (held, so no other statement's columns come to live at the
/// same address while cached).
struct EncodedSpecs {
    columns: std::sync::Arc<[ColumnSpec]>,
    version: u8,
    global: bool,
    bytes: std::rc::Rc<[u8]>,
}

/// Statements' specs a thread keeps encoded.
const ENCODED_SPECS_KEPT: usize = 32;

thread_local! {
    static ENCODED_SPECS: std::cell::RefCell<std::collections::VecDeque<EncodedSpecs>> =
        const { std::cell::RefCell::new(std::collections::VecDeque::new()) };
}

/// Whether `columns` share one table spec, and their [`write_specs`]: a
/// statement's result columns are shared by every execution
/// ([`RowsMetadata::columns`]), so a thread encodes them once and copies
/// them after that (the names, the types and the comparisons that find a
/// global table spec were 3% of a read's instructions, every time the same).
fn encoded_specs(columns: &std::sync::Arc<[ColumnSpec]>, version: u8) -> (bool, std::rc::Rc<[u8]>) {
    // columns no one else holds are one response's (an unprepared
    // statement's): encoded as they are, not kept in place of a statement's
    if std::sync::Arc::strong_count(columns) == 1 {
        return encode_specs(columns, version);
    }
    ENCODED_SPECS.with(|cache| {
        let mut cache = cache.borrow_mut();
        if let Some(e) = cache
            .iter()
            .find(|e| e.version == version && std::sync::Arc::ptr_eq(&e.columns, columns))
        {
            return (e.global, e.bytes.clone());
        }
        let (global, bytes) = encode_specs(columns, version);
        if cache.len() >= ENCODED_SPECS_KEPT {
            cache.pop_front();
        }
        cache.push_back(EncodedSpecs {
            columns: columns.clone(),
            version,
            global,
            bytes: bytes.clone(),
        });
        (global, bytes)
    })
}

/// Whether `columns` share one table spec, and their [`write_specs`].
fn encode_specs(columns: &[ColumnSpec], version: u8) -> (bool, std::rc::Rc<[u8]>) {
    let global = global_spec(columns);
    let mut bytes = Vec::new();
    write_specs(columns, global, version, &mut bytes);
    (global.is_some(), bytes.into())
}

fn read_specs(
    r: &mut Reader<'_>,
    count: i32,
    global: bool,
) -> Result<Vec<ColumnSpec>, ProtocolError> {
    let g = if global {
        Some((r.string()?, r.string()?))
    } else {
        None
    };
    let mut cols = Vec::new();
    for _ in 0..count {
        let (keyspace, table) = match &g {
            Some((k, t)) => (k.clone(), t.clone()),
            None => (r.string()?, r.string()?),
        };
        let name = r.string()?;
        let typ = read_type_option(r, 0)?;
        cols.push(ColumnSpec {
            keyspace,
            table,
            name,
            typ,
        });
    }
    Ok(cols)
}

fn read_count(r: &mut Reader<'_>, what: &str) -> Result<i32, ProtocolError> {
    let n = r.i32()?;
    if n < 0 {
        return Err(malformed(format!("Invalid {what} {n}")));
    }
    Ok(n)
}

impl RowsMetadata {
    /// Appends `<metadata>` of a Rows result.
    pub fn encode(&self, version: u8, out: &mut Vec<u8>) {
        let specs = (!self.no_metadata).then(|| encoded_specs(&self.columns, version));
        let mut f = 0;
        if specs.as_ref().is_some_and(|(global, _)| *global) {
            f |= rflags::GLOBAL_TABLES_SPEC;
        }
        if self.paging_state.is_some() {
            f |= rflags::HAS_MORE_PAGES;
        }
        if self.no_metadata {
            f |= rflags::NO_METADATA;
        }
        let changed = version >= 5 && self.new_metadata_id.is_some() && !self.no_metadata;
        if changed {
            f |= rflags::METADATA_CHANGED;
        }
        wire::put_i32(out, f);
        wire::put_i32(out, self.columns.len().min(i32::MAX as usize) as i32);
        if let Some(p) = &self.paging_state {
            wire::put_bytes(out, Some(p));
        }
        if changed {
            wire::put_short_bytes(out, self.new_metadata_id.as_deref().unwrap_or(&[]));
        }
        if let Some((_, bytes)) = specs {
            out.extend_from_slice(&bytes);
        }
    }

    pub(crate) fn read(r: &mut Reader<'_>, version: u8) -> Result<Self, ProtocolError> {
        let f = r.i32()?;
        let count = read_count(r, "column count")?;
        let paging_state = if f & rflags::HAS_MORE_PAGES != 0 {
            r.bytes()?
        } else {
            None
        };
        let new_metadata_id = if version >= 5 && f & rflags::METADATA_CHANGED != 0 {
            Some(r.short_bytes()?)
        } else {
            None
        };
        let no_metadata = f & rflags::NO_METADATA != 0;
        let columns = if no_metadata {
            if count > MAX_PLACEHOLDERS {
                return Err(malformed(format!("Too many columns {count}")));
            }
            vec![
                ColumnSpec {
                    keyspace: String::new(),
                    table: String::new(),
                    name: String::new(),
                    typ: CqlType::Blob
                };
                count as usize
            ]
        } else {
            read_specs(r, count, f & rflags::GLOBAL_TABLES_SPEC != 0)?
        };
        Ok(RowsMetadata {
            columns: columns.into(),
            paging_state,
            no_metadata,
            new_metadata_id,
        })
    }
}

/// Bind-marker metadata of a Prepared result (spec 4.2.5.4). `pk_indexes`
/// (v4+) are the bind-marker positions of the partition key columns.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct PreparedMetadata {
    pub columns: Vec<ColumnSpec>,
    pub pk_indexes: Vec<u16>,
}

impl PreparedMetadata {
    /// Appends the `<metadata>` of a Prepared result.
    pub fn encode(&self, version: u8, out: &mut Vec<u8>) {
        let global = global_spec(&self.columns);
        wire::put_i32(
            out,
            if global.is_some() {
                rflags::GLOBAL_TABLES_SPEC
            } else {
                0
            },
        );
        wire::put_i32(out, self.columns.len().min(i32::MAX as usize) as i32);
        if version >= 4 {
            wire::put_i32(out, self.pk_indexes.len().min(i32::MAX as usize) as i32);
            for i in &self.pk_indexes {
                wire::put_u16(out, *i);
            }
        }
        write_specs(&self.columns, global, version, out);
    }

    pub(crate) fn read(r: &mut Reader<'_>, version: u8) -> Result<Self, ProtocolError> {
        let f = r.i32()?;
        let count = read_count(r, "column count")?;
        let mut pk_indexes = Vec::new();
        if version >= 4 {
            let n = read_count(r, "partition key count")?;
            for _ in 0..n {
                pk_indexes.push(r.u16()?);
            }
        }
        let columns = read_specs(r, count, f & rflags::GLOBAL_TABLES_SPEC != 0)?;
        Ok(PreparedMetadata {
            columns,
            pk_indexes,
        })
    }
}

// ---------------------------------------------------------------- schema changes, events

/// What a schema change is about.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SchemaChangeTarget {
    Keyspace,
    Table,
    Type,
    Function,
    Aggregate,
}

impl SchemaChangeTarget {
    /// Wire name: `KEYSPACE`, `TABLE`, `TYPE`, `FUNCTION`, `AGGREGATE`.
    pub fn name(self) -> &'static str {
        match self {
            SchemaChangeTarget::Keyspace => "KEYSPACE",
            SchemaChangeTarget::Table => "TABLE",
            SchemaChangeTarget::Type => "TYPE",
            SchemaChangeTarget::Function => "FUNCTION",
            SchemaChangeTarget::Aggregate => "AGGREGATE",
        }
    }

    fn from_name(s: &str) -> Result<Self, ProtocolError> {
        Ok(match s {
            "KEYSPACE" => SchemaChangeTarget::Keyspace,
            "TABLE" => SchemaChangeTarget::Table,
            "TYPE" => SchemaChangeTarget::Type,
            "FUNCTION" => SchemaChangeTarget::Function,
            "AGGREGATE" => SchemaChangeTarget::Aggregate,
            other => return Err(malformed(format!("Unknown schema change target {other}"))),
        })
    }
}

/// A schema change, as a RESULT or an EVENT.
/// `name` is written for every target but KEYSPACE (`""` if `None`),
/// `arg_types` for FUNCTION and AGGREGATE.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SchemaChange {
    /// `CREATED`, `UPDATED` or `DROPPED`.
    pub change_type: String,
    pub target: SchemaChangeTarget,
    pub keyspace: String,
    pub name: Option<String>,
    pub arg_types: Vec<String>,
}

impl SchemaChange {
    fn encode(&self, out: &mut Vec<u8>) {
        wire::put_string(out, &self.change_type);
        wire::put_string(out, self.target.name());
        wire::put_string(out, &self.keyspace);
        if self.target != SchemaChangeTarget::Keyspace {
            wire::put_string(out, self.name.as_deref().unwrap_or(""));
        }
        if matches!(
            self.target,
            SchemaChangeTarget::Function | SchemaChangeTarget::Aggregate
        ) {
            wire::put_string_list(out, &self.arg_types);
        }
    }

    fn read(r: &mut Reader<'_>) -> Result<Self, ProtocolError> {
        let change_type = r.string()?;
        let target = SchemaChangeTarget::from_name(&r.string()?)?;
        let keyspace = r.string()?;
        let name = if target != SchemaChangeTarget::Keyspace {
            Some(r.string()?)
        } else {
            None
        };
        let arg_types = if matches!(
            target,
            SchemaChangeTarget::Function | SchemaChangeTarget::Aggregate
        ) {
            r.string_list()?
        } else {
            Vec::new()
        };
        Ok(SchemaChange {
            change_type,
            target,
            keyspace,
            name,
            arg_types,
        })
    }
}

/// A pushed EVENT (stream id -1).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Event {
    SchemaChange(SchemaChange),
    /// `NEW_NODE` / `REMOVED_NODE`; `addr` is the node's native transport address.
    TopologyChange {
        change: String,
        addr: SocketAddr,
    },
    /// `UP` / `DOWN`.
    StatusChange {
        change: String,
        addr: SocketAddr,
    },
}

impl Event {
    /// The REGISTER name of this event type.
    pub fn type_name(&self) -> &'static str {
        match self {
            Event::SchemaChange(_) => "SCHEMA_CHANGE",
            Event::TopologyChange { .. } => "TOPOLOGY_CHANGE",
            Event::StatusChange { .. } => "STATUS_CHANGE",
        }
    }
}

// ---------------------------------------------------------------- results

/// The body of a RESULT.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ResultBody {
    Void,
    /// Each row has one cell per metadata column; `None` is null.
    Rows {
        metadata: RowsMetadata,
        rows: Vec<Vec<Option<Bytes>>>,
    },
    SetKeyspace(String),
    /// `result_metadata_id` is on the wire in v5 only (decoded as empty before).
    /// (The metadata boxed: every statement's result is moved up through
    /// the layers of its request, and this variant made all of them
    /// 200 bytes, against 120 with it boxed.)
    Prepared {
        id: Bytes,
        result_metadata_id: Bytes,
        metadata: Box<PreparedMetadata>,
        result_metadata: Box<RowsMetadata>,
    },
    SchemaChange(SchemaChange),
}

impl ResultBody {
    fn encode(&self, version: u8, out: &mut Vec<u8>) {
        match self {
            ResultBody::Void => wire::put_i32(out, 1),
            ResultBody::Rows { metadata, rows } => {
                wire::put_i32(out, 2);
                metadata.encode(version, out);
                wire::put_i32(out, rows.len().min(i32::MAX as usize) as i32);
                for row in rows {
                    for cell in row {
                        wire::put_bytes(out, cell.as_deref());
                    }
                }
            }
            ResultBody::SetKeyspace(k) => {
                wire::put_i32(out, 3);
                wire::put_string(out, k);
            }
            ResultBody::Prepared {
                id,
                result_metadata_id,
                metadata,
                result_metadata,
            } => {
                wire::put_i32(out, 4);
                wire::put_short_bytes(out, id);
                if version >= 5 {
                    wire::put_short_bytes(out, result_metadata_id);
                }
                metadata.encode(version, out);
                result_metadata.encode(version, out);
            }
            ResultBody::SchemaChange(s) => {
                wire::put_i32(out, 5);
                s.encode(out);
            }
        }
    }

    fn read(r: &mut Reader<'_>, version: u8) -> Result<Self, ProtocolError> {
        Ok(match r.i32()? {
            1 => ResultBody::Void,
            2 => {
                let metadata = RowsMetadata::read(r, version)?;
                let n = read_count(r, "row count")?;
                let ncols = metadata.columns.len();
                // Each cell takes at least 4 bytes; rows of no cell take none.
                if (ncols == 0 && n > 0)
                    || (n as usize).saturating_mul(ncols).saturating_mul(4) > r.remaining()
                {
                    return Err(malformed(format!("Row count {n} does not fit the body")));
                }
                let mut rows = Vec::with_capacity(n as usize);
                for _ in 0..n {
                    let mut row = Vec::with_capacity(ncols);
                    for _ in 0..ncols {
                        row.push(r.bytes()?);
                    }
                    rows.push(row);
                }
                ResultBody::Rows { metadata, rows }
            }
            3 => ResultBody::SetKeyspace(r.string()?),
            4 => {
                let id = r.short_bytes()?;
                let result_metadata_id = if version >= 5 {
                    r.short_bytes()?
                } else {
                    Bytes::new()
                };
                let metadata = Box::new(PreparedMetadata::read(r, version)?);
                let result_metadata = Box::new(RowsMetadata::read(r, version)?);
                ResultBody::Prepared {
                    id,
                    result_metadata_id,
                    metadata,
                    result_metadata,
                }
            }
            5 => ResultBody::SchemaChange(SchemaChange::read(r)?),
            k => return Err(malformed(format!("Unknown result kind {k}"))),
        })
    }
}

// ---------------------------------------------------------------- responses

/// A response message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Response {
    Error(ErrorResponse),
    Ready,
    /// The authenticator's class name.
    Authenticate(String),
    Supported(HashMap<String, Vec<String>>),
    Result(ResultBody),
    Event(Event),
    AuthChallenge(Option<Bytes>),
    AuthSuccess(Option<Bytes>),
}

impl Response {
    /// The opcode of this message.
    pub fn opcode(&self) -> u8 {
        (match self {
            Response::Error(_) => Opcode::Error,
            Response::Ready => Opcode::Ready,
            Response::Authenticate(_) => Opcode::Authenticate,
            Response::Supported(_) => Opcode::Supported,
            Response::Result(_) => Opcode::Result,
            Response::Event(_) => Opcode::Event,
            Response::AuthChallenge(_) => Opcode::AuthChallenge,
            Response::AuthSuccess(_) => Opcode::AuthSuccess,
        }) as u8
    }

    /// Appends the message body (no tracing id / warnings; see
    /// [`crate::encode_response_frame`]). Errors are downgraded for older
    /// versions as Cassandra does (e.g. READ_FAILURE is READ_TIMEOUT in v3).
    pub fn encode_body(&self, version: u8, out: &mut Vec<u8>) {
        match self {
            Response::Error(e) => e.encode(version, out),
            Response::Ready => {}
            Response::Authenticate(a) => wire::put_string(out, a),
            Response::Supported(m) => wire::put_string_multimap(out, m),
            Response::Result(r) => r.encode(version, out),
            Response::Event(e) => {
                wire::put_string(out, e.type_name());
                match e {
                    Event::SchemaChange(s) => s.encode(out),
                    Event::TopologyChange { change, addr }
                    | Event::StatusChange { change, addr } => {
                        wire::put_string(out, change);
                        wire::put_inet(out, addr);
                    }
                }
            }
            Response::AuthChallenge(t) | Response::AuthSuccess(t) => {
                wire::put_bytes(out, t.as_deref())
            }
        }
    }

    /// Decodes a response body (after tracing id / warnings / custom payload;
    /// see [`crate::decode_response_frame`]). For clients, tools and tests.
    pub fn decode(version: u8, opcode: u8, body: &[u8]) -> Result<Response, ProtocolError> {
        let r = &mut Reader::new(body);
        Ok(match Opcode::try_from(opcode)? {
            Opcode::Error => Response::Error(ErrorResponse::read(r, version)?),
            Opcode::Ready => Response::Ready,
            Opcode::Authenticate => Response::Authenticate(r.string()?),
            Opcode::Supported => Response::Supported(r.string_multimap()?),
            Opcode::Result => Response::Result(ResultBody::read(r, version)?),
            Opcode::Event => {
                let t = r.string()?;
                Response::Event(match t.as_str() {
                    "SCHEMA_CHANGE" => Event::SchemaChange(SchemaChange::read(r)?),
                    "TOPOLOGY_CHANGE" => Event::TopologyChange {
                        change: r.string()?,
                        addr: r.inet()?,
                    },
                    "STATUS_CHANGE" => Event::StatusChange {
                        change: r.string()?,
                        addr: r.inet()?,
                    },
                    other => return Err(malformed(format!("Unknown event type {other}"))),
                })
            }
            Opcode::AuthChallenge => Response::AuthChallenge(r.bytes()?),
            Opcode::AuthSuccess => Response::AuthSuccess(r.bytes()?),
            other => {
                return Err(malformed(format!(
                    "Wrong protocol direction (expected RESPONSE, got REQUEST) for opcode {} ({})",
                    other as u8,
                    other.name()
                )))
            }
        })
    }
}
