//! What the flat files beside the database (`store::vector_file`,
//! `store::sketch`) share: their 32-byte header, reads and writes at a
//! byte offset that leave the file's cursor alone, writes in 2 MiB
//! regions, and the split of a scan between threads.

use std::fs::File;

/// A new, empty, private file beside `path` (`<path>.tmp`), to be
/// renamed over it once written: returns it with its path.
pub(super) fn create_beside(path: &std::path::Path) -> std::io::Result<(File, std::path::PathBuf)> {
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp");
    let tmp = std::path::PathBuf::from(tmp);
    let file = crate::home::private_file()
        .write(true)
        .create(true)
        .truncate(true)
        .open(&tmp)?;
    Ok((file, tmp))
}

/// A token no other file of this database has had: `what` the file is,
/// the clock, the process and the database's path, hashed.
pub(super) fn new_token(what: &[u8], db: &std::path::Path) -> [u8; 16] {
    let mut h = blake3::Hasher::new();
    h.update(what);
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    h.update(&now.to_le_bytes());
    h.update(&std::process::id().to_le_bytes());
    h.update(db.as_os_str().as_encoded_bytes());
    let mut t = [0u8; 16];
    t.copy_from_slice(&h.finalize().as_bytes()[..16]);
    t
}

/// Bytes of the header.
pub(super) const HEADER_LEN: usize = 32;

/// The header: the file's 8-byte magic, the vector length (u32 LE), 4
/// reserved bytes, and the 16-byte token naming the vector file.
pub(super) fn header(magic: &[u8; 8], dim: usize, token: &[u8; 16]) -> [u8; HEADER_LEN] {
    let mut h = [0u8; HEADER_LEN];
    h[..8].copy_from_slice(magic);
    h[8..12].copy_from_slice(&(dim as u32).to_le_bytes());
    h[16..32].copy_from_slice(token);
    h
}

/// Whether `file` opens with the header of a file of this `magic` made
/// for `token` (whatever the rest says): a file that claims to be the one
/// wanted, so that one failing its check is damage, not a stale file.
pub(super) fn claims(file: &File, magic: &[u8; 8], token: &[u8; 16]) -> bool {
    let mut h = [0u8; HEADER_LEN];
    read_at(file, &mut h, 0).is_ok() && h[..8] == magic[..] && h[16..] == token[..]
}

/// The device and inode of `file`, which a flat file written anew (and
/// renamed over the old one) changes.
#[cfg(unix)]
pub(super) fn identity(file: &File) -> Option<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    file.metadata().ok().map(|m| (m.dev(), m.ino()))
}

/// Elsewhere no identity: a file that needs one is not held.
#[cfg(not(unix))]
pub(super) fn identity(_file: &File) -> Option<(u64, u64)> {
    None
}

#[cfg(unix)]
pub(super) fn read_at(file: &File, buf: &mut [u8], offset: u64) -> std::io::Result<()> {
    std::os::unix::fs::FileExt::read_exact_at(file, buf, offset)
}

#[cfg(windows)]
pub(super) fn read_at(file: &File, mut buf: &mut [u8], mut offset: u64) -> std::io::Result<()> {
    while !buf.is_empty() {
        match std::os::windows::fs::FileExt::seek_read(file, buf, offset)? {
            0 => return Err(std::io::ErrorKind::UnexpectedEof.into()),
            n => {
                buf = &mut buf[n..];
                offset += n as u64;
            }
        }
    }
    Ok(())
}

#[cfg(unix)]
pub(super) fn write_at(file: &File, buf: &[u8], offset: u64) -> std::io::Result<()> {
    std::os::unix::fs::FileExt::write_all_at(file, buf, offset)
}

#[cfg(windows)]
pub(super) fn write_at(file: &File, mut buf: &[u8], mut offset: u64) -> std::io::Result<()> {
    while !buf.is_empty() {
        match std::os::windows::fs::FileExt::seek_write(file, buf, offset)? {
            0 => return Err(std::io::ErrorKind::WriteZero.into()),
            n => {
                buf = &buf[n..];
                offset += n as u64;
            }
        }
    }
    Ok(())
}

