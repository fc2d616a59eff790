//! The functions as Lambda runs them: the three `bootstrap` binaries that
//! `cargo lambda build --arm64` packages (the release layout, unoptimised), and a smoke run of the provisioner process
//! under `cargo lambda watch`'s runtime API emulator, invoked by `cargo lambda invoke` with a
//! recorded SQS event — against moto for AWS and a private local control plane for Kubernetes
//! (through `DOVETAIL_KUBECONFIG`), where a real pending pod gets an instance.
//!
//! The process is this test binary run again with only [`provisioner_process`] selected, which
//! runs what the provisioner's `main` runs (`dovetail_runtime::aws::run`): `cargo test` does not
//! build the functions' binaries, and building them here would recompile the SDK for another
//! feature set.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::Context;
use dovetail_tests::controlplane::ControlPlane;
use dovetail_tests::lambda::{artifacts, elf_machine, Emulator, FUNCTIONS};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DynamicObject, PostParams};
use serde_json::{json, Value};

use super::Rig;
use crate::aws::{CLUSTER, SSM_PREFIX, TABLE};
use crate::controlplane::{eventually, pod_scheduled, SCHEDULING_TIMEOUT};

/// ELF `e_machine` of AArch64.
const AARCH64: u16 = 183;

/// Set in the child's environment: [`provisioner_process`] runs the provisioner only then.
const CHILD: &str = "DOVETAIL_PROVISIONER_TEST_CHILD";

/// Not a test: the provisioner process the smoke test starts.
#[test]
#[ignore = "the provisioner process the smoke test starts; not a test of its own"]
fn provisioner_process() {
    if std::env::var_os(CHILD).is_none() {
        return;
    }
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let code = match runtime.block_on(dovetail_runtime::aws::run(dovetail_runtime::aws::Kind::Provisioner)) {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("provisioner: {e}");
            1
        }
    };
    std::process::exit(code);
}

#[test]
fn cargo_lambda_packages_three_arm64_bootstraps() {
    let dir = artifacts().expect("cargo lambda build --profile lambda-check --arm64");
    for f in FUNCTIONS {
        let bootstrap = dir.join(f).join("bootstrap");
        assert_eq!(elf_machine(&bootstrap).unwrap(), AARCH64, "{} is an arm64 executable", bootstrap.display());
        let size = std::fs::metadata(&bootstrap).unwrap().len();
        assert!(size > 1 << 20, "{} is a whole function ({size} bytes)", bootstrap.display());
    }
}

/// The example's NodePool and EC2NodeClass, and one of its arm64-only pods, on the control plane.
async fn pending_pod(control_plane: &ControlPlane) -> anyhow::Result<()> {
    let admin = control_plane.client();
    let text = include_str!("../../../infra/examples/arm64-only/nodepool.yaml");
    for doc in serde_yaml_ng::Deserializer::from_str(text) {
        let value = <Value as serde::Deserialize>::deserialize(doc)?;
        let object: DynamicObject = serde_json::from_value(value)?;
        let kind = object.types.as_ref().map(|t| t.kind.clone()).unwrap_or_default();
        let api = if kind == "NodePool" { crate::kube::nodepools(&admin) } else { crate::kube::nodeclasses(&admin) };
        api.create(&PostParams::default(), &object).await.with_context(|| format!("creating the example {kind}"))?;
    }
    let ns = control_plane.namespace(&admin, "payments").await?;
    let pod: Pod = serde_json::from_value(json!({
        "metadata": { "name": "ledger-0", "namespace": ns },
        "spec": {
            "nodeSelector": { "kubernetes.io/arch": "arm64" },
            "containers": [{ "name": "ledger", "image": "registry.k8s.io/pause:3.10",
                             "resources": { "requests": { "cpu": "500m", "memory": "512Mi" } } }],
        },
    }))?;
    let pods: Api<Pod> = Api::namespaced(admin.clone(), &ns);
    pods.create(&PostParams::default(), &pod).await?;
    let pods = &pods;
    eventually("ledger-0 to be marked Unschedulable", SCHEDULING_TIMEOUT, || async move {
        let pod = pods.get("ledger-0").await?;
        Ok(pod_scheduled(&pod).filter(|c| c.reason.as_deref() == Some("Unschedulable")).map(|_| ()))
    })
    .await
}

