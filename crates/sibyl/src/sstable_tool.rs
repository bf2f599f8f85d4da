//! `sibyl sstable dump|verify PATH`: offline tools on SSTables (Cassandra's
//! `sstabledump` and `sstableverify`). PATH is a table directory or one
//! `sb-N-Data.db` file; the node need not run.

use anyhow::{bail, Context};
use serde_json::{json, Value};
use sibyl_storage::sstable::{list_generations, ChunkCache, SSTableReader, SerializationHeader};
use sibyl_storage::{ClusteringComparator, ColumnData, Partition, Row};
use sibyl_types::CqlType;
use std::path::{Path, PathBuf};

pub const USAGE: &str =
    "usage: sibyl sstable dump PATH     print an SSTable as JSON (like sstabledump)
       sibyl sstable verify PATH   check every checksum and the key order (like sstableverify)
PATH: a table's data directory or an sb-N-Data.db file";

fn targets(path: &Path) -> anyhow::Result<Vec<(PathBuf, u64)>> {
    if path.is_dir() {
        let gens = list_generations(path).map_err(|e| anyhow::anyhow!(e.to_string()))?;
        return Ok(gens.into_iter().map(|g| (path.to_path_buf(), g)).collect());
    }
    let name = path
        .file_name()
        .and_then(|n| n.to_str())
        .context("bad path")?;
    let g: u64 = name
        .strip_prefix("sb-")
        .and_then(|r| r.split('-').next())
        .and_then(|g| g.parse().ok())
        .with_context(|| format!("{name} is not an SSTable component (sb-N-Data.db)"))?;
    Ok(vec![(
        path.parent().unwrap_or(Path::new(".")).to_path_buf(),
        g,
    )])
}

fn parse_type(s: &str) -> CqlType {
    CqlType::parse(s, &|_| None).unwrap_or(CqlType::Blob)
}

fn open(dir: &Path, g: u64) -> anyhow::Result<SSTableReader> {
    // the comparator comes from the SSTable's own header
    let stats_path = sibyl_storage::sstable::component_path(dir, g, "Statistics.db");
    let raw = std::fs::read(&stats_path)
        .with_context(|| format!("cannot read {}", stats_path.display()))?;
    let v: Value = serde_json::from_slice(&raw)
        .with_context(|| format!("bad statistics in {}", stats_path.display()))?;
    let header: SerializationHeader =
        serde_json::from_value(v.get("header").cloned().unwrap_or(Value::Null)).unwrap_or_default();
    let types = header
        .clustering_types
        .iter()
        .zip(header.clustering_reversed.iter())
        .map(|(t, r)| (parse_type(t), *r))
        .collect();
    SSTableReader::open(
        dir,
        g,
        ClusteringComparator::new(types),
        ChunkCache::new(16 << 20),
    )
    .map_err(|e| anyhow::anyhow!(e.to_string()))
}

fn show(t: &CqlType, v: &[u8]) -> String {
    let s = t.to_cql_literal(v);
    match s.strip_prefix('\'').and_then(|x| x.strip_suffix('\'')) {
        Some(inner) => inner.replace("''", "'"),
        None => s,
    }
}

fn iso(micros: i64) -> String {
    let ms = micros.div_euclid(1000);
    let days = ms.div_euclid(86_400_000);
    let rem = ms.rem_euclid(86_400_000);
    let (y, m, d) = sibyl_types::civil_from_days(days);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{:06}Z",
        rem / 3_600_000,
        (rem / 60_000) % 60,
        (rem / 1000) % 60,
        micros.rem_euclid(1_000_000)
    )
}

fn row_json(r: &Row, header: &SerializationHeader) -> Vec<Value> {
    r.cells
        .iter()
        .map(|(name, data)| {
            let t = header.columns.get(name.as_ref()).map(|s| parse_type(s)).unwrap_or(CqlType::Blob);
            match data {
                ColumnData::Simple(c) | ColumnData::Counter(c) => {
                    let mut o = json!({ "name": name.as_ref(), "tstamp": iso(c.timestamp) });
                    match &c.value {
                        Some(v) if matches!(data, ColumnData::Counter(_)) => o["value"] = json!(sibyl_storage::counter::total(v)),
                        Some(v) => o["value"] = json!(show(&t, v)),
                        None => o["deletion_info"] = json!({ "local_delete_time": c.local_deletion_time }),
                    }
                    if c.ttl > 0 {
                        o["ttl"] = json!(c.ttl);
                        o["expires_at"] = json!(c.local_deletion_time);
                    }
                    o
                }
                ColumnData::Complex { deletion, cells } => {
                    let elems: Vec<Value> = cells
                        .iter()
                        .map(|(p, c)| json!({ "path": format!("0x{}", p.iter().map(|b| format!("{b:02x}")).collect::<String>()), "value": c.value.as_ref().map(|v| format!("0x{}", v.iter().map(|b| format!("{b:02x}")).collect::<String>())), "tstamp": iso(c.timestamp) }))
                        .collect();
                    let mut o = json!({ "name": name.as_ref(), "cells": elems });
                    if !deletion.is_live() {
                        o["deletion_info"] = json!({ "marked_deleted": iso(deletion.marked_for_delete_at), "local_delete_time": deletion.local_deletion_time });
                    }
                    o
                }
            }
        })
        .collect()
}

