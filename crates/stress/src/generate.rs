//! Data generation for user profiles, as cassandra-stress's
//! `PartitionGenerator`: every value is a pure function of the partition seed
//! (drawn from `-pop`), so a later read finds what a write wrote.
//!
//! A column's `population` turns a seed into the value's identity (how many
//! distinct values the column has), `size` gives lengths of text, blobs and
//! collections, and a clustering column's `cluster` how many values it takes
//! under each parent, so a partition has the product of its clustering
//! columns' counts as rows.

use crate::dist::{mix, Distribution, Rng};
use crate::profile::{ColumnSpec, Profile};
use bytes::Bytes;
use sibyl_types::CqlType;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ColumnKind {
    PartitionKey,
    Clustering,
    Static,
    Regular,
}

#[derive(Debug, Clone)]
pub struct Column {
    pub name: String,
    pub kind: ColumnKind,
    /// The type as `system_schema.columns` writes it.
    pub type_name: String,
    pub spec: ColumnSpec,
    salt: u64,
}

impl Column {
    pub fn new(name: &str, kind: ColumnKind, type_name: &str, spec: ColumnSpec) -> Column {
        let salt = name.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
            (h ^ b as u64).wrapping_mul(0x100_0000_01b3)
        });
        Column {
            name: name.to_string(),
            kind,
            type_name: type_name.to_string(),
            spec,
            salt,
        }
    }

    /// `counter`, non-frozen `set<...>` and `list<...>` are written as `c = c + ?`.
    pub fn is_additive(&self) -> bool {
        let t = self.type_name.trim().to_ascii_lowercase();
        t == "counter" || t.starts_with("set<") || t.starts_with("list<")
    }
}

/// A table as generated: columns in primary-key order, then the others.
#[derive(Debug, Clone)]
pub struct TableModel {
    pub keyspace: String,
    pub table: String,
    pub columns: Vec<Column>,
    /// Indexes into `columns`.
    pub partition_key: Vec<usize>,
    pub clustering: Vec<usize>,
}

/// One partition: its seed and how many values each clustering column takes.
#[derive(Debug, Clone)]
pub struct Partition {
    pub seed: u64,
    counts: Vec<u64>,
    pub rows: u64,
}

pub use sibyl_types::ident::maybe_quote as quote;

const MAX_ROWS: u64 = 1 << 40;

impl TableModel {
    /// From `system_schema.columns` rows: (name, kind, position, type).
    pub fn new(
        keyspace: &str,
        table: &str,
        mut schema: Vec<(String, String, i32, String)>,
        profile: &Profile,
    ) -> Result<TableModel, String> {
        if schema.is_empty() {
            return Err(format!("Unable to find table {keyspace}.{table}"));
        }
        let rank = |k: &str| match k {
            "partition_key" => 0,
            "clustering" => 1,
            "static" => 2,
            _ => 3,
        };
        schema.sort_by(|a, b| {
            rank(&a.1)
                .cmp(&rank(&b.1))
                .then(a.2.cmp(&b.2))
                .then(a.0.cmp(&b.0))
        });
        let mut m = TableModel {
            keyspace: keyspace.to_string(),
            table: table.to_string(),
            columns: Vec::new(),
            partition_key: Vec::new(),
            clustering: Vec::new(),
        };
        for (name, kind, _, typ) in schema {
            let kind = match kind.as_str() {
                "partition_key" => ColumnKind::PartitionKey,
                "clustering" => ColumnKind::Clustering,
                "static" => ColumnKind::Static,
                _ => ColumnKind::Regular,
            };
            match kind {
                ColumnKind::PartitionKey => m.partition_key.push(m.columns.len()),
                ColumnKind::Clustering => m.clustering.push(m.columns.len()),
                _ => {}
            }
            m.columns
                .push(Column::new(&name, kind, &typ, profile.column(&name)));
        }
        for name in profile.columns.keys() {
            if m.index_of(name).is_none() {
                return Err(format!(
                    "columnspec names {name}, which is not a column of {keyspace}.{table}"
                ));
            }
        }
        Ok(m)
    }

