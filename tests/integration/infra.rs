//! The deployment artifacts, checked offline as CI runs them (no AWS account, no credentials):
//!
//! - `infra/sam/template.yaml`: `sam validate --lint` and `cfn-lint`, and the functions' contract
//!   read from the template (event types, timeouts against the lease and the queues, binaries);
//! - `infra/cdk`: `cdk synth` (cdk-nag's AWS Solutions checks run inside and fail it), cfn-lint on
//!   its output, its `node --test` assertions, and resource-by-resource agreement with the SAM
//!   template;
//! - both stacks, every way of deploying: queues and table encrypted at rest, the table
//!   recoverable to a point in time, and no EC2 write granted without the cluster's tag
//!   ([`iam`]);
//! - `infra/k8s`: `kubectl apply --dry-run=server -k` against the local kube-apiserver, the
//!   example NodePool and EC2NodeClass through the CRDs and through Dovetail's own validation.
//!
//! The tools come from where `tests/run-all.sh` installs them (SAM CLI and cfn-lint in the moto venv,
//! Node.js, `npm ci` in infra/cdk, kubectl from tests/controlplane/build.sh); a missing one fails
//! its test with the command that installs it.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Mutex, MutexGuard, OnceLock};

use anyhow::{anyhow, bail, ensure, Context, Result};
use dovetail_core::interruption::{self, DISRUPTING_STATES};
use dovetail_tests::controlplane::ControlPlane;
use dovetail_tests::lambda;
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, PostParams};
use serde::Deserialize as _;
use serde_json::{json, Map, Value};

mod iam;

/// The SAM CLI and cfn-lint versions `tests/run-all.sh` installs.
const PYTHON_TOOLS: &str = "\"$HOME/.cache/dovetail/venv/bin/pip\" install 'aws-sam-cli==1.170.0' 'cfn-lint==1.58.0' \
                            (as tests/run-all.sh does)";
/// The cluster name the CDK app is synthesized for, and the SAM template evaluated with.
const CLUSTER: &str = "prod";
/// The longest function timeout: the provisioning lease lives 120 s (shared/core), and an
/// invocation must end well before the lease it holds does.
const MAX_TIMEOUT_SECONDS: u64 = 100;

pub(crate) use dovetail_tests::lambda::workspace as repo;

/// A tool of the venv `tests/run-all.sh` keeps at `$HOME/.cache/dovetail/venv`.
fn venv_tool(name: &str) -> Result<PathBuf> {
    let home = std::env::var_os("HOME").ok_or_else(|| anyhow!("HOME is not set"))?;
    let tool = PathBuf::from(home).join(".cache/dovetail/venv/bin").join(name);
    ensure!(tool.is_file(), "{} is not installed: install it with {PYTHON_TOOLS}", tool.display());
    Ok(tool)
}

/// Runs `command` to completion; its output (stdout then stderr) on success, else an error with
/// the output and the exit status.
pub(crate) fn run(command: &mut Command) -> Result<String> {
    let shown = format!("{command:?}");
    let output = command.stdin(Stdio::null()).output().with_context(|| format!("starting {shown}"))?;
    let text = format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
    if !output.status.success() {
        bail!("{shown} failed ({}):\n{text}", output.status);
    }
    Ok(text)
}

/// The SAM CLI and cfn-lint, offline: a region (SAM wants one) and no telemetry, no instance
/// metadata probing for credentials that are not needed.
fn python_tool(name: &str) -> Result<Command> {
    let mut command = Command::new(venv_tool(name)?);
    command
        .current_dir(repo())
        .env("AWS_DEFAULT_REGION", "us-east-1")
        .env("SAM_CLI_TELEMETRY", "0")
        .env("AWS_EC2_METADATA_DISABLED", "true");
    Ok(command)
}

// --- SAM ---------------------------------------------------------------------------------------

#[test]
fn sam_template_passes_sam_validate_lint() -> Result<()> {
    let out = run(python_tool("sam")?.args(["validate", "--lint", "--template", "infra/sam/template.yaml"]))?;
    ensure!(out.contains("is a valid SAM Template"), "sam validate said:\n{out}");
    Ok(())
}

#[test]
fn sam_template_passes_cfn_lint() -> Result<()> {
    // Exit status 0: no errors, no warnings (cfn-lint applies the SAM transform itself).
    run(python_tool("cfn-lint")?.arg("infra/sam/template.yaml"))?;
    Ok(())
}

/// The SAM template's resources with its parameters' defaults and `overrides`, intrinsic
/// functions resolved to text (see [`Normalizer`]).
fn sam_resources(overrides: &[(&str, &str)]) -> Result<BTreeMap<String, Value>> {
    let path = repo().join("infra/sam/template.yaml");
    let text = std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
    let yaml: serde_yaml_ng::Value =
        serde_yaml_ng::from_str(&text).with_context(|| format!("parsing {}", path.display()))?;
    let mut template = cfn_json(yaml);
    let mut parameters = BTreeMap::new();
    for (name, spec) in template["Parameters"].as_object().context("Parameters")? {
        if let Some(default) = spec.get("Default") {
            parameters.insert(name.clone(), default.clone());
        }
    }
    parameters.insert("ClusterName".to_string(), json!(CLUSTER));
    for (name, value) in overrides {
        ensure!(template["Parameters"].get(*name).is_some(), "the SAM template has no parameter {name}");
        parameters.insert(name.to_string(), json!(value));
    }
    // Globals.Function under every function's own properties, as the SAM transform does (maps
    // merge, the function's values win).
    let globals = template["Globals"]["Function"].clone();
    for resource in template["Resources"].as_object_mut().context("Resources")?.values_mut() {
        if resource["Type"] == "AWS::Serverless::Function" {
            let mut merged = globals.clone();
            merge(&mut merged, &resource["Properties"]);
            resource["Properties"] = merged;
        }
    }
    Normalizer::new(&template, parameters, false)?.resources()
}

/// `overlay` onto `base`: objects merge key by key, anything else is replaced.
fn merge(base: &mut Value, overlay: &Value) {
    match (base, overlay) {
        (Value::Object(base), Value::Object(overlay)) => {
            for (key, value) in overlay {
                merge(base.entry(key.clone()).or_insert(Value::Null), value);
            }
        }
        (base, overlay) => *base = overlay.clone(),
    }
}

