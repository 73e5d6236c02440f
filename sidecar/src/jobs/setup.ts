/**
 * The jobs building block. Picks the scheduler (gRPC addresses when given; otherwise, in
 * standalone mode, an in-process scheduler on a SQLite file under dataDir), serves the jobs
 * API, delivers triggers, and offers InternalJobs to the other blocks.
 */
import { readFileSync } from 'node:fs';
import type { SidecarContext } from '../context.ts';
import { GrpcSchedulerClient, type SchedulerClient, startInProcessScheduler } from '../../../scheduler/src/index.ts';
import { grpcClientCredentials } from '../identity/tls.ts';
import { makeDeliverer } from './delivery.ts';
import { InternalJobsService } from './internal-jobs.ts';
import type { InternalJobs } from './internal.ts';
import { registerJobRoutes } from './routes.ts';
import { JobsService } from './service.ts';

export async function setup(ctx: SidecarContext): Promise<{ jobs: JobsService; internalJobs?: InternalJobs }> {
  const { options } = ctx;
  let client: SchedulerClient | undefined;
  if (options.schedulerAddresses.length > 0) {
    // the scheduler's token comes from the environment only (never a flag: it would show in ps)
    const caFile = process.env.RT_SCHEDULER_TLS_CA_FILE;
    // read at start: a CA file that cannot be read stops the sidecar with the path in the message
    const tlsCa = caFile ? readFileSync(caFile) : undefined;
    // mTLS: the workload certificate is the client certificate; the scheduler is checked with its CA
    // file when given, else with the trust bundle (a workload of this trust domain)
    const credentials = ctx.identity ? grpcClientCredentials(ctx.identity, { caPem: tlsCa }) : undefined;
    client = new GrpcSchedulerClient(options.schedulerAddresses, { log: ctx.log.child({ scope: 'rt.jobs' }), token: process.env.RT_SCHEDULER_TOKEN || undefined, tlsCa, credentials });
  } else if (options.mode === 'standalone') {
    client = await startInProcessScheduler({ dataDir: options.dataDir, namespace: options.namespace, appId: options.appId, log: ctx.log });
  } else {
    ctx.log.warn('no scheduler address in kubernetes mode: the jobs API answers 500 and workflow timers are unavailable');
  }
  const jobs = new JobsService(client, options.namespace, options.appId);
  registerJobRoutes(ctx, jobs);
  if (!client) return { jobs };

  const internal = new InternalJobsService(client, options.namespace, options.appId);
  // a sidecar without an app takes only internal jobs: the app's wait for one that has an app
  client.watch({ namespace: options.namespace, appId: options.appId }, makeDeliverer(ctx, internal), { appJobs: ctx.app.enabled });
  ctx.metadata.setSchedulerProvider(() => client.connectedAddresses());
  ctx.onClose(() => client.close());
  return { jobs, internalJobs: internal };
}
