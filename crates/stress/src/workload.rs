//! What each command does: its schema, its statements and one operation of
//! each kind (write, read, counter_write, counter_read, a profile's insert and
//! its named queries).

use crate::client::{routing_token, text, ClientError, Cluster, Prepared, Reply};
use crate::dist::{mix, Distribution, Rng};
use crate::generate::{quote, ColumnKind, Partition, TableModel};
use crate::options::{Command, Options};
use crate::profile::{parse_ops, BatchType, Fields, Insert, Profile};
use bytes::Bytes;
use sibyl_protocol::{Consistency, Value};
use sibyl_types::CqlType;
use std::time::Duration;

/// What one operation touched.
#[derive(Debug, Clone, Copy, Default)]
pub struct Done {
    pub partitions: u64,
    pub rows: u64,
}

/// A statement and how to fill its bind markers from generated data.
struct Bound {
    prepared: Prepared,
    /// Per bind marker: (model column, its type).
    binds: Vec<(usize, CqlType)>,
}

enum Op {
    Write,
    Read,
    CounterWrite,
    CounterRead,
    Insert,
    Query(usize, Fields),
}

struct Kind {
    name: String,
    weight: u32,
    op: Op,
}

/// The schema-wide state shared by all workers.
pub struct Workload {
    kinds: Vec<Kind>,
    total_weight: u64,
    cl: Consistency,
    prepared: bool,
    population: Distribution,
    // standard1 / counter1
    columns: Distribution,
    column_size: Distribution,
    add: Distribution,
    max_columns: usize,
    insert_id: Bytes,
    select_id: Bytes,
    // user profiles
    model: Option<TableModel>,
    profile_insert: Option<(Bound, Insert, BatchType)>,
    queries: Vec<Bound>,
}

fn key_bytes(i: u64) -> Bytes {
    // 10-byte keys, as cassandra-stress's default key size
    let mut k = vec![0u8; 10];
    k[2..].copy_from_slice(&i.to_be_bytes());
    Bytes::from(k)
}

fn column_bytes(seed: u64, size: usize) -> Bytes {
    let mut rng = Rng::new(seed);
    let mut v = Vec::with_capacity(size + 8);
    while v.len() < size {
        v.extend_from_slice(&rng.next_u64().to_le_bytes());
    }
    v.truncate(size);
    Bytes::from(v)
}

fn hex(b: &[u8]) -> String {
    let mut s = String::with_capacity(2 + b.len() * 2);
    s.push_str("0x");
    for x in b {
        s.push_str(&format!("{x:02x}"));
    }
    s
}

async fn ddl(cluster: &Cluster, cql: &str) -> Result<(), String> {
    match cluster.any().query(cql, Consistency::All).await {
        Ok(_) => {}
        // AlreadyExists: the schema is there, as cassandra-stress accepts
        Err(ClientError::Server { code: 0x2400, .. }) => {}
        Err(e) => return Err(format!("{e}\n  while executing: {}", cql.trim())),
    }
    // as the drivers cassandra-stress runs on: the next statement waits
    // until every node has the new schema (or 10 s, their default)
    cluster
        .wait_for_schema_agreement(Duration::from_secs(10))
        .await;
    Ok(())
}

fn rows(r: Reply) -> Vec<Vec<Option<Bytes>>> {
    match r {
        Reply::Rows(r) => r,
        Reply::Other => Vec::new(),
    }
}

