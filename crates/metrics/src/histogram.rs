//! Histograms for the numbers operators watch per table: local read and
//! write latencies, SSTables touched per read, partition sizes and cell
//! counts (Cassandra's `EstimatedHistogram`: bucket offsets growing by 1.2x,
//! so a percentile is exact to about 20%).

use std::cell::Cell;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::OnceLock;

/// Buckets: offsets 1, 2, 3, ... growing by 1.2x up to about 3.6e10, plus one
/// for anything larger.
pub const BUCKETS: usize = 140;

/// The upper bound of each bucket (Cassandra's `EstimatedHistogram` offsets).
pub fn bucket_offsets() -> &'static [u64] {
    &buckets().offsets
}

/// Values under this find their bucket in one load ([`bucket_of`]): every
/// request records three or four latencies of a few to a few thousand
/// microseconds, and a binary search of the offsets is eight dependent
/// loads (a third of a timer's cost in a profile of writes).
const DIRECT: usize = 4096;

struct Buckets {
    offsets: Vec<u64>,
    /// The bucket of each value under [`DIRECT`].
    direct: Vec<u8>,
}

fn buckets() -> &'static Buckets {
    static BUCKETS_OF: OnceLock<Buckets> = OnceLock::new();
    BUCKETS_OF.get_or_init(|| {
        let mut offsets = Vec::with_capacity(BUCKETS);
        let mut last = 1u64;
        offsets.push(last);
        while offsets.len() < BUCKETS {
            let next = ((last as f64) * 1.2).round() as u64;
            last = next.max(last + 1);
            offsets.push(last);
        }
        let direct = (0..DIRECT as u64)
            .map(|v| offsets.partition_point(|o| *o < v) as u8)
            .collect();
        Buckets { offsets, direct }
    })
}

/// The first bucket whose upper bound is at least `value`.
pub(crate) fn bucket_of(value: u64) -> usize {
    let b = buckets();
    match b.direct.get(value as usize) {
        Some(i) => usize::from(*i),
        None => b.offsets.partition_point(|o| *o < value),
    }
}

/// The bucket bound at or under which `p` percent of `counts` fall (0 when
/// there are none); values past the last bucket report `max`.
pub fn percentile_of(counts: &[u64], p: f64, max: u64) -> u64 {
    let total: u64 = counts.iter().sum();
    if total == 0 {
        return 0;
    }
    let target = ((p / 100.0) * total as f64).ceil().max(1.0) as u64;
    let mut seen = 0;
    for (i, c) in counts.iter().enumerate() {
        seen += c;
        if seen >= target {
            return bucket_offsets()
                .get(i)
                .copied()
                .unwrap_or(max)
                .min(max.max(1));
        }
    }
    max
}

/// Stripes of a histogram: each thread records into one
/// ([`stripe_of_thread`]), so two event loops recording every request's
/// latencies do not pass the same cache lines between their cores on
/// every write (a bucket's count, the sum); reads add the stripes up.
pub const STRIPES: usize = 4;

/// One stripe's counts, on cache lines of its own.
#[derive(Debug)]
#[repr(align(64))]
struct Stripe {
    counts: [AtomicU64; BUCKETS + 1],
    sum: AtomicU64,
    max: AtomicU64,
}

impl Stripe {
    fn new() -> Box<Stripe> {
        Box::new(Stripe {
            counts: std::array::from_fn(|_| AtomicU64::new(0)),
            sum: AtomicU64::new(0),
            max: AtomicU64::new(0),
        })
    }
}

static NEXT_STRIPE: AtomicUsize = AtomicUsize::new(0);

thread_local! {
    static THREAD_STRIPE: Cell<usize> =
        Cell::new(NEXT_STRIPE.fetch_add(1, Ordering::Relaxed) % STRIPES);
}

/// The stripe the calling thread records into: given out round-robin as
/// threads first record, unless set with [`use_stripe`].
pub(crate) fn stripe_of_thread() -> usize {
    THREAD_STRIPE.with(|s| s.get())
}

/// Makes the calling thread record into stripe `i` (mod [`STRIPES`]): the
/// event loops take one each, so the threads that record on every request
/// never share one while there are stripes enough.
pub fn use_stripe(i: usize) {
    THREAD_STRIPE.with(|s| s.set(i % STRIPES));
}

/// A lock-free histogram over [`bucket_offsets`], in [`STRIPES`] stripes
/// made as threads first record into them (a table only one thread writes
/// holds one).
#[derive(Debug, Default)]
pub struct Histogram {
    stripes: [OnceLock<Box<Stripe>>; STRIPES],
}

impl Histogram {
    pub fn record(&self, value: u64) {
        self.record_in(bucket_of(value), value, true);
    }

    fn stripe(&self) -> &Stripe {
        self.stripes[stripe_of_thread()].get_or_init(Stripe::new)
    }

    fn made(&self) -> impl Iterator<Item = &Stripe> {
        self.stripes.iter().filter_map(|s| s.get().map(|b| &**b))
    }

    /// Counts `value` in its bucket `bucket` and keeps the maximum (only
    /// written when it grows); adds it to the sum when `summed` (a timer's
    /// recent windows need none).
    pub(crate) fn record_in(&self, bucket: usize, value: u64, summed: bool) {
        let s = self.stripe();
        s.counts[bucket].fetch_add(1, Ordering::Relaxed);
        if value > s.max.load(Ordering::Relaxed) {
            s.max.fetch_max(value, Ordering::Relaxed);
        }
        if summed {
            s.sum.fetch_add(value, Ordering::Relaxed);
        }
    }

    /// The bucket counts (for storing in SSTable statistics).
    pub fn counts(&self) -> Vec<u64> {
        let mut out = vec![0; BUCKETS + 1];
        for s in self.made() {
            for (o, c) in out.iter_mut().zip(&s.counts) {
                *o += c.load(Ordering::Relaxed);
            }
        }
        out
    }

