//! `sibyl stress`: cassandra-stress's command line, output and graphs, on a
//! light native-protocol client. Works against any CQL server.

pub mod client;
pub mod graph;
pub mod options;

use client::{ClientError, Connection};
use hdrhistogram::Histogram;
use options::{Command, Options, Rate};
use sibyl_protocol::Consistency;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// One interval's or the whole run's measurements, per operation kind.
#[derive(Clone)]
pub struct Stats {
    pub write: Histogram<u64>,
    pub read: Histogram<u64>,
    pub errors: u64,
    pub rows: u64,
}

impl Stats {
    fn new() -> Stats {
        let h = || Histogram::<u64>::new_with_bounds(1, 60_000_000, 3).unwrap_or_else(|_| Histogram::new(3).unwrap_or_else(|_| unreachable_hist()));
        Stats { write: h(), read: h(), errors: 0, rows: 0 }
    }

    fn total(&self) -> Histogram<u64> {
        let mut t = self.write.clone();
        let _ = t.add(&self.read);
        t
    }

    fn absorb(&mut self, o: &Stats) {
        let _ = self.write.add(&o.write);
        let _ = self.read.add(&o.read);
        self.errors += o.errors;
        self.rows += o.rows;
    }
}

fn unreachable_hist() -> Histogram<u64> {
    // new(3) cannot fail: sigfig 3 is in range
    Histogram::<u64>::new_with_max(60_000_000, 3).unwrap_or_else(|_| std::process::abort())
}

/// A line of the interval log.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Interval {
    pub time_s: f64,
    pub total_ops: u64,
    pub ops_per_s: f64,
    pub mean_ms: f64,
    pub median_ms: f64,
    pub p95_ms: f64,
    pub p99_ms: f64,
    pub p999_ms: f64,
    pub max_ms: f64,
    pub errors: u64,
}

fn ms(us: u64) -> f64 {
    us as f64 / 1000.0
}

fn interval_of(h: &Histogram<u64>, elapsed: f64, total: u64, secs: f64, errors: u64) -> Interval {
    let n = h.len();
    let q = |p: f64| if n == 0 { 0.0 } else { ms(h.value_at_quantile(p)) };
    Interval {
        time_s: elapsed,
        total_ops: total,
        ops_per_s: n as f64 / secs.max(1e-9),
        mean_ms: if n == 0 { 0.0 } else { h.mean() / 1000.0 },
        median_ms: q(0.5),
        p95_ms: q(0.95),
        p99_ms: q(0.99),
        p999_ms: q(0.999),
        max_ms: if n == 0 { 0.0 } else { ms(h.max()) },
        errors,
    }
}

fn key_bytes(i: u64) -> bytes::Bytes {
    // 10-byte keys, as cassandra-stress's default key size
    let mut k = vec![0u8; 10];
    k[2..].copy_from_slice(&i.to_be_bytes());
    bytes::Bytes::from(k)
}

fn column_bytes(i: u64, c: usize, size: usize) -> bytes::Bytes {
    let mut v = Vec::with_capacity(size);
    let mut x = i.wrapping_mul(0x9E3779B97F4A7C15).wrapping_add(c as u64);
    while v.len() < size {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        v.extend_from_slice(&x.to_le_bytes());
    }
    v.truncate(size);
    bytes::Bytes::from(v)
}

/// Process CPU seconds (user + system) from /proc/self/stat.
pub fn cpu_seconds() -> f64 {
    let Ok(s) = std::fs::read_to_string("/proc/self/stat") else { return 0.0 };
    let Some(rest) = s.rsplit(')').next() else { return 0.0 };
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| f.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
    (ticks(11) + ticks(12)) / 100.0
}

/// Runs `sibyl stress ARGS`; prints as cassandra-stress does.
pub fn run(args: Vec<String>) -> Result<(), String> {
    if args.is_empty() || args[0] == "help" || args[0] == "--help" {
        println!("{}", USAGE);
        return Ok(());
    }
    let o = Options::parse(&args)?;
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().map_err(|e| e.to_string())?;
    rt.block_on(run_async(o, args.join(" ")))
}

pub const USAGE: &str = "usage: sibyl stress COMMAND [options] [-section options]...
commands: write | read | mixed ratio(write=N,read=M)
  n=COUNT  duration=TIME  cl=LEVEL  no-warmup
  -rate threads=N [throttle=N/s | fixed=N/s]
  -node HOST[,HOST]   -port native=PORT   -mode native cql3 prepared|unprepared
  -pop seq=A..B       -col n=FIXED(N) size=FIXED(BYTES)
  -schema replication(factor=N) compaction(strategy=NAME)
  -log file=FILE interval=TIME   -graph file=FILE.html title=T revision=R   -errors ignore";

