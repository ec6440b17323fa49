#!/usr/bin/python3
"""The Python producer example against the published contract.

Run by test/contract/C19-producer-contract/python-producer.test.ts (or by hand: /usr/bin/python3 test/python/test_vectors.py).
1. examples/python/enqueue.py's stage_id against test/vectors/stage-ids.json:
   every valid vector encodes to its stage id, every invalid one is rejected.
2. With PROBE_CASES (JSON: {"redis", "prefix", "queue", "cases": [{scope, stage,
   expect, jobId?}]}) the shipped probe, run from Python, against stages the
   TypeScript engine deferred, holds in flight or has pending: the reply each
   case expects; for each ref of its "add" list, the job Python builds (printed).
Prints one JSON line `{"ok": ...}` and exits 0 when all hold, else prints
each failure and exits 1.
"""

import json
import os
import sys
import urllib.parse

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "examples", "python"))

import enqueue  # noqa: E402  (examples/python/enqueue.py)

failures = []


def check(ok, what):
    if not ok:
        failures.append(what)


def vectors():
    with open(os.path.join(ROOT, "test", "vectors", "stage-ids.json"), encoding="utf-8") as f:
        spec = json.load(f)
    check(spec["maxStageIdLength"] == enqueue.MAX_STAGE_ID_LENGTH, "maxStageIdLength")
    check(spec["maxScopeSegments"] == enqueue.MAX_SCOPE_SEGMENTS, "maxScopeSegments")
    quote_differs = 0
    for v in spec["valid"]:
        try:
            got = enqueue.stage_id(v["scope"], v["stage"])
        except enqueue.InvalidStageRef as e:
            got = f"rejected: {e}"
        check(got == v["stageId"], f"valid {v['name']!r}: got {got!r}, want {v['stageId']!r}")
        # what the encoder must not be: urllib's quote with its defaults
        naive = "/".join(urllib.parse.quote(s) for s in v["scope"] + [v["stage"]] if isinstance(s, str))
        quote_differs += naive != v["stageId"]
    for v in spec["invalid"]:
        ref = v["ref"] if isinstance(v["ref"], dict) else None
        try:
            if ref is None:
                raise enqueue.InvalidStageRef("not a ref")
            got = enqueue.stage_id(ref.get("scope"), ref.get("stage"))
            check(False, f"invalid {v['name']!r} accepted as {got!r}")
        except enqueue.InvalidStageRef as e:
            check(e.code == v["code"], f"invalid {v['name']!r}: code {e.code}")
    return len(spec["valid"]), len(spec["invalid"]), quote_differs


def probes():
    spec = json.loads(os.environ.get("PROBE_CASES", "null") or "null")
    if spec is None:
        return 0, None
    client = enqueue.redis.Redis.from_url(spec["redis"])
    try:
        probe = enqueue.Probe(client, spec["prefix"], spec["queue"])
        for case in spec["cases"]:
            scope, stage = case["scope"], case["stage"]
            reply = probe(enqueue.stage_id(scope, stage))
            name = f"probe {case['expect']} {scope}/{stage}: reply {reply}"
            if case["expect"] == "deferred":
                check(reply[0] == 1 and 0 < reply[1] <= case["windowMs"], name)
            elif case["expect"] == "in_flight":
                check(reply == [2], name)
            elif case["expect"] == "pending":
                check(reply == [3, case["jobId"]], name)
            else:
                check(reply == [0], name)
            # the example's enqueue answers as the engine's does, and adds nothing there
            result = enqueue.enqueue(probe, scope, stage, None, lambda job: {"handed": job})
            check(
                ("handed" in result) == (case["expect"] == "add"),
                f"enqueue {case['expect']} {scope}/{stage}: {result}",
            )
        # the jobs the example builds for these refs (PROBE_CASES' "add"), as it hands them to `add`
        added = [enqueue.enqueue(probe, r["scope"], r["stage"], r["payload"], lambda job: job) for r in spec.get("add", [])]
        return len(spec["cases"]), added
    finally:
        client.close()


def main():
    valid, invalid, quote_differs = vectors()
    cases, added = probes()
    for f in failures:
        print(f"FAIL {f}")
    report = {"ok": not failures, "valid": valid, "invalid": invalid, "quoteDiffers": quote_differs, "probes": cases}
    if added is not None:
        report["add"] = added
    print(json.dumps(report))
    return 0 if not failures else 1


if __name__ == "__main__":
    sys.exit(main())
