//! Launch policy for long batches: when to submit what has been recorded.
//!
//! Recording a dispatch costs about as much CPU time as the GPU needs to run
//! a small one, so a batch that records everything before submitting leaves
//! the GPU idle for the whole recording. Instead, once a batch holds
//! `first_chunk` commands its command buffer is submitted and recording
//! continues in a new one; each later chunk is twice as long, up to
//! `max_chunk`. Chunks run in submission order on one queue and barriers
//! reach across command buffers, so this changes when work starts, not what
//! it computes. Plain logic, tested without a GPU.

/// Chunking settings of one batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ChunkPolicy {
    next: u32,
    max: u32,
}

impl ChunkPolicy {
    /// `first == 0` disables chunking: one submission at the end.
    pub(crate) fn new(first: u32, max: u32) -> Self {
        ChunkPolicy {
            next: first,
            max: max.max(first),
        }
    }

    /// Whether a chunk holding `commands` commands should be submitted now.
    pub(crate) fn should_flush(&self, commands: u32) -> bool {
        self.next != 0 && commands >= self.next
    }

    /// Called after a chunk was submitted early: the next one is longer.
    pub(crate) fn advance(&mut self) {
        self.next = self.next.saturating_mul(2).min(self.max);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunks_double_up_to_the_cap() {
        let mut p = ChunkPolicy::new(32, 512);
        let mut sizes = Vec::new();
        let mut in_chunk = 0;
        for _ in 0..2000 {
            in_chunk += 1;
            if p.should_flush(in_chunk) {
                sizes.push(in_chunk);
                in_chunk = 0;
                p.advance();
            }
        }
        assert_eq!(&sizes[..6], &[32, 64, 128, 256, 512, 512]);
        assert!(sizes.iter().all(|&s| s <= 512));
    }

    #[test]
    fn zero_disables_chunking() {
        let p = ChunkPolicy::new(0, 512);
        assert!(!p.should_flush(1_000_000));
    }

    #[test]
    fn cap_below_first_is_raised() {
        let mut p = ChunkPolicy::new(64, 8);
        assert!(p.should_flush(64));
        p.advance();
        assert!(!p.should_flush(65) || p.should_flush(64));
    }
}
