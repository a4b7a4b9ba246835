//! Test harness: a throwaway home seeded with fixtures, and a runner for the
//! real `cairn` binary with a hermetic environment.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The `cairn` binary cargo built for these tests.
pub fn cairn_bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_cairn"))
}

/// The repository's `fixtures/home` folder.
pub fn fixtures_home() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures/home")
}

/// Every fake secret planted in the fixtures (one per line in `fixtures/planted-secrets.txt`).
pub fn planted_secrets() -> Vec<String> {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures/planted-secrets.txt");
    std::fs::read_to_string(&p)
        .expect("read planted-secrets.txt")
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(str::to_owned)
        .collect()
}

/// A temporary `$HOME` (with the node's data under it) for one test.
pub struct TestHome {
    dir: tempfile::TempDir,
    /// Variables every command of this home gets besides the usual.
    env: Vec<(String, String)>,
}

impl TestHome {
    /// An empty home.
    pub fn empty() -> TestHome {
        TestHome {
            dir: tempfile::tempdir().expect("create temp home"),
            env: Vec::new(),
        }
    }

    /// This home, its commands run with `key` set to `value` too.
    pub fn with_env(mut self, key: &str, value: &str) -> TestHome {
        self.env.push((key.to_owned(), value.to_owned()));
        self
    }

    /// A home seeded with a copy of `fixtures/home`.
    pub fn seeded() -> TestHome {
        let h = TestHome::empty();
        copy_tree(&fixtures_home(), h.path());
        h
    }

    /// The home folder.
    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// The node's data folder inside this home.
    pub fn cairn_home(&self) -> PathBuf {
        self.path().join(".local/share/cairn")
    }

    /// A `cairn` command with only this home's environment.
    pub fn cmd(&self, args: &[&str]) -> Command {
        let mut c = Command::new(cairn_bin());
        c.args(args)
            .env_clear()
            .env("HOME", self.path())
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOSTNAME", "testbox")
            .env("CAIRN_LOG", "error")
            // Never the real systemctl/launchctl: a stand-in in the temp
            // home (absent unless a test writes it).
            .env("CAIRN_SERVICE_CTL", self.path().join("service-ctl"))
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .current_dir(self.path());
        c
    }

