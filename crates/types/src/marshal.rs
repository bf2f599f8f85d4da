//! Parsing and printing types, validating and comparing serialized values,
//! and converting CQL literals (Cassandra's `db.marshal`).

use crate::value::{
    deserialize_collection, deserialize_map, deserialize_tuple, read_signed_vint, write_signed_vint,
};
use crate::{Constant, CqlType, TypeError, UserType};
use bytes::Bytes;
use std::cmp::Ordering;
use std::fmt;
use std::sync::Arc;

fn bad(m: impl Into<String>) -> TypeError {
    TypeError::InvalidValue(m.into())
}

// ---------- parsing ----------

struct TypeParser<'a> {
    s: &'a [u8],
    p: usize,
    resolve: &'a dyn Fn(&str) -> Option<Arc<UserType>>,
}

impl<'a> TypeParser<'a> {
    fn ws(&mut self) {
        while self.p < self.s.len() && self.s[self.p].is_ascii_whitespace() {
            self.p += 1;
        }
    }

    fn ident(&mut self) -> Result<String, TypeError> {
        self.ws();
        if self.s.get(self.p) == Some(&b'"') {
            self.p += 1;
            let mut out = String::new();
            loop {
                match self.s.get(self.p) {
                    None => {
                        return Err(TypeError::BadType("unterminated quoted identifier".into()))
                    }
                    Some(b'"') if self.s.get(self.p + 1) == Some(&b'"') => {
                        out.push('"');
                        self.p += 2;
                    }
                    Some(b'"') => {
                        self.p += 1;
                        return Ok(out);
                    }
                    Some(_) => {
                        let start = self.p;
                        while self.p < self.s.len() && self.s[self.p] != b'"' {
                            self.p += 1;
                        }
                        out.push_str(&String::from_utf8_lossy(&self.s[start..self.p]));
                    }
                }
            }
        }
        if self.s.get(self.p) == Some(&b'\'') {
            self.p += 1;
            let start = self.p;
            while self.p < self.s.len() && self.s[self.p] != b'\'' {
                self.p += 1;
            }
            let v = String::from_utf8_lossy(&self.s[start..self.p]).to_string();
            self.p += 1;
            return Ok(format!("'{v}"));
        }
        let start = self.p;
        while self.p < self.s.len()
            && (self.s[self.p].is_ascii_alphanumeric() || self.s[self.p] == b'_')
        {
            self.p += 1;
        }
        if start == self.p {
            return Err(TypeError::BadType(format!(
                "Invalid type: {}",
                String::from_utf8_lossy(self.s)
            )));
        }
        Ok(String::from_utf8_lossy(&self.s[start..self.p]).to_lowercase())
    }

    fn expect(&mut self, c: u8) -> Result<(), TypeError> {
        self.ws();
        if self.s.get(self.p) == Some(&c) {
            self.p += 1;
            Ok(())
        } else {
            Err(TypeError::BadType(format!(
                "Invalid type: {}",
                String::from_utf8_lossy(self.s)
            )))
        }
    }

    fn peek(&mut self) -> Option<u8> {
        self.ws();
        self.s.get(self.p).copied()
    }

    fn args(&mut self, depth: usize) -> Result<Vec<CqlType>, TypeError> {
        self.expect(b'<')?;
        let mut out = vec![self.typ(depth + 1)?];
        while self.peek() == Some(b',') {
            self.p += 1;
            out.push(self.typ(depth + 1)?);
        }
        self.expect(b'>')?;
        Ok(out)
    }

    fn typ(&mut self, depth: usize) -> Result<CqlType, TypeError> {
        if depth > 128 {
            return Err(TypeError::BadType("type nesting too deep".into()));
        }
        let mut raw_quoted = self.peek() == Some(b'"');
        let mut name = self.ident()?;
        if let Some(class) = name.strip_prefix('\'') {
            return Ok(custom_class(class));
        }
        // `ks.name`: the keyspace qualifier is dropped, the resolver gets the name
        let mut full = name.clone();
        while self.s.get(self.p) == Some(&b'.') {
            self.p += 1;
            raw_quoted = self.s.get(self.p) == Some(&b'"');
            name = self.ident()?;
            full = format!("{full}.{name}");
        }
        let qualified = full != name;
        let raw_quoted = raw_quoted || qualified;
        if !raw_quoted {
            let simple = match name.as_str() {
                "ascii" => Some(CqlType::Ascii),
                "bigint" => Some(CqlType::Bigint),
                "blob" => Some(CqlType::Blob),
                "boolean" => Some(CqlType::Boolean),
                "counter" => Some(CqlType::Counter),
                "date" => Some(CqlType::Date),
                "decimal" => Some(CqlType::Decimal),
                "double" => Some(CqlType::Double),
                "duration" => Some(CqlType::Duration),
                "float" => Some(CqlType::Float),
                "inet" => Some(CqlType::Inet),
                "int" => Some(CqlType::Int),
                "smallint" => Some(CqlType::Smallint),
                "text" | "varchar" => Some(CqlType::Text),
                "time" => Some(CqlType::Time),
                "timestamp" => Some(CqlType::Timestamp),
                "timeuuid" => Some(CqlType::Timeuuid),
                "tinyint" => Some(CqlType::Tinyint),
                "uuid" => Some(CqlType::Uuid),
                "varint" => Some(CqlType::Varint),
                _ => None,
            };
            if let Some(t) = simple {
                return Ok(t);
            }
            match name.as_str() {
                "list" | "set" | "frozen" => {
                    let mut a = self.args(depth)?;
                    if a.len() != 1 {
                        return Err(TypeError::BadType(format!(
                            "{name} takes one type argument"
                        )));
                    }
                    let inner = Box::new(a.remove(0));
                    return Ok(match name.as_str() {
                        "list" => CqlType::List(inner),
                        "set" => CqlType::Set(inner),
                        _ => CqlType::Frozen(inner),
                    });
                }
                "map" => {
                    let mut a = self.args(depth)?;
                    if a.len() != 2 {
                        return Err(TypeError::BadType("map takes two type arguments".into()));
                    }
                    let v = a.remove(1);
                    let k = a.remove(0);
                    return Ok(CqlType::Map(Box::new(k), Box::new(v)));
                }
                "tuple" => return Ok(CqlType::Tuple(self.args(depth)?)),
                "vector" => {
                    self.expect(b'<')?;
                    let e = self.typ(depth + 1)?;
                    self.expect(b',')?;
                    self.ws();
                    let start = self.p;
                    while self.p < self.s.len() && self.s[self.p].is_ascii_digit() {
                        self.p += 1;
                    }
                    let n: u32 = std::str::from_utf8(&self.s[start..self.p])
                        .ok()
                        .and_then(|x| x.parse().ok())
                        .filter(|n| *n > 0)
                        .ok_or_else(|| {
                            TypeError::BadType("vector dimension must be a positive integer".into())
                        })?;
                    self.expect(b'>')?;
                    return Ok(CqlType::Vector(Box::new(e), n));
                }
                _ => {}
            }
        }
        match (self.resolve)(&name) {
            Some(u) => Ok(CqlType::Udt(u)),
            None => Err(TypeError::BadType(format!("Unknown type {full}"))),
        }
    }
}

/// The CQL type of one of Cassandra's simple marshal classes (`Int32Type`,
/// `UTF8Type`, ...), by its short name.
pub fn from_marshal_class(short: &str) -> Option<CqlType> {
    Some(match short {
        "AsciiType" => CqlType::Ascii,
        "LongType" => CqlType::Bigint,
        "BytesType" => CqlType::Blob,
        "BooleanType" => CqlType::Boolean,
        "CounterColumnType" => CqlType::Counter,
        "SimpleDateType" => CqlType::Date,
        "DecimalType" => CqlType::Decimal,
        "DoubleType" => CqlType::Double,
        "DurationType" => CqlType::Duration,
        "FloatType" => CqlType::Float,
        "InetAddressType" => CqlType::Inet,
        "Int32Type" => CqlType::Int,
        "ShortType" => CqlType::Smallint,
        "UTF8Type" => CqlType::Text,
        "TimeType" => CqlType::Time,
        "TimestampType" | "DateType" => CqlType::Timestamp,
        "TimeUUIDType" => CqlType::Timeuuid,
        "ByteType" => CqlType::Tinyint,
        "UUIDType" => CqlType::Uuid,
        "IntegerType" => CqlType::Varint,
        _ => return None,
    })
}

/// The short name of the marshal class of a simple CQL type (the inverse
/// of `from_marshal_class`; `TimestampType` for timestamps).
pub fn marshal_class(t: &CqlType) -> Option<&'static str> {
    const SHORT: [&str; 19] = [
        "AsciiType",
        "LongType",
        "BytesType",
        "BooleanType",
        "CounterColumnType",
        "SimpleDateType",
        "DecimalType",
        "DoubleType",
        "DurationType",
        "FloatType",
        "InetAddressType",
        "Int32Type",
        "ShortType",
        "UTF8Type",
        "TimeType",
        "TimestampType",
        "TimeUUIDType",
        "ByteType",
        "UUIDType",
    ];
    SHORT
        .into_iter()
        .chain(["IntegerType"])
        .find(|s| from_marshal_class(s).as_ref() == Some(t))
}

/// A quoted custom type: Cassandra maps its own marshal classes back to CQL types.
fn custom_class(class: &str) -> CqlType {
    let short = class
        .strip_prefix("org.apache.cassandra.db.marshal.")
        .unwrap_or(class);
    from_marshal_class(short).unwrap_or_else(|| CqlType::Custom(class.to_string()))
}

fn is_frozenable(t: &CqlType) -> bool {
    matches!(
        t,
        CqlType::List(_)
            | CqlType::Set(_)
            | CqlType::Map(_, _)
            | CqlType::Udt(_)
            | CqlType::Tuple(_)
            | CqlType::Frozen(_)
    )
}

/// Canonical form: below the top level every type is implicitly frozen, so
/// nested `Frozen` wrappers are dropped (`list<frozen<list<int>>>` is
/// `List(List(Int))`); the top level keeps `Frozen` only around collections,
/// tuples and UDTs. Also applies Cassandra's checks on collection elements.
fn normalize(t: CqlType, nested: bool) -> Result<CqlType, TypeError> {
    let check_elem = |outer: &CqlType, e: &CqlType| -> Result<(), TypeError> {
        match e {
            CqlType::List(_) | CqlType::Set(_) | CqlType::Map(_, _) => {
                Err(TypeError::BadType(format!(
                    "Non-frozen collections are not allowed inside collections: {}",
                    raw_string(outer)
                )))
            }
            CqlType::Udt(_) => Err(TypeError::BadType(format!(
                "Non-frozen UDTs are not allowed inside collections: {}",
                raw_string(outer)
            ))),
            CqlType::Counter => Err(TypeError::BadType(format!(
                "Counters are not allowed inside collections: {}",
                raw_string(outer)
            ))),
            _ => Ok(()),
        }
    };
    Ok(match t {
        CqlType::Frozen(inner) => {
            if !is_frozenable(&inner) {
                return Err(TypeError::BadType(format!(
                    "frozen<> is only allowed on collections, tuples, and user-defined types (got {inner})"
                )));
            }
            let i = normalize(*inner, true)?;
            if nested {
                i
            } else {
                CqlType::Frozen(Box::new(i))
            }
        }
        CqlType::List(e) => {
            if !nested {
                check_elem(&CqlType::List(e.clone()), &e)?;
            }
            CqlType::List(Box::new(normalize(*e, true)?))
        }
        CqlType::Set(e) => {
            if !nested {
                check_elem(&CqlType::Set(e.clone()), &e)?;
            }
            CqlType::Set(Box::new(normalize(*e, true)?))
        }
        CqlType::Map(k, v) => {
            if !nested {
                let outer = CqlType::Map(k.clone(), v.clone());
                check_elem(&outer, &k)?;
                check_elem(&outer, &v)?;
            }
            CqlType::Map(
                Box::new(normalize(*k, true)?),
                Box::new(normalize(*v, true)?),
            )
        }
        CqlType::Tuple(ts) => CqlType::Tuple(
            ts.into_iter()
                .map(|t| normalize(t, true))
                .collect::<Result<_, _>>()?,
        ),
        CqlType::Vector(e, n) => CqlType::Vector(Box::new(normalize(*e, true)?), n),
        other => other,
    })
}

