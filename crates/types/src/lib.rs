//! CQL types and values: the type tree, native (protocol) encoding of values,
//! Cassandra's comparators, Murmur3 tokens and timeuuids.
//!
//! Counterpart of Cassandra's `db.marshal` and `dht` packages.

use std::sync::Arc;

pub mod fast_map;
pub mod ident;
pub mod json;
mod marshal;
pub mod murmur3;
pub mod pretty;
pub mod timeuuid;
pub mod value;
pub use marshal::{
    civil_from_days, days_from_civil, fixed_len, from_marshal_class, iso_alternative, json_string,
    marshal_class, now_millis, parse_timestamp, serialize_vector, utc_millis,
};

/// A CQL type as Cassandra knows it.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum CqlType {
    Ascii,
    Bigint,
    Blob,
    Boolean,
    Counter,
    Date,
    Decimal,
    Double,
    Duration,
    Float,
    Inet,
    Int,
    Smallint,
    Text,
    Time,
    Timestamp,
    Timeuuid,
    Tinyint,
    Uuid,
    Varint,
    List(Box<CqlType>),
    Set(Box<CqlType>),
    Map(Box<CqlType>, Box<CqlType>),
    Tuple(Vec<CqlType>),
    Udt(Arc<UserType>),
    /// `frozen<T>`: the whole value is one cell.
    Frozen(Box<CqlType>),
    /// `vector<T, n>`.
    Vector(Box<CqlType>, u32),
    /// A custom type given by its Java class name.
    Custom(String),
}

impl CqlType {
    /// Cassandra's `AbstractType.referencesDuration`: a duration anywhere in
    /// the type, vectors aside.
    pub fn references_duration(&self) -> bool {
        match self {
            CqlType::Duration => true,
            CqlType::Frozen(e) | CqlType::List(e) | CqlType::Set(e) => e.references_duration(),
            CqlType::Map(k, v) => k.references_duration() || v.references_duration(),
            CqlType::Tuple(ts) => ts.iter().any(CqlType::references_duration),
            CqlType::Udt(u) => u.fields.iter().any(|(_, f)| f.references_duration()),
            _ => false,
        }
    }

    /// How deep values of this type nest, user types' fields included.
    pub fn depth(&self) -> usize {
        1 + match self {
            CqlType::List(e) | CqlType::Set(e) | CqlType::Frozen(e) | CqlType::Vector(e, _) => {
                e.depth()
            }
            CqlType::Map(k, v) => k.depth().max(v.depth()),
            CqlType::Tuple(ts) => ts.iter().map(CqlType::depth).max().unwrap_or(0),
            CqlType::Udt(u) => u.fields.iter().map(|(_, t)| t.depth()).max().unwrap_or(0),
            _ => 0,
        }
    }
}

/// A user-defined type.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct UserType {
    pub keyspace: String,
    pub name: String,
    pub fields: Vec<(String, CqlType)>,
}

/// Errors about types and values; the message is what the client sees.
#[derive(Debug, thiserror::Error, Clone, PartialEq, Eq)]
pub enum TypeError {
    /// A type name that does not parse.
    #[error("{0}")]
    BadType(String),
    /// A value (bytes or literal) that is not valid for its type.
    #[error("{0}")]
    InvalidValue(String),
}

impl TypeError {
    /// Puts the receiver's name into a "wrong kind of constant" message from
    /// [`CqlType::from_constant`]: `Invalid STRING constant (foo) for of type
    /// int` becomes `Invalid STRING constant (foo) for "x" of type int`, as
    /// Cassandra words it. Other messages are returned unchanged.
    pub fn for_receiver(self, name: &str) -> TypeError {
        match self {
            TypeError::InvalidValue(m)
                if m.starts_with("Invalid ") && m.contains(" constant (") =>
            {
                match m.rfind(" for of type ") {
                    Some(i) => TypeError::InvalidValue(format!(
                        "{} for \"{}\" of type {}",
                        &m[..i],
                        name,
                        &m[i + " for of type ".len()..]
                    )),
                    None => TypeError::InvalidValue(m),
                }
            }
            other => other,
        }
    }

    pub fn message(&self) -> &str {
        match self {
            TypeError::BadType(m) | TypeError::InvalidValue(m) => m,
        }
    }
}

/// A constant as written in a CQL statement, before it is given a type.
#[derive(Clone, Debug, PartialEq)]
pub enum Constant {
    /// `'text'` (quotes removed, `''` unescaped) or `$$text$$`.
    String(String),
    /// An integer literal, as written (may start with `-`).
    Integer(String),
    /// A float literal as written, including `NaN`, `Infinity`, `-Infinity`.
    Float(String),
    Boolean(bool),
    /// `0x...` blob literal, decoded.
    Hex(Vec<u8>),
    /// A UUID literal as written.
    Uuid(String),
    /// A duration literal as written (`1h30m`, `P1D`, ...).
    Duration(String),
}
