//! Binary encoding of mutations (commit log entries, and later internode
//! messages and hints). Version 1; the version is carried by the container
//! (commit log segment header, message header).

use crate::clustering::{BoundKind, ClusteringComparator, ClusteringKey};
use crate::data::*;
use crate::DecodeError;
use bytes::Bytes;
use std::collections::BTreeMap;
use std::sync::Arc;

/// Current mutation encoding version.
pub const MUTATION_FORMAT_VERSION: u32 = 1;

fn put_bytes(out: &mut Vec<u8>, b: &[u8]) {
    out.extend_from_slice(&(b.len() as u32).to_be_bytes());
    out.extend_from_slice(b);
}

fn put_deletion(out: &mut Vec<u8>, d: &DeletionTime) {
    out.extend_from_slice(&d.marked_for_delete_at.to_be_bytes());
    out.extend_from_slice(&d.local_deletion_time.to_be_bytes());
}

fn put_cell(out: &mut Vec<u8>, c: &Cell) {
    out.extend_from_slice(&c.timestamp.to_be_bytes());
    out.extend_from_slice(&c.ttl.to_be_bytes());
    out.extend_from_slice(&c.local_deletion_time.to_be_bytes());
    match &c.value {
        Some(v) => {
            out.push(1);
            put_bytes(out, v);
        }
        None => out.push(0),
    }
}

fn put_row(out: &mut Vec<u8>, r: &Row) {
    let flags = (r.liveness.is_some() as u8) | ((r.deletion.is_some() as u8) << 1);
    out.push(flags);
    if let Some(l) = &r.liveness {
        out.extend_from_slice(&l.timestamp.to_be_bytes());
        out.extend_from_slice(&l.ttl.to_be_bytes());
        out.extend_from_slice(&l.local_expiration_time.to_be_bytes());
    }
    if let Some(d) = &r.deletion {
        put_deletion(out, d);
    }
    out.extend_from_slice(&(r.cells.len() as u32).to_be_bytes());
    for (name, data) in r.cells.iter() {
        put_bytes(out, name.as_bytes());
        match data {
            ColumnData::Simple(c) => {
                out.push(0);
                put_cell(out, c);
            }
            ColumnData::Counter(c) => {
                out.push(2);
                put_cell(out, c);
            }
            ColumnData::Complex { deletion, cells } => {
                out.push(1);
                put_deletion(out, deletion);
                out.extend_from_slice(&(cells.len() as u32).to_be_bytes());
                for (p, c) in cells {
                    put_bytes(out, p);
                    put_cell(out, c);
                }
            }
        }
    }
}

fn kind_byte(k: BoundKind) -> u8 {
    match k {
        BoundKind::Row => 0,
        BoundKind::StartInclusive => 1,
        BoundKind::StartExclusive => 2,
        BoundKind::EndInclusive => 3,
        BoundKind::EndExclusive => 4,
    }
}

fn put_clustering(out: &mut Vec<u8>, ck: &ClusteringKey) {
    out.push(kind_byte(ck.kind));
    out.extend_from_slice(&(ck.values.len() as u32).to_be_bytes());
    for v in &ck.values {
        put_bytes(out, v);
    }
}

/// Appends the encoding of a clustering prefix (SSTable row indexes).
pub fn encode_clustering(ck: &ClusteringKey, out: &mut Vec<u8>) {
    put_clustering(out, ck);
}

/// Decodes a clustering prefix written by [`encode_clustering`]; returns it
/// with the bytes it took.
pub fn decode_clustering(
    buf: &[u8],
    cmp: &Arc<ClusteringComparator>,
) -> Result<(ClusteringKey, usize), DecodeError> {
    let mut r = Reader::new(buf);
    let ck = get_clustering(&mut r, cmp)?;
    Ok((ck, r.pos))
}

/// Appends a partition fragment of rows only (no deletion, static row or
/// range tombstones), in the encoding of [`encode_partition`].
pub fn encode_rows<'a>(rows: &[(&'a ClusteringKey, &'a Row)], out: &mut Vec<u8>) {
    put_deletion(out, &DeletionTime::LIVE);
    out.push(0);
    out.extend_from_slice(&(rows.len() as u32).to_be_bytes());
    for (ck, r) in rows {
        put_clustering(out, ck);
        put_row(out, r);
    }
    out.extend_from_slice(&0u32.to_be_bytes());
}