struct Shared {
    conns: Vec<Arc<Connection>>,
    insert_id: bytes::Bytes,
    select_id: bytes::Bytes,
    next: AtomicU64,
    done: AtomicBool,
    interval: Mutex<Stats>,
}

async fn setup(o: &Options) -> Result<(Vec<Arc<Connection>>, bytes::Bytes, bytes::Bytes), String> {
    let mut conns = Vec::new();
    for n in &o.nodes {
        let addr = if n.contains(':') { n.clone() } else { format!("{n}:{}", o.port) };
        for _ in 0..2 {
            conns.push(Connection::connect(&addr).await.map_err(|e| e.to_string())?);
        }
    }
    let c = &conns[0];
    let all = Consistency::All;
    c.query(
        &format!("CREATE KEYSPACE IF NOT EXISTS keyspace1 WITH replication = {{'class': 'SimpleStrategy', 'replication_factor': {}}}", o.replication_factor),
        all,
    )
    .await
    .map_err(|e| e.to_string())?;
    let cols: Vec<String> = (0..o.columns).map(|i| format!("\"C{i}\" blob")).collect();
    let mut ddl = format!("CREATE TABLE IF NOT EXISTS keyspace1.standard1 (key blob PRIMARY KEY, {})", cols.join(", "));
    if let Some(s) = &o.compaction {
        ddl.push_str(&format!(" WITH compaction = {{'class': '{s}'}}"));
    }
    c.query(&ddl, all).await.map_err(|e| e.to_string())?;
    let names: Vec<String> = (0..o.columns).map(|i| format!("\"C{i}\"")).collect();
    let marks: Vec<&str> = (0..=o.columns).map(|_| "?").collect();
    let insert = format!("INSERT INTO keyspace1.standard1 (key, {}) VALUES ({})", names.join(", "), marks.join(", "));
    let select = "SELECT * FROM keyspace1.standard1 WHERE key = ?".to_string();
    let mut insert_id = bytes::Bytes::new();
    let mut select_id = bytes::Bytes::new();
    for conn in &conns {
        insert_id = conn.prepare(&insert).await.map_err(|e| e.to_string())?;
        select_id = conn.prepare(&select).await.map_err(|e| e.to_string())?;
    }
    Ok((conns, insert_id, select_id))
}

async fn one_op(sh: &Shared, o: &Options, i: u64, conn: &Connection) -> (bool, Result<usize, ClientError>) {
    let span = o.population.1 - o.population.0 + 1;
    let key_n = o.population.0 + (i % span);
    let is_write = match o.command {
        Command::Write => true,
        Command::Read => false,
        Command::Mixed { write, read } => (i % (write + read) as u64) < write as u64,
    };
    let key = key_bytes(key_n);
    let r = if is_write {
        let mut vals = vec![key.clone()];
        vals.extend((0..o.columns).map(|c| column_bytes(key_n, c, o.column_size)));
        if o.prepared {
            conn.execute(&sh.insert_id, vals, o.cl).await.map(|_| 1)
        } else {
            let hex = |b: &bytes::Bytes| format!("0x{}", b.iter().map(|x| format!("{x:02x}")).collect::<String>());
            let names: Vec<String> = (0..o.columns).map(|i| format!("\"C{i}\"")).collect();
            let q = format!(
                "INSERT INTO keyspace1.standard1 (key, {}) VALUES ({})",
                names.join(", "),
                vals.iter().map(hex).collect::<Vec<_>>().join(", ")
            );
            conn.query(&q, o.cl).await.map(|_| 1)
        }
    } else if o.prepared {
        conn.execute(&sh.select_id, vec![key], o.cl).await.map(|r| match r {
            client::Reply::Rows(n) => n,
            _ => 0,
        })
    } else {
        let q = format!("SELECT * FROM keyspace1.standard1 WHERE key = 0x{}", key.iter().map(|x| format!("{x:02x}")).collect::<String>());
        conn.query(&q, o.cl).await.map(|r| match r {
            client::Reply::Rows(n) => n,
            _ => 0,
        })
    };
    (is_write, r)
}

