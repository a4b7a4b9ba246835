//! Tests of the peer table: its rules in memory, the database it lives in,
//! the one-time import of `peers.json`, and concurrent changes.

use super::*;

fn fp(n: u8) -> SpkiFingerprint {
    cairn_protocol::spki_fingerprint(&[n; 10])
}

fn addr(s: &str) -> SocketAddr {
    s.parse().expect("addr")
}

/// A table in memory only (the rules, without the database).
fn memory() -> PeerTable {
    PeerTable {
        path: PathBuf::from("unused"),
        peers: Vec::new(),
    }
}

fn names_in(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .expect("ls")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

#[test]
fn missing_table_is_empty_and_changes_round_trip() {
    let dir = tempfile::tempdir().expect("tempdir");
    let t = PeerTable::load(dir.path()).expect("load empty");
    assert!(t.peers().is_empty());
    // Reading an absent table creates nothing.
    assert!(names_in(dir.path()).is_empty());
    assert_eq!(PeerTable::generation(dir.path()), None);
    let written = PeerTable::modify(dir.path(), |t| {
        t.upsert(Peer::new(
            &fp(1),
            "laptop",
            vec![addr("10.0.0.2:7878")],
            1000,
        ));
        t.upsert(Peer::new(&fp(2), "desktop", vec![], 2000));
        t.record_seen(&fp(1), addr("10.0.0.9:5000"), 3000);
        t.record_sync(&fp(1), 42, 3500);
        t.by_fingerprint_mut(&fp(2)).expect("desktop").scope = Some(vec!["/work/a".into()]);
        Ok(t.peers().to_vec())
    })
    .expect("modify");
    let back = PeerTable::load(dir.path()).expect("load");
    assert_eq!(back.peers(), written.as_slice());
    let laptop = back.by_fingerprint(&fp(1)).expect("laptop");
    assert_eq!(laptop.records_received, 42);
    assert_eq!(laptop.last_seen_ms, Some(3000));
    assert_eq!(laptop.last_sync_ms, Some(3500));
    assert_eq!(laptop.last_addr, Some(addr("10.0.0.9:5000")));
    assert_eq!(laptop.id(), Some(NodeId::from_fingerprint(&fp(1))));
    assert_eq!(back.peers()[1].scope, Some(vec!["/work/a".to_owned()]));
    assert_eq!(back.path(), PeerTable::path_in(dir.path()));
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        for name in names_in(dir.path()) {
            let mode = std::fs::metadata(dir.path().join(&name))
                .expect("stat")
                .permissions()
                .mode();
            assert_eq!(mode & 0o077, 0, "{name} is private");
        }
    }
    // Only the database (and SQLite's WAL files) is left behind.
    for name in names_in(dir.path()) {
        assert!(name.starts_with(PEERS_DB), "{name}");
    }
}

#[test]
fn generation_moves_on_a_change_and_not_on_a_no_op() {
    let dir = tempfile::tempdir().expect("tempdir");
    PeerTable::modify(dir.path(), |t| {
        t.upsert(Peer::new(&fp(1), "laptop", vec![], 1));
        Ok(())
    })
    .expect("add");
    let g1 = PeerTable::generation(dir.path()).expect("generation");
    PeerTable::modify(dir.path(), |t| {
        t.find("laptop")?;
        Ok(())
    })
    .expect("read only");
    assert_eq!(PeerTable::generation(dir.path()), Some(g1));
    PeerTable::modify(dir.path(), |t| t.remove("laptop")).expect("unpair");
    assert!(PeerTable::generation(dir.path()).expect("generation") > g1);
}

#[test]
fn a_failed_change_writes_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    PeerTable::modify(dir.path(), |t| {
        t.upsert(Peer::new(&fp(1), "laptop", vec![], 1));
        Ok(())
    })
    .expect("add");
    let err = PeerTable::modify(dir.path(), |t| {
        t.upsert(Peer::new(&fp(2), "desktop", vec![], 1));
        t.remove("nobody")
    });
    assert!(matches!(err, Err(PeersError::NotFound { .. })));
    assert_eq!(PeerTable::load(dir.path()).expect("load").peers().len(), 1);
}

