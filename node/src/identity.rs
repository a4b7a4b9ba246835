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
    /// The key file exists but does not hold a usable key (damaged, or
    /// not text at all).
    #[error(
        "identity key {path} is unreadable ({why}): restore it from a backup, or move it aside and cairn makes a new one (the memory here stays; paired machines then see a new machine, to pair again)"
    )]
    Damaged {
        /// The key file.
        path: PathBuf,
        /// What was wrong with it.
        why: String,
    },
    /// A new key could not be made.
    #[error("cannot make an identity key for {path}: {source}")]
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
        let damaged = |why: String| IdentityError::Damaged {
            path: path.to_path_buf(),
            why,
        };
        let parse = |pem: &str| {
            rcgen::KeyPair::from_pem(pem)
                .map(Identity::from_key)
                .map_err(|e| damaged(e.to_string()))
        };
        match std::fs::read_to_string(path) {
            Ok(pem) => parse(&pem),
            Err(e) if e.kind() == std::io::ErrorKind::InvalidData => Err(damaged(e.to_string())),
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
                        parse(&std::fs::read_to_string(path).map_err(io)?)
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
        // Damaged, as text or as bytes that are no text at all: named, with
        // what to do, and never replaced behind the user's back.
        for bytes in [&b"garbage"[..], &[0xff, 0xfe, 0x00, 0x9c][..]] {
            std::fs::write(&path, bytes).expect("write");
            let e = Identity::load_or_create(&path).expect_err("damaged");
            assert!(matches!(e, IdentityError::Damaged { .. }), "{e:?}");
            assert!(e.to_string().contains("move it aside"), "{e}");
            assert_eq!(std::fs::read(&path).expect("read"), bytes, "kept");
        }
    }
}
