//! The forwarder's footprint and latency: resident memory idle and under a steady stream of
//! AdmissionReview requests, and the response times a client sees.
//!
//! ```sh
//! cargo build --profile forwarder -p dovetail-forwarder --bin dovetail-forwarder
//! cargo run --release -p dovetail-tests --example forwarder-bench -- [--rate 1000] [--seconds 30] [--connections 8]
//! ```
//!
//! It starts a private local control plane (the forwarder patches its webhook configuration's
//! `caBundle` there, as in a cluster), an in-process stand-in for SQS that accepts every
//! SendMessageBatch (so the figures are the forwarder's, not a local SQS emulator's), and the
//! forwarder binary of the workspace's `forwarder` profile, the build its image ships
//! (`target/forwarder/dovetail-forwarder`, or `--forwarder PATH`), with its production log level.
//! Then:
//! 1. idle: RSS after 10 s of nothing, and its split into anonymous memory (heap, stacks,
//!    relocated data) and file pages (the executable's and the shared libraries' code and
//!    read-only data);
//! 2. load: `--rate` requests a second over `--connections` keep-alive HTTPS connections for
//!    `--seconds`, every one a recorded pods/status update that marks a new pod Unschedulable —
//!    the worst case: every request rings a doorbell that goes to SQS. RSS is sampled every
//!    100 ms; each response's latency is timed from writing the request to reading the answer;
//! 3. after: RSS 5 s later, what SQS received, and the forwarder's own counters.
//!
//! Most of the resident memory is the executable's code, so the binary is first dropped from the
//! page cache: the kernel maps the pages around each one that runs (fault-around, 64 KiB) or the
//! whole page-cache folio it sits in, whichever is larger, and a binary copied into place can sit
//! in larger folios than one read from disk (the same release binary: 17.3 MiB idle as a fresh
//! copy, 16.1 MiB as linked). Read from disk, the figure depends only on the binary.
//!
//! Requests leave on a fixed schedule (missed ticks are caught up, not skipped), so a slow
//! answer delays the requests behind it on its connection and shows in their latency too.

use std::path::PathBuf;
use std::process::Command;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use dovetail_tests::controlplane::ControlPlane;
use dovetail_tests::forwarder::{connect, request};
use dovetail_tests::forwarder::{free_port, webhook_configuration, Forwarder, Settings};
use http_body_util::{BodyExt, Full};
use hyper::body::{Bytes, Incoming};
use hyper_util::rt::TokioIo;
use k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration;
use kube::api::{Api, PostParams};
use serde_json::{json, Value};

struct Args {
    rate: u32,
    seconds: u64,
    connections: u32,
    forwarder: PathBuf,
}

fn args() -> Result<Args> {
    let exe = std::env::current_exe()?;
    // target/release/examples/forwarder-bench → target/forwarder/dovetail-forwarder
    let built = exe
        .parent()
        .and_then(|examples| examples.parent())
        .and_then(|release| release.parent())
        .map(|target| target.join("forwarder").join("dovetail-forwarder"));
    let mut args = Args { rate: 1000, seconds: 30, connections: 8, forwarder: built.unwrap_or_default() };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let value = it.next().with_context(|| format!("{flag} needs a value"))?;
        match flag.as_str() {
            "--rate" => args.rate = value.parse()?,
            "--seconds" => args.seconds = value.parse()?,
            "--connections" => args.connections = value.parse()?,
            "--forwarder" => args.forwarder = value.into(),
            other => bail!("unknown flag {other} (--rate, --seconds, --connections, --forwarder)"),
        }
    }
    if !args.forwarder.is_file() {
        bail!(
            "no forwarder binary at {}: cargo build --profile forwarder -p dovetail-forwarder --bin dovetail-forwarder",
            args.forwarder.display()
        );
    }
    Ok(args)
}

/// A process's memory, in KiB (`/proc/<pid>/status`).
struct Memory {
    /// Resident now (`VmRSS`): `anon` + `file` (+ shared memory, none here).
    rss: u64,
    /// Resident at most so far (`VmHWM`).
    peak: u64,
    /// Resident anonymous memory: heap, stacks, relocated data (`RssAnon`).
    anon: u64,
    /// Resident pages of mapped files: the executable and the shared libraries (`RssFile`).
    file: u64,
}

fn memory(pid: u32) -> Result<Memory> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    let field = |name: &str| -> Result<u64> {
        let line = status.lines().find(|l| l.starts_with(name)).with_context(|| format!("no {name}"))?;
        Ok(line.split_whitespace().nth(1).context("a value")?.parse()?)
    };
    Ok(Memory { rss: field("VmRSS:")?, peak: field("VmHWM:")?, anon: field("RssAnon:")?, file: field("RssFile:")? })
}

