//! Prices: on demand from the Pricing API (GetProducts on AmazonEC2, Linux, shared tenancy, no
//! pre-installed software, in the region), spot from DescribeSpotPriceHistory (the latest price
//! per type and zone). Either may fail; what is missing falls back to the embedded catalog.

use std::collections::HashMap;
use std::time::SystemTime;

use aws_sdk_ec2::primitives::DateTime;
use aws_sdk_pricing::types::{Filter, FilterType};
use dovetail_core::catalog::{CapacityType, InstanceType};

use crate::error::{api_error, AwsError, AwsResult};

/// Live prices, USD per hour.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PriceBook {
    /// By instance type.
    pub on_demand: HashMap<String, f64>,
    /// By (instance type, zone).
    pub spot: HashMap<(String, String), f64>,
}

fn embedded_price(known: Option<&InstanceType>, capacity: CapacityType) -> Option<f64> {
    known?.offerings.iter().find(|o| o.capacity_type == capacity).map(|o| o.price)
}

impl PriceBook {
    /// The live on-demand price, else the embedded one.
    pub fn on_demand(&self, instance_type: &str, known: Option<&InstanceType>) -> Option<f64> {
        self.on_demand.get(instance_type).copied().or_else(|| embedded_price(known, CapacityType::OnDemand))
    }

    /// The live spot price in `zone`, else the embedded one.
    pub fn spot(&self, instance_type: &str, zone: &str, known: Option<&InstanceType>) -> Option<f64> {
        self.spot
            .get(&(instance_type.to_string(), zone.to_string()))
            .copied()
            .or_else(|| embedded_price(known, CapacityType::Spot))
    }
}

/// The instance type and hourly USD price of one GetProducts price-list entry (a JSON document),
/// if it is an on-demand compute instance price.
pub fn parse_product(json: &str) -> Option<(String, f64)> {
    let v: serde_json::Value = serde_json::from_str(json).ok()?;
    let instance_type = v.pointer("/product/attributes/instanceType")?.as_str()?.to_string();
    let terms = v.pointer("/terms/OnDemand")?.as_object()?;
    let price = terms
        .values()
        .filter_map(|term| term.get("priceDimensions")?.as_object())
        .flat_map(|dims| dims.values())
        .filter(|d| d.get("unit").and_then(|u| u.as_str()).is_none_or(|u| u == "Hrs"))
        .filter_map(|d| d.pointer("/pricePerUnit/USD")?.as_str()?.parse::<f64>().ok())
        .find(|p| *p > 0.0)?;
    Some((instance_type, price))
}

/// On-demand Linux prices of every type in `region`.
pub async fn on_demand_prices(client: &aws_sdk_pricing::Client, region: &str) -> AwsResult<HashMap<String, f64>> {
    let term = |field: &str, value: &str| {
        Filter::builder()
            .r#type(FilterType::TermMatch)
            .field(field)
            .value(value)
            .build()
            .map_err(|e| AwsError::Config(format!("pricing filter: {e}")))
    };
    let filters = vec![
        term("regionCode", region)?,
        term("operatingSystem", "Linux")?,
        term("tenancy", "Shared")?,
        term("preInstalledSw", "NA")?,
        term("capacitystatus", "Used")?,
        term("licenseModel", "No License required")?,
        term("marketoption", "OnDemand")?,
    ];
    // The SDK's paginator follows NextToken, and stops on an empty or repeated one.
    let mut entries = client
        .get_products()
        .service_code("AmazonEC2")
        .format_version("aws_v1")
        .set_filters(Some(filters))
        .into_paginator()
        .page_size(100)
        .items()
        .send();
    let mut out = HashMap::new();
    while let Some(entry) = entries.next().await {
        let entry = entry.map_err(|e| api_error("GetProducts", e))?;
        out.extend(parse_product(&entry));
    }
    Ok(out)
}

/// The latest Linux spot price of every type in every zone.
pub async fn spot_prices(ec2: &aws_sdk_ec2::Client) -> AwsResult<HashMap<(String, String), f64>> {
    let items = ec2
        .describe_spot_price_history()
        .product_descriptions("Linux/UNIX")
        .product_descriptions("Linux/UNIX (Amazon VPC)")
        .start_time(DateTime::from(SystemTime::now()))
        .into_paginator()
        .items()
        .send()
        .try_collect()
        .await
        .map_err(|e| api_error("DescribeSpotPriceHistory", e))?;
    let mut latest: HashMap<(String, String), (i64, f64)> = HashMap::new();
    for p in &items {
        let (Some(t), Some(zone), Some(price)) = (p.instance_type(), p.availability_zone(), p.spot_price()) else {
            continue;
        };
        let Ok(price) = price.parse::<f64>() else { continue };
        let at = p.timestamp().map(|t| t.secs()).unwrap_or(0);
        let entry = latest.entry((t.as_str().to_string(), zone.to_string())).or_insert((at, price));
        if at > entry.0 {
            *entry = (at, price);
        }
    }
    Ok(latest.into_iter().map(|(k, (_, p))| (k, p)).collect())
}

#[cfg(test)]
mod tests {
    use std::collections::VecDeque;
    use std::sync::{Arc, Mutex};

