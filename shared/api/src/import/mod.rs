//! Karpenter v1 `NodePool`s and `EC2NodeClass`es, and v1alpha1 `NodeOverlay`s, into Dovetail's
//! (`dovetail import`).
//!
//! Dovetail's `dovetail.dev/v1` objects have Karpenter v1's fields and meanings (see
//! [`crate::crd`]), so most of a conversion is the `apiVersion`. The work here is everything else:
//! finding what would *not* carry over exactly and saying so, as a [`Warning`] that names the
//! object and the field. What a conversion does, by concern:
//!
//! - `object`: the envelope. `apiVersion` becomes `dovetail.dev/v1`; what the API server or
//!   kubectl wrote (uid, resourceVersion, managedFields, the last-applied annotation, ...) goes
//!   silently, as it would on any copy; `status`, Karpenter's own annotations, labels and
//!   finalizers, owner references and any other envelope field go with a warning.
//! - fields of the spec that Dovetail's types do not have are dropped with a warning (found by
//!   deserializing, [`crate::ignored`], so the list of supported fields is the types themselves);
//!   Karpenter 1.14 fields Dovetail refuses ([`crate::crd::refused`]) make the object an error.
//! - `nodepool`: `nodeClassRef.group` `karpenter.k8s.aws` becomes `dovetail.dev`, and the template
//!   annotation `karpenter.sh/do-not-disrupt` takes Dovetail's spelling (both are honoured);
//!   values and settings Dovetail reads but does not act on the same way are kept and warned
//!   about (Karpenter's own taints and annotations). A static pool (`replicas`) is refused.
//! - `nodeclass`: settings Dovetail's launches treat differently from Karpenter's (AL2, which AWS
//!   deprecated, Karpenter's taint in Custom user data) are kept and warned about.
//! - `nodeoverlay`: `karpenter.sh/v1alpha1` becomes `dovetail.dev/v1alpha1`; an overlay selecting
//!   a NodePool or a pool's label is refused (Dovetail's overlays price the catalog all pools share).
//!
//! Requirement keys and node labels need no mapping: Dovetail's nodes carry Karpenter's
//! well-known labels (`karpenter.sh/capacity-type`, `karpenter.k8s.aws/instance-family`, ...), so
//! requirements, pod selectors and affinities keep working as written.
//!
//! Each object is converted on its own. One that cannot be (a field that does not fit the types,
//! a value Dovetail's validation refuses, a pre-v1 Karpenter API) becomes an error in
//! [`Report::errors`] and never hides the others. Every object in [`Report::objects`] passed
//! `to_core`, the same validation Dovetail's functions apply when they read the object from the
//! cluster, so the output cannot be refused later for a reason the import could have seen.
//! Documents of other kinds are skipped with a warning.
//!
//! [`convert`] is a pure function of the texts; reading files and stdin is the caller's
//! (`manifest::read_paths`).

mod nodeclass;
mod nodeoverlay;
mod nodepool;
mod object;

use std::collections::{BTreeSet, HashMap};
use std::fmt;

use crate::crd::{EC2NodeClass, NodeOverlay, NodePool, EC2_NODE_CLASS_KIND, KARPENTER_AWS_GROUP, KARPENTER_GROUP};
use crate::manifest::{self, Doc, LoadError, LoadErrorKind, Source};

/// `apiVersion` of the Karpenter NodePools this module converts.
pub const KARPENTER_NODEPOOL_API_VERSION: &str = "karpenter.sh/v1";
/// `apiVersion` of the Karpenter EC2NodeClasses this module converts.
pub const KARPENTER_NODECLASS_API_VERSION: &str = "karpenter.k8s.aws/v1";
/// `apiVersion` of the Karpenter NodeOverlays this module converts.
pub const KARPENTER_NODEOVERLAY_API_VERSION: &str = "karpenter.sh/v1alpha1";

/// Something that did not carry over exactly, or a document left out.
///
/// Displays like a [`LoadError`]: `<file>: document <n>[, item <m>] (<Kind> <name>): <field>:
/// <message>` (without `<field>: ` when it is about the whole object).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Warning {
    /// Where the object is: file, document, item of a `List`.
    pub source: Source,
    /// `Kind name` as in the input, e.g. `NodePool default`.
    pub object: String,
    /// Path of the field in the input object (`spec.template.spec.nodeClassRef.group`), or empty.
    pub field: String,
    /// What happened to it and what to do, for a person.
    pub message: String,
}

impl fmt::Display for Warning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({}): ", self.source, self.object)?;
        if !self.field.is_empty() {
            write!(f, "{}: ", self.field)?;
        }
        f.write_str(&self.message)
    }
}

/// A converted object.
#[derive(Debug, Clone, PartialEq)]
pub enum Converted {
    NodePool(Box<NodePool>),
    EC2NodeClass(Box<EC2NodeClass>),
    NodeOverlay(Box<NodeOverlay>),
}

