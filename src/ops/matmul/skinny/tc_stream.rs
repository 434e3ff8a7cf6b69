//! [`super::linear`] streaming W through the tensor cores: with [`F16`] or
//! [`Bf16`] weights and up to 64 rows of x, on an adapter with
//! `VK_KHR_cooperative_matrix`'s 16×16×16 f16 shape and 32-lane subgroups,
//! the kernel of `shaders/linear_tc_stream.comp` computes yᵀ = W·xᵀ: W's
//! rows are the A operand as stored, x the B operand. Each of a
//! workgroup's 8 subgroups streams its own 16 rows of W along K with
//! 16-byte loads (128 contiguous bytes of a row per 8 lanes, each row read
//! in order, steps ahead in registers) and multiplies each step from its
//! own region of shared memory (bf16 widened exactly, x rounded to f16). W
//! is read once whatever the number of rows, and the products cost the
//! tensor cores little, so the layer runs near the rate W streams in. A
//! workgroup owns 128 rows of W (64 outputs of a merged gate|up weight,
//! the epilogue [`Epilogue::SiluMul`] fused, or the residual add).
//!
//! x reaches the products in one of two forms. The span form
//! ([`LINEAR_TENSOR_STREAM`] up to 32 rows) converts x over the
//! workgroup's span of K to f16 in shared memory once (896 deep for 16
//! rows of x, 384 for 32); no subgroup waits on another after that. The
//! window form ([`LINEAR_TENSOR_WINDOW`], and [`LINEAR_TENSOR_STREAM`]
//! past 32 rows) streams x through two 64-deep steps that the whole
//! workgroup converts one step ahead, one barrier per step, for 32 or 64
//! rows and any depth. K is split over workgroup layers where a span would
//! not fit or the workgroups would be too few to keep the GPU's loads in
//! flight: the plain kernel writes partial products and the split-K
//! reduction pass of the other kernels adds them in layer order with the
//! epilogue. Where the epilogue is a residual added in place (y is the
//! residual, as a transformer's o and down projections are), on adapters
//! with f32 atomic adds on storage buffers (`VK_EXT_shader_atomic_float`),
//! the layers add their partial products into y themselves instead: no
//! partials' buffer and no second pass (H200, Qwen3-4B decode of 16
//! sequences 4.86 against 5.09 ms per step; the bf16 FFN stack at 16
//! tokens 2.36 against 2.48–2.52 ms). The layers' sums then land in the
//! order the atomics do, so such a layer's result may differ in its last
//! bits from run to run.
//!
//! [`stream_applies`], [`window_applies`], [`stream_chosen`],
//! [`stream_rows`], [`stream_splits`] and [`window_splits`] are the
//! decisions, pure.
//!
//! [`F16`]: crate::ops::F16
//! [`Bf16`]: crate::ops::Bf16

use crate::batch::Batch;
use crate::buffer::Buffer;
use crate::error::{Error, Result};

use super::super::super::dtype::DType;
use super::super::MatmulCaps;
use super::{
    layers, run_layers, run_layers_added, same, shape, Epilogue, Layer, LinearPlan, Weights,
    LINEAR_MAX_SPLITS,
};

/// [`LinearPlan::rows_per_pass`] of the tensor-core streaming kernel: all
/// rows of x (at most [`STREAM_MAX_ROWS`]) in one pass, W read once.
/// [`choose_linear`](super::choose_linear) picks it where
/// [`stream_chosen`] says so.
pub const LINEAR_TENSOR_STREAM: u32 = u32::MAX - 1;

/// [`LinearPlan::rows_per_pass`] of the streaming kernel's window form at
/// every row count: x streams through a window of two 64-deep steps (32
/// or 64 rows of x per workgroup, K layers of any depth) instead of being
/// held over a span. [`LINEAR_TENSOR_STREAM`] runs this form past 32 rows
/// too; [`choose_linear`](super::choose_linear) names it from
/// [`WINDOW_MIN_ROWS`] rows.
pub const LINEAR_TENSOR_WINDOW: u32 = u32::MAX - 2;

