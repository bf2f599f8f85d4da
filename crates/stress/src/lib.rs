//! `sibyl stress`: cassandra-stress's command line, user profiles, output and
//! graphs, on a light native-protocol client. Works against any CQL server.

pub mod client;
pub mod dist;
pub mod generate;
pub mod graph;
pub mod hdrlog;
pub mod options;
pub mod profile;
pub mod workload;

use client::{ClientError, Cluster, ConnectOptions};
use dist::Rng;
use hdrhistogram::Histogram;
use options::{Command, Options, Rate};
use profile::Profile;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use workload::{Done, Workload};

fn histogram() -> Histogram<u64> {
    Histogram::<u64>::new_with_bounds(1, 60_000_000, 3)
        .or_else(|_| Histogram::new(3))
        // sigfig 3 is always in range
        .unwrap_or_else(|_| std::process::abort())
}

/// One operation kind's measurements over an interval or a run.
#[derive(Clone)]
pub struct KindStats {
    pub latency: Histogram<u64>,
    pub partitions: u64,
    pub rows: u64,
    pub errors: u64,
}

impl KindStats {
    fn new() -> KindStats {
        KindStats {
            latency: histogram(),
            partitions: 0,
            rows: 0,
            errors: 0,
        }
    }

    fn absorb(&mut self, o: &KindStats) {
        let _ = self.latency.add(&o.latency);
        self.partitions += o.partitions;
        self.rows += o.rows;
        self.errors += o.errors;
    }
}

/// Measurements per operation kind.
#[derive(Clone)]
pub struct Stats {
    pub kinds: Vec<KindStats>,
}

impl Stats {
    fn new(kinds: usize) -> Stats {
        Stats {
            kinds: (0..kinds).map(|_| KindStats::new()).collect(),
        }
    }

    fn total(&self) -> KindStats {
        let mut t = KindStats::new();
        for k in &self.kinds {
            t.absorb(k);
        }
        t
    }

