//! Gossip (Cassandra's `Gossiper` and the `GossipDigestSyn`/`Ack`/`Ack2`,
//! `GossipShutdown` and `Echo` verb handlers) as a state machine that never
//! does I/O: it is given the time and the messages that arrived, and it
//! answers with the messages to send and the membership events that
//! happened.
//!
//! # A round
//!
//! Every second each node bumps its own heartbeat and sends a SYN, the
//! `(generation, max version)` digest of every node it knows, to one random
//! live peer, maybe to one unreachable peer (probability `unreachable /
//! (live + 1)`) and maybe to a seed (always when it knows no live peer;
//! otherwise with probability `seeds / (live + unreachable)` when the live
//! peer was not a seed or there are fewer live peers than seeds). The
//! receiver answers with an ACK carrying the states it has that are newer
//! and digests asking for the ones it lacks; the ACK2 carries those. Every
//! newer heartbeat heard is reported to the [`FailureDetector`], and after
//! the round each peer whose phi exceeds the threshold is marked down.
//!
//! A node heard of is marked up only once it answers an ECHO (as Cassandra
//! 4+ does), so a node that others can reach but this one cannot is not
//! flapped up on second-hand news.
//!
//! # Driving it
//!
//! ```text
//! every GOSSIP_INTERVAL_NANOS (1 s):  out = gossiper.tick(clock.monotonic_nanos())
//! on each message from a peer:        out = gossiper.handle(from, GossipMessage::decode(bytes)?, now)
//! then, each time:                    send every (to, msg) of out.messages as a one-way message
//!                                     (msg.encode), and pass out.events to the subscribers
//!                                     (GossipEvent::notify) in order
//! on a clean stop:                    send announce_shutdown().messages, then stop ticking
//! ```
//!
//! Nothing is kept for the caller between calls: whatever is not sent or
//! dispatched from a [`GossipOutput`] is lost, and gossip repairs lost
//! messages by itself in later rounds.
//!
//! # Left out
//!
//! The shadow round's wait: a starting node sends its empty SYN to the seeds
//! ([`Gossiper::shadow_round`]) and takes what they answer as ordinary
//! gossip, without waiting for it; fat-client eviction (it needs the token ring), the expire time carried in
//! `LEFT`/`removed` statuses (a dead-state node is evicted three days after
//! this node learned of it instead), and the messaging of Cassandra 3.x
//! nodes.

use crate::endpoint_state::{ApplicationState, EndpointState, HeartBeatState, VersionedValue};
use crate::failure_detector::FailureDetector;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

const SECOND_NANOS: u64 = 1_000_000_000;

/// Cassandra's `ring_delay` (30 s), which the quarantine is derived from.
pub const RING_DELAY_NANOS: u64 = 30 * SECOND_NANOS;

/// How long gossip about an evicted node is ignored, so that peers that
/// have not heard of the eviction yet cannot bring it back
/// (`QUARANTINE_DELAY`: twice the ring delay).
pub const QUARANTINE_DELAY_NANOS: u64 = 2 * RING_DELAY_NANOS;

/// How long a node that left or was removed stays in gossip, so that every
/// peer hears of it (Cassandra's `aVeryLongTime`, three days).
pub const A_VERY_LONG_TIME_NANOS: u64 = 259_200 * SECOND_NANOS;

/// A generation further than this (in seconds) ahead of this node's clock
/// is taken for corruption and ignored (`MAX_GENERATION_DIFFERENCE`, a
/// year).
pub const MAX_GENERATION_DIFFERENCE_SECS: i64 = 86_400 * 365;

/// An ECHO unanswered for this long is given up on (the request timeout
/// Cassandra's echo callback expires with), so a later one can be sent.
pub const ECHO_TIMEOUT_NANOS: u64 = 10 * SECOND_NANOS;

/// The format version of [`GossipMessage::encode`], its first byte.
pub const GOSSIP_FORMAT_VERSION: u8 = 1;

/// What one node knows of another, in short: enough to tell which side is
/// newer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct GossipDigest {
    /// The node described.
    pub endpoint: IpAddr,
    /// Its generation as known by the sender.
    pub generation: i32,
    /// The highest version of its state known by the sender.
    pub max_version: i32,
}

/// A gossip message between two nodes.
#[derive(Debug, Clone, PartialEq)]
pub enum GossipMessage {
    /// Opens a round: the sender's digests. A receiver of another cluster
    /// or partitioner ignores it.
    Syn {
        cluster_name: String,
        partitioner: String,
        digests: Vec<GossipDigest>,
    },
    /// Answers a SYN: digests of the states the receiver wants (from the
    /// version given) and the states it has that the SYN's sender lacks.
    Ack {
        digests: Vec<GossipDigest>,
        states: Vec<(IpAddr, EndpointState)>,
    },
    /// Closes a round: the states an ACK asked for.
    Ack2 {
        states: Vec<(IpAddr, EndpointState)>,
    },
    /// The sender is stopping cleanly; its last state, with status
    /// `shutdown`.
    Shutdown { state: EndpointState },
    /// Are you alive? Sent before marking a node up.
    EchoReq,
    /// Yes.
    EchoRsp,
}

/// A change of membership, in the order it happened (Cassandra's
/// `IEndpointStateChangeSubscriber` calls).
#[derive(Debug, Clone, PartialEq)]
pub enum GossipEvent {
    /// A node was heard of for the first time, or restarted (then after a
    /// [`GossipEvent::Restart`]); `state` is all of its state, whose
    /// application states get no separate `Change`.
    Join {
        endpoint: IpAddr,
        state: EndpointState,
    },
    /// One application state of a node (this one included) changed.
    Change {
        endpoint: IpAddr,
        state: ApplicationState,
        value: VersionedValue,
    },
    /// A node answered an echo and is now up.
    Alive {
        endpoint: IpAddr,
        state: EndpointState,
    },
    /// A node was convicted, announced its shutdown, or is in a dead state.
    Dead {
        endpoint: IpAddr,
        state: EndpointState,
    },
    /// A node came back with a new generation; `old_state` is what was
    /// known of its previous incarnation.
    Restart {
        endpoint: IpAddr,
        old_state: EndpointState,
    },
    /// A node's state was dropped from gossip.
    Remove { endpoint: IpAddr },
}

/// Receives membership events (Cassandra's `IEndpointStateChangeSubscriber`).
/// Every method does nothing by default.
pub trait EndpointStateChangeSubscriber {
    /// See [`GossipEvent::Join`].
    fn on_join(&self, _endpoint: IpAddr, _state: &EndpointState) {}
    /// See [`GossipEvent::Change`].
    fn on_change(&self, _endpoint: IpAddr, _state: ApplicationState, _value: &VersionedValue) {}
    /// See [`GossipEvent::Alive`].
    fn on_alive(&self, _endpoint: IpAddr, _state: &EndpointState) {}
    /// See [`GossipEvent::Dead`].
    fn on_dead(&self, _endpoint: IpAddr, _state: &EndpointState) {}
    /// See [`GossipEvent::Restart`].
    fn on_restart(&self, _endpoint: IpAddr, _old_state: &EndpointState) {}
    /// See [`GossipEvent::Remove`].
    fn on_remove(&self, _endpoint: IpAddr) {}
}

impl GossipEvent {
    /// Calls the subscriber's method for this event.
    pub fn notify(&self, subscriber: &dyn EndpointStateChangeSubscriber) {
        match self {
            GossipEvent::Join { endpoint, state } => subscriber.on_join(*endpoint, state),
            GossipEvent::Change {
                endpoint,
                state,
                value,
            } => subscriber.on_change(*endpoint, *state, value),
            GossipEvent::Alive { endpoint, state } => subscriber.on_alive(*endpoint, state),
            GossipEvent::Dead { endpoint, state } => subscriber.on_dead(*endpoint, state),
            GossipEvent::Restart {
                endpoint,
                old_state,
            } => subscriber.on_restart(*endpoint, old_state),
            GossipEvent::Remove { endpoint } => subscriber.on_remove(*endpoint),
        }
    }
}

/// What a call to the [`Gossiper`] produced: messages to send (each to its
/// address) and events to dispatch, both in order.
#[derive(Debug, Default, Clone, PartialEq)]
#[must_use = "the messages must be sent and the events dispatched"]
pub struct GossipOutput {
    /// One-way messages to send.
    pub messages: Vec<(IpAddr, GossipMessage)>,
    /// Membership events.
    pub events: Vec<GossipEvent>,
}

/// One node's gossip: its own state and what it knows of every other node.
#[derive(Debug)]
pub struct Gossiper {
    local: IpAddr,
    local_generation: i32,
    cluster_name: String,
    partitioner: String,
    // Without the local address (Cassandra's `buildSeedsList`).
    seeds: BTreeSet<IpAddr>,
    // Ordered maps and sets throughout: the random choices index into them,
    // so iteration order must not depend on hashing for runs to repeat.
    endpoint_states: BTreeMap<IpAddr, EndpointState>,
    live: BTreeSet<IpAddr>,
    // When each went down.
    unreachable: BTreeMap<IpAddr, u64>,
    // When each was evicted: gossip about them is ignored for the quarantine.
    just_removed: BTreeMap<IpAddr, u64>,
    // When each node in a dead state is evicted.
    expire_times: BTreeMap<IpAddr, u64>,
    // Echoes awaiting an answer, with when they were sent.
    echo_in_flight: BTreeMap<IpAddr, u64>,
    fd: FailureDetector,
    rng: StdRng,
    // An ACK before any SYN of ours is a leftover of an earlier life
    // (CASSANDRA-12653): ignored.
    first_syn_sent: bool,
    // The first time seen, to estimate wall time from the generation.
    started_at_nanos: Option<u64>,
    shutdown_announced: bool,
    // The storage port, for log lines in Cassandra's form (`/10.0.0.1:7000`).
    log_port: u16,
    // The status this node had before it announced its shutdown, given back
    // when gossip is started again (`nodetool enablegossip`).
    status_before_shutdown: Vec<(ApplicationState, String)>,
}

impl Gossiper {
    /// A gossiper for the node at `local`, started at `generation` (seconds
    /// since the epoch, greater than that of any earlier run of this node),
    /// which introduces itself to `seeds` (its own address among them is
    /// dropped). SYNs name `cluster_name` and `partitioner`; a node whose
    /// phi exceeds `phi_convict_threshold` is marked down; `rng_seed` makes
    /// the choice of peers repeatable.
    pub fn new(
        local: IpAddr,
        generation: i32,
        seeds: Vec<IpAddr>,
        cluster_name: String,
        partitioner: String,
        phi_convict_threshold: f64,
        rng_seed: u64,
    ) -> Self {
        let mut endpoint_states = BTreeMap::new();
        endpoint_states.insert(
            local,
            EndpointState::new(HeartBeatState::new(generation), 0),
        );
        Gossiper {
            local,
            local_generation: generation,
            cluster_name,
            partitioner,
            seeds: seeds.into_iter().filter(|s| *s != local).collect(),
            endpoint_states,
            live: BTreeSet::new(),
            unreachable: BTreeMap::new(),
            just_removed: BTreeMap::new(),
            expire_times: BTreeMap::new(),
            echo_in_flight: BTreeMap::new(),
            fd: FailureDetector::new(phi_convict_threshold),
            rng: StdRng::seed_from_u64(rng_seed),
            first_syn_sent: false,
            started_at_nanos: None,
            shutdown_announced: false,
            log_port: 7000,
            status_before_shutdown: Vec::new(),
        }
    }

