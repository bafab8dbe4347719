"""ref_llama.py -- an independent float64 Llama / Qwen2 forward in plain
PyTorch ops, written from the published architecture (Hugging Face's
LlamaForCausalLM and Qwen2ForCausalLM are the definition; this shares no
code with them or with the C side). Used by families_io.py.

Per block: RMSNorm -> q_proj, k_proj, v_proj (biases for qwen2) -> RoPE on
all head_dim dims (rotate_half, rope_theta, rope_scaling "linear" or
"llama3") -> grouped-query attention (each kv head serves H / KV query heads,
repeat_interleave) -> causal softmax(q.k / sqrt D) -> o_proj; RMSNorm ->
down_proj(silu(gate_proj x) * up_proj x). norm -> lm_head (or tied
embed_tokens).
"""
import json
import math

import torch
import torch.nn.functional as F

from families_io import apply_rope, causal_attention


def random_model(a, g, rand):
    qwen2 = a.family == "qwen2"
    C, H, NI, V, nl = a.hidden, a.heads, a.inner, a.vocab, a.layers
    KV = a.kv_heads or H
    D = a.head_dim or C // H
    cfg = {"architectures": ["Qwen2ForCausalLM" if qwen2 else "LlamaForCausalLM"], "model_type": a.family,
           "hidden_size": C, "num_attention_heads": H, "num_key_value_heads": KV, "num_hidden_layers": nl,
           "intermediate_size": NI, "vocab_size": V, "max_position_embeddings": a.positions,
           "rms_norm_eps": 1e-6, "rope_theta": 10000.0, "hidden_act": "silu",
           "tie_word_embeddings": a.tied, "torch_dtype": "float32",
           "rope_scaling": json.loads(a.rope_scaling) if a.rope_scaling else None}
    if a.head_dim:
        cfg["head_dim"] = D
    if qwen2:
        cfg.update({"use_sliding_window": False, "sliding_window": 4096, "max_window_layers": nl})
    t = [("model.embed_tokens.weight", rand(g, (V, C), 1.0))]
    for l in range(nl):
        p = f"model.layers.{l}."
        t.append((p + "input_layernorm.weight", 1 + rand(g, (C,), 0.1)))
        for n, rows in (("q", H * D), ("k", KV * D), ("v", KV * D)):
            t.append((p + f"self_attn.{n}_proj.weight", rand(g, (rows, C), 2.5 / math.sqrt(C))))
            if qwen2:
                t.append((p + f"self_attn.{n}_proj.bias", rand(g, (rows,), 0.3)))
        t += [(p + "self_attn.o_proj.weight", rand(g, (C, H * D), 1 / math.sqrt(H * D))),
              (p + "post_attention_layernorm.weight", 1 + rand(g, (C,), 0.1)),
              (p + "mlp.gate_proj.weight", rand(g, (NI, C), 1 / math.sqrt(C))),
              (p + "mlp.up_proj.weight", rand(g, (NI, C), 1 / math.sqrt(C))),
              (p + "mlp.down_proj.weight", rand(g, (C, NI), 1 / math.sqrt(NI)))]
    t.append(("model.norm.weight", 1 + rand(g, (C,), 0.1)))
    if not a.tied:
        t.append(("lm_head.weight", rand(g, (V, C), 1 / math.sqrt(C))))
    return cfg, t


def inv_frequencies(cfg, D):
    """theta^(-2i/D), then rope_scaling: "linear" divides by factor; "llama3" divides the
    wavelengths above original/low_freq_factor, keeps those below original/high_freq_factor
    and blends linearly in 1/wavelength between."""
    f = 1.0 / (cfg.get("rope_theta", 10000.0) ** (torch.arange(0, D, 2, dtype=torch.float64) / D))
    rs = cfg.get("rope_scaling") or {}
    kind = rs.get("rope_type", rs.get("type", "default"))
    if kind == "linear":
        return f / rs["factor"]
    if kind == "llama3":
        factor, lo, hi = rs["factor"], rs.get("low_freq_factor", 1.0), rs.get("high_freq_factor", 4.0)
        old = rs.get("original_max_position_embeddings", 8192)
        wavelen = 2 * math.pi / f
        smooth = (old / wavelen - lo) / (hi - lo)
        mid = (1 - smooth) * f / factor + smooth * f
        return torch.where(wavelen > old / lo, f / factor, torch.where(wavelen < old / hi, f, mid))
    return f


def rms_norm(x, weight, eps):
    return x / torch.sqrt((x * x).mean(-1, keepdim=True) + eps) * weight


def forward(cfg, w, tokens, keep):
    """({layer: q, k, v, scores, pattern [H, L, *]} for layers in keep, logits at the last position)."""
    C, H = cfg["hidden_size"], cfg["num_attention_heads"]
    KV = cfg.get("num_key_value_heads") or H
    D = cfg.get("head_dim") or C // H
    eps = cfg.get("rms_norm_eps", 1e-6)
    inv_freq = inv_frequencies(cfg, D)
    ids = torch.as_tensor(tokens)
    L = ids.shape[0]
    x = w["model.embed_tokens.weight"][ids]
    kept = {}
    for l in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{l}."
        h = rms_norm(x, w[p + "input_layernorm.weight"], eps)

        def proj(n, heads):
            y = h @ w[p + f"self_attn.{n}_proj.weight"].T
            b = w.get(p + f"self_attn.{n}_proj.bias")
            y = y + b if b is not None else y
            return y.reshape(L, heads, D).permute(1, 0, 2)

        q, k, v = proj("q", H), proj("k", KV), proj("v", KV)
        q, k = apply_rope(q, inv_freq, D), apply_rope(k, inv_freq, D)
        k, v = k.repeat_interleave(H // KV, dim=0), v.repeat_interleave(H // KV, dim=0)
        raw, att = causal_attention(q, k, D)
        if l in keep:
            kept[l] = {"q": q, "k": k, "v": v, "scores": raw, "pattern": att}
        o = (att @ v).permute(1, 0, 2).reshape(L, H * D)
        x = x + o @ w[p + "self_attn.o_proj.weight"].T
        h = rms_norm(x, w[p + "post_attention_layernorm.weight"], eps)
        f = F.silu(h @ w[p + "mlp.gate_proj.weight"].T) * (h @ w[p + "mlp.up_proj.weight"].T)
        x = x + f @ w[p + "mlp.down_proj.weight"].T
    last = rms_norm(x[-1:], w["model.norm.weight"], eps)
    head = w["model.embed_tokens.weight"] if cfg.get("tie_word_embeddings", False) else w["lm_head.weight"]
    return kept, (last @ head.T)[0]
