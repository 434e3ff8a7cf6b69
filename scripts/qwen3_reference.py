#!/usr/bin/env python3
"""Hugging Face transformers as the reference for examples/qwen3: builds a
Qwen3 model from a config with seeded random weights on the GPU, saves it
with save_pretrained (bf16 safetensors, the layout examples/qwen3 loads),
and writes what our run is checked and timed against.

Correctness (written to DIR/reference.safetensors): the saved checkpoint
loaded with from_pretrained(dtype=float32) (the same bf16-rounded weights,
widened exactly; the rotary frequencies computed in f32; TF32 off) run on a
fixed prompt of seeded token ids, then greedy decode of --decode
tokens with a KV cache. Tensors: `prompt` (I32 [P]), `tokens` (I32 [N], the
greedy tokens; tokens[0] follows the prompt), `logits` (F32 [N, vocab]: row
0 at the last prompt position, row i >= 1 from the step that consumed
tokens[i-1]). examples/qwen3 --reference FILE teacher-forces the same tokens
and compares every row.

Timing (printed as JSON on stdout, also DIR/reference_timing.json): the bf16
model (what the checkpoint stores), batch 1, greedy:
  - eager `generate`: per-token time from generating --decode + 1 against 1
    new tokens (the difference over --decode tokens), median of --reps;
  - `generate(..., cache_implementation="static")`, which compiles itself
    (minutes of warm-up the first time: --static-warm runs before timing);
  - prefill of --prefill tokens (512), eager forward with use_cache, median;
  - peak device memory of the bf16 decode.

    python3 scripts/qwen3_reference.py --out DIR [--size 4b|tiny] [--seed 0]
        [--prompt 16] [--decode 32] [--prefill 512] [--reps 3]
        [--no-static] [--no-timing]

--size 4b: Qwen3-4B's shapes (36 layers, hidden 2560, 32 query / 8 KV heads
of 128, intermediate 9728, vocab 151936, tied embeddings, rope_theta 1e6).
--size tiny: 2 layers, hidden 256, for a quick check of the pipeline.
"""
import argparse
import json
import os
import statistics
import time

import torch
from safetensors.torch import save_file
from transformers import Qwen3Config, Qwen3ForCausalLM


def parse():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", required=True)
    p.add_argument("--size", default="4b", choices=["4b", "tiny"])
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--prompt", type=int, default=16)
    p.add_argument("--decode", type=int, default=32)
    p.add_argument("--prefill", type=int, default=512)
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--no-static", action="store_true")
    p.add_argument("--no-timing", action="store_true")
    return p.parse_args()


def config(size):
    if size == "4b":
        shape = dict(hidden_size=2560, intermediate_size=9728, num_hidden_layers=36,
                     num_attention_heads=32, num_key_value_heads=8, head_dim=128,
                     vocab_size=151936)
    else:
        shape = dict(hidden_size=256, intermediate_size=768, num_hidden_layers=2,
                     num_attention_heads=8, num_key_value_heads=4, head_dim=64,
                     vocab_size=1024)
    return Qwen3Config(**shape, tie_word_embeddings=True, rope_theta=1e6,
                       rms_norm_eps=1e-6, max_position_embeddings=40960,
                       torch_dtype="bfloat16", bos_token_id=None, eos_token_id=None)


def sync_ms(fn):
    torch.cuda.synchronize()
    t = time.perf_counter()
    out = fn()
    torch.cuda.synchronize()
    return (time.perf_counter() - t) * 1e3, out


@torch.no_grad()
def reference_logits(model, prompt, steps):
    """Greedy decode with a KV cache; logits of every step in f32."""
    out = model(input_ids=prompt[None], use_cache=True)
    rows = [out.logits[0, -1].float()]
    tokens = [int(rows[0].argmax())]
    cache = out.past_key_values
    for _ in range(1, steps):
        ids = torch.tensor([[tokens[-1]]], device=prompt.device)
        out = model(input_ids=ids, past_key_values=cache, use_cache=True)
        cache = out.past_key_values
        rows.append(out.logits[0, -1].float())
        tokens.append(int(rows[-1].argmax()))
    return torch.stack(rows), tokens


