//! Giving freed memory back to the system. glibc's allocator keeps the pages a burst of clients
//! used (thousands of streams, a large request) in its arenas after they are freed, so a server's
//! resident memory would stay at its peak; `malloc_trim` returns them. Elsewhere this does nothing.

use std::time::Duration;

/// How often `radkit serve` returns freed memory.
pub const TRIM_EVERY: Duration = Duration::from_secs(10);

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
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallinfo2 only reads the allocator's counters and returns them by value.
    let (heap_in_use, heap_held) = {
        let info = unsafe { libc::mallinfo2() };
        (
            Some(info.uordblks as u64 + info.hblkhd as u64),
            Some(info.arena as u64 + info.hblkhd as u64),
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
