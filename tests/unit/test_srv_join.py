"""wire.srv_answer (the one-pass SRV join used at build time) writes the very bytes the
general Encoder writes, or declines (None) where pointers would not reach."""

from __future__ import annotations

import random

import pytest

from clusterset_dns.base.names import Labels, to_wire
from clusterset_dns.zone import wire

SVC: Labels = (b"web", b"prod", b"svc", b"clusterset", b"local")
NAMED: Labels = (b"_http", b"_tcp", *SVC)


def encoded(question: Labels, ttl: int, weight: int, targets: list[tuple[Labels, int]],
            glue: dict[Labels, list[bytes]]) -> wire.Answer:
    enc = wire.Encoder(question)
    for target, port in targets:
        enc.srv(0, question, ttl, priority_of(port), weight, port, target, to_wire(target))
    for target in dict.fromkeys(t for t, _ in targets):
        for packed in glue.get(target, []):
            enc.address(2, target, ttl, packed)
    return enc.finish()


def joined(question: Labels, ttl: int, weight: int, targets: list[tuple[Labels, int]],
           glue: dict[Labels, list[bytes]]) -> wire.Answer | None:
    return wire.srv_answer(question, ttl,
                           [(to_wire(t), port, priority_of(port), weight)
                            for t, port in targets],
                           [(to_wire(t), glue.get(t, []))
                            for t in dict.fromkeys(t for t, _ in targets)])


def priority_of(port: int) -> int:
    """Priorities that differ between records of one answer (tiers, issue 20)."""
    return port % 7  # 80, 443, 5432: 3, 2, 0


def same(a: wire.Answer, b: wire.Answer) -> None:
    assert (a.heads, a.body, a.rcode, a.glue_at) == (b.heads, b.body, b.rcode, b.glue_at)


def hosts(count: int, rng: random.Random) -> list[Labels]:
    return [(f"pod-{i}-{'x' * rng.randrange(20)}".encode(), b"east", *SVC) for i in range(count)]


@pytest.mark.parametrize("question", [SVC, NAMED], ids=["bare", "named"])
@pytest.mark.parametrize("seed", range(12))
def test_the_join_writes_the_encoders_bytes(question: Labels, seed: int) -> None:
    rng = random.Random(seed)
    pods = hosts(rng.randrange(1, 60), rng)
    # The service itself as a target (ClusterSetIP), endpoint names, repeated targets
    # (several ports), targets without glue, IPv4 and IPv6 glue.
    pool = [SVC, *pods]
    targets = list(dict.fromkeys((rng.choice(pool), rng.choice((80, 443, 5432)))
                                 for _ in range(rng.randrange(1, 120))))
    glue = {t: [bytes(rng.randrange(256) for _ in range(rng.choice((4, 16))))
                for _ in range(rng.randrange(0, 3))] for t in pool if rng.random() < 0.9}
    ttl, weight = rng.randrange(1, 3600), rng.randrange(1, 101)
    answer = joined(question, ttl, weight, targets, glue)
    assert answer is not None
    same(answer, encoded(question, ttl, weight, targets, glue))


def test_declines_where_pointers_cannot_reach() -> None:
    rng = random.Random(1)
    pods = hosts(400, rng)  # about 60 bytes a record: past 16,383 bytes
    targets = [(p, 80) for p in pods]
    glue = {p: [bytes((10, 0, i // 256, i % 256))] for i, p in enumerate(pods)}
    assert joined(SVC, 5, 1, targets, glue) is None
    small = targets[:100]
    answer = joined(SVC, 5, 1, small, glue)
    assert answer is not None
    same(answer, encoded(SVC, 5, 1, small, glue))
