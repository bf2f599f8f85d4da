//! Secondary index maintenance on a replica (Cassandra's
//! `CassandraIndex`/`CassandraIndexSearcher`): index entries written in the
//! same commit-log batch as the base write, index searches with stale entries
//! removed when found, and index builds. What an index is lives in
//! `sibyl_schema::index`.

use bytes::Bytes;
use sibyl_db::cells::{make_partition_key, split_partition_key};
use sibyl_schema::index::{IndexMetadata, TargetKind};
use sibyl_schema::schema::{ColumnKind, TableMetadata};
use sibyl_storage::{
    BoundKind, ClusteringComparator, ClusteringKey, ColumnData, ColumnFamilyStore, DecoratedKey,
    DeletionTime, LivenessInfo, Mutation, Partition, Row, StorageError, NO_DELETION_TIME,
};
use sibyl_types::CqlType;
use std::collections::BTreeMap;
use std::sync::Arc;

fn liveness_of_cell(c: &sibyl_storage::Cell) -> LivenessInfo {
    LivenessInfo {
        timestamp: c.timestamp,
        ttl: c.ttl,
        local_expiration_time: if c.ttl > 0 {
            c.local_deletion_time
        } else {
            NO_DELETION_TIME
        },
    }
}

/// The values one row (or static row) gives an index, each with the
/// liveness of the cell it comes from.
fn values_of(
    ix: &IndexMetadata,
    table: &TableMetadata,
    pk: &[Bytes],
    ck: Option<&ClusteringKey>,
    row: &Row,
    now: i32,
) -> Vec<(Bytes, LivenessInfo)> {
    let Some(col) = table.column(&ix.column) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    match col.kind {
        ColumnKind::PartitionKey | ColumnKind::Clustering => {
            let value = if col.kind == ColumnKind::PartitionKey {
                pk.get(col.position.max(0) as usize).cloned()
            } else {
                ck.and_then(|ck| ck.values.get(col.position.max(0) as usize).cloned())
            };
            let Some(value) = value else { return out };
            // the row's own liveness, else its newest live cell
            let live = row.liveness.filter(|l| l.is_live(now)).or_else(|| {
                let mut best: Option<LivenessInfo> = None;
                for d in row.cells.values() {
                    let cells: Vec<&sibyl_storage::Cell> = match d {
                        ColumnData::Simple(c) | ColumnData::Counter(c) => vec![c],
                        ColumnData::Complex { cells, .. } => cells.values().collect(),
                    };
                    for c in cells.into_iter().filter(|c| c.is_live(now)) {
                        if best.map(|b| c.timestamp > b.timestamp).unwrap_or(true) {
                            best = Some(LivenessInfo {
                                timestamp: c.timestamp,
                                ttl: 0,
                                local_expiration_time: NO_DELETION_TIME,
                            });
                        }
                    }
                }
                best
            });
            if let Some(l) = live {
                out.push((value, l));
            }
        }
        ColumnKind::Regular | ColumnKind::Static => match row.cells.get(&ix.column) {
            Some(ColumnData::Simple(c)) if c.is_live(now) => {
                if let Some(v) = &c.value {
                    out.push((v.clone(), liveness_of_cell(c)));
                }
            }
            Some(ColumnData::Complex { cells, .. }) => {
                let is_list = matches!(col.typ.unfrozen(), CqlType::List(_));
                let is_set = matches!(col.typ.unfrozen(), CqlType::Set(_));
                for (path, c) in cells {
                    let (Some(v), true) = (&c.value, c.is_live(now)) else {
                        continue;
                    };
                    let value = match ix.target {
                        TargetKind::Values if is_set => path.clone(),
                        TargetKind::Values if is_list => v.clone(),
                        TargetKind::Values => v.clone(),
                        TargetKind::Keys => path.clone(),
                        TargetKind::Entries => make_partition_key(&[path.clone(), v.clone()]),
                        _ => continue,
                    };
                    out.push((value, liveness_of_cell(c)));
                }
            }
            _ => {}
        },
    }
    out
}

