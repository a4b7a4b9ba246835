//! Sync sessions between in-process nodes in temp homes, over real QUIC on
//! 127.0.0.1: each node has its own database, key, peer table and a
//! listening endpoint whose accept loop runs `serve_connection`. Pairing is
//! written into the peer tables with the nodes' real key fingerprints.

use std::collections::HashSet;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use cairn_protocol::{FrameDecoder, Message, NodeId, SpkiFingerprint};
use tempfile::TempDir;
use tokio::sync::mpsc;

use super::*;
use crate::config::{Config, Env};
use crate::node::{ForgetRequest, Node};
use crate::search::SearchOptions;
use crate::sync::endpoint::{Blame, Role, open_session};
use crate::sync::peers::{Peer, PeerTable};
use crate::sync::tls::AllowList;

const SECRET: &str = "AKIAUJZDE8GXD6NCF10E";
const DEADLINE: Duration = Duration::from_secs(30);

type Outcome = Result<SessionReport, (Blame, String)>;

struct TestNode {
    dir: TempDir,
    name: String,
    node: SharedNode,
    fp: SpkiFingerprint,
    allowed: Arc<RwLock<HashSet<SpkiFingerprint>>>,
    endpoint: Arc<Endpoint>,
    hello: Hello,
    server: tokio::task::JoinHandle<()>,
    outcomes: mpsc::UnboundedReceiver<Outcome>,
}

fn config(dir: &Path, name: &str) -> Config {
    let env = Env {
        home: Some(dir.to_path_buf()),
        hostname: Some(name.to_owned()),
        ..Env::default()
    };
    Config::resolve(&env, None).expect("resolve config")
}

impl TestNode {
    /// A node with default settings, except that it syncs whatever the
    /// free space of the test machine's disk (the floor is tested in
    /// `sync::quota`).
    fn new(name: &str) -> TestNode {
        TestNode::with_config(name, "[sync.limits]\nmin_free_bytes = 0\n")
    }

    /// A node whose config file (`~/.config/cairn/config.toml`) says `toml`.
    fn with_config(name: &str, toml: &str) -> TestNode {
        let dir = tempfile::tempdir().expect("temp dir");
        let cfg = dir.path().join(".config/cairn");
        std::fs::create_dir_all(&cfg).expect("mkdir");
        std::fs::write(cfg.join("config.toml"), toml).expect("write config");
        TestNode::start(dir, name)
    }

    /// Opens (or reopens) the node in `dir` and starts its accept loop.
    fn start(dir: TempDir, name: &str) -> TestNode {
        let node = Node::open(config(dir.path(), name)).expect("open node");
        let fp = cairn_protocol::spki_fingerprint(&rcgen::PublicKeyData::subject_public_key_info(
            node.identity().key(),
        ));
        let hello = local_hello(&node, new_instance()).expect("hello");
        let home = node.config().home.clone();
        let allowed = Arc::new(RwLock::new(
            PeerTable::load(&home)
                .expect("peers")
                .allowed_fingerprints(),
        ));
        let endpoint = Arc::new(
            Endpoint::bind(
                SocketAddr::from(([127, 0, 0, 1], 0)),
                node.identity().key(),
                Role::Sync(AllowList::shared(Arc::clone(&allowed))),
            )
            .expect("bind"),
        );
        let node: SharedNode = Arc::new(Mutex::new(node));
        let (tx, outcomes) = mpsc::unbounded_channel();
        let server = {
            let (ep, node, hello) = (Arc::clone(&endpoint), Arc::clone(&node), hello.clone());
            tokio::spawn(async move {
                while let Some(incoming) = ep.accept().await {
                    let Ok(conn) = incoming else { continue };
                    let (node, hello, home, tx) =
                        (Arc::clone(&node), hello.clone(), home.clone(), tx.clone());
                    tokio::spawn(async move {
                        let r = serve_connection(conn, &node, &home, &hello, &cfg()).await;
                        let _ = tx.send(r.map_err(|e| (e.blame(), format!("{e:#}"))));
                    });
                }
            })
        };
        TestNode {
            dir,
            name: name.to_owned(),
            node,
            fp,
            allowed,
            endpoint,
            hello,
            server,
            outcomes,
        }
    }

    /// Stops the node and opens it again from its home (new port).
    fn restart(self) -> TestNode {
        let TestNode {
            dir,
            name,
            node,
            endpoint,
            server,
            ..
        } = self;
        server.abort();
        endpoint.close();
        drop(node);
        TestNode::start(dir, &name)
    }

    fn home(&self) -> PathBuf {
        self.dir.path().join(".local/share/cairn")
    }

    fn addr(&self) -> SocketAddr {
        self.endpoint.local_addr().expect("local addr")
    }

