//! The process's memory around one invocation, from `/proc/self/status` (Linux only): resident set
//! size now and its high-water mark. The high-water mark only rises, so the rig resets it to the
//! current RSS (`/proc/self/clear_refs`, value 5) just before each invocation; what the invocation
//! peaked at is then the mark after it. The rig's own data (its clients, the proxy's buffers, its
//! runtime) are in the RSS too: the growth over the RSS before is the invocation's part.
//!
//! The process holds all three functions, each with its own warm snapshot, where Lambda gives
//! each a process of its own. So the rig's binary also installs [`Counting`], the system allocator
//! counting the heap bytes in use and their peak, by which the rig tells each function's part:
//! what it holds between invocations, and what it peaks at during one ([`super::Row`]).

use std::alloc::{GlobalAlloc, Layout, System};
use std::io;
use std::sync::atomic::{AtomicUsize, Ordering};

/// Resident memory in KiB.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Memory {
    /// `VmRSS`.
    pub rss_kib: u64,
    /// `VmHWM`: the peak since the last reset.
    pub peak_kib: u64,
}

/// Starts a new peak from the current RSS.
pub fn reset_peak() -> io::Result<()> {
    std::fs::write("/proc/self/clear_refs", "5")
}

/// The process's resident memory now; zeros where `/proc` does not say.
pub fn now() -> Memory {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    Memory { rss_kib: field(&status, "VmRSS:"), peak_kib: field(&status, "VmHWM:") }
}

/// A `/proc/<pid>/status` field in kB, e.g. `VmHWM:\t  123456 kB`.
fn field(status: &str, name: &str) -> u64 {
    status
        .lines()
        .find_map(|line| line.strip_prefix(name))
        .and_then(|value| value.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

/// The system allocator, counting: install it with `#[global_allocator]` in a binary.
pub struct Counting;

static IN_USE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

fn grew(bytes: usize) {
    let now = IN_USE.fetch_add(bytes, Ordering::Relaxed) + bytes;
    PEAK.fetch_max(now, Ordering::Relaxed);
}

fn shrank(bytes: usize) {
    IN_USE.fetch_sub(bytes, Ordering::Relaxed);
}

// SAFETY: every call goes to `System` with the caller's arguments unchanged; the counters only
// observe the sizes.
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

/// Heap bytes in use, and their peak since [`reset_heap_peak`]; `None` when [`Counting`] is not
/// the binary's allocator (the integration tests).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Heap {
    pub in_use: usize,
    pub peak: usize,
}

pub fn heap() -> Option<Heap> {
    let in_use = IN_USE.load(Ordering::Relaxed);
    (in_use > 0).then(|| Heap { in_use, peak: PEAK.load(Ordering::Relaxed).max(in_use) })
}

/// Starts a new heap peak from the bytes in use now.
pub fn reset_heap_peak() {
    PEAK.store(IN_USE.load(Ordering::Relaxed), Ordering::Relaxed);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_are_read_in_kib() {
        let status = "Name:\tscale\nVmHWM:\t  204800 kB\nVmRSS:\t   102400 kB\n";
        assert_eq!(field(status, "VmHWM:"), 204_800);
        assert_eq!(field(status, "VmRSS:"), 102_400);
        assert_eq!(field(status, "VmSwap:"), 0);
    }

    #[test]
    fn the_counting_allocator_follows_its_blocks_and_their_peak() {
        // Not this binary's allocator: only these calls move its counters.
        let base = IN_USE.load(Ordering::Relaxed);
        reset_heap_peak();
        let small = Layout::from_size_align(1 << 20, 8).unwrap();
        unsafe {
            let p = Counting.alloc(small);
            assert_eq!(IN_USE.load(Ordering::Relaxed), base + (1 << 20));
            let q = Counting.realloc(p, small, 3 << 20);
            assert_eq!(IN_USE.load(Ordering::Relaxed), base + (3 << 20));
            Counting.dealloc(q, Layout::from_size_align(3 << 20, 8).unwrap());
        }
        assert_eq!(IN_USE.load(Ordering::Relaxed), base);
        assert_eq!(PEAK.load(Ordering::Relaxed), base + (4 << 20), "old and new block, while moving");
        reset_heap_peak();
        assert_eq!(PEAK.load(Ordering::Relaxed), base);
    }

    #[test]
    fn a_reset_brings_the_peak_down_to_the_rss() {
        let grown: Vec<u8> = vec![1; 64 << 20];
        assert!(grown.iter().all(|b| *b == 1));
        drop(grown);
        reset_peak().unwrap();
        let after = now();
        // Within a few pages: other threads may allocate in between.
        assert!(after.peak_kib <= after.rss_kib + 4096, "{after:?}");
    }
}
