//! An in-process network of metadata services (a map from address to
//! service, with links that can be cut) and a state machine that records
//! what it applied.

#![allow(dead_code)]

use futures::future::BoxFuture;
use parking_lot::Mutex;
use sibyl_tcm::{
    ClusterMetadataService, Epoch, MetadataStateMachine, MetadataTransport, NodeAddr, TcmConfig,
    Transformation, TransportError,
};
use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

/// Generous: success paths finish far sooner.
pub const T: Duration = Duration::from_secs(15);

/// Election timeouts of a few hundred ms so the tests run in seconds.
pub fn config() -> TcmConfig {
    TcmConfig {
        heartbeat_interval: Duration::from_millis(100),
        election_timeout_min: Duration::from_millis(300),
        election_timeout_max: Duration::from_millis(600),
        install_snapshot_timeout: Duration::from_secs(2),
        snapshot_every_entries: 1000,
        entries_kept_after_snapshot: 1000,
        max_voters: 7,
    }
}

pub fn addr(id: u64) -> NodeAddr {
    NodeAddr(format!("node{id}:7000"))
}

#[derive(Default)]
pub struct Net {
    nodes: Mutex<HashMap<NodeAddr, ClusterMetadataService>>,
    cut: Mutex<HashSet<(NodeAddr, NodeAddr)>>,
}

impl Net {
    pub fn new() -> Arc<Net> {
        Arc::new(Net::default())
    }

    pub fn link(self: &Arc<Self>, from: NodeAddr) -> Arc<dyn MetadataTransport> {
        Arc::new(Link {
            net: self.clone(),
            from,
        })
    }

    pub fn register(&self, svc: &ClusterMetadataService) {
        self.nodes.lock().insert(svc.addr().clone(), svc.clone());
    }

    pub fn unregister(&self, a: &NodeAddr) {
        self.nodes.lock().remove(a);
    }

    /// Cuts every link between `a` and the other nodes, both ways.
    pub fn isolate(&self, a: &NodeAddr) {
        let others: Vec<NodeAddr> = self
            .nodes
            .lock()
            .keys()
            .filter(|k| *k != a)
            .cloned()
            .collect();
        let mut cut = self.cut.lock();
        for o in others {
            cut.insert((a.clone(), o.clone()));
            cut.insert((o, a.clone()));
        }
    }

    pub fn heal(&self) {
        self.cut.lock().clear();
    }
}

struct Link {
    net: Arc<Net>,
    from: NodeAddr,
}

impl MetadataTransport for Link {
    fn call(
        &self,
        to: &NodeAddr,
        request: Vec<u8>,
        _timeout: Duration,
    ) -> BoxFuture<'static, Result<Vec<u8>, TransportError>> {
        let net = self.net.clone();
        let from = self.from.clone();
        let to = to.clone();
        Box::pin(async move {
            if net.cut.lock().contains(&(from.clone(), to.clone())) {
                return Err(TransportError::Unreachable(format!(
                    "link {from} -> {to} is cut"
                )));
            }
            let svc = net.nodes.lock().get(&to).cloned();
            match svc {
                Some(svc) => Ok(svc.handle(request).await),
                None => Err(TransportError::Unreachable(format!("{to} is down"))),
            }
        })
    }
}

/// Records (epoch, payload) in apply order; a snapshot is that list.
#[derive(Default)]
pub struct Recorder {
    applied: Mutex<Vec<(u64, Vec<u8>)>>,
    /// Applies out of order or twice (an epoch that is not the last + 1).
    pub violations: Mutex<Vec<String>>,
    /// The epochs `restore` was called with.
    pub restores: Mutex<Vec<u64>>,
}

impl Recorder {
    pub fn new() -> Arc<Recorder> {
        Arc::new(Recorder::default())
    }

    pub fn applied(&self) -> Vec<(u64, Vec<u8>)> {
        self.applied.lock().clone()
    }
}

