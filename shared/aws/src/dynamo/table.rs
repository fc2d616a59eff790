//! Creating the table (tests and local runs; deployments declare the same in their templates).

use aws_sdk_dynamodb::types::{
    AttributeDefinition, BillingMode, GlobalSecondaryIndex, KeySchemaElement, KeyType, LocalSecondaryIndex, Projection,
    ProjectionType, ScalarAttributeType, TimeToLiveSpecification,
};
use aws_sdk_dynamodb::Client;

use crate::error::{api_error, AwsError, AwsResult};

/// The index from instance id to NodeClaim.
pub const GSI_BY_INSTANCE: &str = "by-instance";
/// The live (not Terminated) NodeClaims of a cluster, by name: what a cold read queries.
pub const LSI_LIVE: &str = "live-claims";
/// Every NodeClaim write of a cluster (tombstones of deleted claims included), by the time it was
/// made: what a warm read queries for the changes since its last read.
pub const LSI_CHANGED: &str = "claims-by-change";

fn built<T>(r: Result<T, aws_sdk_dynamodb::error::BuildError>) -> AwsResult<T> {
    r.map_err(|e| AwsError::Config(format!("table definition: {e}")))
}

/// Creates the table with its keys, the `by-instance` index, the two local indexes of the claims
/// (`live-claims`, `claims-by-change`) and TTL on `expires_at`; an existing table is left as it
/// is (DynamoDB adds local indexes only when it creates a table).
pub async fn create_table(client: &Client, name: &str) -> AwsResult<()> {
    let attr = |n: &str, t: ScalarAttributeType| {
        built(AttributeDefinition::builder().attribute_name(n).attribute_type(t).build())
    };
    let key = |n: &str, t: KeyType| built(KeySchemaElement::builder().attribute_name(n).key_type(t).build());
    let all = || Projection::builder().projection_type(ProjectionType::All).build();
    let index = built(
        GlobalSecondaryIndex::builder()
            .index_name(GSI_BY_INSTANCE)
            .key_schema(key("instance_id", KeyType::Hash)?)
            .projection(all())
            .build(),
    )?;
    let local = |index: &str, sort: &str| {
        built(
            LocalSecondaryIndex::builder()
                .index_name(index)
                .key_schema(key("pk", KeyType::Hash)?)
                .key_schema(key(sort, KeyType::Range)?)
                .projection(all())
                .build(),
        )
    };
    let created = client
        .create_table()
        .table_name(name)
        .billing_mode(BillingMode::PayPerRequest)
        .attribute_definitions(attr("pk", ScalarAttributeType::S)?)
        .attribute_definitions(attr("sk", ScalarAttributeType::S)?)
        .attribute_definitions(attr("instance_id", ScalarAttributeType::S)?)
        .attribute_definitions(attr("live", ScalarAttributeType::S)?)
        .attribute_definitions(attr("changed", ScalarAttributeType::N)?)
        .key_schema(key("pk", KeyType::Hash)?)
        .key_schema(key("sk", KeyType::Range)?)
        .global_secondary_indexes(index)
        .local_secondary_indexes(local(LSI_LIVE, "live")?)
        .local_secondary_indexes(local(LSI_CHANGED, "changed")?)
        .send()
        .await;
    if let Err(e) = created {
        let e = api_error("CreateTable", e);
        if !matches!(&e, AwsError::Api { code: Some(c), .. } if c == "ResourceInUseException") {
            return Err(e);
        }
        return Ok(());
    }
    client
        .update_time_to_live()
        .table_name(name)
        .time_to_live_specification(built(
            TimeToLiveSpecification::builder().attribute_name("expires_at").enabled(true).build(),
        )?)
        .send()
        .await
        .map_err(|e| api_error("UpdateTimeToLive", e))?;
    Ok(())
}
