//! The schema as rows of the `system_schema` tables: every DDL change becomes
//! mutations of those tables (through the commit log like any write), and the
//! schema is read back from them at start-up (Cassandra's `SchemaKeyspace`).

use crate::schema::*;
use bytes::Bytes;
use sibyl_db::cells::{column_value, make_partition_key, set_column, WriteParams};
use sibyl_db::{
    ClusteringKey, DecoratedKey, DeletionTime, LivenessInfo, Mutation, Partition, Row,
    NO_DELETION_TIME,
};
use sibyl_types::{value, CqlType, UserType};
use std::collections::BTreeMap;
use std::sync::Arc;

pub fn text(s: &str) -> Bytes {
    Bytes::copy_from_slice(s.as_bytes())
}
pub fn boolean(b: bool) -> Bytes {
    Bytes::copy_from_slice(&[b as u8])
}
pub fn int(i: i32) -> Bytes {
    Bytes::copy_from_slice(&i.to_be_bytes())
}
pub fn double(d: f64) -> Bytes {
    Bytes::copy_from_slice(&d.to_be_bytes())
}
pub fn inet(ip: std::net::IpAddr) -> Bytes {
    match ip {
        std::net::IpAddr::V4(v) => Bytes::copy_from_slice(&v.octets()),
        std::net::IpAddr::V6(v) => Bytes::copy_from_slice(&v.octets()),
    }
}
/// A `uuid` or `timeuuid` value.
pub fn uuid(u: uuid::Uuid) -> Bytes {
    Bytes::copy_from_slice(u.as_bytes())
}
pub fn text_map(m: &BTreeMap<String, String>) -> Bytes {
    let pairs: Vec<(Bytes, Bytes)> = m.iter().map(|(k, v)| (text(k), text(v))).collect();
    value::serialize_map(&pairs)
}
pub fn text_list(l: &[String]) -> Bytes {
    let e: Vec<Bytes> = l.iter().map(|s| text(s)).collect();
    value::serialize_collection(&e)
}

/// Builds a one-row mutation of a table from column values.
pub fn row_mutation(
    t: &TableMetadata,
    pk: &[Bytes],
    ck: &[Bytes],
    cols: &[(&str, Option<Bytes>)],
    wp: &WriteParams,
) -> Mutation {
    let mut row = Row {
        liveness: Some(LivenessInfo {
            timestamp: wp.timestamp,
            ttl: wp.ttl.max(0),
            local_expiration_time: if wp.ttl > 0 {
                wp.now.saturating_add(wp.ttl)
            } else {
                NO_DELETION_TIME
            },
        }),
        ..Default::default()
    };
    for (name, v) in cols {
        if let Some(c) = t.column(name) {
            let _ = set_column(&mut row, name, &c.typ, v.as_ref(), wp);
        }
    }
    let mut p = Partition::new();
    p.rows
        .insert(ClusteringKey::row(ck.to_vec(), t.comparator.clone()), row);
    Mutation {
        table_id: t.id,
        key: DecoratedKey::new(make_partition_key(pk)),
        update: p,
    }
}