    use aws_sdk_pricing::config::{BehaviorVersion, Credentials, Region};
    use aws_smithy_runtime_api::client::http::{
        HttpClient, HttpConnector, HttpConnectorFuture, HttpConnectorSettings, SharedHttpConnector,
    };
    use aws_smithy_runtime_api::client::orchestrator::HttpRequest;
    use aws_smithy_runtime_api::client::result::ConnectorError;
    use aws_smithy_runtime_api::client::runtime_components::RuntimeComponents;
    use aws_smithy_runtime_api::http::{Response, StatusCode};
    use aws_smithy_types::body::SdkBody;
    use serde_json::{json, Value};

    use super::*;

    /// An HTTP client that answers each request with the next canned JSON body (an error once
    /// they run out) and keeps the JSON of every request.
    #[derive(Debug, Clone, Default)]
    struct Canned {
        answers: Arc<Mutex<VecDeque<Value>>>,
        asked: Arc<Mutex<Vec<Value>>>,
    }

    impl HttpConnector for Canned {
        fn call(&self, request: HttpRequest) -> HttpConnectorFuture {
            let asked = request.body().bytes().and_then(|b| serde_json::from_slice(b).ok()).unwrap_or_default();
            self.asked.lock().unwrap().push(asked);
            HttpConnectorFuture::ready(match self.answers.lock().unwrap().pop_front() {
                Some(answer) => {
                    Ok(Response::new(StatusCode::try_from(200).unwrap(), SdkBody::from(answer.to_string())))
                }
                None => Err(ConnectorError::other("no canned answer left".into(), None)),
            })
        }
    }

    impl HttpClient for Canned {
        fn http_connector(&self, _: &HttpConnectorSettings, _: &RuntimeComponents) -> SharedHttpConnector {
            SharedHttpConnector::new(self.clone())
        }
    }

    fn pricing_answering(answers: Vec<Value>) -> (aws_sdk_pricing::Client, Canned) {
        let canned = Canned { answers: Arc::new(Mutex::new(answers.into())), ..Default::default() };
        let config = aws_sdk_pricing::Config::builder()
            .behavior_version(BehaviorVersion::latest())
            .region(Region::new("us-east-1"))
            .credentials_provider(Credentials::new("AKIDEXAMPLE", "secret", None, None, "test"))
            .http_client(canned.clone())
            .build();
        (aws_sdk_pricing::Client::from_conf(config), canned)
    }

    /// One GetProducts page: a price-list entry per (type, price), and the next token.
    fn page(prices: &[(&str, &str)], next: Option<&str>) -> Value {
        let entries: Vec<String> = prices
            .iter()
            .map(|(t, usd)| {
                json!({
                    "product": {"attributes": {"instanceType": t}},
                    "terms": {"OnDemand": {"T": {"priceDimensions": {"D": {"unit": "Hrs", "pricePerUnit": {"USD": usd}}}}}}
                })
                .to_string()
            })
            .collect();
        let mut page = json!({"FormatVersion": "aws_v1", "PriceList": entries});
        if let Some(next) = next {
            page["NextToken"] = next.into();
        }
        page
    }

    #[tokio::test]
    async fn on_demand_prices_follow_every_page() {
        let (client, canned) = pricing_answering(vec![
            page(&[("m5.large", "0.096")], Some("a")),
            page(&[("c5.large", "0.085"), ("r5.large", "0.126")], Some("b")),
            page(&[("t3.micro", "0.0104")], None),
        ]);
        let prices = on_demand_prices(&client, "eu-west-1").await.unwrap();
        assert_eq!(prices.len(), 4);
        assert_eq!(prices["r5.large"], 0.126);
        let asked = canned.asked.lock().unwrap().clone();
        let tokens: Vec<&Value> = asked.iter().map(|r| &r["NextToken"]).collect();
        assert_eq!(tokens, [&Value::Null, &json!("a"), &json!("b")]);
        for request in &asked {
            assert_eq!((&request["ServiceCode"], &request["MaxResults"]), (&json!("AmazonEC2"), &json!(100)));
            assert!(request["Filters"].as_array().unwrap().iter().any(|f| f["Value"] == "eu-west-1"), "{request}");
        }
    }

    /// A hand-written loop asked again forever when the service repeated its token; an empty
    /// token ends the list too.
    #[tokio::test]
    async fn a_repeated_or_empty_token_ends_the_pages() {
        for last in ["a", ""] {
            let (client, canned) =
                pricing_answering(vec![page(&[("m5.large", "0.096")], Some("a")), page(&[], Some(last))]);
            assert_eq!(on_demand_prices(&client, "us-east-1").await.unwrap().len(), 1);
            assert_eq!(canned.asked.lock().unwrap().len(), 2, "token {last:?}");
        }
    }

    #[test]
    fn price_list_entries_yield_type_and_hourly_usd() {
        let json = r#"{
            "product": {"productFamily": "Compute Instance",
                        "attributes": {"instanceType": "m5.large", "regionCode": "us-east-1", "operatingSystem": "Linux"}},
            "serviceCode": "AmazonEC2",
            "terms": {"OnDemand": {"ABC.JRTCKXETXF": {"priceDimensions": {
                "ABC.JRTCKXETXF.6YS6EN2CT7": {"unit": "Hrs", "pricePerUnit": {"USD": "0.0960000000"}}}}}}
        }"#;
        assert_eq!(parse_product(json), Some(("m5.large".to_string(), 0.096)));
        assert_eq!(parse_product(r#"{"product": {"attributes": {}}}"#), None);
        let free = json.replace("0.0960000000", "0.0000000000");
        assert_eq!(parse_product(&free), None);
        assert_eq!(parse_product("not json"), None);
    }
}
