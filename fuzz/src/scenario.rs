//! Scenario files of `dovetail simulate` (`dovetail_sim::scenario::Scenario::parse`).

use arbitrary::Arbitrary;
use dovetail_sim::scenario::{Scenario, ScenarioError};
use serde_json::{json, Map, Value};

use crate::harness::Target;
use crate::objects::{self, Document, Slot, DURATIONS, SCHEDULES};
use crate::tree::{Choice, Fragment, Word};

pub const TARGET: Target<Input> =
    Target { name: "scenario", fixtures: &["shared/sim/src/scenario/builtin"], vocabulary: VOCABULARY, render, check };

const VOCABULARY: &[&str] = &[
    "name",
    "description",
    "seed",
    "duration",
    "start",
    "world",
    "manifests",
    "timeline",
    "clusterAutoscaler",
    "bootTime",
    "min",
    "max",
    "interruptionRate",
    "rebalanceShare",
    "capacityErrorRate",
    "duplicateRate",
    "zones",
    "capacityErrors",
    "instanceType",
    "zone",
    "capacityType",
    "at",
    "for",
    "every",
    "until",
    "cron",
    "scale",
    "submit",
    "releaseAmi",
    "deployment",
    "statefulSet",
    "replicaSet",
    "replicas",
    "job",
    "durationMax",
    "parallelism",
    "completions",
    "count",
    "scanInterval",
    "nodeGroups",
    "instanceTypes",
    "minSize",
    "maxSize",
    "taints",
    "effect",
    "us-east-1a",
    "us-east-1z=use1-az9",
    "m5.large",
    "spot",
    "on-demand",
    "24h",
    "1s",
    "2026-11-27T00:00:00Z",
    "default/web",
];

/// A scenario's fields, each missing, shaped or anything; its manifests generated like `plan`'s.
#[derive(Debug, Arbitrary)]
pub struct Input {
    name: Slot<Word>,
    duration: Slot<Choice>,
    start: Slot<Choice>,
    seed: Slot<u64>,
    world: Slot<World>,
    manifests: Slot<Vec<Document>>,
    timeline: Slot<Vec<Entry>>,
    cluster_autoscaler: Slot<Vec<(Choice, Fragment)>>,
}

#[derive(Debug, Arbitrary)]
pub struct World {
    boot_time: Slot<(Choice, Choice)>,
    rates: Vec<(Choice, Fragment)>,
    zones: Slot<Vec<Choice>>,
    capacity_errors: Slot<Vec<(Choice, Choice, Slot<Choice>)>>,
}

#[derive(Debug, Arbitrary)]
pub struct Entry {
    at: Slot<Choice>,
    every: Slot<Choice>,
    until: Slot<Choice>,
    cron: Slot<Choice>,
    action: Action,
}

#[derive(Debug, Arbitrary)]
pub enum Action {
    Scale { kind: Choice, target: Word, replicas: u8 },
    Submit { job: Word, fields: Vec<(Choice, Fragment)> },
    ReleaseAmi,
    Several(Vec<(Choice, Fragment)>),
}

const START: &[&str] = &["2026-11-27T00:00:00Z", "2026-02-31T00:00:00Z", "9999-12-31T23:59:59Z", "yesterday"];

fn text(choice: &Choice, known: &[&str]) -> Value {
    choice.resolve(known, VOCABULARY).into()
}

fn fields(map: &mut Map<String, Value>, list: &[(Choice, Fragment)], names: &[&str]) {
    for (k, f) in list {
        map.insert(k.resolve(names, VOCABULARY).into(), f.value(VOCABULARY));
    }
}

