//! `sibyl nodetool`: Cassandra's operator verbs against a node's admin
//! interface, printed the way Cassandra's nodetool prints them.

use anyhow::{bail, Context};
use serde_json::Value;
use std::io::{Read, Write};

pub const USAGE: &str = "usage: sibyl nodetool [-h HOST] [-p PORT] <command> [args]

commands:
  status [keyspace]              every node: state, load, tokens, effective ownership
  ring                           every token and its node
  describecluster                name, snitch, partitioner, schema versions per node
  gossipinfo                     what gossip knows of every node
  statusgossip                   whether gossip runs
  getendpoints keyspace table key
                                 the replicas of a partition key
  version                        the Cassandra release Sibyl follows
  info                           node information
  flush [keyspace [tables...]]   flush memtables to SSTables
  invalidatekeycache             empty the key cache
  invalidaterowcache             empty the row cache
  tablehistograms keyspace table   latency, SSTables per read, partition size and cell count percentiles
  compact [-s] [keyspace [tables...]]
                                 major compaction (-s: split the output)
  drain                          flush everything and stop the node
  compactionstats                pending and running compactions
  compactionhistory              finished compactions
  tablestats [keyspace[.table]]  per-table statistics
  snapshot [-t TAG] [keyspace]   hard-link the SSTables into snapshots/TAG
  listsnapshots                  the snapshots and their sizes
  clearsnapshot [-t TAG] [--all] [keyspace]
                                 remove snapshots
  getcompactionthroughput        compaction throughput limit
  setcompactionthroughput MB     set it (MiB/s, 0 = unthrottled)";

pub(crate) fn request(host: &str, port: u16, method: &str, path: &str) -> anyhow::Result<Value> {
    let mut s = std::net::TcpStream::connect((host, port))
        .with_context(|| format!("cannot reach the node's admin interface at {host}:{port}"))?;
    s.set_read_timeout(Some(std::time::Duration::from_secs(3600)))?;
    write!(s, "{method} {path} HTTP/1.1\r\nHost: {host}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")?;
    let mut resp = String::new();
    s.read_to_string(&mut resp)?;
    let (head, body) = resp.split_once("\r\n\r\n").unwrap_or((&resp, ""));
    let v: Value =
        serde_json::from_str(body).with_context(|| format!("bad answer from the node: {head}"))?;
    if let Some(e) = v.get("error") {
        bail!("{}", e.as_str().unwrap_or("error"));
    }
    Ok(v)
}

pub(crate) fn human(bytes: u64) -> String {
    let b = bytes as f64;
    if b < 1024.0 {
        format!("{bytes} bytes")
    } else if b < 1024.0 * 1024.0 {
        format!("{:.2} KiB", b / 1024.0)
    } else if b < 1024.0 * 1024.0 * 1024.0 {
        format!("{:.2} MiB", b / 1024.0 / 1024.0)
    } else {
        format!("{:.2} GiB", b / 1024.0 / 1024.0 / 1024.0)
    }
}

