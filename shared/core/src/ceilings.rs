//! The input sizes Dovetail supports, in one place, and the error that names one when an input
//! goes over it.
//!
//! Every reader of outside input checks the ceiling that applies *before* it spends memory on the
//! input: a file's size before reading it, a controller's `replicas` before making its pods, a
//! message's length before parsing it. Going over is an error naming the input, the field and
//! the ceiling (`docs/operations.md#supported-ceilings` lists them for people), never an
//! allocation the kernel ends with an out-of-memory kill.
//!
//! The values are generous: ten times what the benchmarks exercise, or the limit of the service
//! the input comes through, so a real cluster never meets them and a typo
//! (`replicas: 100000000`) or a hostile input meets them at once.

use std::fmt;

use thiserror::Error;

/// One supported ceiling: at most `max` of a unit, per something.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ceiling {
    pub max: u64,
    /// `pods`, `objects`, `bytes`, …: what is counted.
    pub unit: &'static str,
    /// `per plan`, `per manifest file`, …: what it is counted in.
    pub per: &'static str,
}

/// Pods one `dovetail plan` or one simulated cluster holds, counting the pods that controllers
/// expand into: the scale benchmarks go to 100,000 pods (5,000 nodes), so this is ten times that.
/// The core model of a pod takes about a kilobyte, so a plan at the ceiling needs a few GiB.
pub const PODS_PER_PLAN: Ceiling = Ceiling { max: 1_000_000, unit: "pods", per: "per plan" };

/// Objects (documents, and the items of `kind: List` documents) in one manifest file: one per pod
/// of a `kubectl get -o yaml` dump at [`PODS_PER_PLAN`].
pub const OBJECTS_PER_MANIFEST: Ceiling = Ceiling { max: 1_000_000, unit: "objects", per: "per manifest file" };

/// Bytes of one manifest file (or of stdin): room for a `kubectl get -o yaml` dump of the largest
/// benchmark cluster (100,000 pods of a few KiB of YAML each, managedFields included). The loader
/// holds several times the text while it decodes, so much larger files would not fit in memory
/// anyway; they are refused before a byte is read.
pub const MANIFEST_BYTES: Ceiling = Ceiling { max: 512 << 20, unit: "bytes", per: "per manifest file" };

/// Bytes of one `dovetail simulate` scenario file (its own text; the manifest files it names are
/// held to [`MANIFEST_BYTES`] each). The built-in scenarios are a few KiB.
pub const SCENARIO_BYTES: Ceiling = Ceiling { max: 16 << 20, unit: "bytes", per: "per scenario file" };

/// Bytes of one SQS message body the functions parse: SQS's default `MaximumMessageSize`, which
/// Dovetail's queues keep (the forwarder's doorbells and EventBridge's EC2 events are a few hundred
/// bytes). A queue raised to SQS's 1 MiB maximum would still not get larger bodies parsed.
pub const QUEUE_MESSAGE_BYTES: Ceiling = Ceiling { max: 256 << 10, unit: "bytes", per: "per queue message" };

/// Bytes of one AdmissionReview the forwarder reads: kube-apiserver's own limit on a request
/// body (3 MiB). An UPDATE review carries the object twice (`object`, `oldObject`), so a pod over
/// about 1.5 MiB makes a review over the ceiling: the forwarder answers 413, the API server
/// admits the change anyway (`failurePolicy: Ignore`) and the sweeper finds the pod.
pub const ADMISSION_REVIEW_BYTES: Ceiling = Ceiling { max: 3 << 20, unit: "bytes", per: "per AdmissionReview" };

/// One resource amount in a pod or a node (a request, a limit, allocatable), in the core's units:
/// millicores for cpu, bytes for memory and storage, units for the rest. 2^50 is over a million
/// cores, or 1 PiB of memory: far above any EC2 instance (the largest has 32 TiB), and low
/// enough that 8,192 such amounts (a pod's containers, a node's pods) add up without overflowing
/// the core's 64-bit counters, which a value like `memory: 4Ei` twice in one pod would.
pub const MAX_RESOURCE_AMOUNT: i64 = 1 << 50;

