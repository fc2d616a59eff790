//! Quick timing of one scheduling pass: `cargo run --release -p dovetail-core --example time_mix -- [N] [real]`.
fn main() {
    let mut args = std::env::args().skip(1);
    let n: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(20_000);
    let real = args.next().as_deref() == Some("real");
    let (catalog, pods) = if real {
        (dovetail_core::catalog::embedded().clone(), dovetail_core::benchmark::generic_pods(n, 42))
    } else {
        (dovetail_core::benchmark::karpenter_catalog(400), dovetail_core::benchmark::karpenter_pods(n, 42))
    };
    let snap =
        if real { dovetail_core::benchmark::eks_snapshot(pods) } else { dovetail_core::benchmark::snapshot(pods) };
    let t = std::time::Instant::now();
    let plan = dovetail_core::scheduler::schedule(&snap, &catalog);
    let mut types: Vec<&str> = plan.nodeclaims.iter().map(|c| c.instance_type.as_str()).collect();
    types.sort();
    types.dedup();
    println!(
        "{n} pods: {:?}, {} claims, {} unschedulable, ${:.3} vs bound ${:.3} (ratio {:.3}); types {:?}",
        t.elapsed(),
        plan.nodeclaims.len(),
        plan.unschedulable.len(),
        plan.cost_per_hour,
        plan.lower_bound_per_hour,
        plan.cost_per_hour / plan.lower_bound_per_hour,
        &types[..types.len().min(8)]
    );
}