/// The provisioner, interruption and sweeper as SAM builds them.
#[test]
fn sam_template_keeps_the_functions_contract() -> Result<()> {
    let resources = sam_resources(&[])?;
    let function = |id: &str| -> Result<&Value> { resources.get(id).with_context(|| format!("no resource {id}")) };

    // One function per binary, built by cargo lambda from the workspace.
    let mut binaries = BTreeSet::new();
    for (id, resource) in &resources {
        if resource["Type"] == "AWS::Serverless::Function" {
            ensure!(resource["Metadata"]["BuildMethod"] == "rust-cargolambda", "{id}: BuildMethod");
            binaries.insert(resource["Metadata"]["BuildProperties"]["Binary"].as_str().context("Binary")?.to_string());
            let timeout = resource["Properties"]["Timeout"].as_u64().with_context(|| format!("{id}: Timeout"))?;
            ensure!(timeout <= MAX_TIMEOUT_SECONDS, "{id}: timeout {timeout} s, too close to the lease's TTL");
        }
    }
    assert_eq!(binaries, lambda::FUNCTIONS.iter().map(|b| b.to_string()).collect());

    // Queues: visibility at least 6 x the consumer's timeout plus its batching window; DLQs.
    for (function_id, event) in [("ProvisionerFunction", "Doorbells"), ("InterruptionFunction", "Interruptions")] {
        let f = function(function_id)?;
        let source = &f["Properties"]["Events"][event];
        assert_eq!(source["Type"], "SQS");
        let properties = &source["Properties"];
        assert_eq!(properties["FunctionResponseTypes"], json!(["ReportBatchItemFailures"]), "{function_id}");
        let queue_id = reference(&properties["Queue"], ".Arn")?;
        let queue = &resources[&queue_id]["Properties"];
        let timeout = f["Properties"]["Timeout"].as_u64().context("Timeout")?;
        let window = properties["MaximumBatchingWindowInSeconds"].as_u64().unwrap_or(0);
        let visibility = queue["VisibilityTimeout"].as_u64().context("VisibilityTimeout")?;
        ensure!(visibility >= 6 * timeout + window, "{queue_id}: visibility {visibility} < 6 x {timeout} + {window}");
        assert_eq!(queue["RedrivePolicy"]["maxReceiveCount"], 5, "{queue_id}");
        assert_eq!(queue["SqsManagedSseEnabled"], true, "{queue_id}");
    }
    let doorbells = &function("ProvisionerFunction")?["Properties"]["Events"]["Doorbells"]["Properties"];
    assert_eq!(doorbells["BatchSize"], 100);
    assert_eq!(doorbells["MaximumBatchingWindowInSeconds"], 1);
    // The functions' environment: what shared/aws/src/config.rs requires, and the queues.
    let environment = &function("ProvisionerFunction")?["Properties"]["Environment"]["Variables"];
    assert_eq!(environment["DOVETAIL_RESUME_QUEUE_URL"], "${InterruptionQueue}");
    // Nothing in the functions reads the doorbell queue's URL (the mapping delivers its messages).
    assert!(environment.get("DOVETAIL_DOORBELL_QUEUE_URL").is_none(), "{environment}");
    assert_eq!(environment["DOVETAIL_CLUSTER_NAME"], CLUSTER);

    // The interruption rules: exactly the (source, detail-type) pairs the parser reads.
    let mut pairs = BTreeSet::new();
    for resource in resources.values().filter(|r| r["Type"] == "AWS::Events::Rule") {
        let pattern = &resource["Properties"]["EventPattern"];
        let source = pattern["source"][0].as_str().context("source")?.to_string();
        // A rule may match several spellings of one event (the Capacity Block warning's).
        for detail_type in pattern["detail-type"].as_array().context("detail-type")? {
            let detail_type = detail_type.as_str().context("detail-type")?.to_string();
            if detail_type == interruption::STATE_CHANGE {
                assert_eq!(pattern["detail"]["state"], json!(DISRUPTING_STATES));
            }
            if detail_type == interruption::HEALTH_EVENT {
                assert_eq!(pattern["detail"], json!({"service": ["EC2"], "eventTypeCategory": ["scheduledChange"]}));
            }
            pairs.insert((source.clone(), detail_type));
        }
    }
    let ec2 = interruption::SOURCE_EC2.to_string();
    let expected: BTreeSet<(String, String)> = [
        (ec2.clone(), interruption::SPOT_INTERRUPTION),
        (ec2.clone(), interruption::REBALANCE_RECOMMENDATION),
        (ec2.clone(), interruption::STATE_CHANGE),
        (ec2.clone(), interruption::CAPACITY_RESERVATION_INTERRUPTION),
        (ec2.clone(), interruption::CAPACITY_BLOCK_EXPIRY[0]),
        (ec2, interruption::CAPACITY_BLOCK_EXPIRY[1]),
        (interruption::SOURCE_HEALTH.to_string(), interruption::HEALTH_EVENT),
    ]
    .into_iter()
    .map(|(source, detail_type)| (source, detail_type.to_string()))
    .collect();
    assert_eq!(pairs, expected);
    Ok(())
}

/// `"${Name.Arn}"` (a normalized GetAtt) → `Name`.
fn reference(value: &Value, suffix: &str) -> Result<String> {
    let text = value.as_str().with_context(|| format!("not a reference: {value}"))?;
    text.strip_prefix("${")
        .and_then(|t| t.strip_suffix('}'))
        .and_then(|t| t.strip_suffix(suffix))
        .map(str::to_string)
        .with_context(|| format!("not a reference ending {suffix}: {text}"))
}

// --- CDK ---------------------------------------------------------------------------------------

/// `infra/cdk` commands one at a time: each compiles the app into `infra/cdk/dist` first.
fn cdk_lock() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

/// A command run in `infra/cdk` with Node.js and the app's `npm ci` dependencies, the functions
/// taken from `lambda_dir`, and the CDK CLI's network features (notices, telemetry) off.
fn cdk_command(program: &str, lambda_dir: &Path) -> Result<Command> {
    let dir = repo().join("infra/cdk");
    for tool in ["node", program] {
        let found = Command::new(tool).arg("--version").stdin(Stdio::null()).output();
        ensure!(
            found.is_ok_and(|o| o.status.success()),
            "{tool} is not installed: tests/run-all.sh installs Node.js and npm with `apt-get install nodejs npm` (Debian)"
        );
    }
    ensure!(
        dir.join("node_modules/aws-cdk/bin/cdk").is_file() && dir.join("node_modules/aws-cdk-lib").is_dir(),
        "{}/node_modules is not installed: run `npm ci` there (as tests/run-all.sh does)",
        dir.display()
    );
    let mut command = Command::new(program);
    command
        .current_dir(&dir)
        .env("DOVETAIL_LAMBDA_DIR", lambda_dir)
        .env("CDK_DISABLE_CLI_TELEMETRY", "true")
        .env("AWS_EC2_METADATA_DISABLED", "true");
    Ok(command)
}

/// `cdk synth` of the app for [`CLUSTER`] with extra context, into a temporary directory; the
/// template's path. cdk-nag runs in the synth: an unacknowledged finding fails it.
fn cdk_synth(context: &[(&str, &str)], lambda_dir: &Path, out: &Path) -> Result<PathBuf> {
    let mut command = cdk_command("node", lambda_dir)?;
    command.args(["node_modules/aws-cdk/bin/cdk", "synth", "--quiet", "--no-notices", "--output"]).arg(out);
    command.args(["--context", &format!("clusterName={CLUSTER}")]);
    for (key, value) in context {
        command.args(["--context", &format!("{key}={value}")]);
    }
    let _turn = cdk_lock();
    run(&mut command)?;
    let template = out.join(format!("Dovetail-{CLUSTER}.template.json"));
    ensure!(template.is_file(), "cdk synth wrote no {}", template.display());
    Ok(template)
}

/// One way to deploy: CDK context and the equivalent SAM parameters.
struct Variant {
    name: &'static str,
    context: &'static [(&'static str, &'static str)],
    parameters: &'static [(&'static str, &'static str)],
}

