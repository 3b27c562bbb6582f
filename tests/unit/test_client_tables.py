"""Memories a client can fill (docs/dns-behaviour.md §8): each is bounded and starts
over when full, so that what clients ask now is still served the cheap way."""

from __future__ import annotations

from clusterset_dns.serving import handler as handler_module
from clusterset_dns.serving.handler import Handler
from clusterset_dns_testkit.objects import endpoint, endpoint_slice, port, service_import

from .helpers import DEFAULT_UDP_CAP, ask, build_cache, decode, query

WEB = "web.prod.svc.clusterset.local."


def web_handler() -> Handler:
    cache = build_cache([service_import("web", ips=["10.1.0.1"], ports=[port(80, "TCP", "x")])],
                        [endpoint_slice("web-a", "web", cluster="east",
                                        ports=[port(80, "TCP", "x")],
                                        endpoints=[endpoint("10.1.1.1")])])
    return Handler(cache.zone, DEFAULT_UDP_CAP)


# -- the EDNS tails table -----------------------------------------------------------------

def test_a_new_opt_shape_takes_the_fast_path_after_a_flood_of_payload_sizes() -> None:
    """1,100 distinct payload sizes (more than the table holds) from one client, then
    a client with a shape never seen (another size, DO set): the fast path answers it
    and remembers its shape. Before, the full table learned nothing more, and every
    new shape took the slow path for the process's life."""
    handler = web_handler()
    for size in range(1300, 1300 + 1100):
        assert ask(handler, query(WEB, "A", edns=0, payload=size)).rcode == 0
    assert len(handler._tails) <= handler_module._MAX_TAILS
    fresh = query(WEB, "A", edns=0, payload=700, do=True)
    tail = fresh[-handler_module.OPT_LEN:]
    assert tail not in handler._tails
    response = handler.fast(fresh[2:], False)
    assert response is not None, "a new EDNS shape was sent to the slow path"
    assert tail in handler._tails
    reply = decode(fresh[:2] + response)
    assert reply.rcode == 0 and reply.msg.payload == DEFAULT_UDP_CAP
    assert reply.msg.ednsflags & 0x8000  # DO echoed


def test_the_tails_table_holds_exactly_its_cap_then_starts_over() -> None:
    handler = web_handler()
    cap = handler_module._MAX_TAILS
    for size in range(2000, 2000 + cap):
        handler.fast(query(WEB, "A", edns=0, payload=size)[2:], False)
    assert len(handler._tails) == cap  # the cap-th shape still fits
    handler.fast(query(WEB, "A", edns=0, payload=1000)[2:], False)
    assert len(handler._tails) == 1  # one more: started over, with the new one
