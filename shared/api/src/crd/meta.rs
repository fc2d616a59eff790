//! Object metadata held to Kubernetes' own validation (apimachinery's `ValidateObjectMeta`):
//! the name, the namespace, label keys and values, annotation keys and their total size.
//!
//! The API server applies these rules to every object it stores, so an object read from a
//! cluster normally passes; one that does not (an older API server, a manifest never applied, a
//! hand-built object) is refused with the field at fault rather than carried into decisions: a
//! 1 MB label value would otherwise be copied into every requirement and Event it touches. The
//! rules themselves (qualified names, label values, DNS names) are [`super::labels`]'. NodePool
//! and EC2NodeClass validation reports every problem; the converters (`crate::convert`) the first.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::labels::{
    check_dns_label, check_dns_subdomain, check_label_value, check_qualified_name, shown, MAX_ANNOTATIONS_BYTES,
};

/// The name rule of an object's kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NameRule {
    /// A DNS-1123 subdomain, at most 253 characters: pods, nodes, workloads, most kinds.
    Subdomain,
    /// A DNS-1123 label, at most 63 characters: namespaces.
    Label,
}

/// Reports every problem of `meta` as `(field, message)`, fields spelled as in the object
/// (`metadata.labels["team"]`). An empty name is not reported here: each caller says whether its
/// kind needs one.
pub fn check_metadata(meta: &ObjectMeta, rule: NameRule, push: &mut dyn FnMut(String, String)) {
    let name_rule = |value: &str| match rule {
        NameRule::Subdomain => check_dns_subdomain(value),
        NameRule::Label => check_dns_label(value),
    };
    if let Some(name) = meta.name.as_deref().filter(|n| !n.is_empty()) {
        if let Err(why) = name_rule(name) {
            push("metadata.name".into(), format!("{} is not a valid name: {why}", shown(name)));
        }
    } else if let Some(prefix) = meta.generate_name.as_deref().filter(|n| !n.is_empty()) {
        // The API server appends a random suffix, so the prefix may end with '-' (it checks the
        // prefix with its last '-' read as a letter).
        let masked = match prefix.strip_suffix('-') {
            Some(rest) => format!("{rest}a"),
            None => prefix.to_string(),
        };
        if let Err(why) = name_rule(&masked) {
            push("metadata.generateName".into(), format!("{} is not a valid name prefix: {why}", shown(prefix)));
        }
    }
    if let Some(namespace) = meta.namespace.as_deref().filter(|n| !n.is_empty()) {
        if let Err(why) = check_dns_label(namespace) {
            push("metadata.namespace".into(), format!("{} is not a valid namespace: {why}", shown(namespace)));
        }
    }
    for (key, value) in meta.labels.iter().flatten() {
        let field = || format!("metadata.labels[{key:?}]");
        if let Err(why) = check_qualified_name(key) {
            push(field(), why);
        }
        if let Err(why) = check_label_value(value) {
            push(field(), why);
        }
    }
    let mut total = 0usize;
    for (key, value) in meta.annotations.iter().flatten() {
        // Kubernetes checks annotation keys lowercased: `Example.com/x` is a valid annotation key.
        if let Err(why) = check_qualified_name(&key.to_ascii_lowercase()) {
            push(format!("metadata.annotations[{key:?}]"), why);
        }
        total += key.len() + value.len();
    }
    if total > MAX_ANNOTATIONS_BYTES {
        push(
            "metadata.annotations".into(),
            format!("{total} bytes in all is more than Kubernetes' {MAX_ANNOTATIONS_BYTES} (256 KiB)"),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta(yaml: &str) -> ObjectMeta {
        serde_yaml_ng::from_str(yaml).expect("test metadata parses")
    }

    fn problems(yaml: &str, rule: NameRule) -> Vec<(String, String)> {
        let mut out = vec![];
        check_metadata(&meta(yaml), rule, &mut |f, m| out.push((f, m)));
        out
    }

    /// The first problem, as `field: message`.
    fn one(yaml: &str) -> String {
        let (field, message) = problems(yaml, NameRule::Subdomain).into_iter().next().expect("must be refused");
        format!("{field}: {message}")
    }

    #[test]
    fn valid_metadata_passes() {
        let ok = "{name: web-1.shop, namespace: shop, labels: {app: web, example.com/tier: \"\", a_b.c: X-1}, annotations: {Example.com/Owner: team}}";
        assert_eq!(problems(ok, NameRule::Subdomain), []);
        assert_eq!(problems("{generateName: job-}", NameRule::Subdomain), []);
        assert_eq!(problems("{name: shop}", NameRule::Label), []);
    }

    #[test]
    fn names_and_namespaces() {
        assert_eq!(
            one("{name: Web_1}"),
            "metadata.name: \"Web_1\" is not a valid name: it must be a lowercase DNS subdomain (a-z, 0-9, '-' and '.', \
             starting and ending with a letter or digit)"
        );
        assert_eq!(
            one(&format!("{{name: {}}}", "a".repeat(254))),
            format!(
                "metadata.name: \"{}\"… (254 bytes) is not a valid name: it is longer than 253 characters",
                "a".repeat(64)
            )
        );
        assert_eq!(
            problems("{name: shop.prod}", NameRule::Label),
            [(
                "metadata.name".to_string(),
                "\"shop.prod\" is not a valid name: it must be a lowercase DNS label (a-z, 0-9 and '-', starting and \
                 ending with a letter or digit)"
                    .to_string()
            )]
        );
        assert!(one("{generateName: Job-}").starts_with("metadata.generateName: \"Job-\" is not a valid name prefix"));
        assert!(one("{name: a, namespace: Shop}").starts_with("metadata.namespace: \"Shop\" is not a valid namespace"));
    }

    #[test]
    fn labels() {
        let huge = "v".repeat(1 << 20);
        assert_eq!(
            one(&format!("{{name: a, labels: {{team: {huge}}}}}")),
            format!(
                "metadata.labels[\"team\"]: \"{}\"… (1048576 bytes) is not a valid label value: it is longer than 63 \
                 characters",
                "v".repeat(64)
            )
        );
        assert_eq!(
            one("{name: a, labels: {\"-team\": x}}"),
            "metadata.labels[\"-team\"]: \"-team\" is not a qualified name: it must start and end with a letter or digit"
        );
        assert_eq!(
            one("{name: a, labels: {Example.com/team: x}}"),
            "metadata.labels[\"Example.com/team\"]: \"Example.com/team\" has a bad prefix: it must be a lowercase DNS \
             subdomain (a-z, 0-9, '-' and '.', starting and ending with a letter or digit)"
        );
        assert_eq!(
            one(&format!("{{name: a, labels: {{{}: x}}}}", "k".repeat(64))),
            format!(
                "metadata.labels[\"{k}\"]: \"{k}\" is not a qualified name: it is longer than 63 characters",
                k = "k".repeat(64)
            )
        );
        // Every problem is reported, not just the first.
        assert_eq!(problems("{name: A, labels: {a: \"b c\", \"d e\": f}}", NameRule::Subdomain).len(), 3);
    }

    #[test]
    fn annotations() {
        assert_eq!(
            one("{name: a, annotations: {\"a b\": x}}"),
            "metadata.annotations[\"a b\"]: \"a b\" is not a qualified name: only letters, digits, '-', '_' and '.' are allowed"
        );
        let big = "x".repeat(MAX_ANNOTATIONS_BYTES);
        assert_eq!(
            one(&format!("{{name: a, annotations: {{note: {big}}}}}")),
            "metadata.annotations: 262148 bytes in all is more than Kubernetes' 262144 (256 KiB)"
        );
        let fits = "x".repeat(MAX_ANNOTATIONS_BYTES - 4);
        assert_eq!(problems(&format!("{{name: a, annotations: {{note: {fits}}}}}"), NameRule::Subdomain), []);
    }
}
