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
    let mut out = HashMap::new();
    let mut token: Option<String> = None;
    loop {
        let page = client
            .get_products()
            .service_code("AmazonEC2")
            .format_version("aws_v1")
            .set_filters(Some(filters.clone()))
            .max_results(100)
            .set_next_token(token.take())
            .send()
            .await
            .map_err(|e| api_error("GetProducts", e))?;
        out.extend(page.price_list().iter().filter_map(|p| parse_product(p)));
        match page.next_token() {
            Some(t) if !t.is_empty() => token = Some(t.to_string()),
            _ => return Ok(out),
        }
    }
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
    use super::*;

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