    fn absorb(&mut self, o: &Stats) {
        for (a, b) in self.kinds.iter_mut().zip(&o.kinds) {
            a.absorb(b);
        }
    }
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
    let q = |p: f64| {
        if n == 0 {
            0.0
        } else {
            ms(h.value_at_quantile(p))
        }
    };
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

/// Process CPU seconds (user + system) from /proc/self/stat.
pub fn cpu_seconds() -> f64 {
    let Ok(s) = std::fs::read_to_string("/proc/self/stat") else {
        return 0.0;
    };
    let Some(rest) = s.rsplit(')').next() else {
        return 0.0;
    };
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
    // a bad profile is reported before any connection is made
    let profile = match &o.command {
        Command::User { profile, ops } => {
            let p = Profile::load(profile)?;
            profile::parse_ops(ops, &p).map_err(|e| format!("Invalid profile {profile}: {e}"))?;
            Some(p)
        }
        _ => None,
    };
    // The load generator should take as little of the machine as it can: on
    // a small machine it shares the cores with the server it measures. One
    // I/O thread per four cores; a single one runs without work stealing,
    // whose cross-thread wake-ups cost more than the requests (4.5 against
    // 2.9 us of client CPU per write on 2 cores).
    let io_threads = std::thread::available_parallelism()
        .map_or(1, |n| n.get() / 4)
        .max(1);
    let mut rt = if io_threads == 1 {
        tokio::runtime::Builder::new_current_thread()
    } else {
        let mut b = tokio::runtime::Builder::new_multi_thread();
        b.worker_threads(io_threads);
        b
    };
    let rt = rt.enable_all().build().map_err(|e| e.to_string())?;
    rt.block_on(run_async(o, profile, args.join(" ")))
}

pub const USAGE: &str = "usage: sibyl stress COMMAND [options] [-section options]...
commands: write | read | mixed ratio(write=N,read=M) | counter_write [add=DIST] | counter_read
          user profile=FILE.yaml ops(insert=N,QUERY=M,...)
  n=COUNT  duration=TIME  cl=LEVEL  no-warmup
  -rate threads=N [throttle=N/s | fixed=N/s] | threads>=A threads<=B [auto]
  -node HOST[,HOST]   -port native=PORT
  -mode native cql3 prepared|unprepared [user=NAME password=SECRET] [compression=lz4|snappy|none] [connectionsPerHost=2]
  -pop seq=A..B | dist=DIST       -col n=DIST size=DIST
  -schema replication(factor=N) compaction(strategy=NAME)
  -log file=FILE interval=TIME hdrfile=FILE   -graph file=FILE.html title=T revision=R   -errors [retries=N] [ignore]
DIST: FIXED(n) UNIFORM(a..b) GAUSSIAN(a..b[,stdvrng]) EXP(a..b) EXTREME(a..b,shape) SEQ(a..b), ~ inverts";

struct Shared {
    cluster: Cluster,
    workload: Workload,
    next: AtomicU64,
    done: AtomicBool,
    interval: Mutex<Stats>,
    /// Operations tried again after an error (`-errors retries=N`).
    retried: AtomicU64,
    /// `-log hdrfile=FILE`.
    hdr: Option<Mutex<hdrlog::HdrLog>>,
}

/// One run at one thread count.
struct Round {
    total: Stats,
    elapsed: f64,
    cpu: f64,
    intervals: Vec<Interval>,
}

impl Round {
    fn op_rate(&self) -> f64 {
        self.total.total().latency.len() as f64 / self.elapsed.max(1e-9)
    }
}

fn record(sh: &Shared, o: &Options, kind: usize, us: u64, r: Result<Done, ClientError>) {
    let mut st = match sh.interval.lock() {
        Ok(s) => s,
        Err(p) => p.into_inner(),
    };
    let k = &mut st.kinds[kind];
    match r {
        Ok(d) => {
            k.partitions += d.partitions;
            k.rows += d.rows;
            let _ = k.latency.record(us);
        }
        Err(e) => {
            k.errors += 1;
            if !o.ignore_errors {
                drop(st);
                eprintln!("java.io.IOException: Operation x0 on key(s): Error executing: ({e})");
                sh.done.store(true, Ordering::Relaxed);
            }
        }
    }
}

fn describe(names: &[String]) -> String {
    if names.len() == 1 {
        names[0].clone()
    } else {
        format!("[{}]", names.join(", "))
    }
}

const HEADER: &str = "type       total ops,    op/s,    pk/s,   row/s,    mean,     med,     .95,     .99,    .999,     max,   time,   stderr, errors,  gc: #,  max ms,  sum ms,  sdv ms,      mb";

fn row_line(
    prefix: &str,
    kind: &str,
    total_ops: u64,
    k: &KindStats,
    secs: f64,
    time: f64,
) -> String {
    let iv = interval_of(&k.latency, time, total_ops, secs, k.errors);
    let s = secs.max(1e-9);
    format!(
        "{prefix}{:<10}{:>10}, {:>7.0}, {:>7.0}, {:>7.0}, {:>7.1}, {:>7.1}, {:>7.1}, {:>7.1}, {:>7.1}, {:>7.1}, {:>6.1}, {:>8.5}, {:>6}, {:>6}, {:>7}, {:>7}, {:>7}, {:>7}",
        format!("{kind},"),
        iv.total_ops,
        iv.ops_per_s,
        k.partitions as f64 / s,
        k.rows as f64 / s,
        iv.mean_ms,
        iv.median_ms,
        iv.p95_ms,
        iv.p99_ms,
        iv.p999_ms,
        iv.max_ms,
        time,
        0.0,
        iv.errors,
        0,
        0,
        0,
        0,
        0
    )
}

async fn run_round(sh: &Arc<Shared>, o: &Arc<Options>, threads: usize, names: &[String]) -> Round {
    sh.next.store(0, Ordering::Relaxed);
    sh.done.store(false, Ordering::Relaxed);
    if let Ok(mut st) = sh.interval.lock() {
        *st = Stats::new(names.len());
    }
    println!(
        "Running {} with {} threads {}",
        describe(names),
        threads,
        match (o.n, o.duration) {
            (_, Some(d)) => format!("for {} seconds", d.as_secs()),
            (Some(n), None) => format!("for {n} iteration"),
            _ => String::new(),
        }
    );
    println!("{HEADER}");
    let start = Instant::now();
    let cpu0 = cpu_seconds();
    let mut tasks = Vec::new();
    for t in 0..threads {
        let sh = sh.clone();
        let o = o.clone();
        tasks.push(tokio::spawn(async move {
            let mut rng = Rng::new(dist::mix(t as u64, start.elapsed().as_nanos() as u64));
            loop {
                if sh.done.load(Ordering::Relaxed) {
                    break;
                }
                let i = sh.next.fetch_add(1, Ordering::Relaxed);
                let over = match o.duration {
                    Some(d) => start.elapsed() >= d,
                    None => o.n.map(|n| i >= n).unwrap_or(false),
                };
                if over {
                    break;
                }
                let intended = match o.rate {
                    Rate::Throttle { per_second, .. } => {
                        Some(start + Duration::from_secs_f64(i as f64 / per_second as f64))
                    }
                    _ => None,
                };
                if let Some(at) = intended {
                    tokio::time::sleep_until(at.into()).await;
                }
                let kind = sh.workload.pick(i);
                let began = Instant::now();
                // as cassandra-stress: an operation that fails is tried again,
                // the same keys and values, up to `-errors retries=N` times
                let saved = rng.clone();
                let mut tries = 1;
                let r = loop {
                    let r = sh.workload.run(kind, &mut rng, &sh.cluster).await;
                    if r.is_ok() || tries >= o.retries.max(1) || sh.done.load(Ordering::Relaxed) {
                        break r;
                    }
                    tries += 1;
                    sh.retried.fetch_add(1, Ordering::Relaxed);
                    rng = saved.clone();
                };
                // with a fixed rate, latency counts from when the operation should have started
                let from = match o.rate {
                    Rate::Throttle { fixed: true, .. } => intended.unwrap_or(began),
                    _ => began,
                };
                let us = from.elapsed().as_micros().clamp(1, 60_000_000) as u64;
                record(&sh, &o, kind, us, r);
            }
            Instant::now()
        }));
    }
    // reporter
    let mut total = Stats::new(names.len());
    let mut intervals: Vec<Interval> = Vec::new();
    let mut log = o.log_file.as_ref().and_then(|f| {
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(f)
            .ok()
    });
    let mut last = Instant::now();
    loop {
        let finished = tasks.iter().all(|t| t.is_finished());
        if !finished {
            tokio::time::sleep(o.log_interval.min(Duration::from_millis(50))).await;
            if last.elapsed() < o.log_interval {
                continue;
            }
        }
        let from = last;
        let secs = last.elapsed().as_secs_f64();
        last = Instant::now();
        let snapshot = {
            let mut st = match sh.interval.lock() {
                Ok(s) => s,
                Err(p) => p.into_inner(),
            };
            std::mem::replace(&mut *st, Stats::new(names.len()))
        };
        total.absorb(&snapshot);
        if let Some(h) = &sh.hdr {
            let mut h = match h.lock() {
                Ok(h) => h,
                Err(p) => p.into_inner(),
            };
            for (name, k) in names.iter().zip(&snapshot.kinds) {
                if let Err(e) = h.interval(name, &k.latency, from, last) {
                    eprintln!("cannot write the hdr log: {e}");
                }
            }
        }
        let time = start.elapsed().as_secs_f64();
        if names.len() > 1 {
            for (i, name) in names.iter().enumerate() {
                println!(
                    "{}",
                    row_line(
                        "",
                        name,
                        total.kinds[i].latency.len(),
                        &snapshot.kinds[i],
                        secs,
                        time
                    )
                );
            }
        }
        let snap_total = snapshot.total();
        let run_total = total.total().latency.len();
        println!(
            "{}",
            row_line("", "total", run_total, &snap_total, secs, time)
        );
        let iv = interval_of(
            &snap_total.latency,
            time,
            run_total,
            secs,
            snap_total.errors,
        );
        if let Some(f) = log.as_mut() {
            use std::io::Write;
            let _ = writeln!(f, "{}", serde_json::to_string(&iv).unwrap_or_default());
        }
        if !snap_total.latency.is_empty() || finished {
            intervals.push(iv);
        }
        if finished {
            break;
        }
    }
    // the run ends when its last operation does, not when the reporter notices
    let mut end = start;
    for t in tasks {
        if let Ok(finished) = t.await {
            end = end.max(finished);
        }
    }
    Round {
        total,
        elapsed: (end - start).as_secs_f64(),
        cpu: cpu_seconds() - cpu0,
        intervals,
    }
}

async fn run_async(
    o: Options,
    profile: Option<Profile>,
    command_line: String,
) -> Result<(), String> {
    let copts = ConnectOptions {
        user: o.user.clone(),
        password: o.password.clone(),
        compression: o.compression,
    };
    let mut cluster = Cluster::connect(&o.nodes, o.port, o.connections_per_host, &copts).await?;
    if !o.whitelist {
        let found = cluster
            .discover(o.port, o.connections_per_host, &copts)
            .await;
        if found > 0 {
            println!("Found {found} more nodes in the cluster");
        }
    }
    if cluster.nodes.len() > 1 {
        println!(
            "Token-aware routing: {}",
            if cluster.token_aware() {
                "on"
            } else {
                "off (ring unknown), round-robin"
            }
        );
    }
    let workload = Workload::setup(&o, &cluster, profile.as_ref()).await?;
    let names = workload.names();
    let sh = Arc::new(Shared {
        cluster,
        workload,
        next: AtomicU64::new(0),
        done: AtomicBool::new(false),
        interval: Mutex::new(Stats::new(names.len())),
        retried: AtomicU64::new(0),
        hdr: match &o.hdr_file {
            Some(f) => Some(Mutex::new(
                hdrlog::HdrLog::create(f).map_err(|e| format!("cannot write {f}: {e}"))?,
            )),
            None => None,
        },
    });
    let o = Arc::new(o);
    if o.warmup {
        // a few unrecorded operations of each kind, as cassandra-stress warms up
        let warm = o.n.map(|n| (n / 4).min(2_000)).unwrap_or(2_000);
        println!(
            "Warming up {} with {} iterations...",
            describe(&names),
            warm
        );
        let mut rng = Rng::new(0x5eed);
        for i in 0..warm {
            let _ = sh
                .workload
                .run(sh.workload.pick(i), &mut rng, &sh.cluster)
                .await;
        }
    }
    let (rounds, thread_counts) = match o.rate {
        Rate::Threads(t) | Rate::Throttle { threads: t, .. } => {
            let r = run_round(&sh, &o, t, &names).await;
            (vec![r], vec![t])
        }
        Rate::Auto {
            min,
            max,
            stop_when_saturated,
        } => auto_rounds(&sh, &o, &names, min, max, stop_when_saturated).await,
    };
    if let [only] = rounds.as_slice() {
        print_results(&names, only);
    } else {
        // auto mode printed each round's results as it went; now all of them side by side
        println!();
        let ids: Vec<String> = thread_counts
            .iter()
            .map(|t| format!("{t} threadCount"))
            .collect();
        let width = ids.iter().map(|s| s.len()).max().unwrap_or(2);
        println!("{:>width$}, {HEADER}", "id");
        for (id, r) in ids.iter().zip(&rounds) {
            let prefix = format!("{id:>width$}, ");
            for (k, name) in names.iter().enumerate() {
                if names.len() > 1 {
                    println!(
                        "{}",
                        row_line(
                            &prefix,
                            name,
                            r.total.kinds[k].latency.len(),
                            &r.total.kinds[k],
                            r.elapsed,
                            r.elapsed
                        )
                    );
                }
            }
            let t = r.total.total();
            println!(
                "{}",
                row_line(&prefix, "total", t.latency.len(), &t, r.elapsed, r.elapsed)
            );
        }
        if let Some((best, r)) = ids
            .iter()
            .zip(&rounds)
            .max_by(|a, b| a.1.op_rate().total_cmp(&b.1.op_rate()))
        {
            println!("Best: {best} at {} op/s", group(r.op_rate()));
        }
    }
    if let Some(g) = &o.graph_file {
        for (r, t) in rounds.iter().zip(&thread_counts) {
            let rev = match (&o.graph_revision, rounds.len()) {
                (Some(rev), 1) => Some(rev.clone()),
                (Some(rev), _) => Some(format!("{rev} ({t} threads)")),
                (None, 1) => None,
                (None, _) => Some(format!("{t} threads")),
            };
            graph::write(
                g,
                o.graph_title.as_deref(),
                rev.as_deref(),
                &command_line,
                &r.intervals,
                &summarize(&names, r),
            )
            .map_err(|e| format!("cannot write graph {g}: {e}"))?;
        }
    }
    let retried = sh.retried.load(Ordering::Relaxed);
    if retried > 0 {
        // not in cassandra-stress's summary: on stderr, so the summary keeps its shape
        eprintln!(
            "{retried} operations failed and were tried again (-errors retries={})",
            o.retries
        );
    }
    let errors: u64 = rounds.iter().map(|r| r.total.total().errors).sum();
    if errors > 0 && !o.ignore_errors {
        println!("FAILURE");
        return Err(format!("{errors} errors"));
    }
    println!("END");
    Ok(())
}

fn print_results(names: &[String], r: &Round) {
    println!();
    println!("Results:");
    for l in summarize(names, r) {
        println!("{l}");
    }
    let ops = r.total.total().latency.len().max(1);
    println!(
        "Client CPU per op         : {:.1} us ({:.1} CPU-seconds for {} ops)",
        r.cpu * 1e6 / ops as f64,
        r.cpu,
        ops
    );
    println!();
}

/// cassandra-stress's auto mode: thread counts from `min`, doubling below 16
/// and then x1.5, up to `max`; with `auto`, it stops once the average
/// improvement in throughput over the last three rounds is negative.
async fn auto_rounds(
    sh: &Arc<Shared>,
    o: &Arc<Options>,
    names: &[String],
    min: usize,
    max: usize,
    stop_when_saturated: bool,
) -> (Vec<Round>, Vec<usize>) {
    let mut rounds: Vec<Round> = Vec::new();
    let mut counts = Vec::new();
    let mut threads = min;
    loop {
        println!();
        println!("Running with {threads} threadCount");
        let r = run_round(sh, o, threads, names).await;
        print_results(names, &r);
        let failed = r.total.total().errors > 0 && !o.ignore_errors;
        rounds.push(r);
        counts.push(threads);
        if rounds.len() > 1 {
            println!(
                "Improvement over {} threadCount: {:.0}%",
                counts[counts.len() - 2],
                100.0 * average_improvement(&rounds, 1)
            );
        }
        if failed {
            break;
        }
        let next = if threads < 16 {
            threads * 2
        } else {
            threads * 3 / 2
        };
        if next > max {
            break;
        }
        threads = next;
        if stop_when_saturated && !has_average_improvement(&rounds, 3, 0.0) {
            break;
        }
    }
    (rounds, counts)
}

fn has_average_improvement(rounds: &[Round], count: usize, min: f64) -> bool {
    rounds.len() < count + 1 || average_improvement(rounds, count) >= min
}

fn average_improvement(rounds: &[Round], count: usize) -> f64 {
    let n = rounds.len();
    let count = count.min(n.saturating_sub(1)).max(1);
    let mut sum = 0.0;
    for i in n.saturating_sub(count)..n {
        if i == 0 {
            continue;
        }
        let prev = rounds[i - 1].op_rate().max(1e-9);
        sum += (rounds[i].op_rate() - prev) / prev;
    }
    sum / count as f64
}

fn summarize(names: &[String], r: &Round) -> Vec<String> {
    let elapsed = r.elapsed.max(1e-9);
    let all = r.total.total();
    let kinds: Vec<(&String, &KindStats)> = names.iter().zip(&r.total.kinds).collect();
    let per = |f: &dyn Fn(&KindStats) -> String| {
        kinds
            .iter()
            .map(|(k, s)| format!("{k}: {}", f(s)))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let rate = |s: &KindStats| format!("{} op/s", group(s.latency.len() as f64 / elapsed));
    let pk_rate = |s: &KindStats| format!("{} pk/s", group(s.partitions as f64 / elapsed));
    let row_rate = |s: &KindStats| format!("{} row/s", group(s.rows as f64 / elapsed));
    let lat = |q: f64| {
        move |s: &KindStats| {
            if s.latency.is_empty() {
                "0.0 ms".to_string()
            } else {
                format!("{:.1} ms", ms(s.latency.value_at_quantile(q)))
            }
        }
    };
    let mean = |s: &KindStats| {
        if s.latency.is_empty() {
            "0.0 ms".to_string()
        } else {
            format!("{:.1} ms", s.latency.mean() / 1000.0)
        }
    };
    let maxf = |s: &KindStats| {
        if s.latency.is_empty() {
            "0.0 ms".to_string()
        } else {
            format!("{:.1} ms", ms(s.latency.max()))
        }
    };
    let t = r.elapsed as u64;
    vec![
        format!(
            "Op rate                   : {:>8} [{}]",
            rate(&all),
            per(&rate)
        ),
        format!(
            "Partition rate            : {:>8} [{}]",
            pk_rate(&all),
            per(&pk_rate)
        ),
        format!(
            "Row rate                  : {:>8} [{}]",
            row_rate(&all),
            per(&row_rate)
        ),
        format!(
            "Latency mean              : {:>8} [{}]",
            mean(&all),
            per(&mean)
        ),
        format!(
            "Latency median            : {:>8} [{}]",
            lat(0.5)(&all),
            per(&lat(0.5))
        ),
        format!(
            "Latency 95th percentile   : {:>8} [{}]",
            lat(0.95)(&all),
            per(&lat(0.95))
        ),
        format!(
            "Latency 99th percentile   : {:>8} [{}]",
            lat(0.99)(&all),
            per(&lat(0.99))
        ),
        format!(
            "Latency 99.9th percentile : {:>8} [{}]",
            lat(0.999)(&all),
            per(&lat(0.999))
        ),
        format!(
            "Latency max               : {:>8} [{}]",
            maxf(&all),
            per(&maxf)
        ),
        format!(
            "Total partitions          : {:>8} [{}]",
            group(all.partitions as f64),
            per(&|s: &KindStats| group(s.partitions as f64))
        ),
        format!(
            "Total errors              : {:>8} [{}]",
            group(all.errors as f64),
            per(&|s: &KindStats| group(s.errors as f64))
        ),
        format!(
            "Total operation time      : {:02}:{:02}:{:02}",
            t / 3600,
            (t / 60) % 60,
            t % 60
        ),
    ]
}

/// 12345.6 → "12,346"
fn group(x: f64) -> String {
    let s = format!("{:.0}", x);
    let (neg, digits) = s
        .strip_prefix('-')
        .map(|d| (true, d))
        .unwrap_or((false, &s));
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

#[cfg(test)]
mod tests {
    use super::*;

    fn round(rate: f64) -> Round {
        let mut total = Stats::new(1);
        for _ in 0..(rate as u64) {
            let _ = total.kinds[0].latency.record(100);
        }
        Round {
            total,
            elapsed: 1.0,
            cpu: 0.0,
            intervals: Vec::new(),
        }
    }

    #[test]
    fn auto_mode_stops_when_throughput_stops_improving() {
        let rs: Vec<Round> = [100.0, 200.0, 300.0].iter().map(|&r| round(r)).collect();
        assert!(
            has_average_improvement(&rs, 3, 0.0),
            "fewer than four rounds: keep going"
        );
        let rs: Vec<Round> = [100.0, 200.0, 300.0, 310.0]
            .iter()
            .map(|&r| round(r))
            .collect();
        assert!(has_average_improvement(&rs, 3, 0.0));
        let rs: Vec<Round> = [100.0, 200.0, 300.0, 200.0, 150.0, 140.0]
            .iter()
            .map(|&r| round(r))
            .collect();
        assert!(!has_average_improvement(&rs, 3, 0.0));
        assert!((average_improvement(&rs[..2], 1) - 1.0).abs() < 1e-9);
    }

    #[test]
    fn groups_thousands() {
        assert_eq!(group(1234567.4), "1,234,567");
        assert_eq!(group(12.0), "12");
    }
}
