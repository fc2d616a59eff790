//! Counts DescribeInstances calls and the instances each returned: an SDK interceptor on the EC2
//! client the adapter is built with, so the tests assert what an invocation asked EC2 for (counts,
//! never times).

use std::sync::{Arc, Mutex};

use aws_sdk_ec2::config::interceptors::{
    AfterDeserializationInterceptorContextRef, BeforeSerializationInterceptorContextRef,
};
use aws_sdk_ec2::config::{ConfigBag, Intercept, RuntimeComponents};
use aws_sdk_ec2::operation::describe_instances::{DescribeInstancesInput, DescribeInstancesOutput};
use aws_smithy_runtime_api::box_error::BoxError;
use aws_smithy_types::config_bag::{Storable, StoreReplace};
use dovetail_aws::Clients;

use super::World;

/// What a DescribeInstances call asked for, told by its filters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Every instance of the cluster (the sweeper's reconciliation).
    All,
    /// By the `instance-id` filter (a per-event read).
    ById,
    /// By the `dovetail.dev/nodeclaim` tag (a per-event read, claims without a recorded launch).
    ByClaim,
    /// A launch's own look-up of its claim's live instance (`find_launched`: tag and state).
    Launched,
}

/// One DescribeInstances call (one page).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Call {
    pub kind: Kind,
    pub returned: usize,
}

/// The interceptor, and the calls it saw.
#[derive(Debug, Clone, Default)]
pub struct Describes(Arc<Mutex<Vec<Call>>>);

/// The kind of the call in flight, from its input to its output.
#[derive(Debug, Clone)]
struct InFlight(Kind);

impl Storable for InFlight {
    type Storer = StoreReplace<Self>;
}

impl Describes {
    /// `world`'s clients, the EC2 one counted.
    pub fn clients(&self, world: &World) -> Clients {
        let mut clients = world.clients.clone();
        clients.ec2 = aws_sdk_ec2::Client::from_conf(
            aws_sdk_ec2::config::Builder::from(&world.sdk).interceptor(self.clone()).build(),
        );
        clients
    }

    /// The calls seen since the last `take`.
    pub fn take(&self) -> Vec<Call> {
        std::mem::take(&mut *self.0.lock().unwrap())
    }
}

/// Calls of `kind`, and the instances they returned.
pub fn tally(calls: &[Call], kind: Kind) -> (usize, usize) {
    let of: Vec<&Call> = calls.iter().filter(|c| c.kind == kind).collect();
    (of.len(), of.iter().map(|c| c.returned).sum())
}

impl Intercept for Describes {
    fn name(&self) -> &'static str {
        "Describes"
    }

    fn read_before_execution(
        &self,
        context: &BeforeSerializationInterceptorContextRef<'_>,
        cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        let Some(input) = context.input().downcast_ref::<DescribeInstancesInput>() else { return Ok(()) };
        let names: Vec<&str> = input.filters().iter().filter_map(|f| f.name()).collect();
        let kind = if names.contains(&"instance-id") {
            Kind::ById
        } else if names.contains(&"instance-state-name") {
            Kind::Launched
        } else if names.contains(&"tag:dovetail.dev/nodeclaim") {
            Kind::ByClaim
        } else {
            Kind::All
        };
        cfg.interceptor_state().store_put(InFlight(kind));
        Ok(())
    }

    fn read_after_deserialization(
        &self,
        context: &AfterDeserializationInterceptorContextRef<'_>,
        _: &RuntimeComponents,
        cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        let Some(InFlight(kind)) = cfg.load::<InFlight>().cloned() else { return Ok(()) };
        let returned: usize = match context.output_or_error() {
            Ok(output) => output
                .downcast_ref::<DescribeInstancesOutput>()
                .map_or(0, |o| o.reservations().iter().map(|r| r.instances().len()).sum()),
            Err(_) => 0,
        };
        self.0.lock().unwrap().push(Call { kind, returned });
        Ok(())
    }
}
