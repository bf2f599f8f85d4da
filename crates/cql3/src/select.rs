//! SELECT: selection (columns, writetime/ttl, token, aggregates), partition
//! iteration (keys, IN, token ranges, full scans), clustering slices, filtering,
//! ordering, limits and paging.

use crate::aggregates::{AggKind, AggState};
use crate::error::{Error, Result};
use crate::restrictions::{
    analyse, filter_matches, preceding_not_restricted, Purpose, Restrictions, ALLOW_FILTERING_MSG,
};
use crate::terms::{Eval, Val};
use crate::virtual_table::{compare_partition_keys, VirtualRows};
use bytes::Bytes;
use sibyl_cql::{Operator, Select, Selector, Term};
use sibyl_db::cells::{column_value, simple_cell, split_partition_key};
use sibyl_db::read::Slice;
use sibyl_db::{ClusteringKey, DecoratedKey, KeyBound, Partition, ReadCommand, ReadKind, Row};
use sibyl_protocol::ColumnSpec;
use sibyl_protocol::Consistency;
use sibyl_schema::index::IndexMetadata;
use sibyl_schema::schema::{ColumnKind, TableMetadata};
use sibyl_service::StorageProxy;
use sibyl_types::CqlType;
use std::cmp::Ordering;
use std::sync::Arc;

/// One output column of a selection.
#[derive(Debug, Clone)]
pub enum Out {
    Column(usize),
    WriteTime(usize),
    Ttl(usize),
    Token,
    Const(Option<Bytes>),
    /// `floor(timestamp_column, duration)`: the start of the time bucket (millis per bucket).
    Floor(usize, i64),
    /// Any other per-row expression: function calls, casts, arithmetic, fields.
    Expr(Expr),
}

/// A per-row selector expression, resolved against the argument types.
#[derive(Debug, Clone)]
pub enum Expr {
    Column(usize),
    WriteTime(usize),
    Ttl(usize),
    Token,
    Const(Option<Bytes>),
    /// `toJson(x)` of a value of the given type.
    ToJson(Box<Expr>, CqlType),
    /// `toDate`, `toTimestamp`, `toUnixTimestamp` of a value of the given type.
    TimeConversion(&'static str, Box<Expr>, CqlType),
    /// `CAST(x AS to)` from the given type.
    Cast(Box<Expr>, CqlType, CqlType),
    /// `typeAsBlob(x)` is the value itself; `blobAsType(x)` checks it is valid.
    BlobAs(Box<Expr>, CqlType),
    Arith(char, Box<Expr>, CqlType, Box<Expr>, CqlType),
    /// `abs(x)` of a numeric value of the given type.
    Abs(Box<Expr>, CqlType),
    /// Field `i` of a UDT value.
    Field(Box<Expr>, usize),
    /// A function of no argument evaluated per row (`now()`, `uuid()`, ...).
    Nullary(String),
    /// `maxwritetime(c)`: the newest timestamp of the column's cells.
    MaxWriteTime(usize),
    /// `m[key]` (a map's value) or `s[e]` (the element, if the set holds it).
    Element(Box<Expr>, CqlType, Bytes),
    /// `m[a..b]`, `s[a..b]`: the entries with keys in the inclusive range.
    Slice(Box<Expr>, CqlType, Option<Bytes>, Option<Bytes>),
    /// A native function of Cassandra 5.0 (math, collection, masking,
    /// similarity), with its arguments and their types.
    Native(String, Vec<Expr>, Vec<CqlType>),
    /// `-x` of a number of the given type (`system._negate`).
    Negate(Box<Expr>, CqlType),
    /// `minTimeuuid(ts)` (true) or `maxTimeuuid(ts)` of a timestamp.
    Timeuuid(bool, Box<Expr>),
    /// An aggregate over the rows of a group: its number in
    /// [`Selection::aggs`], its kind, its argument and the argument's type.
    Aggregate(usize, AggKind, Box<Expr>, CqlType),
    /// `writetime`, `ttl` or `maxwritetime` of an element, slice or field.
    CellMeta(Box<CellMeta>),
}

/// `writetime(m['a'])`, `ttl(u.f)`, `maxwritetime(s[1..3])`: the timestamps
/// or TTLs of the cells holding a selected part of a column.
#[derive(Debug, Clone)]
pub struct CellMeta {
    /// `writetime`, `ttl` or `maxwritetime`.
    kind: &'static str,
    column: usize,
    cells: CellPath,
    /// The selected part: no cell when it is null or empty.
    value: Expr,
    value_type: CqlType,
}

/// Which cells of a column a selection reads.
#[derive(Debug, Clone)]
enum CellPath {
    /// The column's one cell (frozen and simple columns).
    Whole,
    /// The element of a non-frozen map or set with this key.
    Key(Bytes),
    /// The elements of a non-frozen map or set with keys in the range.
    Range(CqlType, Option<Bytes>, Option<Bytes>),
    /// The cell of field `i` of a non-frozen UDT.
    Field(usize),
}

impl Expr {
    /// The expressions this one is computed from.
    fn children_mut(&mut self) -> Vec<&mut Expr> {
        match self {
            Expr::ToJson(x, _)
            | Expr::TimeConversion(_, x, _)
            | Expr::Cast(x, _, _)
            | Expr::BlobAs(x, _)
            | Expr::Abs(x, _)
            | Expr::Field(x, _)
            | Expr::Element(x, _, _)
            | Expr::Slice(x, _, _, _)
            | Expr::Negate(x, _)
            | Expr::Timeuuid(_, x)
            | Expr::Aggregate(_, _, x, _) => vec![x.as_mut()],
            Expr::CellMeta(m) => vec![&mut m.value],
            Expr::Arith(_, a, _, b, _) => vec![a.as_mut(), b.as_mut()],
            Expr::Native(_, args, _) => args.iter_mut().collect(),
            _ => Vec::new(),
        }
    }

    fn children(&self) -> Vec<&Expr> {
        match self {
            Expr::ToJson(x, _)
            | Expr::TimeConversion(_, x, _)
            | Expr::Cast(x, _, _)
            | Expr::BlobAs(x, _)
            | Expr::Abs(x, _)
            | Expr::Field(x, _)
            | Expr::Element(x, _, _)
            | Expr::Slice(x, _, _, _)
            | Expr::Negate(x, _)
            | Expr::Timeuuid(_, x)
            | Expr::Aggregate(_, _, x, _) => vec![x.as_ref()],
            Expr::CellMeta(m) => vec![&m.value],
            Expr::Arith(_, a, _, b, _) => vec![a.as_ref(), b.as_ref()],
            Expr::Native(_, args, _) => args.iter().collect(),
            _ => Vec::new(),
        }
    }

    fn has_aggregate(&self) -> bool {
        matches!(self, Expr::Aggregate(..))
            || self.children().into_iter().any(|c| c.has_aggregate())
    }

