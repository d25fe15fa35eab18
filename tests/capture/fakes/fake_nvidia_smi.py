"""Fake nvidia-smi: logs -lgc / -rgc; refuses like a non-root user when FAKE_SMI_REFUSE is set."""

from __future__ import annotations

import os
import sys

from common import log

log("nvidia-smi")
argv = sys.argv[1:]
if "-lgc" in argv and os.environ.get("FAKE_SMI_REFUSE"):
    print("Setting locked GPU clocks for GPU 00000000:19:00.0 was not allowed: insufficient permissions.")
    print("Terminating early due to previous errors.")
    sys.exit(4)
if "-lgc" in argv:
    print(
        'GPU clocks set to "(gpuClkMin {0}, gpuClkMax {0})" for GPU 00000000:19:00.0'.format(
            argv[argv.index("-lgc") + 1].split(",")[0]
        )
    )
elif "-rgc" in argv:
    print("All done.")
sys.exit(0)