/// [`MAX_RESOURCE_AMOUNT`] as people read it, for messages.
pub const MAX_RESOURCE_AMOUNT_TEXT: &str = "1Pi (2^50 bytes, or 2^50 millicores of cpu)";

/// An input over one of the ceilings: displays as `1200000 pods is more than the supported
/// 1000000 pods per plan`, for the caller to prefix with the input and the field.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub struct OverCeiling {
    pub ceiling: Ceiling,
    /// What the input has (or, for a stream cut off at the ceiling, at least this much).
    pub found: u64,
    /// Of `found`, how much came before this object (pods of earlier controllers), when the
    /// ceiling counts a whole input and this object is where it went over.
    pub before: u64,
}

impl Ceiling {
    /// `Ok` when `found` is within the ceiling.
    pub fn check(&self, found: u64) -> Result<(), OverCeiling> {
        self.check_total(0, found)
    }

    /// `Ok` when `before` (counted earlier in the same input) plus `found` is within the ceiling.
    pub fn check_total(&self, before: u64, found: u64) -> Result<(), OverCeiling> {
        let total = before.saturating_add(found);
        if total > self.max {
            return Err(OverCeiling { ceiling: *self, found: total, before });
        }
        Ok(())
    }

    fn amount(&self, n: u64) -> String {
        if self.unit != "bytes" {
            return format!("{n} {}", self.unit);
        }
        for (suffix, shift) in [("GiB", 30), ("MiB", 20), ("KiB", 10)] {
            if n >= 1 << shift {
                let whole = n % (1 << shift) == 0;
                let value = n as f64 / (1u64 << shift) as f64;
                return if whole {
                    format!("{} {suffix}", n >> shift)
                } else {
                    format!("{n} bytes ({value:.1} {suffix})")
                };
            }
        }
        format!("{n} bytes")
    }
}

impl fmt::Display for Ceiling {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.amount(self.max), self.per)
    }
}

impl fmt::Display for OverCeiling {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} is more than the supported {}", self.ceiling.amount(self.found), self.ceiling)?;
        if self.before > 0 {
            let own = self.found - self.before;
            write!(
                f,
                " (this object adds {} to {} before it)",
                self.ceiling.amount(own),
                self.ceiling.amount(self.before)
            )?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn within_and_over() {
        assert_eq!(PODS_PER_PLAN.check(1_000_000), Ok(()));
        let over = PODS_PER_PLAN.check(100_000_000).unwrap_err();
        assert_eq!(over.to_string(), "100000000 pods is more than the supported 1000000 pods per plan");
        let total = PODS_PER_PLAN.check_total(600_000, 600_000).unwrap_err();
        assert_eq!(
            total.to_string(),
            "1200000 pods is more than the supported 1000000 pods per plan (this object adds 600000 pods to 600000 pods \
             before it)"
        );
        assert!(PODS_PER_PLAN.check_total(u64::MAX, 2).is_err(), "saturates instead of wrapping");
    }

    #[test]
    fn bytes_read_as_people_write_them() {
        assert_eq!(MANIFEST_BYTES.to_string(), "512 MiB per manifest file");
        let over = MANIFEST_BYTES.check((512 << 20) + (100 << 20) + (1 << 19)).unwrap_err();
        assert_eq!(
            over.to_string(),
            "642252800 bytes (612.5 MiB) is more than the supported 512 MiB per manifest file"
        );
        assert_eq!(
            QUEUE_MESSAGE_BYTES.check(300_000).unwrap_err().to_string(),
            "300000 bytes (293.0 KiB) is more than the supported 256 KiB per queue message"
        );
        assert_eq!(ADMISSION_REVIEW_BYTES.to_string(), "3 MiB per AdmissionReview");
    }
}
