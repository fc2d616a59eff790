//! The scale rig's short form (`dovetail_tests::scale`, issue 16): 200 Nodes and 4,000 bound pods
//! on a private control plane, their instances and NodeClaims in moto, and a stream of pending
//! bursts (1 and 100 pods), deletions, spot interruptions, drifts and sweeps through the
//! functions' own handlers. It asserts on counts only — requests, bytes, items, calls — never on
//! wall times, so that a change that brings back full re-reads fails here, on any machine.
//!
//! A warm invocation reads what changed, not the cluster: the limits it must stay within are
//! [`warm_limits`], set from what this size measures with some room (the rig's table is printed
//! when the test runs), so that bringing back a full re-read of any of the three fails here.

use dovetail_tests::scale::{self, Row, Run, Script, Size};

/// What a warm invocation may cost.
#[derive(Debug, Clone, Copy)]
pub struct WarmLimits {
    /// Kubernetes bytes a warm provisioner reads for a 100-pod burst, as a fraction of one full
    /// list of pods and nodes. Measured 0.10 here: the burst's own pods, and the 200 nodes and
    /// the small kinds listed again (a kind under a page costs less to list than to watch). At
    /// 5,000 nodes the nodes are watched too; issue 16's target there is 1%.
    pub kube_bytes: f64,
    /// List requests of pods in one warm invocation: the one-object version check before each
    /// catch-up (a provisioner that loops, or a sweeper that reads again after acting, reads
    /// twice). A full list is 8 pages here.
    pub pod_lists: u64,
    /// DynamoDB items a warm provisioner reads besides the claims it adds (the lease, and claims
    /// other invocations changed): a read of changes, not of the 200 claims in the table.
    pub dynamodb_items_besides_added: u64,
    /// DescribeInstances calls in one warm provisioner or interruption invocation besides the tag
    /// lookup before each CreateFleet (exactly-once: a launch a crash left half done is found by
    /// its tag): only the instances its steps read (measured 1). The sweeper's one full,
    /// tag-filtered reconciliation per sweep is not limited here.
    pub describe_instances: u64,
}

/// The limits in force.
pub fn warm_limits() -> WarmLimits {
    WarmLimits { kube_bytes: 0.15, pod_lists: 2, dynamodb_items_besides_added: 10, describe_instances: 2 }
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
async fn a_warm_invocation_reads_what_changed_not_the_cluster() {
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

    // Warm invocations read what changed (see `warm_limits`).
    let limits = warm_limits();
    let warm = burst(&run, 100, "warm");
    let fraction = warm.kube_bytes_read as f64 / run.load.full_list_bytes.max(1) as f64;
    assert!(
        fraction <= limits.kube_bytes,
        "warm provisioner read {} Kubernetes bytes for 100 pods, {fraction:.3} of a full list ({})",
        warm.kube_bytes_read,
        run.load.full_list_bytes
    );
    for pods in [1, 100] {
        let r = burst(&run, pods, "warm");
        let besides = r.dynamodb_items_read.saturating_sub(u64::try_from(r.claims_added.max(0)).unwrap());
        assert!(
            besides <= limits.dynamodb_items_besides_added,
            "warm provisioner for {pods} pods read {} DynamoDB items, adding {} claims",
            r.dynamodb_items_read,
            r.claims_added
        );
    }
    for r in run.rows.iter().filter(|r| r.start == "warm") {
        assert!(
            r.kube_lists("pods") <= limits.pod_lists,
            "{} warm after {}: {} list requests of pods",
            r.function,
            r.after,
            r.kube_lists("pods")
        );
        if r.function == "sweeper" {
            continue;
        }
        let describes = r.ec2_calls.get("DescribeInstances").copied().unwrap_or(0).saturating_sub(r.create_fleets());
        assert!(
            describes <= limits.describe_instances,
            "{} warm after {}: {describes} DescribeInstances besides the launches' lookups",
            r.function,
            r.after
        );
    }
}
