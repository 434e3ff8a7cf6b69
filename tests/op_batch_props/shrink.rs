//! Shrinking the op batch property's programs: removing whole steps (the
//! slots and inputs after them renumbered).

use crate::program::{Program, Step};

impl Step {
    /// The slots the step reads (an in-place step's target among them).
    fn slots_mut(&mut self) -> Vec<&mut usize> {
        match self {
            Step::Import(_) => vec![],
            Step::Unary { x, .. }
            | Step::Transpose(x)
            | Step::Sum(x)
            | Step::Max(x)
            | Step::Softmax(x)
            | Step::CausalSoftmax { x, .. }
            | Step::Cast { x, .. }
            | Step::Reshape { x, .. }
            | Step::SliceRows { x, .. }
            | Step::Permute { x, .. }
            | Step::Select { x, .. }
            | Step::Contiguous(x) => vec![x],
            Step::Binary { a, b, .. }
            | Step::AddRow { a, bias: b, .. }
            | Step::Matmul { a, b }
            | Step::Matvec { a, x: b }
            | Step::Dot(a, b)
            | Step::RmsNorm { x: a, w: b, .. }
            | Step::SiluMul { gate: a, up: b } => vec![a, b],
            Step::LayerNorm { x, w, b, .. } => vec![x, w, b],
        }
    }
}

impl Program {
    /// The program without step `k`, if no later step reads the slot it
    /// makes (slots and inputs after it renumbered).
    pub fn without(&self, k: usize) -> Option<Program> {
        let mut p = self.clone();
        let step = p.steps.remove(k);
        if !step.makes_slot() {
            return Some(p);
        }
        let slot = self.steps[..k].iter().filter(|s| s.makes_slot()).count();
        for s in &mut p.steps[k..] {
            for r in s.slots_mut() {
                if *r == slot {
                    return None;
                }
                if *r > slot {
                    *r -= 1;
                }
            }
        }
        p.shapes.remove(slot);
        p.dtypes.remove(slot);
        p.keep.remove(slot);
        p.input_of.remove(slot);
        if let Step::Import(i) = step {
            p.inputs.remove(i);
            for s in &mut p.steps {
                if let Step::Import(j) = s {
                    if *j > i {
                        *j -= 1;
                    }
                }
            }
            for j in p.input_of.iter_mut().flatten() {
                if *j > i {
                    *j -= 1;
                }
            }
        }
        Some(p)
    }

    /// The smallest program reachable from this one by removing steps
    /// (latest first) while `fails` still holds, and its failure.
    pub fn minimise(
        &self,
        why: String,
        fails: &mut dyn FnMut(&Program) -> Option<String>,
    ) -> (Program, String) {
        let (mut p, mut why) = (self.clone(), why);
        let mut k = p.steps.len();
        while k > 0 {
            k -= 1;
            if let Some(q) = p.without(k) {
                if let Some(w) = fails(&q) {
                    (p, why) = (q, w);
                    k = p.steps.len();
                }
            }
        }
        (p, why)
    }
}
