//! The node's identity: a key pair made on first run and kept in the node's
//! home (mode 0600). The node id is derived from the public key, so peers
//! can later authenticate a node by the key it presents.

use std::io::Write;
use std::path::{Path, PathBuf};

use cairn_protocol::NodeId;

/// Failures loading or creating the identity.
#[derive(Debug, thiserror::Error)]
pub enum IdentityError {
    /// Reading or writing the key file failed.
    #[error("failed to access identity key {path}: {source}")]
    Io {
        /// The key file.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// The key file exists but does not hold a usable key.
    #[error("identity key {path} is unreadable: {source}")]
    Key {
        /// The key file.
        path: PathBuf,
        /// What rcgen said.
        #[source]
        source: rcgen::Error,
    },
}

/// This node's key pair and the id derived from it.
pub struct Identity {
    key: rcgen::KeyPair,
    id: NodeId,
}

impl std::fmt::Debug for Identity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Identity")
            .field("id", &self.id)
            .finish_non_exhaustive()
    }
}

impl Identity {
    /// Loads the key at `path`, creating it (0600) if there is none.
    ///
    /// Creation is atomic: the key is written to a private temporary file
    /// and hard-linked into place, so a process starting at the same moment
    /// either finds no key or a complete one, and the first link wins.
    pub fn load_or_create(path: &Path) -> Result<Identity, IdentityError> {
        let io = |source| IdentityError::Io {
            path: path.to_path_buf(),
            source,
        };
        let bad = |source| IdentityError::Key {
            path: path.to_path_buf(),
            source,
        };
        match std::fs::read_to_string(path) {
            Ok(pem) => {
                let key = rcgen::KeyPair::from_pem(&pem).map_err(bad)?;
                Ok(Identity::from_key(key))
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                if let Some(dir) = path.parent() {
                    crate::home::ensure(dir).map_err(io)?;
                }
                let key = rcgen::KeyPair::generate().map_err(bad)?;
                static ATTEMPT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
                let n = ATTEMPT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let tmp = path.with_extension(format!("{}-{n}.tmp", std::process::id()));
                let written = (|| {
                    let mut f = crate::home::private_file()
                        .write(true)
                        .create(true)
                        .truncate(true)
                        .open(&tmp)?;
                    f.write_all(key.serialize_pem().as_bytes())?;
                    f.sync_all()?;
                    std::fs::hard_link(&tmp, path)
                })();
                let _ = std::fs::remove_file(&tmp);
                match written {
                    Ok(()) => Ok(Identity::from_key(key)),
                    // Another process created the key first: use theirs.
                    Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                        let pem = std::fs::read_to_string(path).map_err(io)?;
                        Ok(Identity::from_key(
                            rcgen::KeyPair::from_pem(&pem).map_err(bad)?,
                        ))
                    }
                    Err(e) => Err(io(e)),
                }
            }
            Err(e) => Err(io(e)),
        }
    }

    fn from_key(key: rcgen::KeyPair) -> Identity {
        let id = node_id(&rcgen::PublicKeyData::subject_public_key_info(&key));
        Identity { key, id }
    }

    /// The node id (shown as 32 base32 characters).
    pub fn id(&self) -> NodeId {
        self.id
    }

    /// The first 8 characters, grouped for reading aloud: `abcd-efgh`.
    pub fn short_id(&self) -> String {
        short_id(&self.id.to_string())
    }

    /// The key pair (for the TLS certificate).
    pub fn key(&self) -> &rcgen::KeyPair {
        &self.key
    }
}

/// The human-checkable short form of a node id.
pub fn short_id(id: &str) -> String {
    let s: String = id.chars().take(8).collect();
    if s.len() == 8 {
        format!("{}-{}", &s[..4], &s[4..])
    } else {
        s
    }
}

/// Derives a node id from a public key (SubjectPublicKeyInfo DER, as TLS
/// presents it): the first 20 bytes of its blake3 fingerprint.
pub fn node_id(public_key_der: &[u8]) -> NodeId {
    NodeId::from_fingerprint(&cairn_protocol::spki_fingerprint(public_key_der))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn concurrent_creation_yields_one_key() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("identity.key");
        let ids: Vec<NodeId> = (0..8)
            .map(|_| {
                let p = path.clone();
                std::thread::spawn(move || {
                    Identity::load_or_create(&p).expect("load or create").id()
                })
            })
            .collect::<Vec<_>>()
            .into_iter()
            .map(|t| t.join().expect("join"))
            .collect();
        assert!(ids.iter().all(|i| *i == ids[0]), "{ids:?}");
        let left: Vec<_> = std::fs::read_dir(dir.path())
            .expect("ls")
            .flatten()
            .map(|e| e.file_name())
            .collect();
        assert_eq!(left, ["identity.key"], "temporary files left behind");
    }

    #[test]
    fn created_once_with_private_mode_and_stable_id() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("sub/identity.key");
        let a = Identity::load_or_create(&path).expect("create");
        let b = Identity::load_or_create(&path).expect("load");
        assert_eq!(a.id(), b.id());
        assert_eq!(a.id().to_string().len(), 32);
        assert_eq!(a.short_id().len(), 9);
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&path).expect("stat").permissions().mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        std::fs::write(&path, "garbage").expect("write");
        assert!(matches!(
            Identity::load_or_create(&path),
            Err(IdentityError::Key { .. })
        ));
    }
}
