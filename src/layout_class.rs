//! Layout classes: a number per distinct definition of a kernel's pipeline
//! layout (its set-0 bindings, whether set 0 is pushed, and its push-constant
//! range), equal for kernels whose layouts are identically defined.
//!
//! Vulkan calls two pipeline layouts "compatible for set 0" when their set 0
//! layouts are identically defined and their push-constant ranges are
//! identical; descriptors bound (or pushed) through one stay valid for a
//! pipeline of the other. So a batch switching between two kernels of one
//! class over the same buffers binds only the pipeline: the descriptors it
//! bound for the first kernel serve the second.
//!
//! Classes are process-wide (a definition says nothing about a device) and
//! never freed: there are as many as distinct layouts ever built, each a few
//! words.

use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};

use ash::vk;

/// What makes two pipeline layouts of this crate compatible for set 0.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct LayoutDef {
    /// Per binding of set 0: binding number, descriptor type (raw),
    /// descriptor count and stage flags (raw), in the layout's order.
    bindings: Vec<(u32, i32, u32, u32)>,
    /// Set 0 is a push-descriptor layout.
    push_descriptors: bool,
    /// Bytes of the one COMPUTE push-constant range at offset 0 (0: none).
    push_constant_bytes: u32,
}

impl LayoutDef {
    /// The definition of a pipeline layout whose set 0 holds `bindings`
    /// (none: no set), pushed or not, with a push-constant range of
    /// `push_constant_bytes` at offset 0 for COMPUTE (0: no range).
    pub(crate) fn new(
        bindings: &[vk::DescriptorSetLayoutBinding<'_>],
        push_descriptors: bool,
        push_constant_bytes: u32,
    ) -> LayoutDef {
        LayoutDef {
            bindings: bindings
                .iter()
                .map(|b| {
                    (
                        b.binding,
                        b.descriptor_type.as_raw(),
                        b.descriptor_count,
                        b.stage_flags.as_raw(),
                    )
                })
                .collect(),
            push_descriptors,
            push_constant_bytes,
        }
    }
}

/// Classes handed out so far.
static CLASSES: OnceLock<Mutex<HashMap<LayoutDef, u32>>> = OnceLock::new();

/// The class of `def`: equal for equal definitions, different otherwise,
/// never 0 (free to mean "none").
pub(crate) fn class_of(def: LayoutDef) -> u32 {
    let classes = CLASSES.get_or_init(|| Mutex::new(HashMap::new()));
    let mut map = classes.lock().unwrap_or_else(|p| p.into_inner());
    let next = map.len() as u32 + 1;
    *map.entry(def).or_insert(next)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn binding(n: u32, ty: vk::DescriptorType) -> vk::DescriptorSetLayoutBinding<'static> {
        vk::DescriptorSetLayoutBinding::default()
            .binding(n)
            .descriptor_type(ty)
            .descriptor_count(1)
            .stage_flags(vk::ShaderStageFlags::COMPUTE)
    }

    #[test]
    fn identical_definitions_share_a_class_and_others_do_not() {
        let s = vk::DescriptorType::STORAGE_BUFFER;
        let u = vk::DescriptorType::UNIFORM_BUFFER;
        let base = class_of(LayoutDef::new(&[binding(0, s), binding(1, s)], false, 12));
        assert_ne!(base, 0);
        assert_eq!(
            base,
            class_of(LayoutDef::new(&[binding(0, s), binding(1, s)], false, 12))
        );
        let others = [
            LayoutDef::new(&[binding(0, s), binding(1, u)], false, 12),
            LayoutDef::new(&[binding(0, s), binding(2, s)], false, 12),
            LayoutDef::new(&[binding(0, s)], false, 12),
            LayoutDef::new(&[binding(0, s), binding(1, s)], true, 12),
            LayoutDef::new(&[binding(0, s), binding(1, s)], false, 16),
            LayoutDef::new(&[binding(0, s), binding(1, s)], false, 0),
            LayoutDef::new(&[], false, 12),
        ];
        let mut seen = vec![base];
        for def in others {
            let c = class_of(def.clone());
            assert_ne!(c, 0, "{def:?}");
            assert!(!seen.contains(&c), "{def:?} shares class {c}");
            seen.push(c);
        }
    }
}
