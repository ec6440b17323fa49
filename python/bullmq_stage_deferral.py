#!/usr/bin/python3
"""Enqueue a stage of bullmq-stage-deferral from Python, without Node (docs/producers.md).

Needs only the standard library and redis-py (Debian: apt-get install python3-redis).
`enqueue` does what the engine's `enqueue` does and answers as it does:

1. computes the stage id of the ref (`stage_id`, checked against
   test/vectors/stage-ids.json by test/python/test_vectors.py);
2. runs the package's enqueue probe (src/lua/enqueue-probe.lua, found next to
   this file in the package, or at `probe_path`), one round trip;
3. when the probe finds nothing pending, adds the job -- name, data and options
   as the producer contract states them -- with `ADD`, a script that writes a
   waiting job with a deduplication id as BullMQ's own add (addStandardJob) of
   BullMQ 5.81 and 6.x does, without the features the contract leaves out
   (delay, priority, parents, deduplication modes).

From the command line (prints the answer as one JSON line):

    /usr/bin/python3 bullmq_stage_deferral.py --prefix bull --queue stage-dispatch \\
        --scope book-1 --scope ch-2 --stage image --payload '{"sceneUrl": "s3://scenes/7"}'
"""

import argparse
import functools
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

# The package's probe, beside this file: <package>/python/ and <package>/src/lua/
# (node_modules/bullmq-stage-deferral/... when installed from npm, or this repository).
PROBE_FILE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src", "lua", "enqueue-probe.lua")

# BullMQ's add of a waiting job with a simple-mode deduplication id, as its addStandardJob
# writes it (checked against BullMQ 6.7 by python-producer.test.ts: a Node Worker runs the
# job, queue.getJob reads it back). Returns the job id: ARGV[1] when added, else the job
# the deduplication key names.
#   KEYS: wait, meta, id, active, events, marker, de:<stageId>, the job's hash
#   ARGV: job id, name, data (JSON), opts (JSON, BullMQ's stored form), stage id, queue base
ADD = """
local jobId = ARGV[1]
redis.call('INCR', KEYS[3])
local maxEvents = redis.call('HGET', KEYS[2], 'opts.maxLenEvents')
if not maxEvents then
  maxEvents = 10000
  redis.call('HSET', KEYS[2], 'opts.maxLenEvents', maxEvents)
end
if redis.call('EXISTS', KEYS[8]) == 1 then
  redis.call('XADD', KEYS[5], 'MAXLEN', '~', maxEvents, '*', 'event', 'duplicated', 'jobId', jobId)
  return jobId
end
if not redis.call('SET', KEYS[7], jobId, 'NX') then
  local current = redis.call('GET', KEYS[7])
  -- a key whose job is gone (an outage took the job, not the key) is taken over, as BullMQ does
  if redis.call('PTTL', KEYS[7]) ~= -1 or redis.call('EXISTS', ARGV[6] .. current) == 1 then
    redis.call('XADD', KEYS[5], 'MAXLEN', '~', maxEvents, '*', 'event', 'deduplicated', 'jobId', current,
      'deduplicationId', ARGV[5], 'deduplicatedJobId', jobId)
    return current
  end
  redis.call('SET', KEYS[7], jobId)
end
local t = redis.call('TIME')
local now = string.format('%.0f', t[1] * 1000 + math.floor(t[2] / 1000))
redis.call('HSET', KEYS[8], 'name', ARGV[2], 'data', ARGV[3], 'opts', ARGV[4], 'timestamp', now,
  'delay', 0, 'priority', 0, 'deid', ARGV[5])
redis.call('XADD', KEYS[5], '*', 'event', 'added', 'jobId', jobId, 'name', ARGV[2])
redis.call('LPUSH', KEYS[1], jobId)
-- Workers are woken by the marker unless the queue is paused or at its global concurrency
local meta = redis.call('HMGET', KEYS[2], 'paused', 'concurrency')
if not meta[1] and not (meta[2] and redis.call('LLEN', KEYS[4]) >= tonumber(meta[2])) then
  redis.call('ZADD', KEYS[6], 0, '0')
end
redis.call('XADD', KEYS[5], 'MAXLEN', '~', maxEvents, '*', 'event', 'waiting', 'jobId', jobId)
return jobId
"""


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
    if isinstance(attempts, bool) or not isinstance(attempts, int) or attempts < 1:
        raise ValueError(f"Expected `attempts` to be a positive integer, got {attempts!r}")
    backoff = {"type": "exponential", "delay": 1000} if backoff is None else backoff
    if not isinstance(backoff, dict) or not isinstance(backoff.get("type"), str):
        raise ValueError(f"Expected `backoff` to be {{'type': ..., 'delay': ms}}, got {backoff!r}")
    if backoff["type"] in ("fixed", "exponential") and not isinstance(backoff.get("delay"), int):
        raise ValueError(f"Expected a {backoff['type']} `backoff` to have a `delay` in ms, got {backoff!r}")
    data = {"v": JOB_DATA_VERSION, "scope": list(scope), "stage": stage, "payload": payload}
    if build_id is not None:
        data["buildId"] = build_id
    opts = {
        "jobId": ready_job_id(sid),
        "deduplication": {"id": sid},
        "attempts": attempts,
        "backoff": backoff,
        "removeOnComplete": True,
    }
    return {"name": stage, "data": data, "opts": opts}


