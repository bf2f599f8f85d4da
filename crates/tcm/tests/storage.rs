//! The metadata directory on disk: damage is reported, torn tails repaired,
//! identities kept.

// Test helpers outside #[test] functions unwrap too.
#![allow(clippy::unwrap_used)]

mod common;

use common::*;
use sibyl_tcm::{ClusterMetadataService, Epoch, TcmError};
use std::path::Path;

/// The start offsets of the records of a file (length, length checksum,
/// body, body checksum).
fn record_offsets(bytes: &[u8]) -> Vec<usize> {
    let mut out = Vec::new();
    let mut pos = 0;
    while pos + 8 <= bytes.len() {
        out.push(pos);
        let len = u32::from_be_bytes(bytes[pos..pos + 4].try_into().unwrap()) as usize;
        pos += 8 + len + 4;
    }
    assert_eq!(
        pos,
        bytes.len(),
        "test fixture: the log should end on a record boundary"
    );
    out
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        std::fs::copy(e.path(), to.join(e.file_name())).unwrap();
    }
}

/// A single-node cluster with five transformations, stopped; returns its directory.
async fn five_entries(root: &Path) -> std::path::PathBuf {
    let net = Net::new();
    let dir = root.join("orig");
    let n = Node::open(&net, &dir, 1, Recorder::new(), config()).await;
    n.svc.initialize_single().await.unwrap();
    for i in 0..5 {
        n.svc.commit(payload(format!("e{i}")), T).await.unwrap();
    }
    n.stop(&net).await;
    dir
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn corrupt_record_in_the_middle_of_the_log_is_reported_with_file_and_offset() {
    let root = tempfile::tempdir().unwrap();
    let orig = five_entries(root.path()).await;
    let dir = root.path().join("corrupt");
    copy_dir(&orig, &dir);
    let log = dir.join("log");
    let mut bytes = std::fs::read(&log).unwrap();
    let offsets = record_offsets(&bytes);
    assert!(offsets.len() > 4);
    let damaged = offsets[2];
    bytes[damaged + 8 + 5] ^= 0x20; // inside the body of the third record
    std::fs::write(&log, &bytes).unwrap();

    let net = Net::new();
    let err = ClusterMetadataService::open(
        &dir,
        1,
        addr(1),
        net.link(addr(1)),
        Recorder::new(),
        config(),
    )
    .await
    .unwrap_err();
    match &err {
        TcmError::Corrupt { path, offset, .. } => {
            assert_eq!(path, &log);
            assert_eq!(*offset, damaged as u64);
        }
        other => panic!("{other:?}"),
    }
    let msg = err.to_string();
    assert!(
        msg.contains(&log.display().to_string()) && msg.contains(&format!("offset {damaged}")),
        "{msg}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn torn_last_record_is_cut_off_and_the_node_goes_on() {
    let root = tempfile::tempdir().unwrap();
    let orig = five_entries(root.path()).await;
    let bytes = std::fs::read(orig.join("log")).unwrap();
    let offsets = record_offsets(&bytes);
    let last = *offsets.last().unwrap();

    // 1. A record half written after the last one (a crash during an append
    //    that was never acknowledged): nothing is lost.
    let dir = root.path().join("half-appended");
    copy_dir(&orig, &dir);
    let mut torn = bytes.clone();
    torn.extend_from_slice(&bytes[last..last + (bytes.len() - last) / 2]);
    std::fs::write(dir.join("log"), &torn).unwrap();
    let net = Net::new();
    let n = Node::open(&net, &dir, 1, Recorder::new(), config()).await;
    n.svc.wait_for_epoch(Epoch(5), T).await.unwrap();
    let (epoch, _) = n.svc.commit(payload("next"), T).await.unwrap();
    assert_eq!(epoch, Epoch(6));
    let applied: Vec<u64> = n.sm.applied().iter().map(|a| a.0).collect();
    assert_eq!(applied, vec![1, 2, 3, 4, 5, 6]);
    n.stop(&net).await;
    // The torn bytes are gone: the old records, then whole new ones.
    let now = std::fs::read(dir.join("log")).unwrap();
    assert_eq!(&now[..bytes.len()], &bytes[..]);
    record_offsets(&now);

    // 2. The last record itself cut in half: it goes, the rest opens.
    let dir = root.path().join("cut");
    copy_dir(&orig, &dir);
    std::fs::write(dir.join("log"), &bytes[..last + (bytes.len() - last) / 2]).unwrap();
    let net = Net::new();
    let n = Node::open(&net, &dir, 1, Recorder::new(), config()).await;
    let (epoch, _) = n.svc.commit(payload("next"), T).await.unwrap();
    assert!(epoch >= Epoch(5), "{epoch}");
    assert!(n.sm.violations.lock().is_empty());
    n.stop(&net).await;
    let now = std::fs::read(dir.join("log")).unwrap();
    assert_eq!(&now[..last], &bytes[..last]);
    record_offsets(&now);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn directory_of_another_node_id_is_refused() {
    let root = tempfile::tempdir().unwrap();
    let orig = five_entries(root.path()).await;
    let net = Net::new();
    let err = ClusterMetadataService::open(
        &orig,
        9,
        addr(9),
        net.link(addr(9)),
        Recorder::new(),
        config(),
    )
    .await
    .unwrap_err();
    assert!(
        matches!(
            err,
            TcmError::NodeIdMismatch {
                stored: 1,
                given: 9,
                ..
            }
        ),
        "{err:?}"
    );

    // A corrupt vote file is named too.
    let dir = root.path().join("bad-vote");
    copy_dir(&orig, &dir);
    let mut vote = std::fs::read(dir.join("vote")).unwrap();
    let n = vote.len();
    vote[n - 6] ^= 1;
    std::fs::write(dir.join("vote"), &vote).unwrap();
    let err = ClusterMetadataService::open(
        &dir,
        1,
        addr(1),
        net.link(addr(1)),
        Recorder::new(),
        config(),
    )
    .await
    .unwrap_err();
    assert!(
        matches!(&err, TcmError::Corrupt { path, .. } if path.ends_with("vote")),
        "{err:?}"
    );
}
