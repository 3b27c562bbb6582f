"""An endpoint's ``ready`` and ``serving`` conditions as answers, with and without
--serve-terminating. The EndpointSlice API (discovery.k8s.io/v1 EndpointConditions):
``ready`` unset means ready; ``serving`` unset means "defer to ready". Each row is
one endpoint's conditions and the A answer of its Headless import (rcode, then the
answer section as zone-file text), for both settings of the flag."""

from __future__ import annotations

from typing import Any

import pytest

from clusterset_dns.base.names import ZoneNames
from clusterset_dns.serving.handler import Handler
from clusterset_dns.sources import convert
from clusterset_dns.zone.cache import Cache, PutImport, PutSlice, SetSynced
from clusterset_dns_testkit.objects import endpoint_slice, service_import

from .helpers import DEFAULT_UDP_CAP, ZONE, ask, query, rcode_name

NAME = "db.prod.svc.clusterset.local."
ANSWERED = ["NOERROR", f"{NAME} 5 in a 10.0.0.1"]
NONE = ["NXDOMAIN"]  # a Headless import with no endpoint to answer with (dns-behaviour.md)

# (conditions of the one endpoint, answer without the flag, answer with it)
ROWS = [
    pytest.param({}, ANSWERED, ANSWERED, id="ready-unset-serving-unset"),
    pytest.param({"ready": True}, ANSWERED, ANSWERED, id="ready-true-serving-unset"),
    pytest.param({"ready": None, "serving": None}, ANSWERED, ANSWERED, id="both-null"),
    # serving unset defers to ready: not serving either, so never answered
    pytest.param({"ready": False}, NONE, NONE, id="ready-false-serving-unset"),
    pytest.param({"ready": False, "terminating": True}, NONE, NONE,
                 id="ready-false-serving-unset-terminating"),
    pytest.param({"ready": False, "serving": False}, NONE, NONE, id="ready-false-serving-false"),
    # terminating but still serving: only --serve-terminating answers with it
    pytest.param({"ready": False, "serving": True, "terminating": True}, NONE, ANSWERED,
                 id="ready-false-serving-true"),
    pytest.param({"ready": False, "serving": True}, NONE, ANSWERED,
                 id="ready-false-serving-true-not-terminating"),
    # ready is what a consumer answers with; serving only matters when ready is false
    pytest.param({"ready": True, "serving": False}, ANSWERED, ANSWERED,
                 id="ready-true-serving-false"),
    pytest.param({"serving": False}, ANSWERED, ANSWERED, id="ready-unset-serving-false"),
]


def answer(conditions: dict[str, Any], serve_terminating: bool) -> list[str]:
    raw = {"addresses": ["10.0.0.1"]}
    if conditions:
        raw["conditions"] = conditions
    piece = convert.endpoint_slice(endpoint_slice("db-east", "db", cluster="east",
                                                  endpoints=[raw]))
    assert piece is not None
    cache = Cache(ZoneNames(ZONE), 5, serve_terminating=serve_terminating)
    cache.apply([PutImport(("prod", "db"), convert.service_import(
        service_import("db", type_="Headless"))), PutSlice(("prod", "db-east"), piece),
        SetSynced(True)])
    reply = ask(Handler(cache.zone, DEFAULT_UDP_CAP), query(NAME, "A"))
    return [rcode_name(reply.rcode), *reply.answer]


@pytest.mark.parametrize(("conditions", "without", "with_flag"), ROWS)
def test_conditions_as_answers(conditions: dict[str, Any], without: list[str],
                               with_flag: list[str]) -> None:
    assert answer(conditions, serve_terminating=False) == without
    assert answer(conditions, serve_terminating=True) == with_flag
