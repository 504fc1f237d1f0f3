"""Timeline labels (DriplePerf v2): *when* from the job's own timeline, *how much* from counters.

The paper's labeller splits 100 Hz samples into burst and idle with 2-means; it cannot resolve
a burst shorter than a sample (and on CPU hosts the process clock's 10 ms ticks alone make
bursts). Here every rank records its own timeline while it trains and the labels come from it.

Data flow, one module each:

| step | module | what |
|---|---|---|
| record (in the worker) | :mod:`recorder` | iteration marks, compute runs, comm intervals with bytes, allocated-bytes samples |
| record (GPU / optional) | :mod:`profiler` | the same from a ``torch.profiler`` window (CUDA kernels, NCCL) |
| store | :mod:`record` | :class:`RankTimeline`: compact arrays per rank, ``raw/<job_id>.timeline.npz`` |
| label | :mod:`driple.collect.labels.timeline` | runs per iteration -> burst/idle durations, amounts from the sampled counters, step time |

Importing this package is cheap (numpy only where used).
"""
