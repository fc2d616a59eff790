fn main() {
    let n: usize = std::env::args().nth(1).and_then(|a| a.parse().ok()).unwrap_or(20_000);
    let catalog = dovetail_core::benchmark::karpenter_catalog(400);
    let snap = dovetail_core::benchmark::snapshot(dovetail_core::benchmark::karpenter_pods(n, 42));
    let t = std::time::Instant::now();
    let plan = dovetail_core::scheduler::schedule(&snap, &catalog);
    println!(
        "{n} pods: {:?}, {} claims, {} unschedulable, ${:.2} vs bound ${:.2}",
        t.elapsed(),
        plan.nodeclaims.len(),
        plan.unschedulable.len(),
        plan.cost_per_hour,
        plan.lower_bound_per_hour
    );
}
