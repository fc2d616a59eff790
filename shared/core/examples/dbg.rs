use std::collections::BTreeMap;
fn main() {
    let n: usize = std::env::args().nth(1).and_then(|a| a.parse().ok()).unwrap_or(20000);
    let catalog = dovetail_core::catalog::embedded().clone();
    let snap = dovetail_core::benchmark::snapshot(dovetail_core::benchmark::generic_pods(n, 42));
    let plan = dovetail_core::scheduler::schedule(&snap, &catalog);
    let pods: BTreeMap<String, &dovetail_core::model::Pod> = snap.pods.iter().map(|p| (p.key(), p)).collect();
    let mut by: BTreeMap<String, (usize, f64, f64, f64, f64)> = BTreeMap::new();
    for c in &plan.nodeclaims {
        let t = catalog.get(&c.instance_type).unwrap();
        let free = t.allocatable(&Default::default());
        let (mut cpu, mut mem) = (0i64, 0i64);
        for k in &c.pods {
            cpu += pods[k].requests.cpu;
            mem += pods[k].requests.memory;
        }
        let e = by.entry(format!("{} {}", c.instance_type, c.capacity_type)).or_default();
        e.0 += 1;
        e.1 += c.price_per_hour;
        e.2 += cpu as f64 / free.cpu as f64;
        e.3 += mem as f64 / free.memory as f64;
        e.4 += c.pods.len() as f64 / free.pods as f64;
    }
    let mut v: Vec<_> = by.into_iter().collect();
    v.sort_by(|a, b| b.1 .1.total_cmp(&a.1 .1));
    for (k, (n, cost, cu, mu, pu)) in v.iter().take(12) {
        println!(
            "{k:28} n={n:5} ${cost:8.3} cpu {:.2} mem {:.2} pods {:.2}",
            cu / *n as f64,
            mu / *n as f64,
            pu / *n as f64
        );
    }
    println!("total ${:.3} bound ${:.3}", plan.cost_per_hour, plan.lower_bound_per_hour);
}