#[tokio::test]
async fn the_provisioner_binary_serves_a_recorded_sqs_event_under_cargo_lambda() {
    let rig = Rig::new(&["on-demand"]).await;
    rig.aws.eks_cluster().await;
    let control_plane = ControlPlane::start().expect("a private control plane");
    pending_pod(&control_plane).await.unwrap();

    let emulator = Emulator::start().expect("cargo lambda watch --only-lambda-apis");
    let event = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/lambda/sqs-doorbells.json");
    // The invocation waits in the emulator until the function asks for its next event.
    let mut invoke = emulator.invoke("dovetail-provisioner", &event).expect("cargo lambda invoke");
    let log = std::env::temp_dir().join(format!("dovetail-provisioner-{}.log", emulator.port));
    let out = std::fs::File::create(&log).unwrap();
    let mut function = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "functions::lambda::provisioner_process", "--ignored", "--nocapture", "--test-threads=1"])
        .env_clear()
        .env(CHILD, "1")
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("AWS_LAMBDA_RUNTIME_API", emulator.runtime_api("dovetail-provisioner"))
        .env("AWS_LAMBDA_FUNCTION_NAME", "dovetail-provisioner")
        .env("AWS_LAMBDA_FUNCTION_VERSION", "1")
        .env("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "256")
        .env("AWS_ACCESS_KEY_ID", "testing")
        .env("AWS_SECRET_ACCESS_KEY", "testing")
        .env("AWS_REGION", dovetail_tests::moto::REGION)
        .env("AWS_EC2_METADATA_DISABLED", "true")
        .env("DOVETAIL_CLUSTER_NAME", CLUSTER)
        .env("DOVETAIL_TABLE_NAME", TABLE)
        .env("DOVETAIL_RESUME_QUEUE_URL", &rig.interruption_url)
        .env("DOVETAIL_ENDPOINT_URL", rig.aws.config.endpoint_url.as_deref().unwrap())
        .env("DOVETAIL_SSM_PREFIX", SSM_PREFIX)
        .env("DOVETAIL_KUBECONFIG", control_plane.kubeconfig())
        // What Lambda sets from the stacks' LoggingConfig (LogFormat JSON, ApplicationLogLevel
        // INFO), and a RUST_LOG asking for more: the level caps it, with a warning.
        .env("AWS_LAMBDA_LOG_FORMAT", "JSON")
        .env("AWS_LAMBDA_LOG_LEVEL", "INFO")
        .env("RUST_LOG", "debug")
        .stdin(Stdio::null())
        .stdout(out.try_clone().unwrap())
        .stderr(out)
        .spawn()
        .unwrap();
    let function_log = || std::fs::read_to_string(&log).unwrap_or_default();
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        if invoke.try_wait().unwrap().is_some() {
            break;
        }
        if let Some(status) = function.try_wait().unwrap() {
            let _ = invoke.kill();
            panic!("the provisioner exited ({status}) before answering:\n{}", function_log());
        }
        if Instant::now() > deadline {
            let _ = invoke.kill();
            let _ = function.kill();
            panic!("no answer within 120 s; provisioner log:\n{}\nemulator log:\n{}", function_log(), emulator.log());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let output = invoke.wait_with_output().unwrap();
    let _ = function.kill();
    let _ = function.wait();
    let function_log = function_log();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "cargo lambda invoke failed: {}\nfunction log:\n{function_log}\nemulator log:\n{}",
        String::from_utf8_lossy(&output.stderr),
        emulator.log()
    );
    let answer: Value = serde_json::from_str(stdout.trim()).unwrap_or_else(|e| panic!("{e}: {stdout}"));
    assert_eq!(answer, json!({"batchItemFailures": []}), "function log:\n{function_log}");

    // It read the real cluster, planned for the pending pod and launched through moto.
    let instances = rig.instances().await;
    assert_eq!(instances.len(), 1, "one instance for the pod: {instances:?}\nfunction log:\n{function_log}");
    rig.assert_exactly_once("smoke run").await;
    // JSON decision logs and an EMF metrics document.
    // (The first line also carries libtest's "test … ..." before the JSON.)
    let lines: Vec<Value> =
        function_log.lines().filter_map(|l| serde_json::from_str(&l[l.find('{')?..]).ok()).collect();
    assert!(lines.iter().any(|l| l["fields"]["action"] == "Launch"), "a Launch decision logged:\n{function_log}");
    // Lambda's level filtering reads "level"; nothing finer than AWS_LAMBDA_LOG_LEVEL is written
    // (RUST_LOG=debug alone would log the SDK's and kube's requests), and the capped RUST_LOG
    // is said once.
    let levels: Vec<&str> = lines.iter().filter_map(|l| l["level"].as_str()).collect();
    assert!(levels.iter().all(|l| ["INFO", "WARN", "ERROR"].contains(l)), "{levels:?}\n{function_log}");
    let capped = lines.iter().filter(|l| {
        l["level"] == "WARN" && l["fields"]["message"].as_str().is_some_and(|m| m.contains("ApplicationLogLevel"))
    });
    assert_eq!(capped.count(), 1, "one warning that RUST_LOG is capped:\n{function_log}");
    let emf: Vec<Value> = lines.iter().filter(|l| l.get("_aws").is_some()).cloned().collect();
    let function =
        dovetail_runtime::metrics::value(&emf, &dovetail_runtime::metrics::ERRORS, &[("Function", "provisioner")]);
    assert!(function.is_some(), "the provisioner's document among the EMF documents:\n{emf:?}");
    assert_eq!(
        dovetail_runtime::metrics::value(&emf, &dovetail_runtime::metrics::NODECLAIMS_CREATED, &[]),
        Some(&json!(1))
    );
    assert_eq!(dovetail_runtime::metrics::value(&emf, &dovetail_runtime::metrics::PODS_PENDING, &[]), Some(&json!(1)));
}
