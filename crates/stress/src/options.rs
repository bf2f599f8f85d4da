//! cassandra-stress's command line: `COMMAND [opts] [-section opts]...`.

use crate::dist::Distribution;
use sibyl_protocol::{Compression, Consistency};
use std::time::Duration;

#[derive(Debug, Clone, PartialEq)]
pub enum Command {
    Write,
    Read,
    /// `mixed ratio(write=1,read=3)`
    Mixed {
        write: u32,
        read: u32,
    },
    CounterWrite,
    CounterRead,
    /// `user profile=FILE ops(insert=9,simple1=1)`
    User {
        profile: String,
        ops: String,
    },
}

impl Command {
    /// Whether the command only writes (its default population is then `seq=1..N`).
    pub fn writes_only(&self) -> bool {
        match self {
            Command::Write | Command::CounterWrite => true,
            Command::User { ops, .. } => ops
                .split(',')
                .all(|o| o.trim().to_lowercase().starts_with("insert=")),
            _ => false,
        }
    }
}

/// `-rate`
#[derive(Debug, Clone, PartialEq)]
pub enum Rate {
    Threads(usize),
    /// `throttle=N/s`: at most N ops/s; `fixed=N/s`: exactly N ops/s with
    /// latency measured from the intended start (coordinated omission).
    Throttle {
        threads: usize,
        per_second: u64,
        fixed: bool,
    },
    /// `threads>=A threads<=B [auto]`: rounds with more and more threads
    /// (doubling below 16, then x1.5); with `auto`, stop once throughput
    /// stops improving.
    Auto {
        min: usize,
        max: usize,
        stop_when_saturated: bool,
    },
}

#[derive(Debug, Clone)]
pub struct Options {
    pub command: Command,
    pub n: Option<u64>,
    pub duration: Option<Duration>,
    pub cl: Consistency,
    pub warmup: bool,
    pub rate: Rate,
    pub nodes: Vec<String>,
    /// `-node whitelist`: use only the nodes given.
    pub whitelist: bool,
    pub port: u16,
    pub prepared: bool,
    pub user: Option<String>,
    pub password: Option<String>,
    pub compression: Option<Compression>,
    /// `-mode connectionsPerHost=N`: connections to each node. 2 by default
    /// (cassandra-stress opens 8): on 2 cores, writes at 128 in flight ran
    /// 144.0k/141.0k/s with 2 and 131.8k/141.2k with 8, with the machine
    /// equally busy (1.58-1.61 cores); one connection left it half idle
    /// (104.2k/s, 0.97 cores), the client and the server waiting in turn.
    pub connections_per_host: usize,
    /// `-pop seq=A..B` (as `SEQ(A..B)`) or `-pop dist=DIST`; `None`: the
    /// command's default.
    pub population: Option<Distribution>,
    /// `-col n=DIST`: columns per row.
    pub columns: Distribution,
    /// `-col size=DIST`: bytes per column value.
    pub column_size: Distribution,
    /// `counter_write add=DIST`: counter increments.
    pub add: Distribution,
    pub replication_factor: u32,
    pub compaction: Option<String>,
    pub log_file: Option<String>,
    /// `-log hdrfile=FILE`: the latencies as an HdrHistogram interval log.
    pub hdr_file: Option<String>,
    pub log_interval: Duration,
    pub graph_file: Option<String>,
    pub graph_title: Option<String>,
    pub graph_revision: Option<String>,
    pub ignore_errors: bool,
    /// Tries per operation before it counts as an error (`-errors retries=N`,
    /// 10 as in cassandra-stress).
    pub retries: u32,
}

fn err(m: String) -> String {
    m
}

fn parse_duration(s: &str) -> Result<Duration, String> {
    let (num, unit) = s.split_at(s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len()));
    let n: u64 = num.parse().map_err(|_| format!("Invalid duration '{s}'"))?;
    Ok(match unit.to_lowercase().as_str() {
        "s" | "" => Duration::from_secs(n),
        "m" => Duration::from_secs(n * 60),
        "h" => Duration::from_secs(n * 3600),
        "ms" => Duration::from_millis(n),
        _ => return Err(format!("Invalid duration '{s}': use s, m or h")),
    })
}

