//! Turning a recorded graph into steps: fused groups of element-wise ops
//! (optionally behind a matmul, as its epilogue), single built-in ops, which
//! values must be stored, and where barriers go. Pure functions.

use std::collections::BTreeSet;

use super::program::{Op, Program, S, V};

/// Most scalars (scale factors) one fused kernel takes as push constants.
pub(crate) const MAX_SCALARS: usize = 16;
/// Most storages one group touches (a reduction prologue binds each twice,
/// beside two more: well under the 32 bindings a kernel may have).
pub(crate) const MAX_STORAGES: usize = 12;

/// A run of element-wise ops over one shape, optionally as the epilogue of
/// a matmul (`head`), executed as one generated kernel.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Group {
    /// The matmul node whose output the group consumes element by element.
    pub head: Option<usize>,
    /// Element-wise nodes, in recording order.
    pub nodes: Vec<usize>,
    /// A sum or max over a value of the run, computed in the same pass
    /// (the run is its prologue).
    pub tail: Option<usize>,
}

impl Group {
    /// The label of the group's generated kernel: `vkcompute fused `
    /// followed by its ops in order (head, run, tail), joined by `+`.
    /// (Generated kernels need runtime GLSL.)
    #[cfg_attr(not(feature = "glsl"), allow(dead_code))]
    pub fn label(&self, g: &crate::ops::fusion::program::Program) -> String {
        let ops: Vec<&str> = self
            .head
            .iter()
            .chain(&self.nodes)
            .chain(&self.tail)
            .map(|&n| g.nodes[n].op.name())
            .collect();
        format!("vkcompute fused {}", ops.join("+"))
    }
}

/// One dispatch of the plan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Step {
    /// A node run by its built-in kernel.
    Single(usize),
    /// A generated kernel.
    Fused(Group),
}

/// What executing the graph does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Plan {
    pub steps: Vec<Step>,
    /// Before step i, a barrier (`barriers[i]`).
    pub barriers: Vec<bool>,
    /// Whether each value is written to its storage.
    pub stored: Vec<bool>,
}

impl Step {
    /// Nodes of the step (head first).
    pub fn nodes(&self) -> Vec<usize> {
        match self {
            Step::Single(n) => vec![*n],
            Step::Fused(g) => g
                .head
                .iter()
                .chain(&g.nodes)
                .chain(&g.tail)
                .copied()
                .collect(),
        }
    }
}

/// Plans `g`. `live[v]`: value v must be readable afterwards (a tensor the
/// user holds names it, or it is the last value of an imported storage).
/// `fuse`: group element-wise runs. `epilogue_ok(node)`: that matmul node
/// can take a fused epilogue. `tail_ok`: sums and maxima may take a run as
/// their prologue.
pub(crate) fn plan(
    g: &Program,
    live: &[bool],
    fuse: bool,
    epilogue_ok: &dyn Fn(usize) -> bool,
    tail_ok: bool,
) -> Plan {
    let steps = if fuse {
        group(g, epilogue_ok, tail_ok)
    } else {
        (0..g.nodes.len()).map(Step::Single).collect()
    };
    let mut stored = stored_values(g, &steps, live);
    let steps = drop_dead(g, steps, &mut stored);
    let access: Vec<(BTreeSet<S>, BTreeSet<S>)> =
        steps.iter().map(|s| step_access(g, s, &stored)).collect();
    let barriers = barriers(&access);
    Plan {
        steps,
        barriers,
        stored,
    }
}

/// Storages a node reads at index `col` (broadcast) rather than at its own
/// element index.
fn broadcast_reads(g: &Program, node: usize) -> Option<S> {
    match g.nodes[node].op {
        Op::AddRow(_, bias) => Some(g.values[bias].storage),
        _ => None,
    }
}

