"""Benchmarks of the operators against eager PyTorch, torch.compile and the copy bandwidth.

python -m bench                 # full matrix on the GPU if present, else the CPU
python -m bench --quick         # a few small cases (CI)
nox -s bench -- --quick
"""