/// Fewest rows of x for which [`choose_linear`](super::choose_linear)
/// names [`LINEAR_TENSOR_WINDOW`]. From 17 to 32 rows both forms multiply
/// 32-row pieces, and the span form's 384-deep spans cut K into many
/// layers: on an H200 the Qwen3-4B FFN stack (bf16) at 32 rows took 3.04
/// ms through the window against 3.68–3.73 over spans; at 16 rows the span
/// form (16-row pieces, 896-deep spans) took 2.47 ms against the window's
/// 3.37 (its form before the one kept). Past 32 rows the window is the
/// only form.
pub const WINDOW_MIN_ROWS: u32 = 17;

/// Whether `rows_per_pass` is one of the streaming plans.
pub(super) fn is_stream_plan(rows_per_pass: u32) -> bool {
    rows_per_pass == LINEAR_TENSOR_STREAM || rows_per_pass == LINEAR_TENSOR_WINDOW
}

/// Rows of x per workgroup for `m` rows, and whether x streams through
/// the window, under [`LINEAR_TENSOR_WINDOW`] (`window`) or
/// [`LINEAR_TENSOR_STREAM`]. Pure.
fn form(m: u32, window: bool) -> (u32, bool) {
    if window {
        (if m <= 32 { 32 } else { 64 }, true)
    } else {
        let rows = stream_rows(m);
        (rows, rows == 64)
    }
}

/// The deepest K layer the form for `m` rows takes ([`form`]). Pure.
fn form_span(m: u32, window: bool) -> u32 {
    match form(m, window) {
        (_, true) => u32::MAX,
        (rows, false) => stream_span(rows),
    }
}

/// Depth of the kernel's steps: K must be a multiple, and split-K layers
/// are.
const STEP: u32 = 128;
/// Rows of W per workgroup (the plain and residual forms).
const ROWS_PER_GROUP: u32 = 128;
/// Outputs per workgroup with [`Epilogue::SiluMul`] (as many gate and up
/// rows of W).
const SILU_OUTS_PER_GROUP: u32 = 64;
/// Split-K layers are at least this deep (where x's span allows).
const MIN_SLICE: u32 = 256;
/// Most rows of x the kernel holds.
pub const STREAM_MAX_ROWS: u32 = 64;
/// Shared memory of the largest form: 8 subgroups' steps of 16 rows × 64
/// of W, and 16 rows of x over an 896-deep span, as f16 with a 16-byte
/// skew per row.
const SHARED_BYTES: u32 = 8 * 16 * 9 * 16 + 16 * (896 / 8 + 1) * 16;
// The 32-row form (x over 384) and the 64-row one (two 64-deep steps of x)
// need less, and all fit the 48 KiB that NVIDIA's drivers offer.
const _: () = assert!(SHARED_BYTES >= 8 * 16 * 9 * 16 + 32 * (384 / 8 + 1) * 16);
const _: () = assert!(SHARED_BYTES >= 8 * 16 * 9 * 16 + 2 * 64 * 9 * 16);
const _: () = assert!(SHARED_BYTES <= 49152);

/// The deepest span of K one workgroup takes for `rows` of x per
/// workgroup ([`stream_rows`]): what x's f16 copy leaves of the shared
/// memory; `u32::MAX` (no limit) for the 64-row form, whose x streams
/// through a window of two steps. Pure.
pub fn stream_span(rows: u32) -> u32 {
    match rows {
        0..=16 => 896,
        17..=32 => 384,
        _ => u32::MAX,
    }
}

