//! Every EC2 action that changes something, in every policy the stack makes, is held to this
//! cluster's tag: a `StringEquals` condition on `aws:RequestTag/dovetail.dev/cluster`,
//! `aws:ResourceTag/…` or `ec2:ResourceTag/…` equal to the cluster's name. That is what keeps the
//! functions' role from launching, tagging, terminating or deleting anything of another cluster or
//! of nobody's: the tag conditions are the whole of the EC2 side of the threat model
//! (docs/security.md).
//!
//! "Changes something" is read conservatively: every EC2 action but `Describe*`, `Get*` and
//! `List*`, and every wildcard that could match one (`ec2:*`, `ec2:Create*`, `*`). The only grants
//! allowed without the tag are the launch calls on the resources a launch reads or makes without
//! tags of its own ([`UNTAGGED_LAUNCH_RESOURCES`], each with its reason): no such grant launches
//! anything alone, since the instance itself still needs the tagged statement.
//!
//! Policies the template only names by ARN cannot be read here; the only ones allowed are AWS's
//! node policies on the node role ([`NODE_POLICIES`]).

use std::collections::BTreeMap;

use serde_json::Value;

/// The tag every instance and launch template carries (shared/aws's `TAG_CLUSTER`).
pub const CLUSTER_TAG: &str = "dovetail.dev/cluster";

/// Condition keys (before the tag key) that tie a grant to a tag.
const TAG_CONDITION_KEYS: [&str; 3] = ["aws:RequestTag/", "aws:ResourceTag/", "ec2:ResourceTag/"];

/// Action name prefixes that only read.
const READ_PREFIXES: [&str; 3] = ["describe", "get", "list"];

/// The only mutating EC2 actions that may be granted without the tag, and only on
/// [`UNTAGGED_LAUNCH_RESOURCES`].
const LAUNCH_ACTIONS: [&str; 2] = ["RunInstances", "CreateFleet"];

/// Resource types a launch authorizes that carry no Dovetail tag, and why each needs an
/// unconditioned grant. A launch is authorized on every resource it touches; a request-tag
/// condition on these would refuse it (nothing tags them in the request), a resource-tag one
/// would refuse what someone else made.
pub const UNTAGGED_LAUNCH_RESOURCES: [(&str, &str); 8] = [
    ("image", "the AMI the EC2NodeClass chooses (an alias resolved through SSM, an id or tags): AWS's or the user's, never Dovetail's"),
    ("snapshot", "the AMI's snapshots, read by the launch; they follow the image"),
    ("subnet", "chosen by the EC2NodeClass subnetSelectorTerms; the user's or the cluster's, never Dovetail's"),
    ("security-group", "chosen by the EC2NodeClass securityGroupSelectorTerms; the user's or the cluster's"),
    ("network-interface", "the instance's primary interface, made by the launch itself; Dovetail's CreateFleet tags instances and volumes only"),
    ("fleet", "the instant fleet request itself, which Dovetail does not tag"),
    ("spot-instances-request", "a spot launch's request, made by the fleet without tags"),
    ("capacity-reservation", "the reservation a reserved launch targets, chosen by the EC2NodeClass capacityReservationSelectorTerms: the user's (or shared with them), never Dovetail's"),
];

/// The AWS managed policies allowed in the stack, only on the node role: what every EKS node has.
pub const NODE_POLICIES: [&str; 4] = [
    "AmazonEKSWorkerNodePolicy",
    "AmazonEKS_CNI_Policy",
    "AmazonEC2ContainerRegistryPullOnly",
    "AmazonSSMManagedInstanceCore",
];

/// The logical ID of the node role (the only one the node policies may be attached to).
const NODE_ROLE: &str = "NodeRole";