fn parse_count(s: &str) -> Result<u64, String> {
    let lower = s.to_lowercase();
    let (num, mult) = if let Some(x) = lower.strip_suffix('k') {
        (x, 1_000)
    } else if let Some(x) = lower.strip_suffix('m') {
        (x, 1_000_000)
    } else if let Some(x) = lower.strip_suffix('b') {
        (x, 1_000_000_000)
    } else {
        (lower.as_str(), 1)
    };
    num.parse::<u64>()
        .map(|n| n * mult)
        .map_err(|_| format!("Invalid count '{s}'"))
}

fn distribution(spec: &str, option: &str) -> Result<Distribution, String> {
    Distribution::parse(spec).map_err(|e| format!("Invalid {option}{spec}: {e}"))
}

/// `ops(insert=9, simple1=1)` typed unquoted reaches us as two arguments:
/// glue arguments together until their parentheses balance.
fn join_parenthesised(args: &[String]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut depth = 0i32;
    for a in args {
        if depth > 0 {
            if let Some(last) = out.last_mut() {
                last.push_str(a);
            }
        } else {
            out.push(a.clone());
        }
        depth += a.matches('(').count() as i32 - a.matches(')').count() as i32;
        depth = depth.max(0);
    }
    out
}

impl Options {
    pub fn parse(args: &[String]) -> Result<Options, String> {
        let args = &join_parenthesised(args);
        let Some(cmd) = args.first() else {
            return Err("No command specified (write, read, mixed)".into());
        };
        let mut o = Options {
            command: match cmd.as_str() {
                "write" => Command::Write,
                "read" => Command::Read,
                "mixed" => Command::Mixed { write: 1, read: 1 },
                "counter_write" => Command::CounterWrite,
                "counter_read" => Command::CounterRead,
                "user" => Command::User { profile: String::new(), ops: String::new() },
                other => return Err(format!("Unknown command '{other}' (expected write, read, mixed, counter_write, counter_read or user)")),
            },
            n: None,
            duration: None,
            cl: Consistency::LocalOne,
            warmup: true,
            rate: Rate::Threads(0),
            nodes: vec!["127.0.0.1".into()],
            port: 9042,
            prepared: true,
            user: None,
            password: None,
            compression: None,
            connections_per_host: 2,
            population: None,
            columns: Distribution::fixed(5),
            column_size: Distribution::fixed(34),
            add: Distribution::fixed(1),
            replication_factor: 1,
            compaction: None,
            log_file: None,
            hdr_file: None,
            log_interval: Duration::from_secs(1),
            graph_file: None,
            graph_title: None,
            graph_revision: None,
            ignore_errors: false,
            retries: 10,
            whitelist: false,
        };
        let mut i = 1;
        // command options
        while i < args.len() && !args[i].starts_with('-') {
            let a = &args[i];
            if let Some(v) = a.strip_prefix("n=") {
                o.n = Some(parse_count(v)?);
            } else if let Some(v) = a.strip_prefix("duration=") {
                o.duration = Some(parse_duration(v)?);
            } else if let Some(v) = a.strip_prefix("cl=") {
                o.cl = v
                    .parse::<Consistency>()
                    .map_err(|_| format!("Invalid consistency level '{v}' in cl="))?;
            } else if a == "no-warmup" {
                o.warmup = false;
            } else if let (Some(v), Command::User { profile, .. }) =
                (a.strip_prefix("profile="), &mut o.command)
            {
                *profile = v.to_string();
            } else if let (Some(v), Command::User { ops, .. }) = (
                a.strip_prefix("ops(").and_then(|x| x.strip_suffix(')')),
                &mut o.command,
            ) {
                *ops = v.to_string();
            } else if let (Some(v), Command::CounterWrite) = (a.strip_prefix("add="), &o.command) {
                o.add = distribution(v, "add=")?;
            } else if let (Some(inner), Command::Mixed { .. }) = (
                a.strip_prefix("ratio(").and_then(|x| x.strip_suffix(')')),
                &o.command,
            ) {
                let (mut w, mut r) = (0, 0);
                for part in inner.split(',') {
                    let (k, v) = part
                        .split_once('=')
                        .ok_or_else(|| err(format!("Invalid ratio '{a}'")))?;
                    let v: u32 = v.parse().map_err(|_| format!("Invalid ratio '{a}'"))?;
                    match k {
                        "write" | "insert" => w = v,
                        "read" | "simple1" => r = v,
                        other => return Err(format!("Invalid operation '{other}' in ratio")),
                    }
                }
                if w + r == 0 {
                    return Err("ratio must give some weight to write or read".into());
                }
                o.command = Command::Mixed { write: w, read: r };
            } else {
                return Err(format!("Invalid parameter {a} for command {cmd}"));
            }
            i += 1;
        }
        // sections
        while i < args.len() {
            let section = args[i].clone();
            i += 1;
            let start = i;
            while i < args.len() && !args[i].starts_with('-') {
                i += 1;
            }
            let opts = &args[start..i];
            match section.as_str() {
                "-rate" => {
                    let mut threads = None;
                    let mut throttle = None;
                    let (mut min, mut max, mut auto, mut ranged) = (4, 1000, false, false);
                    let count = |v: &str, what: &str| {
                        v.parse::<usize>().ok().filter(|n| *n > 0).ok_or_else(|| {
                            format!("Invalid {what}{v} in -rate (a positive number)")
                        })
                    };
                    for a in opts {
                        if let Some(v) = a.strip_prefix("threads>=") {
                            min = count(v, "threads>=")?;
                            ranged = true;
                        } else if let Some(v) = a.strip_prefix("threads<=") {
                            max = count(v, "threads<=")?;
                            ranged = true;
                        } else if a == "auto" {
                            auto = true;
                        } else if let Some(v) = a.strip_prefix("threads=") {
                            threads = Some(count(v, "threads=")?);
                        } else if let Some(v) = a
                            .strip_prefix("throttle=")
                            .or_else(|| a.strip_prefix("fixed="))
                        {
                            let n = v
                                .strip_suffix("/s")
                                .and_then(|x| parse_count(x).ok())
                                .filter(|n| *n > 0)
                                .ok_or_else(|| {
                                    format!("Invalid -rate option '{a}': expected N/s")
                                })?;
                            if throttle.is_some() {
                                return Err(
                                    "can't have both fixed and throttle set, choose one.".into()
                                );
                            }
                            throttle = Some((n, a.starts_with("fixed=")));
                        } else {
                            return Err(format!("Invalid -rate option '{a}'"));
                        }
                    }
                    o.rate = if ranged || auto {
                        if threads.is_some() || throttle.is_some() {
                            return Err("-rate: threads>=/threads<=/auto cannot be combined with threads=, throttle= or fixed=".into());
                        }
                        if min > max {
                            return Err(format!(
                                "-rate: threads>={min} is more than threads<={max}"
                            ));
                        }
                        Rate::Auto {
                            min,
                            max,
                            stop_when_saturated: auto,
                        }
                    } else {
                        let t = threads
                            .ok_or("-rate needs threads=N, or threads>=A threads<=B [auto]")?;
                        match throttle {
                            Some((n, fixed)) => Rate::Throttle {
                                threads: t,
                                per_second: n,
                                fixed,
                            },
                            None => Rate::Threads(t),
                        }
                    };
                }
                "-node" => {
                    // `whitelist`: only these nodes (otherwise every node
                    // the first one knows of is used, as the driver does)
                    o.whitelist = opts.iter().any(|a| a == "whitelist");
                    o.nodes = opts
                        .iter()
                        .filter(|a| *a != "whitelist")
                        .flat_map(|a| a.split(','))
                        .filter(|s| !s.is_empty())
                        .map(|s| s.to_string())
                        .collect();
                    if o.nodes.is_empty() {
                        return Err("-node needs at least one host".into());
                    }
                }
                "-port" => {
                    for a in opts {
                        match a.strip_prefix("native=") {
                            Some(v) => {
                                o.port = v
                                    .parse()
                                    .map_err(|_| format!("Invalid port '{v}' in -port"))?
                            }
                            None => return Err(format!("Invalid -port option '{a}'")),
                        }
                    }
                }
                "-mode" => {
                    for a in opts {
                        match a.as_str() {
                            "native" | "cql3" => {}
                            "prepared" => o.prepared = true,
                            "unprepared" | "simplenative" => o.prepared = false,
                            other if other.starts_with("user=") => {
                                o.user = Some(other["user=".len()..].to_string())
                            }
                            other if other.starts_with("password=") => {
                                o.password = Some(other["password=".len()..].to_string())
                            }
                            other if other.starts_with("connectionsPerHost=") => {
                                let v = &other["connectionsPerHost=".len()..];
                                o.connections_per_host = v
                                    .parse()
                                    .ok()
                                    .filter(|n| (1..=1024).contains(n))
                                    .ok_or_else(|| format!("Invalid -mode connectionsPerHost={v} (expected 1 to 1024)"))?;
                            }
                            other if other.starts_with("compression=") => {
                                let v = &other["compression=".len()..];
                                o.compression = match v.to_lowercase().as_str() {
                                    "none" => None,
                                    _ => Some(Compression::from_name(v).ok_or_else(|| format!("Invalid -mode compression={v} (expected lz4, snappy or none)"))?),
                                };
                            }
                            other => return Err(format!("Invalid -mode option '{other}'")),
                        }
                    }
                }
                "-pop" => {
                    for a in opts {
                        if let Some(range) = a.strip_prefix("seq=") {
                            o.population = Some(Distribution::parse(&format!("seq({range})")).map_err(|_| format!("Invalid -pop seq={range}: expected A..B with A <= B, e.g. seq=1..1000000"))?);
                        } else if let Some(spec) = a.strip_prefix("dist=") {
                            o.population = Some(distribution(spec, "-pop dist=")?);
                        } else {
                            return Err(format!(
                                "Invalid -pop option '{a}' (expected seq=A..B or dist=DIST(...))"
                            ));
                        }
                    }
                }
                "-col" => {
                    for a in opts {
                        if let Some(v) = a.strip_prefix("n=") {
                            o.columns = distribution(v, "-col n=")?;
                            if o.columns.min() < 1 || o.columns.max() > 1000 {
                                return Err(format!(
                                    "Invalid -col n={v}: between 1 and 1000 columns"
                                ));
                            }
                        } else if let Some(v) = a.strip_prefix("size=") {
                            o.column_size = distribution(v, "-col size=")?;
                            if o.column_size.min() < 0 || o.column_size.max() > 16 << 20 {
                                return Err(format!("Invalid -col size={v}: between 0 and 16 MiB"));
                            }
                        } else {
                            return Err(format!("Invalid -col option '{a}'"));
                        }
                    }
                }
                "-schema" => {
                    for a in opts {
                        if let Some(inner) = a
                            .strip_prefix("replication(")
                            .and_then(|x| x.strip_suffix(')'))
                        {
                            for kv in inner.split(',') {
                                match kv.split_once('=') {
                                    Some(("factor", v)) => {
                                        o.replication_factor = v.parse().map_err(|_| {
                                            format!("Invalid replication factor '{v}'")
                                        })?
                                    }
                                    _ => {
                                        return Err(format!(
                                            "Invalid -schema replication option '{kv}'"
                                        ))
                                    }
                                }
                            }
                        } else if let Some(inner) = a
                            .strip_prefix("compaction(")
                            .and_then(|x| x.strip_suffix(')'))
                        {
                            for kv in inner.split(',') {
                                match kv.split_once('=') {
                                    Some(("strategy", v)) => o.compaction = Some(v.to_string()),
                                    _ => {
                                        return Err(format!(
                                            "Invalid -schema compaction option '{kv}'"
                                        ))
                                    }
                                }
                            }
                        } else {
                            return Err(format!("Invalid -schema option '{a}'"));
                        }
                    }
                }
                "-log" => {
                    for a in opts {
                        if let Some(v) = a.strip_prefix("file=") {
                            o.log_file = Some(v.to_string());
                        } else if let Some(v) = a.strip_prefix("interval=") {
                            o.log_interval = parse_duration(v)?;
                        } else if let Some(v) = a.strip_prefix("hdrfile=") {
                            o.hdr_file = Some(v.to_string());
                        } else {
                            return Err(format!("Invalid -log option '{a}'"));
                        }
                    }
                }
                "-graph" => {
                    for a in opts {
                        if let Some(v) = a.strip_prefix("file=") {
                            o.graph_file = Some(v.to_string());
                        } else if let Some(v) = a.strip_prefix("title=") {
                            o.graph_title = Some(v.to_string());
                        } else if let Some(v) = a.strip_prefix("revision=") {
                            o.graph_revision = Some(v.to_string());
                        } else {
                            return Err(format!("Invalid -graph option '{a}'"));
                        }
                    }
                }
                "-errors" => {
                    for a in opts {
                        match a.as_str() {
                            "ignore" => o.ignore_errors = true,
                            other => match other.strip_prefix("retries=") {
                                Some(n) => {
                                    o.retries = n
                                        .parse()
                                        .map_err(|_| format!("Invalid -errors option '{other}'"))?
                                }
                                None => return Err(format!("Invalid -errors option '{other}'")),
                            },
                        }
                    }
                }
                other => return Err(format!("Unrecognised option: {other}")),
            }
        }
        if let Command::User { profile, ops } = &o.command {
            if profile.is_empty() {
                return Err("user: profile=FILE is required".into());
            }
            if ops.is_empty() {
                return Err("user: ops(NAME=WEIGHT,...) is required, e.g. ops(insert=1)".into());
            }
        }
        if o.n.is_none() && o.duration.is_none() {
            o.n = Some(1_000_000);
        }
        if o.rate == Rate::Threads(0) {
            // cassandra-stress: 200 threads for writes of a known count, else auto mode
            o.rate = match (&o.command, o.n) {
                (Command::Write | Command::CounterWrite, Some(_)) if o.duration.is_none() => {
                    Rate::Threads(200)
                }
                _ => Rate::Auto {
                    min: 4,
                    max: 1000,
                    stop_when_saturated: true,
                },
            };
        }
        Ok(o)
    }

