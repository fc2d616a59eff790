//! Paginated lists: big clusters come back in pages (`limit` + `continue`) so neither the API
//! server nor the function holds one huge response.

use std::fmt::Debug;

use kube::api::{Api, ListParams};
use serde::de::DeserializeOwned;
use tracing::debug;

/// Objects per page: client-go's pager default. A page of 500 pods is ~2–5 MB of JSON.
pub const PAGE_SIZE: u32 = 500;

/// Every object `api` lists with `params`, page by page. A continue token that expired mid-way
/// (410 Gone: the list took longer than etcd's compaction window) restarts the list once from the
/// first page; a second expiry is returned as the error.
pub(crate) async fn list_all<K>(api: &Api<K>, params: &ListParams, page_size: u32) -> Result<Vec<K>, kube::Error>
where
    K: Clone + DeserializeOwned + Debug,
{
    let mut restarted = false;
    'list: loop {
        let mut out = Vec::new();
        let mut token: Option<String> = None;
        loop {
            let mut p = params.clone().limit(page_size);
            p.continue_token = token.take();
            let page = match api.list(&p).await {
                Ok(page) => page,
                Err(e) if crate::error::status_code(&e) == Some(410) && !restarted => {
                    debug!(error = %e, "continue token expired; listing again from the start");
                    restarted = true;
                    continue 'list;
                }
                Err(e) => return Err(e),
            };
            out.extend(page.items);
            match page.metadata.continue_.filter(|c| !c.is_empty()) {
                Some(next) => token = Some(next),
                None => return Ok(out),
            }
        }
    }
}
