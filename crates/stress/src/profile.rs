//! cassandra-stress user profiles (`user profile=FILE`): YAML with
//! `keyspace` / `keyspace_definition`, `table` / `table_definition`,
//! `extra_definitions`, `columnspec`, `insert` and named `queries`.

use crate::dist::{Distribution, RatioDistribution};
use serde::Deserialize;
use std::collections::BTreeMap;

/// How a query's bind markers are filled: all from one generated row
/// (`samerow`), or each from a random row of the partition (`multirow`,
/// the default).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fields {
    SameRow,
    MultiRow,
}

#[derive(Debug, Clone)]
pub struct Query {
    pub name: String,
    pub cql: String,
    pub fields: Fields,
}

/// A `columnspec` entry; unset distributions take cassandra-stress's defaults.
#[derive(Debug, Clone)]
pub struct ColumnSpec {
    pub size: Distribution,
    pub population: Distribution,
    pub cluster: Distribution,
}

impl Default for ColumnSpec {
    fn default() -> Self {
        ColumnSpec {
            size: Distribution::parse("uniform(4..8)").unwrap_or_else(|_| Distribution::fixed(6)),
            population: Distribution::parse("uniform(1..100b)")
                .unwrap_or_else(|_| Distribution::fixed(1)),
            cluster: Distribution::fixed(1),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BatchType {
    Logged,
    Unlogged,
    Counter,
}

impl BatchType {
    pub fn code(self) -> u8 {
        match self {
            BatchType::Logged => 0,
            BatchType::Unlogged => 1,
            BatchType::Counter => 2,
        }
    }
}

/// The `insert` section.
#[derive(Debug, Clone)]
pub struct Insert {
    /// How many partitions one insert operation writes to.
    pub partitions: Distribution,
    /// Which share of a partition's rows (of this visit) one insert writes.
    pub select: RatioDistribution,
    /// Which share of the non-key columns a written row sets.
    pub row_population: RatioDistribution,
    /// Over how many insert operations a partition's rows are spread.
    pub visits: Distribution,
    /// `None`: LOGGED, or COUNTER for counter tables.
    pub batch_type: Option<BatchType>,
}

#[derive(Debug, Clone)]
pub struct Profile {
    pub keyspace: String,
    pub keyspace_definition: Option<String>,
    pub table: String,
    pub table_definition: Option<String>,
    pub extra_definitions: Vec<String>,
    /// By column name.
    pub columns: BTreeMap<String, ColumnSpec>,
    pub insert: Insert,
    /// Lower-cased names.
    pub queries: BTreeMap<String, Query>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Raw {
    keyspace: Option<String>,
    keyspace_definition: Option<String>,
    table: Option<String>,
    table_definition: Option<String>,
    extra_definitions: Option<Vec<String>>,
    columnspec: Option<Vec<BTreeMap<String, serde_yaml::Value>>>,
    insert: Option<BTreeMap<String, serde_yaml::Value>>,
    queries: Option<BTreeMap<String, RawQuery>>,
    token_range_queries: Option<serde_yaml::Value>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawQuery {
    cql: Option<String>,
    fields: Option<String>,
}

fn scalar(v: &serde_yaml::Value) -> Option<String> {
    match v {
        serde_yaml::Value::String(s) => Some(s.clone()),
        serde_yaml::Value::Number(n) => Some(n.to_string()),
        serde_yaml::Value::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

/// A CQL identifier as written: unquoted ones are case-insensitive.
fn ident(s: &str) -> String {
    match s.strip_prefix('"').and_then(|x| x.strip_suffix('"')) {
        Some(q) => q.replace("\"\"", "\""),
        None => s.to_lowercase(),
    }
}

/// The name a `CREATE KEYSPACE` / `CREATE TABLE` statement creates (the last
/// part of `ks.name`), or `None` when the statement is not of that kind.
pub fn created_name(cql: &str, what: &str) -> Option<String> {
    let mut rest = cql.trim_start();
    for word in ["CREATE", what] {
        let (w, r) = rest.split_at(rest.find(char::is_whitespace)?);
        if !w.eq_ignore_ascii_case(word) {
            return None;
        }
        rest = r.trim_start();
    }
    let lower = rest.to_ascii_lowercase();
    if lower.starts_with("if ") {
        let after_if = rest[2..].trim_start();
        let lower = after_if.to_ascii_lowercase();
        let after_not = lower.strip_prefix("not")?.trim_start();
        let skipped = after_not.strip_prefix("exists")?;
        rest = after_if[after_if.len() - skipped.len()..].trim_start();
    }
    // an identifier, possibly quoted, possibly keyspace-qualified
    let mut parts = Vec::new();
    let mut s = rest;
    loop {
        let (part, r) = if let Some(q) = s.strip_prefix('"') {
            let mut end = None;
            let b = q.as_bytes();
            let mut i = 0;
            while i < b.len() {
                if b[i] == b'"' {
                    if b.get(i + 1) == Some(&b'"') {
                        i += 2;
                        continue;
                    }
                    end = Some(i);
                    break;
                }
                i += 1;
            }
            let e = end?;
            (format!("\"{}\"", &q[..e]), &q[e + 1..])
        } else {
            let e = s
                .find(|c: char| !(c.is_alphanumeric() || c == '_'))
                .unwrap_or(s.len());
            if e == 0 {
                return None;
            }
            (s[..e].to_string(), &s[e..])
        };
        parts.push(ident(&part));
        match r.trim_start().strip_prefix('.') {
            Some(next) => s = next.trim_start(),
            None => break,
        }
    }
    parts.pop()
}

fn dist(v: &serde_yaml::Value, what: &str) -> Result<Distribution, String> {
    let s =
        scalar(v).ok_or_else(|| format!("{what} must be a distribution such as UNIFORM(1..10)"))?;
    Distribution::parse(&s).map_err(|e| format!("{what}: {e}"))
}

impl Profile {
    /// Reads and checks a profile; errors name the file and the problem.
    pub fn load(path: &str) -> Result<Profile, String> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("Cannot read profile {path}: {e}"))?;
        Profile::parse(&text).map_err(|e| format!("Invalid profile {path}: {e}"))
    }

    pub fn parse(text: &str) -> Result<Profile, String> {
        let raw: Raw = serde_yaml::from_str(text).map_err(|e| e.to_string())?;
        let keyspace = raw
            .keyspace
            .filter(|k| !k.trim().is_empty())
            .ok_or("keyspace name is required in yaml file (keyspace:)")?;
        let table = raw
            .table
            .filter(|t| !t.trim().is_empty())
            .ok_or("table name is required in yaml file (table:)")?;
        let queries_raw = raw
            .queries
            .ok_or("queries map is required in yaml file (queries:, may be empty: {})")?;
        if raw.token_range_queries.is_some() {
            return Err("token_range_queries are not supported by sibyl stress".into());
        }
        let keyspace_definition = raw.keyspace_definition.filter(|d| !d.trim().is_empty());
        if let Some(def) = &keyspace_definition {
            let name = created_name(def, "KEYSPACE").ok_or_else(|| format!("There was a problem parsing the keyspace cql: expected CREATE KEYSPACE, got '{}'", def.trim()))?;
            if !name.eq_ignore_ascii_case(&keyspace) {
                return Err(format!("Name in keyspace_definition doesn't match keyspace property: '{name}' != '{keyspace}'"));
            }
        }
        let table_definition = raw.table_definition.filter(|d| !d.trim().is_empty());
        if let Some(def) = &table_definition {
            let name = created_name(def, "TABLE").ok_or_else(|| {
                format!(
                    "There was a problem parsing the table cql: expected CREATE TABLE, got '{}'",
                    def.trim()
                )
            })?;
            if !name.eq_ignore_ascii_case(&table) {
                return Err(format!(
                    "Name in table_definition doesn't match table property: '{name}' != '{table}'"
                ));
            }
        }
        let mut columns = BTreeMap::new();
        for spec in raw.columnspec.unwrap_or_default() {
            let mut spec: BTreeMap<String, serde_yaml::Value> = spec
                .into_iter()
                .map(|(k, v)| (k.to_lowercase(), v))
                .collect();
            let name = spec
                .remove("name")
                .and_then(|v| scalar(&v))
                .ok_or("Missing name argument in column spec")?;
            let mut c = ColumnSpec::default();
            if let Some(v) = spec.remove("size") {
                c.size = dist(&v, &format!("columnspec {name} size"))?;
            }
            if let Some(v) = spec.remove("population") {
                c.population = dist(&v, &format!("columnspec {name} population"))?;
            }
            if let Some(v) = spec.remove("cluster") {
                c.cluster = dist(&v, &format!("columnspec {name} cluster"))?;
            }
            if !spec.is_empty() {
                let keys: Vec<&str> = spec.keys().map(String::as_str).collect();
                return Err(format!("Unrecognised option(s) in column spec {name}: {} (expected size, population, cluster)", keys.join(", ")));
            }
            if c.cluster.min() < 1 {
                return Err(format!(
                    "columnspec {name} cluster: {} can yield fewer than one row",
                    c.cluster.spec()
                ));
            }
            if c.size.min() < 0 {
                return Err(format!(
                    "columnspec {name} size: {} can yield a negative size",
                    c.size.spec()
                ));
            }
            columns.insert(ident(&name), c);
        }
        let mut ins: BTreeMap<String, serde_yaml::Value> = raw
            .insert
            .unwrap_or_default()
            .into_iter()
            .map(|(k, v)| (k.to_lowercase(), v))
            .collect();
        let ratio =
            |v: Option<serde_yaml::Value>, what: &str| -> Result<RatioDistribution, String> {
                match v {
                    None => Ok(RatioDistribution::one()),
                    Some(v) => {
                        let s = scalar(&v).ok_or_else(|| {
                            format!("insert {what} must be a ratio distribution such as fixed(1)/1")
                        })?;
                        RatioDistribution::parse(&s).map_err(|e| format!("insert {what}: {e}"))
                    }
                }
            };
        let partitions = match ins.remove("partitions") {
            Some(v) => dist(&v, "insert partitions")?,
            None => Distribution::fixed(1),
        };
        if partitions.min() < 1 {
            return Err(format!(
                "insert partitions: {} can yield fewer than one partition",
                partitions.spec()
            ));
        }
        let visits = match ins.remove("visits") {
            Some(v) => dist(&v, "insert visits")?,
            None => Distribution::fixed(1),
        };
        if visits.min() < 1 {
            return Err(format!(
                "insert visits: {} can yield fewer than one visit",
                visits.spec()
            ));
        }
        let select = ratio(ins.remove("select"), "select")?;
        let row_population = ratio(ins.remove("row-population"), "row-population")?;
        let batch_type = match ins.remove("batchtype") {
            None => None,
            Some(v) => Some(
                match scalar(&v).unwrap_or_default().to_uppercase().as_str() {
                    "LOGGED" => BatchType::Logged,
                    "UNLOGGED" => BatchType::Unlogged,
                    "COUNTER" => BatchType::Counter,
                    other => {
                        return Err(format!(
                            "insert batchtype: '{other}' is not one of LOGGED, UNLOGGED, COUNTER"
                        ))
                    }
                },
            ),
        };
        if !ins.is_empty() {
            let keys: Vec<&str> = ins.keys().map(String::as_str).collect();
            return Err(format!("Unrecognised insert option(s): {} (expected partitions, select, row-population, batchtype, visits)", keys.join(", ")));
        }
        let mut queries = BTreeMap::new();
        for (name, q) in queries_raw {
            let lname = name.to_lowercase();
            if lname == "insert" {
                return Err("a query may not be named 'insert': that name is the profile's insert operation".into());
            }
            let cql = q
                .cql
                .filter(|c| !c.trim().is_empty())
                .ok_or_else(|| format!("query {name} has no cql"))?;
            let fields = match q.fields.as_deref().map(str::to_lowercase).as_deref() {
                None | Some("multirow") => Fields::MultiRow,
                Some("samerow") => Fields::SameRow,
                Some(other) => {
                    return Err(format!(
                        "query {name}: fields: '{other}' is not samerow or multirow"
                    ))
                }
            };
            queries.insert(
                lname.clone(),
                Query {
                    name: lname,
                    cql: cql.trim().trim_end_matches(';').to_string(),
                    fields,
                },
            );
        }
        Ok(Profile {
            keyspace,
            keyspace_definition,
            table,
            table_definition,
            extra_definitions: raw.extra_definitions.unwrap_or_default(),
            columns,
            insert: Insert {
                partitions,
                select,
                row_population,
                visits,
                batch_type,
            },
            queries,
        })
    }

    pub fn column(&self, name: &str) -> ColumnSpec {
        self.columns.get(name).cloned().unwrap_or_default()
    }
}

/// `ops(insert=9,simple1=1)` against a profile: (lower-cased name, weight).
pub fn parse_ops(spec: &str, profile: &Profile) -> Result<Vec<(String, u32)>, String> {
    let mut ops = Vec::new();
    for part in spec.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (k, v) = part
            .split_once('=')
            .ok_or_else(|| format!("Invalid ops entry '{part}': expected name=weight"))?;
        let name = k.trim().to_lowercase();
        let w: u32 = v
            .trim()
            .parse()
            .map_err(|_| format!("Invalid weight '{v}' for operation {name} in ops(...)"))?;
        if name != "insert" && !profile.queries.contains_key(&name) {
            let known: Vec<&str> = std::iter::once("insert")
                .chain(profile.queries.keys().map(String::as_str))
                .collect();
            return Err(format!(
                "No query defined with name {name} (the profile defines: {})",
                known.join(", ")
            ));
        }
        if w > 0 {
            ops.push((name, w));
        }
    }
    if ops.is_empty() {
        return Err(
            "ops(...) must give a positive weight to at least one operation, e.g. ops(insert=1)"
                .into(),
        );
    }
    Ok(ops)
}

#[cfg(test)]
mod tests {
    use super::*;

    const PROFILE: &str = r#"
keyspace: stress_ks
keyspace_definition: |
  CREATE KEYSPACE stress_ks WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1};
table: events
table_definition: |
  CREATE TABLE IF NOT EXISTS stress_ks.events (
    source text, at timestamp, value double, note blob,
    PRIMARY KEY (source, at)
  ) WITH compaction = {'class': 'SizeTieredCompactionStrategy'}
columnspec:
  - name: source
    size: fixed(12)
    population: uniform(1..1000)
  - name: at
    cluster: uniform(1..20)
  - name: note
    size: gaussian(50..150)
insert:
  partitions: fixed(1)
  select: fixed(1)/1
  batchtype: UNLOGGED
queries:
  simple1:
    cql: select * from events where source = ? and at = ? LIMIT 10
    fields: samerow
  Range1:
    cql: SELECT * FROM events WHERE source = ?;
"#;

    #[test]
    fn parses_a_cassandra_stress_profile() {
        let p = Profile::parse(PROFILE).expect("parse");
        assert_eq!(
            (p.keyspace.as_str(), p.table.as_str()),
            ("stress_ks", "events")
        );
        assert!(p.keyspace_definition.is_some() && p.table_definition.is_some());
        assert_eq!(p.column("source").size.min(), 12);
        assert_eq!(p.column("source").population.max(), 1000);
        assert_eq!(p.column("at").cluster.max(), 20);
        assert_eq!(
            p.column("value").cluster.max(),
            1,
            "defaults for unlisted columns"
        );
        assert_eq!(p.column("value").size.spec(), "uniform(4..8)");
        assert_eq!(p.insert.batch_type, Some(BatchType::Unlogged));
        assert_eq!(p.queries["simple1"].fields, Fields::SameRow);
        assert_eq!(p.queries["range1"].fields, Fields::MultiRow);
        assert_eq!(
            p.queries["range1"].cql,
            "SELECT * FROM events WHERE source = ?"
        );
        assert_eq!(
            parse_ops("insert=9,simple1=1", &p).expect("ops"),
            vec![("insert".to_string(), 9), ("simple1".to_string(), 1)]
        );
        assert_eq!(parse_ops("INSERT=1, range1=2", &p).expect("ops").len(), 2);
    }

    #[test]
    fn problems_are_named() {
        let without = |key: &str| {
            PROFILE
                .lines()
                .filter(|l| !l.starts_with(key))
                .collect::<Vec<_>>()
                .join("\n")
        };
        assert!(Profile::parse(&without("table:"))
            .expect_err("an error")
            .contains("table name is required"));
        assert!(Profile::parse(&without("keyspace:"))
            .expect_err("an error")
            .contains("keyspace name is required"));
        let bad = PROFILE.replace("gaussian(50..150)", "gaussian(150..50)");
        let e = Profile::parse(&bad).expect_err("an error");
        assert!(
            e.contains("columnspec note size") && e.contains("gaussian"),
            "{e}"
        );
        let bad = PROFILE.replace("uniform(1..20)", "zipf(1..20)");
        assert!(Profile::parse(&bad)
            .expect_err("an error")
            .contains("Illegal distribution type: zipf"));
        let bad = PROFILE.replace("table: events", "table: other");
        assert!(Profile::parse(&bad)
            .expect_err("an error")
            .contains("doesn't match table property"));
        let bad = PROFILE.replace("batchtype: UNLOGGED", "batchtype: SOMETIMES");
        assert!(Profile::parse(&bad)
            .expect_err("an error")
            .contains("SOMETIMES"));
        let bad = PROFILE.replace("batchtype: UNLOGGED", "batchsize: 3");
        assert!(Profile::parse(&bad)
            .expect_err("an error")
            .contains("Unrecognised insert option(s): batchsize"));
        let bad = PROFILE.replace("    fields: samerow", "    fields: somerows");
        assert!(Profile::parse(&bad)
            .expect_err("an error")
            .contains("somerows"));
        let bad = format!("{PROFILE}\nextra_stuff: 1\n");
        assert!(Profile::parse(&bad)
            .expect_err("an error")
            .contains("extra_stuff"));
        let p = Profile::parse(PROFILE).expect("parse");
        let e = parse_ops("insert=1,simple2=1", &p).expect_err("an error");
        assert!(e.contains("No query defined with name simple2"), "{e}");
        assert!(parse_ops("insert=x", &p)
            .expect_err("an error")
            .contains("'x'"));
        assert!(parse_ops("insert=0", &p).is_err());
    }

    #[test]
    fn created_names() {
        assert_eq!(
            created_name(
                "CREATE TABLE IF NOT EXISTS ks.\"Tab\" (a int PRIMARY KEY)",
                "TABLE"
            )
            .as_deref(),
            Some("Tab")
        );
        assert_eq!(
            created_name("create table T(a int primary key)", "TABLE").as_deref(),
            Some("t")
        );
        assert_eq!(
            created_name(
                "create keyspace if not exists k1 with replication = {}",
                "KEYSPACE"
            )
            .as_deref(),
            Some("k1")
        );
        assert_eq!(created_name("DROP TABLE t", "TABLE"), None);
    }
}