/// Whether the streaming kernel can take a layer of `m` rows, `k` deep,
/// with `n` rows of `dtype` weights (`silu`: a merged gate|up weight,
/// `n / 2` outputs) on `caps`: 1 to [`STREAM_MAX_ROWS`] rows, f16 or bf16
/// weights, K a multiple of 128 covered by at most [`LINEAR_MAX_SPLITS`]
/// spans ([`stream_span`]), the outputs a multiple of 16 (whole pieces of
/// W: no load leaves it), and an adapter with the Khronos cooperative
/// matrices' f16 shape, 32-lane subgroups and the kernel's 47 KiB of
/// shared memory. Pure.
pub fn stream_applies(m: u32, k: u32, n: u32, dtype: DType, silu: bool, caps: &MatmulCaps) -> bool {
    applies(m, k, n, dtype, silu, caps, false)
}

/// [`stream_applies`] for [`LINEAR_TENSOR_WINDOW`]: the same rules, K
/// layers of any depth. Pure.
pub fn window_applies(m: u32, k: u32, n: u32, dtype: DType, silu: bool, caps: &MatmulCaps) -> bool {
    applies(m, k, n, dtype, silu, caps, true)
}

fn applies(
    m: u32,
    k: u32,
    n: u32,
    dtype: DType,
    silu: bool,
    caps: &MatmulCaps,
    window: bool,
) -> bool {
    let outs = if silu { n / 2 } else { n };
    (1..=STREAM_MAX_ROWS).contains(&m)
        && matches!(dtype, DType::F16 | DType::Bf16)
        && k > 0
        && k % STEP == 0
        && u64::from(k) <= u64::from(LINEAR_MAX_SPLITS) * u64::from(form_span(m, window))
        && outs > 0
        && outs % 16 == 0
        && (!silu || n % 2 == 0)
        && caps.coopmat_khr_f16
        && caps.subgroup_size == 32
        && caps.max_shared_memory >= SHARED_BYTES
}

/// Fewest rows of x [`choose_linear`](super::choose_linear) streams on the
/// tensor cores: below, the skinny kernels' 16-byte loads and subgroup
/// sums stream W as fast or faster and keep x exact (on an H100 the
/// Qwen3-4B FFN at 4 rows took 2.63–2.66 ms on them; this kernel, forced,
/// 2.74 ms, while at 5 rows they took 4.37 ms against its 2.77).
pub const STREAM_MIN_ROWS: u32 = 5;

/// Whether [`choose_linear`](super::choose_linear) takes the streaming
/// kernel: from [`STREAM_MIN_ROWS`] rows where the plan it names applies
/// ([`stream_applies`], or from [`WINDOW_MIN_ROWS`] rows
/// [`window_applies`]). Pure.
pub fn stream_chosen(m: u32, k: u32, n: u32, dtype: DType, silu: bool, caps: &MatmulCaps) -> bool {
    m >= STREAM_MIN_ROWS && applies(m, k, n, dtype, silu, caps, m >= WINDOW_MIN_ROWS)
}

/// The kernel's rows of x per workgroup for `m` rows: 16, 32 or 64, the
/// smallest holding `m`. Pure.
pub fn stream_rows(m: u32) -> u32 {
    match m {
        0..=16 => 16,
        17..=32 => 32,
        _ => 64,
    }
}

/// Workgroups that keep the GPU's loads in flight: two per compute unit
/// (128 when the adapter does not say). On an H100 the Qwen3-4B FFN at 4
/// and 16 rows ran fastest at two: four per unit (down split 27 ways)
/// read 0.54 / 0.47 of the copy's bandwidth, two (14 ways) 0.58 / 0.52.
fn enough(caps: &MatmulCaps) -> u32 {
    if caps.compute_units > 0 {
        2 * caps.compute_units
    } else {
        128
    }
}