    /// Numbers the aggregates in `out` order and lists them; the columns
    /// read outside of them go to `free` (they take the group's first row).
    fn collect_aggregates(
        &mut self,
        aggs: &mut Vec<(AggKind, Expr, CqlType)>,
        free: &mut Vec<usize>,
    ) {
        match self {
            Expr::Aggregate(id, kind, arg, t) => {
                *id = aggs.len();
                aggs.push((*kind, arg.as_ref().clone(), t.clone()));
            }
            Expr::Column(i) => {
                if !free.contains(i) {
                    free.push(*i);
                }
            }
            other => {
                for c in other.children_mut() {
                    c.collect_aggregates(aggs, free);
                }
            }
        }
    }
}

impl Out {
    fn is_aggregate(&self) -> bool {
        matches!(self, Out::Expr(e) if e.has_aggregate())
    }
}

/// The analysed select clause.
#[derive(Debug, Clone)]
pub struct Selection {
    /// Shared with every execution's response metadata.
    pub columns: Arc<[ColumnSpec]>,
    pub outs: Vec<Out>,
    pub aggregate: bool,
    /// The aggregates of the selection: kind, argument, argument type.
    pub aggs: Vec<(AggKind, Expr, CqlType)>,
    /// The columns that expressions holding aggregates read outside of them.
    pub agg_columns: Vec<usize>,
    /// The statement has GROUP BY.
    pub grouped: bool,
    /// SELECT JSON: the selected columns, folded into the one `[json]` column.
    pub json: Option<Vec<ColumnSpec>>,
}

fn undefined(table: &TableMetadata, c: &str) -> Error {
    Error::Invalid(format!(
        "Undefined column name {} in table {}",
        sibyl_types::ident::maybe_quote(c),
        table.display_name()
    ))
}

/// Builds the selection (also used for PREPARE's result metadata).
pub fn selection(table: &TableMetadata, sel: &Select) -> Result<Selection> {
    let _memo = ExactTypes::start();
    let mut s = selection_of(table, sel)?;
    if sel.json {
        let json = ColumnSpec {
            keyspace: table.keyspace.clone(),
            table: table.name.clone(),
            name: "[json]".into(),
            typ: CqlType::Text,
        };
        s.json = Some(std::mem::replace(&mut s.columns, Arc::from([json])).to_vec());
    }
    Ok(s)
}

impl Selection {
    /// The rows as the client sees them: for SELECT JSON, one JSON object each.
    pub fn finish(&self, rows: Vec<Vec<Option<Bytes>>>) -> Vec<Vec<Option<Bytes>>> {
        match &self.json {
            Some(columns) => rows
                .iter()
                .map(|row| vec![Some(row_to_json(columns, row))])
                .collect(),
            None => rows,
        }
    }
}

/// A selected column's name as a JSON key: column names that need quoting in
/// CQL are quoted (`"\"Caps\""`), function names are not.
fn json_key(name: &str) -> String {
    // Cassandra's Selection.rowToJson: quoted when not all lower case
    if name == name.to_lowercase() {
        name.to_string()
    } else {
        format!("\"{name}\"")
    }
}

/// One result row as the text of a JSON object (Cassandra's `Selection.rowToJson`).
fn row_to_json(columns: &[ColumnSpec], row: &[Option<Bytes>]) -> Bytes {
    let mut out = String::from("{");
    for (i, (c, v)) in columns.iter().zip(row).enumerate() {
        if i > 0 {
            out.push_str(", ");
        }
        out.push_str(&sibyl_types::json_string(&json_key(&c.name)));
        out.push_str(": ");
        match v {
            Some(v) => out.push_str(&c.typ.to_json_value(v)),
            None => out.push_str("null"),
        }
    }
    out.push('}');
    Bytes::from(out)
}

fn selection_of(table: &TableMetadata, sel: &Select) -> Result<Selection> {
    let spec = |name: String, typ: CqlType| ColumnSpec {
        keyspace: table.keyspace.clone(),
        table: table.name.clone(),
        name,
        typ,
    };
    let mut columns = Vec::new();
    let mut outs = Vec::new();
    if sel.selectors.is_empty() {
        for (i, c) in table.columns.iter().enumerate() {
            if sel.distinct
                && !matches!(c.kind, ColumnKind::PartitionKey | ColumnKind::Static)
                && !table.is_static_compact()
            {
                continue;
            }
            columns.push(spec(c.name.clone(), c.typ.clone()));
            outs.push(Out::Column(i));
        }
        return Ok(Selection {
            columns: columns.into(),
            outs,
            aggregate: false,
            aggs: Vec::new(),
            agg_columns: Vec::new(),
            grouped: !sel.group_by.is_empty(),
            json: None,
        });
    }
    FIRST_COLUMN.with(|f| f.set(None));
    for item in &sel.selectors {
        if FIRST_COLUMN.with(|f| f.get()).is_none() {
            let first = first_column(&item.selector).and_then(|c| table.column_index(c));
            FIRST_COLUMN.with(|f| f.set(first));
        }
        let (default_name, typ, out) = match &item.selector {
            Selector::Column(c) => {
                let i = table.column_index(c).ok_or_else(|| undefined(table, c))?;
                (c.clone(), table.columns[i].typ.clone(), Out::Column(i))
            }
            Selector::WriteTime(c) | Selector::Ttl(c) => {
                let i = table.column_index(c).ok_or_else(|| undefined(table, c))?;
                let col = &table.columns[i];
                let is_wt = matches!(item.selector, Selector::WriteTime(_));
                let fname = if is_wt { "writetime" } else { "ttl" };
                if col.kind.is_primary_key() {
                    return Err(Error::Invalid(format!(
                        "Cannot use selection function {fname} on PRIMARY KEY part {c}"
                    )));
                }
                if is_wt {
                    let t = if col.typ.is_multi_cell() {
                        CqlType::List(Box::new(CqlType::Bigint))
                    } else {
                        CqlType::Bigint
                    };
                    (format!("writetime({c})"), t, Out::WriteTime(i))
                } else if col.typ.is_multi_cell() {
                    let t = CqlType::List(Box::new(CqlType::Int));
                    (format!("ttl({c})"), t, Out::Ttl(i))
                } else {
                    (format!("ttl({c})"), CqlType::Int, Out::Ttl(i))
                }
            }
            Selector::CountRows => {
                let (n, t, e) = expr(table, &item.selector)?;
                (n, t, Out::Expr(e))
            }
            Selector::Function { name, args } => {
                let lname = name.strip_prefix("system.").unwrap_or(name);
                if lname == "floor" {
                    let (Some(Selector::Column(c)), Some(Selector::Term(Term::Constant(d)))) =
                        (args.first(), args.get(1))
                    else {
                        return Err(Error::Invalid(
                            "floor() takes a timestamp column and a duration".into(),
                        ));
                    };
                    let i = table.column_index(c).ok_or_else(|| undefined(table, c))?;
                    if table.columns[i].typ.unfrozen() != &CqlType::Timestamp {
                        return Err(Error::Invalid(FLOOR_SIGNATURES.into()));
                    }
                    let text = sibyl_cql::constant_text(d);
                    let millis = bucket_millis(&text)?;
                    columns.push(spec(
                        item.alias
                            .clone()
                            .unwrap_or(format!("system.floor({c}, {text})")),
                        CqlType::Timestamp,
                    ));
                    outs.push(Out::Floor(i, millis));
                    continue;
                }
                let (n, t, e) = expr(table, &item.selector)?;
                (n, t, Out::Expr(e))
            }
            Selector::Cast { .. }
            | Selector::Arith { .. }
            | Selector::Field { .. }
            | Selector::Element { .. }
            | Selector::Slice { .. }
            | Selector::Negate(_)
            | Selector::Parens(_)
            | Selector::Hint { .. }
            | Selector::Term(Term::Constant(_)) => {
                let (n, t, e) = expr_typed(table, &item.selector, None)?;
                (n, t, Out::Expr(e))
            }
            Selector::MetaOf {
                kind,
                column,
                selector,
            } => {
                let (n, t, e) = cell_meta(table, kind, column, selector, true)?;
                (n, t, Out::Expr(e))
            }
            // a literal, null or marker has no type of its own here
            other => return Err(cannot_infer(&sel_text(other))),
        };
        columns.push(spec(item.alias.clone().unwrap_or(default_name), typ));
        outs.push(out);
    }
    let mut aggs = Vec::new();
    let mut agg_columns = Vec::new();
    for o in outs.iter_mut() {
        if let Out::Expr(e) = o {
            if e.has_aggregate() {
                e.collect_aggregates(&mut aggs, &mut agg_columns);
            }
        }
    }
    Ok(Selection {
        columns: columns.into(),
        outs,
        aggregate: !aggs.is_empty(),
        aggs,
        agg_columns,
        grouped: !sel.group_by.is_empty(),
        json: None,
    })
}

/// Resolves a selector into an expression: its default column name, type and
/// tree. A bare literal takes the type it prefers (as function arguments
/// whose signature does not type them).
fn expr(table: &TableMetadata, s: &Selector) -> Result<(String, CqlType, Expr)> {
    if let Selector::Term(t) = s {
        let preferred = |items: &[Term]| match items.first() {
            Some(Term::Constant(c)) => Some(crate::operations::preferred_type(c)),
            _ => None,
        };
        let t = match t {
            Term::Constant(c) => Some(crate::operations::preferred_type(c)),
            Term::List(items) => preferred(items).map(|e| CqlType::List(Box::new(e))),
            Term::Set(items) => preferred(items).map(|e| CqlType::Set(Box::new(e))),
            _ => None,
        };
        if let Some(t) = t {
            return expr_typed(table, s, Some(&t));
        }
    }
    expr_typed(table, s, None)
}

fn cannot_infer(text: &str) -> Error {
    Error::Invalid(format!(
        "Cannot infer type for term {text} in selection clause (try using a cast to force a type)"
    ))
}

/// A selector as Cassandra prints it in messages (`Selectable.toString`).
fn sel_text(s: &Selector) -> String {
    match s {
        Selector::Column(c) => c.clone(),
        Selector::WriteTime(c) => format!("writetime({c})"),
        Selector::Ttl(c) => format!("ttl({c})"),
        Selector::CountRows => "count".into(),
        Selector::Function { name, args } => format!(
            "system.{}({})",
            name.strip_prefix("system.").unwrap_or(name),
            args.iter().map(sel_text).collect::<Vec<_>>().join(", ")
        ),
        Selector::Cast { selector, typ } => {
            format!("cast({} as {})", sel_text(selector), typ.to_lowercase())
        }
        Selector::Term(t) => sibyl_cql::term_text(t),
        Selector::Field { selector, field } => format!("{}.{field}", sel_text(selector)),
        Selector::Arith { op, lhs, rhs } => {
            format!("{} {op} {}", sel_text(lhs), sel_text(rhs))
        }
        Selector::Element { selector, key } => {
            format!("{}[{}]", sel_text(selector), term_name(key))
        }
        Selector::Slice { selector, from, to } => format!(
            "{}[{}..{}]",
            sel_text(selector),
            from.as_ref().map(term_name).unwrap_or_default(),
            to.as_ref().map(term_name).unwrap_or_default()
        ),
        Selector::Negate(x) => format!("-{}", sel_text(x)),
        Selector::Parens(items) => format!(
            "({})",
            items.iter().map(sel_text).collect::<Vec<_>>().join(", ")
        ),
        Selector::Hint { typ, selector } => format!("({typ}){}", sel_text(selector)),
        Selector::MetaOf { kind, selector, .. } => format!("{kind}({})", sel_text(selector)),
    }
}

/// `(x)` is `x` when its receiver is not a tuple.
fn unparen(s: &Selector) -> &Selector {
    match s {
        Selector::Parens(items) if items.len() == 1 => unparen(&items[0]),
        other => other,
    }
}

/// The type of a selector when it does not depend on a receiver (literals,
/// markers and parentheses do).
fn exact_type(table: &TableMetadata, s: &Selector) -> Result<Option<CqlType>> {
    Ok(match s {
        Selector::Term(_) | Selector::Parens(_) => None,
        Selector::Hint { typ, .. } => Some(hint_type(typ)?),
        other => {
            // planning asks a nested selector's type at every level above
            // it: known once per selection, or nesting costs exponential time
            // (by the selector itself: planning makes temporary selectors,
            // whose addresses are reused once they are dropped)
            let key = format!("{other:?}");
            if let Some(t) =
                EXACT_TYPES.with(|c| c.borrow().as_ref().and_then(|m| m.get(&key).cloned()))
            {
                return Ok(Some(t));
            }
            let t = expr_typed(table, other, None)?.1;
            EXACT_TYPES.with(|c| {
                if let Some(m) = c.borrow_mut().as_mut() {
                    m.insert(key, t.clone());
                }
            });
            Some(t)
        }
    })
}

thread_local! {
    /// The exact types of the selectors of the selection being planned.
    static EXACT_TYPES: std::cell::RefCell<Option<std::collections::HashMap<String, CqlType>>> =
        const { std::cell::RefCell::new(None) };
}

/// Keeps the exact-type memo for one selection's planning.
struct ExactTypes;

impl ExactTypes {
    fn start() -> ExactTypes {
        EXACT_TYPES.with(|c| *c.borrow_mut() = Some(Default::default()));
        ExactTypes
    }
}

impl Drop for ExactTypes {
    fn drop(&mut self) {
        EXACT_TYPES.with(|c| *c.borrow_mut() = None);
    }
}

fn hint_type(typ: &str) -> Result<CqlType> {
    CqlType::parse(typ, &|_| None).map_err(|e| Error::Invalid(e.to_string()))
}

/// How a selector fits an argument of type `receiver`, its exact type known.
fn fit_with(s: &Selector, exact: &Option<CqlType>, receiver: &CqlType) -> crate::operations::Fit {
    use crate::operations::{type_fit, Fit};
    if let Some(t) = exact {
        return type_fit(t, receiver);
    }
    match s {
        Selector::Term(term) => {
            let ev = crate::terms::Eval {
                bindings: &crate::terms::Bindings { values: &[] },
            };
            ev.fit(term, receiver)
        }
        _ => Fit::No,
    }
}

/// A selector resolved for a receiver of type `expected`, when it has one
/// (a function's argument): literals, markers and parentheses need it.
fn expr_typed(
    table: &TableMetadata,
    s: &Selector,
    expected: Option<&CqlType>,
) -> Result<(String, CqlType, Expr)> {
    match s {
        Selector::Term(Term::Null) => match expected {
            Some(t) => Ok(("NULL".into(), t.clone(), Expr::Const(None))),
            None => expr_plain(table, s),
        },
        Selector::Term(term) => {
            let Some(t) = expected else {
                return Err(cannot_infer(&sel_text(s)));
            };
            let text = term_name(term);
            let v = const_term(term, t, &text)?;
            Ok((text, t.clone(), Expr::Const(Some(v))))
        }
        Selector::Parens(items) => {
            let Some(t) = expected else {
                return Err(cannot_infer(&sel_text(s)));
            };
            if items.len() != 1 {
                return Err(cannot_infer(&sel_text(s)));
            }
            let (n, ty, e) = expr_typed(table, &items[0], Some(t))?;
            Ok((format!("({n})"), ty, e))
        }
        Selector::Hint { typ, selector } => {
            let ty = hint_type(typ)?;
            let text = sel_text(s);
            let inner = unparen(selector);
            let exact = exact_type(table, inner)?;
            if !fit_with(inner, &exact, &ty).assignable() {
                return Err(Error::Invalid(format!(
                    "Cannot assign value {text} to {text} of type {ty}"
                )));
            }
            let (n, _, e) = expr_typed(table, selector, Some(&ty))?;
            Ok((format!("({typ}){n}"), ty, e))
        }
        Selector::Negate(x) => {
            let inner = unparen(x);
            let exact = exact_type(table, inner)?;
            let nt = crate::operations::resolve_numeric(
                &mut |ty| Ok(fit_with(inner, &exact, ty)),
                None,
                "\"_negate\"",
                "system._negate",
            )?;
            let (n, _, e) = expr_typed(table, x, Some(&nt))?;
            Ok((format!("-{n}"), nt.clone(), Expr::Negate(Box::new(e), nt)))
        }
        Selector::Arith { op, lhs, rhs } => {
            let (l, r) = (unparen(lhs), unparen(rhs));
            let (el, er) = (exact_type(table, l)?, exact_type(table, r)?);
            let markers = [l, r]
                .iter()
                .any(|x| matches!(x, Selector::Term(Term::Bind(_))));
            let (lt, rt, ret) = crate::operations::resolve_operation(
                *op,
                &mut |i, ty| {
                    Ok(if i == 0 {
                        fit_with(l, &el, ty)
                    } else {
                        fit_with(r, &er, ty)
                    })
                },
                None,
                (&sel_text(lhs), &sel_text(rhs)),
                markers,
            )?;
            let (ln, _, le) = expr_typed(table, lhs, Some(&lt))?;
            let (rn, _, re) = expr_typed(table, rhs, Some(&rt))?;
            Ok((
                format!("{ln} {op} {rn}"),
                ret,
                Expr::Arith(*op, Box::new(le), lt, Box::new(re), rt),
            ))
        }
        _ => expr_plain(table, s),
    }
}

fn expr_plain(table: &TableMetadata, s: &Selector) -> Result<(String, CqlType, Expr)> {
    match s {
        Selector::Column(c) => {
            let i = table.column_index(c).ok_or_else(|| undefined(table, c))?;
            Ok((c.clone(), table.columns[i].typ.clone(), Expr::Column(i)))
        }
        Selector::WriteTime(c) | Selector::Ttl(c) => {
            let i = table.column_index(c).ok_or_else(|| undefined(table, c))?;
            // a multi-cell column has one per cell
            let many = |t: CqlType| {
                if table.columns[i].typ.is_multi_cell() {
                    CqlType::List(Box::new(t))
                } else {
                    t
                }
            };
            Ok(if matches!(s, Selector::WriteTime(_)) {
                (
                    format!("writetime({c})"),
                    many(CqlType::Bigint),
                    Expr::WriteTime(i),
                )
            } else {
                (format!("ttl({c})"), many(CqlType::Int), Expr::Ttl(i))
            })
        }
        Selector::Term(Term::Null) => Ok(("NULL".into(), CqlType::Blob, Expr::Const(None))),
        Selector::MetaOf {
            kind,
            column,
            selector,
        } => cell_meta(table, kind, column, selector, false),
        Selector::CountRows => Ok((
            "count".into(),
            CqlType::Bigint,
            Expr::Aggregate(
                0,
                AggKind::CountRows,
                Box::new(Expr::Const(None)),
                CqlType::Bigint,
            ),
        )),
        Selector::Cast { selector, typ } => {
            if matches!(unparen(selector), Selector::Term(_)) {
                return Err(cannot_infer(&sel_text(selector)));
            }
            let (n, from, e) = expr(table, selector)?;
            let to = CqlType::parse(typ, &|_| None).map_err(|e| Error::Invalid(e.to_string()))?;
            if from.unfrozen() == to.unfrozen() {
                // Cassandra keeps the value as it is, and its name
                return Ok((n, from, e));
            }
            if typ.eq_ignore_ascii_case("varchar") {
                // there is no cast_as_varchar, and Cassandra names the first
                // column the selection reads, not the cast one
                let first = FIRST_COLUMN
                    .with(|f| f.get())
                    .map_or(n, |i| table.columns[i].name.clone());
                return Err(Error::Invalid(format!("{first} cannot be cast to varchar")));
            }
            let sources = crate::functions::cast_function(&typ.to_lowercase())
                .map(|(_, s)| s)
                .unwrap_or_default();
            let Some(from) = crate::functions::read_as(&from, &sources) else {
                let several = crate::functions::compatible_candidates(&from, &sources);
                if several.len() > 1 {
                    // (Cassandra lists them in an order that changes from
                    // one start to the next)
                    return Err(Error::Invalid(format!(
                        "Ambiguous call to function system.cast_as_{to} (can be matched by following signatures: {}): use type casts to disambiguate",
                        crate::functions::signature_list(&format!("cast_as_{to}"), &several, &to)
                    )));
                }
                return Err(crate::functions::cast_error(&to, &n, typ));
            };
            if from == to {
                // a cast to the selector's own type is no selector at all
                return Ok((n, from, e));
            }
            Ok((
                format!("cast({n} as {})", typ.to_lowercase()),
                to.clone(),
                Expr::Cast(Box::new(e), from, to),
            ))
        }
        Selector::Field { selector, field } => {
            let (n, t, e) = expr(table, selector)?;
            let CqlType::Udt(u) = t.unfrozen() else {
                return Err(Error::Invalid(format!(
                    "Invalid field selection: {n} of type {t} is not a user type"
                )));
            };
            let i = u
                .fields
                .iter()
                .position(|(f, _)| f == field)
                .ok_or_else(|| Error::Invalid(format!("{n} of type {t} has no field {field}")))?;
            Ok((
                format!("{n}.{field}"),
                u.fields[i].1.clone(),
                Expr::Field(Box::new(e), i),
            ))
        }
        Selector::Function { name, args } => {
            if name.contains('.') && !name.starts_with("system.") {
                return Err(Error::Invalid(format!("Unknown function '{name}'")));
            }
            // `cast_as_text(x)` is the function `CAST(x AS text)` calls
            if let (Some(to), [arg]) = (crate::terms::cast_target(name), args.as_slice()) {
                if crate::functions::cast_function(&to).is_some() {
                    let cast = Selector::Cast {
                        selector: Box::new(arg.clone()),
                        typ: to,
                    };
                    return expr(table, &cast);
                }
            }
            // a Cassandra 5.0 snake_case name calls the function of the old
            // name, and names the column as written
            let written = name.strip_prefix("system.").unwrap_or(name);
            let canonical = crate::functions::canonical_name(written);
            if canonical != written {
                let call = Selector::Function {
                    name: canonical.clone(),
                    args: args.clone(),
                };
                let (n, t, e) = expr(table, &call)
                    .map_err(|e| crate::functions::as_written(e, &canonical, written))?;
                let n = n.replacen(
                    &format!("system.{canonical}("),
                    &format!("system.{written}("),
                    1,
                );
                return Ok((n, t, e));
            }
            let lname = canonical;
            if lname == "token" {
                return token_expr(table, args);
            }
            if let Some(kind) = AggKind::of(&lname) {
                return aggregate_expr(table, &lname, kind, args);
            }
            if let Some(native) = native_function(table, &lname, args)? {
                return Ok(native);
            }
            // literals take the type of the function's argument
            let arg_type: Option<CqlType> = match lname.as_str() {
                "abs" if args.len() == 1 => {
                    let inner = unparen(&args[0]);
                    let exact = exact_type(table, inner)?;
                    Some(crate::operations::resolve_numeric(
                        &mut |ty| Ok(fit_with(inner, &exact, ty)),
                        None,
                        "abs",
                        name,
                    )?)
                }
                "mintimeuuid" | "maxtimeuuid" | "min_timeuuid" | "max_timeuuid" => {
                    Some(CqlType::Timestamp)
                }
                n => match (n.strip_suffix("asblob"), n.strip_prefix("blobas")) {
                    (Some(t), _) => CqlType::parse(t, &|_| None).ok(),
                    (_, Some(_)) => Some(CqlType::Blob),
                    _ => None,
                },
            };
            let resolved: Vec<(String, CqlType, Expr)> = match &arg_type {
                Some(t)
                    if args.len() == 1
                        && lname != "mintimeuuid"
                        && !lname.ends_with("_timeuuid")
                        && lname != "maxtimeuuid" =>
                {
                    vec![typed_arg(table, &args[0], t, &lname, 0)?]
                }
                _ => args.iter().map(|a| expr(table, a)).collect::<Result<_>>()?,
            };
            let names: Vec<&str> = resolved.iter().map(|(n, _, _)| n.as_str()).collect();
            let fname = format!("system.{lname}({})", names.join(", "));
            let arity = |n: usize| -> Result<()> {
                if resolved.len() != n {
                    return Err(Error::Invalid(format!(
                        "Invalid number of arguments in call to function system.{lname}: {n} required but {} provided",
                        resolved.len()
                    )));
                }
                Ok(())
            };
            let mut it = resolved.clone().into_iter();
            match lname.as_str() {
                "tojson" => {
                    if resolved.len() != 1 {
                        return Err(Error::Invalid(
                            "Invalid number of arguments for function system.tojson(any)".into(),
                        ));
                    }
                    let (_, t, e) = it
                        .next()
                        .ok_or_else(|| Error::Invalid("toJson needs an argument".into()))?;
                    Ok((fname, CqlType::Text, Expr::ToJson(Box::new(e), t)))
                }
                "abs" => {
                    arity(1)?;
                    let (_, t, e) = it
                        .next()
                        .ok_or_else(|| Error::Invalid("abs needs an argument".into()))?;
                    if !crate::functions::is_numeric(&t) {
                        return Err(Error::Invalid(format!(
                            "Invalid call to function {name}, none of its type signatures match (known type signatures: {})",
                            crate::operations::numeric_signatures("abs")
                        )));
                    }
                    Ok((fname, t.clone(), Expr::Abs(Box::new(e), t)))
                }
                "mintimeuuid" | "maxtimeuuid" | "min_timeuuid" | "max_timeuuid" => {
                    arity(1)?;
                    let (n, _, e) = typed_arg(table, &args[0], &CqlType::Timestamp, &lname, 0)?;
                    Ok((
                        format!("system.{lname}({n})"),
                        CqlType::Timeuuid,
                        Expr::Timeuuid(lname.starts_with("min"), Box::new(e)),
                    ))
                }
                "fromjson" => Err(Error::Invalid(
                    "fromjson() cannot be used in the selection clause of a SELECT statement"
                        .into(),
                )),
                "todate" | "totimestamp" | "tounixtimestamp" => {
                    arity(1)?;
                    let (_, t, e) = it
                        .next()
                        .ok_or_else(|| Error::Invalid(format!("{lname} needs an argument")))?;
                    let Some(t) = crate::functions::time_conversion_input(&lname, &t) else {
                        let (accepted, to): (&[&str], &str) = match lname.as_str() {
                            "todate" => (&["timeuuid", "timestamp"], "date"),
                            "totimestamp" => (&["timeuuid", "date"], "timestamp"),
                            _ => (&["timeuuid", "timestamp", "date"], "bigint"),
                        };
                        let sigs: Vec<String> = accepted
                            .iter()
                            .map(|a| format!("system.{lname} : ({a}) -> {to}"))
                            .collect();
                        return Err(Error::Invalid(format!(
                            "Invalid call to function {lname}, none of its type signatures match (known type signatures: {})",
                            sigs.join(", ")
                        )));
                    };
                    let (key, rt): (&'static str, CqlType) = match lname.as_str() {
                        "todate" => ("todate", CqlType::Date),
                        "totimestamp" => ("totimestamp", CqlType::Timestamp),
                        _ => ("tounixtimestamp", CqlType::Bigint),
                    };
                    Ok((fname, rt, Expr::TimeConversion(key, Box::new(e), t)))
                }
                "now" | "currenttimeuuid" | "uuid" | "currenttimestamp" | "currentdate"
                | "currenttime" => {
                    arity(0)?;
                    let ev = crate::terms::Eval {
                        bindings: &crate::terms::Bindings { values: &[] },
                    };
                    let (t, _) = ev.call(&lname, &[])?;
                    Ok((fname, t, Expr::Nullary(lname)))
                }
                _ => {
                    if lname == "blobasblob" {
                        return Err(Error::Invalid(format!("Unknown function '{name}'")));
                    }
                    if let Some(tname) = lname.strip_suffix("asblob") {
                        arity(1)?;
                        let (_, _, e) = it
                            .next()
                            .ok_or_else(|| Error::Invalid(format!("{lname} needs an argument")))?;
                        CqlType::parse(tname, &|_| None)
                            .map_err(|_| Error::Invalid(format!("Unknown function '{lname}'")))?;
                        return Ok((
                            fname,
                            CqlType::Blob,
                            Expr::BlobAs(Box::new(e), CqlType::Blob),
                        ));
                    }
                    if let Some(tname) = lname.strip_prefix("blobas") {
                        arity(1)?;
                        let (_, _, e) = it
                            .next()
                            .ok_or_else(|| Error::Invalid(format!("{lname} needs an argument")))?;
                        let t = CqlType::parse(tname, &|_| None)
                            .map_err(|_| Error::Invalid(format!("Unknown function '{lname}'")))?;
                        return Ok((fname, t.clone(), Expr::BlobAs(Box::new(e), t)));
                    }
                    Err(Error::Invalid(format!("Unknown function '{name}'")))
                }
            }
        }
        Selector::Element { selector, key } => {
            let (n, t, e) = expr(table, selector)?;
            let (key_t, value_t) = match t.unfrozen() {
                CqlType::Map(k, v) => (k.as_ref().clone(), v.as_ref().clone()),
                CqlType::Set(e) => (e.as_ref().clone(), e.as_ref().clone()),
                CqlType::List(_) => {
                    return Err(Error::Invalid(format!(
                        "Element selection is only allowed on sets and maps, but {n} is a list"
                    )))
                }
                _ => {
                    return Err(Error::Invalid(format!(
                        "Invalid element selection: {n} is of type {t} is not a collection"
                    )))
                }
            };
            let text = term_name(key);
            let k = const_term(key, &key_t, &element_receiver(&n, &t))?;
            Ok((
                format!("{n}[{text}]"),
                value_t,
                Expr::Element(Box::new(e), t.unfrozen().clone(), k),
            ))
        }
        Selector::Slice { selector, from, to } => {
            let (n, t, e) = expr(table, selector)?;
            let key_t = match t.unfrozen() {
                CqlType::Map(k, _) | CqlType::Set(k) => k.as_ref().clone(),
                CqlType::List(_) => {
                    return Err(Error::Invalid(format!(
                        "Slice selection is only allowed on sets and maps, but {n} is a list"
                    )))
                }
                _ => {
                    return Err(Error::Invalid(format!(
                        "Invalid slice selection: {n} of type {t} is not a collection"
                    )))
                }
            };
            let bound = |b: &Option<Term>| -> Result<(String, Option<Bytes>)> {
                match b {
                    Some(term) => {
                        let text = term_name(term);
                        let v = const_term(term, &key_t, &element_receiver(&n, &t))?;
                        Ok((text, Some(v)))
                    }
                    None => Ok((String::new(), None)),
                }
            };
            let ((ft, fv), (tt, tv)) = (bound(from)?, bound(to)?);
            Ok((
                format!("{n}[{ft}..{tt}]"),
                t.clone(),
                Expr::Slice(Box::new(e), t.clone(), fv, tv),
            ))
        }
        other => Err(Error::Invalid(format!(
            "Selector {} is not supported here",
            sel_text(other)
        ))),
    }
}

/// `writetime`, `ttl` or `maxwritetime` of `selector`, an element, slice or
/// field of `column`: the cells it reads are those of its first subscript
/// when the column is multi-cell, else the column's one cell. As an
/// argument (`top` false) it has the type Cassandra gives it, a list for any
/// multi-cell column but with maxwritetime.
fn cell_meta(
    table: &TableMetadata,
    kind: &str,
    column: &str,
    selector: &Selector,
    top: bool,
) -> Result<(String, CqlType, Expr)> {
    let i = table
        .column_index(column)
        .ok_or_else(|| undefined(table, column))?;
    let col = &table.columns[i];
    if col.kind.is_primary_key() {
        return Err(Error::Invalid(format!(
            "Cannot use selection function {kind} on PRIMARY KEY part {column}"
        )));
    }
    // resolves (and checks) the selection
    let (n, value_type, value) = expr(table, selector)?;
    // the subscript applied to the column itself
    let mut first = selector;
    while let Selector::Element {
        selector: inner, ..
    }
    | Selector::Slice {
        selector: inner, ..
    }
    | Selector::Field {
        selector: inner, ..
    } = first
    {
        if matches!(inner.as_ref(), Selector::Column(_)) {
            break;
        }
        first = inner;
    }
    let cells = if !col.typ.is_multi_cell() {
        CellPath::Whole
    } else {
        match (first, col.typ.unfrozen()) {
            (Selector::Element { key, .. }, CqlType::Map(kt, _) | CqlType::Set(kt)) => {
                CellPath::Key(const_term(key, kt, &term_name(key))?)
            }
            (Selector::Slice { from, to, .. }, CqlType::Map(kt, _) | CqlType::Set(kt)) => {
                let bound = |b: &Option<Term>| -> Result<Option<Bytes>> {
                    b.as_ref()
                        .map(|t| const_term(t, kt, &term_name(t)))
                        .transpose()
                };
                CellPath::Range(kt.as_ref().clone(), bound(from)?, bound(to)?)
            }
            (Selector::Field { field, .. }, CqlType::Udt(u)) => CellPath::Field(
                u.fields
                    .iter()
                    .position(|(f, _)| f == field)
                    .unwrap_or_default(),
            ),
            _ => CellPath::Whole,
        }
    };
    let list = matches!(cells, CellPath::Range(..)) && std::ptr::eq(first, selector);
    let (kind, t): (&'static str, CqlType) = match kind {
        "ttl" => ("ttl", CqlType::Int),
        "maxwritetime" => ("maxwritetime", CqlType::Bigint),
        _ => ("writetime", CqlType::Bigint),
    };
    let list = list || (!top && col.typ.is_multi_cell());
    let t = if list && kind != "maxwritetime" {
        CqlType::List(Box::new(t))
    } else {
        t
    };
    Ok((
        format!("{kind}({n})"),
        t,
        Expr::CellMeta(Box::new(CellMeta {
            kind,
            column: i,
            cells,
            value,
            value_type,
        })),
    ))
}

/// `token(x, y)`: the token of the partition key made of the arguments,
/// typed as the table's partition key columns.
fn token_expr(table: &TableMetadata, args: &[Selector]) -> Result<(String, CqlType, Expr)> {
    let pk = table.partition_key();
    if args.len() != pk.len() {
        return Err(Error::Invalid(format!(
            "Invalid number of arguments in call to function system.token: {} required but {} provided",
            pk.len(),
            args.len()
        )));
    }
    let mut names = Vec::with_capacity(args.len());
    let mut exprs = Vec::with_capacity(args.len());
    let mut types = Vec::with_capacity(args.len());
    for (i, (a, c)) in args.iter().zip(pk).enumerate() {
        let (n, t, e) = typed_arg(table, a, &c.typ, "token", i)?;
        names.push(n);
        exprs.push(e);
        types.push(t);
    }
    Ok((
        format!("system.token({})", names.join(", ")),
        CqlType::Bigint,
        Expr::Native("token".into(), exprs, types),
    ))
}

/// `count(x)`, `min(x)`, `max(x)`, `sum(x)`, `avg(x)` of any expression.
fn aggregate_expr(
    table: &TableMetadata,
    lname: &str,
    kind: AggKind,
    args: &[Selector],
) -> Result<(String, CqlType, Expr)> {
    let is_aggregate = |a: &Selector| {
        matches!(a, Selector::CountRows)
            || matches!(a, Selector::Function { name, .. }
                if AggKind::of(name.strip_prefix("system.").unwrap_or(name)).is_some())
    };
    let nested = || {
        Error::Invalid(
            "aggregate functions cannot be used as arguments of aggregate functions".into(),
        )
    };
    if args.iter().any(is_aggregate) {
        return Err(nested());
    }
    let signatures = || {
        let sigs = [
            "bigint", "counter", "decimal", "double", "float", "int", "smallint", "tinyint",
            "varint",
        ]
        .iter()
        .map(|t| format!("system.{lname} : ({t}) -> {t}"))
        .collect::<Vec<_>>()
        .join(", ");
        Error::Invalid(format!("Invalid call to function {lname}, none of its type signatures match (known type signatures: {sigs})"))
    };
    if args.len() != 1 {
        return Err(match kind {
            AggKind::Min | AggKind::Max => Error::Invalid(format!(
                "Invalid number of arguments for function system.{lname}(any)"
            )),
            AggKind::Sum | AggKind::Avg => signatures(),
            _ => Error::Invalid(format!(
                "Invalid number of arguments in call to function system.{lname}: 1 required but {} provided",
                args.len()
            )),
        });
    }
    let (n, t, e) = expr(table, &args[0])?;
    if e.has_aggregate() {
        return Err(nested());
    }
    if matches!(kind, AggKind::Sum | AggKind::Avg) && !crate::functions::is_numeric(&t) {
        return Err(signatures());
    }
    let rt = match kind {
        AggKind::Count => CqlType::Bigint,
        // Cassandra's min and max of timeuuids compare them as timeuuids
        // and answer the bytes, typed blob
        AggKind::Min | AggKind::Max if *t.unfrozen() == CqlType::Timeuuid => CqlType::Blob,
        _ => t.clone(),
    };
    Ok((
        format!("system.{lname}({n})"),
        rt,
        Expr::Aggregate(0, kind, Box::new(e), t),
    ))
}

/// Argument `i` of function `fname`, of type `t` (Cassandra's
/// `FunctionResolver.validateTypes` for a function of one signature).
fn typed_arg(
    table: &TableMetadata,
    a: &Selector,
    t: &CqlType,
    fname: &str,
    i: usize,
) -> Result<(String, CqlType, Expr)> {
    let inner = unparen(a);
    let exact = exact_type(table, inner)?;
    if !fit_with(inner, &exact, t).assignable() {
        return Err(Error::Invalid(format!(
            "Type error: {} cannot be passed as argument {i} of function system.{fname} of type {t}",
            sel_text(a)
        )));
    }
    expr_typed(table, a, Some(t))
}

/// The receiver of a map key or a set element selected from `n` (of type
/// `t`), as Cassandra names it: `key(m)`, `value(s)`.
fn element_receiver(n: &str, t: &CqlType) -> String {
    match t.unfrozen() {
        CqlType::Map(..) => format!("key({n})"),
        _ => format!("value({n})"),
    }
}

/// A literal in a selection, typed by its receiver.
fn const_term(term: &Term, t: &CqlType, text: &str) -> Result<Bytes> {
    let ev = crate::terms::Eval {
        bindings: &crate::terms::Bindings { values: &[] },
    };
    match ev.value(term, t, text)? {
        Val::Set(b) => Ok(b),
        _ => Err(Error::Invalid(format!("Invalid null value for {text}"))),
    }
}

const NATIVE_FUNCTIONS: &[&str] = &[
    "exp",
    "log",
    "log10",
    "round",
    "map_keys",
    "map_values",
    "collection_count",
    "collection_min",
    "collection_max",
    "collection_sum",
    "collection_avg",
    "mask_null",
    "mask_default",
    "mask_replace",
    "mask_inner",
    "mask_outer",
    "mask_hash",
    "similarity_cosine",
    "similarity_euclidean",
    "similarity_dot_product",
    "maxwritetime",
];

/// How a literal argument is written in a result column's name.
fn term_name(t: &Term) -> String {
    match t {
        Term::Constant(sibyl_types::Constant::String(s)) => format!("'{}'", s.replace('\'', "''")),
        Term::Constant(c) => sibyl_cql::constant_text(c),
        Term::Null => "NULL".into(),
        Term::List(items) => format!(
            "[{}]",
            items.iter().map(term_name).collect::<Vec<_>>().join(", ")
        ),
        Term::Set(items) => format!(
            "{{{}}}",
            items.iter().map(term_name).collect::<Vec<_>>().join(", ")
        ),
        Term::Negate(x) => format!("-{}", term_name(x)),
        Term::Function { name, args } => format!(
            "{}({})",
            name.to_lowercase(),
            args.iter().map(term_name).collect::<Vec<_>>().join(", ")
        ),
        Term::Arith { op, lhs, rhs } => {
            let f = match op {
                '+' => "_add",
                '-' => "_substract",
                '*' => "_multiply",
                '/' => "_divide",
                _ => "_modulo",
            };
            format!("system.\"{f}\"({}, {})", term_name(lhs), term_name(rhs))
        }
        Term::Cast { typ, term } => format!("({typ}){}", term_name(term)),
        Term::Bind(m) => m
            .name
            .as_ref()
            .map(|n| format!(":{n}"))
            .unwrap_or_else(|| "?".into()),
        _ => "?".into(),
    }
}

/// The math, collection, masking, similarity and write-time functions of
/// Cassandra 5.0, with literal arguments typed by the function's signature.
fn native_function(
    table: &TableMetadata,
    name: &str,
    args: &[Selector],
) -> Result<Option<(String, CqlType, Expr)>> {
    if !NATIVE_FUNCTIONS.contains(&name) {
        return Ok(None);
    }
    if name == "maxwritetime" {
        let [Selector::Column(c)] = args else {
            return Err(Error::Invalid("maxwritetime() takes one column".into()));
        };
        let i = table.column_index(c).ok_or_else(|| undefined(table, c))?;
        if table.columns[i].kind.is_primary_key() {
            return Err(Error::Invalid(format!(
                "Cannot use selection function maxwritetime on PRIMARY KEY part {c}"
            )));
        }
        return Ok(Some((
            format!("maxwritetime({c})"),
            CqlType::Bigint,
            Expr::MaxWriteTime(i),
        )));
    }
    // the arities of Cassandra's native functions, named by their signature
    let arity: Option<(std::ops::RangeInclusive<usize>, &str)> = match name {
        "map_keys" | "map_values" => Some((1..=1, "map")),
        "collection_count" => Some((1..=1, "collection")),
        "collection_min" | "collection_max" | "collection_sum" | "collection_avg" => {
            Some((1..=1, "numeric_set_or_list"))
        }
        "mask_null" | "mask_default" => Some((1..=1, "any")),
        "mask_replace" => Some((2..=2, "any, any")),
        "mask_inner" | "mask_outer" => Some((3..=4, "[text|varchar|ascii], int, int, [text]")),
        "mask_hash" => Some((1..=2, "any, [text]")),
        n if n.starts_with("similarity_") => Some((2..=2, "vector<float, n>, vector<float, n>")),
        _ => None,
    };
    if let Some((n, sig)) = arity {
        if !n.contains(&args.len()) {
            return Err(Error::Invalid(format!(
                "Invalid number of arguments for function system.{name}({sig})"
            )));
        }
    }
    // the masking functions' own checks of their int and text arguments
    let requires_type = |i: usize| -> Option<CqlType> {
        match (name, i) {
            ("mask_inner" | "mask_outer", 1 | 2) => Some(CqlType::Int),
            ("mask_inner" | "mask_outer", 3) | ("mask_hash", 1) => Some(CqlType::Text),
            _ => None,
        }
    };
    let requires_error = |t: &CqlType, arg: &str, found: &CqlType| {
        Error::Invalid(format!(
            "Function system.{name} requires an argument of type {t}, but found argument {arg} of type {found}"
        ))
    };
    for (i, a) in args.iter().enumerate() {
        let Some(t) = requires_type(i) else { continue };
        let found = match a {
            Selector::Term(Term::Constant(c)) => crate::operations::preferred_type(c),
            Selector::Term(_) => continue,
            other => expr(table, other)?.1,
        };
        let fits = match (&t, found.unfrozen()) {
            (CqlType::Int, CqlType::Int) => true,
            (CqlType::Int, CqlType::Bigint | CqlType::Varint) => {
                // an integer literal too large for an int is refused below
                matches!(a, Selector::Term(_))
            }
            (CqlType::Text, CqlType::Text | CqlType::Ascii) => true,
            _ => false,
        };
        if !fits {
            return Err(requires_error(&t, &sel_text(a), &found));
        }
        if let Selector::Term(Term::Constant(sibyl_types::Constant::String(v))) = a {
            let n = v.chars().count();
            if i == 3 && n != 1 {
                return Err(Error::Invalid(format!(
                    "The padding argument for function system.{name} should be single-character, but '{v}' has {n} characters."
                )));
            }
            if name == "mask_hash" {
                crate::functions::mask_hash(b"", v)?;
            }
        }
    }
    // columns and expressions first: their types give literals theirs
    let mut resolved: Vec<Option<(String, CqlType, Expr)>> = Vec::new();
    for a in args {
        resolved.push(match a {
            Selector::Term(t)
                if !matches!(t, Term::Constant(_))
                    || name.starts_with("mask_")
                    || name.starts_with("similarity_") =>
            {
                None
            }
            other => Some(expr(table, other)?),
        });
    }
    let first_type = resolved
        .first()
        .and_then(|r| r.as_ref().map(|(_, t, _)| t.clone()));
    let other_vector = resolved
        .iter()
        .flatten()
        .map(|(_, t, _)| t.clone())
        .find(|t| matches!(t.unfrozen(), CqlType::Vector(..)));
    for (i, a) in args.iter().enumerate() {
        if resolved[i].is_some() {
            continue;
        }
        let Selector::Term(term) = a else { continue };
        let expected = match (name, i) {
            ("mask_replace", 1) => first_type.clone(),
            ("mask_inner" | "mask_outer", 1 | 2) => Some(CqlType::Int),
            ("mask_inner" | "mask_outer", 3) | ("mask_hash", 1) => Some(CqlType::Text),
            (n, _) if n.starts_with("similarity_") => other_vector.clone(),
            _ => None,
        };
        let text = term_name(term);
        let e = match expected {
            Some(t) => {
                if let (CqlType::Vector(_, dim), Term::List(items)) = (t.unfrozen(), term) {
                    if items.len() != *dim as usize {
                        return Err(Error::Invalid(
                            "All arguments must have the same vector dimensions".into(),
                        ));
                    }
                }
                let ev = crate::terms::Eval {
                    bindings: &crate::terms::Bindings { values: &[] },
                };
                let v = ev.value(term, &t, &text).map_err(|_| {
                    Error::Invalid(format!("Type error: {text} cannot be passed as argument {i} of function system.{name} of type {}", t))
                })?;
                (text, t, Expr::Const(v.bytes().cloned()))
            }
            None => expr(table, a)?,
        };
        resolved[i] = Some(e);
    }
    let resolved: Vec<(String, CqlType, Expr)> = resolved.into_iter().flatten().collect();
    let names: Vec<&str> = resolved.iter().map(|(n, _, _)| n.as_str()).collect();
    let fname = format!("system.{name}({})", names.join(", "));
    let types: Vec<CqlType> = resolved
        .iter()
        .map(|(_, t, _)| t.unfrozen().clone())
        .collect();
    let requires = |what: &str| -> Error {
        let (n, t, _) = &resolved[0];
        Error::Invalid(format!(
            "Function system.{name} requires {what}, but found argument {n} of type {t}"
        ))
    };
    let one = resolved.len() == 1;
    let ret = match name {
        "exp" | "log" | "log10" | "round" => {
            if !one || !crate::functions::is_numeric(&types[0]) {
                let sigs: Vec<String> = [
                    "counter", "int", "tinyint", "float", "decimal", "varint", "bigint",
                    "smallint", "double",
                ]
                .iter()
                .map(|t| format!("system.{name} : ({t}) -> {t}"))
                .collect();
                return Err(Error::Invalid(format!(
                    "Invalid call to function {name}, none of its type signatures match (known type signatures: {})",
                    sigs.join(", ")
                )));
            }
            types[0].clone()
        }
        "map_keys" | "map_values" => match types.first() {
            Some(CqlType::Map(k, v)) if one => {
                if name == "map_keys" {
                    CqlType::Set(k.clone())
                } else {
                    CqlType::List(v.clone())
                }
            }
            _ => return Err(requires("a map argument")),
        },
        "collection_count" => match types.first() {
            Some(CqlType::Map(..) | CqlType::List(_) | CqlType::Set(_)) if one => CqlType::Int,
            _ => return Err(requires("a collection argument")),
        },
        "collection_min" | "collection_max" => match types.first() {
            Some(CqlType::List(e) | CqlType::Set(e)) if one => e.as_ref().clone(),
            _ => return Err(requires("a set or list argument")),
        },
        "collection_sum" | "collection_avg" => match types.first() {
            Some(CqlType::List(e) | CqlType::Set(e)) if one && crate::functions::is_numeric(e) => {
                e.as_ref().clone()
            }
            _ => return Err(requires("a numeric set/list argument")),
        },
        "mask_null" | "mask_default" | "mask_replace" => resolved[0].1.clone(),
        "mask_inner" | "mask_outer" => {
            if !matches!(types.first(), Some(CqlType::Text | CqlType::Ascii)) {
                return Err(requires("an argument of type [text|varchar|ascii]"));
            }
            resolved[0].1.clone()
        }
        "mask_hash" => CqlType::Blob,
        _ => {
            if resolved.len() != 2 || !types.iter().all(|t| matches!(t, CqlType::Vector(..))) {
                return Err(Error::Invalid(format!(
                    "Function system.{name} requires two vector arguments"
                )));
            }
            CqlType::Float
        }
    };
    let exprs = resolved.into_iter().map(|(_, _, e)| e).collect();
    Ok(Some((
        fname,
        ret,
        Expr::Native(name.to_string(), exprs, types),
    )))
}

/// Evaluates a native function on its argument values.
fn native_eval(name: &str, types: &[CqlType], vals: &[Option<Bytes>]) -> Result<Option<Bytes>> {
    use crate::functions as f;
    let int_arg = |i: usize, default: i32| -> i32 {
        vals.get(i)
            .cloned()
            .flatten()
            .and_then(|b| <[u8; 4]>::try_from(b.as_ref()).ok())
            .map(i32::from_be_bytes)
            .unwrap_or(default)
    };
    let text_arg = |i: usize| -> Option<String> {
        vals.get(i)
            .cloned()
            .flatten()
            .map(|b| String::from_utf8_lossy(&b).to_string())
    };
    match name {
        "token" => {
            // the partition key of these values; none when one is null
            let parts: Option<Vec<Bytes>> = vals.iter().cloned().collect();
            return Ok(parts.map(|p| {
                let key = sibyl_db::cells::make_partition_key(&p);
                Bytes::copy_from_slice(&sibyl_types::murmur3::token(&key).to_be_bytes())
            }));
        }
        "mask_null" => return Ok(None),
        "mask_default" => return Ok(Some(f::mask_default(&types[0]))),
        "mask_replace" => return Ok(vals.get(1).cloned().flatten()),
        _ => {}
    }
    let Some(v) = vals.first().cloned().flatten() else {
        return Ok(None);
    };
    Ok(match name {
        "exp" | "log" | "log10" | "round" => f::math(name, &types[0], &v)?,
        "map_keys" | "map_values" => {
            let pairs = sibyl_types::value::deserialize_map(&v)
                .map_err(|e| Error::Server(e.to_string()))?;
            let items: Vec<Bytes> = pairs
                .into_iter()
                .map(|(k, x)| if name == "map_keys" { k } else { x })
                .collect();
            Some(sibyl_types::value::serialize_collection(&items))
        }
        "collection_count" => {
            let n = match &types[0] {
                CqlType::Map(..) => sibyl_types::value::deserialize_map(&v).map(|p| p.len()),
                _ => sibyl_types::value::deserialize_collection(&v).map(|p| p.len()),
            }
            .map_err(|e| Error::Server(e.to_string()))?;
            // a frozen empty collection is a value: it counts 0
            Some(Bytes::copy_from_slice(&(n as i32).to_be_bytes()))
        }
        "collection_min" | "collection_max" | "collection_sum" | "collection_avg" => {
            let (CqlType::List(e) | CqlType::Set(e)) = &types[0] else {
                return Ok(None);
            };
            f::collection_aggregate(name, e, &v)
        }
        "mask_inner" | "mask_outer" => {
            let pad = text_arg(3).and_then(|p| p.chars().next()).unwrap_or('*');
            let text = String::from_utf8_lossy(&v).to_string();
            Some(Bytes::from(f::mask_text(
                name == "mask_outer",
                &text,
                int_arg(1, 0),
                int_arg(2, 0),
                pad,
            )))
        }
        "mask_hash" => Some(f::mask_hash(
            &v,
            &text_arg(1).unwrap_or_else(|| "SHA-256".into()),
        )?),
        _ => match vals.get(1).cloned().flatten() {
            Some(w) => f::similarity(name, &v, &w)?,
            None => None,
        },
    })
}

/// Evaluates an expression against one row.
fn eval(
    e: &Expr,
    cell: &dyn Fn(usize) -> Option<Bytes>,
    meta: &dyn Fn(&Expr) -> Option<Bytes>,
) -> Result<Option<Bytes>> {
    Ok(match e {
        Expr::Column(i) => cell(*i),
        Expr::WriteTime(_)
        | Expr::Ttl(_)
        | Expr::Token
        | Expr::MaxWriteTime(_)
        | Expr::Aggregate(..) => meta(e),
        Expr::CellMeta(m) => {
            // nothing selected, no cell
            let v = eval(&m.value, cell, meta)?;
            let empty = v.as_ref().is_none_or(|v| match m.value_type.unfrozen() {
                CqlType::Map(..) | CqlType::Set(_) | CqlType::List(_) => {
                    v.len() >= 4 && v[..4] == [0, 0, 0, 0]
                }
                _ => false,
            });
            if empty {
                None
            } else {
                meta(e)
            }
        }
        Expr::Element(x, t, key) => match eval(x, cell, meta)? {
            Some(v) => match t {
                CqlType::Map(kt, _) => sibyl_types::value::deserialize_map(&v).ok().and_then(|p| {
                    p.into_iter()
                        .find(|(k, _)| kt.compare(k, key) == Ordering::Equal)
                        .map(|(_, x)| x)
                }),
                CqlType::Set(et) => sibyl_types::value::deserialize_collection(&v)
                    .ok()
                    .and_then(|items| {
                        items
                            .into_iter()
                            .find(|e| et.compare(e, key) == Ordering::Equal)
                    }),
                _ => None,
            },
            None => None,
        },
        Expr::Slice(x, t, from, to) => match eval(x, cell, meta)? {
            Some(v) => {
                // a frozen collection's slice is a collection, maybe empty; a
                // non-frozen one's is null when empty
                let frozen = !(matches!(x.as_ref(), Expr::Column(_)) && t.is_multi_cell());
                let inside = |kt: &CqlType, k: &Bytes| {
                    from.as_ref()
                        .is_none_or(|f| kt.compare(k, f) != Ordering::Less)
                        && to
                            .as_ref()
                            .is_none_or(|e| kt.compare(k, e) != Ordering::Greater)
                };
                match t.unfrozen() {
                    CqlType::Map(kt, _) => {
                        let kept: Vec<(Bytes, Bytes)> = sibyl_types::value::deserialize_map(&v)
                            .unwrap_or_default()
                            .into_iter()
                            .filter(|(k, _)| inside(kt, k))
                            .collect();
                        (frozen || !kept.is_empty())
                            .then(|| sibyl_types::value::serialize_map(&kept))
                    }
                    CqlType::Set(et) => {
                        let kept: Vec<Bytes> = sibyl_types::value::deserialize_collection(&v)
                            .unwrap_or_default()
                            .into_iter()
                            .filter(|k| inside(et, k))
                            .collect();
                        (frozen || !kept.is_empty())
                            .then(|| sibyl_types::value::serialize_collection(&kept))
                    }
                    _ => None,
                }
            }
            None => None,
        },
        Expr::Native(name, args, types) => {
            let vals: Vec<Option<Bytes>> = args
                .iter()
                .map(|a| eval(a, cell, meta))
                .collect::<Result<_>>()?;
            native_eval(name, types, &vals)?
        }
        Expr::Const(v) => v.clone(),
        Expr::ToJson(x, t) => {
            let v = eval(x, cell, meta)?;
            Some(Bytes::from(
                v.map_or_else(|| "null".to_string(), |v| t.to_json(&v)),
            ))
        }
        Expr::TimeConversion(name, x, t) => match eval(x, cell, meta)? {
            Some(v) => Some(crate::functions::time_conversion(name, t, &v)?.1),
            None => None,
        },
        Expr::Cast(x, from, to) => match eval(x, cell, meta)? {
            // an empty value of a type read as a Java object is a null
            Some(v)
                if v.is_empty()
                    && !matches!(
                        from.unfrozen(),
                        CqlType::Text | CqlType::Ascii | CqlType::Blob
                    ) =>
            {
                None
            }
            Some(v) => Some(crate::functions::cast(from, to, &v)?),
            None => None,
        },
        Expr::BlobAs(x, t) => {
            let v = eval(x, cell, meta)?;
            if let Some(b) = &v {
                if t.validate(b).is_err() {
                    let hex: String = b.iter().map(|x| format!("{x:02x}")).collect();
                    return Err(Error::Invalid(format!("In call to function system.blobas{t}, value 0x{hex} is not a valid binary representation for type {t}")));
                }
            }
            v
        }
        Expr::Arith(op, a, ta, b, tb) => {
            let (x, y) = (eval(a, cell, meta)?, eval(b, cell, meta)?);
            crate::functions::arithmetic(*op, ta, x.as_ref(), tb, y.as_ref())?
        }
        Expr::Abs(x, t) => eval(x, cell, meta)?.and_then(|v| crate::functions::abs(t, &v)),
        Expr::Negate(x, t) => eval(x, cell, meta)?.and_then(|v| {
            if v.is_empty() {
                Some(v)
            } else {
                crate::functions::negate(t, &v)
            }
        }),
        Expr::Timeuuid(min, x) => eval(x, cell, meta)?
            .and_then(|v| <[u8; 8]>::try_from(v.as_ref()).ok())
            .map(|a| {
                let millis = i64::from_be_bytes(a);
                let u = if *min {
                    sibyl_types::timeuuid::min_timeuuid(millis)
                } else {
                    sibyl_types::timeuuid::max_timeuuid(millis)
                };
                Bytes::copy_from_slice(u.as_bytes())
            }),
        Expr::Field(x, i) => match eval(x, cell, meta)? {
            Some(v) => sibyl_types::value::deserialize_tuple(&v)
                .ok()
                .and_then(|f| f.get(*i).cloned().flatten()),
            None => None,
        },
        Expr::Nullary(name) => {
            let ev = crate::terms::Eval {
                bindings: &crate::terms::Bindings { values: &[] },
            };
            ev.call(name, &[])?.1.bytes().cloned()
        }
    })
}

/// Cassandra's answer to floor() on a type it has no signature for.
const FLOOR_SIGNATURES: &str = "Invalid call to function floor, none of its type signatures match (known type signatures: system.floor : (timestamp, duration) -> timestamp, system.floor : (timeuuid, duration, timestamp) -> timestamp, system.floor : (time, duration) -> time, system.floor : (timestamp, duration, timestamp) -> timestamp, system.floor : (date, duration, date) -> date, system.floor : (timeuuid, duration) -> timestamp, system.floor : (date, duration) -> date)";

/// The length of a time bucket in milliseconds (`1h`, `15m`, `1d`; no months).
fn bucket_millis(d: &str) -> Result<i64> {
    let v = CqlType::Duration
        .from_constant(&sibyl_types::Constant::Duration(d.to_string()))
        .map_err(|e| Error::Invalid(e.to_string()))?;
    let (months, a) =
        sibyl_types::value::read_signed_vint(&v).map_err(|e| Error::Invalid(e.to_string()))?;
    let (days, b) =
        sibyl_types::value::read_signed_vint(&v[a..]).map_err(|e| Error::Invalid(e.to_string()))?;
    let (nanos, _) = sibyl_types::value::read_signed_vint(&v[a + b..])
        .map_err(|e| Error::Invalid(e.to_string()))?;
    if months != 0 {
        return Err(Error::Invalid(format!(
            "floor() with a duration in months ({d}) is not supported yet"
        )));
    }
    let millis = days * 86_400_000 + nanos / 1_000_000;
    if millis <= 0 {
        return Err(Error::Invalid(format!(
            "Negative durations are not supported by the floor function: {d}"
        )));
    }
    Ok(millis)
}

/// The start of the bucket holding timestamp `v` (buckets counted from the epoch).
fn floor_timestamp(v: &[u8], millis: i64) -> Option<Bytes> {
    let a: [u8; 8] = v.try_into().ok()?;
    let t = i64::from_be_bytes(a);
    Some(Bytes::copy_from_slice(
        &(t - t.rem_euclid(millis)).to_be_bytes(),
    ))
}

/// Where a page stopped.
#[derive(Debug, Clone, PartialEq)]
pub struct PagingState {
    pub key: Bytes,
    /// Clustering of the last row returned; None: resume after the whole partition.
    pub clustering: Option<Vec<Bytes>>,
    pub remaining: i64,
    pub returned_in_partition: i64,
}

const PAGING_VERSION: u8 = 1;

impl PagingState {
    pub fn encode(&self) -> Bytes {
        let mut out = vec![PAGING_VERSION];
        out.extend_from_slice(&(self.key.len() as u32).to_be_bytes());
        out.extend_from_slice(&self.key);
        match &self.clustering {
            Some(c) => {
                out.push(1);
                out.extend_from_slice(&(c.len() as u32).to_be_bytes());
                for v in c {
                    out.extend_from_slice(&(v.len() as u32).to_be_bytes());
                    out.extend_from_slice(v);
                }
            }
            None => out.push(0),
        }
        out.extend_from_slice(&self.remaining.to_be_bytes());
        out.extend_from_slice(&self.returned_in_partition.to_be_bytes());
        Bytes::from(out)
    }

