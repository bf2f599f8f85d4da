//! Compactions on threads of their own, scheduled behind the threads that
//! serve requests while nothing presses.
//!
//! On a busy machine a compaction competes for a core with the event loops,
//! and every millisecond an event loop waits for a core is a millisecond on
//! the latency of every request it holds. Cassandra makes its compaction
//! threads at `Thread.MIN_PRIORITY` for the same reason; here a background
//! task's thread lowers its own scheduling priority (a nice value
//! [`BACKGROUND_NICE`] above the process's) before it starts, unless its
//! caller asks for [`Priority::Normal`]: the starvation guard is the
//! caller's choice, made from the table's compaction backlog when the task
//! starts (`StorageEngine::compaction_priority`). Flushes stay on tokio's
//! blocking pool at normal priority: one that fell behind would hold
//! writers back within seconds.
//!
//! A thread per task, not a pool: a thread's priority can be lowered by
//! anyone but raised again only with privilege, so a thread that ran a
//! background task must not serve a pressing one afterwards. Compactions
//! are few (bounded by the compactors' semaphore), so a thread's start
//! costs nothing that shows.
//!
//! `unsafe` only for `gettid`, `getpriority` and `setpriority`, which take
//! integers and touch no memory of ours. With `mapped.rs` and
//! `prefetch.rs`, the storage engine's only unsafe code.

#![allow(unsafe_code)]

use crate::StorageError;

/// How a background task's thread is scheduled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Priority {
    /// As the threads that serve requests.
    Normal,
    /// [`BACKGROUND_NICE`] behind them.
    Background,
}

/// How much nicer than the process a [`Priority::Background`] thread is:
/// under the kernel's fair scheduler, a weight about a tenth of a normal
/// thread's when both want the same core, and all of an idle core.
pub(crate) const BACKGROUND_NICE: i32 = 10;

/// Runs `f` on a thread of its own named `name`, at `priority`, and
/// returns what it returns (an error if it panicked).
pub(crate) async fn run<T, F>(name: &str, priority: Priority, f: F) -> Result<T, StorageError>
where
    T: Send + 'static,
    F: FnOnce() -> T + Send + 'static,
{
    let (tx, rx) = tokio::sync::oneshot::channel();
    let spawned = std::thread::Builder::new()
        .name(name.to_string())
        .spawn(move || {
            if priority == Priority::Background {
                lower_priority(BACKGROUND_NICE);
            }
            let _ = tx.send(f());
        });
    if let Err(source) = spawned {
        return Err(StorageError::Io {
            path: format!("a new thread for {name}"),
            source,
        });
    }
    rx.await
        .map_err(|_| StorageError::Decode(format!("{name} task failed: it panicked")))
}

/// Lowers the calling thread's scheduling priority by `by` nice steps (at
/// most to 19); false when the system refused (nothing else changes).
pub(crate) fn lower_priority(by: i32) -> bool {
    match current_nice() {
        Some(now) => set_nice(now.saturating_add(by).min(19)),
        None => false,
    }
}

/// The calling thread's nice value (Linux schedules threads, not processes:
/// `PRIO_PROCESS` with a thread id is that thread alone).
pub(crate) fn current_nice() -> Option<i32> {
    #[cfg(target_os = "linux")]
    // SAFETY: plain system calls on integers; errno is the thread's own
    unsafe {
        let tid = libc::gettid() as libc::id_t;
        *libc::__errno_location() = 0;
        let n = libc::getpriority(libc::PRIO_PROCESS, tid);
        // -1 is a nice value as well as the error return
        if n == -1 && *libc::__errno_location() != 0 {
            return None;
        }
        Some(n)
    }
    #[cfg(not(target_os = "linux"))]
    None
}

fn set_nice(n: i32) -> bool {
    #[cfg(target_os = "linux")]
    // SAFETY: a plain system call on integers
    unsafe {
        let tid = libc::gettid() as libc::id_t;
        libc::setpriority(libc::PRIO_PROCESS, tid, n) == 0
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = n;
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_background_task_runs_nicer_and_leaves_its_caller_as_it_was() {
        let before = current_nice().expect("nice of this thread");
        let inside = run("test-background", Priority::Background, current_nice)
            .await
            .expect("ran");
        assert_eq!(inside, Some((before + BACKGROUND_NICE).min(19)));
        assert_eq!(current_nice(), Some(before));
        let normal = run("test-normal", Priority::Normal, current_nice)
            .await
            .expect("ran");
        assert_eq!(normal, Some(before));
    }

    #[tokio::test]
    async fn a_panicking_task_is_an_error_not_a_hang() {
        let r: Result<(), _> = run("test-panic", Priority::Background, || panic!("boom")).await;
        let e = r.expect_err("a panic is an error");
        assert!(e.to_string().contains("test-panic task failed"), "{e}");
    }
}
