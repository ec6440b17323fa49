/**
 * A begin, one operation of the hot path's batch (`BATCH` in src/lua/scripts.ts): what it asks
 * (`BeginRequest`, sent as `beginOp`'s arguments) and what its reply says (`BeginOutcome`).
 */
import type { OpArgs } from './batch';

export type BeginOutcome =
  | { kind: 'deferred'; wakeUpJobId: string }
  | { kind: 'in_flight' }
  | { kind: 'stale' | 'cancelled' | 'superseded' }
  | { kind: 'early'; remainingMs: number }
  /** The worker no longer holds BullMQ's lock of the job (without a token: the job is gone or finished). */
  | { kind: 'gone' }
  | {
      kind: 'locked';
      licence: string | null;
      token: string;
      fencingToken: number;
      /** Real failures the running job has spent in its chain. */
      ownFailures: number;
      /** Real failures the licensed job (another one) has spent in the chain. */
      licenceFailures: number;
      /** The retry options of the licensed job (another one): the chain's budget. */
      licenceRetry?: { attempts?: number; backoff?: unknown };
      /** The wake sequence seen at begin (see `wakeDeferred`). */
      wakeSeq: string;
      /** This run ended its own deferral: its marker still named it (an operator's Promote, or due within 20 ms). */
      endedOwnDeferral: boolean;
      /** The stage had no licence and no failed-job record: a success's release has nothing to revoke. */
      heldNothing: boolean;
      /** The stage's resource gate is closed, or probed by another, for this many ms more: no executor call. */
      gatedMs?: number;
    };

/** How one begin operation is described to the batch. */
export interface BeginRequest {
  sid: string;
  /** The running job's id, '' for a direct call. */
  ownJobId: string;
  lockMs: number;
  wakeUp: boolean;
  /** A wake-up whose own marker has at most this many ms left waits them out (a clock ahead of Redis'). */
  skewToleranceMs: number;
  /** The job's BullMQ lock token: a worker that no longer holds BullMQ's lock of the job begins nothing. */
  bullToken?: string;
  /** The stage's resource, encoded ('' or none: no gate is read). */
  resource?: string;
}

/** A begin's operation for the batch (see `BATCH`). */
export function beginOp(req: BeginRequest): OpArgs {
  const { sid, ownJobId, bullToken } = req;
  return [
    'b',
    sid,
    ownJobId,
    req.lockMs,
    // Stryker disable next-line StringLiteral: equivalent: the script reads only 'w'
    req.wakeUp ? 'w' : '',
    req.skewToleranceMs,
    // Stryker disable next-line StringLiteral: equivalent: without a job of its own the script reads no BullMQ token
    ownJobId && bullToken ? bullToken : '',
    req.resource ?? '',
  ];
}

/**
 * The retry options in a job's BullMQ `opts` (JSON); `undefined` when unreadable (BullMQ writes
 * JSON: only a hash written by hand is not, and it must not fail the batch's other operations).
 */
function retryOf(json: string): { attempts?: number; backoff?: unknown } | undefined {
  try {
    const o = JSON.parse(json) as { attempts?: unknown; backoff?: unknown };
    return { attempts: typeof o.attempts === 'number' ? o.attempts : undefined, backoff: o.backoff };
    // Stryker disable next-line BlockStatement: not reachable by the engine's own writes (see above)
  } catch {
    return undefined;
  }
}

/** `BATCH`'s reply to a begin (see the script): a lock taken is its record alone, or `[0, record, licence, opts]`. */
type BeginReply = string | [number, ...unknown[]];

/** A begin's reply read by the batch: its operation's arguments hold the job id (2) and BullMQ token (6). */
export function readBegin(reply: unknown, args: OpArgs): BeginOutcome {
  return beginOutcome(reply as BeginReply, args[2] as string, args[6] as string);
}

/** What a begin's reply says; a plain function, so the awaiting frame stays small. */
function beginOutcome(r: BeginReply, ownJobId: string, bullToken: string | undefined): BeginOutcome {
  if (typeof r === 'string')
    // Stryker disable next-line StringLiteral: equivalent: a licence or opts where there are none parse to no chain and no budget, and only make a success's release the full one (slower, the same result)
    return locked(r, '', '', ownJobId, bullToken);
  switch (r[0]) {
    case 1:
      return { kind: 'deferred', wakeUpJobId: r[1] as string };
    case 2:
      return { kind: 'in_flight' };
    case 3:
      return { kind: 'stale' };
    case 4:
      return { kind: 'cancelled' };
    case 5:
      return { kind: 'early', remainingMs: Math.max(0, Number(r[1])) };
    case 6:
      return { kind: 'superseded' };
    case 7:
      return { kind: 'gone' };
    default:
      return locked(r[1] as string, r[2] as string, r[3] as string, ownJobId, bullToken);
  }
}

/**
 * A lock taken: `record` is 'fence,own failures,licence failures,wake sequence,tied,ended its own
 * deferral,failed-job records,gate' (see `BATCH`), none of them holding a comma.
 */
function locked(
  record: string,
  licence: string,
  opts: string,
  ownJobId: string,
  bullToken: string | undefined,
): BeginOutcome {
  const [fence, mine, carried, wakeSeq, tied, ownMarker, records, gate] = record.split(',') as [
    string,
    string,
    string,
    string,
    string,
    string,
    string,
    string,
  ];
  return {
    ...(gate ? { gatedMs: Number(gate.slice(1)) } : {}),
    kind: 'locked',
    licence: licence || null,
    token: tied === '1' ? `${ownJobId}\n${fence}\n${bullToken!}` : `${ownJobId}\n${fence}`,
    fencingToken: Number(fence),
    ownFailures: Math.max(0, Number(mine)),
    licenceFailures: Math.max(0, Number(carried)),
    licenceRetry: opts ? retryOf(opts) : undefined,
    wakeSeq,
    endedOwnDeferral: ownMarker === '1',
    // Stryker disable next-line StringLiteral: equivalent: heldNothing false only makes a success's release the full one (slower, the same result)
    heldNothing: !licence && records === '0',
  };
}
