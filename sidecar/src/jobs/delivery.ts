/**
 * Trigger delivery inside the sidecar: app jobs go to the app as `POST /job/<name>` with the
 * job's data as the JSON body (2xx and 404 = done, anything else = failed → failure policy),
 * once the app is ready; internal jobs go to their owner's handler.
 */
import type { SidecarContext } from '../context.ts';
import type { Trigger } from '../../../scheduler/src/types.ts';
import type { InternalJobsService } from './internal-jobs.ts';

export function makeDeliverer(ctx: SidecarContext, internal: InternalJobsService): (t: Trigger) => Promise<boolean> {
  let appReady = false;
  let resolveReady!: () => void;
  const ready = new Promise<void>((r) => (resolveReady = r));
  ctx.onAppReady(() => {
    appReady = true;
    resolveReady();
  });
  const log = ctx.log.child({ scope: 'rt.jobs' });

  return async (t: Trigger): Promise<boolean> => {
    if (t.key.owner !== '') return internal.deliver(t);
    if (!appReady) await ready;
    try {
      const res = await ctx.app.invoke({
        method: 'POST',
        path: `/job/${encodeURIComponent(t.key.name)}`,
        body: t.dataJson ?? '',
        headers: { 'content-type': 'application/json' },
      });
      const ok = (res.status >= 200 && res.status < 300) || res.status === 404;
      if (!ok) log.warn({ job: t.key.name, status: res.status, attempt: t.attempt }, 'app failed a job trigger');
      return ok;
    } catch (e) {
      log.warn({ job: t.key.name, err: (e as Error).message, attempt: t.attempt }, 'could not deliver a job trigger to the app');
      return false;
    }
  };
}
