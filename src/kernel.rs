//! Kernels: compute pipelines built from SPIR-V, GLSL or WGSL, with reflection.
//!
//! A kernel's bindings, push-constant size and workgroup size come from its
//! SPIR-V ([`crate::reflect`]); every dispatch is checked against them. The
//! builder sets the entry point, specialization constants and the workgroup
//! size (through `local_size_x_id` and friends). The same SPIR-V with the same
//! specialization is compiled once per device ([`crate::pipeline_cache`]).

use std::collections::BTreeMap;
use std::panic::Location;
use std::sync::Arc;

use ash::vk;

use crate::device::{Device, DeviceInner};
use crate::error::{Error, Result};
use crate::pipeline_cache::{create_pipeline, KernelCore, KernelKey, RequestKey};
use crate::reflect::{self, BindingInfo, BindingKind, Reflection};
use crate::stats::Counter;

pub use crate::reflect::MAX_BINDINGS;

/// Something that holds a SPIR-V module: words, or bytes in either byte order.
///
/// Modules from any toolchain load: glslang, shaderc, naga, DXC, Slang,
/// rust-gpu. What some of them write for reflection tools only (DXC's
/// `-fspv-reflect` decorations and their `SPV_GOOGLE_*` extensions, which
/// need device extensions many drivers lack) is dropped, and an `OpSource`
/// language newer than WGSL (Slang's) reads as Unknown, which older
/// validators require; nothing a kernel means changes.
pub trait SpirvInput {
    /// The module's words, checked for length and magic number.
    fn spirv_words(&self) -> Result<Vec<u32>>;
}

impl SpirvInput for [u32] {
    fn spirv_words(&self) -> Result<Vec<u32>> {
        reflect::words_from_bytes(bytemuck::cast_slice(self))
    }
}
impl SpirvInput for [u8] {
    fn spirv_words(&self) -> Result<Vec<u32>> {
        reflect::words_from_bytes(self)
    }
}
impl SpirvInput for Vec<u32> {
    fn spirv_words(&self) -> Result<Vec<u32>> {
        self.as_slice().spirv_words()
    }
}
impl SpirvInput for Vec<u8> {
    fn spirv_words(&self) -> Result<Vec<u32>> {
        self.as_slice().spirv_words()
    }
}
impl<const N: usize> SpirvInput for [u32; N] {
    fn spirv_words(&self) -> Result<Vec<u32>> {
        self.as_slice().spirv_words()
    }
}
impl<const N: usize> SpirvInput for [u8; N] {
    fn spirv_words(&self) -> Result<Vec<u32>> {
        self.as_slice().spirv_words()
    }
}

/// Reflects a SPIR-V module without a device: the compute entry point
/// `entry` (default `main`, or the module's only compute entry point), its
/// bindings, push-constant size and workgroup size. Malformed input is an
/// [`Error::InvalidSpirv`] (or [`Error::EntryPointNotFound`],
/// [`Error::UnsupportedShader`]), never a panic.
pub fn reflect_spirv<S: SpirvInput + ?Sized>(spirv: &S, entry: Option<&str>) -> Result<Reflection> {
    let words = spirv.spirv_words()?;
    reflect::reflect(&words, entry)
}

/// A compute kernel ready to dispatch. Cheap to clone.
///
/// Its label names it in every error, debug name and profile row: the
/// label given to [`KernelBuilder::label`], else the file and line that
/// built it (`src/model.rs:42`, followed by the entry point in
/// parentheses when that is not `main`). Kernels built from the same
/// module share one pipeline but keep their own labels; the pipeline's
/// debug name is the label of the first.
#[derive(Clone)]
pub struct Kernel {
    pub(crate) dev: Arc<DeviceInner>,
    pub(crate) core: Arc<KernelCore>,
    pub(crate) label: Arc<str>,
}

impl std::fmt::Debug for Kernel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Kernel")
            .field("label", &self.label)
            .field("workgroup_size", &self.core.workgroup_size)
            .field("bindings", &self.core.reflection.bindings.len())
            .field("push_constant_size", &self.core.push_constant_size)
            .finish()
    }
}

impl Kernel {
    /// A kernel from a SPIR-V module (words or bytes), entry point `main`
    /// (or its only compute entry point), no specialization, labelled with
    /// the caller's file and line.
    #[track_caller]
    pub fn from_spirv<S: SpirvInput + ?Sized>(gpu: &Device, spirv: &S) -> Result<Kernel> {
        Kernel::builder(gpu).spirv(spirv).build()
    }

