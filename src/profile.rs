//! GPU timestamps: what a profiled batch measured, as a table.
//!
//! With [`Profiling::Commands`] a batch writes one timestamp before its
//! first command and one after each command; a command's time is from the
//! previous timestamp to its own, so in a chain separated by barriers it is
//! that command's cost including its barrier, and in barrier-free work it is
//! the time its completion added. [`Profiling::Batch`] writes only the first
//! and last, for a total with no per-command perturbation. With
//! [`Profiling::Off`] (the default) nothing is recorded at all.

use std::fmt;

/// Timestamp queries per query pool a batch or graph records into.
pub(crate) const QUERIES_PER_POOL: u32 = 1024;

/// Which GPU timestamps a batch records.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Profiling {
    /// None: zero cost.
    #[default]
    Off,
    /// One timestamp at the start and one at the end.
    Batch,
    /// One at the start and one after every command.
    Commands,
}

/// GPU time of one recorded command.
#[derive(Debug, Clone, PartialEq)]
pub struct CommandTiming {
    /// Kernel label, `copy`, `fill`, or the label given with [`crate::Batch::label`].
    pub label: String,
    /// Nanoseconds from the previous timestamp to this command's completion.
    pub gpu_ns: f64,
}

/// What a profiled batch measured on the GPU.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Profile {
    /// Per-command times (empty with [`Profiling::Batch`]).
    pub commands: Vec<CommandTiming>,
    /// Nanoseconds from the first timestamp to the last.
    pub total_ns: f64,
}

impl Profile {
    /// Builds a profile from raw timestamps: `ticks[0]` at the start, then
    /// one per label (or just the end when `labels` is empty).
    pub(crate) fn from_ticks(
        labels: &[String],
        ticks: &[u64],
        period_ns: f32,
        valid_bits: u32,
    ) -> Profile {
        let mask = if valid_bits >= 64 {
            u64::MAX
        } else {
            (1u64 << valid_bits) - 1
        };
        let delta = |a: u64, b: u64| (b.wrapping_sub(a) & mask) as f64 * f64::from(period_ns);
        let mut commands = Vec::with_capacity(labels.len());
        for (i, label) in labels.iter().enumerate() {
            if let (Some(&a), Some(&b)) = (ticks.get(i), ticks.get(i + 1)) {
                commands.push(CommandTiming {
                    label: label.clone(),
                    gpu_ns: delta(a, b),
                });
            }
        }
        let total_ns = match (ticks.first(), ticks.last()) {
            (Some(&a), Some(&b)) if ticks.len() > 1 => delta(a, b),
            _ => 0.0,
        };
        Profile { commands, total_ns }
    }

    /// Per-label sums: (label, count, total ns), in first-seen order.
    pub fn by_label(&self) -> Vec<(String, usize, f64)> {
        let mut out: Vec<(String, usize, f64)> = Vec::new();
        for c in &self.commands {
            match out.iter_mut().find(|(l, _, _)| *l == c.label) {
                Some(e) => {
                    e.1 += 1;
                    e.2 += c.gpu_ns;
                }
                None => out.push((c.label.clone(), 1, c.gpu_ns)),
            }
        }
        out
    }
}

impl fmt::Display for Profile {
    /// A table of per-label GPU time, then the total.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "{:<32} {:>8} {:>14} {:>12}",
            "command", "count", "total µs", "mean µs"
        )?;
        for (label, count, ns) in self.by_label() {
            writeln!(
                f,
                "{:<32} {:>8} {:>14.3} {:>12.3}",
                label,
                count,
                ns / 1e3,
                ns / 1e3 / count as f64
            )?;
        }
        writeln!(
            f,
            "{:<32} {:>8} {:>14.3}",
            "total (GPU)",
            self.commands.len(),
            self.total_ns / 1e3
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_become_durations() {
        let labels = vec!["a".to_string(), "b".to_string(), "a".to_string()];
        let p = Profile::from_ticks(&labels, &[100, 110, 130, 160], 2.0, 64);
        assert_eq!(p.commands.len(), 3);
        assert_eq!(p.commands[0].gpu_ns, 20.0);
        assert_eq!(p.commands[1].gpu_ns, 40.0);
        assert_eq!(p.total_ns, 120.0);
        assert_eq!(
            p.by_label(),
            vec![("a".into(), 2, 80.0), ("b".into(), 1, 40.0)]
        );
        let table = p.to_string();
        assert!(table.contains("total (GPU)") && table.contains('a'));
    }

    #[test]
    fn wrapping_counters_with_few_valid_bits() {
        let p = Profile::from_ticks(&[], &[0xfff0, 0x0010], 1.0, 16);
        assert_eq!(p.total_ns, 32.0);
        assert!(p.commands.is_empty());
        assert_eq!(Profile::from_ticks(&[], &[5], 1.0, 64).total_ns, 0.0);
    }
}
