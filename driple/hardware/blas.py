"""The buffers a CPU worker's BLAS keeps between matrix products: part of its memory, set by the
machine's code path.

torch's CPU wheels multiply matrices with MKL. MKL packs the blocks of each product into a
buffer of its own, and keeps the buffer after the call for the next one: a product that needs
a bigger buffer than any it holds gets a new one, and the old ones stay (five at most). So
after the first training step a worker holds, all step long, the buffers whose sizes set a new
record in the step's order of products (:func:`kept_bytes`).

A buffer's size follows MKL's blocking, which depends on the code path MKL takes on the CPU, and
MKL picks the path by CPU vendor as well as instruction set
(:func:`driple.hardware.probe.blas_code_path`). Measured on the collecting host with
``mkl_serv_mem_stat`` after one product of each shape ``A (M x K) @ B (K x N)`` on one thread
(torch's 2.13 wheel, MKL 2024.2; :data:`PATHS`):

- ``mkl-0`` (AMD EPYC, AVX-512): ``17 kB + 4 kc (2 min(M, 384) + min(N, 6400))`` bytes, N
  rounded up to 16; none below M 4 or N 16;
- ``mkl-7`` (MKL's Intel AVX-512 path; the AMD host made to take it reproduces the Intel Xeon
  rows' memory to 0.1 MB): ``4.2 MB + 4 kc (min(M, 384) + min(N, 9984))``, N rounded up to 48
  (A unpacked below K 48: ``4.2 MB + 512 min(N, 9984)``); none below M or N 192, unless B is
  a transposed view (``x @ W.t()``, a linear layer's forward): then none below an M of about
  K / 24 (16 from K 384), nor below an N of K or M + 1, whichever is more (192 at most). An
  Intel host keeps 0 to 20 MB more per worker than an AMD one on the same job
  (``docs/memory.md``).

``kc`` is MKL's block of K (per path, :func:`_kc`). Which ops reach MKL on a one-thread worker
(:func:`products`): matrix products (``mm``, ``addmm``, ``bmm``, ``baddbmm``) and the
convolutions torch runs as im2col + GEMM (``slow_conv2d``: what torch does not hand to oneDNN,
a 1x1 unstrided convolution at a batch under 16, and tiny batch-1 ones), one product per
sample, three per sample in the backward pass.
"""
from __future__ import annotations

import math
from typing import Callable, Iterable, Optional, Sequence

import torch

_aten = torch.ops.aten
# a matrix product's A and B, by argument position
_PRODUCTS = {_aten.mm.default: (0, 1), _aten.addmm.default: (1, 2), _aten.bmm.default: (0, 1),
             _aten.baddbmm.default: (1, 2)}
#: The ops whose CPU kernels may hand MKL a matrix product: the trace keeps their arguments
#: (:class:`~driple.graph.trace.OpNode` ``args``) for :func:`products`.
BLAS_OPS = frozenset(_PRODUCTS) | {_aten.convolution.default, _aten.convolution_backward.default}


