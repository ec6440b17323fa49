#!/usr/bin/python3
"""Enqueue a stage of bullmq-stage-deferral from Python (docs/producers.md).

Needs only the standard library and redis-py (Debian: apt-get install python3-redis).
It does what the engine's own `enqueue` does before BullMQ's add:

1. computes the stage id of the ref (`stage_id`, checked against
   test/vectors/stage-ids.json by test/python/test_vectors.py);
2. runs the shipped enqueue probe (src/lua/enqueue-probe.lua: EVALSHA, and
   EVAL when Redis does not have it cached yet), one round trip;
3. when the probe finds nothing pending, builds the job -- name, data and
   options as the producer contract states them -- and hands it to `add`.

Step 3's add is BullMQ's deduplicating add (its addStandardJob script), which
this example does not copy: with a BullMQ port for Python, `add` is
`queue.add(job["name"], job["data"], job["opts"])`; without one, the command
line prints the job as one JSON line for a Node producer to add
(examples/python/add-job.ts):

    /usr/bin/python3 examples/python/enqueue.py --scope book-1 --scope ch-2 --stage image \\
        --payload '{"sceneUrl": "s3://scenes/7"}' | npx tsx examples/python/add-job.ts
"""

import argparse
import json
import os
import secrets
import sys
import time
import urllib.parse

import redis

# The wire format version this producer writes (schema/dispatch-job-data.v1.json).
JOB_DATA_VERSION = 1
MAX_SCOPE_SEGMENTS = 8
MAX_STAGE_ID_LENGTH = 512

# encodeURIComponent keeps ASCII letters, digits and - _ . ! ~ * ' ( ): urllib's
# quote keeps letters, digits and _ . - ~ (and '/' unless safe says otherwise),
# so its `safe` must be exactly the other marks.
_SAFE = "!*'()"

HERE = os.path.dirname(os.path.abspath(__file__))
# In this repository; from npm: node_modules/bullmq-stage-deferral/src/lua/enqueue-probe.lua
PROBE_FILE = os.path.join(HERE, "..", "..", "src", "lua", "enqueue-probe.lua")


class InvalidStageRef(ValueError):
    """A ref the library rejects with InvalidStageRefError (code INVALID_STAGE_REF)."""

    code = "INVALID_STAGE_REF"


def _segment(value, what):
    if not isinstance(value, str):
        raise InvalidStageRef(f"Expected {what} to be a string")
    if value == "":
        raise InvalidStageRef(f"Expected {what} to be non-empty")
    try:
        # strict UTF-8: a lone surrogate is not well-formed Unicode. No normalization
        # (NFC and NFD forms of one text are two stages): normalize before, if you must.
        raw = value.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidStageRef(f"Expected {what} to be well-formed Unicode, got a lone surrogate") from None
    return urllib.parse.quote(raw, safe=_SAFE)


def stage_id(scope, stage):
    """The stage id of `{scope, stage}`: each segment encoded as encodeURIComponent does, joined by '/'."""
    if not isinstance(scope, list):
        raise InvalidStageRef("Expected `scope` to be an array of strings")
    if not 1 <= len(scope) <= MAX_SCOPE_SEGMENTS:
        raise InvalidStageRef(f"Expected `scope` to have 1 to {MAX_SCOPE_SEGMENTS} segments, got {len(scope)}")
    parts = [_segment(s, f"`scope[{i}]`") for i, s in enumerate(scope)]
    parts.append(_segment(stage, "`stage`"))
    sid = "/".join(parts)
    if len(sid) > MAX_STAGE_ID_LENGTH:
        raise InvalidStageRef(
            f"Expected the encoded stage id to be at most {MAX_STAGE_ID_LENGTH} characters, got {len(sid)}"
        )
    return sid


def _base36(n):
    digits = "0123456789abcdefghijklmnopqrstuvwxyz"
    out = ""
    while True:
        n, r = divmod(n, 36)
        out = digits[r] + out
        if n == 0:
            return out


