"""clusterset-dns next to CoreDNS's own ``multicluster`` answers, on one API server.

:func:`run_comparison` starts the peers, asks both servers every question
(``cases``), runs the conformance suite against both (``suite``) and returns a
:class:`Comparison`; :func:`render` makes the Markdown report. ``known`` holds
the differences the project knows of, each with its reason: the CoreDNS tests
fail on any other, and on a known one that stopped occurring.
``bench/compare_coredns.py`` is the command that writes the report.
"""

from clusterset_dns_testkit.compare.common import REPO, REPORT, log
from clusterset_dns_testkit.compare.known import (
    KNOWN_DIFFERENCES,
    KNOWN_SUITE_DIFFERENCES,
    KNOWN_SUITE_FAILURES_BOTH,
    failing_on_both,
    reason_for,
    stale_patterns,
    suite_differences,
    unexplained_rows,
    unexplained_suite_differences,
    unused_known,
)
from clusterset_dns_testkit.compare.report import Comparison, render, run_comparison
from clusterset_dns_testkit.compare.suite import finish_suite, start_suite

__all__ = [
    "KNOWN_DIFFERENCES", "KNOWN_SUITE_DIFFERENCES", "KNOWN_SUITE_FAILURES_BOTH", "REPO",
    "REPORT", "Comparison", "failing_on_both", "finish_suite", "log", "reason_for", "render",
    "run_comparison", "stale_patterns", "start_suite", "suite_differences",
    "unexplained_rows", "unexplained_suite_differences", "unused_known",
]
