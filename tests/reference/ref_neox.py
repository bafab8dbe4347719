"""ref_neox.py -- an independent float64 GPT-NeoX (Pythia) forward in plain
PyTorch ops, written from the published architecture (Hugging Face's
GPTNeoXForCausalLM is the definition; this shares no code with it or with the
C side). Used by families_io.py (make-model, compare).

Per block: LayerNorm -> query_key_value whose output per position is
[H][3][D] (q, k, v interleaved per head) -> RoPE on the first
int(D * rotary_pct) dims (rotate_half, base rotary_emb_base) -> causal
softmax(q.k / sqrt D) -> dense; MLP dense_h_to_4h -> exact GELU ->
dense_4h_to_h; x + attn(ln1 x) + mlp(ln2 x) when use_parallel_residual, else
sequential. final_layer_norm -> embed_out (untied unless tie_word_embeddings).
"""
import math

import torch
import torch.nn.functional as F

from families_io import apply_rope, causal_attention


def random_model(a, g, rand):
    C, H, NI, V, nl = a.hidden, a.heads, a.inner, a.vocab, a.layers
    D = C // H
    cfg = {"architectures": ["GPTNeoXForCausalLM"], "model_type": "gpt_neox", "hidden_size": C,
           "num_attention_heads": H, "num_hidden_layers": nl, "intermediate_size": NI,
           "vocab_size": V, "max_position_embeddings": a.positions, "rotary_pct": a.rotary_pct,
           "rotary_emb_base": 10000, "layer_norm_eps": 1e-5, "hidden_act": "gelu",
           "use_parallel_residual": not a.sequential, "tie_word_embeddings": a.tied,
           "attention_bias": True, "torch_dtype": "float32"}
    t = [("gpt_neox.embed_in.weight", rand(g, (V, C), 1.0))]
    for l in range(nl):
        p = f"gpt_neox.layers.{l}."
        t += [(p + "input_layernorm.weight", 1 + rand(g, (C,), 0.1)),
              (p + "input_layernorm.bias", rand(g, (C,), 0.1)),
              # std 2.5/sqrt(C): raw scores of a few units, attention far from uniform
              (p + "attention.query_key_value.weight", rand(g, (3 * C, C), 2.5 / math.sqrt(C))),
              (p + "attention.query_key_value.bias", rand(g, (3 * C,), 0.1)),
              (p + "attention.dense.weight", rand(g, (C, C), 1 / math.sqrt(C))),
              (p + "attention.dense.bias", rand(g, (C,), 0.1)),
              (p + "post_attention_layernorm.weight", 1 + rand(g, (C,), 0.1)),
              (p + "post_attention_layernorm.bias", rand(g, (C,), 0.1)),
              (p + "mlp.dense_h_to_4h.weight", rand(g, (NI, C), 1 / math.sqrt(C))),
              (p + "mlp.dense_h_to_4h.bias", rand(g, (NI,), 0.1)),
              (p + "mlp.dense_4h_to_h.weight", rand(g, (C, NI), 1 / math.sqrt(NI))),
              (p + "mlp.dense_4h_to_h.bias", rand(g, (C,), 0.1))]
        if l == 0:  # a buffer older checkpoints carry; the loader must skip it
            t.append((p + "attention.rotary_emb.inv_freq", rand(g, (int(D * a.rotary_pct) // 2,), 1.0)))
    t += [("gpt_neox.final_layer_norm.weight", 1 + rand(g, (C,), 0.1)),
          ("gpt_neox.final_layer_norm.bias", rand(g, (C,), 0.1))]
    if not a.tied:
        t.append(("embed_out.weight", rand(g, (V, C), 1 / math.sqrt(C))))
    return cfg, t


def forward(cfg, w, tokens, keep):
    """({layer: q, k, v, scores, pattern [H, L, *]} for layers in keep, logits at the last position)."""
    C, H = cfg["hidden_size"], cfg["num_attention_heads"]
    D, eps = C // H, cfg.get("layer_norm_eps", 1e-5)
    rot = int(D * cfg.get("rotary_pct", 0.25))
    inv_freq = 1.0 / (cfg.get("rotary_emb_base", 10000) ** (torch.arange(0, rot, 2, dtype=torch.float64) / rot))
    ids = torch.as_tensor(tokens)
    L = ids.shape[0]
    x = w["gpt_neox.embed_in.weight"][ids]
    kept = {}
    for l in range(cfg["num_hidden_layers"]):
        p = f"gpt_neox.layers.{l}."
        h = F.layer_norm(x, (C,), w[p + "input_layernorm.weight"], w[p + "input_layernorm.bias"], eps)
        qkv = h @ w[p + "attention.query_key_value.weight"].T + w[p + "attention.query_key_value.bias"]
        qkv = qkv.reshape(L, H, 3 * D).permute(1, 0, 2)
        q, k, v = qkv[..., :D], qkv[..., D:2 * D], qkv[..., 2 * D:]
        q, k = apply_rope(q, inv_freq, rot), apply_rope(k, inv_freq, rot)
        raw, att = causal_attention(q, k, D)
        if l in keep:
            kept[l] = {"q": q, "k": k, "v": v, "scores": raw, "pattern": att}
        o = (att @ v).permute(1, 0, 2).reshape(L, C)
        attn = o @ w[p + "attention.dense.weight"].T + w[p + "attention.dense.bias"]

        def mlp(y):
            f = F.gelu(y @ w[p + "mlp.dense_h_to_4h.weight"].T + w[p + "mlp.dense_h_to_4h.bias"])
            return f @ w[p + "mlp.dense_4h_to_h.weight"].T + w[p + "mlp.dense_4h_to_h.bias"]

        ln2 = (w[p + "post_attention_layernorm.weight"], w[p + "post_attention_layernorm.bias"])
        if cfg.get("use_parallel_residual", True):
            x = x + attn + mlp(F.layer_norm(x, (C,), *ln2, eps))
        else:
            x = x + attn
            x = x + mlp(F.layer_norm(x, (C,), *ln2, eps))
    last = F.layer_norm(x[-1:], (C,), w["gpt_neox.final_layer_norm.weight"], w["gpt_neox.final_layer_norm.bias"], eps)
    head = w["gpt_neox.embed_in.weight"] if cfg.get("tie_word_embeddings", False) else w["embed_out.weight"]
    return kept, (last @ head.T)[0]
