//! `sibyl cluster`: a local cluster on one machine, like `ccm`. Node K lives
//! in `DIR/nodeK/` and listens on 127.0.0.K with the same ports as the
//! others; `DIR/cluster.json` records the layout. Every cluster test uses it.

use anyhow::{bail, Context};
use serde_json::{json, Value};
use std::net::{IpAddr, TcpStream};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

pub const USAGE: &str = "usage: sibyl cluster <command> --dir DIR [args]

commands:
  create --dir DIR --nodes N [--port 9042] [--admin-port 7199] [--storage-port 7000]
         [--dcs D] [--racks R] [--name NAME] [--start] [-- KEY=VALUE ...]
                          lay out nodes node1..nodeN in DIR (node K on 127.0.0.K);
                          KEY=VALUE pairs go into every node's configuration
  start [NODE...] [-- ARG...]
                          start nodes (all by default); returns when they answer
                          CQL and see each other; ARGs go to each node's command
                          line (-Dcassandra.replace_address_first_boot=IP, ...)
  stop [NODE...]          stop nodes (SIGTERM, then SIGKILL after 30 s)
  kill NODE...            SIGKILL
  pause NODE... / resume NODE...
                          SIGSTOP / SIGCONT
  status                  one line per node: name, address, pid, UP/DOWN
  partition NODE... [--from NODE...]
                          drop messages between the named nodes and the others
                          (or those after --from), both ways
  heal                    remove every partition and delay
  delay NODE... --ms N [--jitter-ms J]
                          hold back messages to and from the named nodes
  add                     a new node at the next address (created, not started)
  remove NODE             stop a node and remove it from DIR
  nodetool NODE VERB...   run `sibyl nodetool` against a node";

/// One node of the layout.
#[derive(Debug, Clone)]
struct NodeLayout {
    name: String,
    address: IpAddr,
    datacenter: String,
    rack: String,
}

/// The cluster as `cluster.json` records it.
#[derive(Debug, Clone)]
struct Layout {
    dir: PathBuf,
    name: String,
    native_port: u16,
    admin_port: u16,
    storage_port: u16,
    extra: Vec<(String, String)>,
    nodes: Vec<NodeLayout>,
}

