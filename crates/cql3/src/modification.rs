//! INSERT, UPDATE and DELETE: from statement to mutations.

use crate::error::{Error, Result};
use crate::restrictions::{analyse, Purpose};
use crate::terms::{Eval, Val};
use bytes::Bytes;
use sibyl_cql::{AssignOp, ColumnTarget, Delete, Insert, Term, Update, UsingClause};
use sibyl_db::cells::{add_cells, collection_cells, list_path, set_column, WriteParams};
use sibyl_db::{
    BoundKind, Cell, ClusteringKey, ColumnData, DecoratedKey, DeletionTime, LivenessInfo, Mutation,
    Partition, RangeTombstone, Row, NO_DELETION_TIME,
};
use sibyl_schema::schema::{ColumnKind, ColumnMetadata, TableMetadata};
use sibyl_types::{value, CqlType};
use std::collections::BTreeMap;
use std::sync::Arc;

/// Maximum TTL, as Cassandra's `Attributes.MAX_TTL` (20 years).
pub const MAX_TTL: i64 = 630_720_000;

/// Resolves USING TIMESTAMP / TTL against defaults.
pub fn write_params(
    table: &TableMetadata,
    using: &UsingClause,
    ev: &Eval,
    default_ts: i64,
    now: i32,
) -> Result<WriteParams> {
    if table.is_counter && using.timestamp.is_some() {
        return Err(Error::Invalid(
            "Cannot provide custom timestamp for counter updates".into(),
        ));
    }
    if table.is_counter && using.ttl.is_some() {
        return Err(Error::Invalid(
            "Cannot provide custom TTL for counter updates".into(),
        ));
    }
    let timestamp = match &using.timestamp {
        Some(t) => match ev.value(t, &CqlType::Bigint, "[timestamp]")? {
            Val::Set(b) => {
                let a: [u8; 8] = b
                    .as_ref()
                    .try_into()
                    .map_err(|_| Error::Invalid("Invalid timestamp value".into()))?;
                let ts = i64::from_be_bytes(a);
                if ts == i64::MIN {
                    return Err(Error::Invalid(format!("Invalid timestamp value: {ts}")));
                }
                ts
            }
            Val::Null => return Err(Error::Invalid("Invalid null value of timestamp".into())),
            Val::Unset => default_ts,
        },
        None => default_ts,
    };
    let ttl = match &using.ttl {
        Some(t) => match ev.value(t, &CqlType::Int, "[ttl]")? {
            Val::Set(b) => {
                let a: [u8; 4] = b
                    .as_ref()
                    .try_into()
                    .map_err(|_| Error::Invalid("Invalid TTL value".into()))?;
                let ttl = i32::from_be_bytes(a) as i64;
                if ttl < 0 {
                    return Err(Error::Invalid(format!(
                        "A TTL must be greater or equal to 0, but was {ttl}"
                    )));
                }
                if ttl > MAX_TTL {
                    return Err(Error::Invalid(format!(
                        "ttl is too large. requested ({ttl}) maximum ({MAX_TTL})"
                    )));
                }
                ttl as i32
            }
            Val::Null => return Err(Error::Invalid("Invalid null value of TTL".into())),
            Val::Unset => table.params.default_time_to_live,
        },
        None => table.params.default_time_to_live,
    };
    // a local deletion time is a signed 32-bit count of seconds: an
    // expiration past it is refused (Cassandra's default REJECT policy)
    if ttl > 0 && i64::from(ttl) + i64::from(now) > MAX_DELETION_TIME {
        let default = if using.ttl.is_none() { "default " } else { "" };
        return Err(Error::Invalid(format!(
            "Request on table {}.{} with {default}ttl of {ttl} seconds exceeds maximum supported expiration date of 2038-01-19T03:14:06+00:00. In order to avoid this use a lower TTL, change the expiration date overflow policy or upgrade to a version where this limitation is fixed. See CASSANDRA-14092 and CASSANDRA-14227 for more details.",
            table.keyspace, table.name
        )));
    }
    Ok(WriteParams {
        timestamp,
        ttl,
        now,
    })
}

/// The latest local deletion time a cell may have (Cassandra's
/// `MAX_DELETION_TIME_2038_LEGACY_CAP`, 2038-01-19T03:14:06Z).
pub const MAX_DELETION_TIME: i64 = i32::MAX as i64 - 1;

/// A term as Cassandra shows it in messages.
fn term_text(t: &Term) -> String {
    sibyl_cql::term_text(t)
}

