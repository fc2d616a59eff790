//! Counting the functions' AWS calls: an SDK interceptor on every client the functions get
//! (`dovetail_runtime::aws::Function::with_clients`). It counts executions by service and
//! operation, the DynamoDB items each read returned and the read units DynamoDB would bill for them,
//! and when the first CreateFleet left. moto's own `ConsumedCapacity` is a constant, so units are
//! computed here from the items, as DynamoDB documents it: per request, the items' size rounded up
//! to 4 KB (each item on its own for GetItem and BatchGetItem), one unit per 4 KB strongly
//! consistent, half eventually consistent.
//!
//! It also marks each call in flight on the rig's [`Busy`] clock: at a few thousand instances moto
//! (one Python process) takes seconds to filter them, where EC2 answers in a fixed fraction of a
//! second whatever the account holds, so a row's time less its AWS time is what the function
//! itself took, and what a real region adds is an assumption per call (`costs::Allowance`).
//!
//! Writes are counted in write units, as DynamoDB bills them: a PutItem's item rounded up to 1 KB,
//! once for the table and once more for each index the item is in (the claims' three indexes
//! project every attribute); UpdateItem and DeleteItem, which the store uses on the provisioning
//! lease only (a few dozen bytes), one unit each. A put that moves an item out of an index also
//! deletes it there, which this leaves out: the write units are a floor.
//!
//! It also refuses DescribeSpotPriceHistory, as the end-to-end tests do: moto answers it with one
//! placeholder price for every type, with which "cheapest first" picks absurd types; refused, the
//! functions fall back to the embedded spot prices. The refused call is still counted.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use aws_sdk_dynamodb::operation::batch_get_item::{BatchGetItemInput, BatchGetItemOutput};
use aws_sdk_dynamodb::operation::delete_item::DeleteItemInput;
use aws_sdk_dynamodb::operation::get_item::{GetItemInput, GetItemOutput};
use aws_sdk_dynamodb::operation::put_item::PutItemInput;
use aws_sdk_dynamodb::operation::query::{QueryInput, QueryOutput};
use aws_sdk_dynamodb::operation::scan::{ScanInput, ScanOutput};
use aws_sdk_dynamodb::operation::update_item::UpdateItemInput;
use aws_sdk_dynamodb::types::AttributeValue;
use aws_sdk_ec2::operation::create_fleet::CreateFleetInput;
use aws_sdk_ec2::operation::describe_spot_price_history::DescribeSpotPriceHistoryInput;
use aws_smithy_runtime_api::box_error::BoxError;
use aws_smithy_runtime_api::client::interceptors::context::{
    BeforeSerializationInterceptorContextRef, FinalizerInterceptorContextRef,
};
use aws_smithy_runtime_api::client::interceptors::Intercept;
use aws_smithy_runtime_api::client::orchestrator::Metadata;
use aws_smithy_runtime_api::client::runtime_components::RuntimeComponents;
use aws_smithy_types::config_bag::{ConfigBag, Storable, StoreReplace};
use dovetail_aws::Clients;

use super::busy::{Busy, Source, Waited};

/// DynamoDB's read unit: 4 KB.
const READ_UNIT: usize = 4096;
/// DynamoDB's write unit: 1 KB.
const WRITE_UNIT: usize = 1024;
/// The key attributes of the table's indexes (`dovetail_aws::dynamo::table`): an item holding one
/// is written to that index too.
const INDEX_KEYS: [&str; 3] = ["live", "changed", "instance_id"];

/// What the functions' AWS calls added up to since the counter was made (a window is the
/// difference of two of these, see [`AwsTally::since`]).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct AwsTally {
    /// Executions (not attempts) by `Service.Operation`, e.g. `EC2.CreateFleet`.
    pub calls: BTreeMap<String, u64>,
    /// Items DynamoDB reads returned (Query, Scan, GetItem, BatchGetItem).
    pub dynamodb_items: u64,
    /// Read units those reads would consume (see the module documentation).
    pub dynamodb_read_units: f64,
    /// Write units the successful writes would consume, at least (see the module documentation).
    pub dynamodb_write_units: f64,
    /// When each CreateFleet call began, in order, with the [`Busy`] clock's times then (since the
    /// clock started: a window's own are less the clock at its start).
    pub create_fleets: Vec<(Instant, Waited)>,
}

impl AwsTally {
    /// What was counted after `before`.
    pub fn since(&self, before: &AwsTally) -> AwsTally {
        let mut calls = self.calls.clone();
        for (k, v) in &before.calls {
            if let Some(n) = calls.get_mut(k) {
                *n -= v;
            }
        }
        calls.retain(|_, n| *n > 0);
        AwsTally {
            calls,
            dynamodb_items: self.dynamodb_items - before.dynamodb_items,
            dynamodb_read_units: self.dynamodb_read_units - before.dynamodb_read_units,
            dynamodb_write_units: self.dynamodb_write_units - before.dynamodb_write_units,
            create_fleets: self.create_fleets[before.create_fleets.len()..].to_vec(),
        }
    }