impl Converted {
    /// The object as one YAML document (no `---`), fields in the types' order, defaults written
    /// out as the API server would store them.
    pub fn to_yaml(&self) -> String {
        let yaml = match self {
            Converted::NodePool(p) => serde_yaml_ng::to_string(p),
            Converted::EC2NodeClass(c) => serde_yaml_ng::to_string(c),
            Converted::NodeOverlay(o) => serde_yaml_ng::to_string(o),
        };
        yaml.expect("NodePools, EC2NodeClasses and NodeOverlays always serialize")
    }

    /// `NodePool`, `EC2NodeClass` or `NodeOverlay`.
    pub fn kind(&self) -> &'static str {
        match self {
            Converted::NodePool(_) => "NodePool",
            Converted::EC2NodeClass(_) => EC2_NODE_CLASS_KIND,
            Converted::NodeOverlay(_) => "NodeOverlay",
        }
    }

    pub fn name(&self) -> &str {
        let meta = match self {
            Converted::NodePool(p) => &p.metadata,
            Converted::EC2NodeClass(c) => &c.metadata,
            Converted::NodeOverlay(o) => &o.metadata,
        };
        meta.name.as_deref().unwrap_or_default()
    }
}

/// What [`convert`] made of its input.
#[derive(Debug, Default)]
pub struct Report {
    /// The converted objects, in input order.
    pub objects: Vec<Converted>,
    /// Everything not carried over exactly and every document skipped, in input order (object
    /// by object; references between objects are checked last).
    pub warnings: Vec<Warning>,
    /// Files that could not be read as YAML or JSON, and objects that could not be converted
    /// (one error per problem, so an object may have several). None of them is in `objects`.
    pub errors: Vec<LoadError>,
}

impl Report {
    /// The converted objects as one multi-document YAML stream, in input order.
    pub fn yaml(&self) -> String {
        self.objects.iter().map(Converted::to_yaml).collect::<Vec<_>>().join("---\n")
    }

    /// The node roles (`spec.role`) the converted classes name, each once, in input order. Nothing
    /// is lost with them (Dovetail makes each class's instance profile for its role, as Karpenter
    /// does), but Dovetail's functions may pass only the node role their stack was deployed with,
    /// so the stack must be given these: a deployment step, not a warning about the manifests.
    pub fn node_roles(&self) -> Vec<&str> {
        let mut roles: Vec<&str> = Vec::new();
        for o in &self.objects {
            if let Converted::EC2NodeClass(c) = o {
                if let Some(role) = c.spec.role.as_deref().filter(|r| !roles.contains(r)) {
                    roles.push(role);
                }
            }
        }
        roles
    }
}

/// Converts every Karpenter NodePool, EC2NodeClass and NodeOverlay in the texts (`(name, text)` pairs as
/// [`manifest::read_paths`] returns them: multi-document YAML or JSON, `kind: List` included).
pub fn convert<'a>(texts: impl IntoIterator<Item = (&'a str, &'a str)>) -> Report {
    let mut run = Run::default();
    for (name, text) in texts {
        match manifest::documents(name, text) {
            Ok(docs) => docs.iter().for_each(|doc| run.document(doc)),
            // A file that does not parse stops only itself.
            Err(e) => run.report.errors.push(e),
        }
    }
    run.check_class_references();
    run.report
}

/// The warnings of one object, collected while it is converted.
struct Notes<'a> {
    source: &'a Source,
    object: &'a str,
    list: Vec<Warning>,
}

impl<'a> Notes<'a> {
    fn new(source: &'a Source, object: &'a str) -> Self {
        Notes { source, object, list: Vec::new() }
    }

    fn warn(&mut self, field: impl Into<String>, message: impl Into<String>) {
        self.list.push(Warning {
            source: self.source.clone(),
            object: self.object.to_string(),
            field: field.into(),
            message: message.into(),
        });
    }
}

/// Kinds of Karpenter's API groups that are not converted, and why.
const OTHER_KARPENTER_KINDS: &[(&str, &str)] =
    &[("NodeClaim", "Karpenter's record of a node it launched; Dovetail keeps its own NodeClaims")];

/// Karpenter's kinds from before its v1 API, which must be migrated with Karpenter's own tools
/// first (their fields moved and were renamed).
const PRE_V1_KARPENTER_KINDS: &[(&str, &str)] = &[
    ("Provisioner", "NodePool (karpenter.sh/v1)"),
    ("AWSNodeTemplate", "EC2NodeClass (karpenter.k8s.aws/v1)"),
    ("Machine", "NodeClaim"),
];

