"""Burst/idle labels of a job, one module per labeller:

| module | what |
|---|---|
| :mod:`timeline` | labels v2 (the row's metric columns): runs per iteration from the ranks' timelines, amounts from the sampled counters, step time |
| :mod:`kmeans` | the paper's labeller (``kmeans_<metric>`` columns): 2-means on the sampled series, :class:`BurstIdleLabeller` |
| :mod:`job` | both labellers over one job's raw data (:func:`label_job`): what ``results`` does after a job |
| :mod:`relabel` | a dataset's labels recomputed from its raw files and compared with its table (``driple collect relabel``) |

Importing this package is cheap (numpy, scikit-learn only where used).
"""
