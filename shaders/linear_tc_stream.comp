#version 450
// y = x·Wᵀ for a few rows of x (M ≤ 64) on subgroup-scope cooperative
// matrices of the Khronos extension (16×16×16 f16 → f32), streaming W once:
// the tensor-core form of the skinny linear kernels (ops::linear,
// src/ops/matmul/skinny/tc_stream.rs).
//
// Operands: x is M×K f32 (binding 0), W is N×K row-major as nn.Linear
// stores it (binding 1): f16, or bfloat16 with B_BF16, y is f32 (binding 2).
// The product is computed transposed, yᵀ = W·xᵀ, so that W's rows are the
// A operand as stored and x the B operand.
//
// A workgroup is 8 subgroups of 32 and covers one span of K (all of it, or
// one split-K layer's). It first converts x's rows over that span to f16
// into shared memory (zeros past M), one barrier. With XWIN (the w32 and
// w64 forms; the only one for 64 rows, whose span would not fit) x
// streams through a window of two 64-deep steps instead: the whole
// workgroup converts the next step into one buffer while the other is
// multiplied, one barrier per step. Each subgroup owns
// 16 rows of W: rows n0 + 16·s (the plain and residual forms, 128 rows per
// workgroup), or with EPI_SILU gate rows o0 + 16·s for s < 4 and the
// matching up rows N/2 + o0 + 16·(s − 4) for the others (64 outputs per
// workgroup). It streams them along K in steps of 64, each row read in
// order: 8 lanes read 128 contiguous bytes of a row per load, four rows
// per instruction, 4 loads of 16 bytes per lane and step, and the two
// steps after the one being multiplied are in flight in two register sets
// (the loop is written out in pairs), so 256 contiguous bytes of each row
// are in flight (XWIN: the next step, one set; see main). A step is
// converted to f16 (bf16 widened exactly: each bf16's bits shifted up 16
// are the f32 it stands for, rounded to f16 in pairs with packHalf2x16)
// into the subgroup's own region of shared memory (rows skewed by 16
// bytes) and multiplied from there: 4 depths of one 16×16 piece of W
// against the TILE_BM/16 pieces of xᵀ; no subgroup waits on another until
// the epilogue (XWIN: until the step's end). That keeps every weight in
// f16's normal range (6.1e-5 to 65504) exact (bf16's 8 significant bits
// fit f16's 11); larger magnitudes become ±inf, smaller ones lose bits as f16
// subnormals, as in shaders/matmul_cm2_decode.comp. Accumulators:
// TILE_BM/16 pieces of 16×16 f32 per subgroup, written out without arrays
// (NVIDIA's driver ran arrays of cooperative matrices at a tenth of the
// rate of separate values).
//
// Epilogue, through the subgroups' regions of shared memory (the pieces
// are yᵀ; the scratch turns them into rows of y with bounds tests; with
// EPI_SILU, after a barrier, the gate subgroups read the up pieces of the
// subgroup four on):
//   none          y = x·Wᵀ (and the split-K partials: see below)
//   EPI_RESIDUAL  y = x·Wᵀ + R (binding 3, f32 M×N; R may be y's buffer:
//                 each element is read by the invocation that writes it)
//   EPI_SILU      W holds a merged gate|up weight of N = 2·I rows; y is M×I,
//                 silu(gate)·up
//
// Needs K a multiple of 128 and each span at most XSPAN deep (896 for 16
// rows of x, 384 for 32: x's span fills the 48 KiB left; any depth with
// XWIN); the Rust side also keeps the outputs (N, or N/2 with EPI_SILU)
// a multiple of 16. M from 1 to TILE_BM. Push constants: M, K, N, two unused words (the
// layout of matmul_cm2_decode.comp's linear forms), strideC and kslice.
// Grid: (ceil(outputs / (128 or 64)), 1, layers). kslice 0: one layer over
// all of K (K ≤ XSPAN, any K with XWIN), epilogue applied. kslice > 0 (a
// multiple of 128, at most XSPAN without XWIN): layer z computes the partial product over K in [z·kslice,
// (z+1)·kslice) into y + z·strideC (plain form only; the split-K reduction
// pass of the other kernels adds the layers and applies the epilogue).
//
// With ADD_INTO (the `_add` variants of the plain form, K layers only)
// each layer adds its partial product into y with f32 atomic adds
// (VK_EXT_shader_atomic_float) in place of writing it to the partials'
// buffer: y already holds the residual (an in-place residual add), and no
// reduction pass follows. The layers' sums land in the order the atomics
// do, so the result may differ in its last bits from run to run.
//
// Compiled for Vulkan 1.3 by a glslang that knows GL_KHR_cooperative_matrix
// (scripts/glslang_trixie.sh). Needs a 32-lane subgroup, shaderFloat16 and
// 16-bit storage.
//
// target-env: vulkan1.3
// variant: linear_tc_f16_m16 TILE_BM=16
// variant: linear_tc_f16_m16_res TILE_BM=16 EPI_RESIDUAL=1
// variant: linear_tc_f16_m16_silu TILE_BM=16 EPI_SILU=1
// variant: linear_tc_f16_m32 TILE_BM=32
// variant: linear_tc_f16_m32_res TILE_BM=32 EPI_RESIDUAL=1
// variant: linear_tc_f16_m32_silu TILE_BM=32 EPI_SILU=1
// variant: linear_tc_bf16_m16 TILE_BM=16 B_BF16=1
// variant: linear_tc_bf16_m16_res TILE_BM=16 B_BF16=1 EPI_RESIDUAL=1
// variant: linear_tc_bf16_m16_silu TILE_BM=16 B_BF16=1 EPI_SILU=1
// variant: linear_tc_bf16_m32 TILE_BM=32 B_BF16=1
// variant: linear_tc_bf16_m32_res TILE_BM=32 B_BF16=1 EPI_RESIDUAL=1
// variant: linear_tc_bf16_m32_silu TILE_BM=32 B_BF16=1 EPI_SILU=1
// variant: linear_tc_f16_w32 TILE_BM=32 XWIN=1
// variant: linear_tc_f16_w32_res TILE_BM=32 XWIN=1 EPI_RESIDUAL=1
// variant: linear_tc_f16_w32_silu TILE_BM=32 XWIN=1 EPI_SILU=1
// variant: linear_tc_bf16_w32 TILE_BM=32 XWIN=1 B_BF16=1
// variant: linear_tc_bf16_w32_res TILE_BM=32 XWIN=1 B_BF16=1 EPI_RESIDUAL=1
// variant: linear_tc_bf16_w32_silu TILE_BM=32 XWIN=1 B_BF16=1 EPI_SILU=1
// variant: linear_tc_f16_w64 TILE_BM=64 XWIN=1
// variant: linear_tc_f16_w64_res TILE_BM=64 XWIN=1 EPI_RESIDUAL=1
// variant: linear_tc_f16_w64_silu TILE_BM=64 XWIN=1 EPI_SILU=1
// variant: linear_tc_bf16_w64 TILE_BM=64 XWIN=1 B_BF16=1
// variant: linear_tc_bf16_w64_res TILE_BM=64 XWIN=1 B_BF16=1 EPI_RESIDUAL=1
// variant: linear_tc_bf16_w64_silu TILE_BM=64 XWIN=1 B_BF16=1 EPI_SILU=1
// variant: linear_tc_f16_m16_add TILE_BM=16 ADD_INTO=1
// variant: linear_tc_f16_m32_add TILE_BM=32 ADD_INTO=1
// variant: linear_tc_f16_w32_add TILE_BM=32 XWIN=1 ADD_INTO=1
// variant: linear_tc_f16_w64_add TILE_BM=64 XWIN=1 ADD_INTO=1
// variant: linear_tc_bf16_m16_add TILE_BM=16 B_BF16=1 ADD_INTO=1
// variant: linear_tc_bf16_m32_add TILE_BM=32 B_BF16=1 ADD_INTO=1
// variant: linear_tc_bf16_w32_add TILE_BM=32 XWIN=1 B_BF16=1 ADD_INTO=1
// variant: linear_tc_bf16_w64_add TILE_BM=64 XWIN=1 B_BF16=1 ADD_INTO=1
#extension GL_KHR_cooperative_matrix : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#extension GL_EXT_control_flow_attributes : enable
#extension GL_KHR_shader_subgroup_basic : enable
#ifdef ADD_INTO
#extension GL_EXT_shader_atomic_float : require
#endif

