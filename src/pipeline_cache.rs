//! Compiled kernels, kept once per device, and the pipeline cache on disk.
//!
//! A compute pipeline is keyed by its SPIR-V words, entry point,
//! specialization constants and descriptor strategy. Creating the same
//! kernel twice returns the same pipeline, and every pipeline is created
//! through one `VkPipelineCache`. Pipelines live until the device is dropped,
//! so a recorded batch never needs to keep one alive itself; their handles
//! here hold no reference to the device (no cycle).
//!
//! With a cache directory, the `VkPipelineCache` starts from the file
//! [`crate::disk_cache`] names for this adapter and driver (ignored unless
//! whole and matching), and is written back, atomically, when the device is
//! dropped after creating new pipelines or when
//! [`Device::save_pipeline_cache`](crate::Device::save_pipeline_cache) is
//! called. If another process (or device) rewrote the file meanwhile, its
//! pipelines are merged in first, so concurrent writers do not drop each
//! other's work.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use ash::vk;

use crate::disk_cache::{self, CacheCounters, PipelineKey};
use crate::error::{Error, Result, Sticky};
use crate::reflect::Reflection;
use crate::stats::{Counter, Counters};

/// What identifies a pipeline.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct KernelKey {
    pub words: Vec<u32>,
    pub entry: String,
    pub spec: Vec<(u32, Vec<u8>)>,
    pub push_descriptors: bool,
    /// Built with [`crate::KernelBuilder::raw_elements`]: element types unchecked.
    pub raw_elements: bool,
}

/// A compute pipeline and everything needed to record a dispatch of it.
#[derive(Debug)]
pub(crate) struct KernelCore {
    /// Name used in errors and debug labels.
    pub label: String,
    /// What reflection found.
    pub reflection: Reflection,
    /// The element each binding declares, where the element-type rule
    /// applies ([`crate::element`]); empty for a raw kernel.
    pub elements: Vec<Option<crate::element::ElementType>>,
    /// Workgroup size after specialization.
    pub workgroup_size: [u32; 3],
    /// Push-constant bytes the kernel declares.
    pub push_constant_size: u32,
    /// Whether any binding is writable.
    pub writes: bool,
    /// Descriptors are pushed (VK_KHR_push_descriptor) rather than pooled.
    pub push_descriptors: bool,
    pub set_layout: vk::DescriptorSetLayout,
    pub pipeline_layout: vk::PipelineLayout,
    /// The pipeline layout's class ([`crate::layout_class`]): kernels of
    /// one class keep each other's bound descriptors.
    pub layout_class: u32,
    pub pipeline: vk::Pipeline,
    /// Update template over a packed array of `VkDescriptorBufferInfo`.
    pub template: vk::DescriptorUpdateTemplate,
    /// The variants a launch split along x runs ([`crate::x_split`]).
    pub x_split: crate::x_split::XSplit,
}

impl KernelCore {
    /// Destroys the Vulkan objects.
    ///
    /// # Safety
    /// No pending submission may use the pipeline.
    pub(crate) unsafe fn destroy(&self, device: &ash::Device, counters: &Counters) {
        // SAFETY: guaranteed by the caller.
        unsafe {
            self.x_split.destroy(device, counters);
            device.destroy_pipeline(self.pipeline, None);
            device.destroy_descriptor_update_template(self.template, None);
            device.destroy_pipeline_layout(self.pipeline_layout, None);
            device.destroy_descriptor_set_layout(self.set_layout, None);
        }
        counters.add(Counter::Pipelines, -1);
    }
}