/// Every grant in `resources` (a template's resources, intrinsic functions resolved to text as
/// `infra.rs`'s `Normalizer` does) that breaks the rule above, one sentence each naming the
/// resource, the statement and what it grants; empty when the stack keeps it.
pub fn untagged_ec2_writes(resources: &BTreeMap<String, Value>, cluster: &str) -> Vec<String> {
    let mut found = Vec::new();
    for (id, resource) in resources {
        let properties = &resource["Properties"];
        if let Some(document) = properties.get("PolicyDocument") {
            check_document(id, document, cluster, &mut found);
        }
        for policy in properties["Policies"].as_array().into_iter().flatten() {
            let name = policy["PolicyName"].as_str().unwrap_or("?");
            match policy.get("PolicyDocument") {
                Some(document) => check_document(&format!("{id} policy {name}"), document, cluster, &mut found),
                // A SAM policy template or a managed policy's name: nothing here can read it.
                None => found.push(format!("{id}: a policy that is not a document ({policy}) cannot be checked")),
            }
        }
        for arn in properties["ManagedPolicyArns"].as_array().into_iter().flatten() {
            let arn = arn.as_str().unwrap_or_default();
            let in_template = arn.strip_prefix("${").and_then(|a| a.strip_suffix('}'));
            if in_template.is_some_and(|target| resources.contains_key(target)) {
                continue; // checked as that resource's PolicyDocument
            }
            let aws_managed = arn.split_once(":iam::aws:policy/").map(|(_, name)| name);
            if id == NODE_ROLE && aws_managed.is_some_and(|name| NODE_POLICIES.contains(&name)) {
                continue;
            }
            found.push(format!(
                "{id}: managed policy {arn} cannot be checked (only {NODE_ROLE} may have AWS's node policies)"
            ));
        }
    }
    found
}

fn check_document(policy: &str, document: &Value, cluster: &str, found: &mut Vec<String>) {
    let statements = match &document["Statement"] {
        Value::Array(statements) => statements.iter().collect(),
        Value::Null => Vec::new(),
        one => vec![one],
    };
    for (i, statement) in statements.into_iter().enumerate() {
        if statement["Effect"] != "Allow" {
            continue; // a Deny grants nothing
        }
        let sid = statement["Sid"].as_str().map_or_else(|| format!("statement {i}"), str::to_string);
        let at = format!("{policy} {sid}");
        if let Some(not_actions) = statement.get("NotAction") {
            // Allow + NotAction grants every action it does not name.
            let excludes_ec2 = strings(not_actions).iter().any(|a| a == "*" || a.eq_ignore_ascii_case("ec2:*"));
            if !excludes_ec2 {
                found.push(format!("{at}: NotAction grants every EC2 action it does not name"));
            }
            continue;
        }
        let writes: Vec<String> = strings(&statement["Action"]).into_iter().filter(|a| mutates_ec2(a)).collect();
        if writes.is_empty() || conditioned_on_cluster_tag(&statement["Condition"], cluster) {
            continue;
        }
        // NotResource: every resource but some, as good as "*" here.
        let resources = if statement.get("NotResource").is_some() {
            vec!["*".to_string()]
        } else {
            strings(&statement["Resource"])
        };
        let launch_only =
            writes.iter().all(|w| LAUNCH_ACTIONS.iter().any(|l| w.eq_ignore_ascii_case(&format!("ec2:{l}"))));
        let untagged_only = !resources.is_empty()
            && resources
                .iter()
                .all(|r| ec2_resource_type(r).is_some_and(|t| UNTAGGED_LAUNCH_RESOURCES.iter().any(|(u, _)| *u == t)));
        if !(launch_only && untagged_only) {
            found.push(format!(
                "{at}: {} on {} without a StringEquals condition on aws:RequestTag/{CLUSTER_TAG}, \
                 aws:ResourceTag/{CLUSTER_TAG} or ec2:ResourceTag/{CLUSTER_TAG} = {cluster}",
                writes.join(", "),
                resources.join(", ")
            ));
        }
    }
}

/// A string or a list of strings (IAM allows both); anything else reads as nothing.
fn strings(value: &Value) -> Vec<String> {
    match value {
        Value::String(s) => vec![s.clone()],
        Value::Array(items) => items.iter().filter_map(Value::as_str).map(str::to_string).collect(),
        _ => Vec::new(),
    }
}

