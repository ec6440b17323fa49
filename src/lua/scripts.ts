/**
 * The engine's Lua scripts: one file each, src/lua/<name>.lua, which documents its KEYS, ARGV and
 * replies; shared helpers are in src/lua/includes/, pulled in by `--- @include "<name>"` lines and
 * put in place by `npm run lua` (scripts/gen-lua.ts), which writes their text to generated.ts.
 * Every key a script names is under the queue's base `<prefix>:<queue>:`, so with a hash-tagged
 * prefix they all hash to the queue's slot (BullMQ's own scripts build job keys from the base the
 * same way).
 *
 * Shared words: M = the stage's marker (value: the wake-up job id, TTL: the
 * window); L = the stage's in-flight lock (value: the token
 * `<job id>\n<fencing token>`, or `<job id>\n<fencing token>\n<BullMQ lock token>`
 * for a job's attempt (see `tiedTo`), or a newline + token once
 * cancelled (no token starts with a newline but a direct call's, `\n<fence>`, which
 * has no second one: `unmark`); live while its key exists); F = the queue's
 * fencing counter; D = BullMQ's deduplication key of the stage's enqueued job;
 * J = a job's BullMQ hash; IDX = the queue's licence index, a sorted set (all
 * scores 0) of job ids (every dispatch job's id starts `<stageId>@`): the job
 * that carries the stage (its licence: a wake-up, or a job waiting out a
 * retry), at most one per stage, optionally marked `!` (a fresh chain:
 * cleared, or retried by hand); and any number of records of jobs that failed
 * for good, marked `?` (a cancel reaches them; a retry by hand of one of them
 * runs). A job runs only as its stage's licence holder or when the stage has
 * none (a wake-up only as its holder); a job whose licence another attempt
 * revoked is marked superseded.
 *
 * Fields the engine keeps on a dispatch job's own hash (they go with the job):
 *   sdc  cancelled: the job must not dispatch when it (next) runs
 *   sds  superseded: the job recorded a deferral (its wake-up carries the stage), or
 *        another attempt revoked its licence (a deferral, a success), or a chain's end found
 *        it retried or redelivered after it failed for good, or it sent the stage from a
 *        worker BullMQ had handed the job on from (handedOn)
 */

export {
  BATCH,
  CANCEL,
  CLEAR,
  DEFER,
  EXTEND,
  FAIL,
  PERMISSIONS,
  REPLACE,
  WAKE,
  /** the enqueue probe, src/lua/enqueue-probe.lua (producers in other languages run it too) */
  ENQUEUE_PROBE as PROBE,
} from './generated';
