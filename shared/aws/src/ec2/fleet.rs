//! CreateFleet: the overrides a launch offers EC2, the client token, and what the fleet's errors
//! mean. The choice and the error reading are pure functions tested on data (a local EC2 always
//! takes the first override and never reports capacity errors).

use std::collections::{BTreeMap, BTreeSet};

use aws_sdk_ec2::types::DefaultTargetCapacityType;
use dovetail_core::catalog::Offer;
use dovetail_core::catalog::{CapacityType, OfferingKey, Reservation, ReservationKind};
use dovetail_core::hash::json_hash;

use crate::error::{classify, ErrorKind};

/// CreateFleet error codes that mean "no capacity here now": the offerings they name are
/// unavailable for a while and the claim tries what remains. `ReservationCapacityExceeded`: the
/// reservation is full (launches by others than Dovetail, or a count not yet current).
pub const CAPACITY_ERRORS: [&str; 5] = [
    "InsufficientInstanceCapacity",
    "MaxSpotInstanceCountExceeded",
    "VcpuLimitExceeded",
    "UnfulfillableCapacity",
    "ReservationCapacityExceeded",
];

/// How CreateFleet is asked to buy `capacity` (Karpenter's choice for reserved capacity): the
/// default target capacity type, and for a reservation its kind decides — a Capacity Block is
/// `capacity-block`, an interruptible ODCR `reserved-capacity`, an ODCR `on-demand` (the launch
/// template's reservation target puts it in the reservation).
pub fn target_capacity(capacity: CapacityType, reservation: Option<&Reservation>) -> DefaultTargetCapacityType {
    match (capacity, reservation) {
        (CapacityType::Spot, _) => DefaultTargetCapacityType::Spot,
        (CapacityType::OnDemand, _) | (CapacityType::Reserved, None) => DefaultTargetCapacityType::OnDemand,
        (CapacityType::Reserved, Some(r)) => match (r.kind, r.interruptible) {
            (ReservationKind::CapacityBlock, _) => DefaultTargetCapacityType::CapacityBlock,
            (ReservationKind::Default, true) => DefaultTargetCapacityType::ReservedCapacity,
            (ReservationKind::Default, false) => DefaultTargetCapacityType::OnDemand,
        },
    }
}

/// EC2's limit on overrides per request.
pub const MAX_OVERRIDES: usize = 60;

/// One (instance type, zone) EC2 may launch, with its subnet and launch template.
#[derive(Debug, Clone, PartialEq)]
pub struct Override {
    pub instance_type: String,
    pub zone: String,
    pub subnet_id: String,
    /// Launch template name.
    pub template: String,
    pub price: f64,
}

/// The overrides for `offers`: each offer in a zone the class has a subnet in and of a type a
/// template exists for, once per (type, zone), cheapest first (ties keep the offers' order), at
/// most [`MAX_OVERRIDES`].
pub fn overrides(
    offers: &[Offer],
    subnet_by_zone: &BTreeMap<String, String>,
    template_of: impl Fn(&str) -> Option<String>,
) -> Vec<Override> {
    let mut seen = BTreeSet::new();
    let mut out: Vec<Override> = offers
        .iter()
        .filter_map(|o| {
            let subnet = subnet_by_zone.get(&o.zone)?;
            let template = template_of(&o.instance_type)?;
            seen.insert((o.instance_type.clone(), o.zone.clone())).then(|| Override {
                instance_type: o.instance_type.clone(),
                zone: o.zone.clone(),
                subnet_id: subnet.clone(),
                template,
                price: o.price,
            })
        })
        .collect();
    out.sort_by(|a, b| a.price.total_cmp(&b.price));
    out.truncate(MAX_OVERRIDES);
    out
}