/// Whether `action` (`service:Name`, wildcards allowed) can match an EC2 action that is not a
/// read. Conservative: a wildcard counts unless everything it matches starts `Describe`, `Get` or
/// `List`, and a wildcard service counts as EC2.
fn mutates_ec2(action: &str) -> bool {
    let Some((service, name)) = action.split_once(':') else {
        return action.contains('*') || action.contains('?'); // "*": every service
    };
    let service_may_be_ec2 = service.eq_ignore_ascii_case("ec2") || service.contains('*') || service.contains('?');
    if !service_may_be_ec2 {
        return false;
    }
    // What every match starts with: the name up to its first wildcard.
    let fixed = name.split(['*', '?']).next().unwrap_or_default().to_ascii_lowercase();
    !READ_PREFIXES.iter().any(|read| fixed.starts_with(read))
}

/// Whether `condition` holds the grant to resources or requests tagged `dovetail.dev/cluster =
/// cluster`: a `StringEquals` block (not `…IfExists`, which passes when the tag is absent) with one
/// of [`TAG_CONDITION_KEYS`] for the tag, equal to the cluster's name and nothing else.
fn conditioned_on_cluster_tag(condition: &Value, cluster: &str) -> bool {
    let Some(operators) = condition.as_object() else { return false };
    operators.iter().filter(|(operator, _)| operator.as_str() == "StringEquals").any(|(_, block)| {
        block.as_object().into_iter().flatten().any(|(key, value)| {
            let names_tag =
                TAG_CONDITION_KEYS.iter().any(|prefix| key.eq_ignore_ascii_case(&format!("{prefix}{CLUSTER_TAG}")));
            let values = strings(value);
            names_tag && !values.is_empty() && values.iter().all(|v| v == cluster)
        })
    })
}

