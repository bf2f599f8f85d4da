//! Secondary indexes (Cassandra's `index.internal` indexes, and the `sai`
//! kind accepted with its query rules).
//!
//! An index is a hidden local table beside its base table, in
//! `<table dir>/.<index name>`, written in the same commit-log batch as the
//! base write. Its partition key is the indexed value (for `entries()` the
//! composite of map key and value); its clustering is the base partition's
//! token and key, then the base clustering for row-level targets (regular and
//! clustering columns), so one index partition lists matching rows in the
//! base table's token order. Deletions and overwrites write nothing to the
//! index: every entry is checked against the base row when read, and entries
//! found stale are deleted then, as Cassandra's `CassandraIndexSearcher` does.

use crate::cells::{make_partition_key, split_partition_key};
use crate::error::{Error, Result};
use crate::schema::{ColumnKind, TableMetadata};
use bytes::Bytes;
use sibyl_cql::Operator;
use sibyl_storage::{
    BoundKind, ClusteringComparator, ClusteringKey, ColumnData, ColumnFamilyStore, DecoratedKey,
    DeletionTime, LivenessInfo, Mutation, Partition, Row, NO_DELETION_TIME,
};
use sibyl_types::CqlType;
use std::collections::BTreeMap;
use std::sync::Arc;

/// What of a column an index holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TargetKind {
    /// The value of a non-collection column.
    Simple,
    /// Map keys.
    Keys,
    /// List and set elements, map values.
    Values,
    /// Map key and value pairs.
    Entries,
    /// A frozen collection as a whole.
    Full,
}

impl TargetKind {
    pub fn parse(s: &str) -> Option<TargetKind> {
        Some(match s.to_ascii_lowercase().as_str() {
            "keys" => TargetKind::Keys,
            "values" => TargetKind::Values,
            "entries" => TargetKind::Entries,
            "full" => TargetKind::Full,
            _ => return None,
        })
    }

    pub fn as_str(self) -> &'static str {
        match self {
            TargetKind::Simple => "",
            TargetKind::Keys => "keys",
            TargetKind::Values => "values",
            TargetKind::Entries => "entries",
            TargetKind::Full => "full",
        }
    }
}

/// Class names that mean a storage-attached index.
const SAI_CLASSES: &[&str] = &[
    "sai",
    "storageattachedindex",
    "org.apache.cassandra.index.sai.storageattachedindex",
];

/// One index of a table, as `system_schema.indexes` holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IndexMetadata {
    pub name: String,
    pub column: String,
    pub target: TargetKind,
    /// `USING '...'` as written (custom indexes: only the `sai` kind).
    pub custom_class: Option<String>,
    /// `WITH OPTIONS = {...}` (`similarity_function` of a vector index).
    pub options: BTreeMap<String, String>,
}

impl IndexMetadata {
    /// `v`, `keys(m)`, `values(l)`, `entries(m)` or `full(f)`.
    pub fn target_string(&self) -> String {
        let col = crate::describe::quote(&self.column);
        match self.target {
            TargetKind::Simple => col,
            k => format!("{}({col})", k.as_str()),
        }
    }

    /// Parses a stored target back into its kind and column.
    pub fn parse_target(s: &str) -> (TargetKind, String) {
        if let (Some(open), true) = (s.find('('), s.ends_with(')')) {
            if let Some(kind) = TargetKind::parse(&s[..open]) {
                return (kind, unquote(&s[open + 1..s.len() - 1]));
            }
        }
        (TargetKind::Simple, unquote(s))
    }

