"""base/config.py on its own: each parser's accepted and refused text at its edges, and
every check of Config.__post_init__ with the exact message it gives (the message names
the flag, so a user knows what to fix)."""

from __future__ import annotations

import dataclasses
import re
from ipaddress import ip_network
from pathlib import Path

import pytest

from clusterset_dns.base import config
from clusterset_dns.base.config import Config, ConfigError, DnstapTarget


@pytest.mark.parametrize(("text", "expected"), [
    ("127.0.0.1:53", ("127.0.0.1", 53)),
    ("[::1]:53", ("::1", 53)),
    ("::1:53", ("::1", 53)),  # the port is after the last colon
    (":53", ("::", 53)),  # every address
    ("[]:53", ("::", 53)),
    ("h:0", ("h", 0)),
    ("h:65535", ("h", 65535)),
    ("X.example:53", ("X.example", 53)),  # only brackets are taken off the host
    ("[X]:53", ("X", 53)),
])
def test_parse_listen_takes(text: str, expected: tuple[str, int]) -> None:
    assert config.parse_listen(text) == expected


@pytest.mark.parametrize("text", ["h:65536", "h:", "h", "53", "h:-1", "h:5x", "h: 5", ""])
def test_parse_listen_refuses_with_the_text(text: str) -> None:
    with pytest.raises(ValueError) as refused:
        config.parse_listen(text)
    assert str(refused.value) == f"listen address {text!r} is not HOST:PORT"


def test_parse_listen_or_off() -> None:
    assert config.parse_listen_or_off("off") is None
    assert config.parse_listen_or_off(":8080") == ("::", 8080)
    with pytest.raises(ValueError):
        config.parse_listen_or_off("OFF")


def test_cluster_id_of_is_read_as_a_label_is() -> None:
    assert config.cluster_id_of(" East.Cluster-1 ") == "east.cluster-1"
    with pytest.raises(ValueError) as refused:
        config.cluster_id_of("a..b")
    assert str(refused.value) == "not a cluster id: '' is not 1..63 characters long"
    assert refused.value.__cause__ is None and refused.value.__suppress_context__


def test_parse_network_and_target() -> None:
    assert config.parse_network("10.1.2.3/8") == ip_network("10.0.0.0/8")
    assert config.parse_network("127.0.0.1") == ip_network("127.0.0.1/32")
    assert config.parse_target("[::1]:5300") == ("::1", 5300)
    assert config.parse_target("127.0.0.1:53") == ("127.0.0.1", 53)
    with pytest.raises(ValueError):
        config.parse_target("ns.example:53")  # no name: there is no resolver
    with pytest.raises(ValueError):
        config.parse_target("127.0.0.1")


@pytest.mark.parametrize(("target", "text"), [
    (DnstapTarget(path="/run/d.sock"), "unix:/run/d.sock"),
    (DnstapTarget(path=""), "unix:"),
    (DnstapTarget(host="::1", port=6000), "tcp:::1:6000"),
    (DnstapTarget(), "tcp::0"),
])
def test_a_dnstap_target_prints_as_written(target: DnstapTarget, text: str) -> None:
    assert str(target) == text


@pytest.mark.parametrize(("text", "expected"), [
    ("unix:/a", DnstapTarget(path="/a")),
    ("unix:a:b", DnstapTarget(path="a:b")),
    ("tcp:127.0.0.1:1", DnstapTarget(host="127.0.0.1", port=1)),
    ("tcp:127.0.0.1:65535", DnstapTarget(host="127.0.0.1", port=65535)),
    ("tcp:[::1]:6000", DnstapTarget(host="::1", port=6000)),
])
def test_parse_dnstap_takes(text: str, expected: DnstapTarget) -> None:
    assert config.parse_dnstap(text) == expected


@pytest.mark.parametrize("text", ["unix:", "unix", "udp:127.0.0.1:1", "tcp:127.0.0.1:0",
                                  "tcp:127.0.0.1:65536", "tcp::6000", "tcp:[]:6000",
                                  "tcp:127.0.0.1", "tcp:127.0.0.1:x", ""])
def test_parse_dnstap_refuses_with_the_text(text: str) -> None:
    with pytest.raises(ValueError) as refused:
        config.parse_dnstap(text)
    assert str(refused.value) == f"{text!r} is not unix:PATH or tcp:IP:PORT"


@pytest.mark.parametrize("host", ["collector", "X::1", "[X::1]", "X127.0.0.1"])
def test_parse_dnstap_refuses_a_name(host: str) -> None:
    with pytest.raises(ValueError) as refused:
        config.parse_dnstap(f"tcp:{host}:6000")
    assert "does not appear to be an IPv4 or IPv6 address" in str(refused.value)


@pytest.mark.parametrize(("text", "expected"), [
    ("off", "off"), (" OFF ", "off"), ("", "off"), ("  ", "off"),
    ("error,denial", "denial,error"), (" All , error ", "all,error"),
    ("denial,,error,", "denial,error"), ("error,error", "error"), ("all", "all"),
])
def test_parse_query_log_normalizes(text: str, expected: str) -> None:
    assert config.parse_query_log(text) == expected


@pytest.mark.parametrize(("text", "bad"), [("success", "success"), ("denial,off", "off"),
                                           ("error, Nope", "nope")])
def test_parse_query_log_refuses_an_unknown_class(text: str, bad: str) -> None:
    with pytest.raises(ValueError) as refused:
        config.parse_query_log(text)
    assert str(refused.value) == (f"unknown class {bad!r}: off, or any of all, denial, error "
                                  "separated by commas")