impl MetadataStateMachine for Recorder {
    fn apply(&self, epoch: Epoch, t: &Transformation) -> Result<Vec<u8>, String> {
        let mut applied = self.applied.lock();
        let last = applied.last().map(|a| a.0).unwrap_or(0);
        if epoch.0 != last + 1 {
            self.violations
                .lock()
                .push(format!("applied {} after {last}", epoch.0));
        }
        applied.push((epoch.0, t.payload.clone()));
        if t.payload.starts_with(b"reject") {
            return Err("rejected on purpose".to_string());
        }
        Ok(format!("ok {}", epoch.0).into_bytes())
    }

    fn snapshot(&self) -> Vec<u8> {
        serde_json::to_vec(&*self.applied.lock()).unwrap_or_default()
    }

    fn restore(&self, epoch: Epoch, snapshot: &[u8]) -> Result<(), String> {
        self.restores.lock().push(epoch.0);
        let list: Vec<(u64, Vec<u8>)> = if snapshot.is_empty() {
            Vec::new()
        } else {
            serde_json::from_slice(snapshot).map_err(|e| e.to_string())?
        };
        if list.last().map(|l| l.0).unwrap_or(0) != epoch.0 {
            return Err(format!("snapshot content does not end at {epoch}"));
        }
        *self.applied.lock() = list;
        Ok(())
    }
}

pub struct Node {
    pub id: u64,
    pub dir: PathBuf,
    pub svc: ClusterMetadataService,
    pub sm: Arc<Recorder>,
}

impl Node {
    pub async fn open(
        net: &Arc<Net>,
        dir: &Path,
        id: u64,
        sm: Arc<Recorder>,
        config: TcmConfig,
    ) -> Node {
        let svc =
            ClusterMetadataService::open(dir, id, addr(id), net.link(addr(id)), sm.clone(), config)
                .await
                .unwrap();
        net.register(&svc);
        Node {
            id,
            dir: dir.to_path_buf(),
            svc,
            sm,
        }
    }

    /// Stops the node as a crash would look to the others (its directory stays).
    pub async fn stop(self, net: &Net) {
        net.unregister(self.svc.addr());
        self.svc.shutdown().await.unwrap();
    }
}

/// Three nodes: 1 initializes, 2 joins through 1, 3 joins through 2 (a
/// learner then, so the join is forwarded to the leader).
pub async fn three_nodes(net: &Arc<Net>, root: &Path, config: TcmConfig) -> Vec<Node> {
    let n1 = Node::open(net, &root.join("n1"), 1, Recorder::new(), config.clone()).await;
    n1.svc.initialize_single().await.unwrap();
    let n2 = Node::open(net, &root.join("n2"), 2, Recorder::new(), config.clone()).await;
    n2.svc.join(&addr(1), T).await.unwrap();
    let n3 = Node::open(net, &root.join("n3"), 3, Recorder::new(), config).await;
    n3.svc.join(&addr(2), T).await.unwrap();
    vec![n1, n2, n3]
}

pub fn payload(s: impl std::fmt::Display) -> Transformation {
    Transformation::schema(s.to_string().into_bytes())
}

/// Waits until every node reached `epoch`, then checks they applied the same
/// sequence without violations; returns it.
pub async fn converged(nodes: &[&Node], epoch: u64) -> Vec<(u64, Vec<u8>)> {
    for n in nodes {
        n.svc.wait_for_epoch(Epoch(epoch), T).await.unwrap();
    }
    let first = nodes[0].sm.applied();
    for n in nodes {
        assert_eq!(
            n.sm.applied(),
            first,
            "node {} applied another sequence",
            n.id
        );
        assert!(
            n.sm.violations.lock().is_empty(),
            "node {}: {:?}",
            n.id,
            n.sm.violations.lock()
        );
    }
    let epochs: Vec<u64> = first.iter().map(|a| a.0).collect();
    assert_eq!(epochs, (1..=epoch).collect::<Vec<_>>());
    first
}

/// Polls `cond` until it holds (membership views lag the leader by a heartbeat).
pub async fn eventually(what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = std::time::Instant::now() + T;
    while !cond() {
        assert!(
            std::time::Instant::now() < deadline,
            "timed out waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
