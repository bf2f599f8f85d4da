//! Warnings for the client of the request being served (Cassandra's
//! `ClientWarn`): code below the coordinator adds them with [`warn`], and
//! the CQL server sends them with the response (the protocol's WARNING
//! flag, v4+).
//!
//! The collector is a task-local the server opens per request
//! ([`collecting`]); work a request hands to another task takes it along only
//! through [`propagate`], so a replica's warnings reach the client only when
//! the coordinator itself did that replica's work, as in Cassandra with
//! `read_thresholds_enabled: false`.

use futures::future::Either;
use parking_lot::Mutex;
use std::future::Future;
use std::sync::Arc;

/// Warnings one response carries at most: more are not worth a frame.
const MAX_WARNINGS: usize = 64;

tokio::task_local! {
    static WARNINGS: Arc<Mutex<Vec<String>>>;
}

/// Adds a warning to the running request's response, if it collects them.
pub fn warn(message: impl Into<String>) {
    let _ = WARNINGS.try_with(|w| {
        let mut w = w.lock();
        if w.len() < MAX_WARNINGS {
            w.push(message.into());
        }
    });
}

/// Where the warnings of one request are collected: see [`collecting`].
#[derive(Clone)]
pub struct Collector(Arc<Mutex<Vec<String>>>);

thread_local! {
    /// A collector's storage no request holds any more, for the thread's
    /// next request: every request makes a collector, and few warn.
    static SPARE: std::cell::Cell<Option<Arc<Mutex<Vec<String>>>>> = const { std::cell::Cell::new(None) };
}

impl Default for Collector {
    fn default() -> Collector {
        Collector(SPARE.take().unwrap_or_default())
    }
}

impl Drop for Collector {
    fn drop(&mut self) {
        // the last holder, nothing left in it: kept for the next request
        if Arc::strong_count(&self.0) == 1
            && Arc::weak_count(&self.0) == 0
            && self.0.lock().is_empty()
        {
            SPARE.set(Some(self.0.clone()));
        }
    }
}

impl Collector {
    /// The warnings collected so far, taken out.
    pub fn take(&self) -> Vec<String> {
        std::mem::take(&mut *self.0.lock())
    }
}

/// `fut` adding the warnings added within it to `c`, which the caller
/// takes once `fut` is done. (Not a wrapper returning them with the output:
/// mapping the output moves the whole future when it completes, and the
/// request's future is large; see `sibyl_tracing::scope`.)
pub fn collecting<F: Future>(c: &Collector, fut: F) -> impl Future<Output = F::Output> {
    WARNINGS.scope(c.0.clone(), fut)
}

/// `fut` adding its warnings to the running request's, if it collects them
/// (work the coordinator hands to another task but does itself).
pub fn propagate<F: Future>(fut: F) -> impl Future<Output = F::Output> {
    match WARNINGS.try_with(|w| w.clone()).ok() {
        Some(w) => Either::Left(WARNINGS.scope(w, fut)),
        None => Either::Right(fut),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn warnings_reach_the_request_that_collects_them_only() {
        warn("nobody listens");
        let c = Collector::default();
        collecting(&c, async {
            warn("one");
            propagate(async { warn("two") }).await;
            // a task of its own, not propagated: its warnings are not this request's
            tokio::spawn(async { warn("lost") }).await.ok();
            tokio::spawn(propagate(async { warn("three") })).await.ok();
        })
        .await;
        assert_eq!(c.take(), ["one", "two", "three"]);
    }

    #[tokio::test]
    async fn a_collector_made_from_a_spare_starts_empty_and_alone() {
        let c = Collector::default();
        collecting(&c, async { warn("kept") }).await;
        // dropped holding a warning: not kept as a spare
        drop(c);
        let c = Collector::default();
        assert!(c.take().is_empty());
        drop(c);
        // a spare is reused by one collector only
        let (a, b) = (Collector::default(), Collector::default());
        assert!(!Arc::ptr_eq(&a.0, &b.0));
        collecting(&a, async { warn("a") }).await;
        assert!(b.take().is_empty());
        assert_eq!(a.take(), ["a"]);
    }
}