/// `arn:<partition>:ec2:<region>:<account>:<type>/<id>` → `<type>`; None for anything else
/// (`*` included). Read from the end: the partition, region and account are placeholders such as
/// `${AWS::Region}` here, colons included, and an EC2 resource has none.
fn ec2_resource_type(arn: &str) -> Option<&str> {
    let (head, resource) = arn.rsplit_once(':')?;
    let is_ec2 = arn.starts_with("arn:") && head.contains(":ec2:");
    is_ec2.then(|| resource.split_once('/').map(|(t, _)| t)).flatten()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    const CLUSTER: &str = "prod";
    const EC2: &str = "arn:${AWS::Partition}:ec2:${AWS::Region}:${AWS::AccountId}";

    fn arn(resource: &str) -> String {
        format!("{EC2}:{resource}/*")
    }

    fn tag(prefix: &str) -> Value {
        json!({"StringEquals": {format!("{prefix}/{CLUSTER_TAG}"): CLUSTER}})
    }

    /// The shape of the functions' role: every kind of statement the real one has.
    fn statements() -> Vec<Value> {
        vec![
            json!({"Sid": "DescribeEc2", "Effect": "Allow", "Action": ["ec2:DescribeInstances", "ec2:DescribeSubnets"],
                   "Resource": "*", "Condition": {"StringEquals": {"aws:RequestedRegion": "${AWS::Region}"}}}),
            json!({"Sid": "CreateOnlyTaggedForCluster", "Effect": "Allow",
                   "Action": ["ec2:RunInstances", "ec2:CreateFleet", "ec2:CreateLaunchTemplate"],
                   "Resource": [arn("instance"), arn("volume"), arn("launch-template")], "Condition": tag("aws:RequestTag")}),
            json!({"Sid": "TagOnlyOnCreate", "Effect": "Allow", "Action": "ec2:CreateTags", "Resource": [arn("instance")],
                   "Condition": {"StringEquals": {"ec2:CreateAction": ["RunInstances"], "aws:RequestTag/dovetail.dev/cluster": CLUSTER}}}),
            json!({"Sid": "LaunchIngredients", "Effect": "Allow", "Action": ["ec2:RunInstances", "ec2:CreateFleet"],
                   "Resource": ["arn:${AWS::Partition}:ec2:${AWS::Region}::image/*", arn("subnet"), arn("security-group"),
                                arn("network-interface"), arn("fleet"), arn("spot-instances-request")]}),
            json!({"Sid": "RemoveOnlyTaggedForCluster", "Effect": "Allow",
                   "Action": ["ec2:TerminateInstances", "ec2:DeleteLaunchTemplate"],
                   "Resource": [arn("instance"), arn("launch-template")], "Condition": tag("aws:ResourceTag")}),
            json!({"Sid": "Table", "Effect": "Allow", "Action": ["dynamodb:PutItem"], "Resource": "${Table.Arn}"}),
            json!({"Effect": "Deny", "Action": "ec2:*", "Resource": "*"}),
        ]
    }

    /// A stack whose functions' role has `statements`, and its node role with AWS's node policies.
    fn stack(statements: Vec<Value>) -> BTreeMap<String, Value> {
        let node_policies: Vec<String> =
            NODE_POLICIES.iter().map(|p| format!("arn:${{AWS::Partition}}:iam::aws:policy/{p}")).collect();
        BTreeMap::from([
            (
                "FunctionsRole".to_string(),
                json!({"Type": "AWS::IAM::Role", "Properties": {"Policies": [
                    {"PolicyName": "dovetail-functions", "PolicyDocument": {"Version": "2012-10-17", "Statement": statements}}
                ]}}),
            ),
            (
                NODE_ROLE.to_string(),
                json!({"Type": "AWS::IAM::Role", "Properties": {"ManagedPolicyArns": node_policies}}),
            ),
        ])
    }

    fn with(extra: Value) -> Vec<String> {
        let mut all = statements();
        all.push(extra);
        untagged_ec2_writes(&stack(all), CLUSTER)
    }

    #[test]
    fn the_functions_roles_shape_passes() {
        assert_eq!(untagged_ec2_writes(&stack(statements()), CLUSTER), Vec::<String>::new());
    }

    #[test]
    fn an_unconditioned_write_is_named_with_its_statement() {
        let found = with(
            json!({"Sid": "Oops", "Effect": "Allow", "Action": "ec2:TerminateInstances", "Resource": arn("instance")}),
        );
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(
            found[0].starts_with("FunctionsRole policy dovetail-functions Oops: ec2:TerminateInstances on "),
            "{found:?}"
        );
    }

    #[test]
    fn wildcards_count_as_writes() {
        for action in ["ec2:*", "ec2:Create*", "ec2:*Instances", "EC2:Terminate*", "*", "ec*:RunInstances", "ec2:D*"] {
            let found = with(json!({"Effect": "Allow", "Action": action, "Resource": "*"}));
            assert_eq!(found.len(), 1, "{action}: {found:?}");
        }
        for read in ["ec2:Describe*", "ec2:GetConsoleOutput", "ec2:List*", "sqs:*", "dynamodb:DeleteItem"] {
            assert_eq!(
                with(json!({"Effect": "Allow", "Action": read, "Resource": "*"})),
                Vec::<String>::new(),
                "{read}"
            );
        }
    }

    #[test]
    fn only_a_strict_condition_on_this_clusters_tag_counts() {
        let terminate = |condition: Value| {
            with(
                json!({"Effect": "Allow", "Action": "ec2:TerminateInstances", "Resource": arn("instance"), "Condition": condition}),
            )
        };
        for prefix in ["aws:RequestTag", "aws:ResourceTag", "ec2:ResourceTag"] {
            assert_eq!(terminate(tag(prefix)), Vec::<String>::new(), "{prefix}");
        }
        for (why, condition) in [
            (
                "passes when untagged",
                json!({"StringEqualsIfExists": {"aws:ResourceTag/dovetail.dev/cluster": CLUSTER}}),
            ),
            ("any value", json!({"StringLike": {"aws:ResourceTag/dovetail.dev/cluster": "*"}})),
            ("another cluster", json!({"StringEquals": {"aws:ResourceTag/dovetail.dev/cluster": "staging"}})),
            (
                "this or another",
                json!({"StringEquals": {"aws:ResourceTag/dovetail.dev/cluster": [CLUSTER, "staging"]}}),
            ),
            ("another tag", json!({"StringEquals": {"aws:ResourceTag/team": CLUSTER}})),
            ("not a tag", json!({"StringEquals": {"aws:RequestedRegion": "us-east-1"}})),
            ("a tag's absence", json!({"Null": {"aws:ResourceTag/dovetail.dev/cluster": "false"}})),
        ] {
            assert_eq!(terminate(condition).len(), 1, "{why}");
        }
    }

    #[test]
    fn launch_ingredients_stay_launch_calls_on_untagged_resource_types() {
        let ingredients = |actions: Value, resources: Value| {
            with(json!({"Sid": "More", "Effect": "Allow", "Action": actions, "Resource": resources}))
        };
        assert_eq!(ingredients(json!("ec2:RunInstances"), json!(arn("subnet"))), Vec::<String>::new());
        // An instance, any resource, or another action on an ingredient: not an exception.
        assert_eq!(ingredients(json!(["ec2:RunInstances"]), json!([arn("subnet"), arn("instance")])).len(), 1);
        assert_eq!(ingredients(json!("ec2:CreateFleet"), json!("*")).len(), 1);
        assert_eq!(
            ingredients(json!(["ec2:RunInstances", "ec2:DeleteSecurityGroup"]), json!(arn("security-group"))).len(),
            1
        );
        assert_eq!(ingredients(json!("ec2:CreateTags"), json!(arn("fleet"))).len(), 1);
        let not_resource =
            with(json!({"Effect": "Allow", "Action": "ec2:RunInstances", "NotResource": arn("instance")}));
        assert_eq!(not_resource.len(), 1, "{not_resource:?}");
    }

    #[test]
    fn not_action_grants_are_refused() {
        let found = with(json!({"Sid": "AllBut", "Effect": "Allow", "NotAction": "iam:*", "Resource": "*"}));
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(found[0].contains("AllBut: NotAction"), "{found:?}");
        assert_eq!(with(json!({"Effect": "Allow", "NotAction": ["ec2:*"], "Resource": "*"})), Vec::<String>::new());
    }

    #[test]
    fn every_policy_of_the_stack_is_read_and_unreadable_ones_are_refused() {
        let mut resources = stack(statements());
        let bad = json!({"Version": "2012-10-17", "Statement": {"Effect": "Allow", "Action": "ec2:CreateTags", "Resource": "*"}});
        resources
            .insert("Extra".into(), json!({"Type": "AWS::IAM::ManagedPolicy", "Properties": {"PolicyDocument": bad}}));
        resources.insert(
            "ScheduleRole".into(),
            json!({"Type": "AWS::IAM::Role", "Properties": {"ManagedPolicyArns": ["${Extra}", "arn:aws:iam::aws:policy/AmazonEC2FullAccess"]}}),
        );
        resources.insert(
            "Fn".into(),
            json!({"Type": "AWS::Serverless::Function", "Properties": {"Policies": ["AmazonEC2FullAccess"]}}),
        );
        let found = untagged_ec2_writes(&resources, CLUSTER);
        assert_eq!(found.len(), 3, "{found:#?}");
        assert!(found.iter().any(|f| f.starts_with("Extra statement 0: ec2:CreateTags on *")), "{found:#?}");
        assert!(found
            .iter()
            .any(|f| f.starts_with("ScheduleRole: managed policy arn:aws:iam::aws:policy/AmazonEC2FullAccess")));
        assert!(found.iter().any(|f| f.starts_with("Fn: a policy that is not a document")));
        // AWS's node policies are for the node role only.
        let mut moved = stack(statements());
        let node = moved.remove(NODE_ROLE).unwrap();
        moved.insert("FunctionsRole2".into(), node);
        assert_eq!(untagged_ec2_writes(&moved, CLUSTER).len(), NODE_POLICIES.len());
    }
}