    /// The storage port log lines name addresses with (`/ip:port`, as
    /// Cassandra's `InetAddressAndPort`).
    pub fn set_log_port(&mut self, port: u16) {
        self.log_port = port;
    }

    fn named(&self, ip: IpAddr) -> String {
        format!("/{}", std::net::SocketAddr::new(ip, self.log_port))
    }

    /// This node's address.
    pub fn local_address(&self) -> IpAddr {
        self.local
    }

    /// This node's generation.
    pub fn generation(&self) -> i32 {
        self.local_generation
    }

    /// The cluster name SYNs must carry.
    pub fn cluster_name(&self) -> &str {
        &self.cluster_name
    }

    /// The seeds (without this node).
    pub fn seeds(&self) -> &BTreeSet<IpAddr> {
        &self.seeds
    }

    /// The failure detector (phi values for `nodetool failuredetector`).
    pub fn failure_detector(&self) -> &FailureDetector {
        &self.fd
    }

    /// The failure detector, to change its threshold.
    pub fn failure_detector_mut(&mut self) -> &mut FailureDetector {
        &mut self.fd
    }

    /// What is known of `endpoint` (this node included).
    pub fn endpoint_state(&self, endpoint: IpAddr) -> Option<&EndpointState> {
        self.endpoint_states.get(&endpoint)
    }

    /// Every known node's state, by address.
    pub fn endpoint_states(&self) -> &BTreeMap<IpAddr, EndpointState> {
        &self.endpoint_states
    }

    /// Every known node, this one included.
    pub fn endpoints(&self) -> Vec<IpAddr> {
        self.endpoint_states.keys().copied().collect()
    }

    /// The value of one application state of `endpoint`.
    pub fn application_state(&self, endpoint: IpAddr, state: ApplicationState) -> Option<&str> {
        self.endpoint_states
            .get(&endpoint)
            .and_then(|s| s.application_state(state))
            .map(|v| v.value.as_str())
    }

    /// The nodes up, this one included (Cassandra's `getLiveMembers`).
    pub fn live_members(&self) -> BTreeSet<IpAddr> {
        let mut out = self.live.clone();
        out.insert(self.local);
        out
    }

    /// The nodes marked down.
    pub fn unreachable_members(&self) -> BTreeSet<IpAddr> {
        self.unreachable.keys().copied().collect()
    }

    /// Whether `endpoint` is up and not in a dead state (this node is).
    pub fn is_alive(&self, endpoint: IpAddr) -> bool {
        self.endpoint_states
            .get(&endpoint)
            .is_some_and(|s| s.is_alive && !s.is_dead_state())
    }

    /// How long `endpoint` has been down, in nanoseconds (0 when up).
    pub fn endpoint_downtime_nanos(&self, endpoint: IpAddr, now_nanos: u64) -> u64 {
        self.unreachable
            .get(&endpoint)
            .map_or(0, |since| now_nanos.saturating_sub(*since))
    }

    /// The text of `nodetool gossipinfo`: each node with its generation,
    /// heartbeat and every application state as `NAME:version:value`
    /// (tokens hidden), as Cassandra's `FailureDetector` prints it.
    pub fn gossip_info(&self) -> String {
        let mut out = String::new();
        for (endpoint, state) in &self.endpoint_states {
            // Writing to a String cannot fail.
            let _ = writeln!(out, "/{endpoint}");
            let _ = writeln!(out, "  generation:{}", state.heartbeat.generation);
            let _ = writeln!(out, "  heartbeat:{}", state.heartbeat.version);
            for (name, value) in &state.application_states {
                if *name == ApplicationState::Tokens {
                    continue;
                }
                let _ = writeln!(out, "  {name}:{}:{}", value.version, value.value);
            }
            match state.application_state(ApplicationState::Tokens) {
                Some(tokens) => {
                    let _ = writeln!(out, "  TOKENS:{}:<hidden>", tokens.version);
                }
                None => out.push_str("  TOKENS: not present\n"),
            }
        }
        out
    }

    /// Sets one of this node's application states at a new version.
    pub fn add_local_application_state(
        &mut self,
        state: ApplicationState,
        value: impl Into<String>,
    ) -> GossipOutput {
        self.add_local_application_states(vec![(state, value.into())])
    }

    /// Sets several of this node's application states, each at a new
    /// version, in order.
    pub fn add_local_application_states(
        &mut self,
        states: Vec<(ApplicationState, String)>,
    ) -> GossipOutput {
        let mut out = GossipOutput::default();
        let local = self.local;
        for (state, value) in states {
            let value = VersionedValue::new(value);
            self.local_state_mut()
                .add_application_state(state, value.clone());
            out.events.push(GossipEvent::Change {
                endpoint: local,
                state,
                value,
            });
        }
        out
    }

    /// One gossip round at `now_nanos` (Cassandra's `GossipTask`): call it
    /// every [`crate::failure_detector::GOSSIP_INTERVAL_NANOS`].
    pub fn tick(&mut self, now_nanos: u64) -> GossipOutput {
        self.observe(now_nanos);
        let mut out = GossipOutput::default();
        if self.shutdown_announced {
            return out;
        }
        self.local_state_mut().heartbeat.update_heartbeat();
        let syn = GossipMessage::Syn {
            cluster_name: self.cluster_name.clone(),
            partitioner: self.partitioner.clone(),
            digests: self.make_digests(),
        };
        let live: Vec<IpAddr> = self.live.iter().copied().collect();
        let gossiped_to_seed = self.send_gossip(&syn, &live, &mut out);
        self.maybe_gossip_to_unreachable_member(&syn, &mut out);
        // Also a seed when the live peer was not one, or when fewer peers
        // are live than there are seeds, so that groups of nodes that each
        // know only some seeds still meet (CASSANDRA-150).
        if !gossiped_to_seed || self.live.len() < self.seeds.len() {
            self.maybe_gossip_to_seed(&syn, &mut out);
        }
        self.do_status_check(now_nanos, &mut out);
        out
    }

    /// Handles a message from `from` that arrived at `now_nanos`.
    pub fn handle(&mut self, from: IpAddr, message: GossipMessage, now_nanos: u64) -> GossipOutput {
        self.observe(now_nanos);
        let mut out = GossipOutput::default();
        // A stopped gossiper answers nothing (Cassandra's `isEnabled`).
        if self.shutdown_announced {
            return out;
        }
        match message {
            GossipMessage::Syn {
                cluster_name,
                partitioner,
                digests,
            } => {
                if cluster_name != self.cluster_name {
                    tracing::warn!(
                        "ClusterName mismatch from {from} {cluster_name}!={}",
                        self.cluster_name
                    );
                    return out;
                }
                if !partitioner.is_empty() && partitioner != self.partitioner {
                    tracing::warn!(
                        "Partitioner mismatch from {from} {partitioner}!={}",
                        self.partitioner
                    );
                    return out;
                }
                let ack = if digests.is_empty() {
                    // An empty SYN is a starting node's shadow round: it
                    // gets everything.
                    GossipMessage::Ack {
                        digests: Vec::new(),
                        states: self
                            .endpoint_states
                            .iter()
                            .map(|(ep, s)| (*ep, wire_copy(s)))
                            .collect(),
                    }
                } else {
                    let (digests, states) = self.examine_gossiper(&digests);
                    GossipMessage::Ack { digests, states }
                };
                out.messages.push((from, ack));
            }
            GossipMessage::Ack { digests, states } => {
                if !states.is_empty() {
                    if !self.first_syn_sent {
                        tracing::trace!("Ignoring unrequested GossipDigestAck from {from}");
                        return out;
                    }
                    self.notify_failure_detector(&states, now_nanos);
                    self.apply_state_locally(states, now_nanos, &mut out);
                }
                let states = digests
                    .iter()
                    .filter_map(|d| {
                        self.endpoint_states
                            .get(&d.endpoint)
                            .and_then(|s| s.delta_since(d.max_version))
                            .map(|s| (d.endpoint, s))
                    })
                    .collect();
                out.messages.push((from, GossipMessage::Ack2 { states }));
            }
            GossipMessage::Ack2 { states } => {
                self.notify_failure_detector(&states, now_nanos);
                self.apply_state_locally(states, now_nanos, &mut out);
            }
            GossipMessage::Shutdown { state } => {
                self.mark_as_shutdown(from, state, now_nanos, &mut out);
            }
            GossipMessage::EchoReq => out.messages.push((from, GossipMessage::EchoRsp)),
            GossipMessage::EchoRsp => {
                // Only an answer to an echo of ours that has not expired
                // counts, as only a live callback does in Cassandra.
                if self.echo_in_flight.remove(&from).is_some() {
                    self.real_mark_alive(from, now_nanos, &mut out);
                }
            }
        }
        out
    }

    /// A starting node's shadow round: an empty SYN to every seed, which
    /// answers with every state it knows. A node that others do not gossip
    /// to (one that hibernates while it replaces another) learns the
    /// cluster from it; its own SYNs then name every node.
    pub fn shadow_round(&mut self) -> GossipOutput {
        let mut out = GossipOutput::default();
        let syn = GossipMessage::Syn {
            cluster_name: self.cluster_name.clone(),
            partitioner: self.partitioner.clone(),
            digests: Vec::new(),
        };
        for seed in self.seeds.iter().filter(|s| **s != self.local) {
            out.messages.push((*seed, syn.clone()));
            self.first_syn_sent = true;
        }
        out
    }

    /// Stops gossiping cleanly: sets this node's status to `shutdown` and
    /// tells every live peer, which marks it down at once instead of after
    /// the failure detector's delay. Later ticks and messages do nothing.
    /// A node leaving, removed or bootstrapping stops silently, as
    /// Cassandra's.
    pub fn announce_shutdown(&mut self) -> GossipOutput {
        let status = self.local_state_mut().status().to_string();
        let silent = crate::endpoint_state::DEAD_STATES.contains(&status.as_str())
            || status == VersionedValue::STATUS_BOOTSTRAPPING
            || status == VersionedValue::STATUS_BOOTSTRAPPING_REPLACE;
        let mut out = GossipOutput::default();
        if !silent && !self.shutdown_announced {
            tracing::info!("Announcing shutdown");
            self.status_before_shutdown =
                [ApplicationState::StatusWithPort, ApplicationState::Status]
                    .into_iter()
                    .filter_map(|a| {
                        self.local_state_mut()
                            .application_state(a)
                            .map(|v| (a, v.value.clone()))
                    })
                    .collect();
            let value = format!("{},true", VersionedValue::SHUTDOWN);
            out = self.add_local_application_states(vec![
                (ApplicationState::StatusWithPort, value.clone()),
                (ApplicationState::Status, value),
            ]);
            let state = wire_copy(self.local_state_mut());
            for ep in &self.live {
                out.messages.push((
                    *ep,
                    GossipMessage::Shutdown {
                        state: state.clone(),
                    },
                ));
            }
        }
        self.shutdown_announced = true;
        out
    }

