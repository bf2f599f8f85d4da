//! The statement tree produced by the parser.

use sibyl_types::Constant;

/// `ks.name` or `name`; identifiers are already case-folded (unquoted ones
/// lower-cased, quoted ones kept as written).
#[derive(Clone, Debug, PartialEq)]
pub struct QualifiedName {
    pub keyspace: Option<String>,
    pub name: String,
}

/// A bind marker: `?` or `:name`. `index` counts markers in the statement from 0.
#[derive(Clone, Debug, PartialEq)]
pub struct BindMarker {
    pub index: usize,
    pub name: Option<String>,
}

/// A value expression.
#[derive(Clone, Debug, PartialEq)]
pub enum Term {
    Constant(Constant),
    Null,
    Bind(BindMarker),
    List(Vec<Term>),
    Set(Vec<Term>),
    Map(Vec<(Term, Term)>),
    /// `(a, b, c)` — a tuple literal (also the right side of multi-column relations).
    Tuple(Vec<Term>),
    /// `{field: value, ...}` when the keys are identifiers (UDT literal).
    UserType(Vec<(String, Term)>),
    /// `fn(args)`, e.g. `now()`, `uuid()`, `toTimestamp(now())`.
    Function {
        name: String,
        args: Vec<Term>,
    },
    /// `(type) term`
    Cast {
        typ: String,
        term: Box<Term>,
    },
    /// `-term` on a bind marker or function (negative literals are folded).
    Negate(Box<Term>),
    /// `a + b`, `a - b`, `a * b`, `a / b`, `a % b` between terms (Cassandra's
    /// operation functions `system._add`, ...).
    Arith {
        op: char,
        lhs: Box<Term>,
        rhs: Box<Term>,
    },
}

/// One item of a SELECT clause.
#[derive(Clone, Debug, PartialEq)]
pub enum Selector {
    Column(String),
    WriteTime(String),
    Ttl(String),
    /// `count(*)` or `count(1)`.
    CountRows,
    Function {
        name: String,
        args: Vec<Selector>,
    },
    Cast {
        selector: Box<Selector>,
        typ: String,
    },
    Term(Term),
    /// `a.b` field selection on a UDT column.
    Field {
        selector: Box<Selector>,
        field: String,
    },
    /// `a + b`, `a - b`, `a * b`, `a / b`, `a % b`.
    Arith {
        op: char,
        lhs: Box<Selector>,
        rhs: Box<Selector>,
    },
    /// `m['key']`, `s[element]`.
    Element {
        selector: Box<Selector>,
        key: Term,
    },
    /// `m['a'..'z']`, `s[1..]`.
    Slice {
        selector: Box<Selector>,
        from: Option<Term>,
        to: Option<Term>,
    },
    /// `-x`: Cassandra's `system._negate`.
    Negate(Box<Selector>),
    /// `(x)` or the tuple `(x, y)`: the parser cannot tell a single element
    /// between parentheses from a tuple of one element.
    Parens(Vec<Selector>),
    /// `(type) x`: a type hint.
    Hint {
        typ: String,
        selector: Box<Selector>,
    },
    /// `writetime(m['a'])`, `ttl(u.f)`, `maxwritetime(m['a'..'b'])`: the write
    /// time or TTL of an element, slice or field of a column.
    MetaOf {
        kind: String,
        column: String,
        selector: Box<Selector>,
    },
}

/// A selector with its optional `AS alias`.
#[derive(Clone, Debug, PartialEq)]
pub struct SelectItem {
    pub selector: Selector,
    pub alias: Option<String>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Operator {
    Eq,
    Lt,
    Le,
    Gt,
    Ge,
    Ne,
    In,
    Contains,
    ContainsKey,
    Like,
    IsNotNull,
}

impl Operator {
    pub fn as_str(&self) -> &'static str {
        match self {
            Operator::Eq => "=",
            Operator::Lt => "<",
            Operator::Le => "<=",
            Operator::Gt => ">",
            Operator::Ge => ">=",
            Operator::Ne => "!=",
            Operator::In => "IN",
            Operator::Contains => "CONTAINS",
            Operator::ContainsKey => "CONTAINS KEY",
            Operator::Like => "LIKE",
            Operator::IsNotNull => "IS NOT",
        }
    }
}