#ifndef TILE_BM
#define TILE_BM 16
#endif
#if defined(XWIN)
#if TILE_BM != 32 && TILE_BM != 64
#error "XWIN: TILE_BM 32 or 64"
#endif
#elif TILE_BM == 16
#define XSPAN 896
#elif TILE_BM == 32
#define XSPAN 384
#else
#error "TILE_BM: 16 or 32 (64 with XWIN)"
#endif
const uint BM = TILE_BM;
const uint SK = 64;                 // depth of a step
const uint ST = SK / 8 + 1;         // staged W row stride, 16-byte units (skew 1)
const uint REGION = 16 * ST;        // a subgroup's staging region, 16-byte units
#ifdef XWIN
const uint XST = ST;                // x window row stride, 16-byte units (skew 1)
const uint XBUF = BM * XST;         // one step of the window
const uint XB = 8 * REGION;         // the window's two steps follow the W regions
const uint SCRATCH = BM * 4;        // a subgroup's epilogue scratch: BM/16 pieces
#else
const uint XST = XSPAN / 8 + 1;     // staged x row stride, 16-byte units (skew 1)
const uint SCRATCH = REGION;        // the epilogue's scratch is the W region
#endif

layout(local_size_x = 256) in;

layout(std430, set = 0, binding = 0) readonly buffer MatX { vec4 x4[]; };
layout(std430, set = 0, binding = 1) readonly buffer MatW { uvec4 w[]; };
#ifdef ADD_INTO
layout(std430, set = 0, binding = 2) buffer MatY { float y[]; };
#else
layout(std430, set = 0, binding = 2) writeonly buffer MatY { float y[]; };
#endif
#ifdef EPI_RESIDUAL
layout(std430, set = 0, binding = 3) readonly buffer MatR { float r[]; };
#endif
layout(push_constant) uniform Shape {
    uint M; uint K; uint N; uint unusedA; uint unusedB; uint strideC; uint kslice;
};

