"""The Kubernetes API client: the only importer of kubernetes_asyncio.

It offers :mod:`reflector` two calls, a JSON GET and a stream of watch events,
both as raw dicts: objects are never deserialized into client models (that is
slow and would drop fields the models do not know, like v1alpha2's root IPs).

Everything the API server (or the network) can do wrong becomes a
:class:`KubeError` here, at the edge: transport errors, HTTP errors
(:class:`ApiError`), undecodable bodies, and bodies of the wrong shape
(:func:`page_of` and :func:`event_of` check the shape of a list page and of a
watch event). The watch retries exactly these; any other exception is a bug.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import logging
import os
import ssl
import sys
import types
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from clusterset_dns.sources.liststream import Each, read_list

log = logging.getLogger(__name__)


class DeferredTrust(ssl.SSLContext):
    """A default client context (what ``ssl.create_default_context()`` makes) that
    loads the system's trusted CA certificates when it first wraps a connection,
    not when it is made."""

    _trusted = False

    def _trust(self) -> None:
        if not self._trusted:
            self._trusted = True
            self.load_default_certs(ssl.Purpose.SERVER_AUTH)

    def wrap_socket(self, *args: Any, **kwargs: Any) -> Any:
        self._trust()
        return super().wrap_socket(*args, **kwargs)

    def wrap_bio(self, *args: Any, **kwargs: Any) -> Any:
        self._trust()
        return super().wrap_bio(*args, **kwargs)


def _import_aiohttp() -> None:
    """aiohttp makes its default verified context as it is imported, and loading the
    system's CA certificates into it was the largest part of the import (about 40 ms
    of start-up). It serves requests that bring no context of their own; every request
    here brings kubernetes_asyncio's (the kubeconfig's or the service account's CA),
    so that context, made while aiohttp is imported, loads them when first used, if
    ever. Verification is the same: the context is the default one, certificates
    and all, by the time it checks a peer."""
    if "aiohttp" in sys.modules:
        return  # imported already: its contexts are made
    default: Callable[..., ssl.SSLContext] = ssl.create_default_context

    def deferred(purpose: ssl.Purpose = ssl.Purpose.SERVER_AUTH, **kwargs: Any
                 ) -> ssl.SSLContext:
        if purpose != ssl.Purpose.SERVER_AUTH or any(v is not None for v in kwargs.values()):
            return default(purpose, **kwargs)
        # create_default_context() for a client, but for the certificates (the
        # protocol turns on hostname checks and CERT_REQUIRED).
        context = DeferredTrust(ssl.PROTOCOL_TLS_CLIENT)
        keylog = os.environ.get("SSLKEYLOGFILE")
        if keylog and not sys.flags.ignore_environment:
            context.keylog_filename = keylog
        return context

    ssl.create_default_context = deferred
    try:
        import aiohttp  # noqa: F401
    finally:
        ssl.create_default_context = default


_import_aiohttp()
import aiohttp  # noqa: E402
from aiohttp.helpers import get_env_proxy_for_url  # noqa: E402
from yarl import URL  # noqa: E402

# kubernetes_asyncio's package __init__ files import every generated API class and
# model (about a thousand modules: 0.15 s and 34 MiB of a 165 MiB server at 110,000
# endpoints), none of which this module uses: it needs the ApiClient, its
# Configuration, ApiException and the configuration loaders (the config package's
# __init__ imports both, the kubeconfig one with PyYAML). When nothing has imported the
# library yet, its four packages are registered as empty packages (their directories,
# not their __init__ code) so that only those modules load.
_LIGHT = ("kubernetes_asyncio", "kubernetes_asyncio.client", "kubernetes_asyncio.client.models",
          "kubernetes_asyncio.config")


def _light_packages() -> None:
    if any(name in sys.modules for name in _LIGHT):
        return  # already imported (whole or light): use what is there
    spec = importlib.util.find_spec(_LIGHT[0])
    if spec is None or not spec.submodule_search_locations:
        return  # not installed as a package: let the plain import below report it
    root = next(iter(spec.submodule_search_locations))
    for name in _LIGHT:
        package = types.ModuleType(name)
        package.__path__ = [os.path.join(root, *name.split(".")[1:])]
        sys.modules[name] = package


_light_packages()
from kubernetes_asyncio.client.api_client import ApiClient  # noqa: E402
from kubernetes_asyncio.client.configuration import Configuration  # noqa: E402
from kubernetes_asyncio.client.exceptions import ApiException  # noqa: E402

_client = sys.modules["kubernetes_asyncio.client"]
if not hasattr(_client, "ApiClient"):  # the light package: the loaders import these names
    _client.ApiClient, _client.Configuration = ApiClient, Configuration  # type: ignore[attr-defined]
    _client.ApiException = ApiException  # type: ignore[attr-defined]
# The kubeconfig loader (and PyYAML, which it reads kubeconfig files with) is imported
# only when a kubeconfig is used: in a cluster, the service account is.
from kubernetes_asyncio.config import incluster_config  # noqa: E402

Params = Mapping[str, str | int | bool]


class KubeError(Exception):
    """The API server could not be reached or did not answer in time."""


class KubeConfigError(KubeError):
    """No usable client configuration (kubeconfig or service account): an operator's
    error, reported in one line, not retried."""


class ApiError(KubeError):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"HTTP {status}: {message}")
        self.status = status


class Inactive(KubeError):
    """A watch stream stayed silent for the inactivity timeout (a stalled API server, or
    a connection that died without a word)."""


class MalformedResponse(KubeError):
    """The API server answered, but not with the documented shape."""


@dataclass(frozen=True, slots=True)
class Page:
    """One page of a list: its objects (raw dicts), resourceVersion and continue token."""

    items: list[Mapping[str, Any]]
    resource_version: str | None
    continue_token: str | None


@dataclass(frozen=True, slots=True)
class Event:
    """One watch event: ADDED, MODIFIED, DELETED, BOOKMARK or ERROR, and its object."""

    type: str
    object: Mapping[str, Any]

    @property
    def resource_version(self) -> str | None:
        meta = self.object.get("metadata")
        version = meta.get("resourceVersion") if isinstance(meta, Mapping) else None
        return version if isinstance(version, str) and version else None


# What the server reads of an object's metadata (convert: the key, the uid an Event
# names, the resourceVersion; the labels and the annotation below). Everything else
# there (labels and annotations by the ten thousand, managedFields, a kubectl
# last-applied-configuration, ownerReferences: up to what etcd stores, 1.5 MiB an
# object) is dropped as each list item or watch event is decoded (see
# :func:`decode_page`), before anything keeps it.
KEPT_METADATA = ("name", "namespace", "uid", "resourceVersion")
# convert.SERVICE_NAME_LABEL, SOURCE_CLUSTER_LABEL and properties.ZONE_LABEL (a Node's).
KEPT_LABELS = ("multicluster.kubernetes.io/service-name",
               "multicluster.kubernetes.io/source-cluster", "topology.kubernetes.io/zone")
# The one annotation that is read (convert.TRIGGER_TIME: the DNS programming delay).
KEPT_ANNOTATION = "endpoints.kubernetes.io/last-change-trigger-time"


def lean(obj: dict[str, Any]) -> dict[str, Any]:
    """Object metadata cut down to what the server reads; any other JSON object as it
    is. Also the decoder's object hook for pages of large objects (called for every
    JSON object, inner ones first, so it must be cheap for the others): metadata is the
    one with a uid and labels, annotations or a list beside it (label and annotation
    values are strings: a label named "uid" never makes its map look like metadata)."""
    if "uid" not in obj:
        return obj
    labels, annotations = obj.get("labels"), obj.get("annotations")
    if not (type(labels) is dict or type(annotations) is dict
            or any(type(obj.get(key)) is list for key in _LIST_METADATA)):
        return obj  # targetRef, an owner reference, metadata with nothing to drop
    meta = {key: obj[key] for key in KEPT_METADATA if key in obj}
    if type(labels) is dict:
        kept = {key: labels[key] for key in KEPT_LABELS if key in labels}
        if kept:
            meta["labels"] = kept
    if type(annotations) is dict and KEPT_ANNOTATION in annotations:
        meta["annotations"] = {KEPT_ANNOTATION: annotations[KEPT_ANNOTATION]}
    return meta


_LIST_METADATA = ("managedFields", "ownerReferences", "finalizers")


# Bytes per object asked for from which a list page is cut while it is decoded, object
# by object (the decoder's hook costs about a third more decoding time); below it, each
# item is cut once the page is decoded, so a page's unread fields live as long as its
# decoding at most: a budget-sized page (reflector.PAGE_BYTES) of objects this small.
LEAN_ITEM_BYTES = 64 << 10


def cut(obj: Any) -> Any:
    """``obj`` (an API object) with its metadata cut down (:func:`lean`)."""
    if type(obj) is dict:
        meta = obj.get("metadata")
        if type(meta) is dict:
            obj["metadata"] = lean(meta)
    return obj


def decode_page(body: bytes | bytearray, limit: int) -> Any:
    """A list page asked with ``limit``, its items cut (:func:`cut`)."""
    if limit > 0 and len(body) >= limit * LEAN_ITEM_BYTES:
        # Large objects (labels by the ten thousand): each one's metadata is cut as soon
        # as it is decoded, so only one object's unread fields ever exist at once.
        return json.loads(body, object_hook=lean)
    decoded = json.loads(body)
    items = decoded.get("items") if isinstance(decoded, dict) else None
    if isinstance(items, list):
        for item in items:
            cut(item)
    return decoded


def decode_event(line: bytes | bytearray) -> Any:
    """A watch event (one object: whatever it carries exists only while it is cut)."""
    event = json.loads(line)
    if type(event) is dict:
        cut(event.get("object"))
    return event


def page_of(raw: Any) -> Page:
    """The checked shape of a list response; :class:`MalformedResponse` otherwise.

    Items that are not objects are a malformed response too: a list is used whole
    or not at all (a partial list would delete what it lacks)."""
    if not isinstance(raw, Mapping):
        raise MalformedResponse(f"list response is a {type(raw).__name__}, not an object")
    items = raw.get("items")
    if items is None:
        items = []
    if not isinstance(items, list) or not all(isinstance(i, Mapping) for i in items):
        raise MalformedResponse("list response: items is not a list of objects")
    meta = raw.get("metadata")
    if meta is None:
        meta = {}
    if not isinstance(meta, Mapping):
        raise MalformedResponse("list response: metadata is not an object")
    version, token = meta.get("resourceVersion"), meta.get("continue")
    if not isinstance(version, str | None) or not isinstance(token, str | None):
        raise MalformedResponse("list response: resourceVersion/continue not strings")
    return Page(items, version or None, token or None)


def event_of(raw: Any) -> Event:
    """The checked shape of a watch event; :class:`MalformedResponse` otherwise."""
    if not isinstance(raw, Mapping):
        raise MalformedResponse(f"watch event is a {type(raw).__name__}, not an object")
    kind, obj = raw.get("type"), raw.get("object")
    if not isinstance(kind, str) or not isinstance(obj, Mapping):
        raise MalformedResponse("watch event without a type string and an object")
    return Event(kind, obj)


class Lines:
    """Splits a byte stream into its lines (watch events, one JSON document each), in
    time linear in its length whatever the chunks: each byte is appended once,
    searched once and copied once into its line. (Splitting off each line and keeping
    the rest copied the rest of the buffer per event: a 4 MiB chunk of small events,
    as aiohttp hands over what it has after a stall, cost 20-26x the same events in
    64 KiB chunks, so a server behind in a storm fell further behind.)

    ``buffer``: where the bytes wait (tests pass one that counts what it does)."""

    def __init__(self, buffer: bytearray | None = None) -> None:
        self._buffer = bytearray() if buffer is None else buffer
        self._searched = 0  # the buffer's bytes before this hold no newline

    def feed(self, chunk: bytes) -> Iterator[bytearray]:
        """The lines ``chunk`` completes, without their newline; read them all before
        the next chunk. A line never ended (a stream cut short) is never given."""
        buffer = self._buffer
        buffer += chunk
        start = 0
        while (end := buffer.find(b"\n", self._searched)) >= 0:
            line = buffer[start:end]
            start = self._searched = end + 1
            yield line
        self._searched = len(buffer) - start
        if start == len(buffer):
            buffer.clear()  # gives the memory of a large chunk back
        elif start:
            del buffer[:start]  # only what is left of one unfinished line moves


class KubeClient:
    def __init__(self, api: ApiClient) -> None:
        self._api = api

    @classmethod
    async def connect(cls, kubeconfig: Path | None, context: str | None) -> KubeClient:
        """--kubeconfig, else the in-cluster service account, else $KUBECONFIG, else
        ~/.kube/config."""
        configuration = Configuration()
        if kubeconfig is None and os.environ.get("KUBERNETES_SERVICE_HOST"):
            try:
                incluster_config.load_incluster_config(client_configuration=configuration)  # type: ignore[no-untyped-call]
            except Exception as exc:  # the loader raises whatever it meets: all mean "unusable"
                raise KubeConfigError(f"in-cluster service account: {exc}") from None
            log.info("using the in-cluster service account")
        else:
            path = kubeconfig or Path(os.environ.get("KUBECONFIG", "").split(os.pathsep)[0]
                                      or Path.home() / ".kube" / "config")
            if not path.is_file():  # the loader's own message would be about its content
                raise KubeConfigError(f"kubeconfig {path}: no such file")
            from kubernetes_asyncio.config import kube_config
            try:
                await kube_config.load_kube_config(config_file=str(path), context=context,
                                                   client_configuration=configuration,
                                                   persist_config=False)
            except Exception as exc:  # YAML errors, missing keys, unreadable files, ...
                what = " ".join(str(exc).split())  # YAML errors span several lines
                raise KubeConfigError(f"kubeconfig {path}: {what}") from None
            log.info("using kubeconfig %s%s", path, f" context {context}" if context else "")
        api = ApiClient(configuration)
        _environment_read_once(api, configuration)
        return cls(api)

    async def _request(self, path: str, params: Params, timeout: aiohttp.ClientTimeout) -> Any:
        query = [(k, str(v).lower() if isinstance(v, bool) else str(v)) for k, v in params.items()]
        try:
            response = await self._api.call_api(
                path, "GET", query_params=query, header_params={"Accept": "application/json"},
                auth_settings=["BearerToken"], _preload_content=False, _request_timeout=timeout)
        except ApiException as exc:
            raise ApiError(exc.status or 0, str(exc.reason)) from None
        except (aiohttp.ClientError, OSError, TimeoutError) as exc:
            raise KubeError(f"{type(exc).__name__}: {exc}") from None
        if response.status >= 400:
            body = await response.text()
            response.release()
            raise ApiError(response.status, _status_message(body))
        return response

    async def get(self, path: str, params: Params | None = None, timeout: float = 30,
                  sizes: list[int] | None = None, each: Each | None = None) -> Any:
        """The decoded JSON. A list page (every list this server asks for is paged:
        ``params`` has a ``limit``) keeps only the metadata the server reads of each
        item (:func:`decode_page`); single objects (a Lease written back, a Node) are
        whole. ``sizes``: gets the body's length in bytes. ``each``: a list read as it
        arrives, its items handed to ``each`` in batches as they are decoded (the
        response returned has no items); ``timeout`` then bounds each wait for bytes,
        not the whole response (a million endpoints are a minute's reading on a slow
        link)."""
        params = params or {}
        if each is not None:
            timeout_of = aiohttp.ClientTimeout(total=None, sock_connect=timeout,
                                               sock_read=timeout)
            response = await self._request(path, params, timeout_of)
            try:
                return await read_list(response.content.iter_any(), each, cut, sizes)
            except (aiohttp.ClientError, OSError, TimeoutError, ValueError) as exc:
                raise KubeError(f"reading {path}: {exc}") from None
            finally:
                response.release()
        response = await self._request(path, params, aiohttp.ClientTimeout(total=timeout))
        try:
            body = await response.read()
            if sizes is not None:
                sizes.append(len(body))
            limit = params.get("limit")
            if isinstance(limit, int) and not isinstance(limit, bool):
                return decode_page(body, limit)
            return json.loads(body)
        except (aiohttp.ClientError, OSError, TimeoutError, ValueError) as exc:
            raise KubeError(f"reading {path}: {exc}") from None
        finally:
            response.release()

    async def stream(self, path: str, params: Params) -> AsyncIterator[dict[str, Any]]:
        """Watch events, one dict each; ends when the server closes the stream. Silence
        is the caller's to time (the reflector's inactivity timeout cancels it)."""
        timeout = aiohttp.ClientTimeout(total=None, connect=30, sock_connect=30)
        response = await self._request(path, {**params, "watch": True}, timeout)
        lines = Lines()
        try:
            # Lines are split here, not by readline(): one event can be larger than
            # aiohttp's line limit (a slice with hundreds of endpoints).
            async for chunk in response.content.iter_any():
                for line in lines.feed(chunk):
                    if line and not line.isspace():
                        event = decode_event(line)
                        del line
                        yield event
        except (aiohttp.ClientError, OSError, TimeoutError) as exc:
            raise KubeError(f"watch {path}: {type(exc).__name__}: {exc}") from None
        except ValueError as exc:
            raise KubeError(f"watch {path}: bad JSON: {exc}") from None
        finally:
            response.release()

    async def send(self, method: str, path: str, body: Any, timeout: float = 10) -> Any:
        """POST or PUT ``body`` as JSON; the decoded answer (Events and the Lease)."""
        try:
            response = await self._api.call_api(
                path, method, body=body, header_params={"Accept": "application/json",
                                                        "Content-Type": "application/json"},
                auth_settings=["BearerToken"], _preload_content=False,
                _request_timeout=aiohttp.ClientTimeout(total=timeout))
        except ApiException as exc:
            raise ApiError(exc.status or 0, str(exc.reason)) from None
        except (aiohttp.ClientError, OSError, TimeoutError) as exc:
            raise KubeError(f"{type(exc).__name__}: {exc}") from None
        try:
            text = await response.text()
            if response.status >= 400:
                raise ApiError(response.status, _status_message(text))
            return json.loads(text) if text else {}
        except (aiohttp.ClientError, OSError, TimeoutError, ValueError) as exc:
            raise KubeError(f"{method} {path}: {exc}") from None
        finally:
            response.release()

    async def close(self) -> None:
        await self._api.close()


# The kubernetes_asyncio releases whose RESTClientObject this module was checked against:
# _environment_read_once replaces its private aiohttp session (pool_manager) and sets its
# proxy fields. tests/unit/test_kube_library.py fails on any other installed release;
# add one here only after reading its rest.py.
TESTED_KUBERNETES_ASYNCIO = ("36.1.0",)


def _environment_read_once(api: ApiClient, configuration: Configuration) -> None:
    """The library's session trusts the environment: before every request, aiohttp
    looks the host up in ~/.netrc in a worker thread and the proxy variables in
    another. A request is then sent only after two thread round trips, each one
    waiting for the event loop: a list page asked for ahead (see Reflector.relist) left
    only when the page before it had been converted, so the API server never prepared
    a page while this process worked. Here the proxy variables (HTTPS_PROXY,
    NO_PROXY, ...) are read once, at start, and apply as before; ~/.netrc is not read
    (its credentials could never have been combined with the bearer token anyway)."""
    rest = api.rest_client
    if not configuration.proxy:
        with contextlib.suppress(LookupError):
            proxy, auth = get_env_proxy_for_url(URL(str(configuration.host)))
            rest.proxy = str(proxy)
            if auth is not None:
                rest.proxy_headers = {**(rest.proxy_headers or {}),
                                      "Proxy-Authorization": auth.encode()}
    old = rest.pool_manager
    connector = old.connector
    old.detach()  # the new session owns the connector (and closes it)
    # The library's read buffer: one watch event can be as large as etcd's request
    # limit (1.5 MiB).
    rest.pool_manager = aiohttp.ClientSession(connector=connector, trust_env=False,
                                              read_bufsize=2**21)


def _status_message(body: str) -> str:
    """A Status object's message (else its reason, else the body), at most 500
    characters; a body of any other shape (a proxy's page, JSON not an object) as it is."""
    try:
        status = json.loads(body)
    except ValueError:
        return body[:500]
    if not isinstance(status, dict):
        return body[:500]
    return str(status.get("message") or status.get("reason") or body)[:500]
