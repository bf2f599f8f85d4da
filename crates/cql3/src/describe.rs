//! Server-side DESCRIBE (as Cassandra 4+ answers it, and cqlsh 6 asks for it).

use crate::error::{Error, Result};
use crate::query::{ClientState, Outcome, QueryProcessor};
use bytes::Bytes;
use sibyl_cql::{Describe, DescribeStatement};
use sibyl_protocol::{ColumnSpec, ResultBody, RowsMetadata};
use sibyl_schema::schema::*;
use sibyl_types::CqlType;

/// Quotes an identifier if CQL needs it.
pub use sibyl_types::ident::maybe_quote as quote;

fn cql_string(s: &str) -> String {
    format!("'{}'", s.replace('\'', "''"))
}

fn cql_map(m: &std::collections::BTreeMap<String, String>) -> String {
    let inner: Vec<String> = m
        .iter()
        .map(|(k, v)| format!("{}: {}", cql_string(k), cql_string(v)))
        .collect();
    format!("{{{}}}", inner.join(", "))
}

fn short_class(c: &str) -> String {
    for p in [
        "org.apache.cassandra.locator.",
        "org.apache.cassandra.db.compaction.",
        "org.apache.cassandra.io.compress.",
    ] {
        if let Some(s) = c.strip_prefix(p) {
            return s.to_string();
        }
    }
    c.to_string()
}

/// `CREATE KEYSPACE` text.
pub fn keyspace_cql(ks: &KeyspaceMetadata) -> String {
    let mut repl = ks.replication.options().clone();
    if let Some(c) = repl.get_mut("class") {
        *c = short_class(c);
    }
    format!(
        "CREATE KEYSPACE {} WITH replication = {}  AND durable_writes = {};",
        quote(&ks.name),
        cql_map(&repl),
        ks.durable_writes
    )
}

fn fmt_double(d: f64) -> String {
    if d.fract() == 0.0 && d.abs() < 1e15 {
        format!("{d:.1}")
    } else {
        format!("{d}")
    }
}

