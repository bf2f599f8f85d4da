//! Lightweight transactions across replicas (Cassandra's Paxos, as
//! `StorageProxy.cas` and `readWithPaxos` run it): a coordinator prepares a
//! ballot with a quorum of the partition's replicas, finishes any proposal
//! a previous coordinator left accepted but uncommitted, brings replicas
//! that missed the last commit up to date, reads the partition at the
//! serial level's read level, checks the conditions, proposes the update
//! and, once a quorum accepted it, commits it at the statement's
//! consistency. A refused ballot means contention: the coordinator backs
//! off for a random while and tries again with a higher ballot, until
//! `cas_contention_timeout`. A SERIAL read proposes an empty update, so
//! that it cannot see a value a later read would not.

use crate::consistency::{self, serial_read_level};
use crate::error::{Result, ServiceError, WriteType};
use crate::metrics::Operation;
use crate::proxy::{Plan, StorageProxy};
use sibyl_cluster::messaging::{Request, Response};
use sibyl_db::paxos::{Ballot, Commit, Promise};
use sibyl_db::{DecoratedKey, Mutation, Partition, ReadCommand};
use sibyl_protocol::Consistency;
use sibyl_schema::schema::TableMetadata;
use std::net::IpAddr;
use std::sync::atomic::Ordering;
use tokio::time::Instant;

/// What one prepare round found.
enum Prepared {
    /// A quorum promised; the round may read and propose.
    Ready(Ballot),
    /// Refused, or an unfinished proposal was finished: try again.
    Retry,
}

impl StorageProxy {
    /// A new ballot, later than every ballot this coordinator made or saw.
    fn next_ballot(&self, at_least: i64) -> Ballot {
        let now = self.clock.now_micros().max(at_least);
        let mut last = self.last_ballot_micros.load(Ordering::Relaxed);
        loop {
            let next = now.max(last + 1);
            match self.last_ballot_micros.compare_exchange_weak(
                last,
                next,
                Ordering::Relaxed,
                Ordering::Relaxed,
            ) {
                Ok(_) => return Ballot::at(next),
                Err(x) => last = x,
            }
        }
    }

    /// The replicas of a Paxos round on `key` and the quorum it needs.
    fn paxos_plan(
        &self,
        table: &TableMetadata,
        key: &DecoratedKey,
        serial: Consistency,
    ) -> Result<Plan> {
        let schema = self.schema();
        let Some(ks) = self.keyspace_of(&schema, table.id) else {
            return Err(ServiceError::Invalid(format!("unknown table {}", table.id)));
        };
        let plan = self.write_plan(&ks.replication.strategy, key.token, serial);
        self.check_available(&plan, serial)?;
        Ok(plan)
    }

    /// Sends `make(to)` to the live replicas of `plan` and collects answers
    /// until `enough` holds, all answered, or `deadline`.
    async fn paxos_round(
        &self,
        plan: &Plan,
        request: Request,
        deadline: Instant,
        enough: impl Fn(&[(IpAddr, Response)]) -> bool,
    ) -> Vec<(IpAddr, Response)> {
        let mut tasks = tokio::task::JoinSet::new();
        for to in plan.replicas.iter().filter(|a| self.is_alive(**a)) {
            let (sender, to, request) = (self.sender(), *to, request.clone());
            let timeout = deadline.saturating_duration_since(Instant::now());
            tasks.spawn(sibyl_tracing::traced(async move {
                (to, sender.send(to, request, timeout).await)
            }));
        }
        let mut out = Vec::new();
        while !enough(&out) {
            match tokio::time::timeout_at(deadline, tasks.join_next()).await {
                Ok(Some(Ok((to, Some(r))))) => out.push((to, r)),
                Ok(Some(_)) => {}
                Ok(None) | Err(_) => break,
            }
        }
        tasks.detach_all();
        out
    }

    fn cas_timeout(serial: Consistency, received: usize, block_for: usize) -> ServiceError {
        ServiceError::WriteTimeout {
            consistency: serial,
            received,
            block_for,
            write_type: WriteType::Cas,
        }
    }

    /// A random pause before another try (Cassandra sleeps up to 100 ms).
    async fn contention_backoff(&self) {
        self.metrics.cas_contention.inc();
        let ms = rand_below(100);
        tokio::time::sleep(std::time::Duration::from_millis(ms)).await;
    }

