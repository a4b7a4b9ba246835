//! Configuration: built-in defaults, an optional TOML file, a few
//! environment variables, resolved once into a [`Config`] with absolute paths.
//!
//! The node never reads the process environment itself: the caller captures
//! it in an [`Env`] and passes it in, so tests (and several nodes in one
//! process) control every path.

use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::sources::Locations;

/// The environment variables cairn and the agents honour, captured once.
#[derive(Debug, Clone, Default)]
pub struct Env {
    /// `$HOME`.
    pub home: Option<PathBuf>,
    /// `$CAIRN_HOME`: moves the node's data (database, key, notes).
    pub cairn_home: Option<PathBuf>,
    /// `$CAIRN_CONFIG`: the config file.
    pub cairn_config: Option<PathBuf>,
    /// `$XDG_DATA_HOME`.
    pub xdg_data_home: Option<PathBuf>,
    /// `$XDG_CONFIG_HOME`.
    pub xdg_config_home: Option<PathBuf>,
    /// `$CLAUDE_CONFIG_DIR`.
    pub claude_config_dir: Option<PathBuf>,
    /// `$CODEX_HOME`.
    pub codex_home: Option<PathBuf>,
    /// `$GEMINI_CLI_HOME`.
    pub gemini_cli_home: Option<PathBuf>,
    /// `$CURSOR_CONFIG_DIR`.
    pub cursor_config_dir: Option<PathBuf>,
    /// `$AIDER_CHAT_HISTORY_FILE`.
    pub aider_chat_history_file: Option<PathBuf>,
    /// The machine's host name.
    pub hostname: Option<String>,
    /// Every other agent's store override that is set (the variables the
    /// sources list in `Source::env_vars`), by name.
    pub agent_vars: std::collections::BTreeMap<String, PathBuf>,
}

impl Env {
    /// Captures the variables through `get` (the CLI passes `std::env::var`).
    pub fn capture(get: impl Fn(&str) -> Option<String>) -> Env {
        let path = |k: &str| get(k).filter(|v| !v.is_empty()).map(PathBuf::from);
        Env {
            home: path("HOME"),
            cairn_home: path("CAIRN_HOME"),
            cairn_config: path("CAIRN_CONFIG"),
            xdg_data_home: path("XDG_DATA_HOME"),
            xdg_config_home: path("XDG_CONFIG_HOME"),
            claude_config_dir: path("CLAUDE_CONFIG_DIR"),
            codex_home: path("CODEX_HOME"),
            gemini_cli_home: path("GEMINI_CLI_HOME"),
            cursor_config_dir: path("CURSOR_CONFIG_DIR"),
            aider_chat_history_file: path("AIDER_CHAT_HISTORY_FILE"),
            hostname: get("HOSTNAME").filter(|h| !h.is_empty()),
            agent_vars: crate::sources::env_vars()
                .into_iter()
                .filter_map(|k| path(k).map(|p| (k.to_owned(), p)))
                .collect(),
        }
    }
}

/// The config file, as written by the user. Every key is optional.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConfigFile {
    /// `[node]`
    #[serde(default)]
    pub node: NodeSection,
    /// `[sources]`
    #[serde(default)]
    pub sources: SourcesSection,
    /// `[search]`
    #[serde(default)]
    pub search: SearchSection,
    /// `[sync]`
    #[serde(default)]
    pub sync: SyncSection,
}

/// `[sync]` settings.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SyncSection {
    /// LAN discovery (mDNS) by `cairn serve`; on unless set to `false`.
    pub discovery: Option<bool>,
}

/// `[search]` settings.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SearchSection {
    /// The meaning tier (built-in embeddings); on unless set to `false`.
    pub semantic: Option<bool>,
}

/// `[node]` settings.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NodeSection {
    /// Human name of this machine (default: the host name).
    pub name: Option<String>,
}

/// `[sources]` settings.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SourcesSection {
    /// Agent ids not to read, e.g. `["cursor"]`.
    #[serde(default)]
    pub disabled: Vec<String>,
    /// Project folders whose `.aider.chat.history.md` (and project-local
    /// `.opencode/opencode.db`) are read. `~` is expanded.
    #[serde(default)]
    pub project_roots: Vec<String>,
}

