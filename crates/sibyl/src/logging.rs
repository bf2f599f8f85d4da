//! The node's logs, where a Cassandra operator looks for them: in the log
//! directory, `system.log` (INFO and up) and `debug.log` (DEBUG and up), in
//! Cassandra's line layout (`INFO  [thread] 2026-11-24 19:20:59,744
//! file.rs:42 - message`), each rolled over at 50 MiB and kept to 7 old
//! files (`system.log.1` the newest), as Cassandra's logback.xml does (it
//! zips its old files; these stay plain text). Standard output keeps the
//! INFO lines too, as Cassandra's does in the foreground.
//!
//! The log directory is `-Dcassandra.logdir=DIR`, else `$CASSANDRA_LOG_DIR`,
//! else `logs` beside the first data directory. The files are written by a
//! background thread (Cassandra's debug.log is asynchronous too): a burst
//! of lines waits in a bounded queue, and lines past it are dropped rather
//! than slowing requests.

use sibyl_types::now_millis;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields};
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::Layer;

/// Cassandra's `maxFileSize` and `maxHistory` for system.log and debug.log.
pub const MAX_FILE_BYTES: u64 = 50 << 20;
pub const KEEP_FILES: usize = 7;

/// A log file that rolls over by size: `name` is renamed `name.1` (and
/// `name.1` to `name.2`, ...) once it would pass `max_bytes`; the oldest
/// beyond `keep` is removed.
pub struct RollingFile {
    path: PathBuf,
    file: File,
    size: u64,
    max_bytes: u64,
    keep: usize,
    // rolls happen between lines only: a line written in pieces stays whole
    at_line_start: bool,
}

impl RollingFile {
    pub fn open(path: &Path, max_bytes: u64, keep: usize) -> std::io::Result<RollingFile> {
        let file = OpenOptions::new().create(true).append(true).open(path)?;
        let size = file.metadata()?.len();
        Ok(RollingFile {
            path: path.to_path_buf(),
            file,
            size,
            max_bytes,
            keep,
            at_line_start: true,
        })
    }

    fn numbered(&self, n: usize) -> PathBuf {
        let mut p = self.path.clone().into_os_string();
        p.push(format!(".{n}"));
        PathBuf::from(p)
    }

    fn roll(&mut self) -> std::io::Result<()> {
        self.file.flush()?;
        let _ = std::fs::remove_file(self.numbered(self.keep));
        for n in (1..self.keep).rev() {
            let from = self.numbered(n);
            if from.exists() {
                std::fs::rename(&from, self.numbered(n + 1))?;
            }
        }
        if self.keep > 0 {
            std::fs::rename(&self.path, self.numbered(1))?;
        } else {
            std::fs::remove_file(&self.path)?;
        }
        self.file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.path)?;
        self.size = 0;
        Ok(())
    }
}

impl Write for RollingFile {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if self.at_line_start && self.size > 0 && self.size + buf.len() as u64 > self.max_bytes {
            self.roll()?;
        }
        let n = self.file.write(buf)?;
        self.size += n as u64;
        if n > 0 {
            self.at_line_start = buf[n - 1] == b'\n';
        }
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.file.flush()
    }
}

thread_local! {
    /// The time of the event being logged, read once for all the files
    /// that log it ([`EventClock`]).
    static EVENT_MILLIS: std::cell::Cell<Option<i64>> = const { std::cell::Cell::new(None) };
}

/// Stamps each event before the files format it, so that one event has one
/// time in system.log and debug.log, as a logback event has (each file
/// reading the clock itself, a line could differ by a millisecond between
/// them). First among the layers: a `Vec` of layers sees an event in order.
struct EventClock;

impl<S: tracing::Subscriber> Layer<S> for EventClock {
    fn on_event(&self, _: &tracing::Event<'_>, _: tracing_subscriber::layer::Context<'_, S>) {
        EVENT_MILLIS.set(Some(now_millis()));
    }
}

/// Cassandra's logback pattern: `%-5level [%thread] %date{ISO8601} %F:%L - %msg%n`.
pub struct CassandraLayout;

impl<S, N> FormatEvent<S, N> for CassandraLayout
where
    S: tracing::Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
{
    fn format_event(
        &self,
        ctx: &FmtContext<'_, S, N>,
        mut w: Writer<'_>,
        event: &tracing::Event<'_>,
    ) -> std::fmt::Result {
        let meta = event.metadata();
        let ms = EVENT_MILLIS.get().unwrap_or_else(now_millis);
        let thread = std::thread::current();
        let file = meta
            .file()
            .map(|f| f.rsplit('/').next().unwrap_or(f))
            .unwrap_or("?");
        write!(
            w,
            "{:<5} [{}] {} {}:{} - ",
            meta.level().as_str(),
            thread.name().unwrap_or("main"),
            sibyl_types::utc_millis(ms),
            file,
            meta.line().unwrap_or(0)
        )?;
        ctx.field_format().format_fields(w.by_ref(), event)?;
        writeln!(w)
    }
}

