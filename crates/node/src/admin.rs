//! The node's admin interface, what `sibyl nodetool` talks to (Cassandra's
//! JMX, as a small HTTP/1.1 JSON API on `admin_address:admin_port`, loopback
//! by default), served by hyper.
//!
//! | verb | path |
//! |---|---|
//! | POST | `/flush?keyspace=K&table=T` (both optional) |
//! | POST | `/compact?keyspace=K&table=T` |
//! | POST | `/drain` |
//! | GET | `/compactionstats`, `/compactionhistory` |
//! | GET | `/tablestats?keyspace=K&table=T` |
//! | GET / POST | `/compactionthroughput` (`?mb_per_sec=N` to set) |
//! | GET / POST | `/traceprobability` (`?value=P` to set, 0 to 1) |
//! | GET | `/gcstats`: the node's pauses since the last call (and resets them) |
//! | GET | `/dashboard`: the built-in dashboard (HTML); `/dashboard/data` every node with its state and figures, `/dashboard/local` this node's figures |
//! | GET | `/status`, `/info` |
//! | GET / POST | `/binary` (`?enabled=true|false` to start or stop the native transport) |
//! | POST | `/gossip?enabled=true|false` (`disablegossip`, `enablegossip`) |
//! | GET / POST | `/logginglevels`, `/logginglevel?logger=L&level=LEVEL` |
//! | GET | `/cluster?keyspace=K`: every node with its state, load, tokens and effective ownership; the metadata log's epoch and voters |
//! | GET | `/ring`, `/gossipinfo`, `/endpoints?keyspace=K&table=T&key=KEY` |
//! | GET | `/metrics`: every metric in the Prometheus text format (not JSON) |
//! | GET | `/tpstats`: the thread pools' counts and the dropped messages per verb |
//! | POST | `/faults?drop=IP,IP`, `/faults?delay=IP,IP&ms=N&jitter_ms=J`, `/faults/clear` |

use serde_json::{json, Value};
use sibyl_cql3::query::QueryProcessor;
use sibyl_schema::schema::TableMetadata;
use sibyl_storage::store::FlushReason;
use sibyl_storage::StorageEngine;
use sibyl_types::CqlType;
use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use tokio::net::TcpListener;

/// What the admin interface needs of the node.
pub struct Admin {
    pub qp: Arc<QueryProcessor>,
    pub storage: Arc<StorageEngine>,
    pub host_id: uuid::Uuid,
    pub tokens: Vec<i64>,
    pub address: String,
    pub started: std::time::Instant,
    pub drained: tokio::sync::watch::Sender<bool>,
    pub cluster: Arc<crate::cluster::ClusterServices>,
    /// The snitch's class name, as `describecluster` shows it.
    pub snitch: String,
    /// The CQL server, which `enablebinary`/`disablebinary` start and stop.
    pub native: Arc<crate::native::NativeTransport>,
    /// Every metric of the node (`/metrics`, `tpstats`, `proxyhistograms`).
    pub metrics: Arc<sibyl_metrics::Registry>,
    /// The node's tracing (`settraceprobability`).
    pub tracer: Arc<sibyl_tracing::Tracer>,
    /// The admin port, the same on every node: the dashboard reads the
    /// other nodes' figures there.
    pub admin_port: u16,
    pub cluster_name: String,
    /// The automatic repair scheduler (`nodetool autorepairstatus`).
    pub auto_repair: Arc<sibyl_service::auto_repair::AutoRepair>,
}

/// The built-in dashboard's page (`GET /dashboard`).
const DASHBOARD_HTML: &str = include_str!("dashboard.html");

/// GETs a JSON document from another node's admin interface, within
/// `timeout` (HTTP/1.0: the answer ends with the connection).
async fn peer_json(
    address: &str,
    port: u16,
    path: &str,
    timeout: std::time::Duration,
) -> Option<Value> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let fetch = async {
        let mut s = tokio::net::TcpStream::connect((address, port)).await.ok()?;
        s.write_all(format!("GET {path} HTTP/1.0\r\nHost: {address}\r\n\r\n").as_bytes())
            .await
            .ok()?;
        let mut buf = Vec::new();
        // a node's figures are small: a bound against a misbehaving peer
        s.take(1 << 20).read_to_end(&mut buf).await.ok()?;
        let text = String::from_utf8(buf).ok()?;
        let (head, body) = text.split_once("\r\n\r\n")?;
        head.starts_with("HTTP/1.")
            .then_some(())
            .filter(|_| head.split(' ').nth(1) == Some("200"))?;
        serde_json::from_str(body).ok()
    };
    tokio::time::timeout(timeout, fetch).await.ok().flatten()
}

impl Admin {
    /// Hinted handoff's switches and pending hints (`statushandoff`,
    /// `enablehandoff`, `pausehandoff`, `truncatehints`,
    /// `listpendinghints`, the hint window and throttle).
    async fn handoff(
        &self,
        method: &str,
        path: &str,
        q: &HashMap<String, String>,
    ) -> Result<Value, (&'static str, String)> {
        let Some(h) = self.qp.proxy.hints() else {
            return Err(("503 Service Unavailable", "hints are not kept".into()));
        };
        let flag = |k: &str| q.get(k).map(|v| v == "true");
        match (method, path) {
            ("POST", "/handoff") => {
                if let Some(on) = flag("enabled") {
                    h.set_enabled(on);
                }
                if let Some(p) = flag("paused") {
                    h.set_paused(p);
                    if !p {
                        let proxy = self.qp.proxy.clone();
                        tokio::spawn(async move { proxy.deliver_hints().await });
                    }
                }
                if let (Some(dc), Some(on)) = (q.get("dc"), flag("dc_enabled")) {
                    h.set_datacenter_enabled(dc, on);
                }
                if let Some(ms) = q.get("max_hint_window_ms") {
                    let ms: u64 = ms
                        .parse()
                        .map_err(|_| ("400 Bad Request", format!("not a number of ms: {ms}")))?;
                    h.set_max_hint_window(std::time::Duration::from_millis(ms));
                }
                if let Some(kb) = q.get("throttle_kb") {
                    let kb: u64 = kb
                        .parse()
                        .map_err(|_| ("400 Bad Request", format!("not a number of KiB: {kb}")))?;
                    let bytes = kb
                        .checked_mul(1024)
                        .ok_or(("400 Bad Request", format!("{kb} KiB is out of range")))?;
                    h.set_throttle_bytes_per_second(bytes);
                }
                Ok(json!({}))
            }
            ("GET", "/handoff") => Ok(json!({
                "enabled": h.is_enabled(),
                "paused": h.is_paused(),
                "disabled_datacenters": h.disabled_datacenters(),
                "max_hint_window_ms": h.max_hint_window().as_millis() as u64,
                "throttle_kb": h.throttle_bytes_per_second() / 1024,
            })),
            ("POST", "/truncatehints") => {
                let host = match q.get("endpoint") {
                    None => None,
                    Some(e) => {
                        let ip: std::net::IpAddr = e
                            .parse()
                            .map_err(|_| ("400 Bad Request", format!("not an address: {e}")))?;
                        let d = self.cluster.state.directory.read();
                        match d.by_address(ip) {
                            Some(n) => Some(n.host_id),
                            None => return Err(("404 Not Found", format!("Unknown endpoint {e}"))),
                        }
                    }
                };
                h.truncate(host).await;
                Ok(json!({}))
            }
            _ => {
                let d = self.cluster.state.directory.read().clone();
                let rows: Vec<Value> = h
                    .pending()
                    .into_iter()
                    .map(|p| {
                        let n = d.nodes.get(&p.host_id);
                        let status = n.map_or("Unknown", |n| {
                            if self.cluster.gossip.is_alive(n.address) {
                                "UP"
                            } else {
                                "DOWN"
                            }
                        });
                        json!({
                            "host_id": p.host_id.to_string(),
                            "address": n.map(|n| n.address.to_string()),
                            "rack": n.map(|n| n.rack.clone()),
                            "dc": n.map(|n| n.datacenter.clone()),
                            "status": status,
                            "files": p.files,
                            "newest_ms": p.newest_ms,
                            "oldest_ms": p.oldest_ms,
                        })
                    })
                    .collect();
                Ok(json!({ "pending": rows }))
            }
        }
    }

