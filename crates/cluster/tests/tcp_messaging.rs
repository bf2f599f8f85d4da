//! The TCP messaging service between real sockets on 127.0.0.x: requests and
//! responses with their bodies, the handshake's refusals, outbound sockets
//! bound to the node's own address, operator faults, and a peer that starts
//! after the first message to it.

use bytes::Bytes;
use sibyl_cluster::messaging::{
    BoxFuture, MessagingError, MessagingService, ReplicaFailure, Request, Response, Verb,
    VerbHandler,
};
use sibyl_cluster::net::codec::{ConnectionType, Handshake, HandshakeReply};
use sibyl_cluster::net::{ComparatorLookup, MessagingConfig, NetFaults, TcpMessaging};
use sibyl_db::clustering::ClusteringComparator;
use sibyl_db::{
    Cell, ClusteringKey, ColumnData, DecoratedKey, Mutation, Partition, ReadCommand, ReadResponse,
    Row,
};
use sibyl_types::CqlType;
use std::net::IpAddr;
use std::sync::atomic::{AtomicU16, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

fn ip(i: u8) -> IpAddr {
    IpAddr::from([127, 0, 0, i])
}

/// A port of its own for each test (the tests of this file run at once).
fn port() -> u16 {
    static NEXT: AtomicU16 = AtomicU16::new(0);
    17400 + (std::process::id() % 50) as u16 * 20 + NEXT.fetch_add(1, Ordering::Relaxed)
}

const TABLE: uuid::Uuid = uuid::Uuid::from_u128(9);

fn cmp() -> Arc<ClusteringComparator> {
    ClusteringComparator::new(vec![(CqlType::Int, false)])
}

fn comparators() -> ComparatorLookup {
    let cmp = cmp();
    Arc::new(move |id| (id == TABLE).then(|| cmp.clone()))
}

fn row(v: &[u8]) -> Row {
    let mut row = Row::default();
    row.cells.insert(
        "v",
        ColumnData::Simple(Cell::live(5, Bytes::copy_from_slice(v))),
    );
    row
}

fn partition(v: &str) -> Partition {
    let mut p = Partition::new();
    p.rows.insert(
        ClusteringKey::row(vec![Bytes::from_static(&[0, 0, 0, 1])], cmp()),
        row(v.as_bytes()),
    );
    p
}

/// Answers reads with one partition naming the node, two mutations with
/// Done, metadata with its bytes reversed; remembers who asked.
struct Node {
    me: IpAddr,
    seen: parking_lot::Mutex<Vec<IpAddr>>,
}

impl VerbHandler for Node {
    fn handle(&self, from: IpAddr, request: Request) -> BoxFuture<Response> {
        self.seen.lock().push(from);
        let me = self.me;
        Box::pin(async move {
            match request {
                Request::Read(c) => Response::Read(ReadResponse::Data(vec![(
                    match c.kind {
                        sibyl_db::ReadKind::SinglePartition { key } => key,
                        _ => DecoratedKey::new(Bytes::from_static(b"range")),
                    },
                    partition(&me.to_string()),
                )])),
                Request::Mutation(ms) if ms.len() == 2 => Response::Done,
                Request::Metadata(b) => Response::Metadata(b.into_iter().rev().collect()),
                other => Response::Failure(ReplicaFailure::Error(format!("{:?}", other.verb()))),
            }
        })
    }
}

async fn node(i: u8, port: u16, cluster: &str) -> (TcpMessaging, Arc<Node>) {
    let m = TcpMessaging::bind(MessagingConfig::new(ip(i), port, cluster), comparators())
        .await
        .expect("bind");
    let h = Arc::new(Node {
        me: ip(i),
        seen: Default::default(),
    });
    m.set_handler(h.clone());
    (m, h)
}

const T: Duration = Duration::from_secs(2);

#[tokio::test]
async fn requests_carry_their_bodies_and_responses_come_back() {
    let p = port();
    let (a, _) = node(1, p, "c").await;
    let (_b, hb) = node(2, p, "c").await;
    let key = DecoratedKey::new(Bytes::from_static(b"k"));
    let r = a
        .send_and_receive(
            ip(2),
            Request::Read(ReadCommand::single(TABLE, key.clone(), 1)),
            T,
        )
        .await
        .expect("answer");
    let Response::Read(ReadResponse::Data(d)) = r else {
        panic!("{r:?}")
    };
    assert_eq!(d[0].0, key);
    let Some(ColumnData::Simple(c)) = d[0].1.rows.values().next().and_then(|r| r.cells.get("v"))
    else {
        panic!("no cell")
    };
    assert_eq!(c.value.as_deref(), Some(&b"127.0.0.2"[..]));
    // the receiver knows the sender by its address
    assert_eq!(hb.seen.lock().as_slice(), &[ip(1)]);

    let m = Mutation {
        table_id: TABLE,
        key: key.clone(),
        update: partition("x"),
    };
    let r = a
        .send_and_receive(ip(2), Request::Mutation(vec![m.clone(), m.clone()]), T)
        .await;
    assert!(matches!(r, Ok(Response::Done)), "{r:?}");
    // a large message takes the large connection and arrives whole
    let mut big = m.clone();
    big.update.rows.insert(
        ClusteringKey::row(vec![Bytes::from_static(&[0, 0, 0, 2])], cmp()),
        row(&vec![7u8; 300_000]),
    );
    let r = a
        .send_and_receive(ip(2), Request::Mutation(vec![big, m]), T)
        .await;
    assert!(matches!(r, Ok(Response::Done)), "{r:?}");
    // a table the receiver does not know: a failure naming it
    let unknown = uuid::Uuid::from_u128(1);
    let r = a
        .send_and_receive(
            ip(2),
            Request::Read(ReadCommand::single(unknown, key, 1)),
            T,
        )
        .await;
    assert!(
        matches!(r, Ok(Response::Failure(ReplicaFailure::UnknownTable(t))) if t == unknown),
        "{r:?}"
    );
    let r = a
        .send_and_receive(ip(2), Request::Metadata(vec![1, 2, 3]), T)
        .await;
    assert!(
        matches!(r, Ok(Response::Metadata(ref b)) if b == &[3, 2, 1]),
        "{r:?}"
    );

    // many requests at once, each answered with its own response
    let mut all = Vec::new();
    for i in 0..200u32 {
        let k = DecoratedKey::new(Bytes::copy_from_slice(&i.to_be_bytes()));
        all.push(a.send_and_receive(ip(2), Request::Read(ReadCommand::single(TABLE, k, 1)), T));
    }
    for (i, f) in all.into_iter().enumerate() {
        let Ok(Response::Read(ReadResponse::Data(d))) = f.await else {
            panic!("request {i} failed")
        };
        assert_eq!(d[0].0.key.as_ref(), &(i as u32).to_be_bytes());
    }
}

#[tokio::test]
async fn outbound_connections_come_from_the_nodes_own_address() {
    let p = port();
    let (a, _) = node(5, p, "c").await;
    // a bare listener stands in for node 6 and reads the handshake
    let l = tokio::net::TcpListener::bind((ip(6), p))
        .await
        .expect("bind");
    let sent = a.send_and_receive(
        ip(6),
        Request::Metadata(vec![1]),
        Duration::from_millis(500),
    );
    let accept = async {
        let (mut s, peer) = l.accept().await.expect("accept");
        let mut pre = [0u8; 6];
        s.read_exact(&mut pre).await.expect("prefix");
        let n = Handshake::body_len(pre).expect("magic");
        let mut body = vec![0; n];
        s.read_exact(&mut body).await.expect("body");
        (peer, Handshake::decode_body(&body).expect("handshake"))
    };
    let (_, (peer, hello)) = tokio::join!(sent, accept);
    assert_eq!(peer.ip(), ip(5));
    assert_eq!(hello.from, ip(5));
    assert_eq!(hello.cluster_name, "c");
    assert_eq!(hello.connection, ConnectionType::Urgent);
}

#[tokio::test]
async fn a_peer_of_another_cluster_or_messaging_version_is_refused() {
    let p = port();
    let (a, _) = node(7, p, "alpha").await;
    let (_b, hb) = node(8, p, "beta").await;
    let r = a
        .send_and_receive(
            ip(8),
            Request::Metadata(vec![1]),
            Duration::from_millis(500),
        )
        .await;
    assert!(
        matches!(&r, Err(MessagingError::Refused(a, why)) if *a == ip(8) && why.contains("cluster name 'alpha'")),
        "{r:?}"
    );
    assert!(hb.seen.lock().is_empty());
    assert!(a.dropped().get(&Verb::Metadata).copied().unwrap_or(0) >= 1);

    // a newer messaging version only: refused, with the reason
    let mut s = tokio::net::TcpStream::connect((ip(8), p))
        .await
        .expect("connect");
    let hello = Handshake {
        min_version: 9,
        max_version: 12,
        connection: ConnectionType::Small,
        from: ip(9),
        cluster_name: "beta".into(),
    };
    s.write_all(&hello.encode()).await.expect("write");
    let mut pre = [0u8; HandshakeReply::PREFIX_BYTES];
    s.read_exact(&mut pre).await.expect("reply");
    let (reply, n) = HandshakeReply::decode_prefix(pre).expect("reply");
    assert!(matches!(reply, HandshakeReply::Refused { .. }));
    let mut reason = vec![0; n];
    s.read_exact(&mut reason).await.expect("reason");
    let reason = String::from_utf8(reason).expect("utf-8");
    assert!(reason.contains("messaging versions 9..=12"), "{reason}");

    // not a Sibyl node at all: closed (or reset) without a reply
    let mut s = tokio::net::TcpStream::connect((ip(8), p))
        .await
        .expect("connect");
    s.write_all(b"GET / HTTP/1.1\r\n\r\n").await.expect("write");
    let mut buf = [0u8; 1];
    assert!(matches!(s.read(&mut buf).await, Ok(0) | Err(_)));
}

#[tokio::test]
async fn partitions_and_delays_from_the_operator_apply_both_ways() {
    let p = port();
    let (a, _) = node(10, p, "c").await;
    let (b, _) = node(11, p, "c").await;
    let req = || Request::Metadata(vec![1]);
    let short = Duration::from_millis(300);
    assert!(a.send_and_receive(ip(11), req(), short).await.is_ok());
    a.set_faults(NetFaults {
        dropped_peers: [ip(11)].into_iter().collect(),
        ..NetFaults::default()
    });
    assert!(matches!(
        a.send_and_receive(ip(11), req(), short).await,
        Err(MessagingError::Timeout(_))
    ));
    // nor does a answer b
    assert!(b.send_and_receive(ip(10), req(), short).await.is_err());
    assert!(a.dropped().get(&Verb::Metadata).copied().unwrap_or(0) >= 2);
    a.set_faults(NetFaults::default());
    assert!(b.send_and_receive(ip(10), req(), short).await.is_ok());
    // 200 ms each way at a: a round trip from b takes at least 400 ms
    a.set_faults(NetFaults {
        delayed_peers: [(ip(11), (Duration::from_millis(200), Duration::ZERO))]
            .into_iter()
            .collect(),
        ..NetFaults::default()
    });
    let t = std::time::Instant::now();
    assert!(b.send_and_receive(ip(10), req(), T).await.is_ok());
    assert!(
        t.elapsed() >= Duration::from_millis(400),
        "{:?}",
        t.elapsed()
    );
    assert!(b.send_and_receive(ip(10), req(), short).await.is_err());
}

#[tokio::test]
async fn a_peer_that_is_down_is_unreachable_until_it_starts() {
    let p = port();
    let (a, _) = node(12, p, "c").await;
    let r = a
        .send_and_receive(ip(13), Request::Metadata(vec![1]), T)
        .await;
    assert!(matches!(r, Err(MessagingError::Unreachable(_))), "{r:?}");
    let _b = node(13, p, "c").await;
    // after the backoff, a later message reconnects
    let mut ok = false;
    for _ in 0..60 {
        if a.send_and_receive(ip(13), Request::Metadata(vec![1]), T)
            .await
            .is_ok()
        {
            ok = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(ok, "never reconnected");
}