/// K layers for a layer of `m` rows, `n` rows of W, `k` deep: at least
/// enough that each layer's span fits ([`stream_span`]); 1 where that is
/// one and the one-pass workgroups (128 rows of W each, 64 outputs with
/// `silu`) number two per compute unit (128 when the adapter does not
/// give its count); else enough layers
/// of the plain kernel (128 rows of W each, over all `n`) to reach that,
/// each at least 256 deep, at most [`LINEAR_MAX_SPLITS`]. The 64-row form
/// then takes one layer more while that many workgroups fill one round of
/// two per compute unit and leave a second under half full: at its 118
/// registers two of its workgroups fit a compute unit of an H200, where
/// the Qwen3-4B FFN at 64 rows took 4.70 ms with gate|up's 152 blocks in 2
/// layers (304 workgroups against 264), 4.17 in 3, 4.40 / 4.51 in 1 / 4.
/// The other forms (78–98 registers, three workgroups per unit) keep the
/// count: at 17 rows gate|up in 3 layers took 3.12–3.14 ms against 2.73
/// in 2. Pure.
pub fn stream_splits(m: u32, k: u32, n: u32, silu: bool, caps: &MatmulCaps) -> u32 {
    splits(m, k, n, silu, caps, false)
}

/// [`stream_splits`] for [`LINEAR_TENSOR_WINDOW`] (no span to cover).
/// Pure.
pub fn window_splits(m: u32, k: u32, n: u32, silu: bool, caps: &MatmulCaps) -> u32 {
    splits(m, k, n, silu, caps, true)
}

fn splits(m: u32, k: u32, n: u32, silu: bool, caps: &MatmulCaps, window: bool) -> u32 {
    let least = k.div_ceil(form_span(m, window)).max(1);
    let want = enough(caps);
    let one_pass = if silu {
        (n / 2).div_ceil(SILU_OUTS_PER_GROUP)
    } else {
        n.div_ceil(ROWS_PER_GROUP)
    };
    if least == 1 && one_pass >= want {
        return 1;
    }
    let blocks = n.div_ceil(ROWS_PER_GROUP).max(1);
    let most = (k / MIN_SLICE).clamp(least, LINEAR_MAX_SPLITS.max(least));
    let mut splits = want.div_ceil(blocks).clamp(least, most);
    while form(m, window).0 == 64
        && splits < most
        && second_round_under_half(blocks * layers(k, splits, STEP).1, want)
    {
        splits += 1;
    }
    splits
}

/// Whether `workgroups`, run in rounds of `round`, fill the first and
/// leave a second under half full. Pure.
fn second_round_under_half(workgroups: u32, round: u32) -> bool {
    workgroups > round && 2 * (workgroups - round) < round
}

/// The plan [`super::choose_linear`] takes when [`stream_chosen`]:
/// [`LINEAR_TENSOR_WINDOW`] from [`WINDOW_MIN_ROWS`] rows, else
/// [`LINEAR_TENSOR_STREAM`]. Pure.
pub(super) fn plan(m: u32, k: u32, n: u32, silu: bool, caps: &MatmulCaps) -> LinearPlan {
    let window = m >= WINDOW_MIN_ROWS;
    LinearPlan {
        rows_per_pass: if window {
            LINEAR_TENSOR_WINDOW
        } else {
            LINEAR_TENSOR_STREAM
        },
        splits: splits(m, k, n, silu, caps, window),
    }
}