fn undefined(table: &TableMetadata, c: &str) -> Error {
    Error::Invalid(format!(
        "Undefined column name {c} in table {}",
        table.display_name()
    ))
}

fn partition_mutation(table: &TableMetadata, key: &Bytes, update: Partition) -> Mutation {
    Mutation {
        table_id: table.id,
        key: DecoratedKey::new(key.clone()),
        update,
    }
}

fn check_key_size(key: &Bytes) -> Result<()> {
    if key.len() > u16::MAX as usize {
        return Err(Error::Invalid(format!(
            "Key length of {} is longer than maximum of {}",
            key.len(),
            u16::MAX
        )));
    }
    if key.is_empty() {
        return Err(Error::Invalid("Key may not be empty".into()));
    }
    Ok(())
}

/// INSERT: one mutation (row with primary key liveness).
pub fn insert(
    table: &Arc<TableMetadata>,
    ins: &Insert,
    ev: &Eval,
    default_ts: i64,
    now: i32,
) -> Result<Vec<Mutation>> {
    let wp = write_params(table, &ins.using, ev, default_ts, now)?;
    let Some(json) = &ins.json else {
        return insert_values(table, ins, ev, wp, now, false);
    };
    // Cassandra's INSERT JSON names every column, a static-compact table's
    // hidden clustering column too, which no statement may name
    if let Some(hidden) = table
        .compact
        .as_ref()
        .and_then(|c| c.hidden_clustering.as_ref())
    {
        return Err(undefined(table, hidden));
    }
    // INSERT JSON: every column gets the document's value, or null (or is
    // left unset with DEFAULT UNSET) when the document does not name it
    let text = match ev.value(json, &CqlType::Text, "[json]")? {
        Val::Set(b) => String::from_utf8_lossy(&b).into_owned(),
        _ => return Err(Error::Invalid("Got null for INSERT JSON values".into())),
    };
    let values = json_values(table, &text, ins.json_default_unset)?;
    let columns: Vec<String> = table.columns.iter().map(|c| c.name.clone()).collect();
    let markers = (0..columns.len())
        .map(|index| Term::Bind(sibyl_cql::BindMarker { index, name: None }))
        .collect();
    let synthetic = Insert {
        columns,
        values: markers,
        json: None,
        ..ins.clone()
    };
    let bound = crate::terms::Bindings { values: &values };
    insert_values(table, &synthetic, &Eval { bindings: &bound }, wp, now, true)
}

/// The values of an INSERT JSON document, one per table column in order.
fn json_values(
    table: &TableMetadata,
    text: &str,
    default_unset: bool,
) -> Result<Vec<sibyl_protocol::Value>> {
    use sibyl_types::json::{unquote_identifier, Json};
    let doc = Json::parse(text).map_err(|e| {
        Error::Invalid(format!(
            "Could not decode JSON string as a map: {e}. (String was: {text})"
        ))
    })?;
    let Json::Object(members) = doc else {
        return Err(Error::Invalid(format!(
            "Could not decode JSON string as a map: expected an object. (String was: {text})"
        )));
    };
    let absent = if default_unset {
        sibyl_protocol::Value::Unset
    } else {
        sibyl_protocol::Value::Null
    };
    let mut values = vec![absent; table.columns.len()];
    for (name, j) in &members {
        let col = unquote_identifier(name);
        let i = table.column_index(&col).ok_or_else(|| {
            Error::Invalid(format!(
                "JSON values map contains unrecognized column: {col}"
            ))
        })?;
        let c = &table.columns[i];
        values[i] = match j {
            Json::Null => sibyl_protocol::Value::Null,
            j => {
                let j = match (j, c.typ.unfrozen()) {
                    // a collection, tuple or UDT may come as a string holding its JSON
                    (
                        Json::String(s),
                        CqlType::List(_)
                        | CqlType::Set(_)
                        | CqlType::Map(..)
                        | CqlType::Tuple(_)
                        | CqlType::Udt(_),
                    ) => Json::parse(s).map_err(|e| {
                        Error::Invalid(format!(
                            "Error decoding JSON value for {}: Error decoding JSON string: {e}",
                            c.name
                        ))
                    })?,
                    _ => j.clone(),
                };
                let v = c.typ.from_json(&j).map_err(|e| {
                    Error::Invalid(format!("Error decoding JSON value for {}: {e}", c.name))
                })?;
                sibyl_protocol::Value::Set(v)
            }
        };
    }
    for c in table
        .partition_key()
        .iter()
        .chain(table.clustering().iter())
    {
        let i = table.column_index(&c.name).unwrap_or(0);
        if !matches!(values[i], sibyl_protocol::Value::Set(_)) {
            return Err(Error::Invalid(format!(
                "Invalid null value in condition for column {}",
                c.name
            )));
        }
    }
    Ok(values)
}