/// Appends one row's clustering and content (to size row index blocks).
pub fn encoded_row_len(ck: &ClusteringKey, r: &Row, scratch: &mut Vec<u8>) -> usize {
    scratch.clear();
    put_clustering(scratch, ck);
    put_row(scratch, r);
    scratch.len()
}

/// Appends the encoding of a mutation to `out`.
pub fn encode_mutation(m: &Mutation, out: &mut Vec<u8>) {
    out.extend_from_slice(m.table_id.as_bytes());
    put_bytes(out, &m.key.key);
    encode_partition(&m.update, out);
}

/// Appends the encoding of a partition (or fragment) to `out`.
pub fn encode_partition(p: &Partition, out: &mut Vec<u8>) {
    put_deletion(out, &p.deletion);
    match &p.static_row {
        Some(r) => {
            out.push(1);
            put_row(out, r);
        }
        None => out.push(0),
    }
    out.extend_from_slice(&(p.rows.len() as u32).to_be_bytes());
    for (ck, r) in &p.rows {
        put_clustering(out, ck);
        put_row(out, r);
    }
    out.extend_from_slice(&(p.range_tombstones.len() as u32).to_be_bytes());
    for rt in &p.range_tombstones {
        put_clustering(out, &rt.start);
        put_clustering(out, &rt.end);
        put_deletion(out, &rt.deletion);
    }
}

/// A cursor over bytes that never panics.
pub struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    pub fn new(buf: &'a [u8]) -> Self {
        Reader { buf, pos: 0 }
    }

    pub fn take(&mut self, n: usize) -> Result<&'a [u8], DecodeError> {
        let end = self
            .pos
            .checked_add(n)
            .filter(|e| *e <= self.buf.len())
            .ok_or_else(|| {
                DecodeError(format!(
                    "truncated: need {n} bytes at {}, have {}",
                    self.pos,
                    self.buf.len() - self.pos
                ))
            })?;
        let s = &self.buf[self.pos..end];
        self.pos = end;
        Ok(s)
    }

    pub fn u8(&mut self) -> Result<u8, DecodeError> {
        Ok(self.take(1)?[0])
    }

    pub fn u32(&mut self) -> Result<u32, DecodeError> {
        let b = self.take(4)?;
        Ok(u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }

    pub fn i32(&mut self) -> Result<i32, DecodeError> {
        Ok(self.u32()? as i32)
    }

    pub fn i64(&mut self) -> Result<i64, DecodeError> {
        let b = self.take(8)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(b);
        Ok(i64::from_be_bytes(a))
    }

    pub fn bytes(&mut self) -> Result<Bytes, DecodeError> {
        let n = self.u32()? as usize;
        Ok(Bytes::copy_from_slice(self.take(n)?))
    }

    /// A count that cannot exceed the bytes left (each item takes >= 1 byte).
    pub fn count(&mut self) -> Result<usize, DecodeError> {
        let n = self.u32()? as usize;
        if n > self.buf.len() - self.pos {
            return Err(DecodeError(format!("count {n} exceeds remaining bytes")));
        }
        Ok(n)
    }

    pub fn is_empty(&self) -> bool {
        self.pos >= self.buf.len()
    }
}

fn get_deletion(r: &mut Reader) -> Result<DeletionTime, DecodeError> {
    Ok(DeletionTime {
        marked_for_delete_at: r.i64()?,
        local_deletion_time: r.i32()?,
    })
}

fn get_cell(r: &mut Reader) -> Result<Cell, DecodeError> {
    let timestamp = r.i64()?;
    let ttl = r.i32()?;
    let local_deletion_time = r.i32()?;
    let value = if r.u8()? == 1 { Some(r.bytes()?) } else { None };
    Ok(Cell {
        timestamp,
        ttl,
        local_deletion_time,
        value,
    })
}

