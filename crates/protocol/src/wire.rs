//! Primitive notations of the native protocol (spec section 3): a bounds-checked
//! reader over a byte slice and the matching writers.
//!
//! Every read returns `Result`; nothing here can panic on input bytes.

use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use bytes::Bytes;

use crate::{Consistency, ProtocolError, Value};

fn malformed(msg: impl Into<String>) -> ProtocolError {
    ProtocolError::Malformed(msg.into())
}

/// A cursor over a body. When built from a [`Bytes`], `[bytes]` values are
/// zero-copy slices of it; otherwise they are copied.
#[derive(Clone, Copy)]
pub struct Reader<'a> {
    buf: &'a [u8],
    src: Option<&'a Bytes>,
}

impl<'a> Reader<'a> {
    /// A reader that copies the `[bytes]` it returns.
    pub fn new(buf: &'a [u8]) -> Self {
        Reader { buf, src: None }
    }

    /// A reader whose `[bytes]` are slices of `src` (no copy).
    pub fn from_bytes(src: &'a Bytes) -> Self {
        Reader {
            buf: src.as_ref(),
            src: Some(src),
        }
    }

    /// Bytes not yet read.
    pub fn remaining(&self) -> usize {
        self.buf.len()
    }

    /// The unread rest.
    pub fn rest(&self) -> &'a [u8] {
        self.buf
    }

    /// Takes `n` raw bytes.
    pub fn take(&mut self, n: usize) -> Result<&'a [u8], ProtocolError> {
        if n > self.buf.len() {
            return Err(malformed(format!(
                "Not enough bytes to read: needed {n}, {} remaining",
                self.buf.len()
            )));
        }
        let (head, tail) = self.buf.split_at(n);
        self.buf = tail;
        Ok(head)
    }

    fn slice_of(self, s: &'a [u8]) -> Bytes {
        match self.src {
            // `s` always comes from `src`'s own memory, so slice_ref cannot fail.
            Some(b) if !s.is_empty() => b.slice_ref(s),
            _ => Bytes::copy_from_slice(s),
        }
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N], ProtocolError> {
        let s = self.take(N)?;
        let mut a = [0u8; N];
        a.copy_from_slice(s);
        Ok(a)
    }

    pub fn u8(&mut self) -> Result<u8, ProtocolError> {
        Ok(self.array::<1>()?[0])
    }
    pub fn u16(&mut self) -> Result<u16, ProtocolError> {
        Ok(u16::from_be_bytes(self.array()?))
    }
    pub fn i16(&mut self) -> Result<i16, ProtocolError> {
        Ok(i16::from_be_bytes(self.array()?))
    }
    pub fn i32(&mut self) -> Result<i32, ProtocolError> {
        Ok(i32::from_be_bytes(self.array()?))
    }
    pub fn i64(&mut self) -> Result<i64, ProtocolError> {
        Ok(i64::from_be_bytes(self.array()?))
    }

    /// `[string]`: a `[short]` length then UTF-8.
    pub fn string(&mut self) -> Result<String, ProtocolError> {
        let n = self.u16()? as usize;
        utf8(self.take(n)?)
    }

    /// `[long string]`: an `[int]` length then UTF-8.
    pub fn long_string(&mut self) -> Result<String, ProtocolError> {
        let n = self.i32()?;
        if n < 0 {
            return Err(malformed(format!("Invalid long string length {n}")));
        }
        utf8(self.take(n as usize)?)
    }

    /// `[bytes]`: an `[int]` length, negative meaning null.
    pub fn bytes(&mut self) -> Result<Option<Bytes>, ProtocolError> {
        let n = self.i32()?;
        if n < 0 {
            return Ok(None);
        }
        let s = self.take(n as usize)?;
        Ok(Some(self.slice_of(s)))
    }

    /// `[short bytes]`.
    pub fn short_bytes(&mut self) -> Result<Bytes, ProtocolError> {
        let n = self.u16()? as usize;
        let s = self.take(n)?;
        Ok(self.slice_of(s))
    }

    /// `[value]`: -1 is null, -2 is "not set" (v4+; in v3 any negative is null).
    pub fn value(&mut self, version: u8) -> Result<Value, ProtocolError> {
        let n = self.i32()?;
        match n {
            n if n >= 0 => {
                let s = self.take(n as usize)?;
                Ok(Value::Set(self.slice_of(s)))
            }
            -1 => Ok(Value::Null),
            -2 if version >= 4 => Ok(Value::Unset),
            _ if version < 4 => Ok(Value::Null),
            n => Err(malformed(format!("Invalid value length {n}"))),
        }
    }

    /// `[string list]`.
    pub fn string_list(&mut self) -> Result<Vec<String>, ProtocolError> {
        let n = self.u16()?;
        let mut v = Vec::new();
        for _ in 0..n {
            v.push(self.string()?);
        }
        Ok(v)
    }

    /// `[string map]`.
    pub fn string_map(&mut self) -> Result<HashMap<String, String>, ProtocolError> {
        let n = self.u16()?;
        let mut m = HashMap::new();
        for _ in 0..n {
            let k = self.string()?;
            let v = self.string()?;
            m.insert(k, v);
        }
        Ok(m)
    }

    /// `[string multimap]`.
    pub fn string_multimap(&mut self) -> Result<HashMap<String, Vec<String>>, ProtocolError> {
        let n = self.u16()?;
        let mut m = HashMap::new();
        for _ in 0..n {
            let k = self.string()?;
            let v = self.string_list()?;
            m.insert(k, v);
        }
        Ok(m)
    }

    /// `[bytes map]`.
    pub fn bytes_map(&mut self) -> Result<HashMap<String, Option<Bytes>>, ProtocolError> {
        let n = self.u16()?;
        let mut m = HashMap::new();
        for _ in 0..n {
            let k = self.string()?;
            let v = self.bytes()?;
            m.insert(k, v);
        }
        Ok(m)
    }

    /// `[uuid]`.
    pub fn uuid(&mut self) -> Result<[u8; 16], ProtocolError> {
        self.array()
    }

    /// `[inetaddr]`: one byte size (4 or 16) then the address.
    pub fn inetaddr(&mut self) -> Result<IpAddr, ProtocolError> {
        match self.u8()? {
            4 => Ok(IpAddr::V4(Ipv4Addr::from(self.array::<4>()?))),
            16 => Ok(IpAddr::V6(Ipv6Addr::from(self.array::<16>()?))),
            n => Err(malformed(format!("Invalid IP address length {n}"))),
        }
    }

    /// `[inet]`: an `[inetaddr]` then an `[int]` port.
    pub fn inet(&mut self) -> Result<SocketAddr, ProtocolError> {
        let ip = self.inetaddr()?;
        let port = self.i32()?;
        let port = u16::try_from(port).map_err(|_| malformed(format!("Invalid port {port}")))?;
        Ok(SocketAddr::new(ip, port))
    }

    /// `[consistency]`.
    pub fn consistency(&mut self) -> Result<Consistency, ProtocolError> {
        Consistency::try_from(self.u16()?)
    }
}