/// The values of a column's row in `system_schema.columns` (and `system_virtual_schema.columns`).
pub fn column_row(c: &ColumnMetadata) -> [(&'static str, Option<Bytes>); 5] {
    let order = match (c.kind, c.reversed) {
        (ColumnKind::Clustering, true) => "desc",
        (ColumnKind::Clustering, false) => "asc",
        _ => "none",
    };
    column_row_of(&c.name, c.kind, c.position, order, &c.typ.to_string())
}

fn column_row_of(
    name: &str,
    kind: ColumnKind,
    position: i32,
    order: &str,
    typ: &str,
) -> [(&'static str, Option<Bytes>); 5] {
    [
        ("clustering_order", Some(text(order))),
        ("column_name_bytes", Some(text(name))),
        ("kind", Some(text(kind.as_str()))),
        ("position", Some(int(position))),
        ("type", Some(text(typ))),
    ]
}

/// A table's rows of `system_schema.columns` as Cassandra writes them:
/// a static-compact table's declared columns are static there, and a
/// COMPACT STORAGE table's hidden columns are listed too.
fn table_column_rows(t: &TableMetadata) -> Vec<(String, [(&'static str, Option<Bytes>); 5])> {
    let mut out: Vec<(String, [(&'static str, Option<Bytes>); 5])> = t
        .columns
        .iter()
        .map(|c| {
            let row = if t.is_static_compact() && c.kind == ColumnKind::Regular {
                column_row(&ColumnMetadata {
                    kind: ColumnKind::Static,
                    ..c.clone()
                })
            } else {
                column_row(c)
            };
            (c.name.clone(), row)
        })
        .collect();
    if let Some(cs) = &t.compact {
        if let Some(name) = &cs.hidden_clustering {
            out.push((
                name.clone(),
                column_row_of(name, ColumnKind::Clustering, 0, "asc", "text"),
            ));
        }
        if let Some((name, typ)) = &cs.hidden_value {
            out.push((
                name.clone(),
                column_row_of(name, ColumnKind::Regular, -1, "none", typ),
            ));
        }
    }
    out
}

fn schema_table(name: &str) -> Arc<TableMetadata> {
    system_keyspaces()
        .into_iter()
        .find(|k| k.name == "system_schema")
        .and_then(|k| k.tables.get(name).cloned())
        .unwrap_or_else(|| {
            Arc::new(TableMetadata::new(
                "system_schema",
                name,
                system_table_id("system_schema", name),
                Vec::new(),
                TableParams::default(),
            ))
        })
}

const SCHEMA_TABLES: [&str; 10] = [
    "keyspaces",
    "tables",
    "columns",
    "dropped_columns",
    "triggers",
    "views",
    "types",
    "functions",
    "aggregates",
    "indexes",
];

/// Mutations that delete everything of a keyspace in `system_schema` (at `ts`).
pub fn drop_keyspace_mutations(name: &str, ts: i64, now: i32) -> Vec<Mutation> {
    SCHEMA_TABLES
        .iter()
        .map(|t| {
            let tm = schema_table(t);
            let mut p = Partition::new();
            p.deletion = DeletionTime {
                marked_for_delete_at: ts,
                local_deletion_time: now,
            };
            Mutation {
                table_id: tm.id,
                key: DecoratedKey::new(text(name)),
                update: p,
            }
        })
        .collect()
}

/// The system keyspaces whose replication an operator may change (ALTER
/// KEYSPACE), as in Cassandra: their data is replicated like a user
/// keyspace's.
pub const REPLICATED_SYSTEM_KEYSPACES: [&str; 3] =
    ["system_auth", "system_distributed", "system_traces"];

/// The `system_schema.keyspaces` row of a keyspace alone: what an ALTER of
/// a replicated system keyspace writes (its tables are the node's own).
pub fn keyspace_params_mutation(ks: &KeyspaceMetadata, ts: i64, now: i32) -> Mutation {
    row_mutation(
        &schema_table("keyspaces"),
        &[text(&ks.name)],
        &[],
        &[
            ("durable_writes", Some(boolean(ks.durable_writes))),
            ("replication", Some(text_map(&ks.replication))),
        ],
        &WriteParams {
            timestamp: ts,
            ttl: 0,
            now,
        },
    )
}

/// Gives the replicated system keyspaces of `schema` their stored
/// replication and `durable_writes` (the newest row wins: the defaults every
/// start writes are older than any ALTER).
pub fn apply_system_keyspace_params(
    schema: &mut Schema,
    storage: &dyn SchemaSource,
    now: i32,
) -> Result<(), String> {
    let ks_t = schema_table("keyspaces");
    for name in REPLICATED_SYSTEM_KEYSPACES {
        let Some(p) = read_partition(storage, &ks_t, &Bytes::from_static(name.as_bytes()), now)?
        else {
            continue;
        };
        let Some(row) = p.rows.values().next() else {
            continue;
        };
        let replication = get_map(row, &ks_t, "replication", now);
        if replication.is_empty() {
            continue;
        }
        if let Some(ks) = schema.keyspaces.get(name) {
            let mut ks = (**ks).clone();
            ks.replication = replication.into();
            ks.durable_writes = get_bool(row, &ks_t, "durable_writes", now).unwrap_or(true);
            schema.keyspaces.insert(name.to_string(), Arc::new(ks));
        }
    }
    Ok(())
}

/// The full set of rows describing a keyspace, replacing what was there
/// (partition deletions at `ts - 1`, rows at `ts`).
pub fn keyspace_mutations(ks: &KeyspaceMetadata, ts: i64, now: i32) -> Vec<Mutation> {
    let mut out = drop_keyspace_mutations(&ks.name, ts - 1, now);
    let wp = WriteParams {
        timestamp: ts,
        ttl: 0,
        now,
    };
    let ksname = text(&ks.name);
    out.push(keyspace_params_mutation(ks, ts, now));
    let tables_t = schema_table("tables");
    let columns_t = schema_table("columns");
    let dropped_t = schema_table("dropped_columns");
    for t in ks.tables.values() {
        let p = &t.params;
        let flags: Vec<Bytes> = t.flags().into_iter().map(text).collect();
        let ext: Vec<(Bytes, Bytes)> = p
            .extensions
            .iter()
            .map(|(k, v)| (text(k), v.clone()))
            .collect();
        out.push(row_mutation(
            &tables_t,
            std::slice::from_ref(&ksname),
            &[text(&t.name)],
            &[
                (
                    "additional_write_policy",
                    Some(text(&p.additional_write_policy)),
                ),
                ("allow_auto_snapshot", Some(boolean(p.allow_auto_snapshot))),
                (
                    "bloom_filter_fp_chance",
                    Some(double(p.bloom_filter_fp_chance)),
                ),
                ("caching", Some(text_map(&p.caching))),
                ("cdc", Some(boolean(p.cdc))),
                ("comment", Some(text(&p.comment))),
                ("compaction", Some(text_map(&p.compaction))),
                ("compression", Some(text_map(&p.compression))),
                ("crc_check_chance", Some(double(p.crc_check_chance))),
                ("dclocal_read_repair_chance", Some(double(0.0))),
                ("read_repair_chance", Some(double(0.0))),
                ("default_time_to_live", Some(int(p.default_time_to_live))),
                ("extensions", Some(value::serialize_map(&ext))),
                ("flags", Some(value::serialize_collection(&flags))),
                ("gc_grace_seconds", Some(int(p.gc_grace_seconds))),
                ("id", Some(Bytes::copy_from_slice(t.id.as_bytes()))),
                ("incremental_backups", Some(boolean(p.incremental_backups))),
                ("max_index_interval", Some(int(p.max_index_interval))),
                ("memtable", Some(text(&p.memtable))),
                (
                    "memtable_flush_period_in_ms",
                    Some(int(p.memtable_flush_period_in_ms)),
                ),
                ("min_index_interval", Some(int(p.min_index_interval))),
                ("read_repair", Some(text(&p.read_repair))),
                ("speculative_retry", Some(text(&p.speculative_retry))),
            ],
            &wp,
        ));
        for (name, row) in table_column_rows(t) {
            out.push(row_mutation(
                &columns_t,
                std::slice::from_ref(&ksname),
                &[text(&t.name), text(&name)],
                &row,
                &wp,
            ));
        }
        for ix in &t.indexes {
            out.push(row_mutation(
                &schema_table("indexes"),
                std::slice::from_ref(&ksname),
                &[text(&t.name), text(&ix.name)],
                &[
                    ("kind", Some(text(ix.kind()))),
                    ("options", Some(text_map(&ix.options()))),
                ],
                &wp,
            ));
        }
        for (name, (typ, dropped_at)) in &t.dropped {
            out.push(row_mutation(
                &dropped_t,
                std::slice::from_ref(&ksname),
                &[text(&t.name), text(name)],
                &[
                    (
                        "dropped_time",
                        Some(Bytes::copy_from_slice(&(dropped_at / 1000).to_be_bytes())),
                    ),
                    (
                        "kind",
                        Some(text(if t.is_static_compact() {
                            "static"
                        } else {
                            "regular"
                        })),
                    ),
                    ("type", Some(text(&typ.to_string()))),
                ],
                &wp,
            ));
        }
    }
    let types_t = schema_table("types");
    for u in ks.types.values() {
        let names: Vec<String> = u.fields.iter().map(|(n, _)| n.clone()).collect();
        let types: Vec<String> = u.fields.iter().map(|(_, t)| t.to_string()).collect();
        out.push(row_mutation(
            &types_t,
            std::slice::from_ref(&ksname),
            &[text(&u.name)],
            &[
                ("field_names", Some(text_list(&names))),
                ("field_types", Some(text_list(&types))),
            ],
            &wp,
        ));
    }
    out
}

/// Where the stored schema is read from when a node starts: its local
/// `system_schema` tables.
pub trait SchemaSource {
    /// Every partition key of a table, in token order; an error when it
    /// cannot be read (a schema read that fails must not look empty).
    fn keys(&self, table_id: uuid::Uuid) -> Result<Vec<DecoratedKey>, String>;
    /// A partition of a table, unresolved.
    fn read(&self, table_id: uuid::Uuid, key: &DecoratedKey) -> Result<Option<Partition>, String>;
}

fn read_partition(
    storage: &dyn SchemaSource,
    t: &TableMetadata,
    key: &Bytes,
    now: i32,
) -> Result<Option<Partition>, String> {
    let p = storage
        .read(t.id, &DecoratedKey::new(key.clone()))
        .map_err(|e| format!("cannot read system_schema.{}: {e}", t.name))?;
    Ok(p.map(|mut p| {
        p.resolve(now);
        p
    }))
}

fn get_text(row: &Row, t: &TableMetadata, name: &str, now: i32) -> Option<String> {
    let c = t.column(name)?;
    column_value(row, name, &c.typ, now).map(|b| String::from_utf8_lossy(&b).to_string())
}

fn get_bytes(row: &Row, t: &TableMetadata, name: &str, now: i32) -> Option<Bytes> {
    let c = t.column(name)?;
    column_value(row, name, &c.typ, now)
}

fn get_int(row: &Row, t: &TableMetadata, name: &str, now: i32) -> Option<i32> {
    let b = get_bytes(row, t, name, now)?;
    (b.len() == 4).then(|| i32::from_be_bytes([b[0], b[1], b[2], b[3]]))
}

fn get_double(row: &Row, t: &TableMetadata, name: &str, now: i32) -> Option<f64> {
    let b = get_bytes(row, t, name, now)?;
    let a: [u8; 8] = b.as_ref().try_into().ok()?;
    Some(f64::from_be_bytes(a))
}

fn get_bool(row: &Row, t: &TableMetadata, name: &str, now: i32) -> Option<bool> {
    get_bytes(row, t, name, now).and_then(|b| b.first().map(|x| *x != 0))
}

fn get_map(row: &Row, t: &TableMetadata, name: &str, now: i32) -> BTreeMap<String, String> {
    get_bytes(row, t, name, now)
        .and_then(|b| value::deserialize_map(&b).ok())
        .map(|pairs| {
            pairs
                .into_iter()
                .map(|(k, v)| {
                    (
                        String::from_utf8_lossy(&k).to_string(),
                        String::from_utf8_lossy(&v).to_string(),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

fn get_list(row: &Row, t: &TableMetadata, name: &str, now: i32) -> Vec<String> {
    get_bytes(row, t, name, now)
        .and_then(|b| value::deserialize_collection(&b).ok())
        .map(|l| {
            l.into_iter()
                .map(|e| String::from_utf8_lossy(&e).to_string())
                .collect()
        })
        .unwrap_or_default()
}

/// Reads the user keyspaces from the `system_schema` tables.
///
/// Anything it cannot read or understand is an error naming what: a
/// keyspace, table or column silently dropped or retyped would hide (and
/// then lose) its data.
pub fn read_user_keyspaces(
    storage: &dyn SchemaSource,
    now: i32,
) -> Result<Vec<KeyspaceMetadata>, String> {
    let ks_t = schema_table("keyspaces");
    let keys = storage
        .keys(ks_t.id)
        .map_err(|e| format!("cannot read system_schema.keyspaces: {e}"))?;
    let mut out = Vec::new();
    for key in keys {
        let Some(p) = read_partition(storage, &ks_t, &key.key, now)? else {
            continue;
        };
        let Some(row) = p.rows.values().next() else {
            continue;
        };
        let name = String::from_utf8_lossy(&key.key).to_string();
        if is_system_keyspace(&name) {
            continue;
        }
        let mut ks = KeyspaceMetadata {
            name: name.clone(),
            replication: get_map(row, &ks_t, "replication", now).into(),
            durable_writes: get_bool(row, &ks_t, "durable_writes", now).unwrap_or(true),
            tables: BTreeMap::new(),
            types: BTreeMap::new(),
            is_system: false,
            is_virtual: false,
        };
        // types first: tables may use them
        let types_t = schema_table("types");
        if let Some(tp) = read_partition(storage, &types_t, &key.key, now)? {
            // a type may refer to another defined before it; retry until stable
            let mut pending: Vec<(String, Vec<String>, Vec<String>)> = tp
                .rows
                .iter()
                .map(|(ck, row)| {
                    let tname = ck
                        .values
                        .first()
                        .map(|v| String::from_utf8_lossy(v).to_string())
                        .unwrap_or_default();
                    (
                        tname,
                        get_list(row, &types_t, "field_names", now),
                        get_list(row, &types_t, "field_types", now),
                    )
                })
                .collect();
            for _ in 0..pending.len() + 1 {
                let mut rest = Vec::new();
                for (tname, names, types) in pending {
                    let resolve = |n: &str| ks.types.get(n).cloned();
                    let fields: Option<Vec<(String, CqlType)>> = names
                        .iter()
                        .zip(types.iter())
                        .map(|(n, t)| CqlType::parse(t, &resolve).ok().map(|t| (n.clone(), t)))
                        .collect();
                    match fields {
                        Some(fields) => {
                            ks.types.insert(
                                tname.clone(),
                                Arc::new(UserType {
                                    keyspace: name.clone(),
                                    name: tname,
                                    fields,
                                }),
                            );
                        }
                        None => rest.push((tname, names, types)),
                    }
                }
                pending = rest;
                if pending.is_empty() {
                    break;
                }
            }
            if let Some((tname, _, types)) = pending.first() {
                return Err(format!(
                    "type {name}.{tname} has field types that cannot be read: {}",
                    types.join(", ")
                ));
            }
        }
        let tables_t = schema_table("tables");
        let columns_t = schema_table("columns");
        let dropped_t = schema_table("dropped_columns");
        let cols_p = read_partition(storage, &columns_t, &key.key, now)?;
        let dropped_p = read_partition(storage, &dropped_t, &key.key, now)?;
        let indexes_t = schema_table("indexes");
        let indexes_p = read_partition(storage, &indexes_t, &key.key, now)?;
        if let Some(tp) = read_partition(storage, &tables_t, &key.key, now)? {
            for (ck, row) in &tp.rows {
                let tname = ck
                    .values
                    .first()
                    .map(|v| String::from_utf8_lossy(v).to_string())
                    .unwrap_or_default();
                // the id names the table's files: never make one up
                let id = get_bytes(row, &tables_t, "id", now)
                    .and_then(|b| uuid::Uuid::from_slice(&b).ok())
                    .ok_or_else(|| {
                        format!("table {name}.{tname} has no valid id in system_schema.tables")
                    })?;
                let d = TableParams::default();
                let params = TableParams {
                    additional_write_policy: get_text(
                        row,
                        &tables_t,
                        "additional_write_policy",
                        now,
                    )
                    .unwrap_or(d.additional_write_policy),
                    allow_auto_snapshot: get_bool(row, &tables_t, "allow_auto_snapshot", now)
                        .unwrap_or(d.allow_auto_snapshot),
                    bloom_filter_fp_chance: get_double(
                        row,
                        &tables_t,
                        "bloom_filter_fp_chance",
                        now,
                    )
                    .unwrap_or(d.bloom_filter_fp_chance),
                    caching: get_map(row, &tables_t, "caching", now),
                    cdc: get_bool(row, &tables_t, "cdc", now).unwrap_or(false),
                    comment: get_text(row, &tables_t, "comment", now).unwrap_or_default(),
                    compaction: get_map(row, &tables_t, "compaction", now),
                    compression: get_map(row, &tables_t, "compression", now),
                    crc_check_chance: get_double(row, &tables_t, "crc_check_chance", now)
                        .unwrap_or(1.0),
                    default_time_to_live: get_int(row, &tables_t, "default_time_to_live", now)
                        .unwrap_or(0),
                    extensions: get_bytes(row, &tables_t, "extensions", now)
                        .and_then(|b| value::deserialize_map(&b).ok())
                        .map(|pairs| {
                            pairs
                                .into_iter()
                                .map(|(k, v)| (String::from_utf8_lossy(&k).into_owned(), v))
                                .collect()
                        })
                        .unwrap_or_default(),
                    gc_grace_seconds: get_int(row, &tables_t, "gc_grace_seconds", now)
                        .unwrap_or(d.gc_grace_seconds),
                    incremental_backups: get_bool(row, &tables_t, "incremental_backups", now)
                        .unwrap_or(true),
                    max_index_interval: get_int(row, &tables_t, "max_index_interval", now)
                        .unwrap_or(d.max_index_interval),
                    memtable: get_text(row, &tables_t, "memtable", now).unwrap_or(d.memtable),
                    memtable_flush_period_in_ms: get_int(
                        row,
                        &tables_t,
                        "memtable_flush_period_in_ms",
                        now,
                    )
                    .unwrap_or(0),
                    min_index_interval: get_int(row, &tables_t, "min_index_interval", now)
                        .unwrap_or(d.min_index_interval),
                    read_repair: get_text(row, &tables_t, "read_repair", now)
                        .unwrap_or(d.read_repair),
                    speculative_retry: get_text(row, &tables_t, "speculative_retry", now)
                        .unwrap_or(d.speculative_retry),
                };
                let mut columns = Vec::new();
                let flags: Vec<String> = get_bytes(row, &tables_t, "flags", now)
                    .and_then(|b| value::deserialize_collection(&b).ok())
                    .map(|items| {
                        items
                            .into_iter()
                            .map(|i| String::from_utf8_lossy(&i).into_owned())
                            .collect()
                    })
                    .unwrap_or_else(|| vec!["compound".to_string()]);
                let has = |f: &str| flags.iter().any(|x| x == f);
                let static_compact = !has("compound") && !has("dense") && !has("super");
                let dense = has("dense");
                let mut compact = (static_compact || dense).then_some(CompactStorage {
                    hidden_clustering: None,
                    hidden_value: None,
                });
                if let Some(cp) = &cols_p {
                    for (cck, crow) in &cp.rows {
                        if cck.values.first().map(|v| v.as_ref()) != Some(tname.as_bytes()) {
                            continue;
                        }
                        let cname = cck
                            .values
                            .get(1)
                            .map(|v| String::from_utf8_lossy(v).to_string())
                            .unwrap_or_default();
                        let kind = get_text(crow, &columns_t, "kind", now)
                            .and_then(|k| ColumnKind::parse(&k))
                            .unwrap_or(ColumnKind::Regular);
                        let tstr = get_text(crow, &columns_t, "type", now).ok_or_else(|| {
                            format!("column {name}.{tname}.{cname} has no type in system_schema.columns")
                        })?;
                        // a COMPACT STORAGE table's hidden columns (see
                        // CompactStorage): known by name only
                        if let Some(cs) = compact.as_mut() {
                            let hidden_value =
                                kind == ColumnKind::Regular && (static_compact || tstr == "empty");
                            if hidden_value {
                                cs.hidden_value = Some((cname, tstr));
                                continue;
                            }
                            if static_compact && kind == ColumnKind::Clustering {
                                cs.hidden_clustering = Some(cname);
                                continue;
                            }
                        }
                        let kind = if static_compact && kind == ColumnKind::Static {
                            ColumnKind::Regular
                        } else {
                            kind
                        };
                        let resolve = |n: &str| ks.types.get(n).cloned();
                        let typ = CqlType::parse(&tstr, &resolve).map_err(|e| {
                            format!("column {name}.{tname}.{cname} has type '{tstr}' that cannot be read: {e}")
                        })?;
                        let order =
                            get_text(crow, &columns_t, "clustering_order", now).unwrap_or_default();
                        columns.push(ColumnMetadata {
                            name: cname,
                            typ,
                            kind,
                            position: get_int(crow, &columns_t, "position", now).unwrap_or(-1),
                            reversed: order == "desc",
                        });
                    }
                }
                let mut tm = TableMetadata::new(&name, &tname, id, columns, params);
                tm.compact = compact;
                if let Some(dp) = &dropped_p {
                    for (dck, drow) in &dp.rows {
                        if dck.values.first().map(|v| v.as_ref()) != Some(tname.as_bytes()) {
                            continue;
                        }
                        let cname = dck
                            .values
                            .get(1)
                            .map(|v| String::from_utf8_lossy(v).to_string())
                            .unwrap_or_default();
                        let tstr = get_text(drow, &dropped_t, "type", now)
                            .unwrap_or_else(|| "blob".into());
                        let typ = CqlType::parse(&tstr, &|n: &str| ks.types.get(n).cloned())
                            .unwrap_or(CqlType::Blob);
                        let at = get_bytes(drow, &dropped_t, "dropped_time", now)
                            .and_then(|b| <[u8; 8]>::try_from(b.as_ref()).ok())
                            .map(|a| i64::from_be_bytes(a) * 1000)
                            .unwrap_or(0);
                        tm.dropped.insert(cname, (typ, at));
                    }
                }
                if let Some(ip) = &indexes_p {
                    for (ick, irow) in &ip.rows {
                        if ick.values.first().map(|v| v.as_ref()) != Some(tname.as_bytes()) {
                            continue;
                        }
                        let iname = ick
                            .values
                            .get(1)
                            .map(|v| String::from_utf8_lossy(v).to_string())
                            .unwrap_or_default();
                        let options = get_map(irow, &indexes_t, "options", now);
                        let (target, column) = crate::index::IndexMetadata::parse_target(
                            options.get("target").map(|s| s.as_str()).unwrap_or(""),
                        );
                        let custom_class = options.get("class_name").cloned();
                        let extra = options
                            .into_iter()
                            .filter(|(k, _)| k != "class_name" && k != "target")
                            .collect();
                        tm.indexes.push(crate::index::IndexMetadata {
                            name: iname,
                            column,
                            target,
                            custom_class,
                            options: extra,
                        });
                    }
                }
                ks.tables.insert(tname, Arc::new(tm));
            }
        }
        out.push(ks);
    }
    Ok(out)
}