    /// Prepares a ballot and repairs what earlier rounds left behind
    /// (Cassandra's `beginAndRepairPaxos`).
    async fn prepare(
        &self,
        table: &TableMetadata,
        key: &DecoratedKey,
        plan: &Plan,
        serial: Consistency,
        commit_cl: Consistency,
        deadline: Instant,
    ) -> Result<Prepared> {
        let at_least = self.last_ballot_micros.load(Ordering::Relaxed) + 1;
        let ballot = self.next_ballot(at_least);
        sibyl_tracing::trace(|| format!("Preparing {}", ballot.0));
        let need = plan.block_for;
        let answers = self
            .paxos_round(
                plan,
                Request::PaxosPrepare {
                    ballot,
                    table_id: table.id,
                    key: key.key.clone(),
                },
                deadline,
                |a| {
                    let promised = a
                        .iter()
                        .filter(|(_, r)| matches!(r, Response::Promise(p) if p.promised))
                        .count();
                    let refused = a.len() - promised;
                    promised >= need || refused > plan.replicas.len().saturating_sub(need)
                },
            )
            .await;
        let promises: Vec<(IpAddr, Promise)> = answers
            .into_iter()
            .filter_map(|(a, r)| match r {
                Response::Promise(p) => Some((a, *p)),
                _ => None,
            })
            .collect();
        // a ballot later than ours was seen: ours must exceed it next time
        let seen = promises
            .iter()
            .flat_map(|(_, p)| {
                [
                    Some(p.most_recent_promise),
                    p.committed.as_ref().map(|c| c.ballot),
                    p.accepted.as_ref().map(|c| c.ballot),
                ]
            })
            .flatten()
            .max()
            .unwrap_or(Ballot::NONE);
        if seen >= ballot {
            self.last_ballot_micros
                .fetch_max(seen.micros(), Ordering::Relaxed);
        }
        let promised: Vec<&(IpAddr, Promise)> =
            promises.iter().filter(|(_, p)| p.promised).collect();
        if promised.len() < need {
            if promises.len() > promised.len() {
                return Ok(Prepared::Retry);
            }
            return Err(Self::cas_timeout(serial, promised.len(), need));
        }
        // the latest commit any of them knows
        let latest_commit = promised
            .iter()
            .filter_map(|(_, p)| p.committed.as_ref())
            .max_by_key(|c| c.ballot)
            .cloned();
        let committed_ballot = latest_commit.as_ref().map_or(Ballot::NONE, |c| c.ballot);
        if committed_ballot >= ballot {
            // our clock is behind that commit: try again above it
            return Ok(Prepared::Retry);
        }
        // a proposal accepted after the latest commit was left unfinished
        let in_progress = promised
            .iter()
            .filter_map(|(_, p)| p.accepted.as_ref())
            .filter(|c| c.ballot > committed_ballot)
            .max_by_key(|c| c.ballot)
            .cloned();
        if let Some(unfinished) = in_progress {
            if !unfinished.update.update.is_empty() {
                tracing::debug!("finishing an unfinished Paxos proposal on {:?}", key.key);
                let refreshed = Commit {
                    ballot,
                    update: unfinished.update,
                };
                if self.propose(plan, &refreshed, deadline, false).await? {
                    self.commit_paxos(table, key, &refreshed, commit_cl, deadline)
                        .await?;
                }
                return Ok(Prepared::Retry);
            }
        }
        // replicas that missed the latest commit get it before the read
        if let Some(c) = latest_commit {
            let missing: Vec<IpAddr> = promised
                .iter()
                .filter(|(_, p)| p.committed.as_ref().is_none_or(|x| x.ballot < c.ballot))
                .map(|(a, _)| *a)
                .collect();
            if !missing.is_empty() {
                let plan = Plan::new(missing.iter().copied().collect(), missing.len());
                self.paxos_round(&plan, Request::PaxosCommit(c), deadline, |a| {
                    a.len() >= plan.block_for
                })
                .await;
            }
        }
        Ok(Prepared::Ready(ballot))
    }

    /// Proposes `proposal`; whether a quorum accepted it. With
    /// `timeout_if_partial` (a conditional update's own proposal), every
    /// replica's answer is awaited, and a proposal that some accepted but
    /// not a quorum is a CAS write timeout, not a refusal: another
    /// coordinator may yet finish it, so its outcome is unknown (Cassandra's
    /// `proposePaxos`).
    async fn propose(
        &self,
        plan: &Plan,
        proposal: &Commit,
        deadline: Instant,
        timeout_if_partial: bool,
    ) -> Result<bool> {
        let need = plan.block_for;
        let targets = plan.replicas.iter().filter(|a| self.is_alive(**a)).count();
        let answers = self
            .paxos_round(
                plan,
                Request::PaxosPropose(proposal.clone()),
                deadline,
                |a| {
                    let yes = a
                        .iter()
                        .filter(|(_, r)| matches!(r, Response::Accepted(true)))
                        .count();
                    if timeout_if_partial {
                        yes >= need || a.len() >= targets
                    } else {
                        yes >= need || a.len() - yes > plan.replicas.len().saturating_sub(need)
                    }
                },
            )
            .await;
        let yes = answers
            .iter()
            .filter(|(_, r)| matches!(r, Response::Accepted(true)))
            .count();
        if yes >= need {
            return Ok(true);
        }
        if timeout_if_partial && yes > 0 {
            return Err(Self::cas_timeout(Consistency::Serial, yes, need));
        }
        if answers.len() > yes {
            return Ok(false);
        }
        Err(Self::cas_timeout(Consistency::Serial, yes, need))
    }

