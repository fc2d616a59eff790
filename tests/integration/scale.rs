//! The scale rig's short form (`dovetail_tests::scale`, issue 16): 200 Nodes and 4,000 bound pods
//! on a private control plane, their instances and NodeClaims in moto, and a stream of pending
//! bursts (1 and 100 pods), deletions, spot interruptions, drifts and sweeps through the
//! functions' own handlers. It asserts on counts only — requests, bytes, items, calls — never on
//! wall times, so that a change that brings back full re-reads fails here, on any machine.
//!
//! Today every invocation re-reads the whole cluster, so warm invocations cost what cold ones do.
//! The limits a warm invocation must stay within are [`warm_limits`]: as loose as today's code
//! needs; the work on a warm snapshot and on NodeClaim and EC2 reads (issue 16, points 2–4)
//! tightens them to its targets.

use dovetail_tests::scale::{self, Row, Run, Script, Size};

/// What a warm invocation may cost, relative to the cold invocation of the same function for the
/// same change (a 100-pod burst for the provisioner), or absolutely.
#[derive(Debug, Clone, Copy)]
pub struct WarmLimits {
    /// Kubernetes bytes read, as a fraction of the cold invocation's. Today 1.5 (a warm read is
    /// a full read, and the cluster grew by the burst); issue 16's target is 1% of one full list.
    pub kube_bytes: f64,
    /// Kubernetes list requests, as a fraction of the cold invocation's. Today 1.5; a snapshot
    /// brought up to date by a watch lists nothing.
    pub kube_lists: f64,
    /// DynamoDB items read, as a fraction of the cold invocation's. Today 1.5 (every claim is read
    /// each pass); target: items ∝ claims touched.
    pub dynamodb_items: f64,
    /// DescribeInstances calls in one warm invocation besides the tag lookup before each
    /// CreateFleet (exactly-once: a launch a crash left half done is found by its tag). Today one
    /// per read, 3 in the short stream; target: none per event (point 4).
    pub describe_instances: u64,
}

/// The limits in force. Tighten them as the warm snapshot lands.
pub fn warm_limits() -> WarmLimits {
    WarmLimits { kube_bytes: 1.5, kube_lists: 1.5, dynamodb_items: 1.5, describe_instances: 5 }
}

fn rows<'a>(run: &'a Run, function: &str, start: &str) -> Vec<&'a Row> {
    run.rows.iter().filter(|r| r.function == function && r.start == start).collect()
}

/// The provisioner's row for `pods` pods pending, `start`ed cold or warm.
fn burst<'a>(run: &'a Run, pods: usize, start: &str) -> &'a Row {
    let after = scale::pending_change(pods);
    rows(run, "provisioner", start)
        .into_iter()
        .find(|r| r.after == after)
        .unwrap_or_else(|| panic!("no {start} provisioner row after {after}"))
}

#[tokio::test]
async fn a_short_stream_costs_what_it_costs_today() {
    let size = Size::CI;
    let run = scale::run(size, &Script::short(size)).await.expect("the scale rig's short form");
    eprintln!("{}", scale::report::markdown(std::slice::from_ref(&run)));

    // The reference: one paginated list of every pod and node.
    let pages = |n: usize| n.div_ceil(500) as u64;
    assert_eq!(run.load.full_list_requests, pages(size.pods) + pages(size.nodes));
    assert!(run.load.full_list_bytes > 0);

    for r in &run.rows {
        assert_eq!(r.failures, 0, "{} {} after {}: failures", r.function, r.start, r.after);
        // Exactly once: one CreateFleet per claim the invocation added.
        assert_eq!(
            r.create_fleets(),
            u64::try_from(r.claims_added.max(0)).unwrap(),
            "{} {} after {}: CreateFleet calls and claims added",
            r.function,
            r.start,
            r.after
        );
    }

    // A pending pod gets exactly one launch, cold or warm; a burst of 100 (a fifth of them
    // hostname anti-affinity pods) at least one per anti-affine pod.
    for start in ["cold", "warm"] {
        assert_eq!(burst(&run, 1, start).create_fleets(), 1, "1 pod pending, {start}");
        assert!(burst(&run, 100, start).create_fleets() >= 20, "100 pods pending, {start}");
    }

    // A cold invocation reads the whole cluster: at least one full list's pages and bytes.
    for r in run.rows.iter().filter(|r| r.start == "cold") {
        let lists = r.kube_lists("pods") + r.kube_lists("nodes");
        assert!(
            lists >= run.load.full_list_requests,
            "{} cold after {}: {lists} lists of pods and nodes, one full read is {}",
            r.function,
            r.after,
            run.load.full_list_requests
        );
        assert!(r.kube_bytes_read >= run.load.full_list_bytes * 9 / 10, "{} cold: bytes read", r.function);
    }

    // Warm invocations, within today's limits (see `warm_limits`).
    let limits = warm_limits();
    let (cold, warm) = (burst(&run, 100, "cold"), burst(&run, 100, "warm"));
    let fraction = |w: u64, c: u64| w as f64 / c.max(1) as f64;
    let lists = |r: &Row| r.kube_by_request.iter().filter(|(k, _)| k.starts_with("list ")).map(|(_, n)| n).sum::<u64>();
    assert!(
        fraction(warm.kube_bytes_read, cold.kube_bytes_read) <= limits.kube_bytes,
        "warm provisioner read {} Kubernetes bytes, cold {}",
        warm.kube_bytes_read,
        cold.kube_bytes_read
    );
    assert!(
        fraction(lists(warm), lists(cold)) <= limits.kube_lists,
        "warm provisioner made {} list requests, cold {}",
        lists(warm),
        lists(cold)
    );
    assert!(
        fraction(warm.dynamodb_items_read, cold.dynamodb_items_read) <= limits.dynamodb_items,
        "warm provisioner read {} DynamoDB items, cold {}",
        warm.dynamodb_items_read,
        cold.dynamodb_items_read
    );
    for r in run.rows.iter().filter(|r| r.start == "warm") {
        let describes = r.ec2_calls.get("DescribeInstances").copied().unwrap_or(0).saturating_sub(r.create_fleets());
        assert!(
            describes <= limits.describe_instances,
            "{} warm after {}: {describes} DescribeInstances besides the launches' lookups",
            r.function,
            r.after
        );
    }
}