    pub fn decode(b: &[u8]) -> Result<PagingState> {
        let bad = || Error::Protocol("Invalid value for the paging state".into());
        let mut r = sibyl_db::serde::Reader::new(b);
        if r.u8().map_err(|_| bad())? != PAGING_VERSION {
            return Err(bad());
        }
        let key = r.bytes().map_err(|_| bad())?;
        let clustering = if r.u8().map_err(|_| bad())? == 1 {
            let n = r.u32().map_err(|_| bad())? as usize;
            if n > 1024 {
                return Err(bad());
            }
            let mut c = Vec::with_capacity(n);
            for _ in 0..n {
                c.push(r.bytes().map_err(|_| bad())?);
            }
            Some(c)
        } else {
            None
        };
        let remaining = r.i64().map_err(|_| bad())?;
        let returned_in_partition = r.i64().map_err(|_| bad())?;
        Ok(PagingState {
            key,
            clustering,
            remaining,
            returned_in_partition,
        })
    }
}

/// The rows of one page.
pub struct SelectResult {
    pub rows: Vec<Vec<Option<Bytes>>>,
    pub paging_state: Option<Bytes>,
    /// Client warnings (aggregation over many partitions).
    pub warnings: Vec<String>,
}

/// `ORDER BY v ANN OF q LIMIT n`: the vector column, the query vector and the
/// similarity function of its storage-attached index. Candidates are scored
/// exactly (the answer an approximate graph converges to).
fn ann_plan(
    table: &TableMetadata,
    stmt: &Select,
    ev: &Eval,
    page_size: Option<i32>,
) -> Result<Option<(usize, Bytes, String)>> {
    use sibyl_cql::RelationLhs;
    let Some((col, term)) = &stmt.ann else {
        return Ok(None);
    };
    let i = table
        .column_index(col)
        .ok_or_else(|| undefined(table, col))?;
    let c = &table.columns[i];
    if !matches!(c.typ.unfrozen(), CqlType::Vector(..)) {
        return Err(Error::Invalid(format!(
            "Unexpected receiver type '{}'; only list and vector are expected",
            c.typ
        )));
    }
    let query = match ev.value(term, &c.typ, col)? {
        Val::Set(b) => b,
        _ => {
            return Err(Error::Invalid(format!(
                "Invalid null value for ANN ordering of {col}"
            )))
        }
    };
    let Some(ix) = table
        .indexes
        .iter()
        .find(|ix| &ix.column == col && ix.is_sai())
    else {
        return Err(Error::Invalid(
            "ANN ordering by vector requires the column to be indexed".into(),
        ));
    };
    for rel in &stmt.where_clause {
        let (RelationLhs::Column(r) | RelationLhs::Element(r, _)) = &rel.lhs else {
            continue;
        };
        let key = table
            .column(r)
            .map(|c| c.kind.is_primary_key())
            .unwrap_or(false);
        if !key
            && !table
                .indexes
                .iter()
                .any(|ix| &ix.column == r && ix.is_sai())
        {
            return Err(Error::Invalid(
                "ANN ordering by vector requires all restricted column(s) to be indexed".into(),
            ));
        }
    }
    // a page smaller than the limit is raised to it, with a warning (see execute)
    let _ = page_size;
    if int_value(ev, &stmt.limit, "[limit]")?.is_none() {
        return Err(Error::Invalid("Top-K queries must have a limit specified and the limit must be less than the query page size".into()));
    }
    let function = format!(
        "similarity_{}",
        ix.options
            .get("similarity_function")
            .map(|f| f.to_ascii_lowercase())
            .unwrap_or_else(|| "cosine".into())
    );
    Ok(Some((i, query, function)))
}

thread_local! {
    /// The first column (by index) the selectors planned so far read
    /// (Cassandra's `defs.get(0)`, which its CAST error names).
    static FIRST_COLUMN: std::cell::Cell<Option<usize>> = const { std::cell::Cell::new(None) };
}

/// Calls `f` on each column a selector reads, in order, while it returns
/// true; false when `f` stopped it.
fn each_column<'a>(s: &'a Selector, f: &mut dyn FnMut(&'a String) -> bool) -> bool {
    match s {
        Selector::Column(c) | Selector::WriteTime(c) | Selector::Ttl(c) => f(c),
        Selector::Function { args, .. } | Selector::Parens(args) => {
            args.iter().all(|a| each_column(a, f))
        }
        Selector::Cast { selector, .. }
        | Selector::Field { selector, .. }
        | Selector::Element { selector, .. }
        | Selector::Slice { selector, .. }
        | Selector::Negate(selector)
        | Selector::Hint { selector, .. }
        | Selector::MetaOf { selector, .. } => each_column(selector, f),
        Selector::Arith { lhs, rhs, .. } => each_column(lhs, f) && each_column(rhs, f),
        Selector::CountRows | Selector::Term(_) => true,
    }
}

/// The columns a selector reads.
fn selector_columns(s: &Selector, out: &mut Vec<String>) {
    each_column(s, &mut |c| {
        if !out.contains(c) {
            out.push(c.clone())
        }
        true
    });
}

/// The first column a selector reads.
fn first_column(s: &Selector) -> Option<&String> {
    let mut first = None;
    each_column(s, &mut |c| {
        first = Some(c);
        false
    });
    first
}

/// Cassandra's checks of what a SELECT reads against its WHERE clause:
/// selections of static columns only, and SELECT DISTINCT.
fn validate_shape(table: &TableMetadata, stmt: &Select, r: &Restrictions) -> Result<()> {
    use sibyl_cql::RelationLhs;
    // a static-compact table's columns are Cassandra's statics
    let kind_of = |c: &str| {
        table.column(c).map(|c| match c.kind {
            ColumnKind::Regular if table.is_static_compact() => ColumnKind::Static,
            k => k,
        })
    };
    // (no allocation on the common path: this runs on every execution)
    let restricts = |k: ColumnKind| {
        stmt.where_clause.iter().any(|rel| match &rel.lhs {
            RelationLhs::Column(c) | RelationLhs::Element(c, _) => kind_of(c) == Some(k),
            RelationLhs::Columns(cs) => cs.iter().any(|c| kind_of(c) == Some(k)),
            RelationLhs::Token(_) => false,
        })
    };
    let mut cols = Vec::new();
    if !stmt.selectors.is_empty() && (stmt.distinct || restricts(ColumnKind::Clustering)) {
        for item in &stmt.selectors {
            selector_columns(&item.selector, &mut cols);
        }
        let kinds: Vec<Option<ColumnKind>> = cols.iter().map(|c| kind_of(c)).collect();
        let only_static = kinds.contains(&Some(ColumnKind::Static))
            && kinds
                .iter()
                .all(|k| matches!(k, Some(ColumnKind::Static | ColumnKind::PartitionKey)));
        if only_static && restricts(ColumnKind::Clustering) {
            return Err(Error::Invalid(
                "Cannot restrict clustering columns when selecting only static columns".into(),
            ));
        }
    }
    if !stmt.distinct {
        return Ok(());
    }
    if stmt.per_partition_limit.is_some() {
        return Err(Error::Invalid(
            "PER PARTITION LIMIT is not allowed with SELECT DISTINCT queries".into(),
        ));
    }
    if restricts(ColumnKind::Clustering) || restricts(ColumnKind::Regular) {
        return Err(Error::Invalid(
            "SELECT DISTINCT with WHERE clause only supports restriction by partition key and/or static columns.".into(),
        ));
    }
    let requested: Vec<&str> = if stmt.selectors.is_empty() {
        table.columns.iter().map(|c| c.name.as_str()).collect()
    } else {
        cols.iter().map(|c| c.as_str()).collect()
    };
    for c in &requested {
        if !matches!(
            kind_of(c),
            Some(ColumnKind::PartitionKey | ColumnKind::Static) | None
        ) {
            return Err(Error::Invalid(format!(
                "SELECT DISTINCT queries must only request partition key columns and/or static columns (not {c})"
            )));
        }
    }
    if r.partition_keys.is_none() {
        for pk in table.partition_key() {
            if !requested.contains(&pk.name.as_str()) {
                return Err(Error::Invalid(format!(
                    "SELECT DISTINCT queries must request all the partition key columns (missing {})",
                    pk.name
                )));
            }
        }
    }
    Ok(())
}

fn reversed_or_ordered(stmt: &Select) -> bool {
    !stmt.order_by.is_empty()
}

/// How a query uses the table's indexes.
struct IndexPlan {
    needs_filtering: bool,
    /// The index lookup that drives the read (none when the key is given, or
    /// when only ranges on storage-attached indexes apply: a scan then).
    driver: Option<(IndexMetadata, Bytes)>,
}

/// Cassandra's rules: a restriction an index answers needs no filtering. A
/// legacy index answers one restriction; storage-attached indexes answer
/// every restriction on their columns, ranges on non-literal types included.
fn index_plan(
    table: &TableMetadata,
    stmt: &Select,
    r: &Restrictions,
    ev: &Eval,
) -> Result<Option<IndexPlan>> {
    use sibyl_cql::{RelationLhs, RelationRhs};
    if table.indexes.is_empty() {
        return Ok(None);
    }
    let pk_full = r.partition_keys.is_some();
    let needing = if pk_full {
        r.filters.len()
    } else {
        stmt.where_clause
            .iter()
            .filter(|rel| !matches!(rel.lhs, RelationLhs::Token(_)))
            .count()
    };
    let mut legacy = false;
    let mut sai = 0usize;
    let mut driver: Option<(IndexMetadata, Bytes)> = None;
    for rel in &stmt.where_clause {
        let (c, element) = match &rel.lhs {
            RelationLhs::Column(c) => (c, None),
            RelationLhs::Element(c, k) => (c, Some(k)),
            _ => continue,
        };
        let Some(col) = table.column(c) else { continue };
        if pk_full && col.kind.is_primary_key() {
            continue;
        }
        let usable: Vec<&IndexMetadata> = table
            .indexes
            .iter()
            .filter(|ix| {
                &ix.column == c && ix.supports(rel.op, element.is_some(), col.typ.unfrozen())
            })
            .collect();
        if usable.is_empty() {
            continue;
        }
        if usable.iter().any(|ix| ix.is_sai()) {
            sai += 1;
        } else {
            legacy = true;
        }
        if pk_full || driver.is_some() || !IndexMetadata::is_lookup(rel.op) {
            continue;
        }
        let RelationRhs::Term(term) = &rel.rhs else {
            continue;
        };
        let set = |v: Val| match v {
            Val::Set(b) => Some(b),
            _ => None,
        };
        let value = match (col.typ.unfrozen(), rel.op, element) {
            (CqlType::Map(kt, vt), Operator::Eq, Some(k)) => {
                match (set(ev.value(k, kt, c)?), set(ev.value(term, vt, c)?)) {
                    (Some(k), Some(v)) => Some(sibyl_db::cells::make_partition_key(&[k, v])),
                    _ => None,
                }
            }
            (CqlType::List(e) | CqlType::Set(e), Operator::Contains, None) => {
                set(ev.value(term, e, c)?)
            }
            (CqlType::Map(_, vt), Operator::Contains, None) => set(ev.value(term, vt, c)?),
            (CqlType::Map(kt, _), Operator::ContainsKey, None) => set(ev.value(term, kt, c)?),
            (_, Operator::Eq, None) => set(ev.value(term, &col.typ, c)?),
            _ => None,
        };
        if let Some(v) = value {
            // prefer a legacy index for the lookup: its entries are exact
            let ix = usable.iter().find(|ix| !ix.is_sai()).unwrap_or(&usable[0]);
            driver = Some(((*ix).clone(), v));
        }
    }
    if !legacy && sai == 0 {
        return Ok(None);
    }
    let covered = sai.max(legacy as usize);
    Ok(Some(IndexPlan {
        needs_filtering: needing > covered,
        driver,
    }))
}

fn int_value(ev: &Eval, t: &Option<Term>, what: &str) -> Result<Option<i64>> {
    let Some(t) = t else { return Ok(None) };
    match ev.value(t, &CqlType::Int, what)? {
        Val::Set(b) if b.len() == 4 => {
            let v = i32::from_be_bytes([b[0], b[1], b[2], b[3]]) as i64;
            if v <= 0 {
                // Cassandra's one check for LIMIT and PER PARTITION LIMIT
                return Err(Error::Invalid("LIMIT must be strictly positive".into()));
            }
            Ok(Some(v))
        }
        Val::Unset => Ok(None),
        _ => Err(Error::Invalid("Invalid null value of limit".into())),
    }
}

struct Agg {
    states: Vec<AggState>,
    first_row: Option<Vec<Option<Bytes>>>,
}

/// Where a SELECT's partitions come from.
pub enum Source<'a> {
    /// The coordinator, at the statement's consistency level.
    Coordinator(&'a StorageProxy),
    /// A virtual table's rows, made on this node.
    Virtual(VirtualRows),
}

impl Source<'_> {
    async fn read(
        &self,
        cmd: ReadCommand,
        cl: Consistency,
    ) -> Result<Vec<(DecoratedKey, Partition)>> {
        match self {
            // a read this node answers alone is answered without a future;
            // the others' (boxed) is not held by every read's
            Source::Coordinator(proxy) => match proxy.read_now(&cmd, cl) {
                Some(r) => Ok(r?),
                None => Ok(Box::pin(proxy.read(cmd, cl)).await?),
            },
            Source::Virtual(rows) => rows.read(&cmd),
        }
    }
}