    /// Starts `cairn serve` for this home on a loopback port the system
    /// picks, its output discarded.
    pub fn spawn_serve(&self) -> std::process::Child {
        use std::process::Stdio;
        self.cmd(&["serve", "--listen", "127.0.0.1:0"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn cairn serve")
    }

    /// Runs `cairn` and returns its output, whatever the exit code.
    pub fn run(&self, args: &[&str]) -> Output {
        self.cmd(args).output().expect("run cairn")
    }

    /// Runs `cairn`, asserts it succeeded, returns stdout.
    pub fn ok(&self, args: &[&str]) -> String {
        let out = self.run(args);
        assert!(
            out.status.success(),
            "cairn {args:?} failed with {}\nstdout: {}\nstderr: {}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).expect("utf-8 stdout")
    }

    /// Runs `cairn ... --json` and parses stdout.
    pub fn json(&self, args: &[&str]) -> serde_json::Value {
        let out = self.ok(args);
        serde_json::from_str(&out)
            .unwrap_or_else(|e| panic!("cairn {args:?} printed invalid JSON ({e}): {out}"))
    }

    /// `cairn search --json` hits for a query.
    pub fn search(&self, query: &str, extra: &[&str]) -> Vec<serde_json::Value> {
        let mut args = vec!["search", "--json"];
        args.extend_from_slice(extra);
        args.push("--");
        args.push(query);
        let v: serde_json::Value =
            serde_json::from_str(&self.search_out(&args)).expect("search JSON");
        v["hits"].as_array().expect("hits array").clone()
    }

    /// Asserts that `query` (searched without refreshing) puts a session of
    /// `agent` first, and that its best record or its transcript says `needle`.
    pub fn assert_found_first(&self, query: &str, agent: &str, needle: &str) {
        let hits = self.search(query, &["--no-refresh"]);
        assert!(!hits.is_empty(), "no hits for {query:?}");
        let top = &hits[0];
        assert_eq!(
            top["agent"], agent,
            "wrong top agent for {query:?}: {hits:#?}"
        );
        let snippet = top["snippet"].as_str().unwrap_or_default();
        if !snippet.contains(needle) {
            let sid = top["session_id"].as_str().expect("session id");
            let show = self.ok(&["show", "--no-pager", sid]);
            assert!(
                show.contains(needle),
                "top session for {query:?} lacks {needle:?}"
            );
        }
    }

    /// Runs a `cairn search …` that may find nothing: exit status 0 with
    /// hits, 1 with none (as grep); returns stdout.
    pub fn search_out(&self, args: &[&str]) -> String {
        search_output(args, self.run(args))
    }
}

/// Checks a `cairn search` run: 0 when something matched, 1 when nothing
/// did, never anything else; returns stdout.
pub fn search_output(args: &[&str], out: Output) -> String {
    let stdout = String::from_utf8(out.stdout).expect("utf-8 stdout");
    let code = out.status.code();
    assert!(
        matches!(code, Some(0 | 1)),
        "cairn {args:?} failed with {:?}\nstdout: {stdout}\nstderr: {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    if args.contains(&"--json") {
        let v: serde_json::Value = serde_json::from_str(&stdout).expect("search JSON");
        let empty = v["hits"].as_array().is_none_or(|h| h.is_empty());
        assert_eq!(
            code == Some(1),
            empty,
            "exit status 1 exactly when no hits: {stdout}"
        );
    }
    stdout
}

/// Copies a folder tree (files and folders only).
pub fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("mkdir");
    for entry in std::fs::read_dir(from).expect("read fixtures") {
        let entry = entry.expect("entry");
        let dest = to.join(entry.file_name());
        if entry.file_type().expect("type").is_dir() {
            copy_tree(&entry.path(), &dest);
        } else {
            std::fs::copy(entry.path(), &dest).expect("copy fixture");
        }
    }
}

/// All bytes of every file under `dir` (database, WAL, notes, key...).
pub fn all_bytes_under(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut out = Vec::new();
    let Ok(rd) = std::fs::read_dir(dir) else {
        return out;
    };
    for e in rd.flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(all_bytes_under(&p));
        } else if let Ok(b) = std::fs::read(&p) {
            out.push((p, b));
        }
    }
    out
}

/// True when `needle` occurs in `hay`.
pub fn contains(hay: &[u8], needle: &[u8]) -> bool {
    !needle.is_empty() && hay.windows(needle.len()).any(|w| w == needle)
}

/// Fails unless the recordings found on disk and a suite's table of
/// entries (`listed`, `<agent>/<release>` each) name the same ones, so
/// that neither a recording nor an entry can go unchecked.
pub fn same_recordings(what: &str, on_disk: &[String], listed: &[&str]) {
    let unlisted: Vec<&String> = on_disk
        .iter()
        .filter(|d| !listed.contains(&d.as_str()))
        .collect();
    let missing: Vec<&&str> = listed
        .iter()
        .filter(|d| !on_disk.iter().any(|o| o == *d))
        .collect();
    assert!(
        unlisted.is_empty() && missing.is_empty(),
        "{what} differ: recorded without an entry {unlisted:?}, entries without a recording \
         {missing:?}"
    );
}

/// `fixtures/agents`: the recordings of real agent releases.
pub fn agent_fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures/agents")
}

/// Every `<agent>/<release>` folder under [`agent_fixtures`] holding a
/// `holding` folder (`home` for a recorded session, `wiring` for MCP
/// wiring evidence), sorted.
pub fn recorded_releases(holding: &str) -> Vec<String> {
    let names = |p: &Path| -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(p)
            .map(|rd| {
                rd.flatten()
                    .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .collect()
            })
            .unwrap_or_default();
        v.sort();
        v
    };
    let mut out = Vec::new();
    for agent in names(&agent_fixtures()) {
        for release in names(&agent_fixtures().join(&agent)) {
            if agent_fixtures()
                .join(&agent)
                .join(&release)
                .join(holding)
                .is_dir()
            {
                out.push(format!("{agent}/{release}"));
            }
        }
    }
    out
}
