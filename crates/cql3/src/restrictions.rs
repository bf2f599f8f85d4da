//! WHERE-clause analysis shared by SELECT, UPDATE and DELETE: partition keys,
//! clustering slices, token ranges and row filters, with Cassandra's rules on
//! what needs ALLOW FILTERING.

use crate::error::{Error, Result};
use crate::terms::{Eval, Val};
use bytes::Bytes;
use sibyl_cql::{Operator, Relation, RelationLhs, RelationRhs, Term};
use sibyl_db::cells::make_partition_key;
use sibyl_db::{BoundKind, ClusteringKey};
use sibyl_schema::schema::{ColumnKind, TableMetadata};
use sibyl_types::{value, CqlType};
use std::cmp::Ordering;

pub const ALLOW_FILTERING_MSG: &str = "Cannot execute this query as it might involve data filtering and thus may have unpredictable performance. If you want to execute this query despite the performance unpredictability, use ALLOW FILTERING";

/// A per-row condition evaluated after reading.
#[derive(Debug, Clone)]
pub struct Filter {
    pub column: usize,
    pub op: Operator,
    /// One value, or several for IN.
    pub values: Vec<Bytes>,
    /// `m[key] op value`: the map key whose value is compared.
    pub key: Option<Bytes>,
}

/// A token range `[start, end]` (inclusive bounds after adjustment).
#[derive(Debug, Clone, Copy)]
pub struct TokenRange {
    pub start: i64,
    pub end: i64,
}

/// The analysed WHERE clause.
#[derive(Debug, Clone)]
pub struct Restrictions {
    /// Serialized partition keys when every partition key column is restricted by = or IN.
    pub partition_keys: Option<Vec<Bytes>>,
    pub token_range: Option<TokenRange>,
    /// Clustering slices in clustering order; `None` means the whole partition.
    pub slices: Option<Vec<(ClusteringKey, ClusteringKey)>>,
    /// Full clusterings, when every clustering column is restricted by = or IN.
    pub clusterings: Option<Vec<Vec<Bytes>>>,
    /// Whether the clustering restrictions select a strict subset of rows.
    pub has_clustering_restriction: bool,
    pub filters: Vec<Filter>,
    /// Filtering is needed (the query must say ALLOW FILTERING).
    pub needs_filtering: bool,
    /// The first clustering column restricted after an unrestricted one, and
    /// that one: without ALLOW FILTERING (or an index) Cassandra refuses it.
    pub clustering_gap: Option<(String, String)>,
    /// A clustering restriction after a slice (or a slice before an
    /// equality): refused without ALLOW FILTERING.
    pub order_error: Option<String>,
    /// A restriction Cassandra cannot turn into a row filter (a multi-column
    /// slice or IN after the clustering prefix): refused once filtering is
    /// allowed.
    pub filter_error: Option<String>,
}

impl Restrictions {
    /// Whether the clustering restrictions select no row at all (every
    /// slice starts after its end, or there is none): Cassandra answers
    /// such a statement before it checks its keys or its deletions.
    pub fn selects_nothing(&self) -> bool {
        self.slices
            .as_ref()
            .is_some_and(|s| s.iter().all(|(start, end)| start > end))
    }
}

/// Cassandra's error for a clustering (or partition) key column restricted
/// while one before it is not.
pub(crate) fn preceding_not_restricted(col: &str, prev: &str) -> Error {
    Error::Invalid(format!(
        "PRIMARY KEY column \"{col}\" cannot be restricted as preceding column \"{prev}\" is not restricted"
    ))
}

/// A dense COMPACT STORAGE table takes a row under a clustering prefix:
/// `given` says which clustering columns have a value; a gap before one
/// that has is refused.
pub(crate) fn check_clustering_prefix(table: &TableMetadata, given: &[bool]) -> Result<()> {
    if let Some(gap) = given.iter().position(|g| !g) {
        if let Some(after) = given[gap..].iter().position(|g| *g) {
            return Err(preceding_not_restricted(
                &table.clustering()[gap + after].name,
                &table.clustering()[gap].name,
            ));
        }
    }
    Ok(())
}

fn rhs_values(ev: &Eval, rel: &Relation, col: &str, t: &CqlType) -> Result<Vec<Bytes>> {
    rhs_values_or(ev, rel, col, t, &|| null_in_condition(col))
}

/// The values of a relation; `null_msg`: the error for a null value (made
/// only then: this runs on every execution).
fn rhs_values_or(
    ev: &Eval,
    rel: &Relation,
    col: &str,
    t: &CqlType,
    null_msg: &dyn Fn() -> String,
) -> Result<Vec<Bytes>> {
    let one = |v: Val| set_value(v, col, null_msg);
    match &rel.rhs {
        RelationRhs::Term(term) => {
            let vt = match rel.op {
                Operator::Contains => match t.unfrozen() {
                    CqlType::List(e) | CqlType::Set(e) => e.as_ref().clone(),
                    CqlType::Map(_, v) => v.as_ref().clone(),
                    _ => {
                        return Err(Error::Invalid(format!(
                            "Cannot use CONTAINS on non-collection column {col}"
                        )))
                    }
                },
                Operator::ContainsKey => match t.unfrozen() {
                    CqlType::Map(k, _) => k.as_ref().clone(),
                    _ => {
                        return Err(Error::Invalid(format!(
                            "Cannot use CONTAINS KEY on non-map column {col}"
                        )))
                    }
                },
                _ => t.clone(),
            };
            // Cassandra's receivers of CONTAINS and CONTAINS KEY values
            let receiver: std::borrow::Cow<str> = match rel.op {
                Operator::Contains => format!("value({col})").into(),
                Operator::ContainsKey => format!("key({col})").into(),
                _ => col.into(),
            };
            Ok(vec![one(ev.value(term, &vt, &receiver)?)?])
        }
        RelationRhs::InList(items) => {
            let mut out = Vec::new();
            for it in items {
                out.push(one(ev.value(it, t, col)?)?);
            }
            Ok(out)
        }
        RelationRhs::InMarker(m) => {
            let lt = CqlType::List(Box::new(t.clone()));
            match ev.value(&Term::Bind(m.clone()), &lt, &format!("in({col})"))? {
                Val::Set(b) => {
                    value::deserialize_collection(&b).map_err(|e| Error::Invalid(e.to_string()))
                }
                Val::Null => Err(Error::Invalid(format!(
                    "Invalid null value for IN restriction on {col}"
                ))),
                Val::Unset => Err(Error::Invalid(format!(
                    "Invalid unset value for column {col}"
                ))),
            }
        }
        RelationRhs::NotNull => Ok(Vec::new()),
    }
}

/// Cassandra's words for a null where a relation needs a value.
fn null_in_condition(col: &str) -> String {
    format!("Invalid null value in condition for column {col}")
}

/// A relation's set value; `null_msg`: the error for a null value.
fn set_value(v: Val, col: &str, null_msg: &dyn Fn() -> String) -> Result<Bytes> {
    match v {
        Val::Set(b) => Ok(b),
        Val::Null => Err(Error::Invalid(null_msg())),
        Val::Unset => Err(Error::Invalid(format!(
            "Invalid unset value for column {col}"
        ))),
    }
}