    /// Whether this node gossips (false once it announced its shutdown:
    /// `nodetool disablegossip`, or stopping).
    pub fn is_enabled(&self) -> bool {
        !self.shutdown_announced
    }

    /// Starts gossiping again after [`announce_shutdown`](Self::announce_shutdown)
    /// (Cassandra's `startGossiping`: a newer generation, at least
    /// `generation`, so that the others take it as a restart, and the status
    /// it had before). Does nothing while gossip runs.
    pub fn restart(&mut self, generation: i32) -> GossipOutput {
        if !self.shutdown_announced {
            return GossipOutput::default();
        }
        let generation = generation.max(self.local_generation.saturating_add(1));
        self.local_generation = generation;
        self.local_state_mut().heartbeat = HeartBeatState::new(generation);
        self.shutdown_announced = false;
        let states = std::mem::take(&mut self.status_before_shutdown);
        self.add_local_application_states(states)
    }

    /// Drops `endpoint` from gossip now (for `removenode` or a replaced
    /// node) and quarantines it so that peers cannot gossip it back
    /// (Cassandra's `removeEndpoint` then `evictFromMembership`).
    pub fn evict_endpoint(&mut self, endpoint: IpAddr, now_nanos: u64) -> GossipOutput {
        let mut out = GossipOutput::default();
        if endpoint == self.local {
            return out;
        }
        self.seeds.remove(&endpoint);
        self.evict_from_membership(endpoint, now_nanos, &mut out);
        out
    }

    // ---- the round ----

    fn observe(&mut self, now_nanos: u64) {
        if self.started_at_nanos.is_none() {
            self.started_at_nanos = Some(now_nanos);
        }
    }

    /// This node's wall-clock seconds, estimated from its generation (taken
    /// from the wall clock at start) and the monotonic time since.
    fn local_time_secs(&self, now_nanos: u64) -> i64 {
        let elapsed = now_nanos.saturating_sub(self.started_at_nanos.unwrap_or(now_nanos));
        i64::from(self.local_generation) + (elapsed / SECOND_NANOS) as i64
    }

    fn local_state_mut(&mut self) -> &mut EndpointState {
        // The local state is never removed (evictions skip it); recreating
        // it would only happen through a bug, and beats a panic.
        let generation = self.local_generation;
        self.endpoint_states
            .entry(self.local)
            .or_insert_with(|| EndpointState::new(HeartBeatState::new(generation), 0))
    }

    fn make_digests(&self) -> Vec<GossipDigest> {
        self.endpoint_states
            .iter()
            .map(|(ep, s)| GossipDigest {
                endpoint: *ep,
                generation: s.heartbeat.generation,
                max_version: s.max_version(),
            })
            .collect()
    }

    /// Sends `syn` to one of `candidates`, chosen at random; whether it
    /// went to a seed.
    fn send_gossip(
        &mut self,
        syn: &GossipMessage,
        candidates: &[IpAddr],
        out: &mut GossipOutput,
    ) -> bool {
        let to = match candidates.len() {
            0 => return false,
            1 => candidates[0],
            n => candidates[self.rng.gen_range(0..n)],
        };
        self.first_syn_sent = true;
        out.messages.push((to, syn.clone()));
        self.seeds.contains(&to)
    }

    fn maybe_gossip_to_unreachable_member(&mut self, syn: &GossipMessage, out: &mut GossipOutput) {
        let live = self.live.len() as f64;
        let unreachable = self.unreachable.len() as f64;
        if unreachable > 0.0 {
            let probability = unreachable / (live + 1.0);
            if self.rng.gen::<f64>() < probability {
                let candidates: Vec<IpAddr> = self
                    .unreachable
                    .keys()
                    .filter(|ep| {
                        !self
                            .endpoint_states
                            .get(ep)
                            .is_some_and(EndpointState::is_dead_state)
                    })
                    .copied()
                    .collect();
                self.send_gossip(syn, &candidates, out);
            }
        }
    }

    fn maybe_gossip_to_seed(&mut self, syn: &GossipMessage, out: &mut GossipOutput) {
        if self.seeds.is_empty() {
            return;
        }
        let seeds: Vec<IpAddr> = self.seeds.iter().copied().collect();
        if self.live.is_empty() {
            self.send_gossip(syn, &seeds, out);
        } else {
            let probability =
                seeds.len() as f64 / (self.live.len() + self.unreachable.len()) as f64;
            if self.rng.gen::<f64>() <= probability {
                self.send_gossip(syn, &seeds, out);
            }
        }
    }

    fn do_status_check(&mut self, now_nanos: u64, out: &mut GossipOutput) {
        let endpoints: Vec<IpAddr> = self
            .endpoint_states
            .keys()
            .filter(|ep| **ep != self.local)
            .copied()
            .collect();
        for endpoint in endpoints {
            if self.fd.interpret(endpoint, now_nanos) {
                self.convict(endpoint, now_nanos, out);
            }
            let alive = self.endpoint_states.get(&endpoint).map(|s| s.is_alive);
            let expire = self.expire_times.get(&endpoint).copied();
            if let (Some(false), Some(expire)) = (alive, expire) {
                if now_nanos > expire {
                    tracing::debug!("time is expiring for endpoint : {endpoint}");
                    self.evict_from_membership(endpoint, now_nanos, out);
                }
            }
        }
        self.just_removed
            .retain(|_, at| now_nanos.saturating_sub(*at) <= QUARANTINE_DELAY_NANOS);
        self.echo_in_flight
            .retain(|_, at| now_nanos.saturating_sub(*at) <= ECHO_TIMEOUT_NANOS);
    }

    /// The failure detector's verdict (Cassandra's `convict`).
    fn convict(&mut self, endpoint: IpAddr, now_nanos: u64, out: &mut GossipOutput) {
        let Some(state) = self.endpoint_states.get(&endpoint) else {
            return;
        };
        if !state.is_alive {
            return;
        }
        tracing::debug!("Convicting {endpoint} with status {}", state.status());
        if state.is_shutdown() {
            self.mark_as_shutdown_locally(endpoint, now_nanos, out);
        } else {
            self.mark_dead(endpoint, now_nanos, out);
        }
    }

    // ---- a SYN's answer ----

    /// Compares a SYN's digests with what this node knows: the digests to
    /// ask for (with the version to send from) and the states to send
    /// (Cassandra's `examineGossiper`).
    fn examine_gossiper(
        &self,
        digests: &[GossipDigest],
    ) -> (Vec<GossipDigest>, Vec<(IpAddr, EndpointState)>) {
        let mut requests = Vec::new();
        let mut states = Vec::new();
        for digest in digests {
            let request_all = GossipDigest {
                max_version: 0,
                ..*digest
            };
            let Some(local) = self.endpoint_states.get(&digest.endpoint) else {
                requests.push(request_all);
                continue;
            };
            let local_generation = local.heartbeat.generation;
            let local_max = local.max_version();
            if digest.generation == local_generation && digest.max_version == local_max {
                continue;
            }
            if digest.generation > local_generation {
                requests.push(request_all);
            } else if digest.generation < local_generation {
                if let Some(s) = local.delta_since(HeartBeatState::EMPTY_VERSION) {
                    states.push((digest.endpoint, s));
                }
            } else if digest.max_version > local_max {
                requests.push(GossipDigest {
                    max_version: local_max,
                    ..*digest
                });
            } else if let Some(s) = local.delta_since(digest.max_version) {
                states.push((digest.endpoint, s));
            }
        }
        (requests, states)
    }

    // ---- applying remote state ----

    /// Reports to the failure detector every node whose heartbeat in
    /// `states` is newer than what is known (Cassandra's
    /// `notifyFailureDetector`); unknown nodes are reported when added.
    fn notify_failure_detector(&mut self, states: &[(IpAddr, EndpointState)], now_nanos: u64) {
        for (endpoint, remote) in states {
            if *endpoint == self.local {
                continue;
            }
            let Some(local) = self.endpoint_states.get_mut(endpoint) else {
                continue;
            };
            let local_generation = local.heartbeat.generation;
            let remote_generation = remote.heartbeat.generation;
            if remote_generation > local_generation {
                local.update_timestamp = now_nanos;
                // Down and a new generation: it rebooted; its old intervals
                // say nothing about the new incarnation.
                if !local.is_alive {
                    tracing::debug!(
                        "Clearing interval times for {endpoint} due to generation change"
                    );
                    self.fd.remove(*endpoint);
                }
                self.fd.report(*endpoint, now_nanos);
            } else if remote_generation == local_generation
                && remote.heartbeat.version > local.max_version()
            {
                local.update_timestamp = now_nanos;
                self.fd.report(*endpoint, now_nanos);
            }
        }
    }

    /// Merges states heard from a peer (Cassandra's `applyStateLocally`).
    fn apply_state_locally(
        &mut self,
        mut states: Vec<(IpAddr, EndpointState)>,
        now_nanos: u64,
        out: &mut GossipOutput,
    ) {
        // Bootstrapping nodes last (their status refers to others), then
        // by generation and address, so subscribers see a sensible order.
        states.sort_by_key(|(ep, s)| {
            let status = s.status();
            let bootstrapping = status == VersionedValue::STATUS_BOOTSTRAPPING
                || status == VersionedValue::STATUS_BOOTSTRAPPING_REPLACE;
            (bootstrapping, s.heartbeat.generation, *ep)
        });
        for (endpoint, remote) in states {
            if endpoint == self.local {
                continue;
            }
            if self.just_removed.contains_key(&endpoint) {
                tracing::trace!("Ignoring gossip for {endpoint} because it is quarantined");
                continue;
            }
            let Some(local) = self.endpoint_states.get(&endpoint) else {
                // A new node: report it so that it can be convicted even if
                // it is never heard of again.
                self.fd.report(endpoint, now_nanos);
                self.handle_major_state_change(endpoint, remote, now_nanos, out);
                continue;
            };
            let (local_generation, local_max) = (local.heartbeat.generation, local.max_version());
            let remote_generation = remote.heartbeat.generation;
            let local_time = self.local_time_secs(now_nanos);
            if i64::from(remote_generation) > local_time + MAX_GENERATION_DIFFERENCE_SECS {
                tracing::warn!(
                    "received an invalid gossip generation for peer {endpoint}; local time = {local_time}, received generation = {remote_generation}"
                );
            } else if remote_generation > local_generation {
                self.handle_major_state_change(endpoint, remote, now_nanos, out);
            } else if remote_generation == local_generation {
                if remote.max_version() > local_max {
                    self.apply_new_states(endpoint, remote, out);
                    self.note_expiry(endpoint, now_nanos);
                }
                if self
                    .endpoint_states
                    .get(&endpoint)
                    .is_some_and(|s| !s.is_alive && !s.is_dead_state())
                {
                    self.mark_alive(endpoint, now_nanos, out);
                }
            } else {
                tracing::trace!(
                    "Ignoring remote generation {remote_generation} < {local_generation}"
                );
            }
        }
    }

