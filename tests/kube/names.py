"""Names of the kube tests' zone and the answer lines expected for them."""

from __future__ import annotations

ZONE = "svc.clusterset.local."


def fqdn(*labels: str) -> str:
    return ".".join(labels) + "." + ZONE


def a(name: str, *ips: str, ttl: int = 5) -> list[str]:
    kind = "AAAA" if ":" in (ips[0] if ips else "") else "A"
    return [f"{name} {ttl} IN {kind} {ip}" for ip in ips]
