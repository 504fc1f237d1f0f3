"""The evaluation as a library: each module measures one thing on shipped or given data and
returns plain dicts; the commands (``driple hardware evaluate``, ``scripts/``) only print or
write them. :mod:`hardware`: predictions carried to the machine each row was measured on;
:mod:`reproduce`: the README's results, one module per section, and their report
(``python -m driple.evaluation`` writes it);
``bench_*``: what the inspector, the sampler and the timeline recorder cost on this machine.
"""
