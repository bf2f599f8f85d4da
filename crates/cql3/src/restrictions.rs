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
}

fn rhs_values(ev: &Eval, rel: &Relation, col: &str, t: &CqlType) -> Result<Vec<Bytes>> {
    let one = |v: Val| -> Result<Bytes> {
        match v {
            Val::Set(b) => Ok(b),
            Val::Null => Err(Error::Invalid(format!(
                "Invalid null value in condition for column {col}"
            ))),
            Val::Unset => Err(Error::Invalid(format!(
                "Invalid unset value for column {col}"
            ))),
        }
    };
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
            Ok(vec![one(ev.value(term, &vt, col)?)?])
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

/// Analyses `relations` for `table`.
pub fn analyse(
    table: &TableMetadata,
    relations: &[Relation],
    ev: &Eval,
    purpose: Purpose,
) -> Result<Restrictions> {
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
        Vec<Vec<Bytes>>,
        Option<(Vec<Bytes>, bool)>,
        Option<(Vec<Bytes>, bool)>,
    )> = None;
    let mut filters = Vec::new();
    let mut non_pk_in_where = Vec::new();

    let mut eq_seen: Vec<&str> = Vec::new();
    for rel in relations {
        if rel.op == Operator::Ne {
            return Err(Error::Invalid(format!(
                "Unsupported \"!=\" relation: {}",
                rel_text(rel)
            )));
        }
        if let RelationLhs::Column(c) = &rel.lhs {
            let has_eq = relations
                .iter()
                .filter(|r| matches!(&r.lhs, RelationLhs::Column(x) if x == c))
                .any(|r| matches!(r.op, Operator::Eq | Operator::In));
            let count = relations
                .iter()
                .filter(|r| matches!(&r.lhs, RelationLhs::Column(x) if x == c))
                .count();
            if has_eq
                && count > 1
                && !eq_seen.contains(&c.as_str())
                && table.column(c).is_some_and(|col| col.kind.is_primary_key())
            {
                eq_seen.push(c);
                return Err(Error::Invalid(format!(
                    "{c} cannot be restricted by more than one relation if it includes an Equal"
                )));
            }
        }
        match &rel.lhs {
            RelationLhs::Token(cols) => {
                let names: Vec<&str> = table
                    .partition_key()
                    .iter()
                    .map(|c| c.name.as_str())
                    .collect();
                if cols.iter().map(|s| s.as_str()).collect::<Vec<_>>() != names {
                    return Err(Error::Invalid(format!(
                        "The token function arguments must be in the partition key order: {}",
                        names.join(", ")
                    )));
                }
                let v = match &rel.rhs {
                    RelationRhs::Term(Term::Function { name, args })
                        if name.eq_ignore_ascii_case("token") =>
                    {
                        let pk = table.partition_key();
                        if args.len() != pk.len() {
                            return Err(Error::Invalid(format!("Invalid number of arguments in call to function system.token: {} required but {} provided", pk.len(), args.len())));
                        }
                        let mut parts = Vec::new();
                        for (a, c) in args.iter().zip(pk) {
                            match ev.value(a, &c.typ, &c.name)? {
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
                    _ => rhs_values(ev, rel, "partition key token", &CqlType::Bigint)?,
                };
                let Some(v) = v.first() else {
                    return Err(Error::Invalid("Invalid token restriction".into()));
                };
                let tok = token_of(v)?;
                let r = token_range.get_or_insert(TokenRange {
                    start: i64::MIN,
                    end: i64::MAX,
                });
                match rel.op {
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
                            "Undefined column name {c} in table {}",
                            table.display_name()
                        )));
                    };
                    if table.columns[i].kind != ColumnKind::Clustering {
                        return Err(Error::Invalid(format!(
                            "Multi-column relations can only be applied to clustering columns but was applied to: {c}"
                        )));
                    }
                    idxs.push(i - pk_n);
                }
                let first = idxs[0];
                if idxs.iter().enumerate().any(|(k, i)| *i != first + k) {
                    return Err(Error::Invalid(format!(
                        "Clustering columns must appear in the PRIMARY KEY order in multi-column relations: {}",
                        rel_text(rel)
                    )));
                }
                let types: Vec<CqlType> = idxs
                    .iter()
                    .map(|i| table.columns[pk_n + i].typ.clone())
                    .collect();
                let tt = CqlType::Tuple(types.clone());
                let tuples: Vec<Vec<Bytes>> = match &rel.rhs {
                    RelationRhs::Term(t) => {
                        vec![tuple_values(ev.value(t, &tt, "tuple")?, types.len())?]
                    }
                    RelationRhs::InList(items) => {
                        let mut out = Vec::new();
                        for it in items {
                            out.push(tuple_values(ev.value(it, &tt, "tuple")?, types.len())?);
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
                let entry = multi.get_or_insert((first, Vec::new(), None, None));
                match rel.op {
                    Operator::Eq | Operator::In => entry.1 = tuples,
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
                        "Undefined column name {c} in table {}",
                        table.display_name()
                    )));
                };
                let col = &table.columns[i];
                let CqlType::Map(kt, vt) = col.typ.unfrozen() else {
                    return Err(Error::Invalid(format!(
                        "Column {c} cannot be used as a map"
                    )));
                };
                let key = match ev.value(key, kt, &format!("key({c})"))? {
                    Val::Set(b) => b,
                    _ => {
                        return Err(Error::Invalid(format!(
                            "Invalid null value for map key of column {c}"
                        )))
                    }
                };
                let vals = rhs_values(ev, rel, &format!("value({c})"), vt)?;
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
                        "Undefined column name {c} in table {}",
                        table.display_name()
                    )));
                };
                let col = &table.columns[i];
                let vals = rhs_values(ev, rel, c, &col.typ)?;
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
        Some(keys.iter().map(|k| make_partition_key(k)).collect())
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
    if token_range.is_some() && partition_keys.is_some() {
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

    // clustering
    let cmp = table.comparator.clone();
    let mut prefixes: Vec<Vec<Bytes>> = vec![Vec::new()];
    let mut slice_at: Option<usize> = None;
    let mut has_clustering_restriction = false;
    let mut stopped_at: Option<usize> = None;
    let mut k = 0;
    if let Some((first, eqs, lo, hi)) = &multi {
        if *first != 0 {
            return Err(Error::Invalid(
                "Multi-column relations must start with the first clustering column".into(),
            ));
        }
        has_clustering_restriction = true;
        if !eqs.is_empty() {
            prefixes = eqs.clone();
            k = eqs[0].len();
        } else {
            // multi-column slice: build bounds directly
            let reversed = table
                .clustering()
                .first()
                .map(|c| c.reversed)
                .unwrap_or(false);
            let (mut start, mut end) = (
                ClusteringKey::bottom(cmp.clone()),
                ClusteringKey::top(cmp.clone()),
            );
            if let Some((v, incl)) = lo {
                let b = ClusteringKey::bound(
                    v.clone(),
                    if *incl {
                        BoundKind::StartInclusive
                    } else {
                        BoundKind::StartExclusive
                    },
                    cmp.clone(),
                );
                if reversed {
                    end = ClusteringKey::bound(
                        v.clone(),
                        if *incl {
                            BoundKind::EndInclusive
                        } else {
                            BoundKind::EndExclusive
                        },
                        cmp.clone(),
                    );
                } else {
                    start = b;
                }
            }
            if let Some((v, incl)) = hi {
                if reversed {
                    start = ClusteringKey::bound(
                        v.clone(),
                        if *incl {
                            BoundKind::StartInclusive
                        } else {
                            BoundKind::StartExclusive
                        },
                        cmp.clone(),
                    );
                } else {
                    end = ClusteringKey::bound(
                        v.clone(),
                        if *incl {
                            BoundKind::EndInclusive
                        } else {
                            BoundKind::EndExclusive
                        },
                        cmp.clone(),
                    );
                }
            }
            return finish(
                partition_keys,
                token_range,
                Some(vec![(start, end)]),
                None,
                true,
                filters,
                needs_filtering,
                table,
                purpose,
            );
        }
    }
    while k < ck_n {
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
                let prev = &table.clustering()[j.saturating_sub(1)].name;
                return Err(Error::Invalid(format!(
                    "PRIMARY KEY column \"{}\" cannot be restricted as preceding column \"{}\" is not restricted",
                    table.clustering()[j].name, prev
                )));
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
    let full = prefixes.first().map(|p| p.len()).unwrap_or(0) == ck_n && slice_at.is_none();
    // a dense COMPACT STORAGE table takes writes under a clustering prefix
    let dense_prefix = purpose == Purpose::Update
        && table.is_dense()
        && slice_at.is_none()
        && prefixes.first().is_some_and(|p| !p.is_empty());
    let clusterings = if full || dense_prefix {
        Some(prefixes.clone())
    } else {
        None
    };
    let slices = if !has_clustering_restriction {
        None
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
    if purpose == Purpose::Update && ck_n > 0 && !full && !dense_prefix {
        let missing: Vec<&str> = table
            .clustering()
            .iter()
            .enumerate()
            .filter(|(j, _)| ck_eq[*j].is_none())
            .map(|(_, c)| c.name.as_str())
            .collect();
        return Err(Error::Invalid(format!(
            "Some clustering keys are missing: {}",
            missing.join(", ")
        )));
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
    let restricted =
        |j: usize| ck_eq[j].is_some() || ck_slice[j].0.is_some() || ck_slice[j].1.is_some();
    if let Some(j) = (0..ck_n).find(|&j| restricted(j) && (0..j).any(|i| !restricted(i))) {
        let i = j - 1;
        r.clustering_gap = Some((
            table.clustering()[j].name.clone(),
            table.clustering()[i].name.clone(),
        ));
    }
    Ok(r)
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
    })
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
