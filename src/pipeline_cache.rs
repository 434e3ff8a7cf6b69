//! Compiled kernels, kept once per device.
//!
//! A compute pipeline is keyed by its SPIR-V words, entry point,
//! specialization constants and descriptor strategy. Creating the same
//! kernel twice returns the same pipeline, and every pipeline is created
//! through one `VkPipelineCache`. Pipelines live until the device is dropped,
//! so a recorded batch never needs to keep one alive itself; their handles
//! here hold no reference to the device (no cycle).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use ash::vk;

use crate::reflect::Reflection;
use crate::stats::{Counter, Counters};

/// What identifies a pipeline.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct KernelKey {
    pub words: Vec<u32>,
    pub entry: String,
    pub spec: Vec<(u32, Vec<u8>)>,
    pub push_descriptors: bool,
}

/// A compute pipeline and everything needed to record a dispatch of it.
#[derive(Debug)]
pub(crate) struct KernelCore {
    /// Name used in errors and debug labels.
    pub label: String,
    /// What reflection found.
    pub reflection: Reflection,
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
    pub pipeline: vk::Pipeline,
    /// Update template over a packed array of `VkDescriptorBufferInfo`.
    pub template: vk::DescriptorUpdateTemplate,
}

impl KernelCore {
    /// Destroys the Vulkan objects.
    ///
    /// # Safety
    /// No pending submission may use the pipeline.
    pub(crate) unsafe fn destroy(&self, device: &ash::Device, counters: &Counters) {
        // SAFETY: guaranteed by the caller.
        unsafe {
            device.destroy_pipeline(self.pipeline, None);
            device.destroy_descriptor_update_template(self.template, None);
            device.destroy_pipeline_layout(self.pipeline_layout, None);
            device.destroy_descriptor_set_layout(self.set_layout, None);
        }
        counters.add(Counter::Pipelines, -1);
    }
}

/// The per-device kernel cache.
pub(crate) struct KernelCache {
    map: Mutex<HashMap<KernelKey, Arc<KernelCore>>>,
    /// The one `VkPipelineCache` every pipeline is created through.
    pub vk_cache: vk::PipelineCache,
}

impl KernelCache {
    pub(crate) fn new(vk_cache: vk::PipelineCache) -> Self {
        KernelCache {
            map: Mutex::new(HashMap::new()),
            vk_cache,
        }
    }

    /// The cached kernel for `key`.
    pub(crate) fn get(&self, key: &KernelKey) -> Option<Arc<KernelCore>> {
        self.map
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(key)
            .cloned()
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
        (arc, None)
    }

    /// Number of cached pipelines.
    pub(crate) fn len(&self) -> usize {
        self.map.lock().unwrap_or_else(|p| p.into_inner()).len()
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
