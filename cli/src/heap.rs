//! How the process's C heap (glibc malloc) takes memory from the system
//! and gives it back. Set once in `main`, after parsing the arguments and
//! before any thread starts; never in the library, whose tests share a
//! process. With another C library or system nothing here does anything.
//!
//! - [`Use::LongOrLarge`] (index passes, the MCP server): blocks of 256 KiB
//!   or more get their own mappings, so a pass's large buffers go back to
//!   the system when freed instead of staying in a thread's heap.
//! - [`Use::ShortRead`] (a search and other short commands): nothing is
//!   given back before the exit, since a page given back is faulted in
//!   again by the next buffer of that size.
//! - [`Use::Serve`] (the daemon): only blocks of 4 MiB or more are mapped
//!   and up to 16 MiB stay free at the top of a heap, so searches reuse
//!   their memory; [`release`] gives back what a backlog took once the
//!   passes have read it.
//!
//! The measurements behind these thresholds are in the commits that set
//! them.

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
