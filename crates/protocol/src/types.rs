//! Type `[option]`s of result metadata (spec section 4.2.5.2) and Cassandra's
//! marshal class names, used for custom types (vectors; durations before v5).

use std::sync::Arc;

use sibyl_types::{CqlType, UserType};

use crate::wire::{self, Reader};
use crate::ProtocolError;

const MARSHAL: &str = "org.apache.cassandra.db.marshal.";
/// Nesting deeper than this is refused (it would only serve to blow the stack).
const MAX_DEPTH: usize = 64;

fn simple_class(t: &CqlType) -> Option<&'static str> {
    Some(match t {
        CqlType::Ascii => "AsciiType",
        CqlType::Bigint => "LongType",
        CqlType::Blob => "BytesType",
        CqlType::Boolean => "BooleanType",
        CqlType::Counter => "CounterColumnType",
        CqlType::Date => "SimpleDateType",
        CqlType::Decimal => "DecimalType",
        CqlType::Double => "DoubleType",
        CqlType::Duration => "DurationType",
        CqlType::Float => "FloatType",
        CqlType::Inet => "InetAddressType",
        CqlType::Int => "Int32Type",
        CqlType::Smallint => "ShortType",
        CqlType::Text => "UTF8Type",
        CqlType::Time => "TimeType",
        CqlType::Timestamp => "TimestampType",
        CqlType::Timeuuid => "TimeUUIDType",
        CqlType::Tinyint => "ByteType",
        CqlType::Uuid => "UUIDType",
        CqlType::Varint => "IntegerType",
        _ => return None,
    })
}

fn simple_from_class(name: &str) -> Option<CqlType> {
    sibyl_types::from_marshal_class(name)
}

fn hex(s: &str) -> String {
    s.bytes().map(|b| format!("{b:02x}")).collect()
}

fn unhex(s: &str) -> Option<String> {
    let s = s.as_bytes();
    if !s.len().is_multiple_of(2) {
        return None;
    }
    let digit = |c: u8| (c as char).to_digit(16);
    let bytes: Option<Vec<u8>> = s
        .chunks(2)
        .map(|p| match p {
            [a, b] => Some((digit(*a)? * 16 + digit(*b)?) as u8),
            _ => None,
        })
        .collect();
    String::from_utf8(bytes?).ok()
}

/// Cassandra's marshal class name for a type, e.g.
/// `org.apache.cassandra.db.marshal.VectorType(org.apache.cassandra.db.marshal.FloatType,3)`.
pub fn marshal_class_name(t: &CqlType) -> String {
    if let Some(s) = simple_class(t) {
        return format!("{MARSHAL}{s}");
    }
    match t {
        CqlType::List(e) => format!("{MARSHAL}ListType({})", marshal_class_name(e)),
        CqlType::Set(e) => format!("{MARSHAL}SetType({})", marshal_class_name(e)),
        CqlType::Map(k, v) => format!(
            "{MARSHAL}MapType({},{})",
            marshal_class_name(k),
            marshal_class_name(v)
        ),
        CqlType::Tuple(ts) => {
            let parts: Vec<String> = ts.iter().map(marshal_class_name).collect();
            format!("{MARSHAL}TupleType({})", parts.join(","))
        }
        CqlType::Udt(u) => {
            let mut s = format!("{MARSHAL}UserType({},{}", u.keyspace, hex(&u.name));
            for (f, ft) in &u.fields {
                s.push(',');
                s.push_str(&hex(f));
                s.push(':');
                s.push_str(&marshal_class_name(ft));
            }
            s.push(')');
            s
        }
        CqlType::Frozen(e) => format!("{MARSHAL}FrozenType({})", marshal_class_name(e)),
        CqlType::Vector(e, n) => format!("{MARSHAL}VectorType({},{n})", marshal_class_name(e)),
        CqlType::Custom(c) => c.clone(),
        // Simple types were handled above.
        other => format!("{MARSHAL}{}", simple_class(other).unwrap_or("BytesType")),
    }
}