    pub fn kind(&self) -> &'static str {
        if self.custom_class.is_some() {
            "CUSTOM"
        } else {
            "COMPOSITES"
        }
    }

    pub fn options(&self) -> BTreeMap<String, String> {
        let mut m = self.options.clone();
        if let Some(c) = &self.custom_class {
            m.insert("class_name".to_string(), c.clone());
        }
        m.insert("target".to_string(), self.target_string());
        m
    }

    pub fn is_sai(&self) -> bool {
        self.custom_class.is_some()
    }

    /// The hidden table's id: stable for a (table, index name) pair.
    pub fn store_id(&self, table: &TableMetadata) -> uuid::Uuid {
        let h1 = sibyl_types::murmur3::token(
            &[
                table.id.as_bytes().as_slice(),
                self.name.as_bytes(),
                b"/index",
            ]
            .concat(),
        );
        let h2 = sibyl_types::murmur3::token(
            &[self.name.as_bytes(), table.id.as_bytes().as_slice()].concat(),
        );
        let mut b = [0u8; 16];
        b[..8].copy_from_slice(&h1.to_be_bytes());
        b[8..].copy_from_slice(&h2.to_be_bytes());
        uuid::Builder::from_random_bytes(b).into_uuid()
    }

    pub fn directory(
        &self,
        table: &TableMetadata,
        data_dir: &std::path::Path,
    ) -> std::path::PathBuf {
        table.directory(data_dir).join(format!(".{}", self.name))
    }

    /// Whether entries name rows (regular and clustering columns) or whole
    /// partitions (static and partition key columns).
    pub fn row_level(&self, table: &TableMetadata) -> bool {
        table
            .column(&self.column)
            .map(|c| matches!(c.kind, ColumnKind::Regular | ColumnKind::Clustering))
            .unwrap_or(true)
    }

    /// The hidden table's clustering: token, partition key, then the base clustering.
    pub fn comparator(&self, table: &TableMetadata) -> Arc<ClusteringComparator> {
        let mut types = vec![(CqlType::Bigint, false), (CqlType::Blob, false)];
        if self.row_level(table) {
            types.extend(
                table
                    .clustering()
                    .iter()
                    .map(|c| (c.typ.clone(), c.reversed)),
            );
        }
        ClusteringComparator::new(types)
    }

    /// Whether a restriction `column op value` (`m[key] = value` when
    /// `element`) can be answered by this index. Storage-attached indexes
    /// also answer ranges on non-literal values.
    pub fn supports(&self, op: Operator, element: bool, typ: &CqlType) -> bool {
        match (self.target, op, element) {
            (TargetKind::Simple | TargetKind::Full, Operator::Eq, false) => true,
            (
                TargetKind::Simple,
                Operator::Lt | Operator::Le | Operator::Gt | Operator::Ge,
                false,
            ) => self.is_sai() && !is_literal(typ),
            (TargetKind::Values, Operator::Contains, false) => true,
            (TargetKind::Keys, Operator::ContainsKey, false) => true,
            (TargetKind::Entries, Operator::Eq, true) => true,
            _ => false,
        }
    }

    /// Whether a lookup of one value (not a range) can drive the read.
    pub fn is_lookup(op: Operator) -> bool {
        matches!(
            op,
            Operator::Eq | Operator::Contains | Operator::ContainsKey
        )
    }
}

fn unquote(s: &str) -> String {
    let s = s.trim();
    if s.len() >= 2 && s.starts_with('"') && s.ends_with('"') {
        s[1..s.len() - 1].replace("\"\"", "\"")
    } else {
        s.to_string()
    }
}

/// Types an SAI index compares as terms (equality only).
fn is_literal(t: &CqlType) -> bool {
    matches!(t, CqlType::Ascii | CqlType::Text | CqlType::Boolean)
        || matches!(t, CqlType::Frozen(_))
}

