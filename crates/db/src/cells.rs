//! Between CQL values and stored cells: writing a column value (simple or a
//! non-frozen collection) into a row, and reading it back as a CQL value.

use crate::{Cell, ColumnData, ColumnName, DeletionTime, Row};
use bytes::Bytes;
use sibyl_types::{value, CqlType};
use std::collections::BTreeMap;

/// How a cell is written: timestamp, TTL and the current time.
#[derive(Debug, Clone, Copy)]
pub struct WriteParams {
    pub timestamp: i64,
    pub ttl: i32,
    pub now: i32,
}

impl WriteParams {
    pub fn cell(&self, v: Bytes) -> Cell {
        if self.ttl > 0 {
            Cell::expiring(self.timestamp, self.ttl, self.now, v)
        } else {
            Cell::live(self.timestamp, v)
        }
    }

    pub fn tombstone(&self) -> Cell {
        Cell::tombstone(self.timestamp, self.now)
    }
}

/// A fresh, strictly increasing timeuuid used as a list element's cell path.
pub fn list_path() -> Bytes {
    Bytes::copy_from_slice(sibyl_types::timeuuid::now_timeuuid().as_bytes())
}

/// Elements of a collection value as cells keyed by path.
pub fn collection_cells(
    typ: &CqlType,
    v: &[u8],
    wp: &WriteParams,
) -> Result<BTreeMap<Bytes, Cell>, String> {
    let mut cells = BTreeMap::new();
    match typ {
        CqlType::List(_) => {
            for e in value::deserialize_collection(v).map_err(|e| e.to_string())? {
                cells.insert(list_path(), wp.cell(e));
            }
        }
        CqlType::Set(_) => {
            for e in value::deserialize_collection(v).map_err(|e| e.to_string())? {
                cells.insert(e, wp.cell(Bytes::new()));
            }
        }
        CqlType::Map(_, _) => {
            for (k, val) in value::deserialize_map(v).map_err(|e| e.to_string())? {
                cells.insert(k, wp.cell(val));
            }
        }
        CqlType::Udt(_) => {
            for (i, f) in value::deserialize_tuple(v)
                .map_err(|e| e.to_string())?
                .into_iter()
                .enumerate()
            {
                // a null field writes nothing (Cassandra's UserTypes.Setter):
                // the column's deletion just before the write removes the
                // old one, and a tombstone at the write's own timestamp
                // would shadow another write of that field at the same time
                if let Some(f) = f {
                    let path = Bytes::copy_from_slice(&(i as u16).to_be_bytes());
                    cells.insert(path, wp.cell(f));
                }
            }
        }
        _ => return Err(format!("{typ} is not a multi-cell type")),
    }
    Ok(cells)
}

/// Writes a whole column value (or null) into `row`: a simple cell, or for a
/// non-frozen collection a deletion of the old value plus one cell per element.
pub fn set_column(
    row: &mut Row,
    name: &str,
    typ: &CqlType,
    v: Option<&Bytes>,
    wp: &WriteParams,
) -> Result<(), String> {
    set_named_column(row, ColumnName::new(name), typ, v, wp)
}

/// [`set_column`] with the name already made (a statement's plan keeps it).
pub fn set_named_column(
    row: &mut Row,
    name: ColumnName,
    typ: &CqlType,
    v: Option<&Bytes>,
    wp: &WriteParams,
) -> Result<(), String> {
    if typ.is_multi_cell() {
        let deletion = DeletionTime {
            marked_for_delete_at: wp.timestamp - 1,
            local_deletion_time: wp.now,
        };
        let cells = match v {
            Some(v) => collection_cells(typ, v, wp)?,
            None => BTreeMap::new(),
        };
        row.cells
            .insert(name, ColumnData::Complex { deletion, cells });
    } else {
        let cell = match v {
            Some(v) => wp.cell(v.clone()),
            None => wp.tombstone(),
        };
        row.cells.insert(name, ColumnData::Simple(cell));
    }
    Ok(())
}