/// Bytes of the regions the derived files are written in: a huge page
/// (8 KiB in unit tests, so that small files span several). A region
/// filled by one write stays in the page cache as one huge folio (ext4
/// on current kernels), which a mapping takes with one page-table entry
/// and a read finds with one look-up; written in smaller pieces, at
/// offsets a header shifts, it is cached as many small ones.
pub(super) const REGION: u64 = if cfg!(test) { 8 << 10 } else { 2 << 20 };

/// A buffered writer of `file` from byte `at` on that writes out at each
/// [`REGION`] boundary, so that a long write fills whole regions with one
/// write each. What is buffered is written by `flush`, never on drop.
pub(super) struct RegionWriter<'f> {
    file: &'f File,
    /// Where the buffer's first byte goes.
    at: u64,
    buf: Vec<u8>,
}

impl<'f> RegionWriter<'f> {
    pub(super) fn new(file: &'f File, at: u64) -> RegionWriter<'f> {
        RegionWriter {
            file,
            at,
            buf: Vec::new(),
        }
    }

    /// Where what it wrote out ends (what it holds is not counted).
    pub(super) fn written_to(&self) -> u64 {
        self.at
    }
}

impl std::io::Write for RegionWriter<'_> {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        let end = (self.at / REGION + 1) * REGION;
        let room = (end - self.at) as usize - self.buf.len();
        let n = bytes.len().min(room);
        self.buf.extend_from_slice(&bytes[..n]);
        if n == room {
            self.flush()?;
        }
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        write_at(self.file, &self.buf, self.at)?;
        self.at += self.buf.len() as u64;
        self.buf.clear();
        Ok(())
    }
}

/// Threads a scan or a computation is split between: one per core this
/// process may use, at most four, asked once (on Linux the answer reads
/// the cgroup's CPU quota files).
pub(super) fn threads() -> usize {
    static THREADS: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *THREADS.get_or_init(|| {
        std::thread::available_parallelism()
            .map_or(1, usize::from)
            .clamp(1, 4)
    })
}

/// Runs `part(i)` for each `i` below `threads`, part 0 on this thread and
/// each other on a thread of its own (or on this one, after, when no
/// thread is to be had); returns what they returned, in order.
pub(super) fn in_parts<T: Send>(
    threads: usize,
    part: impl Fn(usize) -> std::io::Result<T> + Sync,
) -> std::io::Result<Vec<T>> {
    if threads <= 1 {
        return part(0).map(|s| vec![s]);
    }
    std::thread::scope(|s| {
        let part = &part;
        let spawned: Vec<_> = (1..threads)
            .map(|i| {
                (
                    i,
                    std::thread::Builder::new().spawn_scoped(s, move || part(i)),
                )
            })
            .collect();
        let mut out = vec![part(0)?];
        for (i, handle) in spawned {
            out.push(match handle {
                Ok(h) => h.join().unwrap_or_else(|p| std::panic::resume_unwind(p))?,
                // No thread to be had: this one reads that part too.
                Err(_) => part(i)?,
            });
        }
        Ok(out)
    })
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    use super::*;

    #[test]
    fn a_region_writer_writes_out_at_each_region_boundary() {
        let dir = tempfile::tempdir().expect("tmp");
        let path = dir.path().join("f");
        let file = File::create(&path).expect("create");
        let len = || std::fs::metadata(&path).expect("stat").len();
        let bytes: Vec<u8> = (0..3 * REGION + 500).map(|i| (i % 251) as u8).collect();
        let start = REGION - 10;
        let mut w = RegionWriter::new(&file, start);
        w.write_all(&bytes[..30]).expect("write");
        // The first 10 bytes reached a boundary and went out; the rest wait.
        assert_eq!(len(), REGION);
        w.write_all(&bytes[30..]).expect("write");
        assert_eq!(len(), 4 * REGION, "whole regions out, the tail held");
        w.flush().expect("flush");
        assert_eq!(len(), start + bytes.len() as u64);
        // A write after a flush goes on where it ended; dropping the
        // writer writes nothing.
        let mut w = RegionWriter::new(&file, start + bytes.len() as u64);
        w.write_all(&[7; 9]).expect("write");
        drop(w);
        assert_eq!(len(), start + bytes.len() as u64);
        let got = std::fs::read(&path).expect("read");
        assert_eq!(&got[start as usize..], &bytes[..]);
    }
}