/// Problems with the configuration.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// Neither `$HOME` nor `$CAIRN_HOME` is set.
    #[error("cannot locate a home directory: set HOME or CAIRN_HOME")]
    NoHome,
    /// The config file could not be read.
    #[error("failed to read config file {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// The config file is not valid (bad TOML, unknown key, wrong type).
    #[error("invalid config file {path}: {source}")]
    Parse {
        /// The file.
        path: PathBuf,
        /// What is wrong, with line and column.
        #[source]
        source: toml::de::Error,
    },
    /// A disabled agent id that no source has.
    #[error("unknown agent {agent:?} in [sources] disabled of {path}; known: {known}")]
    UnknownAgent {
        /// The id given.
        agent: String,
        /// The file.
        path: PathBuf,
        /// The known ids.
        known: String,
    },
}

/// The resolved configuration every command works from.
#[derive(Debug, Clone)]
pub struct Config {
    /// The node's data folder.
    pub home: PathBuf,
    /// The database file.
    pub db_path: PathBuf,
    /// The identity key file.
    pub identity_path: PathBuf,
    /// The config file that was read, if any.
    pub config_path: Option<PathBuf>,
    /// This machine's human name.
    pub node_name: String,
    /// Where the agents keep their histories.
    pub locations: Locations,
    /// Agent ids not to read.
    pub disabled: Vec<String>,
    /// Whether records get meaning vectors and search uses them.
    pub semantic: bool,
    /// Whether `cairn serve` announces itself and finds peers on the LAN.
    pub discovery: bool,
}

impl Config {
    /// Resolves defaults, the config file (`explicit` or `$CAIRN_CONFIG` or
    /// `$XDG_CONFIG_HOME/cairn/config.toml` if it exists) and the environment.
    pub fn resolve(env: &Env, explicit: Option<&Path>) -> Result<Config, ConfigError> {
        let home = env.home.clone();
        let need_home = || home.clone().ok_or(ConfigError::NoHome);
        let xdg_data = match &env.xdg_data_home {
            Some(p) => p.clone(),
            None => need_home()?.join(".local/share"),
        };
        let xdg_config = match &env.xdg_config_home {
            Some(p) => p.clone(),
            None => need_home()?.join(".config"),
        };
        let cairn_home = env
            .cairn_home
            .clone()
            .unwrap_or_else(|| xdg_data.join("cairn"));

        let (file, config_path) = match explicit
            .map(Path::to_path_buf)
            .or_else(|| env.cairn_config.clone())
        {
            Some(p) => (load(&p)?, Some(p)),
            None => {
                let p = xdg_config.join("cairn/config.toml");
                if p.is_file() {
                    (load(&p)?, Some(p))
                } else {
                    (ConfigFile::default(), None)
                }
            }
        };
        let known: Vec<&str> = crate::sources::registry()
            .iter()
            .map(|s| s.agent())
            .collect();
        for d in &file.sources.disabled {
            if !known.contains(&d.as_str()) {
                return Err(ConfigError::UnknownAgent {
                    agent: d.clone(),
                    path: config_path.clone().unwrap_or_default(),
                    known: known.join(", "),
                });
            }
        }

        let user_home = home.clone().unwrap_or_else(|| cairn_home.clone());
        let mut loc = Locations::under_home(&user_home);
        loc.xdg_data_home = xdg_data;
        loc.xdg_config_home = xdg_config.clone();
        if let Some(p) = &env.claude_config_dir {
            loc.claude_dir = p.clone();
        }
        if let Some(p) = &env.codex_home {
            loc.codex_home = p.clone();
        }
        if let Some(p) = &env.gemini_cli_home {
            loc.gemini_home = p.clone();
        }
        loc.cursor_config_dir = match &env.cursor_config_dir {
            Some(p) => p.clone(),
            None if cfg!(target_os = "macos") => {
                user_home.join("Library/Application Support/Cursor")
            }
            None => xdg_config.join("Cursor"),
        };
        loc.aider_history_file = env.aider_chat_history_file.clone();
        loc.vars = env.agent_vars.clone();
        loc.aider_roots = file
            .sources
            .project_roots
            .iter()
            .map(|r| expand_tilde(r, &user_home))
            .collect();
        loc.notes_file = cairn_home.join("notes.jsonl");
        // Project folders found earlier (a pass's walk finds them anew when due).
        let projects_file = cairn_home.join(crate::projects::FILE);
        loc.project_dirs = crate::projects::load(&projects_file).folders;
        loc.projects_file = Some(projects_file);

        let node_name = file
            .node
            .name
            .clone()
            .or_else(|| env.hostname.clone())
            .or_else(read_hostname)
            .unwrap_or_else(|| "localhost".to_owned());
        Ok(Config {
            db_path: cairn_home.join("cairn.db"),
            identity_path: cairn_home.join("identity.key"),
            home: cairn_home,
            config_path,
            node_name,
            locations: loc,
            disabled: file.sources.disabled,
            semantic: file.search.semantic.unwrap_or(true),
            discovery: file.sync.discovery.unwrap_or(true),
        })
    }
}

