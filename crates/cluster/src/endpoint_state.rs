//! What gossip knows about one node (Cassandra's `HeartBeatState`,
//! `ApplicationState`, `VersionedValue`, `EndpointState` and
//! `VersionGenerator`).
//!
//! Every piece of a node's state carries a version taken from one
//! process-wide, strictly increasing counter, and the node's heartbeat
//! carries a generation (seconds since the epoch when it started). A peer
//! compares `(generation, max version)` pairs to tell which of two views of
//! a node is newer: a higher generation means the node restarted, a higher
//! version within the same generation means it changed.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::atomic::{AtomicI32, Ordering};

/// The source of every version number: a counter shared by the whole
/// process, so that any later state of this node has a higher version than
/// any earlier one (Cassandra's `VersionGenerator`).
#[derive(Debug)]
pub struct VersionGenerator {
    last: AtomicI32,
}

static GLOBAL_VERSIONS: VersionGenerator = VersionGenerator::new();

impl VersionGenerator {
    /// A generator whose first version is 1.
    pub const fn new() -> Self {
        VersionGenerator {
            last: AtomicI32::new(0),
        }
    }

    /// The process-wide generator that heartbeats and application states
    /// take their versions from.
    pub fn global() -> &'static VersionGenerator {
        &GLOBAL_VERSIONS
    }

    /// The next version: greater than every version handed out before.
    /// It stops at `i32::MAX` rather than wrapping (2^31 versions is 68
    /// years of one-per-second heartbeats, so this never happens in
    /// practice, but a wrap would make every later state look older).
    pub fn next_version(&self) -> i32 {
        let previous = self
            .last
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |v| {
                Some(v.saturating_add(1))
            })
            .unwrap_or_else(|v| v);
        previous.saturating_add(1)
    }
}

impl Default for VersionGenerator {
    fn default() -> Self {
        Self::new()
    }
}

/// A node's heartbeat: its generation and a version bumped every gossip
/// round.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct HeartBeatState {
    /// Seconds since the epoch when the node (re)started; higher means a
    /// newer incarnation.
    pub generation: i32,
    /// The heartbeat's version, from the [`VersionGenerator`].
    pub version: i32,
}

impl HeartBeatState {
    /// The version of a heartbeat never heard (Cassandra's `EMPTY_VERSION`).
    pub const EMPTY_VERSION: i32 = -1;

    /// A fresh heartbeat of `generation`, version 0.
    pub fn new(generation: i32) -> Self {
        HeartBeatState {
            generation,
            version: 0,
        }
    }

    /// The heartbeat of a node known only by name (generation 0, empty
    /// version): any real state is newer.
    pub fn empty() -> Self {
        HeartBeatState {
            generation: 0,
            version: Self::EMPTY_VERSION,
        }
    }

    /// One more beat: takes the next process-wide version.
    pub fn update_heartbeat(&mut self) {
        self.version = VersionGenerator::global().next_version();
    }

    /// Makes this state look like a newer incarnation (used when one node
    /// speaks for another, as `removenode` does).
    pub fn force_newer_generation(&mut self) {
        self.generation = self.generation.saturating_add(1);
    }

    /// Makes this heartbeat newer than anything the same incarnation can
    /// still send (used when a node is known to have shut down).
    pub fn force_highest_possible_version(&mut self) {
        self.version = i32::MAX;
    }
}

/// The kinds of state a node gossips about itself. The ordinal is what
/// travels on the wire, so the order is Cassandra 5.0's and must never
/// change: new states take a padding slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[repr(u8)]
pub enum ApplicationState {
    /// Deprecated since 4.0 in favour of `STATUS_WITH_PORT`; still read.
    Status = 0,
    Load = 1,
    Schema = 2,
    Dc = 3,
    Rack = 4,
    ReleaseVersion = 5,
    RemovalCoordinator = 6,
    /// Deprecated since 4.0 in favour of `INTERNAL_ADDRESS_AND_PORT`.
    InternalIp = 7,
    /// Deprecated since 4.0 in favour of `NATIVE_ADDRESS_AND_PORT`.
    RpcAddress = 8,
    /// Padding kept for Cassandra 1.1.
    X11Padding = 9,
    Severity = 10,
    NetVersion = 11,
    HostId = 12,
    Tokens = 13,
    RpcReady = 14,
    InternalAddressAndPort = 15,
    NativeAddressAndPort = 16,
    StatusWithPort = 17,
    SstableVersions = 18,
    DiskUsage = 19,
    IndexStatus = 20,
    X1 = 21,
    X2 = 22,
    X3 = 23,
    X4 = 24,
    X5 = 25,
    X6 = 26,
    X7 = 27,
    X8 = 28,
    X9 = 29,
    X10 = 30,
}