/// Whether node `n` reads and writes f32 values only, each contiguous
/// from its storage's first element: matmul epilogues and reduction
/// prologues (f32 kernels rewritten, indexing every binding alike) take
/// only such nodes; plain element-wise runs take any element type and
/// views.
fn all_f32(g: &Program, n: usize) -> bool {
    let node = &g.nodes[n];
    node.op
        .inputs()
        .into_iter()
        .chain(std::iter::once(node.out))
        .all(|v| g.values[v].dtype == crate::ops::DType::F32 && g.values[v].layout.is_none())
}

/// Whether the nodes of a group (in order) may share one kernel as far as
/// views go: no node reads a view of a value the group itself computes
/// (a kernel loads its inputs before it stores anything), and every
/// storage the group writes is accessed through one mapping of element
/// index to storage element (else one invocation would read what another
/// writes). Broadcast operands are checked apart (see `fits_group`).
fn views_fit(g: &Program, nodes: &[usize]) -> bool {
    use super::strides::mapping;
    let mut access: Vec<(S, super::strides::Mapping, bool)> = Vec::new();
    for (k, &n) in nodes.iter().enumerate() {
        let node = &g.nodes[n];
        let bcast = broadcast_reads(g, n);
        for v in node.op.inputs() {
            if g.alias[v].is_some() {
                let r = g.root(v);
                if g.producer[r].is_some_and(|p| nodes[..=k].contains(&p)) {
                    return false;
                }
            }
            let val = &g.values[v];
            if bcast == Some(val.storage) && matches!(node.op, Op::AddRow(_, b) if b == v) {
                continue;
            }
            access.push((val.storage, mapping(val.shape, val.layout), false));
        }
        let out = &g.values[node.out];
        access.push((out.storage, mapping(out.shape, out.layout), true));
    }
    access
        .iter()
        .filter(|a| a.2)
        .all(|&(s, m, _)| access.iter().all(|&(s2, m2, _)| s2 != s || m2 == m))
}

/// Groups maximal runs of element-wise nodes over the same shape.
fn group(g: &Program, epilogue_ok: &dyn Fn(usize) -> bool, tail_ok: bool) -> Vec<Step> {
    let mut steps: Vec<Step> = Vec::new();
    let mut cur: Option<Group> = None;
    let flush = |steps: &mut Vec<Step>, cur: &mut Option<Group>| {
        if let Some(gr) = cur.take() {
            if gr.head.is_none() && gr.nodes.len() == 1 {
                steps.push(Step::Single(gr.nodes[0]));
            } else {
                steps.push(Step::Fused(gr));
            }
        }
    };
    for (i, node) in g.nodes.iter().enumerate() {
        if !node.op.is_elementwise() {
            // A sum or max of a value of the open run takes the run as its
            // prologue.
            if let (Op::Sum(x) | Op::Max(x), Some(gr)) = (node.op, cur.as_mut()) {
                let produced = gr.nodes.iter().any(|&n| g.nodes[n].out == x);
                let bcast = gr.nodes.iter().any(|&n| broadcast_reads(g, n).is_some());
                let f32s = gr.nodes.iter().all(|&n| all_f32(g, n));
                if tail_ok && gr.head.is_none() && produced && !bcast && f32s {
                    gr.tail = Some(i);
                    let done = cur.take();
                    if let Some(done) = done {
                        steps.push(Step::Fused(done));
                    }
                    continue;
                }
            }
            flush(&mut steps, &mut cur);
            steps.push(Step::Single(i));
            continue;
        }
        let fits = cur.as_ref().is_some_and(|gr| fits_group(g, gr, i));
        if !fits {
            flush(&mut steps, &mut cur);
            // A matmul just before, whose output this node reads, takes the
            // run as its epilogue.
            let mut head = None;
            if let Some(Step::Single(p)) = steps.last() {
                let p = *p;
                let pm = &g.nodes[p];
                if matches!(pm.op, Op::Matmul(..))
                    && epilogue_ok(p)
                    && all_f32(g, i)
                    && node.op.inputs().contains(&pm.out)
                    && g.values[pm.out].shape.numel() == g.values[node.out].shape.numel()
                {
                    head = Some(p);
                    steps.pop();
                }
            }
            let gr = Group {
                head,
                nodes: vec![i],
                tail: None,
            };
            if head.is_some()
                && !fits_group(
                    g,
                    &Group {
                        head,
                        nodes: vec![],
                        tail: None,
                    },
                    i,
                )
            {
                // The node would overwrite what the matmul reads.
                steps.push(Step::Single(head.unwrap_or(i)));
                cur = Some(Group {
                    head: None,
                    nodes: vec![i],
                    tail: None,
                });
            } else {
                cur = Some(gr);
            }
            continue;
        }
        if let Some(gr) = cur.as_mut() {
            gr.nodes.push(i);
        }
    }
    flush(&mut steps, &mut cur);
    steps
}

