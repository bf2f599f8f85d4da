//! The Rust `scylla` driver against a real `sibyl` process.

use futures::TryStreamExt;
use scylla::client::session::Session;
use scylla::client::session_builder::SessionBuilder;
use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

struct Node {
    child: Child,
    port: u16,
    _dir: tempfile::TempDir,
}

impl Drop for Node {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start_node() -> Node {
    let port = TcpListener::bind("127.0.0.1:0")
        .expect("bind")
        .local_addr()
        .expect("addr")
        .port();
    let admin_port = TcpListener::bind("127.0.0.1:0")
        .expect("bind")
        .local_addr()
        .expect("addr")
        .port();
    let storage_port = TcpListener::bind("127.0.0.1:0")
        .expect("bind")
        .local_addr()
        .expect("addr")
        .port();
    let dir = tempfile::tempdir().expect("tempdir");
    let cfg = dir.path().join("sibyl.yaml");
    std::fs::write(
        &cfg,
        format!(
            "native_transport_port: {port}\nadmin_port: {admin_port}\nstorage_port: {storage_port}\ndata_file_directories: [{d}/data]\ncommitlog_directory: {d}/commitlog\n",
            d = dir.path().display()
        ),
    )
    .expect("config");
    let child = Command::new(env!("CARGO_BIN_EXE_sibyl"))
        .arg("--config")
        .arg(&cfg)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn sibyl");
    let deadline = Instant::now() + Duration::from_secs(30);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < deadline, "sibyl did not start");
        std::thread::sleep(Duration::from_millis(50));
    }
    Node {
        child,
        port,
        _dir: dir,
    }
}

async fn session(port: u16) -> Session {
    SessionBuilder::new()
        .known_node(format!("127.0.0.1:{port}"))
        .build()
        .await
        .expect("connect")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scylla_driver_prepares_inserts_selects_and_pages() {
    let node = start_node();
    let s = session(node.port).await;
    s.query_unpaged("CREATE KEYSPACE rs WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}", &[])
        .await
        .expect("create keyspace");
    s.query_unpaged(
        "CREATE TABLE rs.t (k int, c int, v text, PRIMARY KEY (k, c))",
        &[],
    )
    .await
    .expect("create table");
    let ins = s
        .prepare("INSERT INTO rs.t (k, c, v) VALUES (?, ?, ?)")
        .await
        .expect("prepare");
    for c in 0..2500i32 {
        s.execute_unpaged(&ins, (c % 3, c, format!("v{c}")))
            .await
            .expect("insert");
    }
    let mut sel = s
        .prepare("SELECT c, v FROM rs.t WHERE k = ?")
        .await
        .expect("prepare select");
    sel.set_page_size(100);
    let rows: Vec<(i32, String)> = s
        .execute_iter(sel, (1i32,))
        .await
        .expect("iter")
        .rows_stream::<(i32, String)>()
        .expect("typed")
        .try_collect()
        .await
        .expect("rows");
    let expected: Vec<i32> = (0..2500).filter(|c| c % 3 == 1).collect();
    assert_eq!(rows.iter().map(|r| r.0).collect::<Vec<_>>(), expected);
    assert!(rows.iter().all(|(c, v)| v == &format!("v{c}")));
    // token-aware routing needs the driver to see the ring in system.local
    let r = s
        .query_unpaged("SELECT count(*) FROM rs.t", &[])
        .await
        .expect("count")
        .into_rows_result()
        .expect("rows");
    let (n,): (i64,) = r.single_row().expect("one row");
    assert_eq!(n, 2500);
    let err = s
        .query_unpaged("SELECT * FROM rs.t WHERE v = 'x'", &[])
        .await
        .expect_err("needs filtering");
    assert!(err.to_string().contains("ALLOW FILTERING"), "{err}");
}