/// Executes a SELECT against a table's store (rows as selected; see
/// [`Selection::finish`] for SELECT JSON).
#[allow(clippy::too_many_arguments)]
pub async fn execute(
    table: &Arc<TableMetadata>,
    source: &Source<'_>,
    cl: Consistency,
    stmt: &Select,
    sel: &Selection,
    ev: &Eval<'_>,
    page_size: Option<i32>,
    paging_state: Option<&Bytes>,
    now: i32,
) -> Result<SelectResult> {
    let r = analyse(table, &stmt.where_clause, ev, Purpose::Select)?;
    // virtual tables filter without being asked (Cassandra's
    // `allowFilteringImplicitly`)
    let allow_filtering =
        stmt.allow_filtering || sibyl_schema::schema::is_virtual_keyspace(&table.keyspace);
    let mut needs_filtering = r.needs_filtering;
    if r.partition_keys.is_none() && r.has_clustering_restriction && r.token_range.is_none() {
        needs_filtering = true;
    }
    if r.partition_keys.is_none() && r.has_clustering_restriction && r.token_range.is_some() {
        needs_filtering = true;
    }
    validate_shape(table, stmt, &r)?;
    let plan = index_plan(table, stmt, &r, ev)?;
    if let Some(p) = &plan {
        needs_filtering = p.needs_filtering;
        if r.partition_keys.as_ref().is_some_and(|k| k.len() > 1) {
            return Err(Error::Invalid("Select on indexed columns and with IN clause for the PRIMARY KEY are not supported".into()));
        }
        if !stmt.order_by.is_empty() {
            return Err(Error::Invalid(
                "ORDER BY with 2ndary indexes is not supported, except for ANN queries.".into(),
            ));
        }
    }
    // the index whose entries drive the read, with the value looked up
    let driver: Option<(IndexMetadata, Bytes)> = plan.and_then(|p| p.driver);
    if let (Some(e), false) = (&r.order_error, allow_filtering) {
        return Err(Error::Invalid(e.clone()));
    }
    if let (Some((col, prev)), false) = (&r.clustering_gap, allow_filtering) {
        if !table.indexes.iter().any(|ix| &ix.column == col) {
            return Err(preceding_not_restricted(col, prev));
        }
    }
    let ann = ann_plan(table, stmt, ev, page_size)?;
    let mut warnings = Vec::new();
    let mut cl = cl;
    let mut page_size = page_size;
    if ann.is_some() {
        // Cassandra 5.0 runs top-k queries at ONE / LOCAL_ONE, and unpaged
        if !matches!(
            cl,
            Consistency::One | Consistency::LocalOne | Consistency::Any
        ) {
            let down = if matches!(
                cl,
                Consistency::LocalQuorum | Consistency::LocalSerial | Consistency::LocalOne
            ) {
                Consistency::LocalOne
            } else {
                Consistency::One
            };
            warnings.push(format!("Top-K queries can only be run with consistency level ONE / LOCAL_ONE / NODE_LOCAL. Consistency level {cl} was requested. Downgrading the consistency level to {down}."));
            cl = down;
        }
        let limit = int_value(ev, &stmt.limit, "[limit]")?.unwrap_or(0);
        if let Some(p) = page_size.filter(|p| *p > 0 && i64::from(*p) < limit) {
            warnings.push(format!("Top-K queries do not support paging and the page size is set to {p}, which is less than LIMIT {limit}. The page size has been set to {limit} to match the LIMIT."));
            page_size = i32::try_from(limit).ok();
        }
    }
    if sel.outs.iter().any(|o| o.is_aggregate()) {
        // a token restriction restricts the partition key too
        match &r.partition_keys {
            None if r.token_range.is_none() => {
                warnings.push("Aggregation query used without partition key".to_string())
            }
            Some(k) if k.len() > 1 => warnings.push(
                "Aggregation query used on multiple partition keys (IN restriction)".to_string(),
            ),
            _ => {}
        }
    }
    if needs_filtering && !allow_filtering && ann.is_none() {
        return Err(Error::Invalid(ALLOW_FILTERING_MSG.into()));
    }
    if let Some(e) = &r.filter_error {
        return Err(Error::Invalid(e.clone()));
    }
    if stmt.distinct {
        for item in &sel.outs {
            if let Out::Column(i) = item {
                // a static-compact table's columns are Cassandra's statics
                if !matches!(
                    table.columns[*i].kind,
                    ColumnKind::PartitionKey | ColumnKind::Static
                ) && !table.is_static_compact()
                {
                    return Err(Error::Invalid(format!(
                        "SELECT DISTINCT queries must only request partition key columns and/or static columns (not {})",
                        table.columns[*i].name
                    )));
                }
            }
        }
    }
    let floor_millis = match &stmt.group_by_floor {
        Some((col, d)) => {
            let Some(c) = table.column(col) else {
                return Err(undefined(table, col));
            };
            if c.typ.unfrozen() != &CqlType::Timestamp {
                return Err(Error::Invalid(FLOOR_SIGNATURES.into()));
            }
            let last = stmt.group_by.last().map(|s| s.as_str());
            if last != Some(col.as_str()) || c.kind != ColumnKind::Clustering {
                return Err(Error::Invalid(
                    "Functions are only supported on the last element of the GROUP BY clause"
                        .into(),
                ));
            }
            Some(bucket_millis(d)?)
        }
        None => None,
    };
    // GROUP BY: primary key columns in their declared order; a column
    // restricted to a single value may be left out
    let eq_restricted = |name: &str| {
        stmt.where_clause.iter().any(|rel| {
            rel.op == sibyl_cql::Operator::Eq
                && rel.lhs == sibyl_cql::RelationLhs::Column(name.to_string())
        })
    };
    let mut group_len = 0;
    for g in &stmt.group_by {
        let Some(idx) = table.column_index(g) else {
            return Err(undefined(table, g));
        };
        if !table.columns[idx].kind.is_primary_key() {
            return Err(Error::Invalid(format!(
                "Group by is currently only supported on the columns of the PRIMARY KEY, got {g}"
            )));
        }
        let skipped_ok = (group_len..idx).all(|j| eq_restricted(&table.columns[j].name));
        if idx < group_len || !skipped_ok {
            return Err(Error::Invalid("Group by currently only support groups of columns following their declared order in the PRIMARY KEY".into()));
        }
        group_len = idx + 1;
    }
    let grouped = group_len > 0;
    if grouped && group_len < table.partition_key_count {
        return Err(Error::Invalid(
            "Group by is not supported on only a part of the partition key".into(),
        ));
    }
    if stmt.distinct && group_len > table.partition_key_count {
        return Err(Error::Invalid(
            "Grouping on clustering columns is not allowed for SELECT DISTINCT queries".into(),
        ));
    }
    if sel.aggregate && !grouped && stmt.per_partition_limit.is_some() {
        return Err(Error::Invalid(
            "PER PARTITION LIMIT is not allowed with aggregate queries.".into(),
        ));
    }

    let mut group: Option<Vec<Bytes>> = None;
    let limit = int_value(ev, &stmt.limit, "[limit]")?;
    let per_partition_limit = int_value(ev, &stmt.per_partition_limit, "[per_partition_limit]")?;
    // ORDER BY
    let mut reversed = false;
    if !stmt.order_by.is_empty() {
        if r.partition_keys.is_none() {
            return Err(Error::Invalid("ORDER BY is only supported when the partition key is restricted by an EQ or an IN.".into()));
        }
        let ck = table.clustering();
        // a column ordered twice keeps its place and takes the later direction
        let mut order_by: Vec<sibyl_cql::Ordering> = Vec::new();
        for o in &stmt.order_by {
            match order_by.iter_mut().find(|x| x.column == o.column) {
                Some(x) => x.descending = o.descending,
                None => order_by.push(o.clone()),
            }
        }
        // the clustering columns before an ordered one may be skipped when
        // an equality restricts them (SelectStatement.isReversed)
        let restricted_by_eq = |name: &str| {
            stmt.where_clause.iter().any(|rel| {
                rel.op == sibyl_cql::Operator::Eq
                    && match &rel.lhs {
                        sibyl_cql::RelationLhs::Column(c) => c == name,
                        sibyl_cql::RelationLhs::Columns(cs) => cs.iter().any(|c| c == name),
                        _ => false,
                    }
            })
        };
        let mut position = 0;
        for (i, o) in order_by.iter().enumerate() {
            let Some(col) = table.column(&o.column) else {
                return Err(undefined(table, &o.column));
            };
            if col.kind != ColumnKind::Clustering {
                return Err(Error::Invalid(format!(
                    "Order by is currently only supported on the clustered columns of the PRIMARY KEY, got {}",
                    o.column
                )));
            }
            let out_of_order = || {
                Error::Invalid(
                    "Order by currently only supports the ordering of columns following their declared order in the PRIMARY KEY".into(),
                )
            };
            while ck.get(position).map(|c| c.name.as_str()) != Some(o.column.as_str()) {
                match ck.get(position) {
                    Some(c) if restricted_by_eq(&c.name) => position += 1,
                    _ => return Err(out_of_order()),
                }
            }
            position += 1;
            let rev = o.descending != col.reversed;
            if i == 0 {
                reversed = rev;
            } else if rev != reversed {
                return Err(Error::Invalid("Unsupported order by relation".into()));
            }
        }
    }
    // (IN values as written: `pk IN ('b', 'b')` is an IN of two)
    let key_in = r.partition_keys.as_ref().is_some_and(|k| k.len() > 1)
        || stmt.where_clause.iter().any(|rel| {
            matches!(&rel.lhs, sibyl_cql::RelationLhs::Column(c)
                if table.column(c).is_some_and(|c| c.kind == ColumnKind::PartitionKey))
                && matches!(&rel.rhs, sibyl_cql::RelationRhs::InList(items) if items.len() > 1)
        });
    if reversed_or_ordered(stmt)
        && key_in
        && (page_size.is_some_and(|p| p > 0) || sel.aggregate || grouped)
    {
        return Err(Error::Invalid("Cannot page queries with both ORDER BY and a IN restriction on the partition key; you must either remove the ORDER BY or the IN and sort client side, or disable paging for this query".into()));
    }
    let paging = match paging_state {
        Some(b) if !b.is_empty() => Some(PagingState::decode(b)?),
        _ => None,
    };
    // groups and aggregates are computed over all rows in one page
    let page_size = if sel.aggregate || grouped || ann.is_some() {
        None
    } else {
        page_size.filter(|p| *p > 0).map(|p| p as i64)
    };
    let mut remaining = paging
        .as_ref()
        .map(|p| p.remaining)
        .unwrap_or(limit.unwrap_or(i64::MAX));
    let mut ann_rows: Vec<(f32, Vec<Option<Bytes>>)> = Vec::new();
    if sel.aggregate || grouped || ann.is_some() {
        remaining = i64::MAX;
    }
    let mut out: Vec<Vec<Option<Bytes>>> = Vec::new();
    let mut agg = Agg::new(sel.aggs.len());
    let mut next_state: Option<PagingState> = None;

    // partition iteration (`QueryProcessor.validateKey` of each key first,
    // unless the clustering restrictions select nothing)
    for k in r
        .partition_keys
        .iter()
        .flatten()
        .filter(|_| !r.selects_nothing())
    {
        if k.is_empty() {
            return Err(Error::Invalid("Key may not be empty".into()));
        }
        if k.len() > u16::MAX as usize {
            return Err(Error::Invalid(format!(
                "Key length of {} is longer than maximum of {}",
                k.len(),
                u16::MAX
            )));
        }
    }
    let fixed_keys: Option<Vec<DecoratedKey>> = r.partition_keys.as_ref().map(|keys| {
        let mut ks: Vec<DecoratedKey> = keys.iter().map(|k| DecoratedKey::new(k.clone())).collect();
        if keys.len() > 1 {
            // IN: in the order of the key values
            ks.sort_by(|a, b| compare_partition_keys(table, &a.key, &b.key));
        }
        ks
    });
    let (start_tok, end_tok) = r
        .token_range
        .map(|t| (t.start, t.end))
        .unwrap_or((i64::MIN, i64::MAX));
    let mut fixed_pos = 0usize;
    let mut resume: Option<PagingState> = paging.clone();
    if let (Some(p), Some(keys)) = (&paging, &fixed_keys) {
        fixed_pos = keys
            .iter()
            .position(|k| k.key == p.key)
            .unwrap_or(keys.len());
    }
    // partitions come from the coordinator in batches, in token order; a
    // resumed scan starts with the paging partition itself (finished below)
    const FETCH: usize = 256;
    let mut fetched: std::collections::VecDeque<(DecoratedKey, Partition)> = Default::default();
    let mut next_start: Option<KeyBound> = match (&paging, &fixed_keys) {
        (Some(p), None) => Some(KeyBound {
            key: DecoratedKey::new(p.key.clone()),
            inclusive: true,
        }),
        _ => None,
    };
    let mut exhausted = false;
    let command = |kind: ReadKind, slices: Option<Vec<Slice>>| ReadCommand {
        table_id: table.id,
        kind,
        slices,
        now,
        digest: false,
    };
    'partitions: loop {
        // next partition
        let (key, read) = if let Some(keys) = &fixed_keys {
            if fixed_pos >= keys.len() {
                break;
            }
            fixed_pos += 1;
            let key = keys[fixed_pos - 1].clone();
            let cmd = command(
                ReadKind::SinglePartition { key: key.clone() },
                r.slices.clone(),
            );
            let read = source.read(cmd, cl).await?.pop().map(|(_, p)| p);
            (key, read)
        } else {
            if fetched.is_empty() && !exhausted {
                let kind = match &driver {
                    Some((ix, v)) => ReadKind::Index {
                        index: ix.name.clone(),
                        value: v.clone(),
                        start: next_start.clone(),
                        limit: FETCH,
                    },
                    None => ReadKind::PartitionRange {
                        start: next_start.clone(),
                        start_token: start_tok,
                        end_token: end_tok,
                        limit: FETCH,
                    },
                };
                let batch = source.read(command(kind, r.slices.clone()), cl).await?;
                exhausted = batch.len() < FETCH;
                if let Some((k, _)) = batch.last() {
                    next_start = Some(KeyBound {
                        key: k.clone(),
                        inclusive: false,
                    });
                }
                fetched.extend(batch);
            }
            let Some((key, p)) = fetched.pop_front() else {
                break;
            };
            (key, Some(p))
        };
        if key.token < start_tok || key.token > end_tok {
            continue;
        }
        let resuming = resume.as_ref().filter(|p| p.key == key.key).cloned();
        if let Some(p) = &resuming {
            resume = None;
            if p.clustering.is_none() {
                continue; // that partition was finished
            }
        }
        let Some(mut part) = read else { continue };
        part.resolve(now);
        if part.rows.is_empty() && part.static_row.is_none() {
            continue;
        }
        let pk_values = split_partition_key(&key.key, table.partition_key_count);
        let mut in_partition = resuming
            .as_ref()
            .map(|p| p.returned_in_partition)
            .unwrap_or(0);
        let ppl = per_partition_limit.unwrap_or(i64::MAX);
        // one row for the whole partition: DISTINCT, or a partition holding only static data
        let static_only = part.rows.is_empty() && table.clustering_count > 0;
        if (stmt.distinct || static_only) && ann.is_none() {
            if resuming.is_some() {
                continue;
            }
            if !stmt.distinct {
                let filters_rows = r.filters.iter().any(|f| {
                    matches!(
                        table.columns[f.column].kind,
                        ColumnKind::Regular | ColumnKind::Clustering
                    )
                });
                if r.has_clustering_restriction || filters_rows {
                    continue;
                }
            }
            // a static-compact table's one row holds Cassandra's statics
            let only_row = if table.is_static_compact() {
                part.rows.values().next()
            } else {
                None
            };
            if !row_passes(
                table,
                &r,
                &pk_values,
                None,
                part.static_row.as_deref(),
                only_row,
                now,
            ) {
                continue;
            }
            let mut deferred = None;
            let row = build_row(
                table,
                sel,
                &pk_values,
                None,
                part.static_row.as_deref(),
                only_row,
                &key,
                now,
                &mut deferred,
            )?;
            if grouped {
                let gk: Vec<Bytes> = pk_values.iter().take(group_len).cloned().collect();
                next_group(sel, table, &mut group, gk, &mut out, &mut agg)?;
            }
            emit(sel, &mut out, &mut agg, row, deferred)?;
            remaining -= 1;
            if remaining <= 0 {
                break 'partitions;
            }
            if page_size.map(|ps| out.len() as i64 >= ps).unwrap_or(false) {
                next_state = Some(PagingState {
                    key: key.key.clone(),
                    clustering: None,
                    remaining,
                    returned_in_partition: 0,
                });
                break 'partitions;
            }
            continue;
        }
        let Partition {
            rows, static_row, ..
        } = part;
        let iter: Box<dyn Iterator<Item = (ClusteringKey, Row)>> = if reversed {
            Box::new(rows.into_iter().rev())
        } else {
            Box::new(rows.into_iter())
        };
        let after: Option<ClusteringKey> = resuming
            .as_ref()
            .and_then(|p| p.clustering.clone())
            .map(|c| ClusteringKey::row(c, table.comparator.clone()));
        let mut last_ck: Option<Vec<Bytes>> = None;
        let mut partition_done = true;
        for (ck, row) in iter {
            if let Some(a) = &after {
                let o = ck.cmp(a);
                if (!reversed && o != Ordering::Greater) || (reversed && o != Ordering::Less) {
                    continue;
                }
            }
            if !grouped && in_partition >= ppl {
                break;
            }
            if !row_passes(
                table,
                &r,
                &pk_values,
                Some(&ck.values),
                static_row.as_deref(),
                Some(&row),
                now,
            ) {
                continue;
            }
            let mut deferred = None;
            let built = build_row(
                table,
                sel,
                &pk_values,
                Some(&ck.values),
                static_row.as_deref(),
                Some(&row),
                &key,
                now,
                &mut deferred,
            )?;
            if let Some((vi, query, function)) = &ann {
                // nearest first: every candidate scored, the best kept at the end
                let v = cell_of(
                    table,
                    *vi,
                    &pk_values,
                    Some(&ck.values),
                    static_row.as_deref(),
                    Some(&row),
                    now,
                );
                let score = v.and_then(|v| {
                    crate::functions::similarity(function, &v, query)
                        .ok()
                        .flatten()
                });
                if let Some(b) = score.and_then(|b| <[u8; 4]>::try_from(b.as_ref()).ok()) {
                    ann_rows.push((f32::from_be_bytes(b), built));
                }
                continue;
            }
            if grouped {
                let mut gk: Vec<Bytes> = pk_values
                    .iter()
                    .chain(ck.values.iter())
                    .take(group_len)
                    .cloned()
                    .collect();
                if let (Some(millis), Some(last)) = (floor_millis, gk.last_mut()) {
                    if let Some(f) = floor_timestamp(last, millis) {
                        *last = f;
                    }
                }
                // PER PARTITION LIMIT counts a partition's groups
                if group.as_ref() != Some(&gk) {
                    if in_partition >= ppl {
                        break;
                    }
                    in_partition += 1;
                }
                next_group(sel, table, &mut group, gk, &mut out, &mut agg)?;
            }
            emit(sel, &mut out, &mut agg, built, deferred)?;
            if !grouped {
                in_partition += 1;
            }
            remaining -= 1;
            last_ck = Some(ck.values.clone());
            if remaining <= 0 {
                break 'partitions;
            }
            if let Some(ps) = page_size {
                if out.len() as i64 >= ps {
                    partition_done = false;
                    break;
                }
            }
        }
        if !partition_done {
            next_state = Some(PagingState {
                key: key.key.clone(),
                clustering: last_ck,
                remaining,
                returned_in_partition: in_partition,
            });
            break 'partitions;
        }
    }
    if ann.is_some() {
        ann_rows.sort_by(|a, b| b.0.partial_cmp(&a.0).unwrap_or(Ordering::Equal));
        ann_rows.truncate(limit.unwrap_or(i64::MAX) as usize);
        return Ok(SelectResult {
            rows: ann_rows.into_iter().map(|(_, r)| r).collect(),
            paging_state: None,
            warnings,
        });
    }
    if grouped {
        if group.is_some() {
            flush_group(sel, table, &mut out, &mut agg)?;
        }
        if let Some(l) = limit {
            out.truncate(l as usize);
        }
        return Ok(SelectResult {
            rows: out,
            paging_state: None,
            warnings,
        });
    }
    if sel.aggregate {
        return Ok(SelectResult {
            rows: vec![finish_aggregate(sel, table, &agg)?],
            paging_state: None,
            warnings,
        });
    }
    Ok(SelectResult {
        rows: out,
        paging_state: next_state.map(|s| s.encode()),
        warnings,
    })
}