/// Drops `path`'s pages from the page cache (see the module's comment), once they are on disk.
fn evict_from_page_cache(path: &std::path::Path) -> Result<()> {
    use std::os::fd::AsRawFd;
    let file = std::fs::File::open(path)?;
    // Dirty pages (a binary just linked) stay cached: write them first.
    file.sync_data()?;
    // SAFETY: an advice on a file descriptor we hold open; it has no memory-safety effects.
    let error = unsafe { libc::posix_fadvise(file.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
    if error != 0 {
        bail!("posix_fadvise({}): {}", path.display(), std::io::Error::from_raw_os_error(error));
    }
    Ok(())
}

/// CPU time a process used so far (`/proc/<pid>/stat`: utime + stime).
fn cpu_time(pid: u32) -> Result<Duration> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))?;
    // Fields after the command name (which may hold spaces, so split after its closing paren).
    let rest = stat.rsplit_once(')').context("stat")?.1;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks: u64 = fields[11].parse::<u64>()? + fields[12].parse::<u64>()?;
    // SAFETY: sysconf has no preconditions.
    let per_second = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as u64;
    Ok(Duration::from_millis(ticks * 1000 / per_second))
}

fn mib(kib: u64) -> String {
    format!("{:.1} MiB", kib as f64 / 1024.0)
}

/// A stand-in for SQS's JSON protocol that accepts every SendMessageBatch and counts the entries.
async fn fake_sqs(received: Arc<AtomicU64>) -> Result<u16> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let port = listener.local_addr()?.port();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let received = Arc::clone(&received);
            tokio::spawn(async move {
                let service = hyper::service::service_fn(move |request: hyper::Request<Incoming>| {
                    let received = Arc::clone(&received);
                    async move {
                        let body = request.into_body().collect().await?.to_bytes();
                        let batch: Value = serde_json::from_slice(&body).unwrap_or_default();
                        let entries = batch["Entries"].as_array().cloned().unwrap_or_default();
                        received.fetch_add(entries.len() as u64, Ordering::Relaxed);
                        let successful: Vec<Value> = entries
                            .iter()
                            .map(|e| json!({"Id": e["Id"], "MessageId": format!("m-{}", e["Id"].as_str().unwrap_or(""))}))
                            .collect();
                        let answer = json!({"Successful": successful, "Failed": []}).to_string();
                        let mut response = hyper::Response::new(Full::new(Bytes::from(answer)));
                        response
                            .headers_mut()
                            .insert("content-type", "application/x-amz-json-1.0".parse().expect("a valid header"));
                        Ok::<_, hyper::Error>(response)
                    }
                });
                let _ =
                    hyper::server::conn::http1::Builder::new().serve_connection(TokioIo::new(stream), service).await;
            });
        }
    });
    Ok(port)
}