def _round_up(n: int, to: int) -> int:
    return -(-int(n) // to) * to


def _kc(k: int, path: str) -> int:
    """MKL's block of the product's inner dimension ``k`` on ``path`` (measured: a K too big for
    one block is split in two equal blocks up to twice the block, else cut into full blocks)."""
    if path == "mkl-0":
        return 128 if k <= 128 else k if k <= 192 else k // 2 if k <= 384 else 192
    return 128 if k <= 128 else k if k <= 384 else math.ceil(k / 2) if k <= 768 else 384


def _mkl0(m: int, k: int, n: int, b_transposed: bool = False) -> int:
    if m < 4 or n < 16 or k < 2:
        return 0
    return int(17_000 + 4 * _kc(k, "mkl-0") * (2 * min(m, 384) + min(_round_up(n, 16), 6400)))


def _mkl7(m: int, k: int, n: int, b_transposed: bool = False) -> int:
    # unpacked below these: M and N 192; with B transposed, an M under K / 24 (16 from K 384)
    # or an N under K or M + 1 (192 at most)
    if b_transposed:
        smallest_m, smallest_n = (16 if k >= 384 else max(2, k // 24 + 1)), min(192, max(k, m + 1))
    else:
        smallest_m, smallest_n = 192, 192
    if m < smallest_m or n < smallest_n or k < 2:
        return 0
    n_block = min(_round_up(n, 48), 9984)
    if k < 48:  # A is not packed
        return int(4_217_500 + 4 * 128 * n_block)
    return int(4_205_000 + 4 * _kc(k, "mkl-7") * (min(m, 384) + n_block))


#: Buffer bytes of one float32 product ``(M, K, N, B transposed)`` per MKL code path (module
#: docstring).
PATHS: dict[str, Callable[..., int]] = {"mkl-0": _mkl0, "mkl-7": _mkl7}


def buffer_bytes(path: str, m: int, k: int, n: int, b_transposed: bool = False) -> int:
    """The buffer MKL packs a float32 product ``(M x K) @ (K x N)`` into on ``path``
    (``b_transposed``: B is a transposed view, as a linear layer's ``W.t()``)."""
    return PATHS[path](int(m), int(k), int(n), bool(b_transposed))


#: Buffers MKL keeps at most (one thread; measured on both paths): a sixth bigger one replaces
#: the smallest.
MAX_BUFFERS = 5


def kept_bytes(path: str, shapes: Iterable[tuple]) -> int:
    """The buffers MKL holds after products of ``shapes`` ``(M, K, N[, B transposed])`` in this
    order: each product that needs more than the biggest buffer held gets a new one (in place of
    the smallest when :data:`MAX_BUFFERS` are held), the others reuse one."""
    held: list[int] = []
    for shape in shapes:
        size = buffer_bytes(path, *shape)
        if size > max(held, default=0):
            if len(held) == MAX_BUFFERS:
                held.remove(min(held))
            held.append(size)
    return sum(held)


def _im2col(input_shape: Sequence[int], weight_shape: Sequence[int], stride, padding, dilation,
            transposed: bool, groups: int) -> Optional[tuple[int, int, int, int]]:
    """``(batch, C_out, C_in kh kw, H_out W_out)`` of a convolution torch runs as im2col + GEMM
    on a one-thread CPU worker (``slow_conv2d``: not oneDNN, whose choice is torch's
    ``ConvParams::use_mkldnn`` for float32), else None."""
    if transposed or groups != 1 or len(input_shape) not in (3, 4) or len(weight_shape) != len(input_shape):
        return None
    spatial = list(input_shape[2:])
    kernel = list(weight_shape[2:])
    stride, padding, dilation = (list(x) if isinstance(x, (list, tuple)) else [x] * len(kernel)
                                 for x in (stride, padding, dilation))
    batch = int(input_shape[0])
    one_by_one = all(k == 1 for k in kernel)
    plain = batch >= 16 or not one_by_one or any(s != 1 for s in stride) or any(d != 1 for d in dilation)
    big = (len(kernel) == 2 and all(k > 3 for k in kernel)) or batch > 1 or math.prod(input_shape) > 20480
    if plain and big:  # oneDNN's
        return None
    out = [(x + 2 * p - d * (k - 1) - 1) // s + 1 for x, p, d, k, s in zip(spatial, padding, dilation, kernel, stride)]
    return batch, int(weight_shape[0]), int(weight_shape[1]) * math.prod(kernel), math.prod(out)


def _transposed(strides: Sequence[int]) -> bool:
    """Whether a matrix (the last two dimensions) is a transposed view: its rows are adjacent."""
    return len(strides) >= 2 and strides[-2] == 1 and strides[-1] != 1


def products(nodes: Iterable) -> list[tuple[int, int, int, bool]]:
    """The float32 matrix products ``(M, K, N, B transposed)`` one worker thread hands MKL in a
    traced step (:class:`~driple.graph.trace.OpNode` s with their ``args``), in order. In the
    im2col backward pass the weight's gradient multiplies by the transposed columns."""
    out = []
    for node in nodes:
        args = getattr(node, "args", ())
        if not args:
            continue
        target = node.target
        if target in _PRODUCTS:
            (a, _), (b, b_strides) = (args[i] for i in _PRODUCTS[target])
            out.append((int(a[-2]), int(a[-1]), int(b[-1]), _transposed(b_strides)))
        elif target is _aten.convolution.default:
            conv = _im2col(args[0][0], args[1][0], args[3], args[4], args[5], args[6], args[8])
            if conv:
                batch, c_out, cols, hw = conv
                out.extend([(c_out, cols, hw, False)] * batch)
        elif target is _aten.convolution_backward.default:
            conv = _im2col(args[1][0], args[2][0], args[4], args[5], args[6], args[7], args[9])
            if conv:
                batch, c_out, cols, hw = conv
                mask = args[10] if len(args) > 10 else (True, True, True)
                per_sample = (([(cols, c_out, hw, False)] if mask[0] else [])
                              + ([(c_out, hw, cols, True)] if mask[1] else []))
                out.extend(per_sample * batch)
    return out


def kept_buffer_bytes(traced, path: str) -> Optional[int]:
    """What MKL holds all step long in a worker of ``traced`` on code path ``path`` (bytes), or
    None for a path not measured (another BLAS, another MKL path): then nothing is added."""
    return kept_by_path(traced, [path]).get(path)


def kept_by_path(traced, paths) -> dict:
    """``{path: bytes}`` :func:`kept_buffer_bytes` for each of ``paths`` that is measured, the
    step's products listed once."""
    measured = [p for p in paths if p in PATHS]
    shapes = products(traced.graph_module.nodes) if measured else []
    return {p: kept_bytes(p, shapes) for p in measured}


#: The code path of the machines whose rows were measured before a spec named it (by the rows'
#: ``cpu_model``): probed on the AMD EPYC host; the Intel Xeon's is the one that reproduces its
#: rows (``docs/memory.md``).
RECORDED_PATHS = {"AMD EPYC": "mkl-0", "Intel(R) Xeon(R) Processor": "mkl-7"}


def machine_path(blas_path: Optional[str], cpu_model: Optional[str]) -> str:
    """A machine's BLAS code path: the one its spec names, else the one recorded for its CPU
    model (:data:`RECORDED_PATHS`), else ``""`` (not known: no buffers added)."""
    return str(blas_path or RECORDED_PATHS.get(str(cpu_model or ""), ""))


def spec_path(spec) -> str:
    """:func:`machine_path` of a :class:`~driple.hardware.spec.HardwareSpec` (``""`` for None)."""
    return "" if spec is None else machine_path(getattr(spec, "blas_path", ""), spec.cpu_model)
