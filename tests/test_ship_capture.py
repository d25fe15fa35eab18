"""scripts/ship_capture.py on an optimize run laid out from the shipped GPT-2 captures."""

from __future__ import annotations

import gzip
import json
import shutil
import sys
from pathlib import Path

from profiler_core.attribution import attribute_run

ROOT = Path(__file__).resolve().parents[1]
GPT2 = ROOT / "examples" / "captures" / "h200" / "gpt2"
sys.path.insert(0, str(ROOT / "scripts"))
import ship_capture  # noqa: E402


def _run_dir(tmp_path: Path) -> Path:
    run = tmp_path / "gpt2-optimize-1"
    shutil.copytree(GPT2 / "baseline", run / "baseline")
    raw = run / "baseline" / "kineto.json"
    raw.write_bytes(gzip.decompress((run / "baseline" / "kineto.json.gz").read_bytes()))
    (run / "baseline" / "kineto.json.gz").unlink()
    (run / "baseline" / "counters.ncu-rep").write_bytes(b"not shipped")
    (run / "baseline" / "profile.json").write_text("{}")
    trial = run / "trial-1-bf16_promotion"
    shutil.copytree(GPT2 / "optimized", trial / "capture")
    shutil.move(trial / "capture" / "plan.json", trial / "plan.json")
    result = json.loads((GPT2 / "optimize.json").read_text())
    result.update(run_dir=str(run), workload="/somewhere/examples/gpt2.py", final_run_dir=str(trial))
    for t in result["trials"]:
        t["run_dir"] = str(run / t["run_dir"])
    (run / "optimize.json").write_text(json.dumps(result))
    for name in ("walltime.json", "findings.json"):
        shutil.copy2(GPT2 / name, run / name)
    return run


def test_a_run_is_shipped_compact_with_relative_paths(tmp_path: Path) -> None:
    run = _run_dir(tmp_path)
    target = tmp_path / "captures" / "gpt2"
    target.parent.mkdir()
    assert ship_capture.main([str(run), str(target), "--workload", "examples/gpt2.py"]) == 0
    assert sorted(p.name for p in (target / "baseline").iterdir()) == [
        "counters.csv", "inductor", "kineto.json.gz", "manifest.json"]
    assert (target / "optimized" / "plan.json").is_file()
    shipped = json.loads((target / "optimize.json").read_text())
    assert shipped["run_dir"] == "." and shipped["workload"] == "examples/gpt2.py"
    assert shipped["final_run_dir"] == "trial-1-bf16_promotion"
    assert all(not t["run_dir"].startswith("/") for t in shipped["trials"] if t["run_dir"])
    assert str(tmp_path) not in (target / "optimize.json").read_text()
    profile = attribute_run(target / "baseline")
    assert profile.coverage.attributed_time_pct >= 99.0


def test_paths_recorded_relative_to_another_directory_are_found_under_the_run(tmp_path: Path,
                                                                            monkeypatch: object) -> None:
    # the loop ran as `oprof optimize ... --out runs/gpt2` in another directory: its paths start with runs/gpt2
    run = _run_dir(tmp_path)
    result = json.loads((run / "optimize.json").read_text())
    result.update(run_dir="runs/gpt2", final_run_dir="runs/gpt2/trial-1-bf16_promotion")
    for t in result["trials"]:
        t["run_dir"] = "runs/gpt2/" + Path(t["run_dir"]).name
    (run / "optimize.json").write_text(json.dumps(result))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)  # type: ignore[attr-defined]
    target = tmp_path / "captures" / "gpt2"
    target.parent.mkdir()
    assert ship_capture.main([str(run), str(target), "--workload", "examples/gpt2.py"]) == 0
    assert (target / "optimized" / "plan.json").is_file()
    shipped = json.loads((target / "optimize.json").read_text())
    assert shipped["final_run_dir"] == "trial-1-bf16_promotion"
    assert [t["run_dir"] for t in shipped["trials"]] == [Path(t["run_dir"]).name for t in result["trials"]]


def test_a_directory_without_optimize_json_is_refused(tmp_path: Path, capsys: object) -> None:
    assert ship_capture.main([str(tmp_path), str(tmp_path / "out"), "--workload", "x.py"]) == 2


def test_an_nsys_export_loses_the_checkout_path_and_still_reads(tmp_path: Path) -> None:
    """The checkout a capture ran from (here a made-up one written into a shipped export) is removed."""
    import sqlite3

    from profiler_core.ingest import read_nsys

    src = ROOT / "examples" / "captures" / "h200" / "tv_resnet50" / "baseline_nsys" / "timeline.sqlite"
    db = tmp_path / "timeline.sqlite"
    shutil.copy2(src, db)
    con = sqlite3.connect(db)
    con.execute("UPDATE META_DATA_CAPTURE SET value = '/home/someone/checkout/' || value "
                "WHERE value LIKE 'examples/%'")
    con.commit()
    con.close()
    assert b"/home/someone/checkout" in db.read_bytes()
    assert ship_capture.scrub_sqlite(db, "/home/someone/checkout") >= 1
    assert b"/home/someone/checkout" not in db.read_bytes()
    assert len(read_nsys(db).kernels) == len(read_nsys(src).kernels)


def test_a_named_trial_is_shipped_beside_the_kept_one(tmp_path: Path, capsys: object) -> None:
    run = _run_dir(tmp_path)
    target = tmp_path / "captures" / "gpt2"
    target.parent.mkdir()
    args = [str(run), str(target), "--workload", "examples/gpt2.py"]
    assert ship_capture.main([*args, "--trial", "bf16_trial=no-such-trial"]) == 2
    assert "--trial bf16_trial=no-such-trial" in capsys.readouterr().err  # type: ignore[attr-defined]
    assert not target.exists()
    assert ship_capture.main([*args, "--trial", "bf16_trial=trial-1-bf16_promotion"]) == 0
    assert (target / "bf16_trial" / "plan.json").is_file()
    assert (target / "bf16_trial" / "kineto.json.gz").is_file()
    assert attribute_run(target / "bf16_trial").coverage.attributed_time_pct >= 99.0
