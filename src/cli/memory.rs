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
