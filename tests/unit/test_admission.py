"""zone/admission.py on its own: what is remembered of a refused object (by object and by
the service it would feed, and which services' answers must be rebuilt), the reasons of
several refused ports joined, the endpoint name that fits to the byte and the one a byte
over (a hostname, a derived one, a terminating endpoint's), and the texts empty answers
give. Written for the survivors of ``scripts/mutate clusterset_dns/zone/admission.py``."""

from __future__ import annotations

import logging
from ipaddress import ip_address

import pytest

from clusterset_dns.base import names
from clusterset_dns.zone.admission import Admission
from clusterset_dns.zone.model import (
    Endpoint,
    EndpointSlice,
    ObjectKey,
    Port,
    ServiceImport,
    ServiceType,
)
from clusterset_dns.zone.ops import IMPORT, SLICE, Rejected, Rejection

ZONE = names.ZoneNames("clusterset.local")
SERVICE: ObjectKey = ("prod", "web")


def admission(log_rejected: bool = True) -> Admission:
    return Admission(ZONE, log_rejected)


def why(reason: str, service: ObjectKey | None = SERVICE, served: bool = False,
        source: bool = False) -> Rejection:
    return Rejection(service, reason, served, source)


# -- note: what is remembered, and what is rebuilt ---------------------------------------------

def test_note_remembers_by_object_and_by_service() -> None:
    adm, dirty = admission(), set[ObjectKey]()
    adm.note(IMPORT, SERVICE, None, dirty)  # nothing to forget
    assert (adm.rejections, adm.of_service, dirty) == ({}, {}, set())
    first = why("bad")
    adm.note(IMPORT, SERVICE, first, dirty)
    assert adm.rejections == {(IMPORT, SERVICE): first}
    assert adm.of_service == {SERVICE: {(IMPORT, SERVICE): first}}
    assert dirty == {SERVICE}
    again: set[ObjectKey] = set()
    adm.note(IMPORT, SERVICE, why("bad"), again)  # the same: nothing changes
    assert again == set()
    # a slice of the same service, then the import's reason changes
    adm.note(SLICE, ("prod", "web-1"), why("slice"), again)
    second = why("worse")
    adm.note(IMPORT, SERVICE, second, again)
    assert adm.of_service == {SERVICE: {(IMPORT, SERVICE): second,
                                        (SLICE, ("prod", "web-1")): why("slice")}}
    assert again == {SERVICE}
    # forgotten one by one: the service's entry goes with its last object
    gone: set[ObjectKey] = set()
    adm.note(IMPORT, SERVICE, None, gone)
    assert adm.of_service == {SERVICE: {(SLICE, ("prod", "web-1")): why("slice")}}
    assert adm.rejections == {(SLICE, ("prod", "web-1")): why("slice")}
    assert gone == {SERVICE}
    adm.note(SLICE, ("prod", "web-1"), None, gone)
    assert (adm.rejections, adm.of_service) == ({}, {})


def test_a_rejection_of_no_known_service_rebuilds_nothing() -> None:
    adm, dirty = admission(), set[ObjectKey]()
    adm.note(SLICE, ("prod", "x"), why("unreadable", service=None), dirty)
    assert adm.rejections == {(SLICE, ("prod", "x")): why("unreadable", service=None)}
    assert (adm.of_service, dirty) == ({}, set())
    adm.note(SLICE, ("prod", "x"), None, dirty)
    assert (adm.rejections, dirty) == ({}, set())


def test_a_rejection_moving_to_another_service_rebuilds_both() -> None:
    adm, dirty = admission(), set[ObjectKey]()
    adm.note(SLICE, ("prod", "s"), why("a", service=("prod", "one")), dirty)
    dirty.clear()
    adm.note(SLICE, ("prod", "s"), why("a", service=("prod", "two")), dirty)
    assert dirty == {("prod", "one"), ("prod", "two")}
    assert set(adm.of_service) == {("prod", "two")}


# -- reject: reported, joined, logged ------------------------------------------------------------