fn cell_of(
    table: &TableMetadata,
    i: usize,
    pk: &[Bytes],
    ck: Option<&Vec<Bytes>>,
    srow: Option<&Row>,
    row: Option<&Row>,
    now: i32,
) -> Option<Bytes> {
    let col = &table.columns[i];
    match col.kind {
        ColumnKind::PartitionKey => pk.get(i).cloned(),
        ColumnKind::Clustering => ck.and_then(|c| c.get(i - table.partition_key_count).cloned()),
        ColumnKind::Static => srow.and_then(|r| column_value(r, &col.name, &col.typ, now)),
        ColumnKind::Regular => row.and_then(|r| column_value(r, &col.name, &col.typ, now)),
    }
}

fn row_passes(
    table: &TableMetadata,
    r: &Restrictions,
    pk: &[Bytes],
    ck: Option<&Vec<Bytes>>,
    srow: Option<&Row>,
    row: Option<&Row>,
    now: i32,
) -> bool {
    r.filters.iter().all(|f| {
        let v = cell_of(table, f.column, pk, ck, srow, row, now);
        filter_matches(f, &table.columns[f.column].typ, v.as_ref())
    })
}

#[allow(clippy::too_many_arguments)]
fn build_row(
    table: &TableMetadata,
    sel: &Selection,
    pk: &[Bytes],
    ck: Option<&Vec<Bytes>>,
    srow: Option<&Row>,
    row: Option<&Row>,
    key: &DecoratedKey,
    now: i32,
    deferred: &mut Option<Error>,
) -> Result<Vec<Option<Bytes>>> {
    let cell = |i: usize| cell_of(table, i, pk, ck, srow, row, now);
    let meta = |e: &Expr| -> Option<Bytes> {
        let (i, wt) = match e {
            Expr::CellMeta(m) => return cell_meta_value(table, m, srow, row, now),
            Expr::WriteTime(i) | Expr::MaxWriteTime(i) => (*i, true),
            Expr::Ttl(i) => (*i, false),
            Expr::Token => return Some(Bytes::copy_from_slice(&key.token.to_be_bytes())),
            _ => return None,
        };
        let col = &table.columns[i];
        let r = if col.kind == ColumnKind::Static {
            srow
        } else {
            row
        };
        if let Some(sibyl_db::ColumnData::Complex { cells, .. }) =
            r.and_then(|r| r.cells.get(&col.name))
        {
            if !wt {
                // the TTL of each element, null without one
                let ttls: Vec<Option<Bytes>> = cells
                    .values()
                    .filter(|c| c.is_live(now))
                    .map(|c| {
                        c.remaining_ttl(now)
                            .map(|t| Bytes::copy_from_slice(&t.to_be_bytes()))
                    })
                    .collect();
                return (!ttls.is_empty()).then(|| collection_with_nulls(&ttls));
            }
            let stamps: Vec<i64> = cells
                .values()
                .filter(|c| c.is_live(now))
                .map(|c| c.timestamp)
                .collect();
            if stamps.is_empty() {
                return None;
            }
            return Some(match e {
                Expr::MaxWriteTime(_) => {
                    Bytes::copy_from_slice(&stamps.iter().max().copied().unwrap_or(0).to_be_bytes())
                }
                _ => sibyl_types::value::serialize_collection(
                    &stamps
                        .iter()
                        .map(|t| Bytes::copy_from_slice(&t.to_be_bytes()))
                        .collect::<Vec<_>>(),
                ),
            });
        }
        let c = r
            .and_then(|r| simple_cell(r, &col.name))
            .filter(|c| c.is_live(now))?;
        if wt {
            Some(Bytes::copy_from_slice(&c.timestamp.to_be_bytes()))
        } else {
            c.remaining_ttl(now)
                .map(|t| Bytes::copy_from_slice(&t.to_be_bytes()))
        }
    };
    let mut out: Vec<Option<Bytes>> = sel
        .outs
        .iter()
        .map(|o| {
            Ok(match o {
                Out::Column(i) => cell(*i),
                Out::WriteTime(i) => meta(&Expr::WriteTime(*i)),
                Out::Ttl(i) => meta(&Expr::Ttl(*i)),
                Out::Token => meta(&Expr::Token),
                Out::Floor(i, millis) => cell(*i).and_then(|v| floor_timestamp(&v, *millis)),
                Out::Const(v) => v.clone(),
                // computed once per group
                Out::Expr(e) if sel.aggregate && e.has_aggregate() => None,
                // an aggregate query answers the first row's other values:
                // what fails on a later row is never computed by Cassandra
                Out::Expr(e) if sel.aggregate => match eval(e, &cell, &meta) {
                    Ok(v) => v,
                    Err(err) => {
                        deferred.get_or_insert(err);
                        None
                    }
                },
                Out::Expr(e) => eval(e, &cell, &meta)?,
            })
        })
        .collect::<Result<_>>()?;
    if sel.aggregate {
        // then each aggregate's input, then the columns read around them
        for (_, arg, _) in &sel.aggs {
            out.push(eval(arg, &cell, &meta)?);
        }
        out.extend(sel.agg_columns.iter().map(|i| cell(*i)));
    }
    Ok(out)
}

