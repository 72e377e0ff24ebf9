//! Giving freed memory back to the system. glibc's allocator keeps the pages a burst of clients
//! used (thousands of streams, a large request) in its arenas after they are freed, so a server's
//! resident memory would stay at its peak; `malloc_trim` returns them. Elsewhere this does nothing.

use std::time::Duration;

/// How often `radkit serve` returns freed memory.
pub const TRIM_EVERY: Duration = Duration::from_secs(10);

/// Most glibc malloc arenas the process uses.
///
/// glibc gives threads their own arenas, up to eight per core, and never gives an arena back: a
/// server whose store reads run on a pool of short-lived blocking threads spreads its allocations
/// over all of them, and its resident memory creeps up with the free space stranded in each (`bench
/// soak`: 39 -> 69 MB over 10 minutes with no leak; heaptrack finds all but ~100 KB freed at exit).
/// Two arenas keep that space in two places, where it is reused; the cost is some contention
/// between threads allocating at once, which the server's two-core benchmarks do not show.
const ARENAS: i32 = 2;

/// Cap the allocator's arenas at [`ARENAS`] (glibc; elsewhere nothing). Call before threads start.
/// An operator's `MALLOC_ARENA_MAX` (or `GLIBC_TUNABLES`) wins.
pub fn cap_arenas() {
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

/// Return the allocator's free pages to the system.
pub fn release_free_memory() {
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

/// Where the process's memory is, in bytes, for benchmarks: the allocator's heap in use and held
/// from the system (glibc's `mallinfo2`; `None` elsewhere), and what SQLite holds (its page caches,
/// statements and connections; `sqlite3_memory_used`).
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
    let (heap_in_use, heap_held) = (None, None);
    // SAFETY: sqlite3_memory_used reads SQLite's own counter; it takes no argument.
    let sqlite = unsafe { rusqlite::ffi::sqlite3_memory_used() };
    MemoryUse {
        heap_in_use,
        heap_held,
        sqlite: u64::try_from(sqlite).unwrap_or(0),
    }
}