    pub fn index_of(&self, name: &str) -> Option<usize> {
        self.columns.iter().position(|c| c.name == name)
    }

    pub fn is_counter_table(&self) -> bool {
        self.columns
            .iter()
            .any(|c| c.type_name.eq_ignore_ascii_case("counter"))
    }

    /// cassandra-stress's insert statement: `UPDATE t SET c = ?, n = n + ?
    /// WHERE pk = ? AND ck = ?`, or an INSERT for key-only tables.
    pub fn insert_cql(&self) -> String {
        let t = format!("{}.{}", quote(&self.keyspace), quote(&self.table));
        let keys: Vec<&Column> = self
            .columns
            .iter()
            .filter(|c| matches!(c.kind, ColumnKind::PartitionKey | ColumnKind::Clustering))
            .collect();
        let others: Vec<&Column> = self
            .columns
            .iter()
            .filter(|c| !matches!(c.kind, ColumnKind::PartitionKey | ColumnKind::Clustering))
            .collect();
        if others.is_empty() {
            let names: Vec<String> = keys.iter().map(|c| quote(&c.name)).collect();
            let marks: Vec<&str> = keys.iter().map(|_| "?").collect();
            return format!(
                "INSERT INTO {t} ({}) VALUES ({})",
                names.join(", "),
                marks.join(", ")
            );
        }
        let sets: Vec<String> = others
            .iter()
            .map(|c| {
                let q = quote(&c.name);
                if c.is_additive() {
                    format!("{q} = {q} + ?")
                } else {
                    format!("{q} = ?")
                }
            })
            .collect();
        let preds: Vec<String> = keys
            .iter()
            .map(|c| format!("{} = ?", quote(&c.name)))
            .collect();
        format!(
            "UPDATE {t} SET {} WHERE {}",
            sets.join(", "),
            preds.join(" AND ")
        )
    }

    pub fn partition(&self, seed: u64) -> Partition {
        let mut rows: u64 = 1;
        let counts: Vec<u64> = self
            .clustering
            .iter()
            .map(|&i| {
                let c = &self.columns[i];
                let n = c.spec.cluster.at(mix(seed, c.salt)).max(1) as u64;
                rows = rows.saturating_mul(n).min(MAX_ROWS);
                n
            })
            .collect();
        Partition { seed, counts, rows }
    }

    /// The smallest and largest row counts a partition can have.
    pub fn row_count_bounds(&self) -> (f64, f64) {
        self.clustering.iter().fold((1.0, 1.0), |(lo, hi), &i| {
            let c = &self.columns[i].spec.cluster;
            (lo * c.min().max(1) as f64, hi * c.max().max(1) as f64)
        })
    }

    /// The identity of column `col`'s value in row `row` of `p`.
    fn identity(&self, col: usize, p: &Partition, row: u64) -> i64 {
        let c = &self.columns[col];
        let base = mix(p.seed, c.salt);
        let seed = match c.kind {
            ColumnKind::PartitionKey => base,
            ColumnKind::Static => mix(base, u64::MAX),
            ColumnKind::Regular => mix(base, row.wrapping_add(1)),
            ColumnKind::Clustering => {
                // the value depends on this row's position among its parent's children
                let level = self.clustering.iter().position(|&i| i == col).unwrap_or(0);
                let stride: u64 = p.counts[level + 1..].iter().product::<u64>().max(1);
                mix(base, row / stride)
            }
        };
        c.spec.population.at(seed)
    }

    /// Column `col`'s value in row `row` of `p`, serialized as `typ`.
    pub fn value(
        &self,
        col: usize,
        typ: &CqlType,
        p: &Partition,
        row: u64,
    ) -> Result<Bytes, String> {
        let id = self.identity(col, p, row);
        let c = &self.columns[col];
        generate(typ, id, &c.spec.size).map_err(|e| format!("column {}: {e}", c.name))
    }
}