/// A value for a query string: everything but unreserved characters as `%XX`.
pub(crate) fn enc(v: &str) -> String {
    let mut out = String::with_capacity(v.len());
    for b in v.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// The tables a verb names, as the admin interface takes them: each argument
/// a keyspace or `ks.table`, all of them (not only the first).
fn scope(args: &[String]) -> String {
    let mut q = Vec::new();
    for a in args {
        match a.split_once('.') {
            Some(_) => q.push(format!("table={}", enc(a))),
            None => q.push(format!("keyspace={}", enc(a))),
        }
    }
    if q.is_empty() {
        String::new()
    } else {
        format!("?{}", q.join("&"))
    }
}

pub fn run(args: Vec<String>) -> anyhow::Result<()> {
    let mut host = "127.0.0.1".to_string();
    let mut port: u16 = 7199;
    let mut rest = Vec::new();
    let mut it = args.into_iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "-h" | "--host" => host = it.next().context("-h needs a host")?,
            "-p" | "--port" => {
                port = it
                    .next()
                    .context("-p needs a port")?
                    .parse()
                    .context("-p needs a number")?
            }
            "help" | "--help" => {
                outln!("{USAGE}");
                return Ok(());
            }
            _ => rest.push(a),
        }
    }
    let Some(cmd) = rest.first().cloned() else {
        outln!("{USAGE}");
        bail!("no command given");
    };
    // `compact -s` / `--split-output`: size-tiered major compaction into files of
    // half, a quarter, ... of the data instead of one
    let split = cmd == "compact" && rest[1..].iter().any(|a| a == "-s" || a == "--split-output");
    let args: Vec<String> = rest[1..]
        .iter()
        .filter(|a| !(cmd == "compact" && (*a == "-s" || *a == "--split-output")))
        .cloned()
        .collect();
    let args = &args[..];
    let extra = if split { "split=true" } else { "" };
    let per_table = |verb: &str| -> anyhow::Result<()> {
        let with = |path: String| {
            if extra.is_empty() {
                path
            } else if path.contains('?') {
                format!("{path}&{extra}")
            } else {
                format!("{path}?{extra}")
            }
        };
        if args.len() <= 1 {
            request(
                &host,
                port,
                "POST",
                &with(format!("/{verb}{}", scope(args))),
            )?;
        } else {
            for t in &args[1..] {
                request(
                    &host,
                    port,
                    "POST",
                    &with(format!(
                        "/{verb}?keyspace={}&table={}",
                        enc(&args[0]),
                        enc(t)
                    )),
                )?;
            }
        }
        Ok(())
    };
    if crate::nodetool_cluster::run(&host, port, &cmd, args)? {
        return Ok(());
    }
    match cmd.as_str() {
        "flush" => per_table("flush"),
        "compact" => per_table("compact"),
        "drain" => {
            request(&host, port, "POST", "/drain")?;
            Ok(())
        }
        "info" => {
            // Cassandra 5.0's order and label width (23)
            let v = request(&host, port, "GET", "/info")?;
            let line = |label: &str, value: String| outln!("{label:<23}: {value}");
            line("ID", v["host_id"].as_str().unwrap_or("").into());
            line(
                "Gossip active",
                v["gossip_active"].as_bool().unwrap_or(true).to_string(),
            );
            line(
                "Native Transport active",
                v["native_transport_active"]
                    .as_bool()
                    .unwrap_or(false)
                    .to_string(),
            );
            line("Load", human(v["load_bytes"].as_u64().unwrap_or(0)));
            line("Generation No", v["generation"].to_string());
            line("Uptime (seconds)", v["uptime_seconds"].to_string());
            line("Data Center", v["datacenter"].as_str().unwrap_or("").into());
            line("Rack", v["rack"].as_str().unwrap_or("").into());
            line("Exceptions", "0".into());
            for (label, c) in [
                ("Key Cache", &v["key_cache"]),
                ("Row Cache", &v["row_cache"]),
            ] {
                let (hits, requests) = (
                    c["hits"].as_u64().unwrap_or(0),
                    c["requests"].as_u64().unwrap_or(0),
                );
                let rate = if requests == 0 {
                    "NaN".to_string()
                } else {
                    format!("{:.3}", hits as f64 / requests as f64)
                };
                line(
                    label,
                    format!(
                        "entries {}, size {}, capacity {}, {hits} hits, {requests} requests, {rate} recent hit rate, 0 save period in seconds",
                        c["entries"],
                        human(c["size"].as_u64().unwrap_or(0)),
                        human(c["capacity"].as_u64().unwrap_or(0)),
                    ),
                );
            }
            line(
                "Chunk Cache",
                format!(
                    "entries -, {} hits, {} misses",
                    v["chunk_cache_hits"], v["chunk_cache_misses"]
                ),
            );
            line("Percent Repaired", "100.0%".into());
            line(
                "Token",
                format!(
                    "(invoke with -T/--tokens to see all {} tokens)",
                    v["tokens"]
                ),
            );
            line("Bootstrap state", "COMPLETED".into());
            line("Bootstrap failed", "false".into());
            line("Decommissioning", "false".into());
            line("Decommission failed", "false".into());
            Ok(())
        }
        "invalidatekeycache" | "invalidaterowcache" => {
            request(&host, port, "POST", &format!("/{cmd}"))?;
            Ok(())
        }
        "compactionstats" => {
            let v = request(&host, port, "GET", "/compactionstats")?;
            outln!("pending tasks: {}", v["pending"]);
            let running = v["running"].as_array().cloned().unwrap_or_default();
            if !running.is_empty() {
                outln!(
                    "{:<38} {:<16} {:<16} {:<16} {:>12} {:>12} {:<10} progress",
                    "id",
                    "compaction type",
                    "keyspace",
                    "table",
                    "completed",
                    "total",
                    "unit"
                );
                for r in running {
                    let done = r["completed"].as_u64().unwrap_or(0);
                    let total = r["total"].as_u64().unwrap_or(1).max(1);
                    outln!(
                        "{:<38} {:<16} {:<16} {:<16} {:>12} {:>12} {:<10} {:.2}%",
                        r["id"].as_str().unwrap_or(""),
                        "Compaction",
                        r["keyspace"].as_str().unwrap_or(""),
                        r["table"].as_str().unwrap_or(""),
                        done,
                        total,
                        r["unit"].as_str().unwrap_or(""),
                        100.0 * done as f64 / total as f64
                    );
                }
            }
            Ok(())
        }
        "compactionhistory" => {
            let v = request(&host, port, "GET", "/compactionhistory")?;
            outln!("Compaction History:");
            outln!(
                "{:<16} {:<16} {:<15} {:>12} {:>12} {:>14} {:>15}",
                "keyspace_name",
                "columnfamily_name",
                "compacted_at",
                "bytes_in",
                "bytes_out",
                "partitions_in",
                "partitions_out"
            );
            for r in v["history"].as_array().cloned().unwrap_or_default() {
                outln!(
                    "{:<16} {:<16} {:<15} {:>12} {:>12} {:>14} {:>15}",
                    r["keyspace"].as_str().unwrap_or(""),
                    r["table"].as_str().unwrap_or(""),
                    r["compacted_at"],
                    r["bytes_in"],
                    r["bytes_out"],
                    r["partitions_in"],
                    r["partitions_out"]
                );
            }
            Ok(())
        }
        "tablestats" | "cfstats" => {
            let v = request(&host, port, "GET", &format!("/tablestats{}", scope(args)))?;
            let tables = v["tables"].as_array().cloned().unwrap_or_default();
            outln!("Total number of tables: {}", tables.len());
            outln!("----------------");
            let mut last_ks = String::new();
            for t in tables {
                let ks = t["keyspace"].as_str().unwrap_or("").to_string();
                if ks != last_ks {
                    outln!("Keyspace : {ks}");
                    last_ks = ks;
                }
                outln!("\t\tTable: {}", t["table"].as_str().unwrap_or(""));
                outln!("\t\tSSTable count: {}", t["sstable_count"]);
                outln!("\t\tSpace used (live): {}", t["space_used_live"]);
                outln!("\t\tMemtable data size: {}", t["memtable_data_size"]);
                outln!("\t\tMemtable switch count: {}", t["flushes"]);
                let latency = |v: &serde_json::Value| {
                    v.as_f64()
                        .map(|x| format!("{x:.3} ms"))
                        .unwrap_or_else(|| "NaN ms".into())
                };
                outln!("\t\tLocal read count: {}", t["local_read_count"]);
                outln!(
                    "\t\tLocal read latency: {}",
                    latency(&t["local_read_latency_ms"])
                );
                outln!("\t\tLocal write count: {}", t["local_write_count"]);
                outln!(
                    "\t\tLocal write latency: {}",
                    latency(&t["local_write_latency_ms"])
                );
                outln!("\t\tPending flushes: {}", t["pending_flushes"]);
                outln!(
                    "\t\tBloom filter false positives: {}",
                    t["bloom_filter_false_positives"]
                );
                outln!(
                    "\t\tNumber of partitions (estimate): {}",
                    t["sstable_partitions"]
                );
                outln!(
                    "\t\tCompacted partition minimum bytes: {}",
                    t["partition_min_bytes"]
                );
                outln!(
                    "\t\tCompacted partition maximum bytes: {}",
                    t["partition_max_bytes"]
                );
                outln!(
                    "\t\tCompacted partition mean bytes: {}",
                    t["partition_mean_bytes"]
                );
                outln!();
            }
            Ok(())
        }
        "tablehistograms" | "cfhistograms" => {
            // `ks table`, `ks.table` and `ks/table` all name one table
            let scope_args: Vec<String> = match args {
                [ks, table, ..] => vec![format!("{ks}.{table}")],
                [one] => vec![one.replacen('/', ".", 1)],
                [] => vec![],
            };
            let v = request(
                &host,
                port,
                "GET",
                &format!("/tablehistograms{}", scope(&scope_args)),
            )?;
            for t in v["tables"].as_array().cloned().unwrap_or_default() {
                outln!(
                    "{}/{} histograms",
                    t["keyspace"].as_str().unwrap_or(""),
                    t["table"].as_str().unwrap_or("")
                );
                outln!(
                    "{:<10}{:>18}{:>18}{:>18}{:>18}{:>18}",
                    "Percentile",
                    "Read Latency",
                    "Write Latency",
                    "SSTables",
                    "Partition Size",
                    "Cell Count"
                );
                outln!(
                    "{:<10}{:>18}{:>18}{:>18}{:>18}{:>18}",
                    "",
                    "(micros)",
                    "(micros)",
                    "",
                    "(bytes)",
                    ""
                );
                let col = |k: &str, i: usize| t[k].get(i).and_then(|x| x.as_u64()).unwrap_or(0);
                for (i, label) in ["50%", "75%", "95%", "98%", "99%", "Min", "Max"]
                    .iter()
                    .enumerate()
                {
                    outln!(
                        "{:<10}{:>18.2}{:>18.2}{:>18.2}{:>18}{:>18}",
                        label,
                        col("read_latency_micros", i) as f64,
                        col("write_latency_micros", i) as f64,
                        col("sstables", i) as f64,
                        col("partition_size_bytes", i),
                        col("cell_count", i)
                    );
                }
                outln!();
            }
            Ok(())
        }
        "snapshot" | "clearsnapshot" => {
            let mut tag = None;
            let mut all = false;
            let mut ks = Vec::new();
            let mut i = 0;
            while i < args.len() {
                match args[i].as_str() {
                    "-t" | "--tag" => {
                        tag = args.get(i + 1).cloned();
                        i += 1;
                    }
                    "--all" => all = true,
                    other => ks.push(other.to_string()),
                }
                i += 1;
            }
            if cmd == "clearsnapshot" && tag.is_none() && !all {
                bail!("Specify snapshot name or --all");
            }
            let mut q = scope(&ks);
            let extra = match (&tag, all) {
                (Some(t), _) => format!("tag={}", enc(t)),
                (None, true) => "all=true".to_string(),
                (None, false) => String::new(),
            };
            if !extra.is_empty() {
                q = if q.is_empty() {
                    format!("?{extra}")
                } else {
                    format!("{q}&{extra}")
                };
            }
            let v = request(&host, port, "POST", &format!("/{cmd}{q}"))?;
            if cmd == "snapshot" {
                outln!(
                    "Requested creating snapshot(s) for [{}] with snapshot name [{}]",
                    if ks.is_empty() {
                        "all keyspaces".to_string()
                    } else {
                        ks.join(", ")
                    },
                    v["tag"].as_str().unwrap_or("")
                );
                outln!("Snapshot directory: {}", v["tag"].as_str().unwrap_or(""));
            } else {
                outln!(
                    "Requested clearing snapshot(s) for [{}]",
                    if ks.is_empty() {
                        "all keyspaces".to_string()
                    } else {
                        ks.join(", ")
                    }
                );
            }
            Ok(())
        }
        "listsnapshots" => {
            let v = request(&host, port, "GET", "/snapshots")?;
            let snaps = v["snapshots"].as_array().cloned().unwrap_or_default();
            outln!("Snapshot Details: ");
            if snaps.is_empty() {
                outln!("There are no snapshots");
                return Ok(());
            }
            outln!(
                "{:<28} {:<16} {:<20} {:>14} {:>14}",
                "Snapshot name",
                "Keyspace name",
                "Column family name",
                "True size",
                "Size on disk"
            );
            let mut total = 0;
            for s in snaps {
                total += s["true_size"].as_u64().unwrap_or(0);
                outln!(
                    "{:<28} {:<16} {:<20} {:>14} {:>14}",
                    s["tag"].as_str().unwrap_or(""),
                    s["keyspace"].as_str().unwrap_or(""),
                    s["table"].as_str().unwrap_or(""),
                    human(s["true_size"].as_u64().unwrap_or(0)),
                    human(s["size_on_disk"].as_u64().unwrap_or(0))
                );
            }
            outln!();
            outln!("Total TrueDiskSpaceUsed: {}", human(total));
            Ok(())
        }
        "getcompactionthroughput" => {
            let v = request(&host, port, "GET", "/compactionthroughput")?;
            outln!("Current compaction throughput: {} MiB/s", v["mb_per_sec"]);
            Ok(())
        }
        "setcompactionthroughput" => {
            let mb = args
                .first()
                .context("setcompactionthroughput needs a value in MiB/s")?;
            request(
                &host,
                port,
                "POST",
                &format!("/compactionthroughput?mb_per_sec={}", enc(mb)),
            )?;
            Ok(())
        }
        other => bail!("unknown command '{other}'\n{USAGE}"),
    }
}
