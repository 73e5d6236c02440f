/**
 * The servers that the test suites and the benchmarks share: a private Redis and PostgreSQL,
 * started from Debian's binaries when RT_TEST_REDIS_URL / RT_TEST_POSTGRES_URL are not set.
 * Their URLs are put into process.env, so child processes (test workers, benchmarks) find them.
 */
import { startPostgres } from './postgres.ts';
import { startRedis } from './redis.ts';
import type { StartedServer } from './server-process.ts';

export interface SharedServices {
  stop(): Promise<void>;
}

const wanted: Array<{ env: string; name: string; start: () => Promise<StartedServer> }> = [
  { env: 'RT_TEST_REDIS_URL', name: 'Redis', start: startRedis },
  { env: 'RT_TEST_POSTGRES_URL', name: 'PostgreSQL', start: startPostgres },
];

export async function startSharedServices(opts: { quiet?: boolean } = {}): Promise<SharedServices> {
  const started: StartedServer[] = [];
  const results = await Promise.allSettled(
    wanted.filter((w) => !process.env[w.env]).map(async (w) => {
      const s = await w.start();
      started.push(s);
      process.env[w.env] = s.url;
      if (!opts.quiet) console.log(`[services] ${w.name} at ${s.url} (pid ${s.pid})`);
    }),
  );
  for (const r of results) if (r.status === 'rejected') console.warn(`[services] ${(r.reason as Error).message}`);
  let stopping: Promise<void> | undefined;
  const stop = () => (stopping ??= Promise.all(started.map((s) => s.stop())).then(() => {}));
  // an interrupted run (Ctrl-C) still stops them
  const onSignal = (sig: NodeJS.Signals) => void stop().finally(() => process.kill(process.pid, sig));
  process.once('SIGINT', onSignal);
  process.once('SIGTERM', onSignal);
  return {
    stop: async () => {
      process.off('SIGINT', onSignal);
      process.off('SIGTERM', onSignal);
      await stop();
    },
  };
}
