//! EC2 `Filter`s as the selector terms of an EC2NodeClass ask for them.

use std::collections::BTreeMap;

use aws_sdk_ec2::types::Filter;

/// EC2 filters for a tag map: `tag:<key>` = value, or `tag-key` = key for `*`.
pub fn tag_filters(tags: &BTreeMap<String, String>) -> Vec<Filter> {
    tags.iter().map(|(k, v)| if v == "*" { filter("tag-key", k) } else { filter(&format!("tag:{k}"), v) }).collect()
}

/// `name` = `value`.
pub fn filter(name: &str, value: &str) -> Filter {
    Filter::builder().name(name).values(value).build()
}
