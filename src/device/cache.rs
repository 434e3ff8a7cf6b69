//! The device's on-disk cache, as users see it: where it is, writing the
//! pipeline cache now, and what it did ([`crate::pipeline_cache`] keeps the
//! pipelines and the cache file itself).

use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;

use super::Device;
use crate::disk_cache::CacheStats;
use crate::error::{Error, Result};

impl Device {
    /// The on-disk cache directory in use (`None`: the cache is off). See
    /// [`DeviceOptions::cache_dir`](crate::DeviceOptions::cache_dir).
    pub fn cache_dir(&self) -> Option<&Path> {
        self.inner.kernels.dir.as_deref()
    }

    /// Writes the pipeline cache to disk now (it is also written when the
    /// device is dropped, if new pipelines were created). Returns the file
    /// written, or `None` when the cache is off. The write is atomic: other
    /// processes see the old file or the new one.
    pub fn save_pipeline_cache(&self) -> Result<Option<PathBuf>> {
        self.inner.sticky.check()?;
        self.inner
            .kernels
            .save(&self.inner.raw, true)
            .map_err(|e| Error::CacheIo {
                path: self
                    .inner
                    .kernels
                    .file_path()
                    .map(Path::to_path_buf)
                    .unwrap_or_default(),
                detail: e.to_string(),
            })
    }

    /// What the on-disk cache did for this device so far.
    pub fn cache_stats(&self) -> CacheStats {
        let k = &self.inner.kernels;
        let c = &k.disk_counters;
        let get = |a: &std::sync::atomic::AtomicU64| a.load(Ordering::Relaxed);
        CacheStats {
            dir: k.dir.clone(),
            pipeline_bytes_loaded: k.loaded_bytes,
            pipeline_file_ignored: k.ignored.clone(),
            pipeline_saves: get(&c.pipeline_saves),
            spirv_hits: get(&c.spirv_hits),
            spirv_misses: get(&c.spirv_misses),
            spirv_rejected: get(&c.spirv_rejected),
        }
    }
}
