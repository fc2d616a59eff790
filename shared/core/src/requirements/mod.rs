//! Node requirements with Karpenter's semantics: In, NotIn, Exists, DoesNotExist, Gt, Lt, their
//! intersection, compatibility between a NodePool and a pod, and `minValues` flexibility.
//!
//! A requirement is a set of label values: either a finite set (`In`, `DoesNotExist` = empty set)
//! or the complement of one (`NotIn`, `Exists` = complement of nothing), optionally bounded by
//! integer `Gt`/`Lt`. Sets intersect like sets, which is all the scheduler needs to narrow a
//! NodeClaim as pods join it.

use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use thiserror::Error;

use crate::labels;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Operator {
    In,
    NotIn,
    Exists,
    DoesNotExist,
    Gt,
    Lt,
}

impl Operator {
    pub fn parse(s: &str) -> Option<Operator> {
        Some(match s {
            "In" => Operator::In,
            "NotIn" => Operator::NotIn,
            "Exists" => Operator::Exists,
            "DoesNotExist" => Operator::DoesNotExist,
            "Gt" => Operator::Gt,
            "Lt" => Operator::Lt,
            _ => return None,
        })
    }
}

impl fmt::Display for Operator {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self, f)
    }
}

/// What the scheduler does when a claim cannot keep a pool's `minValues`: Karpenter's
/// `--min-values-policy` controller setting, with the same two values.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum MinValuesPolicy {
    /// `minValues` is a hard constraint: a pod goes on a claim only if the claim's candidate
    /// types still span that many distinct values, and a claim that cannot is not launched.
    #[default]
    Strict,
    /// `minValues` is kept when it can be: the candidate types still keep as many distinct
    /// values as there are, but too few never leaves a pod pending or a claim unlaunched.
    BestEffort,
}

impl MinValuesPolicy {
    /// The setting's spelling, as Karpenter's (`Strict`, `BestEffort`).
    pub fn parse(s: &str) -> Option<MinValuesPolicy> {
        match s {
            "Strict" => Some(MinValuesPolicy::Strict),
            "BestEffort" => Some(MinValuesPolicy::BestEffort),
            _ => None,
        }
    }

    /// Whether too few distinct values refuses a pod or a claim.
    pub fn is_strict(self) -> bool {
        self == MinValuesPolicy::Strict
    }
}

/// A requirement that cannot be built: bad operator arity or a non-integer bound.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum RequirementError {
    #[error("operator {operator} on {key:?} needs {needs}, got {got} value(s)")]
    Arity { key: String, operator: Operator, needs: &'static str, got: usize },
    #[error("operator {operator} on {key:?} needs an integer value, got {value:?}")]
    NotInteger { key: String, operator: Operator, value: String },
}

/// One key's allowed values.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Requirement {
    pub key: String,
    /// When true, `values` lists what is excluded; otherwise what is allowed.
    pub complement: bool,
    pub values: BTreeSet<String>,
    /// Exclusive integer bounds (Gt / Lt); only meaningful on complement sets.
    pub greater_than: Option<i64>,
    pub less_than: Option<i64>,
    /// Minimum number of distinct values the final instance-type set must keep for this key.
    pub min_values: Option<usize>,
}

impl Requirement {
    /// Builds a requirement from a NodeSelectorRequirement-shaped triple.
    pub fn new(key: &str, operator: Operator, values: &[impl AsRef<str>]) -> Result<Self, RequirementError> {
        let key = labels::normalize_key(key).to_string();
        let arity = |needs, ok: bool| {
            if ok {
                Ok(())
            } else {
                Err(RequirementError::Arity { key: key.clone(), operator, needs, got: values.len() })
            }
        };
        let set = || values.iter().map(|v| v.as_ref().to_string()).collect::<BTreeSet<_>>();
        let bound = |v: &str| {
            v.trim().parse::<i64>().map_err(|_| RequirementError::NotInteger {
                key: key.clone(),
                operator,
                value: v.to_string(),
            })
        };
        let mut r = Requirement {
            key: key.clone(),
            complement: true,
            values: BTreeSet::new(),
            greater_than: None,
            less_than: None,
            min_values: None,
        };
        match operator {
            Operator::In => {
                arity("at least one", !values.is_empty())?;
                r.complement = false;
                r.values = set();
            }
            Operator::NotIn => r.values = set(),
            Operator::Exists => arity("no", values.is_empty())?,
            Operator::DoesNotExist => {
                arity("no", values.is_empty())?;
                r.complement = false;
            }
            Operator::Gt => {
                arity("exactly one", values.len() == 1)?;
                r.greater_than = Some(bound(values[0].as_ref())?);
            }
            Operator::Lt => {
                arity("exactly one", values.len() == 1)?;
                r.less_than = Some(bound(values[0].as_ref())?);
            }
        }
        Ok(r)
    }