@pytest.mark.parametrize(("text", "value"), [
    ("true", True), ("1", True), ("yes", True), (" YES ", True), ("True", True),
    ("false", False), ("0", False), ("no", False), ("", False), (" No ", False),
])
def test_parse_switch(text: str, value: bool) -> None:
    assert config.parse_switch(text) is value


@pytest.mark.parametrize("text", ["maybe", "2", "on", "y"])
def test_parse_switch_refuses(text: str) -> None:
    with pytest.raises(ValueError) as refused:
        config.parse_switch(text)
    assert str(refused.value) == "not true or false"


def _field(name: str) -> dataclasses.Field[object]:
    return next(f for f in dataclasses.fields(Config) if f.name == name)


def test_a_flags_metadata_holds_what_was_given_and_the_defaults() -> None:
    meta = _field("ttl").metadata
    assert dict(meta) == {
        "help": "TTL of every record and of negative answers", "parse": int, "repeat": False,
        "choices": None, "commands": config.SERVE_AND_DUMP, "name": None, "switch": False,
        "bounds": (0, 3600), "metavar": "SECONDS", "help_for": {}}
    assert _field("ttl").default == 5
    switch = _field("events").metadata
    assert switch["parse"] is config.parse_switch and switch["switch"] is True
    assert switch["commands"] == config.SERVE and switch["repeat"] is False
    repeated = _field("ns_addresses").metadata
    assert repeated["repeat"] is True and repeated["name"] == "ns-address"
    assert _field("log_level").metadata["choices"] == config.LOG_LEVELS
    assert _field("zone").metadata["parse"] is str
    assert set(_field("manifests").metadata["help_for"]) == {"dump", "explain"}


def test_a_field_made_by_flag_alone_takes_every_default() -> None:
    f = config.flag(3, "h")
    assert f.default == 3
    assert dict(f.metadata) == {
        "help": "h", "parse": str, "repeat": False, "choices": None,
        "commands": ("serve",), "name": None, "switch": False, "bounds": None,
        "metavar": None, "help_for": {}}
    assert config.flag(False, "s", switch=True, parse=int).metadata["parse"] is \
        config.parse_switch


def test_flag_of() -> None:
    assert config.flag_of(_field("ns_addresses")) == "--ns-address"
    assert config.flag_of(_field("health_listen")) == "--health-listen"
    assert config.flag_of(_field("zone")) == "--zone"


@pytest.mark.parametrize(("value", "text"), [(3600, "3600"), (3600.0, "3600"), (0, "0"),
                                             (0.001, "0.001"), (1_000_000, "1000000"),
                                             (2.5, "2.5")])
def test_number_text(value: float, text: str) -> None:
    assert config.number_text(value) == text


def refused(**changes: object) -> str:
    with pytest.raises(ConfigError) as caught:
        Config(**changes)  # type: ignore[arg-type]
    return str(caught.value)


def test_the_defaults_are_valid_and_the_ends_of_a_range_taken() -> None:
    assert Config().ttl == 5
    assert Config(ttl=0).ttl == 0 and Config(ttl=3600).ttl == 3600
    assert Config(edns_udp_size=512).edns_udp_size == 512


@pytest.mark.parametrize(("changes", "message"), [
    ({"zone": "a..b"}, "--zone 'a..b' is not a usable domain name: empty label"),
    ({"zone": "."}, "--zone: the root zone cannot be served"),
    ({"zone": ""}, "--zone: the root zone cannot be served"),
    ({"listen": ()}, "--listen: at least one address is needed"),
    ({"ttl": 3601}, "--ttl: must be within 0..3600, not 3601"),
    ({"ttl": -1}, "--ttl: must be within 0..3600, not -1"),
    ({"poll_interval": 0.0}, "--poll-interval: must be within 0.001..3600, not 0.0"),
    ({"poll_interval": float("nan")}, "--poll-interval: must be within 0.001..3600, not nan"),
    ({"edns_udp_size": 4097}, "--edns-udp-size: must be within 512..4096, not 4097"),
    ({"topology_zone": "a", "topology_zone_from_node": "n"},
     "--topology-zone-from-node: give either it or --topology-zone, not both"),
    ({"topology_zone": ""}, "--topology-zone: must not be empty"),
    ({"node_name": ""}, "--node-name: must not be empty"),
    ({"topology_zone_from_node": "n", "manifests": Path("m")},
     "--topology-zone-from-node: needs the Kubernetes source (not --manifests)"),
    ({"serviceimport_apis": ("a/b", "nogroup")},
     "--serviceimport-api: 'nogroup' is not GROUP/VERSION"),
    ({"serviceimport_apis": ("a/",)}, "--serviceimport-api: 'a/' is not GROUP/VERSION"),
    ({"serviceimport_apis": ("/v1",)}, "--serviceimport-api: '/v1' is not GROUP/VERSION"),
    ({"serviceimport_apis": ("a/b/c",)}, "--serviceimport-api: 'a/b/c' is not GROUP/VERSION"),
])
def test_each_check_names_its_flag_exactly(changes: dict[str, object], message: str) -> None:
    assert refused(**changes) == message


def test_the_checks_take_what_is_valid() -> None:
    assert Config(topology_zone="z", node_name="n").topology_zone == "z"
    assert Config(topology_zone_from_node="n").topology_zone_from_node == "n"
    assert Config(manifests=Path("m"), topology_zone="z").manifests == Path("m")
    assert Config(serviceimport_apis=("a.b/v1", "c/v2")).serviceimport_apis == ("a.b/v1",
                                                                                "c/v2")


def test_a_bad_zone_is_refused_without_the_inner_traceback() -> None:
    with pytest.raises(ConfigError) as caught:
        Config(zone="a..b")
    assert caught.value.__cause__ is None and caught.value.__suppress_context__
    assert re.match(r"^--zone ", str(caught.value))
