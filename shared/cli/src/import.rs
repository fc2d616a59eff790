//! `dovetail import [-f FILE…] [-o yaml|json|table] [--output-file FILE]`: Karpenter v1 NodePools
//! and EC2NodeClasses, and v1alpha1 NodeOverlays, into Dovetail's.
//!
//! The conversion is `dovetail_api::import` (a pure function); this reads the files, prints the
//! manifests (YAML documents, a JSON `List`, or a table of what was converted) and the warnings,
//! and sets the exit code: 0 when every object converted (warnings or not), 2 when a file or an
//! object could not be converted (the others are still printed), 1 for anything else (the output
//! file cannot be written).

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result};
use dovetail_api::import::{self, Converted, Report};
use dovetail_api::manifest::{self, LoadError};
use serde_json::{json, Value};

use crate::{output, Format, OutputArgs};

/// The user's guide to `dovetail import`, shown by `dovetail import --help`.
pub const HELP: &str = "\
What changes:
  apiVersion                      karpenter.sh/v1 and karpenter.k8s.aws/v1 become dovetail.dev/v1,
                                  karpenter.sh/v1alpha1 (NodeOverlay) becomes dovetail.dev/v1alpha1
  nodeClassRef.group              karpenter.k8s.aws becomes dovetail.dev
  karpenter.sh/do-not-disrupt     in template annotations, becomes dovetail.dev/do-not-disrupt
                                  (Dovetail honours both on pods and nodes)
  metadata                        only name, labels and annotations are kept; what the API server
                                  and kubectl recorded (uid, resourceVersion, managedFields, the
                                  last-applied annotation, ...) is dropped silently
  defaults                        written out, as the API server stores them (expireAfter: 720h,
                                  disruption budgets of 10%, IMDS settings, ...)

Everything else keeps its value: requirement keys and node labels need no mapping, because
Dovetail's nodes carry Karpenter's well-known labels (karpenter.sh/capacity-type,
karpenter.k8s.aws/instance-family, ...), so pod selectors and affinities keep working.

Warnings (stderr) name the file, document, object and field of whatever does not carry over
exactly:
  - dropped: status, Karpenter's own annotations, labels and finalizers (drift hashes, migration
    state), owner references, and any field Dovetail's types do not have (e.g. a NodePool's
    kubelet, which belongs in the EC2NodeClass since Karpenter v1);
  - kept but treated differently by Dovetail today: AL2 (deprecated by AWS: no images for
    Kubernetes 1.33 and later), amiFamily Custom with user data naming Karpenter's unregistered
    taint, Karpenter's own taints;
  - a NodePool whose EC2NodeClass was not converted with it;
  - documents of other kinds, which are skipped (NodeClaims, ConfigMaps, ...).

Errors (stderr, exit code 2) are objects that cannot be converted; the others are still written:
a field of the wrong type, a value Dovetail's validation refuses (every converted object passes
the validation Dovetail's functions apply), a Karpenter 1.14 field Dovetail refuses (a static
NodePool's replicas, ipPrefixCount, networkInterfaces, ...: docs/karpenter-compatibility.md), a
NodeOverlay that selects a NodePool or a pool's label (Dovetail's overlays price the catalog every
pool shares), Karpenter's pre-v1 APIs
(v1beta1 NodePools, Provisioners, AWSNodeTemplates: migrate them with Karpenter first), an object
defined twice, a file that is not YAML or JSON.