/// Whether node `i` may join group `gr`.
fn fits_group(g: &Program, gr: &Group, i: usize) -> bool {
    let node = &g.nodes[i];
    let shape = g.values[node.out].shape;
    if gr.head.is_some() && !all_f32(g, i) {
        return false;
    }
    let first = gr.head.or(gr.nodes.first().copied());
    if let Some(f) = first {
        let s0 = g.values[g.nodes[f].out].shape;
        if s0.numel() != shape.numel() {
            return false;
        }
        // Broadcasts index by column: the group needs one row length.
        let bcast = gr.nodes.iter().any(|&n| broadcast_reads(g, n).is_some())
            || broadcast_reads(g, i).is_some();
        if bcast && s0.cols() != shape.cols() {
            return false;
        }
    }
    let scalars: usize = gr
        .nodes
        .iter()
        .chain(std::iter::once(&i))
        .map(|&n| g.nodes[n].op.scalars().len())
        .sum();
    if scalars > MAX_SCALARS {
        return false;
    }
    let touched: BTreeSet<S> = gr
        .nodes
        .iter()
        .chain(std::iter::once(&i))
        .flat_map(|&n| {
            let node = &g.nodes[n];
            node.op
                .inputs()
                .into_iter()
                .chain(std::iter::once(node.out))
                .map(|v| g.values[v].storage)
        })
        .collect();
    if touched.len() > MAX_STORAGES {
        return false;
    }
    let nodes: Vec<usize> = gr
        .head
        .iter()
        .chain(&gr.nodes)
        .chain(std::iter::once(&i))
        .copied()
        .collect();
    if !views_fit(g, &nodes) {
        return false;
    }
    let written: BTreeSet<S> = gr
        .nodes
        .iter()
        .map(|&n| g.values[g.nodes[n].out].storage)
        .collect();
    let out_s = g.values[node.out].storage;
    // Element i of a broadcast operand is read by many invocations: the group
    // may neither write it nor read it broadcast after writing it.
    if let Some(b) = broadcast_reads(g, i) {
        if written.contains(&b) || b == out_s {
            return false;
        }
    }
    if gr
        .nodes
        .iter()
        .any(|&n| broadcast_reads(g, n) == Some(out_s))
    {
        return false;
    }
    // A matmul reads all of A and B: its epilogue may not write them.
    if let Some(h) = gr.head {
        let reads: Vec<S> = g.nodes[h]
            .op
            .inputs()
            .iter()
            .map(|&v| g.values[v].storage)
            .collect();
        if reads.contains(&out_s) {
            return false;
        }
    }
    true
}