    /// Calls to one service (`EC2`, `DynamoDB`, `SQS`, …) by operation.
    pub fn service(&self, service: &str) -> BTreeMap<String, u64> {
        let prefix = format!("{service}.");
        self.calls.iter().filter_map(|(k, v)| Some((k.strip_prefix(&prefix)?.to_string(), *v))).collect()
    }

    /// Calls to services other than EC2 and DynamoDB, as `Service.Operation`.
    pub fn others(&self) -> BTreeMap<String, u64> {
        self.calls
            .iter()
            .filter(|(k, _)| !k.starts_with("EC2.") && !k.starts_with("DynamoDB."))
            .map(|(k, v)| (k.clone(), *v))
            .collect()
    }
}

/// The interceptor; clones share one tally, and the clock it marks calls in flight on.
#[derive(Debug, Clone)]
pub struct AwsCounter {
    tally: Arc<Mutex<AwsTally>>,
    busy: Busy,
}

/// Whether a read was strongly consistent, noted before serialization (the input is gone after).
#[derive(Debug, Clone)]
struct Consistent(bool);

impl Storable for Consistent {
    type Storer = StoreReplace<Self>;
}

/// The write units a write would consume if it succeeds, noted before serialization.
#[derive(Debug, Clone)]
struct Writes(u64);

impl Storable for Writes {
    type Storer = StoreReplace<Self>;
}

impl AwsCounter {
    /// A counter marking its calls on `busy`.
    pub fn new(busy: Busy) -> AwsCounter {
        AwsCounter { tally: Arc::default(), busy }
    }

    pub fn tally(&self) -> AwsTally {
        self.tally.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Every client of `clients` again, as configured, with this counter on it.
    pub fn instrument(&self, clients: &Clients) -> Clients {
        Clients {
            sdk: clients.sdk.clone(),
            ec2: aws_sdk_ec2::Client::from_conf(clients.ec2.config().to_builder().interceptor(self.clone()).build()),
            ssm: aws_sdk_ssm::Client::from_conf(clients.ssm.config().to_builder().interceptor(self.clone()).build()),
            pricing: aws_sdk_pricing::Client::from_conf(
                clients.pricing.config().to_builder().interceptor(self.clone()).build(),
            ),
            dynamodb: aws_sdk_dynamodb::Client::from_conf(
                clients.dynamodb.config().to_builder().interceptor(self.clone()).build(),
            ),
            sqs: aws_sdk_sqs::Client::from_conf(clients.sqs.config().to_builder().interceptor(self.clone()).build()),
            eks: aws_sdk_eks::Client::from_conf(clients.eks.config().to_builder().interceptor(self.clone()).build()),
            iam: aws_sdk_iam::Client::from_conf(clients.iam.config().to_builder().interceptor(self.clone()).build()),
        }
    }
}

impl Intercept for AwsCounter {
    fn name(&self) -> &'static str {
        "ScaleRigAwsCounter"
    }

    fn read_before_execution(
        &self,
        context: &BeforeSerializationInterceptorContextRef<'_>,
        cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        if context.input().downcast_ref::<CreateFleetInput>().is_some() {
            let now = Instant::now();
            let waited = self.busy.at(now);
            self.tally.lock().unwrap_or_else(|e| e.into_inner()).create_fleets.push((now, waited));
        }
        // Ended in read_after_execution, which runs for a call refused here too.
        self.busy.started(Source::Aws);
        // By the input's type: the operation's metadata is not in the bag yet at this hook.
        let input = context.input();
        let consistent = if let Some(i) = input.downcast_ref::<QueryInput>() {
            i.consistent_read
        } else if let Some(i) = input.downcast_ref::<ScanInput>() {
            i.consistent_read
        } else if let Some(i) = input.downcast_ref::<GetItemInput>() {
            i.consistent_read
        } else if let Some(i) = input.downcast_ref::<BatchGetItemInput>() {
            i.request_items.as_ref().map(|tables| tables.values().any(|k| k.consistent_read == Some(true)))
        } else if input.downcast_ref::<DescribeSpotPriceHistoryInput>().is_some() {
            return Err("moto's spot prices are placeholders: the functions use the embedded ones".into());
        } else {
            None
        };
        let writes = if let Some(put) = input.downcast_ref::<PutItemInput>() {
            put.item.as_ref().map_or(0, write_units)
        } else if input.downcast_ref::<UpdateItemInput>().is_some() || input.downcast_ref::<DeleteItemInput>().is_some()
        {
            1
        } else {
            0
        };
        cfg.interceptor_state().store_put(Consistent(consistent.unwrap_or(false)));
        cfg.interceptor_state().store_put(Writes(writes));
        Ok(())
    }