When moving workloads over, note that Dovetail's instances are tagged dovetail.dev/nodepool,
dovetail.dev/nodeclaim and dovetail.dev/cluster (not karpenter.sh/*), and that its drain and
registration taints are dovetail.dev/disrupted and dovetail.dev/unregistered: tolerations of
Karpenter's taints do not match them.";

pub const EXAMPLES: &str = "\
Examples:
  dovetail import -f nodepools.yaml -f ec2nodeclasses.yaml > dovetail.yaml
  kubectl get nodepools.karpenter.sh,ec2nodeclasses.karpenter.k8s.aws -o yaml | dovetail import --output-file dovetail.yaml
  dovetail import karpenter/ --output-file dovetail.yaml && dovetail plan -f dovetail.yaml -f workloads/
  dovetail import karpenter/ -o table                 # what converts, and its warnings";

#[derive(clap::Args)]
pub struct Args {
    /// Karpenter manifests: files, directories (their *.yaml, *.yml, *.json) or `-` for stdin
    /// (the default). Multi-document YAML, JSON and `kubectl get -o yaml` lists are read.
    #[arg(value_name = "FILE")]
    files: Vec<PathBuf>,
    /// The same as the FILE arguments, kubectl's way (repeatable; `-` for stdin).
    #[arg(short = 'f', long = "filename", value_name = "FILE")]
    filenames: Vec<PathBuf>,
    /// yaml (the default: the manifests), json (a `List`) or table (what was converted).
    #[command(flatten)]
    output: OutputArgs,
    /// Writes the output to FILE instead of stdout.
    #[arg(long = "output-file", value_name = "FILE")]
    output_file: Option<PathBuf>,
}

pub fn run(args: Args) -> Result<ExitCode> {
    let mut paths = args.files;
    paths.extend(args.filenames);
    if paths.is_empty() {
        paths.push(PathBuf::from("-"));
    }
    // One path at a time, so an unreadable file stops only itself.
    let mut texts = Vec::new();
    let mut unreadable: Vec<LoadError> = Vec::new();
    for path in &paths {
        match manifest::read_paths(std::slice::from_ref(path)) {
            Ok(read) => texts.extend(read),
            Err(e) => unreadable.push(e),
        }
    }
    let report = import::convert(texts.iter().map(|(name, text)| (name.as_str(), text.as_str())));
    let text = match args.output.format.unwrap_or(Format::Yaml) {
        Format::Yaml => report.yaml(),
        Format::Json => serde_json::to_string_pretty(&list(&report))? + "\n",
        Format::Table => table(&report),
    };
    match &args.output_file {
        Some(path) => std::fs::write(path, &text).with_context(|| format!("cannot write {}", path.display()))?,
        None => output::print(&text)?,
    }
    for w in &report.warnings {
        eprintln!("dovetail: warning: {w}");
    }
    let errors: Vec<&LoadError> = unreadable.iter().chain(&report.errors).collect();
    for e in &errors {
        eprintln!("dovetail: error: {e}");
    }
    if let Some(note) = node_role_note(&report.node_roles()) {
        eprintln!("dovetail: note: {note}");
    }
    eprintln!("dovetail: {}", summary(&report, errors.len()));
    Ok(if errors.is_empty() { ExitCode::SUCCESS } else { ExitCode::from(2) })
}

/// What deploying the converted classes needs of Dovetail's stack: its functions may pass only
/// the node role the stack was deployed with (`NodeRoleName`), so it must be the classes' role.
fn node_role_note(roles: &[&str]) -> Option<String> {
    let needs = "Dovetail makes their instance profiles, but its functions may pass only the node role \
                 their stack was deployed with";
    match roles {
        [] => None,
        [role] => Some(format!(
            "the classes use the node role {role}: {needs}; deploy the stack with NodeRoleName={role} \
             (and CreateNodeAccessEntry=false if the role has an access entry already)"
        )),
        roles => Some(format!(
            "the classes use the node roles {}: {needs}, one per stack; deploy it with NodeRoleName set to \
             one of them and point the other classes at that role (a class whose role may not be passed \
             says so on its InstanceProfileReady condition)",
            roles.join(", ")
        )),
    }
}

/// `converted 2 NodePools and 1 EC2NodeClass, 3 warnings, 1 error` (`…, 1 EC2NodeClass and 2
/// NodeOverlays, …` when there are overlays).
fn summary(report: &Report, errors: usize) -> String {
    let count = |n: usize, one: &str, many: &str| format!("{n} {}", if n == 1 { one } else { many });
    let of = |kind: &str| report.objects.iter().filter(|o| o.kind() == kind).count();
    let (pools, classes, overlays) = (of("NodePool"), of("EC2NodeClass"), of("NodeOverlay"));
    // Overlays are named only when there are some, so a pools-and-classes import reads as before.
    let kinds = if overlays == 0 {
        format!("{} and {}", count(pools, "NodePool", "NodePools"), count(classes, "EC2NodeClass", "EC2NodeClasses"))
    } else {
        format!(
            "{}, {} and {}",
            count(pools, "NodePool", "NodePools"),
            count(classes, "EC2NodeClass", "EC2NodeClasses"),
            count(overlays, "NodeOverlay", "NodeOverlays")
        )
    };
    format!(
        "converted {kinds}, {}, {}",
        count(report.warnings.len(), "warning", "warnings"),
        count(errors, "error", "errors"),
    )
}

/// The converted objects as one JSON `List`, as `kubectl get -o json` prints several.
fn list(report: &Report) -> Value {
    let items: Vec<Value> = report
        .objects
        .iter()
        .map(|o| match o {
            Converted::NodePool(p) => serde_json::to_value(p),
            Converted::EC2NodeClass(c) => serde_json::to_value(c),
            Converted::NodeOverlay(o) => serde_json::to_value(o),
        })
        .collect::<Result<_, _>>()
        .expect("NodePools, EC2NodeClasses and NodeOverlays always serialize");
    json!({ "apiVersion": "v1", "kind": "List", "items": items })
}

/// What was converted, one object a line, with how many warnings it has (they follow on stderr).
fn table(report: &Report) -> String {
    let rows: Vec<[String; 3]> = report
        .objects
        .iter()
        .map(|o| {
            let object = format!("{} {}", o.kind(), o.name());
            let warnings = report.warnings.iter().filter(|w| w.object == object).count();
            [o.kind().to_string(), o.name().to_string(), warnings.to_string()]
        })
        .collect();
    let header = ["KIND", "NAME", "WARNINGS"];
    let width = |i: usize| rows.iter().map(|r| r[i].len()).chain([header[i].len()]).max().unwrap_or(0);
    let (kind, name) = (width(0), width(1));
    let mut out = format!("{:<kind$}  {:<name$}  {}\n", header[0], header[1], header[2]);
    for [k, n, w] in &rows {
        out.push_str(&format!("{k:<kind$}  {n:<name$}  {w}\n"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::node_role_note;

    #[test]
    fn the_role_note_names_the_stack_parameter_for_one_role_and_the_choice_for_several() {
        assert_eq!(node_role_note(&[]), None);
        let one = node_role_note(&["NodeRole-a"]).unwrap();
        assert!(one.contains("NodeRoleName=NodeRole-a") && one.contains("CreateNodeAccessEntry=false"), "{one}");
        let two = node_role_note(&["NodeRole-a", "NodeRole-b"]).unwrap();
        assert!(two.contains("node roles NodeRole-a, NodeRole-b") && two.contains("one per stack"), "{two}");
        assert!(two.contains("InstanceProfileReady"), "{two}");
    }
}
