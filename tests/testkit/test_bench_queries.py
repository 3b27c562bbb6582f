"""The benchmark's 0x20 query mix: the standard mix's questions, each name in its own
random case, so that no query repeats within the file; deterministic per seed."""

from __future__ import annotations

from pathlib import Path

from clusterset_dns_testkit.bench import dataset

DS = dataset.Dataset.build(imports=50, headless=5, endpoints=4)


def test_the_0x20_mix_is_the_standard_mix_in_random_case() -> None:
    standard = DS.queries(2000, 7)
    mixed = DS.queries(2000, 7, "0x20")
    assert [(n.lower(), t) for n, t in mixed] == standard
    assert len(set(mixed)) == len(mixed)  # no question repeats
    assert len(set(standard)) < len(standard)  # while the standard mix's do
    assert sum(n != n.lower() for n, _ in mixed) > 0.99 * len(mixed)
    assert DS.queries(2000, 7, "0x20") == mixed  # deterministic
    assert DS.queries(2000, 8, "0x20") != mixed


def test_the_0x20_files_count_its_nxdomain_share_as_the_standard_mix(tmp_path: Path) -> None:
    info = dataset.write_all(tmp_path, DS, 2000, 7, ("standard", "0x20"))
    standard, mixed = info["mixes"]["standard"], info["mixes"]["0x20"]
    assert mixed["nx_share"] == standard["nx_share"] > 0
    lines = Path(mixed["queries_txt"]).read_text().splitlines()
    assert len(set(lines)) == len(lines) == 2000