impl Layout {
    fn load(dir: &Path) -> anyhow::Result<Layout> {
        let path = dir.join("cluster.json");
        let text = std::fs::read_to_string(&path).with_context(|| {
            format!(
                "no cluster in {} (run `sibyl cluster create`)",
                dir.display()
            )
        })?;
        let v: Value =
            serde_json::from_str(&text).with_context(|| format!("{}", path.display()))?;
        let s = |k: &str| v[k].as_str().unwrap_or_default().to_string();
        let port = |k: &str| v[k].as_u64().unwrap_or(0) as u16;
        let nodes = v["nodes"]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|n| {
                        Some(NodeLayout {
                            name: n["name"].as_str()?.to_string(),
                            address: n["address"].as_str()?.parse().ok()?,
                            datacenter: n["datacenter"].as_str()?.to_string(),
                            rack: n["rack"].as_str()?.to_string(),
                        })
                    })
                    .collect()
            })
            .unwrap_or_default();
        let extra = v["extra"]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|p| Some((p[0].as_str()?.to_string(), p[1].as_str()?.to_string())))
                    .collect()
            })
            .unwrap_or_default();
        Ok(Layout {
            dir: dir.to_path_buf(),
            name: s("name"),
            native_port: port("native_port"),
            admin_port: port("admin_port"),
            storage_port: port("storage_port"),
            extra,
            nodes,
        })
    }

    fn save(&self) -> anyhow::Result<()> {
        let v = json!({
            "name": self.name,
            "native_port": self.native_port,
            "admin_port": self.admin_port,
            "storage_port": self.storage_port,
            "extra": self.extra.iter().map(|(k, v)| json!([k, v])).collect::<Vec<_>>(),
            "nodes": self.nodes.iter().map(|n| json!({
                "name": n.name,
                "address": n.address.to_string(),
                "datacenter": n.datacenter,
                "rack": n.rack,
            })).collect::<Vec<_>>(),
        });
        let tmp = self.dir.join("cluster.json.tmp");
        std::fs::write(&tmp, serde_json::to_string_pretty(&v)?)?;
        std::fs::rename(&tmp, self.dir.join("cluster.json"))?;
        Ok(())
    }

    fn node(&self, name: &str) -> anyhow::Result<&NodeLayout> {
        self.nodes
            .iter()
            .find(|n| n.name == name)
            .with_context(|| format!("no node {name} in {}", self.dir.display()))
    }

    fn node_dir(&self, n: &NodeLayout) -> PathBuf {
        self.dir.join(&n.name)
    }

    /// The seeds: the first node of each data center.
    fn seeds(&self) -> Vec<IpAddr> {
        let mut seen = Vec::new();
        let mut out = Vec::new();
        for n in &self.nodes {
            if !seen.contains(&n.datacenter) {
                seen.push(n.datacenter.clone());
                out.push(n.address);
            }
        }
        out
    }

    /// Writes a node's configuration (and its rack file).
    fn write_node(&self, n: &NodeLayout) -> anyhow::Result<()> {
        let d = self.node_dir(n);
        std::fs::create_dir_all(&d)?;
        let seeds: Vec<String> = self.seeds().iter().map(|a| a.to_string()).collect();
        let mut yaml = format!(
            "# written by `sibyl cluster`\ncluster_name: '{}'\nlisten_address: {a}\nrpc_address: {a}\nadmin_address: {a}\n\
             native_transport_port: {}\nstorage_port: {}\nadmin_port: {}\n\
             data_file_directories: [{d}/data/data]\ncommitlog_directory: {d}/data/commitlog\n\
             metadata_directory: {d}/data/metadata\nendpoint_snitch: GossipingPropertyFileSnitch\n\
             seed_provider:\n  - class_name: org.apache.cassandra.locator.SimpleSeedProvider\n    parameters:\n      - seeds: \"{}\"\n",
            self.name.replace('\'', "''"),
            self.native_port,
            self.storage_port,
            self.admin_port,
            seeds.join(","),
            a = n.address,
            d = d.display(),
        );
        for (k, v) in &self.extra {
            yaml.push_str(&format!("{k}: {v}\n"));
        }
        std::fs::write(d.join("sibyl.yaml"), yaml)?;
        std::fs::write(
            d.join("cassandra-rackdc.properties"),
            format!("dc={}\nrack={}\n", n.datacenter, n.rack),
        )?;
        Ok(())
    }

    fn pid(&self, n: &NodeLayout) -> Option<u32> {
        let pid: u32 = std::fs::read_to_string(self.node_dir(n).join("sibyl.pid"))
            .ok()?
            .trim()
            .parse()
            .ok()?;
        // a pid file outlives its process; /proc tells whether it still runs
        let cmd = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
        let state = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        let zombie = state
            .rsplit(')')
            .next()
            .is_some_and(|s| s.trim_start().starts_with('Z'));
        // (a process between fork and exec may show an empty command line)
        let ours = cmd.is_empty() || String::from_utf8_lossy(&cmd).contains("sibyl");
        (ours && !zombie).then_some(pid)
    }

    fn answers_cql(&self, n: &NodeLayout) -> bool {
        TcpStream::connect_timeout(
            &std::net::SocketAddr::new(n.address, self.native_port),
            Duration::from_millis(300),
        )
        .is_ok()
    }

    fn selected(&self, names: &[String]) -> anyhow::Result<Vec<NodeLayout>> {
        if names.is_empty() {
            return Ok(self.nodes.clone());
        }
        names.iter().map(|n| self.node(n).cloned()).collect()
    }

    fn admin(&self, n: &NodeLayout, method: &str, path: &str) -> anyhow::Result<Value> {
        crate::nodetool::request(&n.address.to_string(), self.admin_port, method, path)
    }
}

