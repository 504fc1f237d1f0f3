"""The command-line tests run torch on one thread (fixtures: ``tests/conftest.py``)."""
import pytest


@pytest.fixture(autouse=True, scope="session")
def _one_thread(torch_one_thread):
    yield


# ---------------------------------------------------------------------- Hugging Face models, as they are
# User factories (``<this file>:hf_gpt2``) of tiny randomly initialised transformers models, as
# a user would write them: no wrapper around the model. transformers is imported inside, so this
# file loads without it (the tests that use them skip then).
VOCAB = 64


def hf_gpt2(batch_size: int = 4, seq_len: int = 16, layers: int = 2):
    """GPT2LMHeadModel returned as a plain module: token ids of ``input_shape``, no targets (the
    default loss is the mean square of ``output.logits``)."""
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    model = GPT2LMHeadModel(GPT2Config(n_layer=layers, n_embd=32, n_head=2, n_positions=64,
                                       vocab_size=VOCAB, bos_token_id=0, eos_token_id=0))
    model.input_shape = (seq_len,)
    model.input_dtype = torch.long  # token ids in [0, model.config.vocab_size)
    return model


class TokenBatches:
    """A workload: ``model`` + ``make_batch`` of keyword inputs; no ``loss_fn`` (the default)."""

    def __init__(self, model, seq_len: int, classes: int | None = None, labels: bool = False):
        self.model, self.seq_len, self.classes, self.labels = model, seq_len, classes, labels
        self.name = type(model).__name__

    def make_batch(self, batch_size, generator=None, device="cpu"):
        import torch

        ids = torch.randint(0, VOCAB, (batch_size, self.seq_len), generator=generator)
        inputs = {"input_ids": ids, "attention_mask": torch.ones_like(ids)}
        if self.labels:  # the model computes (and shifts) its own loss
            inputs["labels"] = ids
        targets = None if self.classes is None else torch.randint(0, self.classes, (batch_size,), generator=generator)
        return ({k: v.to(device) for k, v in inputs.items()},
                None if targets is None else targets.to(device))


def hf_bert(batch_size: int = 4, seq_len: int = 16, classes: int = 3):
    """BertForSequenceClassification: keyword inputs, class ids as targets (the default loss is
    cross-entropy of ``output.logits`` against them)."""
    import torch
    from transformers import BertConfig, BertForSequenceClassification

    torch.manual_seed(0)
    model = BertForSequenceClassification(BertConfig(
        num_hidden_layers=2, hidden_size=32, num_attention_heads=2, intermediate_size=64,
        vocab_size=VOCAB, max_position_embeddings=64, num_labels=classes))
    return TokenBatches(model, seq_len, classes=classes)


def hf_llama(batch_size: int = 4, seq_len: int = 16):
    """LlamaForCausalLM (grouped-query attention, rotary positions): keyword inputs with
    ``labels``, so the default loss is the model's own ``output.loss``."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    model = LlamaForCausalLM(LlamaConfig(
        num_hidden_layers=2, hidden_size=32, num_attention_heads=4, num_key_value_heads=2,
        intermediate_size=64, vocab_size=VOCAB, max_position_embeddings=64,
        bos_token_id=0, eos_token_id=0, pad_token_id=0))
    return TokenBatches(model, seq_len, labels=True)