/// Which values are written to memory: leaves (they are there already),
/// live values, and values read by another step.
fn stored_values(g: &Program, steps: &[Step], live: &[bool]) -> Vec<bool> {
    let mut step_of = vec![usize::MAX; g.nodes.len()];
    for (si, s) in steps.iter().enumerate() {
        for n in s.nodes() {
            step_of[n] = si;
        }
    }
    let mut stored: Vec<bool> = (0..g.values.len())
        .map(|v| g.producer[v].is_none() || live.get(v).copied().unwrap_or(false))
        .collect();
    for (i, node) in g.nodes.iter().enumerate() {
        for v in node.op.inputs() {
            if let Some(p) = g.producer[v] {
                if step_of[p] != step_of[i] {
                    stored[v] = true;
                }
            }
            // A view is read from memory: what it views must be there.
            if g.alias[v].is_some() {
                stored[g.root(v)] = true;
            }
        }
    }
    // A held view needs what it views in memory.
    for (v, &l) in live.iter().enumerate() {
        if l && g.alias.get(v).copied().flatten().is_some() {
            stored[g.root(v)] = true;
        }
    }
    // A single built-in op, and a reduction tail, always write their output.
    for s in steps {
        match s {
            Step::Single(n) | Step::Fused(Group { tail: Some(n), .. }) => {
                stored[g.nodes[*n].out] = true;
            }
            Step::Fused(_) => {}
        }
    }
    stored
}

/// Drops from each fused group the nodes whose value nothing needs (not
/// stored, and read by no needed node of the group): the compiler strips
/// what they alone load, so the kernel would declare fewer bindings than
/// the group binds. A run left with one node runs it alone, a matmul head
/// left with no epilogue runs alone, and a run left with nothing is no
/// step.
fn drop_dead(g: &Program, steps: Vec<Step>, stored: &mut [bool]) -> Vec<Step> {
    let mut out = Vec::with_capacity(steps.len());
    for s in steps {
        let Step::Fused(mut gr) = s else {
            out.push(s);
            continue;
        };
        let mut needed: BTreeSet<V> = gr
            .tail
            .iter()
            .flat_map(|&t| g.nodes[t].op.inputs())
            .collect();
        let mut keep = vec![false; gr.nodes.len()];
        for (k, &n) in gr.nodes.iter().enumerate().rev() {
            let node = &g.nodes[n];
            if stored[node.out] || needed.contains(&node.out) {
                keep[k] = true;
                needed.extend(node.op.inputs());
            }
        }
        let mut k = keep.iter();
        gr.nodes.retain(|_| k.next().copied().unwrap_or(true));
        // A matmul head nothing needs is stored all the same: its kernel
        // would otherwise compute nothing from A and B and lose them too.
        if let Some(h) = gr.head {
            let out = g.nodes[h].out;
            stored[out] |= !needed.contains(&out);
        }
        match (gr.head, gr.nodes.len(), gr.tail) {
            (None, 0, None) => {}
            (None, 1, None) => out.push(Step::Single(gr.nodes[0])),
            (Some(h), 0, None) => out.push(Step::Single(h)),
            _ => out.push(Step::Fused(gr)),
        }
    }
    out
}

/// External values a group reads (produced outside it), in first-use order.
pub(crate) fn group_inputs(g: &Program, gr: &Group) -> Vec<V> {
    let inside: BTreeSet<V> = gr
        .head
        .iter()
        .chain(&gr.nodes)
        .map(|&n| g.nodes[n].out)
        .collect();
    let mut out = Vec::new();
    for &n in &gr.nodes {
        for v in g.nodes[n].op.inputs() {
            if !inside.contains(&v) && !out.contains(&v) {
                out.push(v);
            }
        }
    }
    out
}

/// (storages read, storages written) by a step.
pub(crate) fn step_access(g: &Program, s: &Step, stored: &[bool]) -> (BTreeSet<S>, BTreeSet<S>) {
    let mut r = BTreeSet::new();
    let mut w = BTreeSet::new();
    match s {
        Step::Single(n) => {
            for v in g.nodes[*n].op.inputs() {
                r.insert(g.values[v].storage);
            }
            w.insert(g.values[g.nodes[*n].out].storage);
        }
        Step::Fused(gr) => {
            if let Some(h) = gr.head {
                for v in g.nodes[h].op.inputs() {
                    r.insert(g.values[v].storage);
                }
            }
            for v in group_inputs(g, gr) {
                r.insert(g.values[v].storage);
            }
            for n in s.nodes() {
                let v = g.nodes[n].out;
                if stored[v] {
                    w.insert(g.values[v].storage);
                }
            }
        }
    }
    (r, w)
}