/// The timestamps or TTLs of the cells a [`CellMeta`] reads.
fn cell_meta_value(
    table: &TableMetadata,
    m: &CellMeta,
    srow: Option<&Row>,
    row: Option<&Row>,
    now: i32,
) -> Option<Bytes> {
    let col = &table.columns[m.column];
    let r = if col.kind == ColumnKind::Static {
        srow
    } else {
        row
    }?;
    let data = r.cells.get(&col.name)?;
    let mut cells: Vec<(&Bytes, &sibyl_db::Cell)> = Vec::new();
    let single = !matches!(m.cells, CellPath::Range(..));
    match (data, &m.cells) {
        (sibyl_db::ColumnData::Complex { cells: all, .. }, path) => {
            let live = all.iter().filter(|(_, c)| c.is_live(now));
            match path {
                CellPath::Key(k) => cells.extend(live.filter(|(p, _)| *p == k)),
                CellPath::Field(f) => {
                    let p = (*f as u16).to_be_bytes();
                    cells.extend(live.filter(|(k, _)| k.as_ref() == p));
                }
                CellPath::Range(kt, from, to) => {
                    cells.extend(live.filter(|(k, _)| {
                        from.as_ref()
                            .is_none_or(|f| kt.compare(k, f) != Ordering::Less)
                            && to
                                .as_ref()
                                .is_none_or(|t| kt.compare(k, t) != Ordering::Greater)
                    }));
                    cells.sort_by(|a, b| kt.compare(a.0, b.0));
                }
                CellPath::Whole => cells.extend(live),
            }
        }
        (other, _) => {
            let c = other.single().filter(|c| c.is_live(now))?;
            return match m.kind {
                "ttl" => c
                    .remaining_ttl(now)
                    .map(|t| Bytes::copy_from_slice(&t.to_be_bytes())),
                _ => Some(Bytes::copy_from_slice(&c.timestamp.to_be_bytes())),
            };
        }
    }
    if cells.is_empty() {
        return None;
    }
    let one = |c: &sibyl_db::Cell| -> Option<Bytes> {
        match m.kind {
            "ttl" => c
                .remaining_ttl(now)
                .map(|t| Bytes::copy_from_slice(&t.to_be_bytes())),
            _ => Some(Bytes::copy_from_slice(&c.timestamp.to_be_bytes())),
        }
    };
    if m.kind == "maxwritetime" {
        let t = cells.iter().map(|(_, c)| c.timestamp).max()?;
        return Some(Bytes::copy_from_slice(&t.to_be_bytes()));
    }
    if single {
        return one(cells[0].1);
    }
    let items: Vec<Option<Bytes>> = cells.iter().map(|(_, c)| one(c)).collect();
    Some(collection_with_nulls(&items))
}

