"""``llgen verify --gpus 2``: a corpus sharded over two GPUs, every row bit-exact.

The corpus: every CUDA pair of ``corpus.NAMED`` at its element types and at f32 and i8 where the
pair takes any width, plus 40 seeded random pairs (``corpus.random_pair``, 1-8 warps, broadcast
lanes and warps) at f16, f32 and i8 -- about 150 rows.  It runs through the real command in a
child process, once over two GPUs and once on one, with a JUnit report each:

* exit status 0 and every row ``ok (bit-exact ...)`` in both runs;
* the JUnit testcases are the corpus's rows in corpus order (merged back in row order);
* with ``--gpus 2`` both devices ran rows (the report names each row's device);
* both runs report the same strategy for every row.

Skipped with the reason when fewer than two GPUs are visible.  ``LLGEN_VERIFY_REPORT=DIR`` keeps
both JUnit files and the two tables there.
"""
import json
import os
import random
import shutil
import subprocess
import sys
import time
import xml.etree.ElementTree as ET

import pytest

from ll_codegen.run import gpu
from ll_codegen.testing import corpus as C

REASON = gpu.available()
if REASON is not None:
    pytest.skip(f"no GPU: {REASON}", allow_module_level=True)
VISIBLE = gpu.visible_devices()
if len(VISIBLE) < 2:
    pytest.skip(f"needs 2 GPUs, {len(VISIBLE)} visible", allow_module_level=True)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ANY_WIDTH = ("f32", "i8")


def corpus_entries(n_random: int = 40, seed: int = 11) -> list[dict]:
    """The NAMED CUDA pairs (dot operands at their own widths only) and seeded random pairs."""
    out = []
    for p in C.NAMED:
        if p.target != "cuda":
            continue
        dts = list(p.dtypes) + ([d for d in ANY_WIDTH if d not in p.dtypes] if "dot" not in p.name else [])
        out.append({"name": p.name, "src": p.src, "dst": p.dst, "dtypes": dts})
    rng = random.Random(seed)
    for k in range(n_random):
        src, dst = C.random_pair(rng)
        shape = [src.out_dim_size(d) for d in src.out_dims]

        def spec(L):
            b = L.bases
            return C.linear(register=b["register"], lane=b["lane"], warp=b["warp"], shape=shape)
        out.append({"name": f"random_{seed}_{k:03d}", "src": spec(src), "dst": spec(dst), "dtypes": ["f16", "f32", "i8"]})
    return out


def _verify(path, junit, gpus):
    t = time.monotonic()
    p = subprocess.run([sys.executable, os.path.join(ROOT, "cli.py"), "verify", "--corpus", str(path),
                        "--gpus", str(gpus), "--batch", "8", "--junit", str(junit)],
                       capture_output=True, text=True, cwd=ROOT)
    return p, time.monotonic() - t


def _cases(junit):
    suite = ET.parse(junit).getroot().find("testsuite")
    return suite.findall("testcase")


def test_corpus_split_over_two_gpus(tmp_path):
    entries = corpus_entries()
    path = tmp_path / "corpus.yaml"
    path.write_text(json.dumps(entries))
    rows = [(e["name"], d) for e in entries for d in e["dtypes"]]
    two, t2 = _verify(path, tmp_path / "two.xml", 2)
    one, t1 = _verify(path, tmp_path / "one.xml", 1)
    keep = os.environ.get("LLGEN_VERIFY_REPORT")
    if keep:
        os.makedirs(keep, exist_ok=True)
        for f in ("two.xml", "one.xml"):
            shutil.copy(tmp_path / f, os.path.join(keep, f))
        with open(os.path.join(keep, "tables.txt"), "w") as fh:
            fh.write(f"--gpus 2: {t2:.1f} s\n{two.stdout}{two.stderr}\n--gpus 1: {t1:.1f} s\n{one.stdout}{one.stderr}")
    for p in (two, one):
        assert p.returncode == 0, p.stdout[-3000:] + p.stderr
        body = p.stdout.splitlines()[1:-1]
        assert len(body) == len(rows) and all(" ok (bit-exact" in ln for ln in body), p.stdout[-3000:]
    c2, c1 = _cases(tmp_path / "two.xml"), _cases(tmp_path / "one.xml")
    assert [(c.get("classname"), c.get("name")) for c in c2] == rows          # merged back in row order
    assert [(c.get("classname"), c.get("name")) for c in c1] == rows
    assert not [c for c in c2 + c1 if c.find("failure") is not None or c.find("error") is not None]
    devices = {ln.split(" ", 1)[1] for c in c2 for ln in c.find("system-out").text.splitlines()
               if ln.startswith("device ")}
    assert devices == set(VISIBLE[:2]), devices                               # both GPUs ran rows
    strategies = [[ln for ln in c.find("system-out").text.splitlines() if ln.startswith("strategy ")] for c in c2]
    assert strategies == [[ln for ln in c.find("system-out").text.splitlines() if ln.startswith("strategy ")]
                          for c in c1]
    print(f"{len(rows)} rows: --gpus 2 {t2:.1f} s, --gpus 1 {t1:.1f} s")