#[test]
fn a_connection_from_a_new_address_on_the_listening_port_is_remembered() {
    let mut t = memory();
    t.upsert(Peer::new(&fp(1), "laptop", vec![addr("10.0.0.2:7878")], 1));
    // A one-off `cairn sync` from an ephemeral port: only last_addr.
    t.record_seen(&fp(1), addr("10.0.0.2:40001"), 2);
    assert_eq!(t.peers()[0].addresses, vec![addr("10.0.0.2:7878")]);
    assert_eq!(t.peers()[0].last_addr, Some(addr("10.0.0.2:40001")));
    // Its daemon, now on another network, dials from its listening port.
    t.record_seen(&fp(1), addr("192.168.7.5:7878"), 3);
    assert_eq!(
        t.peers()[0].addresses,
        vec![addr("192.168.7.5:7878"), addr("10.0.0.2:7878")]
    );
}

#[test]
fn host_names_survive_a_round_trip_and_merge_on_upsert() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut hub = Peer::new(&fp(3), "hub", vec![], 1);
    hub.hosts = vec!["hub.example.net:7878".to_owned()];
    PeerTable::modify(dir.path(), |t| {
        t.upsert(hub.clone());
        hub.hosts = vec!["hub.example.net:7878".to_owned(), "hub.lan:7878".to_owned()];
        t.upsert(hub);
        Ok(())
    })
    .expect("modify");
    let back = PeerTable::load(dir.path()).expect("load");
    assert_eq!(
        back.peers()[0].hosts,
        ["hub.example.net:7878", "hub.lan:7878"]
    );
}

#[test]
fn upsert_updates_the_same_key_and_keeps_counters() {
    let mut t = memory();
    t.upsert(Peer::new(&fp(1), "old", vec![addr("10.0.0.2:7878")], 1));
    t.record_sync(&fp(1), 5, 2);
    t.upsert(Peer::new(&fp(1), "new", vec![addr("10.0.0.3:7878")], 9));
    assert_eq!(t.peers().len(), 1);
    let p = &t.peers()[0];
    assert_eq!(p.name, "new");
    assert_eq!(p.paired_at_ms, 1);
    assert_eq!(p.records_received, 5);
    assert_eq!(
        p.addresses,
        vec![addr("10.0.0.3:7878"), addr("10.0.0.2:7878")]
    );
}

#[test]
fn find_by_name_or_id_prefix_and_unpair_removes_from_allow_list() {
    let dir = tempfile::tempdir().expect("tempdir");
    let t = PeerTable::modify(dir.path(), |t| {
        t.upsert(Peer::new(&fp(1), "laptop", vec![], 1));
        t.upsert(Peer::new(&fp(2), "desktop", vec![], 1));
        Ok(t.clone())
    })
    .expect("pair");
    let id = t.peers()[1].node_id.to_string();
    assert_eq!(t.find("LAPTOP").expect("by name").name, "laptop");
    assert_eq!(t.find(&id[..6]).expect("by prefix").name, "desktop");
    let short = t.peers()[1].short_id();
    assert_eq!(t.find(&short).expect("by short id").name, "desktop");
    assert!(matches!(t.find("ab"), Err(PeersError::NotFound { .. })));
    assert!(matches!(t.find("nobody"), Err(PeersError::NotFound { .. })));
    assert!(t.allowed_fingerprints().contains(&fp(1)));
    let gone = PeerTable::modify(dir.path(), |t| t.remove("laptop")).expect("remove");
    assert_eq!(gone.name, "laptop");
    let back = PeerTable::load(dir.path()).expect("load");
    assert_eq!(back.allowed_fingerprints(), HashSet::from([fp(2)]));
}