def ready_job_id(sid):
    """`<stageId>@r.<ms since epoch, base36><4 random base36 characters>`, as the engine's enqueue names a job."""
    return f"{sid}@r.{_base36(int(time.time() * 1000))}{_base36(secrets.randbelow(36**4)).rjust(4, '0')}"


def ready_job(scope, stage, payload, build_id=None, attempts=3, backoff=None):
    """The job a producer adds for a stage: BullMQ's name, data and options (docs/producers.md, "Job options")."""
    sid = stage_id(scope, stage)
    data = {"v": JOB_DATA_VERSION, "scope": list(scope), "stage": stage, "payload": payload}
    if build_id is not None:
        data["buildId"] = build_id
    opts = {
        "jobId": ready_job_id(sid),
        "deduplication": {"id": sid},
        # the engine's `retry` (its defaults here): the chain's budget of real failures
        "attempts": attempts,
        "backoff": backoff or {"type": "exponential", "delay": 1000},
        "removeOnComplete": True,
    }
    return {"name": stage, "data": data, "opts": opts}


class Probe:
    """The shipped enqueue probe, run by redis-py's Script: EVALSHA, and EVAL (SCRIPT LOAD) on NOSCRIPT."""

    def __init__(self, client, prefix="bull", queue="stage-dispatch", path=PROBE_FILE):
        with open(path, encoding="utf-8") as f:
            self.script = client.register_script(f.read())
        self.base = f"{prefix}:{queue}:"

    def __call__(self, sid):
        """The probe's reply for stage id `sid`: [1, pttl] | [2] | [3, jobId] | [0]."""
        keys = [f"{self.base}sd:deferred:{sid}", f"{self.base}sd:inflight:{sid}", f"{self.base}sd:licences"]
        reply = self.script(keys=keys, args=[sid])
        return [x.decode("utf-8") if isinstance(x, bytes) else x for x in reply]


def enqueue(probe, scope, stage, payload, add, build_id=None):
    """What the engine's `enqueue` answers, with `add(job)` in place of BullMQ's add."""
    reply = probe(stage_id(scope, stage))
    if reply[0] == 1:
        return {"added": False, "reason": "deferred", "until": int(time.time() * 1000) + max(0, reply[1])}
    if reply[0] == 2:
        return {"added": False, "reason": "dispatch_in_flight"}
    if reply[0] == 3:
        return {"added": False, "reason": "pending", "jobId": reply[1]}
    # Nothing deferred, in flight or licensed. A job may still wait for its first run:
    # BullMQ's add meets it at the deduplication key de:<stageId> and adds nothing.
    return add(ready_job(scope, stage, payload, build_id))


def main(argv=None):
    parser = argparse.ArgumentParser(description="Enqueue a stage of bullmq-stage-deferral (docs/producers.md)")
    parser.add_argument("--redis", default=os.environ.get("REDIS_URL", "redis://127.0.0.1:6379"))
    parser.add_argument("--prefix", default="bull")
    parser.add_argument("--queue", default="stage-dispatch")
    parser.add_argument("--scope", action="append", required=True, help="a scope segment, outermost first (repeat)")
    parser.add_argument("--stage", required=True)
    parser.add_argument("--payload", default="null", help="JSON")
    parser.add_argument("--build-id")
    parser.add_argument("--probe-file", default=PROBE_FILE)
    args = parser.parse_args(argv)
    client = redis.Redis.from_url(args.redis)
    try:
        probe = Probe(client, args.prefix, args.queue, args.probe_file)

        def hand_to_node(job):
            # no BullMQ for Python here: one JSON line for examples/python/add-job.ts to add
            print(json.dumps({"add": job}), flush=True)
            return {"added": None, "reason": "handed_over", "jobId": job["opts"]["jobId"]}

        result = enqueue(probe, args.scope, args.stage, json.loads(args.payload), hand_to_node, args.build_id)
        print(json.dumps({"result": result}), file=sys.stderr)
    except InvalidStageRef as e:
        print(f"{e.code}: {e}", file=sys.stderr)
        return 2
    finally:
        client.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