fn record(sh: &Shared, o: &Options, i: u64, is_write: bool, us: u64, r: Result<usize, ClientError>) {
    let mut st = match sh.interval.lock() {
        Ok(s) => s,
        Err(p) => p.into_inner(),
    };
    match r {
        Ok(rows) => {
            st.rows += rows as u64;
            let _ = if is_write { st.write.record(us) } else { st.read.record(us) };
        }
        Err(e) => {
            st.errors += 1;
            if !o.ignore_errors {
                eprintln!("java.io.IOException: Operation x0 on key(s) [{i}]: Error executing: ({e})");
                sh.done.store(true, Ordering::Relaxed);
            }
        }
    }
}

async fn run_async(o: Options, command_line: String) -> Result<(), String> {
    let (conns, insert_id, select_id) = setup(&o).await?;
    let sh = Arc::new(Shared { conns, insert_id, select_id, next: AtomicU64::new(0), done: AtomicBool::new(false), interval: Mutex::new(Stats::new()) });
    let o = Arc::new(o);
    // warm-up: a few operations, not recorded
    if o.warmup {
        let warm = o.n.map(|n| (n / 20).min(20_000)).unwrap_or(5_000);
        for i in 0..warm.min(2_000) {
            let _ = one_op(&sh, &o, i, &sh.conns[(i as usize) % sh.conns.len()]).await;
        }
    }
    let threads = o.threads();
    println!("Running {} with {} threads {}", format!("{:?}", o.command).to_uppercase(), threads, match (o.n, o.duration) {
        (Some(n), _) => format!("for {n} iteration"),
        (None, Some(d)) => format!("for {} seconds", d.as_secs()),
        _ => String::new(),
    });
    println!("type       total ops,    op/s,    pk/s,   row/s,    mean,     med,     .95,     .99,    .999,     max,   time,   stderr, errors,  gc: #,  max ms,  sum ms,  sdv ms,      mb");
    let start = Instant::now();
    let cpu0 = cpu_seconds();
    let mut tasks = Vec::new();
    for t in 0..threads {
        let sh = sh.clone();
        let o = o.clone();
        tasks.push(tokio::spawn(async move {
            let conn = sh.conns[t % sh.conns.len()].clone();
            loop {
                if sh.done.load(Ordering::Relaxed) {
                    break;
                }
                let i = sh.next.fetch_add(1, Ordering::Relaxed);
                if o.n.map(|n| i >= n).unwrap_or(false) || o.duration.map(|d| start.elapsed() >= d).unwrap_or(false) {
                    break;
                }
                let intended = match o.rate {
                    Rate::Throttle { per_second, .. } => Some(start + Duration::from_secs_f64(i as f64 / per_second as f64)),
                    Rate::Threads(_) => None,
                };
                if let Some(at) = intended {
                    tokio::time::sleep_until(at.into()).await;
                }
                let began = Instant::now();
                let (is_write, r) = one_op(&sh, &o, i, &conn).await;
                // with a fixed rate, latency counts from when the operation should have started
                let from = match o.rate {
                    Rate::Throttle { fixed: true, .. } => intended.unwrap_or(began),
                    _ => began,
                };
                let us = from.elapsed().as_micros().clamp(1, 60_000_000) as u64;
                record(&sh, &o, i, is_write, us, r);
            }
        }));
    }
    // reporter
    let mut total = Stats::new();
    let mut intervals: Vec<Interval> = Vec::new();
    let mut log = o.log_file.as_ref().and_then(|f| std::fs::File::create(f).ok());
    let mut last = Instant::now();
    loop {
        let finished = tasks.iter().all(|t| t.is_finished());
        if !finished {
            tokio::time::sleep(o.log_interval.min(Duration::from_millis(200))).await;
            if last.elapsed() < o.log_interval {
                continue;
            }
        }
        let secs = last.elapsed().as_secs_f64();
        last = Instant::now();
        let snapshot = {
            let mut st = match sh.interval.lock() {
                Ok(s) => s,
                Err(p) => p.into_inner(),
            };
            std::mem::replace(&mut *st, Stats::new())
        };
        total.absorb(&snapshot);
        let h = snapshot.total();
        let iv = interval_of(&h, start.elapsed().as_secs_f64(), total.total().len(), secs, snapshot.errors);
        let line = format!(
            "total,   {:>12}, {:>7.0}, {:>7.0}, {:>7.0}, {:>7.1}, {:>7.1}, {:>7.1}, {:>7.1}, {:>7.1}, {:>7.1}, {:>6.1}, {:>8.5}, {:>6}, {:>6}, {:>7}, {:>7}, {:>7}, {:>7}",
            iv.total_ops, iv.ops_per_s, iv.ops_per_s, snapshot.rows as f64 / secs.max(1e-9), iv.mean_ms, iv.median_ms, iv.p95_ms, iv.p99_ms, iv.p999_ms, iv.max_ms, iv.time_s, 0.0, iv.errors, 0, 0, 0, 0, 0
        );
        println!("{line}");
        if let Some(f) = log.as_mut() {
            use std::io::Write;
            let _ = writeln!(f, "{}", serde_json::to_string(&iv).unwrap_or_default());
        }
        if h.len() > 0 || finished {
            intervals.push(iv);
        }
        if finished {
            break;
        }
    }
    for t in tasks {
        let _ = t.await;
    }
    let elapsed = start.elapsed().as_secs_f64();
    let cpu = cpu_seconds() - cpu0;
    let summary = summarize(&o, &total, elapsed);
    println!();
    println!("Results:");
    for l in &summary {
        println!("{l}");
    }
    let ops = total.total().len().max(1);
    println!("Client CPU per op         : {:.1} us ({:.1} CPU-seconds for {} ops)", cpu * 1e6 / ops as f64, cpu, ops);
    if let Some(g) = &o.graph_file {
        graph::write(g, o.graph_title.as_deref(), o.graph_revision.as_deref(), &command_line, &intervals, &summary).map_err(|e| format!("cannot write graph {g}: {e}"))?;
    }
    if total.errors > 0 && !o.ignore_errors {
        return Err(format!("{} errors", total.errors));
    }
    Ok(())
}