fn load(path: &Path) -> Result<ConfigFile, ConfigError> {
    let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    toml::from_str(&text).map_err(|source| ConfigError::Parse {
        path: path.to_path_buf(),
        source,
    })
}

fn expand_tilde(p: &str, home: &Path) -> PathBuf {
    match p.strip_prefix("~/") {
        Some(rest) => home.join(rest),
        None if p == "~" => home.to_path_buf(),
        None => PathBuf::from(p),
    }
}

/// For tests: the configuration of a machine named "laptop" whose home
/// (and so the agents' folders and the node's own) is `home`, with the
/// meaning tier off.
#[cfg(test)]
pub(crate) fn lexical_for_tests(home: &Path) -> Config {
    let env = Env {
        home: Some(home.to_path_buf()),
        hostname: Some("laptop".into()),
        ..Env::default()
    };
    let mut cfg = Config::resolve(&env, None).expect("config");
    cfg.semantic = false;
    cfg
}

/// The machine's host name from the OS (`gethostname(2)` on Unix, so a
/// Mac without `$HOSTNAME` in the environment is named too).
fn read_hostname() -> Option<String> {
    Some(
        gethostname::gethostname()
            .to_string_lossy()
            .trim()
            .to_owned(),
    )
    .filter(|s| !s.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(home: &Path) -> Env {
        Env {
            home: Some(home.to_path_buf()),
            hostname: Some("box".into()),
            ..Env::default()
        }
    }

    #[test]
    fn defaults_follow_home_and_xdg() {
        let c = Config::resolve(&env(Path::new("/h")), None).expect("resolve");
        assert_eq!(c.home, Path::new("/h/.local/share/cairn"));
        assert_eq!(c.db_path, Path::new("/h/.local/share/cairn/cairn.db"));
        assert_eq!(c.locations.claude_dir, Path::new("/h/.claude"));
        assert_eq!(c.node_name, "box");
        let mut e = env(Path::new("/h"));
        e.cairn_home = Some("/data/c".into());
        e.codex_home = Some("/x/codex".into());
        let c = Config::resolve(&e, None).expect("resolve");
        assert_eq!(c.db_path, Path::new("/data/c/cairn.db"));
        assert_eq!(c.locations.codex_home, Path::new("/x/codex"));
    }

    #[test]
    fn file_is_read_and_unknown_keys_refused() {
        let dir = tempfile::tempdir().expect("tempdir");
        let p = dir.path().join("c.toml");
        std::fs::write(
            &p,
            "[node]\nname = \"laptop\"\n[sources]\nproject_roots = [\"~/code/shop\"]\n",
        )
        .expect("write");
        let c = Config::resolve(&env(dir.path()), Some(&p)).expect("resolve");
        assert_eq!(c.node_name, "laptop");
        assert!(c.semantic, "on by default");
        assert!(c.discovery, "on by default");
        std::fs::write(
            &p,
            "[search]\nsemantic = false\n[sync]\ndiscovery = false\n",
        )
        .expect("write");
        let off = Config::resolve(&env(dir.path()), Some(&p)).expect("resolve");
        assert!(!off.semantic && !off.discovery);
        assert_eq!(c.locations.aider_roots, [dir.path().join("code/shop")]);
        std::fs::write(&p, "[node]\nnmae = \"typo\"\n").expect("write");
        let err = Config::resolve(&env(dir.path()), Some(&p)).expect_err("typo");
        assert!(matches!(err, ConfigError::Parse { .. }));
        assert!(err.to_string().contains("nmae"), "{err}");
        std::fs::write(&p, "[sources]\ndisabled = [\"vim\"]\n").expect("write");
        assert!(matches!(
            Config::resolve(&env(dir.path()), Some(&p)),
            Err(ConfigError::UnknownAgent { .. })
        ));
    }
}