#ifdef XWIN
// W regions, then the window; the epilogue's scratch spans both.
shared uvec4 Ws[XB + 2 * XBUF];
#else
shared uvec4 Ws[8 * REGION];
shared uvec4 Xs[BM * XST];
#endif

#define ACC coopmat<float, gl_ScopeSubgroup, 16, 16, gl_MatrixUseAccumulator>
#define FRAG_A coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseA>
#define FRAG_B coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseB>
#define ROW_MAJOR gl_CooperativeMatrixLayoutRowMajor
#define COL_MAJOR gl_CooperativeMatrixLayoutColumnMajor

#ifdef B_BF16
// Two bf16 in a word as two f16 in a word.
uint widen2(uint v) {
    return packHalf2x16(vec2(uintBitsToFloat(v << 16), uintBitsToFloat(v & 0xffff0000u)));
}
uvec4 widen(uvec4 c) {
    return uvec4(widen2(c.x), widen2(c.y), widen2(c.z), widen2(c.w));
}
#else
uvec4 widen(uvec4 c) {
    return c;
}
#endif

// Chunk j (8 weights) of a step for this lane: row 4·j + lane / 8 of the
// subgroup's 16 from `first` (zeros where `live` is false: rows past the
// outputs), 16-byte piece lane % 8 from depth k.
uvec4 load_w(uint j, uint first, bool live, uint k) {
    const uint lane = gl_SubgroupInvocationID;
    const uint row = 4 * j + lane / 8;
    return live ? w[((first + row) * K + k) / 8 + lane % 8] : uvec4(0);
}
uint w_slot(uint j, uint sg) {
    const uint lane = gl_SubgroupInvocationID;
    return sg * REGION + (4 * j + lane / 8) * ST + lane % 8;
}

#define REGS(S) uvec4 S##0; uvec4 S##1; uvec4 S##2; uvec4 S##3;
// The step at depth k into register set S; set S into the region.
#define LOAD(S, k) { \
    S##0 = load_w(0, first, live, k); S##1 = load_w(1, first, live, k); \
    S##2 = load_w(2, first, live, k); S##3 = load_w(3, first, live, k); }
#define STORE(S) { \
    Ws[w_slot(0, sg)] = widen(S##0); Ws[w_slot(1, sg)] = widen(S##1); \
    Ws[w_slot(2, sg)] = widen(S##2); Ws[w_slot(3, sg)] = widen(S##3); }

#ifdef XWIN
// xᵀ piece f at depth kk (a multiple of 16) of the window's step buffer XW.
#define X_PIECE(fb, f, kk) coopMatLoad(fb, Ws, XB + XW * XBUF + (f) * 16 * XST + (kk) / 8, XST, COL_MAJOR)
#else
// xᵀ piece f at span depth kk (a multiple of 16).
#define X_PIECE(fb, f, kk) coopMatLoad(fb, Xs, (f) * 16 * XST + (kk) / 8, XST, COL_MAJOR)
#endif
#define W_PIECE(fa, d) coopMatLoad(fa, Ws, sg * REGION + (d) * 2, ST, ROW_MAJOR)

#if TILE_BM == 16
#define ACC_DECL ACC c0 = ACC(0.0);
#define DEPTH(kk, d) { FRAG_A a; FRAG_B b0; W_PIECE(a, d); X_PIECE(b0, 0, kk + 16 * d); \
    c0 = coopMatMulAdd(a, b0, c0); }
#elif TILE_BM == 32
#define ACC_DECL ACC c0 = ACC(0.0); ACC c1 = ACC(0.0);
#define DEPTH(kk, d) { FRAG_A a; FRAG_B b0; FRAG_B b1; W_PIECE(a, d); \
    X_PIECE(b0, 0, kk + 16 * d); X_PIECE(b1, 1, kk + 16 * d); \
    c0 = coopMatMulAdd(a, b0, c0); c1 = coopMatMulAdd(a, b1, c1); }