/// Sends a signal with the shell's own `kill` (no process tools needed).
fn signal(pid: u32, sig: &str) -> anyhow::Result<()> {
    let ok = Command::new("sh")
        .args(["-c", &format!("kill {sig} {pid}")])
        .status()
        .context("cannot run sh")?
        .success();
    if !ok {
        bail!("kill {sig} {pid} failed");
    }
    Ok(())
}

fn start(l: &Layout, names: &[String], args: &[String]) -> anyhow::Result<()> {
    let exe = std::env::current_exe().context("cannot find the sibyl executable")?;
    let nodes = l.selected(names)?;
    for n in &nodes {
        if l.pid(n).is_some() {
            continue;
        }
        let d = l.node_dir(n);
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(d.join("sibyl.log"))?;
        // a process group of its own: the node outlives this command and
        // ignores the terminal's Ctrl-C
        let child = Command::new(&exe)
            .process_group(0)
            .arg("--config")
            .arg(d.join("sibyl.yaml"))
            .args(args)
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .spawn()
            .context("cannot start a node")?;
        std::fs::write(d.join("sibyl.pid"), child.id().to_string())?;
        eprintln!("started {} ({}), pid {}", n.name, n.address, child.id());
    }
    // up when each running node (started now or before) answers CQL and
    // reports every running node UP
    let deadline = Instant::now() + Duration::from_secs(120);
    let running: Vec<NodeLayout> = l
        .nodes
        .iter()
        .filter(|n| nodes.iter().any(|s| s.name == n.name) || l.pid(n).is_some())
        .cloned()
        .collect();
    for n in &running {
        loop {
            // any node started now that exits has failed to join
            for started in nodes.iter().chain(std::iter::once(n)) {
                if l.pid(started).is_none() {
                    bail!(
                        "{} exited; see {}",
                        started.name,
                        l.node_dir(started).join("sibyl.log").display()
                    );
                }
            }
            let sees_all = l.answers_cql(n)
                && l.admin(n, "GET", "/cluster").is_ok_and(|v| {
                    running.iter().all(|r| {
                        v["nodes"].as_array().is_some_and(|a| {
                            a.iter().any(|x| {
                                x["address"].as_str() == Some(&r.address.to_string())
                                    && x["status"].as_str() == Some("UP")
                            })
                        })
                    })
                });
            if sees_all {
                break;
            }
            if Instant::now() > deadline {
                bail!("{} did not come up with its peers in 120 s", n.name);
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }
    Ok(())
}

fn stop(l: &Layout, names: &[String]) -> anyhow::Result<()> {
    for n in l.selected(names)? {
        let Some(pid) = l.pid(&n) else { continue };
        let _ = signal(pid, "-CONT");
        signal(pid, "-TERM")?;
        let deadline = Instant::now() + Duration::from_secs(30);
        while l.pid(&n).is_some() {
            if Instant::now() > deadline {
                let _ = signal(pid, "-KILL");
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        eprintln!("stopped {}", n.name);
    }
    Ok(())
}

fn split_flag(args: &[String], flag: &str) -> (Vec<String>, Vec<String>) {
    match args.iter().position(|a| a == flag) {
        Some(i) => (args[..i].to_vec(), args[i + 1..].to_vec()),
        None => (args.to_vec(), Vec::new()),
    }
}

fn addresses(nodes: &[NodeLayout]) -> String {
    nodes
        .iter()
        .map(|n| n.address.to_string())
        .collect::<Vec<_>>()
        .join(",")
}

pub fn run(args: Vec<String>) -> anyhow::Result<()> {
    let Some(cmd) = args.first().cloned() else {
        bail!("{USAGE}");
    };
    if cmd == "-h" || cmd == "--help" {
        outln!("{USAGE}");
        return Ok(());
    }
    // --dir DIR anywhere; `--` ends the options (create's KEY=VALUE pairs)
    let (opts, extra) = split_flag(&args[1..], "--");
    let mut dir: Option<PathBuf> = None;
    let mut rest = Vec::new();
    let mut it = opts.into_iter();
    let mut flags: std::collections::HashMap<String, String> = Default::default();
    let mut start_after = false;
    while let Some(a) = it.next() {
        match a.as_str() {
            "--dir" => dir = Some(it.next().context("--dir needs a directory")?.into()),
            "--start" => start_after = true,
            "--nodes" | "--port" | "--admin-port" | "--storage-port" | "--dcs" | "--racks"
            | "--name" | "--ms" | "--jitter-ms" => {
                let v = it.next().with_context(|| format!("{a} needs a value"))?;
                flags.insert(a, v);
            }
            _ => rest.push(a),
        }
    }
    let dir = dir.context("--dir DIR is required")?;
    let num = |k: &str, d: u64| -> anyhow::Result<u64> {
        flags
            .get(k)
            .map(|v| {
                v.parse::<u64>()
                    .with_context(|| format!("{k}: '{v}' is not a number"))
            })
            .unwrap_or(Ok(d))
    };
    match cmd.as_str() {
        "create" => {
            let n = num("--nodes", 0)? as usize;
            if n == 0 || n > 254 {
                bail!("--nodes N: 1 to 254 nodes");
            }
            if dir.join("cluster.json").exists() {
                bail!("{} already holds a cluster", dir.display());
            }
            let dcs = num("--dcs", 1)?.max(1) as usize;
            let racks = num("--racks", 1)?.max(1) as usize;
            let mut extra_pairs = Vec::new();
            for kv in &extra {
                let (k, v) = kv
                    .split_once('=')
                    .with_context(|| format!("'{kv}': expected KEY=VALUE"))?;
                extra_pairs.push((k.trim().to_string(), v.trim().to_string()));
            }
            std::fs::create_dir_all(&dir)?;
            let per_dc = n.div_ceil(dcs);
            let nodes = (0..n)
                .map(|i| NodeLayout {
                    name: format!("node{}", i + 1),
                    address: IpAddr::from([127, 0, 0, i as u8 + 1]),
                    datacenter: format!("dc{}", i / per_dc + 1),
                    rack: format!("rack{}", (i % per_dc) % racks + 1),
                })
                .collect();
            let l = Layout {
                dir: dir.clone(),
                name: flags
                    .get("--name")
                    .cloned()
                    .unwrap_or_else(|| "Test Cluster".into()),
                native_port: num("--port", 9042)? as u16,
                admin_port: num("--admin-port", 7199)? as u16,
                storage_port: num("--storage-port", 7000)? as u16,
                extra: extra_pairs,
                nodes,
            };
            for n in &l.nodes {
                l.write_node(n)?;
            }
            l.save()?;
            eprintln!("created {} nodes in {}", l.nodes.len(), dir.display());
            if start_after {
                start(&l, &[], &[])?;
            }
            Ok(())
        }
        "start" => start(&Layout::load(&dir)?, &rest, &extra),
        "stop" => stop(&Layout::load(&dir)?, &rest),
        "kill" | "pause" | "resume" => {
            let l = Layout::load(&dir)?;
            if rest.is_empty() {
                bail!("{cmd} NODE...");
            }
            let sig = match cmd.as_str() {
                "kill" => "-KILL",
                "pause" => "-STOP",
                _ => "-CONT",
            };
            for n in l.selected(&rest)? {
                let pid = l
                    .pid(&n)
                    .with_context(|| format!("{} is not running", n.name))?;
                signal(pid, sig)?;
                if cmd == "kill" {
                    while l.pid(&n).is_some() {
                        std::thread::sleep(Duration::from_millis(20));
                    }
                }
            }
            Ok(())
        }
        "status" => {
            let l = Layout::load(&dir)?;
            for n in &l.nodes {
                let pid = l.pid(n);
                let up = pid.is_some() && l.answers_cql(n);
                outln!(
                    "{:<8} {:<15} {:<8} {}",
                    n.name,
                    n.address,
                    pid.map(|p| p.to_string()).unwrap_or_else(|| "-".into()),
                    if up { "UP" } else { "DOWN" }
                );
            }
            Ok(())
        }
        "partition" => {
            let l = Layout::load(&dir)?;
            let (named, from) = split_flag(&rest, "--from");
            let named = l.selected(&named)?;
            if named.is_empty() {
                bail!("partition NODE... [--from NODE...]");
            }
            let others: Vec<NodeLayout> = if from.is_empty() {
                l.nodes
                    .iter()
                    .filter(|n| !named.iter().any(|m| m.name == n.name))
                    .cloned()
                    .collect()
            } else {
                l.selected(&from)?
            };
            for a in &named {
                l.admin(a, "POST", &format!("/faults?drop={}", addresses(&others)))?;
            }
            for b in &others {
                if l.pid(b).is_some() {
                    l.admin(b, "POST", &format!("/faults?drop={}", addresses(&named)))?;
                }
            }
            Ok(())
        }
        "heal" => {
            let l = Layout::load(&dir)?;
            for n in &l.nodes {
                if l.pid(n).is_some() {
                    l.admin(n, "POST", "/faults/clear")?;
                }
            }
            Ok(())
        }
        "delay" => {
            let l = Layout::load(&dir)?;
            let ms = num("--ms", 0)?;
            let jitter = num("--jitter-ms", 0)?;
            let named = l.selected(&rest)?;
            if rest.is_empty() || ms == 0 {
                bail!("delay NODE... --ms N [--jitter-ms J]");
            }
            let others: Vec<NodeLayout> = l
                .nodes
                .iter()
                .filter(|n| !named.iter().any(|m| m.name == n.name))
                .cloned()
                .collect();
            for a in &named {
                l.admin(
                    a,
                    "POST",
                    &format!(
                        "/faults?delay={}&ms={ms}&jitter_ms={jitter}",
                        addresses(&others)
                    ),
                )?;
            }
            Ok(())
        }
        "add" => {
            let mut l = Layout::load(&dir)?;
            let k = l
                .nodes
                .iter()
                .filter_map(|n| n.name.strip_prefix("node")?.parse::<u8>().ok())
                .max()
                .unwrap_or(0)
                + 1;
            let last = l.nodes.last().cloned();
            let n = NodeLayout {
                name: format!("node{k}"),
                address: IpAddr::from([127, 0, 0, k]),
                datacenter: last
                    .as_ref()
                    .map(|x| x.datacenter.clone())
                    .unwrap_or_else(|| "dc1".into()),
                rack: last
                    .as_ref()
                    .map(|x| x.rack.clone())
                    .unwrap_or_else(|| "rack1".into()),
            };
            l.nodes.push(n.clone());
            l.write_node(&n)?;
            l.save()?;
            outln!("{}", n.name);
            Ok(())
        }
        "remove" => {
            let mut l = Layout::load(&dir)?;
            let name = rest.first().context("remove NODE")?.clone();
            stop(&l, std::slice::from_ref(&name))?;
            let n = l.node(&name)?.clone();
            std::fs::remove_dir_all(l.node_dir(&n))?;
            l.nodes.retain(|x| x.name != name);
            l.save()?;
            Ok(())
        }
        "nodetool" => {
            let l = Layout::load(&dir)?;
            let name = rest.first().context("nodetool NODE VERB...")?;
            let n = l.node(name)?;
            let mut args = vec![
                "-h".to_string(),
                n.address.to_string(),
                "-p".to_string(),
                l.admin_port.to_string(),
            ];
            args.extend(rest[1..].iter().cloned());
            args.extend(extra);
            crate::nodetool::run(args)
        }
        other => bail!("unknown command '{other}'\n{USAGE}"),
    }
}
