/**
 * Service invocation under the target app's resiliency policy (`targets.apps.<id>`, else the
 * App/default keywords), for HTTP and gRPC callers alike (it wraps the one dispatch both use):
 * - each try has the policy's timeout, which aborts the call to the other sidecar;
 * - a try fails when it throws (the other sidecar unreachable) or the app answers 5xx (or a status
 *   the retry policy's `matching.httpStatusCodes` lists); a failed answer that is retried is
 *   drained, the last one goes back to the caller as it came;
 * - a retried call sends its body again, so the body is kept in memory while it is at most
 *   REPLAY_LIMIT bytes; a longer one is sent once, under the timeout and circuit breaker only;
 * - an open circuit or a timeout answers 500 ERR_DIRECT_INVOKE naming the policy.
 */
import { PassThrough, Readable } from 'node:stream';
import { ApiError } from '../http/errors.ts';
import { PolicyTimeoutError, type ResolvedPolicy } from '../resiliency/run.ts';
import { CircuitOpenError } from '../resiliency/breaker.ts';
import type { ResiliencyService } from '../resiliency/service.ts';
import { inCodeSet } from '../resiliency/spec.ts';
import { directInvokeError, type InvokeAnswer, type InvokeCall } from './call.ts';

/** Largest request body kept to be sent again on a retry (the API's own default body limit). */
export const REPLAY_LIMIT = 4 * 1024 * 1024;

export type Dispatch = (target: string, call: InvokeCall) => Promise<InvokeAnswer>;

/** `dispatch` with the policy of the app (or HTTPEndpoint) named by `policyName(target)`. */
export function resilientDispatch(dispatch: Dispatch, resiliency: ResiliencyService, policyName: (target: string) => string): Dispatch {
  return async (target, call) => {
    const policy = resiliency.forApp(policyName(target));
    if (!policy) return dispatch(target, call);
    let body = () => call.body;
    let tried: ResolvedPolicy = policy;
    if (policy.retry && policy.retry.maxRetries !== 0 && call.body) {
      const kept = await keepUpTo(call.body, REPLAY_LIMIT);
      if (kept.whole) body = () => Readable.from([kept.whole!]);
      else {
        // too long to keep: sent once, as it streams
        const rest = kept.rest!;
        body = () => rest;
        tried = { ...policy, retry: undefined };
      }
    }
    const matching = policy.retry?.httpStatusCodes;
    try {
      return await resiliency.run(
        tried,
        (signal) => dispatch(target, { ...call, body: body(), signal: call.signal && signal ? AbortSignal.any([call.signal, signal]) : (signal ?? call.signal) }),
        {
          signal: call.signal,
          failureOf: (a) => (a.status >= 500 || (matching && inCodeSet(matching, a.status)) ? { http: a.status } : undefined),
          isRequestError: (e) => e instanceof ApiError && e.status < 500,
          discard: (a) => void a.body.resume(),
        },
      );
    } catch (e) {
      if (e instanceof PolicyTimeoutError || e instanceof CircuitOpenError) throw directInvokeError(policyName(target), e.message);
      throw e;
    }
  };
}

/**
 * Reads `body` up to `limit` bytes: `whole` when it ended within the limit; otherwise `rest`, a
 * stream of everything (what was read, then the remainder as it comes).
 */
async function keepUpTo(body: Readable, limit: number): Promise<{ whole?: Buffer; rest?: Readable }> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of body) {
    const b = Buffer.isBuffer(chunk) ? chunk : Buffer.from(chunk as Uint8Array);
    chunks.push(b);
    size += b.length;
    if (size > limit) {
      const rest = new PassThrough();
      for (const c of chunks) rest.write(c);
      body.pipe(rest);
      return { rest };
    }
  }
  return { whole: Buffer.concat(chunks) };
}