#else
#define ACC_DECL ACC c0 = ACC(0.0); ACC c1 = ACC(0.0); ACC c2 = ACC(0.0); ACC c3 = ACC(0.0);
#define DEPTH(kk, d) { FRAG_A a; FRAG_B b0; FRAG_B b1; FRAG_B b2; FRAG_B b3; W_PIECE(a, d); \
    X_PIECE(b0, 0, kk + 16 * d); X_PIECE(b1, 1, kk + 16 * d); \
    X_PIECE(b2, 2, kk + 16 * d); X_PIECE(b3, 3, kk + 16 * d); \
    c0 = coopMatMulAdd(a, b0, c0); c1 = coopMatMulAdd(a, b1, c1); \
    c2 = coopMatMulAdd(a, b2, c2); c3 = coopMatMulAdd(a, b3, c3); }
#endif
// The staged step at span depth kk, 4 pieces deep.
#define MULTIPLY(kk) { DEPTH(kk, 0) DEPTH(kk, 1) DEPTH(kk, 2) DEPTH(kk, 3) }

// The epilogue's scratch: f32 value e of subgroup s's piece p.
float scratch(uint s, uint p, uint e) {
    return uintBitsToFloat(Ws[s * SCRATCH + p * 64 + e / 4][e % 4]);
}

#ifdef XWIN
// The window: invocation i converts 16-byte units i + 256·u (u below
// XUNITS) of a step, unit q being row q / 8, depths 8·(q % 8).., of x.
const uint XUNITS = BM * 8 / 256;
// x's step at depth k as f16 into the window's step buffer b (zeros past
// M).
void xstage(uint k, uint b) {
    vec4 p[XUNITS];
    vec4 h[XUNITS];
    [[unroll]] for (uint u = 0; u < XUNITS; u++) {
        const uint q = gl_LocalInvocationID.x + 256 * u;
        p[u] = vec4(0.0);
        h[u] = vec4(0.0);
        if (q / 8 < M) {
            const uint at = ((q / 8) * K + k) / 4 + 2 * (q % 8);
            p[u] = x4[at];
            h[u] = x4[at + 1];
        }
    }
    [[unroll]] for (uint u = 0; u < XUNITS; u++) {
        const uint q = gl_LocalInvocationID.x + 256 * u;
        Ws[XB + b * XBUF + (q / 8) * XST + q % 8] = uvec4(packHalf2x16(p[u].xy),
            packHalf2x16(p[u].zw), packHalf2x16(h[u].xy), packHalf2x16(h[u].zw));
    }
}
#define XSTAGE(k, b) xstage(k, b);
#endif

// Writes piece f (output rows row.., rows 16·f.. of x) of yᵀ from the
// subgroup's scratch piece f (with EPI_SILU, times silu of the gate and
// the up piece of subgroup sg + 4) into y, with the epilogue.
void finish(uint sg, uint row, uint f, uint outs, uint oc, bool partial) {
    for (uint e = gl_SubgroupInvocationID; e < 256; e += gl_SubgroupSize) {
        const uint n = row + e % 16;
        const uint m = 16 * f + e / 16;
        if (m >= M || n >= outs) {
            continue;
        }
        float v = scratch(sg, f, e);
        const uint at = m * outs + n;
#ifdef EPI_SILU
        const float u = scratch(sg + 4, f, e);
        v = v / (1.0 + exp(-v)) * u;
#endif
#ifdef EPI_RESIDUAL
        if (!partial) {
            v += r[at];
        }
#endif
#ifdef ADD_INTO
        atomicAdd(y[at], v);
#else
        y[oc + at] = v;
#endif
    }
}