/// INSERT with columns and values.
fn insert_values(
    table: &Arc<TableMetadata>,
    ins: &Insert,
    ev: &Eval,
    wp: WriteParams,
    now: i32,
    json: bool,
) -> Result<Vec<Mutation>> {
    if ins.columns.len() != ins.values.len() {
        return Err(Error::Invalid("Unmatched column names/values".into()));
    }
    let mut seen = std::collections::HashSet::new();
    for c in &ins.columns {
        if !seen.insert(c) {
            return Err(Error::Invalid(
                "The column names contains duplicates".into(),
            ));
        }
        if table.column(c).is_none() {
            return Err(undefined(table, c));
        }
    }
    let find = |name: &str| ins.columns.iter().position(|c| c == name);
    let mut pk = Vec::new();
    let mut missing = Vec::new();
    for c in table.partition_key() {
        match find(&c.name) {
            Some(i) => pk.push(key_value(ev, &ins.values[i], c)?),
            None => missing.push(c.name.clone()),
        }
    }
    if !missing.is_empty() {
        return Err(Error::Invalid(format!(
            "Some partition key parts are missing: {}",
            missing.join(", ")
        )));
    }
    let mut ck = Vec::new();
    for c in table.clustering() {
        match find(&c.name) {
            Some(i) => ck.push(key_value(ev, &ins.values[i], c)?),
            None => missing.push(c.name.clone()),
        }
    }
    let only_static = ins.columns.iter().all(|c| {
        table
            .column(c)
            .map(|c| c.kind != ColumnKind::Regular && c.kind != ColumnKind::Clustering)
            .unwrap_or(false)
    }) && ins.columns.iter().any(|c| {
        table
            .column(c)
            .map(|c| c.kind == ColumnKind::Static)
            .unwrap_or(false)
    });
    if only_static && ck.is_empty() {
        missing.clear();
    }
    // a dense COMPACT STORAGE table takes a row under a clustering prefix
    // (its missing clustering columns read as null)
    if table.is_dense() && !ck.is_empty() {
        let given: Vec<bool> = table
            .clustering()
            .iter()
            .map(|c| find(&c.name).is_some())
            .collect();
        if let Some(gap) = given.iter().position(|g| !g) {
            if let Some(after) = given[gap..].iter().position(|g| *g) {
                return Err(Error::Invalid(format!(
                    "PRIMARY KEY column \"{}\" cannot be restricted as preceding column \"{}\" is not restricted",
                    table.clustering()[gap + after].name,
                    table.clustering()[gap].name
                )));
            }
        }
        missing.clear();
    }
    if !missing.is_empty() {
        return Err(Error::Invalid(format!(
            "Some clustering keys are missing: {}",
            missing.join(", ")
        )));
    }
    if let Some(cs) = &table.compact {
        // a static-compact row is its declared (static) columns: naming
        // none of them leaves Cassandra's hidden clustering column unset
        if let Some(hidden) = &cs.hidden_clustering {
            if ins
                .columns
                .iter()
                .all(|c| table.column(c).is_some_and(|c| c.kind.is_primary_key()))
            {
                return Err(Error::Invalid(format!(
                    "Some clustering keys are missing: {hidden}"
                )));
            }
        }
        if cs.hidden_value.is_none() {
            if let Some(value) = table.regular_and_static().first() {
                if !ins.columns.contains(&value.name) {
                    return Err(Error::Invalid(format!(
                        "Column {} is mandatory for this COMPACT STORAGE table",
                        value.name
                    )));
                }
            }
        }
    }
    if table.is_counter {
        return Err(Error::Invalid(
            "INSERT statements are not allowed on counter tables, use UPDATE instead".into(),
        ));
    }
    let key = sibyl_db::cells::make_partition_key(&pk);
    check_key_size(&key)?;
    // a COMPACT STORAGE row has no row marker: it lives while a cell does
    // (a dense table without a value column writes the marker in place of
    // Cassandra's empty value cell, which INSERT JSON writes null)
    let marker = table
        .compact
        .as_ref()
        .is_none_or(|c| !json && c.hidden_value.as_ref().is_some_and(|(_, t)| t == "empty"));
    let mut row = Row {
        liveness: marker.then_some(LivenessInfo {
            timestamp: wp.timestamp,
            ttl: wp.ttl,
            local_expiration_time: if wp.ttl > 0 {
                now.saturating_add(wp.ttl)
            } else {
                NO_DELETION_TIME
            },
        }),
        ..Default::default()
    };
    let mut static_row = Row::default();
    for (c, term) in ins.columns.iter().zip(ins.values.iter()) {
        let Some(col) = table.column(c) else { continue };
        if col.kind.is_primary_key() {
            continue;
        }
        let v = ev.value(term, &col.typ, c)?;
        if v == Val::Unset {
            continue;
        }
        let target = if col.kind == ColumnKind::Static {
            &mut static_row
        } else {
            &mut row
        };
        set_column(target, c, &col.typ, v.bytes(), &wp).map_err(Error::Invalid)?;
    }
    let mut p = Partition::new();
    if only_static && ck.is_empty() {
        static_row.liveness = row.liveness;
        p.static_row = Some(static_row);
        return Ok(vec![partition_mutation(table, &key, p)]);
    }
    if !static_row.cells.is_empty() {
        p.static_row = Some(static_row);
    }
    if table.clustering_count == 0 {
        // the row lives in the single, empty clustering
        p.rows.insert(
            ClusteringKey::row(Vec::new(), table.comparator.clone()),
            row,
        );
    } else {
        p.rows
            .insert(ClusteringKey::row(ck, table.comparator.clone()), row);
    }
    Ok(vec![partition_mutation(table, &key, p)])
}