fn utf8(s: &[u8]) -> Result<String, ProtocolError> {
    std::str::from_utf8(s)
        .map(str::to_owned)
        .map_err(|_| malformed("Cannot decode string as UTF8"))
}

// ---- writers ----

pub fn put_u8(out: &mut Vec<u8>, v: u8) {
    out.push(v);
}
pub fn put_u16(out: &mut Vec<u8>, v: u16) {
    out.extend_from_slice(&v.to_be_bytes());
}
pub fn put_i16(out: &mut Vec<u8>, v: i16) {
    out.extend_from_slice(&v.to_be_bytes());
}
pub fn put_i32(out: &mut Vec<u8>, v: i32) {
    out.extend_from_slice(&v.to_be_bytes());
}
pub fn put_i64(out: &mut Vec<u8>, v: i64) {
    out.extend_from_slice(&v.to_be_bytes());
}

/// Writes a `[short]` count, clamped to `u16::MAX` (returns the count written).
pub fn put_count(out: &mut Vec<u8>, n: usize) -> usize {
    let n = n.min(u16::MAX as usize);
    put_u16(out, n as u16);
    n
}

/// Longest prefix of `s` that fits in `max` bytes, cut at a char boundary.
fn truncate(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut end = max;
    while end > 0 && !s.is_char_boundary(end) {
        end -= 1;
    }
    s.get(..end).unwrap_or("")
}