/// The type as the user wrote it (no implied `frozen<>`), for messages.
fn raw_string(t: &CqlType) -> String {
    match t {
        CqlType::List(e) => format!("list<{}>", raw_string(e)),
        CqlType::Set(e) => format!("set<{}>", raw_string(e)),
        CqlType::Map(k, v) => format!("map<{}, {}>", raw_string(k), raw_string(v)),
        CqlType::Tuple(ts) => format!(
            "tuple<{}>",
            ts.iter().map(raw_string).collect::<Vec<_>>().join(", ")
        ),
        CqlType::Frozen(e) => format!("frozen<{}>", raw_string(e)),
        CqlType::Vector(e, n) => format!("vector<{}, {n}>", raw_string(e)),
        other => other.to_string(),
    }
}

use crate::ident::maybe_quote;

impl CqlType {
    /// Writes the type as Cassandra's `CQL3Type.toString()` does; `frozen`
    /// tells that the type sits inside a frozen value (so collections, UDTs
    /// and tuples print as `frozen<...>`).
    fn fmt_in(&self, f: &mut fmt::Formatter<'_>, frozen: bool) -> fmt::Result {
        match self {
            CqlType::Ascii => write!(f, "ascii"),
            CqlType::Bigint => write!(f, "bigint"),
            CqlType::Blob => write!(f, "blob"),
            CqlType::Boolean => write!(f, "boolean"),
            CqlType::Counter => write!(f, "counter"),
            CqlType::Date => write!(f, "date"),
            CqlType::Decimal => write!(f, "decimal"),
            CqlType::Double => write!(f, "double"),
            CqlType::Duration => write!(f, "duration"),
            CqlType::Float => write!(f, "float"),
            CqlType::Inet => write!(f, "inet"),
            CqlType::Int => write!(f, "int"),
            CqlType::Smallint => write!(f, "smallint"),
            CqlType::Text => write!(f, "text"),
            CqlType::Time => write!(f, "time"),
            CqlType::Timestamp => write!(f, "timestamp"),
            CqlType::Timeuuid => write!(f, "timeuuid"),
            CqlType::Tinyint => write!(f, "tinyint"),
            CqlType::Uuid => write!(f, "uuid"),
            CqlType::Varint => write!(f, "varint"),
            CqlType::List(_) | CqlType::Set(_) | CqlType::Map(_, _) => {
                if frozen {
                    write!(f, "frozen<")?;
                }
                match self {
                    CqlType::List(e) => {
                        write!(f, "list<")?;
                        e.fmt_in(f, true)?;
                    }
                    CqlType::Set(e) => {
                        write!(f, "set<")?;
                        e.fmt_in(f, true)?;
                    }
                    CqlType::Map(k, v) => {
                        write!(f, "map<")?;
                        k.fmt_in(f, true)?;
                        write!(f, ", ")?;
                        v.fmt_in(f, true)?;
                    }
                    _ => {}
                }
                write!(f, ">")?;
                if frozen {
                    write!(f, ">")?;
                }
                Ok(())
            }
            CqlType::Tuple(ts) => {
                // tuples are always frozen
                write!(f, "frozen<tuple<")?;
                for (i, t) in ts.iter().enumerate() {
                    if i > 0 {
                        write!(f, ", ")?;
                    }
                    t.fmt_in(f, true)?;
                }
                write!(f, ">>")
            }
            CqlType::Udt(u) => {
                if frozen {
                    write!(f, "frozen<{}>", maybe_quote(&u.name))
                } else {
                    write!(f, "{}", maybe_quote(&u.name))
                }
            }
            CqlType::Frozen(t) => t.fmt_in(f, true),
            CqlType::Vector(t, n) => {
                write!(f, "vector<")?;
                t.fmt_in(f, true)?;
                write!(f, ", {n}>")
            }
            CqlType::Custom(c) => write!(f, "'{c}'"),
        }
    }
}

impl fmt::Display for CqlType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.fmt_in(f, false)
    }
}

// ---------- dates ----------

/// Days since 1970-01-01 of a civil date (proleptic Gregorian).
pub fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = if y >= 0 { y } else { y - 399 } / 400;
    let yoe = y - era * 400;
    let mp = (m as i64 + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d as i64 - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146097 + doe - 719468
}

/// Milliseconds since the epoch, now.
pub fn now_millis() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

/// `yyyy-MM-dd HH:mm:ss,SSS` (UTC) of milliseconds since the epoch, as
/// nodetool stamps its lines.
pub fn utc_millis(ms: i64) -> String {
    let days = ms.div_euclid(86_400_000);
    let rem = ms.rem_euclid(86_400_000);
    let (y, m, d) = civil_from_days(days);
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02},{:03}",
        rem / 3_600_000,
        rem / 60_000 % 60,
        rem / 1000 % 60,
        rem % 1000
    )
}

/// Civil date of days since 1970-01-01.
pub fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719468;
    let era = if z >= 0 { z } else { z - 146096 } / 146097;
    let doe = z - era * 146097;
    let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (if m <= 2 { y + 1 } else { y }, m, d)
}

fn parse_date_part(s: &str) -> Option<i64> {
    let neg = s.starts_with('-');
    let body = if neg { &s[1..] } else { s };
    let mut it = body.splitn(3, '-');
    let y: i64 = it.next()?.parse().ok()?;
    let m: u32 = it.next()?.parse().ok()?;
    let d: u32 = it.next()?.parse().ok()?;
    let y = if neg { -y } else { y };
    if !(1..=12).contains(&m)
        || d < 1
        || d > days_in_month(y, m)
        || !(-10_000_000..=10_000_000).contains(&y)
    {
        return None;
    }
    Some(days_from_civil(y, m, d))
}

fn days_in_month(y: i64, m: u32) -> u32 {
    match m {
        4 | 6 | 9 | 11 => 30,
        2 if (y % 4 == 0 && y % 100 != 0) || y % 400 == 0 => 29,
        2 => 28,
        _ => 31,
    }
}

/// Nanoseconds of day of `HH:MM[:SS[.fffffffff]]`.
fn parse_time_part(s: &str) -> Option<i64> {
    let mut it = s.splitn(3, ':');
    let h: i64 = it.next()?.trim().parse().ok()?;
    let m: i64 = it.next()?.parse().ok()?;
    let (sec, frac) = match it.next() {
        Some(rest) => match rest.split_once('.') {
            Some((a, b)) => (a.parse::<i64>().ok()?, b),
            None => (rest.parse::<i64>().ok()?, ""),
        },
        None => (0, ""),
    };
    if !(0..24).contains(&h)
        || !(0..60).contains(&m)
        || !(0..60).contains(&sec)
        || frac.len() > 9
        || !frac.chars().all(|c| c.is_ascii_digit())
    {
        return None;
    }
    let mut nanos: i64 = 0;
    for (i, c) in frac.chars().enumerate() {
        nanos += (c as i64 - '0' as i64) * 10i64.pow(8 - i as u32);
    }
    Some(((h * 60 + m) * 60 + sec) * 1_000_000_000 + nanos)
}

/// `TimeSerializer.parseTimeStrictly`: hh:mm:ss with up to nine digits of
/// fraction, nothing missing.
fn parse_time_strictly(s: &str) -> Option<i64> {
    let s = s.trim();
    let first = s.find(':').filter(|i| *i > 0)?;
    let second = first + 1 + s[first + 1..].find(':')?;
    if second >= s.len() - 1 {
        return None;
    }
    parse_time_part(s)
}

/// Parses a timestamp literal into epoch millis (UTC unless a zone is given).
pub fn parse_timestamp(s: &str) -> Option<i64> {
    let s = s.trim();
    if let Ok(n) = s.parse::<i64>() {
        return Some(n);
    }
    let (date, rest) = match s.find(['T', ' ']) {
        Some(i) if i >= 8 => (&s[..i], s[i + 1..].trim()),
        _ => (s, ""),
    };
    // a date alone may still carry a zone: 2020-01-01+0000
    let (date, mut rest) = if rest.is_empty() {
        match date
            .char_indices()
            .skip(8)
            .find(|(_, c)| *c == '+' || *c == 'Z')
        {
            Some((i, _)) => (&date[..i], date[i..].trim()),
            None => (date, ""),
        }
    } else {
        (date, rest)
    };
    let days = parse_date_part(date)?;
    let mut offset_minutes: i64 = 0;
    let mut nanos: i64 = 0;
    if !rest.is_empty() {
        // split off zone
        let zpos = rest.find(['Z', 'z', '+', '-']);
        let (time, zone) = match zpos {
            Some(i) => (&rest[..i], &rest[i..]),
            None => (rest, ""),
        };
        let time = time.trim();
        if !time.is_empty() {
            nanos = parse_time_part(time)?;
        }
        rest = zone.trim();
        if !rest.is_empty() && rest != "Z" && rest != "z" && rest != "UTC" && rest != "GMT" {
            let sign = if rest.starts_with('-') { -1 } else { 1 };
            let digits: String = rest[1..].chars().filter(|c| c.is_ascii_digit()).collect();
            if digits.len() != 4 && digits.len() != 2 {
                return None;
            }
            let hh: i64 = digits[..2].parse().ok()?;
            let mm: i64 = if digits.len() == 4 {
                digits[2..].parse().ok()?
            } else {
                0
            };
            offset_minutes = sign * (hh * 60 + mm);
        }
    }
    days.checked_mul(86_400_000)?
        .checked_add(nanos / 1_000_000)?
        .checked_sub(offset_minutes * 60_000)
}

fn format_timestamp(millis: i64) -> String {
    let days = millis.div_euclid(86_400_000);
    let ms = millis.rem_euclid(86_400_000);
    let (y, m, d) = civil_from_days(days);
    format!(
        "{:04}-{:02}-{:02} {:02}:{:02}:{:02}.{:03}000+0000",
        y,
        m,
        d,
        ms / 3_600_000,
        (ms / 60_000) % 60,
        (ms / 1000) % 60,
        ms % 1000
    )
}

// ---------- duration ----------

/// The fields of an ISO 8601 duration in the alternative format
/// (`P0001-02-03T04:05:06`: years, months, days, hours, minutes, seconds).
pub fn iso_alternative(up: &str) -> Option<[i64; 6]> {
    let b = up.as_bytes();
    let shape = b"P####-##-##T##:##:##";
    if b.len() != shape.len() {
        return None;
    }
    for (c, want) in b.iter().zip(shape) {
        let ok = if *want == b'#' {
            c.is_ascii_digit()
        } else {
            c == want
        };
        if !ok {
            return None;
        }
    }
    let n = |r: std::ops::Range<usize>| up[r].parse::<i64>().ok();
    Some([
        n(1..5)?,
        n(6..8)?,
        n(9..11)?,
        n(12..14)?,
        n(15..17)?,
        n(18..20)?,
    ])
}