fn entry_clustering(
    ix_cmp: &Arc<ClusteringComparator>,
    key: &DecoratedKey,
    ck: Option<&ClusteringKey>,
) -> ClusteringKey {
    let mut values = vec![
        Bytes::copy_from_slice(&key.token.to_be_bytes()),
        key.key.clone(),
    ];
    if let Some(ck) = ck {
        values.extend(ck.values.iter().cloned());
    }
    ClusteringKey::row(values, ix_cmp.clone())
}

/// Index entries for one base update (or, when building, one base partition).
pub fn entries_for(
    table: &TableMetadata,
    key: &DecoratedKey,
    update: &Partition,
    now: i32,
) -> Vec<Mutation> {
    let mut by_index: Vec<Mutation> = Vec::new();
    if table.indexes.is_empty() {
        return by_index;
    }
    let pk = split_partition_key(&key.key, table.partition_key_count);
    for ix in &table.indexes {
        let Some(col) = table.column(&ix.column) else {
            continue;
        };
        let cmp = ix.comparator(table);
        let row_level = ix.row_level(table);
        let mut parts: BTreeMap<Bytes, Partition> = BTreeMap::new();
        let mut add = |value: Bytes, l: LivenessInfo, ck: Option<&ClusteringKey>| {
            let ick = entry_clustering(&cmp, key, if row_level { ck } else { None });
            let p = parts.entry(value).or_default();
            let row = Row {
                liveness: Some(l),
                deletion: None,
                cells: Default::default(),
            };
            match p.rows.get_mut(&ick) {
                Some(existing) => existing.merge(row, now),
                None => {
                    p.rows.insert(ick, row);
                }
            }
        };
        match col.kind {
            ColumnKind::Static => {
                if let Some(sr) = &update.static_row {
                    for (v, l) in values_of(ix, table, &pk, None, sr, now) {
                        add(v, l, None);
                    }
                }
            }
            _ => {
                for (ck, row) in update.rows.iter() {
                    for (v, l) in values_of(ix, table, &pk, Some(ck), row, now) {
                        add(v, l, Some(ck));
                    }
                }
                if col.kind == ColumnKind::PartitionKey {
                    if let Some(sr) = &update.static_row {
                        for (v, l) in values_of(ix, table, &pk, None, sr, now) {
                            add(v, l, None);
                        }
                    }
                }
            }
        }
        let id = ix.store_id(table);
        for (value, update) in parts {
            by_index.push(Mutation {
                table_id: id,
                key: DecoratedKey::new(value),
                update,
            });
        }
    }
    by_index
}

/// The index mutations that go with a set of base mutations.
pub fn index_mutations(
    schema: &sibyl_schema::schema::Schema,
    mutations: &[Mutation],
    now: impl Fn() -> i32,
) -> Vec<Mutation> {
    let mut out = Vec::new();
    // the clock is read only for a table with indexes
    for m in mutations {
        let Some(t) = schema.table_by_id(m.table_id) else {
            continue;
        };
        if t.indexes.is_empty() {
            continue;
        }
        out.extend(entries_for(t, &m.key, &m.update, now()));
    }
    out
}

/// A deletion of one stale entry, at the entry's own timestamp (a newer
/// write of the same entry survives it).
pub fn stale_entry_deletion(
    table: &TableMetadata,
    ix: &IndexMetadata,
    value: &Bytes,
    key: &DecoratedKey,
    ck: Option<&ClusteringKey>,
    timestamp: i64,
    now: i32,
) -> Mutation {
    let cmp = ix.comparator(table);
    let mut p = Partition::new();
    let row = Row {
        liveness: None,
        deletion: Some(DeletionTime {
            marked_for_delete_at: timestamp,
            local_deletion_time: now,
        }),
        cells: Default::default(),
    };
    p.rows.insert(
        entry_clustering(&cmp, key, if ix.row_level(table) { ck } else { None }),
        row,
    );
    Mutation {
        table_id: ix.store_id(table),
        key: DecoratedKey::new(value.clone()),
        update: p,
    }
}

/// Whether the resolved base row (or static row) still gives `value` to the index.
pub fn row_has_value(
    ix: &IndexMetadata,
    table: &TableMetadata,
    key: &DecoratedKey,
    ck: Option<&ClusteringKey>,
    row: &Row,
    value: &Bytes,
    now: i32,
) -> bool {
    let pk = split_partition_key(&key.key, table.partition_key_count);
    values_of(ix, table, &pk, ck, row, now)
        .iter()
        .any(|(v, _)| v == value)
}