    fn read_after_execution(
        &self,
        context: &FinalizerInterceptorContextRef<'_>,
        _: &RuntimeComponents,
        cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        self.busy.ended(Source::Aws);
        let Some(metadata) = cfg.load::<Metadata>() else { return Ok(()) };
        let key = format!("{}.{}", metadata.service(), metadata.name());
        let factor = if cfg.load::<Consistent>().is_some_and(|c| c.0) { 1.0 } else { 0.5 };
        let succeeded = matches!(context.output_or_error(), Some(Ok(_)));
        let written = if succeeded { cfg.load::<Writes>().map_or(0, |w| w.0) } else { 0 };
        let read = match context.output_or_error() {
            Some(Ok(output)) => {
                if let Some(o) = output.downcast_ref::<QueryOutput>() {
                    Some(page(o.scanned_count, o.items()))
                } else if let Some(o) = output.downcast_ref::<ScanOutput>() {
                    Some(page(o.scanned_count, o.items()))
                } else if let Some(o) = output.downcast_ref::<GetItemOutput>() {
                    let size = o.item().map_or(0, item_size);
                    Some((u64::from(o.item().is_some()), units(size).max(1)))
                } else {
                    output.downcast_ref::<BatchGetItemOutput>().map(|o| {
                        let items: Vec<&HashMap<String, AttributeValue>> =
                            o.responses().into_iter().flat_map(|r| r.values()).flatten().collect();
                        (items.len() as u64, items.iter().map(|i| units(item_size(i)).max(1)).sum())
                    })
                }
            }
            _ => None,
        };
        let mut tally = self.tally.lock().unwrap_or_else(|e| e.into_inner());
        *tally.calls.entry(key).or_default() += 1;
        if let Some((items, units)) = read {
            tally.dynamodb_items += items;
            tally.dynamodb_read_units += units as f64 * factor;
        }
        tally.dynamodb_write_units += written as f64;
        Ok(())
    }
}

/// Items and whole units of one Query or Scan page: at least one unit, even when empty.
fn page(scanned: i32, items: &[HashMap<String, AttributeValue>]) -> (u64, u64) {
    let size: usize = items.iter().map(item_size).sum();
    (u64::try_from(scanned).unwrap_or(0).max(items.len() as u64), units(size).max(1))
}

fn units(bytes: usize) -> u64 {
    bytes.div_ceil(READ_UNIT) as u64
}

/// Write units of putting `item`: its size rounded up to 1 KB, for the table and each index it is in.
fn write_units(item: &HashMap<String, AttributeValue>) -> u64 {
    let per_copy = item_size(item).div_ceil(WRITE_UNIT).max(1) as u64;
    let indexes = INDEX_KEYS.iter().filter(|k| item.contains_key(**k)).count() as u64;
    per_copy * (1 + indexes)
}

/// An item's size as DynamoDB counts it: attribute names plus values.
pub fn item_size(item: &HashMap<String, AttributeValue>) -> usize {
    item.iter().map(|(name, value)| name.len() + value_size(value)).sum()
}

fn value_size(value: &AttributeValue) -> usize {
    // Numbers: about one byte per two significant digits, plus one.
    let number = |n: &String| n.len().div_ceil(2) + 1;
    match value {
        AttributeValue::S(s) => s.len(),
        AttributeValue::N(n) => number(n),
        AttributeValue::B(b) => b.as_ref().len(),
        AttributeValue::Bool(_) | AttributeValue::Null(_) => 1,
        AttributeValue::Ss(v) => v.iter().map(String::len).sum(),
        AttributeValue::Ns(v) => v.iter().map(number).sum(),
        AttributeValue::Bs(v) => v.iter().map(|b| b.as_ref().len()).sum(),
        AttributeValue::L(v) => 3 + v.iter().map(|e| 1 + value_size(e)).sum::<usize>(),
        AttributeValue::M(m) => 3 + m.iter().map(|(k, e)| k.len() + 1 + value_size(e)).sum::<usize>(),
        _ => 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn item_sizes_and_units_follow_dynamodbs_rules() {
        let item = HashMap::from([
            ("pk".to_string(), AttributeValue::S("CLUSTER#c".into())),
            ("version".to_string(), AttributeValue::N("12".into())),
            ("claim".to_string(), AttributeValue::S("x".repeat(5000))),
        ]);
        // 2 + 9, 7 + 2, 5 + 5000.
        assert_eq!(item_size(&item), 5025);
        assert_eq!(units(item_size(&item)), 2);
        assert_eq!(page(0, &[]), (0, 1), "an empty page still costs a unit");
        assert_eq!(page(2, &[item.clone(), item.clone()]), (2, 3));
        // 5 KB, in the table only; then in two indexes too.
        assert_eq!(write_units(&item), 5);
        let mut indexed = item;
        indexed.insert("live".into(), AttributeValue::S("c".into()));
        indexed.insert("changed".into(), AttributeValue::N("1".into()));
        assert_eq!(write_units(&indexed), 15);
    }

    #[test]
    fn a_window_is_the_difference_of_two_tallies() {
        let mut before = AwsTally::default();
        before.calls.insert("EC2.DescribeInstances".into(), 2);
        before.dynamodb_items = 10;
        let mut after = before.clone();
        *after.calls.get_mut("EC2.DescribeInstances").unwrap() += 1;
        after.calls.insert("EC2.CreateFleet".into(), 1);
        after.dynamodb_items = 15;
        let window = after.since(&before);
        assert_eq!(window.service("EC2"), BTreeMap::from([("CreateFleet".into(), 1), ("DescribeInstances".into(), 1)]));
        assert_eq!(window.dynamodb_items, 5);
    }
}
