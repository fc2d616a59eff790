use dovetail_core::requirements::{Operator, Requirement};
fn main() {
    let n: usize = std::env::args().nth(1).and_then(|a| a.parse().ok()).unwrap_or(20000);
    let gt: String = std::env::args().nth(2).unwrap_or("3".into());
    let catalog = dovetail_core::catalog::embedded().clone();
    let mut snap = dovetail_core::benchmark::eks_snapshot(dovetail_core::benchmark::generic_pods(n, 42));
    snap.nodepools[0]
        .requirements
        .add(Requirement::new("karpenter.k8s.aws/instance-cpu", Operator::Gt, &[gt.as_str()]).unwrap());
    let plan = dovetail_core::scheduler::schedule(&snap, &catalog);
    let mut types: Vec<&str> = plan.nodeclaims.iter().map(|c| c.instance_type.as_str()).collect();
    types.sort();
    types.dedup();
    println!(
        "cpu>{gt}: {} claims ${:.3} bound ${:.3} ratio {:.3} {:?}",
        plan.nodeclaims.len(),
        plan.cost_per_hour,
        plan.lower_bound_per_hour,
        plan.cost_per_hour / plan.lower_bound_per_hour,
        &types[..types.len().min(6)]
    );
}
