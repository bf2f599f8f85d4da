//! The connected CQL clients (what `system_views.clients` and `nodetool
//! clientstats` show): each connection's address, protocol version, STARTUP
//! options, user, keyspace and request count.

use parking_lot::Mutex;
use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use std::sync::Arc;

/// Where a connection stands (Cassandra's `ConnectionStage`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stage {
    Established,
    Authenticating,
    Ready,
}

impl Stage {
    pub fn name(self) -> &'static str {
        match self {
            Stage::Established => "established",
            Stage::Authenticating => "authenticating",
            Stage::Ready => "ready",
        }
    }
}

/// One connection.
#[derive(Debug)]
pub struct ClientInfo {
    pub address: SocketAddr,
    protocol_version: AtomicU8,
    requests: AtomicU64,
    state: Mutex<State>,
}

#[derive(Debug)]
struct State {
    stage: Stage,
    options: BTreeMap<String, String>,
    username: Option<String>,
    keyspace: Option<String>,
}

/// One connection as read now.
#[derive(Debug, Clone)]
pub struct Client {
    pub address: SocketAddr,
    pub protocol_version: u8,
    pub stage: Stage,
    /// STARTUP's options, names upper-cased.
    pub options: BTreeMap<String, String>,
    pub username: Option<String>,
    pub keyspace: Option<String>,
    pub requests: u64,
}

impl ClientInfo {
    pub fn new(address: SocketAddr) -> ClientInfo {
        ClientInfo {
            address,
            protocol_version: AtomicU8::new(0),
            requests: AtomicU64::new(0),
            state: Mutex::new(State {
                stage: Stage::Established,
                options: BTreeMap::new(),
                username: None,
                keyspace: None,
            }),
        }
    }

    pub fn started(&self, version: u8, options: &HashMap<String, String>, stage: Stage) {
        self.protocol_version.store(version, Ordering::Relaxed);
        let mut s = self.state.lock();
        s.options = options
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        s.stage = stage;
    }

    /// An AUTH_RESPONSE accepted: SASL PLAIN's token is `\0user\0password`.
    pub fn authenticated(&self, token: &[u8]) {
        let user = token
            .split(|b| *b == 0)
            .nth(1)
            .map(|u| String::from_utf8_lossy(u).into_owned());
        let mut s = self.state.lock();
        s.username = user;
        s.stage = Stage::Ready;
    }

    pub fn request(&self) {
        self.requests.fetch_add(1, Ordering::Relaxed);
    }

    pub fn set_keyspace(&self, keyspace: Option<String>) {
        self.state.lock().keyspace = keyspace;
    }

    pub fn snapshot(&self) -> Client {
        let s = self.state.lock();
        Client {
            address: self.address,
            protocol_version: self.protocol_version.load(Ordering::Relaxed),
            stage: s.stage,
            options: s.options.clone(),
            username: s.username.clone(),
            keyspace: s.keyspace.clone(),
            requests: self.requests.load(Ordering::Relaxed),
        }
    }
}

/// Every open connection.
#[derive(Debug, Default)]
pub struct Clients(Mutex<HashMap<SocketAddr, Arc<ClientInfo>>>);

impl Clients {
    pub fn open(&self, address: SocketAddr) -> Arc<ClientInfo> {
        let c = Arc::new(ClientInfo::new(address));
        self.0.lock().insert(address, c.clone());
        c
    }

    pub fn close(&self, address: &SocketAddr) {
        self.0.lock().remove(address);
    }

    /// Every connection, by address and port.
    pub fn list(&self) -> Vec<Client> {
        let mut v: Vec<Client> = self.0.lock().values().map(|c| c.snapshot()).collect();
        v.sort_by_key(|c| c.address);
        v
    }
}