const ALPHABET: &[u8] = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";

fn varint(v: i64) -> Vec<u8> {
    let b = v.to_be_bytes();
    let mut i = 0;
    // drop redundant sign bytes
    while i < 7 && ((b[i] == 0 && b[i + 1] & 0x80 == 0) || (b[i] == 0xff && b[i + 1] & 0x80 != 0)) {
        i += 1;
    }
    b[i..].to_vec()
}

fn element_size() -> Distribution {
    Distribution::parse("uniform(4..8)").unwrap_or_else(|_| Distribution::fixed(6))
}

/// A value of type `t` whose identity is `id`; `size` gives lengths.
pub fn generate(t: &CqlType, id: i64, size: &Distribution) -> Result<Bytes, String> {
    let seed = id as u64;
    let len = || size.at(seed).clamp(0, 16 << 20) as usize;
    Ok(match t {
        CqlType::Text | CqlType::Ascii => {
            let mut rng = Rng::new(seed);
            let n = len();
            Bytes::from(
                (0..n)
                    .map(|_| ALPHABET[rng.below(ALPHABET.len() as u64) as usize])
                    .collect::<Vec<u8>>(),
            )
        }
        CqlType::Blob => {
            let mut rng = Rng::new(seed);
            let n = len();
            let mut v = Vec::with_capacity(n + 8);
            while v.len() < n {
                v.extend_from_slice(&rng.next_u64().to_le_bytes());
            }
            v.truncate(n);
            Bytes::from(v)
        }
        CqlType::Int => Bytes::copy_from_slice(&(id as i32).to_be_bytes()),
        CqlType::Bigint | CqlType::Counter => Bytes::copy_from_slice(&id.to_be_bytes()),
        CqlType::Smallint => Bytes::copy_from_slice(&(id as i16).to_be_bytes()),
        CqlType::Tinyint => Bytes::copy_from_slice(&(id as i8).to_be_bytes()),
        CqlType::Varint => Bytes::from(varint(id)),
        CqlType::Decimal => {
            let mut v = 0i32.to_be_bytes().to_vec();
            v.extend(varint(id));
            Bytes::from(v)
        }
        CqlType::Double => Bytes::copy_from_slice(&(id as f64).to_be_bytes()),
        CqlType::Float => Bytes::copy_from_slice(&(id as f32).to_be_bytes()),
        CqlType::Boolean => Bytes::copy_from_slice(&[(id & 1) as u8]),
        CqlType::Timestamp => Bytes::copy_from_slice(&id.to_be_bytes()),
        CqlType::Date => Bytes::copy_from_slice(
            &((1u32 << 31).wrapping_add(id.rem_euclid(365 * 200) as u32)).to_be_bytes(),
        ),
        CqlType::Time => Bytes::copy_from_slice(&(id.rem_euclid(86_400_000_000_000)).to_be_bytes()),
        CqlType::Inet => Bytes::copy_from_slice(&(id as u32).to_be_bytes()),
        CqlType::Uuid => {
            let mut rng = Rng::new(seed);
            let mut b = [0u8; 16];
            b[..8].copy_from_slice(&rng.next_u64().to_be_bytes());
            b[8..].copy_from_slice(&rng.next_u64().to_be_bytes());
            b[6] = (b[6] & 0x0f) | 0x40;
            b[8] = (b[8] & 0x3f) | 0x80;
            Bytes::copy_from_slice(&b)
        }
        CqlType::Timeuuid => {
            // version 1: the identity is the 60-bit timestamp
            let ts = (id as u64) & 0x0fff_ffff_ffff_ffff;
            let mut rng = Rng::new(seed);
            let mut b = [0u8; 16];
            b[0..4].copy_from_slice(&(ts as u32).to_be_bytes());
            b[4..6].copy_from_slice(&((ts >> 32) as u16).to_be_bytes());
            b[6..8].copy_from_slice(&((((ts >> 48) as u16) & 0x0fff) | 0x1000).to_be_bytes());
            b[8..].copy_from_slice(&rng.next_u64().to_be_bytes());
            b[8] = (b[8] & 0x3f) | 0x80;
            Bytes::copy_from_slice(&b)
        }
        CqlType::Duration => {
            let mut v = Vec::new();
            sibyl_types::value::write_signed_vint(&mut v, id.rem_euclid(12));
            sibyl_types::value::write_signed_vint(&mut v, id.rem_euclid(28));
            sibyl_types::value::write_signed_vint(&mut v, id.rem_euclid(86_400_000_000_000));
            Bytes::from(v)
        }
        CqlType::List(e) | CqlType::Set(e) => {
            let n = len().min(1024);
            let es = element_size();
            let mut items = (0..n)
                .map(|i| generate(e, mix(seed, i as u64) as i64 >> 1, &es))
                .collect::<Result<Vec<_>, _>>()?;
            if matches!(t, CqlType::Set(_)) {
                items.sort();
                items.dedup();
            }
            sibyl_types::value::serialize_collection(&items)
        }
        CqlType::Map(k, v) => {
            let n = len().min(1024);
            let es = element_size();
            let mut pairs = (0..n)
                .map(|i| {
                    let s = mix(seed, i as u64);
                    Ok((
                        generate(k, s as i64 >> 1, &es)?,
                        generate(v, mix(s, 1) as i64 >> 1, &es)?,
                    ))
                })
                .collect::<Result<Vec<_>, String>>()?;
            pairs.sort_by(|a, b| a.0.cmp(&b.0));
            pairs.dedup_by(|a, b| a.0 == b.0);
            sibyl_types::value::serialize_map(&pairs)
        }
        CqlType::Frozen(inner) => generate(inner, id, size)?,
        CqlType::Tuple(ts) => {
            let es = element_size();
            let fields = ts
                .iter()
                .enumerate()
                .map(|(i, ft)| generate(ft, mix(seed, i as u64) as i64 >> 1, &es).map(Some))
                .collect::<Result<Vec<_>, _>>()?;
            sibyl_types::value::serialize_tuple(&fields)
        }
        CqlType::Udt(u) => {
            let es = element_size();
            let fields = u
                .fields
                .iter()
                .enumerate()
                .map(|(i, (_, ft))| generate(ft, mix(seed, i as u64) as i64 >> 1, &es).map(Some))
                .collect::<Result<Vec<_>, _>>()?;
            sibyl_types::value::serialize_tuple(&fields)
        }
        CqlType::Vector(e, n) => {
            let es = element_size();
            let fixed = matches!(
                **e,
                CqlType::Float
                    | CqlType::Double
                    | CqlType::Int
                    | CqlType::Bigint
                    | CqlType::Boolean
                    | CqlType::Uuid
                    | CqlType::Timeuuid
                    | CqlType::Timestamp
            );
            let mut out = Vec::new();
            for i in 0..*n {
                let v = generate(e, mix(seed, i as u64) as i64 >> 1, &es)?;
                if !fixed {
                    sibyl_types::value::write_unsigned_vint(&mut out, v.len() as u64);
                }
                out.extend_from_slice(&v);
            }
            Bytes::from(out)
        }
        CqlType::Custom(name) => {
            return Err(format!("values of custom type {name} cannot be generated"))
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const PROFILE: &str = r#"
keyspace: ks
table: t
columnspec:
  - name: k
    size: fixed(10)
    population: seq(1..100)
  - name: c1
    cluster: fixed(3)
  - name: c2
    cluster: uniform(2..4)
queries: {}
"#;

    fn model() -> TableModel {
        let p = Profile::parse(PROFILE).expect("profile");
        let schema = vec![
            (
                "v".to_string(),
                "regular".to_string(),
                -1,
                "blob".to_string(),
            ),
            (
                "c2".to_string(),
                "clustering".to_string(),
                1,
                "int".to_string(),
            ),
            (
                "k".to_string(),
                "partition_key".to_string(),
                0,
                "text".to_string(),
            ),
            (
                "c1".to_string(),
                "clustering".to_string(),
                0,
                "timeuuid".to_string(),
            ),
            (
                "n".to_string(),
                "regular".to_string(),
                -1,
                "set<int>".to_string(),
            ),
        ];
        TableModel::new("ks", "t", schema, &p).expect("model")
    }

    #[test]
    fn insert_statement_and_order() {
        let m = model();
        let names: Vec<&str> = m.columns.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["k", "c1", "c2", "n", "v"]);
        assert_eq!(
            m.insert_cql(),
            "UPDATE ks.t SET n = n + ?, v = ? WHERE k = ? AND c1 = ? AND c2 = ?"
        );
        assert_eq!(quote("Mixed"), "\"Mixed\"");
        assert_eq!(m.row_count_bounds(), (6.0, 12.0));
    }

    #[test]
    fn values_are_deterministic_from_the_seed() {
        let m = model();
        let p = m.partition(7);
        assert!((6..=12).contains(&p.rows) && p.rows.is_multiple_of(3));
        let k = m.value(0, &CqlType::Text, &p, 0).expect("k");
        assert_eq!(k.len(), 10);
        assert_eq!(
            k,
            m.value(0, &CqlType::Text, &m.partition(7), 5).expect("k"),
            "the key is the partition's"
        );
        assert_ne!(
            k,
            m.value(0, &CqlType::Text, &m.partition(8), 0).expect("k")
        );
        // c1 is shared by the rows under one c1 value, c2 differs between them
        let per_c1 = p.rows / 3;
        let c1 = |r| m.value(1, &CqlType::Timeuuid, &p, r).expect("c1");
        assert_eq!(c1(0), c1(per_c1 - 1));
        assert_ne!(c1(0), c1(per_c1));
        assert_eq!(c1(0)[6] >> 4, 1, "version 1 uuid");
        let v = |r| m.value(4, &CqlType::Blob, &p, r).expect("v");
        assert_eq!(v(2), v(2));
        assert_ne!(v(1), v(2));
        let set = m
            .value(3, &CqlType::Set(Box::new(CqlType::Int)), &p, 0)
            .expect("set");
        let items = sibyl_types::value::deserialize_collection(&set).expect("collection");
        assert!(
            (1..=8).contains(&items.len()),
            "uniform(4..8) elements, fewer if equal: {}",
            items.len()
        );
    }

    #[test]
    fn encodings() {
        let s = Distribution::fixed(4);
        assert_eq!(
            &generate(&CqlType::Int, 258, &s).expect("int")[..],
            &[0, 0, 1, 2]
        );
        assert_eq!(
            &generate(&CqlType::Varint, 128, &s).expect("varint")[..],
            &[0, 128]
        );
        assert_eq!(
            &generate(&CqlType::Varint, -1, &s).expect("varint")[..],
            &[0xff]
        );
        assert_eq!(generate(&CqlType::Text, 5, &s).expect("text").len(), 4);
        assert!(generate(&CqlType::Custom("x.Y".into()), 1, &s).is_err());
    }

    #[test]
    fn unknown_columnspec_columns_are_named() {
        let p = Profile::parse(&PROFILE.replace("name: c2", "name: c9")).expect("profile");
        let schema = vec![
            (
                "k".to_string(),
                "partition_key".to_string(),
                0,
                "text".to_string(),
            ),
            (
                "c1".to_string(),
                "clustering".to_string(),
                0,
                "int".to_string(),
            ),
        ];
        assert!(TableModel::new("ks", "t", schema, &p)
            .expect_err("an error")
            .contains("c9"));
    }
}
