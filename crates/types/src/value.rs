//! Native (protocol v3+) encoding of collection, tuple and UDT values, and
//! Cassandra's unsigned/signed vints.

use crate::TypeError;
use bytes::Bytes;

fn err(m: &str) -> TypeError {
    TypeError::InvalidValue(m.to_string())
}

/// `[int n][int len][bytes]...` for lists and sets.
pub fn serialize_collection(elems: &[Bytes]) -> Bytes {
    let mut out = Vec::with_capacity(4 + elems.iter().map(|e| e.len() + 4).sum::<usize>());
    out.extend_from_slice(&(elems.len() as i32).to_be_bytes());
    for e in elems {
        out.extend_from_slice(&(e.len() as i32).to_be_bytes());
        out.extend_from_slice(e);
    }
    Bytes::from(out)
}

/// `[int n]([int len][key][int len][value])...` for maps.
pub fn serialize_map(pairs: &[(Bytes, Bytes)]) -> Bytes {
    let mut out = Vec::with_capacity(
        4 + pairs
            .iter()
            .map(|(k, v)| k.len() + v.len() + 8)
            .sum::<usize>(),
    );
    out.extend_from_slice(&(pairs.len() as i32).to_be_bytes());
    for (k, v) in pairs {
        out.extend_from_slice(&(k.len() as i32).to_be_bytes());
        out.extend_from_slice(k);
        out.extend_from_slice(&(v.len() as i32).to_be_bytes());
        out.extend_from_slice(v);
    }
    Bytes::from(out)
}

/// Tuple and UDT values: each field `[int len][bytes]`, -1 for null.
pub fn serialize_tuple(fields: &[Option<Bytes>]) -> Bytes {
    let mut out = Vec::new();
    for f in fields {
        match f {
            Some(b) => {
                out.extend_from_slice(&(b.len() as i32).to_be_bytes());
                out.extend_from_slice(b);
            }
            None => out.extend_from_slice(&(-1i32).to_be_bytes()),
        }
    }
    Bytes::from(out)
}

struct Cur<'a> {
    b: &'a [u8],
    p: usize,
}

impl<'a> Cur<'a> {
    fn int(&mut self) -> Result<i32, TypeError> {
        if self.b.len() - self.p < 4 {
            return Err(err("Not enough bytes to read an int"));
        }
        let v = i32::from_be_bytes([
            self.b[self.p],
            self.b[self.p + 1],
            self.b[self.p + 2],
            self.b[self.p + 3],
        ]);
        self.p += 4;
        Ok(v)
    }
    fn bytes(&mut self, n: usize) -> Result<&'a [u8], TypeError> {
        if self.b.len() - self.p < n {
            return Err(err("Not enough bytes to read a value"));
        }
        let s = &self.b[self.p..self.p + n];
        self.p += n;
        Ok(s)
    }
    fn value(&mut self) -> Result<Option<Bytes>, TypeError> {
        let n = self.int()?;
        if n < 0 {
            return Ok(None);
        }
        Ok(Some(Bytes::copy_from_slice(self.bytes(n as usize)?)))
    }
    fn done(&self) -> bool {
        self.p >= self.b.len()
    }
}

/// Elements of a list or set value.
pub fn deserialize_collection(v: &[u8]) -> Result<Vec<Bytes>, TypeError> {
    if v.is_empty() {
        return Ok(Vec::new());
    }
    let mut c = Cur { b: v, p: 0 };
    let n = c.int()?;
    if n < 0 || n as usize > v.len() {
        return Err(err("Invalid collection size"));
    }
    let mut out = Vec::with_capacity(n as usize);
    for _ in 0..n {
        match c.value()? {
            Some(b) => out.push(b),
            None => return Err(err("null is not supported inside collections")),
        }
    }
    if !c.done() {
        return Err(err("Unexpected extraneous bytes after collection value"));
    }
    Ok(out)
}

/// Pairs of a map value.
pub fn deserialize_map(v: &[u8]) -> Result<Vec<(Bytes, Bytes)>, TypeError> {
    if v.is_empty() {
        return Ok(Vec::new());
    }
    let mut c = Cur { b: v, p: 0 };
    let n = c.int()?;
    if n < 0 || n as usize > v.len() {
        return Err(err("Invalid map size"));
    }
    let mut out = Vec::with_capacity(n as usize);
    for _ in 0..n {
        let k = c
            .value()?
            .ok_or_else(|| err("null is not supported inside maps"))?;
        let val = c
            .value()?
            .ok_or_else(|| err("null is not supported inside maps"))?;
        out.push((k, val));
    }
    if !c.done() {
        return Err(err("Unexpected extraneous bytes after map value"));
    }
    Ok(out)
}

