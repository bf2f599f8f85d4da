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

use crate::error::{Result, SchemaError as Error};
use crate::schema::{ColumnKind, ColumnMetadata, TableMetadata};
use sibyl_cql::Operator;
use sibyl_db::ClusteringComparator;
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

/// The options of an SAI index's text analyzer.
const ANALYSIS_OPTIONS: [&str; 5] = [
    "case_sensitive",
    "normalize",
    "ascii",
    "index_analyzer",
    "query_analyzer",
];

/// What SAI indexes and analyzes: analysis options only on text values of
/// regular columns, and no blob values (Cassandra's `IndexTermType` and
/// `AbstractAnalyzer` checks).
fn check_sai_type(
    col: &ColumnMetadata,
    target: TargetKind,
    options: &[(String, String)],
) -> Result<()> {
    let analysis: Vec<String> = options
        .iter()
        .filter(|(k, _)| ANALYSIS_OPTIONS.contains(&k.as_str()))
        .map(|(k, v)| format!("'{k}': '{v}'"))
        .collect();
    // the type of the values indexed: an element, a key or the whole value
    let indexed = match (col.typ.unfrozen(), target) {
        (CqlType::Map(k, _), TargetKind::Keys) => Some(k.as_ref().clone()),
        (CqlType::Map(k, v), TargetKind::Entries) => {
            let class = |t: &CqlType| {
                format!(
                    "org.apache.cassandra.db.marshal.{}",
                    sibyl_types::marshal_class(t).unwrap_or("BytesType")
                )
            };
            if !analysis.is_empty() {
                return Err(Error::Invalid(format!(
                    "CQL type 'org.apache.cassandra.db.marshal.CompositeType({},{})' cannot be analyzed.",
                    class(k),
                    class(v)
                )));
            }
            None
        }
        (CqlType::Map(_, v), _) if target != TargetKind::Full => Some(v.as_ref().clone()),
        (CqlType::List(e) | CqlType::Set(e), _) if target != TargetKind::Full => {
            Some(e.as_ref().clone())
        }
        _ => Some(col.typ.clone()),
    };
    if !analysis.is_empty() {
        if col.kind.is_primary_key() {
            return Err(Error::Invalid(format!(
                "Analysis options are not supported on primary key columns, but found {{{}}}",
                analysis.join(", ")
            )));
        }
        if let Some(t) = indexed
            .as_ref()
            .filter(|t| !matches!(t, CqlType::Text | CqlType::Ascii))
        {
            return Err(Error::Invalid(format!("CQL type {t} cannot be analyzed.")));
        }
    }
    if let Some(CqlType::Blob) = indexed {
        return Err(Error::Invalid("Unsupported type: blob".into()));
    }
    Ok(())
}

/// The options a storage-attached index understands.
const SAI_OPTIONS: &[&str] = &[
    "case_sensitive",
    "normalize",
    "ascii",
    "similarity_function",
    "optimize_for",
    "maximum_node_connections",
    "construction_beam_width",
    "index_analyzer",
    "query_analyzer",
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
        let col = sibyl_types::ident::maybe_quote(&self.column);
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
            "Undefined column name {shown} in table {}",
            table.display_name()
        )));
    };
    if table.is_counter {
        return Err(Error::Invalid(
            "Secondary indexes on counter tables aren't supported".into(),
        ));
    }
    if table.compact.is_some() {
        if col.kind.is_primary_key() {
            return Err(Error::Invalid(
                "Secondary indexes are not supported on PRIMARY KEY columns in COMPACT STORAGE tables"
                    .into(),
            ));
        }
        if table.is_dense() {
            return Err(Error::Invalid(
                "Secondary indexes are not supported on compact value column of COMPACT STORAGE tables"
                    .into(),
            ));
        }
    }
    if col.typ.references_duration() {
        let what = match col.typ.unfrozen() {
            CqlType::List(_) | CqlType::Set(_) | CqlType::Map(..) => {
                "collections containing durations"
            }
            CqlType::Tuple(_) => "tuples containing durations",
            CqlType::Udt(_) => "UDTs containing durations",
            _ => "duration columns",
        };
        return Err(Error::Invalid(format!(
            "Secondary indexes are not supported on {what}"
        )));
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
        if explicit && target == TargetKind::Full {
            return Err(Error::Invalid(
                "full() indexes can only be created on frozen collections".into(),
            ));
        }
        if explicit {
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
    if matches!(col.typ, CqlType::Udt(_)) {
        return Err(Error::Invalid(format!(
            "Cannot create index on non-frozen UDT column {column}"
        )));
    }
    if custom_class.is_some() {
        let unknown: Vec<&str> = options
            .iter()
            .map(|(k, _)| k.as_str())
            .filter(|k| !SAI_OPTIONS.contains(k))
            .collect();
        if !unknown.is_empty() {
            return Err(Error::Config(format!(
                "Properties specified [{}] are not understood by StorageAttachedIndex",
                unknown.join(", ")
            )));
        }
    }
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
    // a duplicate in all but its name (the class as written, the options)
    let duplicate = table
        .indexes
        .iter()
        .find(|o| {
            o.column == ix.column
                && o.target == ix.target
                && o.custom_class == ix.custom_class
                && o.options == ix.options
        })
        .map(|o| o.name.clone());
    if duplicate.is_none()
        && ix.is_sai()
        && table
            .indexes
            .iter()
            .any(|o| o.is_sai() && o.column == ix.column && o.target == ix.target)
    {
        return Err(Error::Invalid(format!(
            "Cannot create more than one storage-attached index on the same column: {column}"
        )));
    }
    if custom_class.is_some() {
        check_sai_type(col, target, options)?;
    }
    Ok((ix, duplicate))
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