    /// Newer states of the same incarnation: each newer application state
    /// replaces the known one and is announced, the status first (its
    /// subscribers may need it before, say, the tokens).
    fn apply_new_states(
        &mut self,
        endpoint: IpAddr,
        remote: EndpointState,
        out: &mut GossipOutput,
    ) {
        let Some(local) = self.endpoint_states.get_mut(&endpoint) else {
            return;
        };
        local.heartbeat = remote.heartbeat;
        let updated: Vec<(ApplicationState, VersionedValue)> = remote
            .application_states
            .into_iter()
            .filter(|(k, v)| {
                local
                    .application_states
                    .get(k)
                    .is_none_or(|known| known.version < v.version)
            })
            .collect();
        for (k, v) in &updated {
            local.application_states.insert(*k, v.clone());
        }
        let has = |s: ApplicationState| local.application_states.contains_key(&s);
        let has_status_with_port = has(ApplicationState::StatusWithPort);
        let has_internal_address_and_port = has(ApplicationState::InternalAddressAndPort);
        let has_native_address_and_port = has(ApplicationState::NativeAddressAndPort);
        let mut change = |state: ApplicationState, value: &VersionedValue| {
            out.events.push(GossipEvent::Change {
                endpoint,
                state,
                value: value.clone(),
            })
        };
        for (k, v) in &updated {
            match k {
                ApplicationState::StatusWithPort => change(*k, v),
                ApplicationState::Status if !has_status_with_port => change(*k, v),
                _ => {}
            }
        }
        for (k, v) in &updated {
            match k {
                ApplicationState::StatusWithPort | ApplicationState::Status => {}
                // The legacy address states are not announced once the new
                // ones are known.
                ApplicationState::InternalIp if has_internal_address_and_port => {}
                ApplicationState::RpcAddress if has_native_address_and_port => {}
                _ => change(*k, v),
            }
        }
    }

    /// A node heard of for the first time, or in a new incarnation: its
    /// state replaces what was known (Cassandra's `handleMajorStateChange`).
    fn handle_major_state_change(
        &mut self,
        endpoint: IpAddr,
        mut remote: EndpointState,
        now_nanos: u64,
        out: &mut GossipOutput,
    ) {
        remote.update_timestamp = now_nanos;
        remote.is_alive = true;
        let dead = remote.is_dead_state();
        let old = self.endpoint_states.insert(endpoint, remote);
        if !dead {
            if old.is_some() {
                tracing::info!("Node {} has restarted, now UP", self.named(endpoint));
            } else {
                tracing::info!("Node {} is now part of the cluster", self.named(endpoint));
            }
        }
        if let Some(old_state) = old {
            out.events.push(GossipEvent::Restart {
                endpoint,
                old_state,
            });
        }
        if dead {
            tracing::debug!("Not marking {endpoint} alive due to dead state");
            self.mark_dead(endpoint, now_nanos, out);
        } else {
            self.mark_alive(endpoint, now_nanos, out);
        }
        let shutdown = match self.endpoint_states.get(&endpoint) {
            Some(state) => {
                out.events.push(GossipEvent::Join {
                    endpoint,
                    state: state.clone(),
                });
                state.is_shutdown()
            }
            None => false,
        };
        // Last, so that subscribers have heard of the node first.
        if shutdown {
            self.mark_as_shutdown_locally(endpoint, now_nanos, out);
        }
        self.note_expiry(endpoint, now_nanos);
    }

    /// A node that left or was removed is dropped from gossip
    /// [`A_VERY_LONG_TIME_NANOS`] after this node learned of it.
    /// (Cassandra takes the time from the status value, set by the leaving
    /// node's wall clock; the difference is the propagation delay.)
    fn note_expiry(&mut self, endpoint: IpAddr, now_nanos: u64) {
        let Some(state) = self.endpoint_states.get(&endpoint) else {
            return;
        };
        let status = state.status();
        if status == VersionedValue::STATUS_LEFT || status == VersionedValue::REMOVED_TOKEN {
            self.expire_times
                .entry(endpoint)
                .or_insert(now_nanos.saturating_add(A_VERY_LONG_TIME_NANOS));
        }
    }

    // ---- up and down ----

    /// Asks `endpoint` whether it is alive; it is marked up when it answers.
    /// Until then it counts as not alive.
    fn mark_alive(&mut self, endpoint: IpAddr, now_nanos: u64, out: &mut GossipOutput) {
        if let Some(state) = self.endpoint_states.get_mut(&endpoint) {
            state.is_alive = false;
        }
        if let Some(sent) = self.echo_in_flight.get(&endpoint) {
            if now_nanos.saturating_sub(*sent) <= ECHO_TIMEOUT_NANOS {
                return;
            }
        }
        self.echo_in_flight.insert(endpoint, now_nanos);
        tracing::trace!("Sending ECHO_REQ to {endpoint}");
        out.messages.push((endpoint, GossipMessage::EchoReq));
    }

    fn real_mark_alive(&mut self, endpoint: IpAddr, now_nanos: u64, out: &mut GossipOutput) {
        let Some(state) = self.endpoint_states.get_mut(&endpoint) else {
            return;
        };
        // It may have left while the echo was on its way.
        if state.is_dead_state() {
            return;
        }
        state.is_alive = true;
        // Also keeps the status check from evicting it right away.
        state.update_timestamp = now_nanos;
        let state = state.clone();
        self.live.insert(endpoint);
        self.unreachable.remove(&endpoint);
        self.expire_times.remove(&endpoint);
        tracing::info!("InetAddress {} is now UP", self.named(endpoint));
        out.events.push(GossipEvent::Alive { endpoint, state });
    }

    fn mark_dead(&mut self, endpoint: IpAddr, now_nanos: u64, out: &mut GossipOutput) {
        let Some(state) = self.endpoint_states.get_mut(&endpoint) else {
            return;
        };
        state.is_alive = false;
        let state = state.clone();
        self.live.remove(&endpoint);
        self.unreachable.insert(endpoint, now_nanos);
        tracing::info!("InetAddress {} is now DOWN", self.named(endpoint));
        out.events.push(GossipEvent::Dead { endpoint, state });
    }

    /// A peer announced its shutdown with its last state (Cassandra 5.0's
    /// `markAsShutdown(endpoint, remoteState)`).
    fn mark_as_shutdown(
        &mut self,
        endpoint: IpAddr,
        mut remote: EndpointState,
        now_nanos: u64,
        out: &mut GossipOutput,
    ) {
        let known = self
            .endpoint_states
            .get(&endpoint)
            .is_some_and(|s| !s.application_states.is_empty());
        if !known {
            return;
        }
        let shutdown = match remote.application_state(ApplicationState::StatusWithPort) {
            Some(v) if remote.is_shutdown() => v.clone(),
            _ => {
                tracing::warn!(
                    "Shutdown from {endpoint} without a shutdown STATUS_WITH_PORT; ignored"
                );
                return;
            }
        };
        remote.update_timestamp = now_nanos;
        remote.is_alive = true;
        self.endpoint_states.insert(endpoint, remote);
        self.mark_dead(endpoint, now_nanos, out);
        out.events.push(GossipEvent::Change {
            endpoint,
            state: ApplicationState::StatusWithPort,
            value: shutdown,
        });
        tracing::debug!("Marked {endpoint} as shutdown");
    }

    /// A node convicted, or learned of, while its status says shutdown:
    /// marked down for good in this incarnation (its heartbeat is set so
    /// high that nothing of the same generation is newer).
    fn mark_as_shutdown_locally(
        &mut self,
        endpoint: IpAddr,
        now_nanos: u64,
        out: &mut GossipOutput,
    ) {
        let Some(state) = self.endpoint_states.get_mut(&endpoint) else {
            return;
        };
        if state.application_states.is_empty() {
            return;
        }
        let shutdown = VersionedValue::new(format!("{},true", VersionedValue::SHUTDOWN));
        state.add_application_state(ApplicationState::StatusWithPort, shutdown.clone());
        state.add_application_state(
            ApplicationState::Status,
            VersionedValue::new(format!("{},true", VersionedValue::SHUTDOWN)),
        );
        state.add_application_state(ApplicationState::RpcReady, VersionedValue::new("false"));
        state.heartbeat.force_highest_possible_version();
        self.mark_dead(endpoint, now_nanos, out);
        out.events.push(GossipEvent::Change {
            endpoint,
            state: ApplicationState::StatusWithPort,
            value: shutdown,
        });
    }

    fn evict_from_membership(&mut self, endpoint: IpAddr, now_nanos: u64, out: &mut GossipOutput) {
        self.live.remove(&endpoint);
        self.unreachable.remove(&endpoint);
        self.endpoint_states.remove(&endpoint);
        self.expire_times.remove(&endpoint);
        self.echo_in_flight.remove(&endpoint);
        self.fd.remove(endpoint);
        self.just_removed.insert(endpoint, now_nanos);
        tracing::debug!("evicting {endpoint} from gossip");
        out.events.push(GossipEvent::Remove { endpoint });
    }
}

/// A state as it travels: local bookkeeping reset.
fn wire_copy(state: &EndpointState) -> EndpointState {
    EndpointState {
        heartbeat: state.heartbeat,
        application_states: state.application_states.clone(),
        is_alive: true,
        update_timestamp: 0,
    }
}

// ---- the wire format ----

/// Why bytes are not a gossip message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GossipDecodeError {
    #[error("gossip message truncated at byte {offset}: {needed} more bytes needed")]
    Truncated { offset: usize, needed: usize },
    #[error("unsupported gossip message format version {0}")]
    UnsupportedVersion(u8),
    #[error("unknown gossip message kind {0}")]
    UnknownKind(u8),
    #[error("unknown address family {0} in a gossip message")]
    BadAddressFamily(u8),
    #[error("a string in a gossip message is not UTF-8")]
    InvalidUtf8,
    #[error(
        "a count of {count} at byte {offset} is more than the {remaining} remaining bytes can hold"
    )]
    CountTooLarge {
        offset: usize,
        count: u64,
        remaining: usize,
    },
    #[error("{0} bytes after the end of a gossip message")]
    TrailingBytes(usize),
}

const KIND_SYN: u8 = 0;
const KIND_ACK: u8 = 1;
const KIND_ACK2: u8 = 2;
const KIND_SHUTDOWN: u8 = 3;
const KIND_ECHO_REQ: u8 = 4;
const KIND_ECHO_RSP: u8 = 5;

// The fewest bytes each repeated item can take, to bound counts by what
// is left before allocating for them.
const MIN_DIGEST_BYTES: usize = 5 + 4 + 4;
const MIN_STATE_ENTRY_BYTES: usize = 5 + 4 + 4 + 1;
const MIN_APPLICATION_STATE_BYTES: usize = 1 + 4 + 4;