    /// `key In [value]`.
    pub fn single(key: &str, value: &str) -> Self {
        Requirement {
            key: labels::normalize_key(key).to_string(),
            complement: false,
            values: BTreeSet::from([value.to_string()]),
            greater_than: None,
            less_than: None,
            min_values: None,
        }
    }

    /// `key Exists`: any value, which is also what an undefined key means.
    pub fn any(key: &str) -> Self {
        Requirement {
            key: key.to_string(),
            complement: true,
            values: BTreeSet::new(),
            greater_than: None,
            less_than: None,
            min_values: None,
        }
    }

    pub fn with_min_values(mut self, min_values: Option<usize>) -> Self {
        self.min_values = min_values;
        self
    }

    fn within_bounds(&self, value: &str) -> bool {
        if self.greater_than.is_none() && self.less_than.is_none() {
            return true;
        }
        let Ok(v) = value.parse::<i64>() else { return false };
        self.greater_than.is_none_or(|g| v > g) && self.less_than.is_none_or(|l| v < l)
    }

    /// Whether `value` is allowed.
    pub fn has(&self, value: &str) -> bool {
        if self.complement {
            !self.values.contains(value) && self.within_bounds(value)
        } else {
            self.values.contains(value) && self.within_bounds(value)
        }
    }

    /// Number of allowed values (`usize::MAX`-ish for complements).
    pub fn len(&self) -> usize {
        if self.complement {
            usize::MAX - self.values.len()
        } else {
            self.values.len()
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The operator this set would be written with.
    pub fn operator(&self) -> Operator {
        match (self.complement, self.values.is_empty()) {
            (true, false) => Operator::NotIn,
            (true, true) => match (self.greater_than, self.less_than) {
                (Some(_), None) => Operator::Gt,
                (None, Some(_)) => Operator::Lt,
                _ => Operator::Exists,
            },
            (false, false) => Operator::In,
            (false, true) => Operator::DoesNotExist,
        }
    }

    /// The set of values allowed by both.
    pub fn intersection(&self, other: &Requirement) -> Requirement {
        let complement = self.complement && other.complement;
        let greater_than = max_opt(self.greater_than, other.greater_than);
        let less_than = min_opt(self.less_than, other.less_than);
        let min_values = max_opt(self.min_values, other.min_values);
        if let (Some(g), Some(l)) = (greater_than, less_than) {
            if g >= l {
                return Requirement {
                    key: self.key.clone(),
                    complement: false,
                    values: BTreeSet::new(),
                    greater_than: None,
                    less_than: None,
                    min_values,
                };
            }
        }
        let mut values: BTreeSet<String> = match (self.complement, other.complement) {
            (true, true) => self.values.union(&other.values).cloned().collect(),
            (true, false) => other.values.difference(&self.values).cloned().collect(),
            (false, true) => self.values.difference(&other.values).cloned().collect(),
            (false, false) => self.values.intersection(&other.values).cloned().collect(),
        };
        let bounded = Requirement {
            key: String::new(),
            complement: true,
            values: BTreeSet::new(),
            greater_than,
            less_than,
            min_values: None,
        };
        if !complement {
            values.retain(|v| bounded.within_bounds(v));
        }
        let (greater_than, less_than) = if complement { (greater_than, less_than) } else { (None, None) };
        Requirement { key: self.key.clone(), complement, values, greater_than, less_than, min_values }
    }

    /// Whether some value satisfies both, without building the intersection (hot path).
    pub fn overlaps(&self, other: &Requirement) -> bool {
        let g = max_opt(self.greater_than, other.greater_than);
        let l = min_opt(self.less_than, other.less_than);
        if let (Some(g), Some(l)) = (g, l) {
            if g >= l {
                return false;
            }
        }
        let within = |v: &str| {
            if g.is_none() && l.is_none() {
                return true;
            }
            v.parse::<i64>().is_ok_and(|x| g.is_none_or(|g| x > g) && l.is_none_or(|l| x < l))
        };
        match (self.complement, other.complement) {
            (true, true) => true,
            (true, false) => other.values.iter().any(|v| !self.values.contains(v) && within(v)),
            (false, true) => self.values.iter().any(|v| !other.values.contains(v) && within(v)),
            (false, false) => {
                let (small, large) =
                    if self.values.len() <= other.values.len() { (self, other) } else { (other, self) };
                small.values.iter().any(|v| large.values.contains(v) && within(v))
            }
        }
    }

    /// Some allowed value, for labelling a node: the smallest of a finite set.
    pub fn any_value(&self) -> Option<&str> {
        if self.complement {
            None
        } else {
            self.values.iter().next().map(String::as_str)
        }
    }

    /// The single allowed value, if the set has exactly one.
    pub fn single_value(&self) -> Option<&str> {
        if !self.complement && self.values.len() == 1 {
            self.values.iter().next().map(String::as_str)
        } else {
            None
        }
    }
}

impl fmt::Display for Requirement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let op = self.operator();
        write!(f, "{} {}", self.key, op)?;
        match op {
            Operator::Gt => write!(f, " {}", self.greater_than.unwrap_or_default())?,
            Operator::Lt => write!(f, " {}", self.less_than.unwrap_or_default())?,
            Operator::In | Operator::NotIn => {
                let vals: Vec<&str> = self.values.iter().map(String::as_str).collect();
                write!(f, " [{}]", vals.join(", "))?;
            }
            _ => {}
        }
        if self.complement && !self.values.is_empty() {
            if let Some(g) = self.greater_than {
                write!(f, " and > {g}")?;
            }
            if let Some(l) = self.less_than {
                write!(f, " and < {l}")?;
            }
        }
        if let Some(m) = self.min_values {
            write!(f, " (minValues {m})")?;
        }
        Ok(())
    }
}