    /// Where partition seeds come from: `-pop`, else `seq=1..N` for
    /// write-only commands and `dist=GAUSSIAN(1..N)` otherwise (N: `n=`, or a
    /// million), as cassandra-stress.
    pub fn population(&self) -> Distribution {
        if let Some(p) = &self.population {
            return p.clone();
        }
        let limit = self
            .n
            .filter(|n| *n > 0 && self.duration.is_none())
            .unwrap_or(1_000_000);
        let spec = if self.command.writes_only() {
            format!("seq(1..{limit})")
        } else {
            format!("gaussian(1..{limit})")
        };
        Distribution::parse(&spec).unwrap_or_else(|_| Distribution::fixed(1))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> Result<Options, String> {
        Options::parse(
            &s.split_whitespace()
                .map(|x| x.to_string())
                .collect::<Vec<_>>(),
        )
    }

    #[test]
    fn parses_cassandra_stress_command_lines() {
        let o = p("mixed ratio(write=9,read=1) n=100k cl=QUORUM no-warmup -rate threads=8 -node 127.0.0.1,127.0.0.2 -port native=9043 -pop seq=1..1000 -col n=FIXED(3) size=FIXED(100) -schema replication(factor=3) compaction(strategy=LeveledCompactionStrategy) -graph file=g.html title=t revision=r1").expect("parse");
        assert_eq!(o.command, Command::Mixed { write: 9, read: 1 });
        assert_eq!(o.n, Some(100_000));
        assert_eq!(o.cl, Consistency::Quorum);
        assert!(!o.warmup);
        assert_eq!(o.rate, Rate::Threads(8));
        assert_eq!(o.nodes.len(), 2);
        assert_eq!(o.port, 9043);
        assert_eq!(o.population().spec(), "seq(1..1000)");
        assert_eq!((o.columns.max(), o.column_size.max()), (3, 100));
        assert_eq!(o.replication_factor, 3);
        assert_eq!(o.compaction.as_deref(), Some("LeveledCompactionStrategy"));
        assert_eq!(o.graph_revision.as_deref(), Some("r1"));
        let t = p("write duration=20s -rate threads=4 throttle=1000/s").expect("parse");
        assert_eq!(
            t.rate,
            Rate::Throttle {
                threads: 4,
                per_second: 1000,
                fixed: false
            }
        );
        assert_eq!(t.duration, Some(Duration::from_secs(20)));
        let l = p("write n=10 -log file=run.log interval=2s hdrfile=run.hdr").expect("parse");
        assert_eq!(l.log_file.as_deref(), Some("run.log"));
        assert_eq!(l.hdr_file.as_deref(), Some("run.hdr"));
        assert_eq!(l.log_interval, Duration::from_secs(2));
    }

    #[test]
    fn new_commands_and_modes() {
        let o = p("user profile=p.yaml ops(insert=9,simple1=1) n=1k -rate threads>=2 threads<=16 auto -mode native cql3 prepared user=cassandra password=secret compression=lz4").expect("parse");
        assert_eq!(
            o.command,
            Command::User {
                profile: "p.yaml".into(),
                ops: "insert=9,simple1=1".into()
            }
        );
        assert_eq!(
            o.rate,
            Rate::Auto {
                min: 2,
                max: 16,
                stop_when_saturated: true
            }
        );
        let split = p("user profile=p.yaml ops(insert=9, simple1=1) n=10").expect("parse");
        assert_eq!(
            split.command,
            Command::User {
                profile: "p.yaml".into(),
                ops: "insert=9,simple1=1".into()
            }
        );
        assert_eq!(
            (o.user.as_deref(), o.password.as_deref()),
            (Some("cassandra"), Some("secret"))
        );
        assert_eq!(o.compression, Some(Compression::Lz4));
        assert_eq!(
            o.population().spec(),
            "gaussian(1..1000)",
            "reads by default sample a gaussian"
        );
        let o = p("user profile=p.yaml ops(insert=1) n=500").expect("parse");
        assert_eq!(
            o.population().spec(),
            "seq(1..500)",
            "insert-only profiles write in sequence"
        );
        assert_eq!(
            o.rate,
            Rate::Auto {
                min: 4,
                max: 1000,
                stop_when_saturated: true
            }
        );
        let o = p("counter_write n=10 add=uniform(1..5) -pop dist=EXP(1..100) -col n=UNIFORM(1..5) size=GAUSSIAN(10..20)").expect("parse");
        assert_eq!(o.command, Command::CounterWrite);
        assert_eq!((o.add.min(), o.add.max()), (1, 5));
        assert_eq!(o.population().spec(), "EXP(1..100)");
        assert_eq!(o.rate, Rate::Threads(200));
        assert_eq!(
            p("counter_read n=10 -rate threads>=4 threads<=8")
                .expect("parse")
                .rate,
            Rate::Auto {
                min: 4,
                max: 8,
                stop_when_saturated: false
            }
        );
        assert_eq!(
            p("write -mode compression=none")
                .expect("parse")
                .compression,
            None
        );
        assert_eq!(p("write").expect("parse").connections_per_host, 2);
        assert_eq!(
            p("write -mode native cql3 connectionsPerHost=3")
                .expect("parse")
                .connections_per_host,
            3
        );
        assert!(p("write -mode connectionsPerHost=0")
            .expect_err("an error")
            .contains("connectionsPerHost=0"));
    }

    #[test]
    fn bad_options_name_the_option() {
        assert!(p("write -pop dist=UNIFORM(9..1)")
            .expect_err("an error")
            .contains("-pop dist=UNIFORM(9..1)"));
        assert!(p("write -pop dist=ZIPF(1..9)")
            .expect_err("an error")
            .contains("ZIPF"));
        assert!(p("write -pop seq=1-9")
            .expect_err("an error")
            .contains("seq=1-9"));
        assert!(p("write -col size=FIXED(x)")
            .expect_err("an error")
            .contains("size=FIXED(x)"));
        assert!(p("write -col n=uniform(0..3)")
            .expect_err("an error")
            .contains("n=uniform(0..3)"));
        assert!(p("write -mode compression=zstd")
            .expect_err("an error")
            .contains("zstd"));
        assert!(p("write -rate threads>=8 threads<=4")
            .expect_err("an error")
            .contains("threads>=8"));
        assert!(p("write -rate throttle=10")
            .expect_err("an error")
            .contains("throttle=10"));
        assert!(p("user ops(insert=1)")
            .expect_err("an error")
            .contains("profile="));
        assert!(p("user profile=x.yaml")
            .expect_err("an error")
            .contains("ops("));
        assert!(p("write ops(insert=1)")
            .expect_err("an error")
            .contains("ops(insert=1)"));
        assert!(p("write -bogus x")
            .expect_err("an error")
            .contains("-bogus"));
        assert!(p("write n=abc").expect_err("an error").contains("abc"));
        assert!(p("write -rate speed=9")
            .expect_err("an error")
            .contains("speed=9"));
        assert!(p("fly").expect_err("an error").contains("fly"));
        assert!(p("write nope=1").expect_err("an error").contains("nope=1"));
    }
}
