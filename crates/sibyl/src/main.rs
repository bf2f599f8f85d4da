//! `sibyl`: with no arguments, a single node on embedded defaults (CQL on
//! 127.0.0.1:9042, data under ./data); `--config FILE` reads a cassandra.yaml-
//! style file.

mod allocator;

/// mimalloc: less fragmentation than glibc malloc under a server's mix of
/// short-lived request buffers and long-lived memtable data.
#[global_allocator]
static GLOBAL: allocator::Mimalloc = allocator::Mimalloc;

/// `println!` for tools whose output is often piped (`nodetool ... | head`):
/// a closed pipe ends the tool quietly instead of panicking.
macro_rules! outln {
    () => {{
        use std::io::Write;
        if writeln!(std::io::stdout()).is_err() {
            std::process::exit(0)
        }
    }};
    ($($t:tt)*) => {{
        use std::io::Write;
        if writeln!(std::io::stdout(), $($t)*).is_err() {
            std::process::exit(0)
        }
    }};
}

/// `print!`, as [`outln!`].
macro_rules! out {
    ($($t:tt)*) => {{
        use std::io::Write;
        if write!(std::io::stdout(), $($t)*).is_err() {
            std::process::exit(0)
        }
    }};
}

mod cluster_tool;
mod logging;
mod nodetool;
mod nodetool_cli;
mod nodetool_cluster;
mod sstable_tool;

use anyhow::Context;
use sibyl_node::config::Config;
use std::path::PathBuf;