/// The two ways to deploy: everything made by the stack, or an existing node role (its profile and
/// access entry already there) and an IRSA forwarder.
const VARIANTS: [Variant; 2] = [
    Variant { name: "defaults", context: &[], parameters: &[] },
    Variant {
        name: "existing node role, IRSA",
        context: &[
            ("nodeRoleName", "MyNodes"),
            ("createNodeInstanceProfile", "false"),
            ("createNodeAccessEntry", "false"),
            ("forwarderIdentity", "IRSA"),
            ("nodeRepair", "true"),
            ("minValuesPolicy", "BestEffort"),
            ("costLimitPerHour", "12.5"),
        ],
        parameters: &[
            ("NodeRoleName", "MyNodes"),
            ("CreateNodeInstanceProfile", "false"),
            ("CreateNodeAccessEntry", "false"),
            ("ForwarderIdentity", "IRSA"),
            ("NodeRepair", "true"),
            ("MinValuesPolicy", "BestEffort"),
            ("CostLimitPerHour", "12.5"),
        ],
    },
];

/// A synthesized template: the variant's name and the template's path.
type Synthesized = Vec<(&'static str, PathBuf)>;

/// The synthesized templates of [`VARIANTS`], made once per test run (a synth takes ~20 s) under
/// cargo's temporary directory for tests; what earlier runs left there is removed.
fn cdk_templates() -> Result<&'static Synthesized> {
    static TEMPLATES: OnceLock<Result<Synthesized, String>> = OnceLock::new();
    let made = TEMPLATES.get_or_init(|| {
        let make = || -> Result<Synthesized> {
            let lambda_dir = lambda::artifacts()?;
            let tmp = Path::new(env!("CARGO_TARGET_TMPDIR"));
            for entry in std::fs::read_dir(tmp)? {
                let path = entry?.path();
                let pid = path.file_name().and_then(|n| n.to_str()).and_then(|n| n.strip_prefix("cdk-synth-"));
                if pid.is_some_and(|pid| !Path::new("/proc").join(pid).exists()) {
                    let _ = std::fs::remove_dir_all(&path);
                }
            }
            let root = tmp.join(format!("cdk-synth-{}", std::process::id()));
            let mut templates = Vec::new();
            for (i, variant) in VARIANTS.iter().enumerate() {
                let template = cdk_synth(variant.context, lambda_dir, &root.join(i.to_string()))
                    .with_context(|| format!("cdk synth ({})", variant.name))?;
                templates.push((variant.name, template));
            }
            Ok(templates)
        };
        make().map_err(|e| format!("{e:#}"))
    });
    made.as_ref().map_err(|e| anyhow!("{e}"))
}

#[test]
fn cdk_synth_passes_cdk_nag_and_packages_the_built_functions() -> Result<()> {
    let lambda_dir = lambda::artifacts()?;
    for (name, template) in cdk_templates()? {
        let json: Value = serde_json::from_str(&std::fs::read_to_string(template)?)?;
        let out = template.parent().context("template dir")?;
        let mut packaged = BTreeSet::new();
        for (id, resource) in json["Resources"].as_object().context("Resources")? {
            if resource["Type"] != "AWS::Lambda::Function" {
                continue;
            }
            // The asset CDK staged is the bootstrap cargo lambda built, byte for byte.
            let asset =
                resource["Metadata"]["aws:asset:path"].as_str().with_context(|| format!("{name}: {id} asset"))?;
            let staged = std::fs::read(out.join(asset).join("bootstrap"))?;
            let binary = lambda::FUNCTIONS
                .iter()
                .find(|b| std::fs::read(lambda_dir.join(b).join("bootstrap")).is_ok_and(|built| built == staged))
                .with_context(|| format!("{name}: {id} packages no built bootstrap"))?;
            packaged.insert(*binary);
        }
        assert_eq!(packaged, lambda::FUNCTIONS.into_iter().collect(), "{name}");
    }
    Ok(())
}

#[test]
fn cdk_templates_pass_cfn_lint() -> Result<()> {
    for (name, template) in cdk_templates()? {
        // W3005: CDK makes each function depend on its role explicitly (so the role's policies
        // exist first) although the Role GetAtt already orders them; harmless, and CDK's choice.
        run(python_tool("cfn-lint")?.args(["--ignore-checks", "W3005", "--"]).arg(template))
            .with_context(|| format!("cfn-lint of the CDK template ({name})"))?;
    }
    Ok(())
}

#[test]
fn cdk_assertions_pass() -> Result<()> {
    let lambda_dir = lambda::artifacts()?;
    let mut command = cdk_command("npm", lambda_dir)?;
    command.args(["test", "--silent"]);
    let _turn = cdk_lock();
    let out = run(&mut command)?;
    ensure!(out.contains("# fail 0") && !out.contains("# pass 0"), "node --test said:\n{out}");
    Ok(())
}

#[test]
fn cdk_synth_without_built_functions_says_how_to_build_them() -> Result<()> {
    let empty = std::env::temp_dir().join(format!("dovetail-no-lambdas-{}", std::process::id()));
    std::fs::create_dir_all(&empty)?;
    let out = empty.join("cdk.out");
    let result = cdk_synth(&[], &empty, &out);
    let _ = std::fs::remove_dir_all(&empty);
    let message = format!("{:#}", result.err().context("cdk synth succeeded without the functions")?);
    ensure!(
        message.contains("dovetail-provisioner/bootstrap does not exist")
            && message.contains("cargo lambda build --release --arm64"),
        "the error does not say what to build:\n{message}"
    );
    ensure!(!message.contains("    at "), "a stack trace instead of a message:\n{message}");
    Ok(())
}

/// SAM and CDK make the same stack: for both variants, resource by resource, the properties
/// that matter agree once intrinsic functions are resolved to text.
#[test]
fn sam_and_cdk_make_the_same_stack() -> Result<()> {
    for ((name, template), variant) in cdk_templates()?.iter().zip(VARIANTS) {
        let cdk_json: Value = serde_json::from_str(&std::fs::read_to_string(template)?)?;
        let cdk = Normalizer::new(&cdk_json, BTreeMap::new(), true)?.resources()?;
        let sam = sam_resources(variant.parameters)?;
        let sam = comparable(&sam, Flavour::Sam).with_context(|| format!("SAM ({name})"))?;
        let cdk = comparable(&cdk, Flavour::Cdk).with_context(|| format!("CDK ({name})"))?;
        let keys: BTreeSet<&String> = sam.keys().chain(cdk.keys()).collect();
        let mut found = Vec::new();
        for key in keys {
            differences(sam.get(key).unwrap_or(&Value::Null), cdk.get(key).unwrap_or(&Value::Null), key, &mut found);
        }
        ensure!(found.is_empty(), "{name}: SAM and CDK differ (SAM / CDK):\n{}", found.join("\n"));
    }
    Ok(())
}

/// Where `left` and `right` differ, one line per differing leaf: `path: <left> / <right>`.
pub(crate) fn differences(left: &Value, right: &Value, path: &str, out: &mut Vec<String>) {
    match (left, right) {
        (Value::Object(a), Value::Object(b)) => {
            let keys: BTreeSet<&String> = a.keys().chain(b.keys()).collect();
            for key in keys {
                let (x, y) = (a.get(key).unwrap_or(&Value::Null), b.get(key).unwrap_or(&Value::Null));
                differences(x, y, &format!("{path}.{key}"), out);
            }
        }
        (Value::Array(a), Value::Array(b)) if a.len() == b.len() => {
            for (i, (x, y)) in a.iter().zip(b).enumerate() {
                differences(x, y, &format!("{path}[{i}]"), out);
            }
        }
        (a, b) if a == b => {}
        (a, b) => out.push(format!("{path}: {a} / {b}")),
    }
}

#[derive(Clone, Copy, PartialEq)]
enum Flavour {
    Sam,
    Cdk,
}

