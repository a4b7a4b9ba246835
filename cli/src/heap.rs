//! How the process's C heap (glibc malloc) hands memory back to the
//! system. Set once, first thing in `main`; never in the library, whose
//! tests share a process.
//!
//! glibc serves blocks above a threshold with their own mappings, which go
//! back to the system when freed. By default that threshold moves up to
//! the size of the largest such block freed so far (up to 32 MiB), so after
//! the first multi-megabyte buffer of an index pass, every later one comes
//! from the heap of the thread that asked for it, and what a busy moment
//! took stays with the process. Fixing the threshold keeps large buffers
//! (file chunks, long tool outputs, batches) out of the heaps.
//!
//! Measured on a cold `cairn index` of the 1 GB benchmark corpus: peak RSS
//! 101–127 MB over sixteen runs with the threshold fixed, against 112–166
//! MB over eleven with glibc's default, at the same speed.

/// Blocks this large or larger get their own mapping.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
const MMAP_THRESHOLD: libc::c_int = 256 * 1024;

/// Fixes glibc's mapping threshold (see the module documentation). Does
/// nothing with another C library or system.
pub fn settle() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: `mallopt` only changes malloc's tuning parameters; it is
    // called before any thread of this process is started, and an unknown
    // or refused setting returns 0, which leaves the default in place.
    #[allow(unsafe_code)]
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, MMAP_THRESHOLD);
    }
}