impl ApplicationState {
    /// Every state, in ordinal order.
    pub const ALL: [ApplicationState; 31] = [
        ApplicationState::Status,
        ApplicationState::Load,
        ApplicationState::Schema,
        ApplicationState::Dc,
        ApplicationState::Rack,
        ApplicationState::ReleaseVersion,
        ApplicationState::RemovalCoordinator,
        ApplicationState::InternalIp,
        ApplicationState::RpcAddress,
        ApplicationState::X11Padding,
        ApplicationState::Severity,
        ApplicationState::NetVersion,
        ApplicationState::HostId,
        ApplicationState::Tokens,
        ApplicationState::RpcReady,
        ApplicationState::InternalAddressAndPort,
        ApplicationState::NativeAddressAndPort,
        ApplicationState::StatusWithPort,
        ApplicationState::SstableVersions,
        ApplicationState::DiskUsage,
        ApplicationState::IndexStatus,
        ApplicationState::X1,
        ApplicationState::X2,
        ApplicationState::X3,
        ApplicationState::X4,
        ApplicationState::X5,
        ApplicationState::X6,
        ApplicationState::X7,
        ApplicationState::X8,
        ApplicationState::X9,
        ApplicationState::X10,
    ];

    /// The ordinal (Cassandra's `ordinal()`), which is what goes on the wire.
    pub fn ordinal(self) -> u8 {
        self as u8
    }

    /// The state of an ordinal, if this build knows it.
    pub fn from_ordinal(ordinal: u8) -> Option<ApplicationState> {
        Self::ALL.get(usize::from(ordinal)).copied()
    }

    /// Cassandra's name, as `nodetool gossipinfo` prints it.
    pub fn name(self) -> &'static str {
        match self {
            ApplicationState::Status => "STATUS",
            ApplicationState::Load => "LOAD",
            ApplicationState::Schema => "SCHEMA",
            ApplicationState::Dc => "DC",
            ApplicationState::Rack => "RACK",
            ApplicationState::ReleaseVersion => "RELEASE_VERSION",
            ApplicationState::RemovalCoordinator => "REMOVAL_COORDINATOR",
            ApplicationState::InternalIp => "INTERNAL_IP",
            ApplicationState::RpcAddress => "RPC_ADDRESS",
            ApplicationState::X11Padding => "X_11_PADDING",
            ApplicationState::Severity => "SEVERITY",
            ApplicationState::NetVersion => "NET_VERSION",
            ApplicationState::HostId => "HOST_ID",
            ApplicationState::Tokens => "TOKENS",
            ApplicationState::RpcReady => "RPC_READY",
            ApplicationState::InternalAddressAndPort => "INTERNAL_ADDRESS_AND_PORT",
            ApplicationState::NativeAddressAndPort => "NATIVE_ADDRESS_AND_PORT",
            ApplicationState::StatusWithPort => "STATUS_WITH_PORT",
            ApplicationState::SstableVersions => "SSTABLE_VERSIONS",
            ApplicationState::DiskUsage => "DISK_USAGE",
            ApplicationState::IndexStatus => "INDEX_STATUS",
            ApplicationState::X1 => "X1",
            ApplicationState::X2 => "X2",
            ApplicationState::X3 => "X3",
            ApplicationState::X4 => "X4",
            ApplicationState::X5 => "X5",
            ApplicationState::X6 => "X6",
            ApplicationState::X7 => "X7",
            ApplicationState::X8 => "X8",
            ApplicationState::X9 => "X9",
            ApplicationState::X10 => "X10",
        }
    }
}

impl fmt::Display for ApplicationState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// One application state's value and the version it was set at.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct VersionedValue {
    /// The value, as Cassandra writes it (`NORMAL,<token>`, a UUID, …).
    pub value: String,
    /// The version, from the [`VersionGenerator`].
    pub version: i32,
}

