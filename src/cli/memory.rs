//! Giving freed memory back to the system. An allocator keeps the pages a burst of clients used
//! (thousands of streams, a large request) after they are freed, so a server's resident memory
//! would stay at its peak. jemalloc (the `jemalloc` feature, the `radkit` binary's allocator)
//! returns them from a background thread of its own a few seconds after they were freed, and at
//! once when asked ([`release_free_memory`]); glibc's allocator, which the program's C libraries
//! (SQLite) use either way and Rust's heap without the feature, returns them on `malloc_trim`.

use std::time::Duration;

/// How often `radkit serve` returns freed memory.
pub const TRIM_EVERY: Duration = Duration::from_secs(10);

/// Most glibc malloc arenas the process uses.
///
/// glibc gives threads their own arenas, up to eight per core, and never gives an arena back: a
/// server whose store reads run on a pool of short-lived blocking threads spreads its allocations
/// over all of them, and its resident memory creeps up with the free space stranded in each (`bench
/// soak`: 39 -> 69 MB over 10 minutes with no leak; heaptrack finds all but ~100 KB freed at exit).
/// Two arenas keep that space in two places, where it is reused; the cost is contention between
/// threads allocating at once, and freeing what another thread allocated (a step's records, a
/// span an exporter thread sends): the reason the `radkit` binary's Rust heap is jemalloc's.
const ARENAS: i32 = 2;

/// Set the allocators up: glibc's arenas capped at [`ARENAS`] (an operator's `MALLOC_ARENA_MAX`, or
/// `GLIBC_TUNABLES`, wins) and jemalloc's background thread started, which returns freed pages
/// as they age (by default jemalloc does that only when a thread allocates again, so an idle
/// server would keep its peak). Call before threads start.
pub fn configure_allocators() {
    #[cfg(feature = "jemalloc")]
    if jemalloc_in_use() {
        // Without the thread (a platform without it), pages are still returned, later.
        let _ = tikv_jemalloc_ctl::background_thread::write(true);
    }
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        let set_by_operator = std::env::var_os("MALLOC_ARENA_MAX").is_some()
            || std::env::var("GLIBC_TUNABLES").is_ok_and(|t| t.contains("arena_max"));
        if !set_by_operator {
            // SAFETY: mallopt only sets an allocator parameter; it takes no pointer.
            unsafe {
                libc::mallopt(libc::M_ARENA_MAX, ARENAS);
            }
        }
    }
}

/// True when jemalloc serves the program's heap: the `jemalloc` feature compiles it in, and the
/// program made [`super::CountingAllocator`] its global allocator (as the `radkit` binary does).
/// A program with an allocator of its own leaves jemalloc unused.
#[cfg(feature = "jemalloc")]
fn jemalloc_in_use() -> bool {
    // Any allocation made through it initialises jemalloc; `epoch` reads its statistics afresh.
    let _ = tikv_jemalloc_ctl::epoch::advance();
    tikv_jemalloc_ctl::stats::allocated::read().is_ok_and(|bytes| bytes > 0)
}

/// Return the allocators' free pages to the system.
pub fn release_free_memory() {
    #[cfg(feature = "jemalloc")]
    if jemalloc_in_use() {
        // `arena.<all>.purge`: every arena's unused dirty pages, now. A control that neither reads
        // nor writes a value, so `mallctl` itself (the `ctl` crate's calls pass a value).
        // SAFETY: the name is a NUL-terminated static string and every other argument is null or
        // zero, as a control that takes no value requires.
        unsafe {
            tikv_jemalloc_sys::mallctl(
                c"arena.4096.purge".as_ptr(),
                std::ptr::null_mut(),
                std::ptr::null_mut(),
                std::ptr::null_mut(),
                0,
            );
        }
    }
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only walks the allocator's own free lists; it takes no pointer.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// Return freed memory every [`TRIM_EVERY`], for as long as the process runs.
pub fn spawn_trimmer() {
    tokio::spawn(async {
        let mut every = tokio::time::interval(TRIM_EVERY);
        every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            every.tick().await;
            tokio::task::spawn_blocking(release_free_memory);
        }
    });
}

/// Where the process's memory is, in bytes, for benchmarks: the allocators' heap in use and held
/// from the system (jemalloc's `stats.allocated` and `stats.resident` when it serves the program,
/// plus glibc's `mallinfo`; `None` where neither can tell), and what SQLite holds (its page caches,
/// statements and connections; `sqlite3_memory_used`), which is in glibc's part.
#[derive(Debug, Clone, Copy, Default)]
pub struct MemoryUse {
    pub heap_in_use: Option<u64>,
    pub heap_held: Option<u64>,
    pub sqlite: u64,
}

/// The process's [`MemoryUse`] now.
pub fn memory_use() -> MemoryUse {
    // `mallinfo`, not `mallinfo2`: the latter needs glibc 2.33 at load time, and every program built
    // with the `cli` feature would then refuse to start on an older system. Its `int` counters wrap
    // past 2 GiB, far beyond what the benchmarks that print them hold.
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallinfo only reads the allocator's counters and returns them by value.
    let (heap_in_use, heap_held) = {
        let info = unsafe { libc::mallinfo() };
        let bytes = |n: libc::c_int| u64::from(n as u32);
        (
            Some(bytes(info.uordblks) + bytes(info.hblkhd)),
            Some(bytes(info.arena) + bytes(info.hblkhd)),
        )
    };
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    let (heap_in_use, heap_held): (Option<u64>, Option<u64>) = (None, None);
    #[cfg(feature = "jemalloc")]
    let (heap_in_use, heap_held) = match jemalloc_in_use() {
        true => {
            let read = |bytes: tikv_jemalloc_ctl::Result<usize>| {
                bytes.ok().and_then(|b| u64::try_from(b).ok()).unwrap_or(0)
            };
            let (in_use, held) = (
                read(tikv_jemalloc_ctl::stats::allocated::read()),
                read(tikv_jemalloc_ctl::stats::resident::read()),
            );
            (
                Some(heap_in_use.unwrap_or(0) + in_use),
                Some(heap_held.unwrap_or(0) + held),
            )
        }
        false => (heap_in_use, heap_held),
    };
    // SAFETY: sqlite3_memory_used reads SQLite's own counter; it takes no argument.
    let sqlite = unsafe { rusqlite::ffi::sqlite3_memory_used() };
    MemoryUse {
        heap_in_use,
        heap_held,
        sqlite: u64::try_from(sqlite).unwrap_or(0),
    }
}
