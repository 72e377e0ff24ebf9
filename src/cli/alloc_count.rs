//! The `radkit` binary's allocator: jemalloc (the `jemalloc` feature, on by default; else the
//! system's), counting the allocations each thread makes for `radkit bench machine` (allocations
//! per step of the task machine). A program built on `radkit::cli` gets the same by making
//! [`CountingAllocator`] its global allocator, as the `radkit` binary does; each allocation then
//! costs one increment of a thread-local counter on top of the allocator's work.

use std::alloc::{GlobalAlloc, Layout};
use std::cell::Cell;
use std::sync::atomic::{AtomicBool, Ordering};

/// jemalloc with the `jemalloc` feature, the system allocator without it, counting each thread's
/// allocations (`alloc`, `alloc_zeroed`, `realloc`). Install it with `#[global_allocator]`.
pub struct CountingAllocator;

/// What [`CountingAllocator`] forwards to.
#[cfg(feature = "jemalloc")]
const INNER: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;
#[cfg(not(feature = "jemalloc"))]
const INNER: std::alloc::System = std::alloc::System;

thread_local! {
    static ALLOCATIONS: Cell<u64> = const { Cell::new(0) };
}

static INSTALLED: AtomicBool = AtomicBool::new(false);

fn count() {
    if !INSTALLED.load(Ordering::Relaxed) {
        INSTALLED.store(true, Ordering::Relaxed);
    }
    // During a thread's teardown the counter may be gone: that allocation is not counted.
    let _ = ALLOCATIONS.try_with(|n| n.set(n.get() + 1));
}

// SAFETY: every method forwards to `INNER` with the caller's arguments unchanged; counting
// touches only a thread-local `Cell` and an atomic flag, and never allocates.
unsafe impl GlobalAlloc for CountingAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count();
        // SAFETY: forwarded unchanged (the caller upholds `GlobalAlloc::alloc`'s contract).
        unsafe { INNER.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        count();
        // SAFETY: as above.
        unsafe { INNER.alloc_zeroed(layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count();
        // SAFETY: as above.
        unsafe { INNER.realloc(ptr, layout, new_size) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: as above.
        unsafe { INNER.dealloc(ptr, layout) }
    }
}

/// The allocations the calling thread has made so far, or `None` when [`CountingAllocator`] is
/// not the program's allocator.
pub fn thread_allocations() -> Option<u64> {
    INSTALLED
        .load(Ordering::Relaxed)
        .then(|| ALLOCATIONS.with(Cell::get))
}
