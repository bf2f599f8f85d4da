//! Where trace sessions are kept (Cassandra's `TraceKeyspace` and the
//! writing half of `TraceStateImpl`): sessions and events become rows of
//! `system_traces.sessions` and `system_traces.events`, with the session
//! type's TTL, written through the coordinator at consistency ANY by a
//! background task so that a traced request never waits for its trace.
//!
//! The queue is bounded: past it, records are dropped and counted, as a
//! trace is never worth slowing the request it describes.

use crate::StorageProxy;
use bytes::Bytes;
use sibyl_db::cells::WriteParams;
use sibyl_db::Mutation;
use sibyl_protocol::Consistency;
use sibyl_schema::schema::TableMetadata;
use sibyl_schema::schema_tables::{inet, int, row_mutation, text, text_map, uuid};
use sibyl_tracing::{SessionStart, TraceEvent, TraceSink, TraceTtls, TraceType};
use std::sync::{Arc, Weak};
use tokio::sync::mpsc;

/// Records queued for writing at most.
pub const QUEUE_CAPACITY: usize = 8192;
/// Records written in one coordinator write at most.
const WRITE_BATCH: usize = 256;

enum Record {
    Started(SessionStart),
    Ended {
        session_id: uuid::Uuid,
        kind: TraceType,
        duration_micros: i32,
    },
    Event(TraceEvent),
}

/// The sink the node's [`sibyl_tracing::Tracer`] records into.
pub struct TraceWriter {
    tx: mpsc::Sender<Record>,
    /// Records lost to a full queue.
    pub dropped: sibyl_metrics::Counter,
}

impl TraceWriter {
    /// Starts the task that writes what is recorded through `proxy`.
    pub fn start(proxy: Weak<StorageProxy>, ttls: TraceTtls) -> Arc<TraceWriter> {
        let (tx, mut rx) = mpsc::channel::<Record>(QUEUE_CAPACITY);
        tokio::spawn(async move {
            let mut batch = Vec::with_capacity(WRITE_BATCH);
            while let Some(first) = rx.recv().await {
                batch.push(first);
                while batch.len() < WRITE_BATCH {
                    match rx.try_recv() {
                        Ok(r) => batch.push(r),
                        Err(_) => break,
                    }
                }
                let Some(proxy) = proxy.upgrade() else { return };
                let schema = proxy.schema();
                let (Some(sessions), Some(events)) = (
                    schema.table("system_traces", "sessions"),
                    schema.table("system_traces", "events"),
                ) else {
                    batch.clear();
                    continue;
                };
                let ms: Vec<Mutation> = batch
                    .drain(..)
                    .map(|r| mutation(&r, sessions, events, &ttls))
                    .collect();
                if let Err(e) = proxy.mutate(ms, Consistency::Any).await {
                    tracing::debug!("trace rows not written: {e}");
                }
            }
        });
        Arc::new(TraceWriter {
            tx,
            dropped: sibyl_metrics::Counter::default(),
        })
    }

    fn push(&self, r: Record) {
        if self.tx.try_send(r).is_err() {
            self.dropped.inc();
        }
    }
}

impl TraceSink for TraceWriter {
    fn session_started(&self, start: SessionStart) {
        self.push(Record::Started(start));
    }

    fn session_ended(&self, session_id: uuid::Uuid, kind: TraceType, duration_micros: i32) {
        self.push(Record::Ended {
            session_id,
            kind,
            duration_micros,
        });
    }

    fn event(&self, event: TraceEvent) {
        self.push(Record::Event(event));
    }
}

/// The row a record writes, as Cassandra's `TraceKeyspace.make*Mutation`.
fn mutation(
    r: &Record,
    sessions: &TableMetadata,
    events: &TableMetadata,
    ttls: &TraceTtls,
) -> Mutation {
    let params = |kind: TraceType| WriteParams {
        timestamp: sibyl_types::timeuuid::timestamp_micros_now(),
        ttl: ttls.of(kind),
        now: sibyl_db::now_in_seconds(),
    };
    match r {
        Record::Started(s) => row_mutation(
            sessions,
            &[uuid(s.session_id)],
            &[],
            &[
                ("client", Some(inet(s.client))),
                ("command", Some(text(s.command))),
                ("coordinator", Some(inet(s.coordinator))),
                ("coordinator_port", Some(int(i32::from(s.coordinator_port)))),
                ("parameters", Some(text_map(&s.parameters))),
                ("request", Some(text(&s.request))),
                (
                    "started_at",
                    Some(Bytes::copy_from_slice(&s.started_at_millis.to_be_bytes())),
                ),
            ],
            &params(s.kind),
        ),
        Record::Ended {
            session_id,
            kind,
            duration_micros,
        } => {
            let mut m = row_mutation(
                sessions,
                &[uuid(*session_id)],
                &[],
                &[("duration", Some(int(*duration_micros)))],
                &params(*kind),
            );
            // an update of one column: no row marker of its own
            m.update.rows.retain(|_, r| {
                r.liveness = None;
                true
            });
            m
        }
        Record::Event(e) => row_mutation(
            events,
            &[uuid(e.session_id)],
            &[uuid(e.event_id)],
            &[
                ("activity", Some(text(&e.activity))),
                ("source", Some(inet(e.source))),
                ("source_elapsed", Some(int(e.source_elapsed_micros))),
                ("source_port", Some(int(i32::from(e.source_port)))),
                ("thread", Some(text(&e.thread))),
            ],
            &params(e.kind),
        ),
    }
}
