#!/usr/bin/python3
"""The Python producer's stage ids against the published vectors.

Run by test/contract/C19-producer-contract/python-producer.test.ts (or by hand:
/usr/bin/python3 test/python/test_vectors.py): python/bullmq_stage_deferral.py's
stage_id against test/vectors/stage-ids.json: every valid vector encodes to its
stage id, every invalid one is rejected. Prints one JSON line `{"ok": ...}` and
exits 0 when all hold, else prints each failure and exits 1.
"""

import json
import os
import sys
import urllib.parse

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "python"))

import bullmq_stage_deferral as producer  # noqa: E402  (python/bullmq_stage_deferral.py)

failures = []


def check(ok, what):
    if not ok:
        failures.append(what)


def vectors():
    with open(os.path.join(ROOT, "test", "vectors", "stage-ids.json"), encoding="utf-8") as f:
        spec = json.load(f)
    check(spec["maxStageIdLength"] == producer.MAX_STAGE_ID_LENGTH, "maxStageIdLength")
    check(spec["maxScopeSegments"] == producer.MAX_SCOPE_SEGMENTS, "maxScopeSegments")
    quote_differs = 0
    for v in spec["valid"]:
        try:
            got = producer.stage_id(v["scope"], v["stage"])
        except producer.InvalidStageRef as e:
            got = f"rejected: {e}"
        check(got == v["stageId"], f"valid {v['name']!r}: got {got!r}, want {v['stageId']!r}")
        # what the encoder must not be: urllib's quote with its defaults
        naive = "/".join(urllib.parse.quote(s) for s in v["scope"] + [v["stage"]] if isinstance(s, str))
        quote_differs += naive != v["stageId"]
    for v in spec["invalid"]:
        ref = v["ref"] if isinstance(v["ref"], dict) else None
        try:
            if ref is None:
                raise producer.InvalidStageRef("not a ref")
            got = producer.stage_id(ref.get("scope"), ref.get("stage"))
            check(False, f"invalid {v['name']!r} accepted as {got!r}")
        except producer.InvalidStageRef as e:
            check(e.code == v["code"], f"invalid {v['name']!r}: code {e.code}")
    return len(spec["valid"]), len(spec["invalid"]), quote_differs


def main():
    valid, invalid, quote_differs = vectors()
    for f in failures:
        print(f"FAIL {f}")
    print(json.dumps({"ok": not failures, "valid": valid, "invalid": invalid, "quoteDiffers": quote_differs}))
    return 0 if not failures else 1


if __name__ == "__main__":
    sys.exit(main())