/// The built-in for `dtype` weights, the form (`rows` of x per
/// workgroup; `window`: x through the window) and the epilogue (`mode`: 0
/// none, 1 residual, 2 SiLU·mul; 3 K layers adding into y, [`ADD_MODE`]),
/// or `None` where none is compiled.
fn kernel_name(dtype: DType, (rows, window): (u32, bool), mode: u32) -> Option<&'static str> {
    // [span m16, span m32, window w32, window w64] × [none, res, silu, add].
    const F16: [[&str; 4]; 4] = [
        [
            "linear_tc_f16_m16",
            "linear_tc_f16_m16_res",
            "linear_tc_f16_m16_silu",
            "linear_tc_f16_m16_add",
        ],
        [
            "linear_tc_f16_m32",
            "linear_tc_f16_m32_res",
            "linear_tc_f16_m32_silu",
            "linear_tc_f16_m32_add",
        ],
        [
            "linear_tc_f16_w32",
            "linear_tc_f16_w32_res",
            "linear_tc_f16_w32_silu",
            "linear_tc_f16_w32_add",
        ],
        [
            "linear_tc_f16_w64",
            "linear_tc_f16_w64_res",
            "linear_tc_f16_w64_silu",
            "linear_tc_f16_w64_add",
        ],
    ];
    const BF16: [[&str; 4]; 4] = [
        [
            "linear_tc_bf16_m16",
            "linear_tc_bf16_m16_res",
            "linear_tc_bf16_m16_silu",
            "linear_tc_bf16_m16_add",
        ],
        [
            "linear_tc_bf16_m32",
            "linear_tc_bf16_m32_res",
            "linear_tc_bf16_m32_silu",
            "linear_tc_bf16_m32_add",
        ],
        [
            "linear_tc_bf16_w32",
            "linear_tc_bf16_w32_res",
            "linear_tc_bf16_w32_silu",
            "linear_tc_bf16_w32_add",
        ],
        [
            "linear_tc_bf16_w64",
            "linear_tc_bf16_w64_res",
            "linear_tc_bf16_w64_silu",
            "linear_tc_bf16_w64_add",
        ],
    ];
    let table = match dtype {
        DType::F16 => &F16,
        DType::Bf16 => &BF16,
        _ => return None,
    };
    let form = match (rows, window) {
        (16, false) => 0,
        (32, false) => 1,
        (32, true) => 2,
        (64, true) => 3,
        _ => return None,
    };
    table[form].get(mode as usize).copied()
}

/// A typed error unless the kernel takes this layer on `caps` under the
/// streaming `plan` (its kind and its K layers): the shape
/// rules of [`stream_applies`] (or [`window_applies`]) named one by one,
/// each layer's span within [`stream_span`] (span forms), then the
/// adapter.
pub(super) fn check(
    caps: &MatmulCaps,
    (m, k, n): (u32, u32, u32),
    dtype: DType,
    silu: bool,
    plan: LinearPlan,
    adapter: &str,
) -> Result<()> {
    let window = plan.rows_per_pass == LINEAR_TENSOR_WINDOW;
    let splits = plan.splits;
    if !matches!(dtype, DType::F16 | DType::Bf16) {
        let name = if window {
            "LINEAR_TENSOR_WINDOW"
        } else {
            "LINEAR_TENSOR_STREAM"
        };
        return Err(shape(format!(
            "rows per pass {name} (tensor-core streaming) takes f16 or bf16 weights, not \
             {dtype:?}"
        )));
    }
    if m > STREAM_MAX_ROWS {
        return Err(shape(format!(
            "m = {m} rows of x, over the tensor-core streaming kernel's {STREAM_MAX_ROWS}"
        )));
    }
    if k % STEP != 0 {
        return Err(shape(format!(
            "k = {k}: the tensor-core streaming kernel takes K in whole steps of {STEP}"
        )));
    }
    let outs = if silu { n / 2 } else { n };
    if outs % 16 != 0 {
        return Err(shape(format!(
            "{outs} outputs: the tensor-core streaming kernel takes them in whole pieces of 16"
        )));
    }
    let span = form_span(m, window);
    let (kslice, _) = layers(k, splits, STEP);
    if kslice > span {
        return Err(shape(format!(
            "{splits} K layers of {kslice} for k = {k}: over the tensor-core streaming \
             kernel's span of {span} for {m} rows of x (at least {} layers)",
            k.div_ceil(span)
        )));
    }
    if !applies(m, k, n, dtype, silu, caps, window) {
        return Err(Error::Unsupported {
            what: "ops::linear streaming on tensor cores (VK_KHR_cooperative_matrix with the \
                   16×16×16 f16 shape, 32-lane subgroups, 47 KiB of shared memory)",
            adapter: adapter.to_string(),
        });
    }
    Ok(())
}