#[test]
fn ambiguous_name_is_refused() {
    let mut t = memory();
    t.upsert(Peer::new(&fp(1), "box", vec![], 1));
    t.upsert(Peer::new(&fp(2), "box", vec![], 1));
    assert!(matches!(
        t.remove("box"),
        Err(PeersError::Ambiguous { count: 2, .. })
    ));
    assert_eq!(t.peers().len(), 2);
}

fn legacy_json(peers: &[Peer]) -> String {
    serde_json::json!({"version": 1, "peers": peers}).to_string()
}

#[test]
fn peers_json_is_imported_once_and_renamed() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut laptop = Peer::new(&fp(1), "laptop", vec![addr("10.0.0.2:7878")], 1000);
    laptop.records_received = 7;
    laptop.scope = Some(vec!["/work/a".into()]);
    laptop.hosts = vec!["laptop.lan:7878".into()];
    let desktop = Peer::new(&fp(2), "desktop", vec![], 2000);
    let json = legacy_json(&[laptop.clone(), desktop.clone()]);
    std::fs::write(dir.path().join(PEERS_FILE), &json).expect("write peers.json");

    let t = PeerTable::load(dir.path()).expect("load imports");
    assert_eq!(t.peers(), [laptop.clone(), desktop.clone()]);
    assert!(!dir.path().join(PEERS_FILE).exists());
    assert_eq!(
        std::fs::read_to_string(dir.path().join(PEERS_FILE_MIGRATED)).expect("kept aside"),
        json
    );

    // Unpair one; a peers.json that reappears (an older cairn run beside
    // this one, or the renamed file put back) is not imported again, so
    // the unpaired peer does not come back.
    PeerTable::modify(dir.path(), |t| t.remove("desktop")).expect("unpair");
    std::fs::write(dir.path().join(PEERS_FILE), &json).expect("write again");
    let t = PeerTable::load(dir.path()).expect("load");
    assert_eq!(t.peers(), [laptop]);
}

#[test]
fn an_unreadable_peers_json_is_an_error_every_time_and_imports_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join(PEERS_FILE);
    std::fs::write(&path, "{not json").expect("write");
    for _ in 0..2 {
        assert!(matches!(
            PeerTable::load(dir.path()),
            Err(PeersError::Parse { .. })
        ));
    }
    assert!(path.exists(), "left for the user to fix");
    std::fs::write(&path, r#"{"version": 99, "peers": []}"#).expect("write");
    assert!(matches!(
        PeerTable::load(dir.path()),
        Err(PeersError::Version { version: 99, .. })
    ));
    // A node id that does not belong to the fingerprint.
    let mut p = Peer::new(&fp(1), "x", vec![], 1);
    p.node_id = NodeId::from_fingerprint(&fp(2));
    std::fs::write(&path, legacy_json(&[p])).expect("write");
    assert!(matches!(
        PeerTable::load(dir.path()),
        Err(PeersError::BadEntry { index: 0, .. })
    ));
    let big = vec![b' '; (MAX_FILE_BYTES + 10) as usize];
    std::fs::write(&path, big).expect("write");
    assert!(matches!(
        PeerTable::load(dir.path()),
        Err(PeersError::TooLarge { .. })
    ));
    // Fixed: imported at last.
    std::fs::write(&path, legacy_json(&[Peer::new(&fp(1), "x", vec![], 1)])).expect("write");
    assert_eq!(PeerTable::load(dir.path()).expect("load").peers().len(), 1);
}

#[test]
fn a_tampered_or_newer_database_is_an_error() {
    let dir = tempfile::tempdir().expect("tempdir");
    PeerTable::modify(dir.path(), |t| {
        t.upsert(Peer::new(&fp(1), "laptop", vec![], 1));
        Ok(())
    })
    .expect("add");
    let conn = Connection::open(PeerTable::path_in(dir.path())).expect("open");
    conn.execute(
        "UPDATE peers SET node_id = ?1",
        [NodeId::from_fingerprint(&fp(2)).to_string()],
    )
    .expect("tamper");
    assert!(matches!(
        PeerTable::load(dir.path()),
        Err(PeersError::BadEntry { index: 0, .. })
    ));
    conn.execute(
        "UPDATE peers SET node_id = ?1, addresses = 'nope'",
        [NodeId::from_fingerprint(&fp(1)).to_string()],
    )
    .expect("tamper");
    assert!(matches!(
        PeerTable::load(dir.path()),
        Err(PeersError::BadEntry { index: 0, .. })
    ));
    conn.pragma_update(None, "user_version", 99)
        .expect("version");
    assert!(matches!(
        PeerTable::load(dir.path()),
        Err(PeersError::Version { version: 99, .. })
    ));
}