/// The client token of one CreateFleet request: the claim name and a digest of what is asked
/// (`<claim>-<8 hex>`, at most 64 characters). A redelivered identical request reuses the token
/// and EC2 answers with the same fleet; a retry with other offerings (after capacity errors, or
/// on-demand after spot) is a different request, which under the claim name alone EC2 would
/// refuse as `IdempotentParameterMismatch`. Across differing requests, a launch is kept to one
/// instance by looking the claim's instance up by tag first.
///
/// `retry` counts the times the same request is sent again because EC2 did not yet see the
/// class's new instance profile ([`profile_not_yet_visible`]): EC2 would answer a reused token
/// with the same refusal, and the refused fleet launched nothing, so each retry is a new request.
pub fn client_token(claim: &str, capacity: CapacityType, overrides: &[Override], retry: usize) -> String {
    let mut asked = serde_json::json!({
        "capacity": capacity.as_str(),
        "overrides": overrides.iter().map(|o| [&o.instance_type, &o.subnet_id, &o.template]).collect::<Vec<_>>(),
    });
    if retry > 0 {
        asked["retry"] = retry.into();
    }
    let digest = &json_hash(&asked)[..8];
    let head: String = claim.chars().take(64 - 9).collect();
    format!("{head}-{digest}")
}

/// Whether an error (its code and message) says the launch template's instance profile is
/// unknown to EC2: right after IAM made it or gave it its role, EC2 may not see it for some
/// seconds (IAM is eventually consistent), and refuses with `InvalidParameterValue` naming
/// `iamInstanceProfile` ("Invalid IAM Instance Profile name").
pub fn profile_not_yet_visible(code: &str, message: &str) -> bool {
    let message = message.to_ascii_lowercase();
    matches!(code, "InvalidParameterValue" | "InvalidParameterCombination" | "InvalidParameter")
        && (message.contains("iaminstanceprofile") || message.contains("invalid iam instance profile"))
}

/// One error of a CreateFleet answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FleetError {
    pub code: String,
    pub message: String,
    pub instance_type: Option<String>,
    pub zone: Option<String>,
    pub subnet_id: Option<String>,
}

/// What a CreateFleet answer without an instance means.
#[derive(Debug, Clone, PartialEq)]
pub enum Verdict {
    /// Capacity errors: these offerings are unavailable for now.
    NoCapacity { offerings: Vec<OfferingKey>, message: String },
    /// Anything else.
    Failed { kind: ErrorKind, message: String },
}

