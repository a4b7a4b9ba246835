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
//!
//! The daemon (`cairn serve`) does both: it answers searches all day and
//! now and then reads a backlog. With the fixed 256 KiB threshold every
//! search's larger buffers were mapped and unmapped, and the top of each
//! heap trimmed after them, so each question faulted its memory in again:
//! about 700 page faults a question at 10 GB of history, a fifth of the
//! daemon's CPU for it. So the daemon maps only blocks of 4 MiB or more
//! and keeps up to 16 MiB free at the top of a heap (a question: about 40
//! faults; daemon CPU per question 8–20% less in four comparisons; its own
//! memory after searches about 9 MB more), and gives back what a backlog
//! took once the passes have read it ([`release`], called by the daemon
//! through `DaemonConfig::after_backlog`; after a first index of 1 GB its
//! own memory went from 145 to 31 MB).

/// What the process will do, which decides how its heap is set up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Use {
    /// Reads a little and exits.
    ShortRead,
    /// Runs long or handles large data: index passes, the MCP server.
    LongOrLarge,
    /// The daemon: answers searches between passes.
    Serve,
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

/// For [`Use::Serve`]: the mapping threshold, and the free memory a heap
/// keeps at its top.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
const SERVE: (libc::c_int, libc::c_int) = (4 << 20, 16 << 20);

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
            Use::Serve => {
                libc::mallopt(libc::M_MMAP_THRESHOLD, SERVE.0);
                libc::mallopt(libc::M_TRIM_THRESHOLD, SERVE.1);
            }
        }
    }
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    let _ = what;
}

/// Gives the free memory of every heap back to the system (for
/// [`Use::Serve`], after a backlog). Does nothing with another C library
/// or system.
pub fn release() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: `malloc_trim` only returns free memory of the allocator's
    // own heaps to the system; it takes the heaps' locks, so it is safe to
    // call from any thread at any time.
    #[allow(unsafe_code)]
    unsafe {
        libc::malloc_trim(0);
    }
}