/// The recorded pods/status update that marks a pod Unschedulable, for pod `load-<i>`.
fn review_body(template: &Value, i: u64) -> Bytes {
    let mut review = template.clone();
    let name = format!("load-{i}");
    review["request"]["uid"] = json!(format!("00000000-0000-0000-0000-{i:012}"));
    review["request"]["name"] = json!(name);
    review["request"]["object"]["metadata"]["name"] = json!(name);
    review["request"]["oldObject"]["metadata"]["name"] = json!(name);
    Bytes::from(serde_json::to_vec(&review).expect("a JSON value serializes"))
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

fn main() -> Result<()> {
    let args = args()?;
    let control_plane = ControlPlane::start()?;
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    runtime.block_on(bench(&args, &control_plane))
}

async fn bench(args: &Args, control_plane: &ControlPlane) -> Result<()> {
    let admin = control_plane.client();
    let received = Arc::new(AtomicU64::new(0));
    let sqs_port = fake_sqs(Arc::clone(&received)).await?;
    let port = free_port()?;
    let name = "dovetail-forwarder-bench";
    // Selectors that match nothing in this cluster: the load comes from here, not the API server.
    let configurations: Api<ValidatingWebhookConfiguration> = Api::all(admin.clone());
    configurations.create(&PostParams::default(), &webhook_configuration(name, port, Some("bench"))?).await?;
    let sqs_endpoint = format!("http://127.0.0.1:{sqs_port}");
    let settings = Settings {
        kubeconfig: control_plane.kubeconfig().to_path_buf(),
        configuration: name.into(),
        namespace: "dovetail".into(),
        port,
        queue_url: format!("{sqs_endpoint}/000000000000/dovetail-doorbells"),
        sqs_endpoint,
        log: control_plane.dir().join("forwarder-bench.log"),
        rust_log: "info".into(),
    };
    evict_from_page_cache(&args.forwarder)?;
    let mut forwarder = Forwarder::start(Command::new(&args.forwarder), &settings)?;
    let ca = forwarder.ca_bundle(&admin, name).await?;
    let pid = forwarder.pid();
    println!(
        "forwarder {} (pid {pid}), {} requests/s for {} s over {} connections",
        args.forwarder.display(),
        args.rate,
        args.seconds,
        args.connections
    );

    tokio::time::sleep(Duration::from_secs(10)).await;
    forwarder.check_running()?;
    let idle = memory(pid)?;
    println!(
        "idle (10 s after start):   RSS {} (anonymous {}, files {}; peak so far {})",
        mib(idle.rss),
        mib(idle.anon),
        mib(idle.file),
        mib(idle.peak)
    );

    let template: Value = serde_json::from_slice(&std::fs::read(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../functions/forwarder/fixtures/pod-status-unschedulable.json"
    ))?)?;
    let template = Arc::new(template);
    let next = Arc::new(AtomicU64::new(0));
    let total = u64::from(args.rate) * args.seconds;
    let period = Duration::from_secs_f64(f64::from(args.connections) / f64::from(args.rate));
    let cpu_before = cpu_time(pid)?;
    let started = Instant::now();
    let mut workers = tokio::task::JoinSet::new();
    for worker in 0..args.connections {
        let mut sender = connect(port, &ca).await?;
        let (template, next) = (Arc::clone(&template), Arc::clone(&next));
        // Spread the connections' ticks evenly over one period.
        let offset = period.mul_f64(f64::from(worker) / f64::from(args.connections));
        workers.spawn(async move {
            let mut ticks = tokio::time::interval_at(tokio::time::Instant::now() + offset, period);
            ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Burst);
            let mut latencies = Vec::new();
            let mut errors = 0u64;
            loop {
                ticks.tick().await;
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= total {
                    return (latencies, errors);
                }
                let body = review_body(&template, i);
                let sent = Instant::now();
                match request(&mut sender, "POST", "/admission", body).await {
                    Ok((200, answer)) if answer.windows(14).any(|w| w == b"\"allowed\":true") => {
                        latencies.push(sent.elapsed());
                    }
                    _ => errors += 1,
                }
            }
        });
    }
    let mut peak_under_load = 0;
    let (mut latencies, mut errors) = (Vec::with_capacity(total as usize), 0u64);
    let mut samples = tokio::time::interval(Duration::from_millis(100));
    while !workers.is_empty() {
        tokio::select! {
            _ = samples.tick() => peak_under_load = peak_under_load.max(memory(pid)?.rss),
            Some(done) = workers.join_next() => {
                let (worker_latencies, worker_errors) = done?;
                latencies.extend(worker_latencies);
                errors += worker_errors;
            }
        }
    }
    let elapsed = started.elapsed();
    let cpu = cpu_time(pid)? - cpu_before;
    let after_load = memory(pid)?;
    latencies.sort();
    let answered = latencies.len();
    println!(
        "load: {answered} answered, {} errors in {:.1?} ({:.0}/s), forwarder CPU {:.1?} ({:.0}% of a core)",
        errors,
        elapsed,
        answered as f64 / elapsed.as_secs_f64(),
        cpu,
        100.0 * cpu.as_secs_f64() / elapsed.as_secs_f64()
    );
    println!(
        "latency: p50 {:.2?}  p90 {:.2?}  p99 {:.2?}  p99.9 {:.2?}  max {:.2?}",
        percentile(&latencies, 50.0),
        percentile(&latencies, 90.0),
        percentile(&latencies, 99.0),
        percentile(&latencies, 99.9),
        latencies.last().copied().unwrap_or_default()
    );
    println!(
        "under load: RSS max {} (sampled every 100 ms), at the end {} (anonymous {}, files {})",
        mib(peak_under_load),
        mib(after_load.rss),
        mib(after_load.anon),
        mib(after_load.file)
    );

    tokio::time::sleep(Duration::from_secs(5)).await;
    let after = memory(pid)?;
    println!("after (5 s later):         RSS {}, peak over the whole run (VmHWM) {}", mib(after.rss), mib(after.peak));
    println!("SQS received {} doorbells", received.load(Ordering::Relaxed));
    let mut sender = connect(port, &ca).await?;
    let (_, metrics) = request(&mut sender, "GET", "/metrics", Bytes::new()).await?;
    for line in String::from_utf8_lossy(&metrics).lines().filter(|l| !l.starts_with('#')) {
        println!("  {line}");
    }
    forwarder.check_running()?;
    Ok(())
}