/// `CREATE TABLE` text.
pub fn table_cql(t: &TableMetadata, with_internals: bool) -> String {
    let mut s = format!("CREATE TABLE {}.{} (\n", quote(&t.keyspace), quote(&t.name));
    // a static-compact table has Cassandra's hidden clustering column: its
    // key gets a PRIMARY KEY line too
    let single_pk = t.partition_key_count == 1 && t.clustering_count == 0 && !t.is_static_compact();
    let mut lines = Vec::new();
    // SELECT * lists columns by name; DESCRIBE puts simple columns before complex (multi-cell) ones
    let mut columns: Vec<&ColumnMetadata> = t.columns.iter().collect();
    columns.sort_by_key(|c| (c.kind, !c.kind.is_primary_key() && c.typ.is_multi_cell()));
    for c in columns {
        let mut l = format!("    {} {}", quote(&c.name), c.typ);
        if c.kind == ColumnKind::Static {
            l.push_str(" static");
        }
        if single_pk && c.kind == ColumnKind::PartitionKey {
            l.push_str(" PRIMARY KEY");
        }
        lines.push(l);
    }
    if !single_pk {
        let pk: Vec<String> = t.partition_key().iter().map(|c| quote(&c.name)).collect();
        let pk = if pk.len() == 1 {
            pk[0].clone()
        } else {
            format!("({})", pk.join(", "))
        };
        let mut parts = vec![pk];
        parts.extend(t.clustering().iter().map(|c| quote(&c.name)));
        lines.push(format!("    PRIMARY KEY ({})", parts.join(", ")));
    }
    s.push_str(&lines.join(",\n"));
    s.push_str("\n) WITH ");
    let p = &t.params;
    let mut opts = Vec::new();
    if t.compact.is_some() {
        opts.push("COMPACT STORAGE".to_string());
    }
    if let Some(hidden) = t
        .compact
        .as_ref()
        .and_then(|c| c.hidden_clustering.as_ref())
    {
        // what Cassandra 5.0.4 prints (later versions leave it out)
        opts.push(format!("CLUSTERING ORDER BY ({} ASC)", quote(hidden)));
    } else if t.clustering_count > 0 {
        let order: Vec<String> = t
            .clustering()
            .iter()
            .map(|c| {
                format!(
                    "{} {}",
                    quote(&c.name),
                    if c.reversed { "DESC" } else { "ASC" }
                )
            })
            .collect();
        opts.push(format!("CLUSTERING ORDER BY ({})", order.join(", ")));
    }
    if with_internals {
        opts.push(format!("ID = {}", t.id));
    }
    opts.push(format!(
        "additional_write_policy = {}",
        cql_string(&p.additional_write_policy)
    ));
    opts.push(format!("allow_auto_snapshot = {}", p.allow_auto_snapshot));
    opts.push(format!(
        "bloom_filter_fp_chance = {}",
        p.bloom_filter_fp_chance
    ));
    opts.push(format!("caching = {}", cql_map(&p.caching)));
    opts.push(format!("cdc = {}", p.cdc));
    opts.push(format!("comment = {}", cql_string(&p.comment)));
    opts.push(format!("compaction = {}", cql_map(&p.compaction)));
    opts.push(format!("compression = {}", cql_map(&p.compression)));
    opts.push(format!("memtable = {}", cql_string(&p.memtable)));
    opts.push(format!(
        "crc_check_chance = {}",
        fmt_double(p.crc_check_chance)
    ));
    opts.push(format!("default_time_to_live = {}", p.default_time_to_live));
    opts.push("extensions = {}".to_string());
    opts.push(format!("gc_grace_seconds = {}", p.gc_grace_seconds));
    opts.push(format!("incremental_backups = {}", p.incremental_backups));
    opts.push(format!("max_index_interval = {}", p.max_index_interval));
    opts.push(format!(
        "memtable_flush_period_in_ms = {}",
        p.memtable_flush_period_in_ms
    ));
    opts.push(format!("min_index_interval = {}", p.min_index_interval));
    opts.push(format!("read_repair = {}", cql_string(&p.read_repair)));
    opts.push(format!(
        "speculative_retry = {}",
        cql_string(&p.speculative_retry)
    ));
    // ScyllaDB's option, shown only when it is not Cassandra's rule
    if p.tombstone_gc() != "timeout" {
        opts.push(format!("tombstone_gc = {{'mode': '{}'}}", p.tombstone_gc()));
    }
    s.push_str(&opts.join("\n    AND "));
    s.push(';');
    if t.compact.is_some() {
        // Cassandra describes a COMPACT STORAGE table only as a comment
        return format!(
            "/*\nWarning: Table {}.{} omitted because it has constructs not compatible with CQL (was created via legacy API).\nApproximate structure, for reference:\n(this should not be used to reproduce this schema)\n\n{s}\n*/",
            quote(&t.keyspace),
            quote(&t.name)
        );
    }
    s
}

/// `CREATE TYPE` text.
pub fn type_cql(u: &sibyl_types::UserType) -> String {
    let fields: Vec<String> = u
        .fields
        .iter()
        .map(|(n, t)| format!("    {} {}", quote(n), t))
        .collect();
    format!(
        "CREATE TYPE {}.{} (\n{}\n);",
        quote(&u.keyspace),
        quote(&u.name),
        fields.join(",\n")
    )
}

fn spec(name: &str) -> ColumnSpec {
    ColumnSpec {
        keyspace: String::new(),
        table: String::new(),
        name: name.into(),
        typ: CqlType::Text,
    }
}

fn t(s: &str) -> Option<Bytes> {
    Some(Bytes::copy_from_slice(s.as_bytes()))
}

fn rows_result(with_stmt: bool, rows: Vec<(String, String, String, Option<String>)>) -> Outcome {
    let mut columns = vec![spec("keyspace_name"), spec("type"), spec("name")];
    if with_stmt {
        columns.push(spec("create_statement"));
    }
    let rows = rows
        .into_iter()
        .map(|(k, ty, n, c)| {
            // (Cassandra's `elementKeyspaceQuotedIfNeeded` / `elementNameQuotedIfNeeded`)
            let mut r = vec![
                t(&sibyl_types::ident::maybe_quote(&k)),
                t(&ty),
                t(&sibyl_types::ident::maybe_quote(&n)),
            ];
            if with_stmt {
                r.push(c.as_deref().and_then(t));
            }
            r
        })
        .collect();
    Outcome {
        body: ResultBody::Rows {
            metadata: RowsMetadata {
                columns: columns.into(),
                ..Default::default()
            },
            rows,
        },
        warnings: Vec::new(),
        event: None,
    }
}