/// What each template says about each resource, under names both share: the properties Dovetail
/// sets on purpose (not CDK's or SAM's incidental ones, such as CDK's wider EventBridge queue
/// grant or SAM's scheduler role, which each test checks on its own).
fn comparable(resources: &BTreeMap<String, Value>, flavour: Flavour) -> Result<BTreeMap<String, Value>> {
    let mut out = BTreeMap::new();
    let pick = |properties: &Value, keys: &[&str]| -> Value {
        let mut picked = Map::new();
        for key in keys {
            if let Some(v) = properties.get(*key) {
                picked.insert(key.to_string(), v.clone());
            }
        }
        Value::Object(picked)
    };
    for (id, resource) in resources {
        let p = &resource["Properties"];
        let ty = resource["Type"].as_str().unwrap_or_default();
        match ty {
            "AWS::SQS::Queue" => {
                out.insert(
                    format!("queue {id}"),
                    pick(p, &["SqsManagedSseEnabled", "VisibilityTimeout", "MessageRetentionPeriod", "RedrivePolicy"]),
                );
            }
            "AWS::Events::Rule" => {
                let mut rule = pick(p, &["Description", "EventPattern"]);
                // Target ids are names of no consequence (CDK numbers them).
                rule["Targets"] =
                    p["Targets"].as_array().map(|t| t.iter().map(|t| t["Arn"].clone()).collect::<Vec<_>>()).into();
                out.insert(format!("rule {id}"), rule);
            }
            "AWS::DynamoDB::Table" => {
                let mut table = pick(
                    p,
                    &[
                        "BillingMode",
                        "KeySchema",
                        "GlobalSecondaryIndexes",
                        "LocalSecondaryIndexes",
                        "TimeToLiveSpecification",
                        "PointInTimeRecoverySpecification",
                        "SSESpecification",
                    ],
                );
                let mut attributes = p["AttributeDefinitions"].as_array().cloned().unwrap_or_default();
                attributes.sort_by_key(Value::to_string);
                table["AttributeDefinitions"] = Value::Array(attributes);
                table["DeletionPolicy"] = resource["DeletionPolicy"].clone();
                out.insert(format!("table {id}"), table);
            }
            "AWS::Logs::LogGroup" => {
                out.insert(format!("log group {id}"), pick(p, &["LogGroupName", "RetentionInDays"]));
            }
            // CDK's role for the sweeper's schedule; SAM's transform makes its own (neither is in the
            // other's template).
            "AWS::IAM::Role" if id == "SweepScheduleRole" => {}
            "AWS::IAM::Role" => {
                let mut role = pick(p, &["RoleName", "Description", "AssumeRolePolicyDocument", "Policies"]);
                let mut managed: Vec<String> =
                    p["ManagedPolicyArns"].as_array().map(|a| a.iter().map(scalar_text).collect()).unwrap_or_default();
                managed.sort();
                role["ManagedPolicyArns"] = json!(managed);
                out.insert(format!("role {id}"), canonical_policy(role));
            }
            "AWS::IAM::ManagedPolicy" => {
                out.insert(format!("policy {id}"), canonical_policy(pick(p, &["Description", "PolicyDocument"])));
            }
            "AWS::IAM::InstanceProfile" => {
                out.insert(format!("instance profile {id}"), pick(p, &["InstanceProfileName", "Roles"]));
            }
            "AWS::EKS::AccessEntry" => {
                out.insert(
                    format!("access entry {id}"),
                    pick(p, &["ClusterName", "PrincipalArn", "Type", "KubernetesGroups"]),
                );
            }
            "AWS::EKS::PodIdentityAssociation" => {
                out.insert(
                    format!("pod identity {id}"),
                    pick(p, &["ClusterName", "Namespace", "ServiceAccount", "RoleArn"]),
                );
            }
            "AWS::Serverless::Function" | "AWS::Lambda::Function" => {
                let mut function = pick(
                    p,
                    &[
                        "Description",
                        "Runtime",
                        "Architectures",
                        "Handler",
                        "MemorySize",
                        "Timeout",
                        "Role",
                        "LoggingConfig",
                    ],
                );
                function["Environment"] = p["Environment"]["Variables"].clone();
                if flavour == Flavour::Sam {
                    // SAM's event sources and async settings, in the shape of CDK's resources.
                    for (event, source) in p["Events"].as_object().into_iter().flatten() {
                        let s = &source["Properties"];
                        match source["Type"].as_str() {
                            Some("SQS") => {
                                let mut mapping = pick(
                                    s,
                                    &[
                                        "BatchSize",
                                        "MaximumBatchingWindowInSeconds",
                                        "FunctionResponseTypes",
                                        "ScalingConfig",
                                    ],
                                );
                                mapping["EventSourceArn"] = s["Queue"].clone();
                                mapping["FunctionName"] = json!(format!("${{{id}}}"));
                                out.insert(format!("event source {event}"), mapping);
                            }
                            Some("ScheduleV2") => {
                                let mut schedule =
                                    pick(s, &["Description", "ScheduleExpression", "FlexibleTimeWindow"]);
                                schedule["Target"] =
                                    json!({"Arn": format!("${{{id}.Arn}}"), "RetryPolicy": s["RetryPolicy"]});
                                out.insert("schedule".to_string(), schedule);
                            }
                            other => bail!("{id}: event {event} of type {other:?}"),
                        }
                    }
                    if let Some(config) = p.get("EventInvokeConfig") {
                        let mut invoke = config.clone();
                        invoke["FunctionName"] = json!(format!("${{{id}}}"));
                        out.insert(format!("invoke config {id}"), invoke);
                    }
                }
                out.insert(format!("function {id}"), function);
            }
            "AWS::Lambda::EventSourceMapping" => {
                let name = match id.as_str() {
                    "DoorbellsMapping" => "Doorbells",
                    "InterruptionsMapping" => "Interruptions",
                    other => bail!("unexpected event source mapping {other}"),
                };
                out.insert(
                    format!("event source {name}"),
                    pick(
                        p,
                        &[
                            "BatchSize",
                            "MaximumBatchingWindowInSeconds",
                            "FunctionResponseTypes",
                            "ScalingConfig",
                            "EventSourceArn",
                            "FunctionName",
                        ],
                    ),
                );
            }
            "AWS::Scheduler::Schedule" => {
                let mut schedule = pick(p, &["Description", "ScheduleExpression", "FlexibleTimeWindow"]);
                schedule["Target"] = json!({"Arn": p["Target"]["Arn"], "RetryPolicy": p["Target"]["RetryPolicy"]});
                out.insert("schedule".to_string(), schedule);
            }
            "AWS::Lambda::EventInvokeConfig" => {
                let function = p["FunctionName"].as_str().unwrap_or_default();
                let id = function.trim_start_matches("${").trim_end_matches('}');
                out.insert(
                    format!("invoke config {id}"),
                    pick(p, &["MaximumRetryAttempts", "MaximumEventAgeInSeconds", "FunctionName"]),
                );
            }
            "AWS::CloudWatch::Alarm" => {
                let mut alarm = pick(
                    p,
                    &[
                        "AlarmDescription",
                        "Namespace",
                        "MetricName",
                        "Dimensions",
                        "Statistic",
                        "Period",
                        "EvaluationPeriods",
                        "DatapointsToAlarm",
                        "Threshold",
                        "ComparisonOperator",
                        "TreatMissingData",
                        "Metrics",
                        "AlarmActions",
                        "OKActions",
                    ],
                );
                // The SAM template's `!If [HasAlarmTopic, …, !Ref AWS::NoValue]` is CDK's absent key.
                if let Value::Object(map) = &mut alarm {
                    map.retain(|_, v| v != "${AWS::NoValue}");
                    // Numbers from parameters arrive as text (CloudFormation's spelling), CDK's as numbers.
                    for v in map.values_mut() {
                        if let Some(n) = v.as_str().and_then(|t| t.parse::<f64>().ok()) {
                            *v = json!(n);
                        } else if let Some(n) = v.as_f64() {
                            *v = json!(n);
                        }
                    }
                }
                out.insert(format!("alarm {id}"), alarm);
            }
            "AWS::CloudWatch::Dashboard" => {
                let body = p["DashboardBody"].as_str().with_context(|| format!("{id}: DashboardBody"))?;
                let body: Value = serde_json::from_str(body).with_context(|| format!("{id}: DashboardBody is JSON"))?;
                out.insert(format!("dashboard {id}"), json!({"DashboardName": p["DashboardName"], "Body": body}));
            }
            // Checked by each stack's own tests: CDK grants EventBridge more SQS actions than the
            // SAM template, and splits the queue policies differently.
            "AWS::SQS::QueuePolicy" | "AWS::IAM::Policy" | "AWS::CDK::Metadata" => {}
            other => bail!("{id}: resource type {other} is not compared; add it to `comparable`"),
        }
    }
    Ok(out)
}

