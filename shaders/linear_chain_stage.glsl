// One stage of linear_chain.comp, included once per stage: CS is its
// index, CX / CW / CQ / CY / CG its x, W, residual, y and norm weight
// buffers, CPRE / CRUN the names of its two functions.

// Loads this subgroup's first step of the stage (the first chunks of its
// range in the workgroup's first pass) into `pre`: weights only, which no
// stage writes, so it may run before the barrier that opens the stage.
void CPRE() {
    uvec4 d = dims[CS];
    uint K = d.y, N = d.z;
    bool pairs = (d.w & 3u) == 2u;
    uint C = K / WVEC;
    uint S = gl_NumSubgroups, sg = gl_SubgroupID;
    uint lane = gl_SubgroupInvocationID, width = gl_SubgroupSize;
    [[unroll]] for (uint c = 0u; c < CPS; ++c)
        [[unroll]] for (uint i = 0u; i < R; ++i) pre[c][i] = WV(0);
    uvec2 us = wg_units(units_of(N, pairs));
    uint n = min(us.y - us.x, pass_units(S));
    uvec3 r = sg_range(n, C, sg, S);
    if (r.x >= r.y) return;
    uint ul = r.x / C;
    uint kb = r.x - ul * C, ke = min(C, r.y - ul * C);
    [[unroll]] for (uint i = 0u; i < R; ++i) {
        uint row = wrow(us.x + ul, i, N, pairs);
        [[unroll]] for (uint c = 0u; c < CPS; ++c) {
            uint k = kb + lane + c * width;
            if (row < N && k < ke) pre[c][i] = CW[row * C + k];
        }
    }
}

// Runs the stage: x into shared memory (and the norm's scales, when
// asked), then the workgroup's passes, each ending with its outputs
// stored.
void CRUN() {
    uvec4 d = dims[CS];
    uint M = d.x, K = d.y, N = d.z, mode = d.w & 3u;
    bool pairs = mode == 2u, norm = (d.w & 4u) != 0u;
    uint C = K / WVEC, k4 = K / 4u;
    uint S = gl_NumSubgroups, sg = gl_SubgroupID;
    uint lane = gl_SubgroupInvocationID, width = gl_SubgroupSize;

    // x (times the norm weight, with the norm) into shared memory: one
    // coalesced read per stage, every load of an invocation issued before
    // its first store (XV ≤ 5 · WG_SIZE). The norm's sums of squares are
    // taken in the same pass; its scale, one factor per row, multiplies
    // the finished sums, so no step waits on a second read of x.
    {
        uint n4 = M * k4, t = gl_LocalInvocationIndex;
        vec4 v[5], gv[5];
        [[unroll]] for (uint j = 0u; j < 5u; ++j) {
            uint i = t + j * uint(WG_SIZE);
            v[j] = i < n4 ? CX[i] : vec4(0.0);
            gv[j] = (norm && i < n4) ? CG[i % k4] : vec4(1.0);
        }
        float ss[MT];
        [[unroll]] for (uint m = 0u; m < uint(MT); ++m) ss[m] = 0.0;
        [[unroll]] for (uint j = 0u; j < 5u; ++j) {
            uint i = t + j * uint(WG_SIZE);
            if (i < n4) {
                xs[i] = v[j] * gv[j];
                uint row = i / k4;
                [[unroll]] for (uint m = 0u; m < uint(MT); ++m)
                    if (m == row) ss[m] += dot(v[j], v[j]);
            }
        }
        if (norm) {
            [[unroll]] for (uint m = 0u; m < uint(MT); ++m) {
                float tot = subgroupAdd(ss[m]);
                if (subgroupElect()) norm_part[m * MAX_SGS + sg] = tot;
            }
        }
    }
    barrier();
    [[unroll]] for (uint m = 0u; m < uint(MT); ++m) {
        float tot = 0.0;
        if (norm)
            for (uint g = 0u; g < S; ++g) tot += norm_part[m * MAX_SGS + g];
        xscale[m] = norm ? inversesqrt(tot / float(K) + eps[CS]) : 1.0;
    }

    uvec2 us = wg_units(units_of(N, pairs));
    uint P = pass_units(S);
    uint J = SLOTS / (S * R * uint(MT));
    bool usepre = true;
    for (uint p0 = us.x; p0 < us.y; p0 += P) {
        uint n = min(us.y - p0, P);
        uvec3 r = sg_range(n, C, sg, S);
        uint j = 0u;
        for (uint pos = r.x; pos < r.y; ++j) {
            uint ul = pos / C;
            uint kb = pos - ul * C, ke = min(C, r.y - ul * C);
            uint rows[R];
            bool ok[R];
            [[unroll]] for (uint i = 0u; i < R; ++i) {
                uint row = wrow(p0 + ul, i, N, pairs);
                ok[i] = row < N;
                rows[i] = min(row, N - 1u);
            }
            float acc[R][MT];
            [[unroll]] for (uint i = 0u; i < R; ++i)
                [[unroll]] for (uint m = 0u; m < uint(MT); ++m) acc[i][m] = 0.0;
            // CPS chunks per lane and step (k, k + width, ...), all R·CPS
            // loads of W issued before the products; chunks past ke read
            // as 0 and add nothing. The workgroup's first step was loaded
            // before the barrier (`pre`): it is taken apart from the loop,
            // so `pre` is dead once the loop starts.
            uint k = kb + lane;
            if (usepre) {
                if (k < ke) products(pre, k, ke, width, M, k4, acc);
                k += CPS * width;
            }
            for (; k < ke; k += CPS * width) {
                WV wv[CPS][R];
                [[unroll]] for (uint c = 0u; c < CPS; ++c) {
                    uint kc = k + c * width;
                    [[unroll]] for (uint i = 0u; i < R; ++i)
                        wv[c][i] = (ok[i] && kc < ke) ? CW[rows[i] * C + kc] : WV(0);
                }
                products(wv, k, ke, width, M, k4, acc);
            }
            [[unroll]] for (uint i = 0u; i < R; ++i)
                [[unroll]] for (uint m = 0u; m < uint(MT); ++m) acc[i][m] = subgroupAdd(acc[i][m]);
            if (subgroupElect()) {
                [[unroll]] for (uint i = 0u; i < R; ++i)
                    [[unroll]] for (uint m = 0u; m < uint(MT); ++m)
                        part[((sg * J + j) * R + i) * uint(MT) + m] = acc[i][m];
            }
            usepre = false;
            pos = (ul + 1u) * C;
        }
        barrier();
        uint outs = pairs ? R / 2u : R;
        for (uint idx = gl_LocalInvocationIndex; idx < n * outs * uint(MT); idx += uint(WG_SIZE)) {
            uint m = idx % uint(MT), t = idx / uint(MT);
            uint i = t % outs, ul = t / outs;
            if (m >= M) continue;
            float a = sum_parts(ul, i, m, C, r.z, S, J) * xscale[m];
            if (pairs) {
                uint jo = (p0 + ul) * (R / 2u) + i;
                if (jo < N / 2u) {
                    float up = sum_parts(ul, i + R / 2u, m, C, r.z, S, J) * xscale[m];
                    CY[m * (N / 2u) + jo] = a * vkc_sigmoid(a) * up;
                }
            } else {
                uint row = (p0 + ul) * R + i;
                if (row < N) CY[m * N + row] = mode == 1u ? a + CQ[m * N + row] : a;
            }
        }
        barrier();
    }
}
