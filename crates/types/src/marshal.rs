//! Parsing and printing types, validating and comparing serialized values,
//! and converting CQL literals (Cassandra's `db.marshal`).

use crate::value::{deserialize_collection, deserialize_map, deserialize_tuple, read_signed_vint, write_signed_vint};
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
                    None => return Err(TypeError::BadType("unterminated quoted identifier".into())),
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
        while self.p < self.s.len() && (self.s[self.p].is_ascii_alphanumeric() || self.s[self.p] == b'_' || self.s[self.p] == b'.') {
            self.p += 1;
        }
        if start == self.p {
            return Err(TypeError::BadType(format!("Invalid type: {}", String::from_utf8_lossy(self.s))));
        }
        Ok(String::from_utf8_lossy(&self.s[start..self.p]).to_lowercase())
    }

    fn expect(&mut self, c: u8) -> Result<(), TypeError> {
        self.ws();
        if self.s.get(self.p) == Some(&c) {
            self.p += 1;
            Ok(())
        } else {
            Err(TypeError::BadType(format!("Invalid type: {}", String::from_utf8_lossy(self.s))))
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
        if depth > 64 {
            return Err(TypeError::BadType("type nesting too deep".into()));
        }
        let raw_quoted = self.peek() == Some(b'"');
        let name = self.ident()?;
        if let Some(class) = name.strip_prefix('\'') {
            return Ok(custom_class(class));
        }
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
                        return Err(TypeError::BadType(format!("{name} takes one type argument")));
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
                        .ok_or_else(|| TypeError::BadType("vector dimension must be a positive integer".into()))?;
                    self.expect(b'>')?;
                    return Ok(CqlType::Vector(Box::new(e), n));
                }
                _ => {}
            }
        }
        let short = name.rsplit('.').next().unwrap_or(&name).to_string();
        match (self.resolve)(&short) {
            Some(u) => Ok(CqlType::Udt(u)),
            None => Err(TypeError::BadType(format!("Unknown type {name}"))),
        }
    }
}

fn needs_quotes(name: &str) -> bool {
    !(name.chars().next().map(|c| c.is_ascii_lowercase()).unwrap_or(false)
        && name.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_'))
}

impl fmt::Display for CqlType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
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
            CqlType::List(e) => write!(f, "list<{e}>"),
            CqlType::Set(e) => write!(f, "set<{e}>"),
            CqlType::Map(k, v) => write!(f, "map<{k}, {v}>"),
            CqlType::Tuple(ts) => {
                write!(f, "tuple<")?;
                for (i, t) in ts.iter().enumerate() {
                    if i > 0 {
                        write!(f, ", ")?;
                    }
                    write!(f, "{t}")?;
                }
                write!(f, ">")
            }
            CqlType::Udt(u) => {
                if needs_quotes(&u.name) {
                    write!(f, "\"{}\"", u.name.replace('"', "\"\""))
                } else {
                    write!(f, "{}", u.name)
                }
            }
            CqlType::Frozen(t) => write!(f, "frozen<{t}>"),
            CqlType::Vector(t, n) => write!(f, "vector<{t}, {n}>"),
            CqlType::Custom(c) => write!(f, "'{c}'"),
        }
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
    if !(1..=12).contains(&m) || !(1..=31).contains(&d) {
        return None;
    }
    Some(days_from_civil(if neg { -y } else { y }, m, d))
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
    if !(0..24).contains(&h) || !(0..60).contains(&m) || !(0..60).contains(&sec) || frac.len() > 9 || !frac.chars().all(|c| c.is_ascii_digit()) {
        return None;
    }
    let mut nanos: i64 = 0;
    for (i, c) in frac.chars().enumerate() {
        nanos += (c as i64 - '0' as i64) * 10i64.pow(8 - i as u32);
    }
    Some(((h * 60 + m) * 60 + sec) * 1_000_000_000 + nanos)
}