/// Policy documents in one spelling: a one-element list is its element (CDK writes `"Action":
/// "x"` where the SAM template may write `[x]`), and `Version` is left out.
fn canonical_policy(mut value: Value) -> Value {
    fn walk(value: &mut Value) {
        match value {
            Value::Array(items) => {
                items.iter_mut().for_each(walk);
                if items.len() == 1 {
                    *value = items.pop().expect("one item");
                }
            }
            Value::Object(map) => {
                map.remove("Version");
                map.values_mut().for_each(walk);
            }
            _ => {}
        }
    }
    walk(&mut value);
    value
}

/// CloudFormation YAML (with `!Ref`, `!GetAtt`, `!Sub`… short forms) as the JSON form.
fn cfn_json(value: serde_yaml_ng::Value) -> Value {
    use serde_yaml_ng::Value as Y;
    match value {
        Y::Null => Value::Null,
        Y::Bool(b) => Value::Bool(b),
        Y::Number(n) => serde_json::to_value(n).unwrap_or(Value::Null),
        Y::String(s) => Value::String(s),
        Y::Sequence(items) => Value::Array(items.into_iter().map(cfn_json).collect()),
        Y::Mapping(map) => {
            Value::Object(map.into_iter().map(|(k, v)| (scalar_text(&cfn_json(k)), cfn_json(v))).collect())
        }
        Y::Tagged(tagged) => {
            let tag = tagged.tag.to_string();
            let tag = tag.trim_start_matches('!');
            let inner = cfn_json(tagged.value);
            match tag {
                "Ref" => json!({ "Ref": inner }),
                "Condition" => json!({ "Condition": inner }),
                "GetAtt" => match inner {
                    Value::String(s) => {
                        let (resource, attribute) = s.split_once('.').unwrap_or((&s, ""));
                        json!({ "Fn::GetAtt": [resource, attribute] })
                    }
                    other => json!({ "Fn::GetAtt": other }),
                },
                other => json!({ format!("Fn::{other}"): inner }),
            }
        }
    }
}

/// A scalar as text (`30` → `"30"`, `true` → `"true"`).
fn scalar_text(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// Resolves a template's intrinsic functions to text so two templates can be compared: `Ref` of a
/// parameter is its value, of a pseudo parameter or resource `${Name}`; `GetAtt` is
/// `${Resource.Attribute}`; `Sub` and `Join` are the resulting text; `If` and resource
/// `Condition`s are evaluated. CDK's logical IDs lose their 8-hex-digit hash.
struct Normalizer<'a> {
    template: &'a Value,
    parameters: BTreeMap<String, Value>,
    conditions: BTreeMap<String, bool>,
    strip_hashes: bool,
}

impl<'a> Normalizer<'a> {
    fn new(template: &'a Value, parameters: BTreeMap<String, Value>, strip_hashes: bool) -> Result<Self> {
        let mut normalizer = Normalizer { template, parameters, conditions: BTreeMap::new(), strip_hashes };
        let definitions = template.get("Conditions").and_then(Value::as_object).cloned().unwrap_or_default();
        // Conditions may refer to each other: evaluate until every one is known.
        while normalizer.conditions.len() < definitions.len() {
            let before = normalizer.conditions.len();
            for (name, definition) in &definitions {
                if let Some(value) = normalizer.condition(definition)? {
                    normalizer.conditions.insert(name.clone(), value);
                }
            }
            ensure!(normalizer.conditions.len() > before, "conditions refer to themselves or to unknown ones");
        }
        Ok(normalizer)
    }

    /// A condition's value, or None while a condition it uses is not yet evaluated.
    fn condition(&self, definition: &Value) -> Result<Option<bool>> {
        let (function, arguments) = single(definition).context("a condition is not a function")?;
        Ok(match function {
            "Condition" => self.conditions.get(arguments.as_str().context("Condition name")?).copied(),
            "Fn::Equals" => {
                let args = arguments.as_array().context("Fn::Equals")?;
                Some(scalar_text(&self.value(&args[0])?) == scalar_text(&self.value(&args[1])?))
            }
            "Fn::Or" | "Fn::And" => {
                let mut values = Vec::new();
                for argument in arguments.as_array().context(function.to_string())? {
                    match self.condition(argument)? {
                        Some(v) => values.push(v),
                        None => return Ok(None),
                    }
                }
                Some(if function == "Fn::Or" { values.iter().any(|v| *v) } else { values.iter().all(|v| *v) })
            }
            "Fn::Not" => self.condition(&arguments[0])?.map(|v| !v),
            other => bail!("condition function {other}"),
        })
    }

    fn logical_id(&self, id: &str) -> String {
        let hashed = id.len() > 8 && id[id.len() - 8..].bytes().all(|b| b.is_ascii_digit() || b.is_ascii_uppercase());
        if self.strip_hashes && hashed && id.as_bytes()[id.len() - 9].is_ascii_lowercase() {
            id[..id.len() - 8].to_string()
        } else {
            id.to_string()
        }
    }

    fn resources(&self) -> Result<BTreeMap<String, Value>> {
        let mut out = BTreeMap::new();
        for (id, resource) in self.template["Resources"].as_object().context("Resources")? {
            if let Some(condition) = resource.get("Condition").and_then(Value::as_str) {
                if !self.conditions.get(condition).copied().with_context(|| format!("{id}: condition {condition}"))? {
                    continue;
                }
            }
            out.insert(self.logical_id(id), self.value(resource).with_context(|| format!("resource {id}"))?);
        }
        Ok(out)
    }

    /// `value` with every intrinsic function resolved.
    fn value(&self, value: &Value) -> Result<Value> {
        if let Some((function, arguments)) = single(value) {
            return self.function(function, arguments);
        }
        Ok(match value {
            Value::Array(items) => Value::Array(items.iter().map(|v| self.value(v)).collect::<Result<_>>()?),
            Value::Object(map) => {
                Value::Object(map.iter().map(|(k, v)| Ok((k.clone(), self.value(v)?))).collect::<Result<_>>()?)
            }
            other => other.clone(),
        })
    }

