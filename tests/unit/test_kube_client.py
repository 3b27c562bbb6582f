"""kube.KubeClient at its seam (the library's ApiClient.call_api: what each call asks
for, and each way it can fail becoming a KubeError), the shapes of list pages and watch
events, the message of an HTTP error, and connect's choice of configuration."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from typing import Any

import aiohttp
import pytest

from clusterset_dns.sources import kube
from clusterset_dns.sources.kube import (
    ApiError,
    Event,
    KubeClient,
    KubeError,
    MalformedResponse,
    Page,
)


class Response:
    """What call_api gives with _preload_content=False (an aiohttp response)."""

    def __init__(self, status: int = 200, body: bytes = b"{}",
                 chunks: list[bytes] | None = None, fail: BaseException | None = None) -> None:
        self.status = status
        self.body = body
        self.chunks = chunks or []
        self.fail = fail
        self.released = 0
        self.content = self

    async def read(self) -> bytes:
        if self.fail is not None:
            raise self.fail
        return self.body

    async def text(self) -> str:
        if self.fail is not None:
            raise self.fail
        return self.body.decode()

    async def iter_any(self) -> AsyncIterator[bytes]:
        for chunk in self.chunks:
            yield chunk
        if self.fail is not None:
            raise self.fail

    def release(self) -> None:
        self.released += 1


class Api:
    """Stands for the ApiClient: keeps each call; answers ``response`` or raises ``error``."""

    def __init__(self, response: Response | None = None, error: BaseException | None = None
                 ) -> None:
        self.response = response or Response()
        self.error = error
        self.calls: list[tuple[str, str, dict[str, Any]]] = []
        self.closed = 0

    async def call_api(self, path: str, method: str, **kwargs: Any) -> Response:
        self.calls.append((path, method, kwargs))
        if self.error is not None:
            raise self.error
        return self.response

    async def close(self) -> None:
        self.closed += 1


def run(api: Api, call: Callable[[KubeClient], Any]) -> Any:
    async def main() -> Any:
        return await call(KubeClient(api))  # type: ignore[arg-type]

    return asyncio.run(main())


def watched(api: Api, path: str = "/w", params: Any = None) -> list[Any]:
    async def main() -> list[Any]:
        client = KubeClient(api)  # type: ignore[arg-type]
        return [e async for e in client.stream(path, params or {})]

    return asyncio.run(main())


# -- what each call asks for -------------------------------------------------------------------

def test_a_get_asks_for_json_with_the_token_and_its_parameters_as_text() -> None:
    api = Api(Response(body=b'{"kind": "Lease"}'))
    params = {"limit": 5, "allowWatchBookmarks": True, "watch": False, "labelSelector": "a=B"}
    assert run(api, lambda c: c.get("/apis/x", params)) == {"kind": "Lease"}
    [(path, method, kwargs)] = api.calls
    timeout = kwargs.pop("_request_timeout")
    assert (path, method, kwargs) == ("/apis/x", "GET", {
        "query_params": [("limit", "5"), ("allowWatchBookmarks", "true"),
                         ("watch", "false"), ("labelSelector", "a=B")],
        "header_params": {"Accept": "application/json"}, "auth_settings": ["BearerToken"],
        "_preload_content": False})
    assert timeout == aiohttp.ClientTimeout(total=30)
    assert api.response.released == 1


def test_a_get_without_parameters_and_its_own_timeout() -> None:
    api = Api(Response(body=b"[1]"))
    assert run(api, lambda c: c.get("/x", timeout=7)) == [1]
    assert api.calls[0][2]["query_params"] == []
    assert api.calls[0][2]["_request_timeout"] == aiohttp.ClientTimeout(total=7)


def meta(labels: dict[str, str]) -> dict[str, Any]:
    return {"name": "n", "uid": "u", "labels": labels}


@pytest.mark.parametrize(("limit", "cut"), [(5, True), (0, True), (True, False), ("5", False)])
def test_only_a_paged_list_is_cut(limit: Any, cut: bool) -> None:
    """A limit that is an int (not a bool, not text) is a list page: its items lose the
    metadata the server does not read; anything else is one object, whole."""
    body = json.dumps({"items": [{"metadata": meta({"a": "b"})}]}).encode()
    sizes: list[int] = []
    got = run(Api(Response(body=body)), lambda c: c.get("/x", {"limit": limit}, sizes=sizes))
    assert got["items"][0]["metadata"] == ({"name": "n", "uid": "u"} if cut
                                           else meta({"a": "b"}))
    assert sizes == [len(body)]


@pytest.mark.parametrize(("fail", "body"), [
    (aiohttp.ClientPayloadError("cut short"), b""),
    (ConnectionResetError(104, "reset"), b""),
    (TimeoutError("slow"), b""),
    (None, b"{not json"),
])
def test_a_body_that_cannot_be_read_is_a_kube_error(fail: BaseException | None,
                                                    body: bytes) -> None:
    api = Api(Response(body=body, fail=fail))
    with pytest.raises(KubeError, match=r"^reading /p: ") as raised:
        run(api, lambda c: c.get("/p", {"limit": 1}))
    assert type(raised.value) is KubeError
    if fail is not None:
        assert str(raised.value) == f"reading /p: {fail}"
    assert api.response.released == 1


# -- a list read as it arrives (get's each=) ----------------------------------------------------

def streamed(api: Api, path: str, params: Any = None,
             **kwargs: Any) -> tuple[Any, list[list[Any]]]:
    batches: list[list[Any]] = []
    rest = run(api, lambda c: c.get(path, params, each=batches.append, **kwargs))
    return rest, batches


def test_a_list_read_as_it_arrives_hands_its_items_over_cut() -> None:
    """The items go to ``each`` as they are decoded, each one's metadata cut; the
    response comes back without them; its length counted; each wait for bytes bounded,
    not the whole response."""
    body = json.dumps({"kind": "List", "metadata": {"resourceVersion": "9"},
                       "items": [{"metadata": meta({"a": "b"})},
                                 {"metadata": {"name": "m"}}]}).encode()
    api = Api(Response(chunks=[body[:10], body[10:]]))
    sizes: list[int] = []
    rest, batches = streamed(api, "/apis/x", {"limit": 500, "resourceVersion": "0"},
                             sizes=sizes)
    assert rest == {"kind": "List", "metadata": {"resourceVersion": "9"}, "items": []}
    assert batches == [[{"metadata": {"name": "n", "uid": "u"}}, {"metadata": {"name": "m"}}]]
    assert sizes == [len(body)]
    [(path, method, kwargs)] = api.calls
    timeout = kwargs.pop("_request_timeout")
    assert (path, method, kwargs) == ("/apis/x", "GET", {
        "query_params": [("limit", "500"), ("resourceVersion", "0")],
        "header_params": {"Accept": "application/json"}, "auth_settings": ["BearerToken"],
        "_preload_content": False})
    assert timeout == aiohttp.ClientTimeout(total=None, sock_connect=30, sock_read=30)
    assert api.response.released == 1


def test_a_list_read_as_it_arrives_without_parameters_and_its_own_timeout() -> None:
    api = Api(Response(chunks=[b'{"items": []}']))
    assert streamed(api, "/l", timeout=7) == ({"items": []}, [])
    assert api.calls[0][2]["query_params"] == []
    assert api.calls[0][2]["_request_timeout"] == aiohttp.ClientTimeout(
        total=None, sock_connect=7, sock_read=7)


@pytest.mark.parametrize(("chunks", "fail", "message"), [
    ([b'{"items": [{}'], aiohttp.ClientPayloadError("cut short"), "cut short"),
    ([b'{"items": ['], ConnectionResetError(104, "reset"), "[Errno 104] reset"),
    ([], TimeoutError("slow"), "slow"),
    ([b'{"items": [1]}'], None, "list response: an item is not an object"),
    ([b'{"items": []'], None, "the list response ends before its end"),
])
def test_a_list_that_cannot_be_read_as_it_arrives_is_a_kube_error(
        chunks: list[bytes], fail: BaseException | None, message: str) -> None:
    api = Api(Response(chunks=chunks, fail=fail))
    with pytest.raises(KubeError) as raised:
        streamed(api, "/l", {"limit": 1})
    assert type(raised.value) is KubeError
    assert str(raised.value) == f"reading /l: {message}"
    assert api.response.released == 1


def test_an_http_error_to_a_list_read_as_it_arrives_is_an_api_error() -> None:
    api = Api(Response(410, b'{"kind": "Status", "message": "too old"}'))
    with pytest.raises(ApiError) as raised:
        streamed(api, "/l", {"limit": 1})
    assert (raised.value.status, str(raised.value)) == (410, "HTTP 410: too old")
    assert api.response.released == 1


# (made in the test, not at collection: the code under test runs in the test)
FAILURES: list[tuple[Callable[[], BaseException], type[KubeError], str, int | None]] = [
    (lambda: kube.ApiException(status=403, reason="Forbidden"), ApiError,
     "HTTP 403: Forbidden", 403),
    (lambda: kube.ApiException(status=None, reason="no status"), ApiError,
     "HTTP 0: no status", 0),
    (lambda: aiohttp.ClientConnectionError("refused"), KubeError,
     "ClientConnectionError: refused", None),
    (lambda: ConnectionRefusedError(111, "refused"), KubeError,
     "ConnectionRefusedError: [Errno 111] refused", None),
    (lambda: TimeoutError(), KubeError, "TimeoutError: ", None),
]


@pytest.mark.parametrize(("error", "kind", "message", "status"), FAILURES)
@pytest.mark.parametrize("call", ["get", "stream", "send"])
def test_a_request_that_fails_is_a_kube_error(error: Callable[[], BaseException],
                                              kind: type[KubeError], message: str,
                                              status: int | None, call: str) -> None:
    api = Api(error=error())
    with pytest.raises(KubeError) as raised:
        if call == "get":
            run(api, lambda c: c.get("/p"))
        elif call == "stream":
            watched(api, "/p")
        else:
            run(api, lambda c: c.send("PUT", "/p", {}))
    assert (type(raised.value), str(raised.value)) == (kind, message)
    assert getattr(raised.value, "status", None) == status


@pytest.mark.parametrize(("status", "body", "message"), [
    (400, b'{"kind": "Status", "message": "bad selector", "reason": "BadRequest"}',
     "bad selector"),
    (404, b'{"kind": "Status", "reason": "NotFound"}', "NotFound"),
    (410, b'{"kind": "Status", "message": "", "reason": ""}',
     '{"kind": "Status", "message": "", "reason": ""}'),
    (503, b"upstream down", "upstream down"),
])
def test_an_http_error_is_an_api_error_with_the_status_message(status: int, body: bytes,
                                                               message: str) -> None:
    for call in ("get", "stream", "send"):
        api = Api(Response(status, body))
        with pytest.raises(ApiError) as raised:
            if call == "get":
                run(api, lambda c: c.get("/p"))
            elif call == "stream":
                watched(api, "/p")
            else:
                run(api, lambda c: c.send("POST", "/p", {}))
        assert (raised.value.status, str(raised.value)) == (status, f"HTTP {status}: {message}")
        assert api.response.released == 1, call


def test_a_status_below_400_is_an_answer() -> None:
    api = Api(Response(399, b'{"a": 1}', chunks=[b'{"type": "ADDED", "object": {}}\n']))
    assert run(api, lambda c: c.get("/p")) == {"a": 1}
    assert run(api, lambda c: c.send("POST", "/p", {})) == {"a": 1}
    assert watched(api) == [{"type": "ADDED", "object": {}}]


@pytest.mark.parametrize(("body", "message"), [
    ('{"message": "m", "reason": "r"}', "m"),
    ('{"message": null, "reason": "r"}', "r"),
    ('{"reason": ""}', '{"reason": ""}'),
    ("not json", "not json"),
    ("x" * 600, "x" * 500),  # at most 500 characters, of any of them
    (json.dumps({"message": "m" * 600}), "m" * 500),
    ('"' + "s" * 600 + '"', '"' + "s" * 499),
    ("[1, 2]", "[1, 2]"),  # JSON, but not a Status object
    ("null", "null"),
    ("", ""),
])
def test_the_message_of_an_error_status(body: str, message: str) -> None:
    assert kube._status_message(body) == message


def test_a_watch_asks_to_watch_and_waits_without_a_total_timeout() -> None:
    lines = [b'{"type": "ADDED", "object": {"metadata": {"name": "a"}}}', b"", b"  \t",
             b'{"type": "DELETED", "object": {}}']
    api = Api(Response(chunks=[b"\n".join(lines) + b"\n"]))
    events = watched(api, "/apis/x", {"resourceVersion": "7", "watch": False})
    assert [e["type"] for e in events] == ["ADDED", "DELETED"]  # blank lines skipped
    [(path, method, kwargs)] = api.calls
    assert (path, method, kwargs["query_params"]) == (
        "/apis/x", "GET", [("resourceVersion", "7"), ("watch", "true")])
    assert kwargs["_request_timeout"] == aiohttp.ClientTimeout(total=None, connect=30,
                                                               sock_connect=30)
    assert api.response.released == 1


@pytest.mark.parametrize("fail", [aiohttp.ClientPayloadError("cut"), OSError("gone"),
                                  TimeoutError("late")])
def test_a_stream_that_breaks_is_a_kube_error(fail: BaseException) -> None:
    api = Api(Response(chunks=[b'{"type": "ADDED", "object": {}}\n'], fail=fail))
    with pytest.raises(KubeError) as raised:
        watched(api, "/w")
    assert type(raised.value) is KubeError
    assert str(raised.value) == f"watch /w: {type(fail).__name__}: {fail}"
    assert api.response.released == 1


def test_a_watch_event_keeps_only_the_metadata_the_server_reads() -> None:
    line = json.dumps({"type": "ADDED", "object": {"metadata": meta({"a": "b"})}}).encode()
    assert kube.decode_event(line) == {"type": "ADDED",
                                       "object": {"metadata": {"name": "n", "uid": "u"}}}
    assert kube.decode_event(b"[1]") == [1]  # not an event: event_of says so
    assert kube.decode_event(b'{"type": "ADDED"}') == {"type": "ADDED"}


def test_a_send_posts_json_and_returns_the_answer() -> None:
    api = Api(Response(201, b'{"metadata": {"name": "e"}}'))
    assert run(api, lambda c: c.send("POST", "/api/v1/events", {"a": 1})) == {
        "metadata": {"name": "e"}}
    [(path, method, kwargs)] = api.calls
    timeout = kwargs.pop("_request_timeout")
    assert (path, method, kwargs) == ("/api/v1/events", "POST", {
        "body": {"a": 1}, "header_params": {"Accept": "application/json",
                                            "Content-Type": "application/json"},
        "auth_settings": ["BearerToken"], "_preload_content": False})
    assert timeout == aiohttp.ClientTimeout(total=10)
    assert api.response.released == 1
    api = Api(Response(200, b""))
    assert run(api, lambda c: c.send("PUT", "/p", {}, timeout=3)) == {}  # no body
    assert api.calls[0][2]["_request_timeout"] == aiohttp.ClientTimeout(total=3)


@pytest.mark.parametrize("fail", [aiohttp.ClientPayloadError("cut"), OSError("gone"),
                                  TimeoutError("late"), None])
def test_an_answer_to_a_send_that_cannot_be_read_is_a_kube_error(
        fail: BaseException | None) -> None:
    api = Api(Response(200, b"{not json", fail=fail))
    with pytest.raises(KubeError, match=r"^PUT /p: ") as raised:
        run(api, lambda c: c.send("PUT", "/p", {}))
    assert type(raised.value) is KubeError
    if fail is not None:
        assert str(raised.value) == f"PUT /p: {fail}"
    assert api.response.released == 1


def test_close_closes_the_library_client() -> None:
    api = Api()
    run(api, lambda c: c.close())
    assert api.closed == 1


# -- the shapes of what the API server answers -------------------------------------------------

@pytest.mark.parametrize(("raw", "page"), [
    ({}, Page([], None, None)),
    ({"items": None, "metadata": None}, Page([], None, None)),
    ({"items": [{"a": 1}], "metadata": {"resourceVersion": "7", "continue": "c"}},
     Page([{"a": 1}], "7", "c")),
    ({"items": [], "metadata": {"resourceVersion": "", "continue": ""}}, Page([], None, None)),
])
def test_a_list_page(raw: Any, page: Page) -> None:
    assert kube.page_of(raw) == page


@pytest.mark.parametrize(("raw", "message"), [
    ([], "list response is a list, not an object"),
    (None, "list response is a NoneType, not an object"),
    ({"items": {}}, "list response: items is not a list of objects"),
    ({"items": [{}, 1]}, "list response: items is not a list of objects"),
    ({"metadata": []}, "list response: metadata is not an object"),
    ({"metadata": {"resourceVersion": 7}}, "list response: resourceVersion/continue not strings"),
    ({"metadata": {"continue": 1}}, "list response: resourceVersion/continue not strings"),
])
def test_a_malformed_list_page(raw: Any, message: str) -> None:
    with pytest.raises(MalformedResponse) as raised:
        kube.page_of(raw)
    assert str(raised.value) == message


def test_a_watch_event() -> None:
    assert kube.event_of({"type": "ADDED", "object": {"a": 1}}) == Event("ADDED", {"a": 1})


@pytest.mark.parametrize(("raw", "message"), [
    ([], "watch event is a list, not an object"),
    ({"type": 1, "object": {}}, "watch event without a type string and an object"),
    ({"object": {}}, "watch event without a type string and an object"),
    ({"type": "ADDED", "object": []}, "watch event without a type string and an object"),
    ({"type": "ADDED"}, "watch event without a type string and an object"),
])
def test_a_malformed_watch_event(raw: Any, message: str) -> None:
    with pytest.raises(MalformedResponse) as raised:
        kube.event_of(raw)
    assert str(raised.value) == message


@pytest.mark.parametrize(("obj", "version"), [
    ({"metadata": {"resourceVersion": "7"}}, "7"),
    ({"metadata": {"resourceVersion": ""}}, None),
    ({"metadata": {"resourceVersion": 7}}, None),
    ({"metadata": {}}, None),
    ({"metadata": ["resourceVersion"]}, None),
    ({}, None),
])
def test_the_resource_version_of_an_event(obj: Any, version: str | None) -> None:
    assert Event("MODIFIED", obj).resource_version == version


def test_an_api_error_says_its_status() -> None:
    error = ApiError(409, "conflict")
    assert (str(error), error.status) == ("HTTP 409: conflict", 409)


def test_metadata_with_only_annotations_is_cut_too() -> None:
    assert kube.lean({"name": "n", "uid": "u", "annotations": {"a": "b"}}) == {
        "name": "n", "uid": "u"}


def test_a_page_of_one_large_object_is_cut_while_decoded(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A limit of 1 is a limit: from LEAN_ITEM_BYTES the one object is cut as decoded."""
    calls: list[int] = []
    real = kube.lean

    def counted(obj: dict[str, Any]) -> dict[str, Any]:
        calls.append(1)
        return real(obj)

    monkeypatch.setattr(kube, "lean", counted)
    raw = json.dumps({"items": [{"metadata": meta({"a": "b"}), "spec": {"x": {}}}]}).encode()
    raw += b" " * (kube.LEAN_ITEM_BYTES - len(raw))
    assert kube.decode_page(raw, 1)["items"][0]["metadata"] == {"name": "n", "uid": "u"}
    assert len(calls) == 6  # every object: labels, metadata, x, spec, the item, the page
    calls.clear()
    kube.decode_page(raw[:-1], 1)
    assert len(calls) == 1


@pytest.mark.parametrize(("body", "decoded"), [
    (b"[1]", [1]), (b'"s"', "s"), (b'{"items": 3}', {"items": 3}),
    (b'{"items": [1, {"metadata": 2}]}', {"items": [1, {"metadata": 2}]})])
def test_a_page_of_another_shape_is_left_to_page_of(body: bytes, decoded: Any) -> None:
    assert kube.decode_page(body, 5) == decoded


def test_the_lines_wait_in_the_buffer_given() -> None:
    buffer = bytearray()
    lines = kube.Lines(buffer)
    assert [bytes(line) for line in lines.feed(b"ab\ncd")] == [b"ab"]
    assert buffer == b"cd"  # what is left of the unfinished line
