/**
 * One happy-path drain under the CPU profiler (not part of `npm run bench`):
 *   REDIS_URL=... npx tsx bench/profile-happy.ts plugin 50 20000 /tmp/plugin.cpuprofile
 * Arguments: variant (`plugin` | `raw` | `floor`: raw BullMQ with one batched
 * no-op request of its own per job), concurrency, jobs, where to write the
 * profile (`.cpuprofile`, opens in Chrome DevTools). Only the drain is profiled
 * (not the `addBulk` before it). Prints jobs/s and the CPU time Node and Redis
 * spent per job (Redis' `used_cpu_user` + `used_cpu_sys`, server-wide).
 * `NOPROF=1` runs the same drain without the profiler (for A/B runs of two
 * checkouts, interleaved with `raw`), and writes no profile.
 */
import { writeFileSync } from 'node:fs';
import { Session } from 'node:inspector/promises';
import { benchPrefix, client, closeClients, dropPrefix, parseInfo } from './lib/redis';
import { drain, type Variant } from './scenarios/happy-path';

async function main(): Promise<void> {
  const [variant = 'plugin', concurrency = '50', jobs = '20000', out = `/tmp/happy-${variant}.cpuprofile`] =
    process.argv.slice(2);
  const prefix = benchPrefix(`profile-${variant}`);
  const redis = client();
  const session = new Session();
  session.connect();
  const redisCpu = async () => {
    const info = parseInfo(await redis.info('cpu'));
    return Number(info.used_cpu_user) + Number(info.used_cpu_sys);
  };
  let cpu0 = process.cpuUsage();
  let redis0 = 0;
  let nodeUs = 0;
  let redisS = 0;
  try {
    const rate = await drain(variant as Variant, prefix, Number(concurrency), Number(jobs), 0, {
      async started() {
        if (!process.env.NOPROF) {
          await session.post('Profiler.enable');
          await session.post('Profiler.start');
        }
        redis0 = await redisCpu();
        cpu0 = process.cpuUsage();
      },
      async finished() {
        const c = process.cpuUsage(cpu0);
        nodeUs = c.user + c.system;
        redisS = (await redisCpu()) - redis0;
        if (!process.env.NOPROF) {
          const { profile } = await session.post('Profiler.stop');
          writeFileSync(out, JSON.stringify(profile));
        }
      },
    });
    const n = Number(jobs);
    console.log(
      `${variant} c=${concurrency}: ${rate.toFixed(0)} jobs/s; CPU per job: Node ${(nodeUs / n).toFixed(1)} µs, Redis ${((redisS * 1e6) / n).toFixed(1)} µs${process.env.NOPROF ? '' : `; profile ${out}`}`,
    );
  } finally {
    session.disconnect();
    await dropPrefix(redis, prefix);
    await closeClients();
  }
}

void main();
