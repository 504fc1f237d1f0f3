"""Token models: lstm_lm (word-level LSTM language model), bert (encoder), gpt (decoder).

Inputs are token ids, long ``[B, T]`` with ``T = seq_len``. Language models output logits
``[B, T, vocab_size]``; bert with ``head="cls"`` outputs ``[B, num_classes]``.
"""
from __future__ import annotations

import torch
from torch import Tensor, nn

from driple.zoo.blocks import ATTENTION_IMPLS, TransformerLayer, init_transformer
from driple.zoo.registry import Family, Knob, register_family, register_preset
from driple.zoo.tasks import LANGUAGE_MODELING, MASKED_LANGUAGE_MODELING, SEQUENCE_CLASSIFICATION


def _in_range(low, high):
    return lambda v: None if low <= v <= high else f"must be between {low} and {high}"


# =========================================================================== LSTM LM
class LSTMLanguageModel(nn.Module):
    """Embedding - stacked LSTM - Linear over the vocabulary (Zaremba et al. 2014), with
    dropout between layers; ``tie_weights`` shares the embedding and output matrices."""

    def __init__(self, vocab_size: int = 10000, embed_dim: int = 200, hidden_size: int = 200, layers: int = 2,
                 dropout: float = 0.0, tie_weights: bool = False) -> None:
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, embed_dim)
        self.drop = nn.Dropout(dropout)
        self.lstm = nn.LSTM(embed_dim, hidden_size, layers, batch_first=True, dropout=dropout if layers > 1 else 0.0)
        self.decoder = nn.Linear(hidden_size, vocab_size)
        nn.init.uniform_(self.embedding.weight, -0.1, 0.1)
        nn.init.uniform_(self.decoder.weight, -0.1, 0.1)
        nn.init.zeros_(self.decoder.bias)
        if tie_weights:
            self.decoder.weight = self.embedding.weight

    def forward(self, tokens: Tensor) -> Tensor:
        h, _ = self.lstm(self.drop(self.embedding(tokens)))
        return self.decoder(self.drop(h))


def _validate_lstm(c: dict) -> str | None:
    if c["tie_weights"] and c["embed_dim"] != c["hidden_size"]:
        return "tie_weights needs embed_dim == hidden_size"
    return None


register_family(Family(
    name="lstm_lm",
    description="word-level LSTM language model (Zaremba et al. 2014); default 2 layers of 200 "
    "units, 10k words, 35 steps",
    knobs=(
        Knob("vocab_size", 10000, "vocabulary size, tokens", check=_in_range(2, 1_000_000)),
        Knob("embed_dim", 200, "word embedding size", check=_in_range(1, 16384)),
        Knob("hidden_size", 200, "LSTM units per layer", check=_in_range(1, 16384)),
        Knob("layers", 2, "stacked LSTM layers", check=_in_range(1, 16)),
        Knob("seq_len", 35, "tokens per sequence (unrolled steps)", check=_in_range(1, 4096)),
        Knob("dropout", 0.0, "dropout probability", check=_in_range(0.0, 0.9)),
        Knob("tie_weights", False, "share embedding and output weights"),
    ),
    build=lambda c: LSTMLanguageModel(c["vocab_size"], c["embed_dim"], c["hidden_size"], c["layers"], c["dropout"],
                                      c["tie_weights"]),
    task=lambda c: LANGUAGE_MODELING,
    default_batch_size=20,
    validate=_validate_lstm,
))


# =========================================================================== Transformers
def _transformer_knobs(layers, d_model, heads, ffn, vocab, seq_len, max_positions, dropout) -> tuple[Knob, ...]:
    return (
        Knob("layers", layers, "Transformer layers", check=_in_range(1, 96)),
        Knob("d_model", d_model, "hidden size (embedding width)", check=_in_range(8, 16384)),
        Knob("heads", heads, "attention heads", check=_in_range(1, 128)),
        Knob("ffn", ffn, "feed-forward hidden size (4 x d_model in BERT and GPT-2)", check=_in_range(8, 65536)),
        Knob("vocab_size", vocab, "vocabulary size, tokens", check=_in_range(8, 1_000_000)),
        Knob("seq_len", seq_len, "tokens per sequence", check=_in_range(1, 16384)),
        Knob("max_positions", max_positions, "rows of the position-embedding table, >= seq_len "
             "(0: seq_len)", check=_in_range(0, 16384)),
        Knob("dropout", dropout, "dropout probability", check=_in_range(0.0, 0.9)),
        Knob("attention", "sdpa", "sdpa (F.scaled_dot_product_attention) or math (explicit matmul + "
             "softmax)", choices=ATTENTION_IMPLS),
    )