fn keyspace_elements(
    ks: &KeyspaceMetadata,
    with_internals: bool,
    only: bool,
) -> Vec<(String, String, String, Option<String>)> {
    let mut rows = vec![(
        ks.name.clone(),
        "keyspace".to_string(),
        ks.name.clone(),
        Some(keyspace_cql(ks)),
    )];
    if only {
        return rows;
    }
    for u in ks.types.values() {
        rows.push((
            ks.name.clone(),
            "type".into(),
            u.name.clone(),
            Some(type_cql(u)),
        ));
    }
    for tm in ks.tables.values() {
        rows.extend(table_elements(tm, with_internals));
    }
    rows
}

/// A table and its indexes, as DESCRIBE TABLE lists them.
fn table_elements(
    tm: &TableMetadata,
    with_internals: bool,
) -> Vec<(String, String, String, Option<String>)> {
    let mut rows = vec![(
        tm.keyspace.clone(),
        "table".to_string(),
        tm.name.clone(),
        Some(table_cql(tm, with_internals)),
    )];
    for ix in &tm.indexes {
        rows.push((
            tm.keyspace.clone(),
            "index".into(),
            ix.name.clone(),
            Some(index_cql(tm, ix)),
        ));
    }
    rows
}

/// `CREATE [CUSTOM] INDEX name ON ks.t (target) [USING 'class'];`
pub fn index_cql(tm: &TableMetadata, ix: &sibyl_schema::index::IndexMetadata) -> String {
    let on = format!("{}.{}", quote(&tm.keyspace), quote(&tm.name));
    match &ix.custom_class {
        Some(c) => format!(
            "CREATE CUSTOM INDEX {} ON {on} ({}) USING {};",
            quote(&ix.name),
            ix.target_string(),
            cql_string(c)
        ),
        None => format!(
            "CREATE INDEX {} ON {on} ({});",
            quote(&ix.name),
            ix.target_string()
        ),
    }
}

fn find_index<'a>(
    ks: &'a KeyspaceMetadata,
    name: &str,
) -> Option<(&'a TableMetadata, &'a sibyl_schema::index::IndexMetadata)> {
    ks.tables.values().find_map(|t| {
        t.indexes
            .iter()
            .find(|ix| ix.name == name)
            .map(|ix| (t.as_ref(), ix))
    })
}