impl Workload {
    /// Creates the schema if absent and prepares the statements.
    pub async fn setup(
        o: &Options,
        cluster: &Cluster,
        profile: Option<&Profile>,
    ) -> Result<Workload, String> {
        let mut w = Workload {
            kinds: Vec::new(),
            total_weight: 0,
            cl: o.cl,
            prepared: o.prepared,
            population: o.population(),
            columns: o.columns.clone(),
            column_size: o.column_size.clone(),
            add: o.add.clone(),
            max_columns: o.columns.max().max(1) as usize,
            insert_id: Bytes::new(),
            select_id: Bytes::new(),
            model: None,
            profile_insert: None,
            queries: Vec::new(),
        };
        let kind = |name: &str, weight: u32, op: Op| Kind {
            name: name.to_string(),
            weight,
            op,
        };
        match &o.command {
            Command::Write => w.kinds.push(kind("WRITE", 1, Op::Write)),
            Command::Read => w.kinds.push(kind("READ", 1, Op::Read)),
            Command::Mixed { write, read } => {
                w.kinds.push(kind("WRITE", *write, Op::Write));
                w.kinds.push(kind("READ", *read, Op::Read));
            }
            Command::CounterWrite => w.kinds.push(kind("COUNTER_WRITE", 1, Op::CounterWrite)),
            Command::CounterRead => w.kinds.push(kind("COUNTER_READ", 1, Op::CounterRead)),
            Command::User { ops, .. } => {
                let p = profile.ok_or("user: the profile was not loaded")?;
                w.setup_profile(o, cluster, p, ops).await?;
            }
        }
        w.kinds.retain(|k| k.weight > 0);
        w.total_weight = w.kinds.iter().map(|k| k.weight as u64).sum();
        if w.total_weight == 0 {
            return Err("no operation has a positive weight".into());
        }
        if w.model.is_none() {
            w.setup_standard(o, cluster).await?;
        }
        Ok(w)
    }

    async fn setup_standard(&mut self, o: &Options, cluster: &Cluster) -> Result<(), String> {
        let counter = matches!(o.command, Command::CounterWrite | Command::CounterRead);
        ddl(
            cluster,
            &format!(
                "CREATE KEYSPACE IF NOT EXISTS keyspace1 WITH replication = {{'class': 'SimpleStrategy', 'replication_factor': {}}}",
                o.replication_factor
            ),
        )
        .await?;
        let (table, typ) = if counter {
            ("counter1", "counter")
        } else {
            ("standard1", "blob")
        };
        let cols: Vec<String> = (0..self.max_columns)
            .map(|i| format!("\"C{i}\" {typ}"))
            .collect();
        let mut create = format!(
            "CREATE TABLE IF NOT EXISTS keyspace1.{table} (key blob PRIMARY KEY, {})",
            cols.join(", ")
        );
        if let Some(s) = &o.compaction {
            create.push_str(&format!(" WITH compaction = {{'class': '{s}'}}"));
        }
        ddl(cluster, &create).await?;
        let names: Vec<String> = (0..self.max_columns).map(|i| format!("\"C{i}\"")).collect();
        if self.prepared {
            let insert = if counter {
                let sets: Vec<String> = names.iter().map(|n| format!("{n} = {n} + ?")).collect();
                format!(
                    "UPDATE keyspace1.counter1 SET {} WHERE key = ?",
                    sets.join(", ")
                )
            } else {
                let marks: Vec<&str> = (0..=self.max_columns).map(|_| "?").collect();
                format!(
                    "INSERT INTO keyspace1.standard1 (key, {}) VALUES ({})",
                    names.join(", "),
                    marks.join(", ")
                )
            };
            self.insert_id = cluster.prepare(&insert).await?.id;
            self.select_id = cluster
                .prepare(&format!("SELECT * FROM keyspace1.{table} WHERE key = ?"))
                .await?
                .id;
        }
        Ok(())
    }

