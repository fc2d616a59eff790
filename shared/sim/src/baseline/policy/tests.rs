use dovetail_core::catalog::{embedded, CapacityType};
use dovetail_core::model::{LabelSelector, OwnerKind, Pod};
use dovetail_core::resources::Resources;

use super::*;

const GIB: i64 = 1 << 30;

fn group(name: &str, types: &[&str], max: usize) -> NodeGroup {
    NodeGroup {
        name: name.into(),
        instance_types: types.iter().map(|t| t.to_string()).collect(),
        capacity_type: CapacityType::OnDemand,
        zones: vec!["us-east-1a".into()],
        min_size: 0,
        max_size: max,
        labels: BTreeMap::new(),
        taints: vec![],
    }
}

fn config(groups: Vec<NodeGroup>) -> Config {
    Config { node_groups: groups, ..Config::default() }
}

fn pod(name: &str, cpu: i64) -> Pod {
    let mut p = Pod::new("default", name, Resources::new(cpu, GIB));
    p.owner = OwnerKind::ReplicaSet;
    p.owner_name = "web-abc".into();
    p.labels.insert("app".into(), "web".into());
    p
}

fn pods(n: usize, cpu: i64) -> Vec<Pod> {
    (0..n).map(|i| pod(&format!("p{i}"), cpu)).collect()
}

/// A registered node of group `g` with these pods on it.
fn node(cfg: &Config, g: usize, name: &str, on: Vec<Pod>) -> Node {
    let mut n = template_node(&cfg.node_groups[g], name, embedded(), &[]).unwrap();
    for mut p in on {
        p.node_name = Some(name.into());
        n.pods.push(p.into());
    }
    n
}

struct Fixture {
    cfg: Config,
    nodes: Vec<Node>,
    node_group: BTreeMap<String, usize>,
    pending: Vec<Pod>,
    groups: Vec<GroupState>,
    pdbs: Vec<Pdb>,
    namespaces: BTreeMap<String, BTreeMap<String, String>>,
}

impl Fixture {
    fn new(cfg: Config) -> Self {
        let groups = vec![GroupState::default(); cfg.node_groups.len()];
        Fixture {
            cfg,
            nodes: vec![],
            node_group: BTreeMap::new(),
            pending: vec![],
            groups,
            pdbs: vec![],
            namespaces: BTreeMap::new(),
        }
    }

    fn add(&mut self, g: usize, name: &str, on: Vec<Pod>) {
        let n = node(&self.cfg, g, name, on);
        self.node_group.insert(name.into(), g);
        self.groups[g].desired += 1;
        self.nodes.push(n);
    }

    fn decide(&self, now: Time, memory: &mut Memory) -> Vec<Decision> {
        let input = Input {
            now,
            config: &self.cfg,
            catalog: embedded(),
            nodes: &self.nodes,
            node_group: &self.node_group,
            pending: &self.pending,
            groups: &self.groups,
            daemonsets: &[],
            pdbs: &self.pdbs,
            namespaces: &self.namespaces,
        };
        decide(&input, memory)
    }
}

fn t(secs: i64) -> Time {
    Time::from_secs(1_767_571_200 + secs)
}

#[test]
fn scale_up_packs_template_nodes_of_the_first_group_that_helps_most() {
    // Eight 1-vCPU pods: an m5.large holds one (1.93 vCPU allocatable), an m5.2xlarge seven.
    let mut f = Fixture::new(config(vec![group("small", &["m5.large"], 10), group("big", &["m5.2xlarge"], 10)]));
    f.pending = pods(8, 1000);
    let d = f.decide(t(0), &mut Memory::default());
    assert!(matches!(&d[..], [Decision::ScaleUp { group: 0, by: 8, .. }]), "{d:?}");

    // Capped by the group's maximum, the big group helps more pods.
    let mut f = Fixture::new(config(vec![group("small", &["m5.large"], 3), group("big", &["m5.2xlarge"], 10)]));
    f.pending = pods(8, 1000);
    let d = f.decide(t(0), &mut Memory::default());
    assert!(matches!(&d[..], [Decision::ScaleUp { group: 1, by: 2, .. }]), "{d:?}");
}

#[test]
fn upcoming_nodes_absorb_pending_pods() {
    let mut f = Fixture::new(config(vec![group("big", &["m5.2xlarge"], 10)]));
    f.pending = pods(7, 1000);
    f.groups[0] = GroupState { desired: 1, upcoming: 1 };
    assert!(f.decide(t(0), &mut Memory::default()).is_empty());
    f.pending = pods(8, 1000);
    let d = f.decide(t(0), &mut Memory::default());
    assert!(matches!(&d[..], [Decision::ScaleUp { group: 0, by: 1, .. }]), "{d:?}");
}

#[test]
fn unneeded_nodes_go_after_the_unneeded_time_one_non_empty_at_a_time() {
    let mut f = Fixture::new(config(vec![group("g", &["m5.2xlarge"], 10)]));
    f.add(0, "busy", pods(6, 1000));
    f.add(0, "light-1", vec![pod("a", 1000)]);
    f.add(0, "light-2", vec![pod("b", 1000)]);
    f.add(0, "empty", vec![]);
    let mut memory = Memory::default();
    assert!(f.decide(t(0), &mut memory).is_empty());
    assert_eq!(memory.unneeded_since.len(), 3, "{:?}", memory.unneeded_since);
    assert!(f.decide(t(599), &mut memory).is_empty());
    let d = f.decide(t(600), &mut memory);
    assert!(matches!(&d[..], [Decision::RemoveEmpty { nodes, .. }] if nodes == &["empty".to_string()]), "{d:?}");
    let d = f.decide(t(610), &mut memory);
    assert!(matches!(&d[..], [Decision::Drain { node, .. }] if node == "light-1"), "{d:?}");
}

#[test]
fn budgets_unreplicated_and_system_pods_keep_a_node() {
    let mut f = Fixture::new(config(vec![group("g", &["m5.2xlarge"], 10)]));
    f.add(0, "busy", pods(5, 1000));
    let mut bare = pod("bare", 500);
    bare.owner = OwnerKind::None;
    f.add(0, "n-bare", vec![bare]);
    let mut dns = pod("coredns", 100);
    dns.namespace = "kube-system".into();
    f.add(0, "n-dns", vec![dns]);
    f.add(0, "n-pdb", vec![pod("guarded", 500)]);
    f.pdbs.push(Pdb {
        namespace: "default".into(),
        name: "web".into(),
        selector: LabelSelector::from_labels(&[("app", "web")]),
        disruptions_allowed: 0,
    });
    let mut memory = Memory::default();
    assert!(f.decide(t(0), &mut memory).is_empty());
    assert!(memory.unneeded_since.is_empty(), "{:?}", memory.unneeded_since);
}

#[test]
fn no_scale_down_during_the_cool_down_and_never_below_min_size() {
    let mut f = Fixture::new(config(vec![group("g", &["m5.2xlarge"], 10)]));
    f.add(0, "empty", vec![]);
    let mut memory = Memory { last_scale_up: Some(t(0)), ..Memory::default() };
    assert!(f.decide(t(300), &mut memory).is_empty());
    assert!(memory.unneeded_since.is_empty());
    f.decide(t(600), &mut memory);
    assert_eq!(f.decide(t(1200), &mut memory).len(), 1);

    f.cfg.node_groups[0].min_size = 1;
    let mut memory = Memory::default();
    f.decide(t(0), &mut memory);
    assert!(f.decide(t(600), &mut memory).is_empty(), "the group is at its minimum");
}