fn sort_dedup(t: &CqlType, mut v: Vec<Bytes>) -> Vec<Bytes> {
    v.sort_by(|a, b| t.compare(a, b));
    v.dedup_by(|a, b| t.compare(a, b) == Ordering::Equal);
    v
}

/// What kind of statement the restrictions are for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Purpose {
    Select,
    Update,
    Delete,
}

fn token_of(v: &[u8]) -> Result<i64> {
    let a: [u8; 8] = v
        .try_into()
        .map_err(|_| Error::Invalid("Invalid token value".into()))?;
    Ok(i64::from_be_bytes(a))
}

/// A slice (`<`, `<=`, `>`, `>=`) of a column whose type holds a duration
/// is refused: durations have no order (Cassandra's
/// `SingleColumnRelation.newSliceRestriction`, checked before the
/// relation's value and receivers).
pub(crate) fn check_duration_slice(typ: &CqlType, op: Operator) -> Result<()> {
    if !matches!(
        op,
        Operator::Gt | Operator::Ge | Operator::Lt | Operator::Le
    ) || !typ.references_duration()
    {
        return Ok(());
    }
    let within = match typ.unfrozen() {
        CqlType::List(_) | CqlType::Set(_) | CqlType::Map(..) => "collections containing durations",
        CqlType::Tuple(_) => "tuples containing durations",
        CqlType::Udt(_) => "UDTs containing durations",
        _ => "duration columns",
    };
    Err(Error::Invalid(format!(
        "Slice restrictions are not supported on {within}"
    )))
}

