//! The pipelines of a launch split along x ([`crate::spirv_offset`]).
//!
//! [`Batch::run`](crate::Batch::run) past `maxComputeWorkGroupCount[0]`
//! workgroups records several dispatches of at most that many workgroups
//! each ([`crate::workgroups::split_x`]). Piece 0 runs the kernel's own
//! pipeline; piece `p` runs a variant whose `gl_GlobalInvocationID.x` starts
//! at `p * maxComputeWorkGroupCount[0] * local_size_x` (and
//! `gl_WorkGroupID.x` at `p * maxComputeWorkGroupCount[0]`). The SPIR-V is
//! rewritten once per kernel, the first time a launch needs a second piece;
//! each variant is created the first time a launch reaches its piece and
//! kept with the kernel until the device is dropped. This module holds the
//! variants as data; the recording layer creates them through
//! [`crate::pipeline_cache::create_pipeline`], the one place pipelines
//! are created. Kernels that never
//! launch that large pay nothing but the copy of their words kept here.

use std::sync::{Mutex, OnceLock};

use ash::vk;

use crate::error::Error;
use crate::spirv_offset::{self, Patched};
use crate::stats::{Counter, Counters};

/// Why a piece's pipeline could not be had.
#[derive(Debug)]
pub(crate) enum PieceError {
    /// The kernel cannot be split safely; the reason.
    Unpatchable(String),
    /// Creating the pipeline failed.
    Vulkan(Error),
}

/// What a kernel keeps to build its split-launch variants.
#[derive(Debug)]
pub(crate) struct XSplit {
    words: Vec<u32>,
    entry: String,
    spec: Vec<(u32, Vec<u8>)>,
    patched: OnceLock<Result<Patched, String>>,
    /// The variant for piece `p` at index `p - 1` (null: not created yet).
    pieces: Mutex<Vec<vk::Pipeline>>,
}

impl XSplit {
    /// What to build variants of: the kernel's SPIR-V, entry point and
    /// specialization.
    pub(crate) fn new(words: Vec<u32>, entry: String, spec: Vec<(u32, Vec<u8>)>) -> XSplit {
        XSplit {
            words,
            entry,
            spec,
            patched: OnceLock::new(),
            pieces: Mutex::new(Vec::new()),
        }
    }

    /// The rewritten module, or why there is none (rewritten and validated
    /// once).
    fn patched(&self) -> &Result<Patched, String> {
        self.patched.get_or_init(|| {
            let p = spirv_offset::patch(&self.words)?;
            #[cfg(feature = "glsl")]
            crate::reflect::validate_spirv(&p.words)
                .map_err(|e| format!("its rewritten SPIR-V did not validate: {e}"))?;
            Ok(p)
        })
    }

    /// How many variants exist.
    pub(crate) fn variants(&self) -> usize {
        let pieces = self.pieces.lock().unwrap_or_else(|p| p.into_inner());
        pieces
            .iter()
            .filter(|p| **p != vk::Pipeline::null())
            .count()
    }

    /// Destroys the variants.
    ///
    /// # Safety
    /// No pending submission may use them.
    pub(crate) unsafe fn destroy(&self, device: &ash::Device, counters: &Counters) {
        let mut pieces = self.pieces.lock().unwrap_or_else(|p| p.into_inner());
        for p in pieces.drain(..).filter(|p| *p != vk::Pipeline::null()) {
            // SAFETY: guaranteed by the caller.
            unsafe { device.destroy_pipeline(p, None) };
            counters.add(Counter::Pipelines, -1);
        }
    }
}

impl XSplit {
    /// The pipeline for piece `piece` of a split launch of a kernel whose
    /// workgroup is `local_x` wide, pieces being `groups_per_piece`
    /// workgroups long (the device's `maxComputeWorkGroupCount[0]`, so one
    /// variant serves every launch). Piece 0 is `base`, the kernel's own
    /// pipeline; a missing variant is made once by `create` from the
    /// rewritten words, the entry point and the specialization (the
    /// kernel's own plus the piece's offsets) and kept.
    pub(crate) fn piece(
        &self,
        base: vk::Pipeline,
        local_x: u32,
        piece: u32,
        groups_per_piece: u32,
        create: impl FnOnce(&[u32], &str, &[(u32, Vec<u8>)]) -> Result<vk::Pipeline, Error>,
    ) -> Result<vk::Pipeline, PieceError> {
        if piece == 0 {
            return Ok(base);
        }
        let patched = self
            .patched()
            .as_ref()
            .map_err(|r| PieceError::Unpatchable(r.clone()))?;
        let slot = piece as usize - 1;
        let mut pieces = self.pieces.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(&p) = pieces.get(slot) {
            if p != vk::Pipeline::null() {
                return Ok(p);
            }
        }
        let groups = u64::from(piece) * u64::from(groups_per_piece);
        let invocations = groups * u64::from(local_x);
        let (Ok(groups), Ok(invocations)) = (u32::try_from(groups), u32::try_from(invocations))
        else {
            return Err(PieceError::Unpatchable(format!(
                "piece {piece} would start past 2^32 indices"
            )));
        };
        let mut spec = self.spec.clone();
        if let Some(id) = patched.invocation_base {
            spec.push((id, invocations.to_le_bytes().to_vec()));
        }
        if let Some(id) = patched.group_base {
            spec.push((id, groups.to_le_bytes().to_vec()));
        }
        let pipeline = create(&patched.words, &self.entry, &spec).map_err(PieceError::Vulkan)?;
        if pieces.len() <= slot {
            pieces.resize(slot + 1, vk::Pipeline::null());
        }
        pieces[slot] = pipeline;
        Ok(pipeline)
    }
}