@functools.lru_cache(maxsize=None)
def _probe_text(path):
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except FileNotFoundError:
        raise FileNotFoundError(
            f"The enqueue probe is not at {os.path.normpath(path)}: pass `probe_path` (--probe-file), e.g. "
            "node_modules/bullmq-stage-deferral/src/lua/enqueue-probe.lua, the file of the version your workers run"
        ) from None


def _text(x):
    return x.decode("utf-8") if isinstance(x, bytes) else x


def probe(client, prefix, queue_name, sid, probe_path=None):
    """The engine's answer for a stage that has its job (a dict), or None when the job is to be added.

    `until` is on Redis' clock (its TIME when the probe answered, plus the marker's PTTL), as the engine's."""
    base = f"{prefix}:{queue_name}:"
    keys = [f"{base}sd:deferred:{sid}", f"{base}sd:inflight:{sid}", f"{base}sd:licences"]
    # redis-py's Script: EVALSHA, and EVAL of the text when Redis does not have it cached
    reply = [_text(x) for x in client.register_script(_probe_text(probe_path or PROBE_FILE))(keys=keys, args=[sid])]
    if reply[0] == 1:
        seconds, micros = client.time()
        return {
            "added": False,
            "reason": "deferred",
            "until": seconds * 1000 + micros // 1000 + max(0, reply[1]),
            "payloadTaken": False,
        }
    if reply[0] == 2:
        return {"added": False, "reason": "dispatch_in_flight", "payloadTaken": False}
    if reply[0] == 3:
        return {"added": False, "reason": "pending", "jobId": reply[1], "payloadTaken": False}
    return None


def add(client, prefix, queue_name, job):
    """Adds `job` (from `ready_job`) to the queue; answers as the engine's enqueue does after its add."""
    base = f"{prefix}:{queue_name}:"
    opts = job["opts"]
    sid = opts["deduplication"]["id"]
    # BullMQ stores the options with `deduplication` under its short key `de`
    stored = {"de": opts["deduplication"], **{k: v for k, v in opts.items() if k != "deduplication"}}
    keys = [base + k for k in ("wait", "meta", "id", "active", "events", "marker", f"de:{sid}", opts["jobId"])]
    args = [
        opts["jobId"],
        job["name"],
        json.dumps(job["data"], ensure_ascii=False, allow_nan=False, separators=(",", ":")),
        json.dumps(stored, ensure_ascii=False, allow_nan=False, separators=(",", ":")),
        sid,
        base,
    ]
    job_id = _text(client.register_script(ADD)(keys=keys, args=args))
    added = job_id == opts["jobId"]
    return {"added": added, "reason": None if added else "pending", "jobId": job_id, "payloadTaken": added}


def enqueue(client, prefix, queue_name, scope, stage, payload, build_id=None, attempts=3, backoff=None, probe_path=None):
    """What the engine's `enqueue(ref, payload, {buildId})` does and answers, from a redis-py client.

    `attempts` and `backoff` are the engine's `retry` option (its defaults here): give the
    same as your workers' engine. Raises InvalidStageRef for a ref the library rejects."""
    sid = stage_id(scope, stage)
    job = ready_job(scope, stage, payload, build_id, attempts, backoff)
    return probe(client, prefix, queue_name, sid, probe_path) or add(client, prefix, queue_name, job)


def main(argv=None):
    parser = argparse.ArgumentParser(description="Enqueue a stage of bullmq-stage-deferral (docs/producers.md)")
    parser.add_argument("--redis", default=os.environ.get("REDIS_URL", "redis://127.0.0.1:6379"))
    parser.add_argument("--prefix", default="bull")
    parser.add_argument("--queue", default="stage-dispatch")
    parser.add_argument("--scope", action="append", required=True, help="a scope segment, outermost first (repeat)")
    parser.add_argument("--stage", required=True)
    parser.add_argument("--payload", default="null", help="JSON")
    parser.add_argument("--build-id")
    parser.add_argument("--attempts", type=int, default=3)
    parser.add_argument("--backoff", type=json.loads, help='JSON, e.g. {"type": "fixed", "delay": 5000}')
    parser.add_argument("--probe-file", help=f"the enqueue probe (default: {os.path.normpath(PROBE_FILE)})")
    args = parser.parse_args(argv)
    client = redis.Redis.from_url(args.redis)
    try:
        result = enqueue(
            client, args.prefix, args.queue, args.scope, args.stage, json.loads(args.payload),
            args.build_id, args.attempts, args.backoff, args.probe_file,
        )
        print(json.dumps(result, ensure_ascii=False))
    except (InvalidStageRef, ValueError, FileNotFoundError) as e:
        print(f"{getattr(e, 'code', type(e).__name__)}: {e}", file=sys.stderr)
        return 2
    finally:
        client.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
