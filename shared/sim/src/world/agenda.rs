//! What the world will do by itself, and when: a time-ordered agenda. Ties at one instant keep
//! the order they were scheduled in, so a run is the same every time.

use std::collections::BTreeMap;

use dovetail_core::time::Time;

/// Something that happens without anyone asking at the moment it happens. Each names its subject
/// by id and re-checks it when it comes due: an instance terminated meanwhile does not boot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Happening {
    /// The instance finished booting: the kubelet registers its Node, Ready.
    Booted { instance: String },
    /// The agent that owns the node's startup taints (a CNI, a GPU operator) removes them.
    StartupTaintsGone { node: String },
    /// EC2 says the spot instance is at elevated risk.
    RebalanceRecommendation { instance: String },
    /// The two-minute spot interruption warning.
    SpotWarning { instance: String },
    /// EC2 takes the spot instance back.
    SpotReclaim { instance: String },
    /// EC2 warns that the Capacity Block ends in 40 minutes (once per block, whatever runs in it).
    BlockExpiring { reservation: String },
    /// The Capacity Block the instance runs in ends: EC2 takes the instance back.
    BlockEnded { instance: String },
    /// A shutting-down instance is now terminated.
    InstanceGone { instance: String },
    /// The cloud node lifecycle controller deletes a Node whose instance no longer exists.
    NodeLost { node: String },
    /// A terminating pod has stopped (by uid: a later pod of the same name is another pod).
    PodStopped { uid: u64 },
    /// A Job's pod ran to completion.
    PodSucceeded { uid: u64 },
}

#[derive(Debug, Default)]
pub(super) struct Agenda {
    items: BTreeMap<(Time, u64), Happening>,
    seq: u64,
}

impl Agenda {
    pub fn push(&mut self, at: Time, h: Happening) {
        self.seq += 1;
        self.items.insert((at, self.seq), h);
    }

    pub fn next_time(&self) -> Option<Time> {
        self.items.keys().next().map(|(t, _)| *t)
    }

    /// The earliest happening due at or before `t`.
    pub fn pop_due(&mut self, t: Time) -> Option<Happening> {
        let key = *self.items.keys().next().filter(|(at, _)| *at <= t)?;
        self.items.remove(&key)
    }
}