/// One base partition named by index entries: its key, the rows the entries
/// name (None: the whole partition), and each entry's timestamp.
pub struct Hit {
    pub key: DecoratedKey,
    pub rows: Option<Vec<(ClusteringKey, i64)>>,
    pub timestamp: i64,
}

/// Reads the entries of `value` from `from` (a base token and key, inclusive)
/// on, grouped by base partition in token order.
pub fn lookup(
    table: &TableMetadata,
    ix: &IndexMetadata,
    store: &ColumnFamilyStore,
    value: &Bytes,
    from: Option<&DecoratedKey>,
    now: i32,
) -> Result<std::collections::VecDeque<Hit>, StorageError> {
    let cmp = ix.comparator(table);
    let start = match from {
        Some(k) => ClusteringKey::bound(
            vec![
                Bytes::copy_from_slice(&k.token.to_be_bytes()),
                k.key.clone(),
            ],
            BoundKind::StartInclusive,
            cmp.clone(),
        ),
        None => ClusteringKey::bottom(cmp.clone()),
    };
    let slices = [(start, ClusteringKey::top(cmp.clone()))];
    let mut out: std::collections::VecDeque<Hit> = std::collections::VecDeque::new();
    let Some(mut part) = store.read(&DecoratedKey::new(value.clone()), Some(&slices))? else {
        return Ok(out);
    };
    part.resolve(now);
    let row_level = ix.row_level(table);
    for (ick, row) in part.rows.iter() {
        let (Some(tok), Some(pk)) = (ick.values.first(), ick.values.get(1)) else {
            continue;
        };
        let Ok(tok) = <[u8; 8]>::try_from(tok.as_ref()) else {
            continue;
        };
        let key = DecoratedKey {
            token: i64::from_be_bytes(tok),
            key: pk.clone(),
        };
        let ts = row.liveness.map(|l| l.timestamp).unwrap_or(i64::MIN);
        let base_ck = row_level
            .then(|| ClusteringKey::row(ick.values[2..].to_vec(), table.comparator.clone()));
        match out.back_mut() {
            Some(h) if h.key == key => {
                if let (Some(rows), Some(ck)) = (&mut h.rows, base_ck) {
                    rows.push((ck, ts));
                }
            }
            _ => out.push_back(Hit {
                key,
                rows: base_ck.map(|ck| vec![(ck, ts)]),
                timestamp: ts,
            }),
        }
    }
    Ok(out)
}

/// Builds an index over the data already in its base table; returns the
/// number of entries written.
pub async fn build(
    storage: &Arc<sibyl_storage::StorageEngine>,
    table: &TableMetadata,
    ix: &IndexMetadata,
) -> Result<usize, StorageError> {
    let (Some(base), Some(store)) = (storage.table(table.id), storage.table(ix.store_id(table)))
    else {
        return Ok(0);
    };
    store
        .building
        .store(true, std::sync::atomic::Ordering::SeqCst);
    let now = sibyl_db::now_in_seconds();
    let only = TableMetadata {
        indexes: vec![ix.clone()],
        ..table.clone()
    };
    let mut after: Option<DecoratedKey> = None;
    let mut written = 0;
    loop {
        let keys = base.keys(after.as_ref(), i64::MIN, i64::MAX, 256)?;
        let Some(last) = keys.last().cloned() else {
            break;
        };
        let mut batch = Vec::new();
        for k in &keys {
            let Some(mut p) = base.read(k, None)? else {
                continue;
            };
            p.resolve(now);
            batch.extend(entries_for(&only, k, &p, now));
        }
        written += batch.iter().map(|m| m.update.rows.len()).sum::<usize>();
        storage.apply_unlogged(batch);
        after = Some(last);
    }
    // the entries were not logged: make them durable before the index is used
    storage
        .flush(
            &store,
            sibyl_storage::store::FlushReason::IndexBuildCompleted,
        )
        .await?;
    tracing::info!(
        "built index {}.{} ({written} entries)",
        table.keyspace,
        ix.name
    );
    // a build that failed leaves the index unbuilt (until the node restarts)
    store
        .building
        .store(false, std::sync::atomic::Ordering::SeqCst);
    Ok(written)
}
