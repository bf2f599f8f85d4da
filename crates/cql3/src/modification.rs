//! INSERT, UPDATE and DELETE: from statement to mutations.

use crate::error::{Error, Result};
use crate::restrictions::{analyse, check_clustering_prefix, preceding_not_restricted, Purpose};
use crate::terms::{Eval, Val};
use bytes::Bytes;
use sibyl_cql::{AssignOp, ColumnTarget, Delete, Insert, Memo, Term, Update, UsingClause};
use sibyl_db::cells::{
    add_cells, collection_cells, list_path, set_column, set_named_column, WriteParams,
};
use sibyl_db::{
    BoundKind, Cell, ClusteringKey, ColumnData, ColumnName, DecoratedKey, DeletionTime,
    LivenessInfo, Mutation, Partition, RangeTombstone, Row, NO_DELETION_TIME,
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
                    return Err(Error::Invalid(
                        "Out of bound timestamp, must be in [-9223372036854775807, 9223372036854775807]".into(),
                    ));
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
            // a null TTL is no TTL (Cassandra 5.0's `Attributes.getTimeToLive`)
            Val::Null => 0,
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
        "Undefined column name {} in table {}",
        sibyl_types::ident::maybe_quote(c),
        table.display_name()
    ))
}

fn partition_mutation(table: &TableMetadata, key: Bytes, update: Partition) -> Mutation {
    Mutation {
        table_id: table.id,
        key: DecoratedKey::new(key),
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
    memo: &Memo,
) -> Result<Vec<Mutation>> {
    if table.is_counter {
        return Err(Error::Invalid(
            "INSERT statements are not allowed on counter tables, use UPDATE instead".into(),
        ));
    }
    let wp = write_params(table, &ins.using, ev, default_ts, now)?;
    let Some(json) = &ins.json else {
        return insert_values(table, ins, ev, wp, now, false, memo);
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
    insert_values(
        table,
        &synthetic,
        &Eval { bindings: &bound },
        wp,
        now,
        true,
        memo,
    )
}

/// The values of an INSERT JSON document, one per table column in order.
fn json_values(
    table: &TableMetadata,
    text: &str,
    default_unset: bool,
) -> Result<Vec<sibyl_protocol::Value>> {
    use sibyl_types::json::{unquote_identifier, Json};
    let end = jackson_map(text).map_err(|e| {
        Error::Invalid(format!(
            "Could not decode JSON string as a map: {e}. (String was: {text})"
        ))
    })?;
    let doc = Json::parse(&text[..end]).map_err(|e| {
        Error::Invalid(format!(
            "Could not decode JSON string as a map: {e}. (String was: {text})"
        ))
    })?;
    if doc == Json::Null {
        return Err(Error::Invalid("Got null for INSERT JSON values".into()));
    }
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
                    // a duration's own error is Cassandra's InvalidRequest,
                    // not a MarshalException: it comes unwrapped
                    if matches!(c.typ.unfrozen(), CqlType::Duration) && matches!(j, Json::String(_))
                    {
                        Error::Invalid(e.to_string())
                    } else {
                        Error::Invalid(format!("Error decoding JSON value for {}: {e}", c.name))
                    }
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

/// INSERT with columns and values. The statement's checks against the
/// table are its [`InsertPlan`]: made on the first execution of a prepared
/// statement and kept in its memo for that table.
fn insert_values(
    table: &Arc<TableMetadata>,
    ins: &Insert,
    ev: &Eval,
    wp: WriteParams,
    now: i32,
    json: bool,
    memo: &Memo,
) -> Result<Vec<Mutation>> {
    let made;
    let plan = match memo.get::<(Arc<TableMetadata>, InsertPlan)>() {
        Some((of, plan)) if Arc::ptr_eq(of, table) => plan,
        _ => {
            made = match InsertPlan::new(table, ins, json, None) {
                Ok(plan) => plan,
                // the checks again with the values: a value's error comes
                // before a later column's, as Cassandra prepares them
                Err(e) => {
                    return Err(InsertPlan::new(table, ins, json, Some(ev))
                        .err()
                        .unwrap_or(e))
                }
            };
            memo.set_with(|| (table.clone(), made.clone()));
            &made
        }
    };
    plan.mutations(table, ins, ev, &wp, now)
}

/// An INSERT's column list checked against a table: the column each value
/// goes to, where the key's parts are, whether the row gets a marker. It
/// depends on the statement and the table only.
#[derive(Clone, Debug)]
pub struct InsertPlan {
    /// Per value: its column's place in the table, and its name in rows.
    columns: smallvec::SmallVec<[(usize, ColumnName); 8]>,
    /// Per partition key column, in key order: the place of its value.
    partition_key: smallvec::SmallVec<[usize; 2]>,
    /// Per clustering column given, in clustering order (a prefix of the
    /// clustering): the place of its value.
    clustering: smallvec::SmallVec<[usize; 4]>,
    /// Only static columns and no clustering: the partition's static row.
    static_only: bool,
    /// The row gets a row marker (a COMPACT STORAGE row mostly has none).
    marker: bool,
}

impl InsertPlan {
    /// Cassandra's checks of an INSERT, in its order. With `ev`, the values
    /// are evaluated where Cassandra would (and dropped), so that the first
    /// error is the one Cassandra gives.
    fn new(table: &TableMetadata, ins: &Insert, json: bool, ev: Option<&Eval>) -> Result<Self> {
        if ins.columns.len() != ins.values.len() {
            return Err(Error::Invalid("Unmatched column names/values".into()));
        }
        if ins
            .columns
            .iter()
            .enumerate()
            .any(|(i, c)| ins.columns[..i].contains(c))
        {
            return Err(Error::Invalid(
                "The column names contains duplicates".into(),
            ));
        }
        // column by column, as Cassandra prepares them: the column, then the
        // value of one outside the primary key (its operation)
        let mut columns = smallvec::SmallVec::with_capacity(ins.columns.len());
        for (c, term) in ins.columns.iter().zip(&ins.values) {
            let i = table.column_index(c).ok_or_else(|| undefined(table, c))?;
            let col = &table.columns[i];
            if let (Some(ev), false) = (ev, col.kind.is_primary_key()) {
                ev.value(term, &col.typ, c)?;
            }
            columns.push((i, ColumnName::new(&col.name)));
        }
        let find = |name: &str| ins.columns.iter().position(|c| c == name);
        let mut partition_key = smallvec::SmallVec::new();
        let mut missing = Vec::new();
        for c in table.partition_key() {
            match find(&c.name) {
                Some(i) => {
                    if let Some(ev) = ev {
                        key_value(ev, &ins.values[i], c, table.partition_key_count > 1)?;
                    }
                    partition_key.push(i)
                }
                None => missing.push(c.name.clone()),
            }
        }
        if !missing.is_empty() {
            return Err(Error::Invalid(format!(
                "Some partition key parts are missing: {}",
                missing.join(", ")
            )));
        }
        let mut clustering = smallvec::SmallVec::new();
        for c in table.clustering() {
            match find(&c.name) {
                Some(i) => {
                    if let Some(ev) = ev {
                        key_value(ev, &ins.values[i], c, true)?;
                    }
                    clustering.push(i)
                }
                None => missing.push(c.name.clone()),
            }
        }
        let kinds = || {
            columns
                .iter()
                .map(|(i, _): &(usize, ColumnName)| table.columns[*i].kind)
        };
        let static_only = clustering.is_empty()
            && kinds().all(|k| k != ColumnKind::Regular && k != ColumnKind::Clustering)
            && kinds().any(|k| k == ColumnKind::Static);
        if static_only {
            missing.clear();
        }
        // a dense COMPACT STORAGE table takes a row under a clustering prefix
        // (its missing clustering columns read as null)
        if table.is_dense() && !clustering.is_empty() {
            let given: Vec<bool> = table
                .clustering()
                .iter()
                .map(|c| find(&c.name).is_some())
                .collect();
            check_clustering_prefix(table, &given)?;
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
                if kinds().all(|k| k.is_primary_key()) {
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
        // a COMPACT STORAGE row has no row marker: it lives while a cell does
        // (a dense table without a value column writes the marker in place of
        // Cassandra's empty value cell, which INSERT JSON writes null)
        let marker = table
            .compact
            .as_ref()
            .is_none_or(|c| !json && c.hidden_value.as_ref().is_some_and(|(_, t)| t == "empty"));
        Ok(InsertPlan {
            columns,
            partition_key,
            clustering,
            static_only,
            marker,
        })
    }

    /// The statement's mutation with these values: the values outside the
    /// primary key, then the key's, in Cassandra's order.
    fn mutations(
        &self,
        table: &TableMetadata,
        ins: &Insert,
        ev: &Eval,
        wp: &WriteParams,
        now: i32,
    ) -> Result<Vec<Mutation>> {
        // (on the stack for a statement of up to eight columns: this runs on
        // every execution)
        let mut vals = smallvec::SmallVec::<[_; 8]>::with_capacity(self.columns.len());
        for ((i, _), term) in self.columns.iter().zip(&ins.values) {
            let col = &table.columns[*i];
            vals.push(if col.kind.is_primary_key() {
                None
            } else {
                Some(ev.value(term, &col.typ, &col.name)?)
            });
        }
        let compound = table.partition_key_count > 1;
        let pk = self
            .partition_key
            .iter()
            .zip(table.partition_key())
            .map(|(i, c)| key_value(ev, &ins.values[*i], c, compound))
            .collect::<Result<smallvec::SmallVec<[_; 2]>>>()?;
        let ck = self
            .clustering
            .iter()
            .zip(table.clustering())
            .map(|(i, c)| key_value(ev, &ins.values[*i], c, true))
            .collect::<Result<Vec<_>>>()?;
        let key = sibyl_db::cells::make_partition_key(&pk);
        check_key_size(&key)?;
        let mut row = Row {
            liveness: self.marker.then_some(LivenessInfo {
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
        for ((i, name), v) in self.columns.iter().zip(vals) {
            // (the values of the primary key's columns are not kept)
            let Some(v) = v else { continue };
            if v == Val::Unset {
                continue;
            }
            let col = &table.columns[*i];
            let target = if col.kind == ColumnKind::Static {
                &mut static_row
            } else {
                &mut row
            };
            set_named_column(target, *name, &col.typ, v.bytes(), wp).map_err(Error::Invalid)?;
        }
        let mut p = Partition::new();
        if self.static_only {
            static_row.liveness = row.liveness;
            p.static_row = Some(Box::new(static_row));
            return Ok(vec![partition_mutation(table, key, p)]);
        }
        if !static_row.cells.is_empty() {
            p.static_row = Some(Box::new(static_row));
        }
        // (a table without clustering columns: the row lives in the single,
        // empty clustering)
        p.rows
            .insert(ClusteringKey::row(ck, table.comparator.clone()), row);
        Ok(vec![partition_mutation(table, key, p)])
    }
}

/// A map key or set element naming a cell (`m[k]`, `s[e]`): neither null
/// nor unset (`Invalid null map key`, `Invalid unset set element`).
fn element_key(ev: &Eval, term: &Term, t: &CqlType, receiver: &str, what: &str) -> Result<Bytes> {
    match ev.value(term, t, receiver)? {
        Val::Set(k) => Ok(k),
        Val::Null => Err(Error::Invalid(format!("Invalid null {what}"))),
        Val::Unset => Err(Error::Invalid(format!("Invalid unset {what}"))),
    }
}

/// A primary key value of an INSERT; `empty_ok`: an empty value is legal
/// (a clustering value, a component of a composite partition key, whose
/// encoding is never empty).
fn key_value(ev: &Eval, term: &Term, c: &ColumnMetadata, empty_ok: bool) -> Result<Bytes> {
    match ev.value(term, &c.typ, &c.name)? {
        Val::Set(b) => {
            if b.is_empty() && !empty_ok {
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
    prepare_assignments(table, up, ev)?;
    let columns: Vec<&str> = up.assignments.iter().map(|a| a.target.column()).collect();
    let only_static = applies_only_to_static(table, &columns, &up.conditions);
    let all_eq = check_where(table, &up.where_clause, ev, "UPDATE", only_static)?;
    // (`check_where` made the UPDATE's own checks: an empty IN on the
    // clustering is no row, as for a DELETE)
    let r = analyse(table, &without_token(&up.where_clause), ev, Purpose::Delete)?;
    let keys = keep_token(
        table,
        &up.where_clause,
        ev,
        r.partition_keys.clone().unwrap_or_default(),
    )?;
    let clusterings: Vec<Vec<Bytes>> = if table.clustering_count == 0 {
        vec![Vec::new()]
    } else {
        match r.clusterings.clone() {
            Some(c) => c,
            None if only_static && !r.has_clustering_restriction => Vec::new(),
            // a dense COMPACT STORAGE table's row under a clustering prefix
            // (`check_where` let only an equality prefix through)
            None if table.is_dense() && r.has_clustering_restriction => r
                .slices
                .iter()
                .flatten()
                .map(|(start, _)| start.values.clone())
                .filter(|p| !p.is_empty())
                .collect(),
            // an empty IN: no row
            None if all_eq => Vec::new(),
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
            p.static_row = Some(Box::new(static_row));
        }
        for (ck, row) in rows {
            if !row.cells.is_empty() {
                p.rows
                    .insert(ClusteringKey::row(ck, table.comparator.clone()), row);
            }
        }
        // (a transaction's update, even empty, names its partition)
        if !p.is_empty() || up.conditions != sibyl_cql::Conditions::None {
            out.push(partition_mutation(table, key.clone(), p));
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
        (ColumnTarget::Column(_), AssignOp::Append(term)) if adds_to_current(t) => {
            // a conditional update adds to the current value (its
            // `Constants.Adder`); nothing is written over a null one
            let current = match row.cells.get(name) {
                Some(ColumnData::Simple(c)) => c.value.clone(),
                _ => read_list(key, ck, name).into_iter().next().map(|(_, v)| v),
            };
            let add = match ev.value(term, t, name)? {
                Val::Set(b) => b,
                Val::Unset => return Ok(()),
                Val::Null => return Err(Error::Server("java.lang.NullPointerException".into())),
            };
            let Some(current) = current else {
                return Ok(());
            };
            let sum = if matches!(t.unfrozen(), CqlType::Text | CqlType::Ascii) {
                let mut v = current.to_vec();
                v.extend_from_slice(&add);
                Some(Bytes::from(v))
            } else {
                crate::functions::arithmetic('+', t, Some(&current), t, Some(&add))?
            };
            set_column(row, name, t, sum.as_ref(), wp).map_err(Error::Invalid)?;
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
                        "Invalid operation ({name} = {} - {name}) for non list column {name}",
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
                let k = element_key(ev, idx, kt, &format!("key({name})"), "map key")?;
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
                let i = match ev.value(idx, &CqlType::Int, &format!("idx({name})"))? {
                    Val::Set(b) if b.len() == 4 => i32::from_be_bytes([b[0], b[1], b[2], b[3]]),
                    Val::Unset => {
                        return Err(Error::Invalid("Invalid unset value for list index".into()))
                    }
                    _ => return Err(Error::Invalid("Invalid null value for list index".into())),
                };
                let current = read_list(key, ck, name);
                if current.is_empty() {
                    return Err(Error::Invalid(
                        "Attempted to set an element on a list which is null".into(),
                    ));
                }
                if i < 0 || i as usize >= current.len() {
                    return Err(Error::Invalid(format!(
                        "List index {i} out of bound, list has size {}",
                        current.len()
                    )));
                }
                let path = current[i as usize].0.clone();
                let cell = match ev.value(term, et, &format!("value({name})"))? {
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
            let cell = match ev.value(term, &u.fields[fi].1, &format!("{name}.{field}"))? {
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
    prepare_deletions(table, del, ev)?;
    let columns: Vec<&str> = del.columns.iter().map(|c| c.column()).collect();
    let only_static = applies_only_to_static(table, &columns, &del.conditions);
    let all_eq = check_where(table, &del.where_clause, ev, "DELETE", only_static)?;
    if let (false, sibyl_cql::Conditions::Columns(_) | sibyl_cql::Conditions::Exists) =
        (all_eq, &del.conditions)
    {
        // `DeleteStatement.prepareInternal`
        let regular = |c: &str| {
            table
                .column(c)
                .is_some_and(|c| c.kind != ColumnKind::Static)
        };
        if columns.is_empty() || columns.iter().any(|c| regular(c)) {
            return Err(Error::Invalid("DELETE statements must restrict all PRIMARY KEY columns with equality relations in order to delete non static columns".into()));
        }
        if let sibyl_cql::Conditions::Columns(conds) = &del.conditions {
            if conds.iter().any(|c| regular(c.target.column())) {
                return Err(Error::Invalid("DELETE statements must restrict all PRIMARY KEY columns with equality relations in order to use IF condition on non static columns".into()));
            }
        }
    }
    let r = analyse(
        table,
        &without_token(&del.where_clause),
        ev,
        Purpose::Delete,
    )?;
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
    let keys = keep_token(
        table,
        &del.where_clause,
        ev,
        r.partition_keys.clone().unwrap_or_default(),
    )?;
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
                    None if only_static || all_eq => Vec::new(),
                    // an empty slice deletes nothing, before the check below
                    None if r.selects_nothing() => Vec::new(),
                    // `DeleteStatement.addUpdateForKey`
                    None => {
                        return Err(Error::Invalid(
                            "Range deletions are not supported for specific columns".into(),
                        ))
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
                                CqlType::Map(kt, _) => element_key(
                                    ev,
                                    idx,
                                    kt,
                                    &format!("key({})", col.name),
                                    "map key",
                                )?,
                                CqlType::Set(et) => element_key(
                                    ev,
                                    idx,
                                    et,
                                    &format!("value({})", col.name),
                                    "set element",
                                )?,
                                CqlType::List(_) => {
                                    let i = match ev.value(
                                        idx,
                                        &CqlType::Int,
                                        &format!("idx({})", col.name),
                                    )? {
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
                                    if current.is_empty() {
                                        return Err(Error::Invalid("Attempted to delete an element from a list which is null".into()));
                                    }
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
                p.static_row = Some(Box::new(static_row));
            }
            for (ck, row) in rows {
                p.rows
                    .insert(ClusteringKey::row(ck, table.comparator.clone()), row);
            }
        }
        out.push(partition_mutation(table, key.clone(), p));
    }
    let _ = BoundKind::Row;
    Ok(out)
}

/// How the relations seen so far restrict one column (Cassandra's merged
/// single-column restrictions).
#[derive(Clone, Copy, Default)]
struct Restricted {
    eq: bool,
    is_in: bool,
    start: bool,
    end: bool,
    /// The first column of the (multi-column) restriction holding it.
    first: usize,
}

impl Restricted {
    fn is_slice(&self) -> bool {
        !self.eq && !self.is_in && (self.start || self.end)
    }
}

/// Which kinds of column an UPDATE or DELETE touches, for
/// `appliesOnlyToStaticColumns`: its operations (none, for a DELETE of
/// whole rows) and its conditions all on static columns.
pub fn applies_only_to_static(
    table: &TableMetadata,
    columns: &[&str],
    conditions: &sibyl_cql::Conditions,
) -> bool {
    let is_static = |c: &str| {
        table
            .column(c)
            .is_some_and(|c| c.kind == ColumnKind::Static)
    };
    let conditions_static = match conditions {
        sibyl_cql::Conditions::Columns(conds) => conds.iter().all(|c| is_static(c.target.column())),
        _ => true,
    };
    !columns.is_empty() && columns.iter().all(|c| is_static(c)) && conditions_static
}

/// The WHERE clause of an UPDATE or DELETE (`kind`), checked as Cassandra's
/// `StatementRestrictions` does for them, in its order: relation by
/// relation (operators refused, columns, value types, merging with the
/// column's earlier relations, clustering order), then the partition key
/// (no token, all of it, by = or IN), the clustering (no slice and all of
/// it for an UPDATE not only on static columns, a prefix for a DELETE),
/// then no other column. Returns whether the whole primary key is given by
/// = or IN (`hasAllPKColumnsRestrictedByEqualities`).
pub fn check_where(
    table: &TableMetadata,
    relations: &[sibyl_cql::Relation],
    ev: &Eval,
    kind: &str,
    only_static: bool,
) -> Result<bool> {
    use sibyl_cql::{Operator, RelationLhs, RelationRhs};
    let pk_n = table.partition_key_count;
    let mut restricted: BTreeMap<usize, Restricted> = BTreeMap::new();
    let mut token = false;
    let mut non_pk: Vec<String> = Vec::new();
    let lookup =
        |c: &str| -> Result<usize> { table.column_index(c).ok_or_else(|| undefined(table, c)) };
    let typecheck = |term: &Term, t: &CqlType, receiver: &str| -> Result<()> {
        ev.value(term, t, receiver).map(|_| ())
    };
    for rel in relations {
        match rel.op {
            Operator::Ne => {
                return Err(Error::Invalid(format!(
                    "Unsupported \"!=\" relation: {}",
                    sibyl_cql::relation_text(rel)
                )))
            }
            Operator::IsNotNull => {
                return Err(Error::Invalid(format!(
                    "Unsupported restriction: {}",
                    sibyl_cql::relation_text(rel)
                )))
            }
            Operator::Contains | Operator::ContainsKey => {
                return Err(Error::Invalid(format!(
                    "Cannot use {kind} with {}",
                    rel.op.as_str()
                )))
            }
            _ => {}
        }
        // the columns the relation restricts, its first one
        let cols: Vec<usize> = match &rel.lhs {
            RelationLhs::Token(cs) => {
                let mut idx = Vec::new();
                for c in cs {
                    idx.push(lookup(c)?);
                }
                if idx.len() != pk_n || idx.iter().any(|i| *i >= pk_n) {
                    return Err(Error::Invalid("The token() function must be applied to all partition key components or none of them".into()));
                }
                if idx.iter().enumerate().any(|(k, i)| k != *i) {
                    return Err(Error::Invalid(format!(
                        "The token function arguments must be in the partition key order: {}",
                        table
                            .partition_key()
                            .iter()
                            .map(|c| c.name.as_str())
                            .collect::<Vec<_>>()
                            .join(", ")
                    )));
                }
                token = true;
                continue;
            }
            RelationLhs::Element(c, key) => {
                let i = lookup(c)?;
                if let CqlType::Map(kt, vt) = table.columns[i].typ.unfrozen() {
                    typecheck(key, kt, &format!("key({c})"))?;
                    if let RelationRhs::Term(t) = &rel.rhs {
                        typecheck(t, vt, &format!("value({c})"))?;
                    }
                }
                non_pk.push(table.columns[i].name.clone());
                continue;
            }
            RelationLhs::Column(c) => {
                let i = lookup(c)?;
                let col = &table.columns[i];
                crate::restrictions::check_duration_slice(&col.typ, rel.op)?;
                match &rel.rhs {
                    RelationRhs::Term(t) => typecheck(t, &col.typ, c)?,
                    RelationRhs::InList(items) => {
                        for t in items {
                            typecheck(t, &col.typ, c)?;
                        }
                    }
                    _ => {}
                }
                if rel.op == Operator::Like {
                    return Err(Error::Invalid(format!(
                        "LIKE restriction is only supported on properly indexed columns. {} is not valid.",
                        sibyl_cql::relation_text(rel)
                    )));
                }
                vec![i]
            }
            RelationLhs::Columns(cs) => {
                let mut out = Vec::new();
                for c in cs {
                    let i = lookup(c)?;
                    if table.columns[i].kind != ColumnKind::Clustering {
                        return Err(Error::Invalid(format!(
                            "Multi-column relations can only be applied to clustering columns but was applied to: {c}"
                        )));
                    }
                    out.push(i);
                }
                if out.iter().enumerate().any(|(k, i)| *i != out[0] + k) {
                    return Err(Error::Invalid(format!(
                        "Clustering columns must appear in the PRIMARY KEY order in multi-column relations: {}",
                        sibyl_cql::relation_text(rel)
                    )));
                }
                out
            }
        };
        let first = cols[0];
        let new = Restricted {
            eq: rel.op == Operator::Eq,
            is_in: rel.op == Operator::In,
            start: matches!(rel.op, Operator::Gt | Operator::Ge),
            end: matches!(rel.op, Operator::Lt | Operator::Le),
            first,
        };
        let is_clustering = table.columns[first].kind == ColumnKind::Clustering;
        // the clustering restrictions before this one (`mergeWith`)
        let last = restricted
            .iter()
            .rfind(|(i, _)| table.columns[**i].kind == ColumnKind::Clustering)
            .map(|(_, r)| *r);
        let old_next = restricted.keys().find(|i| **i > first).copied();
        for &i in &cols {
            let name = &table.columns[i].name;
            let merged = match restricted.get(&i) {
                None => new,
                Some(p) if p.eq => {
                    return Err(Error::Invalid(format!(
                        "{name} cannot be restricted by more than one relation if it includes an Equal"
                    )))
                }
                Some(p) if p.is_in => {
                    return Err(Error::Invalid(format!(
                        "{name} cannot be restricted by more than one relation if it includes a IN"
                    )))
                }
                Some(_) if new.eq || new.is_in => {
                    return Err(Error::Invalid(format!(
                        "Column \"{name}\" cannot be restricted by both an equality and an inequality relation"
                    )))
                }
                Some(p) => {
                    for (both, bound) in [(p.start && new.start, "start"), (p.end && new.end, "end")]
                    {
                        if both {
                            return Err(Error::Invalid(format!(
                                "More than one restriction was found for the {bound} bound on {name}"
                            )));
                        }
                    }
                    Restricted {
                        start: p.start || new.start,
                        end: p.end || new.end,
                        ..*p
                    }
                }
            };
            restricted.insert(i, merged);
        }
        if let (true, Some(last)) = (is_clustering, last) {
            let name = |i: usize| &table.columns[i].name;
            if last.is_slice() && first > last.first {
                return Err(Error::Invalid(format!(
                    "Clustering column \"{}\" cannot be restricted (preceding column \"{}\" is restricted by a non-EQ relation)",
                    name(first),
                    name(last.first)
                )));
            }
            if first < last.first && new.is_slice() {
                let next = old_next.unwrap_or(last.first);
                return Err(Error::Invalid(format!(
                    "PRIMARY KEY column \"{}\" cannot be restricted (preceding column \"{}\" is restricted by a non-EQ relation)",
                    name(next),
                    name(first)
                )));
            }
        }
        if !table.columns[first].kind.is_primary_key() {
            non_pk.push(table.columns[first].name.clone());
        }
    }
    // the partition key (`processPartitionKeyRestrictions`)
    let pk: Vec<Option<Restricted>> = (0..pk_n).map(|i| restricted.get(&i).copied()).collect();
    let pk_by_eq = pk.iter().all(|r| r.is_some_and(|r| r.eq || r.is_in));
    if token && !pk_by_eq {
        return Err(Error::Invalid(format!(
            "The token function cannot be used in WHERE clauses for {kind} statements"
        )));
    }
    let missing: Vec<&str> = table
        .partition_key()
        .iter()
        .zip(&pk)
        .filter(|(_, r)| r.is_none())
        .map(|(c, _)| c.name.as_str())
        .collect();
    if !missing.is_empty() {
        return Err(Error::Invalid(format!(
            "Some partition key parts are missing: {}",
            missing.join(", ")
        )));
    }
    if !pk_by_eq {
        return Err(Error::Invalid(format!(
            "Only EQ and IN relation are supported on the partition key (unless you use the token() function) for {kind} statements"
        )));
    }
    // the clustering (`processClusteringColumnsRestrictions`)
    let ck: Vec<(usize, Restricted)> = restricted
        .iter()
        .filter(|(i, _)| table.columns[**i].kind == ColumnKind::Clustering)
        .map(|(i, r)| (*i, *r))
        .collect();
    if only_static && !ck.is_empty() {
        return Err(Error::Invalid(format!(
            "Invalid restrictions on clustering columns since the {kind} statement modifies only static columns"
        )));
    }
    if kind == "UPDATE" {
        if ck.iter().any(|(_, r)| r.is_slice()) {
            return Err(Error::Invalid(
                "Slice restrictions are not supported on the clustering columns in UPDATE statements"
                    .into(),
            ));
        }
        let unrestricted: Vec<&str> = table
            .clustering()
            .iter()
            .enumerate()
            .filter(|(k, _)| !restricted.contains_key(&(pk_n + k)))
            .map(|(_, c)| c.name.as_str())
            .collect();
        // a dense COMPACT STORAGE table takes a clustering prefix
        if table.is_dense() && !ck.is_empty() && !unrestricted.is_empty() {
            let given: Vec<bool> = (0..table.clustering_count)
                .map(|k| restricted.contains_key(&(pk_n + k)))
                .collect();
            check_clustering_prefix(table, &given)?;
        } else if !only_static && !unrestricted.is_empty() {
            return Err(Error::Invalid(format!(
                "Some clustering keys are missing: {}",
                unrestricted.join(", ")
            )));
        }
    } else {
        for (k, (i, _)) in ck.iter().enumerate() {
            if *i != pk_n + k {
                return Err(preceding_not_restricted(
                    &table.columns[*i].name,
                    &table.columns[pk_n + k].name,
                ));
            }
        }
    }
    if !non_pk.is_empty() {
        non_pk.sort();
        non_pk.dedup();
        return Err(Error::Invalid(format!(
            "Non PRIMARY KEY columns found in where clause: {} ",
            non_pk.join(", ")
        )));
    }
    Ok(ck.len() == table.clustering_count && ck.iter().all(|(_, r)| r.eq || r.is_in))
}

/// The WHERE clause of an UPDATE or DELETE as `analyse` takes it, its
/// token relations set aside when the partition key is given by = or IN
/// (`check_where` passed): they only filter the keys, which `keep_token`
/// then does.
fn without_token(relations: &[sibyl_cql::Relation]) -> Vec<sibyl_cql::Relation> {
    relations
        .iter()
        .filter(|r| !matches!(r.lhs, sibyl_cql::RelationLhs::Token(_)))
        .cloned()
        .collect()
}

/// The partition keys of `keys` whose tokens the WHERE clause's token
/// relations (if any) admit.
fn keep_token(
    table: &TableMetadata,
    relations: &[sibyl_cql::Relation],
    ev: &Eval,
    keys: Vec<Bytes>,
) -> Result<Vec<Bytes>> {
    let tokens: Vec<sibyl_cql::Relation> = relations
        .iter()
        .filter(|r| matches!(r.lhs, sibyl_cql::RelationLhs::Token(_)))
        .cloned()
        .collect();
    if tokens.is_empty() {
        return Ok(keys);
    }
    let Some(range) = analyse(table, &tokens, ev, Purpose::Select)?.token_range else {
        return Ok(keys);
    };
    Ok(keys
        .into_iter()
        .filter(|k| {
            let t = sibyl_types::murmur3::token(k);
            range.start <= t && t <= range.end
        })
        .collect())
}

/// Whether `+` on a column of type `t` reads its current value in a
/// conditional update (Cassandra 5.0's `Constants.Adder` for numbers and
/// text, when the statement can read the existing state).
fn adds_to_current(t: &CqlType) -> bool {
    crate::functions::is_numeric(t) || matches!(t.unfrozen(), CqlType::Text | CqlType::Ascii)
}

/// The assignments of an UPDATE, prepared one by one as Cassandra's
/// `Operation.RawUpdate.prepare` does, before the WHERE clause: the column,
/// what the operation allows on its type, the types of the values (their
/// receivers named as Cassandra names them: `idx(l)`, `value(l)`,
/// `key(m)`, `value(m)`, `ud.a`). `can_read` is a conditional update's
/// (`+` on numbers and text then adds to the current value).
pub fn prepare_assignments(table: &TableMetadata, up: &Update, ev: &Eval) -> Result<()> {
    let can_read = up.conditions != sibyl_cql::Conditions::None;
    for a in &up.assignments {
        let c = a.target.column();
        let col = table.column(c).ok_or_else(|| undefined(table, c))?;
        if col.kind.is_primary_key() {
            return Err(Error::Invalid(format!(
                "PRIMARY KEY part {c} found in SET part"
            )));
        }
        prepare_assignment(col, &a.target, &a.op, ev, can_read)?;
    }
    Ok(())
}

fn prepare_assignment(
    col: &ColumnMetadata,
    target: &ColumnTarget,
    op: &AssignOp,
    ev: &Eval,
    can_read: bool,
) -> Result<()> {
    let name = col.name.as_str();
    let t = &col.typ;
    let check = |term: &Term, typ: &CqlType, receiver: &str| -> Result<()> {
        ev.value(term, typ, receiver).map(|_| ())
    };
    let invalid = |text: String, what: &str| -> Result<()> {
        Err(Error::Invalid(format!(
            "Invalid operation ({text}) for {what} column {name}"
        )))
    };
    let frozen = t.is_collection() && !t.is_multi_cell();
    match (target, op) {
        (ColumnTarget::Column(_), AssignOp::Set(term)) => {
            check(term, t, name)?;
            if t.is_counter() {
                return Err(Error::Invalid(format!("Cannot set the value of counter column {name} (counters can only be incremented/decremented, not set)")));
            }
        }
        (ColumnTarget::Column(_), AssignOp::Append(term)) => {
            let text = format!("{name} = {name} + {}", term_text(term));
            if !t.is_collection() {
                if matches!(t.unfrozen(), CqlType::Tuple(_) | CqlType::Udt(_)) {
                    return invalid(text, "tuple");
                }
                if can_read {
                    if !adds_to_current(t) {
                        return Err(Error::Invalid(format!(
                            "Invalid operation ({text}) for non-numeric and non-text type {name}"
                        )));
                    }
                } else if !t.is_counter() {
                    return invalid(text, "non counter");
                }
                return check(term, t, name);
            }
            if frozen {
                return invalid(text, "frozen collection");
            }
            match t {
                CqlType::Map(..) => check(term, t, name).map_err(|_| {
                    Error::Invalid(format!(
                        "Value for a map addition has to be a map, but was: '{}'",
                        term_text(term)
                    ))
                })?,
                _ => check(term, t, name)?,
            }
        }
        (ColumnTarget::Column(_), AssignOp::Remove(term)) => {
            let text = format!("{name} = {name} - {}", term_text(term));
            if !t.is_collection() {
                if !t.is_counter() {
                    return invalid(text, "non counter");
                }
                return check(term, t, name);
            }
            if frozen {
                return invalid(text, "frozen collection");
            }
            match t {
                CqlType::Map(k, _) => {
                    check(term, &CqlType::Set(k.clone()), name).map_err(|_| {
                        Error::Invalid(format!(
                            "Value for a map substraction has to be a set, but was: '{}'",
                            term_text(term)
                        ))
                    })?
                }
                _ => check(term, t, name)?,
            }
        }
        (ColumnTarget::Column(_), AssignOp::Prepend(term)) => {
            check(term, t, name)?;
            // Cassandra's own rendering of `c = t + c`
            let text = format!("{name} = {} - {name}", term_text(term));
            if !matches!(t.unfrozen(), CqlType::List(_)) {
                return invalid(text, "non list");
            }
            if frozen {
                return invalid(text, "frozen list");
            }
        }
        (ColumnTarget::Element(_, idx), AssignOp::Set(term)) => {
            let text = format!("{name}[{}] = {}", term_text(idx), term_text(term));
            if !t.is_collection() {
                return invalid(text, "non collection");
            }
            if frozen {
                return invalid(text, "frozen collection");
            }
            match t {
                CqlType::List(e) => {
                    check(idx, &CqlType::Int, &format!("idx({name})"))?;
                    check(term, e, &format!("value({name})"))?;
                }
                CqlType::Map(k, v) => {
                    check(idx, k, &format!("key({name})"))?;
                    check(term, v, &format!("value({name})"))?;
                }
                _ => return invalid(text, "set"),
            }
        }
        (ColumnTarget::Field(_, field), AssignOp::Set(term)) => {
            let text = format!("{name}.{field} = {}", term_text(term));
            let CqlType::Udt(u) = t.unfrozen() else {
                return invalid(text, "non-UDT");
            };
            if !t.is_multi_cell() {
                return invalid(text, "frozen UDT");
            }
            let Some((_, ft)) = u.fields.iter().find(|(n, _)| n == field) else {
                return Err(Error::Invalid(format!(
                    "UDT column {name} does not have a field named {field}"
                )));
            };
            check(term, ft, &format!("{name}.{field}"))?;
        }
        _ => {
            return Err(Error::Invalid(format!(
                "Invalid operation on column {name}"
            )))
        }
    }
    Ok(())
}

/// The columns of a DELETE, prepared one by one as Cassandra's
/// `Operation.RawDeletion.prepare` does, before the WHERE clause.
pub fn prepare_deletions(table: &TableMetadata, del: &Delete, ev: &Eval) -> Result<()> {
    for target in &del.columns {
        let c = target.column();
        let col = table.column(c).ok_or_else(|| undefined(table, c))?;
        if col.kind.is_primary_key() {
            return Err(Error::Invalid(format!(
                "Invalid identifier {c} for deletion (should not be a PRIMARY KEY part)"
            )));
        }
        let name = col.name.as_str();
        let t = &col.typ;
        match target {
            ColumnTarget::Column(_) => {}
            ColumnTarget::Element(_, idx) => {
                if !t.is_collection() {
                    return Err(Error::Invalid(format!(
                        "Invalid deletion operation for non collection column {name}"
                    )));
                }
                if !t.is_multi_cell() {
                    return Err(Error::Invalid(format!(
                        "Invalid deletion operation for frozen collection column {name}"
                    )));
                }
                let (et, receiver) = match t {
                    CqlType::List(_) => (CqlType::Int, format!("idx({name})")),
                    CqlType::Set(e) => (e.as_ref().clone(), format!("value({name})")),
                    CqlType::Map(k, _) => (k.as_ref().clone(), format!("key({name})")),
                    _ => continue,
                };
                ev.value(idx, &et, &receiver)?;
            }
            ColumnTarget::Field(_, field) => {
                let CqlType::Udt(u) = t.unfrozen() else {
                    return Err(Error::Invalid(format!(
                        "Invalid field deletion operation for non-UDT column {name}"
                    )));
                };
                if !t.is_multi_cell() {
                    return Err(Error::Invalid(format!(
                        "Frozen UDT column {name} does not support field deletions"
                    )));
                }
                if !u.fields.iter().any(|(n, _)| n == field) {
                    return Err(Error::Invalid(format!(
                        "UDT column {name} does not have a field named {field}"
                    )));
                }
            }
        }
    }
    Ok(())
}

/// How Jackson (Cassandra's JSON library) reads an INSERT JSON document as
/// a map: the end of the object it reads (what follows is ignored), or
/// the exception it throws, as Cassandra quotes it.
fn jackson_map(text: &str) -> std::result::Result<usize, String> {
    let chars: Vec<char> = text.chars().collect();
    let source = format!("[Source: (String)\"{text}\"");
    // Jackson's location: `pos` is the 1-based column were the text one
    // line; lines are those ended before the character read last
    let at = |pos: usize| {
        let before = &chars[..pos.saturating_sub(2).min(chars.len())];
        let line = 1 + before.iter().filter(|c| **c == '\n').count();
        let col = match before.iter().rposition(|c| *c == '\n') {
            Some(nl) => pos - nl - 1,
            None => pos,
        };
        format!("{source}; line: {line}, column: {col}]")
    };
    let parse_err = |msg: String, consumed: usize| {
        format!(
            "com.fasterxml.jackson.core.JsonParseException: {msg}\n at {}",
            at(consumed + 1)
        )
    };
    let unexpected = |i: usize, what: &str| {
        parse_err(
            format!(
                "Unexpected character ('{}' (code {})): {what}",
                chars[i], chars[i] as u32
            ),
            i + 1,
        )
    };
    let ident_end = |mut i: usize| {
        while i < chars.len() && (chars[i].is_alphanumeric() || chars[i] == '_' || chars[i] == '$')
        {
            i += 1;
        }
        i
    };
    let unrecognized = |i: usize| {
        let end = ident_end(i).max(i + 1);
        let tok: String = chars[i..end].iter().collect();
        parse_err(
            format!("Unrecognized token '{tok}': was expecting (JSON String, Number, Array, Object or token 'null', 'true' or 'false')"),
            end,
        )
    };
    let skip_ws = |mut i: usize| {
        while i < chars.len() && matches!(chars[i], ' ' | '\t' | '\n' | '\r') {
            i += 1;
        }
        i
    };
    let eof = |kind: &str, start: usize| {
        format!(
            "com.fasterxml.jackson.core.io.JsonEOFException: Unexpected end-of-input: expected close marker for {kind} (start marker at {})\n at {}",
            at(start + 1),
            at(chars.len() + 1)
        )
    };
    // a string from its opening quote: the index after its closing one
    let string = |i: usize| -> std::result::Result<usize, String> {
        let mut j = i + 1;
        while j < chars.len() {
            match chars[j] {
                '"' => return Ok(j + 1),
                '\\' => j += 2,
                c if (c as u32) < 32 => {
                    return Err(parse_err(
                        format!("Illegal unquoted character ((CTRL-CHAR, code {})): has to be escaped using backslash to be included in string value", c as u32),
                        j + 1,
                    ))
                }
                _ => j += 1,
            }
        }
        Err(parse_err(
            "Unexpected end-of-input: was expecting closing quote for a string value".into(),
            chars.len(),
        ))
    };
    let number = |i: usize| -> std::result::Result<(usize, bool), String> {
        let mut j = i;
        if chars[j] == '-' {
            j += 1;
        }
        let digits = j;
        while j < chars.len() && chars[j].is_ascii_digit() {
            j += 1;
        }
        if j - digits > 1 && chars[digits] == '0' {
            return Err(parse_err(
                "Invalid numeric value: Leading zeroes not allowed".into(),
                digits + 1,
            ));
        }
        let mut float = false;
        if j < chars.len() && chars[j] == '.' {
            float = true;
            j += 1;
            while j < chars.len() && chars[j].is_ascii_digit() {
                j += 1;
            }
        }
        if j < chars.len() && matches!(chars[j], 'e' | 'E') {
            float = true;
            j += 1;
            if j < chars.len() && matches!(chars[j], '+' | '-') {
                j += 1;
            }
            while j < chars.len() && chars[j].is_ascii_digit() {
                j += 1;
            }
        }
        Ok((j, float))
    };
    struct P<'a> {
        chars: &'a [char],
    }
    let p = P { chars: &chars };
    // a value from `i` (no leading whitespace): the index after it
    #[allow(clippy::too_many_arguments)]
    fn parse_value(
        p: &P<'_>,
        i: usize,
        ctx: &dyn Fn(usize, &str) -> String,
        string: &dyn Fn(usize) -> std::result::Result<usize, String>,
        number: &dyn Fn(usize) -> std::result::Result<(usize, bool), String>,
        unrecognized: &dyn Fn(usize) -> String,
        eof: &dyn Fn(&str, usize) -> String,
        skip_ws: &dyn Fn(usize) -> usize,
        after_comma: bool,
    ) -> std::result::Result<usize, String> {
        let chars = p.chars;
        if i >= chars.len() {
            return Err(eof("Object", 0));
        }
        let recurse = |j: usize, after_comma: bool| {
            parse_value(
                p,
                j,
                ctx,
                string,
                number,
                unrecognized,
                eof,
                skip_ws,
                after_comma,
            )
        };
        match chars[i] {
            '"' => string(i),
            '-' | '0'..='9' => number(i).map(|(j, _)| j),
            '{' | '[' => {
                let (close, kind) = if chars[i] == '{' {
                    ('}', "Object")
                } else {
                    (']', "Array")
                };
                let mut j = skip_ws(i + 1);
                if j < chars.len() && chars[j] == close {
                    return Ok(j + 1);
                }
                loop {
                    if j >= chars.len() {
                        return Err(eof(kind, i));
                    }
                    if close == '}' {
                        if chars[j] != '"' {
                            return Err(ctx(j, "was expecting double-quote to start field name"));
                        }
                        j = skip_ws(string(j)?);
                        if j >= chars.len() {
                            return Err(eof(kind, i));
                        }
                        if chars[j] != ':' {
                            return Err(ctx(
                                j,
                                "was expecting a colon to separate field name and value",
                            ));
                        }
                        j = skip_ws(j + 1);
                        if j >= chars.len() {
                            return Err(eof(kind, i));
                        }
                        j = recurse(j, false)?;
                    } else {
                        j = recurse(j, true)?;
                    }
                    j = skip_ws(j);
                    if j >= chars.len() {
                        return Err(eof(kind, i));
                    }
                    if chars[j] == close {
                        return Ok(j + 1);
                    }
                    if chars[j] != ',' {
                        return Err(ctx(
                            j,
                            &format!("was expecting comma to separate {kind} entries"),
                        ));
                    }
                    j = skip_ws(j + 1);
                }
            }
            ']' | '}' if after_comma => Err(ctx(i, "expected a value")),
            c if c.is_alphabetic() => {
                let end = {
                    let mut e = i;
                    while e < chars.len() && (chars[e].is_alphanumeric() || chars[e] == '_') {
                        e += 1;
                    }
                    e
                };
                let word: String = chars[i..end].iter().collect();
                if ["true", "false", "null"].contains(&word.as_str()) {
                    Ok(end)
                } else {
                    Err(unrecognized(i))
                }
            }
            _ => Err(ctx(
                i,
                "expected a valid value (JSON String, Number, Array, Object or token 'null', 'true' or 'false')",
            )),
        }
    }
    let mismatched = |what: String, start: usize| {
        format!(
            "com.fasterxml.jackson.databind.exc.MismatchedInputException: {what}\n at {}",
            at(start + 1)
        )
    };
    let from = |kind: &str, token: &str| {
        format!("Cannot deserialize value of type `java.util.LinkedHashMap<java.lang.Object,java.lang.Object>` from {kind} value (token `JsonToken.{token}`)")
    };
    let i = skip_ws(0);
    if i >= chars.len() {
        return Err(format!(
            "com.fasterxml.jackson.databind.exc.MismatchedInputException: No content to map due to end-of-input\n at {source}; line: 1, column: 0]"
        ));
    }
    let top = |j: usize| {
        parse_value(
            &p,
            j,
            &unexpected,
            &string,
            &number,
            &unrecognized,
            &eof,
            &skip_ws,
            false,
        )
    };
    match chars[i] {
        '{' => top(i).map(|end| chars[..end].iter().collect::<String>().len()),
        '[' => Err(mismatched(from("Array", "START_ARRAY"), i)),
        '"' => {
            let end = string(i)?;
            let s: String = chars[i + 1..end - 1].iter().collect();
            Err(mismatched(format!("Cannot construct instance of `java.util.LinkedHashMap` (although at least one Creator exists): no String-argument constructor/factory method to deserialize from String value ('{s}')"), i))
        }
        '-' | '0'..='9' => {
            let (_, float) = number(i)?;
            Err(if float {
                mismatched(from("Floating-point", "VALUE_NUMBER_FLOAT"), i)
            } else {
                mismatched(from("Integer", "VALUE_NUMBER_INT"), i)
            })
        }
        _ => {
            let end = top(i)?;
            let word: String = chars[i..end].iter().collect();
            match word.as_str() {
                "null" => Ok(text.len()),
                "true" => Err(mismatched(from("Boolean", "VALUE_TRUE"), i)),
                _ => Err(mismatched(from("Boolean", "VALUE_FALSE"), i)),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sibyl_protocol::Value;

    fn column(name: &str, typ: CqlType, kind: ColumnKind, position: i32) -> ColumnMetadata {
        ColumnMetadata {
            name: name.into(),
            typ,
            kind,
            position,
            reversed: false,
        }
    }

    /// `ks.t (k int, c int, s int static, v text, PRIMARY KEY (k, c))`
    fn table() -> Arc<TableMetadata> {
        Arc::new(TableMetadata::new(
            "ks",
            "t",
            uuid::Uuid::nil(),
            vec![
                column("k", CqlType::Int, ColumnKind::PartitionKey, 0),
                column("c", CqlType::Int, ColumnKind::Clustering, 0),
                column("s", CqlType::Int, ColumnKind::Static, -1),
                column("v", CqlType::Text, ColumnKind::Regular, -1),
            ],
            Default::default(),
        ))
    }

    fn insert_of(cql: &str) -> Insert {
        match sibyl_cql::parse_statement(cql).unwrap().statement {
            sibyl_cql::Statement::Insert(i) => *i,
            other => panic!("not an insert: {other:?}"),
        }
    }

    fn run(t: &Arc<TableMetadata>, ins: &Insert, values: &[Value], memo: &Memo) -> Result<String> {
        let bindings = crate::terms::Bindings { values };
        let ev = Eval {
            bindings: &bindings,
        };
        insert(t, ins, &ev, 7, 100, memo).map(|m| format!("{m:?}"))
    }

    fn int(i: i32) -> Value {
        Value::Set(Bytes::copy_from_slice(&i.to_be_bytes()))
    }

    #[test]
    fn a_kept_insert_plan_writes_what_a_fresh_one_writes() {
        let t = table();
        let ins = insert_of("INSERT INTO ks.t (v, c, k, s) VALUES (?, ?, ?, ?)");
        let kept = Memo::kept();
        for (k, v) in [(1, "a"), (2, "b"), (3, "c")] {
            let values = [Value::Set(Bytes::from(v)), int(k * 10), int(k), int(-k)];
            let fresh = run(&t, &ins, &values, &Memo::default()).unwrap();
            assert_eq!(run(&t, &ins, &values, &kept).unwrap(), fresh);
            assert!(fresh.contains(&format!("{:?}", Bytes::from(v))), "{fresh}");
        }
        assert!(kept.get::<(Arc<TableMetadata>, InsertPlan)>().is_some());
        // a plan made for another table (one altered since) is not used
        let altered = table();
        let values = [Value::Unset, int(1), int(2), int(3)];
        assert_eq!(
            run(&altered, &ins, &values, &kept).unwrap(),
            run(&altered, &ins, &values, &Memo::default()).unwrap()
        );
        // static columns only, and no clustering: the static row
        let statics = insert_of("INSERT INTO ks.t (k, s) VALUES (?, ?)");
        let kept = Memo::kept();
        for _ in 0..2 {
            let m = run(&t, &statics, &[int(1), int(2)], &kept).unwrap();
            assert!(m.contains("static_row: Some"), "{m}");
        }
    }

    #[test]
    fn an_insert_fails_as_cassandra_orders_its_checks_with_a_plan_or_without() {
        let t = table();
        let cases = [
            // a value's error comes before a later column's
            (
                "INSERT INTO ks.t (k, v, x) VALUES (?, ?, ?)",
                vec![int(1), int(1), int(1)],
                "Undefined column name x in table ks.t",
            ),
            (
                "INSERT INTO ks.t (k, s, x) VALUES (?, ?, ?)",
                vec![int(1), Value::Set(Bytes::from_static(b"abc")), int(1)],
                "Expected 4 or 0 byte int (3)",
            ),
            (
                "INSERT INTO ks.t (k, v) VALUES (?, ?)",
                vec![int(1), Value::Null],
                "Some clustering keys are missing: c",
            ),
            (
                "INSERT INTO ks.t (c, v) VALUES (?, ?)",
                vec![int(1), Value::Null],
                "Some partition key parts are missing: k",
            ),
            (
                "INSERT INTO ks.t (k, c, k) VALUES (?, ?, ?)",
                vec![int(1), int(1), int(1)],
                "The column names contains duplicates",
            ),
            // the key's value errors are the value's, each execution
            (
                "INSERT INTO ks.t (k, c) VALUES (?, ?)",
                vec![Value::Null, int(1)],
                "Invalid null value in condition for column k",
            ),
        ];
        for (cql, values, error) in cases {
            let ins = insert_of(cql);
            let kept = Memo::kept();
            for memo in [&Memo::default(), &kept, &kept] {
                match run(&t, &ins, &values, memo) {
                    Err(e) => assert!(e.to_string().contains(error), "{cql}: {e} is not {error}"),
                    Ok(m) => panic!("{cql}: wrote {m}"),
                }
            }
        }
        // a plan kept from a good execution, then a value that fails
        let ins = insert_of("INSERT INTO ks.t (k, c) VALUES (?, ?)");
        let kept = Memo::kept();
        run(&t, &ins, &[int(1), int(1)], &kept).unwrap();
        let e = run(&t, &ins, &[int(1), Value::Unset], &kept).unwrap_err();
        assert!(
            e.to_string().contains("Invalid unset value for column c"),
            "{e}"
        );
    }

    #[test]
    fn insert_json_documents_are_read_as_jackson_reads_them() {
        use super::jackson_map;
        assert_eq!(jackson_map(r#"{"k": 1} x"#), Ok(8));
        assert_eq!(jackson_map("null"), Ok(4));
        assert_eq!(
            jackson_map("not json").err().as_deref(),
            Some("com.fasterxml.jackson.core.JsonParseException: Unrecognized token 'not': was expecting (JSON String, Number, Array, Object or token 'null', 'true' or 'false')\n at [Source: (String)\"not json\"; line: 1, column: 4]")
        );
        assert_eq!(
            jackson_map("[1, 2]").err().as_deref(),
            Some("com.fasterxml.jackson.databind.exc.MismatchedInputException: Cannot deserialize value of type `java.util.LinkedHashMap<java.lang.Object,java.lang.Object>` from Array value (token `JsonToken.START_ARRAY`)\n at [Source: (String)\"[1, 2]\"; line: 1, column: 1]")
        );
        assert_eq!(
            jackson_map(r#"{"k": 1,}"#).err().as_deref(),
            Some("com.fasterxml.jackson.core.JsonParseException: Unexpected character ('}' (code 125)): was expecting double-quote to start field name\n at [Source: (String)\"{\"k\": 1,}\"; line: 1, column: 10]")
        );
        assert_eq!(
            jackson_map("{").err().as_deref(),
            Some("com.fasterxml.jackson.core.io.JsonEOFException: Unexpected end-of-input: expected close marker for Object (start marker at [Source: (String)\"{\"; line: 1, column: 1])\n at [Source: (String)\"{\"; line: 1, column: 2]")
        );
    }
}
