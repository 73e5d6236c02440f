/**
 * Trigger delivery inside the sidecar: app jobs go to the app as `POST /job/<name>` with the
 * job's data as the body (its JSON, or what data.ts makes of an Any scheduled over gRPC; 2xx
 * and 404 = done, anything else = failed → failure policy), or to a gRPC app as
 * OnJobEventAlpha1 with the Any as scheduled, once the app is ready; internal jobs go to their
 * owner's handler. Under the app's own resiliency policy when one applies (resilient.ts).
 */
import type { SidecarContext } from '../context.ts';
import { grpcCode, UNIMPLEMENTED, type GrpcApp } from '../app/grpc-app.ts';
import { anyOut } from '../grpc/runtime/any.ts';
import { dataBody } from './data.ts';
import type { Trigger } from '../../../scheduler/src/index.ts';
import type { InternalJobsService } from './internal-jobs.ts';
import { deliverUnderPolicy } from './resilient.ts';
import { jobSpan } from '../tracing/messaging.ts';
import { contextHeaders, type TracingService } from '../tracing/service.ts';

/** The header that carries a trigger's due time (RFC 3339, UTC) to the app. */
export const DUE_TIME_HEADER = 'rt-job-due-time';

/**
 * Most job calls to the app at once from this sidecar (the app's max concurrency still applies):
 * the app channel's connections (128). More would wait inside undici's pool as built requests,
 * re-dispatched as connections free up; in A/B burst runs 128 delivered faster than 256.
 */
const MAX_IN_FLIGHT = 128;

export function makeDeliverer(ctx: SidecarContext, internal: InternalJobsService): (t: Trigger) => Promise<boolean> {
  let appReady = false;
  let resolveReady!: () => void;
  const ready = new Promise<void>((r) => (resolveReady = r));
  ctx.onAppReady(() => {
    appReady = true;
    resolveReady();
  });
  const log = ctx.log.child({ scope: 'rt.jobs' });
  // A burst of thousands due at once waits here as small closures rather than as thousands
  // of pending HTTP requests (more in flight than the app channel's 128 connections only costs
  // memory and GC pauses, which show up as lateness).
  let inFlight = 0;
  const waiting: (() => void)[] = [];
  const release = () => {
    // a finished call hands its slot straight to the next waiting one
    const next = waiting.shift();
    if (next) next();
    else inFlight--;
  };
  // the triggers of a burst share their due time: its header value is formatted once
  let dueAt = Number.NaN;
  let dueIso = '';
  const resiliency = ctx.services.resiliency;
  const appId = ctx.options.appId;
  /** One try under a policy: the app's status (gRPC: 200 when taken, else the error thrown with its code). */
  const sendOnce = (t: Trigger, signal: AbortSignal | undefined, timeoutMs: number | undefined, trace?: Record<string, string>): Promise<number> =>
    ctx.app.grpc
      ? jobEventOverGrpc(ctx.app.grpc, t, timeoutMs, trace).then(() => 200)
      : ctx.app
          .invoke({ method: 'POST', path: `/job/${encodeURIComponent(t.key.name)}`, body: dataBody(t), headers: { 'content-type': 'application/json', [DUE_TIME_HEADER]: new Date(t.dueAt).toISOString(), ...trace }, signal })
          .then((r) => r.status);
  const tracing = ctx.services.tracing;
  /** Tracing on (an HTTP or gRPC app): the trigger is a new trace, its span's context goes to the app. */
  const deliverTraced = async (t: Trigger, traced: TracingService): Promise<boolean> => {
    const span = jobSpan(traced, t.key.name, !!ctx.app.grpc);
    const trace = contextHeaders(span);
    const policy = resiliency?.forApp(appId);
    try {
      if (policy) {
        const ok = await deliverUnderPolicy(resiliency!, policy, t, log, (signal, ms) => sendOnce(t, signal, ms, trace));
        span.end(ok ? undefined : 'the app failed the job trigger');
        return ok;
      }
      const status = await sendOnce(t, undefined, undefined, trace);
      const ok = (status >= 200 && status < 300) || status === 404;
      if (!ctx.app.grpc) span.setAttributes({ 'http.response.status_code': status });
      span.end(ok ? undefined : `the app answered ${status}`);
      if (!ok) log.warn({ job: t.key.name, status, attempt: t.attempt }, 'app failed a job trigger');
      return ok;
    } catch (e) {
      span.end((e as Error).message);
      log.warn({ job: t.key.name, err: (e as Error).message, attempt: t.attempt }, 'could not deliver a job trigger to the app');
      return false;
    }
  };

  // No async functions on this path: each trigger costs one promise for the app's answer and
  // one reaction to it (a burst delivers thousands per second; promise churn was a visible
  // share of the sidecar's CPU per trigger).
  const toApp = (t: Trigger): Promise<boolean> => {
    if (tracing) return deliverTraced(t, tracing).finally(release);
    // no Resiliency resource: one check, and the path below as it was
    const policy = resiliency?.forApp(appId);
    if (policy) return deliverUnderPolicy(resiliency!, policy, t, log, (signal, ms) => sendOnce(t, signal, ms)).finally(release);
    if (ctx.app.grpc) return deliverOverGrpc(ctx.app.grpc, t, log).finally(release);
    if (t.dueAt !== dueAt) {
      dueAt = t.dueAt;
      dueIso = new Date(dueAt).toISOString();
    }
    let sent: Promise<number>;
    try {
      sent = ctx.app.post(
        `/job/${encodeURIComponent(t.key.name)}`,
        dataBody(t),
        // name + due time identify one fire, the same on every redelivery of it (delivery is at
        // least once): the app's idempotency key
        { 'content-type': 'application/json', [DUE_TIME_HEADER]: dueIso },
      );
    } catch (e) {
      sent = Promise.reject(e as Error);
    }
    return sent.then(
      (status) => {
        release();
        const ok = (status >= 200 && status < 300) || status === 404;
        if (!ok) log.warn({ job: t.key.name, status, attempt: t.attempt }, 'app failed a job trigger');
        return ok;
      },
      (e: unknown) => {
        release();
        log.warn({ job: t.key.name, err: (e as Error).message, attempt: t.attempt }, 'could not deliver a job trigger to the app');
        return false;
      },
    );
  };
  const inTurn = (t: Trigger): Promise<boolean> => {
    if (inFlight < MAX_IN_FLIGHT) {
      inFlight++;
      return toApp(t);
    }
    return new Promise<void>((r) => waiting.push(r)).then(() => toApp(t));
  };

  return (t: Trigger): Promise<boolean> => {
    if (t.key.owner !== '') return internal.deliver(t);
    return appReady ? inTurn(t) : ready.then(() => inTurn(t));
  };
}