#[test]
fn concurrent_changes_from_many_threads_all_survive() {
    const THREADS: u8 = 8;
    const ROUNDS: u64 = 15;
    let dir = tempfile::tempdir().expect("tempdir");
    let home = dir.path().to_path_buf();
    // One shared peer every thread counts on, as sessions do.
    PeerTable::modify(&home, |t| {
        t.upsert(Peer::new(&fp(200), "hub", vec![], 1));
        Ok(())
    })
    .expect("hub");
    let barrier = std::sync::Arc::new(std::sync::Barrier::new(usize::from(THREADS)));
    let workers: Vec<_> = (0..THREADS)
        .map(|n| {
            let home = home.clone();
            let barrier = std::sync::Arc::clone(&barrier);
            std::thread::spawn(move || {
                barrier.wait();
                // A pairing, as `cairn pair` does ...
                PeerTable::modify(&home, |t| {
                    t.upsert(Peer::new(&fp(n), &format!("m{n}"), vec![], 1));
                    Ok(())
                })
                .expect("pair");
                for r in 0..ROUNDS {
                    // ... session bookkeeping, as the daemon does ...
                    PeerTable::modify(&home, |t| {
                        t.record_sync(&fp(200), 1, i64::try_from(r).expect("small"));
                        Ok(())
                    })
                    .expect("count");
                    // ... and a scope change, as `cairn scope` does.
                    PeerTable::modify(&home, |t| {
                        let p = t.by_fingerprint_mut(&fp(n)).expect("own peer");
                        p.scope
                            .get_or_insert_with(Vec::new)
                            .push(format!("/work/{r}"));
                        Ok(())
                    })
                    .expect("scope");
                }
            })
        })
        .collect();
    for w in workers {
        w.join().expect("worker");
    }
    let t = PeerTable::load(&home).expect("load");
    assert_eq!(t.peers().len(), usize::from(THREADS) + 1);
    let hub = t.by_fingerprint(&fp(200)).expect("hub");
    assert_eq!(hub.records_received, u64::from(THREADS) * ROUNDS);
    for n in 0..THREADS {
        let p = t.by_fingerprint(&fp(n)).expect("paired");
        assert_eq!(p.scope.as_ref().map(Vec::len), Some(ROUNDS as usize));
    }
}

#[test]
fn a_peers_json_written_by_an_older_cairn_is_read_as_text_ids() {
    let dir = tempfile::tempdir().expect("tempdir");
    let f = fp(9);
    let text = format!(
        r#"{{"version": 1, "peers": [{{"node_id": "{}", "name": "old", "fingerprint": "{}",
            "addresses": ["10.0.0.2:7878"], "paired_at_ms": 5}}]}}"#,
        NodeId::from_fingerprint(&f),
        crate::hex::encode(&f)
    );
    std::fs::write(dir.path().join(PEERS_FILE), text).expect("write");
    let t = PeerTable::load(dir.path()).expect("load");
    let p = t.by_fingerprint(&f).expect("imported");
    assert_eq!(p.node_id, NodeId::from_fingerprint(&f));
    assert_eq!(p.addresses, vec![addr("10.0.0.2:7878")]);
    // And the JSON form of a peer keeps the ids as text.
    let v = serde_json::to_value(p).expect("json");
    assert_eq!(v["node_id"], NodeId::from_fingerprint(&f).to_string());
    assert_eq!(v["fingerprint"], crate::hex::encode(&f));
}