    fn function(&self, function: &str, arguments: &Value) -> Result<Value> {
        let text = |v: &Value| -> Result<String> { Ok(scalar_text(&self.value(v)?)) };
        Ok(match function {
            "Ref" => {
                let name = arguments.as_str().context("Ref")?;
                match self.parameters.get(name) {
                    Some(value) => value.clone(),
                    None => json!(format!("${{{}}}", self.logical_id(name))),
                }
            }
            "Fn::GetAtt" => {
                let parts = arguments.as_array().context("Fn::GetAtt")?;
                json!(format!(
                    "${{{}.{}}}",
                    self.logical_id(parts[0].as_str().context("GetAtt resource")?),
                    text(&parts[1])?
                ))
            }
            "Fn::Sub" => {
                // `!Sub text` or `!Sub [text, {name: value}]`.
                let (template, variables) = match arguments {
                    Value::Array(parts) => (parts.first(), parts.get(1).and_then(Value::as_object)),
                    text => (Some(text), None),
                };
                let template = template.and_then(Value::as_str).context("Fn::Sub text")?;
                let mut out = String::new();
                let mut rest = template;
                while let Some(start) = rest.find("${") {
                    out.push_str(&rest[..start]);
                    let end = rest[start..].find('}').context("unclosed ${ in Fn::Sub")? + start;
                    let name = &rest[start + 2..end];
                    if let Some(value) = variables.and_then(|v| v.get(name)) {
                        out.push_str(&text(value)?);
                        rest = &rest[end + 1..];
                        continue;
                    }
                    match self.parameters.get(name) {
                        Some(value) => out.push_str(&scalar_text(value)),
                        None => {
                            let (resource, attribute) = match name.split_once('.') {
                                Some((r, a)) if !name.starts_with("AWS::") => (self.logical_id(r), format!(".{a}")),
                                _ => (name.to_string(), String::new()),
                            };
                            out.push_str(&format!("${{{resource}{attribute}}}"));
                        }
                    }
                    rest = &rest[end + 1..];
                }
                out.push_str(rest);
                Value::String(out)
            }
            "Fn::Join" => {
                let parts = arguments.as_array().context("Fn::Join")?;
                let separator = parts[0].as_str().context("Join separator")?;
                let items: Vec<String> =
                    parts[1].as_array().context("Join list")?.iter().map(text).collect::<Result<_>>()?;
                Value::String(items.join(separator))
            }
            "Fn::If" => {
                let parts = arguments.as_array().context("Fn::If")?;
                let condition = parts[0].as_str().context("If condition")?;
                let chosen = if *self.conditions.get(condition).with_context(|| format!("condition {condition}"))? {
                    &parts[1]
                } else {
                    &parts[2]
                };
                self.value(chosen)?
            }
            // A condition reference inside a condition definition is evaluated by `condition`.
            "Condition" => arguments.clone(),
            other => bail!("intrinsic function {other} is not resolved"),
        })
    }
}

/// `{"Ref" | "Fn::…" | "Condition": arguments}` → (name, arguments).
fn single(value: &Value) -> Option<(&str, &Value)> {
    let map = value.as_object()?;
    if map.len() != 1 {
        return None;
    }
    let (key, arguments) = map.iter().next()?;
    (key == "Ref" || key == "Condition" || key.starts_with("Fn::")).then_some((key.as_str(), arguments))
}

// --- Both stacks: data at rest, EC2 grants ------------------------------------------------------

/// Every way of deploying, as resources with intrinsic functions resolved: the SAM template and
/// the CDK app's template for each of [`VARIANTS`], named `SAM (<variant>)` and `CDK (<variant>)`.
fn every_stack() -> Result<Vec<(String, BTreeMap<String, Value>)>> {
    let mut stacks = Vec::new();
    for variant in &VARIANTS {
        stacks.push((format!("SAM ({})", variant.name), sam_resources(variant.parameters)?));
    }
    for (name, template) in cdk_templates()? {
        let json: Value = serde_json::from_str(&std::fs::read_to_string(template)?)?;
        stacks.push((format!("CDK ({name})"), Normalizer::new(&json, BTreeMap::new(), true)?.resources()?));
    }
    Ok(stacks)
}

/// Every queue, dead-letter queues included, is encrypted at rest with SQS's own keys (SSE-SQS,
/// no KMS key: EventBridge could not deliver to a queue under the aws/sqs key); the table with the
/// account's AWS managed key and point-in-time recovery on. In every way of deploying.
#[test]
fn stacks_encrypt_queues_and_table_at_rest_and_keep_the_table_recoverable() -> Result<()> {
    for (name, resources) in every_stack()? {
        let of_type = |ty: &str| resources.iter().filter(|(_, r)| r["Type"] == ty).collect::<Vec<_>>();
        let queues = of_type("AWS::SQS::Queue");
        ensure!(queues.len() == 4, "{name}: {} queues, expected two and their dead-letter queues", queues.len());
        for (id, queue) in queues {
            let properties = &queue["Properties"];
            ensure!(properties["SqsManagedSseEnabled"] == true, "{name}: {id} is not encrypted with SSE-SQS");
            ensure!(properties.get("KmsMasterKeyId").is_none(), "{name}: {id} names a KMS key");
        }
        let tables = of_type("AWS::DynamoDB::Table");
        ensure!(tables.len() == 1, "{name}: {} tables", tables.len());
        let (id, table) = tables[0];
        let properties = &table["Properties"];
        assert_eq!(properties["SSESpecification"], json!({"SSEEnabled": true}), "{name}: {id} encryption");
        assert_eq!(
            properties["PointInTimeRecoverySpecification"],
            json!({"PointInTimeRecoveryEnabled": true}),
            "{name}: {id} point-in-time recovery"
        );
    }
    Ok(())
}

/// No policy of the stack grants an EC2 write without this cluster's tag ([`iam`]), in every way
/// of deploying. And the check reads the real role: the same stack with one unconditioned
/// `TerminateInstances` added to the functions' role fails it.
#[test]
fn stacks_grant_ec2_writes_only_under_the_cluster_tag() -> Result<()> {
    for (name, resources) in every_stack()? {
        let found = iam::untagged_ec2_writes(&resources, CLUSTER);
        ensure!(found.is_empty(), "{name}:\n{}", found.join("\n"));

        let mut broken = resources.clone();
        let statements = broken
            .get_mut("FunctionsRole")
            .and_then(|role| role.pointer_mut("/Properties/Policies/0/PolicyDocument/Statement"))
            .and_then(Value::as_array_mut)
            .with_context(|| format!("{name}: the functions' role has no inline policy statements"))?;
        statements.push(
            json!({"Sid": "Unconditioned", "Effect": "Allow", "Action": "ec2:TerminateInstances", "Resource": "*"}),
        );
        let found = iam::untagged_ec2_writes(&broken, CLUSTER);
        ensure!(
            found.len() == 1 && found[0].contains("Unconditioned: ec2:TerminateInstances on *"),
            "{name}: an unconditioned TerminateInstances was not caught: {found:?}"
        );
    }
    Ok(())
}

// --- Kubernetes --------------------------------------------------------------------------------