    /// A kernel from WGSL source (feature `wgsl`): its compute entry point
    /// `main`, or its only one, labelled with the caller's file and line.
    /// Pick another entry point with `Kernel::builder(gpu).wgsl(source)
    /// .entry(name)`. Bindings must be in `@group(0)`; a dispatch passes one
    /// buffer per binding, in binding order.
    #[cfg(feature = "wgsl")]
    #[track_caller]
    pub fn from_wgsl(gpu: &Device, source: &str) -> Result<Kernel> {
        Kernel::builder(gpu).wgsl(source).build()
    }

    /// A builder for entry point, specialization constants and workgroup
    /// size. The kernel's default label is the caller's file and line.
    #[track_caller]
    pub fn builder(gpu: &Device) -> KernelBuilder {
        KernelBuilder {
            site: Location::caller(),
            dev: gpu.clone(),
            source: Err(Error::InvalidSpirv {
                reason: "no SPIR-V, GLSL or WGSL was given to the builder".into(),
            }),
            #[cfg(feature = "wgsl")]
            wgsl: None,
            entry: None,
            spec: BTreeMap::new(),
            local_size: [None; 3],
            label: None,
            raw_elements: false,
        }
    }

    /// The label used in errors, debug names and profile rows: the one
    /// given to [`KernelBuilder::label`], else the file and line that built
    /// the kernel.
    pub fn label(&self) -> &str {
        &self.label
    }

    /// What reflection found: bindings, push-constant size, declared workgroup size.
    pub fn reflection(&self) -> &Reflection {
        &self.core.reflection
    }

    /// The buffer bindings, in the order a dispatch passes buffers.
    pub fn bindings(&self) -> &[BindingInfo] {
        &self.core.reflection.bindings
    }

    /// Bytes of push constants each dispatch must pass.
    pub fn push_constant_size(&self) -> u32 {
        self.core.push_constant_size
    }

    /// Workgroup size after specialization.
    pub fn workgroup_size(&self) -> [u32; 3] {
        self.core.workgroup_size
    }

    /// What the driver made of this kernel: each executable of its
    /// pipeline with the statistics the driver reports (register count,
    /// shared memory, spilled bytes, instructions: names and choice are
    /// the driver's), read through `VK_KHR_pipeline_executable_properties`.
    /// Needs a device created with
    /// [`DeviceOptions::pipeline_statistics`](crate::DeviceOptions::pipeline_statistics)
    /// on an adapter that has the extension
    /// ([`AdapterInfo::pipeline_executable_properties`](crate::AdapterInfo::pipeline_executable_properties));
    /// otherwise an [`Error::Unsupported`] naming the extension.
    pub fn statistics(&self) -> Result<Vec<crate::ExecutableStatistics>> {
        let d = &self.dev;
        d.sticky.check()?;
        let Some(loader) = &d.pipeline_statistics else {
            let has = d.info.pipeline_executable_properties;
            return Err(crate::pipeline_stats::unavailable(has, &d.info.name));
        };
        // SAFETY: the device enabled the extension and its feature (the
        // loader exists only then) and created this pipeline, alive as
        // long as the device, with its statistics captured.
        unsafe { crate::pipeline_stats::read(loader, self.core.pipeline) }
    }
}

impl Device {
    /// Compiles GLSL compute source (entry `main`) into a kernel labelled
    /// with the caller's file and line.
    #[cfg(feature = "glsl")]
    #[track_caller]
    #[cfg_attr(docsrs, doc(cfg(feature = "glsl")))]
    pub fn kernel_glsl(&self, source: &str) -> Result<Kernel> {
        Kernel::builder(self).glsl(source).build()
    }

    /// Compiles WGSL compute source (feature `wgsl`; entry point `main` or
    /// the module's only compute entry point) into a kernel labelled with
    /// the caller's file and line. See [`Kernel::from_wgsl`].
    #[cfg(feature = "wgsl")]
    #[track_caller]
    pub fn kernel_wgsl(&self, source: &str) -> Result<Kernel> {
        Kernel::builder(self).wgsl(source).build()
    }

    /// A kernel from SPIR-V words or bytes, labelled with the caller's file
    /// and line.
    #[track_caller]
    pub fn kernel_spirv<S: SpirvInput + ?Sized>(&self, spirv: &S) -> Result<Kernel> {
        Kernel::from_spirv(self, spirv)
    }