fn summarize(o: &Options, total: &Stats, elapsed: f64) -> Vec<String> {
    let kinds: Vec<(&str, &Histogram<u64>)> = match o.command {
        Command::Write => vec![("WRITE", &total.write)],
        Command::Read => vec![("READ", &total.read)],
        Command::Mixed { .. } => vec![("WRITE", &total.write), ("READ", &total.read)],
    };
    let all = total.total();
    let per = |f: &dyn Fn(&Histogram<u64>) -> String| kinds.iter().map(|(k, h)| format!("{k}: {}", f(h))).collect::<Vec<_>>().join(", ");
    let rate = |h: &Histogram<u64>| format!("{} op/s", group(h.len() as f64 / elapsed.max(1e-9)));
    let lat = |q: f64| move |h: &Histogram<u64>| if h.len() == 0 { "0.0 ms".to_string() } else { format!("{:.1} ms", ms(h.value_at_quantile(q))) };
    let mean = |h: &Histogram<u64>| if h.len() == 0 { "0.0 ms".to_string() } else { format!("{:.1} ms", h.mean() / 1000.0) };
    let maxf = |h: &Histogram<u64>| if h.len() == 0 { "0.0 ms".to_string() } else { format!("{:.1} ms", ms(h.max())) };
    let t = elapsed as u64;
    vec![
        format!("Op rate                   : {:>8} [{}]", rate(&all), per(&rate)),
        format!("Partition rate            : {:>8} [{}]", rate(&all).replace("op/s", "pk/s"), per(&|h: &Histogram<u64>| rate(h).replace("op/s", "pk/s"))),
        format!("Row rate                  : {:>8} row/s", group(total.rows as f64 / elapsed.max(1e-9))),
        format!("Latency mean              : {:>8} [{}]", mean(&all), per(&mean)),
        format!("Latency median            : {:>8} [{}]", lat(0.5)(&all), per(&lat(0.5))),
        format!("Latency 95th percentile   : {:>8} [{}]", lat(0.95)(&all), per(&lat(0.95))),
        format!("Latency 99th percentile   : {:>8} [{}]", lat(0.99)(&all), per(&lat(0.99))),
        format!("Latency 99.9th percentile : {:>8} [{}]", lat(0.999)(&all), per(&lat(0.999))),
        format!("Latency max               : {:>8} [{}]", maxf(&all), per(&maxf)),
        format!("Total partitions          : {:>8} [{}]", group(all.len() as f64), per(&|h: &Histogram<u64>| group(h.len() as f64))),
        format!("Total errors              : {:>8}", total.errors),
        format!("Total operation time      : {:02}:{:02}:{:02}", t / 3600, (t / 60) % 60, t % 60),
    ]
}

/// 12345.6 → "12,346"
fn group(x: f64) -> String {
    let s = format!("{:.0}", x);
    let (neg, digits) = s.strip_prefix('-').map(|d| (true, d)).unwrap_or((false, &s));
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    if neg {
        format!("-{out}")
    } else {
        out
    }
}
