//! EC2 answers moto never gives, for CreateFleet: an SDK interceptor swaps the chosen requests for
//! a harmless one (so moto launches nothing behind the adapter's back) and answers them with a
//! canned response, as EC2 does when it refuses a fleet (HTTP 200, no instance, an `errorSet`).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use aws_sdk_ec2::config::interceptors::{
    BeforeDeserializationInterceptorContextMut, BeforeTransmitInterceptorContextMut,
};
use aws_sdk_ec2::config::{ConfigBag, Intercept, RuntimeComponents};
use aws_smithy_runtime_api::box_error::BoxError;
use aws_smithy_types::body::SdkBody;
use aws_smithy_types::config_bag::{Storable, StoreReplace};

/// Which CreateFleet calls to refuse: given the request body and how many were refused so far.
type Refuse = dyn Fn(&str, usize) -> bool + Send + Sync;

/// Marks a call whose answer is replaced.
#[derive(Debug, Clone)]
struct Refused;

impl Storable for Refused {
    type Storer = StoreReplace<Self>;
}

/// Answers the CreateFleet calls `refuse` picks with `answer`; records every CreateFleet's client
/// token and counts the refusals.
#[derive(Clone)]
pub struct CannedFleet {
    answer: String,
    refuse: Arc<Refuse>,
    pub refused: Arc<AtomicUsize>,
    pub tokens: Arc<Mutex<Vec<String>>>,
}

impl std::fmt::Debug for CannedFleet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CannedFleet").field("refused", &self.refused).finish_non_exhaustive()
    }
}

/// EC2's error for a fleet it refused: its code, message, and the capacity type it was for.
#[derive(Debug, Clone, Copy)]
pub struct FleetError {
    pub code: &'static str,
    pub message: &'static str,
    pub lifecycle: &'static str,
}

impl FleetError {
    /// The CreateFleet response EC2 gives for an instant fleet it could not launch: HTTP 200, no
    /// instance, the error in `errorSet`.
    fn response(&self) -> String {
        let FleetError { code, message, lifecycle } = self;
        format!(
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n\
             <CreateFleetResponse xmlns=\"http://ec2.amazonaws.com/doc/2016-11-15/\">\n\
             <requestId>5a7e1c2b-0000-4000-8000-000000000001</requestId>\n\
             <fleetId>fleet-0a1b2c3d4e5f60718</fleetId>\n\
             <errorSet><item><errorCode>{code}</errorCode><errorMessage>{message}</errorMessage>\
             <lifecycle>{lifecycle}</lifecycle></item></errorSet>\n\
             <fleetInstanceSet/>\n\
             </CreateFleetResponse>"
        )
    }
}

impl CannedFleet {
    pub fn new(error: FleetError, refuse: impl Fn(&str, usize) -> bool + Send + Sync + 'static) -> CannedFleet {
        CannedFleet {
            answer: error.response(),
            refuse: Arc::new(refuse),
            refused: Arc::default(),
            tokens: Arc::default(),
        }
    }

    /// The calls refused so far.
    pub fn refusals(&self) -> usize {
        self.refused.load(Ordering::SeqCst)
    }

    /// `sdk`'s EC2 client with this interceptor on it.
    pub fn client(&self, sdk: &aws_config::SdkConfig) -> aws_sdk_ec2::Client {
        aws_sdk_ec2::Client::from_conf(aws_sdk_ec2::config::Builder::from(sdk).interceptor(self.clone()).build())
    }
}

impl Intercept for CannedFleet {
    fn name(&self) -> &'static str {
        "CannedFleet"
    }

    fn modify_before_signing(
        &self,
        context: &mut BeforeTransmitInterceptorContextMut<'_>,
        _: &RuntimeComponents,
        cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        let request = context.request_mut();
        let body = request.body().bytes().map(|b| String::from_utf8_lossy(b).into_owned()).unwrap_or_default();
        if !body.contains("Action=CreateFleet") {
            return Ok(());
        }
        let token = body.split('&').find_map(|p| p.strip_prefix("ClientToken=")).unwrap_or_default();
        self.tokens.lock().unwrap().push(token.to_string());
        if (self.refuse)(&body, self.refusals()) {
            let harmless = "Action=DescribeRegions&Version=2016-11-15";
            *request.body_mut() = SdkBody::from(harmless);
            request.headers_mut().insert("Content-Length", harmless.len().to_string());
            cfg.interceptor_state().store_put(Refused);
            self.refused.fetch_add(1, Ordering::SeqCst);
        }
        Ok(())
    }

    fn modify_before_deserialization(
        &self,
        context: &mut BeforeDeserializationInterceptorContextMut<'_>,
        _: &RuntimeComponents,
        cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        if cfg.load::<Refused>().is_some() {
            *context.response_mut().body_mut() = SdkBody::from(self.answer.clone());
        }
        Ok(())
    }
}
