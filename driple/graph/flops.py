"""FLOP formulas of the traced ops: torch's (``torch.utils.flop_counter``), with corrections.

torch's ``convolution_backward`` formula drops the convolution's ``groups`` when it counts the
weight gradient (checked up to torch 2.13; see pytorch/pytorch PR 183405): a depthwise 3x3
convolution over C channels is charged as a dense C x C one, C times its cost. MobileNet-,
EfficientNet-, ConvNeXt- and ResNeXt-style networks then look far heavier than they run, and
every FLOP-based step-time prior is wrong for them. Here each gradient of a convolution costs
what its forward did (the same multiply-adds, rearranged), with the groups in the weight's shape.
"""
from __future__ import annotations

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


_OVERRIDES = {torch.ops.aten.convolution_backward: shape_wrapper(conv_backward_flops)}


def flop_formula(func) -> Optional[Callable]:
    """The FLOP formula of an ATen op overload (called with the op's arguments and
    ``out_val=``), or None for an op counted as one FLOP per output element."""
    packet = getattr(func, "overloadpacket", None)
    return None if packet is None else _OVERRIDES.get(packet) or flop_registry.get(packet)
