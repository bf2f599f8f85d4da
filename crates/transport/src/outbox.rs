//! A connection's responses on their way to its socket.
//!
//! Requests encode their responses straight into the outbox's buffer, under
//! a lock that only the connection's own tasks take (they share one event
//! loop thread); the writer takes the whole buffer at once and writes it
//! with one call. No buffer per response, no channel, one copy (none for
//! v3/v4 framing). What a response holds (its budgets, `Held`) is given
//! back once the write carrying it returns.

use parking_lot::Mutex;
use sibyl_protocol::segment::encode_segments;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use tokio::io::{AsyncWrite, AsyncWriteExt};
use tokio::sync::Notify;

/// Bytes queued beyond which messages that hold no response budget (events,
/// errors of the connection itself) wait for the writer: a client that
/// reads nothing cannot make the node queue without bound.
const HIGH_WATER_BYTES: usize = 4 << 20;

struct Queued<H> {
    frames: Vec<u8>,
    held: Vec<H>,
    /// `frames[..at]` are the last plain frames; from there on, v5 segments
    /// (LZ4-compressed when the flag is set).
    switch_at: Option<(usize, bool)>,
    /// The writer is gone (the socket failed): what is pushed is dropped.
    dead: bool,
}

struct Shared<H> {
    queued: Mutex<Queued<H>>,
    /// Something was queued into an empty outbox, or the last sender left.
    ready: Notify,
    /// The writer took what was queued.
    drained: Notify,
    senders: AtomicUsize,
}

/// A handle that queues responses; the writer stops once every handle is
/// dropped and what they queued is written.
pub struct Outbox<H> {
    shared: Arc<Shared<H>>,
}

impl<H> Clone for Outbox<H> {
    fn clone(&self) -> Self {
        self.shared.senders.fetch_add(1, Ordering::SeqCst);
        Outbox {
            shared: self.shared.clone(),
        }
    }
}

impl<H> Drop for Outbox<H> {
    fn drop(&mut self) {
        if self.shared.senders.fetch_sub(1, Ordering::SeqCst) == 1 {
            self.shared.ready.notify_one();
        }
    }
}

/// A response that did not fit its budget: its bytes, and what `admit`
/// gave back, to be queued once the budget allows.
pub struct Refused<X> {
    pub frame: Vec<u8>,
    pub back: X,
}

impl<H: Send + 'static> Outbox<H> {
    /// An outbox and its writer, which runs until every handle is gone.
    pub fn new<W>(wr: W, yield_first: bool) -> (Outbox<H>, impl std::future::Future<Output = ()>)
    where
        W: AsyncWrite + Unpin,
    {
        let shared = Arc::new(Shared {
            queued: Mutex::new(Queued {
                frames: Vec::with_capacity(64 * 1024),
                held: Vec::new(),
                switch_at: None,
                dead: false,
            }),
            ready: Notify::new(),
            drained: Notify::new(),
            senders: AtomicUsize::new(1),
        });
        let writer = write_loop(shared.clone(), wr, yield_first);
        (Outbox { shared }, writer)
    }

    fn queue(&self, f: impl FnOnce(&mut Queued<H>)) {
        let mut q = self.shared.queued.lock();
        if q.dead {
            return;
        }
        let was_empty = q.frames.is_empty() && q.held.is_empty();
        f(&mut q);
        drop(q);
        if was_empty {
            self.shared.ready.notify_one();
        }
    }

    /// Encodes a response into the queue. `admit(len)`, with the frame's
    /// encoded length, gives what the response holds until written, or
    /// refuses (its budget is spent): the frame is then taken back out and
    /// returned with what `admit` gave back.
    pub fn push_response<X>(
        &self,
        encode: impl FnOnce(&mut Vec<u8>),
        admit: impl FnOnce(usize) -> Result<H, X>,
    ) -> Result<(), Refused<X>> {
        let mut refused = None;
        self.queue(|q| {
            let start = q.frames.len();
            encode(&mut q.frames);
            match admit(q.frames.len() - start) {
                Ok(held) => q.held.push(held),
                Err(back) => {
                    refused = Some(Refused {
                        frame: q.frames.split_off(start),
                        back,
                    })
                }
            }
        });
        refused.map_or(Ok(()), Err)
    }

    /// Queues an encoded frame with what it holds.
    pub fn push_frame(&self, frame: &[u8], held: Option<H>) {
        self.queue(|q| {
            q.frames.extend_from_slice(frame);
            q.held.extend(held);
        });
    }

    /// Queues a message that holds no budget, first waiting while the
    /// queue is over its high-water mark.
    pub async fn push_unbudgeted(&self, encode: impl FnOnce(&mut Vec<u8>)) {
        loop {
            let drained = self.shared.drained.notified();
            tokio::pin!(drained);
            drained.as_mut().enable();
            {
                let q = self.shared.queued.lock();
                if q.dead || q.frames.len() < HIGH_WATER_BYTES {
                    break;
                }
            }
            drained.await;
        }
        self.queue(|q| encode(&mut q.frames));
    }

    /// Queues the last plain frame (READY or AUTHENTICATE of protocol v5):
    /// everything after it is framed in segments.
    pub fn push_switch_to_v5(&self, frame: &[u8], lz4: bool) {
        self.queue(|q| {
            q.frames.extend_from_slice(frame);
            q.switch_at = Some((q.frames.len(), lz4));
        });
    }
}

