"""The evaluation as a library: each module measures one thing on shipped or given data and
returns plain dicts; the commands (``driple hardware evaluate``, ``scripts/``) only print or
write them. :mod:`hardware`: predictions carried to the machine each row was measured on.
"""