    /// Number of distinct pipelines compiled on this device so far.
    pub fn cached_kernels(&self) -> usize {
        self.inner.kernels().len()
    }
}

/// Builds a [`Kernel`]: source, entry point, specialization, workgroup size.
pub struct KernelBuilder {
    dev: Device,
    /// Where the builder was made: the default label.
    site: &'static Location<'static>,
    source: Result<Vec<u32>>,
    /// WGSL source, compiled at [`KernelBuilder::build`] for the entry
    /// point chosen by then.
    #[cfg(feature = "wgsl")]
    wgsl: Option<String>,
    entry: Option<String>,
    spec: BTreeMap<u32, Vec<u8>>,
    local_size: [Option<u32>; 3],
    label: Option<String>,
    raw_elements: bool,
}

impl std::fmt::Debug for KernelBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KernelBuilder")
            .field("entry", &self.entry)
            .field("spec", &self.spec.keys().collect::<Vec<_>>())
            .field("local_size", &self.local_size)
            .field("label", &self.label)
            .field("site", &self.site)
            .field("raw_elements", &self.raw_elements)
            .finish()
    }
}

impl KernelBuilder {
    /// Uses a SPIR-V module (words or bytes).
    pub fn spirv<S: SpirvInput + ?Sized>(mut self, spirv: &S) -> Self {
        self.source = spirv.spirv_words();
        self.clear_wgsl();
        self
    }

    /// Uses WGSL source (feature `wgsl`), compiled through naga when the
    /// kernel is built, for the entry point given to
    /// [`KernelBuilder::entry`] (default `main`, or the module's only
    /// compute entry point); only that entry point's bindings are
    /// reflected. Compile errors are [`Error::Wgsl`] naming the line.
    #[cfg(feature = "wgsl")]
    pub fn wgsl(mut self, source: &str) -> Self {
        self.wgsl = Some(source.to_string());
        self
    }

    /// Forgets WGSL given earlier: the last source given wins.
    fn clear_wgsl(&mut self) {
        #[cfg(feature = "wgsl")]
        {
            self.wgsl = None;
        }
    }

    /// The module's words: WGSL compiled for the chosen entry point, or
    /// the SPIR-V or GLSL given.
    fn take_words(&mut self) -> Result<Vec<u32>> {
        #[cfg(feature = "wgsl")]
        if let Some(source) = self.wgsl.take() {
            return crate::wgsl::compile_wgsl(&source, self.entry.as_deref());
        }
        std::mem::replace(&mut self.source, Ok(Vec::new()))
    }

    /// Compiles GLSL compute source (through the device's on-disk cache,
    /// see [`DeviceOptions::cache_dir`](crate::DeviceOptions::cache_dir)).
    #[cfg(feature = "glsl")]
    #[cfg_attr(docsrs, doc(cfg(feature = "glsl")))]
    pub fn glsl(self, source: &str) -> Self {
        self.glsl_with(source, &crate::glsl::GlslOptions::default())
    }

    /// Compiles GLSL compute source with `options` (defines, optimisation),
    /// through the device's on-disk cache.
    #[cfg(feature = "glsl")]
    #[cfg_attr(docsrs, doc(cfg(feature = "glsl")))]
    pub fn glsl_with(mut self, source: &str, options: &crate::glsl::GlslOptions) -> Self {
        let k = &self.dev.inner.kernels();
        self.source =
            crate::glsl::compile_cached(source, options, k.dir.as_deref(), &k.disk_counters);
        self.clear_wgsl();
        self
    }

    /// Picks the entry point (default: `main`, or the module's only compute entry point).
    pub fn entry(mut self, name: &str) -> Self {
        self.entry = Some(name.to_string());
        self
    }

    /// A label for errors, debug names and profile rows (default: the file
    /// and line that called [`Kernel::builder`], [`Kernel::from_spirv`],
    /// [`Device::kernel_glsl`] or [`Device::kernel_spirv`]).
    pub fn label(mut self, label: &str) -> Self {
        self.label = Some(label.to_string());
        self
    }

    /// Marks the kernel as reading raw words on purpose (a copy kernel that
    /// binds `uvec4` for any element type): its bindings take buffers of
    /// any element type. Without it, a buffer whose element type differs
    /// from what a binding declares is an [`Error::ElementMismatch`] when a
    /// dispatch is recorded (the rule is in [`Batch::run`](crate::Batch::run)).
    pub fn raw_elements(mut self) -> Self {
        self.raw_elements = true;
        self
    }