/// The log directory (see the module's documentation).
pub fn directory(flag: Option<PathBuf>, first_data_dir: &Path) -> PathBuf {
    flag.or_else(|| std::env::var_os("CASSANDRA_LOG_DIR").map(PathBuf::from))
        .unwrap_or_else(|| {
            first_data_dir
                .parent()
                .filter(|p| !p.as_os_str().is_empty())
                .unwrap_or(Path::new("."))
                .join("logs")
        })
}

/// The loggers and levels at start: ROOT at INFO, Sibyl's own crates at
/// DEBUG (for debug.log; each file and standard output keep their own
/// threshold), the metadata log's library at WARN.
fn initial_levels() -> Vec<(String, tracing::level_filters::LevelFilter)> {
    use tracing::level_filters::LevelFilter;
    vec![
        ("ROOT".into(), LevelFilter::INFO),
        ("sibyl".into(), LevelFilter::DEBUG),
        ("openraft".into(), LevelFilter::WARN),
    ]
}

fn targets_of(
    levels: &[(String, tracing::level_filters::LevelFilter)],
) -> tracing_subscriber::filter::Targets {
    let mut t = tracing_subscriber::filter::Targets::new();
    for (name, level) in levels {
        t = if name == "ROOT" {
            t.with_default(*level)
        } else {
            t.with_target(name.clone(), *level)
        };
    }
    t
}

/// `nodetool getlogginglevels` / `setlogginglevel` on the running filter.
struct Levels {
    current: std::sync::Mutex<Vec<(String, tracing::level_filters::LevelFilter)>>,
    reload: Box<dyn Fn(tracing_subscriber::filter::Targets) -> Result<(), String> + Send + Sync>,
}

impl sibyl_node::LogLevels for Levels {
    fn levels(&self) -> Vec<(String, String)> {
        let cur = self.current.lock().unwrap_or_else(|e| e.into_inner());
        cur.iter()
            .map(|(n, l)| (n.clone(), l.to_string().to_uppercase()))
            .collect()
    }

    fn set(&self, logger: Option<&str>, level: Option<&str>) -> Result<(), String> {
        use tracing::level_filters::LevelFilter;
        let mut cur = self.current.lock().unwrap_or_else(|e| e.into_inner());
        match logger {
            // no logger: back to the initial levels, as Cassandra's reset
            None => *cur = initial_levels(),
            Some(name) => {
                let name = if name.eq_ignore_ascii_case("root") {
                    "ROOT"
                } else {
                    name
                };
                // a level, or (none given) the one the logger started with
                let level = match level {
                    Some(l) if l.eq_ignore_ascii_case("all") => Some(LevelFilter::TRACE),
                    // by name only (tracing also takes "0" to "5")
                    Some(l) => Some(
                        l.parse::<LevelFilter>()
                            .ok()
                            .filter(|_| l.chars().all(|c| c.is_ascii_alphabetic()))
                            .ok_or_else(|| format!("Unknown level {}", l.to_ascii_uppercase()))?,
                    ),
                    None => initial_levels()
                        .into_iter()
                        .find(|(n, _)| n == name)
                        .map(|(_, l)| l),
                };
                match (cur.iter().position(|(n, _)| n == name), level) {
                    (Some(i), Some(l)) => cur[i].1 = l,
                    (None, Some(l)) => cur.push((name.to_string(), l)),
                    (Some(i), None) => {
                        cur.remove(i);
                    }
                    (None, None) => {}
                }
            }
        }
        (self.reload)(targets_of(&cur))
    }
}

