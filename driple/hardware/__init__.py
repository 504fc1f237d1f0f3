"""What a machine is, in one place: the spec every row, inspector and prediction names.

Modules: :mod:`spec` (:class:`HardwareSpec`, versioned, plain JSON), :mod:`probe` (measures
this machine into a spec in a few seconds), :mod:`devices` (the device kinds a setting runs
on: what each samples, records and needs), :mod:`host_speed` (the figures the inspector's
priors divide by), :mod:`host_check` (this host beside the one an inspector was trained on),
:mod:`scaling` (a prediction carried from the machine an inspector knows to another spec),
:mod:`blas` (the buffers the machine's BLAS keeps between matrix products: part of a worker's
memory).
"""