    async fn setup_profile(
        &mut self,
        o: &Options,
        cluster: &Cluster,
        p: &Profile,
        ops: &str,
    ) -> Result<(), String> {
        if !o.prepared {
            return Err("user profiles run prepared statements: drop -mode unprepared".into());
        }
        let weights = parse_ops(ops, p)?;
        if let Some(def) = &p.keyspace_definition {
            ddl(cluster, def).await?;
        }
        // the table definition and the queries may name tables without their keyspace
        for c in cluster.all() {
            c.query(&format!("USE {}", quote(&p.keyspace)), Consistency::One)
                .await
                .map_err(|e| format!("keyspace {}: {e}", p.keyspace))?;
        }
        if let Some(def) = &p.table_definition {
            ddl(cluster, def).await?;
        }
        for extra in &p.extra_definitions {
            ddl(cluster, extra).await?;
        }
        let (ks, table) = (p.keyspace.clone(), p.table.clone());
        let schema_q = format!(
            "SELECT column_name, kind, position, type FROM system_schema.columns WHERE keyspace_name = '{}' AND table_name = '{}'",
            ks.replace('\'', "''"),
            table.replace('\'', "''")
        );
        let schema: Vec<(String, String, i32, String)> = rows(
            cluster
                .any()
                .query(&schema_q, Consistency::One)
                .await
                .map_err(|e| format!("cannot read the schema of {ks}.{table}: {e}"))?,
        )
        .iter()
        .map(|r| {
            let pos = r
                .get(2)
                .and_then(|c| c.as_ref())
                .and_then(|b| <[u8; 4]>::try_from(&b[..]).ok())
                .map(i32::from_be_bytes)
                .unwrap_or(-1);
            (
                text(&r[0]),
                r.get(1).map(text).unwrap_or_default(),
                pos,
                r.get(3).map(text).unwrap_or_default(),
            )
        })
        .collect();
        let model = TableModel::new(&ks, &table, schema, p)?;
        let bind = |prepared: Prepared, what: &str| -> Result<Bound, String> {
            let binds = prepared
                .metadata
                .columns
                .iter()
                .map(|c| {
                    model.index_of(&c.name).map(|i| (i, c.typ.clone())).ok_or_else(|| {
                        format!("{what}: cannot bind '{}': bind markers must stand for columns of {ks}.{table}", c.name)
                    })
                })
                .collect::<Result<Vec<_>, _>>()?;
            Ok(Bound { prepared, binds })
        };
        for (name, weight) in weights {
            if name == "insert" {
                if self.profile_insert.is_none() {
                    let cql = model.insert_cql();
                    let b = bind(cluster.prepare(&cql).await?, "insert")?;
                    let counter = model.is_counter_table();
                    let bt = match p.insert.batch_type {
                        Some(BatchType::Counter) | None if counter => BatchType::Counter,
                        Some(t) => t,
                        None => BatchType::Logged,
                    };
                    let (lo, hi) = model.row_count_bounds();
                    let (sel_lo, sel_hi) = (p.insert.select.min(), p.insert.select.max());
                    let visits = &p.insert.visits;
                    let max_batch =
                        sel_hi * p.insert.partitions.max() as f64 * hi / visits.min().max(1) as f64;
                    println!(
                        "Generating batches with [{}..{}] partitions and [{:.0}..{:.0}] rows (of [{:.0}..{:.0}] total rows in the partitions)",
                        p.insert.partitions.min(),
                        p.insert.partitions.max(),
                        sel_lo * p.insert.partitions.min() as f64 * lo / visits.max().max(1) as f64,
                        max_batch,
                        p.insert.partitions.min() as f64 * lo,
                        p.insert.partitions.max() as f64 * hi
                    );
                    if bt == BatchType::Logged && max_batch > 65535.0 {
                        return Err(format!(
                            "You have defined a workload that generates batches with more than 65k rows ({max_batch:.0}), but have required the use of LOGGED batches. There is a 65k row limit on a single batch."
                        ));
                    }
                    self.profile_insert = Some((b, p.insert.clone(), bt));
                }
                self.kinds.push(Kind {
                    name: "insert".into(),
                    weight,
                    op: Op::Insert,
                });
            } else {
                let q = &p.queries[&name];
                let b = bind(cluster.prepare(&q.cql).await?, &format!("query {name}"))?;
                self.queries.push(b);
                self.kinds.push(Kind {
                    name: name.clone(),
                    weight,
                    op: Op::Query(self.queries.len() - 1, q.fields),
                });
            }
        }
        self.model = Some(model);
        Ok(())
    }

    /// Operation kinds' names, in order.
    pub fn names(&self) -> Vec<String> {
        self.kinds.iter().map(|k| k.name.clone()).collect()
    }

    /// The kind of operation number `i`: weights interleaved deterministically.
    pub fn pick(&self, i: u64) -> usize {
        let mut x = i % self.total_weight;
        for (k, kind) in self.kinds.iter().enumerate() {
            if x < kind.weight as u64 {
                return k;
            }
            x -= kind.weight as u64;
        }
        0
    }

    fn seed(&self, rng: &mut Rng) -> u64 {
        self.population.next(rng) as u64
    }

