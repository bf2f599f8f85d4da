//! The cluster verbs of `sibyl nodetool`, printed as Cassandra 5.0's
//! nodetool prints them: status, ring, describecluster, gossipinfo,
//! getendpoints, statusgossip, version.

use crate::nodetool::{enc, human, request};
use anyhow::{bail, Context};
use serde_json::Value;

/// The stream throttle a `get/set[interdc]streamthroughput` verb is about:
/// its name in the output and the admin query that picks it.
fn throttle_of(cmd: &str) -> (&'static str, &'static str) {
    if cmd.contains("interdc") {
        ("inter-datacenter stream throughput", "?inter_dc=true")
    } else {
        ("stream throughput", "")
    }
}

/// Columns padded to their widest cell, joined by `sep` (Cassandra's
/// `TableBuilder`).
pub(crate) fn table(rows: &[Vec<String>], sep: &str) -> String {
    let n = rows.iter().map(|r| r.len()).max().unwrap_or(0);
    let widths: Vec<usize> = (0..n)
        .map(|i| {
            rows.iter()
                .map(|r| r.get(i).map(|c| c.chars().count()).unwrap_or(0))
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut out = String::new();
    for r in rows {
        // a short row is padded to every column, as Java's
        let cells: Vec<String> = (0..n)
            .map(|i| {
                format!(
                    "{:<w$}",
                    r.get(i).map(String::as_str).unwrap_or(""),
                    w = widths[i]
                )
            })
            .collect();
        out.push_str(&cells.join(sep));
        out.push('\n');
    }
    out
}

fn nodes(v: &Value) -> Vec<Value> {
    v["nodes"].as_array().cloned().unwrap_or_default()
}

fn s(v: &Value, k: &str) -> String {
    v[k].as_str().unwrap_or_default().to_string()
}

/// The data centers, in name order, each with its nodes in address order.
fn by_datacenter(v: &Value) -> Vec<(String, Vec<Value>)> {
    let mut dcs: std::collections::BTreeMap<String, Vec<Value>> = Default::default();
    for n in nodes(v) {
        dcs.entry(s(&n, "datacenter")).or_default().push(n);
    }
    dcs.into_iter()
        .map(|(dc, mut ns)| {
            ns.sort_by_key(|n| s(n, "address").parse::<std::net::IpAddr>().ok());
            (dc, ns)
        })
        .collect()
}

fn status_letter(n: &Value) -> &'static str {
    if n["status"].as_str() == Some("UP") {
        "U"
    } else {
        "D"
    }
}

/// The state as `nodetool status` (letter) and `nodetool ring` (word) show it.
fn state_of(n: &Value) -> (&'static str, &'static str) {
    match n["state"].as_str() {
        Some("JOINING") => ("J", "Joining"),
        Some("LEAVING") => ("L", "Leaving"),
        Some("MOVING") => ("M", "Moving"),
        _ => ("N", "Normal"),
    }
}

use sibyl_types::utc_millis;

/// The hinted handoff verbs.
fn handoff(host: &str, port: u16, cmd: &str, args: &[String]) -> anyhow::Result<bool> {
    let post = |q: String| request(host, port, "POST", &format!("/handoff?{q}")).map(|_| true);
    let arg = |what: &str| -> anyhow::Result<String> {
        match args.first() {
            Some(a) => Ok(a.clone()),
            None => bail!("{cmd} requires {what}"),
        }
    };
    match cmd {
        "statushandoff" => {
            let v = request(host, port, "GET", "/handoff")?;
            if v["enabled"].as_bool().unwrap_or(false) {
                outln!("Hinted handoff is running");
            } else {
                outln!("Hinted handoff is not running");
            }
            for dc in v["disabled_datacenters"].as_array().into_iter().flatten() {
                outln!(
                    "Data center {} is disabled",
                    dc.as_str().unwrap_or_default()
                );
            }
            Ok(true)
        }
        "enablehandoff" => post("enabled=true".into()),
        "disablehandoff" => post("enabled=false".into()),
        "pausehandoff" => post("paused=true".into()),
        "resumehandoff" => post("paused=false".into()),
        "enablehintsfordc" => post(format!(
            "dc={}&dc_enabled=true",
            enc(&arg("a data center")?)
        )),
        "disablehintsfordc" => post(format!(
            "dc={}&dc_enabled=false",
            enc(&arg("a data center")?)
        )),
        "setmaxhintwindow" => post(format!(
            "max_hint_window_ms={}",
            enc(&arg("a value in ms")?)
        )),
        "sethintedhandoffthrottlekb" => {
            post(format!("throttle_kb={}", enc(&arg("a value in KiB")?)))
        }
        "getmaxhintwindow" => {
            let v = request(host, port, "GET", "/handoff")?;
            outln!("Current max hint window: {} ms", v["max_hint_window_ms"]);
            Ok(true)
        }
        "truncatehints" => {
            let path = match args.first() {
                Some(e) => format!("/truncatehints?endpoint={}", enc(e)),
                None => "/truncatehints".into(),
            };
            request(host, port, "POST", &path)?;
            Ok(true)
        }
        "listpendinghints" => {
            let v = request(host, port, "GET", "/pendinghints")?;
            let pending = v["pending"].as_array().cloned().unwrap_or_default();
            if pending.is_empty() {
                outln!("This node does not have any pending hints");
                return Ok(true);
            }
            let mut rows = vec![[
                "Host ID",
                "Address",
                "Rack",
                "DC",
                "Status",
                "Total files",
                "Newest",
                "Oldest",
            ]
            .map(String::from)
            .to_vec()];
            for p in &pending {
                let or_unknown = |k: &str| p[k].as_str().unwrap_or("Unknown").to_string();
                rows.push(vec![
                    s(p, "host_id"),
                    or_unknown("address"),
                    or_unknown("rack"),
                    or_unknown("dc"),
                    or_unknown("status"),
                    p["files"].to_string(),
                    utc_millis(p["newest_ms"].as_i64().unwrap_or(0)),
                    utc_millis(p["oldest_ms"].as_i64().unwrap_or(0)),
                ]);
            }
            out!("{}", table(&rows, " "));
            Ok(true)
        }
        _ => Ok(false),
    }
}

pub fn run(
    host: &str,
    port: u16,
    cmd: &str,
    args: &[String],
    positional: &[String],
) -> anyhow::Result<bool> {
    if handoff(host, port, cmd, args)? {
        return Ok(true);
    }
    match cmd {
        "status" => {
            let path = match args.first() {
                Some(ks) => format!("/cluster?keyspace={}", enc(ks)),
                None => "/cluster".into(),
            };
            let v = request(host, port, "GET", &path)?;
            let effective = v["effective"].as_bool().unwrap_or(false);
            for (dc, ns) in by_datacenter(&v) {
                outln!("Datacenter: {dc}");
                outln!("{}", "=".repeat(12 + dc.len()));
                outln!("Status=Up/Down");
                outln!("|/ State=Normal/Leaving/Joining/Moving");
                let mut rows = vec![vec![
                    "--".to_string(),
                    "Address".into(),
                    "Load".into(),
                    "Tokens".into(),
                    if effective {
                        "Owns (effective)"
                    } else {
                        "Owns"
                    }
                    .into(),
                    "Host ID".into(),
                    "Rack".into(),
                ]];
                for n in &ns {
                    rows.push(vec![
                        format!("{}{}", status_letter(n), state_of(n).0),
                        s(n, "address"),
                        human(n["load_bytes"].as_u64().unwrap_or(0)),
                        n["tokens"]
                            .as_array()
                            .map(|t| t.len())
                            .unwrap_or(0)
                            .to_string(),
                        if effective {
                            format!("{:.1}%", n["owns"].as_f64().unwrap_or(0.0) * 100.0)
                        } else {
                            "?".into()
                        },
                        s(n, "host_id"),
                        s(n, "rack"),
                    ]);
                }
                out!("{}", table(&rows, "  "));
                outln!();
            }
            if !effective && args.is_empty() {
                outln!("Note: Non-system keyspaces don't have the same replication settings, effective ownership information is meaningless");
            }
            Ok(true)
        }
        "decommission" => {
            request(host, port, "POST", "/decommission")?;
            Ok(true)
        }
        "rebuild" => {
            let mut params: Vec<String> = Vec::new();
            let mut it = args.iter();
            while let Some(a) = it.next() {
                let mut value = |name: &str| -> anyhow::Result<String> {
                    let v = it.next().with_context(|| format!("{a} needs a value"))?;
                    Ok(format!("{name}={}", enc(v)))
                };
                match a.as_str() {
                    "-ks" | "--keyspace" => params.push(value("keyspace")?),
                    "-ts" | "--tokens" => params.push(value("tokens")?),
                    "-s" | "--sources" => params.push(value("sources")?),
                    "--exclude-local-dc" => params.push("exclude_local_dc=true".into()),
                    "--" => {}
                    o if o.starts_with('-') => bail!("rebuild: unknown option {o}"),
                    dc => params.push(format!("dc={}", enc(dc))),
                }
            }
            request(
                host,
                port,
                "POST",
                &format!("/rebuild?{}", params.join("&")),
            )?;
            Ok(true)
        }
        "removenode" => {
            match args.first().map(String::as_str) {
                None => anyhow::bail!("removenode requires a host ID (or status, force)"),
                Some("status") => {
                    let v = request(host, port, "GET", "/removenode/status")?;
                    outln!(
                        "RemovalStatus: {}",
                        v["status"].as_str().unwrap_or_default()
                    );
                }
                Some("force") => {
                    let v = request(host, port, "POST", "/removenode/force")?;
                    outln!(
                        "RemovalStatus: {}",
                        v["status"].as_str().unwrap_or_default()
                    );
                }
                Some(id) => {
                    request(
                        host,
                        port,
                        "POST",
                        &format!("/removenode?host_id={}", enc(id)),
                    )?;
                }
            }
            Ok(true)
        }
        "assassinate" => {
            let Some(a) = args.first() else {
                anyhow::bail!("assassinate requires an IP address");
            };
            request(
                host,
                port,
                "POST",
                &format!("/assassinate?address={}", enc(a)),
            )?;
            Ok(true)
        }
        // Cassandra 5.0.4's output, its quirks included (seen from its
        // nodetool): without -d a rate that is not a whole number of megabits
        // is an error (exit status 2); `getinterdcstreamthroughput` prints the
        // rate as a double before its line, and with -d says "stream
        // throughput" and ends without a newline
        "getstreamthroughput" | "getinterdcstreamthroughput" => {
            let (what, scope) = throttle_of(cmd);
            let inter_dc = !scope.is_empty();
            let v = request(host, port, "GET", &format!("/streamthroughput{scope}"))?;
            let b = v["bytes_per_second"].as_u64().unwrap_or(0);
            let has = |short: &str, long: &str| args.iter().any(|a| a == short || a == long);
            let megabits = b as f64 * 8.0 / 1_000_000.0;
            let double = crate::nodetool::java_double;
            if has("-m", "--mib") {
                if b == 0 {
                    outln!("Current {what}: unlimited");
                } else {
                    outln!("Current {what}: {} MiB/s", double(b as f64 / 1048576.0));
                }
            } else if has("-d", "--precise-mbit") {
                let line = if b == 0 {
                    "Current stream throughput: unlimited".to_string()
                } else {
                    format!("Current stream throughput: {} Mb/s", double(megabits))
                };
                if inter_dc {
                    out!("{line}");
                } else {
                    outln!("{line}");
                }
            } else if b == 0 {
                outln!("Current {what}: unlimited");
            } else if megabits.fract() != 0.0 {
                let e = "Use the -d flag to quiet this error and get the exact throughput in megabits/s";
                outln!("error: {e}\n-- StackTrace --\njava.lang.RuntimeException: {e}");
                std::process::exit(2);
            } else if inter_dc {
                outln!("{}Current {what}: {megabits} Mb/s", double(megabits));
            } else {
                outln!("Current {what}: {megabits} Mb/s");
            }
            Ok(true)
        }
        "setstreamthroughput" | "setinterdcstreamthroughput" => {
            let (_, scope) = throttle_of(cmd);
            let mib = args.iter().any(|a| a == "-m" || a == "--mib");
            let Some(v) = positional.first() else {
                anyhow::bail!("{cmd} requires stream throughput");
            };
            // a Java int, megabits per second (MiB/s with -m)
            let Ok(n) = v.parse::<i32>() else {
                let key = if scope.is_empty() {
                    "stream_throughput"
                } else {
                    "inter_dc_stream_throughput"
                };
                outln!(
                    "{}",
                    crate::nodetool_cli::UsageError(format!(
                        "{key}: can not convert \"{v}\" to a int"
                    ))
                );
                std::process::exit(1);
            };
            let n = u64::try_from(n).unwrap_or(0);
            let bytes = if mib { n * 1048576 } else { n * 1_000_000 / 8 };
            request(
                host,
                port,
                "POST",
                &format!(
                    "/streamthroughput{}bytes_per_second={bytes}",
                    if scope.is_empty() {
                        "?"
                    } else {
                        "?inter_dc=true&"
                    }
                ),
            )?;
            Ok(true)
        }
        "netstats" => {
            let v = request(host, port, "GET", "/netstats")?;
            outln!("Mode: {}", s(&v, "mode"));
            let sessions = v["sessions"].as_array().cloned().unwrap_or_default();
            let active: Vec<&Value> = sessions
                .iter()
                .filter(|x| !x["finished"].as_bool().unwrap_or(true))
                .collect();
            if active.is_empty() {
                outln!("Not sending any streams.");
            }
            for st in active {
                outln!("{} {}", s(st, "operation"), s(st, "id"));
                outln!("    /{}", s(st, "peer"));
                let total = st["ranges_total"].as_u64().unwrap_or(0);
                let done = st["ranges_done"].as_u64().unwrap_or(0);
                let pct = if total == 0 {
                    100.0
                } else {
                    done as f64 * 100.0 / total as f64
                };
                outln!(
                    "        Receiving {total} ranges. Already received {done} ranges ({pct:.2}%), {} partitions, {} bytes total",
                    st["partitions"].as_u64().unwrap_or(0),
                    st["bytes"].as_u64().unwrap_or(0)
                );
            }
            outln!("Read Repair Statistics:");
            outln!(
                "Attempted: {}",
                v["read_repair_attempted"].as_u64().unwrap_or(0)
            );
            outln!(
                "Mismatch (Blocking): {}",
                v["read_repair_attempted"].as_u64().unwrap_or(0)
            );
            outln!("Mismatch (Background): 0");
            // Cassandra's "%-25s%10s%10s%15s%10s%n"
            outln!(
                "{:<25}{:>10}{:>10}{:>15}{:>10}",
                "Pool Name",
                "Active",
                "Pending",
                "Completed",
                "Dropped"
            );
            for p in v["pools"].as_array().into_iter().flatten() {
                outln!(
                    "{:<25}{:>10}{:>10}{:>15}{:>10}",
                    s(p, "name"),
                    "n/a",
                    p["pending"].as_i64().unwrap_or(0),
                    p["completed"].as_u64().unwrap_or(0),
                    p["dropped"].as_u64().unwrap_or(0)
                );
            }
            Ok(true)
        }
        "autorepairstatus" => {
            let v = request(host, port, "GET", "/autorepair")?;
            let state = if !v["enabled"].as_bool().unwrap_or(false) {
                "disabled".to_string()
            } else if let Some(p) = v["paused"].as_str() {
                format!("paused ({p})")
            } else if let Some(r) = v["running"].as_str() {
                format!("repairing {r}")
            } else {
                "idle".to_string()
            };
            let interval = v["interval_ms"].as_u64().unwrap_or(0);
            outln!("Auto repair: {state}");
            outln!(
                "Interval: {}, {}",
                sibyl_types::pretty::duration_words(interval),
                if v["incremental"].as_bool().unwrap_or(true) {
                    "incremental"
                } else {
                    "full"
                }
            );
            let now = sibyl_types::now_millis();
            let mut rows = vec![vec![
                "Keyspace".to_string(),
                "Table".into(),
                "Last repaired".into(),
                "Next due".into(),
                "Last error".into(),
            ]];
            for t in v["tables"].as_array().into_iter().flatten() {
                let last = t["last_repaired_ms"].as_i64();
                let ago = |ms: i64| sibyl_types::pretty::duration_words(ms.max(0) as u64) + " ago";
                rows.push(vec![
                    t["keyspace"].as_str().unwrap_or("").to_string(),
                    t["table"].as_str().unwrap_or("").to_string(),
                    last.map_or("never".into(), |at| ago(now - at)),
                    match last {
                        Some(at) if at + interval as i64 > now => format!(
                            "in {}",
                            sibyl_types::pretty::duration_words(
                                (at + interval as i64 - now) as u64
                            )
                        ),
                        _ => "now".into(),
                    },
                    t["last_error"].as_str().unwrap_or("").to_string(),
                ]);
            }
            out!("{}", table(&rows, " "));
            Ok(true)
        }
        "setautorepairconfig" => {
            let (Some(key), Some(value)) = (positional.first(), positional.get(1)) else {
                bail!("setautorepairconfig needs a setting and its value");
            };
            if key != "enabled" || !matches!(value.as_str(), "true" | "false") {
                bail!("setautorepairconfig: only 'enabled true|false' is supported");
            }
            request(host, port, "POST", &format!("/autorepair?enabled={value}"))?;
            Ok(true)
        }
        "upgradesstables" => {
            // -j only bounds parallelism: each table's SSTables are rewritten
            // one at a time here
            let mut params = Vec::new();
            if args
                .iter()
                .any(|a| a == "-a" || a == "--include-all-sstables")
            {
                params.push("all=true".to_string());
            }
            if let Some(ks) = positional.first() {
                params.push(format!("keyspace={}", enc(ks)));
            }
            let tables: Vec<&str> = positional.iter().skip(1).map(|s| s.as_str()).collect();
            if !tables.is_empty() {
                params.push(format!("table={}", enc(&tables.join(","))));
            }
            request(
                host,
                port,
                "POST",
                &format!("/upgradesstables?{}", params.join("&")),
            )?;
            Ok(true)
        }
        "cleanup" => {
            let mut params = Vec::new();
            if let Some(ks) = positional.first() {
                params.push(format!("keyspace={}", enc(ks)));
            }
            let mut freed_total = 0u64;
            let tables: Vec<&String> = positional.iter().skip(1).collect();
            let mut answers = Vec::new();
            if tables.is_empty() {
                answers.push(request(
                    host,
                    port,
                    "POST",
                    &format!("/cleanup?{}", params.join("&")),
                )?);
            }
            for t in tables {
                answers.push(request(
                    host,
                    port,
                    "POST",
                    &format!("/cleanup?{}&table={}", params.join("&"), enc(t)),
                )?);
            }
            for v in answers {
                for t in v["tables"].as_array().into_iter().flatten() {
                    let before = t["bytes_before"].as_u64().unwrap_or(0);
                    let after = t["bytes_after"].as_u64().unwrap_or(0);
                    freed_total += before.saturating_sub(after);
                    outln!(
                        "Cleaned up {}: {} -> {} ({} freed)",
                        s(t, "table"),
                        human(before),
                        human(after),
                        human(before.saturating_sub(after))
                    );
                }
            }
            outln!("Total freed: {}", human(freed_total));
            Ok(true)
        }
        "repair" => {
            let mut params: Vec<String> = Vec::new();
            let mut positional: Vec<&String> = Vec::new();
            let mut it = args.iter();
            while let Some(a) = it.next() {
                match a.as_str() {
                    "-full" | "--full" => params.push("full=true".into()),
                    "-seq" | "--sequential" | "-inc" => {}
                    "-pr" | "--partitioner-range" => params.push("pr=true".into()),
                    "-dcpar" | "--dc-parallel" => {}
                    "--in-local-dc" | "-local" | "--in-local-datacenter" => {
                        params.push("local_dc=true".into())
                    }
                    "-st" | "--start-token" => match it.next() {
                        Some(t) => params.push(format!("st={}", enc(t))),
                        None => bail!("-st needs a token"),
                    },
                    "-et" | "--end-token" => match it.next() {
                        Some(t) => params.push(format!("et={}", enc(t))),
                        None => bail!("-et needs a token"),
                    },
                    "-j" | "--job-threads" => match it.next() {
                        Some(n) => params.push(format!("j={}", enc(n))),
                        None => bail!("-j needs a number"),
                    },
                    o if o.starts_with('-') => bail!("repair: unknown option {o}"),
                    _ => positional.push(a),
                }
            }
            if let Some(ks) = positional.first() {
                params.push(format!("keyspace={}", enc(ks)));
            }
            if positional.len() > 1 {
                let t: Vec<&str> = positional[1..].iter().map(|s| s.as_str()).collect();
                params.push(format!("tables={}", enc(&t.join(","))));
            }
            let v = request(host, port, "POST", &format!("/repair?{}", params.join("&")))?;
            for l in v["lines"].as_array().into_iter().flatten() {
                outln!("{}", l.as_str().unwrap_or_default());
            }
            Ok(true)
        }
        "ring" => {
            let v = request(host, port, "GET", "/cluster")?;
            let effective = v["effective"].as_bool().unwrap_or(false);
            let line = |c: [&str; 7]| {
                outln!(
                    "{:<16}{:<12}{:<7}{:<8}{:<16}{:<20}{:<44}",
                    c[0],
                    c[1],
                    c[2],
                    c[3],
                    c[4],
                    c[5],
                    c[6]
                )
            };
            for (dc, ns) in by_datacenter(&v) {
                outln!();
                outln!("Datacenter: {dc}");
                outln!("==========");
                let mut all: Vec<(i64, &Value)> = Vec::new();
                for n in &ns {
                    for t in n["tokens"].as_array().into_iter().flatten() {
                        if let Some(t) = t.as_i64() {
                            all.push((t, n));
                        }
                    }
                }
                all.sort_by_key(|(t, _)| *t);
                line([
                    "Address", "Rack", "Status", "State", "Load", "Owns", "Token",
                ]);
                if let Some((last, _)) = all.last() {
                    line(["", "", "", "", "", "", &last.to_string()]);
                }
                for (t, n) in &all {
                    let owns = if effective {
                        format!("{:.2}%", n["owns"].as_f64().unwrap_or(0.0) * 100.0)
                    } else {
                        "?".into()
                    };
                    line([
                        &s(n, "address"),
                        &s(n, "rack"),
                        if status_letter(n) == "U" {
                            "Up"
                        } else {
                            "Down"
                        },
                        state_of(n).1,
                        &human(n["load_bytes"].as_u64().unwrap_or(0)),
                        &owns,
                        &t.to_string(),
                    ]);
                }
                outln!();
            }
            if !effective {
                outln!();
                outln!("  Note: Non-system keyspaces don't have the same replication settings, effective ownership information is meaningless");
            }
            Ok(true)
        }
        "describecluster" => {
            let v = request(host, port, "GET", "/cluster")?;
            outln!("Cluster Information:");
            outln!("\tName: {}", s(&v, "cluster_name"));
            outln!("\tSnitch: {}", s(&v, "snitch"));
            outln!("\tDynamicEndPointSnitch: enabled");
            outln!("\tPartitioner: org.apache.cassandra.dht.Murmur3Partitioner");
            outln!("\tSchema versions:");
            let mut versions: std::collections::BTreeMap<String, Vec<String>> = Default::default();
            let mut unreachable = Vec::new();
            for n in nodes(&v) {
                let addr = s(&n, "address");
                if status_letter(&n) == "D" {
                    unreachable.push(addr);
                    continue;
                }
                versions
                    .entry(
                        n["schema_version"]
                            .as_str()
                            .unwrap_or("UNKNOWN")
                            .to_string(),
                    )
                    .or_default()
                    .push(addr);
            }
            if !unreachable.is_empty() {
                versions.insert("UNREACHABLE".into(), unreachable);
            }
            for (ver, mut addrs) in versions {
                addrs.sort_by_key(|a| a.parse::<std::net::IpAddr>().ok());
                outln!("\t\t{ver}: [{}]", addrs.join(", "));
            }
            outln!();
            outln!("Stats for all nodes:");
            let ns = nodes(&v);
            let live = ns.iter().filter(|n| status_letter(n) == "U").count();
            outln!("\tLive: {live}");
            outln!("\tJoining: 0");
            outln!("\tMoving: 0");
            outln!("\tLeaving: 0");
            outln!("\tUnreachable: {}", ns.len() - live);
            outln!();
            outln!("Data Centers: ");
            for (dc, ns) in by_datacenter(&v) {
                let down = ns.iter().filter(|n| status_letter(n) == "D").count();
                outln!("\t{dc} #Nodes: {} #Down: {down}", ns.len());
            }
            outln!();
            outln!("Database versions:");
            // each node's release as the metadata log recorded it
            let mut by_release: std::collections::BTreeMap<String, Vec<&Value>> =
                Default::default();
            for n in &ns {
                by_release
                    .entry(s(n, "release_version"))
                    .or_default()
                    .push(n);
            }
            for (release, mut a) in by_release {
                a.sort_by_key(|n| s(n, "address").parse::<std::net::IpAddr>().ok());
                let addrs: Vec<String> = a
                    .iter()
                    .map(|n| format!("{}:{}", s(n, "address"), n["storage_port"]))
                    .collect();
                outln!("\t{release}: [{}]", addrs.join(", "));
            }
            outln!();
            outln!("Keyspaces:");
            for k in v["keyspaces"].as_array().into_iter().flatten() {
                outln!(
                    "\t{} -> Replication class: {} {{{}}}",
                    s(k, "name"),
                    s(k, "class"),
                    s(k, "options")
                );
            }
            if !v["effective"].as_bool().unwrap_or(false) {
                outln!();
                outln!("Note: Non-system keyspaces don't have the same replication settings, effective ownership information is meaningless");
            }
            Ok(true)
        }
        "gossipinfo" => {
            let v = request(host, port, "GET", "/gossipinfo")?;
            out!("{}", s(&v, "text"));
            Ok(true)
        }
        "statusgossip" => {
            let v = request(host, port, "GET", "/gossipinfo")?;
            outln!(
                "{}",
                if v["running"].as_bool().unwrap_or(false) {
                    "running"
                } else {
                    "not running"
                }
            );
            Ok(true)
        }
        "version" => {
            let v = request(host, port, "GET", "/info")?;
            outln!("ReleaseVersion: {}", s(&v, "release_version"));
            Ok(true)
        }
        "getendpoints" => {
            let [ks, t, key] = args else {
                bail!("getendpoints requires keyspace, table and partition key arguments");
            };
            let q = format!(
                "/endpoints?keyspace={}&table={}&key={}",
                enc(ks),
                enc(t),
                enc(key)
            );
            let v = request(host, port, "GET", &q)?;
            for e in v["endpoints"].as_array().into_iter().flatten() {
                outln!("{}", e.as_str().unwrap_or_default());
            }
            Ok(true)
        }
        _ => Ok(false),
    }
}
