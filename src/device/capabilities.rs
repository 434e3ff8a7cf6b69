//! Checking vkcompute's optional capabilities against what the device
//! enabled ([`crate::requirements`] holds the table).

use super::Device;
use crate::error::Result;
use crate::requirements::{self, Capability};

impl Device {
    /// `Ok` when the device has everything `capability` needs enabled,
    /// else [`Error::MissingFeature`](crate::Error::MissingFeature) naming
    /// the capability, the first missing feature and what to do instead.
    /// vkcompute runs the same check where it first uses a capability;
    /// call it to learn up front (on MoltenVK, for instance, which lacks
    /// the shader clock, 64-bit buffer atomics and cooperative matrices).
    ///
    /// ```
    /// # fn main() -> vkcompute::Result<()> {
    /// use vkcompute::{Capability, Device};
    /// let gpu = Device::new()?;
    /// gpu.require(Capability::TimelineSemaphores)?; // every device has them
    /// if let Err(e) = gpu.require(Capability::CooperativeMatrix) {
    ///     println!("f16 matmul widens to f32 here: {e}");
    /// }
    /// # Ok(())
    /// # }
    /// ```
    pub fn require(&self, capability: Capability) -> Result<()> {
        requirements::check(
            capability,
            &self.inner.shader_features,
            &self.inner.info.name,
        )
    }
}
