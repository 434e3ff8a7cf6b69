//! What the driver says about a compiled pipeline: its executables and
//! their statistics, through `VK_KHR_pipeline_executable_properties`.
//!
//! A device created with
//! [`DeviceOptions::pipeline_statistics`](crate::DeviceOptions::pipeline_statistics)
//! on an adapter that lists the extension (and its `pipelineExecutableInfo`
//! feature) enables both and creates every pipeline with
//! `VK_PIPELINE_CREATE_CAPTURE_STATISTICS_BIT_KHR`
//! ([`crate::pipeline_cache::create_pipeline`]). Each pipeline then has one
//! or more executables (a compute pipeline: usually one), each with the
//! statistics its driver chooses to report: register counts, shared
//! memory, spilled bytes, instruction counts, under names the driver picks
//! (there is no fixed list). The values are read here and turned into
//! plain Rust data; the conversion of the driver's fixed-size name arrays
//! and tagged values is pure and tested without a GPU.

use std::ffi::c_char;
use std::fmt;

use ash::vk;

use crate::error::{vk_error, Error, Result};

/// The device extension the statistics come from.
pub(crate) const EXTENSION: &std::ffi::CStr = ash::khr::pipeline_executable_properties::NAME;

/// The feature structure that enables reading statistics
/// (`pipelineExecutableInfo`), for a device's creation.
pub(crate) fn feature() -> vk::PhysicalDevicePipelineExecutablePropertiesFeaturesKHR<'static> {
    vk::PhysicalDevicePipelineExecutablePropertiesFeaturesKHR::default()
        .pipeline_executable_info(true)
}

/// The extension's functions on `device`, created from `instance` with
/// the extension enabled.
pub(crate) fn loader(
    instance: &ash::Instance,
    device: &ash::Device,
) -> ash::khr::pipeline_executable_properties::Device {
    ash::khr::pipeline_executable_properties::Device::new(instance, device)
}

/// One value a driver reports for an executable.
#[derive(Debug, Clone, Copy, PartialEq)]
#[non_exhaustive]
pub enum StatisticValue {
    /// A yes/no fact (e.g. whether the shader spilled).
    Bool(bool),
    /// A signed count.
    I64(i64),
    /// An unsigned count (registers, bytes, instructions).
    U64(u64),
    /// A ratio or an estimate.
    F64(f64),
}

impl fmt::Display for StatisticValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StatisticValue::Bool(b) => write!(f, "{b}"),
            StatisticValue::I64(v) => write!(f, "{v}"),
            StatisticValue::U64(v) => write!(f, "{v}"),
            StatisticValue::F64(v) => write!(f, "{v}"),
        }
    }
}

/// One statistic of a pipeline executable, as the driver names it.
#[derive(Debug, Clone, PartialEq)]
pub struct Statistic {
    /// Short name, e.g. `Register Count` or `Spill Bytes` (driver-specific).
    pub name: String,
    /// The driver's description of what it counts.
    pub description: String,
    /// The value.
    pub value: StatisticValue,
}

impl fmt::Display for Statistic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} = {}", self.name, self.value)
    }
}

/// One executable of a compiled pipeline (what the driver actually runs)
/// and its statistics.
#[derive(Debug, Clone, PartialEq)]
pub struct ExecutableStatistics {
    /// The executable's name, e.g. `Compute Shader` (driver-specific).
    pub name: String,
    /// The driver's description of the executable.
    pub description: String,
    /// The subgroup size it runs with (0: the driver does not say).
    pub subgroup_size: u32,
    /// Its statistics, in the driver's order.
    pub statistics: Vec<Statistic>,
}

impl ExecutableStatistics {
    /// The value of the statistic named `name` (ASCII case ignored), if
    /// the driver reports one.
    pub fn get(&self, name: &str) -> Option<StatisticValue> {
        self.statistics
            .iter()
            .find(|s| s.name.eq_ignore_ascii_case(name))
            .map(|s| s.value)
    }
}

impl fmt::Display for ExecutableStatistics {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.name)?;
        if self.subgroup_size > 0 {
            write!(f, " (subgroup {})", self.subgroup_size)?;
        }
        write!(f, ":")?;
        for (i, s) in self.statistics.iter().enumerate() {
            write!(f, "{} {s}", if i == 0 { "" } else { "," })?;
        }
        Ok(())
    }
}

/// The text of a fixed-size C string field: up to its first NUL, or the
/// whole array where it has none; invalid UTF-8 replaced. Pure.
pub(crate) fn fixed_str(chars: &[c_char]) -> String {
    let bytes: Vec<u8> = chars
        .iter()
        .take_while(|&&c| c != 0)
        .map(|&c| c as u8)
        .collect();
    String::from_utf8_lossy(&bytes).into_owned()
}

/// The value `format` says `value` holds; `None` for a format this crate
/// does not know (a later version of the extension). Pure.
pub(crate) fn value_of(
    format: vk::PipelineExecutableStatisticFormatKHR,
    value: vk::PipelineExecutableStatisticValueKHR,
) -> Option<StatisticValue> {
    use vk::PipelineExecutableStatisticFormatKHR as F;
    // SAFETY: every member of the union is plain data valid for any bits
    // (`b32` is a u32, the others 64-bit numbers), and `format` names the
    // member the driver wrote.
    unsafe {
        Some(match format {
            F::BOOL32 => StatisticValue::Bool(value.b32 != vk::FALSE),
            F::INT64 => StatisticValue::I64(value.i64),
            F::UINT64 => StatisticValue::U64(value.u64),
            F::FLOAT64 => StatisticValue::F64(value.f64),
            _ => return None,
        })
    }
}