/// Splits `Name(a,b(c,d),e)` into `Name` and its top-level arguments.
fn split_class(s: &str) -> Option<(&str, Vec<&str>)> {
    let s = s.trim();
    let Some(open) = s.find('(') else {
        return Some((s, Vec::new()));
    };
    let name = s.get(..open)?.trim();
    let inner = s.get(open + 1..)?.strip_suffix(')')?;
    let mut args = Vec::new();
    let mut depth = 0i32;
    let mut start = 0;
    for (i, c) in inner.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => {
                depth -= 1;
                if depth < 0 {
                    return None;
                }
            }
            ',' if depth == 0 => {
                args.push(inner.get(start..i)?.trim());
                start = i + 1;
            }
            _ => {}
        }
    }
    if depth != 0 {
        return None;
    }
    let last = inner.get(start..)?.trim();
    if !last.is_empty() || !args.is_empty() {
        args.push(last);
    }
    Some((name, args))
}

fn parse_class(s: &str, depth: usize) -> Option<CqlType> {
    if depth > MAX_DEPTH {
        return None;
    }
    let (name, args) = split_class(s)?;
    let short = name.strip_prefix(MARSHAL).unwrap_or(name);
    let sub = |a: &str| parse_class(a, depth + 1);
    match (short, args.as_slice()) {
        (n, []) => simple_from_class(n),
        ("ListType", [e]) => Some(CqlType::List(Box::new(sub(e)?))),
        ("SetType", [e]) => Some(CqlType::Set(Box::new(sub(e)?))),
        ("MapType", [k, v]) => Some(CqlType::Map(Box::new(sub(k)?), Box::new(sub(v)?))),
        ("FrozenType", [e]) => Some(CqlType::Frozen(Box::new(sub(e)?))),
        ("ReversedType", [e]) => sub(e),
        ("TupleType", ts) => ts
            .iter()
            .map(|t| sub(t))
            .collect::<Option<Vec<_>>>()
            .map(CqlType::Tuple),
        ("VectorType", [e, n]) => Some(CqlType::Vector(Box::new(sub(e)?), n.parse().ok()?)),
        ("UserType", [ks, name, fields @ ..]) => {
            let mut fs = Vec::new();
            for f in fields {
                let (fname, ftype) = f.split_once(':')?;
                fs.push((unhex(fname)?, sub(ftype)?));
            }
            Some(CqlType::Udt(Arc::new(UserType {
                keyspace: (*ks).to_owned(),
                name: unhex(name)?,
                fields: fs,
            })))
        }
        _ => None,
    }
}

/// The type for a marshal class name; [`CqlType::Custom`] when it is not one
/// Sibyl knows.
pub fn parse_marshal_class(s: &str) -> CqlType {
    parse_class(s, 0).unwrap_or_else(|| CqlType::Custom(s.to_owned()))
}

/// Appends a type `[option]`. `frozen<T>` is written as `T`; vectors as a
/// custom type; `duration` as a custom type before v5 (as Cassandra does).
pub fn encode_type_option(t: &CqlType, version: u8, out: &mut Vec<u8>) {
    let id: u16 = match t {
        CqlType::Ascii => 0x01,
        CqlType::Bigint => 0x02,
        CqlType::Blob => 0x03,
        CqlType::Boolean => 0x04,
        CqlType::Counter => 0x05,
        CqlType::Decimal => 0x06,
        CqlType::Double => 0x07,
        CqlType::Float => 0x08,
        CqlType::Int => 0x09,
        CqlType::Timestamp => 0x0B,
        CqlType::Uuid => 0x0C,
        CqlType::Text => 0x0D,
        CqlType::Varint => 0x0E,
        CqlType::Timeuuid => 0x0F,
        CqlType::Inet => 0x10,
        CqlType::Date => 0x11,
        CqlType::Time => 0x12,
        CqlType::Smallint => 0x13,
        CqlType::Tinyint => 0x14,
        CqlType::Duration if version >= 5 => 0x15,
        CqlType::Frozen(e) => return encode_type_option(e, version, out),
        CqlType::List(e) => {
            wire::put_u16(out, 0x20);
            return encode_type_option(e, version, out);
        }
        CqlType::Map(k, v) => {
            wire::put_u16(out, 0x21);
            encode_type_option(k, version, out);
            return encode_type_option(v, version, out);
        }
        CqlType::Set(e) => {
            wire::put_u16(out, 0x22);
            return encode_type_option(e, version, out);
        }
        CqlType::Udt(u) => {
            wire::put_u16(out, 0x30);
            wire::put_string(out, &u.keyspace);
            wire::put_string(out, &u.name);
            let n = wire::put_count(out, u.fields.len());
            for (f, ft) in u.fields.iter().take(n) {
                wire::put_string(out, f);
                encode_type_option(ft, version, out);
            }
            return;
        }
        CqlType::Tuple(ts) => {
            wire::put_u16(out, 0x31);
            let n = wire::put_count(out, ts.len());
            for e in ts.iter().take(n) {
                encode_type_option(e, version, out);
            }
            return;
        }
        // Custom, Vector, and Duration before v5.
        other => {
            wire::put_u16(out, 0x0000);
            wire::put_string(out, &marshal_class_name(other));
            return;
        }
    };
    wire::put_u16(out, id);
}