/// Parses a timestamp literal into epoch millis (UTC unless a zone is given).
pub fn parse_timestamp(s: &str) -> Option<i64> {
    let s = s.trim();
    if let Ok(n) = s.parse::<i64>() {
        return Some(n);
    }
    let (date, rest) = match s.find(|c| c == 'T' || c == ' ') {
        Some(i) if i >= 8 => (&s[..i], s[i + 1..].trim()),
        _ => (s, ""),
    };
    // a date alone may still carry a zone: 2020-01-01+0000
    let (date, mut rest) = if rest.is_empty() {
        match date.char_indices().skip(8).find(|(_, c)| *c == '+' || *c == 'Z') {
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
        let zpos = rest.find(|c: char| c == 'Z' || c == 'z' || c == '+' || c == '-');
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
            let mm: i64 = if digits.len() == 4 { digits[2..].parse().ok()? } else { 0 };
            offset_minutes = sign * (hh * 60 + mm);
        }
    }
    Some(days * 86_400_000 + nanos / 1_000_000 - offset_minutes * 60_000)
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

fn parse_duration(s: &str) -> Result<(i32, i32, i64), TypeError> {
    let err = || bad(format!("Unable to convert '{s}' to a duration"));
    let (neg, body) = match s.strip_prefix('-') {
        Some(b) => (true, b),
        None => (false, s),
    };
    let mut months: i64 = 0;
    let mut days: i64 = 0;
    let mut nanos: i64 = 0;
    let up = body.to_ascii_uppercase();
    if let Some(iso) = up.strip_prefix('P') {
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
                ('Y', false) => months += 12 * n,
                ('M', false) => months += n,
                ('W', false) => days += 7 * n,
                ('D', false) => days += n,
                ('H', true) => nanos += n * 3_600_000_000_000,
                ('M', true) => nanos += n * 60_000_000_000,
                ('S', true) => nanos += n * 1_000_000_000,
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
                "y" => months += 12 * n,
                "mo" => months += n,
                "w" => days += 7 * n,
                "d" => days += n,
                "h" => nanos += n * 3_600_000_000_000,
                "m" => nanos += n * 60_000_000_000,
                "s" => nanos += n * 1_000_000_000,
                "ms" => nanos += n * 1_000_000,
                "us" | "µs" => nanos += n * 1000,
                "ns" => nanos += n,
                _ => return Err(err()),
            }
        }
    }
    let sign = if neg { -1 } else { 1 };
    Ok(((months * sign) as i32, (days * sign) as i32, nanos * sign))
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
    Some(bigdecimal::BigDecimal::new(varint_of(&v[4..]), scale as i64))
}

fn f64_of(v: &[u8]) -> f64 {
    let a: [u8; 8] = v.try_into().unwrap_or([0; 8]);
    f64::from_be_bytes(a)
}

fn f32_of(v: &[u8]) -> f32 {
    let a: [u8; 4] = v.try_into().unwrap_or([0; 4]);
    f32::from_be_bytes(a)
}

fn cmp_f64(a: f64, b: f64) -> Ordering {
    a.partial_cmp(&b).unwrap_or_else(|| a.is_nan().cmp(&b.is_nan()))
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
    let va = a[6] >> 4;
    let vb = b[6] >> 4;
    va.cmp(&vb).then_with(|| if va == 1 { timeuuid_cmp(a, b) } else { uuid_signed_cmp(a, b) })
}

impl CqlType {
    /// Parses a CQL type as written in DDL or system_schema.
    pub fn parse(s: &str, resolve_udt: &dyn Fn(&str) -> Option<Arc<UserType>>) -> Result<CqlType, TypeError> {
        let mut p = TypeParser { s: s.as_bytes(), p: 0, resolve: resolve_udt };
        let t = p.typ(0)?;
        p.ws();
        if p.p != p.s.len() {
            return Err(TypeError::BadType(format!("Invalid type: {s}")));
        }
        Ok(t)
    }