impl VersionedValue {
    /// Separates the pieces of a status value.
    pub const DELIMITER: char = ',';
    /// Status of a node bootstrapping.
    pub const STATUS_BOOTSTRAPPING: &'static str = "BOOT";
    /// Status of a node bootstrapping to replace another.
    pub const STATUS_BOOTSTRAPPING_REPLACE: &'static str = "BOOT_REPLACE";
    /// Status of a node owning its tokens.
    pub const STATUS_NORMAL: &'static str = "NORMAL";
    /// Status of a node decommissioning.
    pub const STATUS_LEAVING: &'static str = "LEAVING";
    /// Status of a node that has decommissioned.
    pub const STATUS_LEFT: &'static str = "LEFT";
    /// Status of a node moving its token.
    pub const STATUS_MOVING: &'static str = "MOVING";
    /// Status of a node being removed by `removenode`.
    pub const REMOVING_TOKEN: &'static str = "removing";
    /// Status of a node removed by `removenode`.
    pub const REMOVED_TOKEN: &'static str = "removed";
    /// Status of a node replacing another that must not be marked up yet.
    pub const HIBERNATE: &'static str = "hibernate";
    /// Status of a node that announced a clean shutdown.
    pub const SHUTDOWN: &'static str = "shutdown";

    /// A value at the next process-wide version.
    pub fn new(value: impl Into<String>) -> Self {
        VersionedValue {
            value: value.into(),
            version: VersionGenerator::global().next_version(),
        }
    }

    /// A value at a given version (for decoding and tests).
    pub fn with_version(value: impl Into<String>, version: i32) -> Self {
        VersionedValue {
            value: value.into(),
            version,
        }
    }
}

/// Statuses whose node is gone or must not be marked up: a node in one of
/// them is never marked alive (Cassandra's `Gossiper.DEAD_STATES`).
pub const DEAD_STATES: [&str; 4] = [
    VersionedValue::REMOVING_TOKEN,
    VersionedValue::REMOVED_TOKEN,
    VersionedValue::STATUS_LEFT,
    VersionedValue::HIBERNATE,
];

/// Everything gossip knows about one node.
#[derive(Debug, Clone, PartialEq)]
pub struct EndpointState {
    /// Generation and heartbeat version.
    pub heartbeat: HeartBeatState,
    /// The node's application states, in ordinal order.
    pub application_states: BTreeMap<ApplicationState, VersionedValue>,
    /// Whether this node considers it alive. Local bookkeeping: not sent.
    pub is_alive: bool,
    /// When this state last changed or was heard of (monotonic nanoseconds
    /// of the holder's clock). Local bookkeeping: not sent.
    pub update_timestamp: u64,
}

impl EndpointState {
    /// A state with only a heartbeat, alive (as Cassandra creates them).
    pub fn new(heartbeat: HeartBeatState, now_nanos: u64) -> Self {
        EndpointState {
            heartbeat,
            application_states: BTreeMap::new(),
            is_alive: true,
            update_timestamp: now_nanos,
        }
    }

    /// The highest version of the heartbeat and every application state:
    /// what a digest announces.
    pub fn max_version(&self) -> i32 {
        self.application_states
            .values()
            .map(|v| v.version)
            .fold(self.heartbeat.version, i32::max)
    }

    /// One application state.
    pub fn application_state(&self, state: ApplicationState) -> Option<&VersionedValue> {
        self.application_states.get(&state)
    }

    /// Sets one application state.
    pub fn add_application_state(&mut self, state: ApplicationState, value: VersionedValue) {
        self.application_states.insert(state, value);
    }

    /// The first piece of `STATUS_WITH_PORT` (or, from nodes that only set
    /// it, `STATUS`), or "" when neither is set (Cassandra's
    /// `getGossipStatus`).
    pub fn status(&self) -> &str {
        self.application_state(ApplicationState::StatusWithPort)
            .or_else(|| self.application_state(ApplicationState::Status))
            .map(|v| {
                v.value
                    .split(VersionedValue::DELIMITER)
                    .next()
                    .unwrap_or("")
            })
            .unwrap_or("")
    }

    /// Whether the status says the node left, was removed or hibernates.
    pub fn is_dead_state(&self) -> bool {
        let status = self.status();
        !status.is_empty() && DEAD_STATES.contains(&status)
    }

    /// Whether the status says the node announced a clean shutdown.
    pub fn is_shutdown(&self) -> bool {
        self.status() == VersionedValue::SHUTDOWN
    }