const USAGE: &str = "usage: sibyl [--config FILE] [-Dcassandra.logdir=DIR] [-Dcassandra.commitlog.ignorereplayerrors=true]
                    [-Dcassandra.override_decommission=true] [-Dsibyl.messaging_version=N]
                    [-Dcassandra.repair_fail_timeout_seconds=N]
                    [-Dcassandra.replace_address_first_boot=IP | -Dcassandra.replace_address=IP]
       sibyl nodetool [-h HOST] [-p PORT] <command> [args]
       sibyl sstable dump|verify PATH
       sibyl stress COMMAND [options]   (cassandra-stress's command line)
       sibyl cluster COMMAND --dir DIR [args]   (a local cluster, like ccm)

Starts a Sibyl node. Without --config it serves CQL on 127.0.0.1:9042 and keeps
its data under ./data. FILE uses cassandra.yaml key names and units.";

fn main() -> anyhow::Result<()> {
    allocator::configure();
    let all: Vec<String> = std::env::args().skip(1).collect();
    if all.first().map(|a| a == "nodetool").unwrap_or(false) {
        return nodetool::run(all[1..].to_vec());
    }
    if all.first().map(|a| a == "stress").unwrap_or(false) {
        return sibyl_stress::run(all[1..].to_vec()).map_err(|e| anyhow::anyhow!(e));
    }
    if all.first().map(|a| a == "cluster").unwrap_or(false) {
        return cluster_tool::run(all[1..].to_vec());
    }
    if all.first().map(|a| a == "sstable").unwrap_or(false) {
        return sstable_tool::run(all[1..].to_vec());
    }
    let mut args = all.into_iter();
    let mut config_path: Option<PathBuf> = None;
    let mut ignore_replay_errors = false;
    let mut override_decommission = false;
    let mut replace: Option<(String, String)> = None;
    let mut log_dir: Option<PathBuf> = None;
    let mut messaging_version: Option<String> = None;
    let mut repair_fail_timeout: Option<String> = None;
    while let Some(a) = args.next() {
        match a.as_str() {
            // Cassandra's JVM option, for the operator who must start a node
            // past a damaged commit log entry
            "-Dcassandra.commitlog.ignorereplayerrors=true" => ignore_replay_errors = true,
            "-Dcassandra.override_decommission=true" => override_decommission = true,
            // Cassandra's system properties for replacing a dead node
            a if a.starts_with("-Dcassandra.replace_address_first_boot=")
                || a.starts_with("-Dcassandra.replace_address=") =>
            {
                let (k, v) = a["-D".len()..].split_once('=').unwrap_or_default();
                replace = Some((k.to_string(), v.to_string()));
            }
            // a rolling upgrade: speak an older internode version until
            // every node runs the new build
            a if a.starts_with("-Dsibyl.messaging_version=") => {
                messaging_version = Some(a["-Dsibyl.messaging_version=".len()..].to_string())
            }
            // Cassandra's: when an unfinished incremental repair session fails
            a if a.starts_with("-Dcassandra.repair_fail_timeout_seconds=") => {
                repair_fail_timeout =
                    Some(a["-Dcassandra.repair_fail_timeout_seconds=".len()..].to_string())
            }
            // Cassandra's system property for where system.log and debug.log go
            a if a.starts_with("-Dcassandra.logdir=") => {
                log_dir = Some(PathBuf::from(&a["-Dcassandra.logdir=".len()..]))
            }
            "--config" | "-c" => {
                config_path = Some(args.next().context("--config needs a file")?.into())
            }
            "-h" | "--help" => {
                println!("{USAGE}");
                return Ok(());
            }
            "--version" => {
                println!("sibyl {}", env!("CARGO_PKG_VERSION"));
                return Ok(());
            }
            other => anyhow::bail!("unknown argument '{other}'\n{USAGE}"),
        }
    }
    let mut config = match &config_path {
        Some(p) => Config::load(p)?,
        None => Config::default(),
    };
    let first_data = config
        .data_file_directories
        .first()
        .cloned()
        .unwrap_or_else(|| PathBuf::from("data/data"));
    let log_dir = logging::directory(log_dir, &first_data);
    let _logs = logging::init(&log_dir)
        .with_context(|| format!("cannot write logs to {}", log_dir.display()))?;
    tracing::info!("Logging to {}", log_dir.join("system.log").display());
    if ignore_replay_errors {
        tracing::warn!(
            "-Dcassandra.commitlog.ignorereplayerrors=true: damaged commit log entries will be \
             skipped and their writes lost on this node"
        );
        config.commitlog_ignore_replay_errors = true;
    }
    config.override_decommission = override_decommission;
    if let Some((key, value)) = &replace {
        let address = value
            .parse()
            .with_context(|| format!("-D{key}={value}: not an IP address"))?;
        config.replace_address = Some(address);
        config.replace_address_first_boot = key.ends_with("_first_boot");
    }
    if let Some(v) = &messaging_version {
        let (min, max) = (
            sibyl_node::MESSAGING_VERSION_MIN,
            sibyl_node::MESSAGING_VERSION_CURRENT,
        );
        let n: u8 = v
            .parse()
            .ok()
            .filter(|n| (min..=max).contains(n))
            .with_context(|| {
                format!("-Dsibyl.messaging_version={v}: this build speaks versions {min} to {max}")
            })?;
        tracing::info!(
            "Speaking internode messaging version {n} at most (this build's newest is {max})"
        );
        config.messaging_version = Some(n);
    }
    if let Some(v) = &repair_fail_timeout {
        let secs: u64 = v.parse().with_context(|| {
            format!("-Dcassandra.repair_fail_timeout_seconds={v}: not a number of seconds")
        })?;
        config.repair_fail_timeout = std::time::Duration::from_secs(secs);
    }
    // the JVM properties' equivalents, as system_views.system_properties lists them
    let mut props = vec![(
        "cassandra.logdir".to_string(),
        log_dir.display().to_string(),
    )];
    if let Some(p) = &config_path {
        let p = std::fs::canonicalize(p).unwrap_or_else(|_| p.clone());
        props.push(("cassandra.config".into(), format!("file://{}", p.display())));
    }
    if ignore_replay_errors {
        props.push((
            "cassandra.commitlog.ignorereplayerrors".into(),
            "true".into(),
        ));
    }
    if override_decommission {
        props.push(("cassandra.override_decommission".into(), "true".into()));
    }
    if let Some((key, value)) = replace {
        props.push((key, value));
    }
    if let Some(v) = messaging_version {
        props.push(("sibyl.messaging_version".into(), v));
    }
    if let Some(v) = repair_fail_timeout {
        props.push(("cassandra.repair_fail_timeout_seconds".into(), v));
    }
    config.system_properties = props;
    // Statements are bounded in nesting (sibyl_cql::MAX_NESTING) and every
    // stage recurses at most that deep; the stack is sized so that this
    // holds with an unoptimised build's frames too (address space only: the
    // pages are touched as used)
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_stack_size(16 << 20)
        .build()?;
    rt.block_on(async move {
        let node = sibyl_node::start(config).await?;
        let mut drained = node.drained.clone();
        tokio::select! {
            _ = wait_for_signal() => {}
            _ = drained.changed() => tracing::info!("drained by nodetool"),
        }
        tracing::info!("draining and stopping");
        node.shutdown().await;
        anyhow::Ok(())
    })
}

async fn wait_for_signal() {
    let mut term = match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
        Ok(s) => s,
        Err(_) => {
            let _ = tokio::signal::ctrl_c().await;
            return;
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
}
