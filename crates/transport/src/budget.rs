//! Budgets of units (request bytes, in-flight requests, response bytes)
//! that requests take before they run and give back when answered.
//!
//! Every request takes from four of them (its connection's slots and
//! response bytes, the node's and its client address's request bytes), so
//! they are on the path of every request. tokio's `Semaphore` takes a lock
//! on every release and a `Vec` held the permits; here taking is one
//! compare-and-swap while units are available, giving back one atomic add,
//! and only a request that has to wait registers to be woken. Waiters are
//! not served in order: as in Cassandra, whose request limits are checked
//! as each message arrives, a small request may pass a large one that waits.

use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::Arc;
use tokio::sync::Notify;

/// A number of units shared by requests.
#[derive(Debug)]
pub struct Budget {
    available: AtomicUsize,
    /// Requests waiting for units: givers wake them only when there are.
    waiting: AtomicUsize,
    given: Notify,
}

impl Budget {
    pub fn new(units: usize) -> Arc<Budget> {
        Arc::new(Budget {
            available: AtomicUsize::new(units),
            waiting: AtomicUsize::new(0),
            given: Notify::new(),
        })
    }

    /// Units available now.
    pub fn available(&self) -> usize {
        self.available.load(SeqCst)
    }

    fn try_take_units(&self, n: usize) -> bool {
        let mut a = self.available.load(SeqCst);
        loop {
            if a < n {
                return false;
            }
            match self
                .available
                .compare_exchange_weak(a, a - n, SeqCst, SeqCst)
            {
                Ok(_) => return true,
                Err(now) => a = now,
            }
        }
    }

    /// `n` units if available now.
    pub fn try_take(self: &Arc<Self>, n: usize) -> Option<Taken> {
        self.try_take_units(n).then(|| Taken {
            budget: self.clone(),
            units: n,
        })
    }

    /// `n` units, waiting until they are given back if need be.
    pub async fn take(self: &Arc<Self>, n: usize) -> Taken {
        if let Some(t) = self.try_take(n) {
            return t;
        }
        self.waiting.fetch_add(1, SeqCst);
        // counted out again however the wait ends (also when cancelled)
        struct Waiting<'a>(&'a Budget);
        impl Drop for Waiting<'_> {
            fn drop(&mut self) {
                self.0.waiting.fetch_sub(1, SeqCst);
            }
        }
        let _w = Waiting(self);
        loop {
            // registered before the check: a give after the check wakes it
            let given = self.given.notified();
            tokio::pin!(given);
            given.as_mut().enable();
            if let Some(t) = self.try_take(n) {
                return t;
            }
            given.await;
        }
    }

    fn give(&self, n: usize) {
        if n == 0 {
            return;
        }
        self.available.fetch_add(n, SeqCst);
        if self.waiting.load(SeqCst) > 0 {
            self.given.notify_waiters();
        }
    }
}

/// Units taken from a budget; given back when dropped.
#[derive(Debug)]
pub struct Taken {
    budget: Arc<Budget>,
    units: usize,
}

impl Taken {
    pub fn units(&self) -> usize {
        self.units
    }

    /// Adds `more` to what is held, if available now.
    pub fn try_grow(&mut self, more: usize) -> bool {
        let ok = self.budget.try_take_units(more);
        if ok {
            self.units += more;
        }
        ok
    }
}

impl Drop for Taken {
    fn drop(&mut self) {
        self.budget.give(self.units);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test]
    async fn units_are_taken_and_given_back() {
        let b = Budget::new(10);
        let a = b.try_take(4).expect("4 of 10");
        let mut c = b.take(6).await;
        assert_eq!(b.available(), 0);
        assert!(b.try_take(1).is_none());
        assert!(!c.try_grow(1));
        drop(a);
        assert!(c.try_grow(3));
        assert_eq!((c.units(), b.available()), (9, 1));
        drop(c);
        assert_eq!(b.available(), 10);
        assert!(b.try_take(0).is_some());
    }

    #[tokio::test]
    async fn a_waiter_is_woken_when_enough_is_given_back() {
        let b = Budget::new(8);
        let first = b.take(5).await;
        let second = b.take(2).await;
        let b2 = b.clone();
        let waiter = tokio::spawn(async move { b2.take(6).await.units() });
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(!waiter.is_finished());
        drop(second); // 3 free: not enough
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(!waiter.is_finished());
        drop(first);
        assert_eq!(waiter.await.expect("woken"), 6);
        assert_eq!(b.available(), 8);
    }

    #[tokio::test]
    async fn a_cancelled_wait_is_counted_out() {
        let b = Budget::new(1);
        let held = b.take(1).await;
        let r = tokio::time::timeout(Duration::from_millis(10), b.take(1)).await;
        assert!(r.is_err());
        assert_eq!(b.waiting.load(SeqCst), 0);
        drop(held);
        assert_eq!(b.available(), 1);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn many_takers_never_exceed_the_budget() {
        let b = Budget::new(5);
        let live = Arc::new(AtomicUsize::new(0));
        let mut tasks = Vec::new();
        for i in 0..200 {
            let (b, live) = (b.clone(), live.clone());
            tasks.push(tokio::spawn(async move {
                let t = b.take(1 + i % 3).await;
                let now = live.fetch_add(t.units(), SeqCst) + t.units();
                assert!(now <= 5, "{now} units out of 5");
                tokio::task::yield_now().await;
                live.fetch_sub(t.units(), SeqCst);
            }));
        }
        for t in tasks {
            t.await.expect("task");
        }
        assert_eq!(b.available(), 5);
    }
}
