//! The capacity reservations an EC2NodeClass's `capacityReservationSelectorTerms` select, from
//! `DescribeCapacityReservations` (Karpenter 1.14's queries): a term with an `id` asks for that
//! reservation; a term with tags and/or `instanceMatchCriteria` (and optionally `ownerID`) filters
//! on them. Only `active` reservations are asked for, so a Capacity Block before its start is not
//! listed (nothing launches into it before its window), and one that has ended is dropped.
//!
//! The call goes through [`DescribeReservations`], implemented by the SDK client; moto (the local
//! EC2 the integration tests use) has no capacity-reservation API, so the listing is tested
//! against [`tests::ReservationsTestDouble`] at that boundary, with the request checked against
//! the SDK's own input type. End to end, the moto the integration tests start answers the call
//! from a test double of its own (`CapacityReservationsTestDouble` in
//! `tests/harness/moto_launcher.py`).

use std::collections::BTreeMap;
use std::future::Future;

use aws_sdk_ec2::operation::describe_capacity_reservations::DescribeCapacityReservationsInput;
use aws_sdk_ec2::types::{CapacityReservation, Filter, InstanceMatchCriteria};
use dovetail_api::crd::CapacityReservationSelectorTerm;
use dovetail_core::catalog::{Reservation, ReservationKind};
use dovetail_core::time::Time;

use super::filters::{filter, tag_filters};
use crate::error::{api_error, AwsError, AwsResult};

/// DescribeCapacityReservations' page limit (it refuses more; and any with reservation ids).
pub const MAX_RESULTS: i32 = 1000;

/// One DescribeCapacityReservations query of a selector term.
#[derive(Debug, Clone, PartialEq)]
pub struct ReservationQuery {
    pub ids: Vec<String>,
    pub filters: Vec<Filter>,
}

impl ReservationQuery {
    /// The request for one page (`next`: the previous page's token).
    pub fn input(&self, next: Option<String>) -> DescribeCapacityReservationsInput {
        DescribeCapacityReservationsInput::builder()
            .set_capacity_reservation_ids((!self.ids.is_empty()).then(|| self.ids.clone()))
            .set_filters(Some(self.filters.clone()))
            // EC2 refuses MaxResults beside reservation ids.
            .set_max_results(self.ids.is_empty().then_some(MAX_RESULTS))
            .set_next_token(next)
            .build()
            .expect("the input has no required fields")
    }
}

/// The queries of the terms: per term, one by id, or one by its tags, match criteria and owner.
pub fn queries(terms: &[CapacityReservationSelectorTerm]) -> Vec<ReservationQuery> {
    let active = || vec![filter("state", "active")];
    let mut out = Vec::new();
    for term in terms {
        if let Some(id) = &term.id {
            out.push(ReservationQuery { ids: vec![id.clone()], filters: active() });
        }
        if !term.tags.is_empty() || term.instance_match_criteria.is_some() {
            let mut filters = active();
            if let Some(owner) = &term.owner_id {
                filters.push(filter("owner-id", owner));
            }
            filters.extend(tag_filters(&term.tags));
            if let Some(criteria) = &term.instance_match_criteria {
                filters.push(filter("instance-match-criteria", criteria.as_str()));
            }
            out.push(ReservationQuery { ids: vec![], filters });
        }
    }
    out
}

fn time_of(t: &aws_sdk_ec2::primitives::DateTime) -> Time {
    Time(t.to_millis().unwrap_or(i64::MAX))
}

