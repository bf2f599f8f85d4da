//! The threads client connections run on: one single-threaded runtime per
//! core (Netty's event loop group in Cassandra), each connection owned by
//! one of them for its whole life. A connection's reading, its requests and
//! its writing then run on one thread: a request never waits for another
//! thread to be woken, nor its response for a third one (on a work-stealing
//! runtime, each request handed between two threads cost writes a third of
//! their throughput, bench/README.md). Connections are spread round-robin;
//! the node's own work (gossip, internode messaging, flushes, compaction)
//! stays on the node's runtime.
//!
//! A new connection goes to the loop with the fewest connections that
//! carry requests, ties in turn. A connection that registers for events
//! (a driver's control connection: a few queries at start, then events)
//! stops counting: with plain round-robin, two clients that each open a
//! control connection and then one for requests put both request
//! connections on the same loop, and one core served all the load while
//! the other's loop sat idle (writes at 128 in flight from two latte
//! processes: 153k/s against 225k/s when they landed apart).

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use tokio::runtime::Handle;
use tokio::sync::oneshot;

/// Stack of an event loop's thread: statements are bounded in nesting and
/// every stage recurses at most that deep, with an unoptimised build's
/// frames too (address space only: pages are touched as used).
const STACK_BYTES: usize = 16 << 20;

pub struct EventLoops {
    handles: Vec<Handle>,
    /// Connections on each loop that count ([`Placed`]).
    loads: Arc<[AtomicUsize]>,
    next: AtomicUsize,
    /// Dropped with the group: each loop's thread then ends, and the tasks
    /// still on it are dropped.
    _stops: Vec<oneshot::Sender<()>>,
}

impl EventLoops {
    /// Starts `n` event loops.
    pub fn start(n: usize) -> std::io::Result<EventLoops> {
        let mut handles = Vec::new();
        let mut stops = Vec::new();
        for i in 0..n {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()?;
            handles.push(rt.handle().clone());
            let (tx, rx) = oneshot::channel::<()>();
            stops.push(tx);
            std::thread::Builder::new()
                .name(format!("native-transport-{i}"))
                .stack_size(STACK_BYTES)
                .spawn(move || {
                    // each loop records its requests' latencies apart
                    sibyl_metrics::use_stripe(i);
                    let _ = rt.block_on(rx);
                })?;
        }
        Ok(EventLoops {
            loads: (0..handles.len()).map(|_| AtomicUsize::new(0)).collect(),
            handles,
            next: AtomicUsize::new(0),
            _stops: stops,
        })
    }

    /// The number of event loops: `SIBYL_NATIVE_TRANSPORT_THREADS` when set
    /// (0: none, connections run on the node's runtime), else one per core.
    pub fn default_count() -> usize {
        std::env::var("SIBYL_NATIVE_TRANSPORT_THREADS")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| {
                std::thread::available_parallelism()
                    .map(|n| n.get())
                    .unwrap_or(1)
            })
    }

    pub fn len(&self) -> usize {
        self.handles.len()
    }

    pub fn is_empty(&self) -> bool {
        self.handles.is_empty()
    }

    /// The loop the next connection goes to (none when there are none):
    /// the one with the fewest counted connections, ties in turn. The
    /// connection counts there while the [`Placed`] lives.
    pub fn next(&self) -> Option<(&Handle, Placed)> {
        let n = self.handles.len();
        if n == 0 {
            return None;
        }
        let from = self.next.fetch_add(1, Ordering::Relaxed) % n;
        let i = (from..from + n)
            .map(|i| i % n)
            .min_by_key(|i| self.loads[*i].load(Ordering::Relaxed))
            .unwrap_or(from);
        self.loads[i].fetch_add(1, Ordering::Relaxed);
        Some((
            &self.handles[i],
            Placed {
                loads: self.loads.clone(),
                index: i,
                counted: AtomicBool::new(true),
            },
        ))
    }

    /// Counted connections on each loop.
    pub fn loads(&self) -> Vec<usize> {
        self.loads
            .iter()
            .map(|l| l.load(Ordering::Relaxed))
            .collect()
    }
}

/// A connection's place on its loop: counted in the loop's load until it
/// registers for events ([`uncount`](Self::uncount)) or closes.
pub struct Placed {
    loads: Arc<[AtomicUsize]>,
    index: usize,
    counted: AtomicBool,
}

impl Placed {
    /// The connection carries few requests (it registered for events): it
    /// no longer weighs on where the next connections go.
    pub fn uncount(&self) {
        if self.counted.swap(false, Ordering::Relaxed) {
            self.loads[self.index].fetch_sub(1, Ordering::Relaxed);
        }
    }
}

impl Drop for Placed {
    fn drop(&mut self) {
        self.uncount();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn connections_are_spread_round_robin_and_run_on_their_loop() {
        let loops = EventLoops::start(2).unwrap();
        assert_eq!(loops.len(), 2);
        let names: Vec<String> = (0..4)
            .map(|_| {
                let (tx, rx) = std::sync::mpsc::channel();
                let (h, placed) = loops.next().unwrap();
                // each closed at once: every loop is as loaded as the next
                drop(placed);
                h.spawn(async move {
                    let name = std::thread::current().name().unwrap_or("").to_string();
                    tx.send(name).unwrap();
                });
                rx.recv_timeout(std::time::Duration::from_secs(10)).unwrap()
            })
            .collect();
        assert_eq!(
            names,
            [
                "native-transport-0",
                "native-transport-1",
                "native-transport-0",
                "native-transport-1"
            ]
        );
    }

    #[test]
    fn dropping_the_group_ends_its_threads_and_drops_their_tasks() {
        let loops = EventLoops::start(1).unwrap();
        let (tx, rx) = std::sync::mpsc::channel::<()>();
        loops.next().unwrap().0.spawn(async move {
            let _tx = tx;
            std::future::pending::<()>().await;
        });
        drop(loops);
        // the task's sender is dropped with the runtime
        assert!(matches!(
            rx.recv_timeout(std::time::Duration::from_secs(10)),
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected)
        ));
    }

    #[test]
    fn a_connection_goes_to_the_loop_with_the_fewest_counted_ones() {
        let loops = EventLoops::start(2).unwrap();
        let place = || {
            let (h, p) = loops.next().unwrap();
            let (tx, rx) = std::sync::mpsc::channel();
            h.spawn(async move {
                let _ = tx.send(std::thread::current().name().unwrap_or("").to_string());
            });
            (
                rx.recv_timeout(std::time::Duration::from_secs(10)).unwrap(),
                p,
            )
        };
        // two clients, each a control connection then one for requests,
        // one after the other: round-robin put both request connections
        // on loop 1
        let (c1, control1) = place();
        control1.uncount(); // its REGISTER
        let (d1, _data1) = place();
        let (c2, control2) = place();
        control2.uncount();
        let (d2, _data2) = place();
        assert_ne!(d1, d2, "the request connections share a loop");
        assert_eq!(loops.loads(), [1, 1]);
        // uncounting twice, then closing, takes it off once
        control1.uncount();
        drop(control1);
        assert_eq!(loops.loads(), [1, 1]);
        assert_ne!(c1, "");
        assert_ne!(c2, "");
        // a closed connection leaves its loop
        drop(_data1);
        assert_eq!(loops.loads().iter().sum::<usize>(), 1);
        let (d3, _data3) = place();
        assert_eq!(d3, d1, "the new connection goes where one closed");
    }
}
