//! A function's cold start: from process start to its first request for an event
//! (`GET /2018-06-01/runtime/invocation/next`), with every SDK client built, DescribeCluster
//! answered, the table and the resume queue reached and the Kubernetes client made (from a
//! kubeconfig: see below) — what Lambda bills as init and what the first pending pod waits for.
//!
//! ```sh
//! cargo build --release -p dovetail-provisioner
//! cargo run --release -p dovetail-tests --example function-start -- [--runs 20] [--function PATH]
//! ```
//!
//! AWS is a local moto server (so its round trips cost about a millisecond each instead of the
//! few a region's endpoints take); the runtime API is a socket this program listens on, and the
//! clock stops when the function's first request arrives. Target: 50 ms.

use std::io::Read;
use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use dovetail_tests::moto::{Moto, REGION};

fn arg(name: &str) -> Option<String> {
    let args: Vec<String> = std::env::args().collect();
    args.iter().position(|a| a == name).and_then(|i| args.get(i + 1)).cloned()
}

fn default_binary() -> Result<PathBuf> {
    let target = std::env::var_os("CARGO_TARGET_DIR").map(PathBuf::from).unwrap_or_else(|| "target".into());
    Ok(target.join("release/dovetail-provisioner"))
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<()> {
    let runs: usize = arg("--runs").map(|r| r.parse()).transpose()?.unwrap_or(20);
    let binary = arg("--function").map(PathBuf::from).map_or_else(default_binary, Ok)?;
    if !binary.is_file() {
        bail!("{} is not built: cargo build --release -p dovetail-provisioner", binary.display());
    }
    let moto = Moto::session()?;
    let sdk = moto.sdk_config().await;
    dovetail_aws::dynamo::create_table(&aws_sdk_dynamodb::Client::new(&sdk), "dovetail").await?;
    let queue = aws_sdk_sqs::Client::new(&sdk).create_queue().queue_name("resume").send().await?;
    let queue_url = queue.queue_url().context("queue url")?.to_string();
    dovetail_tests::moto::fixtures::eks_cluster(&aws_sdk_eks::Client::new(&sdk), "bench", "1.31").await?;

    // moto's DescribeCluster answers with a CA that is not a certificate, so the EKS client
    // cannot be built from it: the function reaches "the cluster" through a kubeconfig instead
    // (building the client connects to nothing; minting the EKS token would be a local
    // signature, no round trip either).
    let kubeconfig = std::env::temp_dir().join("dovetail-function-start.kubeconfig");
    std::fs::write(
        &kubeconfig,
        "apiVersion: v1\nkind: Config\ncurrent-context: bench\n\
         clusters: [{name: bench, cluster: {server: 'https://127.0.0.1:6443', insecure-skip-tls-verify: true}}]\n\
         users: [{name: bench, user: {token: bench}}]\n\
         contexts: [{name: bench, context: {cluster: bench, user: bench}}]\n",
    )?;

    let mut times = Vec::with_capacity(runs);
    for _ in 0..runs {
        let runtime_api = TcpListener::bind("127.0.0.1:0")?;
        let address = runtime_api.local_addr()?;
        let started = Instant::now();
        let mut child = Command::new(&binary)
            .env_clear()
            .env("AWS_LAMBDA_RUNTIME_API", address.to_string())
            .env("AWS_LAMBDA_FUNCTION_NAME", "dovetail-provisioner")
            .env("AWS_LAMBDA_FUNCTION_VERSION", "1")
            .env("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "256")
            .env("AWS_ACCESS_KEY_ID", "testing")
            .env("AWS_SECRET_ACCESS_KEY", "testing")
            .env("AWS_REGION", REGION)
            .env("AWS_EC2_METADATA_DISABLED", "true")
            .env("DOVETAIL_CLUSTER_NAME", "bench")
            .env("DOVETAIL_TABLE_NAME", "dovetail")
            .env("DOVETAIL_RESUME_QUEUE_URL", &queue_url)
            .env("DOVETAIL_ENDPOINT_URL", &moto.endpoint)
            .env("DOVETAIL_KUBECONFIG", &kubeconfig)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()?;
        // The clock stops at the first connection; a function that exits first (init failed)
        // or never connects fails the benchmark with its stderr instead of hanging it.
        runtime_api.set_nonblocking(true)?;
        let deadline = started + Duration::from_secs(10);
        let mut stream = loop {
            match runtime_api.accept() {
                Ok((stream, _)) => break stream,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                Err(e) => return Err(e.into()),
            }
            if child.try_wait()?.is_some() || Instant::now() > deadline {
                let _ = child.kill();
                let out = child.wait_with_output()?;
                bail!("the function never asked for an event; stderr:\n{}", String::from_utf8_lossy(&out.stderr));
            }
            std::thread::sleep(Duration::from_micros(200));
        };
        let elapsed = started.elapsed();
        stream.set_nonblocking(false)?;
        let mut first = [0u8; 64];
        let n = stream.read(&mut first)?;
        let request = String::from_utf8_lossy(&first[..n]).to_string();
        let _ = child.kill();
        let out = child.wait_with_output()?;
        if !request.starts_with("GET /2018-06-01/runtime/invocation/next") {
            bail!("unexpected first request {request:?}; stderr: {}", String::from_utf8_lossy(&out.stderr));
        }
        times.push(elapsed);
    }
    times.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    println!(
        "{}: process start -> first GET .../invocation/next over {runs} starts: median {:.1} ms, p90 {:.1} ms, max {:.1} ms (target 50 ms)",
        binary.display(),
        ms(times[runs / 2]),
        ms(times[(runs * 9 / 10).min(runs - 1)]),
        ms(times[runs - 1]),
    );
    Ok(())
}