void main() {
    const uint sg = gl_SubgroupID;
    const uint z = gl_WorkGroupID.z;
    const bool partial = kslice != 0;
    const uint kbeg = partial ? z * kslice : 0;
    const uint kend = partial ? min(K, kbeg + kslice) : K;
    const uint span = kend - kbeg;
    const uint steps = span / SK;
    const uint oc = partial ? z * strideC : 0;
#ifdef EPI_SILU
    const uint outs = N / 2;
    // Output rows of the gate piece this subgroup's rows pair with; W rows.
    const uint out0 = gl_WorkGroupID.x * 64 + 16 * (sg % 4);
    const uint first = sg < 4 ? out0 : outs + out0;
#else
    const uint outs = N;
    const uint out0 = gl_WorkGroupID.x * 128 + 16 * sg;
    const uint first = out0;
#endif
    // Whether this subgroup's 16 rows exist (whole pieces or none: the
    // outputs are pieces of 16).
    const bool live = out0 < outs;

    ACC_DECL
    REGS(A)
    REGS(B)
    LOAD(A, kbeg)
#ifndef XWIN
    if (steps > 1) {
        LOAD(B, kbeg + SK)
    }
#endif

#ifdef XWIN
    // The first step of x into buffer 0. Step s then begins by converting
    // step s + 1 of x into the other buffer (every subgroup finished step
    // s − 1, its last reader, before the barrier that ended it), and ends
    // with a barrier that publishes it. One register set of W (the next
    // step in flight) and x's registers live only while a step is staged:
    // on an H200 that held the 64-row form at 118 registers, two
    // workgroups per compute unit, against 142–151 with x held across the
    // products and two sets of W in flight (4.70 against 6.16 ms for the
    // Qwen3-4B FFN stack at 64 rows).
    XSTAGE(kbeg, 0)
    barrier();
    for (uint s = 0; s < steps; s++) {
        if (s + 1 < steps) {
            XSTAGE(kbeg + (s + 1) * SK, (s + 1) & 1)
        }
        STORE(A)
        subgroupBarrier();
        if (s + 1 < steps) {
            LOAD(A, kbeg + (s + 1) * SK)
        }
        {
            const uint XW = s & 1;
            MULTIPLY(0)
        }
        barrier();
    }
#else
    // x's rows over the span as f16 (zeros past M).
    const uint chunks = span / 8;
    for (uint q = gl_LocalInvocationID.x; q < BM * chunks; q += 256) {
        const uint row = q / chunks;
        const uint c = q % chunks;
        uvec4 h = uvec4(0);
        if (row < M) {
            const uint at = (row * K + kbeg) / 4 + 2 * c;
            const vec4 p = x4[at];
            const vec4 s = x4[at + 1];
            h = uvec4(packHalf2x16(p.xy), packHalf2x16(p.zw), packHalf2x16(s.xy), packHalf2x16(s.zw));
        }
        Xs[row * XST + c] = h;
    }
    barrier();

    // Step s at span depth s·64: set A holds the even steps, set B the
    // odd ones.
    for (uint s = 0; s < steps; s += 2) {
        STORE(A)
        subgroupBarrier();
        if (s + 2 < steps) {
            LOAD(A, kbeg + (s + 2) * SK)
        }
        MULTIPLY(s * SK)
        subgroupBarrier();
        if (s + 1 >= steps) {
            break;
        }
        STORE(B)
        subgroupBarrier();
        if (s + 3 < steps) {
            LOAD(B, kbeg + (s + 3) * SK)
        }
        MULTIPLY((s + 1) * SK)
        subgroupBarrier();
    }

#endif

    // Pieces into the subgroup's scratch (offsets in 16-byte units, row
    // stride 16 f32 = 4 units), then out. With XWIN the scratch spans the
    // window and other subgroups' regions: the loop's last barrier has
    // every subgroup done reading them.
    coopMatStore(c0, Ws, sg * SCRATCH, 4, COL_MAJOR);
#if TILE_BM >= 32
    coopMatStore(c1, Ws, sg * SCRATCH + 64, 4, COL_MAJOR);
#endif
#if TILE_BM == 64
    coopMatStore(c2, Ws, sg * SCRATCH + 128, 4, COL_MAJOR);
    coopMatStore(c3, Ws, sg * SCRATCH + 192, 4, COL_MAJOR);
#endif
#ifdef EPI_SILU
    barrier();
    if (sg >= 4 || !live) {
        return;
    }
#else
    subgroupBarrier();
    if (!live) {
        return;
    }
#endif
    finish(sg, out0, 0, outs, oc, partial);
#if TILE_BM >= 32
    finish(sg, out0, 1, outs, oc, partial);
#endif
#if TILE_BM == 64
    finish(sg, out0, 2, outs, oc, partial);
    finish(sg, out0, 3, outs, oc, partial);
#endif
}
