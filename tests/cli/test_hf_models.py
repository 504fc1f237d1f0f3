"""Hugging Face models as they are (tiny random configs, no downloaded weights): predicted,
traced and trained for real through the workload protocol, with no wrapper.

The factories are in this folder's conftest.py, named as user code (``<file>:hf_llama``).
"""
from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest

transformers = pytest.importorskip("transformers")

import torch  # noqa: E402

from driple.cli import main  # noqa: E402
from driple.metrics import target_names  # noqa: E402
from driple.zoo.workload import default_loss, forward, load_workload, step_loss  # noqa: E402

FACTORIES = Path(__file__).resolve().parent / "conftest.py"
MODELS = ("hf_gpt2", "hf_bert", "hf_llama")


def _ref(name: str) -> str:
    return f"{FACTORIES}:{name}"


def test_the_default_loss_reads_each_model_output():
    """One eager step of each: the default loss is what the protocol says, worked out from the
    model's own output."""
    gen = torch.Generator().manual_seed(0)
    gpt2 = load_workload(_ref("hf_gpt2"), batch_size=2)
    x, y = gpt2.make_batch(2, generator=gen)
    assert x.dtype == torch.long and x.shape == (2, 16) and y is None and int(x.max()) < 64
    out = forward(gpt2.model, x)
    assert isinstance(out, transformers.modeling_outputs.ModelOutput) and "loss" not in out
    assert gpt2.loss_fn(out, y).item() == pytest.approx(out.logits.pow(2).mean().item())

    bert = load_workload(_ref("hf_bert"), batch_size=3)
    inputs, y = bert.make_batch(3, generator=gen)
    out = forward(bert.model, inputs)
    assert bert.loss_fn is default_loss and out.logits.shape == (3, 3)
    assert bert.loss_fn(out, y).item() == pytest.approx(  # of the same output: BERT has dropout
        torch.nn.functional.cross_entropy(out.logits, y).item(), rel=1e-5)

    llama = load_workload(_ref("hf_llama"), batch_size=2)
    inputs, y = llama.make_batch(2, generator=gen)
    out = forward(llama.model, inputs)
    loss = step_loss(llama.model, inputs, y, llama.loss_fn)
    assert loss.item() == pytest.approx(out.loss.item())  # the model's own (shifted) loss
    loss.backward()
    assert all(p.grad is not None for p in llama.model.parameters())


@pytest.mark.parametrize("name", MODELS)
def test_graph_of_each(name, capsys):
    assert main(["graph", _ref(name), "--batch-size", "3", "--groups", "10", "--json"]) == 0
    s = json.loads(capsys.readouterr().out)
    real = load_workload(_ref(name), batch_size=3).model
    assert s["batch_size"] == 3 and s["params"] == sum(p.numel() for p in real.parameters())
    assert s["groups"] == 10 and s["comm_nodes"] >= 1 and s["ops"] > 200
    assert s["model"] == {"hf_gpt2": "hf_gpt2", "hf_bert": "BertForSequenceClassification",
                          "hf_llama": "LlamaForCausalLM"}[name]


@pytest.mark.parametrize("name", MODELS)
def test_predict_each(name, registry, capsys):
    assert main(["predict", _ref(name), "--batch-size", "2", "--set", "seq_len=8", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert "batch 2" in out["model"] and list(out["metrics"]) == list(target_names())


def test_predict_a_huge_batch_of_token_ids(registry, capsys):
    """A plain module of token ids: the batch is made of meta tensors, so 10^7 sequences cost
    what 2 do."""
    assert main(["predict", _ref("hf_gpt2"), "--batch-size", str(10**7), "--json"]) == 0
    assert "batch 10000000" in json.loads(capsys.readouterr().out)["model"]


def test_keyword_inputs_pass_through_ddp():
    """DistributedDataParallel hands keyword inputs (input_ids, attention_mask, labels) to the
    model: the loss through DDP equals the model's own, and every parameter gets a gradient
    (a parameter without one would stall DDP's all-reduce)."""
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    store = dist.TCPStore("127.0.0.1", port, 1, is_master=True)
    dist.init_process_group("gloo", store=store, rank=0, world_size=1)
    try:
        llama = load_workload(_ref("hf_llama"), batch_size=2)
        inputs, targets = llama.make_batch(2, generator=torch.Generator().manual_seed(0))
        expected = forward(llama.model, inputs).loss.item()
        ddp = DistributedDataParallel(llama.model)
        loss = step_loss(ddp, inputs, targets, llama.loss_fn)
        loss.backward()
        assert loss.item() == pytest.approx(expected)
        assert all(p.grad is not None for p in llama.model.parameters())
        ddp = None
    finally:
        dist.destroy_process_group()


@pytest.mark.slow
def test_collect_run_trains_a_hf_model_on_two_workers(tmp_path, capsys):
    """A real 2-worker DDP job of a Hugging Face model with keyword inputs (a few seconds)."""
    args = ["collect", "run", _ref("hf_llama"), "--batch-size", "4", "--seconds", "1",
            "--warmup", "2", "--min-iterations", "3", "--out", str(tmp_path / "runs"), "--json"]
    assert main(args) == 0
    row = json.loads(capsys.readouterr().out)
    assert row["status"] == "ok", row.get("reason")
    assert row["batch_size"] == 4 and row["model"].endswith(":hf_llama")
    params = sum(p.numel() for p in load_workload(_ref("hf_llama")).model.parameters())
    assert row["param_bytes"] == 4 * params  # float32, as built by each rank
    assert row["tx_burst_amount"] > 0 and row["compute_burst_amount"] > 0
