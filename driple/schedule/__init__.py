"""A trace-driven cluster scheduler simulation: what packing by driple's predictions is worth.

catalogue (measured jobs, measured and predicted profiles) -> trace (jobs to run, mapped to the
catalogue) -> cluster (worker slots) -> policies (where the head of the queue goes) ->
simulator (SimPy; slow-downs by the interference model) -> report (JCT, violations, oracle
gain share, CDF plot). ``driple simulate`` is the command; ``docs/schedule.md`` the guide.
"""
