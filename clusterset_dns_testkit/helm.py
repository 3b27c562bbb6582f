"""The Helm chart (deploy/helm/clusterset-dns) and the kustomize overlays, rendered by the
real tools ``scripts/build-peers`` builds (helm, and kubectl's kustomize), as objects to
compare."""

from __future__ import annotations

import json
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import yaml

from clusterset_dns_testkit.cluster import bin_path

REPO = Path(__file__).resolve().parents[1]
CHART = REPO / "deploy" / "helm" / "clusterset-dns"
OVERLAYS = REPO / "deploy" / "overlays"
# Labels Helm charts carry for Helm's and the user's bookkeeping; the overlays have none.
BOOKKEEPING = ("app.kubernetes.io/instance", "app.kubernetes.io/version",
               "app.kubernetes.io/managed-by", "helm.sh/chart")
Obj = dict[str, Any]


def helm(*args: str, kubeconfig: Path | None = None, timeout: float = 300,
         check: bool = True) -> subprocess.CompletedProcess[str]:
    argv = [str(bin_path("helm")), *args]
    if kubeconfig is not None:
        argv.append(f"--kubeconfig={kubeconfig}")
    # Helm's own state (repositories, cache) stays out of the user's home.
    state = Path(tempfile.gettempdir()) / "clusterset-dns-helm"
    # HOME too: without one, Helm's Kubernetes client keeps its discovery cache in
    # ./.kube, inside the checkout.
    env = {"HOME": str(state), "HELM_CACHE_HOME": str(state / "cache"),
           "HELM_CONFIG_HOME": str(state / "config"), "HELM_DATA_HOME": str(state / "data"),
           "PATH": "/usr/bin:/bin"}
    out = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, env=env)
    if check and out.returncode != 0:
        raise AssertionError(f"helm {' '.join(args)} failed ({out.returncode}):\n"
                             f"{out.stdout}\n{out.stderr}")
    return out


def values_file(values: Obj) -> Path:
    with tempfile.NamedTemporaryFile("w", suffix=".yaml", prefix="csdns-values-",
                                     delete=False) as f:
        json.dump(values, f)  # JSON is YAML
    return Path(f.name)


def template(values: Obj | None = None, namespace: str = "kube-system",
             release: str = "csdns", check: bool = True) -> subprocess.CompletedProcess[str]:
    # No --kube-version: Helm assumes the Kubernetes it was released with, as users run it
    # (scripts/build-peers builds it with the release's settings).
    args = ["template", release, str(CHART), "--namespace", namespace]
    if values:
        args += ["--values", str(values_file(values))]
    return helm(*args, check=check)


def chart_objects(values: Obj | None = None, namespace: str = "kube-system") -> list[Obj]:
    return [d for d in yaml.safe_load_all(template(values, namespace).stdout) if d]


def overlay_objects(overlay: str) -> list[Obj]:
    out = subprocess.run([str(bin_path("kubectl")), "kustomize", str(OVERLAYS / overlay)],
                         capture_output=True, text=True, timeout=120, check=True)
    return [d for d in yaml.safe_load_all(out.stdout) if d]


def _strip_labels(meta: Obj, also: tuple[str, ...] = ()) -> None:
    labels = {k: v for k, v in (meta.get("labels") or {}).items()
              if k not in BOOKKEEPING + also}
    if labels:
        meta["labels"] = labels
    else:
        meta.pop("labels", None)


def substance(objects: list[Obj]) -> dict[tuple[str, str], Obj]:
    """(kind, name) -> the object without the labels that only describe it."""
    out: dict[tuple[str, str], Obj] = {}
    for obj in objects:
        obj = json.loads(json.dumps(obj))
        # An object's own name label selects nothing (selectors and the pod template's
        # labels, which do, are compared whole); the chart puts it on every object.
        _strip_labels(obj["metadata"], ("app.kubernetes.io/name",))
        template_meta = obj.get("spec", {}).get("template", {}).get("metadata")
        if template_meta is not None:
            _strip_labels(template_meta)
        key = (obj["kind"], obj["metadata"]["name"])
        assert key not in out, f"{key} twice"
        out[key] = obj
    return out


def differences(a: Any, b: Any, path: str = "") -> list[str]:
    """Where two JSON values differ, as readable paths."""
    if isinstance(a, dict) and isinstance(b, dict):
        out = []
        for k in sorted(set(a) | set(b), key=str):
            if k not in a:
                out.append(f"{path}.{k}: only in the second: {json.dumps(b[k])[:200]}")
            elif k not in b:
                out.append(f"{path}.{k}: only in the first: {json.dumps(a[k])[:200]}")
            else:
                out += differences(a[k], b[k], f"{path}.{k}")
        return out
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        return [d for i, (x, y) in enumerate(zip(a, b, strict=True))
                for d in differences(x, y, f"{path}[{i}]")]
    return [] if a == b else [f"{path}: {json.dumps(a)[:200]} != {json.dumps(b)[:200]}"]
