"""clusterset-dns: authoritative DNS for the Kubernetes MCS ``clusterset.local`` zone."""

__version__ = "0.1.0"