#[derive(Default)]
struct Run {
    report: Report,
    /// (kind, name) → where it was first converted, for duplicates.
    seen: HashMap<(&'static str, String), Source>,
    /// NodePools converted, with the EC2NodeClass each names, for [`Run::check_class_references`].
    pools: Vec<(Source, String, String)>,
}

impl Run {
    fn document(&mut self, doc: &Doc) {
        // The loader's header reading: missing apiVersion/kind and pre-v1 versions of the kinds
        // it knows (`karpenter.sh/v1beta1` NodePools, ...) are errors there too.
        let header = match manifest::header(doc) {
            Ok(h) => h,
            Err((label, kind)) => {
                self.report.errors.push(LoadError::at(&doc.source, label.as_deref(), kind));
                return;
            }
        };
        let group = header.api_version.rsplit_once('/').map_or("", |(g, _)| g);
        let kind: &'static str = match (header.api_version.as_str(), header.kind.as_str()) {
            (KARPENTER_NODEPOOL_API_VERSION, "NodePool") => "NodePool",
            (KARPENTER_NODECLASS_API_VERSION, EC2_NODE_CLASS_KIND) => EC2_NODE_CLASS_KIND,
            (KARPENTER_NODEOVERLAY_API_VERSION, "NodeOverlay") => "NodeOverlay",
            _ => return self.skip(doc, &header, group),
        };
        let id = (kind, header.name.clone());
        if let Some(first) = self.seen.get(&id) {
            let error = LoadErrorKind::Duplicate(first.to_string());
            self.report.errors.push(LoadError::at(&doc.source, Some(&header.label), error));
            return;
        }
        self.seen.insert(id, doc.source.clone());

        let mut notes = Notes::new(&doc.source, &header.label);
        let converted = match kind {
            "NodePool" => nodepool::convert(&doc.value, &mut notes).map(|p| {
                let class = p.spec.template.spec.node_class_ref.name.clone();
                self.pools.push((doc.source.clone(), header.label.clone(), class));
                Converted::NodePool(Box::new(p))
            }),
            "NodeOverlay" => nodeoverlay::convert(&doc.value, &mut notes).map(|o| Converted::NodeOverlay(Box::new(o))),
            _ => nodeclass::convert(&doc.value, &mut notes).map(|c| Converted::EC2NodeClass(Box::new(c))),
        };
        match converted {
            Ok(object) => {
                self.report.objects.push(object);
                self.report.warnings.extend(notes.list);
            }
            // What would not have carried over from an object that is not converted at all is
            // beside the point: only its errors are reported.
            Err(errors) => self.report.errors.extend(errors.into_iter().map(|e| {
                let problem = if e.field.is_empty() { e.message } else { format!("{}: {}", e.field, e.message) };
                LoadError::at(&doc.source, Some(&header.label), LoadErrorKind::Invalid(problem))
            })),
        }
    }

    /// A document this import does not convert: an error for Karpenter's pre-v1 kinds (the user
    /// meant them to be converted), a warning for the rest.
    fn skip(&mut self, doc: &Doc, header: &manifest::Header, group: &str) {
        let karpenter = group == KARPENTER_GROUP || group == KARPENTER_AWS_GROUP;
        if let Some((_, successor)) = PRE_V1_KARPENTER_KINDS.iter().find(|(k, _)| karpenter && *k == header.kind) {
            let message = format!(
                "{} is Karpenter's API from before v1: migrate it to a {successor} with Karpenter's upgrade \
                 guide first, then import that",
                header.api_version
            );
            self.report.errors.push(LoadError::at(&doc.source, Some(&header.label), LoadErrorKind::Invalid(message)));
            return;
        }
        let why = match OTHER_KARPENTER_KINDS.iter().find(|(k, _)| karpenter && *k == header.kind) {
            Some((_, why)) => (*why).to_string(),
            None if group == crate::crd::GROUP => "already a Dovetail object".to_string(),
            None => format!(
                "{} {} is not a Karpenter NodePool ({KARPENTER_NODEPOOL_API_VERSION}) or EC2NodeClass \
                 ({KARPENTER_NODECLASS_API_VERSION})",
                header.api_version, header.kind
            ),
        };
        let mut notes = Notes::new(&doc.source, &header.label);
        notes.warn("", format!("skipped: {why}"));
        self.report.warnings.extend(notes.list);
    }

    /// A NodePool whose EC2NodeClass is not among the converted objects cannot launch anything
    /// until that class exists in the cluster.
    fn check_class_references(&mut self) {
        let classes: BTreeSet<&str> = self
            .report
            .objects
            .iter()
            .filter(|o| matches!(o, Converted::EC2NodeClass(_)))
            .map(Converted::name)
            .collect();
        for (source, label, class) in &self.pools {
            if !classes.contains(class.as_str()) {
                let mut notes = Notes::new(source, label);
                notes.warn(
                    "spec.template.spec.nodeClassRef.name",
                    format!(
                        "no EC2NodeClass {class:?} was converted with it: import that class too (or create \
                         it) before applying this NodePool, which cannot launch nodes without it"
                    ),
                );
                self.report.warnings.extend(notes.list);
            }
        }
    }
}

#[cfg(test)]
mod tests;