pub(crate) fn read_type_option(r: &mut Reader<'_>, depth: usize) -> Result<CqlType, ProtocolError> {
    if depth > MAX_DEPTH {
        return Err(ProtocolError::Malformed(
            "Type option nested too deeply".into(),
        ));
    }
    let id = r.u16()?;
    let sub = |r: &mut Reader<'_>| read_type_option(r, depth + 1).map(Box::new);
    Ok(match id {
        0x0000 => parse_marshal_class(&r.string()?),
        0x01 => CqlType::Ascii,
        0x02 => CqlType::Bigint,
        0x03 => CqlType::Blob,
        0x04 => CqlType::Boolean,
        0x05 => CqlType::Counter,
        0x06 => CqlType::Decimal,
        0x07 => CqlType::Double,
        0x08 => CqlType::Float,
        0x09 => CqlType::Int,
        0x0A => CqlType::Text, // varchar in v1/v2; alias of text
        0x0B => CqlType::Timestamp,
        0x0C => CqlType::Uuid,
        0x0D => CqlType::Text,
        0x0E => CqlType::Varint,
        0x0F => CqlType::Timeuuid,
        0x10 => CqlType::Inet,
        0x11 => CqlType::Date,
        0x12 => CqlType::Time,
        0x13 => CqlType::Smallint,
        0x14 => CqlType::Tinyint,
        0x15 => CqlType::Duration,
        0x20 => CqlType::List(sub(r)?),
        0x21 => {
            let k = sub(r)?;
            CqlType::Map(k, sub(r)?)
        }
        0x22 => CqlType::Set(sub(r)?),
        0x30 => {
            let keyspace = r.string()?;
            let name = r.string()?;
            let n = r.u16()?;
            let mut fields = Vec::new();
            for _ in 0..n {
                let f = r.string()?;
                fields.push((f, read_type_option(r, depth + 1)?));
            }
            CqlType::Udt(Arc::new(UserType {
                keyspace,
                name,
                fields,
            }))
        }
        0x31 => {
            let n = r.u16()?;
            let mut ts = Vec::new();
            for _ in 0..n {
                ts.push(read_type_option(r, depth + 1)?);
            }
            CqlType::Tuple(ts)
        }
        other => {
            return Err(ProtocolError::Malformed(format!(
                "Unknown type option id 0x{other:04x}"
            )))
        }
    })
}

/// Decodes one type `[option]` from the start of `buf`; returns it and the
/// number of bytes it took. Custom class names Sibyl knows come back as the
/// real type (a vector as [`CqlType::Vector`]); `frozen` is not on the wire.
pub fn decode_type_option(buf: &[u8]) -> Result<(CqlType, usize), ProtocolError> {
    let mut r = Reader::new(buf);
    let t = read_type_option(&mut r, 0)?;
    Ok((t, buf.len() - r.remaining()))
}