@torch.no_grad()
def per_token_ms(model, prompt, n, reps, **kw):
    """(time of n + 1 new tokens - time of 1) / n, median of reps."""
    def gen(k):
        return model.generate(prompt[None], max_new_tokens=k, min_new_tokens=k,
                              do_sample=False, pad_token_id=0, **kw)
    times = []
    for _ in range(reps):
        t1, _ = sync_ms(lambda: gen(1))
        tn, _ = sync_ms(lambda: gen(n + 1))
        times.append((tn - t1) / n)
    return statistics.median(times), min(times), max(times)


def main():
    a = parse()
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    os.makedirs(a.out, exist_ok=True)
    dev = torch.device("cuda")
    cfg = config(a.size)
    report = {"size": a.size, "seed": a.seed, "device": torch.cuda.get_device_name(0),
              "torch": torch.__version__}
    import transformers
    report["transformers"] = transformers.__version__

    t = time.perf_counter()
    torch.manual_seed(a.seed)
    with dev:
        model = Qwen3ForCausalLM(cfg).to(torch.bfloat16)
    model.eval()
    model.generation_config.eos_token_id = None
    torch.cuda.synchronize()
    report["build_s"] = time.perf_counter() - t
    t = time.perf_counter()
    model.save_pretrained(a.out, safe_serialization=True)
    report["save_s"] = time.perf_counter() - t
    params = sum(p.numel() for p in model.parameters())
    report["params"] = params
    report["weight_bytes_bf16"] = params * 2

    g = torch.Generator().manual_seed(a.seed + 1)
    prompt = torch.randint(0, cfg.vocab_size, (a.prompt,), generator=g).to(dev)

    # Correctness: f32 on the bf16-rounded weights, loaded from the saved
    # checkpoint as a user would (from_pretrained in float32). Widening the
    # in-memory model with .float() would not do: casting it to bf16 also
    # rounded the rotary embedding's inv_freq buffer (not saved in the
    # checkpoint), whose error reaches 1e-3 of the logits.
    model32 = Qwen3ForCausalLM.from_pretrained(a.out, dtype=torch.float32).to(dev)
    model32.eval()
    report["reference_rope_inv_freq_dtype"] = str(model32.model.rotary_emb.inv_freq.dtype)
    t = time.perf_counter()
    logits, tokens = reference_logits(model32, prompt, a.decode)
    report["reference_s"] = time.perf_counter() - t
    save_file({"prompt": prompt.to(torch.int32).cpu().contiguous(),
               "tokens": torch.tensor(tokens, dtype=torch.int32),
               "logits": logits.cpu().contiguous()},
              os.path.join(a.out, "reference.safetensors"))
    top2 = logits.topk(2, dim=-1).values
    report["reference_max_abs_logit"] = float(logits.abs().max())
    report["reference_top2_margin_min"] = float((top2[:, 0] - top2[:, 1]).min())
    del model32
    torch.cuda.empty_cache()

    if not a.no_timing:
        torch.cuda.reset_peak_memory_stats()
        med, lo, hi = per_token_ms(model, prompt, a.decode, a.reps)
        report["eager_ms_per_token"] = med
        report["eager_ms_per_token_min"] = lo
        report["eager_ms_per_token_max"] = hi
        report["eager_peak_bytes"] = torch.cuda.max_memory_allocated()
        p512 = torch.randint(0, cfg.vocab_size, (1, a.prefill), generator=g).to(dev)
        with torch.no_grad():
            for _ in range(2):
                sync_ms(lambda: model(input_ids=p512, use_cache=True))
            pre = [sync_ms(lambda: model(input_ids=p512, use_cache=True))[0]
                   for _ in range(max(a.reps, 5))]
        report["prefill_tokens"] = a.prefill
        report["eager_prefill_ms"] = statistics.median(pre)
        report["eager_prefill_min_ms"] = min(pre)
        report["eager_prefill_max_ms"] = max(pre)
        if not a.no_static:
            t = time.perf_counter()
            # The first calls compile (torch.compile inside generate), for
            # both lengths the timing uses.
            per_token_ms(model, prompt, a.decode, 1, cache_implementation="static")
            report["static_warm_s"] = time.perf_counter() - t
            med, lo, hi = per_token_ms(model, prompt, a.decode, a.reps,
                                       cache_implementation="static")
            report["static_ms_per_token"] = med
            report["static_ms_per_token_min"] = lo
            report["static_ms_per_token_max"] = hi
            report["static_tokens_per_s"] = 1e3 / med
            report["static_weight_GBps"] = report["weight_bytes_bf16"] / med / 1e6
    with open(os.path.join(a.out, "reference_timing.json"), "w") as f:
        json.dump(report, f, indent=1)
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
