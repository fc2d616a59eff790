//! Heap use per thread, for the harness's memory bound: a counting allocator over the system's.
//!
//! Counts are per thread because libtest runs the targets side by side in one process; each case
//! runs on one thread, so the peak of its thread is the peak of the case. Memory freed on another
//! thread than the one that allocated it is not counted back (the parsers do not do that).

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

/// The allocator of every binary that links this crate (its tests, and the unit tests of the
/// crates that run a target).
#[global_allocator]
static ALLOCATOR: Counting = Counting;

struct Counting;

thread_local! {
    // `const` initialisers with no destructor: reading them never allocates, so the allocator may.
    static LIVE: Cell<usize> = const { Cell::new(0) };
    static PEAK: Cell<usize> = const { Cell::new(0) };
}

fn grew(bytes: usize) {
    let _ = LIVE.try_with(|live| {
        let now = live.get().saturating_add(bytes);
        live.set(now);
        let _ = PEAK.try_with(|peak| peak.set(peak.get().max(now)));
    });
}

fn shrank(bytes: usize) {
    let _ = LIVE.try_with(|live| live.set(live.get().saturating_sub(bytes)));
}

// SAFETY: every call is forwarded to the system allocator unchanged; only counters move.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            grew(layout.size());
        }
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        let p = unsafe { System.alloc_zeroed(layout) };
        if !p.is_null() {
            grew(layout.size());
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) };
        shrank(layout.size());
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            // Grow before shrinking: the peak must see the moment both blocks may exist.
            grew(new_size);
            shrank(layout.size());
        }
        p
    }
}

/// Starts measuring on this thread: the peak is reset to what is live now.
pub fn start() -> usize {
    let live = LIVE.with(Cell::get);
    PEAK.with(|peak| peak.set(live));
    live
}

/// The most this thread held above `start`'s figure since that call.
pub fn peak_since(start: usize) -> usize {
    PEAK.with(Cell::get).saturating_sub(start)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_peak_counts_what_a_case_held_even_if_freed() {
        let base = start();
        let big = vec![0u8; 3 << 20];
        drop(big);
        let small = vec![0u8; 1024];
        let peak = peak_since(base);
        assert!((3 << 20..4 << 20).contains(&peak), "{peak}");
        drop(small);
        let again = start();
        assert!(peak_since(again) < 1024);
    }
}
