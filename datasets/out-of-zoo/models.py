"""Out-of-zoo architectures: models written by others (Hugging Face ``transformers``), none of
them in driple's zoo, as user factories of the workload protocol (``driple predict --help``).

Every factory is ``name(batch_size=..., **size knobs)`` and returns a workload: the model,
built from a config with random weights (nothing is downloaded, no hub access), and
``make_batch(batch_size, generator, device)`` giving keyword inputs with ``labels``, so that the
model computes its own loss (``output.loss``, the default loss of the protocol) as it does when
trained with transformers. Name them as ``datasets/out-of-zoo/models.py:llama`` (a relative file
is found from the current directory or the driple checkout) or by absolute path::

    driple graph datasets/out-of-zoo/models.py:llama --batch-size 8 --set layers=4
    driple collect run datasets/out-of-zoo/models.py:swin --batch-size 16 --out my-runs

Needs ``pip install transformers`` (``driple[hf]``); no torchvision. Vision models take
CIFAR-sized images (32-64 px, 10 classes) and language models short sequences with an 8k-token
vocabulary, as the zoo's defaults do, so that a step takes 0.05-2 s on one CPU thread.

Architectures (family: what it adds over the zoo):

- ``llama``: pre-norm decoder with RMSNorm, rotary positions, SwiGLU and grouped-query attention;
- ``opt``: OPT decoder (learned positions offset by 2, ReLU feed-forward);
- ``gpt_neo``: GPT-Neo decoder alternating global and local (windowed) attention;
- ``bloom``: BLOOM decoder with ALiBi position biases and fused QKV;
- ``albert``: ALBERT encoder, one layer's weights shared by every layer, factorised embeddings
  (sequence classification);
- ``t5``: T5 encoder-decoder, relative position buckets, no biases (sequence to sequence);
- ``bart``: BART encoder-decoder with learned positions (sequence to sequence);
- ``convnext``: ConvNeXt, 7x7 depthwise convolutions with LayerNorm and layer scale;
- ``swin``: Swin Transformer, attention in shifted windows, patch merging;
- ``regnet``: RegNet-Y, grouped convolutions with squeeze-and-excitation;
- ``mobilevit``: MobileViT, MobileNet blocks mixed with transformer blocks over unfolded patches.
"""
from __future__ import annotations

import torch

VOCAB = 8192  # tokens of the language models (the zoo's gpt uses 8192 too)
CLASSES = 10  # classes of the classifiers


class HFWorkload:
    """A transformers model and its synthetic batches of keyword inputs (with ``labels``).

    ``task``: ``"causal"`` (``input_ids``/``attention_mask``, labels = the ids: the model
    shifts them), ``"seq2seq"`` (source ids, and target ids of ``target_len`` as labels: the
    model makes its decoder inputs from them), ``"classify"`` (ids, one class per sequence) or
    ``"image"`` (``pixel_values`` ``[B, 3, size, size]``, one class per image).
    """

    def __init__(self, name: str, model, task: str, config: dict, batch_size: int,
                 seq_len: int = 0, target_len: int = 0, image_size: int = 0, vocab_size: int = VOCAB):
        self.name = self.family = name
        self.model = model
        self.task = task
        self.config = dict(config, batch_size=batch_size)
        self.batch_size = batch_size
        self.seq_len, self.target_len, self.image_size, self.vocab_size = seq_len, target_len, image_size, vocab_size

    def make_batch(self, batch_size=None, generator=None, device="cpu"):
        """``(inputs, None)``: keyword inputs of ``batch_size`` samples, drawn from ``generator``."""
        bs = batch_size or self.batch_size
        if self.task == "image":
            inputs = {"pixel_values": torch.randn(bs, 3, self.image_size, self.image_size, generator=generator),
                      "labels": torch.randint(0, CLASSES, (bs,), generator=generator)}
        else:
            ids = torch.randint(3, self.vocab_size, (bs, self.seq_len), generator=generator)  # 0-2: special
            inputs = {"input_ids": ids, "attention_mask": torch.ones_like(ids)}
            if self.task == "causal":
                inputs["labels"] = ids
            elif self.task == "seq2seq":
                inputs["labels"] = torch.randint(3, self.vocab_size, (bs, self.target_len), generator=generator)
            else:
                inputs["labels"] = torch.randint(0, CLASSES, (bs,), generator=generator)
        return {k: v.to(device) for k, v in inputs.items()}, None


def _special_tokens() -> dict:
    return {"pad_token_id": 0, "bos_token_id": 1, "eos_token_id": 2}