    /// Every node of the cluster, as `nodetool status` and `ring` show them.
    /// This node's figures for the dashboard: request rates and p99s over
    /// the last minute or two, timeouts, pending compactions, hint files,
    /// dropped messages.
    fn dashboard_local(&self) -> Value {
        let r = &self.qp.proxy.metrics.requests;
        let (read, range, write) = (
            r.read.latency.snapshot(),
            r.range_slice.latency.snapshot(),
            r.write.latency.snapshot(),
        );
        // QUANTILES: p50, p75, p95, p98, p99, p999, in microseconds
        let p99_ms = |s: &sibyl_metrics::Snapshot| s.quantiles[4] / 1000.0;
        let hints: usize = self
            .qp
            .proxy
            .hints()
            .map_or(0, |h| h.pending().iter().map(|p| p.files).sum());
        json!({
            "reads_per_second": read.rate + range.rate,
            "writes_per_second": write.rate,
            "read_p99_ms": p99_ms(&read),
            "write_p99_ms": p99_ms(&write),
            "timeouts": r.read_timeouts() + r.write_timeouts(),
            "pending_compactions": self.storage.pending_compactions(),
            "hints": hints,
            "dropped": self.cluster.messaging.dropped().values().sum::<u64>(),
        })
    }

    /// Every node of the cluster as this node sees it (state from gossip,
    /// load), with each reachable node's own figures.
    async fn dashboard_data(&self) -> Result<Value, (&'static str, String)> {
        let mut c = self.cluster_json(&HashMap::new())?;
        let me = self.qp.proxy.local_address().to_string();
        let nodes = c["nodes"].as_array().cloned().unwrap_or_default();
        let figures = futures::future::join_all(nodes.iter().map(|n| {
            let address = n["address"].as_str().unwrap_or("").to_string();
            let up = n["status"] == "UP";
            let local = (address == me).then(|| self.dashboard_local());
            let port = self.admin_port;
            async move {
                match local {
                    Some(v) => Some(v),
                    None if up => {
                        peer_json(
                            &address,
                            port,
                            "/dashboard/local",
                            std::time::Duration::from_secs(1),
                        )
                        .await
                    }
                    None => None,
                }
            }
        }))
        .await;
        let with: Vec<Value> = nodes
            .into_iter()
            .zip(figures)
            .map(|(mut n, f)| {
                n["figures"] = f.unwrap_or(Value::Null);
                n
            })
            .collect();
        c["nodes"] = Value::Array(with);
        c["served_by"] = json!(me);
        c["cluster_name"] = json!(self.cluster_name);
        Ok(c)
    }

    fn cluster_json(&self, q: &HashMap<String, String>) -> Result<Value, (&'static str, String)> {
        let schema = self.qp.schema();
        let strategy = match q.get("keyspace") {
            Some(k) => Some(
                schema
                    .keyspace(k)
                    .ok_or(("404 Not Found", format!("The keyspace {k}, does not exist")))?
                    .replication
                    .strategy
                    .clone(),
            ),
            None => {
                // as Cassandra: the user keyspaces' strategy when they all
                // share one, else primary ownership
                let mut user = schema
                    .keyspaces
                    .values()
                    .filter(|k| !k.is_system && !k.is_virtual)
                    .map(|k| k.replication.strategy.clone());
                match user.next() {
                    Some(first) if user.all(|s| s == first) => Some(first),
                    _ => None,
                }
            }
        };
        let effective = strategy.is_some();
        let ring = sibyl_cluster::TokenMetadata::clone(&self.qp.proxy.ring.load());
        let own = ownership(&ring, strategy.as_ref());
        let gossip = &self.cluster.gossip;
        let local_load: u64 = self
            .storage
            .tables()
            .iter()
            .map(|t| t.live_disk_bytes())
            .sum();
        // every node, joining ones too; ownership is the current ring's
        let all = self.cluster.state.directory.read().ring_of_all();
        let g = gossip.gossiper.lock();
        let nodes: Vec<Value> = all
            .endpoints
            .iter()
            .enumerate()
            .map(|(i, e)| {
                let owns = ring
                    .endpoint_of(e.address)
                    .and_then(|j| own.get(j).copied())
                    .unwrap_or(0.0);
                let me = e.host_id == self.host_id;
                let alive = me || g.is_alive(e.address);
                let load = if me {
                    local_load
                } else {
                    g.application_state(
                        e.address,
                        sibyl_cluster::endpoint_state::ApplicationState::Load,
                    )
                    .and_then(|v| v.parse::<f64>().ok())
                    .map(|v| v as u64)
                    .unwrap_or(0)
                };
                let schema_version = if me {
                    Some(schema.version.to_string())
                } else {
                    g.application_state(
                        e.address,
                        sibyl_cluster::endpoint_state::ApplicationState::Schema,
                    )
                    .map(str::to_string)
                };
                let (storage_port, release_version, state) = self
                    .cluster
                    .state
                    .directory
                    .read()
                    .nodes
                    .get(&e.host_id)
                    .map(|r| (r.storage_port, r.release_version.clone(), r.state.name()))
                    .unwrap_or_default();
                json!({
                    "address": e.address.to_string(),
                    "storage_port": storage_port,
                    "release_version": release_version,
                    "host_id": e.host_id.to_string(),
                    "datacenter": e.datacenter,
                    "rack": e.rack,
                    "status": if alive { "UP" } else { "DOWN" },
                    "state": state,
                    "load_bytes": load,
                    "tokens": all.tokens_of(i),
                    "owns": owns,
                    "schema_version": schema_version,
                })
            })
            .collect();
        drop(g);
        let members = self.cluster.metadata.members();
        // as `nodetool describecluster` lists them
        let keyspaces: Vec<Value> = schema
            .keyspaces
            .values()
            .filter(|k| !k.is_virtual)
            .map(|k| {
                let class = k.replication.get("class").cloned().unwrap_or_default();
                let options: Vec<String> = k
                    .replication
                    .iter()
                    .filter(|(o, _)| o.as_str() != "class")
                    .map(|(o, v)| format!("{o}={v}"))
                    .collect();
                json!({
                    "name": k.name,
                    "class": class.rsplit('.').next().unwrap_or_default(),
                    "options": options.join(", "),
                })
            })
            .collect();
        Ok(json!({
            "cluster_name": self.qp.cluster_name,
            "snitch": self.snitch,
            "keyspaces": keyspaces,
            "effective": effective,
            "nodes": nodes,
            "epoch": self.cluster.metadata.epoch().0,
            "voters": members.voters.values().map(|a| a.0.clone()).collect::<Vec<_>>(),
            "learners": members.learners.values().map(|a| a.0.clone()).collect::<Vec<_>>(),
            "leader": self.cluster.metadata.leader().map(|(_, a)| a.0),
        }))
    }
}

