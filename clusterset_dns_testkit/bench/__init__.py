"""The benchmark's parts: ``dataset`` (objects and queries), ``servers``,
``knot`` and ``coredns`` (the servers measured), ``dnsperf`` (the load),
``measure`` (one server, and rounds combined), ``report``. ``bench/run.py`` is
the command."""