def test_reasons_of_several_ports_are_joined_while_the_rest_is_served() -> None:
    adm, rejected, dirty = admission(), list[Rejected](), set[ObjectKey]()
    adm.reject(rejected, IMPORT, SERVICE, "port a", True, SERVICE, dirty)
    adm.reject(rejected, IMPORT, SERVICE, "port b", True, SERVICE, dirty)
    assert rejected == [Rejected(IMPORT, SERVICE, "port a", True),
                        Rejected(IMPORT, SERVICE, "port b", True)]
    assert adm.rejections[(IMPORT, SERVICE)] == why("port a; port b", served=True)
    assert dirty == {SERVICE}


@pytest.mark.parametrize(("old", "served"), [
    (why("earlier", served=False), True),  # the old one refused the whole object
    (why("earlier", served=True, source=True), True),  # the source's, not admission's
    (why("earlier", served=True), False),  # the new one refuses the whole object
])
def test_a_reason_replaces_one_not_of_the_same_kind(old: Rejection, served: bool) -> None:
    adm, dirty = admission(), set[ObjectKey]()
    adm.note(IMPORT, SERVICE, old, dirty)
    adm.reject([], IMPORT, SERVICE, "now", served, SERVICE, dirty)
    assert adm.rejections[(IMPORT, SERVICE)] == why("now", served=served)


def test_a_rejection_is_logged_once_by_the_parent(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="clusterset_dns.zone.cache")
    admission(log_rejected=False).reject([], IMPORT, SERVICE, "r", False, SERVICE, set())
    assert caplog.records == []
    admission().reject([], IMPORT, SERVICE, "r", False, SERVICE, set())
    admission().reject([], SLICE, ("prod", "s"), "p", True, SERVICE, set())
    assert [r.getMessage() for r in caplog.records] == [
        "ServiceImport prod/web skipped: r", "EndpointSlice prod/s: p; the rest is served"]


# -- admit_import: the service's name and its ports ---------------------------------------------

def service_import(name: str = "web", namespace: str = "prod",
                   ports: tuple[Port, ...] = ()) -> ServiceImport:
    return ServiceImport(namespace, name, ServiceType.CLUSTER_SET_IP,
                         (ip_address("10.0.0.1"),), ports)


def test_an_import_that_fits_is_kept_as_it_is() -> None:
    adm, rejected, dirty = admission(), list[Rejected](), set[ObjectKey]()
    imp = service_import(ports=(Port("http", "tcp", 80), Port("", "udp", 53)))
    assert adm.admit_import(SERVICE, imp, rejected, dirty) is imp
    assert (rejected, dirty, adm.rejections) == ([], set(), {})


def test_an_import_whose_service_name_does_not_fit_is_refused() -> None:
    adm, rejected, dirty = admission(), list[Rejected](), set[ObjectKey]()
    name, namespace = "n" * 63, "s" * 63
    long_one = ServiceImport(namespace, name, ServiceType.CLUSTER_SET_IP, (), ())
    # 63 + 63 + svc.clusterset.local: fits; a zone of 200 bytes more does not
    assert Admission(ZONE, True).admit_import((namespace, name), long_one, [], set()) \
        is long_one
    far = Admission(names.ZoneNames("z" * 60 + "." + "y" * 60 + ".local"), True)
    assert far.admit_import((namespace, name), long_one, rejected, dirty) is None
    (got,) = rejected
    assert (got.kind, got.key, got.served) == (IMPORT, (namespace, name), False)
    assert got.reason.startswith("service name does not fit DNS: name longer than 255")
    assert far.rejections[(IMPORT, (namespace, name))].service == (namespace, name)
    assert dirty == {(namespace, name)}
    assert adm.rejections == {}


def test_a_port_whose_srv_name_cannot_exist_loses_only_its_name() -> None:
    adm, rejected, dirty = admission(), list[Rejected](), set[ObjectKey]()
    long_name = "p" * 63  # legal in Kubernetes; "_" + it is a label of 64 bytes
    imp = service_import(ports=(Port("http", "tcp", 80), Port(long_name, "udp", 53),
                                Port("q" * 62, "tcp", 8080), Port(long_name, "sctp", 9)))
    got = adm.admit_import(SERVICE, imp, rejected, dirty)
    assert got is not None
    assert got.ports == (Port("http", "tcp", 80), Port("", "udp", 53),
                         Port("q" * 62, "tcp", 8080), Port("", "sctp", 9))
    assert (got.name, got.namespace, got.ips) == (imp.name, imp.namespace, imp.ips)
    assert [(r.kind, r.key, r.served) for r in rejected] == [(IMPORT, SERVICE, True)] * 2
    assert rejected[0].reason.startswith(f"port {long_name!r}: no _<port>._<proto> SRV name: ")
    kept = adm.rejections[(IMPORT, SERVICE)]
    assert kept.served and kept.service == SERVICE
    assert kept.reason == f"{rejected[0].reason}; {rejected[1].reason}"
    assert dirty == {SERVICE}
    # served: the empty answers' texts do not list it
    assert adm.rejected_texts(SERVICE) == []