def _validate_transformer(c: dict) -> str | None:
    if c["d_model"] % c["heads"]:
        return f"d_model={c['d_model']} must be a multiple of heads={c['heads']}"
    if c["max_positions"] and c["seq_len"] > c["max_positions"]:
        return f"seq_len={c['seq_len']} is longer than max_positions={c['max_positions']}"
    return None


class BERT(nn.Module):
    """BERT (Devlin et al. 2019): word + position + segment embeddings, LayerNorm, post-LN
    encoder layers (GELU). ``head="mlm"``: dense-GELU-LayerNorm transform and a decoder tied to
    the word embeddings (logits ``[B, T, vocab]``); ``head="cls"``: tanh pooler on the first
    token and a Linear (logits ``[B, num_classes]``). All segment ids are 0."""

    def __init__(self, layers: int = 12, d_model: int = 768, heads: int = 12, ffn: int = 3072,
                 vocab_size: int = 30522, max_positions: int = 512, dropout: float = 0.1, head: str = "mlm",
                 num_classes: int = 2, attention: str = "sdpa") -> None:
        super().__init__()
        self.head = head
        self.word_embeddings = nn.Embedding(vocab_size, d_model)
        self.position_embeddings = nn.Embedding(max_positions, d_model)
        self.token_type_embeddings = nn.Embedding(2, d_model)
        self.embed_norm = nn.LayerNorm(d_model, eps=1e-12)
        self.drop = nn.Dropout(dropout)
        self.layers = nn.Sequential(*(
            TransformerLayer(d_model, heads, ffn, dropout, norm_first=False, eps=1e-12, attention=attention)
            for _ in range(layers)
        ))
        if head == "mlm":
            self.transform = nn.Sequential(nn.Linear(d_model, d_model), nn.GELU(), nn.LayerNorm(d_model, eps=1e-12))
            self.decoder_bias = nn.Parameter(torch.zeros(vocab_size))
        else:
            self.pooler = nn.Linear(d_model, d_model)
            self.classifier = nn.Linear(d_model, num_classes)
        init_transformer(self)

    def forward(self, tokens: Tensor) -> Tensor:
        t = tokens.shape[1]
        x = self.word_embeddings(tokens) + self.position_embeddings.weight[:t] + self.token_type_embeddings.weight[0]
        x = self.layers(self.drop(self.embed_norm(x)))
        if self.head == "mlm":
            return self.transform(x) @ self.word_embeddings.weight.t() + self.decoder_bias
        pooled = torch.tanh(self.pooler(x[:, 0]))
        return self.classifier(self.drop(pooled))


register_family(Family(
    name="bert",
    description="BERT encoder (Devlin et al. 2019) trained by masked-LM (head=mlm) or sequence "
    "classification (head=cls); default 2 layers of 128 (BERT-Tiny), 64 tokens",
    knobs=(
        *_transformer_knobs(2, 128, 2, 512, 30522, 64, 0, 0.1),
        Knob("head", "mlm", "mlm (masked-LM, 15% of tokens) or cls (one label per sequence)",
             choices=("mlm", "cls")),
        Knob("num_classes", 2, "classes of the cls head", check=_in_range(2, 100000)),
    ),
    build=lambda c: BERT(c["layers"], c["d_model"], c["heads"], c["ffn"], c["vocab_size"],
                         c["max_positions"] or c["seq_len"], c["dropout"], c["head"], c["num_classes"], c["attention"]),
    task=lambda c: MASKED_LANGUAGE_MODELING if c["head"] == "mlm" else SEQUENCE_CLASSIFICATION,
    default_batch_size=16,
    validate=_validate_transformer,
))