/// A reservation as the core takes it, described at `now`; an error names what EC2 sent that
/// Dovetail cannot use (a match criteria or reservation type it does not know, as Karpenter
/// refuses them, or a field missing).
pub fn reservation_of(cr: &CapacityReservation, now: Time) -> Result<Reservation, String> {
    let id = cr.capacity_reservation_id().ok_or("a capacity reservation without an id")?.to_string();
    let missing = |field: &str| format!("capacity reservation {id}: no {field}");
    let criteria = match cr.instance_match_criteria() {
        Some(c @ (InstanceMatchCriteria::Open | InstanceMatchCriteria::Targeted)) => c.as_str().to_string(),
        other => {
            return Err(format!(
                "capacity reservation {id}: instance match criteria {:?} is not open or targeted",
                other.map(|c| c.as_str())
            ))
        }
    };
    let kind_text = cr.reservation_type().map(|t| t.as_str()).unwrap_or_default();
    let kind = ReservationKind::parse(kind_text)
        .ok_or_else(|| format!("capacity reservation {id}: reservation type {kind_text:?} is not supported"))?;
    Ok(Reservation {
        instance_type: cr.instance_type().ok_or_else(|| missing("instance type"))?.to_string(),
        zone: cr.availability_zone().ok_or_else(|| missing("availability zone"))?.to_string(),
        owner_id: cr.owner_id().unwrap_or_default().to_string(),
        instance_match_criteria: criteria,
        kind,
        interruptible: cr.interruptible().unwrap_or(false),
        available: cr.available_instance_count().unwrap_or(0).max(0) as u32,
        observed_at: now,
        end: cr.end_date().map(time_of),
        id,
    })
}

/// One page of DescribeCapacityReservations: the reservations and the next page's token.
pub type Page = (Vec<CapacityReservation>, Option<String>);

/// Where reservations are described: EC2, or a test double.
pub trait DescribeReservations: Sync {
    fn describe(&self, input: DescribeCapacityReservationsInput) -> impl Future<Output = AwsResult<Page>> + Send;
}

impl DescribeReservations for aws_sdk_ec2::Client {
    async fn describe(&self, input: DescribeCapacityReservationsInput) -> AwsResult<Page> {
        let out = self
            .describe_capacity_reservations()
            .set_capacity_reservation_ids(input.capacity_reservation_ids)
            .set_filters(input.filters)
            .set_max_results(input.max_results)
            .set_next_token(input.next_token)
            .send()
            .await
            .map_err(|e| api_error("DescribeCapacityReservations", e))?;
        Ok((out.capacity_reservations.unwrap_or_default(), out.next_token))
    }
}

/// Whether EC2 said a reservation asked for by id does not exist (then the term selects nothing).
fn not_found(e: &AwsError) -> bool {
    matches!(e, AwsError::Api { code: Some(c), .. } if c.contains("NotFound"))
}

