//! Node taints, changed as a compare-and-swap on the taint list alone.
//!
//! `spec.taints` has no merge key, so any patch writes the whole list, and a plain merge patch
//! would drop a taint another controller (the node lifecycle controller's `not-ready`, a
//! kubelet's startup taint going away) changed meanwhile. A JSON Patch that first `test`s the
//! list as read and then `replace`s it is atomic on the server and conflicts only when the taints
//! themselves changed, not on every status heartbeat as a resourceVersion precondition would.
//! A node without the field (the server omits an empty list) is guarded by its resourceVersion
//! instead: there is no list to test.

use dovetail_core::model::{Taint, TaintEffect};
use serde_json::{json, Value};

/// The effect as Kubernetes spells it.
pub(crate) fn effect_name(e: TaintEffect) -> &'static str {
    match e {
        TaintEffect::NoSchedule => "NoSchedule",
        TaintEffect::PreferNoSchedule => "PreferNoSchedule",
        TaintEffect::NoExecute => "NoExecute",
    }
}

fn field<'a>(t: &'a Value, name: &str) -> &'a str {
    t.get(name).and_then(Value::as_str).unwrap_or_default()
}

/// The list with `taint` in it, or `None` when it already is. Kubernetes allows one taint per
/// (key, effect), so one with another value is updated in place, keeping its other fields.
pub(crate) fn with_taint(current: &[Value], taint: &Taint) -> Option<Vec<Value>> {
    let effect = effect_name(taint.effect);
    let same = |t: &Value| field(t, "key") == taint.key && field(t, "effect") == effect;
    match current.iter().position(same) {
        Some(i) if field(&current[i], "value") == taint.value => None,
        Some(i) => {
            let mut next = current.to_vec();
            match next[i].as_object_mut() {
                Some(m) if taint.value.is_empty() => {
                    m.remove("value");
                }
                Some(m) => {
                    m.insert("value".into(), taint.value.clone().into());
                }
                None => next[i] = taint_json(taint),
            }
            Some(next)
        }
        None => {
            let mut next = current.to_vec();
            next.push(taint_json(taint));
            Some(next)
        }
    }
}

/// The list without any taint keyed `key`, or `None` when there is none.
pub(crate) fn without_key(current: &[Value], key: &str) -> Option<Vec<Value>> {
    let next: Vec<Value> = current.iter().filter(|t| field(t, "key") != key).cloned().collect();
    (next.len() != current.len()).then_some(next)
}

fn taint_json(t: &Taint) -> Value {
    let mut v = json!({ "key": t.key, "effect": effect_name(t.effect) });
    if !t.value.is_empty() {
        v["value"] = t.value.clone().into();
    }
    v
}

/// The JSON Patch that writes `next` only if the node still has `current` (`None`: no
/// `spec.taints` at all, guarded by `resource_version`).
pub(crate) fn swap(current: Option<&[Value]>, resource_version: &str, next: Vec<Value>) -> Value {
    match current {
        Some(list) => json!([
            { "op": "test", "path": "/spec/taints", "value": list },
            { "op": "replace", "path": "/spec/taints", "value": next },
        ]),
        None => json!([
            { "op": "test", "path": "/metadata/resourceVersion", "value": resource_version },
            { "op": "add", "path": "/spec/taints", "value": next },
        ]),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn disrupted() -> Taint {
        Taint::new("dovetail.dev/disrupted", "", TaintEffect::NoSchedule)
    }

    #[test]
    fn adding_is_idempotent_and_keeps_the_others() {
        let not_ready =
            json!({"key": "node.kubernetes.io/not-ready", "effect": "NoExecute", "timeAdded": "2025-01-01T00:00:00Z"});
        let next = with_taint(std::slice::from_ref(&not_ready), &disrupted()).unwrap();
        assert_eq!(next, vec![not_ready.clone(), json!({"key": "dovetail.dev/disrupted", "effect": "NoSchedule"})]);
        assert_eq!(with_taint(&next, &disrupted()), None, "already there");
        // Same key, another effect: a separate taint.
        let exec = Taint::new("dovetail.dev/disrupted", "", TaintEffect::NoExecute);
        assert_eq!(with_taint(&next, &exec).unwrap().len(), 3);
    }

    #[test]
    fn a_new_value_updates_in_place() {
        let current = vec![json!({"key": "gpu", "value": "a", "effect": "NoSchedule"})];
        let next = with_taint(&current, &Taint::new("gpu", "b", TaintEffect::NoSchedule)).unwrap();
        assert_eq!(next, vec![json!({"key": "gpu", "value": "b", "effect": "NoSchedule"})]);
        let cleared = with_taint(&next, &Taint::new("gpu", "", TaintEffect::NoSchedule)).unwrap();
        assert_eq!(cleared, vec![json!({"key": "gpu", "effect": "NoSchedule"})]);
    }

    #[test]
    fn removing_by_key_removes_every_effect() {
        let current = vec![
            json!({"key": "dovetail.dev/unregistered", "effect": "NoExecute"}),
            json!({"key": "dovetail.dev/unregistered", "effect": "NoSchedule"}),
            json!({"key": "other", "effect": "NoSchedule"}),
        ];
        assert_eq!(without_key(&current, "dovetail.dev/unregistered").unwrap(), vec![current[2].clone()]);
        assert_eq!(without_key(&current[2..], "dovetail.dev/unregistered"), None);
    }

    #[test]
    fn patches_test_before_they_write() {
        let list = vec![json!({"key": "a", "effect": "NoSchedule"})];
        let p = swap(Some(&list), "41", vec![]);
        assert_eq!(p[0], json!({"op": "test", "path": "/spec/taints", "value": list}));
        assert_eq!(p[1], json!({"op": "replace", "path": "/spec/taints", "value": []}));
        let p = swap(None, "41", list.clone());
        assert_eq!(p[0], json!({"op": "test", "path": "/metadata/resourceVersion", "value": "41"}));
        assert_eq!(p[1]["op"], "add");
        assert!(serde_json::from_value::<json_patch::Patch>(p).is_ok());
    }
}