/// Adds element cells to a non-frozen collection column without deleting it.
pub fn add_cells(row: &mut Row, name: &str, cells: BTreeMap<Bytes, Cell>) {
    let name = ColumnName::new(name);
    match row.cells.get_mut(&name) {
        Some(ColumnData::Complex {
            cells: existing, ..
        }) => existing.extend(cells),
        _ => {
            row.cells.insert(
                name,
                ColumnData::Complex {
                    deletion: DeletionTime::LIVE,
                    cells,
                },
            );
        }
    }
}

/// The CQL value of a column from a resolved row (None: null).
pub fn column_value(row: &Row, name: &str, typ: &CqlType, now: i32) -> Option<Bytes> {
    match row.cells.get(name)? {
        ColumnData::Simple(c) => {
            if c.is_live(now) {
                c.value.clone()
            } else {
                None
            }
        }
        ColumnData::Counter(c) => c
            .value
            .as_ref()
            .filter(|_| c.is_live(now))
            .map(|ctx| Bytes::copy_from_slice(&crate::counter::total(ctx).to_be_bytes())),
        ColumnData::Complex { cells, .. } => {
            let mut live: Vec<(&Bytes, &Cell)> =
                cells.iter().filter(|(_, c)| c.is_live(now)).collect();
            if live.is_empty() {
                return None;
            }
            match typ.unfrozen() {
                CqlType::List(_) => {
                    // paths are timeuuids: order by their time, then bytes
                    live.sort_by(|a, b| CqlType::Timeuuid.compare(a.0, b.0));
                    let elems: Vec<Bytes> =
                        live.iter().filter_map(|(_, c)| c.value.clone()).collect();
                    Some(value::serialize_collection(&elems))
                }
                CqlType::Set(et) => {
                    live.sort_by(|a, b| et.compare(a.0, b.0));
                    let elems: Vec<Bytes> = live.iter().map(|(p, _)| (*p).clone()).collect();
                    Some(value::serialize_collection(&elems))
                }
                CqlType::Map(kt, _) => {
                    live.sort_by(|a, b| kt.compare(a.0, b.0));
                    let pairs: Vec<(Bytes, Bytes)> = live
                        .iter()
                        .map(|(p, c)| ((*p).clone(), c.value.clone().unwrap_or_default()))
                        .collect();
                    Some(value::serialize_map(&pairs))
                }
                CqlType::Udt(u) => {
                    let mut fields: Vec<Option<Bytes>> = vec![None; u.fields.len()];
                    for (p, c) in live {
                        if p.len() == 2 {
                            let i = u16::from_be_bytes([p[0], p[1]]) as usize;
                            if i < fields.len() {
                                fields[i] = c.value.clone();
                            }
                        }
                    }
                    Some(value::serialize_tuple(&fields))
                }
                _ => None,
            }
        }
    }
}

/// The cell of a simple column, for writetime()/ttl().
pub fn simple_cell<'a>(row: &'a Row, name: &str) -> Option<&'a Cell> {
    row.cells.get(name)?.single()
}

/// The components of a partition key, inline for up to two.
pub type PartitionKeyValues = smallvec::SmallVec<[Bytes; 2]>;

/// Splits a serialized partition key into its components.
pub fn split_partition_key(key: &Bytes, components: usize) -> PartitionKeyValues {
    if components <= 1 {
        return smallvec::smallvec![key.clone()];
    }
    let mut out = PartitionKeyValues::with_capacity(components);
    let mut pos = 0;
    while pos + 2 <= key.len() && out.len() < components {
        let len = u16::from_be_bytes([key[pos], key[pos + 1]]) as usize;
        pos += 2;
        let end = (pos + len).min(key.len());
        // slices of the key: a read splits the key of every partition it returns
        out.push(key.slice(pos..end));
        pos = end + 1; // skip end-of-component byte
    }
    while out.len() < components {
        out.push(Bytes::new());
    }
    out
}

/// Serializes partition key components (composite when more than one).
pub fn make_partition_key(components: &[Bytes]) -> Bytes {
    if components.len() == 1 {
        return components[0].clone();
    }
    let refs: Vec<&[u8]> = components.iter().map(|c| c.as_ref()).collect();
    Bytes::from(sibyl_types::murmur3::composite_key(&refs))
}