impl GossipMessage {
    /// Appends the message in format [`GOSSIP_FORMAT_VERSION`]:
    ///
    /// ```text
    /// message      format version u8 (1) | kind u8 | body
    /// Syn   (0)    cluster name: string | partitioner: string | digests
    /// Ack   (1)    digests | states
    /// Ack2  (2)    states
    /// Shutdown (3) endpoint state
    /// EchoReq (4), EchoRsp (5): no body
    /// string       length u32 | UTF-8 bytes
    /// address      family u8 (4 or 6) | 4 or 16 bytes
    /// digests      count u32 | count × (address | generation i32 | max version i32)
    /// states       count u32 | count × (address | endpoint state)
    /// endpoint state  generation i32 | heartbeat version i32 | count u8
    ///              | count × (application state ordinal u8 | version i32 | value: string)
    /// ```
    ///
    /// Integers are big-endian.
    pub fn encode(&self, out: &mut Vec<u8>) {
        out.push(GOSSIP_FORMAT_VERSION);
        match self {
            GossipMessage::Syn {
                cluster_name,
                partitioner,
                digests,
            } => {
                out.push(KIND_SYN);
                put_string(out, cluster_name);
                put_string(out, partitioner);
                put_digests(out, digests);
            }
            GossipMessage::Ack { digests, states } => {
                out.push(KIND_ACK);
                put_digests(out, digests);
                put_states(out, states);
            }
            GossipMessage::Ack2 { states } => {
                out.push(KIND_ACK2);
                put_states(out, states);
            }
            GossipMessage::Shutdown { state } => {
                out.push(KIND_SHUTDOWN);
                put_endpoint_state(out, state);
            }
            GossipMessage::EchoReq => out.push(KIND_ECHO_REQ),
            GossipMessage::EchoRsp => out.push(KIND_ECHO_RSP),
        }
    }

    /// Reads a message written by [`GossipMessage::encode`]. Never panics
    /// and never allocates more than the input's size, whatever the bytes.
    /// Application states of ordinals this build does not know are skipped
    /// (a newer node may use a padding slot).
    pub fn decode(bytes: &[u8]) -> Result<GossipMessage, GossipDecodeError> {
        let mut r = Reader { buf: bytes, pos: 0 };
        let version = r.u8()?;
        if version != GOSSIP_FORMAT_VERSION {
            return Err(GossipDecodeError::UnsupportedVersion(version));
        }
        let message = match r.u8()? {
            KIND_SYN => GossipMessage::Syn {
                cluster_name: r.string()?,
                partitioner: r.string()?,
                digests: r.digests()?,
            },
            KIND_ACK => GossipMessage::Ack {
                digests: r.digests()?,
                states: r.states()?,
            },
            KIND_ACK2 => GossipMessage::Ack2 {
                states: r.states()?,
            },
            KIND_SHUTDOWN => GossipMessage::Shutdown {
                state: r.endpoint_state()?,
            },
            KIND_ECHO_REQ => GossipMessage::EchoReq,
            KIND_ECHO_RSP => GossipMessage::EchoRsp,
            other => return Err(GossipDecodeError::UnknownKind(other)),
        };
        let rest = bytes.len().saturating_sub(r.pos);
        if rest > 0 {
            return Err(GossipDecodeError::TrailingBytes(rest));
        }
        Ok(message)
    }
}

fn put_u32(out: &mut Vec<u8>, v: u32) {
    out.extend_from_slice(&v.to_be_bytes());
}

fn put_i32(out: &mut Vec<u8>, v: i32) {
    out.extend_from_slice(&v.to_be_bytes());
}

/// A count or length as u32. Gossip never holds 4 GiB of anything; if it
/// did, the count written would not match and the receiver would reject
/// the message rather than misread it.
fn put_len(out: &mut Vec<u8>, len: usize) {
    put_u32(out, u32::try_from(len).unwrap_or(u32::MAX));
}

fn put_string(out: &mut Vec<u8>, s: &str) {
    put_len(out, s.len());
    out.extend_from_slice(s.as_bytes());
}

fn put_address(out: &mut Vec<u8>, ip: &IpAddr) {
    match ip {
        IpAddr::V4(v4) => {
            out.push(4);
            out.extend_from_slice(&v4.octets());
        }
        IpAddr::V6(v6) => {
            out.push(6);
            out.extend_from_slice(&v6.octets());
        }
    }
}

fn put_digests(out: &mut Vec<u8>, digests: &[GossipDigest]) {
    put_len(out, digests.len());
    for d in digests {
        put_address(out, &d.endpoint);
        put_i32(out, d.generation);
        put_i32(out, d.max_version);
    }
}

fn put_endpoint_state(out: &mut Vec<u8>, state: &EndpointState) {
    put_i32(out, state.heartbeat.generation);
    put_i32(out, state.heartbeat.version);
    // At most one entry per ApplicationState: 31 fit a byte.
    out.push(u8::try_from(state.application_states.len()).unwrap_or(u8::MAX));
    for (k, v) in &state.application_states {
        out.push(k.ordinal());
        put_i32(out, v.version);
        put_string(out, &v.value);
    }
}

fn put_states(out: &mut Vec<u8>, states: &[(IpAddr, EndpointState)]) {
    put_len(out, states.len());
    for (ep, s) in states {
        put_address(out, ep);
        put_endpoint_state(out, s);
    }
}

struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    fn remaining(&self) -> usize {
        self.buf.len().saturating_sub(self.pos)
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8], GossipDecodeError> {
        let end = self.pos.checked_add(n).filter(|end| *end <= self.buf.len());
        match end.and_then(|end| self.buf.get(self.pos..end).map(|s| (s, end))) {
            Some((slice, end)) => {
                self.pos = end;
                Ok(slice)
            }
            None => Err(GossipDecodeError::Truncated {
                offset: self.pos,
                needed: n.saturating_sub(self.remaining()),
            }),
        }
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N], GossipDecodeError> {
        let mut a = [0u8; N];
        a.copy_from_slice(self.take(N)?);
        Ok(a)
    }

    fn u8(&mut self) -> Result<u8, GossipDecodeError> {
        Ok(self.array::<1>()?[0])
    }

    fn u32(&mut self) -> Result<u32, GossipDecodeError> {
        Ok(u32::from_be_bytes(self.array()?))
    }

    fn i32(&mut self) -> Result<i32, GossipDecodeError> {
        Ok(i32::from_be_bytes(self.array()?))
    }

    /// A count of items of at least `min_bytes` each, checked against what
    /// is left so that no allocation exceeds the input.
    fn count(&mut self, count: u64, min_bytes: usize) -> Result<usize, GossipDecodeError> {
        let offset = self.pos;
        let remaining = self.remaining();
        match usize::try_from(count) {
            Ok(n) if n.saturating_mul(min_bytes) <= remaining => Ok(n),
            _ => Err(GossipDecodeError::CountTooLarge {
                offset,
                count,
                remaining,
            }),
        }
    }

    fn string(&mut self) -> Result<String, GossipDecodeError> {
        let len = self.u32()?;
        let len = self.count(u64::from(len), 1)?;
        let bytes = self.take(len)?;
        String::from_utf8(bytes.to_vec()).map_err(|_| GossipDecodeError::InvalidUtf8)
    }

    fn address(&mut self) -> Result<IpAddr, GossipDecodeError> {
        match self.u8()? {
            4 => Ok(IpAddr::V4(Ipv4Addr::from(self.array::<4>()?))),
            6 => Ok(IpAddr::V6(Ipv6Addr::from(self.array::<16>()?))),
            other => Err(GossipDecodeError::BadAddressFamily(other)),
        }
    }

    fn digests(&mut self) -> Result<Vec<GossipDigest>, GossipDecodeError> {
        let n = self.u32()?;
        let n = self.count(u64::from(n), MIN_DIGEST_BYTES)?;
        let mut out = Vec::with_capacity(n);
        for _ in 0..n {
            out.push(GossipDigest {
                endpoint: self.address()?,
                generation: self.i32()?,
                max_version: self.i32()?,
            });
        }
        Ok(out)
    }

    fn endpoint_state(&mut self) -> Result<EndpointState, GossipDecodeError> {
        let heartbeat = HeartBeatState {
            generation: self.i32()?,
            version: self.i32()?,
        };
        let mut state = EndpointState::new(heartbeat, 0);
        let n = self.u8()?;
        let n = self.count(u64::from(n), MIN_APPLICATION_STATE_BYTES)?;
        for _ in 0..n {
            let ordinal = self.u8()?;
            let version = self.i32()?;
            let value = self.string()?;
            if let Some(key) = ApplicationState::from_ordinal(ordinal) {
                state.add_application_state(key, VersionedValue::with_version(value, version));
            }
        }
        Ok(state)
    }

    fn states(&mut self) -> Result<Vec<(IpAddr, EndpointState)>, GossipDecodeError> {
        let n = self.u32()?;
        let n = self.count(u64::from(n), MIN_STATE_ENTRY_BYTES)?;
        let mut out = Vec::with_capacity(n);
        for _ in 0..n {
            let ep = self.address()?;
            out.push((ep, self.endpoint_state()?));
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::VecDeque;

    const S: u64 = SECOND_NANOS;
    const CLUSTER: &str = "Test Cluster";
    const PARTITIONER: &str = "org.apache.cassandra.dht.Murmur3Partitioner";
    const GEN: i32 = 1_700_000_000;

    fn ip(n: u8) -> IpAddr {
        IpAddr::V4(Ipv4Addr::new(10, 0, 0, n))
    }

    fn node(n: u8, seeds: &[u8], generation: i32) -> Gossiper {
        let mut g = Gossiper::new(
            ip(n),
            generation,
            seeds.iter().map(|s| ip(*s)).collect(),
            CLUSTER.to_string(),
            PARTITIONER.to_string(),
            8.0,
            u64::from(n) * 7919 + generation as u64,
        );
        let _ = g.add_local_application_states(vec![
            (ApplicationState::Dc, "dc1".into()),
            (ApplicationState::Rack, format!("rack{}", n % 2)),
            (
                ApplicationState::HostId,
                format!("00000000-0000-0000-0000-0000000000{n:02}"),
            ),
            (ApplicationState::StatusWithPort, format!("NORMAL,{n}")),
            (ApplicationState::Tokens, format!("token-{n}")),
        ]);
        g
    }

    /// Gossipers wired by an in-memory network on a fake clock: each step
    /// advances one second, ticks every running node, then delivers every
    /// message (and the answers they cause) through encode/decode until
    /// none is left. A stopped node neither ticks nor receives.
    struct Sim {
        nodes: BTreeMap<IpAddr, Gossiper>,
        stopped: BTreeSet<IpAddr>,
        now: u64,
        events: Vec<(u64, IpAddr, GossipEvent)>,
    }

    impl Sim {
        fn new(nodes: Vec<Gossiper>) -> Sim {
            let mut sim = Sim {
                nodes: BTreeMap::new(),
                stopped: BTreeSet::new(),
                now: 0,
                events: Vec::new(),
            };
            for g in nodes {
                sim.nodes.insert(g.local_address(), g);
            }
            sim
        }

        fn node(&self, n: u8) -> &Gossiper {
            &self.nodes[&ip(n)]
        }

        fn step(&mut self) {
            self.now += S;
            let mut queue = VecDeque::new();
            let running: Vec<IpAddr> = self
                .nodes
                .keys()
                .filter(|ip| !self.stopped.contains(ip))
                .copied()
                .collect();
            for from in running {
                let out = self.nodes.get_mut(&from).unwrap().tick(self.now);
                self.collect(from, out, &mut queue);
            }
            while let Some((from, to, msg)) = queue.pop_front() {
                if self.stopped.contains(&to) {
                    continue;
                }
                let mut bytes = Vec::new();
                msg.encode(&mut bytes);
                let decoded = GossipMessage::decode(&bytes).unwrap();
                assert_eq!(decoded, msg);
                let Some(g) = self.nodes.get_mut(&to) else {
                    continue;
                };
                let out = g.handle(from, decoded, self.now);
                self.collect(to, out, &mut queue);
            }
        }

        fn collect(
            &mut self,
            at: IpAddr,
            out: GossipOutput,
            queue: &mut VecDeque<(IpAddr, IpAddr, GossipMessage)>,
        ) {
            for e in out.events {
                self.events.push((self.now, at, e));
            }
            for (to, m) in out.messages {
                queue.push_back((at, to, m));
            }
        }

        /// Steps until `done` holds; the number of steps taken.
        fn run_until(&mut self, max_steps: u64, done: impl Fn(&Sim) -> bool) -> Option<u64> {
            for step in 1..=max_steps {
                self.step();
                if done(self) {
                    return Some(step);
                }
            }
            None
        }

        /// Every running node knows every running node's current state and
        /// sees it up.
        fn converged(&self) -> bool {
            let running: Vec<&Gossiper> = self
                .nodes
                .values()
                .filter(|g| !self.stopped.contains(&g.local_address()))
                .collect();
            running.iter().all(|g| {
                running.iter().all(|other| {
                    let ep = other.local_address();
                    let theirs = other.endpoint_state(ep).unwrap();
                    g.is_alive(ep)
                        && g.endpoint_state(ep).is_some_and(|s| {
                            s.application_states == theirs.application_states
                                && s.heartbeat.generation == theirs.heartbeat.generation
                        })
                })
            })
        }
    }

    #[test]
    fn states_converge_on_every_node_within_a_few_rounds() {
        let mut sim = Sim::new((1..=5).map(|n| node(n, &[1, 2], GEN)).collect());
        let rounds = sim
            .run_until(30, Sim::converged)
            .expect("no convergence in 30 s");
        assert!(rounds <= 10, "took {rounds} rounds");
        for n in 1..=5 {
            let g = sim.node(n);
            assert_eq!(g.live_members().len(), 5);
            assert!(g.unreachable_members().is_empty());
            assert_eq!(
                g.application_state(ip(3), ApplicationState::Tokens),
                Some("token-3")
            );
        }
        // A later change travels too.
        let out = sim
            .nodes
            .get_mut(&ip(4))
            .unwrap()
            .add_local_application_state(ApplicationState::Load, "12345.0");
        assert!(matches!(
            &out.events[..],
            [GossipEvent::Change {
                state: ApplicationState::Load,
                ..
            }]
        ));
        let rounds = sim
            .run_until(30, |sim| {
                (1..=5).all(|n| {
                    sim.node(n).application_state(ip(4), ApplicationState::Load) == Some("12345.0")
                })
            })
            .unwrap();
        assert!(rounds <= 8, "took {rounds} rounds");
        // Every node saw every other join and come up, and a Change for LOAD.
        for n in 1..=5 {
            for m in (1..=5).filter(|m| *m != n) {
                let at = ip(n);
                let seen = |f: &dyn Fn(&GossipEvent) -> bool| {
                    sim.events.iter().any(|(_, a, e)| *a == at && f(e))
                };
                assert!(seen(
                    &|e| matches!(e, GossipEvent::Join { endpoint, .. } if *endpoint == ip(m))
                ));
                assert!(seen(
                    &|e| matches!(e, GossipEvent::Alive { endpoint, .. } if *endpoint == ip(m))
                ));
            }
            if n != 4 {
                assert!(sim.events.iter().any(|(_, a, e)| *a == ip(n)
                    && matches!(e, GossipEvent::Change { endpoint, state: ApplicationState::Load, .. } if *endpoint == ip(4))));
            }
        }
    }

    /// Stops `victim` after convergence and a minute of normal life; the
    /// seconds after the stop at which each other node marked it down.
    fn stop_and_watch(sim: &mut Sim, victim: IpAddr) -> BTreeMap<IpAddr, f64> {
        sim.run_until(30, Sim::converged).unwrap();
        // A minute of normal life so the intervals are learned.
        for _ in 0..60 {
            sim.step();
        }
        assert!(sim.converged());
        let stopped_at = sim.now;
        sim.stopped.insert(victim);
        let observers: Vec<IpAddr> = sim
            .nodes
            .keys()
            .filter(|ep| **ep != victim)
            .copied()
            .collect();
        let mut convicted_at: BTreeMap<IpAddr, u64> = BTreeMap::new();
        for _ in 0..40 {
            sim.step();
            for ep in &observers {
                if !sim.nodes[ep].is_alive(victim) {
                    convicted_at.entry(*ep).or_insert(sim.now);
                }
            }
        }
        let mut out = BTreeMap::new();
        for ep in observers {
            let g = &sim.nodes[&ep];
            let at = *convicted_at.get(&ep).expect("never convicted");
            // Exactly at the first round where phi passes the threshold.
            let fd = g.failure_detector();
            assert!(fd.phi(victim, at).unwrap() > 8.0);
            assert!(fd.phi(victim, at - S).unwrap() <= 8.0);
            assert!(g.unreachable_members().contains(&victim));
            assert!(!g.live_members().contains(&victim));
            assert!(sim.events.iter().any(|(t, a, e)| *t == at
                && *a == ep
                && matches!(e, GossipEvent::Dead { endpoint, .. } if *endpoint == victim)));
            out.insert(ep, (at - stopped_at) as f64 / S as f64);
        }
        out
    }

    #[test]
    fn a_peer_heard_every_second_is_convicted_when_phi_passes_8_about_18_s_after_it_stops() {
        // Two nodes gossip with each other every round, so each hears every
        // heartbeat of the other: intervals of 1 s (and the initial 2 s),
        // and conviction when silence / mean / ln 10 > 8, i.e. after
        // 8 ln 10 * mean = 18.4 * mean seconds.
        let mut sim = Sim::new((1..=2).map(|n| node(n, &[1], GEN)).collect());
        let after = stop_and_watch(&mut sim, ip(2))[&ip(1)];
        let mean = sim
            .node(1)
            .failure_detector()
            .mean_interval_nanos(ip(2))
            .unwrap()
            / S as f64;
        assert!((1.0..1.05).contains(&mean), "mean {mean}");
        assert!(after > 5.0, "convicted after only {after} s");
        assert!((8.0..=20.0).contains(&after), "convicted after {after} s");
        let expected = 8.0 * std::f64::consts::LN_10 * mean;
        assert!(
            after >= expected && after < expected + 1.0,
            "{after} vs {expected}"
        );
    }

    #[test]
    fn a_silent_node_is_convicted_by_every_peer_and_comes_back_up_when_it_resumes() {
        let mut sim = Sim::new((1..=4).map(|n| node(n, &[1], GEN)).collect());
        let convicted = stop_and_watch(&mut sim, ip(4));
        for (ep, after) in &convicted {
            // Each node gossips to one random peer a round, so an observer
            // misses some of a peer's heartbeats and learns others through
            // third parties a round or more late: the mean interval is a
            // little over a second (1.02 to 1.38 s over 160 seeds), and
            // conviction comes 8 ln 10 * mean after the last heartbeat
            // heard, which itself arrives up to a few rounds after the stop
            // (at most 4.6 s over those seeds; stop_and_watch checks the
            // exact round, this only bounds the whole).
            let mean = sim.nodes[ep]
                .failure_detector()
                .mean_interval_nanos(ip(4))
                .unwrap()
                / S as f64;
            assert!((1.0..1.5).contains(&mean), "mean {mean}");
            let earliest = 8.0 * std::f64::consts::LN_10 * mean;
            assert!(*after > 8.0, "{ep} convicted after only {after} s");
            assert!(
                *after >= earliest && *after <= earliest + 6.0,
                "{ep} convicted after {after} s, phi 8 implies {earliest} s"
            );
        }
        // It resumes: everyone sees it up again, and it convicted no one
        // while it was itself paused.
        sim.stopped.remove(&ip(4));
        let rounds = sim
            .run_until(20, Sim::converged)
            .expect("did not come back");
        assert!(rounds <= 10, "took {rounds} rounds");
        for n in 1..=3 {
            assert!(sim.node(4).is_alive(ip(n)));
            assert!(sim.node(n).is_alive(ip(4)));
        }
        assert!(!sim
            .events
            .iter()
            .any(|(_, a, e)| *a == ip(4) && matches!(e, GossipEvent::Dead { .. })));
    }

    #[test]
    fn a_restart_with_a_new_generation_replaces_the_old_state() {
        let mut sim = Sim::new((1..=3).map(|n| node(n, &[1], GEN)).collect());
        let _ = sim
            .nodes
            .get_mut(&ip(3))
            .unwrap()
            .add_local_application_state(ApplicationState::Load, "old load");
        sim.run_until(30, Sim::converged).unwrap();
        for _ in 0..10 {
            sim.step();
        }
        // Down long enough to be convicted...
        sim.stopped.insert(ip(3));
        sim.run_until(40, |sim| {
            !sim.node(1).is_alive(ip(3)) && !sim.node(2).is_alive(ip(3))
        })
        .unwrap();
        // ...then back as a new process: a later generation, other state.
        let mut restarted = Gossiper::new(
            ip(3),
            GEN + 100,
            vec![ip(1)],
            CLUSTER.to_string(),
            PARTITIONER.to_string(),
            8.0,
            99,
        );
        let _ = restarted.add_local_application_states(vec![
            (ApplicationState::Dc, "dc1".into()),
            (ApplicationState::StatusWithPort, "NORMAL,3".into()),
            (ApplicationState::Schema, "new schema".into()),
        ]);
        sim.nodes.insert(ip(3), restarted);
        sim.stopped.remove(&ip(3));
        let events_before = sim.events.len();
        sim.run_until(20, Sim::converged)
            .expect("restart not learned");
        for n in 1..=2 {
            let g = sim.node(n);
            let s = g.endpoint_state(ip(3)).unwrap();
            assert_eq!(s.heartbeat.generation, GEN + 100);
            assert_eq!(
                g.application_state(ip(3), ApplicationState::Schema),
                Some("new schema")
            );
            // Nothing of the old incarnation survives.
            assert_eq!(g.application_state(ip(3), ApplicationState::Load), None);
            assert_eq!(g.application_state(ip(3), ApplicationState::Tokens), None);
            assert!(g.is_alive(ip(3)));
            let restart = sim.events[events_before..]
                .iter()
                .find_map(|(_, a, e)| match e {
                    GossipEvent::Restart {
                        endpoint,
                        old_state,
                    } if *a == ip(n) && *endpoint == ip(3) => Some(old_state.clone()),
                    _ => None,
                });
            let old = restart.expect("no restart event");
            assert_eq!(old.heartbeat.generation, GEN);
            assert_eq!(
                old.application_state(ApplicationState::Load).unwrap().value,
                "old load"
            );
        }
        // The restarted node learned the others back.
        assert_eq!(sim.node(3).live_members().len(), 3);
    }

    #[test]
    fn a_node_of_another_cluster_or_partitioner_is_not_merged() {
        let mut nodes: Vec<Gossiper> = (1..=3).map(|n| node(n, &[1], GEN)).collect();
        nodes.push(Gossiper::new(
            ip(4),
            GEN,
            vec![ip(1), ip(2)],
            "Other Cluster".to_string(),
            PARTITIONER.to_string(),
            8.0,
            4,
        ));
        nodes.push(Gossiper::new(
            ip(5),
            GEN,
            vec![ip(1), ip(2)],
            CLUSTER.to_string(),
            "org.apache.cassandra.dht.RandomPartitioner".to_string(),
            8.0,
            5,
        ));
        let mut sim = Sim::new(nodes);
        for _ in 0..30 {
            sim.step();
        }
        for n in 1..=3 {
            let g = sim.node(n);
            assert_eq!(g.endpoints(), vec![ip(1), ip(2), ip(3)]);
            assert_eq!(g.live_members().len(), 3);
        }
        for n in 4..=5 {
            assert_eq!(sim.node(n).endpoints(), vec![ip(n)]);
        }
    }

    #[test]
    fn a_new_node_joining_through_a_seed_is_learned_by_every_node() {
        let mut sim = Sim::new((1..=4).map(|n| node(n, &[1], GEN)).collect());
        sim.run_until(30, Sim::converged).unwrap();
        for _ in 0..5 {
            sim.step();
        }
        let newcomer = node(5, &[1], GEN + 5);
        sim.nodes.insert(ip(5), newcomer);
        let rounds = sim
            .run_until(30, Sim::converged)
            .expect("newcomer not learned");
        assert!(rounds <= 10, "took {rounds} rounds");
        for n in 1..=4 {
            assert!(sim.node(n).is_alive(ip(5)));
            assert_eq!(
                sim.node(n)
                    .application_state(ip(5), ApplicationState::Tokens),
                Some("token-5")
            );
            assert!(sim.events.iter().any(|(_, a, e)| *a == ip(n)
                && matches!(e, GossipEvent::Join { endpoint, .. } if *endpoint == ip(5))));
        }
        assert_eq!(sim.node(5).live_members().len(), 5);
    }

    #[test]
    fn a_clean_shutdown_marks_the_node_down_at_once_and_a_restart_brings_it_back() {
        let mut sim = Sim::new((1..=3).map(|n| node(n, &[1], GEN)).collect());
        sim.run_until(30, Sim::converged).unwrap();
        let out = sim.nodes.get_mut(&ip(3)).unwrap().announce_shutdown();
        let targets: BTreeSet<IpAddr> = out.messages.iter().map(|(to, _)| *to).collect();
        assert_eq!(targets, [ip(1), ip(2)].into_iter().collect());
        let mut queue = VecDeque::new();
        sim.collect(ip(3), out, &mut queue);
        for (from, to, msg) in queue {
            let out = sim.nodes.get_mut(&to).unwrap().handle(from, msg, sim.now);
            assert!(
                matches!(&out.events[0], GossipEvent::Dead { endpoint, .. } if *endpoint == ip(3))
            );
        }
        sim.stopped.insert(ip(3));
        for n in 1..=2 {
            assert!(!sim.node(n).is_alive(ip(3)));
            assert!(sim.node(n).endpoint_state(ip(3)).unwrap().is_shutdown());
        }
        // Gossip among the others does not bring it back.
        for _ in 0..30 {
            sim.step();
            assert!(!sim.node(1).is_alive(ip(3)) && !sim.node(2).is_alive(ip(3)));
        }
        sim.nodes.insert(ip(3), node(3, &[1], GEN + 60));
        sim.stopped.remove(&ip(3));
        sim.run_until(20, Sim::converged)
            .expect("restart after shutdown not learned");
    }

    /// `nodetool disablegossip` then `enablegossip`: the node stays up but
    /// silent, the others mark it down, and a restart of gossip (a newer
    /// generation, its old status) brings it back in their view.
    #[test]
    fn gossip_stopped_and_started_again_on_a_running_node() {
        let mut sim = Sim::new((1..=3).map(|n| node(n, &[1], GEN)).collect());
        let out = sim
            .nodes
            .get_mut(&ip(3))
            .unwrap()
            .add_local_application_states(vec![(ApplicationState::Status, "NORMAL,42".into())]);
        let mut queue = VecDeque::new();
        sim.collect(ip(3), out, &mut queue);
        sim.run_until(30, Sim::converged).unwrap();
        let out = sim.nodes.get_mut(&ip(3)).unwrap().announce_shutdown();
        assert!(!sim.node(3).is_enabled());
        sim.collect(ip(3), out, &mut queue);
        for (from, to, msg) in queue.drain(..) {
            let _ = sim.nodes.get_mut(&to).unwrap().handle(from, msg, sim.now);
        }
        // it still ticks and hears gossip, and says nothing
        for _ in 0..30 {
            sim.step();
            assert!(!sim.node(1).is_alive(ip(3)) && !sim.node(2).is_alive(ip(3)));
        }
        // a second stop does not overwrite the status to give back
        let _ = sim.nodes.get_mut(&ip(3)).unwrap().announce_shutdown();
        let out = sim.nodes.get_mut(&ip(3)).unwrap().restart(GEN);
        assert!(sim.node(3).is_enabled());
        assert!(sim.node(3).generation() > GEN);
        sim.collect(ip(3), out, &mut queue);
        sim.run_until(30, |s| {
            Sim::converged(s)
                && (1..=2).all(|n| {
                    s.node(n).is_alive(ip(3))
                        && s.node(n).endpoint_state(ip(3)).unwrap().status() == "NORMAL"
                })
        })
        .expect("gossip started again not learned");
        // a restart while running does nothing
        let g = sim.node(3).generation();
        let _ = sim.nodes.get_mut(&ip(3)).unwrap().restart(GEN + 1000);
        assert_eq!(sim.node(3).generation(), g);
    }

    fn state(
        generation: i32,
        heartbeat: i32,
        states: &[(ApplicationState, &str, i32)],
    ) -> EndpointState {
        let mut s = EndpointState::new(
            HeartBeatState {
                generation,
                version: heartbeat,
            },
            0,
        );
        for (k, v, version) in states {
            s.add_application_state(*k, VersionedValue::with_version(*v, *version));
        }
        s
    }

    fn bare(n: u8) -> Gossiper {
        Gossiper::new(
            ip(n),
            GEN,
            vec![],
            CLUSTER.into(),
            PARTITIONER.into(),
            8.0,
            1,
        )
    }

    #[test]
    fn a_syn_is_answered_with_the_newer_states_and_requests_for_the_older() {
        let mut a = bare(1);
        // What A knows of X (10.0.0.9): generation 5, versions up to 10.
        let _ = a.handle(
            ip(2),
            GossipMessage::Ack2 {
                states: vec![(
                    ip(9),
                    state(
                        5,
                        10,
                        &[
                            (ApplicationState::Dc, "dc1", 4),
                            (ApplicationState::Rack, "r1", 8),
                        ],
                    ),
                )],
            },
            S,
        );
        let syn = |digests: Vec<GossipDigest>| GossipMessage::Syn {
            cluster_name: CLUSTER.into(),
            partitioner: PARTITIONER.into(),
            digests,
        };
        let d = |n: u8, generation: i32, max_version: i32| GossipDigest {
            endpoint: ip(n),
            generation,
            max_version,
        };
        let ack = |out: GossipOutput| match out.messages.into_iter().next() {
            Some((to, GossipMessage::Ack { digests, states })) => {
                assert_eq!(to, ip(2));
                (digests, states)
            }
            other => panic!("not an ack: {other:?}"),
        };
        // B is behind on X: gets what is newer than its version 5.
        let (digests, states) = ack(a.handle(ip(2), syn(vec![d(9, 5, 5)]), S));
        assert!(digests.is_empty());
        assert_eq!(states.len(), 1);
        assert_eq!(states[0].1.heartbeat.version, 10);
        assert_eq!(
            states[0].1.application_states.len(),
            1,
            "only RACK (8) is newer than 5"
        );
        // B is ahead: A asks for what is newer than its own 10.
        let (digests, states) = ack(a.handle(ip(2), syn(vec![d(9, 5, 20)]), S));
        assert_eq!(digests, vec![d(9, 5, 10)]);
        assert!(states.is_empty());
        // Same view: nothing.
        let (digests, states) = ack(a.handle(ip(2), syn(vec![d(9, 5, 10)]), S));
        assert!(digests.is_empty() && states.is_empty());
        // B knows a newer incarnation, or a node A never heard of: ask for all.
        let (digests, _) = ack(a.handle(ip(2), syn(vec![d(9, 6, 1), d(7, 3, 3)]), S));
        assert_eq!(digests, vec![d(9, 6, 0), d(7, 3, 0)]);
        // B knows an older incarnation: gets everything.
        let (_, states) = ack(a.handle(ip(2), syn(vec![d(9, 4, 100)]), S));
        assert_eq!(states[0].1.application_states.len(), 2);
        // Another cluster: no answer at all.
        let out = a.handle(
            ip(2),
            GossipMessage::Syn {
                cluster_name: "Other".into(),
                partitioner: PARTITIONER.into(),
                digests: vec![d(9, 5, 5)],
            },
            S,
        );
        assert_eq!(out, GossipOutput::default());
    }

    #[test]
    fn a_node_heard_of_is_marked_up_only_when_it_answers_an_echo() {
        let mut a = bare(1);
        let out = a.handle(
            ip(2),
            GossipMessage::Ack2 {
                states: vec![(ip(3), state(7, 3, &[(ApplicationState::Dc, "dc1", 2)]))],
            },
            S,
        );
        assert_eq!(out.messages, vec![(ip(3), GossipMessage::EchoReq)]);
        assert!(
            matches!(&out.events[..], [GossipEvent::Join { endpoint, .. }] if *endpoint == ip(3))
        );
        assert!(!a.is_alive(ip(3)));
        assert!(!a.live_members().contains(&ip(3)));
        // An echo answer from someone never asked means nothing.
        assert_eq!(
            a.handle(ip(4), GossipMessage::EchoRsp, S),
            GossipOutput::default()
        );
        // More news of 3 while the echo is out: no second echo.
        let out = a.handle(
            ip(2),
            GossipMessage::Ack2 {
                states: vec![(ip(3), state(7, 4, &[]))],
            },
            S,
        );
        assert!(out.messages.is_empty());
        let out = a.handle(ip(3), GossipMessage::EchoRsp, 2 * S);
        assert!(
            matches!(&out.events[..], [GossipEvent::Alive { endpoint, .. }] if *endpoint == ip(3))
        );
        assert!(a.is_alive(ip(3)));
        assert!(a.live_members().contains(&ip(3)));
        // A node answers echoes.
        assert_eq!(
            a.handle(ip(3), GossipMessage::EchoReq, 2 * S).messages,
            vec![(ip(3), GossipMessage::EchoRsp)]
        );
    }

    #[test]
    fn acks_before_any_syn_of_ours_are_ignored() {
        let mut a = bare(1);
        let out = a.handle(
            ip(2),
            GossipMessage::Ack {
                digests: vec![],
                states: vec![(ip(3), state(7, 3, &[]))],
            },
            S,
        );
        assert_eq!(out, GossipOutput::default());
        assert!(a.endpoint_state(ip(3)).is_none());
    }

    #[test]
    fn a_node_that_left_is_evicted_after_three_days_and_quarantined() {
        let mut a = bare(1);
        let left = state(
            7,
            3,
            &[(ApplicationState::StatusWithPort, "LEFT,42,1234", 2)],
        );
        let out = a.handle(
            ip(2),
            GossipMessage::Ack2 {
                states: vec![(ip(3), left.clone())],
            },
            S,
        );
        // A node in a dead state is marked down, not echoed.
        assert!(out.messages.is_empty());
        assert!(out
            .events
            .iter()
            .any(|e| matches!(e, GossipEvent::Dead { .. })));
        assert!(!a.is_alive(ip(3)));
        let mut now = S;
        for _ in 0..3 {
            now += S;
            let _ = a.tick(now);
        }
        assert!(a.endpoint_state(ip(3)).is_some());
        now = S + A_VERY_LONG_TIME_NANOS + S;
        let out = a.tick(now);
        assert!(out
            .events
            .contains(&GossipEvent::Remove { endpoint: ip(3) }));
        assert!(a.endpoint_state(ip(3)).is_none());
        // Within the quarantine, gossip about it is ignored...
        let _ = a.handle(
            ip(2),
            GossipMessage::Ack2 {
                states: vec![(ip(3), left.clone())],
            },
            now + S,
        );
        assert!(a.endpoint_state(ip(3)).is_none());
        // ...and after it, heard again.
        now += QUARANTINE_DELAY_NANOS + S;
        let _ = a.tick(now);
        let _ = a.handle(
            ip(2),
            GossipMessage::Ack2 {
                states: vec![(ip(3), left)],
            },
            now,
        );
        assert!(a.endpoint_state(ip(3)).is_some());
    }

    #[test]
    fn seeds_are_contacted_when_nothing_is_live() {
        let mut a = Gossiper::new(
            ip(1),
            GEN,
            vec![ip(1), ip(2)],
            CLUSTER.into(),
            PARTITIONER.into(),
            8.0,
            3,
        );
        assert_eq!(a.seeds().iter().copied().collect::<Vec<_>>(), vec![ip(2)]);
        let out = a.tick(S);
        assert_eq!(out.messages.len(), 1);
        assert_eq!(out.messages[0].0, ip(2));
        assert!(
            matches!(&out.messages[0].1, GossipMessage::Syn { digests, .. } if digests.len() == 1 && digests[0].endpoint == ip(1))
        );
        // A node with no seeds and no peers gossips to no one.
        let mut lone = bare(1);
        assert!(lone.tick(S).messages.is_empty());
    }

    #[test]
    fn gossipinfo_lists_each_state_with_its_version() {
        let mut a = bare(1);
        let _ = a.add_local_application_state(ApplicationState::Dc, "dc1");
        let _ = a.tick(S);
        let s = a.endpoint_state(ip(1)).unwrap().clone();
        let dc = s.application_state(ApplicationState::Dc).unwrap().version;
        assert_eq!(
            a.gossip_info(),
            format!(
                "/10.0.0.1\n  generation:{GEN}\n  heartbeat:{}\n  DC:{dc}:dc1\n  TOKENS: not present\n",
                s.heartbeat.version
            )
        );
        let _ = a.add_local_application_state(ApplicationState::Tokens, "1,2,3");
        assert!(a.gossip_info().contains(":<hidden>\n"));
    }

    fn sample_messages() -> Vec<GossipMessage> {
        let v6: IpAddr = "2001:db8::7".parse().unwrap();
        let st = state(
            GEN,
            42,
            &[
                (
                    ApplicationState::StatusWithPort,
                    "NORMAL,-9223372036854775808",
                    3,
                ),
                (
                    ApplicationState::HostId,
                    "5f3b2c1e-0000-4000-8000-000000000001",
                    2,
                ),
                (ApplicationState::X10, "ünïcödé", i32::MAX),
            ],
        );
        vec![
            GossipMessage::Syn {
                cluster_name: CLUSTER.into(),
                partitioner: PARTITIONER.into(),
                digests: vec![
                    GossipDigest {
                        endpoint: ip(1),
                        generation: GEN,
                        max_version: 17,
                    },
                    GossipDigest {
                        endpoint: v6,
                        generation: -1,
                        max_version: i32::MIN,
                    },
                ],
            },
            GossipMessage::Ack {
                digests: vec![GossipDigest {
                    endpoint: ip(2),
                    generation: 3,
                    max_version: 0,
                }],
                states: vec![(ip(3), st.clone()), (v6, state(1, 0, &[]))],
            },
            GossipMessage::Ack2 {
                states: vec![(ip(3), st.clone())],
            },
            GossipMessage::Ack2 { states: vec![] },
            GossipMessage::Shutdown { state: st },
            GossipMessage::EchoReq,
            GossipMessage::EchoRsp,
        ]
    }

    #[test]
    fn every_message_round_trips_and_starts_with_the_format_version() {
        for m in sample_messages() {
            let mut bytes = Vec::new();
            m.encode(&mut bytes);
            assert_eq!(bytes[0], GOSSIP_FORMAT_VERSION);
            assert_eq!(GossipMessage::decode(&bytes).unwrap(), m);
        }
        // Exact bytes of a small SYN, so the format cannot drift unnoticed.
        let mut bytes = Vec::new();
        GossipMessage::Syn {
            cluster_name: "c".into(),
            partitioner: "".into(),
            digests: vec![GossipDigest {
                endpoint: ip(1),
                generation: 2,
                max_version: 3,
            }],
        }
        .encode(&mut bytes);
        assert_eq!(
            bytes,
            [
                1, 0, 0, 0, 0, 1, b'c', 0, 0, 0, 0, 0, 0, 0, 1, 4, 10, 0, 0, 1, 0, 0, 0, 2, 0, 0,
                0, 3
            ]
        );
        let mut bytes = Vec::new();
        GossipMessage::Shutdown {
            state: state(5, 6, &[(ApplicationState::Dc, "d", 7)]),
        }
        .encode(&mut bytes);
        assert_eq!(
            bytes,
            [1, 3, 0, 0, 0, 5, 0, 0, 0, 6, 1, 3, 0, 0, 0, 7, 0, 0, 0, 1, b'd']
        );
    }

    #[test]
    fn decoding_refuses_bad_bytes_without_panicking_or_over_allocating() {
        // Every strict prefix of a valid message is an error.
        for m in sample_messages() {
            let mut bytes = Vec::new();
            m.encode(&mut bytes);
            for cut in 0..bytes.len() {
                assert!(
                    GossipMessage::decode(&bytes[..cut]).is_err(),
                    "{m:?} cut at {cut}"
                );
            }
            let mut longer = bytes.clone();
            longer.push(0);
            assert_eq!(
                GossipMessage::decode(&longer),
                Err(GossipDecodeError::TrailingBytes(1))
            );
        }
        // Huge counts and lengths are refused before allocating.
        assert!(matches!(
            GossipMessage::decode(&[1, 2, 0xff, 0xff, 0xff, 0xff]),
            Err(GossipDecodeError::CountTooLarge {
                count: 0xffff_ffff,
                ..
            })
        ));
        assert!(matches!(
            GossipMessage::decode(&[1, 0, 0x7f, 0xff, 0xff, 0xff, b'x']),
            Err(GossipDecodeError::CountTooLarge { .. })
        ));
        assert_eq!(
            GossipMessage::decode(&[2, 0]),
            Err(GossipDecodeError::UnsupportedVersion(2))
        );
        assert_eq!(
            GossipMessage::decode(&[1, 9]),
            Err(GossipDecodeError::UnknownKind(9))
        );
        let mut bad_family = vec![1, 2, 0, 0, 0, 1, 5];
        bad_family.extend([0; 13]);
        assert_eq!(
            GossipMessage::decode(&bad_family),
            Err(GossipDecodeError::BadAddressFamily(5))
        );
        assert_eq!(
            GossipMessage::decode(&[1, 0, 0, 0, 0, 1, 0xff]),
            Err(GossipDecodeError::InvalidUtf8)
        );
        // Random bytes, and valid messages with random bytes changed.
        let mut rng = StdRng::seed_from_u64(42);
        for _ in 0..20_000 {
            let len = rng.gen_range(0..64);
            let mut bytes: Vec<u8> = (0..len).map(|_| rng.gen()).collect();
            if let Some(b) = bytes.first_mut() {
                *b = if rng.gen_bool(0.9) {
                    GOSSIP_FORMAT_VERSION
                } else {
                    *b
                };
            }
            let _ = GossipMessage::decode(&bytes);
        }
        let samples = sample_messages();
        for _ in 0..20_000 {
            let m = &samples[rng.gen_range(0..samples.len())];
            let mut bytes = Vec::new();
            m.encode(&mut bytes);
            for _ in 0..rng.gen_range(1..4) {
                let i = rng.gen_range(0..bytes.len());
                bytes[i] = rng.gen();
            }
            if let Ok(decoded) = GossipMessage::decode(&bytes) {
                // Whatever decodes re-encodes to something that decodes the same.
                let mut again = Vec::new();
                decoded.encode(&mut again);
                assert_eq!(GossipMessage::decode(&again).unwrap(), decoded);
            }
        }
    }

    #[test]
    fn events_reach_a_subscriber() {
        use std::cell::RefCell;
        #[derive(Default)]
        struct Log(RefCell<Vec<String>>);
        impl EndpointStateChangeSubscriber for Log {
            fn on_join(&self, endpoint: IpAddr, _state: &EndpointState) {
                self.0.borrow_mut().push(format!("join {endpoint}"));
            }
            fn on_change(&self, endpoint: IpAddr, state: ApplicationState, value: &VersionedValue) {
                self.0
                    .borrow_mut()
                    .push(format!("change {endpoint} {state}={}", value.value));
            }
            fn on_remove(&self, endpoint: IpAddr) {
                self.0.borrow_mut().push(format!("remove {endpoint}"));
            }
        }
        let log = Log::default();
        let mut a = bare(1);
        for e in a
            .add_local_application_state(ApplicationState::Rack, "r9")
            .events
        {
            e.notify(&log);
        }
        let out = a.handle(
            ip(2),
            GossipMessage::Ack2 {
                states: vec![(ip(3), state(7, 3, &[]))],
            },
            S,
        );
        for e in out.events {
            e.notify(&log);
        }
        for e in a.evict_endpoint(ip(3), 2 * S).events {
            e.notify(&log);
        }
        assert_eq!(
            log.0.into_inner(),
            vec![
                "change 10.0.0.1 RACK=r9",
                "join 10.0.0.3",
                "remove 10.0.0.3"
            ]
        );
    }
}
