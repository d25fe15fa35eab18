"""A columnar profile's three files change as one set, and a damaged table is refused by name.

The profile is a real capture's (sdpa_attention baseline) in its columnar form. Interruptions
are real where they can be: ``oprof attribute`` runs in a child process that pauses at a chosen
step of the write (the atomic writer is wrapped to stop there) and is killed with SIGKILL or
SIGTERM; the previous profile must still load, unchanged.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from profiler_core import columnar_files
from profiler_core.errors import SchemaError
from profiler_core.profile_io import read_profile, write_profile
from profiler_core.schema import Profile
from tests.attribution.columnar_copy import columnar_profile_dir

REPO = Path(__file__).resolve().parents[2]
RUN = REPO / "examples" / "captures" / "h200" / "sdpa_attention" / "baseline"


@pytest.fixture(scope="module")
def columnar(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return columnar_profile_dir(tmp_path_factory)


def _copy(columnar: Path, tmp_path: Path) -> Path:
    for f in columnar.iterdir():
        shutil.copy(f, tmp_path / f.name)
    return tmp_path / "profile.json"


def _table(folder: Path, kind: str) -> Path:
    (table,) = folder.glob(f"profile.{kind}.*.parquet")
    return table


def _dump(profile: Profile) -> bytes:
    return profile.__pydantic_serializer__.to_json(profile.as_rows())


def _files(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


@pytest.mark.parametrize("kind", ["kernels", "operators"])
def test_one_flipped_bit_in_a_table_is_refused(columnar: Path, tmp_path: Path, kind: str) -> None:
    profile = _copy(columnar, tmp_path)
    table = _table(tmp_path, kind)
    data = bytearray(table.read_bytes())
    data[len(data) // 2] ^= 0x01
    table.write_bytes(bytes(data))
    with pytest.raises(SchemaError, match=rf"{table.name}: its SHA-256 differs .* the {kind[:-1]} table is damaged"):
        read_profile(profile)


@pytest.mark.parametrize(("name", "match"), [("profile.kernels\x00.parquet", "contains a NUL byte"),
                                             ("../profile.kernels.parquet", "not a file name beside"),
                                             ("x" * 5000, "not a file name|xxxx'\\.\\.\\.")])
def test_a_bad_table_path_is_a_named_error(columnar: Path, tmp_path: Path, name: str, match: str) -> None:
    profile = _copy(columnar, tmp_path)
    doc = json.loads(profile.read_bytes())
    doc["kernel_table"]["path"] = name
    profile.write_text(json.dumps(doc))
    with pytest.raises(SchemaError, match=match) as err:
        read_profile(profile)
    assert len(str(err.value)) < 400  # a prefix of the bad value, never all of it


def test_a_rewrite_replaces_the_set_and_removes_the_old_tables(columnar: Path, tmp_path: Path) -> None:
    profile = _copy(columnar, tmp_path)
    before = read_profile(profile)
    old = {p.name for p in tmp_path.glob("*.parquet")}
    write_profile(profile, before)
    new = {p.name for p in tmp_path.glob("*.parquet")}
    assert len(new) == 2 and not new & old
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([*new, "profile.json"])
    assert _dump(read_profile(profile)) == _dump(before)
    write_profile(profile, before.as_rows())  # the row form: no tables left beside it
    assert [p.name for p in tmp_path.iterdir()] == ["profile.json"]


@pytest.mark.parametrize("fail_at", [1, 2, 3])
def test_a_write_failing_at_any_step_leaves_the_previous_set(columnar: Path, tmp_path: Path, fail_at: int,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    from profiler_core import atomic_write

    profile = _copy(columnar, tmp_path)
    before = _files(tmp_path)
    loaded = read_profile(profile)
    real = atomic_write.write_stream_atomic
    calls: list[Path] = []

    def failing(path: Path, write: object) -> Path:
        calls.append(Path(path))
        if len(calls) == fail_at:
            raise KeyboardInterrupt
        return real(path, write)  # type: ignore[arg-type]

    monkeypatch.setattr(atomic_write, "write_stream_atomic", failing)
    with pytest.raises(KeyboardInterrupt):
        write_profile(profile, loaded)
    assert calls[-1].name.split(".")[1] == ("kernels", "operators", "json")[fail_at - 1]
    assert _files(tmp_path) == before
    assert _dump(read_profile(profile)) == _dump(loaded)


def test_a_reader_racing_a_rewrite_reads_the_new_set(columnar: Path, tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """The reader got the old profile.json; by the time it opens the table, a writer replaced the set."""
    profile = _copy(columnar, tmp_path)
    loaded = read_profile(profile)
    real = columnar_files.read_table_bytes
    raced: list[bool] = []

    def racing(path: Path, ref: object, what: str) -> bytes:
        if not raced:
            raced.append(True)
            write_profile(profile, loaded)  # the old generation's tables are gone now
        return real(path, ref, what)

    monkeypatch.setattr("profiler_core.columnar_profile.read_table_bytes", racing)
    assert _dump(read_profile(profile)) == _dump(loaded)


_CHILD = """
import signal, sys, time
from profiler_core import atomic_write
from profiler_core.cli import main