fn key_value(ev: &Eval, term: &Term, c: &ColumnMetadata) -> Result<Bytes> {
    match ev.value(term, &c.typ, &c.name)? {
        Val::Set(b) => {
            if b.is_empty() && c.kind == ColumnKind::PartitionKey {
                return Err(Error::Invalid("Key may not be empty".into()));
            }
            Ok(b)
        }
        Val::Null => Err(Error::Invalid(format!(
            "Invalid null value in condition for column {}",
            c.name
        ))),
        Val::Unset => Err(Error::Invalid(format!(
            "Invalid unset value for column {}",
            c.name
        ))),
    }
}

/// Values read before writing, for list operations by index or removal
/// (current list cells of a row: path and value, in order).
pub type ListState = Vec<(Bytes, Bytes)>;

/// UPDATE. `read_list` reads the current cells of a list column in a row.
pub fn update(
    table: &Arc<TableMetadata>,
    up: &Update,
    ev: &Eval,
    default_ts: i64,
    now: i32,
    read_list: &dyn Fn(&Bytes, &[Bytes], &str) -> ListState,
) -> Result<Vec<Mutation>> {
    for a in &up.assignments {
        let c = a.target.column();
        match table.column(c) {
            None => return Err(undefined(table, c)),
            Some(col) if col.kind.is_primary_key() => {
                return Err(Error::Invalid(format!(
                    "PRIMARY KEY part {c} found in SET part"
                )));
            }
            _ => {}
        }
    }
    let only_static = up.assignments.iter().all(|a| {
        table
            .column(a.target.column())
            .map(|c| c.kind == ColumnKind::Static)
            .unwrap_or(false)
    });
    let r = analyse(
        table,
        &up.where_clause,
        ev,
        if only_static {
            Purpose::Delete
        } else {
            Purpose::Update
        },
    )?;
    if only_static && r.has_clustering_restriction && up.conditions == sibyl_cql::Conditions::None {
        return Err(Error::Invalid("Invalid restrictions on clustering columns since the UPDATE statement modifies only static columns".into()));
    }
    let keys = r.partition_keys.clone().unwrap_or_default();
    let clusterings: Vec<Vec<Bytes>> = if table.clustering_count == 0 {
        vec![Vec::new()]
    } else {
        match r.clusterings.clone() {
            Some(c) => c,
            None if only_static && !r.has_clustering_restriction => Vec::new(),
            None => {
                return Err(Error::Invalid(format!(
                    "Some clustering keys are missing: {}",
                    table
                        .clustering()
                        .iter()
                        .map(|c| c.name.clone())
                        .collect::<Vec<_>>()
                        .join(", ")
                )))
            }
        }
    };
    let wp = write_params(table, &up.using, ev, default_ts, now)?;
    let mut out = Vec::new();
    for key in &keys {
        check_key_size(key)?;
        let mut p = Partition::new();
        let mut static_row = Row::default();
        let mut rows: Vec<(Vec<Bytes>, Row)> = clusterings
            .iter()
            .map(|c| (c.clone(), Row::default()))
            .collect();
        for a in &up.assignments {
            let Some(col) = table.column(a.target.column()) else {
                continue;
            };
            if col.kind == ColumnKind::Static {
                apply_assignment(
                    table,
                    col,
                    &a.target,
                    &a.op,
                    ev,
                    &wp,
                    &mut static_row,
                    key,
                    &[],
                    read_list,
                )?;
            } else {
                for (ck, row) in rows.iter_mut() {
                    apply_assignment(
                        table, col, &a.target, &a.op, ev, &wp, row, key, ck, read_list,
                    )?;
                }
            }
        }
        if !static_row.cells.is_empty() {
            p.static_row = Some(static_row);
        }
        for (ck, row) in rows {
            if !row.cells.is_empty() {
                p.rows
                    .insert(ClusteringKey::row(ck, table.comparator.clone()), row);
            }
        }
        if !p.is_empty() {
            out.push(partition_mutation(table, key, p));
        }
    }
    Ok(out)
}