fn parse_duration(s: &str) -> Result<(i32, i32, i64), TypeError> {
    let err = || bad(format!("Unable to convert '{s}' to a duration"));
    let acc = |total: i64, n: i64, unit: i64| -> Result<i64, TypeError> {
        n.checked_mul(unit)
            .and_then(|x| total.checked_add(x))
            .ok_or_else(|| bad(format!("Invalid duration: {s} is out of range")))
    };
    let (neg, body) = match s.strip_prefix('-') {
        Some(b) => (true, b),
        None => (false, s),
    };
    let mut months: i64 = 0;
    let mut days: i64 = 0;
    let mut nanos: i64 = 0;
    let up = body.to_ascii_uppercase();
    // ISO 8601's alternative format: PYYYY-MM-DDThh:mm:ss
    if let Some(alt) = iso_alternative(&up) {
        let [y, mo, d, h, mi, se] = alt;
        months = acc(acc(0, y, 12)?, mo, 1)?;
        days = d;
        nanos = acc(
            acc(acc(0, h, 3_600_000_000_000)?, mi, 60_000_000_000)?,
            se,
            1_000_000_000,
        )?;
    } else if let Some(iso) = up.strip_prefix('P') {
        let mut in_time = false;
        let mut num = String::new();
        for c in iso.chars() {
            if c.is_ascii_digit() {
                num.push(c);
                continue;
            }
            if c == 'T' {
                in_time = true;
                continue;
            }
            let n: i64 = num.parse().map_err(|_| err())?;
            num.clear();
            match (c, in_time) {
                ('Y', false) => months = acc(months, n, 12)?,
                ('M', false) => months = acc(months, n, 1)?,
                ('W', false) => days = acc(days, n, 7)?,
                ('D', false) => days = acc(days, n, 1)?,
                ('H', true) => nanos = acc(nanos, n, 3_600_000_000_000)?,
                ('M', true) => nanos = acc(nanos, n, 60_000_000_000)?,
                ('S', true) => nanos = acc(nanos, n, 1_000_000_000)?,
                _ => return Err(err()),
            }
        }
        if !num.is_empty() {
            return Err(err());
        }
    } else {
        let lower = body.to_lowercase();
        let b = lower.as_bytes();
        let mut i = 0;
        if b.is_empty() {
            return Err(err());
        }
        while i < b.len() {
            let start = i;
            while i < b.len() && b[i].is_ascii_digit() {
                i += 1;
            }
            if start == i {
                return Err(err());
            }
            let n: i64 = lower[start..i].parse().map_err(|_| err())?;
            let ustart = i;
            while i < b.len() && !b[i].is_ascii_digit() {
                i += 1;
            }
            match &lower[ustart..i] {
                "y" => months = acc(months, n, 12)?,
                "mo" => months = acc(months, n, 1)?,
                "w" => days = acc(days, n, 7)?,
                "d" => days = acc(days, n, 1)?,
                "h" => nanos = acc(nanos, n, 3_600_000_000_000)?,
                "m" => nanos = acc(nanos, n, 60_000_000_000)?,
                "s" => nanos = acc(nanos, n, 1_000_000_000)?,
                "ms" => nanos = acc(nanos, n, 1_000_000)?,
                "us" | "µs" => nanos = acc(nanos, n, 1000)?,
                "ns" => nanos = acc(nanos, n, 1)?,
                _ => return Err(err()),
            }
        }
    }
    let sign = if neg { -1 } else { 1 };
    let months = i32::try_from(months).map_err(|_| {
        bad(format!(
            "Invalid duration. The total number of months must be less or equal to {}",
            i32::MAX
        ))
    })?;
    let days = i32::try_from(days).map_err(|_| {
        bad(format!(
            "Invalid duration. The total number of days must be less or equal to {}",
            i32::MAX
        ))
    })?;
    Ok((months * sign, days * sign, nanos * sign as i64))
}

// ---------- impl ----------

fn fixed(v: &[u8], n: usize, what: &str) -> Result<(), TypeError> {
    if v.is_empty() || v.len() == n {
        Ok(())
    } else {
        Err(bad(format!("Expected {n} or 0 byte {what} ({})", v.len())))
    }
}

fn signed_cmp(a: &[u8], b: &[u8]) -> Ordering {
    // big-endian two's complement of equal length
    match (a.first(), b.first()) {
        (Some(x), Some(y)) => ((*x as i8).cmp(&(*y as i8))).then_with(|| a[1..].cmp(&b[1..])),
        _ => a.len().cmp(&b.len()),
    }
}

fn varint_of(v: &[u8]) -> num_bigint::BigInt {
    num_bigint::BigInt::from_signed_bytes_be(v)
}

fn decimal_of(v: &[u8]) -> Option<bigdecimal::BigDecimal> {
    if v.len() < 4 {
        return None;
    }
    let scale = i32::from_be_bytes([v[0], v[1], v[2], v[3]]);
    Some(bigdecimal::BigDecimal::new(
        varint_of(&v[4..]),
        scale as i64,
    ))
}

fn f64_of(v: &[u8]) -> f64 {
    let a: [u8; 8] = v.try_into().unwrap_or([0; 8]);
    f64::from_be_bytes(a)
}

fn f32_of(v: &[u8]) -> f32 {
    let a: [u8; 4] = v.try_into().unwrap_or([0; 4]);
    f32::from_be_bytes(a)
}

/// Java's `Double.compare`: -0.0 < 0.0, NaN equals itself and is greatest.
fn cmp_f64(a: f64, b: f64) -> Ordering {
    match (a.is_nan(), b.is_nan()) {
        (true, true) => Ordering::Equal,
        (true, false) => Ordering::Greater,
        (false, true) => Ordering::Less,
        _ => a.total_cmp(&b),
    }
}

fn uuid_signed_cmp(a: &[u8], b: &[u8]) -> Ordering {
    for (x, y) in a.iter().zip(b.iter()) {
        let o = (*x as i8).cmp(&(*y as i8));
        if o != Ordering::Equal {
            return o;
        }
    }
    a.len().cmp(&b.len())
}

fn timeuuid_cmp(a: &[u8], b: &[u8]) -> Ordering {
    if a.len() != 16 || b.len() != 16 {
        return a.len().cmp(&b.len()).then_with(|| a.cmp(b));
    }
    let ta = crate::timeuuid::timeuuid_ticks(a.try_into().unwrap_or(&[0; 16]));
    let tb = crate::timeuuid::timeuuid_ticks(b.try_into().unwrap_or(&[0; 16]));
    ta.cmp(&tb).then_with(|| uuid_signed_cmp(&a[8..], &b[8..]))
}

fn uuid_cmp(a: &[u8], b: &[u8]) -> Ordering {
    if a.len() != 16 || b.len() != 16 {
        return a.len().cmp(&b.len()).then_with(|| a.cmp(b));
    }
    // UUIDType: version first; v1 by timestamp, others by unsigned msb; then
    // the lsb unsigned (unlike TimeUUIDType, see CASSANDRA-8730)
    let va = a[6] >> 4;
    let vb = b[6] >> 4;
    va.cmp(&vb)
        .then_with(|| {
            if va == 1 {
                let ta = crate::timeuuid::timeuuid_ticks(a.try_into().unwrap_or(&[0; 16]));
                let tb = crate::timeuuid::timeuuid_ticks(b.try_into().unwrap_or(&[0; 16]));
                ta.cmp(&tb)
            } else {
                a[..8].cmp(&b[..8])
            }
        })
        .then_with(|| a[8..].cmp(&b[8..]))
}

impl CqlType {
    /// Parses a CQL type as written in DDL or system_schema.
    pub fn parse(
        s: &str,
        resolve_udt: &dyn Fn(&str) -> Option<Arc<UserType>>,
    ) -> Result<CqlType, TypeError> {
        let mut p = TypeParser {
            s: s.as_bytes(),
            p: 0,
            resolve: resolve_udt,
        };
        let t = p.typ(0)?;
        p.ws();
        if p.p != p.s.len() {
            return Err(TypeError::BadType(format!("Invalid type: {s}")));
        }
        normalize(t, false)
    }

    /// Non-frozen collections and UDTs store one cell per element.
    pub fn is_multi_cell(&self) -> bool {
        matches!(
            self,
            CqlType::List(_) | CqlType::Set(_) | CqlType::Map(_, _) | CqlType::Udt(_)
        )
    }

    pub fn unfrozen(&self) -> &CqlType {
        match self {
            CqlType::Frozen(t) => t.unfrozen(),
            t => t,
        }
    }

    pub fn is_counter(&self) -> bool {
        matches!(self, CqlType::Counter)
    }

    pub fn is_collection(&self) -> bool {
        matches!(
            self.unfrozen(),
            CqlType::List(_) | CqlType::Set(_) | CqlType::Map(_, _)
        )
    }

    /// Validates a serialized value (native protocol v4+ format), with
    /// Cassandra's messages. As in Cassandra, a 0-byte value is accepted for
    /// the "old" types (int, bigint, float, double, boolean, uuid, timeuuid,
    /// timestamp, inet, decimal, varint, counter, text, ascii, blob, tuples,
    /// UDTs) but refused for smallint, tinyint, date, time, duration,
    /// collections and vectors.
    pub fn validate(&self, v: &[u8]) -> Result<(), TypeError> {
        let n = v.len();
        match self {
            CqlType::Int => fixed(v, 4, "int"),
            CqlType::Bigint | CqlType::Counter => fixed(v, 8, "long"),
            CqlType::Timestamp => fixed(v, 8, "long for date"),
            CqlType::Double => fixed(v, 8, "value for a double"),
            CqlType::Float => fixed(v, 4, "value for a float"),
            CqlType::Smallint if n != 2 => {
                Err(bad(format!("Expected 2 bytes for a smallint ({n})")))
            }
            CqlType::Tinyint if n != 1 => Err(bad(format!("Expected 1 byte for a tinyint ({n})"))),
            CqlType::Smallint | CqlType::Tinyint => Ok(()),
            CqlType::Boolean => fixed(v, 1, "value"),
            CqlType::Date if n != 4 => Err(bad(format!("Expected 4 byte long for date ({n})"))),
            CqlType::Date => Ok(()),
            CqlType::Time => {
                let a: [u8; 8] = v
                    .try_into()
                    .map_err(|_| bad(format!("Expected 8 byte long for time ({n})")))?;
                let t = i64::from_be_bytes(a);
                if !(0..86_400_000_000_000).contains(&t) {
                    return Err(bad(format!(
                        "Time value must be between 0 and 86399999999999 (was {t})"
                    )));
                }
                Ok(())
            }
            CqlType::Uuid if n != 0 && n != 16 => {
                Err(bad(format!("UUID should be 16 or 0 bytes ({n})")))
            }
            CqlType::Uuid => Ok(()),
            CqlType::Timeuuid => {
                if n != 0 && n != 16 {
                    return Err(bad(format!("TimeUUID should be 16 or 0 bytes ({n})")));
                }
                if n == 16 && v[6] >> 4 != 1 {
                    return Err(bad("Invalid version for TimeUUID type."));
                }
                Ok(())
            }
            CqlType::Inet => {
                if n == 0 || n == 4 || n == 16 {
                    Ok(())
                } else {
                    Err(bad(format!(
                        "Expected 4 or 16 byte inetaddress; got 0x{}",
                        hex(v)
                    )))
                }
            }
            CqlType::Ascii => {
                if let Some(b) = v.iter().find(|b| **b > 127) {
                    return Err(bad(format!("Invalid byte for ascii: {}", *b as i8)));
                }
                Ok(())
            }
            CqlType::Text => std::str::from_utf8(v)
                .map(|_| ())
                .map_err(|_| bad("String didn't validate.")),
            CqlType::Decimal => {
                if n != 0 && n < 4 {
                    return Err(bad(format!("Expected 0 or at least 4 bytes ({n})")));
                }
                Ok(())
            }
            CqlType::Duration => {
                if n < 3 {
                    return Err(bad(format!(
                        "Expected at least 3 bytes for a duration ({n})"
                    )));
                }
                let (m, d, ns) = read_duration(v).ok_or_else(|| bad("Invalid duration value"))?;
                if !((m >= 0 && d >= 0 && ns >= 0) || (m <= 0 && d <= 0 && ns <= 0)) {
                    return Err(bad(format!("The duration months, days and nanoseconds must be all of the same sign ({m}, {d}, {ns})")));
                }
                Ok(())
            }
            CqlType::Blob | CqlType::Varint | CqlType::Custom(_) => Ok(()),
            CqlType::List(e) => {
                for x in read_elements(v, "list", false, e)? {
                    e.validate(x)?;
                }
                Ok(())
            }
            CqlType::Set(e) => {
                for x in read_elements(v, "set", false, e)? {
                    e.validate(x)?;
                }
                Ok(())
            }
            CqlType::Map(k, val) => {
                let xs = read_elements(v, "map", true, k)?;
                for pair in xs.chunks(2) {
                    if let [a, b] = pair {
                        k.validate(a)?;
                        val.validate(b)?;
                    }
                }
                Ok(())
            }
            CqlType::Tuple(ts) => validate_fields(ts.iter(), v, "tuple"),
            CqlType::Udt(u) => validate_fields(u.fields.iter().map(|(_, t)| t), v, "UDT"),
            CqlType::Frozen(t) => t.validate(v),
            CqlType::Vector(e, dim) => {
                let xs = split_vector(e, *dim, v)?;
                for x in xs {
                    e.validate(x)?;
                }
                Ok(())
            }
        }
    }