    /// Sets specialization constant `id` to raw little-endian bytes, as many
    /// as the constant has (4 for bool and 32-bit types, 8, 2 or 1 for 64-,
    /// 16- or 8-bit types).
    pub fn spec_bytes(mut self, id: u32, bytes: &[u8]) -> Self {
        self.spec.insert(id, bytes.to_vec());
        self
    }

    /// Sets a `uint` specialization constant.
    pub fn spec_u32(self, id: u32, v: u32) -> Self {
        self.spec_bytes(id, &v.to_le_bytes())
    }

    /// Sets an `int` specialization constant.
    pub fn spec_i32(self, id: u32, v: i32) -> Self {
        self.spec_bytes(id, &v.to_le_bytes())
    }

    /// Sets a `float` specialization constant.
    pub fn spec_f32(self, id: u32, v: f32) -> Self {
        self.spec_bytes(id, &v.to_le_bytes())
    }

    /// Sets a `bool` specialization constant.
    pub fn spec_bool(self, id: u32, v: bool) -> Self {
        self.spec_bytes(id, &u32::from(v).to_le_bytes())
    }

    /// Sets a 64-bit integer specialization constant.
    pub fn spec_u64(self, id: u32, v: u64) -> Self {
        self.spec_bytes(id, &v.to_le_bytes())
    }

    /// Sets a `double` specialization constant.
    pub fn spec_f64(self, id: u32, v: f64) -> Self {
        self.spec_bytes(id, &v.to_le_bytes())
    }

    /// Sets the workgroup size. Dimensions declared with `local_size_*_id`
    /// are specialized; fixed ones must equal the declared size.
    pub fn local_size(mut self, size: [u32; 3]) -> Self {
        self.local_size = size.map(Some);
        self
    }

    /// Sets the workgroup size in x only (see [`KernelBuilder::local_size`]).
    pub fn local_size_x(mut self, x: u32) -> Self {
        self.local_size[0] = Some(x);
        self
    }