#[allow(clippy::too_many_arguments)]
fn apply_assignment(
    table: &TableMetadata,
    col: &ColumnMetadata,
    target: &ColumnTarget,
    op: &AssignOp,
    ev: &Eval,
    wp: &WriteParams,
    row: &mut Row,
    key: &Bytes,
    ck: &[Bytes],
    read_list: &dyn Fn(&Bytes, &[Bytes], &str) -> ListState,
) -> Result<()> {
    let name = col.name.as_str();
    let t = &col.typ;
    if t.is_counter() {
        let (term, negate) = match op {
            AssignOp::Append(term) => (term, false),
            AssignOp::Remove(term) => (term, true),
            AssignOp::Set(_) => {
                return Err(Error::Invalid(format!("Cannot set the value of counter column {name} (counters can only be incremented/decremented, not set)")))
            }
            AssignOp::Prepend(term) => {
                // Cassandra's own rendering of `c = 5 + c` on a counter
                return Err(Error::Invalid(format!("Invalid operation ({name} = {} - {name}) for non list column {name}", term_text(term))));
            }
        };
        let delta = match ev.value(term, t, name)? {
            Val::Unset => return Ok(()),
            Val::Null => {
                return Err(Error::Invalid(
                    "Invalid null value for counter increment/decrement".into(),
                ))
            }
            Val::Set(b) => {
                let a: [u8; 8] = b
                    .as_ref()
                    .try_into()
                    .map_err(|_| Error::Invalid(format!("Invalid counter increment for {name}")))?;
                let d = i64::from_be_bytes(a);
                if negate {
                    if d == i64::MIN {
                        return Err(Error::Invalid("The negation of -9223372036854775808 overflows supported counter precision (signed 8 bytes integer)".into()));
                    }
                    -d
                } else {
                    d
                }
            }
        };
        let prior = match row.cells.get(name) {
            Some(ColumnData::Counter(c)) => c
                .value
                .as_deref()
                .and_then(sibyl_db::counter::as_delta)
                .unwrap_or(0),
            _ => 0,
        };
        let cell = Cell::live(
            wp.timestamp,
            sibyl_db::counter::delta(prior.wrapping_add(delta)),
        );
        row.cells.insert(name, ColumnData::Counter(cell));
        return Ok(());
    }
    match (target, op) {
        (ColumnTarget::Column(_), AssignOp::Set(term)) => {
            let v = ev.value(term, t, name)?;
            if v != Val::Unset {
                set_column(row, name, t, v.bytes(), wp).map_err(Error::Invalid)?;
            }
        }
        (ColumnTarget::Column(_), AssignOp::Append(term))
        | (ColumnTarget::Column(_), AssignOp::Prepend(term)) => {
            if !t.is_multi_cell() {
                let what = if t.is_collection() {
                    "frozen collection"
                } else {
                    "non counter"
                };
                return Err(Error::Invalid(format!(
                    "Invalid operation ({name} = {name} + {}) for {what} column {name}",
                    term_text(term)
                )));
            }
            if let (CqlType::Set(_), Term::List(_)) = (t, term) {
                return Err(Error::Invalid(format!(
                    "Unexpected receiver type '{t}'; only list and vector are expected"
                )));
            }
            if let (CqlType::Map(..), Term::Map(pairs)) = (t, term) {
                if pairs.iter().any(|(_, v)| matches!(v, Term::Null)) {
                    return Err(Error::Invalid(format!(
                        "Value for a map addition has to be a map, but was: '{}'",
                        term_text(term)
                    )));
                }
            }
            let v = ev.value(term, t, name)?;
            let Val::Set(b) = v else { return Ok(()) };
            let mut cells = collection_cells(t, &b, wp).map_err(Error::Invalid)?;
            if matches!(op, AssignOp::Prepend(_)) {
                if !matches!(t, CqlType::List(_)) {
                    return Err(Error::Invalid(format!(
                        "Invalid operation ({name} = {} + {name}) for non list column {name}",
                        term_text(term)
                    )));
                }
                // prepended elements sort before every existing one: timeuuids from the distant past
                let elems: Vec<Cell> = cells.into_values().collect();
                cells = BTreeMap::new();
                let base = -(sibyl_types::timeuuid::timestamp_micros_now() / 1000);
                for (i, c) in elems.into_iter().enumerate() {
                    let u =
                        sibyl_types::timeuuid::min_timeuuid(base - 1_000_000_000_000 + i as i64);
                    let mut path = u.as_bytes().to_vec();
                    // make it unique
                    let r: [u8; 8] = rand::random();
                    path[8..16].copy_from_slice(&r);
                    path[8] = (path[8] & 0x3f) | 0x80;
                    cells.insert(Bytes::from(path), c);
                }
            }
            add_cells(row, name, cells);
        }
        (ColumnTarget::Column(_), AssignOp::Remove(term)) => {
            if !t.is_multi_cell() {
                let what = if t.is_collection() {
                    "frozen collection"
                } else {
                    "non counter"
                };
                return Err(Error::Invalid(format!(
                    "Invalid operation ({name} = {name} - {}) for {what} column {name}",
                    term_text(term)
                )));
            }
            let rt = match t {
                CqlType::Map(k, _) => CqlType::Set(k.clone()),
                other => other.clone(),
            };
            let Val::Set(b) = ev.value(term, &rt, name)? else {
                return Ok(());
            };
            let mut cells = BTreeMap::new();
            match t {
                CqlType::Set(_) => {
                    for e in value::deserialize_collection(&b)
                        .map_err(|e| Error::Invalid(e.to_string()))?
                    {
                        cells.insert(e, wp.tombstone());
                    }
                }
                CqlType::Map(_, _) => {
                    // map - set of keys
                    for e in value::deserialize_collection(&b)
                        .map_err(|e| Error::Invalid(e.to_string()))?
                    {
                        cells.insert(e, wp.tombstone());
                    }
                }
                CqlType::List(et) => {
                    let remove = value::deserialize_collection(&b)
                        .map_err(|e| Error::Invalid(e.to_string()))?;
                    for (path, v) in read_list(key, ck, name) {
                        if remove
                            .iter()
                            .any(|r| et.compare(r, &v) == std::cmp::Ordering::Equal)
                        {
                            cells.insert(path, wp.tombstone());
                        }
                    }
                }
                _ => {
                    return Err(Error::Invalid(format!(
                        "Invalid operation for column {name}"
                    )))
                }
            }
            add_cells(row, name, cells);
        }
        (ColumnTarget::Element(_, idx), AssignOp::Set(term)) => match t {
            CqlType::Map(kt, vt) => {
                let k = match ev.value(idx, kt, name)? {
                    Val::Set(k) => k,
                    _ => return Err(Error::Invalid("Invalid null value for map key".into())),
                };
                let cell = match ev.value(term, vt, &format!("value({name})"))? {
                    Val::Set(v) => wp.cell(v),
                    Val::Null => wp.tombstone(),
                    Val::Unset => return Ok(()),
                };
                let mut cells = BTreeMap::new();
                cells.insert(k, cell);
                add_cells(row, name, cells);
            }
            CqlType::List(et) => {
                let i = match ev.value(idx, &CqlType::Int, name)? {
                    Val::Set(b) if b.len() == 4 => i32::from_be_bytes([b[0], b[1], b[2], b[3]]),
                    _ => return Err(Error::Invalid("Invalid null value for list index".into())),
                };
                let current = read_list(key, ck, name);
                if i < 0 || i as usize >= current.len() {
                    return Err(Error::Invalid(format!(
                        "List index {i} out of bound, list has size {}",
                        current.len()
                    )));
                }
                let path = current[i as usize].0.clone();
                let cell = match ev.value(term, et, name)? {
                    Val::Set(v) => wp.cell(v),
                    Val::Null => wp.tombstone(),
                    Val::Unset => return Ok(()),
                };
                let mut cells = BTreeMap::new();
                cells.insert(path, cell);
                add_cells(row, name, cells);
            }
            _ => {
                let what = match t.unfrozen() {
                    _ if t.is_collection() && !t.is_multi_cell() => "frozen collection".to_string(),
                    CqlType::Set(_) => "set".to_string(),
                    _ => "non list/map".to_string(),
                };
                return Err(Error::Invalid(format!(
                    "Invalid operation ({name}[{}] = {}) for {what} column {name}",
                    term_text(idx),
                    term_text(term)
                )));
            }
        },
        (ColumnTarget::Field(_, field), AssignOp::Set(term)) => {
            if matches!(t.unfrozen(), CqlType::Udt(_)) && !t.is_multi_cell() {
                return Err(Error::Invalid(format!(
                    "Invalid operation ({name}.{field} = {}) for frozen UDT column {name}",
                    term_text(term)
                )));
            }
            let CqlType::Udt(u) = t else {
                return Err(Error::Invalid(format!(
                    "Invalid operation ({name}.{field} = {}) for non-UDT column {name}",
                    term_text(term)
                )));
            };
            let Some(fi) = u.fields.iter().position(|(n, _)| n == field) else {
                return Err(Error::Invalid(format!(
                    "UDT column {name} does not have a field named {field}"
                )));
            };
            let cell = match ev.value(term, &u.fields[fi].1, name)? {
                Val::Set(v) => wp.cell(v),
                Val::Null => wp.tombstone(),
                Val::Unset => return Ok(()),
            };
            let mut cells = BTreeMap::new();
            cells.insert(Bytes::copy_from_slice(&(fi as u16).to_be_bytes()), cell);
            add_cells(row, name, cells);
        }
        _ => {
            return Err(Error::Invalid(format!(
                "Invalid operation on column {name}"
            )))
        }
    }
    let _ = (table, list_path);
    Ok(())
}

