// How decode attention (nn_attn_decode.comp, nn_attn_combine.comp) splits
// a sequence of `len` positions over its `chunks` workgroups along x: each
// takes `span` consecutive positions, span = max(ceil(len / chunks),
// MIN_SPAN), so that every workgroup is busy once the sequence is long and
// a short one still runs on ceil(len / MIN_SPAN) of them. The active chunks
// are ceil(len / span) <= chunks. (`span` and `active_chunks` in
// src/ops/nn/attention.rs.)
#ifndef VKC_NN_ATTN_SPAN_GLSL
#define VKC_NN_ATTN_SPAN_GLSL
#define MIN_SPAN 64u
uint attn_span(uint len, uint chunks) { return max((len + chunks - 1u) / chunks, MIN_SPAN); }
uint attn_active(uint len, uint chunks) {
    uint span = attn_span(len, chunks);
    return (len + span - 1u) / span;
}
#endif
