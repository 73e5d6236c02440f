/**
 * A job trigger to the app under the app's own resiliency policy: `targets.apps.<this app's id>`,
 * else the `DefaultApp…` / `Default…` keywords (the reference runtime names no target for job
 * triggers; docs/resiliency.md). Each try is one call to the app; a failed try is an answer
 * other than 2xx or 404 (gRPC: an error other than UNIMPLEMENTED), or no answer. What the policy
 * ends with is what the scheduler's failure policy sees: done, or failed (then retried by the
 * job's `failurePolicy`, each of those tries running the policy again).
 * Used only when a policy applies: without one, delivery.ts's own path runs as it always did.
 */
import type { Logger } from 'pino';
import { grpcCode } from '../app/grpc-app.ts';
import type { ResolvedPolicy } from '../resiliency/run.ts';
import type { ResiliencyService } from '../resiliency/service.ts';
import type { Trigger } from '../../../scheduler/src/index.ts';

/**
 * How long the policy may keep one trigger: below the scheduler's 120 s ack timeout, after which
 * the scheduler counts the trigger failed and may send it again. No try starts after this, and
 * the one under way is aborted, so a trigger is never tried here while its redelivery runs.
 */
export const TRIGGER_BUDGET_MS = 110_000;

const done = (status: number) => (status >= 200 && status < 300) || status === 404;

/**
 * Delivers `t` with `send` (one try: the app's status, or a throw) under `policy`; true when the
 * app took it. `send` gets the try's signal (a timeout aborts the request) and the policy's
 * timeout (a gRPC call's deadline).
 */
export function deliverUnderPolicy(resiliency: ResiliencyService, policy: ResolvedPolicy, t: Trigger, log: Logger, send: (signal: AbortSignal | undefined, timeoutMs: number | undefined) => Promise<number>): Promise<boolean> {
  return resiliency
    .run(policy, (signal) => send(signal, policy.timeout?.ms), {
      signal: AbortSignal.timeout(TRIGGER_BUDGET_MS),
      failureOf: (status) => (done(status) ? undefined : { http: status }),
      codesOf: (e) => {
        const grpc = grpcCode(e);
        return grpc === undefined ? undefined : { grpc };
      },
    })
    .then(
      (status) => {
        if (!done(status)) log.warn({ job: t.key.name, status, attempt: t.attempt, target: policy.target }, 'app failed a job trigger (resiliency policy exhausted)');
        return done(status);
      },
      (e: unknown) => {
        log.warn({ job: t.key.name, err: (e as Error).message, attempt: t.attempt, target: policy.target }, 'could not deliver a job trigger to the app under its resiliency policy');
        return false;
      },
    );
}
