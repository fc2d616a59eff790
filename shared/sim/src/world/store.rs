//! DynamoDB in memory: NodeClaims with versioned conditional writes, the unavailable-offerings
//! cache, and the provisioning lease with its dirty flag — the semantics `ports::Store` documents.

use std::collections::{BTreeMap, BTreeSet};
use std::future::{ready, Future};
use std::time::Duration;

use dovetail_core::catalog::OfferingKey;
use dovetail_core::nodeclaim::{NodeClaim, Phase};
use dovetail_core::reconcile::ports::{Lease as LeaseAnswer, PortError, PortResult, Store};
use dovetail_core::time::Time;

use super::World;

/// The provisioning lease as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lease {
    pub holder: String,
    pub expires: Time,
    /// Someone asked while it was held: the holder reconciles once more before releasing.
    pub dirty: bool,
}

#[derive(Debug, Default)]
pub struct StoreState {
    pub claims: BTreeMap<String, NodeClaim>,
    pub unavailable: BTreeMap<OfferingKey, Time>,
    pub lease: Option<Lease>,
    /// Conditional writes refused (version conflicts), for the report.
    pub conflicts: u64,
}

impl StoreState {
    /// Writes `claim` if the stored version is `claim.version − 1` (or, for version 0, if no claim
    /// of that name exists). Returns the claim it replaced.
    pub fn put_claim(&mut self, claim: &NodeClaim) -> PortResult<Option<NodeClaim>> {
        let stored = self.claims.get(&claim.name);
        let ok = match (claim.version, stored) {
            (0, None) => true,
            (0, Some(_)) => false,
            (v, Some(s)) => s.version + 1 == v,
            (_, None) => false,
        };
        if !ok {
            self.conflicts += 1;
            let held = stored.map_or_else(|| "none".to_string(), |s| s.version.to_string());
            return Err(PortError::Conflict(format!(
                "NodeClaim {}: write of version {} over stored version {held}",
                claim.name, claim.version
            )));
        }
        Ok(self.claims.insert(claim.name.clone(), claim.clone()))
    }

    /// Deletes only if the stored version is `version`; absent is success.
    pub fn delete_claim(&mut self, name: &str, version: u64) -> PortResult<()> {
        match self.claims.get(name) {
            None => Ok(()),
            Some(c) if c.version == version => {
                self.claims.remove(name);
                Ok(())
            }
            Some(c) => {
                self.conflicts += 1;
                Err(PortError::Conflict(format!(
                    "NodeClaim {name}: delete of version {version}, stored version {}",
                    c.version
                )))
            }
        }
    }

    pub fn unavailable_at(&self, now: Time) -> BTreeSet<OfferingKey> {
        self.unavailable.iter().filter(|(_, until)| **until > now).map(|(k, _)| k.clone()).collect()
    }

    pub fn mark_unavailable(&mut self, offering: &OfferingKey, until: Time) {
        let e = self.unavailable.entry(offering.clone()).or_insert(until);
        *e = (*e).max(until);
    }

    pub fn lease(&mut self, holder: &str, now: Time, ttl: Duration) -> LeaseAnswer {
        match &mut self.lease {
            Some(l) if l.holder != holder && l.expires > now => {
                l.dirty = true;
                LeaseAnswer::Busy
            }
            Some(l) if l.holder == holder && l.expires > now => {
                l.expires = now.plus(ttl);
                LeaseAnswer::Acquired
            }
            _ => {
                self.lease = Some(Lease { holder: holder.to_string(), expires: now.plus(ttl), dirty: false });
                LeaseAnswer::Acquired
            }
        }
    }

    /// Releases the lease unless it was marked dirty meanwhile; then it stays `holder`'s, renewed,
    /// and the answer is `true`: reconcile once more.
    pub fn release(&mut self, holder: &str, now: Time, ttl: Duration) -> bool {
        match &mut self.lease {
            Some(l) if l.holder == holder && l.dirty => {
                l.dirty = false;
                l.expires = now.plus(ttl);
                true
            }
            Some(l) if l.holder == holder => {
                self.lease = None;
                false
            }
            _ => false,
        }
    }
}

/// The `Store` port over the world. Claim writes are watched for the report: a claim that starts
/// being disrupted is counted under its reason.
#[derive(Clone)]
pub struct SimStore(pub World);