/// A key as `nodetool getendpoints` takes it, as a constant of type `t`.
fn key_constant(t: &CqlType, s: &str) -> sibyl_types::Constant {
    use sibyl_types::Constant;
    match t.unfrozen() {
        CqlType::Bigint
        | CqlType::Int
        | CqlType::Smallint
        | CqlType::Tinyint
        | CqlType::Varint
        | CqlType::Counter => Constant::Integer(s.to_string()),
        CqlType::Float | CqlType::Double | CqlType::Decimal => Constant::Float(s.to_string()),
        CqlType::Boolean => Constant::Boolean(s.eq_ignore_ascii_case("true")),
        CqlType::Uuid | CqlType::Timeuuid => Constant::Uuid(s.to_string()),
        CqlType::Blob => Constant::Hex(
            (0..s.len() / 2)
                .filter_map(|i| u8::from_str_radix(s.get(2 * i..2 * i + 2)?, 16).ok())
                .collect(),
        ),
        _ => Constant::String(s.to_string()),
    }
}

/// Each endpoint's share of the ring under `strategy` (effective
/// ownership), by endpoint index.
fn ownership(
    ring: &sibyl_cluster::TokenMetadata,
    strategy: Option<&sibyl_schema::ReplicationStrategy>,
) -> Vec<f64> {
    let mut own = vec![0f64; ring.endpoints.len()];
    let toks: Vec<(i64, usize)> = ring.tokens().collect();
    if toks.is_empty() {
        return own;
    }
    for (i, (t, e)) in toks.iter().enumerate() {
        let prev = toks[(i + toks.len() - 1) % toks.len()].0;
        let size = if toks.len() == 1 {
            u64::MAX as f64 + 1.0
        } else {
            t.wrapping_sub(prev) as u64 as f64
        };
        match strategy {
            None => own[*e] += size,
            Some(s) => {
                for r in ring.replicas(*t, s) {
                    own[r] += size;
                }
            }
        }
    }
    own.iter().map(|o| o / (u64::MAX as f64 + 1.0)).collect()
}

/// The `enabled=true|false` of a switch (`/binary`, `/gossip`).
fn enabled(q: &HashMap<String, String>) -> Result<bool, (&'static str, String)> {
    match q.get("enabled").map(String::as_str) {
        Some("true") => Ok(true),
        Some("false") => Ok(false),
        _ => Err(("400 Bad Request", "enabled=true|false".into())),
    }
}

/// The query string (`application/x-www-form-urlencoded`); a key given more
/// than once keeps its values joined by commas (keyspace and table names
/// cannot hold one).
fn parse_query(q: &str) -> HashMap<String, String> {
    let mut m: HashMap<String, String> = HashMap::new();
    for (k, v) in form_urlencoded::parse(q.as_bytes()) {
        m.entry(k.into_owned())
            .and_modify(|e| {
                e.push(',');
                e.push_str(&v)
            })
            .or_insert_with(|| v.into_owned());
    }
    m
}

impl Admin {
    /// Serves HTTP/1.1 (keep-alive, one request at a time per connection)
    /// until `shutdown` fires. A client that sends no complete head within
    /// 10 s is dropped.
    pub async fn serve(
        self: Arc<Self>,
        listener: TcpListener,
        mut shutdown: tokio::sync::watch::Receiver<bool>,
    ) {
        loop {
            tokio::select! {
                r = listener.accept() => {
                    let Ok((sock, _)) = r else { continue };
                    let me = self.clone();
                    tokio::spawn(async move {
                        let service = hyper::service::service_fn(move |req| {
                            let me = me.clone();
                            async move { Ok::<_, std::convert::Infallible>(me.respond(req).await) }
                        });
                        let _ = hyper::server::conn::http1::Builder::new()
                            .timer(hyper_util::rt::TokioTimer::new())
                            .header_read_timeout(std::time::Duration::from_secs(10))
                            .max_buf_size(64 * 1024)
                            .serve_connection(hyper_util::rt::TokioIo::new(sock), service)
                            .await;
                    });
                }
                _ = shutdown.changed() => break,
            }
        }
    }

    async fn respond(
        &self,
        req: hyper::Request<hyper::body::Incoming>,
    ) -> hyper::Response<http_body_util::Full<bytes::Bytes>> {
        if req.method() == hyper::Method::GET && req.uri().path() == "/dashboard" {
            let mut resp = hyper::Response::new(http_body_util::Full::new(
                bytes::Bytes::from_static(DASHBOARD_HTML.as_bytes()),
            ));
            resp.headers_mut().insert(
                hyper::header::CONTENT_TYPE,
                hyper::header::HeaderValue::from_static("text/html; charset=utf-8"),
            );
            return resp;
        }
        if req.method() == hyper::Method::GET && req.uri().path() == "/metrics" {
            let mut resp = hyper::Response::new(http_body_util::Full::new(bytes::Bytes::from(
                self.prometheus_text(),
            )));
            resp.headers_mut().insert(
                hyper::header::CONTENT_TYPE,
                hyper::header::HeaderValue::from_static("text/plain; version=0.0.4; charset=utf-8"),
            );
            return resp;
        }
        let query = parse_query(req.uri().query().unwrap_or(""));
        let (status, body) = match self
            .handle(req.method().as_str(), req.uri().path(), &query)
            .await
        {
            Ok(v) => (hyper::StatusCode::OK, v),
            Err((code, msg)) => (
                code.split(' ')
                    .next()
                    .and_then(|c| c.parse::<u16>().ok())
                    .and_then(|c| hyper::StatusCode::from_u16(c).ok())
                    .unwrap_or(hyper::StatusCode::INTERNAL_SERVER_ERROR),
                json!({ "error": msg }),
            ),
        };
        let mut resp = hyper::Response::new(http_body_util::Full::new(bytes::Bytes::from(
            body.to_string(),
        )));
        *resp.status_mut() = status;
        resp.headers_mut().insert(
            hyper::header::CONTENT_TYPE,
            hyper::header::HeaderValue::from_static("application/json"),
        );
        resp
    }

    /// Every metric in the Prometheus text format, labelled with the
    /// cluster, node, data center and rack as the exporter labels them.
    fn prometheus_text(&self) -> String {
        let global = [
            ("cassandra_cluster", self.qp.cluster_name.clone()),
            ("cassandra_node", self.address.clone()),
            ("cassandra_datacenter", self.cluster.datacenter.clone()),
            ("cassandra_rack", self.cluster.rack.clone()),
        ];
        sibyl_metrics::prometheus::render(&self.metrics.collect(), &global)
    }

    /// A table's store and its indexes' stores.
    fn stores(&self, t: &TableMetadata) -> Vec<Arc<sibyl_storage::ColumnFamilyStore>> {
        std::iter::once(t.id)
            .chain(t.indexes.iter().map(|ix| ix.store_id(t)))
            .filter_map(|id| self.storage.table(id))
            .collect()
    }