    /// Cassandra's comparator for the type. An empty value sorts first.
    pub fn compare(&self, a: &[u8], b: &[u8]) -> Ordering {
        if a.is_empty() || b.is_empty() {
            return a.len().min(1).cmp(&b.len().min(1));
        }
        match self {
            CqlType::Int
            | CqlType::Bigint
            | CqlType::Smallint
            | CqlType::Tinyint
            | CqlType::Counter
            | CqlType::Timestamp
            | CqlType::Time => {
                if a.len() == b.len() {
                    signed_cmp(a, b)
                } else {
                    varint_of(a).cmp(&varint_of(b))
                }
            }
            CqlType::Varint => varint_of(a).cmp(&varint_of(b)),
            CqlType::Decimal => match (decimal_of(a), decimal_of(b)) {
                (Some(x), Some(y)) => x.cmp(&y),
                _ => a.cmp(b),
            },
            CqlType::Double => cmp_f64(f64_of(a), f64_of(b)),
            CqlType::Float => cmp_f64(f32_of(a) as f64, f32_of(b) as f64),
            CqlType::Date => a.cmp(b), // unsigned days with the epoch at 2^31
            CqlType::Timeuuid => timeuuid_cmp(a, b),
            CqlType::Uuid => uuid_cmp(a, b),
            CqlType::Boolean => a.cmp(b),
            CqlType::Ascii
            | CqlType::Text
            | CqlType::Blob
            | CqlType::Inet
            | CqlType::Custom(_)
            | CqlType::Duration => a.cmp(b),
            CqlType::List(e) | CqlType::Set(e) => {
                match (deserialize_collection(a), deserialize_collection(b)) {
                    (Ok(x), Ok(y)) => {
                        for (p, q) in x.iter().zip(y.iter()) {
                            let o = e.compare(p, q);
                            if o != Ordering::Equal {
                                return o;
                            }
                        }
                        x.len().cmp(&y.len())
                    }
                    _ => a.cmp(b),
                }
            }
            CqlType::Map(k, v) => match (deserialize_map(a), deserialize_map(b)) {
                (Ok(x), Ok(y)) => {
                    for ((k1, v1), (k2, v2)) in x.iter().zip(y.iter()) {
                        let o = k.compare(k1, k2).then_with(|| v.compare(v1, v2));
                        if o != Ordering::Equal {
                            return o;
                        }
                    }
                    x.len().cmp(&y.len())
                }
                _ => a.cmp(b),
            },
            CqlType::Tuple(ts) => compare_fields(ts.iter(), a, b),
            CqlType::Udt(u) => compare_fields(u.fields.iter().map(|(_, t)| t), a, b),
            CqlType::Frozen(t) => t.compare(a, b),
            CqlType::Vector(e, n) => match (split_vector(e, *n, a), split_vector(e, *n, b)) {
                (Ok(x), Ok(y)) => {
                    for (p, q) in x.iter().zip(y.iter()) {
                        let o = e.compare(p, q);
                        if o != Ordering::Equal {
                            return o;
                        }
                    }
                    x.len().cmp(&y.len())
                }
                _ => a.cmp(b),
            },
        }
    }