    /// Non-frozen collections and UDTs store one cell per element.
    pub fn is_multi_cell(&self) -> bool {
        matches!(self, CqlType::List(_) | CqlType::Set(_) | CqlType::Map(_, _) | CqlType::Udt(_))
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
        matches!(self.unfrozen(), CqlType::List(_) | CqlType::Set(_) | CqlType::Map(_, _))
    }

    /// Validates a serialized value.
    pub fn validate(&self, v: &[u8]) -> Result<(), TypeError> {
        match self {
            CqlType::Int => fixed(v, 4, "int"),
            CqlType::Bigint | CqlType::Counter => fixed(v, 8, "long"),
            CqlType::Timestamp => fixed(v, 8, "timestamp"),
            CqlType::Double => fixed(v, 8, "double"),
            CqlType::Float => fixed(v, 4, "float"),
            CqlType::Smallint => fixed(v, 2, "short"),
            CqlType::Tinyint => fixed(v, 1, "byte"),
            CqlType::Boolean => fixed(v, 1, "boolean"),
            CqlType::Date => fixed(v, 4, "date"),
            CqlType::Time => {
                fixed(v, 8, "time")?;
                if v.len() == 8 {
                    let n = i64::from_be_bytes(v.try_into().unwrap_or([0; 8]));
                    if !(0..86_400_000_000_000).contains(&n) {
                        return Err(bad(format!("Time value must be between 0 and 86399999999999 (was {n})")));
                    }
                }
                Ok(())
            }
            CqlType::Uuid => fixed(v, 16, "UUID"),
            CqlType::Timeuuid => {
                fixed(v, 16, "UUID")?;
                if v.len() == 16 && v[6] >> 4 != 1 {
                    return Err(bad("Unsupported UUID version for timeuuid (must be 1)"));
                }
                Ok(())
            }
            CqlType::Inet => {
                if v.is_empty() || v.len() == 4 || v.len() == 16 {
                    Ok(())
                } else {
                    Err(bad(format!("Invalid inet address length: {}", v.len())))
                }
            }
            CqlType::Ascii => {
                if let Some(b) = v.iter().find(|b| **b > 127) {
                    return Err(bad(format!("Invalid byte for ascii: {}", *b as i8)));
                }
                Ok(())
            }
            CqlType::Text => std::str::from_utf8(v).map(|_| ()).map_err(|_| bad("Invalid UTF-8 bytes")),
            CqlType::Decimal => {
                if !v.is_empty() && v.len() < 4 {
                    return Err(bad(format!("Expected at least 4 bytes for a decimal, got {}", v.len())));
                }
                Ok(())
            }
            CqlType::Duration => {
                if v.is_empty() {
                    return Ok(());
                }
                let (_, a) = read_signed_vint(v)?;
                let (_, b) = read_signed_vint(&v[a..])?;
                let (_, c) = read_signed_vint(&v[a + b..])?;
                if a + b + c != v.len() {
                    return Err(bad("Invalid duration value"));
                }
                Ok(())
            }
            CqlType::Blob | CqlType::Varint | CqlType::Custom(_) => Ok(()),
            CqlType::List(e) | CqlType::Set(e) => {
                for x in deserialize_collection(v)? {
                    e.validate(&x)?;
                }
                Ok(())
            }
            CqlType::Map(k, val) => {
                for (a, b) in deserialize_map(v)? {
                    k.validate(&a)?;
                    val.validate(&b)?;
                }
                Ok(())
            }
            CqlType::Tuple(ts) => {
                let fs = deserialize_tuple(v)?;
                if fs.len() > ts.len() {
                    return Err(bad(format!("Tuple value has {} fields, type has {}", fs.len(), ts.len())));
                }
                for (f, t) in fs.iter().zip(ts.iter()) {
                    if let Some(f) = f {
                        t.validate(f)?;
                    }
                }
                Ok(())
            }
            CqlType::Udt(u) => {
                let fs = deserialize_tuple(v)?;
                if fs.len() > u.fields.len() {
                    return Err(bad(format!("UDT value has {} fields, type {} has {}", fs.len(), u.name, u.fields.len())));
                }
                for (f, (_, t)) in fs.iter().zip(u.fields.iter()) {
                    if let Some(f) = f {
                        t.validate(f)?;
                    }
                }
                Ok(())
            }
            CqlType::Frozen(t) => t.validate(v),
            CqlType::Vector(e, n) => {
                let size = match e.unfrozen() {
                    CqlType::Float | CqlType::Int => Some(4),
                    CqlType::Bigint | CqlType::Double | CqlType::Timestamp => Some(8),
                    CqlType::Uuid | CqlType::Timeuuid => Some(16),
                    CqlType::Boolean => Some(1),
                    _ => None,
                };
                match size {
                    Some(s) if v.len() != s * *n as usize => {
                        Err(bad(format!("Expected {} bytes for a vector of {} elements, got {}", s * *n as usize, n, v.len())))
                    }
                    _ => Ok(()),
                }
            }
        }
    }