/// Why statistics cannot be read on a device that did not enable the
/// extension: the adapter lacks it (`adapter_has` false), or the device
/// was created without asking for it. Pure.
pub(crate) fn unavailable(adapter_has: bool, adapter: &str) -> Error {
    Error::Unsupported {
        what: if adapter_has {
            "pipeline statistics (VK_KHR_pipeline_executable_properties) on a device \
             created without them: set DeviceOptions::pipeline_statistics or \
             VKCOMPUTE_PIPELINE_STATISTICS=1"
        } else {
            "pipeline statistics (VK_KHR_pipeline_executable_properties with \
             pipelineExecutableInfo)"
        },
        adapter: adapter.to_string(),
    }
}

/// Every executable of `pipeline` with its statistics.
///
/// # Safety
/// `loader` belongs to a live device created with the extension and its
/// `pipelineExecutableInfo` feature enabled, and `pipeline` is a live
/// pipeline of that device created with
/// `VK_PIPELINE_CREATE_CAPTURE_STATISTICS_BIT_KHR`.
pub(crate) unsafe fn read(
    loader: &ash::khr::pipeline_executable_properties::Device,
    pipeline: vk::Pipeline,
) -> Result<Vec<ExecutableStatistics>> {
    let info = vk::PipelineInfoKHR::default().pipeline(pipeline);
    // SAFETY: guaranteed by the caller; the queries fill vectors they size.
    let executables = unsafe { loader.get_pipeline_executable_properties(&info) }
        .map_err(|r| vk_error("vkGetPipelineExecutablePropertiesKHR", r))?;
    let mut out = Vec::with_capacity(executables.len());
    for (index, e) in executables.iter().enumerate() {
        let info = vk::PipelineExecutableInfoKHR::default()
            .pipeline(pipeline)
            .executable_index(index as u32);
        // SAFETY: as above; `index` is below the count just returned.
        let stats = unsafe { loader.get_pipeline_executable_statistics(&info) }
            .map_err(|r| vk_error("vkGetPipelineExecutableStatisticsKHR", r))?;
        out.push(ExecutableStatistics {
            name: fixed_str(&e.name),
            description: fixed_str(&e.description),
            subgroup_size: e.subgroup_size,
            statistics: stats
                .iter()
                .filter_map(|s| {
                    Some(Statistic {
                        name: fixed_str(&s.name),
                        description: fixed_str(&s.description),
                        value: value_of(s.format, s.value)?,
                    })
                })
                .collect(),
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chars(s: &[u8], len: usize) -> Vec<c_char> {
        let mut v: Vec<c_char> = s.iter().map(|&b| b as c_char).collect();
        v.resize(len, 0);
        v
    }

    #[test]
    fn fixed_strings_stop_at_the_first_nul_or_the_end() {
        assert_eq!(fixed_str(&chars(b"Register Count", 256)), "Register Count");
        assert_eq!(fixed_str(&chars(b"ab\0cd", 8)), "ab");
        assert_eq!(fixed_str(&chars(b"", 4)), "");
        // No NUL at all: the whole array, not a read past it.
        assert_eq!(fixed_str(&chars(b"abcd", 4)), "abcd");
        // Invalid UTF-8 is replaced, not a panic.
        assert_eq!(fixed_str(&chars(&[0x66, 0xff, 0x67], 4)), "f\u{fffd}g");
    }

    #[test]
    fn values_follow_their_format() {
        use vk::PipelineExecutableStatisticFormatKHR as F;
        use vk::PipelineExecutableStatisticValueKHR as V;
        assert_eq!(
            value_of(F::BOOL32, V { b32: vk::TRUE }),
            Some(StatisticValue::Bool(true))
        );
        assert_eq!(
            value_of(F::BOOL32, V { u64: 0 }),
            Some(StatisticValue::Bool(false))
        );
        assert_eq!(
            value_of(F::INT64, V { i64: -3 }),
            Some(StatisticValue::I64(-3))
        );
        assert_eq!(
            value_of(F::UINT64, V { u64: u64::MAX }),
            Some(StatisticValue::U64(u64::MAX))
        );
        assert_eq!(
            value_of(F::FLOAT64, V { f64: 0.5 }),
            Some(StatisticValue::F64(0.5))
        );
        assert_eq!(value_of(F::from_raw(99), V { u64: 1 }), None);
    }

    #[test]
    fn display_names_each_statistic_and_its_value() {
        let e = ExecutableStatistics {
            name: "Compute Shader".into(),
            description: "the kernel".into(),
            subgroup_size: 32,
            statistics: vec![
                Statistic {
                    name: "Register Count".into(),
                    description: String::new(),
                    value: StatisticValue::U64(128),
                },
                Statistic {
                    name: "Spilled".into(),
                    description: String::new(),
                    value: StatisticValue::Bool(false),
                },
            ],
        };
        assert_eq!(
            e.to_string(),
            "Compute Shader (subgroup 32): Register Count = 128, Spilled = false"
        );
        assert_eq!(e.get("register count"), Some(StatisticValue::U64(128)));
        assert_eq!(e.get("Spill Bytes"), None);
        assert_eq!(StatisticValue::F64(1.5).to_string(), "1.5");
        assert_eq!(StatisticValue::I64(-2).to_string(), "-2");
    }

    #[test]
    fn the_unavailable_error_names_the_extension_and_the_remedy() {
        let off = unavailable(true, "llvmpipe").to_string();
        assert!(
            off.contains("VK_KHR_pipeline_executable_properties"),
            "{off}"
        );
        assert!(off.contains("VKCOMPUTE_PIPELINE_STATISTICS=1"), "{off}");
        let lacks = unavailable(false, "gpu").to_string();
        assert!(lacks.contains("pipelineExecutableInfo"), "{lacks}");
        assert!(!lacks.contains("DeviceOptions"), "{lacks}");
    }
}