pub fn render(input: &Input, _: &[&str]) -> String {
    let v = VOCABULARY;
    let mut doc = Map::new();
    objects::set(&mut doc, "name", &input.name, v, |w| w.resolve(v).into());
    objects::set(&mut doc, "duration", &input.duration, v, |c| text(c, DURATIONS));
    objects::set(&mut doc, "start", &input.start, v, |c| text(c, START));
    objects::set(&mut doc, "seed", &input.seed, v, |s| json!(s));
    objects::set(&mut doc, "world", &input.world, v, |w| {
        let mut world = Map::new();
        objects::set(
            &mut world,
            "bootTime",
            &w.boot_time,
            v,
            |(min, max)| json!({"min": text(min, DURATIONS), "max": text(max, DURATIONS)}),
        );
        fields(&mut world, &w.rates, &["interruptionRate", "rebalanceShare", "capacityErrorRate", "duplicateRate"]);
        objects::set(&mut world, "zones", &w.zones, v, |zs| {
            zs.iter().map(|z| text(z, &["us-east-1a", "us-east-1b", "us-east-1z=use1-az9", "mars-1a"])).collect()
        });
        objects::set(&mut world, "capacityErrors", &w.capacity_errors, v, |list| {
            list.iter()
                .map(|(at, lasts, instance)| {
                    let mut e = json!({"at": text(at, DURATIONS), "for": text(lasts, DURATIONS)});
                    if let Slot::Shaped(t) = instance {
                        e["instanceType"] = text(t, &["m5.large", "p5.48xlarge", "m5.huge"]);
                    }
                    e
                })
                .collect()
        });
        Value::Object(world)
    });
    // The manifests are one string holding YAML, as scenario files write them.
    objects::set(&mut doc, "manifests", &input.manifests, v, |docs| objects::render_documents(docs, false).into());
    objects::set(&mut doc, "timeline", &input.timeline, v, |entries| {
        entries
            .iter()
            .map(|e| {
                let mut entry = Map::new();
                objects::set(&mut entry, "at", &e.at, v, |c| text(c, DURATIONS));
                objects::set(&mut entry, "every", &e.every, v, |c| text(c, DURATIONS));
                objects::set(&mut entry, "until", &e.until, v, |c| text(c, DURATIONS));
                objects::set(&mut entry, "cron", &e.cron, v, |c| text(c, SCHEDULES));
                match &e.action {
                    Action::Scale { kind, target, replicas } => {
                        let kind = kind.resolve(&["deployment", "statefulSet", "replicaSet"], v);
                        entry.insert(
                            "scale".into(),
                            json!({ kind: target.resolve(&["web", "shop/web", "db"]), "replicas": replicas % 20 }),
                        );
                    }
                    Action::Submit { job, fields: list } => {
                        let mut submit = Map::new();
                        submit.insert("job".into(), job.resolve(&["batch", "default/batch", "nightly"]).into());
                        fields(&mut submit, list, &["duration", "durationMax", "parallelism", "completions", "count"]);
                        entry.insert("submit".into(), Value::Object(submit));
                    }
                    Action::ReleaseAmi => {
                        entry.insert("releaseAmi".into(), json!({}));
                    }
                    Action::Several(list) => fields(&mut entry, list, &["scale", "submit", "releaseAmi"]),
                }
                Value::Object(entry)
            })
            .collect()
    });
    objects::set(&mut doc, "clusterAutoscaler", &input.cluster_autoscaler, v, |list| {
        let mut ca = Map::new();
        fields(
            &mut ca,
            list,
            &[
                "scanInterval",
                "scaleDownUtilizationThreshold",
                "scaleDownUnneededTime",
                "nodeGroups",
                "maxEmptyBulkDelete",
            ],
        );
        Value::Object(ca)
    });
    serde_yaml_ng::to_string(&Value::Object(doc)).unwrap_or_default()
}

/// Whether the text names manifest files: the loader would read them from disk (`/dev/zero`
/// included), which is the user's to choose, not the parser's to survive.
fn reads_files(text: &str) -> bool {
    let docs = crate::tree::documents(text).unwrap_or_default();
    docs.iter().any(|d| d.get("manifestFiles").is_some()) || (docs.is_empty() && text.contains("anifestFiles"))
}

/// A scenario parses, or its error names the file and, for a value, the field.
pub fn check(text: &str) {
    if reads_files(text) {
        return;
    }
    let file = "scenario.yaml";
    match Scenario::parse(file, text, None) {
        Ok(scenario) => assert!(!scenario.duration.is_zero()),
        Err(ScenarioError::Field { file: f, field, message }) => {
            assert_eq!(f, file);
            assert!(!field.is_empty() && !message.is_empty(), "{field}: {message}");
        }
        Err(ScenarioError::Syntax { file: f, message }) => {
            assert_eq!(f, file);
            assert!(!message.is_empty());
        }
        Err(ScenarioError::Manifests { file: f, source }) => {
            assert_eq!(f, file);
            assert!(!source.to_string().is_empty());
        }
        Err(e @ (ScenarioError::Read(_) | ScenarioError::UnknownBuiltin { .. })) => {
            panic!("parsing a text cannot: {e}")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_scenarios_name_the_field() {
        let builtin = dovetail_sim::scenario::builtin::get("eight-pods").unwrap();
        type Edit = fn(&mut Value);
        let edits: [(&str, Edit); 3] = [
            ("duration", |d| d["duration"] = json!("0s")),
            ("world.zones[0]", |d| d["world"]["zones"] = json!(["mars-1a"])),
            ("start", |d| d["start"] = json!("yesterday")),
        ];
        for (field, edit) in edits {
            let mut doc: Value = serde_yaml_ng::from_str(builtin).unwrap();
            edit(&mut doc);
            let text = serde_yaml_ng::to_string(&doc).unwrap();
            match Scenario::parse("s.yaml", &text, None) {
                Err(ScenarioError::Field { field: f, .. }) => assert_eq!(f, field),
                other => panic!("{field}: {other:?}"),
            }
            check(&text);
        }
    }
}
