use super::*;
use crate::benchmark;

#[test]
fn karpenter_mix_places_every_pod() {
    let catalog = benchmark::karpenter_catalog(400);
    for n in [1, 10, 100, 1000] {
        let snap = benchmark::snapshot(benchmark::karpenter_pods(n, benchmark::SEED));
        let plan = schedule(&snap, &catalog);
        assert!(plan.unschedulable.is_empty(), "{n}: {:?}", &plan.unschedulable[..plan.unschedulable.len().min(3)]);
        let placed: usize = plan.nodeclaims.iter().map(|c| c.pods.len()).sum();
        assert_eq!(placed, n);
        assert!(
            plan.cost_per_hour >= plan.lower_bound_per_hour - 1e-9,
            "{} < {}",
            plan.cost_per_hour,
            plan.lower_bound_per_hour
        );
        eprintln!(
            "{n}: {} claims, ${:.3}/h, bound ${:.3}/h",
            plan.nodeclaims.len(),
            plan.cost_per_hour,
            plan.lower_bound_per_hour
        );
    }
}