    /// Runs operation `kind`.
    pub async fn run(
        &self,
        kind: usize,
        rng: &mut Rng,
        cluster: &Cluster,
    ) -> Result<Done, ClientError> {
        match &self.kinds[kind].op {
            Op::Write => self.write(rng, cluster).await,
            Op::Read | Op::CounterRead => self.read(rng, cluster).await,
            Op::CounterWrite => self.counter_write(rng, cluster).await,
            Op::Insert => self.insert(rng, cluster).await,
            Op::Query(q, fields) => self.query(&self.queries[*q], *fields, rng, cluster).await,
        }
    }

    async fn exec(
        &self,
        cluster: &Cluster,
        id: &Bytes,
        values: Vec<Value>,
        pk: &[u16],
    ) -> Result<Reply, ClientError> {
        let token = if cluster.token_aware() {
            routing_token(pk, &values)
        } else {
            None
        };
        cluster.pick(token).execute(id, values, self.cl).await
    }

    async fn write(&self, rng: &mut Rng, cluster: &Cluster) -> Result<Done, ClientError> {
        let seed = self.seed(rng);
        let key = key_bytes(seed);
        let n = self.columns.at(seed).clamp(1, self.max_columns as i64) as usize;
        let value = |c: usize| {
            column_bytes(
                mix(seed, c as u64),
                self.column_size.at(mix(seed, !(c as u64))).max(0) as usize,
            )
        };
        if self.prepared {
            let mut vals = Vec::with_capacity(self.max_columns + 1);
            vals.push(Value::Set(key));
            vals.extend((0..self.max_columns).map(|c| {
                if c < n {
                    Value::Set(value(c))
                } else {
                    Value::Unset
                }
            }));
            self.exec(cluster, &self.insert_id, vals, &[0]).await?;
        } else {
            let names: Vec<String> = (0..n).map(|i| format!("\"C{i}\"")).collect();
            let vals: Vec<String> = (0..n).map(|c| hex(&value(c))).collect();
            let q = format!(
                "INSERT INTO keyspace1.standard1 (key, {}) VALUES ({}, {})",
                names.join(", "),
                hex(&key),
                vals.join(", ")
            );
            cluster.pick(None).query(&q, self.cl).await?;
        }
        Ok(Done {
            partitions: 1,
            rows: 1,
        })
    }

    async fn read(&self, rng: &mut Rng, cluster: &Cluster) -> Result<Done, ClientError> {
        let key = key_bytes(self.seed(rng));
        let r = if self.prepared {
            self.exec(cluster, &self.select_id, vec![Value::Set(key)], &[0])
                .await?
        } else {
            let table = if matches!(self.kinds[0].op, Op::CounterRead) {
                "counter1"
            } else {
                "standard1"
            };
            cluster
                .pick(None)
                .query(
                    &format!("SELECT * FROM keyspace1.{table} WHERE key = {}", hex(&key)),
                    self.cl,
                )
                .await?
        };
        let n = r.row_count() as u64;
        Ok(Done {
            partitions: n.min(1),
            rows: n,
        })
    }

    async fn counter_write(&self, rng: &mut Rng, cluster: &Cluster) -> Result<Done, ClientError> {
        let seed = self.seed(rng);
        let key = key_bytes(seed);
        let n = self.columns.at(seed).clamp(1, self.max_columns as i64) as usize;
        let delta = |_c: usize, rng: &mut Rng| self.add.next(rng);
        if self.prepared {
            let mut vals: Vec<Value> = (0..self.max_columns)
                .map(|c| {
                    if c < n {
                        Value::Set(Bytes::copy_from_slice(&delta(c, rng).to_be_bytes()))
                    } else {
                        Value::Unset
                    }
                })
                .collect();
            vals.push(Value::Set(key));
            let pk = [self.max_columns as u16];
            self.exec(cluster, &self.insert_id, vals, &pk).await?;
        } else {
            let sets: Vec<String> = (0..n)
                .map(|c| format!("\"C{c}\" = \"C{c}\" + {}", delta(c, rng)))
                .collect();
            let q = format!(
                "UPDATE keyspace1.counter1 SET {} WHERE key = {}",
                sets.join(", "),
                hex(&key)
            );
            cluster.pick(None).query(&q, self.cl).await?;
        }
        Ok(Done {
            partitions: 1,
            rows: 1,
        })
    }