    /// Adds stored bucket counts in.
    pub fn add_counts(&self, counts: &[u64]) {
        let offsets = bucket_offsets();
        let s = self.stripe();
        for (i, n) in counts.iter().enumerate().take(BUCKETS + 1) {
            if *n > 0 {
                s.counts[i].fetch_add(*n, Ordering::Relaxed);
                let v = offsets.get(i).copied().unwrap_or(u64::MAX);
                s.sum.fetch_add(v.saturating_mul(*n), Ordering::Relaxed);
                s.max.fetch_max(v, Ordering::Relaxed);
            }
        }
    }

    pub fn count(&self) -> u64 {
        self.made()
            .flat_map(|s| &s.counts)
            .map(|c| c.load(Ordering::Relaxed))
            .sum()
    }

    pub fn mean(&self) -> f64 {
        let n = self.count();
        if n == 0 {
            0.0
        } else {
            self.sum() as f64 / n as f64
        }
    }

    pub fn max(&self) -> u64 {
        self.made()
            .map(|s| s.max.load(Ordering::Relaxed))
            .max()
            .unwrap_or(0)
    }

    /// The smallest recorded bucket's bound (0 when empty).
    pub fn min(&self) -> u64 {
        let offsets = bucket_offsets();
        self.counts()
            .iter()
            .position(|c| *c > 0)
            .map(|i| if i == 0 { 0 } else { offsets[i - 1] + 1 })
            .unwrap_or(0)
    }

    /// The bucket bound at or under which `p` percent of the values fall
    /// (0 when empty); values past the last bucket report the maximum seen.
    pub fn percentile(&self, p: f64) -> u64 {
        percentile_of(&self.counts(), p, self.max())
    }

    /// Empties the histogram.
    pub fn reset(&self) {
        for s in self.made() {
            for c in &s.counts {
                c.store(0, Ordering::Relaxed);
            }
            s.sum.store(0, Ordering::Relaxed);
            s.max.store(0, Ordering::Relaxed);
        }
    }

    pub fn sum(&self) -> u64 {
        self.made().map(|s| s.sum.load(Ordering::Relaxed)).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_value_finds_the_bucket_the_search_of_the_offsets_finds() {
        let o = bucket_offsets();
        let search = |v: u64| o.partition_point(|x| *x < v);
        for v in (0..3 * DIRECT as u64).chain([u64::MAX / 2, u64::MAX]) {
            assert_eq!(bucket_of(v), search(v), "value {v}");
        }
        assert_eq!(bucket_of(0), 0);
        assert_eq!(bucket_of(u64::MAX), BUCKETS);
    }

    #[test]
    fn offsets_grow_and_percentiles_bound_the_values() {
        let o = bucket_offsets();
        assert_eq!(&o[..6], &[1, 2, 3, 4, 5, 6]);
        assert!(o.windows(2).all(|w| w[1] > w[0]));
        assert!(o[BUCKETS - 1] > 10_000_000_000);
        let h = Histogram::default();
        for v in 1..=1000u64 {
            h.record(v);
        }
        let p50 = h.percentile(50.0);
        assert!((500..=600).contains(&p50), "p50 {p50}");
        let p99 = h.percentile(99.0);
        assert!((990..=1000).contains(&p99), "p99 {p99}");
        assert_eq!(h.max(), 1000);
        assert_eq!(h.count(), 1000);
        assert!((h.mean() - 500.5).abs() < 1e-9);
        let back = Histogram::default();
        back.add_counts(&h.counts());
        assert_eq!(back.count(), 1000);
        assert_eq!(back.percentile(50.0), p50);
        assert_eq!(Histogram::default().percentile(99.0), 0);
    }

    #[test]
    fn threads_record_into_stripes_of_their_own_and_reads_add_them_up() {
        let h = std::sync::Arc::new(Histogram::default());
        let threads: Vec<_> = (0..STRIPES)
            .map(|i| {
                let h = h.clone();
                std::thread::spawn(move || {
                    use_stripe(i);
                    for v in 1..=1000u64 {
                        h.record(v * (i as u64 + 1));
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        // every stripe made, each with its thread's values only
        assert_eq!(h.made().count(), STRIPES);
        for (i, s) in h.made().enumerate() {
            let n: u64 = s.counts.iter().map(|c| c.load(Ordering::Relaxed)).sum();
            assert_eq!(n, 1000);
            assert_eq!(s.max.load(Ordering::Relaxed), 1000 * (i as u64 + 1));
        }
        let k = STRIPES as u64;
        assert_eq!(h.count(), 1000 * k);
        assert_eq!(h.sum(), 500_500 * k * (k + 1) / 2);
        assert_eq!(h.max(), 1000 * k);
        assert_eq!(h.min(), 0); // value 1 falls in the first bucket, [0, 1]
                                // the median of all stripes' values together, not of one stripe
        let mut all: Vec<u64> = (1..=k)
            .flat_map(|m| (1..=1000).map(move |v| v * m))
            .collect();
        all.sort_unstable();
        let median = all[all.len() / 2 - 1];
        assert_eq!(h.percentile(50.0), bucket_offsets()[bucket_of(median)]);
        h.reset();
        assert_eq!((h.count(), h.sum(), h.max()), (0, 0, 0));
    }

    #[test]
    fn a_histogram_no_thread_recorded_into_holds_no_stripe() {
        let h = Histogram::default();
        assert_eq!(h.made().count(), 0);
        assert_eq!((h.count(), h.sum(), h.max(), h.min()), (0, 0, 0, 0));
        h.record(5);
        assert_eq!(h.made().count(), 1);
    }
}