/// Checks `CREATE INDEX` against the table, with Cassandra's messages, and
/// returns the index to add.
pub fn validate_create(
    table: &TableMetadata,
    name: Option<&str>,
    column: &str,
    kind: &str,
    custom_class: Option<&str>,
    options: &[(String, String)],
    existing_names: &dyn Fn(&str) -> bool,
) -> Result<(IndexMetadata, Option<String>)> {
    if let Some(n) = name {
        if n.is_empty() || !n.chars().all(|c| c.is_alphanumeric() || c == '_') {
            return Err(Error::Config(format!("Illegal index name {n}")));
        }
    }
    if let Some(c) = custom_class {
        if !SAI_CLASSES.contains(&c.to_ascii_lowercase().as_str()) {
            return Err(Error::Config(format!(
                "Unable to find custom indexer class '{c}'"
            )));
        }
    }
    let Some(col) = table.column(column) else {
        let shown = if column.is_empty() {
            "\"\"".to_string()
        } else {
            column.to_string()
        };
        return Err(Error::Invalid(format!(
            "Undefined column name {shown} in table {}.{}",
            table.keyspace, table.name
        )));
    };
    if table.is_counter {
        return Err(Error::Invalid(
            "Secondary indexes on counter tables aren't supported".into(),
        ));
    }
    if col.kind == ColumnKind::PartitionKey && table.partition_key_count == 1 {
        return Err(Error::Invalid(format!(
            "Cannot create secondary index on the only partition key column {column}"
        )));
    }
    let explicit = !kind.is_empty();
    let target = match kind {
        "" => TargetKind::Values,
        k => TargetKind::parse(k)
            .ok_or_else(|| Error::Syntax(format!("no viable alternative at input '{k}'")))?,
    };
    let is_collection = matches!(
        col.typ.unfrozen(),
        CqlType::List(_) | CqlType::Set(_) | CqlType::Map(..)
    );
    let frozen = matches!(col.typ, CqlType::Frozen(_));
    let target = if !is_collection {
        if explicit && target != TargetKind::Values {
            return Err(Error::Invalid(format!(
                "Cannot create {}() index on {column}. Non-collection columns only support simple indexes",
                target.as_str()
            )));
        }
        TargetKind::Simple
    } else if frozen {
        if target != TargetKind::Full {
            return Err(Error::Invalid(format!(
                "Cannot create {}() index on frozen column {column}. Frozen collections are immutable and must be fully indexed by using the 'full({column})' modifier",
                target.as_str()
            )));
        }
        TargetKind::Full
    } else {
        let is_map = matches!(col.typ.unfrozen(), CqlType::Map(..));
        match target {
            TargetKind::Full => {
                return Err(Error::Invalid(
                    "full() indexes can only be created on frozen collections".into(),
                ))
            }
            TargetKind::Keys | TargetKind::Entries if !is_map => {
                return Err(Error::Invalid(format!(
                    "Cannot create index on {} of column {column} with non-map type",
                    target.as_str()
                )));
            }
            t => t,
        }
    };
    if let (Some(_), CqlType::Vector(elem, _)) = (custom_class, col.typ.unfrozen()) {
        if **elem != CqlType::Float {
            return Err(Error::Invalid(
                "SAI ANN indexes are only allowed on vector columns with float elements".into(),
            ));
        }
    }
    if let Some((_, f)) = options.iter().find(|(k, _)| k == "similarity_function") {
        if !["cosine", "euclidean", "dot_product"].contains(&f.to_ascii_lowercase().as_str()) {
            return Err(Error::Invalid(format!(
                "Similarity function {f} was not recognized"
            )));
        }
    }
    let mut ix = IndexMetadata {
        name: String::new(),
        column: column.to_string(),
        target,
        custom_class: custom_class.map(|s| s.to_string()),
        options: options.iter().cloned().collect(),
    };
    ix.name = match name {
        Some(n) => n.to_string(),
        None => {
            let base: String = format!("{}_{}_idx", table.name, column)
                .chars()
                .filter(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            let mut n = base.clone();
            let mut i = 0;
            while existing_names(&n) {
                i += 1;
                n = format!("{base}_{i}");
            }
            n
        }
    };
    let duplicate = table
        .indexes
        .iter()
        .find(|o| o.column == ix.column && o.target == ix.target && o.is_sai() == ix.is_sai())
        .map(|o| o.name.clone());
    Ok((ix, duplicate))
}

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
    schema: &crate::schema::Schema,
    mutations: &[Mutation],
    now: i32,
) -> Vec<Mutation> {
    let mut out = Vec::new();
    for m in mutations {
        let Some(t) = schema.table_by_id(m.table_id) else {
            continue;
        };
        if t.indexes.is_empty() {
            continue;
        }
        out.extend(entries_for(t, &m.key, &m.update, now));
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
) -> Result<std::collections::VecDeque<Hit>> {
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
) -> Result<usize> {
    let (Some(base), Some(store)) = (storage.table(table.id), storage.table(ix.store_id(table)))
    else {
        return Ok(0);
    };
    let now = sibyl_storage::now_in_seconds();
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
    storage.flush(&store).await?;
    tracing::info!(
        "built index {}.{} ({written} entries)",
        table.keyspace,
        ix.name
    );
    Ok(written)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_round_trip_through_their_stored_text() {
        for (text, kind, column) in [
            ("v", TargetKind::Simple, "v"),
            ("keys(m)", TargetKind::Keys, "m"),
            ("values(l)", TargetKind::Values, "l"),
            ("entries(m)", TargetKind::Entries, "m"),
            ("full(f)", TargetKind::Full, "f"),
            ("\"Caps\"", TargetKind::Simple, "Caps"),
            ("keys(\"Map\")", TargetKind::Keys, "Map"),
        ] {
            assert_eq!(
                IndexMetadata::parse_target(text),
                (kind, column.to_string()),
                "{text}"
            );
            let ix = IndexMetadata {
                name: "i".into(),
                column: column.into(),
                target: kind,
                custom_class: None,
                options: BTreeMap::new(),
            };
            assert_eq!(ix.target_string(), text);
        }
    }

    #[test]
    fn which_restrictions_an_index_answers() {
        let legacy = IndexMetadata {
            name: "i".into(),
            column: "v".into(),
            target: TargetKind::Simple,
            custom_class: None,
            options: BTreeMap::new(),
        };
        let sai = IndexMetadata {
            custom_class: Some("sai".into()),
            ..legacy.clone()
        };
        assert!(legacy.supports(Operator::Eq, false, &CqlType::Int));
        assert!(!legacy.supports(Operator::Gt, false, &CqlType::Int));
        assert!(sai.supports(Operator::Gt, false, &CqlType::Int));
        assert!(
            !sai.supports(Operator::Gt, false, &CqlType::Text),
            "SAI compares text by equality only"
        );
        let entries = IndexMetadata {
            target: TargetKind::Entries,
            ..legacy.clone()
        };
        assert!(entries.supports(Operator::Eq, true, &CqlType::Int));
        assert!(!entries.supports(Operator::Eq, false, &CqlType::Int));
        let keys = IndexMetadata {
            target: TargetKind::Keys,
            ..legacy
        };
        assert!(keys.supports(Operator::ContainsKey, false, &CqlType::Int));
        assert!(!keys.supports(Operator::Contains, false, &CqlType::Int));
    }
}
