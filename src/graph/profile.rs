//! GPU timings of a profiled graph's latest launch.

use ash::vk;

use super::Graph;
use crate::error::{Error, Result};
use crate::profile::Profile;

impl Graph {
    /// GPU timings of the latest launch of a graph recorded with
    /// [`Device::graph_recorder_with`](crate::Device::graph_recorder_with);
    /// waits for that launch first. Every launch rewrites the same
    /// timestamps, so call it with no later launch submitted (one in flight
    /// makes the read fail). [`Error::Unsupported`] when the graph was not
    /// profiled or never launched.
    pub fn last_profile(&self) -> Result<Profile> {
        let d = &*self.dev;
        let unsupported = |what| Error::Unsupported {
            what,
            adapter: d.info.name.clone(),
        };
        let Some(q) = &self.queries else {
            return Err(unsupported(
                "a profile of a graph recorded without profiling (Device::graph_recorder_with)",
            ));
        };
        let last = self.last_launch();
        if last.is_empty() {
            return Err(unsupported("a profile of a graph never launched"));
        }
        d.wait_mark(last, None)?;
        let per_pool = crate::profile::QUERIES_PER_POOL as usize;
        let mut ticks = vec![0u64; q.count as usize];
        for (i, chunk) in ticks.chunks_mut(per_pool).enumerate() {
            // SAFETY: the queries were written by the completed launch; the
            // pool is live (the graph owns it) and `chunk` holds one u64 per
            // query read. Without WAIT, a query a later launch reset reads
            // as not ready (an error), never as stale data.
            unsafe {
                d.raw
                    .get_query_pool_results(q.pools[i], 0, chunk, vk::QueryResultFlags::TYPE_64)
            }
            .map_err(|r| d.sticky.fail("vkGetQueryPoolResults", r))?;
        }
        Ok(Profile::from_ticks(
            &q.labels,
            &ticks,
            d.info.timestamp_period_ns,
            d.timestamp_bits,
        ))
    }
}
