//! The SDK clients, built once per process (during a Lambda's init, so the first event does not
//! pay for credentials and TLS set-up).

use aws_config::{BehaviorVersion, Region, SdkConfig};

use crate::config::Config;

/// Loads the SDK configuration: the default credential and region chains, with the region and
/// endpoint of `config` where it sets them.
pub async fn load_sdk_config(config: &Config) -> SdkConfig {
    let mut loader = aws_config::defaults(BehaviorVersion::latest());
    if let Some(region) = &config.region {
        loader = loader.region(Region::new(region.clone()));
    }
    if let Some(url) = &config.endpoint_url {
        loader = loader.endpoint_url(url);
    }
    loader.load().await
}

/// Every client the adapters use.
#[derive(Debug, Clone)]
pub struct Clients {
    pub sdk: SdkConfig,
    pub ec2: aws_sdk_ec2::Client,
    pub ssm: aws_sdk_ssm::Client,
    /// In `config.pricing_region` (the Pricing API has endpoints in few regions) unless one
    /// endpoint serves everything.
    pub pricing: aws_sdk_pricing::Client,
    pub dynamodb: aws_sdk_dynamodb::Client,
    pub sqs: aws_sdk_sqs::Client,
    pub eks: aws_sdk_eks::Client,
    pub iam: aws_sdk_iam::Client,
}

impl Clients {
    pub fn new(sdk: &SdkConfig, config: &Config) -> Clients {
        let pricing = if sdk.endpoint_url().is_some() {
            aws_sdk_pricing::Client::new(sdk)
        } else {
            let conf = aws_sdk_pricing::config::Builder::from(sdk).region(Region::new(config.pricing_region.clone()));
            aws_sdk_pricing::Client::from_conf(conf.build())
        };
        Clients {
            sdk: sdk.clone(),
            ec2: aws_sdk_ec2::Client::new(sdk),
            ssm: aws_sdk_ssm::Client::new(sdk),
            pricing,
            dynamodb: aws_sdk_dynamodb::Client::new(sdk),
            sqs: aws_sdk_sqs::Client::new(sdk),
            eks: aws_sdk_eks::Client::new(sdk),
            iam: aws_sdk_iam::Client::new(sdk),
        }
    }
}