# -- admit_slice: every endpoint name must fit -------------------------------------------------

NAMESPACE, NAME = "s" * 63, "n" * 63  # <name>.<namespace>.svc.clusterset.local: 150 bytes
CLUSTER = "c" * 63 + "." + "d" * 30  # 96 bytes: room for a hostname of 255 - 150 - 96 = 9


def endpoint_slice(*endpoints: Endpoint, cluster: str | None = CLUSTER,
                   serving: tuple[Endpoint, ...] = (),
                   ports: tuple[Port, ...] = ()) -> EndpointSlice:
    return EndpointSlice(NAMESPACE, "slice", NAME, cluster, tuple(endpoints), ports,
                         serving=serving)


def named(hostname: str) -> Endpoint:
    return Endpoint((ip_address("10.0.0.1"),), hostname)


def derived(*addresses: str) -> Endpoint:
    return Endpoint(tuple(ip_address(a) for a in addresses), None)


def test_the_room_left_for_a_hostname_is_nine_bytes_here() -> None:
    service = ZONE.service(NAMESPACE, NAME)
    name = ZONE.endpoint(service, "h" * 9, names.subdomain(CLUSTER))
    assert names.wire_length(name) == 255
    with pytest.raises(names.InvalidName):
        ZONE.endpoint(service, "h" * 10, names.subdomain(CLUSTER))


@pytest.mark.parametrize(("piece", "admitted"), [
    (endpoint_slice(named("h" * 9)), True),  # 255 bytes
    (endpoint_slice(named("h" * 10)), False),  # 256
    (endpoint_slice(named("a"), named("h" * 10)), False),  # a later one decides
    (endpoint_slice(named("a"), serving=(named("h" * 10),)), False),  # terminating too
    (endpoint_slice(named("a"), serving=(named("h" * 9),)), True),
    (endpoint_slice(derived("10.1.2.3")), True),  # 10-1-2-3: 8
    (endpoint_slice(derived("10.1.22.3")), True),  # 9
    (endpoint_slice(derived("10.11.22.3")), False),  # 10
    (endpoint_slice(derived("10.1.2.3", "10.11.22.3")), False),  # the longest address
    (endpoint_slice(derived("10.11.22.3"), cluster=None), True),  # no cluster: no check
    (endpoint_slice(named("h" * 10), cluster="e"), True),  # a short cluster id
    # a cluster id of 55 bytes leaves 50: derived names (at most 40) need no check there,
    # but the hostnames after them do
    (endpoint_slice(derived("10.11.22.3"), named("h" * 50), cluster="c" * 53), True),
    (endpoint_slice(derived("10.11.22.3"), named("h" * 51), cluster="c" * 53), False),
])
def test_a_slice_is_refused_when_an_endpoint_name_would_not_fit(piece: EndpointSlice,
                                                                 admitted: bool) -> None:
    adm, rejected, dirty = admission(), list[Rejected](), set[ObjectKey]()
    key = (NAMESPACE, "slice")
    got = adm.admit_slice(key, piece, rejected, dirty)
    if admitted:
        assert got is piece
        assert (rejected, dirty) == ([], set())
        return
    assert got is None
    (one,) = rejected
    assert (one.kind, one.key, one.served) == (SLICE, key, False)
    assert one.reason.startswith("endpoint names do not fit DNS: ")
    assert adm.rejections[(SLICE, key)] == why(one.reason, service=(NAMESPACE, NAME))
    assert dirty == {(NAMESPACE, NAME)}


def test_a_slice_of_a_cluster_id_that_is_no_name_is_refused() -> None:
    adm, rejected = admission(), list[Rejected]()
    piece = EndpointSlice("prod", "s", "web", "east..west", (named("a"),), ())
    assert adm.admit_slice(("prod", "s"), piece, rejected, set()) is None
    assert rejected[0].reason.startswith("endpoint names do not fit DNS: ")