# a shell that starts jobs in the background without job control hands them SIGINT ignored, and
# Python then installs no KeyboardInterrupt: put Ctrl-C's default back, as a terminal would have it
signal.signal(signal.SIGINT, signal.default_int_handler)
stop_at, mid = int(sys.argv[1]), sys.argv[2] == "mid"
real, calls = atomic_write.write_stream_atomic, []

def pause():
    print("PAUSED", flush=True)
    time.sleep(120)

def paused(path, write):
    calls.append(path)
    if len(calls) == stop_at:
        if not mid:
            pause()
        def half(handle):
            handle.write(b"PAR1 half a table")
            handle.flush()
            pause()
        return real(path, half)
    return real(path, write)

atomic_write.write_stream_atomic = paused
main(sys.argv[3:])
"""


@pytest.mark.slow
@pytest.mark.parametrize(("sig", "stop_at", "mid"), [
    (signal.SIGKILL, 2, False), (signal.SIGKILL, 3, False), (signal.SIGTERM, 1, True),
    (signal.SIGTERM, 2, True), (signal.SIGTERM, 3, False), (signal.SIGINT, 2, False)])
def test_a_killed_attribute_leaves_the_previous_profile(columnar: Path, tmp_path: Path, sig: int, stop_at: int,
                                                        mid: bool) -> None:
    profile = _copy(columnar, tmp_path)
    loaded = _dump(read_profile(profile))
    before = _files(tmp_path)
    env = {**os.environ, "OPROF_COLUMNAR_KERNELS": "0", "PYTHONPATH": str(REPO)}
    child = subprocess.Popen([sys.executable, "-c", _CHILD, str(stop_at), "mid" if mid else "step",
                              "attribute", str(RUN), "--out", str(profile)],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, cwd=tmp_path)
    try:
        assert child.stdout is not None
        line = child.stdout.readline()
        assert line == b"PAUSED\n", child.stderr.read() if child.stderr else line
        child.send_signal(sig)
        child.communicate(timeout=60)
    finally:
        if child.poll() is None:
            child.kill()
            child.communicate()
    assert child.returncode != 0
    assert _dump(read_profile(profile)) == loaded
    after = _files(tmp_path)
    assert after["profile.json"] == before["profile.json"]
    if sig != signal.SIGKILL:  # an exception on the way out: nothing of the new set stays behind
        assert after == before
    else:  # unreferenced tables of the killed write: swept by the next write
        write_profile(profile, read_profile(profile))
        assert len(list(tmp_path.glob("*.parquet"))) == 2 and not list(tmp_path.glob(".*"))