class GPT(nn.Module):
    """GPT-2 (Radford et al. 2019): token + position embeddings, pre-LN causal decoder layers
    (tanh-GELU), final LayerNorm, output tied to the token embeddings (no bias)."""

    def __init__(self, layers: int = 12, d_model: int = 768, heads: int = 12, ffn: int = 3072,
                 vocab_size: int = 50257, max_positions: int = 1024, dropout: float = 0.1,
                 attention: str = "sdpa") -> None:
        super().__init__()
        self.wte = nn.Embedding(vocab_size, d_model)
        self.wpe = nn.Embedding(max_positions, d_model)
        self.drop = nn.Dropout(dropout)
        self.layers = nn.Sequential(*(
            TransformerLayer(d_model, heads, ffn, dropout, norm_first=True, causal=True, eps=1e-5, gelu="tanh",
                             attention=attention, max_len=max_positions)
            for _ in range(layers)
        ))
        self.ln_f = nn.LayerNorm(d_model, eps=1e-5)
        init_transformer(self)
        for layer in self.layers:  # GPT-2 scales residual projections by 1/sqrt(2 x layers)
            nn.init.normal_(layer.attn.proj.weight, 0.0, 0.02 / (2 * layers) ** 0.5)
            nn.init.normal_(layer.fc2.weight, 0.0, 0.02 / (2 * layers) ** 0.5)

    def forward(self, tokens: Tensor) -> Tensor:
        t = tokens.shape[1]
        x = self.drop(self.wte(tokens) + self.wpe.weight[:t])
        return self.ln_f(self.layers(x)) @ self.wte.weight.t()


register_family(Family(
    name="gpt",
    description="GPT-2-style causal decoder (Radford et al. 2019); default 4 layers of 128, "
    "8k-token vocabulary, 64 tokens",
    knobs=_transformer_knobs(4, 128, 4, 512, 8192, 64, 0, 0.1),
    build=lambda c: GPT(c["layers"], c["d_model"], c["heads"], c["ffn"], c["vocab_size"],
                        c["max_positions"] or c["seq_len"], c["dropout"], c["attention"]),
    task=lambda c: LANGUAGE_MODELING,
    default_batch_size=8,
    validate=_validate_transformer,
))


# =========================================================================== presets
for _name, _emb, _drop, _size in (("small", 200, 0.0, "200"), ("medium", 650, 0.5, "650"),
                                  ("large", 1500, 0.65, "1500")):
    register_preset(f"lstm_lm_{_name}", "lstm_lm",
                    f"Zaremba et al. 2014 {_name} PTB model: 2 layers of {_size}, 10k words, "
                    f"{20 if _name == 'small' else 35} steps", full_size=_name == "large",
                    embed_dim=_emb, hidden_size=_emb, layers=2, vocab_size=10000,
                    seq_len=20 if _name == "small" else 35, dropout=_drop)

_BERT_SIZES = {  # name: layers, d_model, heads (Turc et al. 2019 miniatures; Devlin et al. 2019)
    "bert_tiny": (2, 128, 2), "bert_mini": (4, 256, 4), "bert_small": (4, 512, 8), "bert_medium": (8, 512, 8),
    "bert_base": (12, 768, 12), "bert_large": (24, 1024, 16),
}
for _name, (_layers, _d, _heads) in _BERT_SIZES.items():
    _long = _name in ("bert_base", "bert_large")
    register_preset(_name, "bert", f"BERT-{_name[5:].capitalize()} ({_layers} layers, {_d} wide), "
                    f"masked-LM on {512 if _long else 128}-token sequences", full_size=_d >= 512,
                    layers=_layers, d_model=_d, heads=_heads, ffn=4 * _d, seq_len=512 if _long else 128,
                    max_positions=512, batch_size={128: 16, 256: 8}.get(_d, 8))
register_preset("bert_base_cls", "bert", "BERT-base fine-tuning for 2-class sequence classification, "
                "128 tokens", full_size=True, layers=12, d_model=768, heads=12, ffn=3072, seq_len=128,
                max_positions=512, head="cls", batch_size=8)

_GPT_SIZES = {  # name: layers, d_model, heads (Radford et al. 2019)
    "gpt2_small": (12, 768, 12), "gpt2_medium": (24, 1024, 16), "gpt2_large": (36, 1280, 20),
}
for _name, (_layers, _d, _heads) in _GPT_SIZES.items():
    register_preset(_name, "gpt", f"GPT-2 {_name[5:]} ({_layers} layers, {_d} wide), 1024 tokens, 50257 words",
                    full_size=True, layers=_layers, d_model=_d, heads=_heads, ffn=4 * _d, vocab_size=50257,
                    seq_len=1024, max_positions=1024, batch_size=4)
register_preset("gpt_tiny", "gpt", "tiny GPT: 2 layers of 64, 2k words, 32 tokens",
                layers=2, d_model=64, heads=2, ffn=256, vocab_size=2048, seq_len=32,
                batch_size=16)
register_preset("gpt_mini", "gpt", "mini GPT: 6 layers of 256, 16k words, 128 tokens",
                layers=6, d_model=256, heads=8, ffn=1024, vocab_size=16384, seq_len=128,
                batch_size=8)