fn max_opt<T: Ord>(a: Option<T>, b: Option<T>) -> Option<T> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.max(b)),
        (a, None) => a,
        (None, b) => b,
    }
}

fn min_opt<T: Ord>(a: Option<T>, b: Option<T>) -> Option<T> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, None) => a,
        (None, b) => b,
    }
}

/// Why two requirement sets cannot describe the same node.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum Incompatible {
    /// Both constrain the key and no value satisfies both.
    #[error("{key}: requires {wanted}, but only {offered} is possible")]
    NoOverlap { key: String, wanted: String, offered: String },
    /// The key is a custom label the other side never sets.
    #[error("{key}: required label is not set by the NodePool (add it to the pool's labels or requirements)")]
    Undefined { key: String },
}

/// A conjunction of requirements, one per key. Serialized as a list of Kubernetes
/// NodeSelectorRequirements (`{key, operator, values, minValues}`), the form people read.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct Requirements(BTreeMap<String, Requirement>);

/// One NodeSelectorRequirement, as written in manifests.
#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct WireRequirement {
    key: String,
    operator: Operator,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    values: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    min_values: Option<usize>,
}

impl Serialize for Requirements {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut out = Vec::new();
        for r in self.iter() {
            let wire = |operator, values: Vec<String>| WireRequirement {
                key: r.key.clone(),
                operator,
                values,
                min_values: None,
            };
            let first = out.len();
            let values: Vec<String> = r.values.iter().cloned().collect();
            match (r.complement, values.is_empty()) {
                (false, false) => out.push(wire(Operator::In, values)),
                (false, true) => out.push(wire(Operator::DoesNotExist, vec![])),
                (true, false) => out.push(wire(Operator::NotIn, values)),
                (true, true) if r.greater_than.is_none() && r.less_than.is_none() => {
                    out.push(wire(Operator::Exists, vec![]))
                }
                (true, true) => {}
            }
            if r.complement {
                if let Some(g) = r.greater_than {
                    out.push(wire(Operator::Gt, vec![g.to_string()]));
                }
                if let Some(l) = r.less_than {
                    out.push(wire(Operator::Lt, vec![l.to_string()]));
                }
            }
            if let Some(w) = out.get_mut(first) {
                w.min_values = r.min_values;
            }
        }
        out.serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for Requirements {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let wire = Vec::<WireRequirement>::deserialize(deserializer)?;
        let mut out = Requirements::new();
        for w in wire {
            let r = Requirement::new(&w.key, w.operator, &w.values).map_err(serde::de::Error::custom)?;
            out.add(r.with_min_values(w.min_values));
        }
        Ok(out)
    }
}

impl Requirements {
    pub fn new() -> Self {
        Requirements(BTreeMap::new())
    }

    /// Adds a requirement, intersecting with any existing one on the same key.
    pub fn add(&mut self, r: Requirement) {
        match self.0.get_mut(&r.key) {
            Some(existing) => *existing = existing.intersection(&r),
            None => {
                self.0.insert(r.key.clone(), r);
            }
        }
    }