    fn id(&self) -> String {
        self.lock().identity().id().to_string()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Node> {
        self.node.lock().expect("node lock")
    }

    /// Writes notes straight into the notes file and indexes them.
    fn notes(&self, project: &str, texts: &[String]) {
        let path = self.lock().config().locations.notes_file.clone();
        std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
        let mut body = String::new();
        for (i, t) in texts.iter().enumerate() {
            let line = serde_json::json!({
                "time_ms": 1_767_225_600_000i64 + i as i64,
                "project": project,
                "text": t,
            });
            body.push_str(&line.to_string());
            body.push('\n');
        }
        use std::io::Write;
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .expect("open notes");
        f.write_all(body.as_bytes()).expect("write notes");
        self.lock()
            .index(crate::node::IndexRequest::new(now_ms()))
            .expect("index");
    }

    fn count(&self, sql: &str) -> i64 {
        let db = self.lock().config().db_path.clone();
        let conn = rusqlite::Connection::open(db).expect("open db");
        conn.query_row(sql, [], |r| r.get(0)).expect("count")
    }

    fn records(&self) -> i64 {
        self.count("SELECT count(*) FROM records")
    }

    fn search(&self, q: &str) -> Vec<crate::search::Hit> {
        let opts = SearchOptions {
            limit: 50,
            ..SearchOptions::default()
        };
        self.lock().search(q, &opts).expect("search")
    }

    fn peer_entry(&self, other: &TestNode) -> Peer {
        PeerTable::load(&self.home())
            .expect("peers")
            .by_fingerprint(&other.fp)
            .expect("paired")
            .clone()
    }

    /// One sync round dialed from `self` to `other`.
    async fn sync(&self, other: &TestNode) -> Result<SessionReport, SyncError> {
        let peer = self.peer_entry(other);
        sync_peer(
            &self.endpoint,
            &self.node,
            &self.home(),
            &peer,
            &self.hello,
            &cfg(),
        )
        .await
    }

    async fn sync_ok(&self, other: &mut TestNode) -> SessionReport {
        let r = self.sync(other).await;
        let r = match r {
            Ok(r) => r,
            Err(e) => panic!(
                "sync round: {e:?}; listener: {:?}",
                other.next_outcome().await
            ),
        };
        // The listener's side of the same session also ended well.
        let theirs = other.next_outcome().await;
        assert!(theirs.is_ok(), "listener side: {theirs:?}");
        r
    }

    /// The next session outcome of this node's accept loop (deadline-bounded).
    async fn next_outcome(&mut self) -> Outcome {
        tokio::time::timeout(DEADLINE, self.outcomes.recv())
            .await
            .expect("a session outcome within the deadline")
            .expect("accept loop alive")
    }
}

fn cfg() -> SessionConfig {
    SessionConfig {
        msg_timeout: Duration::from_secs(20),
        max_duration: Duration::from_secs(120),
        ..SessionConfig::default()
    }
}

/// Writes `a` and `b` into each other's peer tables and allow-lists.
fn pair(a: &TestNode, b: &TestNode) {
    for (x, y) in [(a, b), (b, a)] {
        let peer = Peer::new(&y.fp, &y.name, vec![y.addr()], now_ms());
        PeerTable::modify(&x.home(), |t| {
            t.upsert(peer);
            Ok(())
        })
        .expect("write peer table");
        x.allowed.write().expect("allow lock").insert(y.fp);
    }
}

fn texts(word: &str, n: usize) -> Vec<String> {
    (0..n)
        .map(|i| format!("{word} decision number {i}"))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_nodes_exchange_both_ways_and_hits_name_the_origin() {
    let (mut a, mut b) = (TestNode::new("alpha"), TestNode::new("beta"));
    pair(&a, &b);
    a.notes("/work/shop", &texts("quokka", 5));
    b.notes("/work/shop", &texts("wombat", 3));

    let r = a.sync_ok(&mut b).await;
    assert_eq!(r.records_received, 3, "{r:?}");
    assert_eq!(r.records_sent, 5, "{r:?}");
    assert_eq!(r.behind_before, r.records_received);
    assert_eq!(r.behind_after, 0);

    let hits = b.search("quokka");
    assert!(!hits.is_empty(), "A's session is searchable on B");
    assert!(hits.iter().all(|h| h.machine == "alpha"), "{hits:?}");
    let hits = a.search("wombat");
    assert!(!hits.is_empty() && hits.iter().all(|h| h.machine == "beta"));
    assert_eq!(a.records(), 8);
    assert_eq!(b.records(), 8);
    // Received records get meaning vectors computed where they land
    // (vectors are not part of the wire format).
    let vectors = |n: &TestNode| {
        let c = n.lock().store().vector_counts().expect("counts");
        (c.with_vector, c.pending)
    };
    assert_eq!((vectors(&a), vectors(&b)), ((8, 0), (8, 0)));
    // Kept once, in the flat file that searches scan.
    let in_table = "SELECT count(*) FROM vectors";
    assert_eq!((a.count(in_table), b.count(in_table)), (0, 0));

    // Nothing new: one watermark exchange, no pulls, no batches either way.
    let again = a.sync_ok(&mut b).await;
    assert!(!again.moved_anything(), "{again:?}");
    let again = b.sync_ok(&mut a).await;
    assert!(!again.moved_anything(), "{again:?}");

    // The peer tables note the rounds.
    let pa = a.peer_entry(&b);
    assert!(pa.last_sync_ms.is_some() && pa.last_seen_ms.is_some());
    assert_eq!(pa.records_received, 3);
    assert_eq!(behind(a.lock().store(), &b.id()), Some(0));
    let pb = b.peer_entry(&a);
    assert_eq!(pb.records_received, 5);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn line_then_triangle_relays_without_duplicates_or_echo() {
    let (mut a, mut b, mut c) = (
        TestNode::new("alpha"),
        TestNode::new("beta"),
        TestNode::new("gamma"),
    );
    pair(&a, &b);
    pair(&b, &c);
    a.notes("/p", &texts("aardvark", 10));
    b.notes("/p", &texts("badger", 4));
    c.notes("/p", &texts("caracal", 6));

    // Line A - B - C: no A - C link.
    a.sync_ok(&mut b).await;
    let bc = b.sync_ok(&mut c).await;
    assert_eq!(
        bc.records_sent, 14,
        "B relays A's records and its own: {bc:?}"
    );
    assert_eq!(bc.records_received, 6);
    let hits = c.search("aardvark");
    // A's name travelled with B's watermarks: C shows it, not A's id.
    assert!(
        !hits.is_empty() && hits.iter().all(|h| h.machine == a.name),
        "{hits:?}"
    );
    // A learns C's records through B; only C's log is new to A.
    let ab = a.sync_ok(&mut b).await;
    assert_eq!(ab.records_received, 6, "{ab:?}");
    assert_eq!(ab.records_sent, 0, "nothing echoes back to A: {ab:?}");
    for n in [&a, &b, &c] {
        assert_eq!(n.records(), 20, "{}", n.name);
        assert_eq!(n.count("SELECT count(DISTINCT hash) FROM records"), 20);
    }

    // Close the triangle; every pair is already in step.
    pair(&a, &c);
    for (x, y) in [(0, 1), (1, 2), (2, 0), (1, 0), (2, 1), (0, 2)] {
        let mut nodes = [&mut a, &mut b, &mut c];
        let (from, to) = two(&mut nodes, x, y);
        let r = from.sync_ok(to).await;
        assert!(!r.moved_anything(), "{} -> {}: {r:?}", from.name, to.name);
    }
    // New records on C reach A directly and B by either path, stored once.
    c.notes("/p", &texts("cheetah", 7));
    c.sync_ok(&mut a).await;
    a.sync_ok(&mut b).await;
    let cb = c.sync_ok(&mut b).await;
    assert_eq!(cb.records_received + cb.records_sent, 0, "{cb:?}");
    for n in [&a, &b, &c] {
        assert_eq!(n.records(), 27, "{}", n.name);
        assert_eq!(n.count("SELECT count(DISTINCT hash) FROM records"), 27);
    }
}

fn two<'a>(
    nodes: &'a mut [&mut TestNode; 3],
    x: usize,
    y: usize,
) -> (&'a TestNode, &'a mut TestNode) {
    assert_ne!(x, y);
    let (lo, hi) = nodes.split_at_mut(x.max(y));
    if x < y {
        (&*lo[x], &mut *hi[0])
    } else {
        (&*hi[0], &mut *lo[y])
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn restart_keeps_state_and_a_second_round_moves_nothing() {
    let (a, mut b) = (TestNode::new("alpha"), TestNode::new("beta"));
    pair(&a, &b);
    a.notes("/p", &texts("ibis", 12));
    a.sync_ok(&mut b).await;
    let before = b.lock().watermarks().expect("wm");

    let mut b = b.restart();
    pair(&a, &b); // new port: the tables learn the new address
    assert_eq!(b.lock().watermarks().expect("wm"), before);
    assert_eq!(b.records(), 12);
    let r = a.sync_ok(&mut b).await;
    assert!(!r.moved_anything(), "{r:?}");
    let mut a = a.restart();
    pair(&a, &b);
    let r = b.sync_ok(&mut a).await;
    assert!(!r.moved_anything(), "{r:?}");
    assert_eq!(b.search("ibis").len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn offline_node_catches_up_on_10k_records() {
    let (mut a, mut b) = (TestNode::new("alpha"), TestNode::new("beta"));
    pair(&a, &b);
    a.notes("/p", &texts("first", 1));
    a.sync_ok(&mut b).await;
    // B goes away while A indexes 10,000 records.
    let b_dir = {
        let TestNode {
            dir,
            server,
            endpoint,
            node,
            ..
        } = b;
        server.abort();
        endpoint.close();
        drop(node);
        dir
    };
    let big: Vec<String> = (0..10_000)
        .map(|i| format!("backlog entry {i} {}", "lorem ipsum ".repeat(20)))
        .collect();
    a.notes("/big", &big);
    assert_eq!(a.records(), 10_001);

    let b = TestNode::start(b_dir, "beta");
    pair(&a, &b);
    let r = b.sync_ok(&mut a).await;
    assert_eq!(r.records_received, 10_000, "{r:?}");
    assert!(r.batches_received >= 10, "bounded batches: {r:?}");
    assert_eq!(b.records(), 10_001);
    assert_eq!(b.count("SELECT count(DISTINCT hash) FROM records"), 10_001);
    assert!(!b.search("backlog").is_empty());
    // A large catch-up (`store::catch_up`) leaves nothing for later: the
    // records' hash index built again, every vector computed.
    assert_eq!(
        b.count("SELECT count(*) FROM sqlite_master WHERE name = 'records_hash8'"),
        1
    );
    assert_eq!(
        b.count("SELECT count(*) FROM meta WHERE key = 'records_hash8_deferred'"),
        0
    );
    let (_, vectors) = b.lock().semantic_status().expect("vectors");
    assert_eq!(vectors.pending, 0, "{vectors:?}");
    assert_eq!(vectors.with_vector, 10_001);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn unpaired_node_is_refused_and_receives_nothing() {
    let (a, mut b) = (TestNode::new("alpha"), TestNode::new("beta"));
    pair(&a, &b);
    b.notes("/p", &texts("secretive", 4));
    let stranger = TestNode::new("mallory");
    // The stranger knows B's address and key, but B never paired with it.
    let peer = Peer::new(&b.fp, "beta", vec![b.addr()], now_ms());
    PeerTable::modify(&stranger.home(), |t| {
        t.upsert(peer);
        Ok(())
    })
    .expect("stranger's table");
    let err = stranger.sync(&b).await.expect_err("refused");
    assert!(
        matches!(
            err,
            SyncError::Refused { .. } | SyncError::Unreachable { .. } | SyncError::Session(_)
        ),
        "{err:?}"
    );
    assert_eq!(stranger.records(), 0, "the stranger received nothing");
    assert!(stranger.search("secretive").is_empty());
    // No session ever started on B; a paired peer still syncs.
    assert!(b.outcomes.try_recv().is_err());
    let mut a = a;
    b.sync_ok(&mut a).await;
    assert_eq!(a.records(), 4);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_planted_secret_never_reaches_the_peer_database() {
    let (a, b) = (TestNode::new("alpha"), TestNode::new("beta"));
    pair(&a, &b);
    // Plant an unredacted secret straight into A's store, as an older
    // build with other redaction settings might have indexed it.
    {
        let db = a.lock().config().db_path.clone();
        let mut store = crate::store::Store::open(&db).expect("second handle");
        let mut r = crate::record::Record::new(
            "claude-code",
            "s-planted",
            crate::record::Role::User,
            format!("deploy with key {SECRET} to the pelican cluster"),
        );
        r.project = Some("/p".to_owned());
        r.time_ms = Some(1_767_225_600_000);
        let mut ing = store.ingest(&a.id()).expect("ingest");
        ing.insert(&r, None).expect("insert");
        ing.commit().expect("commit");
    }
    let scan = |n: &TestNode| -> bool {
        let db = n.lock().config().db_path.clone();
        let mut hay = std::fs::read(&db).expect("db");
        let mut wal = db.into_os_string();
        wal.push("-wal");
        hay.extend(std::fs::read(PathBuf::from(wal)).unwrap_or_default());
        hay.windows(SECRET.len()).any(|w| w == SECRET.as_bytes())
    };
    assert!(scan(&a), "precondition: the secret is in A's files");
    b.sync_ok(&mut { a }).await;
    let hits = b.search("pelican");
    assert_eq!(hits.len(), 1, "the record itself arrived");
    assert!(!scan(&b), "the secret never reached B's database or WAL");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn forget_propagates_and_a_stale_peer_cannot_resurrect() {
    let (mut a, mut b, mut c) = (
        TestNode::new("alpha"),
        TestNode::new("beta"),
        TestNode::new("gamma"),
    );
    pair(&a, &b);
    pair(&b, &c);
    let doomed = vec!["the narwhal password rotation plan".to_owned()];
    a.notes("/p", &doomed);
    a.notes("/p", &texts("keeper", 3));
    // C indexed the very same note itself (same content hash, its own log).
    c.notes("/p", &doomed);
    a.sync_ok(&mut b).await;
    b.sync_ok(&mut c).await;
    for n in [&a, &b, &c] {
        assert_eq!(n.search("narwhal").len(), 1, "{}", n.name);
    }
    assert_eq!(b.records(), 4, "one copy despite two provenances");

    // A forgets; B hears of it; C is stale (still holds it, in its own log too).
    let plan = a
        .lock()
        .plan_forget(&ForgetRequest::Query("narwhal".to_owned()))
        .expect("plan");
    a.lock().forget(&plan, now_ms()).expect("forget");
    assert!(a.search("narwhal").is_empty());
    let ab = a.sync_ok(&mut b).await;
    assert!(ab.tombstones >= 1 || ab.purged >= 1 || b.search("narwhal").is_empty());
    assert!(b.search("narwhal").is_empty(), "B purged it");

    // The stale peer offers its own copy to B: refused, and C purges too.
    let cb = c.sync_ok(&mut b).await;
    assert!(cb.purged >= 1, "{cb:?}");
    for n in [&a, &b, &c] {
        assert!(n.search("narwhal").is_empty(), "{}", n.name);
        assert_eq!(n.search("keeper").len(), 1, "{}", n.name);
    }
    // Further rounds in any direction do not bring it back.
    b.sync_ok(&mut a).await;
    c.sync_ok(&mut b).await;
    for n in [&a, &b, &c] {
        assert!(n.search("narwhal").is_empty(), "{}", n.name);
    }
    assert_eq!(b.records(), 3);
    // C had the note in its own notes file: the forget from A removed it
    // there too, and left C's file whole.
    let notes_c = std::fs::read_to_string(c.lock().config().locations.notes_file.clone())
        .expect("C's notes file");
    assert!(!notes_c.contains("narwhal"), "{notes_c}");
    assert!(notes_c.is_empty() || notes_c.ends_with('\n'), "{notes_c:?}");
}

/// A paired peer that misbehaves: opens a raw stream to `to` and writes `bytes`.
async fn rogue_stream(from: &TestNode, to: &TestNode, bytes: Vec<u8>) {
    let conn = from
        .endpoint
        .connect(to.addr(), &to.fp, cairn_protocol::ALPN_SYNC)
        .await
        .expect("paired rogue connects");
    let (mut send, mut recv) = conn.quinn().open_bi().await.expect("open");
    send.write_all(&bytes).await.expect("write");
    let _ = send.finish();
    // Read until the receiver drops us (bounded by the deadline).
    let mut dec = FrameDecoder::new();
    for _ in 0..8 {
        if recv_msg(&mut recv, &mut dec, DEADLINE).await.is_err() {
            break;
        }
    }
    conn.close(0, b"rogue done");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn garbage_oversized_and_wrong_version_peers_are_dropped_harmlessly() {
    let (a, mut b) = (TestNode::new("alpha"), TestNode::new("beta"));
    pair(&a, &b);
    b.notes("/p", &texts("sturdy", 5));
    let before = b.lock().watermarks().expect("wm");

    // Garbage where a frame should be.
    rogue_stream(&a, &b, vec![0, 0, 0, 5, 0xff, 0x13, 0x37, 0x00, 0x42]).await;
    let o = b.next_outcome().await;
    assert!(matches!(o, Err((Blame::Peer, _))), "{o:?}");
    // A frame header announcing 4 GiB.
    let mut huge = u32::MAX.to_be_bytes().to_vec();
    huge.extend_from_slice(&[7u8; 64]);
    rogue_stream(&a, &b, huge).await;
    let o = b.next_outcome().await;
    assert!(matches!(o, Err((Blame::Peer, _))), "{o:?}");
    // A Hello of protocol major 2.
    let mut future = a.hello.clone();
    future.major = 2;
    let frame = cairn_protocol::encode_frame(&Message::Hello(future)).expect("encode");
    rogue_stream(&a, &b, frame).await;
    let o = b.next_outcome().await;
    assert!(
        matches!(o, Err((Blame::Peer, ref m)) if m.contains("upgrade")),
        "{o:?}"
    );
    // A Watermarks message before any Hello.
    let frame = cairn_protocol::encode_frame(&Message::Watermarks {
        entries: vec![],
        names: vec![],
    })
    .expect("encode");
    rogue_stream(&a, &b, frame).await;
    let o = b.next_outcome().await;
    assert!(matches!(o, Err((Blame::Peer, _))), "{o:?}");

    // B is intact and a good round still works.
    assert_eq!(b.lock().watermarks().expect("wm"), before);
    assert_eq!(b.records(), 5);
    let r = a.sync_ok(&mut b).await;
    assert_eq!(r.records_received, 5);
    assert_eq!(a.search("sturdy").len(), 1);
}

/// A session refuses a peer that sends a batch nobody asked for.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_unasked_batch_drops_the_peer() {
    let (a, mut b) = (TestNode::new("alpha"), TestNode::new("beta"));
    pair(&a, &b);
    let conn = a
        .endpoint
        .connect(b.addr(), &b.fp, cairn_protocol::ALPN_SYNC)
        .await
        .expect("connect");
    let mut s = open_session(&conn, true, &a.hello, DEADLINE)
        .await
        .expect("hello");
    let origin: NodeId = a.id().parse().expect("id");
    let batch = cairn_protocol::Batch {
        origin,
        epoch: 1,
        after_seq: 0,
        last_seq: 0,
        more: false,
        records: vec![],
        tombstones: vec![],
        stubs: vec![],
        origin_key: vec![],
        seals: vec![],
    };
    send_msg(
        &mut s.send,
        &Message::Watermarks {
            entries: vec![],
            names: vec![],
        },
    )
    .await
    .expect("wm");
    send_msg(&mut s.send, &Message::Batch(batch))
        .await
        .expect("batch");
    let o = b.next_outcome().await;
    assert!(
        matches!(o, Err((Blame::Peer, ref m)) if m.contains("unasked")),
        "{o:?}"
    );
    conn.close(0, b"");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn out_of_scope_records_never_leave() {
    let (mut a, b) = (TestNode::new("alpha"), TestNode::new("beta"));
    pair(&a, &b);
    a.notes("/work/client", &texts("invoice", 3));
    a.notes("/home/me/diary", &texts("holiday", 4));
    // A shares only its work projects with B.
    PeerTable::modify(&a.home(), |t| {
        if let Some(p) = t.by_fingerprint_mut(&b.fp) {
            p.scope = Some(vec!["/work".to_owned()]);
        }
        Ok(())
    })
    .expect("set scope");
    let r = b.sync(&a).await.expect("sync");
    assert_eq!(r.records_received, 3, "{r:?}");
    assert_eq!(r.stubs, 4, "withheld slots keep the log gap-free: {r:?}");
    assert_eq!(a.next_outcome().await.map(|o| o.records_sent), Ok(3));
    assert_eq!(b.search("invoice").len(), 1);
    assert!(
        b.search("holiday").is_empty(),
        "personal notes never left A"
    );
    assert_eq!(b.records(), 3);
}

/// A record as a hostile peer makes it: content and hash that agree.
fn forged_record(seq: u64, text: &str) -> cairn_protocol::WireRecord {
    let mut r = cairn_protocol::WireRecord {
        seq,
        hash: [0; 32],
        agent: "claude-code".into(),
        session_id: "s-forged".into(),
        parent_session: None,
        project: Some("/p".into()),
        role: "user".into(),
        time_ms: Some(1_767_225_600_000),
        text: text.into(),
        files: vec![],
    };
    r.hash = r.content_hash();
    r
}

fn batch_of(
    pull: &cairn_protocol::Pull,
    records: Vec<cairn_protocol::WireRecord>,
) -> cairn_protocol::Batch {
    cairn_protocol::Batch {
        origin: pull.origin,
        epoch: pull.epoch,
        after_seq: pull.after_seq,
        last_seq: pull.after_seq + records.len() as u64,
        more: false,
        records,
        tombstones: vec![],
        stubs: vec![],
        origin_key: vec![],
        seals: vec![],
    }
}

/// A paired peer that plays its side of a session by hand over real
/// QUIC: announces `offers`, says `Bye` at once (it pulls nothing) and
/// answers each of `to`'s pulls with `answer`. Returns `to`'s report.
async fn hostile_session(
    from: &TestNode,
    to: &mut TestNode,
    offers: Vec<cairn_protocol::Watermark>,
    answer: impl Fn(&cairn_protocol::Pull) -> cairn_protocol::Batch,
) -> SessionReport {
    let conn = from
        .endpoint
        .connect(to.addr(), &to.fp, cairn_protocol::ALPN_SYNC)
        .await
        .expect("paired peer connects");
    let mut s = open_session(&conn, true, &from.hello, DEADLINE)
        .await
        .expect("hello");
    let wm = Message::Watermarks {
        entries: offers,
        names: vec![],
    };
    send_msg(&mut s.send, &wm).await.expect("watermarks");
    let bye = Message::Bye {
        reason: "done".into(),
    };
    send_msg(&mut s.send, &bye).await.expect("bye");
    loop {
        match recv_msg(&mut s.recv, &mut s.decoder, DEADLINE).await {
            Ok(Message::Pull(p)) => {
                let b = Message::Batch(answer(&p));
                send_msg(&mut s.send, &b).await.expect("batch");
            }
            Ok(Message::Bye { .. }) => break,
            Ok(_) => {}
            Err(e) => panic!("hostile side: {e}"),
        }
    }
    let _ = s.send.finish();
    let report = to
        .next_outcome()
        .await
        .expect("the receiver's session ends well");
    conn.close(0, b"done");
    report
}

fn origin_of(n: &TestNode) -> (NodeId, u64) {
    let id: NodeId = n.id().parse().expect("id");
    let wm = n.lock().watermarks().expect("wm");
    let epoch = wm.iter().find(|w| w.origin == id).expect("own log").epoch;
    (id, epoch)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn forged_origins_and_tombstones_are_refused_and_honest_entries_still_arrive() {
    let (a, mut b, mut c) = (
        TestNode::new("alpha"),
        TestNode::new("beta"),
        TestNode::new("gamma"),
    );
    pair(&a, &b);
    pair(&a, &c);
    a.notes("/p", &texts("quokka", 3));
    c.notes("/p", &texts("ibis", 2));
    b.notes("/p", &texts("heron", 1));
    // A holds C's log honestly, with C's seals.
    a.sync_ok(&mut c).await;
    let (aid, a_epoch) = origin_of(&a);
    let (bid, b_epoch) = origin_of(&b);
    let (cid, c_epoch) = origin_of(&c);
    let wm = |origin, epoch, seq| cairn_protocol::Watermark { origin, epoch, seq };
    let invented = NodeId([0x42; 20]);
    let claimed = NodeId([0x43; 20]);
    let a_signer = crate::seal::Signer::new(a.lock().identity().key()).expect("A's key");
    let records_before = b.records();
    let offers = vec![
        // Honest: A's own log.
        wm(aid, a_epoch, 3),
        // B's own log, further than B wrote it, and in another epoch.
        wm(bid, b_epoch, 9),
        wm(bid, b_epoch + 1, 2),
        // An invented origin with no key at all.
        wm(invented, 1, 2),
        // Another invented origin, sealed with A's key.
        wm(claimed, 1, 1),
        // C's log, altered on the way.
        wm(cid, c_epoch, 2),
        // A log of A's carrying a tombstone that claims B as its issuer.
        wm(aid, 999, 1),
    ];
    let node_a = Arc::clone(&a.node);
    let report = hostile_session(&a, &mut b, offers, |p| {
        let served = |p: &cairn_protocol::Pull| {
            node_a
                .lock()
                .expect("lock")
                .serve_pull(p, None)
                .expect("serve")
        };
        match (p.origin, p.epoch) {
            (o, e) if o == aid && e == a_epoch => served(p),
            (o, _) if o == invented => batch_of(
                p,
                vec![
                    forged_record(1, "invented origin sturgeon"),
                    forged_record(2, "invented origin sturgeon two"),
                ],
            ),
            (o, _) if o == claimed => {
                let mut b = batch_of(p, vec![forged_record(1, "claimed origin sturgeon")]);
                a_signer.seal_own(&mut b);
                b
            }
            (o, _) if o == cid => {
                let mut b = served(p);
                assert!(!b.seals.is_empty(), "A relays C's log with C's seals");
                b.records[0].text = "altered sturgeon".into();
                b.records[0].hash = b.records[0].content_hash();
                b
            }
            (o, 999) if o == aid => {
                let mut b = batch_of(p, vec![]);
                b.tombstones.push(cairn_protocol::Tombstone::new(
                    1,
                    bid,
                    1_767_225_600_000,
                    cairn_protocol::ForgetTarget::Session {
                        agent: "cairn".into(),
                        session_id: "anything".into(),
                    },
                ));
                b.last_seq = 1;
                a_signer.seal_own(&mut b);
                b
            }
            other => panic!("B pulled a log it must not: {other:?}"),
        }
    })
    .await;

    assert_eq!(report.own_origin_claims, 2, "{report:?}");
    assert_eq!(report.batches_refused, 4, "{report:?}");
    assert_eq!(report.tombstones_refused, 1, "{report:?}");
    let reasons = report.refusals.join("\n");
    for needle in [
        "never wrote",
        "no key",
        "does not belong to origin",
        "not what",
        "not issued by the log's origin",
    ] {
        assert!(reasons.contains(needle), "{needle:?} in:\n{reasons}");
    }
    // Nothing forged was stored; the honest log arrived whole.
    assert!(b.search("sturgeon").is_empty());
    assert_eq!(b.search("quokka").len(), 1, "hits are one per session");
    assert_eq!(b.records(), records_before + 3);
    assert_eq!(b.count("SELECT count(*) FROM tombstones"), 0);
    let held = b.lock().watermarks().expect("wm");
    for w in &held {
        assert!(
            [aid, bid].contains(&w.origin) && w.epoch != 999,
            "no log of a refused origin is held: {held:?}"
        );
    }
    assert_eq!(
        held.iter()
            .find(|w| w.origin == bid)
            .map(|w| (w.epoch, w.seq)),
        Some((b_epoch, 1)),
        "B's own log is untouched"
    );
    // C's genuine log still reaches B through A, sealed by C.
    let r = a.sync_ok(&mut b).await;
    assert_eq!(r.batches_refused, 0, "{r:?}");
    assert_eq!(b.search("ibis").len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_forget_reaches_what_its_issuer_owns_and_the_owner_adopts_the_rest() {
    let (mut a, mut b, mut c) = (
        TestNode::new("alpha"),
        TestNode::new("beta"),
        TestNode::new("gamma"),
    );
    pair(&a, &b);
    pair(&a, &c);
    c.notes("/c", &texts("ibis", 2));
    a.notes("/a", &texts("quokka", 2));
    a.sync_ok(&mut c).await;
    a.sync_ok(&mut b).await;
    assert_eq!(b.search("ibis").len(), 1);

    // A (not the owner) forgets C's session and its own.
    for word in ["ibis", "quokka"] {
        let plan = a
            .lock()
            .plan_forget(&ForgetRequest::Query(word.to_owned()))
            .expect("plan");
        a.lock().forget(&plan, now_ms()).expect("forget");
    }
    assert!(a.search("ibis").is_empty(), "the issuer forgets locally");
    // B purges what A owns, and keeps C's records for C to decide.
    let r = b.sync_ok(&mut a).await;
    assert!(b.search("quokka").is_empty());
    assert_eq!(b.search("ibis").len(), 1, "{r:?}");
    assert!(r.forgets_deferred >= 1, "{r:?}");
    // C, the owner, hears of it and forgets in its own name ...
    a.sync_ok(&mut c).await;
    assert!(c.search("ibis").is_empty(), "the owner adopts the forget");
    // ... which reaches B through A: forget everywhere, from any machine.
    a.sync_ok(&mut c).await;
    a.sync_ok(&mut b).await;
    assert!(b.search("ibis").is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_flood_is_taken_only_up_to_the_session_and_day_limits() {
    let (mut a, b) = (
        TestNode::new("alpha"),
        TestNode::with_config(
            "beta",
            "[sync.limits]\nsession_entries = 100\nday_entries = 150\nmin_free_bytes = 0\n",
        ),
    );
    pair(&a, &b);
    a.notes("/p", &texts("flood", 250));
    let before = b.records();
    // Small pulls, so the limit falls between batches.
    let small = SessionConfig {
        limits: cairn_protocol::PlanLimits {
            max_records: 40,
            ..cairn_protocol::PlanLimits::default()
        },
        ..cfg()
    };
    let (peer, b_home) = (b.peer_entry(&a), b.home());
    let round = || sync_peer(&b.endpoint, &b.node, &b_home, &peer, &b.hello, &small);
    let r = round().await.expect("first session");
    assert!(a.next_outcome().await.is_ok());
    let limit = r.limited.clone().expect("the session limit stopped it");
    assert!(
        limit.contains("per-session limit of 100 entries"),
        "{limit}"
    );
    // Batches of 40: two fit under 100, the third would pass it.
    assert_eq!(b.records() - before, 80, "{r:?}");
    // The next session the same day stops at the day's limit.
    let r = round().await.expect("second session");
    assert!(a.next_outcome().await.is_ok());
    let limit = r.limited.clone().expect("the day's limit stopped it");
    assert!(limit.contains("per-day limit of 150 entries"), "{limit}");
    assert_eq!(b.records() - before, 120, "{r:?}");
    // `cairn peers` shows it.
    let status = crate::sync::facade::list_peers(b.lock().config()).expect("peers");
    let note = status[0].trust.clone().expect("noted");
    assert!(
        note.limited.is_some_and(|l| l.contains("per-day")),
        "{status:?}"
    );
    // Nothing was lost: the rest is still there to pull another day.
    assert_eq!(r.behind_after, 250 - 120, "{r:?}");
    // A third session the same day after the limit asks for nothing.
    b.lock()
        .store()
        .set_meta(
            &format!("sync.usage.{}", a.id()),
            &format!("{} 150 0", now_ms()),
        )
        .expect("usage");
    let r = round().await.expect("third session");
    assert!(a.next_outcome().await.is_ok());
    assert_eq!(
        (r.batches_received, b.records() - before),
        (0, 120),
        "{r:?}"
    );
    assert!(r.limited.is_some_and(|l| l.contains("per-day")));
}

/// The planted kinds of `fixtures/planted-kinds.json`: (kind, text, secrets).
fn planted_kinds() -> Vec<(String, String, Vec<String>)> {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures/planted-kinds.json");
    let v: serde_json::Value =
        serde_json::from_slice(&std::fs::read(p).expect("read planted-kinds.json")).expect("json");
    v["kinds"]
        .as_array()
        .expect("kinds")
        .iter()
        .map(|k| {
            let s = |f: &str| k[f].as_str().expect("string").to_owned();
            let secrets = k["secrets"].as_array().expect("secrets");
            let secrets = secrets.iter().map(|x| x.as_str().expect("s").to_owned());
            (s("kind"), s("text"), secrets.collect())
        })
        .collect()
}

/// Every byte of a node's database and WAL, after a checkpoint.
fn database_bytes(n: &TestNode) -> Vec<u8> {
    let db = n.lock().config().db_path.clone();
    let mut hay = std::fs::read(&db).expect("db");
    let mut wal = db.into_os_string();
    wal.push("-wal");
    hay.extend(std::fs::read(PathBuf::from(wal)).unwrap_or_default());
    hay
}

/// Every text cell of every table of a node's database (decoded record
/// text included), one string per cell.
fn every_cell(n: &TestNode) -> Vec<String> {
    let node = n.lock();
    let conn = node.store().test_conn();
    let tables: Vec<String> = conn
        .prepare("SELECT name FROM sqlite_master WHERE type = 'table'")
        .expect("tables")
        .query_map([], |r| r.get(0))
        .expect("query")
        .map(|t| t.expect("row"))
        .collect();
    let mut out = Vec::new();
    for t in tables {
        let Ok(mut q) = conn.prepare(&format!("SELECT * FROM \"{t}\"")) else {
            continue; // an FTS shadow or virtual table that cannot be read whole
        };
        let cols = q.column_count();
        let Ok(mut rows) = q.query([]) else { continue };
        while let Ok(Some(row)) = rows.next() {
            for c in 0..cols {
                match row.get_ref(c) {
                    Ok(rusqlite::types::ValueRef::Text(b)) => {
                        out.push(String::from_utf8_lossy(b).into_owned());
                    }
                    Ok(rusqlite::types::ValueRef::Blob(b)) => {
                        out.push(String::from_utf8_lossy(b).into_owned());
                    }
                    _ => {}
                }
            }
        }
    }
    let mut q = conn
        .prepare("SELECT text, flags FROM records")
        .expect("records");
    let texts = q
        .query_map([], |r| {
            Ok(crate::store::codec::decode(
                conn,
                &r.get::<_, Vec<u8>>(0)?,
                r.get(1)?,
            ))
        })
        .expect("query");
    out.extend(texts.map(|t| t.expect("row")));
    out
}

/// A paired peer sends, in its own sealed log, every planted kind in
/// every field of a record — session id, parent id, project, files, and
/// the text of each role (user, assistant, tool call arguments
/// JSON-escaped, tool output long enough to be cut) — next to an honest
/// log; on the same connection, two logs whose forget names a secret
/// (a session and a project). The receiver stores the records with every
/// field redacted: no secret in its database bytes, in any table's cells,
/// in search hits or in a shown session; the forgets are refused with
/// their batches and counted; the honest log arrives whole.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn secrets_in_every_field_of_a_peer_batch_are_never_stored_and_secret_forgets_are_refused() {
    let (a, mut b) = (TestNode::new("alpha"), TestNode::new("beta"));
    pair(&a, &b);
    a.notes("/p", &texts("quokka", 3));
    let (aid, a_epoch) = origin_of(&a);
    let kinds = planted_kinds();
    // Every AWS and prose form of issue 56 is among them.
    for form in [
        "aws-pair-space",
        "aws-pair-slash",
        "aws-pair-csv",
        "aws-pair-tab",
        "aws-pair-colon",
        "aws-pair-prose",
        "aws-configure-set",
        "aws-secret-flag",
        "aws-secret-access-key-json",
        "aws-secret-prose",
        "aws-secret-key-prose",
        "api-key-prose",
        "access-token-prose",
        "key-prose-before",
    ] {
        assert!(kinds.iter().any(|k| k.0 == form), "{form} planted");
    }
    let padding = "step ok: compiled a module\n".repeat(400);
    let mut planted = Vec::new();
    for (i, (_, text, _)) in kinds.iter().enumerate() {
        let bodies = [
            ("user", format!("kestrel question {i}: {text}")),
            ("assistant", format!("kestrel answer {i}: {text}")),
            (
                "tool_call",
                serde_json::json!({"command": format!("kestrel {i}; {text}")}).to_string(),
            ),
            ("tool_output", format!("{padding}{text}\n{padding}kestrel")),
            ("tool_output", format!("kestrel {i}\n{padding}{text}")),
        ];
        for (role, body) in bodies {
            let mut r = forged_record(planted.len() as u64 + 1, &body);
            r.role = role.into();
            r.session_id = format!("s{i}-{text}");
            r.parent_session = Some(format!("p{i} {text}"));
            r.project = Some(format!("/home/dev/{text}/app"));
            r.files = vec![format!("/home/dev/app/{text}.rs")];
            r.time_ms = Some(1_767_225_600_000 + planted.len() as i64);
            r.hash = r.content_hash();
            planted.push(r);
        }
    }
    let n = planted.len() as u64;
    let secret_forgets = [
        cairn_protocol::ForgetTarget::Session {
            agent: "claude-code".into(),
            session_id: format!("s0-{}", kinds[0].1),
        },
        cairn_protocol::ForgetTarget::Project {
            project: format!("/home/dev/{}/app", kinds[2].1),
        },
    ];
    let wm = |epoch, seq| cairn_protocol::Watermark {
        origin: aid,
        epoch,
        seq,
    };
    let offers = vec![
        wm(a_epoch, 3),
        wm(a_epoch + 1, n),
        wm(a_epoch + 2, 1),
        wm(a_epoch + 3, 1),
    ];
    let signer = crate::seal::Signer::new(a.lock().identity().key()).expect("A's key");
    let node_a = Arc::clone(&a.node);
    let report = hostile_session(&a, &mut b, offers, |p| {
        if p.epoch == a_epoch {
            return node_a
                .lock()
                .expect("lock")
                .serve_pull(p, None)
                .expect("serve");
        }
        let mut batch = if p.epoch == a_epoch + 1 {
            let from = p.after_seq as usize;
            let to = (from + p.max_records as usize).min(planted.len());
            let mut b = batch_of(p, planted[from..to].to_vec());
            b.more = to < planted.len();
            b
        } else {
            let target = secret_forgets[(p.epoch - a_epoch - 2) as usize].clone();
            let mut b = batch_of(p, vec![]);
            b.tombstones.push(cairn_protocol::Tombstone::new(
                1,
                aid,
                1_767_225_600_000,
                target,
            ));
            b.last_seq = 1;
            b
        };
        signer.seal_own(&mut batch);
        batch
    })
    .await;

    // The secret forgets: refused with their batches, counted, said why.
    assert_eq!(report.batches_refused, 2, "{report:?}");
    assert_eq!(report.tombstones_refused, 2, "{report:?}");
    let reasons = report.refusals.join("\n");
    assert!(reasons.contains("holding a secret"), "{reasons}");
    assert_eq!(b.count("SELECT count(*) FROM tombstones"), 0);
    // The honest log and every planted record arrived, redacted.
    assert_eq!(b.search("quokka").len(), 1);
    assert_eq!(b.records(), 3 + n as i64, "{report:?}");
    assert_eq!(
        b.count("SELECT count(*) FROM sessions WHERE agent = 'claude-code'"),
        kinds.len() as i64,
        "every planted session kept apart by its redacted id"
    );
    assert!(b.lock().store().truncate_wal().expect("checkpoint"));
    let bytes = database_bytes(&b);
    let cells = every_cell(&b);
    let hits = b.search("kestrel");
    assert!(!hits.is_empty());
    let mut shown = Vec::new();
    for hit in &hits {
        let node = b.lock();
        for s in node
            .store()
            .find_sessions(&hit.session_id, 5)
            .expect("find")
        {
            let records = node.store().session_records(s.row, 0, 100).expect("show");
            shown.push(serde_json::to_string(&(s, records)).expect("json"));
        }
    }
    assert!(!shown.is_empty());
    let hits = serde_json::to_string(&hits).expect("json");
    let mut leaked = Vec::new();
    for (kind, _, secrets) in &kinds {
        for s in secrets {
            let where_ = [
                (
                    "database bytes",
                    bytes.windows(s.len()).any(|w| w == s.as_bytes()),
                ),
                ("a table cell", cells.iter().any(|c| c.contains(s.as_str()))),
                ("search hits", hits.contains(s.as_str())),
                (
                    "a shown session",
                    shown.iter().any(|t| t.contains(s.as_str())),
                ),
            ];
            for (place, found) in where_ {
                if found {
                    leaked.push(format!("{kind}: {s} in {place}"));
                }
            }
        }
    }
    assert!(leaked.is_empty(), "secrets stored in clear: {leaked:#?}");
    // An honest round on a new connection still goes through.
    let r = a.sync_ok(&mut b).await;
    assert_eq!(r.batches_refused, 0, "{r:?}");
}

/// Relayed origins are shown with the peer that vouched for them, and the
/// user can refuse one. Through an honest hub (A - B - C) C sees A as
/// relayed by B. A paired peer (A, to B) invents a machine X with a fresh,
/// self-consistent key: B accepts X's sealed log (nothing on the wire
/// tells it from a hub's) but lists X as vouched by A, with X's key
/// fingerprint and first sighting. Refused, X's records, logs and seals
/// are gone from B and its bytes scrubbed; X is never pulled again, a
/// batch of it is refused whoever brings it, and A's honest log still
/// arrives on the same connection. Allowed again, X comes back.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn relayed_origins_are_shown_with_their_voucher_and_a_refused_one_never_returns() {
    use crate::sync::origins::{allow_origin, refuse_origin, relayed_origins};
    let (a, mut b, mut c) = (
        TestNode::new("alpha"),
        TestNode::new("beta"),
        TestNode::new("gamma"),
    );
    pair(&a, &b);
    pair(&b, &c);
    a.notes("/p", &texts("quokka", 2));
    a.sync_ok(&mut b).await;
    b.sync_ok(&mut c).await;
    // The honest hub: C holds A's records, vouched by B.
    assert_eq!(c.search("quokka").len(), 1);
    let seen = relayed_origins(c.lock().config()).expect("relayed");
    assert_eq!(seen.len(), 1, "{seen:?}");
    assert_eq!(seen[0].key.origin, a.id());
    assert_eq!(seen[0].key.name.as_deref(), Some("alpha"));
    assert_eq!(seen[0].key.vouched_by.as_deref(), Some(b.id().as_str()));
    assert_eq!(seen[0].vouched_by_name.as_deref(), Some("beta"));
    assert_eq!(seen[0].key.fingerprint, Some(crate::hex::encode(&a.fp)));
    assert!(seen[0].key.learned_ms > 0 && seen[0].key.refused_ms.is_none());
    assert_eq!(seen[0].key.entries, 2);
    // Paired machines are not relayed origins.
    assert!(relayed_origins(b.lock().config()).expect("b").is_empty());

    // A invents X, with a key of its own making.
    let x_key = rcgen::KeyPair::generate().expect("key");
    let x_signer = crate::seal::Signer::new(&x_key).expect("signer");
    let x = x_signer.id();
    let x_fp = cairn_protocol::spki_fingerprint(x_signer.spki());
    let (aid, a_epoch) = origin_of(&a);
    let x_log = |p: &cairn_protocol::Pull| {
        let mut batch = batch_of(
            p,
            (1..=4)
                .map(|i| forged_record(i, &format!("invented sturgeon {i}")))
                .collect(),
        );
        x_signer.seal_own(&mut batch);
        batch
    };
    let wm = |origin, epoch, seq| cairn_protocol::Watermark { origin, epoch, seq };
    let node_a = Arc::clone(&a.node);
    let honest = |p: &cairn_protocol::Pull| {
        node_a
            .lock()
            .expect("lock")
            .serve_pull(p, None)
            .expect("serve")
    };
    let before = b.records();
    let report = hostile_session(&a, &mut b, vec![wm(x, 7, 4)], |p| {
        assert_eq!(p.origin, x, "B pulls only X's log");
        x_log(p)
    })
    .await;
    assert_eq!(report.batches_refused, 0, "{report:?}");
    assert_eq!(b.records(), before + 4);
    assert_eq!(b.search("sturgeon").len(), 1);
    // B shows X: vouched by A, its key's fingerprint, when, what is held.
    let b_cfg = b.lock().config().clone();
    let seen = relayed_origins(&b_cfg).expect("relayed");
    let shown = seen
        .iter()
        .find(|o| o.key.origin == x.to_string())
        .expect("X is listed");
    assert_eq!(
        shown.key.vouched_by.as_deref(),
        Some(aid.to_string().as_str())
    );
    assert_eq!(shown.vouched_by_name.as_deref(), Some("alpha"));
    assert_eq!(shown.key.fingerprint, Some(crate::hex::encode(&x_fp)));
    assert_eq!(shown.key.entries, 4);
    assert!(shown.key.refused_ms.is_none());

    // The user refuses X by a prefix of its id.
    let x_text = x.to_string();
    let refusal = refuse_origin(&b_cfg, &x_text[..8], now_ms()).expect("refuse");
    assert_eq!(
        (refusal.origin.as_str(), refusal.records, refusal.logs),
        (x_text.as_str(), 4, 1),
        "{refusal:?}"
    );
    assert_eq!(b.records(), before);
    assert!(b.search("sturgeon").is_empty());
    assert!(
        b.lock()
            .watermarks()
            .expect("wm")
            .iter()
            .all(|w| w.origin != x)
    );
    assert_eq!(
        b.count(&format!(
            "SELECT count(*) FROM log_seals WHERE log IN (SELECT g.id FROM origin_logs g
             JOIN origins o ON o.id = g.origin WHERE o.node = '{x_text}')"
        )),
        0
    );
    let bytes = database_bytes(&b);
    assert!(
        !bytes.windows(8).any(|w| w == b"sturgeon"),
        "X's records are scrubbed from B's files"
    );
    let seen = relayed_origins(&b_cfg).expect("relayed");
    let shown = seen
        .iter()
        .find(|o| o.key.origin == x_text)
        .expect("listed");
    assert!(shown.key.refused_ms.is_some() && shown.key.entries == 0);
    // Refusing this machine or a paired one is an error that says why.
    let own = refuse_origin(&b_cfg, &b.id(), now_ms()).expect_err("own");
    assert!(own.to_string().contains("own origin"), "{own}");
    let paired = refuse_origin(&b_cfg, "alpha", now_ms()).expect_err("paired");
    assert!(
        paired.to_string().contains("cairn unpair alpha"),
        "{paired}"
    );
    assert!(refuse_origin(&b_cfg, "zzzz", now_ms()).is_err());

    // A offers X again beside new honest notes: X is not pulled, A's
    // notes arrive on the same connection.
    a.notes("/p", &texts("heron", 2));
    let report = hostile_session(&a, &mut b, vec![wm(x, 7, 4), wm(aid, a_epoch, 4)], |p| {
        assert_ne!(p.origin, x, "a refused origin is never pulled");
        honest(p)
    })
    .await;
    assert_eq!(report.refused_origin_logs, 1, "{report:?}");
    assert_eq!(b.search("heron").len(), 1);
    assert!(b.search("sturgeon").is_empty());
    // A batch of X is refused whoever brings it, with a reason.
    let pull = cairn_protocol::Pull {
        origin: x,
        epoch: 7,
        after_seq: 0,
        max_records: 100,
        max_bytes: 1 << 20,
    };
    let err = b
        .lock()
        .apply_batch_from(&pull, &x_log(&pull), Some(&aid))
        .expect_err("refused");
    assert!(err.to_string().contains("the user refused"), "{err}");
    assert!(b.search("sturgeon").is_empty());

    // Allowed again, X's log is pulled at the next session.
    assert_eq!(allow_origin(&b_cfg, &x_text[..8]).expect("allow"), x);
    let report = hostile_session(&a, &mut b, vec![wm(x, 7, 4)], x_log).await;
    assert_eq!(report.batches_refused, 0, "{report:?}");
    assert_eq!(b.search("sturgeon").len(), 1);
}

/// A session's preparer takes the database's text dictionary once an
/// indexing pass has trained one: batches prepared without it would be
/// prepared again by every apply.
#[test]
fn the_preparer_takes_the_dictionary_once_the_database_has_one() {
    let dir = tempfile::tempdir().expect("temp dir");
    let cfg = config(dir.path(), "b");
    let db = cfg.db_path.clone();
    let node = Node::open(cfg).expect("open node");
    let preparer = Mutex::new(node.batch_preparer());
    refresh_preparer(&node, &preparer);
    assert!(!preparer.lock().expect("lock").has_dict());

    // Another connection (an indexing pass) stores a dictionary.
    let mut samples = Vec::new();
    let mut sizes = Vec::new();
    for i in 0..2_000 {
        let text = format!(
            "record {i}: the parser reads config {} and {}\n",
            i * 7,
            i % 13
        );
        samples.extend_from_slice(text.as_bytes());
        sizes.push(text.len());
    }
    let dict = crate::store::codec::TextDict::train(&samples, &sizes).expect("trained");
    let mut other = crate::store::Store::open(&db).expect("open store");
    let mut ing = other.ingest("node").expect("ingest");
    ing.save_text_dict(&dict).expect("save");
    ing.commit().expect("commit");

    refresh_preparer(&node, &preparer);
    assert!(preparer.lock().expect("lock").has_dict());
}
