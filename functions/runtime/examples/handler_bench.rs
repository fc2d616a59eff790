//! The provisioner's handler on a snapshot of 1,000 pending pods, over the simulator's in-memory
//! ports (no AWS round trips): wall time of the handler and the process's peak memory.
//!
//! `cargo run --release -p dovetail-runtime --example handler_bench [-- --pods 1000 --runs 10]`
//!
//! Each run builds a fresh world (one pool over the embedded catalog; Karpenter's benchmark mix of
//! pods: generic, zone and hostname spread, zonal affinity, hostname anti-affinity), then times
//! `handlers::doorbells` on one doorbell batch: read, plan, one intent and one CreateFleet per
//! claim, records. Targets: 300 ms
//! and 128 MB (Lambda's smallest memory that gives a useful CPU share).

use std::time::{Duration, Instant};

use aws_lambda_events::event::sqs::SqsEvent;
use dovetail_core::benchmark::karpenter_pods;
use dovetail_core::model::{NodeClass, NodePool};
use dovetail_core::reconcile::{Deadline, Ports, Reconciler, Settings};
use dovetail_runtime::handlers;
use dovetail_sim::block_on;
use dovetail_sim::world::{World, WorldConfig};

fn arg(name: &str, default: usize) -> usize {
    let args: Vec<String> = std::env::args().collect();
    args.iter().position(|a| a == name).and_then(|i| args.get(i + 1)).and_then(|v| v.parse().ok()).unwrap_or(default)
}

/// `kB` of a `/proc/self/status` line (`VmRSS`, `VmHWM`).
fn status_kib(field: &str) -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find(|l| l.starts_with(field))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

fn world(pods: usize) -> World {
    let w = World::new(WorldConfig { interruption_multiplier: 0.0, ..WorldConfig::default() });
    let mut s = w.lock();
    s.kube.nodepools.push(NodePool::new("default", "default"));
    s.kube.nodeclasses.push(NodeClass { name: "default".into(), ..NodeClass::default() });
    for p in karpenter_pods(pods, 1) {
        s.create_pod(p, None, None);
    }
    s.settle();
    drop(s);
    w
}

fn main() {
    let pods = arg("--pods", 1000);
    let runs = arg("--runs", 10);
    let event: SqsEvent = serde_json::from_value(serde_json::json!({"Records": [{
        "messageId": "m1", "receiptHandle": "r1", "body": "{\"pod\":\"shop/web-0\"}", "attributes": {},
        "messageAttributes": {}, "eventSource": "aws:sqs", "awsRegion": "us-east-1",
        "eventSourceARN": "arn:aws:sqs:us-east-1:123456789012:dovetail-doorbells"
    }]}))
    .expect("an SQS event");
    let rss_before = status_kib("VmRSS:");
    let mut times: Vec<Duration> = Vec::new();
    let mut launched = 0;
    for _ in 0..runs {
        let w = world(pods);
        let p = w.ports();
        let ports = Ports { kube: p.kube, cloud: p.cloud, store: p.store, queue: p.queue, clock: p.clock };
        let reconciler = Reconciler::new(ports, Settings::new("bench", "provisioner"));
        let started = Instant::now();
        let handled = block_on(handlers::doorbells("provisioner", &reconciler, &event, Deadline::NONE));
        times.push(started.elapsed());
        assert!(handled.response.batch_item_failures.is_empty(), "{:?}", handled.report.errors);
        assert_eq!(handled.report.pending_pods, pods, "every pod pending at the read");
        launched = handled.report.launches().count();
    }
    times.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    eprintln!(
        "provisioner handler, {pods} pending pods, {runs} runs: {launched} claims launched; \
         median {:.1} ms, max {:.1} ms (target 300 ms); process RSS before {:.1} MiB, peak {:.1} MiB (target 128 MB)",
        ms(times[times.len() / 2]),
        ms(*times.last().unwrap()),
        rss_before as f64 / 1024.0,
        status_kib("VmHWM:") as f64 / 1024.0,
    );
}