    /// Converts a CQL constant to a serialized value of this type, with
    /// Cassandra's rules and messages (`Unable to make int from '1e3'`, ...).
    ///
    /// A constant of the wrong kind gives
    /// `Invalid {KIND} constant ({text}) for of type {type}` (KIND one of
    /// STRING, INTEGER, FLOAT, BOOLEAN, HEX, UUID, DURATION): the receiver's
    /// name is not known here; [`TypeError::for_receiver`] inserts it as
    /// Cassandra does (`... for "x" of type int`).
    pub fn from_constant(&self, c: &Constant) -> Result<Bytes, TypeError> {
        let mismatch = |kind: &str, text: &str| {
            bad(format!(
                "Invalid {kind} constant ({text}) for of type {self}"
            ))
        };
        let int_text = |s: &str, what: &str| -> Result<i64, TypeError> {
            s.parse::<i64>()
                .map_err(|_| bad(format!("Unable to make {what} from '{s}'")))
        };
        match (self.unfrozen(), c) {
            (CqlType::Ascii, Constant::String(s)) => {
                if !s.is_ascii() {
                    return Err(bad("Invalid ASCII character in string literal: java.nio.charset.UnmappableCharacterException: Input length = 1"));
                }
                Ok(Bytes::copy_from_slice(s.as_bytes()))
            }
            (CqlType::Text, Constant::String(s)) => Ok(Bytes::copy_from_slice(s.as_bytes())),
            (CqlType::Int, Constant::Integer(s)) => {
                let v = int_text(s, "int")?;
                i32::try_from(v)
                    .map(|x| Bytes::copy_from_slice(&x.to_be_bytes()))
                    .map_err(|_| bad(format!("Unable to make int from '{s}'")))
            }
            (CqlType::Bigint | CqlType::Counter, Constant::Integer(s)) => {
                Ok(Bytes::copy_from_slice(&int_text(s, "long")?.to_be_bytes()))
            }
            (CqlType::Smallint, Constant::Integer(s)) => {
                let v = int_text(s, "short")?;
                i16::try_from(v)
                    .map(|x| Bytes::copy_from_slice(&x.to_be_bytes()))
                    .map_err(|_| bad(format!("Unable to make short from '{s}'")))
            }
            (CqlType::Tinyint, Constant::Integer(s)) => {
                let v = int_text(s, "byte")?;
                i8::try_from(v)
                    .map(|x| Bytes::copy_from_slice(&x.to_be_bytes()))
                    .map_err(|_| bad(format!("Unable to make byte from '{s}'")))
            }
            (CqlType::Varint, Constant::Integer(s)) => {
                let v: num_bigint::BigInt = s
                    .parse()
                    .map_err(|_| bad(format!("Unable to make int from '{s}'")))?;
                Ok(Bytes::from(v.to_signed_bytes_be()))
            }
            (CqlType::Decimal, Constant::Integer(s) | Constant::Float(s)) => {
                let d: bigdecimal::BigDecimal = s
                    .parse()
                    .map_err(|_| bad(format!("Unable to make BigDecimal from '{s}'")))?;
                let (unscaled, scale) = d.as_bigint_and_exponent();
                let mut out = (scale as i32).to_be_bytes().to_vec();
                out.extend_from_slice(&unscaled.to_signed_bytes_be());
                Ok(Bytes::from(out))
            }
            (CqlType::Double, Constant::Integer(s) | Constant::Float(s)) => {
                let v: f64 = parse_float(s)
                    .ok_or_else(|| bad(format!("Unable to make double from '{s}'")))?;
                Ok(Bytes::copy_from_slice(&v.to_be_bytes()))
            }
            (CqlType::Float, Constant::Integer(s) | Constant::Float(s)) => {
                let v: f64 = parse_float(s)
                    .ok_or_else(|| bad(format!("Unable to make float from '{s}'")))?;
                Ok(Bytes::copy_from_slice(&(v as f32).to_be_bytes()))
            }
            (CqlType::Boolean, Constant::Boolean(b)) => Ok(Bytes::copy_from_slice(&[*b as u8])),
            (CqlType::Blob, Constant::Hex(h)) => Ok(Bytes::copy_from_slice(h)),
            (CqlType::Uuid, Constant::Uuid(s)) | (CqlType::Timeuuid, Constant::Uuid(s)) => {
                let u = uuid::Uuid::parse_str(s)
                    .map_err(|_| bad(format!("Unable to make UUID from '{s}'")))?;
                if matches!(self.unfrozen(), CqlType::Timeuuid) && u.get_version_num() != 1 {
                    return Err(bad("TimeUUID supports only version 1 UUIDs"));
                }
                Ok(Bytes::copy_from_slice(u.as_bytes()))
            }
            (CqlType::Timestamp, Constant::String(s)) => {
                let ms = parse_timestamp(s)
                    .ok_or_else(|| bad(format!("Unable to parse a date/time from '{s}'")))?;
                Ok(Bytes::copy_from_slice(&ms.to_be_bytes()))
            }
            (CqlType::Timestamp, Constant::Integer(s)) => Ok(Bytes::copy_from_slice(
                &int_text(s, "timestamp")?.to_be_bytes(),
            )),
            (CqlType::Date, Constant::String(s)) => {
                let unsigned = if s.bytes().all(|b| b.is_ascii_digit()) && !s.is_empty() {
                    s.parse::<i64>()
                        .ok()
                        .filter(|n| (0..=u32::MAX as i64).contains(n))
                        .ok_or_else(|| {
                            bad(format!(
                                "Unable to make unsigned int (for date) from: '{s}'"
                            ))
                        })?
                } else {
                    let days = parse_date_part(s).ok_or_else(|| {
                        bad(format!("Unable to coerce '{s}' to a formatted date (long)"))
                    })?;
                    let u = days + (1i64 << 31);
                    if u < 0 {
                        return Err(bad(format!(
                            "Input date {s} is less than min supported date -5877641-06-23"
                        )));
                    }
                    if u > u32::MAX as i64 {
                        return Err(bad(format!(
                            "Input date {s} is greater than max supported date 5881580-07-11"
                        )));
                    }
                    u
                };
                Ok(Bytes::copy_from_slice(&(unsigned as u32).to_be_bytes()))
            }
            (CqlType::Date, Constant::Integer(s)) => {
                let n = int_text(s, "date")?;
                if !(0..=u32::MAX as i64).contains(&n) {
                    return Err(bad(format!(
                        "Unable to make unsigned int (for date) from: '{s}'"
                    )));
                }
                Ok(Bytes::copy_from_slice(&(n as u32).to_be_bytes()))
            }
            (CqlType::Time, Constant::String(s)) => {
                // TimeSerializer.timeStringToLong: digits are nanoseconds
                // since midnight, anything else hh:mm:ss[.fffffffff]
                let digits = s.strip_prefix('-').unwrap_or(s);
                let n = if !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()) {
                    s.parse::<i64>()
                        .ok()
                        .filter(|n| (0..86_400_000_000_000).contains(n))
                        .ok_or_else(|| bad(format!("Unable to make long (for time) from: '{s}'")))?
                } else {
                    parse_time_strictly(s).ok_or_else(|| {
                        bad(format!("Unable to coerce '{s}' to a formatted time (long)"))
                    })?
                };
                Ok(Bytes::copy_from_slice(&n.to_be_bytes()))
            }
            (CqlType::Time, Constant::Integer(s)) => {
                let n = int_text(s, "long (for time)")?;
                if !(0..86_400_000_000_000).contains(&n) {
                    return Err(bad(format!("Input long out of bounds: {s}")));
                }
                Ok(Bytes::copy_from_slice(&n.to_be_bytes()))
            }
            (CqlType::Inet, Constant::String(s)) => {
                let ip: std::net::IpAddr = s
                    .parse()
                    .map_err(|_| bad(format!("Unable to make inet address from '{s}'")))?;
                Ok(match ip {
                    std::net::IpAddr::V4(v) => Bytes::copy_from_slice(&v.octets()),
                    std::net::IpAddr::V6(v) => Bytes::copy_from_slice(&v.octets()),
                })
            }
            // an integer is read as a duration too (and is not one)
            (CqlType::Duration, Constant::Duration(s) | Constant::Integer(s)) => {
                let (m, d, n) = parse_duration(s)?;
                if (m < 0 || d < 0 || n < 0) && (m > 0 || d > 0 || n > 0) {
                    return Err(bad(
                        "The duration months, days and nanoseconds must be all of the same sign",
                    ));
                }
                let mut out = Vec::new();
                write_signed_vint(&mut out, m as i64);
                write_signed_vint(&mut out, d as i64);
                write_signed_vint(&mut out, n);
                Ok(Bytes::from(out))
            }
            (CqlType::Custom(_), Constant::Hex(h)) => Ok(Bytes::copy_from_slice(h)),
            (_, Constant::String(s)) => Err(mismatch("STRING", s)),
            (_, Constant::Integer(s)) => Err(mismatch("INTEGER", s)),
            (_, Constant::Float(s)) => Err(mismatch("FLOAT", s)),
            (_, Constant::Boolean(b)) => Err(mismatch("BOOLEAN", &b.to_string())),
            (_, Constant::Hex(h)) => Err(mismatch("HEX", &format!("0x{}", hex(h)))),
            (_, Constant::Uuid(s)) => Err(mismatch("UUID", s)),
            (_, Constant::Duration(s)) => Err(mismatch("DURATION", s)),
        }
    }

    /// Renders a value as a CQL literal (strings quoted with `''`, blobs
    /// `0x..`, timestamps `'2024-01-02 03:04:05.123000+0000'`, collections
    /// `[..]`, `{..}`, `{k: v}`, tuples `(..)`, UDTs `{f: v}`). A value that
    /// does not decode is shown as a blob; an empty non-string value as `null`.
    pub fn to_cql_literal(&self, v: &[u8]) -> String {
        let t = self.unfrozen();
        if v.is_empty()
            && !matches!(
                t,
                CqlType::Text | CqlType::Ascii | CqlType::Blob | CqlType::Custom(_)
            )
        {
            return "null".into();
        }
        let blob = || format!("0x{}", hex(v));
        match t {
            CqlType::Ascii | CqlType::Text => {
                format!("'{}'", String::from_utf8_lossy(v).replace('\'', "''"))
            }
            CqlType::Blob | CqlType::Custom(_) => blob(),
            CqlType::Timestamp => match <[u8; 8]>::try_from(v) {
                Ok(a) => format!("'{}'", format_timestamp(i64::from_be_bytes(a))),
                Err(_) => blob(),
            },
            CqlType::Date | CqlType::Time | CqlType::Inet | CqlType::Duration => {
                match scalar_text(t, v, false) {
                    Some(x) => format!("'{x}'"),
                    None => blob(),
                }
            }
            CqlType::List(e) => match deserialize_collection(v) {
                Ok(xs) => format!(
                    "[{}]",
                    xs.iter()
                        .map(|x| e.to_cql_literal(x))
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
                Err(_) => blob(),
            },
            CqlType::Set(e) => match deserialize_collection(v) {
                Ok(xs) => format!(
                    "{{{}}}",
                    xs.iter()
                        .map(|x| e.to_cql_literal(x))
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
                Err(_) => blob(),
            },
            CqlType::Map(k, val) => match deserialize_map(v) {
                Ok(xs) => format!(
                    "{{{}}}",
                    xs.iter()
                        .map(|(a, b)| format!("{}: {}", k.to_cql_literal(a), val.to_cql_literal(b)))
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
                Err(_) => blob(),
            },
            CqlType::Tuple(ts) => match deserialize_tuple(v) {
                Ok(fs) => {
                    let items: Vec<String> = ts
                        .iter()
                        .enumerate()
                        .map(|(i, t)| match fs.get(i) {
                            Some(Some(f)) => t.to_cql_literal(f),
                            _ => "null".into(),
                        })
                        .collect();
                    format!("({})", items.join(", "))
                }
                Err(_) => blob(),
            },
            CqlType::Udt(u) => match deserialize_tuple(v) {
                Ok(fs) => {
                    let items: Vec<String> = u
                        .fields
                        .iter()
                        .enumerate()
                        .map(|(i, (n, t))| {
                            let val = match fs.get(i) {
                                Some(Some(f)) => t.to_cql_literal(f),
                                _ => "null".into(),
                            };
                            format!("{}: {}", maybe_quote(n), val)
                        })
                        .collect();
                    format!("{{{}}}", items.join(", "))
                }
                Err(_) => blob(),
            },
            CqlType::Vector(e, n) => match split_vector(e, *n, v) {
                Ok(xs) => format!(
                    "[{}]",
                    xs.iter()
                        .map(|x| e.to_cql_literal(x))
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
                Err(_) => blob(),
            },
            _ => scalar_text(t, v, false).unwrap_or_else(blob),
        }
    }

    /// The value as text, as `CAST(x AS text)` renders it (Java's toString
    /// of the value; blobs in hex).
    pub fn to_text(&self, v: &[u8]) -> String {
        scalar_text(self.unfrozen(), v, true).unwrap_or_else(|| hex(v))
    }

    /// A value as `SELECT JSON` and collections render it: an empty value
    /// of a type that has one is `""` (`toJson()` says `null`).
    pub fn to_json_value(&self, v: &[u8]) -> String {
        if v.is_empty()
            && !matches!(
                self.unfrozen(),
                CqlType::Text | CqlType::Ascii | CqlType::Blob | CqlType::Custom(_)
            )
        {
            return "\"\"".into();
        }
        self.to_json(v)
    }

    /// Cassandra's `toJson()` rendering of a value (as `AbstractType.toJSONString`).
    pub fn to_json(&self, v: &[u8]) -> String {
        let t = self.unfrozen();
        if v.is_empty()
            && !matches!(
                t,
                CqlType::Text | CqlType::Ascii | CqlType::Blob | CqlType::Custom(_)
            )
        {
            return "null".into();
        }
        let blob = || format!("\"0x{}\"", hex(v));
        match t {
            CqlType::Ascii | CqlType::Text => json_string(&String::from_utf8_lossy(v)),
            CqlType::Blob | CqlType::Custom(_) => blob(),
            CqlType::Float | CqlType::Double => {
                let x = if matches!(t, CqlType::Float) {
                    <[u8; 4]>::try_from(v)
                        .ok()
                        .map(|a| f32::from_be_bytes(a) as f64)
                } else {
                    <[u8; 8]>::try_from(v).ok().map(f64::from_be_bytes)
                };
                match x {
                    Some(x) if x.is_finite() => {
                        scalar_text(t, v, true).unwrap_or_else(|| "null".into())
                    }
                    _ => "null".into(),
                }
            }
            CqlType::Timestamp => match <[u8; 8]>::try_from(v) {
                Ok(a) => {
                    let ms = i64::from_be_bytes(a);
                    let f = format_timestamp(ms);
                    // "yyyy-MM-dd HH:mm:ss.SSS'Z'"
                    format!("\"{}Z\"", &f[..f.len().saturating_sub(8)])
                }
                Err(_) => blob(),
            },
            CqlType::Date
            | CqlType::Time
            | CqlType::Inet
            | CqlType::Duration
            | CqlType::Uuid
            | CqlType::Timeuuid => match scalar_text(t, v, true) {
                Some(x) => format!("\"{x}\""),
                None => blob(),
            },
            CqlType::List(e) | CqlType::Set(e) => match deserialize_collection(v) {
                Ok(xs) => format!(
                    "[{}]",
                    xs.iter()
                        .map(|x| e.to_json_value(x))
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
                Err(_) => blob(),
            },
            CqlType::Map(k, val) => match deserialize_map(v) {
                Ok(xs) => {
                    let items: Vec<String> = xs
                        .iter()
                        .map(|(a, b)| {
                            let key = k.to_json_value(a);
                            let key = if key.starts_with('"') {
                                key
                            } else {
                                json_string(&key)
                            };
                            format!("{key}: {}", val.to_json_value(b))
                        })
                        .collect();
                    format!("{{{}}}", items.join(", "))
                }
                Err(_) => blob(),
            },
            CqlType::Tuple(ts) => match deserialize_tuple(v) {
                Ok(fs) => {
                    let items: Vec<String> = ts
                        .iter()
                        .enumerate()
                        .map(|(i, t)| match fs.get(i) {
                            Some(Some(f)) => t.to_json_value(f),
                            _ => "null".into(),
                        })
                        .collect();
                    format!("[{}]", items.join(", "))
                }
                Err(_) => blob(),
            },
            CqlType::Udt(u) => match deserialize_tuple(v) {
                Ok(fs) => {
                    let items: Vec<String> = u
                        .fields
                        .iter()
                        .enumerate()
                        .map(|(i, (n, t))| {
                            let val = match fs.get(i) {
                                Some(Some(f)) => t.to_json_value(f),
                                _ => "null".into(),
                            };
                            let name = if n.to_lowercase() == *n {
                                n.clone()
                            } else {
                                format!("\"{n}\"")
                            };
                            format!("{}: {}", json_string(&name), val)
                        })
                        .collect();
                    format!("{{{}}}", items.join(", "))
                }
                Err(_) => blob(),
            },
            CqlType::Vector(e, n) => match split_vector(e, *n, v) {
                Ok(xs) => format!(
                    "[{}]",
                    xs.iter()
                        .map(|x| e.to_json_value(x))
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
                Err(_) => blob(),
            },
            _ => scalar_text(t, v, true).unwrap_or_else(|| "null".into()),
        }
    }
}

/// Text of a scalar value without quotes: numbers as Java prints them,
/// dates `2024-01-02`, times `03:04:05.000000000`, inet addresses (`java`
/// selects Java's uncompressed IPv6 form), durations as Cassandra's
/// `Duration.toString`, uuids.
fn scalar_text(t: &CqlType, v: &[u8], java: bool) -> Option<String> {
    Some(match t {
        CqlType::Boolean => (*v.first()? != 0).to_string(),
        CqlType::Int
        | CqlType::Bigint
        | CqlType::Smallint
        | CqlType::Tinyint
        | CqlType::Counter
        | CqlType::Varint => varint_of(v).to_string(),
        CqlType::Decimal => java_decimal(v)?,
        CqlType::Double => java_double(f64::from_be_bytes(v.try_into().ok()?)),
        CqlType::Float => java_float(f32::from_be_bytes(v.try_into().ok()?)),
        CqlType::Timestamp => format_timestamp(i64::from_be_bytes(v.try_into().ok()?)),
        CqlType::Date => {
            let d = u32::from_be_bytes(v.try_into().ok()?) as i64 - (1i64 << 31);
            let (y, m, dd) = civil_from_days(d);
            format!("{y:04}-{m:02}-{dd:02}")
        }
        CqlType::Time => {
            let n = i64::from_be_bytes(v.try_into().ok()?);
            let s = n.div_euclid(1_000_000_000);
            format!(
                "{:02}:{:02}:{:02}.{:09}",
                s / 3600,
                (s / 60) % 60,
                s % 60,
                n.rem_euclid(1_000_000_000)
            )
        }
        CqlType::Uuid | CqlType::Timeuuid => uuid::Uuid::from_slice(v).ok()?.to_string(),
        CqlType::Inet => match v.len() {
            4 => std::net::Ipv4Addr::new(v[0], v[1], v[2], v[3]).to_string(),
            16 => {
                let a = <[u8; 16]>::try_from(v).ok()?;
                if java {
                    a.chunks(2)
                        .map(|c| format!("{:x}", u16::from_be_bytes([c[0], c[1]])))
                        .collect::<Vec<_>>()
                        .join(":")
                } else {
                    std::net::Ipv6Addr::from(a).to_string()
                }
            }
            _ => return None,
        },
        CqlType::Duration => {
            let (m, d, n) = read_duration(v)?;
            format_duration(m, d, n)
        }
        CqlType::Ascii | CqlType::Text => String::from_utf8_lossy(v).into_owned(),
        _ => return None,
    })
}

/// Cassandra's `Duration.toString()`: `1y2mo3d4h5m6s7ms8us9ns`.
fn format_duration(months: i32, days: i32, nanos: i64) -> String {
    fn part(out: &mut String, dividend: u64, divisor: u64, unit: &str) -> u64 {
        if dividend == 0 || dividend < divisor {
            return dividend;
        }
        out.push_str(&format!("{}{unit}", dividend / divisor));
        dividend % divisor
    }
    let mut out = String::new();
    if months < 0 || days < 0 || nanos < 0 {
        out.push('-');
    }
    let r = part(&mut out, months.unsigned_abs() as u64, 12, "y");
    part(&mut out, r, 1, "mo");
    part(&mut out, days.unsigned_abs() as u64, 1, "d");
    if nanos != 0 {
        let mut r = part(&mut out, nanos.unsigned_abs(), 3_600_000_000_000, "h");
        r = part(&mut out, r, 60_000_000_000, "m");
        r = part(&mut out, r, 1_000_000_000, "s");
        r = part(&mut out, r, 1_000_000, "ms");
        r = part(&mut out, r, 1000, "us");
        part(&mut out, r, 1, "ns");
    }
    out
}

/// Java's `Double.toString`.
pub(crate) fn java_double(x: f64) -> String {
    java_fp(x, format!("{x:e}"), format!("{x}"))
}

/// Java's `Float.toString`.
pub(crate) fn java_float(x: f32) -> String {
    java_fp(x as f64, format!("{x:e}"), format!("{x}"))
}

fn java_fp(x: f64, sci: String, plain: String) -> String {
    if x.is_nan() {
        return "NaN".into();
    }
    if x.is_infinite() {
        return if x > 0.0 {
            "Infinity".into()
        } else {
            "-Infinity".into()
        };
    }
    let ax = x.abs();
    if ax == 0.0 || (1e-3..1e7).contains(&ax) {
        return if plain.contains('.') {
            plain
        } else {
            format!("{plain}.0")
        };
    }
    // Rust: 1.234e-5 / 1e20  ->  Java: 1.234E-5 / 1.0E20
    let (mant, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let mant = if mant.contains('.') {
        mant.to_string()
    } else {
        format!("{mant}.0")
    };
    format!("{mant}E{exp}")
}

/// Java's `BigDecimal.toString` of a serialized decimal.
fn java_decimal(v: &[u8]) -> Option<String> {
    if v.len() < 4 {
        return None;
    }
    let scale = i32::from_be_bytes([v[0], v[1], v[2], v[3]]) as i64;
    let unscaled = varint_of(&v[4..]);
    let neg = unscaled.sign() == num_bigint::Sign::Minus;
    let digits = unscaled.magnitude().to_string();
    let adjusted = -scale + (digits.len() as i64 - 1);
    let sign = if neg { "-" } else { "" };
    if scale >= 0 && adjusted >= -6 {
        let scale = scale as usize;
        if scale == 0 {
            return Some(format!("{sign}{digits}"));
        }
        let s = if digits.len() > scale {
            let (a, b) = digits.split_at(digits.len() - scale);
            format!("{a}.{b}")
        } else {
            format!("0.{}{}", "0".repeat(scale - digits.len()), digits)
        };
        return Some(format!("{sign}{s}"));
    }
    let (first, rest) = digits.split_at(1);
    let mant = if rest.is_empty() {
        first.to_string()
    } else {
        format!("{first}.{rest}")
    };
    let exp = if adjusted >= 0 {
        format!("+{adjusted}")
    } else {
        adjusted.to_string()
    };
    Some(format!("{sign}{mant}E{exp}"))
}

/// A JSON string literal (Jackson's escaping).
pub fn json_string(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04X}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// Elements of a list/set (or keys and values, alternating, of a map) with
/// Cassandra's error messages.
fn read_elements<'a>(
    v: &'a [u8],
    kind: &str,
    pairs: bool,
    elem: &CqlType,
) -> Result<Vec<&'a [u8]>, TypeError> {
    let short = || bad(format!("Not enough bytes to read a {kind}"));
    let int_at = |p: usize| -> Option<i32> {
        v.get(p..p + 4)
            .map(|b| i32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    };
    let count = int_at(0).ok_or_else(short)?;
    if count < 0 {
        return Err(bad(format!("The data cannot be deserialized as a {kind}")));
    }
    let items = count as usize * if pairs { 2 } else { 1 };
    let mut p = 4;
    let mut out = Vec::with_capacity(items.min(v.len() / 4));
    for _ in 0..items {
        let len = int_at(p).ok_or_else(short)?;
        p += 4;
        if len < 0 {
            // what Cassandra ends up saying about a null element
            return Err(match (kind, elem.unfrozen()) {
                ("list", _) => short(),
                (_, CqlType::Text | CqlType::Ascii) => bad("String didn't validate."),
                _ => bad("null is not supported inside collections"),
            });
        }
        let e = v.get(p..p + len as usize).ok_or_else(short)?;
        p += len as usize;
        out.push(e);
    }
    if p != v.len() {
        return Err(bad(format!(
            "Unexpected extraneous bytes after {kind} value"
        )));
    }
    Ok(out)
}

fn validate_fields<'a>(
    types: impl Iterator<Item = &'a CqlType>,
    v: &[u8],
    what: &str,
) -> Result<(), TypeError> {
    let mut p = 0;
    for (i, t) in types.enumerate() {
        if p >= v.len() {
            break;
        }
        let b = v
            .get(p..p + 4)
            .ok_or_else(|| bad(format!("Not enough bytes to read size of {i}th component")))?;
        let len = i32::from_be_bytes([b[0], b[1], b[2], b[3]]);
        p += 4;
        if len < 0 {
            continue;
        }
        let f = v
            .get(p..p + len as usize)
            .ok_or_else(|| bad(format!("Not enough bytes to read {i}th component")))?;
        p += len as usize;
        t.validate(f)?;
    }
    if p != v.len() {
        return Err(bad(format!(
            "Invalid remaining data after end of {what} value"
        )));
    }
    Ok(())
}

/// The serialized size of a fixed-length type inside a vector.
pub fn fixed_len(t: &CqlType) -> Option<usize> {
    match t.unfrozen() {
        CqlType::Boolean => Some(1),
        CqlType::Int | CqlType::Float | CqlType::Date => Some(4),
        CqlType::Bigint
        | CqlType::Double
        | CqlType::Timestamp
        | CqlType::Time
        | CqlType::Counter => Some(8),
        CqlType::Uuid | CqlType::Timeuuid => Some(16),
        _ => None,
    }
}

/// Elements of a vector value: fixed-size elements back to back, otherwise
/// each prefixed by its length as an unsigned vint (Cassandra 5).
fn split_vector<'a>(e: &CqlType, dim: u32, v: &'a [u8]) -> Result<Vec<&'a [u8]>, TypeError> {
    let dim = dim as usize;
    if let Some(size) = fixed_len(e) {
        if v.len() != size * dim {
            return Err(bad(format!(
                "Expected {} bytes for a vector of {dim} elements of {e}, got {}",
                size * dim,
                v.len()
            )));
        }
        return Ok(v.chunks(size).collect());
    }
    let mut out = Vec::with_capacity(dim.min(v.len()));
    let mut p = 0;
    for _ in 0..dim {
        let (len, used) = crate::value::read_unsigned_vint(&v[p..])
            .map_err(|_| bad("Not enough bytes to read a vector"))?;
        p += used;
        let len = usize::try_from(len).map_err(|_| bad("Not enough bytes to read a vector"))?;
        let x = v
            .get(p..p.saturating_add(len))
            .ok_or_else(|| bad("Not enough bytes to read a vector"))?;
        p += len;
        out.push(x);
    }
    if p != v.len() {
        return Err(bad("Unexpected extraneous bytes after vector value"));
    }
    Ok(out)
}

/// A vector value from its elements: back to back when of fixed size,
/// otherwise each prefixed by its length as an unsigned vint.
pub fn serialize_vector(e: &CqlType, elems: &[Bytes]) -> Bytes {
    let mut out = Vec::new();
    for x in elems {
        if fixed_len(e).is_none() {
            crate::value::write_unsigned_vint(&mut out, x.len() as u64);
        }
        out.extend_from_slice(x);
    }
    Bytes::from(out)
}

/// Reads months, days and nanoseconds of a duration value.
fn read_duration(v: &[u8]) -> Option<(i32, i32, i64)> {
    let (m, a) = read_signed_vint(v).ok()?;
    let (d, b) = read_signed_vint(v.get(a..)?).ok()?;
    let (n, c) = read_signed_vint(v.get(a + b..)?).ok()?;
    if a + b + c != v.len() {
        return None;
    }
    Some((i32::try_from(m).ok()?, i32::try_from(d).ok()?, n))
}

fn compare_fields<'a>(types: impl Iterator<Item = &'a CqlType>, a: &[u8], b: &[u8]) -> Ordering {
    match (deserialize_tuple(a), deserialize_tuple(b)) {
        (Ok(x), Ok(y)) => {
            for (t, (p, q)) in types.zip(x.iter().zip(y.iter())) {
                let o = match (p, q) {
                    (Some(p), Some(q)) => t.compare(p, q),
                    (None, Some(_)) => Ordering::Less,
                    (Some(_), None) => Ordering::Greater,
                    (None, None) => Ordering::Equal,
                };
                if o != Ordering::Equal {
                    return o;
                }
            }
            x.len().cmp(&y.len())
        }
        _ => a.cmp(b),
    }
}

fn parse_float(s: &str) -> Option<f64> {
    match s {
        "NaN" | "nan" | "NAN" => Some(f64::NAN),
        "Infinity" | "infinity" | "INFINITY" => Some(f64::INFINITY),
        "-Infinity" | "-infinity" | "-INFINITY" => Some(f64::NEG_INFINITY),
        _ => s.parse().ok(),
    }
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::value::{serialize_collection, serialize_map, serialize_tuple};

    fn none(_: &str) -> Option<Arc<UserType>> {
        None
    }

    fn addr() -> Arc<UserType> {
        Arc::new(UserType {
            keyspace: "ks".into(),
            name: "address".into(),
            fields: vec![
                ("street".into(), CqlType::Text),
                ("Zip".into(), CqlType::Int),
            ],
        })
    }

    fn udts(n: &str) -> Option<Arc<UserType>> {
        match n {
            "address" => Some(addr()),
            "MyType" => Some(Arc::new(UserType {
                keyspace: "ks".into(),
                name: "MyType".into(),
                fields: vec![],
            })),
            _ => None,
        }
    }

    fn p(s: &str) -> CqlType {
        match CqlType::parse(s, &udts) {
            Ok(t) => t,
            Err(e) => panic!("{s}: {e}"),
        }
    }

    fn b(v: &[u8]) -> Bytes {
        Bytes::copy_from_slice(v)
    }

    fn lit(t: &CqlType, c: Constant) -> Bytes {
        match t.from_constant(&c) {
            Ok(v) => v,
            Err(e) => panic!("{c:?} into {t}: {e}"),
        }
    }

    fn err_of<T: std::fmt::Debug>(r: Result<T, TypeError>) -> String {
        match r {
            Ok(v) => panic!("expected an error, got {v:?}"),
            Err(e) => e.to_string(),
        }
    }

    #[test]
    fn types_parse_and_print_like_cassandra() {
        for s in [
            "int",
            "text",
            "list<int>",
            "frozen<list<int>>",
            "map<text, int>",
            "map<text, frozen<list<int>>>",
            "set<timeuuid>",
            "vector<float, 3>",
            "frozen<tuple<int, text>>",
            "address",
            "frozen<address>",
            "list<frozen<address>>",
            "\"MyType\"",
            "'com.example.MyType'",
        ] {
            assert_eq!(p(s).to_string(), s);
        }
        assert_eq!(p("VARCHAR").to_string(), "text");
        assert_eq!(
            p("Map < VarChar , BIGINT >").to_string(),
            "map<text, bigint>"
        );
        assert_eq!(
            p("tuple<int, list<text>>").to_string(),
            "frozen<tuple<int, frozen<list<text>>>>"
        );
        assert_eq!(
            p("frozen<list<list<int>>>").to_string(),
            "frozen<list<frozen<list<int>>>>"
        );
        assert_eq!(
            p("list<frozen<list<int>>>"),
            CqlType::List(Box::new(CqlType::List(Box::new(CqlType::Int))))
        );
        assert_eq!(
            p("frozen<list<frozen<list<int>>>>"),
            p("frozen<list<list<int>>>")
        );
        assert_eq!(
            p("'org.apache.cassandra.db.marshal.Int32Type'"),
            CqlType::Int
        );
        assert_eq!(p("ks.address"), CqlType::Udt(addr()));
        assert_eq!(p("ks.\"MyType\"").to_string(), "\"MyType\"");
        assert_eq!(
            err_of(CqlType::parse("nosuch", &none)),
            "Unknown type nosuch"
        );
        assert_eq!(
            err_of(CqlType::parse("ks.nosuch", &none)),
            "Unknown type ks.nosuch"
        );
        assert!(CqlType::parse("\"int\"", &none).is_err());
        assert_eq!(
            err_of(CqlType::parse("list<list<int>>", &none)),
            "Non-frozen collections are not allowed inside collections: list<list<int>>"
        );
        assert!(CqlType::parse("set<address>", &udts).is_err());
        assert!(CqlType::parse("frozen<int>", &none).is_err());
        assert!(CqlType::parse("list<int", &none).is_err());
        assert!(CqlType::parse("list<int>>", &none).is_err());
        assert!(CqlType::parse("map<int>", &none).is_err());
        assert!(CqlType::parse("vector<float, 0>", &none).is_err());
        assert!(CqlType::parse("'unterminated", &none).is_err());
        assert!(CqlType::parse("", &none).is_err());
        let deep = "frozen<".repeat(500) + "list<int>" + &">".repeat(500);
        assert!(CqlType::parse(&deep, &none).is_err());

        assert!(p("list<int>").is_multi_cell());
        assert!(p("address").is_multi_cell());
        assert!(!p("frozen<list<int>>").is_multi_cell());
        assert!(!p("tuple<int>").is_multi_cell());
        assert!(p("frozen<set<int>>").is_collection());
        assert!(!p("frozen<address>").is_collection());
        assert_eq!(p("frozen<list<int>>").unfrozen(), &p("list<int>"));
        assert!(p("counter").is_counter());
    }

    #[test]
    fn validation_follows_cassandra() {
        assert_eq!(
            err_of(CqlType::Int.validate(&[1, 2, 3])),
            "Expected 4 or 0 byte int (3)"
        );
        assert!(CqlType::Int.validate(&[]).is_ok());
        assert_eq!(
            err_of(CqlType::Bigint.validate(&[1])),
            "Expected 8 or 0 byte long (1)"
        );
        assert_eq!(
            err_of(CqlType::Smallint.validate(&[])),
            "Expected 2 bytes for a smallint (0)"
        );
        assert_eq!(
            err_of(CqlType::Tinyint.validate(&[1, 2])),
            "Expected 1 byte for a tinyint (2)"
        );
        assert_eq!(
            err_of(CqlType::Text.validate(&[0xff, 0xfe])),
            "String didn't validate."
        );
        assert_eq!(
            err_of(CqlType::Ascii.validate(b"a\xc3\xa9")),
            "Invalid byte for ascii: -61"
        );
        assert!(CqlType::Time
            .validate(&86_399_999_999_999i64.to_be_bytes())
            .is_ok());
        assert!(CqlType::Time
            .validate(&86_400_000_000_000i64.to_be_bytes())
            .is_err());
        assert!(CqlType::Time.validate(&(-1i64).to_be_bytes()).is_err());
        let v4 = uuid::Uuid::from_u128(0x12345678_1234_4234_8234_123456789abc);
        assert!(CqlType::Uuid.validate(v4.as_bytes()).is_ok());
        assert_eq!(
            err_of(CqlType::Timeuuid.validate(v4.as_bytes())),
            "Invalid version for TimeUUID type."
        );
        assert!(CqlType::Timeuuid
            .validate(crate::timeuuid::now_timeuuid().as_bytes())
            .is_ok());
        assert!(CqlType::Inet.validate(&[127, 0, 0, 1]).is_ok());
        assert!(CqlType::Inet.validate(&[1, 2, 3]).is_err());
        assert!(CqlType::Decimal.validate(&[0, 0]).is_err());
        assert!(CqlType::Boolean.validate(&[1]).is_ok());

        let l = p("list<int>");
        let ok = serialize_collection(&[b(&1i32.to_be_bytes()), b(&2i32.to_be_bytes())]);
        assert!(l.validate(&ok).is_ok());
        assert_eq!(
            err_of(l.validate(&ok[..ok.len() - 1])),
            "Not enough bytes to read a list"
        );
        assert_eq!(err_of(l.validate(b"")), "Not enough bytes to read a list");
        assert_eq!(
            err_of(l.validate(&(-1i32).to_be_bytes())),
            "The data cannot be deserialized as a list"
        );
        let mut extra = ok.to_vec();
        extra.push(0);
        assert_eq!(
            err_of(l.validate(&extra)),
            "Unexpected extraneous bytes after list value"
        );
        let bad_elem = serialize_collection(&[b(&[1, 2, 3])]);
        assert_eq!(
            err_of(l.validate(&bad_elem)),
            "Expected 4 or 0 byte int (3)"
        );
        assert_eq!(
            err_of(p("set<text>").validate(b"test")),
            "Not enough bytes to read a set"
        );
        assert_eq!(
            err_of(p("set<text>").validate(&i64::MAX.to_be_bytes())),
            "String didn't validate."
        );
        let huge_count = [0x7f, 0xff, 0xff, 0xff];
        assert!(l.validate(&huge_count).is_err());
        let m = p("map<text, int>");
        assert!(m
            .validate(&serialize_map(&[(b(b"k"), b(&7i32.to_be_bytes()))]))
            .is_ok());
        assert_eq!(
            err_of(m.validate(&serialize_map(&[(b(b"k"), b(b"v"))]))),
            "Expected 4 or 0 byte int (1)"
        );

        let t = p("tuple<int, text>");
        assert!(t
            .validate(&serialize_tuple(&[Some(b(&1i32.to_be_bytes())), None]))
            .is_ok());
        assert!(t
            .validate(&serialize_tuple(&[Some(b(&1i32.to_be_bytes()))]))
            .is_ok());
        assert_eq!(
            err_of(t.validate(&serialize_tuple(&[None, None, None]))),
            "Invalid remaining data after end of tuple value"
        );
        assert!(t.validate(&[0, 0, 0]).is_err());
        assert!(t.validate(&[0, 0, 0, 9, 1]).is_err());
        let u = p("address");
        assert!(u.validate(&serialize_tuple(&[Some(b(b"main st"))])).is_ok());
        assert_eq!(
            err_of(u.validate(&serialize_tuple(&[None, None, None]))),
            "Invalid remaining data after end of UDT value"
        );

        let vf = p("vector<float, 2>");
        let mut fv = 1.0f32.to_be_bytes().to_vec();
        fv.extend_from_slice(&2.0f32.to_be_bytes());
        assert!(vf.validate(&fv).is_ok());
        assert!(vf.validate(&fv[..7]).is_err());
        let vt = p("vector<text, 2>");
        assert!(vt.validate(&[1, b'a', 2, b'b', b'c']).is_ok());
        assert!(vt.validate(&[1, b'a', 5, b'b']).is_err());
        assert!(vt.validate(&[1, b'a', 1, b'b', 0]).is_err());

        let d = lit(&CqlType::Duration, Constant::Duration("1h".into()));
        assert!(CqlType::Duration.validate(&d).is_ok());
        let mut mixed = Vec::new();
        crate::value::write_signed_vint(&mut mixed, 1);
        crate::value::write_signed_vint(&mut mixed, -1);
        crate::value::write_signed_vint(&mut mixed, 0);
        assert_eq!(
            err_of(CqlType::Duration.validate(&mixed)),
            "The duration months, days and nanoseconds must be all of the same sign (1, -1, 0)"
        );
        assert!(CqlType::Duration.validate(&[0, 0]).is_err());
        // arbitrary bytes never panic
        let types = [
            p("list<int>"),
            p("map<text, frozen<list<int>>>"),
            p("tuple<int, text>"),
            p("address"),
            p("vector<text, 3>"),
            p("vector<float, 3>"),
            CqlType::Duration,
            CqlType::Decimal,
            CqlType::Time,
            CqlType::Inet,
        ];
        let mut seed = 7u64;
        for _ in 0..2000 {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let len = (seed >> 59) as usize;
            let bytes: Vec<u8> = (0..len).map(|i| (seed >> (i % 8 * 8)) as u8).collect();
            for t in &types {
                let _ = t.validate(&bytes);
                let _ = t.compare(&bytes, &bytes[..bytes.len() / 2]);
                let _ = t.to_cql_literal(&bytes);
                let _ = t.to_json(&bytes);
            }
        }
    }

    #[test]
    fn comparators_follow_cassandra() {
        use Ordering::*;
        let i = |v: i32| v.to_be_bytes().to_vec();
        assert_eq!(CqlType::Int.compare(&i(-1), &i(1)), Less);
        assert_eq!(CqlType::Int.compare(&[], &i(i32::MIN)), Less);
        assert_eq!(CqlType::Int.compare(&[], &[]), Equal);
        assert_eq!(
            CqlType::Bigint.compare(&i64::MIN.to_be_bytes(), &(-1i64).to_be_bytes()),
            Less
        );
        assert_eq!(
            CqlType::Timestamp.compare(&(-5i64).to_be_bytes(), &5i64.to_be_bytes()),
            Less
        );
        assert_eq!(CqlType::Varint.compare(&[0xff], &[0x00, 0x80]), Less);
        assert_eq!(CqlType::Text.compare(b"a", b"b"), Less);
        assert_eq!(CqlType::Text.compare("é".as_bytes(), b"z"), Greater);
        assert_eq!(CqlType::Boolean.compare(&[0], &[1]), Less);
        let d = |x: f64| x.to_be_bytes().to_vec();
        assert_eq!(CqlType::Double.compare(&d(-1.5), &d(0.5)), Less);
        assert_eq!(CqlType::Double.compare(&d(-0.0), &d(0.0)), Less);
        assert_eq!(
            CqlType::Double.compare(&d(f64::NAN), &d(f64::INFINITY)),
            Greater
        );
        assert_eq!(CqlType::Double.compare(&d(f64::NAN), &d(f64::NAN)), Equal);
        assert_eq!(
            CqlType::Float.compare(&(-2.0f32).to_be_bytes(), &1.0f32.to_be_bytes()),
            Less
        );
        // date: unsigned, 2^31 is the epoch
        let before = lit(&CqlType::Date, Constant::String("1969-12-31".into()));
        let after = lit(&CqlType::Date, Constant::String("1970-01-01".into()));
        assert_eq!(CqlType::Date.compare(&before, &after), Less);
        let dec = |s: &str| lit(&CqlType::Decimal, Constant::Float(s.into()));
        assert_eq!(CqlType::Decimal.compare(&dec("1.10"), &dec("1.1")), Equal);
        assert_eq!(CqlType::Decimal.compare(&dec("-2"), &dec("1.5")), Less);

        let a = crate::timeuuid::now_timeuuid();
        let bb = crate::timeuuid::now_timeuuid();
        assert_eq!(CqlType::Timeuuid.compare(a.as_bytes(), bb.as_bytes()), Less);
        assert_eq!(CqlType::Uuid.compare(a.as_bytes(), bb.as_bytes()), Less);
        // same timestamp: timeuuid compares the rest as signed bytes, uuid as unsigned
        let mut x = *a.as_bytes();
        let mut y = *a.as_bytes();
        x[8] = 0x80;
        y[8] = 0x7f;
        assert_eq!(CqlType::Timeuuid.compare(&x, &y), Less);
        assert_eq!(CqlType::Uuid.compare(&x, &y), Greater);
        // uuid: version first, then unsigned bytes
        let v4a = uuid::Uuid::from_u128(0x00000000_0000_4000_8000_000000000000);
        let v4b = uuid::Uuid::from_u128(0xf0000000_0000_4000_8000_000000000000);
        assert_eq!(CqlType::Uuid.compare(v4a.as_bytes(), v4b.as_bytes()), Less);
        assert_eq!(CqlType::Uuid.compare(a.as_bytes(), v4a.as_bytes()), Less);
        // minTimeuuid/maxTimeuuid bound every timeuuid of their millisecond
        let ms = crate::timeuuid::timeuuid_timestamp_millis(a.as_bytes());
        let lo = crate::timeuuid::min_timeuuid(ms);
        let hi = crate::timeuuid::max_timeuuid(ms);
        assert_eq!(CqlType::Timeuuid.compare(lo.as_bytes(), a.as_bytes()), Less);
        assert_eq!(
            CqlType::Timeuuid.compare(hi.as_bytes(), a.as_bytes()),
            Greater
        );

        let l = p("frozen<list<int>>");
        let l12 = serialize_collection(&[b(&i(1)), b(&i(2))]);
        let l1 = serialize_collection(&[b(&i(1))]);
        let l3 = serialize_collection(&[b(&i(-3))]);
        assert_eq!(l.compare(&l1, &l12), Less);
        assert_eq!(l.compare(&l3, &l1), Less);
        let t = p("tuple<int, text>");
        let t_null = serialize_tuple(&[None, Some(b(b"z"))]);
        let t_1a = serialize_tuple(&[Some(b(&i(1))), Some(b(b"a"))]);
        let t_1 = serialize_tuple(&[Some(b(&i(1)))]);
        assert_eq!(t.compare(&t_null, &t_1a), Less);
        assert_eq!(t.compare(&t_1, &t_1a), Less);
        let v = p("vector<float, 2>");
        let fv = |a: f32, c: f32| [a.to_be_bytes(), c.to_be_bytes()].concat();
        assert_eq!(v.compare(&fv(-1.0, 0.0), &fv(1.0, 0.0)), Less);
    }

    #[test]
    fn literals_convert_and_bad_ones_are_refused() {
        let int = |s: &str| Constant::Integer(s.into());
        let st = |s: &str| Constant::String(s.into());
        assert_eq!(
            lit(&CqlType::Int, int("-5")).as_ref(),
            &(-5i32).to_be_bytes()
        );
        assert_eq!(
            err_of(CqlType::Int.from_constant(&int("99999999999"))),
            "Unable to make int from '99999999999'"
        );
        assert_eq!(
            lit(&CqlType::Smallint, int("-300")).as_ref(),
            &(-300i16).to_be_bytes()
        );
        assert!(CqlType::Tinyint.from_constant(&int("128")).is_err());
        assert_eq!(
            lit(&CqlType::Bigint, int("9223372036854775807")).as_ref(),
            &i64::MAX.to_be_bytes()
        );
        assert_eq!(lit(&CqlType::Varint, int("-129")).as_ref(), &[0xff, 0x7f]);
        assert_eq!(
            lit(&CqlType::Decimal, Constant::Float("1.50".into())).as_ref(),
            &[0, 0, 0, 2, 0, 150]
        );
        assert_eq!(
            lit(&CqlType::Double, Constant::Float("1.5".into())).as_ref(),
            &1.5f64.to_be_bytes()
        );
        assert_eq!(
            lit(&CqlType::Double, int("3")).as_ref(),
            &3.0f64.to_be_bytes()
        );
        assert!(f64::from_be_bytes(
            lit(&CqlType::Double, Constant::Float("NaN".into()))
                .as_ref()
                .try_into()
                .expect("8")
        )
        .is_nan());
        assert_eq!(
            lit(&CqlType::Float, Constant::Float("-Infinity".into())).as_ref(),
            &f32::NEG_INFINITY.to_be_bytes()
        );
        assert_eq!(
            lit(&CqlType::Boolean, Constant::Boolean(true)).as_ref(),
            &[1]
        );
        assert_eq!(
            lit(&CqlType::Blob, Constant::Hex(vec![0xca, 0xfe])).as_ref(),
            &[0xca, 0xfe]
        );
        assert_eq!(
            lit(&CqlType::Text, st("héllo")).as_ref(),
            "héllo".as_bytes()
        );
        assert!(CqlType::Ascii.from_constant(&st("héllo")).is_err());
        let u = "550e8400-e29b-41d4-a716-446655440000";
        assert_eq!(
            lit(&CqlType::Uuid, Constant::Uuid(u.into())).as_ref(),
            uuid::Uuid::parse_str(u).expect("uuid").as_bytes()
        );
        assert!(CqlType::Timeuuid
            .from_constant(&Constant::Uuid(u.into()))
            .is_err());
        let tu = crate::timeuuid::now_timeuuid().to_string();
        assert!(CqlType::Timeuuid.from_constant(&Constant::Uuid(tu)).is_ok());

        let ts = |s: &str| {
            i64::from_be_bytes(
                lit(&CqlType::Timestamp, st(s))
                    .as_ref()
                    .try_into()
                    .expect("8"),
            )
        };
        assert_eq!(ts("2024-01-02 03:04:05.678+0000"), 1704164645678);
        assert_eq!(ts("2024-01-02 03:04:05+0000"), 1704164645000);
        assert_eq!(ts("2024-01-02T03:04:05.123Z"), 1704164645123);
        assert_eq!(ts("2024-01-02T05:04:05+02:00"), 1704164645000);
        assert_eq!(ts("2024-01-02"), 1704153600000);
        assert_eq!(ts("2024-01-02 03:04"), 1704164640000);
        assert_eq!(ts("1704164645678"), 1704164645678);
        assert_eq!(
            i64::from_be_bytes(
                lit(&CqlType::Timestamp, int("-1"))
                    .as_ref()
                    .try_into()
                    .expect("8")
            ),
            -1
        );
        // Cassandra 5.0.4's wording, from tests/cql/types.expected
        assert_eq!(
            err_of(CqlType::Timestamp.from_constant(&st("yesterday"))),
            "Unable to parse a date/time from 'yesterday'"
        );
        assert!(CqlType::Timestamp.from_constant(&st("2024-02-30")).is_err());
        assert!(CqlType::Timestamp
            .from_constant(&st("99999999999-01-01"))
            .is_err());

        let date = |c: Constant| {
            u32::from_be_bytes(lit(&CqlType::Date, c).as_ref().try_into().expect("4"))
        };
        assert_eq!(date(st("1970-01-02")), (1u32 << 31) + 1);
        assert_eq!(date(st("1969-12-31")), (1u32 << 31) - 1);
        assert_eq!(date(st("2147483648")), 1u32 << 31);
        assert_eq!(date(int("5")), 5);
        assert!(CqlType::Date.from_constant(&st("2023-02-29")).is_err());
        assert!(CqlType::Date.from_constant(&int("-1")).is_err());

        let time = |s: &str| {
            i64::from_be_bytes(lit(&CqlType::Time, st(s)).as_ref().try_into().expect("8"))
        };
        assert_eq!(time("03:04:05"), ((3 * 60 + 4) * 60 + 5) * 1_000_000_000);
        assert_eq!(
            time("03:04:05.5"),
            ((3 * 60 + 4) * 60 + 5) * 1_000_000_000 + 500_000_000
        );
        assert_eq!(time("23:59:59.999999999"), 86_399_999_999_999);
        assert!(CqlType::Time.from_constant(&st("24:00:00")).is_err());

        assert_eq!(
            lit(&CqlType::Inet, st("127.0.0.1")).as_ref(),
            &[127, 0, 0, 1]
        );
        assert_eq!(lit(&CqlType::Inet, st("::1")).len(), 16);
        assert!(CqlType::Inet.from_constant(&st("not an address")).is_err());

        let dur = |s: &str| {
            let v = lit(&CqlType::Duration, Constant::Duration(s.into()));
            read_duration(&v).expect("duration")
        };
        assert_eq!(dur("1h30m"), (0, 0, 5_400_000_000_000));
        assert_eq!(dur("12mo3d"), (12, 3, 0));
        assert_eq!(
            dur("1y2mo3w4d5h6m7s8ms9us10ns"),
            (14, 25, 18_367_008_009_010)
        );
        assert_eq!(dur("P1Y2M"), (14, 0, 0));
        assert_eq!(dur("P1DT2H"), (0, 1, 7_200_000_000_000));
        assert_eq!(dur("P2W"), (0, 14, 0));
        assert_eq!(dur("-1d"), (0, -1, 0));
        assert_eq!(
            lit(&CqlType::Duration, Constant::Duration("1h30m".into())).as_ref(),
            &[0, 0, 0xfc, 0x09, 0xd2, 0x92, 0x29, 0xe0, 0x00]
        );
        assert!(CqlType::Duration
            .from_constant(&Constant::Duration("99999999999999999999h".into()))
            .is_err());
        assert!(CqlType::Duration
            .from_constant(&Constant::Duration("9999999999999h".into()))
            .is_err());
        assert!(CqlType::Duration
            .from_constant(&Constant::Duration("3x".into()))
            .is_err());

        // kind mismatches, with the receiver filled in by the caller
        let e = CqlType::Int
            .from_constant(&st("foo"))
            .expect_err("mismatch");
        assert_eq!(
            e.to_string(),
            "Invalid STRING constant (foo) for of type int"
        );
        assert_eq!(
            e.for_receiver("x").to_string(),
            "Invalid STRING constant (foo) for \"x\" of type int"
        );
        assert_eq!(
            err_of(CqlType::Text.from_constant(&int("1"))),
            "Invalid INTEGER constant (1) for of type text"
        );
        assert_eq!(
            err_of(CqlType::Int.from_constant(&Constant::Float("1.5".into()))),
            "Invalid FLOAT constant (1.5) for of type int"
        );
        assert_eq!(
            err_of(CqlType::Int.from_constant(&Constant::Hex(vec![1]))),
            "Invalid HEX constant (0x01) for of type int"
        );
        assert_eq!(
            err_of(CqlType::Int.from_constant(&Constant::Boolean(true))),
            "Invalid BOOLEAN constant (true) for of type int"
        );
        assert_eq!(
            err_of(p("list<int>").from_constant(&Constant::Uuid(u.into()))),
            format!("Invalid UUID constant ({u}) for of type list<int>")
        );
        assert_eq!(
            err_of(CqlType::Text.from_constant(&Constant::Duration("1d".into()))),
            "Invalid DURATION constant (1d) for of type text"
        );
    }

    #[test]
    fn values_render_as_cql_literals_and_json() {
        assert_eq!(CqlType::Text.to_cql_literal(b"it's"), "'it''s'");
        assert_eq!(CqlType::Blob.to_cql_literal(&[0xca, 0xfe]), "0xcafe");
        assert_eq!(CqlType::Int.to_cql_literal(&(-7i32).to_be_bytes()), "-7");
        assert_eq!(CqlType::Double.to_cql_literal(&1.0f64.to_be_bytes()), "1.0");
        assert_eq!(
            CqlType::Double.to_cql_literal(&f64::NEG_INFINITY.to_be_bytes()),
            "-Infinity"
        );
        assert_eq!(
            CqlType::Timestamp.to_cql_literal(&1704164645123i64.to_be_bytes()),
            "'2024-01-02 03:04:05.123000+0000'"
        );
        let date = lit(&CqlType::Date, Constant::String("2024-01-02".into()));
        assert_eq!(CqlType::Date.to_cql_literal(&date), "'2024-01-02'");
        assert_eq!(
            CqlType::Time.to_cql_literal(&5_000_000_001i64.to_be_bytes()),
            "'00:00:05.000000001'"
        );
        assert_eq!(CqlType::Inet.to_cql_literal(&[10, 0, 0, 1]), "'10.0.0.1'");
        let dur = lit(
            &CqlType::Duration,
            Constant::Duration("P1Y2M3DT4H5M6S".into()),
        );
        assert_eq!(CqlType::Duration.to_cql_literal(&dur), "'1y2mo3d4h5m6s'");
        let i = |v: i32| b(&v.to_be_bytes());
        let l = serialize_collection(&[i(1), i(2)]);
        assert_eq!(p("list<int>").to_cql_literal(&l), "[1, 2]");
        assert_eq!(p("frozen<set<int>>").to_cql_literal(&l), "{1, 2}");
        let m = serialize_map(&[(b(b"a"), i(1))]);
        assert_eq!(p("map<text, int>").to_cql_literal(&m), "{'a': 1}");
        let t = serialize_tuple(&[Some(i(1)), None]);
        assert_eq!(p("tuple<int, text>").to_cql_literal(&t), "(1, null)");
        let u = serialize_tuple(&[Some(b(b"main"))]);
        assert_eq!(
            p("address").to_cql_literal(&u),
            "{street: 'main', \"Zip\": null}"
        );

        assert_eq!(CqlType::Text.to_json(b"a\"b\\\n"), "\"a\\\"b\\\\\\n\"");
        assert_eq!(CqlType::Int.to_json(&(-7i32).to_be_bytes()), "-7");
        assert_eq!(CqlType::Double.to_json(&1e20f64.to_be_bytes()), "1.0E20");
        assert_eq!(CqlType::Double.to_json(&0.0001f64.to_be_bytes()), "1.0E-4");
        assert_eq!(CqlType::Float.to_json(&1.5f32.to_be_bytes()), "1.5");
        assert_eq!(CqlType::Double.to_json(&f64::NAN.to_be_bytes()), "null");
        assert_eq!(
            CqlType::Timestamp.to_json(&1704164645123i64.to_be_bytes()),
            "\"2024-01-02 03:04:05.123Z\""
        );
        assert_eq!(CqlType::Boolean.to_json(&[1]), "true");
        assert_eq!(CqlType::Blob.to_json(&[1]), "\"0x01\"");
        assert_eq!(
            CqlType::Inet.to_json(&std::net::Ipv6Addr::LOCALHOST.octets()),
            "\"0:0:0:0:0:0:0:1\""
        );
        assert_eq!(
            p("map<int, text>").to_json(&serialize_map(&[(i(1), b(b"x"))])),
            "{\"1\": \"x\"}"
        );
        assert_eq!(p("tuple<int, text>").to_json(&t), "[1, null]");
        assert_eq!(
            p("address").to_json(&u),
            "{\"street\": \"main\", \"\\\"Zip\\\"\": null}"
        );
        let dec =
            |s: &str| CqlType::Decimal.to_json(&lit(&CqlType::Decimal, Constant::Float(s.into())));
        assert_eq!(dec("1.50"), "1.50");
        assert_eq!(dec("-0.001"), "-0.001");
        assert_eq!(dec("1E+10"), "1E+10");
        assert_eq!(dec("0.00000001"), "1E-8");
        assert_eq!(dec("123"), "123");
    }
}