/**
 * Apps whose SDK answered UNIMPLEMENTED to the stable AppCallback.OnJobEvent: later triggers go
 * straight to OnJobEventAlpha1. Forgotten after a while, so an app upgraded in place is asked again.
 */
const alphaOnlyApps = new WeakMap<GrpcApp, number>();
const ALPHA_ONLY_MS = 60_000;

/**
 * A trigger to an app that speaks gRPC: AppCallback.OnJobEvent, or AppCallbackAlpha.OnJobEventAlpha1
 * when the app does not implement it (as the reference runtime), with the job's data as GetJob
 * answers it (the Any as scheduled; JSON data as a Value/StringValue), method `job/<name>`.
 * OK = done; UNIMPLEMENTED from both (no handler, as a 404 over HTTP) = done; any other failure = failed.
 */
async function deliverOverGrpc(app: GrpcApp, t: Trigger, log: SidecarContext['log']): Promise<boolean> {
  try {
    await jobEventOverGrpc(app, t);
    return true;
  } catch (e) {
    log.warn({ job: t.key.name, err: (e as Error).message, attempt: t.attempt }, 'the gRPC app failed a job trigger');
    return false;
  }
}

/** One gRPC call of a trigger (the stable method, or the alpha one): resolves when the app took it, else throws its error. */
async function jobEventOverGrpc(app: GrpcApp, t: Trigger, timeoutMs?: number, trace?: Record<string, string>): Promise<void> {
  const req = {
    name: t.key.name,
    data: anyOut(t),
    method: `job/${t.key.name}`,
    content_type: 'application/json',
    http_extension: { verb: 3 /* POST */, querystring: '' },
  };
  const headers = { [DUE_TIME_HEADER]: new Date(t.dueAt).toISOString(), ...trace };
  try {
    if ((alphaOnlyApps.get(app) ?? 0) < Date.now()) {
      try {
        await app.call('callback', 'OnJobEvent', req, headers, timeoutMs);
        return;
      } catch (e) {
        if (grpcCode(e) !== UNIMPLEMENTED) throw e;
        alphaOnlyApps.set(app, Date.now() + ALPHA_ONLY_MS);
      }
    }
    await app.call('alpha', 'OnJobEventAlpha1', req, headers, timeoutMs);
  } catch (e) {
    if (grpcCode(e) !== UNIMPLEMENTED) throw e;
  }
}