/// `kubectl <args>` against the shared control plane, from the repository root.
pub(crate) fn kubectl(control_plane: &ControlPlane, args: &[&str]) -> Result<String> {
    let mut command = control_plane.kubectl()?;
    command.current_dir(repo()).args(args);
    run(&mut command)
}

/// Every object in the YAML files of `dir` (and its subdirectories), as `Kind/name`, leaving out
/// kustomization files.
fn objects_in(dir: &Path) -> Result<BTreeSet<String>> {
    let mut objects = BTreeSet::new();
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)?.map(|e| e.map(|e| e.path())).collect::<Result<_, _>>()?;
    entries.sort();
    for path in entries {
        if path.is_dir() {
            objects.extend(objects_in(&path)?);
            continue;
        }
        let is_yaml = path.extension().is_some_and(|e| e == "yaml" || e == "yml");
        if !is_yaml || path.file_name().is_some_and(|n| n == "kustomization.yaml") {
            continue;
        }
        let text = std::fs::read_to_string(&path)?;
        for document in serde_yaml_ng::Deserializer::from_str(&text) {
            let value = serde_yaml_ng::Value::deserialize(document)?;
            if value.is_null() {
                continue;
            }
            let kind =
                value["kind"].as_str().with_context(|| format!("{}: a document without kind", path.display()))?;
            let name = value["metadata"]["name"]
                .as_str()
                .with_context(|| format!("{}: {kind} without a name", path.display()))?;
            objects.insert(format!("{kind}/{name}"));
        }
    }
    Ok(objects)
}

/// The `Kind/name`s in `kubectl` output of the form `<resource>.<group>/<name> <verb> (server dry run)`.
pub(crate) fn dry_run_objects(output: &str) -> BTreeSet<String> {
    output
        .lines()
        .filter(|line| line.ends_with("(server dry run)"))
        .filter_map(|line| line.split_whitespace().next())
        .map(str::to_string)
        .collect()
}

/// `kubectl apply --dry-run=server -k infra/k8s` passes the real API server's validation
/// (schemas, CRD structural checks, webhook configuration rules), and the kustomization carries
/// every manifest under crds/, rbac/ and forwarder/.
#[tokio::test]
async fn k8s_kustomization_applies_on_the_api_server() -> Result<()> {
    let control_plane = ControlPlane::shared();
    let root = repo().join("infra/k8s");
    let rendered = kubectl(control_plane, &["kustomize", "infra/k8s"])?;
    let mut listed = BTreeSet::new();
    for document in serde_yaml_ng::Deserializer::from_str(&rendered) {
        let value = serde_yaml_ng::Value::deserialize(document)?;
        listed.insert(format!(
            "{}/{}",
            value["kind"].as_str().context("kind")?,
            value["metadata"]["name"].as_str().context("name")?
        ));
    }
    let mut expected = BTreeSet::new();
    for dir in ["crds", "policy", "rbac", "forwarder"] {
        expected.extend(objects_in(&root.join(dir))?);
    }
    assert_eq!(listed, expected, "infra/k8s/kustomization.yaml does not carry exactly the manifests under infra/k8s");
    for example in objects_in(&root.join("examples"))? {
        assert!(!listed.contains(&example), "{example}: the examples need established CRDs, so they apply separately");
    }

    // A server-side dry run does not keep the Namespace it "creates", so the forwarder's
    // namespaced objects would be refused for want of it; a real apply creates it first
    // (kustomize orders Namespaces first). Make it exist, as it would then.
    let namespaces: Api<Namespace> = Api::all(control_plane.client());
    if namespaces.get_opt("dovetail").await?.is_none() {
        let namespace: Namespace = serde_json::from_value(json!({"metadata": {"name": "dovetail"}}))?;
        match namespaces.create(&PostParams::default(), &namespace).await {
            Ok(_) => {}
            Err(kube::Error::Api(status)) if status.code == 409 => {}
            Err(e) => return Err(e).context("creating namespace dovetail"),
        }
    }
    let out = kubectl(control_plane, &["apply", "--dry-run=server", "-k", "infra/k8s"])?;
    let applied = dry_run_objects(&out);
    assert_eq!(applied.len(), expected.len(), "kubectl applied {applied:?}, expected {expected:?}:\n{out}");
    Ok(())
}

/// The example NodePool and EC2NodeClass pass the CRDs' schemas and CEL rules on the API server
/// (after the CRDs are established, as the examples' kustomization says), and Dovetail's own
/// validation; and the dry run does refuse a NodePool the CRD forbids.
#[tokio::test]
async fn k8s_examples_apply_on_the_api_server_and_validate() -> Result<()> {
    let control_plane = ControlPlane::shared();
    let out = kubectl(control_plane, &["apply", "--dry-run=server", "-k", "infra/k8s/examples"])?;
    assert_eq!(
        dry_run_objects(&out),
        ["ec2nodeclass.dovetail.dev/default", "nodepool.dovetail.dev/default"]
            .into_iter()
            .map(str::to_string)
            .collect(),
        "{out}"
    );

    let dir = repo().join("infra/k8s/examples");
    let inputs = dovetail_api::manifest::load(&[dir.join("nodepool.yaml"), dir.join("ec2nodeclass.yaml")])
        .map_err(|e| anyhow!("{e}"))?;
    let snapshot = inputs.snapshot().map_err(|e| anyhow!("{e}"))?;
    assert_eq!(snapshot.nodepools.len(), 1);
    assert_eq!(snapshot.nodeclasses.len(), 1);
    assert_eq!(snapshot.nodepools[0].node_class, snapshot.nodeclasses[0].name);

    // The same dry run with a requirement the CRD's rules refuse: the check can fail.
    let broken = std::env::temp_dir().join(format!("dovetail-broken-nodepool-{}", std::process::id()));
    std::fs::create_dir_all(&broken)?;
    let nodepool = std::fs::read_to_string(dir.join("nodepool.yaml"))?
        .replace("operator: Gt\n          values: [\"5\"]", "operator: Gt\n          values: [\"five\"]");
    std::fs::write(broken.join("nodepool.yaml"), nodepool)?;
    let refused = kubectl(
        control_plane,
        &["apply", "--dry-run=server", "-f", &broken.join("nodepool.yaml").display().to_string()],
    );
    let _ = std::fs::remove_dir_all(&broken);
    let message = format!("{:#}", refused.err().context("the API server accepted Gt five")?);
    ensure!(message.contains("'Gt', 'Lt', 'Gte' or 'Lte' must have a single non-negative integer value"), "{message}");
    Ok(())
}

