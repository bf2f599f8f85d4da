//! cassandra-stress's command line: `COMMAND [opts] [-section opts]...`.

use sibyl_protocol::Consistency;
use std::time::Duration;

#[derive(Debug, Clone, PartialEq)]
pub enum Command {
    Write,
    Read,
    /// `mixed ratio(write=1,read=3)`
    Mixed { write: u32, read: u32 },
}

/// `-rate`
#[derive(Debug, Clone, PartialEq)]
pub enum Rate {
    Threads(usize),
    /// `throttle=N/s`: at most N ops/s; `fixed=N/s`: exactly N ops/s with
    /// latency measured from the intended start (coordinated omission).
    Throttle { threads: usize, per_second: u64, fixed: bool },
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
    pub port: u16,
    pub prepared: bool,
    pub population: (u64, u64),
    pub columns: usize,
    pub column_size: usize,
    pub replication_factor: u32,
    pub compaction: Option<String>,
    pub log_file: Option<String>,
    pub log_interval: Duration,
    pub graph_file: Option<String>,
    pub graph_title: Option<String>,
    pub graph_revision: Option<String>,
    pub ignore_errors: bool,
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
    num.parse::<u64>().map(|n| n * mult).map_err(|_| format!("Invalid count '{s}'"))
}

/// FIXED(34) → 34; UNIFORM(a..b) → midpoint is not what we want, so only FIXED is taken.
fn fixed(s: &str, what: &str) -> Result<u64, String> {
    let up = s.to_uppercase();
    let inner = up.strip_prefix("FIXED(").and_then(|x| x.strip_suffix(')')).ok_or_else(|| format!("{what}={s}: only FIXED(n) distributions are supported so far"))?;
    parse_count(inner)
}