    /// Commits an accepted proposal on every replica, waiting for
    /// `commit_cl`'s number of them.
    async fn commit_paxos(
        &self,
        table: &TableMetadata,
        key: &DecoratedKey,
        commit: &Commit,
        commit_cl: Consistency,
        deadline: Instant,
    ) -> Result<()> {
        let schema = self.schema();
        let Some(ks) = self.keyspace_of(&schema, table.id) else {
            return Ok(());
        };
        // every replica in every data center gets the commit
        let all = self.write_plan(&ks.replication.strategy, key.token, Consistency::All);
        let need = if commit_cl == Consistency::Any {
            0
        } else {
            self.write_plan(&ks.replication.strategy, key.token, commit_cl)
                .block_for
        };
        let deadline = deadline.max(Instant::now() + self.timeouts.write);
        let answers = self
            .paxos_round(&all, Request::PaxosCommit(commit.clone()), deadline, |a| {
                a.iter()
                    .filter(|(_, r)| matches!(r, Response::Done))
                    .count()
                    >= need
            })
            .await;
        let done = answers
            .iter()
            .filter(|(_, r)| matches!(r, Response::Done))
            .count();
        if done < need {
            return Err(ServiceError::WriteTimeout {
                consistency: commit_cl,
                received: done,
                block_for: need,
                write_type: WriteType::Simple,
            });
        }
        Ok(())
    }

    /// A conditional update of one partition (Cassandra's
    /// `StorageProxy.cas`): `decide` gets the partition as read after a
    /// quorum promised this round's ballot, the read's time and the ballot's
    /// timestamp (the timestamp of the update), and returns the outcome and
    /// the mutations to apply (none when the conditions do not hold).
    pub async fn cas<T, E: From<ServiceError>>(
        &self,
        table: &TableMetadata,
        key: DecoratedKey,
        serial_cl: Consistency,
        commit_cl: Consistency,
        mut decide: impl FnMut(
            Option<Partition>,
            i32,
            i64,
        ) -> std::result::Result<(T, Vec<Mutation>), E>,
    ) -> std::result::Result<T, E> {
        let started = sibyl_metrics::Instant::now();
        let r = self
            .cas_round(table, key, serial_cl, commit_cl, |p, now, ts| {
                decide(p, now, ts).map_err(CasError::Decided)
            })
            .await;
        let error = match &r {
            Err(CasError::Service(e)) => Some(e),
            _ => None,
        };
        self.metrics.requests.record(
            Operation::CasWrite,
            serial_cl,
            started,
            sibyl_metrics::Instant::now(),
            error,
        );
        r.map_err(|e| match e {
            CasError::Service(e) => e.into(),
            CasError::Decided(e) => e,
        })
    }

