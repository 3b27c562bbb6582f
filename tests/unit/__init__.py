"""Unit tests: no network, no API server, no subprocesses.

A package (unlike tests/conformance) so that its module names, several of
which repeat the conformance suite's, do not clash when both run together.
"""
