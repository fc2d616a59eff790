//! Draining and terminating a node as a resumable state machine. (Being written.)

use serde::{Deserialize, Serialize};

/// Drain progress persisted on the claim.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct DrainState {}