    async fn cas_round<T, E>(
        &self,
        table: &TableMetadata,
        key: DecoratedKey,
        serial_cl: Consistency,
        commit_cl: Consistency,
        mut decide: impl FnMut(
            Option<Partition>,
            i32,
            i64,
        ) -> std::result::Result<(T, Vec<Mutation>), CasError<E>>,
    ) -> std::result::Result<T, CasError<E>> {
        if !serial_cl.is_serial() {
            return Err(ServiceError::Invalid(format!(
                "Invalid consistency for conditional update: {serial_cl}, must be one of SERIAL or LOCAL_SERIAL"
            ))
            .into());
        }
        consistency::validate_for_write(if commit_cl == Consistency::Any {
            Consistency::One
        } else {
            commit_cl
        })?;
        let plan = self.paxos_plan(table, &key, serial_cl)?;
        let deadline = Instant::now() + self.timeouts.cas_contention;
        loop {
            if Instant::now() >= deadline {
                return Err(Self::cas_timeout(serial_cl, 0, plan.block_for).into());
            }
            let ballot = match self
                .prepare(table, &key, &plan, serial_cl, commit_cl, deadline)
                .await?
            {
                Prepared::Ready(b) => b,
                Prepared::Retry => {
                    self.contention_backoff().await;
                    continue;
                }
            };
            let now = self.clock.now_seconds();
            let cmd = ReadCommand::single(table.id, key.clone(), now);
            sibyl_tracing::trace(|| "Reading existing values for CAS precondition");
            let current = self
                .read_plain(cmd, serial_read_level(serial_cl))
                .await?
                .pop()
                .map(|(_, p)| p);
            let (out, mutations) = decide(current, now, ballot.micros())?;
            let mut mutations = mutations.into_iter();
            let Some(mut update) = mutations.next() else {
                // the conditions do not hold: nothing to propose
                self.metrics.requests.cas_condition_not_met.inc();
                sibyl_tracing::trace(|| {
                    format!(
                        "CAS precondition does not match current values [{}.{}] key={}",
                        table.keyspace,
                        table.name,
                        key.key
                            .iter()
                            .map(|b| format!("{b:02x}"))
                            .collect::<String>()
                    )
                });
                sibyl_tracing::trace(|| "CAS did not apply");
                return Ok(out);
            };
            sibyl_tracing::trace(|| {
                format!(
                    "CAS precondition is met; proposing client-requested updates for {}",
                    ballot.0
                )
            });
            for m in mutations {
                update.update.merge(m.update, now);
            }
            let proposal = Commit { ballot, update };
            if !self
                .propose(&plan, &proposal, deadline, true)
                .await
                .map_err(|e| match e {
                    ServiceError::WriteTimeout {
                        received,
                        block_for,
                        ..
                    } => Self::cas_timeout(serial_cl, received, block_for),
                    e => e,
                })?
            {
                self.contention_backoff().await;
                continue;
            }
            self.commit_paxos(table, &key, &proposal, commit_cl, deadline)
                .await?;
            sibyl_tracing::trace(|| "CAS applied successfully");
            return Ok(out);
        }
    }

    /// A read at SERIAL or LOCAL_SERIAL (Cassandra's `readWithPaxos`): a
    /// Paxos round that finishes what earlier ones left and proposes
    /// nothing, then a read at the serial level's read level.
    pub(crate) async fn serial_read(
        &self,
        table: &TableMetadata,
        cmd: ReadCommand,
        serial: Consistency,
    ) -> Result<Vec<(DecoratedKey, Partition)>> {
        let sibyl_db::ReadKind::SinglePartition { key } = &cmd.kind else {
            return Err(ServiceError::Invalid(
                "SERIAL/LOCAL_SERIAL consistency may only be requested for one partition at a time"
                    .into(),
            ));
        };
        let key = key.clone();
        let plan = self.paxos_plan(table, &key, serial)?;
        let deadline = Instant::now() + self.timeouts.cas_contention;
        loop {
            if Instant::now() >= deadline {
                return Err(ServiceError::ReadTimeout {
                    consistency: serial,
                    received: 0,
                    block_for: plan.block_for,
                    data_present: false,
                });
            }
            let ballot = match self
                .prepare(table, &key, &plan, serial, Consistency::Quorum, deadline)
                .await
            {
                Ok(Prepared::Ready(b)) => b,
                Ok(Prepared::Retry) => {
                    self.contention_backoff().await;
                    continue;
                }
                Err(ServiceError::WriteTimeout {
                    received,
                    block_for,
                    ..
                }) => {
                    return Err(ServiceError::ReadTimeout {
                        consistency: serial,
                        received,
                        block_for,
                        data_present: false,
                    })
                }
                Err(e) => return Err(e),
            };
            // an empty proposal: a later round cannot be ordered before
            // this read
            let empty = Commit {
                ballot,
                update: Mutation {
                    table_id: table.id,
                    key: key.clone(),
                    update: Partition::new(),
                },
            };
            match self.propose(&plan, &empty, deadline, false).await {
                Ok(true) => {}
                Ok(false) => {
                    self.contention_backoff().await;
                    continue;
                }
                Err(_) => {
                    return Err(ServiceError::ReadTimeout {
                        consistency: serial,
                        received: 0,
                        block_for: plan.block_for,
                        data_present: false,
                    })
                }
            }
            return self.read_plain(cmd, serial_read_level(serial)).await;
        }
    }
}

fn rand_below(n: u64) -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u64(sibyl_types::timeuuid::timestamp_micros_now() as u64);
    h.finish() % n.max(1)
}

/// A conditional update's error: the coordinator's, or the one its
/// decision returned.
enum CasError<E> {
    Service(ServiceError),
    Decided(E),
}

impl<E> From<ServiceError> for CasError<E> {
    fn from(e: ServiceError) -> Self {
        CasError::Service(e)
    }
}
