"""placeholder"""
def sweep_configs(seed=0, n=None): raise NotImplementedError
def estimate_step_seconds(*a, **k): raise NotImplementedError