pub fn describe(
    qp: &QueryProcessor,
    d: &DescribeStatement,
    client: &ClientState,
) -> Result<Outcome> {
    let schema = qp.schema();
    let current_ks = || -> Result<String> {
        client
            .keyspace
            .clone()
            .ok_or_else(|| Error::Invalid("No keyspace specified and no current keyspace".into()))
    };
    match &d.what {
        Describe::Cluster => {
            let columns = vec![spec("cluster"), spec("partitioner"), spec("snitch")];
            let rows = vec![vec![
                t(&qp.cluster_name),
                t("Murmur3Partitioner"),
                t("DynamicEndpointSnitch"),
            ]];
            Ok(Outcome {
                body: ResultBody::Rows {
                    metadata: RowsMetadata {
                        columns: columns.into(),
                        ..Default::default()
                    },
                    rows,
                },
                warnings: Vec::new(),
                event: None,
            })
        }
        Describe::Keyspaces => Ok(rows_result(
            false,
            schema
                .keyspaces
                .values()
                .map(|k| (k.name.clone(), "keyspace".into(), k.name.clone(), None))
                .collect(),
        )),
        Describe::Tables => {
            let mut rows = Vec::new();
            for k in schema.keyspaces.values() {
                if let Some(cur) = &client.keyspace {
                    if &k.name != cur {
                        continue;
                    }
                }
                for tm in k.tables.values() {
                    rows.push((k.name.clone(), "table".into(), tm.name.clone(), None));
                }
            }
            Ok(rows_result(false, rows))
        }
        Describe::Types => {
            let mut rows = Vec::new();
            for k in schema.keyspaces.values() {
                if let Some(cur) = &client.keyspace {
                    if &k.name != cur {
                        continue;
                    }
                }
                for u in k.types.values() {
                    rows.push((k.name.clone(), "type".into(), u.name.clone(), None));
                }
            }
            Ok(rows_result(false, rows))
        }
        Describe::Functions | Describe::Aggregates => Ok(rows_result(false, Vec::new())),
        Describe::Keyspace { name, only } => {
            let n = match name {
                Some(n) => n.clone(),
                None => current_ks()?,
            };
            let ks = schema
                .keyspace(&n)
                .ok_or_else(|| Error::Invalid(format!("'{n}' not found in keyspaces")))?;
            Ok(rows_result(
                true,
                keyspace_elements(ks, d.with_internals, *only),
            ))
        }
        // (Sibyl has no user functions, aggregates or materialized views)
        Describe::Other(kind, q) => {
            let k = match &q.keyspace {
                Some(k) => k.clone(),
                None => current_ks()?,
            };
            if schema.keyspace(&k).is_none() {
                return Err(Error::Invalid(format!("'{k}' not found in keyspaces")));
            }
            let what = match *kind {
                "function" => "User defined function",
                "aggregate" => "User defined aggregate",
                _ => "Materialized view",
            };
            Err(Error::Invalid(format!(
                "{what} '{}' not found in '{k}'",
                q.name
            )))
        }
        Describe::Table(q) => {
            let k = match &q.keyspace {
                Some(k) => k.clone(),
                None => current_ks()?,
            };
            let ks = schema
                .keyspace(&k)
                .ok_or_else(|| Error::Invalid(format!("'{k}' not found in keyspaces")))?;
            let tm = ks.tables.get(&q.name).ok_or_else(|| {
                Error::Invalid(format!("Table '{}' not found in keyspace '{}'", q.name, k))
            })?;
            Ok(rows_result(true, table_elements(tm, d.with_internals)))
        }
        Describe::Type(q) => {
            let k = match &q.keyspace {
                Some(k) => k.clone(),
                None => current_ks()?,
            };
            let ks = schema
                .keyspace(&k)
                .ok_or_else(|| Error::Invalid(format!("'{k}' not found in keyspaces")))?;
            let u = ks.types.get(&q.name).ok_or_else(|| {
                Error::Invalid(format!(
                    "User defined type '{}' not found in '{}'",
                    q.name, k
                ))
            })?;
            Ok(rows_result(
                true,
                vec![(k.clone(), "type".into(), u.name.clone(), Some(type_cql(u)))],
            ))
        }
        Describe::Index(q) => {
            let k = match &q.keyspace {
                Some(k) => k.clone(),
                None => current_ks()?,
            };
            let ks = schema
                .keyspace(&k)
                .ok_or_else(|| Error::Invalid(format!("'{k}' not found in keyspaces")))?;
            let (tm, ix) = find_index(ks, &q.name).ok_or_else(|| {
                Error::Invalid(format!(
                    "Table for existing index '{}' not found in '{}'",
                    q.name, k
                ))
            })?;
            Ok(rows_result(
                true,
                vec![(
                    k.clone(),
                    "index".into(),
                    ix.name.clone(),
                    Some(index_cql(tm, ix)),
                )],
            ))
        }
        Describe::Schema { full } => {
            let mut rows = Vec::new();
            for ks in schema.keyspaces.values() {
                if !full && ks.is_system {
                    continue;
                }
                if ks.is_virtual {
                    continue;
                }
                rows.extend(keyspace_elements(ks, d.with_internals, false));
            }
            Ok(rows_result(true, rows))
        }
        Describe::Generic(q) => {
            // a keyspace, or a table/type in the current or given keyspace
            if q.keyspace.is_none() {
                if let Some(ks) = schema.keyspace(&q.name) {
                    return Ok(rows_result(
                        true,
                        keyspace_elements(ks, d.with_internals, false),
                    ));
                }
            }
            let k = match &q.keyspace {
                Some(k) => k.clone(),
                None => current_ks()
                    .map_err(|_| Error::Invalid(format!("'{}' not found in keyspaces", q.name)))?,
            };
            let ks = schema
                .keyspace(&k)
                .ok_or_else(|| Error::Invalid(format!("'{k}' not found in keyspaces")))?;
            if let Some(tm) = ks.tables.get(&q.name) {
                return Ok(rows_result(true, table_elements(tm, d.with_internals)));
            }
            if let Some((tm, ix)) = find_index(ks, &q.name) {
                return Ok(rows_result(
                    true,
                    vec![(
                        k.clone(),
                        "index".into(),
                        ix.name.clone(),
                        Some(index_cql(tm, ix)),
                    )],
                ));
            }
            if let Some(u) = ks.types.get(&q.name) {
                return Ok(rows_result(
                    true,
                    vec![(k.clone(), "type".into(), u.name.clone(), Some(type_cql(u)))],
                ));
            }
            Err(Error::Invalid(format!(
                "'{}' not found in keyspace '{}'",
                q.name, k
            )))
        }
    }
}