    pub fn from_labels<'a>(labels: impl IntoIterator<Item = (&'a String, &'a String)>) -> Self {
        let mut out = Requirements::new();
        for (k, v) in labels {
            out.add(Requirement::single(k, v));
        }
        out
    }

    pub fn get(&self, key: &str) -> Option<&Requirement> {
        self.0.get(key)
    }

    pub fn has_key(&self, key: &str) -> bool {
        self.0.contains_key(key)
    }

    pub fn keys(&self) -> impl Iterator<Item = &str> {
        self.0.keys().map(String::as_str)
    }

    pub fn iter(&self) -> impl Iterator<Item = &Requirement> {
        self.0.values()
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn remove(&mut self, key: &str) -> Option<Requirement> {
        self.0.remove(key)
    }

    /// Both sets at once.
    pub fn intersection(&self, other: &Requirements) -> Requirements {
        let mut out = self.clone();
        for r in other.iter() {
            out.add(r.clone());
        }
        out
    }

    /// Whether a node with exactly these labels satisfies every requirement (a key the labels lack
    /// satisfies only NotIn and DoesNotExist, as in kube-scheduler).
    pub fn matches_labels(&self, labels: &BTreeMap<String, String>) -> bool {
        self.matches(|key| labels.get(key).map(String::as_str))
    }

    /// [`Requirements::matches_labels`] with the labels given by a lookup, so labels held another
    /// way (an instance type's single-valued requirements) need not be copied into a map.
    pub fn matches<'l>(&self, label: impl Fn(&str) -> Option<&'l str>) -> bool {
        self.iter().all(|r| match label(&r.key) {
            Some(v) => r.has(v),
            None => matches!(r.operator(), Operator::NotIn | Operator::DoesNotExist),
        })
    }

    /// Keys both sides constrain must overlap; a side that only excludes values (NotIn /
    /// DoesNotExist) is compatible with another that only excludes values.
    pub fn intersects(&self, other: &Requirements) -> Result<(), Incompatible> {
        match self.conflict(other) {
            None => Ok(()),
            Some((key, existing, incoming)) => Err(Incompatible::NoOverlap {
                key: key.to_string(),
                wanted: incoming.to_string(),
                offered: existing.to_string(),
            }),
        }
    }

    /// [`Requirements::intersects`] without the explanation: the schedulers' hot loops ask this
    /// for every instance type, and formatting a reason for each rejected one cost more than the
    /// check itself.
    pub fn overlaps(&self, other: &Requirements) -> bool {
        self.conflict(other).is_none()
    }

    /// The first key on which the two sides cannot agree: (key, self's requirement, other's).
    fn conflict<'a>(&'a self, other: &'a Requirements) -> Option<(&'a str, &'a Requirement, &'a Requirement)> {
        // Iterate the smaller map and look up in the larger.
        let (small, large, small_is_self) =
            if self.0.len() <= other.0.len() { (self, other, true) } else { (other, self, false) };
        for (key, a) in &small.0 {
            let Some(b) = large.0.get(key) else { continue };
            let (existing, incoming) = if small_is_self { (a, b) } else { (b, a) };
            if !existing.overlaps(incoming) {
                let excluding = |r: &Requirement| matches!(r.operator(), Operator::NotIn | Operator::DoesNotExist);
                if excluding(incoming) && excluding(existing) {
                    continue;
                }
                return Some((key.as_str(), existing, incoming));
            }
        }
        None
    }

    /// Karpenter's compatibility of a node template (`self`) with a pod's requirements: custom
    /// keys the pod requires must be defined by the template, well-known keys may be left to the
    /// instance type, and every shared key must overlap.
    pub fn compatible(&self, pod: &Requirements) -> Result<(), Incompatible> {
        for r in pod.iter() {
            if labels::is_well_known(&r.key) || self.has_key(&r.key) {
                continue;
            }
            if matches!(r.operator(), Operator::NotIn | Operator::DoesNotExist) {
                continue;
            }
            return Err(Incompatible::Undefined { key: r.key.clone() });
        }
        self.intersects(pod)
    }

    /// Labels a node built from these requirements carries: every key with a single value.
    pub fn single_valued_labels(&self) -> BTreeMap<String, String> {
        self.iter().filter_map(|r| r.single_value().map(|v| (r.key.clone(), v.to_string()))).collect()
    }
}

impl FromIterator<Requirement> for Requirements {
    fn from_iter<T: IntoIterator<Item = Requirement>>(iter: T) -> Self {
        let mut out = Requirements::new();
        for r in iter {
            out.add(r);
        }
        out
    }
}

impl fmt::Display for Requirements {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let parts: Vec<String> = self.iter().map(|r| r.to_string()).collect();
        write!(f, "{}", parts.join(", "))
    }
}

#[cfg(test)]
mod tests;