# ------------------------------------------------------------------ decoders (causal LM)
def llama(batch_size: int = 8, layers: int = 4, hidden: int = 128, heads: int = 4, seq_len: int = 64):
    """LlamaForCausalLM: ``layers`` blocks of width ``hidden``, ``heads`` query heads sharing
    ``heads // 2`` key/value heads, SwiGLU of 8/3 x hidden (a multiple of 32)."""
    from transformers import LlamaConfig, LlamaForCausalLM

    ffn = 32 * round(hidden * 8 / 3 / 32)
    cfg = LlamaConfig(vocab_size=VOCAB, hidden_size=hidden, intermediate_size=ffn, num_hidden_layers=layers,
                      num_attention_heads=heads, num_key_value_heads=max(1, heads // 2),
                      max_position_embeddings=seq_len, tie_word_embeddings=False, **_special_tokens())
    knobs = {"layers": layers, "hidden": hidden, "heads": heads, "seq_len": seq_len}
    return HFWorkload("llama", LlamaForCausalLM(cfg), "causal", knobs, batch_size, seq_len=seq_len)


def opt(batch_size: int = 8, layers: int = 4, hidden: int = 128, heads: int = 4, seq_len: int = 64):
    """OPTForCausalLM: ``layers`` blocks of width ``hidden``, ReLU feed-forward of 4 x hidden."""
    from transformers import OPTConfig, OPTForCausalLM

    cfg = OPTConfig(vocab_size=VOCAB, hidden_size=hidden, num_hidden_layers=layers, ffn_dim=4 * hidden,
                    num_attention_heads=heads, max_position_embeddings=seq_len, word_embed_proj_dim=hidden,
                    **_special_tokens())
    knobs = {"layers": layers, "hidden": hidden, "heads": heads, "seq_len": seq_len}
    return HFWorkload("opt", OPTForCausalLM(cfg), "causal", knobs, batch_size, seq_len=seq_len)


def gpt_neo(batch_size: int = 8, layers: int = 4, hidden: int = 128, heads: int = 4, seq_len: int = 64):
    """GPTNeoForCausalLM: ``layers`` blocks (even: global and local attention alternate, local
    windows of seq_len / 4 tokens), width ``hidden``."""
    from transformers import GPTNeoConfig, GPTNeoForCausalLM

    if layers % 2:
        raise ValueError(f"gpt_neo alternates global and local attention: layers must be even, not {layers}")
    cfg = GPTNeoConfig(vocab_size=VOCAB, hidden_size=hidden, num_layers=layers, num_heads=heads,
                       attention_types=[[["global", "local"], layers // 2]], window_size=max(4, seq_len // 4),
                       max_position_embeddings=seq_len, **_special_tokens())
    knobs = {"layers": layers, "hidden": hidden, "heads": heads, "seq_len": seq_len}
    return HFWorkload("gpt_neo", GPTNeoForCausalLM(cfg), "causal", knobs, batch_size, seq_len=seq_len)


def bloom(batch_size: int = 8, layers: int = 4, hidden: int = 128, heads: int = 4, seq_len: int = 64):
    """BloomForCausalLM: ``layers`` blocks of width ``hidden``, ALiBi, no position embeddings."""
    from transformers import BloomConfig, BloomForCausalLM

    cfg = BloomConfig(vocab_size=VOCAB, hidden_size=hidden, n_layer=layers, n_head=heads, **_special_tokens())
    knobs = {"layers": layers, "hidden": hidden, "heads": heads, "seq_len": seq_len}
    return HFWorkload("bloom", BloomForCausalLM(cfg), "causal", knobs, batch_size, seq_len=seq_len)


# ------------------------------------------------------------------ encoder (classification)
def albert(batch_size: int = 16, layers: int = 4, hidden: int = 256, heads: int = 4, seq_len: int = 64,
           embedding: int = 64):
    """AlbertForSequenceClassification: one layer of width ``hidden`` applied ``layers`` times,
    token embeddings of ``embedding`` projected up, 10 classes."""
    from transformers import AlbertConfig, AlbertForSequenceClassification

    cfg = AlbertConfig(vocab_size=VOCAB, embedding_size=embedding, hidden_size=hidden, num_hidden_layers=layers,
                       num_attention_heads=heads, intermediate_size=4 * hidden, max_position_embeddings=seq_len,
                       num_labels=CLASSES, **_special_tokens())
    knobs = {"layers": layers, "hidden": hidden, "heads": heads, "seq_len": seq_len, "embedding": embedding}
    return HFWorkload("albert", AlbertForSequenceClassification(cfg), "classify", knobs, batch_size, seq_len=seq_len)


# ------------------------------------------------------------------ encoder-decoders (seq2seq)
def t5(batch_size: int = 8, layers: int = 2, hidden: int = 128, heads: int = 4, seq_len: int = 64,
       target_len: int = 16):
    """T5ForConditionalGeneration: ``layers`` encoder and ``layers`` decoder blocks of width
    ``hidden`` (feed-forward 4 x hidden), ``seq_len`` source and ``target_len`` target tokens."""
    from transformers import T5Config, T5ForConditionalGeneration

    cfg = T5Config(vocab_size=VOCAB, d_model=hidden, d_kv=hidden // heads, d_ff=4 * hidden, num_layers=layers,
                   num_decoder_layers=layers, num_heads=heads, decoder_start_token_id=0, **_special_tokens())
    knobs = {"layers": layers, "hidden": hidden, "heads": heads, "seq_len": seq_len, "target_len": target_len}
    return HFWorkload("t5", T5ForConditionalGeneration(cfg), "seq2seq", knobs, batch_size,
                      seq_len=seq_len, target_len=target_len)


def bart(batch_size: int = 8, layers: int = 2, hidden: int = 128, heads: int = 4, seq_len: int = 64,
         target_len: int = 16):
    """BartForConditionalGeneration: ``layers`` encoder and ``layers`` decoder blocks of width
    ``hidden`` (feed-forward 4 x hidden), ``seq_len`` source and ``target_len`` target tokens."""
    from transformers import BartConfig, BartForConditionalGeneration

    cfg = BartConfig(vocab_size=VOCAB, d_model=hidden, encoder_layers=layers, decoder_layers=layers,
                     encoder_attention_heads=heads, decoder_attention_heads=heads, encoder_ffn_dim=4 * hidden,
                     decoder_ffn_dim=4 * hidden, max_position_embeddings=max(seq_len, target_len),
                     decoder_start_token_id=2, forced_eos_token_id=None, **_special_tokens())
    knobs = {"layers": layers, "hidden": hidden, "heads": heads, "seq_len": seq_len, "target_len": target_len}
    return HFWorkload("bart", BartForConditionalGeneration(cfg), "seq2seq", knobs, batch_size,
                      seq_len=seq_len, target_len=target_len)


# ------------------------------------------------------------------ vision (image classification)
def convnext(batch_size: int = 16, width: int = 32, depth: int = 2, image_size: int = 32):
    """ConvNextForImageClassification: 4 stages of width, 2x, 4x, 8x ``width`` channels and
    ``depth``, ``depth``, 3 x ``depth``, ``depth`` blocks, on ``image_size`` images (patch 2)."""
    from transformers import ConvNextConfig, ConvNextForImageClassification

    cfg = ConvNextConfig(patch_size=2, hidden_sizes=[width, 2 * width, 4 * width, 8 * width],
                         depths=[depth, depth, 3 * depth, depth], image_size=image_size, num_labels=CLASSES)
    knobs = {"width": width, "depth": depth, "image_size": image_size}
    return HFWorkload("convnext", ConvNextForImageClassification(cfg), "image", knobs, batch_size,
                      image_size=image_size)


def swin(batch_size: int = 16, width: int = 48, depth: int = 2, image_size: int = 32, window: int = 4):
    """SwinForImageClassification: 3 stages of width, 2x, 4x ``width`` channels (heads of 16),
    ``depth`` blocks each (the middle stage 2 x depth), windows of ``window`` patches of 2 px."""
    from transformers import SwinConfig, SwinForImageClassification

    cfg = SwinConfig(image_size=image_size, patch_size=2, embed_dim=width, depths=[depth, 2 * depth, depth],
                     num_heads=[max(1, width // 16), max(1, width // 8), max(1, width // 4)],
                     window_size=window, num_labels=CLASSES)
    knobs = {"width": width, "depth": depth, "image_size": image_size, "window": window}
    return HFWorkload("swin", SwinForImageClassification(cfg), "image", knobs, batch_size, image_size=image_size)


def regnet(batch_size: int = 16, width: int = 32, depth: int = 2, image_size: int = 32, group: int = 16):
    """RegNetForImageClassification (Y blocks: grouped convolutions, squeeze-and-excitation): 4
    stages of width, 2x, 4x, 8x ``width`` channels, depth, 2x, 3x, 1x ``depth`` blocks, groups
    of ``group`` channels."""
    from transformers import RegNetConfig, RegNetForImageClassification

    cfg = RegNetConfig(embedding_size=width, hidden_sizes=[width, 2 * width, 4 * width, 8 * width],
                       depths=[depth, 2 * depth, 3 * depth, depth], groups_width=group, layer_type="y",
                       num_labels=CLASSES)
    knobs = {"width": width, "depth": depth, "image_size": image_size, "group": group}
    return HFWorkload("regnet", RegNetForImageClassification(cfg), "image", knobs, batch_size, image_size=image_size)


def mobilevit(batch_size: int = 16, width: int = 64, image_size: int = 64):
    """MobileViTForImageClassification (XXS-like at ``width`` 64): transformer blocks of width,
    1.25x, 1.5x ``width``, on ``image_size`` images (a multiple of 32)."""
    from transformers import MobileViTConfig, MobileViTForImageClassification

    if image_size % 32:
        raise ValueError(f"mobilevit downsamples 32x: image_size must be a multiple of 32, not {image_size}")
    w = max(16, width // 16 * 16)  # every stage width divisible by the 4 heads
    cfg = MobileViTConfig(image_size=image_size, hidden_sizes=[w, w * 5 // 4, w * 3 // 2],
                          neck_hidden_sizes=[16, 24, 48, 64, 80, 96, 320], num_attention_heads=4,
                          num_labels=CLASSES)
    knobs = {"width": width, "image_size": image_size}
    return HFWorkload("mobilevit", MobileViTForImageClassification(cfg), "image", knobs, batch_size,
                      image_size=image_size)


#: The factories of this file, by name (the names of the grid's models).
ARCHITECTURES = ("llama", "opt", "gpt_neo", "bloom", "albert", "t5", "bart", "convnext", "swin", "regnet",
                 "mobilevit")