async fn write_loop<H, W: AsyncWrite + Unpin>(
    shared: Arc<Shared<H>>,
    mut wr: W,
    yield_first: bool,
) {
    let mut v5: Option<bool> = None;
    let mut frames: Vec<u8> = Vec::with_capacity(64 * 1024);
    let mut held: Vec<H> = Vec::new();
    let mut segments: Vec<u8> = Vec::new();
    loop {
        // (the lock is taken and released without an await in between)
        let taken = {
            let mut q = shared.queued.lock();
            if q.frames.is_empty() && q.held.is_empty() {
                None
            } else {
                std::mem::swap(&mut q.frames, &mut frames);
                std::mem::swap(&mut q.held, &mut held);
                Some(q.switch_at.take())
            }
        };
        let Some(switch_at) = taken else {
            if shared.senders.load(Ordering::SeqCst) == 0 {
                break;
            }
            shared.ready.notified().await;
            if yield_first {
                // let the requests already running finish first, so
                // their responses go out in the same write
                tokio::task::yield_now().await;
            }
            continue;
        };
        shared.drained.notify_waiters();
        let out: &[u8] = match (v5, switch_at) {
            (_, Some((at, lz4))) => {
                segments.clear();
                segments.extend_from_slice(&frames[..at]);
                if at < frames.len() {
                    encode_segments(&frames[at..], lz4, &mut segments);
                }
                v5 = Some(lz4);
                &segments
            }
            (Some(lz4), None) if !frames.is_empty() => {
                segments.clear();
                encode_segments(&frames, lz4, &mut segments);
                &segments
            }
            _ => &frames,
        };
        let ok = wr.write_all(out).await.is_ok();
        frames.clear();
        held.clear();
        if frames.capacity() > 4 * HIGH_WATER_BYTES {
            frames = Vec::with_capacity(64 * 1024);
        }
        if !ok {
            {
                let mut q = shared.queued.lock();
                q.dead = true;
                q.frames = Vec::new();
                q.held.clear();
            }
            shared.drained.notify_waiters();
            return;
        }
    }
    let _ = wr.shutdown().await;
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncReadExt;

    #[tokio::test]
    async fn frames_are_written_in_order_and_held_until_written() {
        let (client, server) = tokio::io::duplex(1 << 16);
        let (out, writer) = Outbox::<Arc<()>>::new(server, false);
        let writer = tokio::spawn(writer);
        let token = Arc::new(());
        out.push_frame(b"one,", Some(token.clone()));
        let t = token.clone();
        let fits = out.push_response(
            |b| b.extend_from_slice(b"two,"),
            |n| {
                assert_eq!(n, 4);
                Ok::<_, ()>(t)
            },
        );
        assert!(fits.is_ok());
        let t = token.clone();
        let Err(refused) = out.push_response(|b| b.extend_from_slice(b"big"), |_| Err(t)) else {
            panic!("a response over its budget is refused");
        };
        assert_eq!(refused.frame, b"big");
        let o2 = out.clone();
        o2.push_unbudgeted(|b| b.extend_from_slice(b"three")).await;
        drop((out, o2, refused));
        writer.await.expect("writer");
        let mut got = Vec::new();
        let mut client = client;
        client.read_to_end(&mut got).await.expect("read");
        assert_eq!(got, b"one,two,three");
        assert_eq!(Arc::strong_count(&token), 1, "held values given back");
    }

    #[tokio::test]
    async fn after_the_switch_frames_go_in_segments() {
        let (mut client, server) = tokio::io::duplex(1 << 16);
        let (out, writer) = Outbox::<()>::new(server, false);
        let writer = tokio::spawn(writer);
        out.push_switch_to_v5(b"READY", false);
        out.push_frame(b"frame", None);
        drop(out);
        writer.await.expect("writer");
        let mut got = Vec::new();
        client.read_to_end(&mut got).await.expect("read");
        assert_eq!(&got[..5], b"READY");
        let mut seg = Vec::new();
        encode_segments(b"frame", false, &mut seg);
        assert_eq!(&got[5..], &seg[..]);
    }
}