/// Where barriers go: before a step that reads a storage written since the
/// last barrier, or writes one read or written since then.
pub(crate) fn barriers(access: &[(BTreeSet<S>, BTreeSet<S>)]) -> Vec<bool> {
    let mut read = BTreeSet::new();
    let mut written = BTreeSet::new();
    access
        .iter()
        .map(|(r, w)| {
            let hazard = r.iter().any(|s| written.contains(s))
                || w.iter().any(|s| written.contains(s) || read.contains(s));
            if hazard {
                read.clear();
                written.clear();
            }
            read.extend(r.iter().copied());
            written.extend(w.iter().copied());
            hazard
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::tensor::Shape;
    use crate::ops::{Binary, Unary};

    fn set(v: &[S]) -> BTreeSet<S> {
        v.iter().copied().collect()
    }

    #[test]
    fn barriers_only_on_hazards() {
        // 0: read 0 write 1; 1: read 0 write 2 (independent); 2: read 1 (RAW);
        // 3: write 0 (WAR against step 0 and 1? cleared by the barrier at 2,
        // but step 2 read 1 only) ; 4: write 3 read 0 (RAW on 0).
        let acc = vec![
            (set(&[0]), set(&[1])),
            (set(&[0]), set(&[2])),
            (set(&[1, 2]), set(&[4])),
            (set(&[]), set(&[0])),
            (set(&[0]), set(&[3])),
        ];
        assert_eq!(barriers(&acc), vec![false, false, true, false, true]);
        // Write after read.
        let acc = vec![(set(&[0]), set(&[1])), (set(&[]), set(&[0]))];
        assert_eq!(barriers(&acc), vec![false, true]);
    }

    #[test]
    fn fused_labels_list_the_op_chain() {
        let (g, _, _) = chain_graph();
        let run = Group {
            head: None,
            nodes: vec![0, 1, 2, 3],
            tail: None,
        };
        assert_eq!(run.label(&g), "vkcompute fused scale+add+gelu+mul");
        let mut g = Program::default();
        let a = g.leaf(Shape::Matrix(2, 2));
        let m = g.op(Op::Matmul(a, a), Shape::Matrix(2, 2));
        let r = g.op(Op::Unary(Unary::Relu, m), Shape::Matrix(2, 2));
        g.op(Op::Sum(r), Shape::Vector(1));
        let gr = Group {
            head: Some(0),
            nodes: vec![1],
            tail: Some(2),
        };
        assert_eq!(gr.label(&g), "vkcompute fused matmul+relu+sum");
    }

    fn chain_graph() -> (Program, V, V) {
        let mut g = Program::default();
        let x = g.leaf(Shape::Vector(8));
        let b = g.leaf(Shape::Vector(8));
        let s = g.op(Op::Unary(Unary::Scale(2.0), x), Shape::Vector(8));
        let a = g.op(Op::Binary(Binary::Add, s, b), Shape::Vector(8));
        let ge = g.op(Op::Unary(Unary::Gelu, a), Shape::Vector(8));
        let m = g.op(Op::Binary(Binary::Mul, ge, b), Shape::Vector(8));
        (g, x, m)
    }

    #[test]
    fn chain_fuses_into_one_step_storing_only_live_values() {
        let (g, _, m) = chain_graph();
        let mut live = vec![false; g.values.len()];
        live[m] = true;
        let p = plan(&g, &live, true, &|_| true, true);
        assert_eq!(
            p.steps,
            vec![Step::Fused(Group {
                head: None,
                nodes: vec![0, 1, 2, 3],
                tail: None
            })]
        );
        assert_eq!(p.stored.iter().filter(|s| **s).count(), 3); // x, b, result
        let p = plan(&g, &live, false, &|_| true, true);
        assert_eq!(p.steps.len(), 4);
        assert_eq!(p.barriers, vec![false, true, true, true]);
        // A held intermediate is stored.
        live[3] = true;
        assert!(plan(&g, &live, true, &|_| true, true).stored[3]);
    }

    #[test]
    fn matmul_takes_epilogue_unless_it_would_overwrite_an_input() {
        let mut g = Program::default();
        let a = g.leaf(Shape::Matrix(4, 4));
        let w = g.leaf(Shape::Matrix(4, 4));
        let bias = g.leaf(Shape::Vector(4));
        let c = g.op(Op::Matmul(a, w), Shape::Matrix(4, 4));
        let d = g.op(Op::AddRow(c, bias), Shape::Matrix(4, 4));
        let e = g.op(Op::Unary(Unary::Gelu, d), Shape::Matrix(4, 4));
        let mut live = vec![false; g.values.len()];
        live[e] = true;
        let p = plan(&g, &live, true, &|_| true, true);
        assert_eq!(
            p.steps,
            vec![Step::Fused(Group {
                head: Some(0),
                nodes: vec![1, 2],
                tail: None
            })]
        );
        assert!(!p.stored[c]);
        // Not when the matmul cannot take one.
        let p = plan(&g, &live, true, &|_| false, true);
        assert_eq!(p.steps[0], Step::Single(0));
        // In place on A after the matmul: never fused into it.
        let sa = g.values[a].storage;
        g.op_into(Op::Unary(Unary::Relu, c), Shape::Matrix(4, 4), sa);
        let live = vec![true; g.values.len()];
        let p = plan(&g, &live, true, &|_| true, true);
        assert!(matches!(p.steps.last(), Some(Step::Single(3))));
    }

    #[test]
    fn a_sum_takes_the_run_before_it_as_prologue() {
        let (mut g, _, m) = chain_graph();
        g.op(Op::Sum(m), Shape::Vector(1));
        let live = vec![false; g.values.len()];
        let p = plan(&g, &live, true, &|_| true, true);
        assert_eq!(
            p.steps,
            vec![Step::Fused(Group {
                head: None,
                nodes: vec![0, 1, 2, 3],
                tail: Some(4)
            })]
        );
        assert!(!p.stored[m] && p.stored[g.nodes[4].out]);
        let p = plan(&g, &live, true, &|_| true, false);
        assert_eq!(p.steps.len(), 2);
    }

    #[test]
    fn a_group_binds_a_bounded_number_of_buffers() {
        let mut g = Program::default();
        let mut acc = g.leaf(Shape::Vector(8));
        for _ in 0..2 * MAX_STORAGES {
            let other = g.leaf(Shape::Vector(8));
            acc = g.op(Op::Binary(Binary::Add, acc, other), Shape::Vector(8));
        }
        let mut live = vec![false; g.values.len()];
        live[acc] = true;
        let p = plan(&g, &live, true, &|_| true, true);
        assert!(p.steps.len() >= 2, "{:?}", p.steps);
    }

    #[test]
    fn dead_values_leave_fused_groups() {
        let v = Shape::Vector(8);
        let mut g = Program::default();
        let x = g.leaf(v);
        let y = g.leaf(v);
        let a = g.op(Op::Unary(Unary::Relu, x), v);
        let b = g.op(Op::Unary(Unary::Relu, a), v);
        let mut live = vec![false; g.values.len()];
        // A run nobody needs is no step.
        assert_eq!(plan(&g, &live, true, &|_| true, true).steps, vec![]);
        // A run whose last node is dead keeps the rest (here, one node).
        let _m = g.op(Op::Binary(Binary::Mul, b, y), v);
        live.resize(g.values.len(), false);
        live[b] = true;
        let p = plan(&g, &live, true, &|_| true, true);
        assert_eq!(
            p.steps,
            vec![Step::Fused(Group {
                head: None,
                nodes: vec![0, 1],
                tail: None
            })]
        );
        live[b] = false;
        live[a] = true;
        assert_eq!(
            plan(&g, &live, true, &|_| true, true).steps,
            vec![Step::Single(0)]
        );
        // A matmul whose epilogue is dead runs alone and stores its output.
        let mut g = Program::default();
        let m = Shape::Matrix(2, 2);
        let x = g.leaf(m);
        let c = g.op(Op::Matmul(x, x), m);
        g.op(Op::Unary(Unary::Relu, c), m);
        g.op(Op::Unary(Unary::Tanh, c), m);
        let live = vec![false; g.values.len()];
        let p = plan(&g, &live, true, &|_| true, true);
        assert_eq!(p.steps, vec![Step::Single(0)]);
        assert!(p.stored[c]);
        // A dead matmul head whose epilogue computes something else: the
        // head is stored (its kernel keeps reading A and B).
        let r = g.op(Op::Unary(Unary::Relu, x), m);
        let mut live = vec![false; g.values.len()];
        live[r] = true;
        let p = plan(&g, &live, true, &|_| true, true);
        assert_eq!(
            p.steps,
            vec![Step::Fused(Group {
                head: Some(0),
                nodes: vec![3],
                tail: None
            })]
        );
        assert!(p.stored[c]);
        // A reduction prologue drops its dead branch.
        let mut g = Program::default();
        let (x, y) = (g.leaf(v), g.leaf(v));
        let a = g.op(Op::Unary(Unary::Relu, x), v);
        g.op(Op::Binary(Binary::Mul, x, y), v);
        let s = g.op(Op::Sum(a), Shape::Vector(1));
        let mut live = vec![false; g.values.len()];
        live[s] = true;
        let p = plan(&g, &live, true, &|_| true, true);
        assert_eq!(
            p.steps,
            vec![Step::Fused(Group {
                head: None,
                nodes: vec![0],
                tail: Some(2)
            })]
        );
    }

    #[test]
    fn sixteen_bit_runs_fuse_but_not_into_matmuls_or_reductions() {
        use crate::ops::DType;
        let mut g = Program::default();
        let (_, _, c) = g.f16_chain(8);
        let s = g.op(Op::Sum(c), Shape::Vector(1));
        let mut live = vec![false; g.values.len()];
        live[s] = true;
        let p = plan(&g, &live, true, &|_| true, true);
        assert_eq!(
            p.steps,
            vec![
                Step::Fused(Group {
                    head: None,
                    nodes: vec![0, 1, 2],
                    tail: None
                }),
                Step::Single(3)
            ]
        );
        // A matmul does not take a cast to f16 as its epilogue.
        let m = Shape::Matrix(2, 2);
        let mut g = Program::default();
        let a = g.leaf(m);
        let c = g.op(Op::Matmul(a, a), m);
        let h = g.op_typed(Op::Cast(c), m, DType::F16);
        let live = vec![false, false, true];
        let _ = h;
        let p = plan(&g, &live, true, &|_| true, true);
        assert_eq!(p.steps, vec![Step::Single(0), Step::Single(1)]);
    }

    #[test]
    fn different_shapes_and_reductions_split_groups() {
        let mut g = Program::default();
        let x = g.leaf(Shape::Vector(8));
        let y = g.leaf(Shape::Vector(4));
        let a = g.op(Op::Unary(Unary::Relu, x), Shape::Vector(8));
        let b = g.op(Op::Unary(Unary::Relu, y), Shape::Vector(4));
        let s = g.op(Op::Sum(a), Shape::Vector(1));
        let _ = (b, s);
        let live = vec![true; g.values.len()];
        let p = plan(&g, &live, true, &|_| true, true);
        assert_eq!(
            p.steps,
            vec![Step::Single(0), Step::Single(1), Step::Single(2)]
        );
        assert_eq!(p.barriers, vec![false, false, true]);
    }
}
