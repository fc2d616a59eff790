//! Creating the table (tests and local runs; deployments declare the same in their templates).

use aws_sdk_dynamodb::types::{
    AttributeDefinition, BillingMode, GlobalSecondaryIndex, KeySchemaElement, KeyType, Projection, ProjectionType,
    ScalarAttributeType, TimeToLiveSpecification,
};
use aws_sdk_dynamodb::Client;

use crate::error::{api_error, AwsError, AwsResult};

/// The index from instance id to NodeClaim.
pub const GSI_BY_INSTANCE: &str = "by-instance";

fn built<T>(r: Result<T, aws_sdk_dynamodb::error::BuildError>) -> AwsResult<T> {
    r.map_err(|e| AwsError::Config(format!("table definition: {e}")))
}

/// Creates the table with its keys, the `by-instance` index and TTL on `expires_at`; an existing
/// table is left as it is.
pub async fn create_table(client: &Client, name: &str) -> AwsResult<()> {
    let attr = |n: &str| {
        built(AttributeDefinition::builder().attribute_name(n).attribute_type(ScalarAttributeType::S).build())
    };
    let key = |n: &str, t: KeyType| built(KeySchemaElement::builder().attribute_name(n).key_type(t).build());
    let index = built(
        GlobalSecondaryIndex::builder()
            .index_name(GSI_BY_INSTANCE)
            .key_schema(key("instance_id", KeyType::Hash)?)
            .projection(Projection::builder().projection_type(ProjectionType::All).build())
            .build(),
    )?;
    let created = client
        .create_table()
        .table_name(name)
        .billing_mode(BillingMode::PayPerRequest)
        .attribute_definitions(attr("pk")?)
        .attribute_definitions(attr("sk")?)
        .attribute_definitions(attr("instance_id")?)
        .key_schema(key("pk", KeyType::Hash)?)
        .key_schema(key("sk", KeyType::Range)?)
        .global_secondary_indexes(index)
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