/// Reads the errors of a fleet that launched nothing. Any capacity error makes the answer
/// NoCapacity for the offerings the capacity errors name (every override when they name none),
/// so the claim moves on to what remains; otherwise the first error's code decides.
pub fn judge(errors: &[FleetError], capacity: CapacityType, overrides: &[Override]) -> Verdict {
    let message = if errors.is_empty() {
        "CreateFleet launched no instance and reported no error".to_string()
    } else {
        errors.iter().map(|e| format!("{}: {}", e.code, e.message)).collect::<Vec<_>>().join("; ")
    };
    let capacity_errors: Vec<&FleetError> =
        errors.iter().filter(|e| CAPACITY_ERRORS.contains(&e.code.as_str())).collect();
    if capacity_errors.is_empty() {
        let kind = errors.first().map_or(ErrorKind::Retryable, |e| classify(Some(&e.code), None));
        return Verdict::Failed { kind, message };
    }
    let key = |instance_type: &str, zone: &str| OfferingKey {
        instance_type: instance_type.to_string(),
        zone: zone.to_string(),
        capacity_type: capacity,
    };
    let mut named = BTreeSet::new();
    for e in &capacity_errors {
        let zone = e.zone.clone().or_else(|| {
            let subnet = e.subnet_id.as_deref()?;
            overrides.iter().find(|o| o.subnet_id == subnet).map(|o| o.zone.clone())
        });
        match (&e.instance_type, zone) {
            (Some(t), Some(z)) => {
                named.insert(key(t, &z));
            }
            // A type without a zone: every zone it was offered in.
            (Some(t), None) => {
                named.extend(overrides.iter().filter(|o| &o.instance_type == t).map(|o| key(t, &o.zone)))
            }
            (None, _) => {}
        }
    }
    if named.is_empty() {
        named.extend(overrides.iter().map(|o| key(&o.instance_type, &o.zone)));
    }
    Verdict::NoCapacity { offerings: named.into_iter().collect(), message }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn offer(t: &str, zone: &str, price: f64) -> Offer {
        Offer {
            instance_type: t.into(),
            zone: zone.into(),
            capacity_type: CapacityType::Spot,
            price,
            reservation: None,
        }
    }

    fn subnets() -> BTreeMap<String, String> {
        BTreeMap::from([("us-east-1a".into(), "subnet-a".into()), ("us-east-1b".into(), "subnet-b".into())])
    }

    fn error(code: &str, t: Option<&str>, zone: Option<&str>, subnet: Option<&str>) -> FleetError {
        FleetError {
            code: code.into(),
            message: format!("{code} message"),
            instance_type: t.map(Into::into),
            zone: zone.map(Into::into),
            subnet_id: subnet.map(Into::into),
        }
    }

    #[test]
    fn overrides_are_cheapest_first_with_the_zone_subnet() {
        let offers = [
            offer("m5.xlarge", "us-east-1a", 0.08),
            offer("m5.large", "us-east-1b", 0.04),
            offer("m5.large", "us-east-1c", 0.01), // no subnet there
            offer("m5.large", "us-east-1a", 0.05),
            offer("m5.large", "us-east-1b", 0.03), // same type and zone again
            offer("x9.large", "us-east-1a", 0.01), // no template
        ];
        let template = |t: &str| (t != "x9.large").then(|| format!("lt-{}", t.split('.').next().unwrap()));
        let o = overrides(&offers, &subnets(), template);
        let got: Vec<(&str, &str, &str)> =
            o.iter().map(|o| (o.instance_type.as_str(), o.zone.as_str(), o.subnet_id.as_str())).collect();
        assert_eq!(
            got,
            vec![
                ("m5.large", "us-east-1b", "subnet-b"),
                ("m5.large", "us-east-1a", "subnet-a"),
                ("m5.xlarge", "us-east-1a", "subnet-a"),
            ]
        );
        assert_eq!(o[0].template, "lt-m5");
    }

    #[test]
    fn at_most_sixty_overrides() {
        let offers: Vec<Offer> =
            (0..100).map(|i| offer(&format!("t{i}.large"), "us-east-1a", f64::from(100 - i))).collect();
        let o = overrides(&offers, &subnets(), |_| Some("lt".into()));
        assert_eq!(o.len(), MAX_OVERRIDES);
        assert_eq!(o[0].instance_type, "t99.large");
    }

    #[test]
    fn tokens_are_stable_per_request_and_differ_across_requests() {
        let o = overrides(&[offer("m5.large", "us-east-1a", 0.05)], &subnets(), |_| Some("lt".into()));
        let spot = client_token("default-abc", CapacityType::Spot, &o, 0);
        assert!(spot.starts_with("default-abc-") && spot.len() == "default-abc-".len() + 8);
        assert_eq!(spot, client_token("default-abc", CapacityType::Spot, &o, 0));
        assert_ne!(spot, client_token("default-abc", CapacityType::OnDemand, &o, 0));
        assert_ne!(spot, client_token("default-abc", CapacityType::Spot, &o[..0], 0));
        assert_eq!(client_token(&"x".repeat(100), CapacityType::Spot, &o, 0).len(), 64);
        // A retry after the instance profile was not yet visible is a request of its own.
        let retried = client_token("default-abc", CapacityType::Spot, &o, 1);
        assert_ne!(spot, retried);
        assert_ne!(retried, client_token("default-abc", CapacityType::Spot, &o, 2));
        assert!(retried.starts_with("default-abc-") && retried.len() == "default-abc-".len() + 8);
    }

    #[test]
    fn an_instance_profile_ec2_does_not_see_yet_is_told_from_other_invalid_values() {
        // As EC2 words it right after IAM made the profile.
        let unseen = "Value (prod_0123456789abcdef) for parameter iamInstanceProfile.name is invalid. Invalid IAM Instance Profile name";
        assert!(profile_not_yet_visible("InvalidParameterValue", unseen));
        assert!(profile_not_yet_visible("InvalidParameterValue", "Invalid IAM Instance Profile ARN"));
        assert!(!profile_not_yet_visible(
            "InvalidParameterValue",
            "Value (t9.huge) for parameter instanceType is invalid."
        ));
        assert!(!profile_not_yet_visible("UnauthorizedOperation", unseen));
    }

    #[test]
    fn capacity_errors_name_offerings() {
        let offers = [
            offer("m5.large", "us-east-1a", 0.05),
            offer("m5.large", "us-east-1b", 0.05),
            offer("c5.large", "us-east-1a", 0.06),
        ];
        let o = overrides(&offers, &subnets(), |_| Some("lt".into()));
        let key = |t: &str, z: &str| OfferingKey {
            instance_type: t.into(),
            zone: z.into(),
            capacity_type: CapacityType::Spot,
        };
        for code in CAPACITY_ERRORS {
            let v = judge(&[error(code, Some("c5.large"), Some("us-east-1a"), None)], CapacityType::Spot, &o);
            assert_eq!(
                v,
                Verdict::NoCapacity {
                    offerings: vec![key("c5.large", "us-east-1a")],
                    message: format!("{code}: {code} message")
                }
            );
        }
        // The zone from the subnet; a type without zone or subnet: every zone it was offered in.
        let v = judge(
            &[
                error("InsufficientInstanceCapacity", Some("c5.large"), None, Some("subnet-a")),
                error("InsufficientInstanceCapacity", Some("m5.large"), None, None),
                error("InvalidParameterValue", Some("x.large"), None, None),
            ],
            CapacityType::Spot,
            &o,
        );
        let Verdict::NoCapacity { offerings, message } = v else { panic!("{v:?}") };
        assert_eq!(
            offerings,
            vec![key("c5.large", "us-east-1a"), key("m5.large", "us-east-1a"), key("m5.large", "us-east-1b")]
        );
        assert!(message.contains("InvalidParameterValue"));
        // Naming nothing: every override.
        let Verdict::NoCapacity { offerings, .. } =
            judge(&[error("UnfulfillableCapacity", None, None, None)], CapacityType::Spot, &o)
        else {
            panic!()
        };
        assert_eq!(offerings.len(), 3);
    }

    #[test]
    fn other_errors_are_failures_by_code() {
        let o = overrides(&[offer("m5.large", "us-east-1a", 0.05)], &subnets(), |_| Some("lt".into()));
        let v = judge(&[error("InvalidLaunchTemplateId.NotFound", None, None, None)], CapacityType::OnDemand, &o);
        assert!(matches!(v, Verdict::Failed { kind: ErrorKind::Refused, .. }), "{v:?}");
        let v = judge(&[error("RequestLimitExceeded", None, None, None)], CapacityType::OnDemand, &o);
        assert!(matches!(v, Verdict::Failed { kind: ErrorKind::Retryable, .. }), "{v:?}");
        assert!(matches!(judge(&[], CapacityType::OnDemand, &o), Verdict::Failed { kind: ErrorKind::Retryable, .. }));
    }

    #[test]
    fn reserved_capacity_is_bought_as_its_reservation_kind_requires() {
        let r = |kind, interruptible| Reservation {
            id: "cr-0a".into(),
            instance_type: "p5.48xlarge".into(),
            zone: "us-east-1a".into(),
            owner_id: String::new(),
            instance_match_criteria: "targeted".into(),
            kind,
            interruptible,
            available: 1,
            observed_at: dovetail_core::time::Time(0),
            end: None,
        };
        let block = r(ReservationKind::CapacityBlock, false);
        let odcr = r(ReservationKind::Default, false);
        let interruptible = r(ReservationKind::Default, true);
        assert_eq!(target_capacity(CapacityType::Reserved, Some(&block)), DefaultTargetCapacityType::CapacityBlock);
        assert_eq!(target_capacity(CapacityType::Reserved, Some(&odcr)), DefaultTargetCapacityType::OnDemand);
        assert_eq!(
            target_capacity(CapacityType::Reserved, Some(&interruptible)),
            DefaultTargetCapacityType::ReservedCapacity
        );
        assert_eq!(target_capacity(CapacityType::Spot, None), DefaultTargetCapacityType::Spot);
        assert_eq!(target_capacity(CapacityType::OnDemand, None), DefaultTargetCapacityType::OnDemand);
        // A full reservation is a capacity error for the reserved offering, which the claim
        // does not try again.
        let o = overrides(&[offer("p5.48xlarge", "us-east-1a", 0.0)], &subnets(), |_| Some("lt".into()));
        let e = error("ReservationCapacityExceeded", Some("p5.48xlarge"), Some("us-east-1a"), None);
        match judge(&[e], CapacityType::Reserved, &o) {
            Verdict::NoCapacity { offerings, .. } => {
                assert_eq!(offerings.len(), 1);
                assert_eq!(offerings[0].capacity_type, CapacityType::Reserved);
            }
            v => panic!("{v:?}"),
        }
    }
}