/// Left side of a WHERE relation.
#[derive(Clone, Debug, PartialEq)]
pub enum RelationLhs {
    Column(String),
    /// `(a, b)` multi-column relation.
    Columns(Vec<String>),
    /// `token(a, b)`.
    Token(Vec<String>),
    /// `m[key]`: one element of a map.
    Element(String, Term),
}

/// Right side of a WHERE relation.
#[derive(Clone, Debug, PartialEq)]
pub enum RelationRhs {
    Term(Term),
    /// `IN (t1, t2)`.
    InList(Vec<Term>),
    /// `IN ?` — one marker holding the whole list.
    InMarker(BindMarker),
    /// `IS NOT NULL`
    NotNull,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Relation {
    pub lhs: RelationLhs,
    pub op: Operator,
    pub rhs: RelationRhs,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Ordering {
    pub column: String,
    pub descending: bool,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Select {
    pub table: QualifiedName,
    pub json: bool,
    pub distinct: bool,
    /// Empty means `*`.
    pub selectors: Vec<SelectItem>,
    pub where_clause: Vec<Relation>,
    pub group_by: Vec<String>,
    /// `GROUP BY ..., floor(col, duration)`: the last grouping column in time buckets.
    pub group_by_floor: Option<(String, String)>,
    pub order_by: Vec<Ordering>,
    /// `ORDER BY col ANN OF vector`: nearest neighbours first.
    pub ann: Option<(String, Term)>,
    pub per_partition_limit: Option<Term>,
    pub limit: Option<Term>,
    pub allow_filtering: bool,
}

/// `USING TTL x AND TIMESTAMP y`.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct UsingClause {
    pub ttl: Option<Term>,
    pub timestamp: Option<Term>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Insert {
    pub table: QualifiedName,
    pub columns: Vec<String>,
    pub values: Vec<Term>,
    /// `INSERT JSON '...'`: the JSON term replaces columns/values.
    pub json: Option<Term>,
    pub json_default_unset: bool,
    pub if_not_exists: bool,
    pub using: UsingClause,
}

/// Left side of an assignment or a deletion target.
#[derive(Clone, Debug, PartialEq)]
pub enum ColumnTarget {
    Column(String),
    /// `col[term]`: list index or map key.
    Element(String, Term),
    /// `col.field`: UDT field.
    Field(String, String),
}

impl ColumnTarget {
    pub fn column(&self) -> &str {
        match self {
            ColumnTarget::Column(c) | ColumnTarget::Element(c, _) | ColumnTarget::Field(c, _) => c,
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
pub enum AssignOp {
    /// `c = t`
    Set(Term),
    /// `c = c + t`
    Append(Term),
    /// `c = t + c`
    Prepend(Term),
    /// `c = c - t`
    Remove(Term),
}

#[derive(Clone, Debug, PartialEq)]
pub struct Assignment {
    pub target: ColumnTarget,
    pub op: AssignOp,
}

/// `IF` conditions of a lightweight transaction.
#[derive(Clone, Debug, PartialEq)]
pub enum Conditions {
    None,
    Exists,
    NotExists,
    Columns(Vec<Condition>),
}

#[derive(Clone, Debug, PartialEq)]
pub struct Condition {
    pub target: ColumnTarget,
    pub op: Operator,
    pub rhs: RelationRhs,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Update {
    pub table: QualifiedName,
    pub using: UsingClause,
    pub assignments: Vec<Assignment>,
    pub where_clause: Vec<Relation>,
    pub conditions: Conditions,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Delete {
    pub table: QualifiedName,
    pub columns: Vec<ColumnTarget>,
    pub using: UsingClause,
    pub where_clause: Vec<Relation>,
    pub conditions: Conditions,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BatchType {
    Logged,
    Unlogged,
    Counter,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Batch {
    pub batch_type: BatchType,
    pub using: UsingClause,
    pub statements: Vec<Statement>,
}

/// A property value in `WITH a = b AND ...`.
#[derive(Clone, Debug, PartialEq)]
pub enum PropertyValue {
    Constant(Constant),
    Identifier(String),
    Map(Vec<(String, String)>),
}

impl PropertyValue {
    /// The value as text, as Cassandra reads property strings.
    pub fn as_text(&self) -> Option<String> {
        match self {
            PropertyValue::Constant(c) => Some(constant_text(c)),
            PropertyValue::Identifier(s) => Some(s.clone()),
            PropertyValue::Map(_) => None,
        }
    }
}

/// A term as Cassandra prints it in messages: strings quoted, `NULL`, `?`,
/// collections and tuples with `, ` between elements.
pub fn term_text(t: &Term) -> String {
    let join = |items: &[Term]| items.iter().map(term_text).collect::<Vec<_>>().join(", ");
    match t {
        Term::Constant(Constant::String(s)) => format!("'{}'", s.replace('\'', "''")),
        Term::Constant(c) => constant_text(c),
        Term::Null => "NULL".into(),
        Term::Bind(m) => m
            .name
            .as_ref()
            .map(|n| format!(":{n}"))
            .unwrap_or_else(|| "?".into()),
        Term::List(items) => format!("[{}]", join(items)),
        Term::Set(items) => format!("{{{}}}", join(items)),
        Term::Tuple(items) => format!("({})", join(items)),
        Term::Map(pairs) => format!(
            "{{{}}}",
            pairs
                .iter()
                .map(|(k, v)| format!("{}: {}", term_text(k), term_text(v)))
                .collect::<Vec<_>>()
                .join(", ")
        ),
        Term::UserType(fields) => format!(
            "{{{}}}",
            fields
                .iter()
                .map(|(k, v)| format!("{k}: {}", term_text(v)))
                .collect::<Vec<_>>()
                .join(", ")
        ),
        Term::Function { name, args } => format!("{name}({})", join(args)),
        Term::Cast { typ, term } => format!("({typ}){}", term_text(term)),
        Term::Negate(x) => format!("-{}", term_text(x)),
        Term::Arith { op, lhs, rhs } => format!("{} {op} {}", term_text(lhs), term_text(rhs)),
    }
}

/// A WHERE relation as Cassandra prints it: `v != 10`, `(a, b) = (1, 2)`.
pub fn relation_text(r: &Relation) -> String {
    let lhs = match &r.lhs {
        RelationLhs::Column(c) => c.clone(),
        RelationLhs::Columns(cs) => format!("({})", cs.join(", ")),
        RelationLhs::Token(cs) => format!("token({})", cs.join(", ")),
        RelationLhs::Element(c, k) => format!("{c}[{}]", term_text(k)),
    };
    let rhs = match &r.rhs {
        RelationRhs::Term(t) => term_text(t),
        RelationRhs::InList(items) => format!(
            "({})",
            items.iter().map(term_text).collect::<Vec<_>>().join(", ")
        ),
        RelationRhs::InMarker(_) => "?".into(),
        RelationRhs::NotNull => return format!("{lhs} IS NOT NULL"),
    };
    format!("{lhs} {} {rhs}", r.op.as_str())
}

/// The source text of a constant.
pub fn constant_text(c: &Constant) -> String {
    match c {
        Constant::String(s)
        | Constant::Integer(s)
        | Constant::Float(s)
        | Constant::Uuid(s)
        | Constant::Duration(s) => s.clone(),
        Constant::Boolean(b) => b.to_string(),
        Constant::Hex(h) => {
            let mut s = String::from("0x");
            for b in h {
                s.push_str(&format!("{b:02x}"));
            }
            s
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct Property {
    pub name: String,
    pub value: PropertyValue,
}

#[derive(Clone, Debug, PartialEq)]
pub struct CreateKeyspace {
    pub name: String,
    pub if_not_exists: bool,
    pub properties: Vec<Property>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct ColumnDef {
    pub name: String,
    /// The type as written, normalised (`map<text, int>`); resolved against UDTs by the schema.
    pub typ: String,
    pub is_static: bool,
}

#[derive(Clone, Debug, PartialEq)]
pub struct CreateTable {
    pub name: QualifiedName,
    pub if_not_exists: bool,
    pub columns: Vec<ColumnDef>,
    pub partition_key: Vec<String>,
    pub clustering_key: Vec<String>,
    pub clustering_order: Vec<Ordering>,
    pub compact_storage: bool,
    pub properties: Vec<Property>,
    /// PRIMARY KEY given more than once: Cassandra refuses the statement
    /// as it reads it (an invalid request, not a syntax error).
    pub multiple_primary_keys: bool,
}

#[derive(Clone, Debug, PartialEq)]
pub enum AlterTableOp {
    Add(Vec<ColumnDef>),
    /// `DROP c` / `DROP (c, d)`, with `USING TIMESTAMP t` when given.
    Drop(Vec<String>, Option<i64>),
    Rename(Vec<(String, String)>),
    Alter {
        column: String,
        typ: String,
    },
    /// `ALTER [IF EXISTS] c MASKED WITH f(args)` (`masked`) or
    /// `ALTER [IF EXISTS] c DROP MASKED`.
    Mask {
        column: String,
        masked: bool,
    },
    With(Vec<Property>),
    /// `DROP COMPACT STORAGE`.
    DropCompactStorage,
}

#[derive(Clone, Debug, PartialEq)]
pub struct AlterTable {
    pub name: QualifiedName,
    pub if_exists: bool,
    pub op: AlterTableOp,
    /// `ADD IF NOT EXISTS`, `DROP IF EXISTS`, `RENAME IF EXISTS`.
    pub if_column_exists: bool,
}

#[derive(Clone, Debug, PartialEq)]
pub struct CreateType {
    pub name: QualifiedName,
    pub if_not_exists: bool,
    pub fields: Vec<(String, String)>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct CreateIndex {
    pub name: Option<String>,
    pub table: QualifiedName,
    pub if_not_exists: bool,
    /// `(col)`, `(keys(col))`, `(values(col))`, `(entries(col))`, `(full(col))`.
    pub target: String,
    pub target_kind: String,
    pub custom_class: Option<String>,
    /// `WITH OPTIONS = {...}`.
    pub options: Vec<(String, String)>,
    /// Further target columns (`(a, b)`), and whether there was none
    /// (`()`): parsed so that they are refused as Cassandra refuses them.
    pub more_targets: Vec<String>,
    pub no_target: bool,
}

/// `DESCRIBE ...`
#[derive(Clone, Debug, PartialEq)]
pub enum Describe {
    Cluster,
    Keyspaces,
    Keyspace {
        name: Option<String>,
        only: bool,
    },
    Tables,
    Table(QualifiedName),
    Types,
    Type(QualifiedName),
    Functions,
    Aggregates,
    Schema {
        full: bool,
    },
    /// `DESCRIBE name` — a keyspace, table, type… found by name.
    Generic(QualifiedName),
    Index(QualifiedName),
    /// `DESCRIBE FUNCTION f`, `DESCRIBE AGGREGATE a`, `DESCRIBE MATERIALIZED
    /// VIEW v`: the kind ("function", "aggregate", "view") and the name.
    Other(&'static str, QualifiedName),
}

#[derive(Clone, Debug, PartialEq)]
pub struct DescribeStatement {
    pub what: Describe,
    pub with_internals: bool,
}

#[derive(Clone, Debug, PartialEq)]
pub enum Statement {
    Select(Box<Select>),
    Insert(Box<Insert>),
    Update(Box<Update>),
    Delete(Box<Delete>),
    Batch(Box<Batch>),
    Use(String),
    CreateKeyspace(CreateKeyspace),
    AlterKeyspace {
        name: String,
        if_exists: bool,
        properties: Vec<Property>,
    },
    DropKeyspace {
        name: String,
        if_exists: bool,
    },
    CreateTable(Box<CreateTable>),
    AlterTable(Box<AlterTable>),
    DropTable {
        name: QualifiedName,
        if_exists: bool,
    },
    Truncate(QualifiedName),
    CreateType(CreateType),
    DropType {
        name: QualifiedName,
        if_exists: bool,
    },
    /// `ALTER TYPE t ADD f type` / `ALTER TYPE t RENAME a TO b [AND c TO d]`.
    AlterType {
        name: QualifiedName,
        if_exists: bool,
        add: Option<(String, String)>,
        renames: Vec<(String, String)>,
        /// `ADD IF NOT EXISTS` / `RENAME IF EXISTS`.
        if_field_exists: bool,
        /// `ALTER f TYPE t` (no longer supported).
        alter_field: Option<(String, String)>,
    },
    CreateIndex(CreateIndex),
    DropIndex {
        name: QualifiedName,
        if_exists: bool,
    },
    /// `DROP FUNCTION`, `DROP AGGREGATE` or `DROP MATERIALIZED VIEW`:
    /// Sibyl has none of them, so each names something that does not exist.
    DropAbsent {
        /// "Function", "Aggregate" or "Materialized view", as Cassandra's
        /// messages name it.
        kind: &'static str,
        name: QualifiedName,
        if_exists: bool,
        /// The argument types of a function or aggregate, when given.
        args: Option<Vec<String>>,
    },
    Describe(DescribeStatement),
}

impl Statement {
    /// Every table it names carries its keyspace (Cassandra's
    /// `isFullyQualified`): such a statement is prepared under an id that
    /// does not depend on the session's keyspace.
    pub fn is_fully_qualified(&self) -> bool {
        match self {
            Statement::Select(s) => s.table.keyspace.is_some(),
            Statement::Insert(s) => s.table.keyspace.is_some(),
            Statement::Update(s) => s.table.keyspace.is_some(),
            Statement::Delete(s) => s.table.keyspace.is_some(),
            Statement::Batch(b) => b.statements.iter().all(Statement::is_fully_qualified),
            _ => false,
        }
    }
}

/// A parsed statement with the bind markers it holds, in order.
#[derive(Clone, Debug, PartialEq)]
pub struct ParsedStatement {
    pub statement: Statement,
    pub bind_markers: Vec<BindMarker>,
    /// What the executor derived from the statement once, for the next
    /// executions (a prepared statement runs many times).
    pub memo: Memo,
}

/// A value the executor derives from a statement once and keeps with it
/// (Cassandra prepares a SELECT's selection once, not on every execution).
/// Set once, read without a lock; opaque to this crate, and shared by the
/// statement's clones. It takes no part in the statement's equality. Only a
/// statement that will run again keeps one ([`Memo::kept`], for prepared
/// statements): the default keeps nothing.
#[derive(Clone, Default)]
pub struct Memo(Option<std::sync::Arc<std::sync::OnceLock<Box<dyn std::any::Any + Send + Sync>>>>);

impl Memo {
    /// A memo that keeps what is set in it.
    pub fn kept() -> Self {
        Memo(Some(Default::default()))
    }

    /// The value set, if it is a `T`.
    pub fn get<T: 'static>(&self) -> Option<&T> {
        self.0.as_ref()?.get().and_then(|v| v.downcast_ref())
    }

    /// Sets the value `make` gives, unless one is set already or the memo
    /// keeps nothing (then `make` is not called).
    pub fn set_with<T: std::any::Any + Send + Sync>(&self, make: impl FnOnce() -> T) {
        if let Some(cell) = &self.0 {
            if cell.get().is_none() {
                let _ = cell.set(Box::new(make()));
            }
        }
    }
}

impl PartialEq for Memo {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

impl std::fmt::Debug for Memo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Memo")
    }
}

#[cfg(test)]
mod memo_tests {
    use super::Memo;

    #[test]
    fn a_kept_memo_is_set_once_and_shared_by_clones() {
        let m = Memo::kept();
        assert_eq!(m.get::<u32>(), None);
        m.set_with(|| 7u32);
        m.set_with(|| -> u32 { panic!("set twice") });
        let c = m.clone();
        assert_eq!(c.get::<u32>(), Some(&7));
        // another type than the one set reads as nothing
        assert_eq!(c.get::<u64>(), None);
    }

    #[test]
    fn the_default_memo_keeps_nothing() {
        let m = Memo::default();
        m.set_with(|| -> u32 { panic!("a memo that keeps nothing makes nothing") });
        assert_eq!(m.get::<u32>(), None);
    }
}