/// Analyses `relations` for `table`.
pub fn analyse(
    table: &TableMetadata,
    relations: &[Relation],
    ev: &Eval,
    purpose: Purpose,
) -> Result<Restrictions> {
    if let Some(r) = partition_key_only(table, relations, ev, purpose) {
        return r;
    }
    let pk_n = table.partition_key_count;
    let ck_n = table.clustering_count;
    let mut pk_vals: Vec<Option<Vec<Bytes>>> = vec![None; pk_n];
    let mut pk_other = false;
    let mut token_range: Option<TokenRange> = None;
    // per clustering column: Eq values, or slice bounds
    let mut ck_eq: Vec<Option<Vec<Bytes>>> = vec![None; ck_n];
    let mut ck_slice: Vec<(Option<(Bytes, bool)>, Option<(Bytes, bool)>)> =
        vec![(None, None); ck_n];
    let mut multi: Option<(
        usize,
        Option<Vec<Vec<Bytes>>>,
        Option<(Vec<Bytes>, bool)>,
        Option<(Vec<Bytes>, bool)>,
    )> = None;
    let mut filters = Vec::new();
    let mut non_pk_in_where = Vec::new();

    let mut merger = Merger::default();
    for rel in relations {
        if rel.op == Operator::Ne {
            return Err(Error::Invalid(format!(
                "Unsupported \"!=\" relation: {}",
                rel_text(rel)
            )));
        }
        if rel.op == Operator::IsNotNull {
            return Err(Error::Invalid(format!(
                "Unsupported restriction: {}",
                rel_text(rel)
            )));
        }
        match &rel.lhs {
            RelationLhs::Token(cols) => {
                let names: Vec<&str> = table
                    .partition_key()
                    .iter()
                    .map(|c| c.name.as_str())
                    .collect();
                check_token_columns(table, cols, &names)?;
                let v = match &rel.rhs {
                    RelationRhs::Term(Term::Function { name, args })
                        if name.eq_ignore_ascii_case("token") =>
                    {
                        let pk = table.partition_key();
                        if args.len() != pk.len() {
                            return Err(Error::Invalid(format!("Invalid number of arguments in call to function system.token: {} required but {} provided", pk.len(), args.len())));
                        }
                        let mut parts = Vec::new();
                        for (n, (a, c)) in args.iter().zip(pk).enumerate() {
                            let v = ev.value(a, &c.typ, &c.name).map_err(|_| {
                                Error::Invalid(format!(
                                    "Type error: {} cannot be passed as argument {n} of function system.token of type {}",
                                    sibyl_cql::term_text(a),
                                    c.typ
                                ))
                            })?;
                            match v {
                                Val::Set(b) => parts.push(b),
                                _ => {
                                    return Err(Error::Invalid(
                                        "Invalid null value for token".into(),
                                    ))
                                }
                            }
                        }
                        let tok = sibyl_types::murmur3::token(&make_partition_key(&parts));
                        vec![Bytes::copy_from_slice(&tok.to_be_bytes())]
                    }
                    _ => {
                        let types = table
                            .partition_key()
                            .iter()
                            .map(|c| c.typ.clone())
                            .collect();
                        crate::terms::with_token_types(types, || {
                            rhs_values(ev, rel, "partition key token", &CqlType::Bigint)
                        })?
                    }
                };
                let Some(v) = v.first() else {
                    return Err(Error::Invalid("Invalid token restriction".into()));
                };
                let tok = token_of(v)?;
                merger.add_token(table, Kind::of(rel))?;
                let r = token_range.get_or_insert(TokenRange {
                    start: i64::MIN,
                    end: i64::MAX,
                });
                match rel.op {
                    // the minimum token bounds nothing: as an end it is the
                    // end of the ring, and `= MIN` is the whole ring
                    // (Cassandra's SelectStatement.getPartitionKeyBounds)
                    Operator::Lt | Operator::Le | Operator::Eq if tok == i64::MIN => {}
                    Operator::Gt => r.start = r.start.max(tok.saturating_add(1)),
                    Operator::Ge => r.start = r.start.max(tok),
                    Operator::Lt => r.end = r.end.min(tok.saturating_sub(1)),
                    Operator::Le => r.end = r.end.min(tok),
                    Operator::Eq => {
                        r.start = r.start.max(tok);
                        r.end = r.end.min(tok);
                    }
                    _ => {
                        return Err(Error::Invalid(format!(
                            "{} cannot be used with the token function",
                            rel.op.as_str()
                        )))
                    }
                }
            }
            RelationLhs::Columns(cols) => {
                // multi-column relation on clustering columns
                let mut idxs = Vec::new();
                for c in cols {
                    let Some(i) = table.column_index(c) else {
                        return Err(Error::Invalid(format!(
                            "Undefined column name {} in table {}",
                            sibyl_types::ident::maybe_quote(c),
                            table.display_name()
                        )));
                    };
                    if table.columns[i].kind != ColumnKind::Clustering {
                        return Err(Error::Invalid(format!(
                            "Multi-column relations can only be applied to clustering columns but was applied to: {c}"
                        )));
                    }
                    if idxs.contains(&(i - pk_n)) {
                        return Err(Error::Invalid(format!(
                            "Column \"{c}\" appeared twice in a relation: {}",
                            rel_text(rel)
                        )));
                    }
                    if idxs.last().is_some_and(|&p| i - pk_n != p + 1) {
                        return Err(Error::Invalid(format!(
                            "Clustering columns must appear in the PRIMARY KEY order in multi-column relations: {}",
                            rel_text(rel)
                        )));
                    }
                    idxs.push(i - pk_n);
                }
                let first = idxs[0];
                let types: Vec<CqlType> = idxs
                    .iter()
                    .map(|i| table.columns[pk_n + i].typ.clone())
                    .collect();
                let tt = CqlType::Tuple(types.clone());
                // a tuple literal's elements are typed by their columns
                let one = |t: &Term| -> Result<Vec<Bytes>> {
                    let Term::Tuple(items) = t else {
                        return tuple_values(ev.value(t, &tt, "tuple")?, types.len());
                    };
                    if items.len() != idxs.len() {
                        return Err(Error::Invalid(format!(
                            "Expected {} elements in value tuple, but got {}: {}",
                            idxs.len(),
                            items.len(),
                            sibyl_cql::term_text(t)
                        )));
                    }
                    let mut vals = Vec::with_capacity(items.len());
                    for (it, i) in items.iter().zip(&idxs) {
                        let col = &table.columns[pk_n + i];
                        vals.push(ev.value(it, &col.typ, &col.name)?);
                    }
                    let mut out = Vec::with_capacity(vals.len());
                    for (v, i) in vals.into_iter().zip(&idxs) {
                        let name = &table.columns[pk_n + i].name;
                        match v {
                            Val::Set(b) => out.push(b),
                            // Cassandra's words differ: a tuple slice's bound
                            // is a condition, an equality's a value
                            Val::Null if !matches!(rel.op, Operator::Eq | Operator::In) => {
                                return Err(Error::Invalid(null_in_condition(name)))
                            }
                            Val::Null => {
                                return Err(Error::Invalid(format!(
                                    "Invalid null value for column {name}"
                                )))
                            }
                            Val::Unset => {
                                return Err(Error::Invalid(format!(
                                    "Invalid unset value for column {name}"
                                )))
                            }
                        }
                    }
                    Ok(out)
                };
                let tuples: Vec<Vec<Bytes>> = match &rel.rhs {
                    RelationRhs::Term(t) => vec![one(t)?],
                    RelationRhs::InList(items) => {
                        let mut out = Vec::new();
                        for it in items {
                            out.push(one(it)?);
                        }
                        out
                    }
                    RelationRhs::InMarker(m) => {
                        let lt = CqlType::List(Box::new(tt.clone()));
                        match ev.value(&Term::Bind(m.clone()), &lt, "in(tuple)")? {
                            Val::Set(b) => value::deserialize_collection(&b)
                                .map_err(|e| Error::Invalid(e.to_string()))?
                                .into_iter()
                                .map(|e| tuple_values(Val::Set(e), types.len()))
                                .collect::<Result<Vec<_>>>()?,
                            _ => {
                                return Err(Error::Invalid(
                                    "Invalid null value for IN restriction".into(),
                                ))
                            }
                        }
                    }
                    RelationRhs::NotNull => {
                        return Err(Error::Invalid("IS NOT NULL is not supported here".into()))
                    }
                };
                merger.add(table, rel, idxs.iter().map(|i| pk_n + i).collect(), false)?;
                let entry = multi.get_or_insert((first, None, None, None));
                if first < entry.0 {
                    entry.0 = first;
                }
                match rel.op {
                    Operator::Eq | Operator::In => entry.1 = Some(tuples),
                    Operator::Gt => entry.2 = Some((tuples[0].clone(), false)),
                    Operator::Ge => entry.2 = Some((tuples[0].clone(), true)),
                    Operator::Lt => entry.3 = Some((tuples[0].clone(), false)),
                    Operator::Le => entry.3 = Some((tuples[0].clone(), true)),
                    _ => {
                        return Err(Error::Invalid(format!(
                            "Unsupported operator {} in multi-column relation",
                            rel.op.as_str()
                        )))
                    }
                }
            }
            RelationLhs::Element(c, key) => {
                let Some(i) = table.column_index(c) else {
                    return Err(Error::Invalid(format!(
                        "Undefined column name {} in table {}",
                        sibyl_types::ident::maybe_quote(c),
                        table.display_name()
                    )));
                };
                let col = &table.columns[i];
                if matches!(col.typ.unfrozen(), CqlType::List(_)) {
                    return Err(Error::Invalid(format!(
                        "Indexes on list entries ({c}[index] = value) are not currently supported."
                    )));
                }
                let CqlType::Map(kt, vt) = col.typ.unfrozen() else {
                    return Err(Error::Invalid(format!(
                        "Column {c} cannot be used as a map"
                    )));
                };
                if !col.typ.is_multi_cell() {
                    return Err(Error::Invalid(format!(
                        "Map-entry equality predicates on frozen map column {c} are not supported"
                    )));
                }
                if rel.op != Operator::Eq {
                    return Err(Error::Invalid(
                        "Only EQ relations are supported on map entries".into(),
                    ));
                }
                let key = ev.value(key, kt, &format!("key({c})"))?;
                let vals = rhs_values_or(ev, rel, &format!("value({c})"), vt, &|| {
                    format!("Unsupported null map value for column {c}")
                })?;
                let key = match key {
                    Val::Set(b) => b,
                    _ => {
                        return Err(Error::Invalid(format!(
                            "Unsupported null map key for column {c}"
                        )))
                    }
                };
                merger.add(table, rel, vec![i], false)?;
                if purpose != Purpose::Select {
                    non_pk_in_where.push(c.clone());
                }
                filters.push(Filter {
                    column: i,
                    op: rel.op,
                    values: vals,
                    key: Some(key),
                });
            }
            RelationLhs::Column(c) => {
                let Some(i) = table.column_index(c) else {
                    return Err(Error::Invalid(format!(
                        "Undefined column name {} in table {}",
                        sibyl_types::ident::maybe_quote(c),
                        table.display_name()
                    )));
                };
                let col = &table.columns[i];
                check_duration_slice(&col.typ, rel.op)?;
                if col.typ.is_multi_cell() {
                    if matches!(col.typ, CqlType::Udt(_)) {
                        return Err(Error::Invalid(format!(
                            "Non-frozen UDT column '{c}' ({}) cannot be restricted by any relation",
                            col.typ
                        )));
                    }
                    if !matches!(rel.op, Operator::Contains | Operator::ContainsKey) {
                        return Err(Error::Invalid(format!(
                            "Collection column '{c}' ({}) cannot be restricted by a '{}' relation",
                            col.typ,
                            rel.op.as_str()
                        )));
                    }
                }
                let indexed = table
                    .indexes
                    .iter()
                    .any(|ix| &ix.column == c && ix.supports(rel.op, false, col.typ.unfrozen()));
                if rel.op == Operator::Like && !indexed {
                    return Err(Error::Invalid(format!(
                        "LIKE restriction is only supported on properly indexed columns. {} is not valid.",
                        rel_text(rel)
                    )));
                }
                // a null bound of a clustering slice is Cassandra's empty
                // value, which sorts first: `c > null` keeps every row,
                // `c <= null` none
                let null_bound = col.kind == ColumnKind::Clustering
                    && matches!(
                        rel.op,
                        Operator::Gt | Operator::Ge | Operator::Lt | Operator::Le
                    )
                    && matches!(&rel.rhs, RelationRhs::Term(t) if matches!(ev.value(t, &col.typ, c), Ok(Val::Null)));
                let vals = if null_bound {
                    vec![Bytes::new()]
                } else if matches!(col.kind, ColumnKind::Regular | ColumnKind::Static) {
                    match &rel.rhs {
                        // several IN values of a filter may hold a null:
                        // Cassandra's list of them ends at the first one
                        // (one value alone is an equality, where null is
                        // refused)
                        RelationRhs::InList(items) if items.len() > 1 => {
                            let mut out = Vec::with_capacity(items.len());
                            let mut ended = false;
                            for it in items {
                                // (every value is still checked)
                                match ev.value(it, &col.typ, c)? {
                                    _ if ended => {}
                                    Val::Set(b) => out.push(b),
                                    Val::Null if col.typ.is_counter() => {
                                        return Err(Error::Invalid(
                                            "Invalid null value for counter increment/decrement"
                                                .into(),
                                        ))
                                    }
                                    Val::Null => ended = true,
                                    Val::Unset => {
                                        return Err(Error::Invalid(format!(
                                            "Invalid unset value for column {c}"
                                        )))
                                    }
                                }
                            }
                            out
                        }
                        _ => rhs_values_or(ev, rel, c, &col.typ, &|| {
                            format!("Unsupported null value for column {c}")
                        })?,
                    }
                } else {
                    rhs_values(ev, rel, c, &col.typ)?
                };
                merger.add(table, rel, vec![i], indexed)?;
                match col.kind {
                    ColumnKind::PartitionKey if matches!(rel.op, Operator::Eq | Operator::In) => {
                        pk_vals[i] = Some(sort_dedup(&col.typ, vals));
                    }
                    ColumnKind::PartitionKey => {
                        if purpose != Purpose::Select {
                            return Err(Error::Invalid(format!(
                                "Invalid operator {} for PRIMARY KEY part {c}",
                                rel.op.as_str()
                            )));
                        }
                        pk_other = true;
                        filters.push(Filter {
                            column: i,
                            op: rel.op,
                            values: vals,
                            key: None,
                        });
                    }
                    ColumnKind::Clustering => {
                        let k = i - pk_n;
                        match rel.op {
                            Operator::Eq | Operator::In => {
                                ck_eq[k] = Some(sort_dedup(&col.typ, vals))
                            }
                            Operator::Gt | Operator::Ge => {
                                ck_slice[k].0 =
                                    vals.into_iter().next().map(|v| (v, rel.op == Operator::Ge))
                            }
                            Operator::Lt | Operator::Le => {
                                ck_slice[k].1 =
                                    vals.into_iter().next().map(|v| (v, rel.op == Operator::Le))
                            }
                            _ => filters.push(Filter {
                                column: i,
                                op: rel.op,
                                values: vals,
                                key: None,
                            }),
                        }
                    }
                    ColumnKind::Regular | ColumnKind::Static => {
                        if purpose != Purpose::Select {
                            non_pk_in_where.push(c.clone());
                        }
                        filters.push(Filter {
                            column: i,
                            op: rel.op,
                            values: vals,
                            key: None,
                        });
                    }
                }
            }
        }
    }

    let mut needs_filtering = !filters.is_empty();
    // partition keys
    let all_pk = pk_vals.iter().all(|v| v.is_some());
    let any_pk = pk_vals.iter().any(|v| v.is_some()) || pk_other;
    let partition_keys = if all_pk && !pk_other {
        let mut keys: Vec<Vec<Bytes>> = vec![Vec::new()];
        for v in pk_vals.iter().flatten() {
            let mut next = Vec::with_capacity(keys.len() * v.len());
            for k in &keys {
                for x in v {
                    let mut nk = k.clone();
                    nk.push(x.clone());
                    next.push(nk);
                }
            }
            keys = next;
        }
        Some(
            keys.iter()
                .map(|k| make_partition_key(k))
                .collect::<Vec<Bytes>>(),
        )
    } else {
        if purpose != Purpose::Select {
            let missing: Vec<&str> = table
                .partition_key()
                .iter()
                .zip(pk_vals.iter())
                .filter(|(_, v)| v.is_none())
                .map(|(c, _)| c.name.as_str())
                .collect();
            return Err(Error::Invalid(format!(
                "Some partition key parts are missing: {}",
                missing.join(", ")
            )));
        }
        if any_pk {
            // partial partition key: a filter on each restricted component
            needs_filtering = true;
            for (i, v) in pk_vals.iter().enumerate() {
                if let Some(v) = v {
                    filters.push(Filter {
                        column: i,
                        op: if v.len() == 1 {
                            Operator::Eq
                        } else {
                            Operator::In
                        },
                        values: v.clone(),
                        key: None,
                    });
                }
            }
        }
        None
    };
    if !non_pk_in_where.is_empty() {
        return Err(Error::Invalid(format!(
            "Non PRIMARY KEY columns found in where clause: {}",
            non_pk_in_where.join(", ")
        )));
    }
    let mut partition_keys = partition_keys;
    if let (Some(range), Some(keys)) = (token_range, &partition_keys) {
        if purpose != Purpose::Select {
            return Err(Error::Invalid(
                "Columns \"".to_string()
                    + &table
                        .partition_key()
                        .iter()
                        .map(|c| c.name.clone())
                        .collect::<Vec<_>>()
                        .join(", ")
                    + "\" cannot be restricted by both a normal relation and a token relation",
            ));
        }
        // Cassandra's TokenFilter: the keys whose token is in the range
        partition_keys = Some(
            keys.iter()
                .filter(|k| {
                    let t = sibyl_types::murmur3::token(k);
                    t >= range.start && t <= range.end
                })
                .cloned()
                .collect(),
        );
        token_range = None;
    }

    // clustering
    let cmp = table.comparator.clone();
    let mut prefixes: Vec<Vec<Bytes>> = vec![Vec::new()];
    let mut slice_at: Option<usize> = None;
    let mut has_clustering_restriction = false;
    let mut stopped_at: Option<usize> = None;
    let mut k = 0;
    // a multi-column slice: its ranges, built on the equality prefixes
    let mut multi_slices: Option<Vec<(ClusteringKey, ClusteringKey)>> = None;
    if let Some((first, _, lo, hi)) = &mut multi {
        // `(a, b) > (1, 2) AND a < 3`: the single-column bound joins the tuple's
        let f = *first;
        if lo.is_none() {
            if let Some((v, incl)) = ck_slice[f].0.take() {
                *lo = Some((vec![v], incl));
            }
        }
        if hi.is_none() {
            if let Some((v, incl)) = ck_slice[f].1.take() {
                *hi = Some((vec![v], incl));
            }
        }
    }
    let multi_first = multi.as_ref().map(|m| m.0);
    let mut multi_used = false;
    while k < ck_n {
        if let (Some((first, eqs, lo, hi)), true) = (&multi, multi_first == Some(k)) {
            multi_used = true;
            has_clustering_restriction = true;
            if let Some(eqs) = eqs {
                let width = eqs.first().map(|t| t.len()).unwrap_or(1);
                let mut next = Vec::with_capacity(prefixes.len() * eqs.len());
                for p in &prefixes {
                    for t in eqs {
                        let mut np = p.clone();
                        np.extend(t.iter().cloned());
                        next.push(np);
                    }
                }
                prefixes = next;
                k += width;
                if eqs.is_empty() {
                    // `(a, b) IN ()`: nothing
                    k = prefixes.first().map(|p| p.len()).unwrap_or(*first + width);
                }
                continue;
            }
            let mut out = Vec::new();
            for p in &prefixes {
                out.extend(tuple_slices(table, p, lo.as_ref(), hi.as_ref()));
            }
            multi_slices = Some(out);
            k += 1;
            stopped_at = Some(k);
            break;
        }
        if let Some(vals) = &ck_eq[k] {
            has_clustering_restriction = true;
            let mut next = Vec::with_capacity(prefixes.len() * vals.len());
            for p in &prefixes {
                for v in vals {
                    let mut np = p.clone();
                    np.push(v.clone());
                    next.push(np);
                }
            }
            prefixes = next;
            k += 1;
            continue;
        }
        if ck_slice[k].0.is_some() || ck_slice[k].1.is_some() {
            has_clustering_restriction = true;
            slice_at = Some(k);
            k += 1;
        }
        stopped_at = Some(k);
        break;
    }
    // anything restricted after the prefix/slice needs filtering
    let resume = stopped_at.unwrap_or(ck_n);
    for j in resume..ck_n {
        if ck_eq[j].is_some() || ck_slice[j].0.is_some() || ck_slice[j].1.is_some() {
            if purpose != Purpose::Select {
                let prev = &table.clustering()[(0..j)
                    .find(|&i| ck_eq[i].is_none())
                    .unwrap_or(j.saturating_sub(1))]
                .name;
                return Err(preceding_not_restricted(&table.clustering()[j].name, prev));
            }
            needs_filtering = true;
            let col = pk_n + j;
            if let Some(v) = &ck_eq[j] {
                filters.push(Filter {
                    column: col,
                    op: if v.len() == 1 {
                        Operator::Eq
                    } else {
                        Operator::In
                    },
                    values: v.clone(),
                    key: None,
                });
            }
            if let Some((v, incl)) = &ck_slice[j].0 {
                filters.push(Filter {
                    column: col,
                    op: if *incl { Operator::Ge } else { Operator::Gt },
                    values: vec![v.clone()],
                    key: None,
                });
            }
            if let Some((v, incl)) = &ck_slice[j].1 {
                filters.push(Filter {
                    column: col,
                    op: if *incl { Operator::Le } else { Operator::Lt },
                    values: vec![v.clone()],
                    key: None,
                });
            }
        }
    }
    if let Some(j) = slice_at {
        // the slice column's own values were consumed; they are in ck_slice[j]
        let _ = j;
    }
    // a multi-column relation that does not continue the clustering prefix
    // is a row filter (Cassandra's MultiColumnRestriction.addToRowFilter)
    let mut filter_error = None;
    let multi_unused = multi.as_ref().filter(|_| !multi_used);
    if let (Some((first, eqs, lo, hi)), Purpose::Select) = (multi_unused, purpose) {
        needs_filtering = true;
        if lo.is_some() || hi.is_some() {
            filter_error =
                Some("Multi-column slice restrictions cannot be used for filtering.".to_string());
        } else if let Some(eqs) = eqs {
            match eqs.as_slice() {
                [one] => {
                    for (n, v) in one.iter().enumerate() {
                        filters.push(Filter {
                            column: pk_n + first + n,
                            op: Operator::Eq,
                            values: vec![v.clone()],
                            key: None,
                        });
                    }
                }
                _ if eqs.iter().all(|t| t.len() == 1) => filters.push(Filter {
                    column: pk_n + first,
                    op: Operator::In,
                    values: eqs.iter().filter_map(|t| t.first().cloned()).collect(),
                    key: None,
                }),
                _ => filter_error = Some("Multicolumn IN filters are not supported".to_string()),
            }
        }
    }
    let full = prefixes.first().map(|p| p.len()).unwrap_or(0) == ck_n
        && slice_at.is_none()
        && multi_slices.is_none();
    let clusterings = if full { Some(prefixes.clone()) } else { None };
    let slices = if !has_clustering_restriction {
        None
    } else if let Some(ms) = multi_slices {
        Some(ms)
    } else {
        let mut out = Vec::new();
        for p in &prefixes {
            match slice_at {
                None => {
                    if p.len() == ck_n {
                        let r = ClusteringKey::row(p.clone(), cmp.clone());
                        out.push((
                            ClusteringKey::bound(
                                r.values.clone(),
                                BoundKind::StartInclusive,
                                cmp.clone(),
                            ),
                            ClusteringKey::bound(r.values, BoundKind::EndInclusive, cmp.clone()),
                        ));
                    } else {
                        out.push((
                            ClusteringKey::bound(p.clone(), BoundKind::StartInclusive, cmp.clone()),
                            ClusteringKey::bound(p.clone(), BoundKind::EndInclusive, cmp.clone()),
                        ));
                    }
                }
                Some(j) => {
                    let reversed = table.clustering()[j].reversed;
                    let (lo, hi) = &ck_slice[j];
                    let mut start =
                        ClusteringKey::bound(p.clone(), BoundKind::StartInclusive, cmp.clone());
                    let mut end =
                        ClusteringKey::bound(p.clone(), BoundKind::EndInclusive, cmp.clone());
                    let with = |v: &Bytes| {
                        let mut np = p.clone();
                        np.push(v.clone());
                        np
                    };
                    if let Some((v, incl)) = lo {
                        if reversed {
                            end = ClusteringKey::bound(
                                with(v),
                                if *incl {
                                    BoundKind::EndInclusive
                                } else {
                                    BoundKind::EndExclusive
                                },
                                cmp.clone(),
                            );
                        } else {
                            start = ClusteringKey::bound(
                                with(v),
                                if *incl {
                                    BoundKind::StartInclusive
                                } else {
                                    BoundKind::StartExclusive
                                },
                                cmp.clone(),
                            );
                        }
                    }
                    if let Some((v, incl)) = hi {
                        if reversed {
                            start = ClusteringKey::bound(
                                with(v),
                                if *incl {
                                    BoundKind::StartInclusive
                                } else {
                                    BoundKind::StartExclusive
                                },
                                cmp.clone(),
                            );
                        } else {
                            end = ClusteringKey::bound(
                                with(v),
                                if *incl {
                                    BoundKind::EndInclusive
                                } else {
                                    BoundKind::EndExclusive
                                },
                                cmp.clone(),
                            );
                        }
                    }
                    out.push((start, end));
                }
            }
        }
        Some(out)
    };
    let multi_eq_cols = match &multi {
        Some((first, Some(eqs), _, _)) => *first..*first + eqs.first().map_or(0, |t| t.len()),
        _ => 0..0,
    };
    if purpose == Purpose::Update && ck_n > 0 && !full {
        let missing: Vec<&str> = table
            .clustering()
            .iter()
            .enumerate()
            .filter(|(j, _)| ck_eq[*j].is_none() && !multi_eq_cols.contains(j))
            .map(|(_, c)| c.name.as_str())
            .collect();
        return Err(Error::Invalid(format!(
            "Some clustering keys are missing: {}",
            missing.join(", ")
        )));
    }
    if let Some(e) = &merger.order_error {
        if purpose != Purpose::Select {
            return Err(Error::Invalid(e.clone()));
        }
    }
    if let (Some((first, ..)), false) = (multi_unused, purpose == Purpose::Select) {
        // UPDATE and DELETE cannot filter: the relation leaves a gap
        let prev = (0..*first)
            .find(|&i| ck_eq[i].is_none())
            .unwrap_or(first.saturating_sub(1));
        return Err(preceding_not_restricted(
            &table.clustering()[*first].name,
            &table.clustering()[prev].name,
        ));
    }
    let mut r = finish(
        partition_keys,
        token_range,
        slices,
        clusterings,
        has_clustering_restriction,
        filters,
        needs_filtering,
        table,
        purpose,
    )?;
    let multi_cols = multi
        .as_ref()
        .map(|(first, eqs, lo, hi)| {
            let width = [
                eqs.as_ref().and_then(|e| e.first()).map(|t| t.len()),
                lo.as_ref().map(|t| t.0.len()),
                hi.as_ref().map(|t| t.0.len()),
            ]
            .into_iter()
            .flatten()
            .max()
            .unwrap_or(1);
            *first..*first + width
        })
        .unwrap_or(0..0);
    let restricted = |j: usize| {
        ck_eq[j].is_some()
            || ck_slice[j].0.is_some()
            || ck_slice[j].1.is_some()
            || multi_cols.contains(&j)
    };
    // Cassandra names the first restricted column out of place and the
    // first unrestricted one
    if let Some(j) = (0..ck_n).find(|&j| restricted(j) && (0..j).any(|i| !restricted(i))) {
        let i = (0..j).find(|&i| !restricted(i)).unwrap_or(j - 1);
        r.clustering_gap = Some((
            table.clustering()[j].name.clone(),
            table.clustering()[i].name.clone(),
        ));
    }
    r.order_error = merger.order_error;
    r.filter_error = filter_error;
    Ok(r)
}