/// What keeps the background writers running: held for the life of the
/// process (dropping it flushes what is queued).
pub struct Guards(#[allow(dead_code)] Vec<tracing_appender::non_blocking::WorkerGuard>);

/// Sets up standard output, system.log and debug.log. `RUST_LOG` narrows or
/// widens standard output only.
pub fn init(dir: &Path) -> std::io::Result<Guards> {
    std::fs::create_dir_all(dir)?;
    let mut guards = Vec::new();
    let mut file_layer = |name: &str, level: tracing::Level| -> std::io::Result<_> {
        let file = RollingFile::open(&dir.join(name), MAX_FILE_BYTES, KEEP_FILES)?;
        let (writer, guard) = tracing_appender::non_blocking::NonBlockingBuilder::default()
            .lossy(true)
            // Cassandra's async appenders queue 1024 events; a channel this size
            // is allocated and touched whole at start
            .buffered_lines_limit(8 * 1024)
            .thread_name("sibyl-log-writer")
            .finish(file);
        guards.push(guard);
        Ok(tracing_subscriber::fmt::layer()
            .with_ansi(false)
            .event_format(CassandraLayout)
            .with_writer(writer)
            // each file's threshold; which loggers speak is the levels' filter
            .with_filter(tracing::level_filters::LevelFilter::from_level(level))
            .boxed())
    };
    let system = file_layer("system.log", tracing::Level::INFO)?;
    let debug = file_layer("debug.log", tracing::Level::DEBUG)?;
    // gc.log: the node's pauses (no garbage collector here: event-loop and
    // fsync stalls), which go nowhere else
    let gc = {
        let file = RollingFile::open(&dir.join("gc.log"), MAX_FILE_BYTES, KEEP_FILES)?;
        let (writer, guard) = tracing_appender::non_blocking::NonBlockingBuilder::default()
            .lossy(true)
            .buffered_lines_limit(4 * 1024)
            .thread_name("sibyl-log-writer")
            .finish(file);
        guards.push(guard);
        tracing_subscriber::fmt::layer()
            .with_ansi(false)
            .event_format(CassandraLayout)
            .with_writer(writer)
            .with_filter(tracing_subscriber::filter::filter_fn(|m| {
                m.target() == "gc"
            }))
            .boxed()
    };
    let not_gc = || tracing_subscriber::filter::filter_fn(|m| m.target() != "gc");
    let system = system.with_filter(not_gc()).boxed();
    let debug = debug.with_filter(not_gc()).boxed();
    let stdout = tracing_subscriber::fmt::layer()
        .with_target(false)
        // colours only on a terminal, not in a log file
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stdout()))
        .with_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| "info,openraft=off,gc=off".into()),
        )
        .boxed();
    let layers: Vec<Box<dyn Layer<tracing_subscriber::Registry> + Send + Sync>> = vec![
        EventClock
            .with_filter(tracing::level_filters::LevelFilter::DEBUG)
            .boxed(),
        stdout,
        system,
        debug,
        gc,
    ];
    // the loggers' levels, changed at run time by nodetool setlogginglevel
    let (levels, handle) = tracing_subscriber::reload::Layer::new(targets_of(&initial_levels()));
    tracing_subscriber::registry()
        .with(layers)
        .with(levels)
        .init();
    let _ = sibyl_node::LOG_LEVELS.set(Box::new(Levels {
        current: std::sync::Mutex::new(initial_levels()),
        reload: Box::new(move |t| handle.reload(t).map_err(|e| e.to_string())),
    }));
    Ok(Guards(guards))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_log_file_rolls_over_by_size_and_keeps_so_many() {
        let d = tempfile::tempdir().unwrap();
        let path = d.path().join("system.log");
        let mut f = RollingFile::open(&path, 100, 3).unwrap();
        for i in 0..50 {
            writeln!(f, "line {i:03} of forty bytes, more or less.").unwrap();
        }
        f.flush().unwrap();
        let mut names: Vec<String> = std::fs::read_dir(d.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        assert_eq!(
            names,
            ["system.log", "system.log.1", "system.log.2", "system.log.3"]
        );
        for n in &names {
            // whole lines only, each file at most the limit plus the line
            // that was being written
            let text = std::fs::read_to_string(d.path().join(n)).unwrap();
            assert!(text.len() <= 100 + 45, "{n}: {}", text.len());
            assert!(
                text.ends_with('\n') && text.lines().all(|l| l.starts_with("line ")),
                "{n}: {text}"
            );
        }
        // the newest lines are in system.log, the ones before in .1
        let now = std::fs::read_to_string(&path).unwrap();
        assert!(now.contains("line 049"));
        let before = std::fs::read_to_string(d.path().join("system.log.1")).unwrap();
        assert!(before.lines().last().unwrap() < now.lines().next().unwrap());
        // reopened: appends, and rolls when full
        drop(f);
        let mut f = RollingFile::open(&path, 100, 3).unwrap();
        writeln!(f, "after reopening, the first line of a new file").unwrap();
        f.flush().unwrap();
        assert!(std::fs::read_to_string(&path)
            .unwrap()
            .contains("after reopening"));
    }

    #[test]
    fn the_log_directory_is_the_flag_else_beside_the_data() {
        assert_eq!(
            directory(Some("/var/log/x".into()), Path::new("/d/data")),
            PathBuf::from("/var/log/x")
        );
        if std::env::var_os("CASSANDRA_LOG_DIR").is_none() {
            assert_eq!(
                directory(None, Path::new("/d/data")),
                PathBuf::from("/d/logs")
            );
            assert_eq!(directory(None, Path::new("data")), PathBuf::from("./logs"));
        }
    }
}
