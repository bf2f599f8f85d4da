//! `-log hdrfile=FILE`, as cassandra-stress: an HdrHistogram interval log of
//! the latencies (microseconds), one histogram per reporting interval and
//! operation kind, tagged with the kind's name, compressed (V2 deflate) as
//! the Java `HistogramLogWriter` writes them. A run's exact percentiles come
//! from adding its intervals up: the summary's are rounded to 0.1 ms.

use hdrhistogram::serialization::interval_log::{IntervalLogWriterBuilder, Tag};
use hdrhistogram::serialization::V2DeflateSerializer;
use hdrhistogram::Histogram;
use std::io::Write;
use std::time::{Duration, Instant, SystemTime};

pub struct HdrLog {
    file: std::fs::File,
    serializer: V2DeflateSerializer,
    /// When the log began: interval timestamps count from it (`BaseTime`).
    began: Instant,
    buf: Vec<u8>,
}

fn io_error(e: impl std::fmt::Display) -> std::io::Error {
    std::io::Error::other(e.to_string())
}

impl HdrLog {
    /// Starts a log at `path`, replacing any file there.
    pub fn create(path: &str) -> std::io::Result<HdrLog> {
        let mut file = std::fs::File::create(path)?;
        let now = SystemTime::now();
        let mut serializer = V2DeflateSerializer::new();
        let mut buf = Vec::new();
        IntervalLogWriterBuilder::new()
            .add_comment("Logging op latencies for Cassandra Stress")
            .with_start_time(now)
            .with_base_time(now)
            .begin_log_with(&mut buf, &mut serializer)?;
        file.write_all(&buf)?;
        Ok(HdrLog {
            file,
            serializer,
            began: Instant::now(),
            buf,
        })
    }

    /// The histogram of `kind` for the interval from `from` to `to` (nothing
    /// for an empty one).
    pub fn interval(
        &mut self,
        kind: &str,
        h: &Histogram<u64>,
        from: Instant,
        to: Instant,
    ) -> std::io::Result<()> {
        if h.is_empty() {
            return Ok(());
        }
        self.buf.clear();
        let mut w =
            IntervalLogWriterBuilder::new().begin_log_with(&mut self.buf, &mut self.serializer)?;
        w.write_histogram(
            h,
            from.saturating_duration_since(self.began),
            to.saturating_duration_since(from)
                .max(Duration::from_millis(1)),
            Tag::new(kind),
        )
        .map_err(io_error)?;
        self.file.write_all(&self.buf)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hdrhistogram::serialization::interval_log::{IntervalLogIterator, LogEntry};
    use hdrhistogram::serialization::Deserializer;

    #[test]
    fn intervals_read_back_tagged_and_add_up_to_the_run() {
        let dir = std::env::temp_dir().join(format!("sibyl-hdrlog-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let path = dir.join("run.hdr");
        let mut log = HdrLog::create(path.to_str().expect("path")).expect("create");
        let new = || Histogram::<u64>::new_with_bounds(1, 60_000_000, 3).expect("histogram");
        let (mut writes, mut reads, mut all) = (new(), new(), new());
        for v in [120u64, 250, 2_480, 2_530, 9_000] {
            writes.record(v).expect("record");
            all.record(v).expect("record");
        }
        for v in 1..=1000u64 {
            reads.record(v * 3).expect("record");
            all.record(v * 3).expect("record");
        }
        let t0 = Instant::now();
        let t1 = t0 + Duration::from_secs(1);
        log.interval("WRITE", &writes, t0, t1).expect("write");
        log.interval("READ", &reads, t0, t1).expect("write");
        log.interval("READ", &new(), t1, t1 + Duration::from_secs(1))
            .expect("an empty interval writes nothing");
        drop(log);
        let text = std::fs::read(&path).expect("read");
        let mut tags = Vec::new();
        let mut merged = new();
        let mut de = Deserializer::new();
        for e in IntervalLogIterator::new(&text) {
            if let LogEntry::Interval(h) = e.expect("entry") {
                tags.push(h.tag().map(|t| t.as_str().to_string()));
                let bytes = base64_decode(h.encoded_histogram());
                let back: Histogram<u64> = de
                    .deserialize(&mut std::io::Cursor::new(bytes))
                    .expect("deserialize");
                merged.add(&back).expect("add");
            }
        }
        assert_eq!(tags, [Some("WRITE".into()), Some("READ".into())]);
        assert_eq!(merged.len(), all.len());
        for q in [0.5, 0.99, 0.999] {
            assert_eq!(merged.value_at_quantile(q), all.value_at_quantile(q));
        }
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// Standard base64, enough for the test (the crate's own engine is private).
    fn base64_decode(s: &str) -> Vec<u8> {
        let val = |c: u8| match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' => 62,
            _ => 63,
        };
        let bytes: Vec<u8> = s.bytes().filter(|c| *c != b'=').collect();
        let mut out = Vec::new();
        for chunk in bytes.chunks(4) {
            let mut n = 0u32;
            for (i, c) in chunk.iter().enumerate() {
                n |= (val(*c) as u32) << (18 - 6 * i);
            }
            out.extend_from_slice(&n.to_be_bytes()[1..chunk.len()]);
        }
        out
    }
}
