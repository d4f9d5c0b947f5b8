//! The reply cache (`kerf eval --cache`): a [`Layer`] a plan opts into. A cell is measured by an
//! earlier eval's run when that run ended on its own (a reply cut by its budget is never reused)
//! and everything that shaped it is the same: prompt version, input, provider, model (and model
//! file), parameters, repeat index and pass, and the endpoint the provider's name pointed at.

use kerf_store::{CellKey, NewRun, Store};

use super::cells::Layer;
use crate::error::Result;
use crate::runs::Chosen;

/// Earlier evals' replies, reused cell by cell.
pub struct ReplyCache;

impl Layer for ReplyCache {
    fn measured(
        &self,
        store: &Store,
        key: &CellKey,
        run: &NewRun,
        provider: &Chosen,
    ) -> Result<Option<i64>> {
        Ok(store.cached_eval_run(run, (key.repeat, key.pass), &provider.endpoint())?)
    }
}