impl Options {
    pub fn parse(args: &[String]) -> Result<Options, String> {
        let Some(cmd) = args.first() else { return Err("No command specified (write, read, mixed)".into()) };
        let mut o = Options {
            command: match cmd.as_str() {
                "write" => Command::Write,
                "read" => Command::Read,
                "mixed" => Command::Mixed { write: 1, read: 1 },
                "counter_write" | "counter_read" | "user" => {
                    return Err(format!("command {cmd} is not supported by sibyl stress yet (write, read, mixed are)"))
                }
                other => return Err(format!("Unknown command '{other}' (expected write, read, mixed, counter_write, counter_read or user)")),
            },
            n: None,
            duration: None,
            cl: Consistency::LocalOne,
            warmup: true,
            rate: Rate::Threads(4),
            nodes: vec!["127.0.0.1".into()],
            port: 9042,
            prepared: true,
            population: (1, 1_000_000),
            columns: 5,
            column_size: 34,
            replication_factor: 1,
            compaction: None,
            log_file: None,
            log_interval: Duration::from_secs(1),
            graph_file: None,
            graph_title: None,
            graph_revision: None,
            ignore_errors: false,
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
                o.cl = v.parse::<Consistency>().map_err(|_| format!("Invalid consistency level '{v}' in cl="))?;
            } else if a == "no-warmup" {
                o.warmup = false;
            } else if let Some(inner) = a.strip_prefix("ratio(").and_then(|x| x.strip_suffix(')')) {
                let (mut w, mut r) = (0, 0);
                for part in inner.split(',') {
                    let (k, v) = part.split_once('=').ok_or_else(|| err(format!("Invalid ratio '{a}'")))?;
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
                    for a in opts {
                        if let Some(v) = a.strip_prefix("threads=") {
                            threads = Some(v.parse::<usize>().map_err(|_| format!("Invalid threads '{v}' in -rate"))?);
                        } else if a.starts_with("threads>=") || a.starts_with("threads<=") {
                            return Err("-rate threads>=/threads<= (auto mode) is not supported yet; give threads=N".into());
                        } else if let Some(v) = a.strip_prefix("throttle=").or_else(|| a.strip_prefix("fixed=")) {
                            let n = parse_count(v.trim_end_matches("/s"))?;
                            throttle = Some((n, a.starts_with("fixed=")));
                        } else {
                            return Err(format!("Invalid -rate option '{a}'"));
                        }
                    }
                    let t = threads.unwrap_or(4).max(1);
                    o.rate = match throttle {
                        Some((n, fixed)) => Rate::Throttle { threads: t, per_second: n.max(1), fixed },
                        None => Rate::Threads(t),
                    };
                }
                "-node" => {
                    o.nodes = opts.iter().flat_map(|a| a.split(',')).filter(|s| !s.is_empty()).map(|s| s.to_string()).collect();
                    if o.nodes.is_empty() {
                        return Err("-node needs at least one host".into());
                    }
                }
                "-port" => {
                    for a in opts {
                        match a.strip_prefix("native=") {
                            Some(v) => o.port = v.parse().map_err(|_| format!("Invalid port '{v}' in -port"))?,
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
                            other if other.starts_with("user=") || other.starts_with("password=") => {
                                return Err("-mode user=/password= (authentication) is not supported yet".into())
                            }
                            other if other.starts_with("compression=") => {}
                            other => return Err(format!("Invalid -mode option '{other}'")),
                        }
                    }
                }
                "-pop" => {
                    for a in opts {
                        let spec = a.strip_prefix("seq=").or_else(|| a.strip_prefix("dist=")).ok_or_else(|| format!("Invalid -pop option '{a}'"))?;
                        let inner = spec.trim_start_matches("UNIFORM(").trim_start_matches("uniform(").trim_end_matches(')');
                        let (lo, hi) = inner.split_once("..").ok_or_else(|| format!("Invalid -pop range '{spec}' (expected a..b)"))?;
                        o.population = (parse_count(lo)?, parse_count(hi)?);
                        if o.population.0 > o.population.1 {
                            return Err(format!("Invalid -pop range '{spec}'"));
                        }
                    }
                }
                "-col" => {
                    for a in opts {
                        if let Some(v) = a.strip_prefix("n=") {
                            o.columns = fixed(v, "n")? as usize;
                        } else if let Some(v) = a.strip_prefix("size=") {
                            o.column_size = fixed(v, "size")? as usize;
                        } else {
                            return Err(format!("Invalid -col option '{a}'"));
                        }
                    }
                }
                "-schema" => {
                    for a in opts {
                        if let Some(inner) = a.strip_prefix("replication(").and_then(|x| x.strip_suffix(')')) {
                            for kv in inner.split(',') {
                                match kv.split_once('=') {
                                    Some(("factor", v)) => o.replication_factor = v.parse().map_err(|_| format!("Invalid replication factor '{v}'"))?,
                                    _ => return Err(format!("Invalid -schema replication option '{kv}'")),
                                }
                            }
                        } else if let Some(inner) = a.strip_prefix("compaction(").and_then(|x| x.strip_suffix(')')) {
                            for kv in inner.split(',') {
                                match kv.split_once('=') {
                                    Some(("strategy", v)) => o.compaction = Some(v.to_string()),
                                    _ => return Err(format!("Invalid -schema compaction option '{kv}'")),
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
                            other => return Err(format!("Invalid -errors option '{other}'")),
                        }
                    }
                }
                other => return Err(format!("Unrecognised option: {other}")),
            }
        }
        if o.n.is_none() && o.duration.is_none() {
            o.n = Some(1_000_000);
        }
        Ok(o)
    }

    pub fn threads(&self) -> usize {
        match self.rate {
            Rate::Threads(t) => t,
            Rate::Throttle { threads, .. } => threads,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> Result<Options, String> {
        Options::parse(&s.split_whitespace().map(|x| x.to_string()).collect::<Vec<_>>())
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
        assert_eq!(o.population, (1, 1000));
        assert_eq!((o.columns, o.column_size), (3, 100));
        assert_eq!(o.replication_factor, 3);
        assert_eq!(o.compaction.as_deref(), Some("LeveledCompactionStrategy"));
        assert_eq!(o.graph_revision.as_deref(), Some("r1"));
        let t = p("write duration=20s -rate threads=4 throttle=1000/s").expect("parse");
        assert_eq!(t.rate, Rate::Throttle { threads: 4, per_second: 1000, fixed: false });
        assert_eq!(t.duration, Some(Duration::from_secs(20)));
    }

    #[test]
    fn bad_options_name_the_option() {
        assert!(p("write -bogus x").unwrap_err().contains("-bogus"));
        assert!(p("write n=abc").unwrap_err().contains("abc"));
        assert!(p("write -rate speed=9").unwrap_err().contains("speed=9"));
        assert!(p("fly").unwrap_err().contains("fly"));
        assert!(p("write nope=1").unwrap_err().contains("nope=1"));
    }
}