/// `[string]`; a string longer than 65535 bytes is truncated (only error
/// messages can be that long, and a cut message beats a corrupt frame).
pub fn put_string(out: &mut Vec<u8>, s: &str) {
    let s = truncate(s, u16::MAX as usize);
    put_u16(out, s.len() as u16);
    out.extend_from_slice(s.as_bytes());
}

/// `[long string]`.
pub fn put_long_string(out: &mut Vec<u8>, s: &str) {
    let s = truncate(s, i32::MAX as usize);
    put_i32(out, s.len() as i32);
    out.extend_from_slice(s.as_bytes());
}

/// `[bytes]`; `None` is null.
pub fn put_bytes(out: &mut Vec<u8>, b: Option<&[u8]>) {
    match b {
        None => put_i32(out, -1),
        Some(b) => {
            let b = b.get(..b.len().min(i32::MAX as usize)).unwrap_or(&[]);
            put_i32(out, b.len() as i32);
            out.extend_from_slice(b);
        }
    }
}

/// `[short bytes]`.
pub fn put_short_bytes(out: &mut Vec<u8>, b: &[u8]) {
    let b = b.get(..b.len().min(u16::MAX as usize)).unwrap_or(&[]);
    put_u16(out, b.len() as u16);
    out.extend_from_slice(b);
}

/// `[value]`.
pub fn put_value(out: &mut Vec<u8>, v: &Value) {
    match v {
        Value::Null => put_i32(out, -1),
        Value::Unset => put_i32(out, -2),
        Value::Set(b) => put_bytes(out, Some(b)),
    }
}

/// `[string list]`.
pub fn put_string_list(out: &mut Vec<u8>, l: &[String]) {
    let n = put_count(out, l.len());
    for s in l.iter().take(n) {
        put_string(out, s);
    }
}

/// `[string map]`, keys sorted so the bytes are deterministic.
pub fn put_string_map(out: &mut Vec<u8>, m: &HashMap<String, String>) {
    let mut keys: Vec<&String> = m.keys().collect();
    keys.sort();
    let n = put_count(out, keys.len());
    for k in keys.into_iter().take(n) {
        put_string(out, k);
        put_string(out, m.get(k).map(String::as_str).unwrap_or(""));
    }
}

/// `[string multimap]`, keys sorted.
pub fn put_string_multimap(out: &mut Vec<u8>, m: &HashMap<String, Vec<String>>) {
    let mut keys: Vec<&String> = m.keys().collect();
    keys.sort();
    let n = put_count(out, keys.len());
    for k in keys.into_iter().take(n) {
        put_string(out, k);
        put_string_list(out, m.get(k).map(Vec::as_slice).unwrap_or(&[]));
    }
}

/// `[bytes map]`, keys sorted.
pub fn put_bytes_map(out: &mut Vec<u8>, m: &HashMap<String, Option<Bytes>>) {
    let mut keys: Vec<&String> = m.keys().collect();
    keys.sort();
    let n = put_count(out, keys.len());
    for k in keys.into_iter().take(n) {
        put_string(out, k);
        put_bytes(out, m.get(k).and_then(|v| v.as_deref()));
    }
}

/// `[inetaddr]`.
pub fn put_inetaddr(out: &mut Vec<u8>, ip: &IpAddr) {
    match ip {
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

/// `[inet]`.
pub fn put_inet(out: &mut Vec<u8>, addr: &SocketAddr) {
    put_inetaddr(out, &addr.ip());
    put_i32(out, i32::from(addr.port()));
}

/// `[consistency]`.
pub fn put_consistency(out: &mut Vec<u8>, c: Consistency) {
    put_u16(out, c as u16);
}