def test_a_slice_of_a_service_name_that_does_not_fit_is_refused() -> None:
    far = Admission(names.ZoneNames("z" * 60 + "." + "y" * 60 + ".local"), True)
    rejected, dirty = list[Rejected](), set[ObjectKey]()
    piece = endpoint_slice(named("a"))
    assert far.admit_slice((NAMESPACE, "slice"), piece, rejected, dirty) is None
    (one,) = rejected
    assert one.reason.startswith("service name does not fit DNS: ")
    assert far.rejections[(SLICE, (NAMESPACE, "slice"))].service == (NAMESPACE, NAME)


def test_a_slice_port_whose_srv_name_cannot_exist_loses_only_its_name() -> None:
    adm, rejected, dirty = admission(), list[Rejected](), set[ObjectKey]()
    piece = EndpointSlice("prod", "s", "web", "east", (named("a"),),
                          (Port("", "udp", 1), Port("p" * 63, "tcp", 80), Port("ok", "tcp", 81)))
    got = adm.admit_slice(("prod", "s"), piece, rejected, dirty)
    assert got is not None
    assert got.ports == (Port("", "udp", 1), Port("", "tcp", 80), Port("ok", "tcp", 81))
    assert got.endpoints == piece.endpoints and got.cluster == "east"
    assert [(r.kind, r.served) for r in rejected] == [(SLICE, True)]
    assert adm.rejections[(SLICE, ("prod", "s"))].service == ("prod", "web")
    assert dirty == {("prod", "web")}
    fine = EndpointSlice("prod", "s", "web", "east", (named("a"),), (Port("ok", "tcp", 81),))
    assert adm.admit_slice(("prod", "s"), fine, [], set()) is fine


# -- the texts of empty answers -----------------------------------------------------------------

def test_rejected_texts_list_the_objects_not_served_in_order() -> None:
    adm, dirty = admission(), set[ObjectKey]()
    adm.note(SLICE, ("prod", "b"), why("second"), dirty)
    adm.note(SLICE, ("prod", "a"), why("first"), dirty)
    adm.note(IMPORT, SERVICE, why("a port", served=True), dirty)
    adm.note(IMPORT, ("prod", "other"), why("elsewhere", service=("prod", "other")), dirty)
    assert adm.rejected_texts(SERVICE) == ["EndpointSlice prod/a rejected: first",
                                           "EndpointSlice prod/b rejected: second"]
    assert adm.rejected_texts(("prod", "none")) == []


def test_terminating_endpoints_are_checked_when_the_ready_ones_fit() -> None:
    # a cluster id of 55 bytes leaves 50: the ready endpoints' names fit at a glance
    piece = endpoint_slice(named("a"), serving=(named("h" * 51),), cluster="c" * 53)
    rejected = list[Rejected]()
    assert admission().admit_slice((NAMESPACE, "slice"), piece, rejected, set()) is None
    assert rejected[0].reason == \
        "endpoint names do not fit DNS: name longer than 255 bytes on the wire"


def test_an_endpoint_without_an_address_or_a_hostname_has_no_name() -> None:
    # (convert drops such an endpoint; the model can still hold one)
    bare = Endpoint((), None)
    assert admission().admit_slice((NAMESPACE, "slice"), endpoint_slice(bare), [], set()) \
        is not None
    # even where no endpoint name fits at all: 150 + 105 bytes leave 0
    piece = endpoint_slice(bare, cluster="c" * 63 + "." + "d" * 39)
    assert admission().admit_slice((NAMESPACE, "slice"), piece, [], set()) is piece


def test_a_hostname_over_63_bytes_is_refused_as_a_label() -> None:
    # (convert refuses such a hostname; the model can still hold one) 70 > the room of 50
    piece = endpoint_slice(named("h" * 70), cluster="c" * 53)
    rejected = list[Rejected]()
    assert admission().admit_slice((NAMESPACE, "slice"), piece, rejected, set()) is None
    assert rejected[0].reason == ("endpoint names do not fit DNS: label longer than 63 "
                                  "bytes: b'xxxxxxxxxxxxxxxxxxxx'...")