    /// The tables a request names: `keyspace` (one or several, by commas)
    /// takes all of each keyspace's tables, or those of `table` given by
    /// name only; `table` may also give `ks.name`. Neither: every table.
    fn tables(
        &self,
        q: &HashMap<String, String>,
    ) -> Result<Vec<Arc<TableMetadata>>, (&'static str, String)> {
        let schema = self.qp.schema();
        let list = |k: &str| -> Vec<String> {
            q.get(k)
                .map(|v| {
                    v.split(',')
                        .filter(|s| !s.is_empty())
                        .map(str::to_string)
                        .collect()
                })
                .unwrap_or_default()
        };
        let keyspaces = list("keyspace");
        let (qualified, plain): (Vec<String>, Vec<String>) =
            list("table").into_iter().partition(|t| t.contains('.'));
        for k in &keyspaces {
            if !schema.keyspaces.contains_key(k) {
                return Err(("404 Not Found", format!("Keyspace [{k}] does not exist.")));
            }
        }
        let mut out = Vec::new();
        for ks in schema.keyspaces.values() {
            if ks.is_virtual {
                continue;
            }
            for t in ks.tables.values() {
                let by_keyspace =
                    keyspaces.contains(&ks.name) && (plain.is_empty() || plain.contains(&t.name));
                let by_name = qualified.contains(&format!("{}.{}", ks.name, t.name));
                if (keyspaces.is_empty() && qualified.is_empty() && plain.is_empty())
                    || by_keyspace
                    || by_name
                {
                    out.push(t.clone());
                }
            }
        }
        let named = plain.len() + qualified.len();
        if out.is_empty() && named > 0 {
            let what = match (keyspaces.first(), plain.first(), qualified.first()) {
                (Some(k), Some(t), _) => format!("Unknown table {k}.{t}"),
                (_, _, Some(kt)) => format!("Unknown table {kt}"),
                _ => "Unknown table".to_string(),
            };
            return Err(("404 Not Found", what));
        }
        Ok(out)
    }

