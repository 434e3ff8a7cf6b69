//! The decode step's host-visible state: the next tokens and the guard
//! words the kernels raise, read back in one copy per step.

use vkcompute::{Buffer, BufferSlice, Device, Memory};

use crate::model::{ModelError, Result};

/// The decode step's small `u32` state in one buffer, so that one read
/// returns the next tokens and both guard words: the tokens (`[batch]`),
/// then the embedding's and the KV append's flag words, each at an offset the
/// adapter can bind. Host memory (`Memory::HostVisible`): the read after a
/// step is a copy out of a mapping, not a staged download with a
/// submission of its own; the kernels touch a few words of it per step.
pub(crate) struct State {
    pub(crate) buf: Buffer<u32>,
    batch: usize,
    embed_at: usize,
    kv_at: usize,
}

impl State {
    pub(crate) fn new(gpu: &Device, batch: usize) -> Result<State> {
        let align = (gpu.info().min_storage_buffer_offset_alignment as usize / 4).max(1);
        let embed_at = batch.next_multiple_of(align);
        let kv_at = embed_at + align;
        Ok(State {
            buf: gpu.alloc_with::<u32>(kv_at + 1, Memory::HostVisible)?,
            batch,
            embed_at,
            kv_at,
        })
    }

    /// The next token of each sequence.
    pub(crate) fn tokens(&self) -> Result<BufferSlice<'_, u32>> {
        Ok(self.buf.slice(0..self.batch)?)
    }

    /// The embedding's guard word (token ids past the vocabulary).
    pub(crate) fn embed_flag(&self) -> Result<BufferSlice<'_, u32>> {
        Ok(self.buf.slice(self.embed_at..self.embed_at + 1)?)
    }

    /// The KV append's guard word (positions past the cache;
    /// `nn::qk_norm_rope_append` or `nn::attention_decode_qkv`).
    pub(crate) fn kv_flag(&self) -> Result<BufferSlice<'_, u32>> {
        Ok(self.buf.slice(self.kv_at..self.kv_at + 1)?)
    }

    /// The tokens, after checking both guard words (one read).
    pub(crate) fn read(&self) -> Result<Vec<u32>> {
        let mut all = self.buf.download()?;
        for (what, at) in [
            ("token ids (embedding)", self.embed_at),
            ("cache positions (kv_append)", self.kv_at),
        ] {
            if all[at] != 0 {
                return Err(ModelError::Guard {
                    what,
                    count: all[at],
                });
            }
        }
        all.truncate(self.batch);
        Ok(all)
    }
}