/// A serialized list whose elements may be null (length -1).
fn collection_with_nulls(items: &[Option<Bytes>]) -> Bytes {
    let mut out = Vec::new();
    out.extend_from_slice(&(items.len() as i32).to_be_bytes());
    for it in items {
        match it {
            Some(b) => {
                out.extend_from_slice(&(b.len() as i32).to_be_bytes());
                out.extend_from_slice(b);
            }
            None => out.extend_from_slice(&(-1i32).to_be_bytes()),
        }
    }
    Bytes::from(out)
}

/// Closes the current group (its aggregate, or its first row) into `out`.
fn flush_group(
    sel: &Selection,
    table: &TableMetadata,
    out: &mut Vec<Vec<Option<Bytes>>>,
    agg: &mut Agg,
) -> Result<()> {
    if sel.aggregate {
        out.push(finish_aggregate(sel, table, agg)?);
    } else if let Some(r) = agg.first_row.take() {
        out.push(r);
    }
    *agg = Agg::new(sel.aggs.len());
    Ok(())
}

/// Starts a new group when the row's group key differs from the current one.
fn next_group(
    sel: &Selection,
    table: &TableMetadata,
    group: &mut Option<Vec<Bytes>>,
    key: Vec<Bytes>,
    out: &mut Vec<Vec<Option<Bytes>>>,
    agg: &mut Agg,
) -> Result<()> {
    if group.as_ref() != Some(&key) {
        if group.is_some() {
            flush_group(sel, table, out, agg)?;
        }
        *group = Some(key);
    }
    Ok(())
}