/// Each Karpenter 1.14 field Dovetail refuses (`dovetail_api::crd::refused`) is refused by the API
/// server with the CRDs' CEL rules, on that field and with the message naming it; an open-ended
/// one (`spec.kubelet.*`) by strict field validation, kubectl's default, as an unknown field.
#[tokio::test]
async fn k8s_refused_karpenter_fields_are_refused_on_the_api_server() -> Result<()> {
    use dovetail_api::crd::refused::REFUSED_FIELDS;
    let control_plane = ControlPlane::shared();
    let examples = repo().join("infra/k8s/examples");
    // Values as a Karpenter user would write them; any other field gets 1.
    let samples = BTreeMap::from([
        ("spec.replicas", json!(3)),
        ("spec.blockDeviceMappings[].ebs.volumeInitializationRate", json!(200)),
        ("spec.connectionTracking", json!({"tcpEstablishedTimeout": 600})),
        ("spec.cpuOptions", json!({"nestedVirtualization": "enabled"})),
        ("spec.ipPrefixCount", json!(1)),
        ("spec.networkInterfaces", json!([{"networkCardIndex": 0, "deviceIndex": 0, "interfaceType": "interface"}])),
        ("spec.placementGroupSelector", json!({"name": "analytics"})),
        ("spec.kubelet.*", json!("10Mi")),
    ]);
    let dir = std::env::temp_dir().join(format!("dovetail-refused-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let mut problems = Vec::new();
    for refused in REFUSED_FIELDS {
        let file = if refused.kind == "NodePool" { "nodepool.yaml" } else { "ec2nodeclass.yaml" };
        let mut object: Value = serde_yaml_ng::from_str(&std::fs::read_to_string(examples.join(file))?)?;
        object["metadata"]["name"] = json!("refused-fields");
        // The field's path in the example, the first item of each list, and for an open-ended
        // object a KubeletConfiguration field Dovetail does not type.
        let path = refused.path.replace("[]", "[0]").replace('*', "containerLogMaxSize");
        let mut at = &mut object;
        for segment in path.split('.') {
            let (name, index) = match segment.strip_suffix("[0]") {
                Some(name) => (name, true),
                None => (segment, false),
            };
            at = at.as_object_mut().context("a refused field's parent is an object")?.entry(name).or_insert(json!({}));
            if index {
                at = at.get_mut(0).with_context(|| format!("{path}: the example has no item"))?;
            }
        }
        *at = samples.get(refused.path).cloned().unwrap_or(json!(1));
        let manifest = dir.join(format!("{}.json", refused.path.replace(['[', ']', '*'], "_")));
        std::fs::write(&manifest, serde_json::to_string(&object)?)?;
        let out = kubectl(control_plane, &["apply", "--dry-run=server", "-f", &manifest.display().to_string()]);
        let Err(e) = out else {
            problems.push(format!("{} {path}: accepted", refused.kind));
            continue;
        };
        let message = format!("{e:#}");
        let named = if refused.path.ends_with('*') {
            message.contains("unknown field") && message.contains(&path)
        } else {
            // The server names the field by `fieldPath` (`[0]`), the rule's message by its schema path (`[*]`).
            let named_path = message.contains(&path) || message.contains(&refused.path.replace("[]", "[*]"));
            named_path && message.contains("a Karpenter field Dovetail refuses") && message.contains(refused.why)
        };
        if !named {
            problems.push(format!("{} {path}: refused without naming it: {message}", refused.kind));
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    ensure!(problems.is_empty(), "{}", problems.join("\n"));
    Ok(())
}

/// The `Dovetail` metrics `value` queries, wherever it names one: a CloudWatch dashboard's
/// `["Dovetail", "<name>", …]` rows and `SEARCH('… MetricName="<name>" …')` expressions, an alarm's
/// `Namespace`/`MetricName` (CloudFormation) and a Grafana CloudWatch target's
/// `namespace`/`metricName`.
fn dovetail_metrics_in(value: &Value, out: &mut BTreeSet<String>) {
    match value {
        Value::Array(items) => {
            if let (Some("Dovetail"), Some(name)) =
                (items.first().and_then(Value::as_str), items.get(1).and_then(Value::as_str))
            {
                out.insert(name.to_string());
            }
            items.iter().for_each(|v| dovetail_metrics_in(v, out));
        }
        Value::Object(map) => {
            for (namespace, metric) in [("Namespace", "MetricName"), ("namespace", "metricName")] {
                if let (Some("Dovetail"), Some(name)) =
                    (map.get(namespace).and_then(Value::as_str), map.get(metric).and_then(Value::as_str))
                {
                    out.insert(name.to_string());
                }
            }
            map.values().for_each(|v| dovetail_metrics_in(v, out));
        }
        Value::String(text) if text.contains("SEARCH(") && text.contains("Dovetail") => {
            for part in text.split("MetricName=\"").skip(1) {
                if let Some(name) = part.split(['"', '\\']).next() {
                    out.insert(name.to_string());
                }
            }
        }
        _ => {}
    }
}

/// The dashboard and the alarms query only metrics the functions emit
/// (`functions/runtime/src/metrics.rs`), and the dashboard shows every one of them.
#[test]
fn dashboard_and_alarms_query_the_metrics_the_functions_emit() -> Result<()> {
    let emitted: BTreeSet<String> = dovetail_runtime::metrics::METRICS.iter().map(|m| m.name.to_string()).collect();
    let sam = sam_resources(&[])?;
    let mut shown = BTreeSet::new();
    let mut alarmed = BTreeSet::new();
    for (id, resource) in &sam {
        match resource["Type"].as_str() {
            Some("AWS::CloudWatch::Dashboard") => {
                let body: Value =
                    serde_json::from_str(resource["Properties"]["DashboardBody"].as_str().context("body")?)
                        .with_context(|| format!("{id}: DashboardBody is JSON"))?;
                dovetail_metrics_in(&body, &mut shown);
            }
            Some("AWS::CloudWatch::Alarm") => dovetail_metrics_in(&resource["Properties"], &mut alarmed),
            _ => {}
        }
    }
    ensure!(shown == emitted, "the dashboard shows {shown:?}; the functions emit {emitted:?}");
    ensure!(alarmed.is_subset(&emitted), "alarms on {alarmed:?}; the functions emit {emitted:?}");
    ensure!(alarmed.len() >= 3, "alarms on pending pods and launches: {alarmed:?}");
    Ok(())
}

/// The Grafana dashboard (`infra/grafana/dovetail.json`, for the CloudWatch data source) parses,
/// has the CloudWatch dashboard's panels, and queries exactly the metrics the functions emit.
#[test]
fn grafana_dashboard_has_the_cloudwatch_panels_and_queries_the_emitted_metrics() -> Result<()> {
    let read = |path: &str| -> Result<Value> {
        let text = std::fs::read_to_string(repo().join(path)).with_context(|| format!("reading {path}"))?;
        serde_json::from_str(&text).with_context(|| format!("{path} is JSON"))
    };
    let grafana = read("infra/grafana/dovetail.json")?;
    let cloudwatch = read("infra/dashboard/cloudwatch.json")?;
    let titles = |items: &Value, title: &dyn Fn(&Value) -> &Value| -> Vec<String> {
        items.as_array().into_iter().flatten().map(|w| scalar_text(title(w))).collect()
    };
    let panels = titles(&grafana["panels"], &|p| &p["title"]);
    let widgets = titles(&cloudwatch["widgets"], &|w| &w["properties"]["title"]);
    ensure!(panels == widgets, "Grafana panels {panels:?}, CloudWatch widgets {widgets:?}");
    for panel in grafana["panels"].as_array().context("panels")? {
        let targets = panel["targets"].as_array().filter(|t| !t.is_empty());
        ensure!(targets.is_some(), "panel {} queries nothing", panel["title"]);
        for t in targets.into_iter().flatten() {
            ensure!(
                t["datasource"]["type"] == "cloudwatch",
                "panel {}: not the CloudWatch data source",
                panel["title"]
            );
        }
    }
    let emitted: BTreeSet<String> = dovetail_runtime::metrics::METRICS.iter().map(|m| m.name.to_string()).collect();
    let mut queried = BTreeSet::new();
    dovetail_metrics_in(&grafana, &mut queried);
    ensure!(queried == emitted, "Grafana queries {queried:?}; the functions emit {emitted:?}");
    Ok(())
}