    async fn handle(
        &self,
        method: &str,
        path: &str,
        q: &HashMap<String, String>,
    ) -> Result<Value, (&'static str, String)> {
        let server_err =
            |e: sibyl_storage::StorageError| ("500 Internal Server Error", e.to_string());
        match (method, path) {
            ("POST", "/flush") => {
                let mut flushed = 0;
                for t in self.tables(q)? {
                    for cfs in self.stores(&t) {
                        if self
                            .storage
                            .flush(&cfs, FlushReason::UserForced)
                            .await
                            .map_err(server_err)?
                            .is_some()
                        {
                            flushed += 1;
                        }
                    }
                }
                Ok(json!({ "flushed": flushed }))
            }
            ("POST", "/compact") => {
                let mut compacted = 0;
                for t in self.tables(q)? {
                    for cfs in self.stores(&t) {
                        self.storage
                            .flush(&cfs, FlushReason::UserForced)
                            .await
                            .map_err(server_err)?;
                        let split = q.get("split").is_some_and(|v| v == "true");
                        if self
                            .storage
                            .compact_with(&cfs, true, split)
                            .await
                            .map_err(server_err)?
                            .is_some()
                        {
                            compacted += 1;
                        }
                    }
                }
                Ok(json!({ "compacted": compacted }))
            }
            ("POST", "/decommission") => {
                let proxy = self.qp.proxy.clone();
                self.cluster
                    .decommission(&proxy)
                    .await
                    .map_err(|e| ("409 Conflict", e.to_string()))?;
                // remembered, so that starting this node again is refused
                crate::set_bootstrap_state(&self.storage, &self.qp.schema(), "DECOMMISSIONED")
                    .await
                    .map_err(|e| ("500 Internal Server Error", e.to_string()))?;
                // DECOMMISSIONED: no more clients
                let _ = self.drained.send(true);
                Ok(json!({ "mode": "DECOMMISSIONED" }))
            }
            ("GET", "/removenode/status") => Ok(json!({ "status": self.cluster.removal_status() })),
            ("POST", "/removenode/force") => {
                let status = self.cluster.removal_status();
                self.cluster.force_removal();
                Ok(json!({ "status": status }))
            }
            ("POST", "/removenode") => {
                let id = q
                    .get("host_id")
                    .and_then(|h| uuid::Uuid::parse_str(h).ok())
                    .ok_or(("400 Bad Request", "removenode needs a host ID".to_string()))?;
                let proxy = self.qp.proxy.clone();
                self.cluster
                    .removenode(&proxy, id)
                    .await
                    .map_err(|e| ("409 Conflict", e.to_string()))?;
                Ok(json!({ "removed": id.to_string() }))
            }
            ("POST", "/rebuild") => {
                let param = |k: &str| q.get(k).map(|v| v.to_string());
                let r = crate::cluster::RebuildRequest {
                    source_dc: param("dc"),
                    keyspace: param("keyspace"),
                    tokens: param("tokens"),
                    sources: param("sources"),
                    exclude_local_dc: q.get("exclude_local_dc").is_some_and(|v| v == "true"),
                };
                let proxy = self.qp.proxy.clone();
                self.cluster
                    .rebuild(&proxy, &r)
                    .await
                    .map_err(|e| ("409 Conflict", e.to_string()))?;
                Ok(json!({}))
            }
            ("POST", "/assassinate") => {
                let a: std::net::IpAddr = q.get("address").and_then(|a| a.parse().ok()).ok_or((
                    "400 Bad Request",
                    "assassinate needs an address".to_string(),
                ))?;
                self.cluster
                    .assassinate(a)
                    .await
                    .map_err(|e| ("409 Conflict", e.to_string()))?;
                Ok(json!({ "assassinated": a.to_string() }))
            }
            ("GET", "/netstats") => {
                let streams = self.qp.proxy.streams();
                let me = self.qp.proxy.local_address();
                let mode = self
                    .cluster
                    .state
                    .directory
                    .read()
                    .by_address(me)
                    .map(|r| r.state.name())
                    .unwrap_or(if *self.drained.borrow() {
                        "DECOMMISSIONED"
                    } else {
                        "STARTING"
                    });
                let sessions: Vec<Value> = streams
                    .sessions()
                    .iter()
                    .map(|st| {
                        json!({
                            "id": st.id.to_string(),
                            "operation": st.operation,
                            "peer": st.peer.to_string(),
                            "receiving": st.receiving,
                            "ranges_total": st.ranges_total,
                            "ranges_done": st.ranges_done.load(Ordering::Relaxed),
                            "partitions": st.partitions.load(Ordering::Relaxed),
                            "bytes": st.bytes.load(Ordering::Relaxed),
                            "seconds": st.started.elapsed().as_secs_f64(),
                            "finished": st.finished.load(Ordering::Relaxed),
                            "error": st.error.lock().clone(),
                        })
                    })
                    .collect();
                let sent: Vec<Value> = streams
                    .sent()
                    .into_iter()
                    .map(|(a, p, b)| json!({ "peer": a.to_string(), "partitions": p, "bytes": b }))
                    .collect();
                let m = &self.qp.proxy.metrics;
                let pools: Vec<Value> = self
                    .cluster
                    .messaging
                    .pools()
                    .iter()
                    .map(|(name, p)| {
                        json!({
                            "name": name,
                            "pending": p.pending.get().max(0),
                            "completed": p.completed.get(),
                            "dropped": p.dropped.get(),
                        })
                    })
                    .collect();
                Ok(json!({
                    "mode": mode,
                    "sessions": sessions,
                    "sent": sent,
                    "read_repair_attempted": m.read_repairs.get(),
                    "pools": pools,
                }))
            }
            ("GET", "/autorepair") => {
                let a = &self.auto_repair;
                let tables: Vec<serde_json::Value> = a
                    .tables(&self.qp.proxy)
                    .into_iter()
                    .map(|(_, t)| json!(t))
                    .collect();
                Ok(json!({
                    "enabled": a.enabled(),
                    "interval_ms": a.config.interval.as_millis() as u64,
                    "incremental": a.config.incremental,
                    "paused": *a.paused.lock(),
                    "running": a.running.lock().as_ref().map(|(k, t)| format!("{k}.{t}")),
                    "tables": tables,
                }))
            }
            ("POST", "/autorepair") => {
                let on = match q.get("enabled").map(String::as_str) {
                    Some("true") => true,
                    Some("false") => false,
                    _ => {
                        return Err(("400 Bad Request", "enabled=true|false expected".to_string()))
                    }
                };
                self.auto_repair.set_enabled(on);
                Ok(json!({ "enabled": on }))
            }
            ("POST", "/upgradesstables") => {
                // every table of the scope, system ones included, as Cassandra's
                let all = q.get("all").is_some_and(|v| v == "true");
                let mut upgraded = 0;
                for t in self.tables(q)? {
                    if let Some(cfs) = self.storage.table(t.id) {
                        upgraded += self
                            .storage
                            .upgrade_sstables(&cfs, all)
                            .await
                            .map_err(server_err)?;
                    }
                }
                Ok(json!({ "upgraded": upgraded }))
            }
            ("POST", "/cleanup") => {
                // partitions whose token this node neither replicates nor
                // is about to replicate
                let me = self.qp.proxy.local_address();
                let ring = self.qp.proxy.ring.load_full();
                let future = Arc::new(self.qp.proxy.future_ring());
                let schema = self.qp.schema();
                let mut cleaned = Vec::new();
                for t in self.tables(q)? {
                    let Some(ks) = schema.keyspace(&t.keyspace) else {
                        continue;
                    };
                    if ks.is_system
                        || ks.replication.strategy == sibyl_schema::ReplicationStrategy::Local
                    {
                        continue;
                    }
                    let strategy = ks.replication.strategy.clone();
                    let (ring, future) = (ring.clone(), future.clone());
                    let owns = move |r: &sibyl_cluster::TokenMetadata, token: i64| {
                        r.replicas(token, &strategy)
                            .iter()
                            .any(|i| r.endpoints[*i].address == me)
                    };
                    let keep: Arc<dyn Fn(i64) -> bool + Send + Sync> = Arc::new(move |token| {
                        owns(&ring, token)
                            || future.as_ref().as_ref().is_some_and(|f| owns(f, token))
                    });
                    // the base table only: index entries of dropped rows
                    // are removed when a read finds them unbacked
                    if let Some(cfs) = self.storage.table(t.id) {
                        let (before, after) = self
                            .storage
                            .cleanup(&cfs, keep.clone())
                            .await
                            .map_err(server_err)?;
                        tracing::info!(
                            "cleanup of {}.{}: {before} -> {after} bytes, {} bytes freed",
                            t.keyspace,
                            t.name,
                            before.saturating_sub(after)
                        );
                        cleaned.push(json!({
                            "table": format!("{}.{}", t.keyspace, t.name),
                            "bytes_before": before,
                            "bytes_after": after,
                        }));
                    }
                }
                Ok(json!({ "tables": cleaned }))
            }
            ("POST", "/repair") => {
                static COMMANDS: std::sync::atomic::AtomicU64 =
                    std::sync::atomic::AtomicU64::new(0);
                let schema = self.qp.schema();
                let keyspaces: Vec<String> = match q.get("keyspace") {
                    Some(k) => vec![k.clone()],
                    None => schema
                        .keyspaces
                        .values()
                        .filter(|k| !k.is_system && !k.is_virtual)
                        .map(|k| k.name.clone())
                        .collect(),
                };
                let tables: Vec<String> = q
                    .get("tables")
                    .map(|t| {
                        t.split(',')
                            .filter(|x| !x.is_empty())
                            .map(str::to_string)
                            .collect()
                    })
                    .unwrap_or_default();
                let token = |k: &str| q.get(k).and_then(|v| v.parse::<i64>().ok());
                let sub_range = match (token("st"), token("et")) {
                    (Some(s), Some(e)) => Some((s, e)),
                    _ => None,
                };
                let lines = Arc::new(parking_lot::Mutex::new(Vec::<String>::new()));
                let progress = {
                    let lines = lines.clone();
                    move |m: String| {
                        tracing::info!("{m}");
                        lines.lock().push(format!("[{}] {m}", local_timestamp()));
                    }
                };
                let mut total = sibyl_service::repair::RepairSummary::default();
                for ks in keyspaces {
                    let command = COMMANDS.fetch_add(1, Ordering::Relaxed) + 1;
                    let started = std::time::Instant::now();
                    let options = sibyl_service::repair::RepairOptions {
                        keyspace: ks,
                        tables: tables.clone(),
                        primary_range: q.get("pr").is_some_and(|v| v == "true"),
                        sub_range,
                        local_dc_only: q.get("local_dc").is_some_and(|v| v == "true"),
                        command,
                        storage_port: self.cluster.storage_port(),
                        incremental: q.get("full").is_none_or(|v| v != "true"),
                        job_threads: q.get("j").and_then(|v| v.parse().ok()).unwrap_or(1),
                    };
                    match self.qp.proxy.repair(&options, &progress).await {
                        Ok(s) => {
                            progress(format!(
                                "Repair summary: {} ranges checked ({} leaves), {} leaves out of sync, {} streams, \
                                 {} partitions and {} bytes streamed",
                                s.ranges,
                                s.leaves_checked,
                                s.leaves_out_of_sync,
                                s.streams,
                                s.partitions_streamed,
                                s.bytes_streamed
                            ));
                            progress("Repair completed successfully".into());
                            progress(format!(
                                "Repair command #{command} finished in {}",
                                sibyl_types::pretty::duration_words(
                                    started.elapsed().as_millis() as u64
                                )
                            ));
                            total.ranges += s.ranges;
                            total.leaves_checked += s.leaves_checked;
                            total.leaves_out_of_sync += s.leaves_out_of_sync;
                            total.streams += s.streams;
                            total.partitions_streamed += s.partitions_streamed;
                            total.bytes_streamed += s.bytes_streamed;
                        }
                        Err(e) => {
                            progress(format!("Repair command #{command} failed with error {e}"));
                            let all = lines.lock().join("\n");
                            return Err((
                                "500 Internal Server Error",
                                format!("{all}\nerror: Repair job has failed with the error message: {e}"),
                            ));
                        }
                    }
                }
                let out = lines.lock().clone();
                Ok(json!({
                    "lines": out,
                    "ranges": total.ranges,
                    "leaves_checked": total.leaves_checked,
                    "leaves_out_of_sync": total.leaves_out_of_sync,
                    "streams": total.streams,
                    "partitions_streamed": total.partitions_streamed,
                    "bytes_streamed": total.bytes_streamed,
                }))
            }
            // the outbound throttle, or with inter_dc=true the one for
            // nodes of other data centers
            ("GET", "/streamthroughput") => {
                let streams = self.qp.proxy.streams();
                let throttle = if q.get("inter_dc").is_some_and(|v| v == "true") {
                    &streams.inter_dc
                } else {
                    &streams.outbound
                };
                Ok(json!({ "bytes_per_second": throttle.rate() }))
            }
            ("POST", "/streamthroughput") => {
                let b: u64 = q
                    .get("bytes_per_second")
                    .and_then(|v| v.parse().ok())
                    .ok_or(("400 Bad Request", "bytes_per_second expected".to_string()))?;
                let streams = self.qp.proxy.streams();
                if q.get("inter_dc").is_some_and(|v| v == "true") {
                    streams.inter_dc.set_rate(b);
                } else {
                    streams.outbound.set_rate(b);
                }
                Ok(json!({ "bytes_per_second": b }))
            }
            ("POST", "/drain") => {
                self.storage.flush_all().await.map_err(server_err)?;
                let _ = self.drained.send(true);
                Ok(json!({ "drained": true }))
            }
            ("GET", "/compactionstats") => {
                let schema = self.qp.schema();
                let names = |id: uuid::Uuid| {
                    schema
                        .table_by_id(id)
                        .map(|t| (t.keyspace.clone(), t.name.clone()))
                        .unwrap_or_default()
                };
                let running: Vec<Value> = self
                    .storage
                    .compactions_running
                    .lock()
                    .iter()
                    .map(|p| {
                        let (keyspace, table) = names(p.table_id);
                        json!({
                            "id": p.id.to_string(),
                            "kind": p.kind,
                            "keyspace": keyspace,
                            "table": table,
                            "completed": p.completed_bytes(),
                            "total": p.total_bytes,
                            "unit": "bytes",
                            "sstables": p.sstables,
                            "target_directory": p.target_directory.display().to_string(),
                        })
                    })
                    .collect();
                // Cassandra's PendingTasksByTableName: keyspaces and tables
                // in Java HashMap order
                let mut by_keyspace: Vec<(String, Vec<(String, usize)>)> = Vec::new();
                for (id, n) in self.storage.pending_compactions_by_table() {
                    let (keyspace, table) = names(id);
                    match by_keyspace.iter_mut().find(|k| k.0 == keyspace) {
                        Some(k) => k.1.push((table, n)),
                        None => by_keyspace.push((keyspace, vec![(table, n)])),
                    }
                }
                let mut pending_by_table = Vec::new();
                let keyspaces = sibyl_cql3::query::java_hash_set(
                    by_keyspace.iter().map(|k| k.0.clone()).collect(),
                );
                for keyspace in keyspaces {
                    let tables = &by_keyspace
                        .iter()
                        .find(|k| k.0 == keyspace)
                        .expect("listed")
                        .1;
                    for table in sibyl_cql3::query::java_hash_set(
                        tables.iter().map(|t| t.0.clone()).collect(),
                    ) {
                        let n = tables.iter().find(|t| t.0 == table).expect("listed").1;
                        pending_by_table.push(json!([keyspace, table, n]));
                    }
                }
                let completed = &self.storage.compactions_completed;
                Ok(json!({
                    "concurrent_compactors": self.storage.config.concurrent_compactors,
                    "pending": self.storage.pending_compactions(),
                    "pending_by_table": pending_by_table,
                    "completed": completed.count(),
                    "bytes_compacted": self.storage.bytes_compacted.get(),
                    "aborted": self.storage.compactions_aborted.get(),
                    "reduced": 0,
                    "sstables_dropped": 0,
                    "fifteen_minute_rate": completed.fifteen_minute_rate(),
                    "mean_rate": completed.mean_rate(),
                    "throughput_bytes": self.storage.compaction_throughput_bytes.load(Ordering::Relaxed),
                    "running": running,
                }))
            }
            ("GET", "/compactionhistory") => {
                let schema = self.qp.schema();
                let h: Vec<Value> = self
                    .storage
                    .compaction_history
                    .lock()
                    .iter()
                    .map(|r| {
                        let t = schema.table_by_id(r.table_id);
                        json!({
                            "keyspace": t.map(|t| t.keyspace.clone()).unwrap_or_default(),
                            "table": t.map(|t| t.name.clone()).unwrap_or_default(),
                            "compacted_at": r.finished_at_millis,
                            "bytes_in": r.input_bytes,
                            "bytes_out": r.output_bytes,
                            "partitions_in": r.input_partitions,
                            "partitions_out": r.output_partitions,
                            "sstables_in": r.inputs,
                        })
                    })
                    .collect();
                Ok(json!({ "history": h }))
            }
            ("GET", "/tablestats") => {
                let mut out = Vec::new();
                for t in self.tables(q)? {
                    let Some(cfs) = self.storage.table(t.id) else {
                        continue;
                    };
                    let ss = cfs.sstables();
                    let fp: u64 = ss
                        .iter()
                        .map(|s| s.bloom_false_positives.load(Ordering::Relaxed))
                        .sum();
                    let partitions: u64 = ss.iter().map(|s| s.stats.partitions).sum();
                    let sizes = sibyl_storage::metrics::Histogram::default();
                    for s in &ss {
                        sizes.add_counts(&s.stats.partition_sizes);
                    }
                    let ms = |h: &sibyl_storage::metrics::Histogram| {
                        if h.count() == 0 {
                            f64::NAN
                        } else {
                            h.mean() / 1000.0
                        }
                    };
                    let (repaired, unrepaired, pending) = cfs.repair_bytes();
                    out.push(json!({
                        "keyspace": t.keyspace,
                        "table": t.name,
                        "percent_repaired": (cfs.percent_repaired() * 100.0).round() / 100.0,
                        "bytes_repaired": repaired,
                        "bytes_unrepaired": unrepaired,
                        "bytes_pending_repair": pending,
                        "local_read_latency_ms": ms(cfs.read_latency.all()),
                        "local_write_latency_ms": ms(cfs.write_latency.all()),
                        "pending_flushes": cfs.pending_flushes(),
                        "partition_min_bytes": sizes.min(),
                        "partition_max_bytes": sizes.max(),
                        "partition_mean_bytes": sizes.mean().round() as u64,
                        "sstable_count": ss.len(),
                        "space_used_live": cfs.live_disk_bytes(),
                        "memtable_data_size": cfs.memtable_bytes(),
                        "local_read_count": cfs.read_latency.count(),
                        "local_write_count": cfs.write_latency.count(),
                        "flushes": cfs.flushes.load(Ordering::Relaxed),
                        "bloom_filter_false_positives": fp,
                        "sstable_partitions": partitions,
                        "compaction": t.params.compaction.get("class").cloned().unwrap_or_default(),
                    }));
                }
                Ok(json!({ "tables": out }))
            }
            ("GET", "/proxyhistograms") => {
                use sibyl_service::metrics::Operation;
                let requests = &self.qp.proxy.metrics.requests;
                let column = |op: Operation| percentile_column(requests.of(op).latency.all());
                Ok(json!({
                    "read": column(Operation::Read),
                    "write": column(Operation::Write),
                    "range": column(Operation::RangeSlice),
                    "cas_read": column(Operation::CasRead),
                    "cas_write": column(Operation::CasWrite),
                }))
            }
            ("GET", "/tablehistograms") => {
                use sibyl_storage::metrics::Histogram;
                let mut out = Vec::new();
                for t in self.tables(q)? {
                    let Some(cfs) = self.storage.table(t.id) else {
                        continue;
                    };
                    let (sizes, cells) = (Histogram::default(), Histogram::default());
                    for s in cfs.sstables() {
                        sizes.add_counts(&s.stats.partition_sizes);
                        cells.add_counts(&s.stats.cell_counts);
                    }
                    let column = percentile_column;
                    out.push(json!({
                        "keyspace": t.keyspace,
                        "table": t.name,
                        "read_latency_micros": column(cfs.read_latency.all()),
                        "write_latency_micros": column(cfs.write_latency.all()),
                        "sstables": column(&cfs.sstables_per_read),
                        "partition_size_bytes": column(&sizes),
                        "cell_count": column(&cells),
                    }));
                }
                Ok(json!({ "tables": out }))
            }
            ("POST", "/snapshot") => {
                let tag = q.get("tag").cloned().unwrap_or_else(|| {
                    (sibyl_types::timeuuid::timestamp_micros_now() / 1000).to_string()
                });
                sibyl_storage::store::check_snapshot_name(&tag)
                    .map_err(|e| ("400 Bad Request", e))?;
                let tables = self.tables(q)?;
                if tables.iter().any(|t| {
                    self.stores(t)
                        .iter()
                        .any(|c| c.snapshots().iter().any(|s| s.0 == tag))
                }) {
                    return Err(("400 Bad Request", format!("Snapshot {tag} already exists.")));
                }
                let mut n = 0;
                for t in tables {
                    for cfs in self.stores(&t) {
                        self.storage
                            .flush(&cfs, FlushReason::Snapshot)
                            .await
                            .map_err(server_err)?;
                        cfs.snapshot(&tag).map_err(server_err)?;
                        n += 1;
                    }
                }
                Ok(json!({ "tag": tag, "tables": n }))
            }
            ("GET", "/snapshots") => {
                let mut out = Vec::new();
                for t in self.tables(q)? {
                    if let Some(cfs) = self.storage.table(t.id) {
                        for (tag, total, true_size) in cfs.snapshots() {
                            out.push(json!({ "tag": tag, "keyspace": t.keyspace, "table": t.name, "size_on_disk": total, "true_size": true_size }));
                        }
                    }
                }
                Ok(json!({ "snapshots": out }))
            }
            ("POST", "/clearsnapshot") => {
                let tag = q.get("tag").map(|s| s.as_str());
                if tag.is_none() && q.get("all").map(String::as_str) != Some("true") {
                    return Err(("400 Bad Request", "Specify snapshot name or --all".into()));
                }
                let mut n = 0;
                for t in self.tables(q)? {
                    for cfs in self.stores(&t) {
                        n += cfs.clear_snapshot(tag);
                    }
                }
                Ok(json!({ "cleared": n }))
            }
            ("GET", "/dashboard/local") => Ok(self.dashboard_local()),
            ("GET", "/dashboard/data") => self.dashboard_data().await,
            ("GET", "/gcstats") => {
                let s = sibyl_metrics::pauses::global().get_and_reset();
                Ok(json!({
                    "interval_ms": s.interval_ms,
                    "max_ms": s.max_ms,
                    "total_ms": s.total_ms,
                    "sum_squares_ms": s.sum_squares_ms,
                    "reclaimed_mb": s.reclaimed_mb,
                    "count": s.count,
                    // null (no pauses: Cassandra prints NaN)
                    "stdev_ms": s.stdev_ms(),
                    // no direct (off-heap) buffer pool to report: -1, as
                    // Cassandra prints when it cannot read it
                    "direct_memory_bytes": -1,
                }))
            }
            ("GET", "/traceprobability") => Ok(json!({ "probability": self.tracer.probability() })),
            ("POST", "/traceprobability") => {
                let p: f64 = q.get("value").and_then(|v| v.parse().ok()).ok_or((
                    "400 Bad Request",
                    "value must be a number between 0 and 1".to_string(),
                ))?;
                self.tracer
                    .set_probability(p)
                    .map_err(|e| ("400 Bad Request", e))?;
                Ok(json!({ "probability": p }))
            }
            ("GET", "/compactionthroughput") => Ok(
                json!({ "mb_per_sec": self.storage.compaction_throughput_bytes.load(Ordering::Relaxed) / (1024 * 1024) }),
            ),
            ("POST", "/compactionthroughput") => {
                let mb: u64 = q.get("mb_per_sec").and_then(|v| v.parse().ok()).ok_or((
                    "400 Bad Request",
                    "mb_per_sec must be a whole number".to_string(),
                ))?;
                self.storage.compaction_throughput_bytes.store(
                    mb.checked_mul(1 << 20)
                        .ok_or(("400 Bad Request", format!("{mb} MiB/s is out of range")))?,
                    Ordering::Relaxed,
                );
                Ok(json!({ "mb_per_sec": mb }))
            }
            ("POST", "/invalidatekeycache") => {
                self.storage.key_cache.clear();
                Ok(json!({}))
            }
            ("POST", "/invalidaterowcache") => {
                self.storage.row_cache.clear();
                Ok(json!({}))
            }
            ("GET", "/status") | ("GET", "/info") => {
                let load: u64 = self
                    .storage
                    .tables()
                    .iter()
                    .map(|t| t.live_disk_bytes())
                    .sum();
                let (hits, misses) = self.storage.cache_stats();
                let local_state = self
                    .cluster
                    .state
                    .directory
                    .read()
                    .nodes
                    .get(&self.host_id)
                    .map(|r| r.state)
                    .unwrap_or_default();
                Ok(json!({
                    "address": self.address,
                    // this node is up while it answers; its ring state is the
                    // directory's
                    "status": format!("U{}", local_state.letter()),
                    "datacenter": self.cluster.datacenter,
                    "rack": self.cluster.rack,
                    "host_id": self.host_id.to_string(),
                    "tokens": self.tokens.len(),
                    "load_bytes": load,
                    "uptime_seconds": self.started.elapsed().as_secs(),
                    "release_version": crate::RELEASE_VERSION,
                    "chunk_cache_hits": hits,
                    "chunk_cache_misses": misses,
                    "key_cache": cache_json(self.storage.key_cache.usage(), &self.storage.key_cache.stats),
                    "row_cache": cache_json(self.storage.row_cache.usage(), &self.storage.row_cache.stats),
                    "pending_compactions": self.storage.pending_compactions(),
                    "generation": self.cluster.gossip.gossiper.lock().generation(),
                    "gossip_active": self.cluster.gossip.is_enabled(),
                    // Cassandra's bootstrap states, from this node's ring state
                    "bootstrap_state": match local_state {
                        crate::cluster::NodeState::Joining => "IN_PROGRESS",
                        _ => "COMPLETED",
                    },
                    "decommissioning": local_state == crate::cluster::NodeState::Leaving,
                    // off when the node was started without it, an operator
                    // disabled it, or a failure policy stopped it
                    "native_transport_active": self.native.is_running(),
                }))
            }
            ("GET", "/cluster") => self.cluster_json(q),
            ("GET", "/logginglevels") => {
                let levels = crate::LOG_LEVELS
                    .get()
                    .map(|l| l.levels())
                    .unwrap_or_default();
                Ok(json!({ "levels": levels }))
            }
            ("POST", "/logginglevel") => {
                let l = crate::LOG_LEVELS
                    .get()
                    .ok_or(("409 Conflict", "logging is not set up".to_string()))?;
                l.set(
                    q.get("logger")
                        .map(String::as_str)
                        .filter(|s| !s.is_empty()),
                    q.get("level").map(String::as_str).filter(|s| !s.is_empty()),
                )
                .map_err(|e| ("400 Bad Request", e))?;
                Ok(json!({}))
            }
            ("GET", "/binary") => Ok(json!({ "running": self.native.is_running() })),
            ("POST", "/binary") => {
                if enabled(q)? {
                    self.native.start().await.map_err(|e| {
                        (
                            "500 Internal Server Error",
                            format!(
                                "Cannot start the native transport on {}: {e}",
                                self.native.address()
                            ),
                        )
                    })?;
                } else {
                    self.native.stop().await
                }
                Ok(json!({ "running": self.native.is_running() }))
            }
            (_, "/handoff") | (_, "/truncatehints") | ("GET", "/pendinghints") => {
                self.handoff(method, path, q).await
            }
            ("GET", "/tpstats") => {
                use sibyl_metrics::Value as V;
                let c = self.metrics.collect();
                let number = |v: &V| match v {
                    V::Counter(n) => *n as f64,
                    V::Gauge(g) => *g,
                    _ => 0.0,
                };
                let mut pools: std::collections::BTreeMap<String, serde_json::Map<String, Value>> =
                    Default::default();
                let mut dropped = serde_json::Map::new();
                for (n, v) in &c.metrics {
                    let scope = n.scope.clone().unwrap_or_default();
                    match n.kind {
                        "ThreadPools" => {
                            pools
                                .entry(scope)
                                .or_default()
                                .insert(n.name.clone(), json!(number(v) as u64));
                        }
                        "DroppedMessage" if n.name == "Dropped" => {
                            dropped.insert(scope, json!(number(v) as u64));
                        }
                        _ => {}
                    }
                }
                Ok(json!({ "ThreadPools": pools, "DroppedMessage": dropped }))
            }
            ("GET", "/proxymetrics") => {
                let m = &self.qp.proxy.metrics;
                let r = &m.requests;
                let all = [&r.read, &r.range_slice, &r.write, &r.cas_read, &r.cas_write];
                let h = self.qp.proxy.hints();
                let hm = |f: fn(&sibyl_service::hints::HintsMetrics) -> u64| {
                    h.as_ref().map_or(0, |h| f(&h.metrics))
                };
                use std::sync::atomic::Ordering::Relaxed;
                Ok(json!({
                    "reads": r.read.latency.count() + r.range_slice.latency.count(),
                    "writes": r.write.latency.count(),
                    "cas_writes": r.cas_write.latency.count(),
                    "cas_reads": r.cas_read.latency.count(),
                    "read_timeouts": r.read_timeouts(),
                    "write_timeouts": r.write_timeouts(),
                    "cas_contention": m.cas_contention.get(),
                    "unavailables": all.iter().map(|x| x.unavailables.get()).sum::<u64>(),
                    "read_micros": r.read.latency.all().sum() + r.range_slice.latency.all().sum(),
                    "write_micros": r.write.latency.all().sum(),
                    "cas_micros": r.cas_write.latency.all().sum(),
                    "read_repairs": m.read_repairs.get(),
                    "speculative_retries": m.speculative_retries.get(),
                    "counter_forwards": m.counter_forwards.get(),
                    "batchlog_replays": m.batchlog_replays.get(),
                    "hints_created": hm(|x| x.created.load(Relaxed)),
                    "hints_delivered": hm(|x| x.delivered.load(Relaxed)),
                    "hints_expired": hm(|x| x.expired.load(Relaxed)),
                    "hints_failed": hm(|x| x.failed.load(Relaxed)),
                    "hints_pending_files": h.as_ref().map_or(0, |h| h.pending().iter().map(|p| p.files).sum::<usize>()),
                }))
            }
            ("GET", "/gossipinfo") => Ok(json!({
                "text": self.cluster.gossip.gossiper.lock().gossip_info(),
                "running": self.cluster.gossip.is_enabled(),
            })),
            ("POST", "/gossip") => {
                if enabled(q)? {
                    self.cluster.gossip.enable()
                } else {
                    self.cluster.gossip.disable()
                }
                Ok(json!({ "running": self.cluster.gossip.is_enabled() }))
            }
            ("GET", "/endpoints") => {
                let (Some(k), Some(t), Some(key)) =
                    (q.get("keyspace"), q.get("table"), q.get("key"))
                else {
                    return Err((
                        "400 Bad Request",
                        "keyspace, table and key are required".into(),
                    ));
                };
                let schema = self.qp.schema();
                let Some(table) = schema.table(k, t) else {
                    return Err(("404 Not Found", format!("Unknown table {k}.{t}")));
                };
                let Some(ks) = schema.keyspace(k) else {
                    return Err(("404 Not Found", format!("Keyspace [{k}] does not exist.")));
                };
                let pk = table.partition_key();
                let parts: Vec<&str> = if pk.len() == 1 {
                    vec![key.as_str()]
                } else {
                    key.split(':').collect()
                };
                if parts.len() != pk.len() {
                    return Err((
                        "400 Bad Request",
                        format!("the key of {k}.{t} has {} components", pk.len()),
                    ));
                }
                let mut comps = Vec::new();
                for (c, p) in pk.iter().zip(parts) {
                    let v = c
                        .typ
                        .from_constant(&key_constant(&c.typ, p))
                        .map_err(|e| ("400 Bad Request", e.to_string()))?;
                    comps.push(v);
                }
                let token =
                    sibyl_types::murmur3::token(&sibyl_db::cells::make_partition_key(&comps));
                let ring = self.qp.proxy.ring.load();
                let eps: Vec<String> = ring
                    .replicas(token, &ks.replication.strategy)
                    .into_iter()
                    .map(|i| ring.endpoints[i].address.to_string())
                    .collect();
                Ok(json!({ "token": token, "endpoints": eps }))
            }
            ("POST", "/faults") => {
                let mut f = self.cluster.messaging.faults();
                let ips = |v: Option<&String>| -> Vec<std::net::IpAddr> {
                    v.map(|s| s.split(',').filter_map(|x| x.trim().parse().ok()).collect())
                        .unwrap_or_default()
                };
                for ip in ips(q.get("drop")) {
                    f.dropped_peers.insert(ip);
                }
                let ms = |k: &str| {
                    std::time::Duration::from_millis(
                        q.get(k).and_then(|v| v.parse().ok()).unwrap_or(0),
                    )
                };
                for ip in ips(q.get("delay")) {
                    f.delayed_peers.insert(ip, (ms("ms"), ms("jitter_ms")));
                }
                self.cluster.messaging.set_faults(f);
                Ok(json!({}))
            }
            ("POST", "/faults/clear") => {
                self.cluster.messaging.set_faults(Default::default());
                Ok(json!({}))
            }
            _ => Err((
                "404 Not Found",
                format!("unknown admin endpoint {method} {path}"),
            )),
        }
    }
}

fn cache_json(
    (entries, used, capacity): (usize, usize, u64),
    stats: &sibyl_storage::cache::CacheStats,
) -> serde_json::Value {
    json!({
        "entries": entries,
        "size": used,
        "capacity": capacity,
        "hits": stats.hits.load(Ordering::Relaxed),
        "requests": stats.requests.load(Ordering::Relaxed),
    })
}

/// Now, as nodetool repair stamps its lines.
fn local_timestamp() -> String {
    sibyl_types::utc_millis(sibyl_types::now_millis())
}

/// A histogram's 50th, 75th, 95th, 98th and 99th percentiles, minimum and
/// maximum: the rows of `nodetool tablehistograms` and `proxyhistograms`.
fn percentile_column(h: &sibyl_metrics::Histogram) -> Vec<u64> {
    let mut v: Vec<u64> = [50.0, 75.0, 95.0, 98.0, 99.0]
        .iter()
        .map(|p| h.percentile(*p))
        .collect();
    v.push(h.min());
    v.push(h.max());
    v
}