fn get_row(r: &mut Reader) -> Result<Row, DecodeError> {
    let flags = r.u8()?;
    let liveness = if flags & 1 != 0 {
        Some(LivenessInfo {
            timestamp: r.i64()?,
            ttl: r.i32()?,
            local_expiration_time: r.i32()?,
        })
    } else {
        None
    };
    let deletion = if flags & 2 != 0 {
        Some(get_deletion(r)?)
    } else {
        None
    };
    let n = r.count()?;
    let mut cells = RowCells::new();
    for _ in 0..n {
        let name = r.bytes()?;
        let name =
            ColumnName::new(std::str::from_utf8(&name).map_err(|e| DecodeError(e.to_string()))?);
        let data = match r.u8()? {
            0 => ColumnData::Simple(get_cell(r)?),
            2 => ColumnData::Counter(get_cell(r)?),
            1 => {
                let deletion = get_deletion(r)?;
                let k = r.count()?;
                let mut cs = BTreeMap::new();
                for _ in 0..k {
                    let p = r.bytes()?;
                    cs.insert(p, get_cell(r)?);
                }
                ColumnData::Complex {
                    deletion,
                    cells: cs,
                }
            }
            t => return Err(DecodeError(format!("unknown column data tag {t}"))),
        };
        cells.insert(name, data);
    }
    Ok(Row {
        liveness,
        deletion,
        cells,
    })
}

fn get_clustering(
    r: &mut Reader,
    cmp: &Arc<ClusteringComparator>,
) -> Result<ClusteringKey, DecodeError> {
    let kind = match r.u8()? {
        0 => BoundKind::Row,
        1 => BoundKind::StartInclusive,
        2 => BoundKind::StartExclusive,
        3 => BoundKind::EndInclusive,
        4 => BoundKind::EndExclusive,
        k => return Err(DecodeError(format!("unknown bound kind {k}"))),
    };
    let n = r.count()?;
    let mut values = Vec::with_capacity(n);
    for _ in 0..n {
        values.push(r.bytes()?);
    }
    Ok(ClusteringKey {
        values,
        kind,
        comparator: cmp.clone(),
    })
}

/// Decodes a mutation; `comparator_of` gives the clustering comparator of a
/// table id, or `None` if the table no longer exists (the mutation is then
/// returned as `Ok(None)`).
pub fn decode_mutation(
    buf: &[u8],
    comparator_of: &dyn Fn(uuid::Uuid) -> Option<Arc<ClusteringComparator>>,
) -> Result<Option<Mutation>, DecodeError> {
    let mut r = Reader::new(buf);
    let id = r.take(16)?;
    let mut idb = [0u8; 16];
    idb.copy_from_slice(id);
    // a table named by an id an earlier build gave it
    let table_id = crate::table_ids::canonical(uuid::Uuid::from_bytes(idb));
    let Some(cmp) = comparator_of(table_id) else {
        return Ok(None);
    };
    let key = r.bytes()?;
    let update = decode_partition_from(&mut r, &cmp)?;
    Ok(Some(Mutation {
        table_id,
        key: DecoratedKey::new(key),
        update,
    }))
}

/// Reads a clustering prefix written by [`encode_clustering`].
pub fn read_clustering(
    r: &mut Reader,
    cmp: &Arc<ClusteringComparator>,
) -> Result<ClusteringKey, DecodeError> {
    get_clustering(r, cmp)
}

/// Reads a partition written by [`encode_partition`].
pub fn read_partition(
    r: &mut Reader,
    cmp: &Arc<ClusteringComparator>,
) -> Result<Partition, DecodeError> {
    decode_partition_from(r, cmp)
}

/// Decodes a partition encoded by [`encode_partition`].
pub fn decode_partition(
    buf: &[u8],
    cmp: &Arc<ClusteringComparator>,
) -> Result<Partition, DecodeError> {
    decode_partition_from(&mut Reader::new(buf), cmp)
}