/// Records a checked layer on the streaming kernel under the streaming
/// plan `plan`, with its K layers (1: one pass with the epilogue fused).
pub(super) fn record(
    batch: &mut Batch,
    x: &Buffer<f32>,
    w: Weights<'_>,
    y: &Buffer<f32>,
    (m, k, n): (u32, u32, u32),
    epilogue: Epilogue<'_>,
    plan: LinearPlan,
) -> Result<()> {
    let splits = plan.splits;
    let gpu = x.device();
    let silu = matches!(epilogue, Epilogue::SiluMul);
    let (kslice, depth) = layers(k, splits, STEP);
    // K layers of an in-place residual add add into y where the adapter
    // has f32 atomic adds; one layer over all of K takes the epilogue
    // (kslice 0 for the kernel); other K layers write partials that the
    // reduction pass adds.
    let in_place = matches!(epilogue, Epilogue::Residual(r) if same(r, y));
    let add_into = adds_into(depth, gpu.info().float32_atomic_add, in_place);
    let (mode, grid) = if add_into {
        (ADD_MODE, [n.div_ceil(ROWS_PER_GROUP), 1, depth])
    } else if depth > 1 {
        (0, [n.div_ceil(ROWS_PER_GROUP), 1, depth])
    } else if silu {
        (2, [(n / 2).div_ceil(SILU_OUTS_PER_GROUP), 1, 1])
    } else {
        (epilogue.mode(), [n.div_ceil(ROWS_PER_GROUP), 1, 1])
    };
    let form = form(m, plan.rows_per_pass == LINEAR_TENSOR_WINDOW);
    let name = kernel_name(w.dtype(), form, mode).ok_or_else(|| {
        shape(format!(
            "no tensor-core streaming kernel for {:?} weights",
            w.dtype()
        ))
    })?;
    let kernel = crate::builtins::get(&gpu.inner, name, &[])?;
    let layer = Layer {
        x,
        w: w.bind(),
        y,
        shape: (m, k, n),
        epilogue,
    };
    if add_into {
        return run_layers_added(batch, &kernel, layer, grid, kslice);
    }
    run_layers(batch, &kernel, layer, grid, kslice, depth)
}

/// Whether a layer's `depth` K layers add their partial products into y
/// ([`ADD_MODE`]): more than one layer, an in-place residual add, and f32
/// atomic adds on storage buffers. Pure.
fn adds_into(depth: u32, float_atomics: bool, in_place_residual: bool) -> bool {
    depth > 1 && float_atomics && in_place_residual
}

/// [`kernel_name`]'s mode of the plain form whose K layers add their
/// partial products into y with f32 atomic adds (`ADD_INTO` in
/// `shaders/linear_tc_stream.comp`): an in-place residual add, with no
/// partials' buffer and no reduction pass.
const ADD_MODE: u32 = 3;

#[cfg(test)]
mod tests {
    use super::*;

    fn h100() -> MatmulCaps {
        MatmulCaps::new(32, 49152, 1024, 132).with_coopmat_khr_f16(true)
    }

