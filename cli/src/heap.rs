//! How the process's C heap (glibc malloc) takes memory from the system
//! and hands it back. Set once in `main`, after parsing the arguments and
//! before any thread starts; never in the library, whose tests share a
//! process.
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
//!
//! A command that reads a little and exits (a search) wants the opposite:
//! every page the system hands over costs a fault, and in a virtual
//! machine a fault is dear (a fresh search at 1 GB took 1,900–2,800 of
//! them). A block given back on `free` (its own mapping, or the top of a
//! heap trimmed) is faulted in again by the next block of that size, and
//! a search allocates and frees several of them, per word of the question.
//! So for those commands nothing is given back before the exit: a fresh
//! search at 1 GB took 0.2–1.3 ms less.

/// What the process will do, which decides how its heap is set up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Use {
    /// Reads a little and exits.
    ShortRead,
    /// Runs long or handles large data: index passes, the daemon.
    LongOrLarge,
}

/// Blocks this large or larger get their own mapping, for
/// [`Use::LongOrLarge`].
#[cfg(all(target_os = "linux", target_env = "gnu"))]
const MMAP_THRESHOLD: libc::c_int = 256 * 1024;

/// For [`Use::ShortRead`]: the largest mapping threshold glibc accepts on
/// 64-bit systems (half its 64 MiB heap size), and a trim threshold above
/// anything such a command frees.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
const KEEP: (libc::c_int, libc::c_int) = (32 << 20, 256 << 20);

/// Sets glibc's thresholds for `what` (see the module documentation). Does
/// nothing with another C library or system.
pub fn settle(what: Use) {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: `mallopt` only changes malloc's tuning parameters; it is
    // called before any thread of this process is started, and an unknown
    // or refused setting returns 0, which leaves the default in place.
    #[allow(unsafe_code)]
    unsafe {
        match what {
            Use::LongOrLarge => {
                libc::mallopt(libc::M_MMAP_THRESHOLD, MMAP_THRESHOLD);
            }
            Use::ShortRead => {
                libc::mallopt(libc::M_MMAP_THRESHOLD, KEEP.0);
                libc::mallopt(libc::M_TRIM_THRESHOLD, KEEP.1);
            }
        }
    }
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    let _ = what;
}