    /// Creates the kernel, or returns the cached one with the same SPIR-V
    /// and specialization.
    pub fn build(mut self) -> Result<Kernel> {
        let d = self.dev.inner.clone();
        d.sticky.check()?;
        let words = self.take_words()?;
        // A request seen before on this device gets its pipeline back
        // without reflecting or validating the SPIR-V again.
        let request = RequestKey {
            words: words.clone(),
            entry: self.entry.clone(),
            spec: self.spec.iter().map(|(k, v)| (*k, v.clone())).collect(),
            local_size: self.local_size,
            raw_elements: self.raw_elements,
        };
        if let Some(core) = d.kernels().get_request(&request) {
            let label = self
                .label
                .unwrap_or_else(|| default_label(self.site, &core.reflection.entry_point));
            return Ok(Kernel {
                dev: d,
                core,
                label: label.into(),
            });
        }
        let (reflection, mut elements) =
            reflect::reflect_with_elements(&words, self.entry.as_deref())?;
        if self.raw_elements {
            elements.clear();
        }
        crate::spirv_caps::check(&words, &d.shader_features, &d.info.name)?;
        let label = self
            .label
            .unwrap_or_else(|| default_label(self.site, &reflection.entry_point));
        let mut spec = self.spec;

        // Workgroup size: declared, then specialized.
        let mut size = reflection.workgroup_size;
        for dim in 0..3 {
            let Some(want) = self.local_size[dim] else {
                continue;
            };
            match reflection.workgroup_size_ids[dim] {
                Some(id) => {
                    spec.insert(id, want.to_le_bytes().to_vec());
                }
                None if want == size[dim] => {}
                None => {
                    return Err(Error::SpecConstant {
                        kernel: label,
                        id: dim as u32,
                        detail: format!(
                            "workgroup size {} is fixed at {} in the shader; declare it with local_size_{}_id to set it",
                            ["x", "y", "z"][dim],
                            size[dim],
                            ["x", "y", "z"][dim]
                        ),
                    });
                }
            }
        }
        for (&id, bytes) in &spec {
            let declared = reflection.spec_constants.iter().find(|s| s.id == id);
            let Some(declared) = declared else {
                return Err(Error::SpecConstant {
                    kernel: label,
                    id,
                    detail: format!(
                        "the kernel has no such constant (declared: {:?})",
                        reflection
                            .spec_constants
                            .iter()
                            .map(|s| s.id)
                            .collect::<Vec<_>>()
                    ),
                });
            };
            if bytes.len() != declared.size as usize {
                return Err(Error::SpecConstant {
                    kernel: label,
                    id,
                    detail: format!(
                        "value is {} bytes, the constant is {}",
                        bytes.len(),
                        declared.size
                    ),
                });
            }
        }
        for (s, id) in size.iter_mut().zip(reflection.workgroup_size_ids) {
            if let Some(b) = id.and_then(|id| spec.get(&id)) {
                *s = u32::from_le_bytes([b[0], b[1], b[2], b[3]]);
            }
        }
        let info = &d.info;
        let invocations = size.iter().map(|&s| u64::from(s)).product::<u64>();
        if size.contains(&0)
            || size
                .iter()
                .zip(info.max_workgroup_size.iter())
                .any(|(s, m)| s > m)
            || invocations > u64::from(info.max_workgroup_invocations)
        {
            return Err(Error::WorkgroupSizeLimit {
                kernel: label,
                size,
                limit: info.max_workgroup_size,
                max_invocations: info.max_workgroup_invocations,
            });
        }
        if reflection.bindings.len() > MAX_BINDINGS {
            return Err(Error::KernelLimit {
                kernel: label,
                what: "the number of buffer bindings",
                got: reflection.bindings.len() as u64,
                limit: MAX_BINDINGS as u64,
            });
        }
        if reflection.push_constant_size > info.max_push_constants_size {
            return Err(Error::KernelLimit {
                kernel: label,
                what: "the push-constant block size (maxPushConstantsSize)",
                got: u64::from(reflection.push_constant_size),
                limit: u64::from(info.max_push_constants_size),
            });
        }

        let key = KernelKey {
            words,
            entry: reflection.entry_point.clone(),
            spec: spec.into_iter().collect(),
            push_descriptors: d.push_descriptor.is_some(),
            raw_elements: self.raw_elements,
        };
        let core = match d.kernels().get(&key) {
            Some(core) => core,
            None => {
                let core = create_core(&d, &key, (reflection, elements), size, label.clone())?;
                let (core, lost_race) = d.kernels().insert(key, core);
                if let Some(extra) = lost_race {
                    // SAFETY: never used: another thread's identical pipeline won.
                    unsafe { extra.destroy(&d.raw, &d.counters) };
                }
                core
            }
        };
        d.kernels().put_request(request, core.clone());
        Ok(Kernel {
            dev: d,
            core,
            label: label.into(),
        })
    }
}

/// The label of a kernel built without one: where it was built, and its
/// entry point when that is not `main`.
fn default_label(site: &Location<'_>, entry: &str) -> String {
    if entry == "main" {
        format!("{}:{}", site.file(), site.line())
    } else {
        format!("{}:{} ({entry})", site.file(), site.line())
    }
}

fn descriptor_type(kind: BindingKind) -> vk::DescriptorType {
    match kind {
        BindingKind::Storage => vk::DescriptorType::STORAGE_BUFFER,
        BindingKind::Uniform => vk::DescriptorType::UNIFORM_BUFFER,
    }
}