/// Fields of a tuple or UDT value (a UDT value may have fewer fields than its type).
pub fn deserialize_tuple(v: &[u8]) -> Result<Vec<Option<Bytes>>, TypeError> {
    let mut c = Cur { b: v, p: 0 };
    let mut out = Vec::new();
    while !c.done() {
        out.push(c.value()?);
    }
    Ok(out)
}

/// Cassandra's unsigned vint: the number of leading 1 bits in the first byte
/// is the number of extra bytes.
pub fn write_unsigned_vint(out: &mut Vec<u8>, v: u64) {
    let size = unsigned_vint_size(v);
    if size == 1 {
        out.push(v as u8);
        return;
    }
    let extra = size - 1;
    let mut buf = [0u8; 9];
    let bytes = v.to_be_bytes();
    // value occupies the last `size` bytes (first byte partly)
    for i in 0..size {
        buf[i] = if 8 + i >= size {
            bytes[8 + i - size]
        } else {
            0
        };
    }
    if size == 9 {
        buf[0] = 0xff;
        buf[1..9].copy_from_slice(&bytes);
    } else {
        buf[0] |= !(0xffu8 >> extra);
    }
    out.extend_from_slice(&buf[..size]);
}

fn unsigned_vint_size(v: u64) -> usize {
    let magnitude = 64 - (v | 1).leading_zeros() as usize;
    ((magnitude - 1) / 7 + 1).min(9)
}

pub fn write_signed_vint(out: &mut Vec<u8>, v: i64) {
    write_unsigned_vint(out, ((v << 1) ^ (v >> 63)) as u64);
}

/// Reads an unsigned vint, returning it and the bytes used.
pub fn read_unsigned_vint(b: &[u8]) -> Result<(u64, usize), TypeError> {
    let first = *b
        .first()
        .ok_or_else(|| err("Not enough bytes to read a vint"))?;
    let extra = first.leading_ones() as usize;
    if b.len() < 1 + extra {
        return Err(err("Not enough bytes to read a vint"));
    }
    let mut v: u64 = if extra >= 8 {
        0
    } else {
        (first & (0xff >> extra)) as u64
    };
    for i in 0..extra {
        v = (v << 8) | b[1 + i] as u64;
    }
    Ok((v, 1 + extra))
}

pub fn read_signed_vint(b: &[u8]) -> Result<(i64, usize), TypeError> {
    let (u, n) = read_unsigned_vint(b)?;
    Ok((((u >> 1) as i64) ^ -((u & 1) as i64), n))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vints_round_trip() {
        for v in [
            0i64,
            1,
            -1,
            63,
            -64,
            64,
            1000,
            -1000,
            i32::MAX as i64,
            i64::MAX,
            i64::MIN,
        ] {
            let mut out = Vec::new();
            write_signed_vint(&mut out, v);
            assert_eq!(read_signed_vint(&out).expect("read"), (v, out.len()), "{v}");
        }
        let mut out = Vec::new();
        write_unsigned_vint(&mut out, 127);
        assert_eq!(out, vec![127]);
        out.clear();
        write_unsigned_vint(&mut out, 128);
        assert_eq!(out, vec![0x80, 0x80]);
    }

    #[test]
    fn collections_round_trip_and_truncation_is_an_error() {
        let l = serialize_collection(&[Bytes::from_static(b"a"), Bytes::from_static(b"bc")]);
        assert_eq!(deserialize_collection(&l).expect("ok").len(), 2);
        assert!(deserialize_collection(&l[..l.len() - 1]).is_err());
        let m = serialize_map(&[(Bytes::from_static(b"k"), Bytes::from_static(b"v"))]);
        assert_eq!(
            deserialize_map(&m).expect("ok")[0].1,
            Bytes::from_static(b"v")
        );
        let t = serialize_tuple(&[Some(Bytes::from_static(b"x")), None]);
        assert_eq!(
            deserialize_tuple(&t).expect("ok"),
            vec![Some(Bytes::from_static(b"x")), None]
        );
    }
}