fn partition_json(key: &[u8], p: &Partition, header: &SerializationHeader) -> Value {
    let pk_types: Vec<CqlType> = header
        .partition_key_types
        .iter()
        .map(|t| parse_type(t))
        .collect();
    let comps: Vec<bytes::Bytes> = if pk_types.len() > 1 {
        let mut out = Vec::new();
        let mut pos = 0;
        while pos + 2 <= key.len() {
            let l = u16::from_be_bytes([key[pos], key[pos + 1]]) as usize;
            let end = (pos + 2 + l).min(key.len());
            out.push(bytes::Bytes::copy_from_slice(&key[pos + 2..end]));
            pos = end + 1;
        }
        out
    } else {
        vec![bytes::Bytes::copy_from_slice(key)]
    };
    let key_vals: Vec<String> = comps
        .iter()
        .enumerate()
        .map(|(i, c)| show(pk_types.get(i).unwrap_or(&CqlType::Blob), c))
        .collect();
    let mut part = json!({ "key": key_vals });
    if !p.deletion.is_live() {
        part["deletion_info"] = json!({ "marked_deleted": iso(p.deletion.marked_for_delete_at), "local_delete_time": p.deletion.local_deletion_time });
    }
    let ck_types: Vec<CqlType> = header
        .clustering_types
        .iter()
        .map(|t| parse_type(t))
        .collect();
    let mut rows = Vec::new();
    if let Some(sr) = &p.static_row {
        rows.push(json!({ "type": "static_block", "cells": row_json(sr, header) }));
    }
    for (ck, r) in &p.rows {
        let mut o = json!({
            "type": "row",
            "clustering": ck.values.iter().enumerate().map(|(i, v)| show(ck_types.get(i).unwrap_or(&CqlType::Blob), v)).collect::<Vec<_>>(),
            "cells": row_json(r, header),
        });
        if let Some(l) = &r.liveness {
            o["liveness_info"] = if l.ttl > 0 {
                json!({ "tstamp": iso(l.timestamp), "ttl": l.ttl, "expires_at": l.local_expiration_time })
            } else {
                json!({ "tstamp": iso(l.timestamp) })
            };
        }
        if let Some(d) = &r.deletion {
            o["deletion_info"] = json!({ "marked_deleted": iso(d.marked_for_delete_at), "local_delete_time": d.local_deletion_time });
        }
        rows.push(o);
    }
    for rt in &p.range_tombstones {
        rows.push(json!({
            "type": "range_tombstone",
            "start": { "clustering": rt.start.values.iter().enumerate().map(|(i, v)| show(ck_types.get(i).unwrap_or(&CqlType::Blob), v)).collect::<Vec<_>>(), "inclusive": rt.start.kind.is_inclusive() },
            "end": { "clustering": rt.end.values.iter().enumerate().map(|(i, v)| show(ck_types.get(i).unwrap_or(&CqlType::Blob), v)).collect::<Vec<_>>(), "inclusive": rt.end.kind.is_inclusive() },
            "deletion_info": { "marked_deleted": iso(rt.deletion.marked_for_delete_at), "local_delete_time": rt.deletion.local_deletion_time },
        }));
    }
    json!({ "partition": part, "rows": rows })
}

pub fn run(args: Vec<String>) -> anyhow::Result<()> {
    let (Some(cmd), Some(path)) = (args.first(), args.get(1)) else {
        outln!("{USAGE}");
        bail!("sstable needs a command and a path");
    };
    let path = PathBuf::from(path);
    match cmd.as_str() {
        "dump" => {
            let mut out = Vec::new();
            for (dir, g) in targets(&path)? {
                let r = open(&dir, g)?;
                for item in r.scanner().map_err(|e| anyhow::anyhow!(e.to_string()))? {
                    let (k, p) = item.map_err(|e| anyhow::anyhow!(e.to_string()))?;
                    out.push(partition_json(&k.key, &p, &r.stats.header));
                }
            }
            outln!("{}", serde_json::to_string_pretty(&Value::Array(out))?);
            Ok(())
        }
        "verify" => {
            let mut bad = 0;
            for (dir, g) in targets(&path)? {
                let name = sibyl_storage::sstable::component_path(&dir, g, "Data.db");
                let result = (|| -> anyhow::Result<u64> {
                    let r = open(&dir, g)?;
                    let mut last: Option<sibyl_storage::DecoratedKey> = None;
                    let mut n = 0;
                    for item in r.scanner().map_err(|e| anyhow::anyhow!(e.to_string()))? {
                        let (k, _) = item.map_err(|e| anyhow::anyhow!(e.to_string()))?;
                        if let Some(l) = &last {
                            if &k <= l {
                                bail!("partition keys out of token order after {} partitions", n);
                            }
                        }
                        last = Some(k);
                        n += 1;
                    }
                    if n != r.stats.partitions {
                        bail!(
                            "{} partitions found, statistics say {}",
                            n,
                            r.stats.partitions
                        );
                    }
                    Ok(n)
                })();
                match result {
                    Ok(n) => outln!("Verified {} ({} partitions): OK", name.display(), n),
                    Err(e) => {
                        bad += 1;
                        outln!("Verify of {} failed: {e}", name.display());
                    }
                }
            }
            if bad > 0 {
                bail!("{bad} SSTable(s) are corrupt");
            }
            Ok(())
        }
        other => bail!("unknown sstable command '{other}'\n{USAGE}"),
    }
}