fn create_core(
    d: &DeviceInner,
    key: &KernelKey,
    (reflection, elements): (Reflection, Vec<Option<crate::element::ElementType>>),
    workgroup_size: [u32; 3],
    label: String,
) -> Result<KernelCore> {
    let push = d.push_descriptor.is_some();
    let bindings: Vec<vk::DescriptorSetLayoutBinding> = reflection
        .bindings
        .iter()
        .map(|b| {
            vk::DescriptorSetLayoutBinding::default()
                .binding(b.binding)
                .descriptor_type(descriptor_type(b.kind))
                .descriptor_count(1)
                .stage_flags(vk::ShaderStageFlags::COMPUTE)
        })
        .collect();
    let pc_size = reflection.push_constant_size.next_multiple_of(4);

    let mut made = Made::default();
    // SAFETY (whole block): every create-info points at locals alive across
    // its call; objects are created on the live device and destroyed by
    // `Made::drop` if a later step fails.
    let result = unsafe {
        (|| -> Result<()> {
            let has_set = !bindings.is_empty();
            if has_set {
                let flags = if push {
                    vk::DescriptorSetLayoutCreateFlags::PUSH_DESCRIPTOR_KHR
                } else {
                    vk::DescriptorSetLayoutCreateFlags::empty()
                };
                let info = vk::DescriptorSetLayoutCreateInfo::default()
                    .flags(flags)
                    .bindings(&bindings);
                made.set_layout = d
                    .raw
                    .create_descriptor_set_layout(&info, None)
                    .map_err(|r| d.sticky.fail("vkCreateDescriptorSetLayout", r))?;
            }
            let set_layouts = [made.set_layout];
            let ranges = [vk::PushConstantRange {
                stage_flags: vk::ShaderStageFlags::COMPUTE,
                offset: 0,
                size: pc_size,
            }];
            let info = vk::PipelineLayoutCreateInfo::default()
                .set_layouts(if has_set { &set_layouts } else { &[] })
                .push_constant_ranges(if pc_size > 0 { &ranges } else { &[] });
            made.layout = d
                .raw
                .create_pipeline_layout(&info, None)
                .map_err(|r| d.sticky.fail("vkCreatePipelineLayout", r))?;
            made.pipeline = create_pipeline(
                &d.raw,
                d.kernels().vk_cache,
                d.pipeline_statistics.is_some(),
                &d.sticky,
                made.layout,
                &key.words,
                &key.entry,
                &key.spec,
            )?;
            if has_set {
                let stride = std::mem::size_of::<vk::DescriptorBufferInfo>();
                let entries: Vec<vk::DescriptorUpdateTemplateEntry> = reflection
                    .bindings
                    .iter()
                    .enumerate()
                    .map(|(i, b)| vk::DescriptorUpdateTemplateEntry {
                        dst_binding: b.binding,
                        dst_array_element: 0,
                        descriptor_count: 1,
                        descriptor_type: descriptor_type(b.kind),
                        offset: i * stride,
                        stride,
                    })
                    .collect();
                let mut tinfo = vk::DescriptorUpdateTemplateCreateInfo::default()
                    .descriptor_update_entries(&entries)
                    .descriptor_set_layout(made.set_layout)
                    .pipeline_bind_point(vk::PipelineBindPoint::COMPUTE)
                    .pipeline_layout(made.layout)
                    .set(0);
                tinfo = if push {
                    tinfo.template_type(vk::DescriptorUpdateTemplateType::PUSH_DESCRIPTORS_KHR)
                } else {
                    tinfo.template_type(vk::DescriptorUpdateTemplateType::DESCRIPTOR_SET)
                };
                made.template = d
                    .raw
                    .create_descriptor_update_template(&tinfo, None)
                    .map_err(|r| d.sticky.fail("vkCreateDescriptorUpdateTemplate", r))?;
            }
            Ok(())
        })()
    };
    result.inspect_err(|_| made.destroy(&d.raw))?;
    d.counters.add(Counter::Pipelines, 1);
    d.set_name(made.pipeline, &label);
    let writes = reflection.bindings.iter().any(|b| !b.read_only);
    let layout_class = crate::layout_class::class_of(crate::layout_class::LayoutDef::new(
        &bindings, push, pc_size,
    ));
    let core = KernelCore {
        label,
        workgroup_size,
        push_constant_size: reflection.push_constant_size,
        writes,
        push_descriptors: push,
        set_layout: made.set_layout,
        pipeline_layout: made.layout,
        layout_class,
        pipeline: made.pipeline,
        template: made.template,
        reflection,
        elements,
        x_split: crate::x_split::XSplit::new(
            key.words.clone(),
            key.entry.clone(),
            key.spec.clone(),
        ),
    };
    Ok(core)
}

/// Objects made so far while creating a kernel (destroyed on failure).
#[derive(Default)]
struct Made {
    set_layout: vk::DescriptorSetLayout,
    layout: vk::PipelineLayout,
    pipeline: vk::Pipeline,
    template: vk::DescriptorUpdateTemplate,
}

impl Made {
    fn destroy(&mut self, device: &ash::Device) {
        // SAFETY: these objects were never used by a submission; destroying
        // a null handle is a no-op.
        unsafe {
            device.destroy_pipeline(self.pipeline, None);
            device.destroy_descriptor_update_template(self.template, None);
            device.destroy_pipeline_layout(self.layout, None);
            device.destroy_descriptor_set_layout(self.set_layout, None);
        }
        *self = Made::default();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_labels_name_the_place_and_any_other_entry_point() {
        let here = Location::caller();
        let place = format!("{}:{}", here.file(), here.line());
        assert_eq!(default_label(here, "main"), place);
        assert_eq!(default_label(here, "scan"), format!("{place} (scan)"));
    }
}