/// The restrictions of the most common WHERE clause, `k1 = ? AND k2 = ?`:
/// one equality on each partition key column and nothing else (a point
/// read, or the key of a table without clustering columns), made without
/// the general analysis' allocations; `None` for any other clause. Values
/// are read with the general analysis' own function. The two agree only
/// while the general analysis raises nothing but value errors for this
/// shape: a check added there for equalities on partition key columns
/// must be added here too.
fn partition_key_only(
    table: &TableMetadata,
    relations: &[Relation],
    ev: &Eval,
    purpose: Purpose,
) -> Option<Result<Restrictions>> {
    let pk_n = table.partition_key_count;
    let ck_n = table.clustering_count;
    if relations.len() != pk_n || pk_n > 64 || !(purpose == Purpose::Select || ck_n == 0) {
        return None;
    }
    // one pass, as the general analysis goes: a relation of another shape
    // (or a duplicate) leaves it to the general analysis; a bad value is the
    // error the general analysis gives at the same relation
    let mut parts: smallvec::SmallVec<[Bytes; 2]> = smallvec::smallvec![Bytes::new(); pk_n];
    let mut seen = 0u64;
    for rel in relations {
        let (RelationLhs::Column(c), Operator::Eq, RelationRhs::Term(term)) =
            (&rel.lhs, rel.op, &rel.rhs)
        else {
            return None;
        };
        let i = table.column_index(c).filter(|&i| i < pk_n)?;
        if seen & (1 << i) != 0 {
            return None;
        }
        seen |= 1 << i;
        let col = &table.columns[i];
        // as `rhs_values` reads an equality's one value, without its vector
        let v = ev
            .value(term, &col.typ, c)
            .and_then(|v| set_value(v, c, &|| null_in_condition(c)));
        match v {
            Ok(v) => parts[i] = v,
            Err(e) => return Some(Err(e)),
        }
    }
    Some(Ok(Restrictions {
        partition_keys: Some(vec![make_partition_key(&parts)]),
        token_range: None,
        slices: None,
        // every clustering column of none: the one row of the partition
        clusterings: (ck_n == 0).then(|| vec![Vec::new()]),
        has_clustering_restriction: false,
        filters: Vec::new(),
        needs_filtering: false,
        clustering_gap: None,
        order_error: None,
        filter_error: None,
    }))
}