    /// The part of this state newer than `version`: the heartbeat (always
    /// included once anything is, since the receiver needs the generation)
    /// and every application state above `version`; `None` when nothing is
    /// newer (Cassandra's `getStateForVersionBiggerThan`).
    pub fn delta_since(&self, version: i32) -> Option<EndpointState> {
        let states: BTreeMap<ApplicationState, VersionedValue> = self
            .application_states
            .iter()
            .filter(|(_, v)| v.version > version)
            .map(|(k, v)| (*k, v.clone()))
            .collect();
        if self.heartbeat.version <= version && states.is_empty() {
            return None;
        }
        // As it travels: the receiver's bookkeeping starts afresh.
        Some(EndpointState {
            heartbeat: self.heartbeat,
            application_states: states,
            is_alive: true,
            update_timestamp: 0,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn application_state_ordinals_are_cassandra_5_0s() {
        assert_eq!(ApplicationState::Status.ordinal(), 0);
        assert_eq!(ApplicationState::RpcAddress.ordinal(), 8);
        assert_eq!(ApplicationState::Severity.ordinal(), 10);
        assert_eq!(ApplicationState::HostId.ordinal(), 12);
        assert_eq!(ApplicationState::Tokens.ordinal(), 13);
        assert_eq!(ApplicationState::StatusWithPort.ordinal(), 17);
        assert_eq!(ApplicationState::SstableVersions.ordinal(), 18);
        assert_eq!(ApplicationState::IndexStatus.ordinal(), 20);
        assert_eq!(ApplicationState::X10.ordinal(), 30);
        for (i, s) in ApplicationState::ALL.iter().enumerate() {
            assert_eq!(usize::from(s.ordinal()), i);
            assert_eq!(ApplicationState::from_ordinal(s.ordinal()), Some(*s));
        }
        assert_eq!(ApplicationState::from_ordinal(31), None);
        assert_eq!(
            ApplicationState::NativeAddressAndPort.to_string(),
            "NATIVE_ADDRESS_AND_PORT"
        );
    }

    #[test]
    fn versions_strictly_increase_and_saturate() {
        let g = VersionGenerator::new();
        assert_eq!(g.next_version(), 1);
        assert_eq!(g.next_version(), 2);
        let global_a = VersionGenerator::global().next_version();
        let global_b = VersionGenerator::global().next_version();
        assert!(global_b > global_a);
        let full = VersionGenerator {
            last: AtomicI32::new(i32::MAX - 1),
        };
        assert_eq!(full.next_version(), i32::MAX);
        assert_eq!(full.next_version(), i32::MAX);
    }

    #[test]
    fn max_version_covers_heartbeat_and_states() {
        let mut s = EndpointState::new(
            HeartBeatState {
                generation: 7,
                version: 5,
            },
            0,
        );
        assert_eq!(s.max_version(), 5);
        s.add_application_state(ApplicationState::Dc, VersionedValue::with_version("dc1", 9));
        s.add_application_state(
            ApplicationState::Rack,
            VersionedValue::with_version("r1", 3),
        );
        assert_eq!(s.max_version(), 9);
    }

    #[test]
    fn status_prefers_status_with_port_and_knows_dead_states() {
        let mut s = EndpointState::new(HeartBeatState::new(1), 0);
        assert_eq!(s.status(), "");
        assert!(!s.is_dead_state());
        s.add_application_state(
            ApplicationState::Status,
            VersionedValue::with_version("LEFT,12,99", 1),
        );
        assert_eq!(s.status(), "LEFT");
        assert!(s.is_dead_state());
        s.add_application_state(
            ApplicationState::StatusWithPort,
            VersionedValue::with_version("NORMAL,12", 2),
        );
        assert_eq!(s.status(), "NORMAL");
        assert!(!s.is_dead_state());
        s.add_application_state(
            ApplicationState::StatusWithPort,
            VersionedValue::with_version("shutdown,true", 3),
        );
        assert!(s.is_shutdown());
        assert!(!s.is_dead_state());
    }

    #[test]
    fn delta_since_sends_only_newer_states_with_the_heartbeat() {
        let mut s = EndpointState::new(
            HeartBeatState {
                generation: 7,
                version: 4,
            },
            0,
        );
        s.add_application_state(ApplicationState::Dc, VersionedValue::with_version("dc1", 2));
        s.add_application_state(
            ApplicationState::Rack,
            VersionedValue::with_version("r1", 6),
        );
        let d = s.delta_since(3).unwrap();
        assert_eq!(d.heartbeat, s.heartbeat);
        assert_eq!(d.application_states.len(), 1);
        assert!(d.application_states.contains_key(&ApplicationState::Rack));
        // The heartbeat is old but a state is newer: the heartbeat still goes.
        let d = s.delta_since(5).unwrap();
        assert_eq!(d.heartbeat.version, 4);
        assert_eq!(d.application_states.len(), 1);
        assert!(s.delta_since(6).is_none());
        assert_eq!(
            s.delta_since(HeartBeatState::EMPTY_VERSION)
                .unwrap()
                .application_states
                .len(),
            2
        );
    }
}