/// DELETE: cells, rows, ranges or whole partitions.
pub fn delete(
    table: &Arc<TableMetadata>,
    del: &Delete,
    ev: &Eval,
    default_ts: i64,
    now: i32,
    read_list: &dyn Fn(&Bytes, &[Bytes], &str) -> ListState,
) -> Result<Vec<Mutation>> {
    if del.using.ttl.is_some() {
        return Err(Error::Invalid(
            "Cannot provide custom TTL for DELETE statement".into(),
        ));
    }
    for c in &del.columns {
        match table.column(c.column()) {
            None => return Err(undefined(table, c.column())),
            Some(col) if col.kind.is_primary_key() => {
                return Err(Error::Invalid(format!(
                    "Invalid identifier {} for deletion (should not be a PRIMARY KEY part)",
                    c.column()
                )))
            }
            _ => {}
        }
    }
    let r = analyse(table, &del.where_clause, ev, Purpose::Delete)?;
    // a static-compact table's row is Cassandra's static row under a hidden
    // clustering column: a conditional delete of the whole row leaves that
    // column unrestricted
    if table.is_static_compact()
        && del.columns.is_empty()
        && del.conditions != sibyl_cql::Conditions::None
    {
        return Err(Error::Invalid("DELETE statements must restrict all PRIMARY KEY columns with equality relations in order to delete non static columns".into()));
    }
    let wp = write_params(table, &del.using, ev, default_ts, now)?;
    let deletion = DeletionTime {
        marked_for_delete_at: wp.timestamp,
        local_deletion_time: now,
    };
    let keys = r.partition_keys.clone().unwrap_or_default();
    let mut out = Vec::new();
    for key in &keys {
        check_key_size(key)?;
        let mut p = Partition::new();
        if del.columns.is_empty() {
            match (&r.clusterings, &r.slices) {
                (Some(cks), _) if table.clustering_count > 0 => {
                    for ck in cks {
                        let row = Row {
                            deletion: Some(deletion),
                            ..Default::default()
                        };
                        p.rows.insert(
                            ClusteringKey::row(ck.clone(), table.comparator.clone()),
                            row,
                        );
                    }
                }
                (_, Some(slices)) => {
                    for (s, e) in slices {
                        p.range_tombstones.push(RangeTombstone {
                            start: s.clone(),
                            end: e.clone(),
                            deletion,
                        });
                    }
                }
                _ => p.deletion = deletion,
            }
        } else {
            let only_static = del.columns.iter().all(|c| {
                table
                    .column(c.column())
                    .map(|c| c.kind == ColumnKind::Static)
                    .unwrap_or(false)
            });
            let cks: Vec<Vec<Bytes>> = if table.clustering_count == 0 {
                vec![Vec::new()]
            } else {
                match &r.clusterings {
                    Some(c) => c.clone(),
                    None if only_static => Vec::new(),
                    None => {
                        return Err(Error::Invalid(format!(
                            "Some clustering keys are missing: {}",
                            table
                                .clustering()
                                .iter()
                                .map(|c| c.name.clone())
                                .collect::<Vec<_>>()
                                .join(", ")
                        )))
                    }
                }
            };
            let mut static_row = Row::default();
            let mut rows: Vec<(Vec<Bytes>, Row)> =
                cks.into_iter().map(|c| (c, Row::default())).collect();
            for target in &del.columns {
                let Some(col) = table.column(target.column()) else {
                    continue;
                };
                let name = sibyl_db::data::ColumnName::new(&col.name);
                let apply = |row: &mut Row, ck: &[Bytes]| -> Result<()> {
                    match target {
                        ColumnTarget::Column(_) => {
                            if col.typ.is_multi_cell() {
                                row.cells.insert(
                                    name,
                                    ColumnData::Complex {
                                        deletion,
                                        cells: BTreeMap::new(),
                                    },
                                );
                            } else if col.typ.is_counter() {
                                row.cells.insert(name, ColumnData::Counter(wp.tombstone()));
                            } else {
                                row.cells.insert(name, ColumnData::Simple(wp.tombstone()));
                            }
                        }
                        ColumnTarget::Element(_, idx) => {
                            let path = match &col.typ {
                                CqlType::Map(kt, _) => match ev.value(idx, kt, &col.name)? {
                                    Val::Set(k) => k,
                                    _ => {
                                        return Err(Error::Invalid(
                                            "Invalid null value for map key".into(),
                                        ))
                                    }
                                },
                                CqlType::Set(et) => match ev.value(idx, et, &col.name)? {
                                    Val::Set(k) => k,
                                    _ => {
                                        return Err(Error::Invalid(
                                            "Invalid null value for set element".into(),
                                        ))
                                    }
                                },
                                CqlType::List(_) => {
                                    let i = match ev.value(idx, &CqlType::Int, &col.name)? {
                                        Val::Set(b) if b.len() == 4 => {
                                            i32::from_be_bytes([b[0], b[1], b[2], b[3]])
                                        }
                                        _ => {
                                            return Err(Error::Invalid(
                                                "Invalid null value for list index".into(),
                                            ))
                                        }
                                    };
                                    let current = read_list(key, ck, &col.name);
                                    if i < 0 || i as usize >= current.len() {
                                        return Err(Error::Invalid(format!(
                                            "List index {i} out of bound, list has size {}",
                                            current.len()
                                        )));
                                    }
                                    current[i as usize].0.clone()
                                }
                                _ => {
                                    return Err(Error::Invalid(format!(
                                        "Invalid deletion operation for non collection column {}",
                                        col.name
                                    )))
                                }
                            };
                            let mut cells = BTreeMap::new();
                            cells.insert(path, wp.tombstone());
                            add_cells(row, &col.name, cells);
                        }
                        ColumnTarget::Field(_, field) => {
                            let CqlType::Udt(u) = &col.typ else {
                                return Err(Error::Invalid(format!(
                                    "Invalid deletion operation for non-UDT column {}",
                                    col.name
                                )));
                            };
                            let Some(fi) = u.fields.iter().position(|(n, _)| n == field) else {
                                return Err(Error::Invalid(format!(
                                    "UDT column {} does not have a field named {field}",
                                    col.name
                                )));
                            };
                            let mut cells = BTreeMap::new();
                            cells.insert(
                                Bytes::copy_from_slice(&(fi as u16).to_be_bytes()),
                                wp.tombstone(),
                            );
                            add_cells(row, &col.name, cells);
                        }
                    }
                    Ok(())
                };
                if col.kind == ColumnKind::Static {
                    apply(&mut static_row, &[])?;
                } else {
                    for (ck, row) in rows.iter_mut() {
                        apply(row, ck)?;
                    }
                }
            }
            if !static_row.cells.is_empty() {
                p.static_row = Some(static_row);
            }
            for (ck, row) in rows {
                p.rows
                    .insert(ClusteringKey::row(ck, table.comparator.clone()), row);
            }
        }
        out.push(partition_mutation(table, key, p));
    }
    let _ = BoundKind::Row;
    Ok(out)
}
