"""FLOP formulas of the traced ops: torch's (``torch.utils.flop_counter``), with corrections.

torch's ``convolution_backward`` formula drops the convolution's ``groups`` when it counts the
weight gradient (checked up to torch 2.13; see pytorch/pytorch PR 183405): a depthwise 3x3
convolution over C channels is charged as a dense C x C one, C times its cost. MobileNet-,
EfficientNet-, ConvNeXt- and ResNeXt-style networks then look far heavier than they run, and
every FLOP-based step-time prior is wrong for them. Here each gradient of a convolution costs
what its forward did (the same multiply-adds, rearranged), with the groups in the weight's shape.

torch has no formula for the fused recurrent layers (LSTM, GRU, RNN): on CPU ``nn.LSTM`` runs as
``mkldnn_rnn_layer`` (one per layer and direction) and its backward, on GPU as ``_cudnn_rnn``, and
each was counted as one FLOP per output element -- a 2-layer LSTM language model's recurrent
layers as 0.0016 GFLOP per step instead of 4.3. Here each weight matrix of the layer costs one
multiply-add per token (``2 x tokens x weight elements``; the gates' elementwise work is not
counted, as torch does not count a linear layer's bias), and the backward twice that (the
gradients of the inputs and hidden states, and of the weights).
"""
from __future__ import annotations

import math
from typing import Callable, Optional

import torch
from torch.utils.flop_counter import conv_flop_count, flop_registry, shape_wrapper


def conv_backward_flops(grad_out_shape, x_shape, w_shape, _bias, _stride, _padding, _dilation,
                        transposed, _output_padding, _groups, output_mask, out_shape=None,
                        **kwargs) -> int:
    """FLOPs of ``aten.convolution_backward``: one forward's worth per gradient asked for
    (``output_mask``: input, weight; the bias gradient is a reduction, not counted, as in
    torch). ``w_shape`` is ``[C_out, C_in / groups, *kernel]`` (transposed: ``[C_in, C_out /
    groups, *kernel]``), so the forward count already carries the groups."""
    forward = conv_flop_count(list(x_shape), list(w_shape), list(grad_out_shape), transposed=transposed)
    return forward * (int(bool(output_mask[0])) + int(bool(output_mask[1])))


def _recurrent_forward(x_shape, weight_shapes, batch_sizes=()) -> int:
    """2 x tokens x elements of the 2-D weights (the biases are 1-D): a fused recurrent layer's
    forward. Tokens: time steps x sequences; a packed input (``batch_sizes`` given) is
    ``[tokens, features]``, a padded one ``[..., features]``."""
    tokens = int(x_shape[0]) if batch_sizes else math.prod(int(d) for d in x_shape[:-1])
    return 2 * tokens * sum(int(w[0]) * int(w[1]) for w in weight_shapes if w is not None and len(w) == 2)


def mkldnn_rnn_layer_flops(x_shape, w_ih_shape, w_hh_shape, *_args, out_shape=None, **_kwargs) -> int:
    """FLOPs of ``aten.mkldnn_rnn_layer`` (CPU; one layer, one direction): every token goes through
    the input-to-hidden and the hidden-to-hidden matrix once (``[gates x hidden, in]``,
    ``[gates x hidden, hidden]``)."""
    return _recurrent_forward(x_shape, (w_ih_shape, w_hh_shape))


def mkldnn_rnn_layer_backward_flops(x_shape, w_ih_shape, w_hh_shape, *_args, out_shape=None,
                                    **_kwargs) -> int:
    """FLOPs of ``aten.mkldnn_rnn_layer_backward``: twice the forward's (the gradients of the
    layer's input and hidden states, and of its two weight matrices)."""
    return 2 * mkldnn_rnn_layer_flops(x_shape, w_ih_shape, w_hh_shape)


def cudnn_rnn_flops(x_shape, weight_shapes, _stride0, _weight_buf, _hx, _cx, _mode, _hidden_size,
                    _proj_size, _num_layers, _batch_first, _dropout, _train, _bidirectional,
                    batch_sizes, *_args, out_shape=None, **_kwargs) -> int:
    """FLOPs of ``aten._cudnn_rnn`` (GPU; every layer and direction at once): each 2-D weight of
    the list (input-to-hidden, hidden-to-hidden, projection; per layer and direction) once per
    token."""
    return _recurrent_forward(x_shape, weight_shapes, batch_sizes)


def cudnn_rnn_backward_flops(x_shape, weight_shapes, _stride0, _weight_buf, _hx, _cx, _output,
                             _grad_output, _grad_hy, _grad_cy, _mode, _hidden_size, _proj_size,
                             _num_layers, _batch_first, _dropout, _train, _bidirectional,
                             batch_sizes, _dropout_state, _reserve, output_mask, *_args,
                             out_shape=None, **_kwargs) -> int:
    """FLOPs of ``aten._cudnn_rnn_backward``: a forward's worth for the data gradients (input,
    hx, cx: ``output_mask[:3]``) and one for the weights' (``output_mask[3]``)."""
    forward = _recurrent_forward(x_shape, weight_shapes, batch_sizes)
    return forward * (int(any(bool(m) for m in output_mask[:3])) + int(bool(output_mask[3])))


_OVERRIDES = {torch.ops.aten.convolution_backward: shape_wrapper(conv_backward_flops)}
for _name, _formula in (("mkldnn_rnn_layer", mkldnn_rnn_layer_flops),
                        ("mkldnn_rnn_layer_backward", mkldnn_rnn_layer_backward_flops),
                        ("_cudnn_rnn", cudnn_rnn_flops),
                        ("_cudnn_rnn_backward", cudnn_rnn_backward_flops)):
    if hasattr(torch.ops.aten, _name):  # builds without oneDNN or cuDNN may lack the op
        _OVERRIDES[getattr(torch.ops.aten, _name)] = shape_wrapper(_formula)


def flop_formula(func) -> Optional[Callable]:
    """The FLOP formula of an ATen op overload (called with the op's arguments and
    ``out_val=``), or None for an op counted as one FLOP per output element."""
    packet = getattr(func, "overloadpacket", None)
    return None if packet is None else _OVERRIDES.get(packet) or flop_registry.get(packet)
