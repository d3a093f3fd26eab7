"""The server process starts without torch and the compiler: only the workers compile and run kernels
(server/worker.py), so the server answers initialize and tools/list without loading either."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
HEAVY = ("torch", "compiler", "numpy", "llvmlite", "triton", "safetensors")

_CODE = """
import asyncio, json, sys
import server.app
from tools.limits import Limits
after_import = sorted({m.split('.')[0] for m in sys.modules} & set(HEAVY))
app = server.app.create_app(limits=Limits())
tools = asyncio.run(app.list_tools())
print(json.dumps({"after_import": after_import, "tools": len(tools),
                  "after_listing": sorted({m.split('.')[0] for m in sys.modules} & set(HEAVY))}))
"""


def test_the_server_imports_and_lists_its_tools_without_torch_or_the_compiler() -> None:
    code = f"HEAVY = {HEAVY!r}\n" + _CODE
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    found = json.loads(out.stdout.strip().splitlines()[-1])
    assert found["after_import"] == [], f"import server.app loaded {found['after_import']}"
    assert found["tools"] == 9
    assert found["after_listing"] == [], f"create_app and tools/list loaded {found['after_listing']}"
