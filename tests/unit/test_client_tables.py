"""Memories a client can fill (docs/dns-behaviour.md §8): each is bounded and starts
over when full, so that what clients ask now is still served the cheap way."""

from __future__ import annotations

from clusterset_dns.serving import handler as handler_module
from clusterset_dns.serving.handler import Handler
from clusterset_dns.zone import truncate, wire
from clusterset_dns_testkit.objects import endpoint, endpoint_slice, port, service_import

from .helpers import DEFAULT_UDP_CAP, ask, build_cache, decode, query

WEB = "web.prod.svc.clusterset.local."
BIG = "big.prod.svc.clusterset.local."
BIG_KEY = b"\x03big\x04prod\x03svc\x0aclusterset\x05local\x00\x00\x01\x00\x01"


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


# -- the OPT records carrying an EDE text ------------------------------------------------------

def test_the_explained_opts_table_holds_exactly_its_cap_then_starts_over() -> None:
    """One pair of OPT records (DO clear, set) per distinct EDE option: the cap-th still
    fits, one more starts over with the newest alone; each pair is our OPT with the
    option as its RDATA."""
    handler = web_handler()
    cap = handler_module._MAX_EXPLAINED_OPTS
    options = [wire.ede(wire.EDE_OTHER, f"reason {i}") for i in range(cap + 1)]
    for option in options[:cap]:
        handler._opts(option)
    assert len(handler._explained_opts) == cap
    clear, do = handler._opts(options[cap])
    assert list(handler._explained_opts) == [options[cap]]
    assert clear == handler._opt[0][:-2] + options[cap]
    assert do == handler._opt[1][:-2] + options[cap]
    assert handler._opts(options[cap]) == (clear, do)


# -- truncated forms --------------------------------------------------------------------------

def _form(size: int) -> truncate.Form:
    return (wire.heads(0, 1, 0, 0, wire.QR | wire.AA | wire.TC, False), b"x" * size)


def test_truncated_forms_fill_their_byte_budget_exactly_then_start_over() -> None:
    """Counted as key + body + FORM_OVERHEAD: forms that sum to the budget are all
    kept; one byte more starts over with the newest alone."""
    key = b"\x03big\x04prod\x00\x00\x01\x00\x01"
    cost = len(key) + 1000 + truncate.FORM_OVERHEAD
    memory = truncate.FormMemory(budget=10 * cost)
    for room in range(10):
        memory.put((key, 0, room), _form(1000))
    assert len(memory) == 10 and memory.used == memory.budget  # the last byte fits
    memory.put((key, 1, 0), None)  # nothing fits: costs its key and the overhead
    assert list(memory) == [(key, 1, 0)]
    assert memory.used == len(key) + truncate.FORM_OVERHEAD
    memory.clear()
    for room in range(9):
        memory.put((key, 0, room), _form(1000))
    memory.put((key, 0, 9), _form(1001))  # one byte over the budget
    assert list(memory) == [(key, 0, 9)] and memory.used == cost + 1


def test_a_flood_of_client_sizes_keeps_the_forms_within_the_budget() -> None:
    """Every EDNS size up to --edns-udp-size 4096 for an answer that needs cutting:
    the forms the handler keeps never pass the default budget (before: 4,096 forms,
    whatever their size: about 19 MiB of them at 4 KiB each)."""
    addresses = [endpoint(f"10.3.{i // 250}.{i % 250 + 1}") for i in range(400)]
    cache = build_cache([service_import("big", type_="Headless", ports=[port(80, "TCP", "x")])],
                        [endpoint_slice("big-a", "big", cluster="east",
                                        ports=[port(80, "TCP", "x")], endpoints=addresses)])
    handler = Handler(cache.zone, 4096)
    forms = cache.zone.cut_forms
    counted = largest = 0
    for payload in range(512, 4097):
        for rotation in range(truncate.ROTATIONS):
            handler.zone.cuts[BIG_KEY].rotation.clock = lambda r=rotation: float(r)
            response = handler.handle(query(BIG, "A", edns=0, payload=payload), False)
            assert response is not None and response[2] & 0x02  # TC
            counted += 1
        # What is kept, counted from the forms themselves, at its largest.
        kept = sum(len(memo[0]) + len(form[1]) + truncate.FORM_OVERHEAD
                   for memo, form in ((m, forms[m]) for m in forms) if form is not None)
        largest = max(largest, kept)
    assert largest <= truncate.FORMS_BUDGET
    assert counted > len(forms) > 0  # it started over, and kept what came last