#[allow(clippy::too_many_arguments)]
fn finish(
    partition_keys: Option<Vec<Bytes>>,
    token_range: Option<TokenRange>,
    slices: Option<Vec<(ClusteringKey, ClusteringKey)>>,
    clusterings: Option<Vec<Vec<Bytes>>>,
    has_clustering_restriction: bool,
    filters: Vec<Filter>,
    needs_filtering: bool,
    _table: &TableMetadata,
    _purpose: Purpose,
) -> Result<Restrictions> {
    Ok(Restrictions {
        partition_keys,
        token_range,
        slices,
        clusterings,
        has_clustering_restriction,
        filters,
        needs_filtering,
        clustering_gap: None,
        order_error: None,
        filter_error: None,
    })
}

/// The clustering ranges, in clustering order, of the rows starting with
/// `prefix` whose next columns, as a tuple, are within `lo` and `hi` (values
/// and inclusiveness). The tuple compares by value, column after column,
/// whatever each column's clustering order: with mixed orders one tuple bound
/// is several ranges.
fn tuple_slices(
    table: &TableMetadata,
    prefix: &[Bytes],
    lo: Option<&(Vec<Bytes>, bool)>,
    hi: Option<&(Vec<Bytes>, bool)>,
) -> Vec<(ClusteringKey, ClusteringKey)> {
    let cmp = &table.comparator;
    let p = prefix.len();
    let bound = |vals: Vec<Bytes>, kind| ClusteringKey::bound(vals, kind, cmp.clone());
    let with = |extra: &[Bytes]| {
        let mut v = prefix.to_vec();
        v.extend_from_slice(extra);
        v
    };
    let reversed = |i: usize| table.clustering().get(i).is_some_and(|c| c.reversed);
    let whole = || {
        vec![(
            bound(prefix.to_vec(), BoundKind::StartInclusive),
            bound(prefix.to_vec(), BoundKind::EndInclusive),
        )]
    };
    let width = lo
        .map(|l| l.0.len())
        .max(hi.map(|h| h.0.len()))
        .unwrap_or(0);
    if (p..p + width).all(|i| reversed(i) == reversed(p)) {
        // one order: the bounds are the tuple's prefix bounds
        let (mut start, mut end) = whole().remove(0);
        let rev = reversed(p);
        for (b, lower) in [(lo, true), (hi, false)] {
            let Some((v, incl)) = b else { continue };
            if lower != rev {
                start = bound(
                    with(v),
                    if *incl {
                        BoundKind::StartInclusive
                    } else {
                        BoundKind::StartExclusive
                    },
                );
            } else {
                end = bound(
                    with(v),
                    if *incl {
                        BoundKind::EndInclusive
                    } else {
                        BoundKind::EndExclusive
                    },
                );
            }
        }
        return if start < end {
            vec![(start, end)]
        } else {
            Vec::new()
        };
    }
    // t > v is the union, over i, of t[..i] = v[..i] AND t[i] > v[i]
    let side = |b: Option<&(Vec<Bytes>, bool)>, lower: bool| {
        let Some((vals, incl)) = b else {
            return whole();
        };
        let mut out = Vec::new();
        for i in 0..vals.len() {
            let (q, qv) = (with(&vals[..i]), with(&vals[..=i]));
            if lower != reversed(p + i) {
                out.push((
                    bound(qv, BoundKind::StartExclusive),
                    bound(q, BoundKind::EndInclusive),
                ));
            } else {
                out.push((
                    bound(q, BoundKind::StartInclusive),
                    bound(qv, BoundKind::EndExclusive),
                ));
            }
        }
        if *incl {
            let all = with(vals);
            out.push((
                bound(all.clone(), BoundKind::StartInclusive),
                bound(all, BoundKind::EndInclusive),
            ));
        }
        out
    };
    let (l, u) = (side(lo, true), side(hi, false));
    let mut out = Vec::new();
    for (ls, le) in &l {
        for (us, ue) in &u {
            let start = ls.max(us).clone();
            let end = le.min(ue).clone();
            if start < end {
                out.push((start, end));
            }
        }
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

/// Cassandra's checks of the columns of `token(...)` in a WHERE clause.
fn check_token_columns(table: &TableMetadata, cols: &[String], names: &[&str]) -> Result<()> {
    if cols.iter().map(|s| s.as_str()).eq(names.iter().copied()) {
        return Ok(());
    }
    for c in cols {
        if table.column(c).is_none() {
            return Err(Error::Invalid(format!(
                "Undefined column name {c} in table {}.{}",
                table.keyspace, table.name
            )));
        }
    }
    if !names.iter().all(|n| cols.iter().any(|c| c == n)) {
        return Err(Error::Invalid(
            "The token() function must be applied to all partition key components or none of them"
                .into(),
        ));
    }
    if (1..cols.len()).any(|i| cols[..i].contains(&cols[i])) {
        return Err(Error::Invalid(
            "The token() function contains duplicate partition key components".into(),
        ));
    }
    if cols.iter().any(|c| !names.contains(&c.as_str())) {
        return Err(Error::Invalid(
            "The token() function must contains only partition key components".into(),
        ));
    }
    Err(Error::Invalid(format!(
        "The token function arguments must be in the partition key order: {}",
        names.join(", ")
    )))
}

fn tuple_values(v: Val, n: usize) -> Result<Vec<Bytes>> {
    match v {
        Val::Set(b) => {
            let fields = value::deserialize_tuple(&b).map_err(|e| Error::Invalid(e.to_string()))?;
            let mut out = Vec::with_capacity(n);
            for f in fields.into_iter().take(n) {
                out.push(f.ok_or_else(|| {
                    Error::Invalid("Invalid null value in multi-column relation".into())
                })?);
            }
            Ok(out)
        }
        _ => Err(Error::Invalid(
            "Invalid null value in multi-column relation".into(),
        )),
    }
}

fn rel_text(rel: &Relation) -> String {
    sibyl_cql::relation_text(rel)
}

#[allow(dead_code)]
fn rel_text_short(rel: &Relation) -> String {
    match &rel.lhs {
        RelationLhs::Columns(c) => format!("({}) {} ...", c.join(", "), rel.op.as_str()),
        RelationLhs::Column(c) => format!("{c} {} ...", rel.op.as_str()),
        RelationLhs::Token(c) => format!("token({}) {} ...", c.join(", "), rel.op.as_str()),
        RelationLhs::Element(c, _) => format!("{c}[...] {} ...", rel.op.as_str()),
    }
}

/// A restriction's kind, as Cassandra's `RestrictionSet` merges them: a
/// second relation on a column is merged with the first one (in the order of
/// the WHERE clause), and refused unless both are slices (or CONTAINS).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Eq,
    In,
    Slice { start: bool, end: bool },
    Contains,
    Other,
}

impl Kind {
    fn of(rel: &Relation) -> Kind {
        match (&rel.lhs, rel.op) {
            (RelationLhs::Element(..), _) => Kind::Contains,
            (_, Operator::Eq) => Kind::Eq,
            // an IN of one value is an equality
            (_, Operator::In) => match &rel.rhs {
                RelationRhs::InList(items) if items.len() == 1 => Kind::Eq,
                _ => Kind::In,
            },
            (_, Operator::Gt | Operator::Ge) => Kind::Slice {
                start: true,
                end: false,
            },
            (_, Operator::Lt | Operator::Le) => Kind::Slice {
                start: false,
                end: true,
            },
            (_, Operator::Contains | Operator::ContainsKey) => Kind::Contains,
            _ => Kind::Other,
        }
    }

    fn is_slice(self) -> bool {
        matches!(self, Kind::Slice { .. })
    }

    /// Cassandra converts these single-column restrictions to multi-column
    /// ones to merge them with a multi-column relation.
    fn convertible(self) -> bool {
        matches!(self, Kind::Eq | Kind::In | Kind::Slice { .. })
    }
}

/// One restriction held for a column (or several, for a multi-column one).
#[derive(Debug, Clone)]
struct Held {
    cols: Vec<usize>,
    multi: bool,
    kind: Kind,
}

/// Cassandra's merge of `existing` (an earlier relation) with `new`: the
/// errors name the earlier restriction's kind.
fn merge_held(table: &TableMetadata, e: &Held, n: &Held) -> Result<Held> {
    let name = |i: &usize| table.columns[*i].name.clone();
    let slices = |what: &str| -> Result<Kind> {
        let (Kind::Slice { start, end }, Kind::Slice { start: s2, end: e2 }) = (e.kind, n.kind)
        else {
            return Err(Error::Invalid(format!(
                "Column \"{what}\" cannot be restricted by both an equality and an inequality relation"
            )));
        };
        if start && s2 {
            return Err(Error::Invalid(format!(
                "More than one restriction was found for the start bound on {what}"
            )));
        }
        if end && e2 {
            return Err(Error::Invalid(format!(
                "More than one restriction was found for the end bound on {what}"
            )));
        }
        Ok(Kind::Slice {
            start: start || s2,
            end: end || e2,
        })
    };
    let multi = e.multi || (n.multi && e.kind.convertible());
    let what = if multi {
        e.cols
            .iter()
            .filter(|c| n.cols.contains(c))
            .map(name)
            .collect::<Vec<_>>()
            .join(" ,")
    } else {
        name(&e.cols[0])
    };
    match e.kind {
        Kind::Eq => Err(Error::Invalid(format!(
            "{what} cannot be restricted by more than one relation if it includes an Equal"
        ))),
        Kind::In => Err(Error::Invalid(format!(
            "{what} cannot be restricted by more than one relation if it includes a IN"
        ))),
        Kind::Slice { .. } => {
            let kind = slices(&what)?;
            let cols = if n.cols.len() > e.cols.len() {
                n.cols.clone()
            } else {
                e.cols.clone()
            };
            Ok(Held {
                cols,
                multi,
                kind,
            })
        }
        Kind::Contains if !multi && n.kind != Kind::Contains => Err(Error::Invalid(format!(
            "Collection column {what} can only be restricted by CONTAINS, CONTAINS KEY, or map-entry equality"
        ))),
        _ => Ok(e.clone()),
    }
}

/// The restrictions of a WHERE clause so far, merged as Cassandra merges them.
#[derive(Default)]
struct Merger {
    held: Vec<Held>,
    token: Option<Kind>,
    /// The first clustering restriction refused without ALLOW FILTERING
    /// because of the one before it (Cassandra's
    /// `ClusteringColumnRestrictions.mergeWith`).
    order_error: Option<String>,
}

impl Merger {
    fn add_token(&mut self, table: &TableMetadata, kind: Kind) -> Result<()> {
        let Some(e) = self.token else {
            self.token = Some(kind);
            return Ok(());
        };
        let names = table
            .partition_key()
            .iter()
            .map(|c| c.name.as_str())
            .collect::<Vec<_>>()
            .join(", ");
        match e {
            Kind::Eq => Err(Error::Invalid(format!(
                "{names} cannot be restricted by more than one relation if it includes an Equal"
            ))),
            Kind::Slice { start, end } => {
                let Kind::Slice { start: s2, end: e2 } = kind else {
                    return Err(Error::Invalid(format!(
                        "Columns \"{names}\" cannot be restricted by both an equality and an inequality relation"
                    )));
                };
                if start && s2 {
                    return Err(Error::Invalid(format!(
                        "More than one restriction was found for the start bound on {names}"
                    )));
                }
                if end && e2 {
                    return Err(Error::Invalid(format!(
                        "More than one restriction was found for the end bound on {names}"
                    )));
                }
                self.token = Some(Kind::Slice {
                    start: start || s2,
                    end: end || e2,
                });
                Ok(())
            }
            _ => Ok(()),
        }
    }

    /// Adds the restriction `rel` puts on the columns `cols` (table column
    /// indexes); `indexed`: an index supports it.
    fn add(
        &mut self,
        table: &TableMetadata,
        rel: &Relation,
        cols: Vec<usize>,
        indexed: bool,
    ) -> Result<()> {
        let new = Held {
            multi: matches!(rel.lhs, RelationLhs::Columns(_)),
            kind: Kind::of(rel),
            cols,
        };
        let is_ck = |i: usize| table.columns[i].kind == ColumnKind::Clustering;
        // the clustering restrictions before this one, for the prefix rules
        let last_ck = self
            .held
            .iter()
            .filter(|h| is_ck(h.cols[0]))
            .max_by_key(|h| h.cols.iter().max().copied());
        let prefix_error = match last_ck {
            Some(last) if is_ck(new.cols[0]) && !indexed && self.order_error.is_none() => {
                let (ls, ns) = (last.cols[0], new.cols[0]);
                if last.kind.is_slice() && ns > ls {
                    Some(format!(
                        "Clustering column \"{}\" cannot be restricted (preceding column \"{}\" is restricted by a non-EQ relation)",
                        table.columns[ns].name, table.columns[ls].name
                    ))
                } else if ns < ls && new.kind.is_slice() {
                    let next = self
                        .held
                        .iter()
                        .flat_map(|h| h.cols.iter().copied())
                        .filter(|&c| c > ns && is_ck(c))
                        .min()
                        .unwrap_or(ls);
                    Some(format!(
                        "PRIMARY KEY column \"{}\" cannot be restricted (preceding column \"{}\" is restricted by a non-EQ relation)",
                        table.columns[next].name, table.columns[ns].name
                    ))
                } else {
                    None
                }
            }
            _ => None,
        };
        let existing: Vec<usize> = (0..self.held.len())
            .filter(|&h| self.held[h].cols.iter().any(|c| new.cols.contains(c)))
            .collect();
        if existing.is_empty() {
            self.held.push(new);
        } else {
            for &h in &existing {
                self.held[h] = merge_held(table, &self.held[h], &new)?;
            }
        }
        if prefix_error.is_some() {
            self.order_error = prefix_error;
        }
        Ok(())
    }
}

/// Evaluates a filter against a value (None: null).
pub fn filter_matches(f: &Filter, typ: &CqlType, v: Option<&Bytes>) -> bool {
    if let (Some(key), CqlType::Map(kt, vt)) = (&f.key, typ.unfrozen()) {
        let element = v
            .and_then(|v| value::deserialize_map(v).ok())
            .and_then(|pairs| {
                pairs
                    .into_iter()
                    .find(|(k, _)| kt.compare(k, key) == Ordering::Equal)
                    .map(|(_, x)| x)
            });
        let plain = Filter {
            column: f.column,
            op: f.op,
            values: f.values.clone(),
            key: None,
        };
        return filter_matches(&plain, vt, element.as_ref());
    }
    if f.op == Operator::IsNotNull {
        return v.is_some();
    }
    let Some(v) = v else { return false };
    let cmp = |x: &Bytes| typ.compare(v, x);
    match f.op {
        Operator::Eq => f
            .values
            .first()
            .map(|x| cmp(x) == Ordering::Equal)
            .unwrap_or(false),
        Operator::Ne => f
            .values
            .first()
            .map(|x| cmp(x) != Ordering::Equal)
            .unwrap_or(false),
        Operator::Lt => f
            .values
            .first()
            .map(|x| cmp(x) == Ordering::Less)
            .unwrap_or(false),
        Operator::Le => f
            .values
            .first()
            .map(|x| cmp(x) != Ordering::Greater)
            .unwrap_or(false),
        Operator::Gt => f
            .values
            .first()
            .map(|x| cmp(x) == Ordering::Greater)
            .unwrap_or(false),
        Operator::Ge => f
            .values
            .first()
            .map(|x| cmp(x) != Ordering::Less)
            .unwrap_or(false),
        Operator::In => f.values.iter().any(|x| cmp(x) == Ordering::Equal),
        Operator::Contains => {
            let Some(x) = f.values.first() else {
                return false;
            };
            match typ.unfrozen() {
                CqlType::List(e) | CqlType::Set(e) => value::deserialize_collection(v)
                    .map(|els| els.iter().any(|el| e.compare(el, x) == Ordering::Equal))
                    .unwrap_or(false),
                CqlType::Map(_, vt) => value::deserialize_map(v)
                    .map(|ps| {
                        ps.iter()
                            .any(|(_, val)| vt.compare(val, x) == Ordering::Equal)
                    })
                    .unwrap_or(false),
                _ => false,
            }
        }
        Operator::ContainsKey => {
            let Some(x) = f.values.first() else {
                return false;
            };
            match typ.unfrozen() {
                CqlType::Map(kt, _) => value::deserialize_map(v)
                    .map(|ps| ps.iter().any(|(k, _)| kt.compare(k, x) == Ordering::Equal))
                    .unwrap_or(false),
                _ => false,
            }
        }
        Operator::Like | Operator::IsNotNull => false,
    }
}

/// The values on the right of an LWT condition, typed for its column.
pub fn analyse_condition_values(
    ev: &Eval,
    rel: &Relation,
    col: &str,
    t: &CqlType,
) -> Result<Vec<Bytes>> {
    rhs_values(ev, rel, col, t)
}
