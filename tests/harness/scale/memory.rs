//! The process's memory around one invocation, from `/proc/self/status` (Linux only): resident set
//! size now and its high-water mark. The high-water mark only rises, so the rig resets it to the
//! current RSS (`/proc/self/clear_refs`, value 5) just before each invocation; what the invocation
//! peaked at is then the mark after it. The rig's own data (its clients, the proxy's buffers, its
//! runtime) are in the RSS too: the growth over the RSS before is the invocation's part.

use std::io;

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