fn emit(
    sel: &Selection,
    out: &mut Vec<Vec<Option<Bytes>>>,
    agg: &mut Agg,
    row: Vec<Option<Bytes>>,
    deferred: Option<Error>,
) -> Result<()> {
    if !sel.aggregate {
        if sel.grouped {
            // GROUP BY without aggregates: the first row of each group
            if agg.first_row.is_none() {
                agg.first_row = Some(row);
            }
            return Ok(());
        }
        out.push(row);
        return Ok(());
    }
    if agg.first_row.is_none() {
        // the group's answer is this row's: what failed on it fails now
        if let Some(e) = deferred {
            return Err(e);
        }
        agg.first_row = Some(row.clone());
    }
    let base = sel.outs.len();
    for (k, ((kind, _, t), st)) in sel.aggs.iter().zip(agg.states.iter_mut()).enumerate() {
        st.add(*kind, t, row.get(base + k).and_then(|v| v.as_ref()));
    }
    Ok(())
}

impl Agg {
    fn new(n: usize) -> Agg {
        Agg {
            states: vec![AggState::default(); n],
            first_row: None,
        }
    }
}

/// The row of a group: its aggregates, and the first row's other values.
fn finish_aggregate(
    sel: &Selection,
    _table: &TableMetadata,
    agg: &Agg,
) -> Result<Vec<Option<Bytes>>> {
    let results: Vec<Option<Bytes>> = sel
        .aggs
        .iter()
        .zip(&agg.states)
        .map(|((kind, _, t), st)| st.result(*kind, t))
        .collect();
    let first = agg.first_row.as_ref();
    let base = sel.outs.len() + sel.aggs.len();
    let cell = |i: usize| -> Option<Bytes> {
        let p = sel.agg_columns.iter().position(|c| *c == i)?;
        first.and_then(|r| r.get(base + p).cloned().flatten())
    };
    let meta = |e: &Expr| -> Option<Bytes> {
        match e {
            Expr::Aggregate(id, ..) => results.get(*id).cloned().flatten(),
            _ => None,
        }
    };
    sel.outs
        .iter()
        .enumerate()
        .map(|(j, o)| match o {
            Out::Expr(e) if e.has_aggregate() => eval(e, &cell, &meta),
            // plain columns in an aggregate query take the first row's value;
            // with no row, every selector is computed over nulls (toJson
            // gives 'null', a masking function its mask), as Cassandra does
            _ => Ok(match (first, o) {
                (Some(r), _) => r[j].clone(),
                (None, Out::Const(v)) => v.clone(),
                (None, Out::Expr(e)) => eval(e, &|_| None, &|_| None).ok().flatten(),
                (None, _) => None,
            }),
        })
        .collect()
}