/// The reservations the terms select, by id, that have not ended at `now`; what EC2 described
/// that Dovetail cannot use is left out and said in the second list.
pub async fn list(
    source: &impl DescribeReservations,
    terms: &[CapacityReservationSelectorTerm],
    now: Time,
) -> AwsResult<(Vec<Reservation>, Vec<String>)> {
    let mut found: BTreeMap<String, Reservation> = BTreeMap::new();
    let mut problems = Vec::new();
    for query in queries(terms) {
        let mut next = None;
        loop {
            let (page, token) = match source.describe(query.input(next.take())).await {
                Ok(p) => p,
                Err(e) if not_found(&e) => break,
                Err(e) => return Err(e),
            };
            for cr in &page {
                match reservation_of(cr, now) {
                    Ok(r) if r.end.is_none_or(|end| end > now) => {
                        found.insert(r.id.clone(), r);
                    }
                    Ok(_) => {}
                    Err(why) => problems.push(why),
                }
            }
            match token.filter(|t| !t.is_empty()) {
                Some(t) => next = Some(t),
                None => break,
            }
        }
    }
    Ok((found.into_values().collect(), problems))
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use aws_sdk_ec2::primitives::DateTime;
    use aws_sdk_ec2::types::CapacityReservationType;
    use std::sync::Mutex;

    const NOW: Time = Time(1_800_000_000_000);

    /// A test double of EC2's DescribeCapacityReservations (moto has none): answers from a fixed
    /// list of reservations, filtering on id, state, owner, tags and match criteria as EC2 does,
    /// in pages of `page` (a next token being the offset), and records every request.
    pub(crate) struct ReservationsTestDouble {
        pub reservations: Vec<(CapacityReservation, BTreeMap<String, String>, &'static str)>,
        pub page: usize,
        pub requests: Mutex<Vec<DescribeCapacityReservationsInput>>,
    }

    impl ReservationsTestDouble {
        fn matches(
            input: &DescribeCapacityReservationsInput,
            cr: &CapacityReservation,
            tags: &BTreeMap<String, String>,
            state: &str,
        ) -> bool {
            let ids = input.capacity_reservation_ids();
            if !ids.is_empty() && !ids.iter().any(|i| Some(i.as_str()) == cr.capacity_reservation_id()) {
                return false;
            }
            input.filters().iter().all(|f| {
                let name = f.name().unwrap_or_default();
                let has = |v: Option<&str>| v.is_some_and(|v| f.values().iter().any(|x| x == v));
                match name {
                    "state" => has(Some(state)),
                    "owner-id" => has(cr.owner_id()),
                    "instance-match-criteria" => has(cr.instance_match_criteria().map(|c| c.as_str())),
                    "tag-key" => f.values().iter().any(|k| tags.contains_key(k)),
                    _ => match name.strip_prefix("tag:") {
                        Some(k) => has(tags.get(k).map(String::as_str)),
                        None => panic!("DescribeCapacityReservations has no filter {name:?}"),
                    },
                }
            })
        }
    }

    impl DescribeReservations for ReservationsTestDouble {
        async fn describe(&self, input: DescribeCapacityReservationsInput) -> AwsResult<Page> {
            self.requests.lock().unwrap().push(input.clone());
            let ids = input.capacity_reservation_ids();
            if ids.len() == 1
                && !self.reservations.iter().any(|(cr, ..)| cr.capacity_reservation_id() == Some(ids[0].as_str()))
            {
                return Err(AwsError::Api {
                    operation: "DescribeCapacityReservations",
                    code: Some("InvalidCapacityReservationId.NotFound".into()),
                    message: format!("The capacity reservation ID '{}' does not exist", ids[0]),
                    kind: crate::error::ErrorKind::Refused,
                });
            }
            let matching: Vec<CapacityReservation> = self
                .reservations
                .iter()
                .filter(|(cr, tags, state)| Self::matches(&input, cr, tags, state))
                .map(|(cr, ..)| cr.clone())
                .collect();
            let from: usize = input.next_token().map_or(0, |t| t.parse().unwrap());
            let to = (from + self.page).min(matching.len());
            let next = (to < matching.len()).then(|| to.to_string());
            Ok((matching[from..to].to_vec(), next))
        }
    }

    fn cr(id: &str, kind: Option<&str>, end: Option<Time>) -> CapacityReservation {
        CapacityReservation::builder()
            .capacity_reservation_id(id)
            .instance_type("p5.48xlarge")
            .availability_zone("us-east-1a")
            .owner_id("123456789012")
            .instance_match_criteria(InstanceMatchCriteria::Targeted)
            .set_reservation_type(kind.map(CapacityReservationType::from))
            .available_instance_count(2)
            .set_end_date(end.map(|t| DateTime::from_millis(t.0)))
            .build()
    }

    fn term(v: serde_json::Value) -> CapacityReservationSelectorTerm {
        serde_json::from_value(v).unwrap()
    }

    fn double(page: usize) -> ReservationsTestDouble {
        let tags = |k: &str, v: &str| BTreeMap::from([(k.to_string(), v.to_string())]);
        ReservationsTestDouble {
            reservations: vec![
                (cr("cr-0a", None, None), tags("team", "ml"), "active"),
                (
                    cr("cr-0b", Some("capacity-block"), Some(NOW.plus(std::time::Duration::from_secs(7200)))),
                    tags("team", "ml"),
                    "active",
                ),
                (cr("cr-0c", None, None), tags("team", "web"), "active"),
                // A block not started yet: EC2 lists it as scheduled, not active.
                (
                    cr("cr-0d", Some("capacity-block"), Some(NOW.plus(std::time::Duration::from_secs(86_400)))),
                    tags("team", "ml"),
                    "scheduled",
                ),
                // Ended but still listed active for a moment.
                (cr("cr-0e", None, Some(NOW)), tags("team", "ml"), "active"),
            ],
            page,
            requests: Mutex::new(vec![]),
        }
    }

    #[test]
    fn each_term_is_one_query_as_karpenter_asks() {
        let qs = queries(&[
            term(serde_json::json!({"id": "cr-0a"})),
            term(serde_json::json!({"tags": {"team": "ml", "any": "*"}, "ownerID": "123456789012"})),
            term(serde_json::json!({"instanceMatchCriteria": "open"})),
        ]);
        assert_eq!(qs.len(), 3);
        // By id: the id and the state filter, no MaxResults (EC2 refuses it with ids).
        let by_id = qs[0].input(None);
        assert_eq!(by_id.capacity_reservation_ids(), ["cr-0a".to_string()]);
        assert_eq!(by_id.max_results(), None);
        let names = |i: &DescribeCapacityReservationsInput| {
            i.filters().iter().map(|f| (f.name().unwrap().to_string(), f.values().to_vec())).collect::<Vec<_>>()
        };
        assert_eq!(names(&by_id), vec![("state".to_string(), vec!["active".to_string()])]);
        // By tags and owner: every filter, pages of 1000.
        let by_tags = qs[1].input(Some("t".into()));
        assert!(by_tags.capacity_reservation_ids().is_empty());
        assert_eq!(by_tags.max_results(), Some(MAX_RESULTS));
        assert_eq!(by_tags.next_token(), Some("t"));
        let f = names(&by_tags);
        for want in [("state", "active"), ("owner-id", "123456789012"), ("tag-key", "any"), ("tag:team", "ml")] {
            assert!(f.contains(&(want.0.to_string(), vec![want.1.to_string()])), "{want:?} in {f:?}");
        }
        assert!(names(&qs[2].input(None)).contains(&("instance-match-criteria".to_string(), vec!["open".to_string()])));
    }

    #[test]
    fn reservations_convert_as_karpenter_does() {
        let r = reservation_of(&cr("cr-0a", None, None), NOW).unwrap();
        assert_eq!((r.kind, r.available, r.observed_at, r.end), (ReservationKind::Default, 2, NOW, None));
        // EC2 leaves `Interruptible` out of reservations that are not: false, as Karpenter reads it.
        assert!(!r.interruptible);
        let mut interruptible = cr("cr-0i", None, None);
        interruptible.interruptible = Some(true);
        assert!(reservation_of(&interruptible, NOW).unwrap().interruptible);
        assert_eq!(
            (r.instance_type.as_str(), r.zone.as_str(), r.instance_match_criteria.as_str()),
            ("p5.48xlarge", "us-east-1a", "targeted")
        );
        let end = NOW.plus(std::time::Duration::from_secs(3600));
        let b = reservation_of(&cr("cr-0b", Some("capacity-block"), Some(end)), NOW).unwrap();
        assert_eq!((b.kind, b.end), (ReservationKind::CapacityBlock, Some(end)));
        let odd = CapacityReservation::builder()
            .capacity_reservation_id("cr-0z")
            .instance_match_criteria(InstanceMatchCriteria::from("sometimes"))
            .build();
        assert!(reservation_of(&odd, NOW).unwrap_err().contains("cr-0z"));
        let odd = cr("cr-0y", Some("interruptible-capacity-block"), None);
        assert!(reservation_of(&odd, NOW).unwrap_err().contains("not supported"));
    }

    #[tokio::test]
    async fn listing_pages_dedups_and_keeps_only_active_unended_ones() {
        let ec2 = double(1);
        let terms = [
            term(serde_json::json!({"tags": {"team": "ml"}})),
            term(serde_json::json!({"id": "cr-0a"})),
            term(serde_json::json!({"id": "cr-0missing"})),
        ];
        let (found, problems) = list(&ec2, &terms, NOW).await.unwrap();
        let ids: Vec<&str> = found.iter().map(|r| r.id.as_str()).collect();
        assert_eq!(ids, vec!["cr-0a", "cr-0b"], "scheduled and ended ones are left out; cr-0a once");
        assert!(problems.is_empty());
        // The tag query took three pages (cr-0a, cr-0b, cr-0e), then one per id.
        let requests = ec2.requests.lock().unwrap();
        assert_eq!(requests.len(), 5, "{requests:#?}");
        assert_eq!(requests[1].next_token(), Some("1"));
    }

    #[tokio::test]
    async fn no_terms_ask_nothing() {
        let ec2 = double(10);
        assert_eq!(list(&ec2, &[], NOW).await.unwrap(), (vec![], vec![]));
        assert!(ec2.requests.lock().unwrap().is_empty());
    }
}
