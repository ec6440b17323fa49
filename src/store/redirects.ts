import { setTimeout as sleep } from 'node:timers/promises';

/**
 * Cluster redirections for the pipelines and transactions the engine builds
 * itself. ioredis follows MOVED/ASK and waits out TRYAGAIN/CLUSTERDOWN for a
 * single command, and for a pipeline only when every command failed with the
 * same redirection; a pipeline or MULTI that also holds a keyless command
 * (`CLIENT INFO`) comes back with the error and a stale slot map. A MULTI
 * refused that way ran nothing (EXECABORT), and the engine's pipelines only
 * read, so sending them again is safe.
 */
const REDIRECTION = /^(MOVED|ASK|TRYAGAIN|CLUSTERDOWN)\b|EXECABORT|Too many Cluster redirections/;

/** How many times a redirected pipeline is sent again, and the pause before each, ms. */
const MAX_REDIRECTS = 16;
const RETRY_DELAY_MS = 100;
/**
 * No new attempt starts this long after the first one, ms. ioredis retries a
 * MULTI whose commands all failed alike by itself, up to `maxRedirections`
 * times (TRYAGAIN during a slot migration: `retryDelayOnTryAgain` apart), and
 * only then rejects (EXECABORT): sending it again 16 times more would hold a
 * call for 16 times the client's own budget (minutes).
 */
const MAX_RETRY_MS = 2000;

interface MaybeCluster {
  isCluster?: boolean;
  refreshSlotsCache?(): void;
}

/**
 * Runs `send` (a pipeline or MULTI that rejects when a reply is an error: a
 * MULTI refused for a redirection rejects with EXECABORT, the probe's
 * pipeline throws its first error), and on a Cluster sends it again after a
 * redirection (a slot map refresh begun, a 100 ms pause), up to 16 times and
 * for at most 2 s (then the redirection is thrown): as ioredis does for a
 * single command. Elsewhere it runs `send` once.
 */
export async function withRedirects<T>(client: MaybeCluster, send: () => Promise<T>): Promise<T> {
  if (!client.isCluster) return send();
  const started = Date.now();
  for (let attempt = 1; ; attempt++) {
    try {
      return await send();
    } catch (error) {
      const redirected = REDIRECTION.test((error as Error).message);
      if (!redirected || attempt >= MAX_REDIRECTS || Date.now() - started >= MAX_RETRY_MS) throw error;
    }
    client.refreshSlotsCache?.();
    await sleep(RETRY_DELAY_MS);
  }
}