    /// Cassandra's comparator for the type. An empty value sorts first.
    pub fn compare(&self, a: &[u8], b: &[u8]) -> Ordering {
        if a.is_empty() || b.is_empty() {
            return a.len().min(1).cmp(&b.len().min(1));
        }
        match self {
            CqlType::Int | CqlType::Bigint | CqlType::Smallint | CqlType::Tinyint | CqlType::Counter | CqlType::Timestamp | CqlType::Time => {
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
            CqlType::Ascii | CqlType::Text | CqlType::Blob | CqlType::Inet | CqlType::Custom(_) | CqlType::Duration => a.cmp(b),
            CqlType::List(e) | CqlType::Set(e) => match (deserialize_collection(a), deserialize_collection(b)) {
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
            CqlType::Vector(_, _) => a.cmp(b),
        }
    }

    /// Converts a CQL constant to a serialized value of this type. Errors say
    /// `for  of type` where the caller inserts the receiver's name.
    pub fn from_constant(&self, c: &Constant) -> Result<Bytes, TypeError> {
        let mismatch = |kind: &str, text: &str| bad(format!("Invalid {kind} constant ({text}) for  of type {self}"));
        let int_text = |s: &str, what: &str| -> Result<i64, TypeError> {
            s.parse::<i64>().map_err(|_| bad(format!("Unable to make {what} from '{s}'")))
        };
        match (self.unfrozen(), c) {
            (CqlType::Ascii, Constant::String(s)) => {
                if !s.is_ascii() {
                    return Err(bad(format!("Invalid ASCII character in string literal {s}")));
                }
                Ok(Bytes::copy_from_slice(s.as_bytes()))
            }
            (CqlType::Text, Constant::String(s)) => Ok(Bytes::copy_from_slice(s.as_bytes())),
            (CqlType::Int, Constant::Integer(s)) => {
                let v = int_text(s, "int")?;
                i32::try_from(v).map(|x| Bytes::copy_from_slice(&x.to_be_bytes())).map_err(|_| bad(format!("Unable to make int from '{s}'")))
            }
            (CqlType::Bigint | CqlType::Counter, Constant::Integer(s)) => Ok(Bytes::copy_from_slice(&int_text(s, "long")?.to_be_bytes())),
            (CqlType::Smallint, Constant::Integer(s)) => {
                let v = int_text(s, "short")?;
                i16::try_from(v).map(|x| Bytes::copy_from_slice(&x.to_be_bytes())).map_err(|_| bad(format!("Unable to make short from '{s}'")))
            }
            (CqlType::Tinyint, Constant::Integer(s)) => {
                let v = int_text(s, "byte")?;
                i8::try_from(v).map(|x| Bytes::copy_from_slice(&x.to_be_bytes())).map_err(|_| bad(format!("Unable to make byte from '{s}'")))
            }
            (CqlType::Varint, Constant::Integer(s)) => {
                let v: num_bigint::BigInt = s.parse().map_err(|_| bad(format!("Unable to make varint from '{s}'")))?;
                Ok(Bytes::from(v.to_signed_bytes_be()))
            }
            (CqlType::Decimal, Constant::Integer(s) | Constant::Float(s)) => {
                let d: bigdecimal::BigDecimal = s.parse().map_err(|_| bad(format!("Unable to make BigDecimal from '{s}'")))?;
                let (unscaled, scale) = d.as_bigint_and_exponent();
                let mut out = (scale as i32).to_be_bytes().to_vec();
                out.extend_from_slice(&unscaled.to_signed_bytes_be());
                Ok(Bytes::from(out))
            }
            (CqlType::Double, Constant::Integer(s) | Constant::Float(s)) => {
                let v: f64 = parse_float(s).ok_or_else(|| bad(format!("Unable to make double from '{s}'")))?;
                Ok(Bytes::copy_from_slice(&v.to_be_bytes()))
            }
            (CqlType::Float, Constant::Integer(s) | Constant::Float(s)) => {
                let v: f64 = parse_float(s).ok_or_else(|| bad(format!("Unable to make float from '{s}'")))?;
                Ok(Bytes::copy_from_slice(&(v as f32).to_be_bytes()))
            }
            (CqlType::Boolean, Constant::Boolean(b)) => Ok(Bytes::copy_from_slice(&[*b as u8])),
            (CqlType::Blob, Constant::Hex(h)) => Ok(Bytes::copy_from_slice(h)),
            (CqlType::Uuid, Constant::Uuid(s)) | (CqlType::Timeuuid, Constant::Uuid(s)) => {
                let u = uuid::Uuid::parse_str(s).map_err(|_| bad(format!("Unable to make UUID from '{s}'")))?;
                if matches!(self.unfrozen(), CqlType::Timeuuid) && u.get_version_num() != 1 {
                    return Err(bad(format!("Unsupported UUID version for timeuuid: {s}")));
                }
                Ok(Bytes::copy_from_slice(u.as_bytes()))
            }
            (CqlType::Timestamp, Constant::String(s)) => {
                let ms = parse_timestamp(s).ok_or_else(|| bad(format!("Unable to parse a date/time from '{s}'")))?;
                Ok(Bytes::copy_from_slice(&ms.to_be_bytes()))
            }
            (CqlType::Timestamp, Constant::Integer(s)) => Ok(Bytes::copy_from_slice(&int_text(s, "timestamp")?.to_be_bytes())),
            (CqlType::Date, Constant::String(s)) => {
                let days = if let Ok(n) = s.parse::<i64>() {
                    n - (1i64 << 31)
                } else {
                    parse_date_part(s).ok_or_else(|| bad(format!("Unable to coerce '{s}' to a formatted date (long)")))?
                };
                Ok(Bytes::copy_from_slice(&((days + (1i64 << 31)) as u32).to_be_bytes()))
            }
            (CqlType::Date, Constant::Integer(s)) => {
                let n = int_text(s, "date")?;
                if !(0..=u32::MAX as i64).contains(&n) {
                    return Err(bad(format!("Unable to make unsigned int (for date) from: '{s}'")));
                }
                Ok(Bytes::copy_from_slice(&(n as u32).to_be_bytes()))
            }
            (CqlType::Time, Constant::String(s)) => {
                let n = parse_time_part(s).ok_or_else(|| bad(format!("Unable to coerce '{s}' to a formatted time (long)")))?;
                Ok(Bytes::copy_from_slice(&n.to_be_bytes()))
            }
            (CqlType::Time, Constant::Integer(s)) => {
                let n = int_text(s, "time")?;
                if !(0..86_400_000_000_000).contains(&n) {
                    return Err(bad(format!("Invalid time value: {s}")));
                }
                Ok(Bytes::copy_from_slice(&n.to_be_bytes()))
            }
            (CqlType::Inet, Constant::String(s)) => {
                let ip: std::net::IpAddr = s.parse().map_err(|_| bad(format!("Unable to make inet address from '{s}'")))?;
                Ok(match ip {
                    std::net::IpAddr::V4(v) => Bytes::copy_from_slice(&v.octets()),
                    std::net::IpAddr::V6(v) => Bytes::copy_from_slice(&v.octets()),
                })
            }
            (CqlType::Duration, Constant::Duration(s) | Constant::String(s)) => {
                let (m, d, n) = parse_duration(s)?;
                if (m < 0 || d < 0 || n < 0) && (m > 0 || d > 0 || n > 0) {
                    return Err(bad("The duration months, days and nanoseconds must be all of the same sign"));
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

    /// Renders a value as a CQL literal.
    pub fn to_cql_literal(&self, v: &[u8]) -> String {
        if v.is_empty() && !matches!(self.unfrozen(), CqlType::Text | CqlType::Ascii | CqlType::Blob) {
            return "null".into();
        }
        match self.unfrozen() {
            CqlType::Ascii | CqlType::Text => format!("'{}'", String::from_utf8_lossy(v).replace('\'', "''")),
            CqlType::Blob | CqlType::Custom(_) => format!("0x{}", hex(v)),
            CqlType::Boolean => (v.first().copied().unwrap_or(0) != 0).to_string(),
            CqlType::Int | CqlType::Bigint | CqlType::Smallint | CqlType::Tinyint | CqlType::Counter | CqlType::Varint => varint_of(v).to_string(),
            CqlType::Decimal => decimal_of(v).map(|d| d.to_string()).unwrap_or_default(),
            CqlType::Double => f64_of(v).to_string(),
            CqlType::Float => f32_of(v).to_string(),
            CqlType::Timestamp => format!("'{}'", format_timestamp(i64::from_be_bytes(v.try_into().unwrap_or([0; 8])))),
            CqlType::Date => {
                let d = u32::from_be_bytes(v.try_into().unwrap_or([0; 4])) as i64 - (1i64 << 31);
                let (y, m, dd) = civil_from_days(d);
                format!("'{y:04}-{m:02}-{dd:02}'")
            }
            CqlType::Time => {
                let n = i64::from_be_bytes(v.try_into().unwrap_or([0; 8]));
                let s = n / 1_000_000_000;
                format!("'{:02}:{:02}:{:02}.{:09}'", s / 3600, (s / 60) % 60, s % 60, n % 1_000_000_000)
            }
            CqlType::Uuid | CqlType::Timeuuid => uuid::Uuid::from_slice(v).map(|u| u.to_string()).unwrap_or_else(|_| format!("0x{}", hex(v))),
            CqlType::Inet => match v.len() {
                4 => format!("'{}'", std::net::Ipv4Addr::new(v[0], v[1], v[2], v[3])),
                16 => format!("'{}'", std::net::Ipv6Addr::from(<[u8; 16]>::try_from(v).unwrap_or([0; 16]))),
                _ => format!("0x{}", hex(v)),
            },
            CqlType::Duration => {
                let mut parts = Vec::new();
                if let Ok((m, a)) = read_signed_vint(v) {
                    if let Ok((d, b)) = read_signed_vint(&v[a..]) {
                        if let Ok((n, _)) = read_signed_vint(&v[a + b..]) {
                            if m != 0 {
                                parts.push(format!("{m}mo"));
                            }
                            if d != 0 {
                                parts.push(format!("{d}d"));
                            }
                            if n != 0 || parts.is_empty() {
                                parts.push(format!("{n}ns"));
                            }
                        }
                    }
                }
                parts.join("")
            }
            CqlType::List(e) => {
                let items: Vec<String> = deserialize_collection(v).unwrap_or_default().iter().map(|x| e.to_cql_literal(x)).collect();
                format!("[{}]", items.join(", "))
            }
            CqlType::Set(e) => {
                let items: Vec<String> = deserialize_collection(v).unwrap_or_default().iter().map(|x| e.to_cql_literal(x)).collect();
                format!("{{{}}}", items.join(", "))
            }
            CqlType::Map(k, val) => {
                let items: Vec<String> =
                    deserialize_map(v).unwrap_or_default().iter().map(|(a, b)| format!("{}: {}", k.to_cql_literal(a), val.to_cql_literal(b))).collect();
                format!("{{{}}}", items.join(", "))
            }
            CqlType::Tuple(ts) => {
                let fs = deserialize_tuple(v).unwrap_or_default();
                let items: Vec<String> =
                    ts.iter().zip(fs.iter()).map(|(t, f)| f.as_ref().map(|f| t.to_cql_literal(f)).unwrap_or_else(|| "null".into())).collect();
                format!("({})", items.join(", "))
            }
            CqlType::Udt(u) => {
                let fs = deserialize_tuple(v).unwrap_or_default();
                let items: Vec<String> = u
                    .fields
                    .iter()
                    .zip(fs.iter().map(Some).chain(std::iter::repeat(None)))
                    .map(|((n, t), f)| format!("{}: {}", n, f.and_then(|f| f.as_ref()).map(|f| t.to_cql_literal(f)).unwrap_or_else(|| "null".into())))
                    .collect();
                format!("{{{}}}", items.join(", "))
            }
            CqlType::Vector(_, _) | CqlType::Frozen(_) => format!("0x{}", hex(v)),
        }
    }
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

    fn none(_: &str) -> Option<Arc<UserType>> {
        None
    }

    #[test]
    fn types_parse_and_print_like_cassandra() {
        for s in ["int", "text", "map<text, frozen<list<int>>>", "tuple<int, text>", "vector<float, 3>", "set<timeuuid>"] {
            assert_eq!(CqlType::parse(s, &none).expect(s).to_string(), s);
        }
        assert_eq!(CqlType::parse("VARCHAR", &none).expect("varchar").to_string(), "text");
        assert!(CqlType::parse("nosuch", &none).is_err());
    }

    #[test]
    fn comparators_follow_cassandra() {
        let i = |v: i32| v.to_be_bytes().to_vec();
        assert_eq!(CqlType::Int.compare(&i(-1), &i(1)), Ordering::Less);
        assert_eq!(CqlType::Text.compare(b"a", b"b"), Ordering::Less);
        assert_eq!(CqlType::Double.compare(&(-1.5f64).to_be_bytes(), &(0.5f64).to_be_bytes()), Ordering::Less);
        let a = crate::timeuuid::now_timeuuid();
        let b = crate::timeuuid::now_timeuuid();
        assert_eq!(CqlType::Timeuuid.compare(a.as_bytes(), b.as_bytes()), Ordering::Less);
    }

    #[test]
    fn literals_convert_and_bad_ones_are_refused() {
        assert_eq!(CqlType::Int.from_constant(&Constant::Integer("-5".into())).expect("int").as_ref(), &(-5i32).to_be_bytes());
        assert!(CqlType::Int.from_constant(&Constant::Integer("99999999999".into())).is_err());
        assert!(CqlType::Int.from_constant(&Constant::String("x".into())).is_err());
        let ts = CqlType::Timestamp.from_constant(&Constant::String("2024-01-02 03:04:05.678+0000".into())).expect("ts");
        assert_eq!(i64::from_be_bytes(ts.as_ref().try_into().expect("8")), 1704164645678);
        let d = CqlType::Date.from_constant(&Constant::String("1970-01-02".into())).expect("date");
        assert_eq!(u32::from_be_bytes(d.as_ref().try_into().expect("4")), (1u32 << 31) + 1);
        let dur = CqlType::Duration.from_constant(&Constant::Duration("1h30m".into())).expect("duration");
        assert!(CqlType::Duration.validate(&dur).is_ok());
        assert!(CqlType::Text.validate(&[0xff, 0xfe]).is_err());
        assert!(CqlType::Int.validate(&[1, 2, 3]).is_err());
    }
}