/// What identifies a built-in pipeline: its name and its `uint`
/// specialization constants (id, value), sorted by id.
type BuiltinKey = (&'static str, Vec<(u32, u32)>);

/// A built-in's pipeline and the label its kernels carry.
type BuiltinEntry = (Arc<KernelCore>, Arc<str>);

/// The device's built-in pipelines (`crate::builtins` builds them on first
/// use and keeps them here), with how often they were built and reused.
#[derive(Default)]
pub(crate) struct BuiltinStore {
    map: Mutex<HashMap<BuiltinKey, BuiltinEntry>>,
    /// Pipelines built (requests that missed).
    built: AtomicU64,
    /// Requests served from the store.
    hits: AtomicU64,
}

impl BuiltinStore {
    /// The pipeline and label of `name` with sorted `spec`, counted as a
    /// hit.
    pub(crate) fn get(&self, name: &'static str, spec: &[(u32, u32)]) -> Option<BuiltinEntry> {
        let entry = self.lock().get(&(name, spec.to_vec())).cloned()?;
        self.hits.fetch_add(1, Ordering::Relaxed);
        Some(entry)
    }

    /// Keeps `core` and its `label` for `name` with sorted `spec`. Another thread may have
    /// built it meanwhile: both got the same pipeline from the kernel cache,
    /// and the build is counted once.
    pub(crate) fn insert(
        &self,
        name: &'static str,
        spec: Vec<(u32, u32)>,
        core: Arc<KernelCore>,
        label: Arc<str>,
    ) {
        if self.lock().insert((name, spec), (core, label)).is_none() {
            self.built.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Every pipeline held of built-in `name`, with its sorted
    /// specialization, in specialization order (not counted as hits).
    pub(crate) fn held(&self, name: &str) -> Vec<(Vec<(u32, u32)>, BuiltinEntry)> {
        let mut held: Vec<_> = self
            .lock()
            .iter()
            .filter(|((n, _), _)| *n == name)
            .map(|((_, spec), entry)| (spec.clone(), entry.clone()))
            .collect();
        held.sort_by(|a, b| a.0.cmp(&b.0));
        held
    }

    /// Pipelines held, builds, hits.
    pub(crate) fn stats(&self) -> (usize, u64, u64) {
        (
            self.lock().len(),
            self.built.load(Ordering::Relaxed),
            self.hits.load(Ordering::Relaxed),
        )
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<BuiltinKey, BuiltinEntry>> {
        self.map.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// The pipeline-cache file of one device.
struct PipelineFile {
    key: PipelineKey,
    path: PathBuf,
    /// Checksum field of the file as last loaded or written by us: a file
    /// on disk with another one was rewritten by someone else.
    last_sum: Mutex<Option<u64>>,
}

/// A kernel as the builder was asked for it, before reflection: lets a
/// repeated build skip reflection and SPIR-V validation altogether.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct RequestKey {
    pub words: Vec<u32>,
    pub entry: Option<String>,
    pub spec: Vec<(u32, Vec<u8>)>,
    pub local_size: [Option<u32>; 3],
    pub raw_elements: bool,
}

/// The per-device kernel cache.
pub(crate) struct KernelCache {
    map: Mutex<HashMap<KernelKey, Arc<KernelCore>>>,
    /// Builder requests already served, to the pipeline they got.
    requests: Mutex<HashMap<RequestKey, Arc<KernelCore>>>,
    /// The one `VkPipelineCache` every pipeline is created through.
    pub vk_cache: vk::PipelineCache,
    /// The cache directory (`None`: off).
    pub dir: Option<PathBuf>,
    file: Option<PipelineFile>,
    /// Pipelines were created since the last load or save.
    dirty: AtomicBool,
    /// One save at a time.
    save_lock: Mutex<()>,
    /// Bytes of pipeline data the cache started from.
    pub loaded_bytes: u64,
    /// Why the file on disk was not used, when it was not.
    pub ignored: Option<String>,
    /// What the SPIR-V cache did.
    pub disk_counters: CacheCounters,
}

impl KernelCache {
    /// Creates the `VkPipelineCache`, seeded from `dir`'s file for `key`
    /// when one is there and valid.
    ///
    /// # Safety
    /// `device` must be a live device.
    pub(crate) unsafe fn create(
        device: &ash::Device,
        dir: Option<PathBuf>,
        key: PipelineKey,
    ) -> Result<Self, vk::Result> {
        let file = dir.as_ref().map(|d| PipelineFile {
            key,
            path: d.join(key.file_name()),
            last_sum: Mutex::new(None),
        });
        let mut ignored = None;
        let mut initial: Option<(Vec<u8>, u64)> = None;
        if let Some(f) = &file {
            if let Some(bytes) = disk_cache::read_file(&f.path, disk_cache::MAX_PIPELINE_FILE) {
                match disk_cache::decode_pipelines(&key, &bytes) {
                    Ok(data) => {
                        initial = Some((data.to_vec(), disk_cache::stored_checksum(&bytes)));
                    }
                    Err(why) => {
                        log::info!("vkcompute: ignoring {}: {why}", f.path.display());
                        ignored = Some(why.to_string());
                    }
                }
            }
        }
        let mut loaded_bytes = 0;
        let vk_cache = match &initial {
            Some((data, sum)) => {
                let info = vk::PipelineCacheCreateInfo::default().initial_data(data);
                // SAFETY: `device` is live (caller); `data` outlives the call.
                match unsafe { device.create_pipeline_cache(&info, None) } {
                    Ok(c) => {
                        loaded_bytes = data.len() as u64;
                        if let Some(f) = &file {
                            *f.last_sum.lock().unwrap_or_else(|p| p.into_inner()) = Some(*sum);
                        }
                        Some(c)
                    }
                    Err(r) => {
                        ignored = Some(format!("the driver refused the data ({r})"));
                        None
                    }
                }
            }
            None => None,
        };
        let vk_cache = match vk_cache {
            Some(c) => c,
            // SAFETY: as above; no initial data.
            None => unsafe {
                device.create_pipeline_cache(&vk::PipelineCacheCreateInfo::default(), None)?
            },
        };
        Ok(KernelCache {
            map: Mutex::new(HashMap::new()),
            requests: Mutex::new(HashMap::new()),
            vk_cache,
            dir,
            file,
            dirty: AtomicBool::new(false),
            save_lock: Mutex::new(()),
            loaded_bytes,
            ignored,
            disk_counters: CacheCounters::default(),
        })
    }

    /// The pipeline-cache file's path (`None` when the cache is off).
    pub(crate) fn file_path(&self) -> Option<&Path> {
        self.file.as_ref().map(|f| f.path.as_path())
    }

    /// Writes the pipeline cache to disk: always when `force`, else only
    /// when pipelines were created since the last load or save. Returns the
    /// file written, `None` when nothing was (cache off, nothing new).
    pub(crate) fn save(
        &self,
        device: &ash::Device,
        force: bool,
    ) -> std::io::Result<Option<PathBuf>> {
        let Some(f) = &self.file else {
            return Ok(None);
        };
        let _one = self.save_lock.lock().unwrap_or_else(|p| p.into_inner());
        if !self.dirty.swap(false, Ordering::AcqRel) && !force {
            return Ok(None);
        }
        let result = self.write_file(device, f);
        if result.is_err() {
            self.dirty.store(true, Ordering::Release);
        }
        result.map(|()| Some(f.path.clone()))
    }

    fn write_file(&self, device: &ash::Device, f: &PipelineFile) -> std::io::Result<()> {
        let invalid = |what: String| std::io::Error::new(std::io::ErrorKind::InvalidData, what);
        // SAFETY: the cache is live; vkGetPipelineCacheData needs no
        // external synchronization.
        let ours = unsafe { device.get_pipeline_cache_data(self.vk_cache) }
            .map_err(|r| invalid(format!("vkGetPipelineCacheData failed: {r}")))?;
        disk_cache::check_vk_header(&f.key, &ours).map_err(|why| {
            invalid(format!(
                "the driver's pipeline-cache data is not usable: {why}"
            ))
        })?;
        let on_disk = disk_cache::read_file(&f.path, disk_cache::MAX_PIPELINE_FILE);
        let disk_sum = on_disk.as_deref().map(disk_cache::stored_checksum);
        let last_sum = *f.last_sum.lock().unwrap_or_else(|p| p.into_inner());
        // Someone else wrote the file since we last read or wrote it: keep
        // their pipelines too.
        let merged = match &on_disk {
            Some(bytes) if disk_sum != last_sum => self.merge(device, f, bytes, &ours),
            _ => None,
        };
        let bytes = disk_cache::encode_pipelines(&f.key, merged.as_deref().unwrap_or(&ours));
        let sum = disk_cache::stored_checksum(&bytes);
        if on_disk.as_deref() != Some(bytes.as_slice()) {
            disk_cache::write_atomic(&f.path, &bytes)?;
            self.disk_counters
                .pipeline_saves
                .fetch_add(1, Ordering::Relaxed);
        }
        *f.last_sum.lock().unwrap_or_else(|p| p.into_inner()) = Some(sum);
        Ok(())
    }

    /// The data of the pipeline-cache file `bytes` (when valid) merged
    /// with `ours`.
    fn merge(
        &self,
        device: &ash::Device,
        f: &PipelineFile,
        bytes: &[u8],
        ours: &[u8],
    ) -> Option<Vec<u8>> {
        let theirs = disk_cache::decode_pipelines(&f.key, bytes).ok()?;
        if theirs == ours {
            return None;
        }
        let info = vk::PipelineCacheCreateInfo::default().initial_data(theirs);
        // SAFETY: a live device; `theirs` passed our checks and outlives the call.
        let tmp = unsafe { device.create_pipeline_cache(&info, None) }.ok()?;
        // SAFETY: `tmp` is the destination and only this thread uses it;
        // our cache is a source, which needs no external synchronization.
        let merged = unsafe {
            device
                .merge_pipeline_caches(tmp, &[self.vk_cache])
                .and_then(|()| device.get_pipeline_cache_data(tmp))
        };
        // SAFETY: `tmp` is unused by anything else.
        unsafe { device.destroy_pipeline_cache(tmp, None) };
        merged
            .ok()
            .filter(|m| disk_cache::check_vk_header(&f.key, m).is_ok())
    }

    /// The cached kernel for `key`.
    pub(crate) fn get(&self, key: &KernelKey) -> Option<Arc<KernelCore>> {
        self.map
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(key)
            .cloned()
    }

    /// The kernel an identical builder request got before.
    pub(crate) fn get_request(&self, key: &RequestKey) -> Option<Arc<KernelCore>> {
        self.requests
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(key)
            .cloned()
    }

    /// Remembers which kernel a builder request got.
    pub(crate) fn put_request(&self, key: RequestKey, core: Arc<KernelCore>) {
        self.requests
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(key, core);
    }

    /// Inserts `core` unless another thread won the race; returns the entry
    /// to use and, if this one lost, the one to destroy.
    pub(crate) fn insert(
        &self,
        key: KernelKey,
        core: KernelCore,
    ) -> (Arc<KernelCore>, Option<KernelCore>) {
        let mut map = self.map.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(existing) = map.get(&key) {
            return (existing.clone(), Some(core));
        }
        let arc = Arc::new(core);
        map.insert(key, arc.clone());
        self.dirty.store(true, Ordering::Release);
        (arc, None)
    }

    /// Number of cached pipelines, with the variants split launches made.
    pub(crate) fn len(&self) -> usize {
        let map = self.map.lock().unwrap_or_else(|p| p.into_inner());
        map.len() + map.values().map(|k| k.x_split.variants()).sum::<usize>()
    }

    /// Destroys every pipeline and the pipeline cache.
    ///
    /// # Safety
    /// The device must be idle.
    pub(crate) unsafe fn destroy_all(&self, device: &ash::Device, counters: &Counters) {
        let map = std::mem::take(&mut *self.map.lock().unwrap_or_else(|p| p.into_inner()));
        for core in map.into_values() {
            // SAFETY: the device is idle (caller's guarantee).
            unsafe { core.destroy(device, counters) };
        }
        // SAFETY: as above.
        unsafe { device.destroy_pipeline_cache(self.vk_cache, None) };
    }
}

/// A compute pipeline of `words` (entry point `entry`, specialization
/// `spec` as (id, bytes)) on `layout`, through `cache`: every pipeline the
/// crate makes, a kernel's own and its split-launch variants, is created
/// here. The shader module lives only for the call.
///
/// With `capture_statistics` (a device with
/// [`DeviceOptions::pipeline_statistics`](crate::DeviceOptions::pipeline_statistics)
/// on, [`crate::pipeline_stats`]) the pipeline is created with its
/// statistics captured and without `cache`: a pipeline the cache holds
/// from a creation without statistics is never handed back in their
/// place, and the cache (and its file on disk) stays what devices without
/// statistics make.
#[allow(clippy::too_many_arguments)]
pub(crate) fn create_pipeline(
    raw: &ash::Device,
    cache: vk::PipelineCache,
    capture_statistics: bool,
    sticky: &Sticky,
    layout: vk::PipelineLayout,
    words: &[u32],
    entry: &str,
    spec: &[(u32, Vec<u8>)],
) -> Result<vk::Pipeline, Error> {
    let mut entries = Vec::with_capacity(spec.len());
    let mut data = Vec::new();
    for (id, bytes) in spec {
        entries.push(vk::SpecializationMapEntry {
            constant_id: *id,
            offset: data.len() as u32,
            size: bytes.len(),
        });
        data.extend_from_slice(bytes);
    }
    let entry = std::ffi::CString::new(entry).map_err(|_| Error::InvalidSpirv {
        reason: "entry point name contains a NUL byte".into(),
    })?;
    let module_info = vk::ShaderModuleCreateInfo::default().code(words);
    // SAFETY: the create-info points at `words`, alive across the call.
    let module = unsafe { raw.create_shader_module(&module_info, None) }
        .map_err(|r| sticky.fail("vkCreateShaderModule", r))?;
    let spec_info = vk::SpecializationInfo::default()
        .map_entries(&entries)
        .data(&data);
    let stage = vk::PipelineShaderStageCreateInfo::default()
        .stage(vk::ShaderStageFlags::COMPUTE)
        .module(module)
        .name(&entry)
        .specialization_info(&spec_info);
    let (flags, cache) = if capture_statistics {
        let capture = vk::PipelineCreateFlags::CAPTURE_STATISTICS_KHR;
        (capture, vk::PipelineCache::null())
    } else {
        (vk::PipelineCreateFlags::empty(), cache)
    };
    let info = vk::ComputePipelineCreateInfo::default()
        .flags(flags)
        .stage(stage)
        .layout(layout);
    // SAFETY: every create-info points at locals alive across the call; the
    // layout and cache are the caller's, alive across the call.
    let result = unsafe { raw.create_compute_pipelines(cache, &[info], None) };
    // SAFETY: a shader module may be destroyed once the pipeline exists (or
    // its creation failed).
    unsafe { raw.destroy_shader_module(module, None) };
    let pipelines = result.map_err(|(_, r)| sticky.fail("vkCreateComputePipelines", r))?;
    Ok(pipelines[0])
}