    #[test]
    fn applies_with_the_khronos_shape_whole_steps_and_pieces() {
        let c = h100();
        for d in [DType::F16, DType::Bf16] {
            assert!(stream_applies(1, 2560, 19456, d, true, &c));
            assert!(stream_applies(32, 9728, 2560, d, false, &c));
            assert!(stream_applies(33, 2560, 2560, d, false, &c));
            assert!(stream_applies(64, 9728, 2560, d, false, &c));
            assert!(!stream_applies(65, 2560, 2560, d, false, &c));
            assert!(!stream_applies(0, 2560, 2560, d, false, &c));
            // K not in whole 128-deep steps; outputs not in pieces of 16.
            assert!(!stream_applies(4, 2560 + 64, 2560, d, false, &c));
            assert!(!stream_applies(4, 2560, 2568, d, false, &c));
            // 2·(16·k + 8) rows: 8 outputs left over with SiLU.
            assert!(!stream_applies(4, 2560, 2 * 2568, d, true, &c));
            // K past 64 spans.
            assert!(stream_applies(16, 64 * 896, 256, d, false, &c));
            assert!(!stream_applies(16, 64 * 896 + 128, 256, d, false, &c));
            assert!(!stream_applies(32, 64 * 384 + 128, 256, d, false, &c));
            // The 64-row form's window takes any depth.
            assert!(stream_applies(33, 1 << 20, 256, d, false, &c));
        }
        assert!(!stream_applies(4, 2560, 2560, DType::F32, false, &c));
        let no_khr = MatmulCaps::new(32, 49152, 1024, 132);
        assert!(!stream_applies(4, 2560, 2560, DType::Bf16, false, &no_khr));
        let wide = MatmulCaps::new(64, 49152, 1024, 132).with_coopmat_khr_f16(true);
        assert!(!stream_applies(4, 2560, 2560, DType::Bf16, false, &wide));
        let small = MatmulCaps::new(32, 40960, 1024, 132).with_coopmat_khr_f16(true);
        assert!(!stream_applies(4, 2560, 2560, DType::Bf16, false, &small));
        // A K past 64 spans of 384: the window plan takes 17 rows.
        let deep = 64 * 384 + 128;
        assert!(!stream_applies(17, deep, 256, DType::Bf16, false, &c));
        assert!(window_applies(17, deep, 256, DType::Bf16, false, &c));
        assert!(stream_chosen(17, deep, 256, DType::Bf16, false, &c));
        // Chosen from STREAM_MIN_ROWS rows.
        assert!(!stream_chosen(1, 2560, 2560, DType::Bf16, false, &c));
        assert!(!stream_chosen(4, 2560, 2560, DType::Bf16, false, &c));
        assert!(stream_chosen(5, 2560, 2560, DType::Bf16, false, &c));
    }

    #[test]
    fn a_second_round_under_half_full_takes_one_layer_more() {
        assert!(second_round_under_half(304, 264));
        assert!(second_round_under_half(265, 264));
        assert!(!second_round_under_half(396, 264));
        assert!(!second_round_under_half(456, 264));
        assert!(!second_round_under_half(264, 264));
        assert!(!second_round_under_half(260, 264));
        // Fewer than a round, or many rounds: left alone.
        assert!(!second_round_under_half(100, 264));
        assert!(!second_round_under_half(1064, 264));
        assert!(!second_round_under_half(5, 0));
    }

    #[test]
    fn rows_per_workgroup_and_spans() {
        assert_eq!(stream_rows(1), 16);
        assert_eq!(stream_rows(16), 16);
        assert_eq!(stream_rows(17), 32);
        assert_eq!(stream_rows(32), 32);
        assert_eq!(stream_rows(33), 64);
        assert_eq!(stream_rows(64), 64);
        assert_eq!(stream_span(16), 896);
        assert_eq!(stream_span(32), 384);
        assert_eq!(stream_span(64), u32::MAX);
    }