fn decode_partition_from(
    r: &mut Reader,
    cmp: &Arc<ClusteringComparator>,
) -> Result<Partition, DecodeError> {
    let r = &mut *r;
    let deletion = get_deletion(r)?;
    let static_row = if r.u8()? == 1 {
        Some(Box::new(get_row(r)?))
    } else {
        None
    };
    let n = r.count()?;
    let mut rows = crate::rows::Rows::new();
    for _ in 0..n {
        let ck = get_clustering(r, cmp)?;
        let row = get_row(r)?;
        rows.insert(ck, row);
    }
    let n = r.count()?;
    let mut range_tombstones = Vec::with_capacity(n);
    for _ in 0..n {
        let start = get_clustering(r, cmp)?;
        let end = get_clustering(r, cmp)?;
        let deletion = get_deletion(r)?;
        range_tombstones.push(RangeTombstone {
            start,
            end,
            deletion,
        });
    }
    Ok(Partition {
        deletion,
        static_row,
        rows,
        range_tombstones,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use sibyl_types::CqlType;

    /// A mutation an earlier build logged under a system table's old id is
    /// decoded under its current one (commit log, hints, batches, peers).
    #[test]
    fn a_mutation_under_an_old_table_id_decodes_under_the_current_one() {
        let (old, new) = (uuid::Uuid::from_u128(0x01d), uuid::Uuid::from_u128(0x0e3));
        crate::table_ids::set_aliases([(old, new)].into_iter().collect());
        let m = Mutation {
            table_id: old,
            key: DecoratedKey::new(Bytes::from_static(b"pk")),
            update: Partition::new(),
        };
        let mut buf = Vec::new();
        encode_mutation(&m, &mut buf);
        let cmp = ClusteringComparator::new(vec![]);
        let asked = std::sync::Mutex::new(Vec::new());
        let got = decode_mutation(&buf, &|id| {
            asked.lock().unwrap().push(id);
            Some(cmp.clone())
        })
        .unwrap()
        .unwrap();
        assert_eq!(got.table_id, new);
        assert_eq!(*asked.lock().unwrap(), vec![new]);
        // an id with no alias is itself
        assert_eq!(crate::table_ids::canonical(new), new);
    }

    #[test]
    fn mutation_round_trips_and_truncation_is_an_error() {
        let cmp = ClusteringComparator::new(vec![(CqlType::Int, false)]);
        let mut p = Partition::new();
        let mut row = Row {
            liveness: Some(LivenessInfo {
                timestamp: 5,
                ttl: 0,
                local_expiration_time: NO_DELETION_TIME,
            }),
            ..Row::default()
        };
        row.cells.insert(
            "v",
            ColumnData::Simple(Cell::live(5, Bytes::from_static(b"hello"))),
        );
        let mut cs = BTreeMap::new();
        cs.insert(Bytes::from_static(b"k"), Cell::tombstone(3, 100));
        row.cells.insert(
            "m",
            ColumnData::Complex {
                deletion: DeletionTime::LIVE,
                cells: cs,
            },
        );
        p.rows.insert(
            ClusteringKey::row(vec![Bytes::from_static(&[0, 0, 0, 1])], cmp.clone()),
            row,
        );
        p.range_tombstones.push(RangeTombstone {
            start: ClusteringKey::bound(
                vec![Bytes::from_static(&[0, 0, 0, 2])],
                BoundKind::StartInclusive,
                cmp.clone(),
            ),
            end: ClusteringKey::bound(vec![], BoundKind::EndInclusive, cmp.clone()),
            deletion: DeletionTime {
                marked_for_delete_at: 9,
                local_deletion_time: 100,
            },
        });
        let m = Mutation {
            table_id: uuid::Uuid::from_u128(7),
            key: DecoratedKey::new(Bytes::from_static(b"pk")),
            update: p,
        };
        let mut buf = Vec::new();
        encode_mutation(&m, &mut buf);
        let c2 = cmp.clone();
        let back = decode_mutation(&buf, &move |_| Some(c2.clone()))
            .expect("decode")
            .expect("table");
        assert_eq!(back.key, m.key);
        assert_eq!(back.update.rows.len(), 1);
        assert_eq!(back.update.range_tombstones, m.update.range_tombstones);
        assert_eq!(
            back.update.rows.values().next(),
            m.update.rows.values().next()
        );
        for cut in 0..buf.len() {
            let c3 = cmp.clone();
            assert!(
                decode_mutation(&buf[..cut], &move |_| Some(c3.clone())).is_err(),
                "cut at {cut}"
            );
        }
    }
}
