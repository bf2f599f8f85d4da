//! The event-loop stall monitor, Sibyl's counterpart of Cassandra's
//! `GCInspector`: a task that asks to run every 100 ms and measures how late
//! it runs. Lateness means the runtime's threads were held (a blocking call
//! on the event loop, an allocator or a swap stall): each such pause is
//! counted for `nodetool gcstats`, written to gc.log, and logged in
//! system.log past `gc_log_threshold` (200 ms; a warning past 1 s).

use sibyl_metrics::pauses::{global, LOG_THRESHOLD, WARN_THRESHOLD};
use std::time::Duration;

/// How often the monitor asks to run.
const TICK: Duration = Duration::from_millis(100);
/// Lateness below this is the timer's own jitter, not a pause.
const MIN_PAUSE: Duration = Duration::from_millis(10);

/// Starts the monitor on the current runtime.
pub fn spawn_monitor() {
    tokio::spawn(async {
        let mut due = tokio::time::Instant::now() + TICK;
        loop {
            tokio::time::sleep_until(due).await;
            let now = tokio::time::Instant::now();
            let late = now.saturating_duration_since(due);
            if late >= MIN_PAUSE {
                record(late);
            }
            due = now + TICK;
        }
    });
}

fn record(pause: Duration) {
    global().record(pause);
    let ms = pause.as_millis();
    tracing::info!(target: "gc", "Event loop paused for {ms} ms");
    if pause >= WARN_THRESHOLD {
        tracing::warn!("Event loop paused for {ms} ms: requests waited as long");
    } else if pause >= LOG_THRESHOLD {
        tracing::info!("Event loop paused for {ms} ms");
    }
}