    fn bind_row(
        &self,
        b: &Bound,
        m: &TableModel,
        p: &Partition,
        row: impl Fn(usize) -> u64,
        row_population: Option<(f64, &mut Rng)>,
    ) -> Result<Vec<Value>, ClientError> {
        let mut out = Vec::with_capacity(b.binds.len());
        let mut keep = row_population;
        for (i, (col, typ)) in b.binds.iter().enumerate() {
            if let Some((ratio, rng)) = keep.as_mut() {
                let optional = matches!(
                    m.columns[*col].kind,
                    ColumnKind::Regular | ColumnKind::Static
                );
                if optional && *ratio < 1.0 && rng.f64() >= *ratio {
                    out.push(Value::Unset);
                    continue;
                }
            }
            out.push(Value::Set(
                m.value(*col, typ, p, row(i))
                    .map_err(ClientError::Protocol)?,
            ));
        }
        Ok(out)
    }

    async fn insert(&self, rng: &mut Rng, cluster: &Cluster) -> Result<Done, ClientError> {
        let (Some(m), Some((b, ins, bt))) = (&self.model, &self.profile_insert) else {
            return Err(ClientError::Protocol("insert without a profile".into()));
        };
        let partitions = ins.partitions.next(rng).max(1) as u64;
        let mut statements: Vec<Vec<Value>> = Vec::new();
        for _ in 0..partitions {
            let seed = self.seed(rng);
            let p = m.partition(seed);
            // this visit's share of the partition's rows
            let visits = (ins.visits.at(seed).max(1) as u64).min(p.rows);
            let visit = rng.below(visits);
            let (lo, hi) = (p.rows * visit / visits, p.rows * (visit + 1) / visits);
            let ratio = ins.select.next(rng);
            let span = hi - lo;
            let want = ((span as f64 * ratio).round() as u64).clamp(1, span.max(1));
            let chosen: Vec<u64> = if want >= span {
                (lo..hi).collect()
            } else if span <= 1 << 20 {
                // each row with probability want/span, at least one
                let mut v: Vec<u64> = (lo..hi).filter(|_| rng.below(span) < want).collect();
                if v.is_empty() {
                    v.push(lo + rng.below(span));
                }
                v
            } else {
                let mut v: Vec<u64> = (0..want).map(|_| lo + rng.below(span)).collect();
                v.sort_unstable();
                v.dedup();
                v
            };
            for r in chosen {
                let rp = ins.row_population.next(rng);
                statements.push(self.bind_row(b, m, &p, |_| r, Some((rp, rng)))?);
            }
        }
        let rows = statements.len() as u64;
        let pk = &b.prepared.metadata.pk_indexes;
        if statements.len() == 1 {
            let vals = statements.pop().unwrap_or_default();
            self.exec(cluster, &b.prepared.id, vals, pk).await?;
        } else {
            let token = if cluster.token_aware() {
                statements.first().and_then(|v| routing_token(pk, v))
            } else {
                None
            };
            let stmts = statements
                .into_iter()
                .map(|v| (b.prepared.id.clone(), v))
                .collect();
            cluster.pick(token).batch(bt.code(), stmts, self.cl).await?;
        }
        Ok(Done { partitions, rows })
    }

    async fn query(
        &self,
        b: &Bound,
        fields: Fields,
        rng: &mut Rng,
        cluster: &Cluster,
    ) -> Result<Done, ClientError> {
        let Some(m) = &self.model else {
            return Err(ClientError::Protocol("query without a profile".into()));
        };
        let p = m.partition(self.seed(rng));
        let vals = match fields {
            Fields::SameRow => {
                let r = rng.below(p.rows);
                self.bind_row(b, m, &p, |_| r, None)?
            }
            Fields::MultiRow => {
                let rows: Vec<u64> = b.binds.iter().map(|_| rng.below(p.rows)).collect();
                self.bind_row(b, m, &p, |i| rows[i], None)?
            }
        };
        let r = self
            .exec(
                cluster,
                &b.prepared.id,
                vals,
                &b.prepared.metadata.pk_indexes,
            )
            .await?;
        let n = r.row_count() as u64;
        Ok(Done {
            partitions: n.min(1),
            rows: n,
        })
    }
}
