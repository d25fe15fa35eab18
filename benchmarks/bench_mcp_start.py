"""How long ``oprof-mcp`` takes to answer its first request (target: at most 1 s on a quiet machine).

An MCP client starts the server and waits for the reply to ``initialize``; Claude Code gives up
after about 30 s and then shows the server as failed. This starts ``python -m mcp_server`` on
stdio the way a client does, sends ``initialize`` and then ``tools/list``, and prints the
seconds to each reply (the median over ``--repeat`` starts, each a fresh process):

    python benchmarks/bench_mcp_start.py [--repeat 5] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PROTOCOL = "2025-11-25"  # what a 2025-era client (Claude Code, the Inspector) asks for


def _request(proc: subprocess.Popen[bytes], msg_id: int, method: str, params: dict) -> dict:
    """Send one JSON-RPC request on the server's stdin and read lines until its reply."""
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(json.dumps({"jsonrpc": "2.0", "id": msg_id, "method": method, "params": params}).encode()
                     + b"\n")
    proc.stdin.flush()
    while True:
        line = proc.stdout.readline()
        if not line:
            raise RuntimeError(f"the server closed stdout before answering {method}")
        reply = json.loads(line)
        if reply.get("id") == msg_id:
            return reply


def one_start(root: Path) -> tuple[float, float]:
    """Seconds from process start to the ``initialize`` reply, and to the ``tools/list`` reply."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
    start_s = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "mcp_server", "--root", str(root)], cwd=root, env=env,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    try:
        reply = _request(proc, 1, "initialize", {
            "protocolVersion": PROTOCOL, "capabilities": {},
            "clientInfo": {"name": "bench_mcp_start", "version": "0"}})
        init_s = time.perf_counter() - start_s
        if "result" not in reply:
            raise RuntimeError(f"initialize failed: {reply}")
        assert proc.stdin is not None
        proc.stdin.write(b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n')
        tools = _request(proc, 2, "tools/list", {})
        list_s = time.perf_counter() - start_s
        if not tools.get("result", {}).get("tools"):
            raise RuntimeError(f"tools/list returned no tools: {tools}")
        return init_s, list_s
    finally:
        proc.kill()
        proc.wait(timeout=10)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5, help="fresh server processes to time (median printed)")
    ap.add_argument("--json", action="store_true", help="print one JSON line instead of text")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="oprof-bench-mcp-") as tmp:
        runs = [one_start(Path(tmp)) for _ in range(max(1, args.repeat))]
    init = statistics.median(r[0] for r in runs)
    listed = statistics.median(r[1] for r in runs)
    if args.json:
        print(json.dumps({"initialize_s": round(init, 3), "tools_list_s": round(listed, 3),
                          "runs": [[round(a, 3), round(b, 3)] for a, b in runs]}))
    else:
        print(f"oprof-mcp: first reply (initialize) after {init:.2f} s, tools/list after {listed:.2f} s "
              f"(median of {len(runs)} starts; target <= 1 s)")


if __name__ == "__main__":
    main()
