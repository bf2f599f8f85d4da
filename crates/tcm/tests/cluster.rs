//! Several metadata services in one process over an in-process transport.

// Test helpers outside #[test] functions unwrap too.
#![allow(clippy::unwrap_used)]

mod common;

use common::*;
use sibyl_tcm::{Epoch, TcmConfig, TcmError};
use std::time::{Duration, Instant};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_nodes_apply_concurrent_commits_in_the_same_order() {
    let net = Net::new();
    let root = tempfile::tempdir().unwrap();
    let nodes = three_nodes(&net, root.path(), config()).await;

    eventually("three voters", || {
        let m = nodes[0].svc.members();
        m.voters.keys().copied().collect::<Vec<_>>() == vec![1, 2, 3] && m.learners.is_empty()
    })
    .await;
    assert_eq!(nodes[0].svc.members().voters.get(&2), Some(&addr(2)));

    let mut tasks = tokio::task::JoinSet::new();
    for i in 0..20 {
        let svc = nodes[i % 3].svc.clone();
        tasks.spawn(async move { svc.commit(payload(format!("t{i}")), T).await });
    }
    let mut epochs = Vec::new();
    while let Some(r) = tasks.join_next().await {
        let (epoch, output) = r.unwrap().unwrap();
        assert_eq!(output, format!("ok {}", epoch.0).into_bytes());
        epochs.push(epoch.0);
    }
    epochs.sort();
    assert_eq!(epochs, (1..=20).collect::<Vec<_>>());

    let seq = converged(&[&nodes[0], &nodes[1], &nodes[2]], 20).await;
    let mut payloads: Vec<String> = seq
        .iter()
        .map(|a| String::from_utf8(a.1.clone()).unwrap())
        .collect();
    payloads.sort();
    let mut want: Vec<String> = (0..20).map(|i| format!("t{i}")).collect();
    want.sort();
    assert_eq!(payloads, want);

    // A rejected transformation uses its epoch on every node and reports why.
    match nodes[1].svc.commit(payload("reject me"), T).await {
        Err(TcmError::Rejected { epoch, message }) => {
            assert_eq!(epoch, Epoch(21));
            assert!(message.contains("on purpose"));
        }
        other => panic!("{other:?}"),
    }
    converged(&[&nodes[0], &nodes[1], &nodes[2]], 21).await;
    for n in nodes {
        n.stop(&net).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn minority_cannot_commit_and_catches_up_after_healing() {
    let net = Net::new();
    let root = tempfile::tempdir().unwrap();
    let nodes = three_nodes(&net, root.path(), config()).await;
    for (i, n) in nodes.iter().enumerate() {
        n.svc
            .commit(payload(format!("before{i}")), T)
            .await
            .unwrap();
    }

    // Cut the leader off: it is the minority.
    let (leader, _) = nodes[0].svc.leader().unwrap();
    let minority = nodes.iter().find(|n| n.id == leader).unwrap();
    let majority: Vec<&Node> = nodes.iter().filter(|n| n.id != leader).collect();
    net.isolate(&addr(leader));

    let timeout = Duration::from_millis(1500);
    let started = Instant::now();
    let err = minority
        .svc
        .commit(payload("lost"), timeout)
        .await
        .unwrap_err();
    let took = started.elapsed();
    assert!(took < timeout + Duration::from_secs(1), "took {took:?}");
    match &err {
        TcmError::NoQuorum {
            answered, voters, ..
        } => {
            assert_eq!((*answered, *voters), (1, 3));
        }
        other => panic!("{other:?}"),
    }
    let msg = err.to_string();
    assert!(
        msg.contains("a majority of the cluster metadata voters is unreachable")
            && msg.contains("1 of 3 voters answered"),
        "{msg}"
    );

    // The other two elect a leader and go on.
    let (epoch, _) = majority[0]
        .svc
        .commit(payload("majority"), T)
        .await
        .unwrap();
    assert_eq!(epoch, Epoch(4));
    assert_eq!(
        majority[1].svc.wait_for_epoch(Epoch(4), T).await.unwrap(),
        Epoch(4)
    );
    assert_eq!(minority.svc.epoch(), Epoch(3));

    net.heal();
    let seq = converged(&[&nodes[0], &nodes[1], &nodes[2]], 4).await;
    assert!(
        seq.iter().all(|a| a.1 != b"lost"),
        "the minority's entry must not survive"
    );
    // and it takes part again
    let (epoch, _) = minority.svc.commit(payload("after"), T).await.unwrap();
    assert_eq!(epoch, Epoch(5));
    converged(&[&nodes[0], &nodes[1], &nodes[2]], 5).await;
    for n in nodes {
        n.stop(&net).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restarted_node_catches_up_applying_each_entry_once() {
    // Small snapshots so the restart restores one and the leader may send one.
    let config = TcmConfig {
        snapshot_every_entries: 5,
        entries_kept_after_snapshot: 2,
        ..config()
    };
    let net = Net::new();
    let root = tempfile::tempdir().unwrap();
    let mut nodes = three_nodes(&net, root.path(), config.clone()).await;
    for i in 0..4 {
        nodes[i % 3]
            .svc
            .commit(payload(format!("a{i}")), T)
            .await
            .unwrap();
    }
    converged(&[&nodes[0], &nodes[1], &nodes[2]], 4).await;

    let n3 = nodes.pop().unwrap();
    let (dir, sm) = (n3.dir.clone(), n3.sm.clone());
    n3.stop(&net).await;
    for i in 0..12 {
        nodes[i % 2]
            .svc
            .commit(payload(format!("b{i}")), T)
            .await
            .unwrap();
    }

    // The same recorder: `open` must reset it through restore, then apply
    // each entry after the snapshot once.
    let n3 = Node::open(&net, &dir, 3, sm, config).await;
    assert!(
        n3.svc.epoch() >= Epoch(4),
        "restored and replayed its own log at open"
    );
    let seq = converged(&[&nodes[0], &nodes[1], &n3], 16).await;
    assert_eq!(seq.len(), 16);
    let restores = n3.sm.restores.lock().clone();
    assert_eq!(restores[0], 0, "the first open starts from the empty state");
    assert!(restores.len() >= 2);

    let (epoch, _) = n3.svc.commit(payload("from 3"), T).await.unwrap();
    assert_eq!(epoch, Epoch(17));
    converged(&[&nodes[0], &nodes[1], &n3], 17).await;
    n3.stop(&net).await;
    for n in nodes {
        n.stop(&net).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wiped_node_must_be_removed_before_it_rejoins_under_its_id() {
    let net = Net::new();
    let root = tempfile::tempdir().unwrap();
    let mut nodes = three_nodes(&net, root.path(), config()).await;
    for i in 0..2 {
        nodes[0]
            .svc
            .commit(payload(format!("x{i}")), T)
            .await
            .unwrap();
    }

    let n3 = nodes.pop().unwrap();
    let dir = n3.dir.clone();
    n3.stop(&net).await;
    std::fs::remove_dir_all(&dir).unwrap();

    // Same id, same address, empty directory.
    let n3 = Node::open(&net, &dir, 3, Recorder::new(), config()).await;
    let err = n3.svc.join(&addr(1), T).await.unwrap_err();
    assert!(
        matches!(err, TcmError::NodeIdInUse { node_id: 3, .. }),
        "{err:?}"
    );
    assert!(err.to_string().contains("remove_node(3)"), "{err}");
    // The leader's messages for the old member are refused: nothing applied.
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(n3.svc.epoch(), Epoch::EMPTY);
    assert!(n3.sm.applied().is_empty());

    nodes[1].svc.remove_node(3, T).await.unwrap();
    eventually("node 3 removed, one voter and one learner left", || {
        let m = nodes[0].svc.members();
        !m.voters.contains_key(&3)
            && !m.learners.contains_key(&3)
            && m.voters.len() == 1
            && m.learners.len() == 1
    })
    .await;

    n3.svc.join(&addr(1), T).await.unwrap();
    converged(&[&nodes[0], &nodes[1], &n3], 2).await;
    eventually("three voters again", || {
        nodes[0].svc.members().voters.len() == 3
    })
    .await;
    let (epoch, _) = n3.svc.commit(payload("back"), T).await.unwrap();
    assert_eq!(epoch, Epoch(3));
    converged(&[&nodes[0], &nodes[1], &n3], 3).await;
    n3.stop(&net).await;
    for n in nodes {
        n.stop(&net).await;
    }
}