    #[test]
    fn splits_cover_the_span_and_fill_the_compute_units() {
        let c = h100();
        // 264 workgroups wanted. Qwen3-4B gate|up (SiLU, 9728 outputs,
        // K 2560): spans of 896 need 3 layers (16 rows), 7 (32 rows), of
        // 152 plain workgroups each: past 264.
        assert_eq!(stream_splits(4, 2560, 19456, true, &c), 3);
        assert_eq!(stream_splits(32, 2560, 19456, true, &c), 7);
        // down (2560 from 9728): 20 workgroups, 14 layers (280).
        assert_eq!(stream_splits(4, 9728, 2560, false, &c), 14);
        // 64 rows: no span, so gate|up splits only to fill the units (3
        // layers of 152: 2 would leave a round of 40), down as at 4 rows.
        assert_eq!(stream_splits(64, 2560, 19456, true, &c), 3);
        assert_eq!(stream_splits(64, 9728, 2560, false, &c), 14);
        // LM head (151936 rows from 2560): 1187 workgroups a layer, but 3
        // spans.
        assert_eq!(stream_splits(4, 2560, 151936, false, &c), 3);
        // A shallow K with many rows of W: one pass.
        assert_eq!(stream_splits(4, 512, 151936, false, &c), 1);
        // Layers at least 256 deep where the span allows.
        assert_eq!(stream_splits(4, 512, 256, false, &c), 2);
        assert_eq!(stream_splits(4, 128, 256, false, &c), 1);
        assert_eq!(stream_splits(4, 1 << 15, 16, false, &c), LINEAR_MAX_SPLITS);
        // The window form at any row count: no span, so only the units;
        // at 64 rows gate|up's 2 layers (304 workgroups) would leave a
        // second round of 40, so 3 (456).
        assert_eq!(window_splits(4, 2560, 19456, true, &c), 2);
        assert_eq!(window_splits(32, 2560, 19456, true, &c), 2);
        assert_eq!(window_splits(33, 2560, 19456, true, &c), 3);
        assert_eq!(window_splits(32, 9728, 2560, false, &c), 14);
        assert_eq!(window_splits(32, 1 << 15, 151936, false, &c), 1);
        // Every chosen count gives layers within the span.
        for m in [2, 16, 17, 32, 33, 64] {
            for (k, n) in [(2560, 19456), (9728, 2560), (24576, 256), (128, 16)] {
                let s = stream_splits(m, k, n, false, &c);
                assert!(
                    layers(k, s, STEP).0 <= stream_span(stream_rows(m)),
                    "{m} {k} {n}"
                );
            }
        }
    }

    #[test]
    fn only_k_layers_of_an_in_place_residual_add_into_y() {
        assert!(adds_into(2, true, true));
        assert!(adds_into(13, true, true));
        // One layer applies the epilogue itself; without atomics or with
        // a residual beside y the reduction pass adds the layers.
        assert!(!adds_into(1, true, true));
        assert!(!adds_into(5, false, true));
        assert!(!adds_into(5, true, false));
    }

    #[test]
    fn every_form_has_a_kernel() {
        for d in [DType::F16, DType::Bf16] {
            for m in [1, 16, 17, 32, 33, 64] {
                for mode in 0..3 {
                    let name = kernel_name(d, form(m, false), mode).unwrap();
                    assert!(crate::builtins::spirv(name).is_some(), "{name}");
                }
            }
        }
        for d in [DType::F16, DType::Bf16] {
            for m in [1, 32, 33, 64] {
                for mode in 0..3 {
                    assert!(form(m, true).1);
                    let name = kernel_name(d, form(m, true), mode).unwrap();
                    assert!(crate::builtins::spirv(name).is_some(), "{name}");
                }
            }
        }
        // Past 32 rows the span plan runs the window form.
        assert_eq!(form(33, false), (64, true));
        assert_eq!(form(32, false), (32, false));
        assert_eq!(form(16, true), (32, true));
        let name = |d, f, mode| kernel_name(d, f, mode).unwrap();
        assert_eq!(name(DType::Bf16, (16, false), 1), "linear_tc_bf16_m16_res");
        assert_eq!(name(DType::Bf16, (32, false), 2), "linear_tc_bf16_m32_silu");
        assert_eq!(name(DType::Bf16, (32, true), 2), "linear_tc_bf16_w32_silu");
        assert_eq!(name(DType::F16, (64, true), 0), "linear_tc_f16_w64");
        assert_eq!(kernel_name(DType::F32, (16, false), 0), None);
        assert_eq!(kernel_name(DType::Bf16, (64, false), 0), None);
        assert_eq!(kernel_name(DType::Bf16, (16, true), 0), None);
        assert_eq!(kernel_name(DType::Bf16, (16, false), 4), None);
        assert_eq!(
            name(DType::Bf16, (16, false), ADD_MODE),
            "linear_tc_bf16_m16_add"
        );
        for d in [DType::F16, DType::Bf16] {
            for f in [(16, false), (32, false), (32, true), (64, true)] {
                let add = name(d, f, ADD_MODE);
                assert!(crate::builtins::spirv(add).is_some(), "{add}");
            }
        }
    }
}
