"""What the tests and the benchmarks share, in one importable place.

``peers`` (etcd, kube-apiserver, CoreDNS on loopback), ``dnsserver`` (our server
as a subprocess), ``compare`` (the comparison with CoreDNS's own answers, and
the differences it is known to have) and ``bench`` (the benchmark's data sets,
servers, load and report). ``tests/`` and ``bench/`` import from here, never
from each other.

Not installed with the server: pytest finds it through ``pythonpath = ["."]``
and every script under ``bench/`` puts the repository root first on
``sys.path``, so each checkout uses its own copy.
"""
