//! openraft's network over the node's [`MetadataTransport`], and the record
//! of which peers answered recently (for errors that say how many voters
//! could be reached).

use crate::error::TransportError;
use crate::types::{MemberNode, NodeAddr, TypeConfig};
use crate::wire::{self, Failure, Request, RequestBody, Response, Target};
use crate::MetadataTransport;
use openraft::error::{
    InstallSnapshotError, NetworkError, RPCError, RaftError, RemoteError, Unreachable,
};
use openraft::network::{Backoff, RPCOption, RaftNetwork, RaftNetworkFactory};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, InstallSnapshotRequest, InstallSnapshotResponse,
    VoteRequest, VoteResponse,
};
use parking_lot::Mutex;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

type NodeId = u64;

/// When each peer was last heard from: an answer to our message, or a
/// message of theirs.
#[derive(Default)]
pub(crate) struct Reachability {
    heard: Mutex<HashMap<NodeId, Instant>>,
}

impl Reachability {
    pub(crate) fn heard_from(&self, node: NodeId) {
        self.heard.lock().insert(node, Instant::now());
    }

    /// How many of `voters` were heard from within `window`; `me` counts as
    /// heard.
    pub(crate) fn answered(&self, me: NodeId, voters: &[NodeId], window: Duration) -> usize {
        let heard = self.heard.lock();
        voters
            .iter()
            .filter(|v| **v == me || heard.get(v).is_some_and(|t| t.elapsed() <= window))
            .count()
    }
}

/// Sends one request and decodes the answer; the transport call is bounded
/// by `timeout` whatever the transport does.
pub(crate) async fn call(
    transport: &Arc<dyn MetadataTransport>,
    to: &NodeAddr,
    request: &Request,
    timeout: Duration,
) -> Result<Response, TransportError> {
    let bytes =
        wire::encode_request(request).map_err(|e| TransportError::Unreachable(e.to_string()))?;
    let answer = match tokio::time::timeout(timeout, transport.call(to, bytes, timeout)).await {
        Ok(r) => r?,
        Err(_) => {
            return Err(TransportError::Failed(format!(
                "no answer within {timeout:?}"
            )))
        }
    };
    wire::decode_response(&answer)
        .map_err(|e| TransportError::Failed(format!("undecodable answer: {e}")))
}

/// Makes a connection per peer for openraft.
pub(crate) struct Network {
    pub transport: Arc<dyn MetadataTransport>,
    pub me: NodeId,
    pub reach: Arc<Reachability>,
    /// The pause before retrying an unreachable peer.
    pub backoff: Duration,
}

impl RaftNetworkFactory<TypeConfig> for Network {
    type Network = Connection;

    async fn new_client(&mut self, target: NodeId, node: &MemberNode) -> Connection {
        Connection {
            transport: self.transport.clone(),
            me: self.me,
            target,
            node: node.clone(),
            reach: self.reach.clone(),
            backoff: self.backoff,
        }
    }
}

/// openraft's view of one peer.
pub(crate) struct Connection {
    transport: Arc<dyn MetadataTransport>,
    me: NodeId,
    target: NodeId,
    node: MemberNode,
    reach: Arc<Reachability>,
    backoff: Duration,
}

#[derive(Debug, thiserror::Error)]
#[error("{0}")]
struct Msg(String);

impl Connection {
    async fn send<E: std::error::Error>(
        &self,
        body: RequestBody,
        option: &RPCOption,
    ) -> Result<Response, RPCError<NodeId, MemberNode, E>> {
        let request = Request {
            from: self.me,
            to: Some(Target::of(self.target, &self.node)),
            body,
        };
        match call(
            &self.transport,
            &self.node.addr,
            &request,
            option.hard_ttl(),
        )
        .await
        {
            Ok(Response::Failed(Failure::WrongTarget(m))) => {
                // Unreachable, not a network error: openraft then backs off
                // instead of hammering a node that will keep refusing.
                tracing::warn!(
                    "cluster metadata: {} refused a message for node {}: {m}",
                    self.node.addr,
                    self.target
                );
                Err(RPCError::Unreachable(Unreachable::new(&Msg(m))))
            }
            Ok(r) => {
                self.reach.heard_from(self.target);
                Ok(r)
            }
            Err(e @ TransportError::Unreachable(_)) => {
                Err(RPCError::Unreachable(Unreachable::new(&e)))
            }
            Err(e @ TransportError::Failed(_)) => Err(RPCError::Network(NetworkError::new(&e))),
        }
    }

    fn unexpected<E: std::error::Error>(&self, r: Response) -> RPCError<NodeId, MemberNode, E> {
        let what = match r {
            Response::Failed(f) => format!("{f:?}"),
            _ => "an answer of the wrong type".to_string(),
        };
        RPCError::Network(NetworkError::new(&Msg(format!(
            "{} answered {what}",
            self.node.addr
        ))))
    }
}

impl RaftNetwork<TypeConfig> for Connection {
    async fn append_entries(
        &mut self,
        rpc: AppendEntriesRequest<TypeConfig>,
        option: RPCOption,
    ) -> Result<AppendEntriesResponse<NodeId>, RPCError<NodeId, MemberNode, RaftError<NodeId>>>
    {
        match self.send(RequestBody::AppendEntries(rpc), &option).await? {
            Response::AppendEntries(r) => r.map_err(|e| {
                RPCError::RemoteError(RemoteError::new_with_node(
                    self.target,
                    self.node.clone(),
                    e,
                ))
            }),
            other => Err(self.unexpected(other)),
        }
    }

    async fn install_snapshot(
        &mut self,
        rpc: InstallSnapshotRequest<TypeConfig>,
        option: RPCOption,
    ) -> Result<
        InstallSnapshotResponse<NodeId>,
        RPCError<NodeId, MemberNode, RaftError<NodeId, InstallSnapshotError>>,
    > {
        match self
            .send(RequestBody::InstallSnapshot(rpc), &option)
            .await?
        {
            Response::InstallSnapshot(r) => r.map_err(|e| {
                RPCError::RemoteError(RemoteError::new_with_node(
                    self.target,
                    self.node.clone(),
                    e,
                ))
            }),
            other => Err(self.unexpected(other)),
        }
    }

    async fn vote(
        &mut self,
        rpc: VoteRequest<NodeId>,
        option: RPCOption,
    ) -> Result<VoteResponse<NodeId>, RPCError<NodeId, MemberNode, RaftError<NodeId>>> {
        match self.send(RequestBody::Vote(rpc), &option).await? {
            Response::Vote(r) => r.map_err(|e| {
                RPCError::RemoteError(RemoteError::new_with_node(
                    self.target,
                    self.node.clone(),
                    e,
                ))
            }),
            other => Err(self.unexpected(other)),
        }
    }

    fn backoff(&self) -> Backoff {
        Backoff::new(std::iter::repeat(self.backoff))
    }
}
