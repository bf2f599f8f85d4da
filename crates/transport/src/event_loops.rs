//! The threads client connections run on: one single-threaded runtime per
//! core (Netty's event loop group in Cassandra), each connection owned by
//! one of them for its whole life. A connection's reading, its requests and
//! its writing then run on one thread: a request never waits for another
//! thread to be woken, nor its response for a third one (on a work-stealing
//! runtime, each request handed between two threads cost writes a third of
//! their throughput, bench/README.md). Connections are spread round-robin;
//! the node's own work (gossip, internode messaging, flushes, compaction)
//! stays on the node's runtime.

use std::sync::atomic::{AtomicUsize, Ordering};
use tokio::runtime::Handle;
use tokio::sync::oneshot;

/// Stack of an event loop's thread: statements are bounded in nesting and
/// every stage recurses at most that deep, with an unoptimised build's
/// frames too (address space only: pages are touched as used).
const STACK_BYTES: usize = 16 << 20;

pub struct EventLoops {
    handles: Vec<Handle>,
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

    /// The loop the next connection goes to (none when there are none).
    pub fn next(&self) -> Option<&Handle> {
        if self.handles.is_empty() {
            return None;
        }
        let i = self.next.fetch_add(1, Ordering::Relaxed) % self.handles.len();
        Some(&self.handles[i])
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
                loops.next().unwrap().spawn(async move {
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
        loops.next().unwrap().spawn(async move {
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
}
