"""Transformer building blocks shared by bert, gpt and vit.

Written without data-dependent Python control flow so ``make_fx`` traces them: the causal mask
is a fixed ``is_causal`` flag (sdpa) or a registered buffer (math), never built from values.
Tensors are ``[B, T, d_model]`` (batch, positions, hidden size).
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

ATTENTION_IMPLS = ("sdpa", "math")


class SelfAttention(nn.Module):
    """Multi-head self-attention: one fused q/k/v projection (d -> 3d) and an output projection.

    ``attention="sdpa"`` calls ``F.scaled_dot_product_attention``; ``"math"`` spells it out
    (matmul, scale, mask, softmax, dropout, matmul), which gives a finer-grained graph.
    ``max_len`` (positions) sizes the causal mask buffer of the math path.
    """

    def __init__(self, d_model: int, heads: int, dropout: float = 0.0, causal: bool = False,
                 attention: str = "sdpa", max_len: int = 0) -> None:
        super().__init__()
        if d_model % heads:
            raise ValueError(f"d_model={d_model} is not a multiple of heads={heads}")
        if attention not in ATTENTION_IMPLS:
            raise ValueError(f"attention must be one of {ATTENTION_IMPLS}")
        self.heads, self.causal, self.attention, self.dropout = heads, causal, attention, dropout
        self.qkv = nn.Linear(d_model, 3 * d_model)
        self.proj = nn.Linear(d_model, d_model)
        if causal and attention == "math":
            mask = torch.ones(max_len, max_len, dtype=torch.bool).tril()
            self.register_buffer("causal_mask", mask, persistent=False)

    def forward(self, x: Tensor) -> Tensor:
        b, t, d = x.shape
        q, k, v = self.qkv(x).view(b, t, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        p = self.dropout if self.training else 0.0
        if self.attention == "sdpa":
            y = F.scaled_dot_product_attention(q, k, v, dropout_p=p, is_causal=self.causal)
        else:
            scores = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(q.shape[-1]))
            if self.causal:
                scores = scores.masked_fill(~self.causal_mask[:t, :t], float("-inf"))
            y = F.dropout(scores.softmax(dim=-1), p, self.training) @ v
        return self.proj(y.transpose(1, 2).reshape(b, t, d))


class TransformerLayer(nn.Module):
    """Attention then a GELU feed-forward (d -> ffn -> d), each in a residual branch.

    ``norm_first`` (pre-LN: GPT-2, ViT) normalises each branch's input; otherwise (post-LN:
    BERT) the sum is normalised. ``gelu="tanh"`` is GPT-2's approximation.
    """

    def __init__(self, d_model: int, heads: int, ffn: int, dropout: float = 0.0, *, norm_first: bool = True,
                 causal: bool = False, eps: float = 1e-5, gelu: str = "none", attention: str = "sdpa",
                 max_len: int = 0) -> None:
        super().__init__()
        self.norm_first = norm_first
        self.attn = SelfAttention(d_model, heads, dropout, causal, attention, max_len)
        self.ln1 = nn.LayerNorm(d_model, eps=eps)
        self.fc1 = nn.Linear(d_model, ffn)
        self.act = nn.GELU(approximate=gelu)
        self.fc2 = nn.Linear(ffn, d_model)
        self.ln2 = nn.LayerNorm(d_model, eps=eps)
        self.drop = nn.Dropout(dropout)

    def _ffn(self, x: Tensor) -> Tensor:
        return self.drop(self.fc2(self.drop(self.act(self.fc1(x)))))

    def forward(self, x: Tensor) -> Tensor:
        if self.norm_first:
            x = x + self.drop(self.attn(self.ln1(x)))
            return x + self._ffn(self.ln2(x))
        x = self.ln1(x + self.drop(self.attn(x)))
        return self.ln2(x + self._ffn(x))


def init_transformer(module: nn.Module, std: float = 0.02) -> None:
    """BERT/GPT-2 init: Linear and Embedding weights N(0, std), biases 0, LayerNorm 1/0."""
    for m in module.modules():
        if isinstance(m, nn.Linear):
            nn.init.normal_(m.weight, 0.0, std)
            if m.bias is not None:
                nn.init.zeros_(m.bias)
        elif isinstance(m, nn.Embedding):
            nn.init.normal_(m.weight, 0.0, std)
        elif isinstance(m, nn.LayerNorm):
            nn.init.ones_(m.weight)
            nn.init.zeros_(m.bias)