impl Store for SimStore {
    /// Live claims only, as the port allows and DynamoDB's store does, so that the simulator's
    /// runs check that no decision needs Terminated claims. The world keeps them (its tests and
    /// `claim(name)` read them).
    fn claims(&self) -> impl Future<Output = PortResult<Vec<NodeClaim>>> + Send {
        let s = self.0.lock();
        ready(Ok(s.store.claims.values().filter(|c| c.phase != Phase::Terminated).cloned().collect()))
    }

    fn claim(&self, name: &str) -> impl Future<Output = PortResult<Option<NodeClaim>>> + Send {
        ready(Ok(self.0.lock().store.claims.get(name).cloned()))
    }

    fn put_claim(&self, claim: &NodeClaim) -> impl Future<Output = PortResult<()>> + Send {
        let mut s = self.0.lock();
        let r = s.store.put_claim(claim).map(|before| {
            let was = before.as_ref().and_then(|b| b.disruption.as_ref()).map(|d| d.reason);
            if let Some(d) = claim.disruption.as_ref().filter(|d| Some(d.reason) != was) {
                *s.stats.disruptions.entry(d.reason.to_string()).or_default() += 1;
            }
        });
        ready(r)
    }

    fn delete_claim(&self, name: &str, version: u64) -> impl Future<Output = PortResult<()>> + Send {
        ready(self.0.lock().store.delete_claim(name, version))
    }

    fn unavailable(&self, now: Time) -> impl Future<Output = PortResult<BTreeSet<OfferingKey>>> + Send {
        ready(Ok(self.0.lock().store.unavailable_at(now)))
    }

    fn mark_unavailable(&self, offering: &OfferingKey, until: Time) -> impl Future<Output = PortResult<()>> + Send {
        self.0.lock().store.mark_unavailable(offering, until);
        ready(Ok(()))
    }

    fn lease(&self, holder: &str, now: Time, ttl: Duration) -> impl Future<Output = PortResult<LeaseAnswer>> + Send {
        ready(Ok(self.0.lock().store.lease(holder, now, ttl)))
    }

    fn release(&self, holder: &str, now: Time, ttl: Duration) -> impl Future<Output = PortResult<bool>> + Send {
        ready(Ok(self.0.lock().store.release(holder, now, ttl)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn claim(name: &str, version: u64) -> NodeClaim {
        let mut c = NodeClaim::launching(name, "default", "default", Time(0));
        c.version = version;
        c
    }

    #[test]
    fn conditional_writes() {
        let mut s = StoreState::default();
        assert!(s.put_claim(&claim("a", 0)).is_ok());
        assert!(matches!(s.put_claim(&claim("a", 0)), Err(PortError::Conflict(_))));
        assert!(matches!(s.put_claim(&claim("a", 2)), Err(PortError::Conflict(_))));
        assert!(s.put_claim(&claim("a", 1)).is_ok());
        assert!(matches!(s.put_claim(&claim("b", 3)), Err(PortError::Conflict(_))));
        assert!(matches!(s.delete_claim("a", 0), Err(PortError::Conflict(_))));
        assert!(s.delete_claim("a", 1).is_ok());
        assert!(s.delete_claim("a", 1).is_ok(), "absent is success");
        assert_eq!(s.conflicts, 4);
    }

    #[test]
    fn lease_and_dirty_flag() {
        let ttl = Duration::from_secs(60);
        let mut s = StoreState::default();
        assert_eq!(s.lease("one", Time(0), ttl), LeaseAnswer::Acquired);
        assert_eq!(s.lease("two", Time(1_000), ttl), LeaseAnswer::Busy);
        // Dirty: the holder keeps it and goes round once more.
        assert!(s.release("one", Time(2_000), ttl));
        assert!(!s.release("one", Time(3_000), ttl));
        assert_eq!(s.lease("two", Time(4_000), ttl), LeaseAnswer::Acquired);
        // An expired lease is anyone's.
        assert_eq!(s.lease("three", Time(4_000 + 61_000), ttl), LeaseAnswer::Acquired);
        assert!(!s.release("two", Time(70_000), ttl), "no longer two's");
    }

    #[test]
    fn unavailable_offerings_expire() {
        let mut s = StoreState::default();
        let key = OfferingKey {
            instance_type: "m5.large".into(),
            zone: "us-east-1a".into(),
            capacity_type: dovetail_core::catalog::CapacityType::Spot,
        };
        s.mark_unavailable(&key, Time(10_000));
        assert!(s.unavailable_at(Time(5_000)).contains(&key));
        assert!(s.unavailable_at(Time(10_000)).is_empty());
    }
}
