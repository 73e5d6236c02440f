/**
 * Service invocation's callee side: a SERVER span for each call the internal port hands to the
 * app, whose parent is the caller sidecar's CLIENT span (the traceparent the call brought), and
 * under it a CLIENT span of the call to the app, whose context the app gets.
 */
import type { InvokeAnswer } from '../invoke/call.ts';
import type { RequestHead } from '../invoke/proto.ts';
import { carriedBy, underSpan, withContext } from './outbound.ts';
import { contextHeaders, type TracingService } from './service.ts';

/**
 * Runs `call` (the app's answer) under a SERVER span started from `head` (the call as this
 * sidecar received it) and a CLIENT child span (the call to the app), whose context replaces the
 * trace headers the app gets.
 */
export async function tracedAppCall(tracing: TracingService, appId: string, head: RequestHead, call: () => Promise<InvokeAnswer>): Promise<InvokeAnswer> {
  const attrs = {
    'http.request.method': head.method,
    'url.path': head.path,
    'rt.operation': 'invoke',
    'rt.component': 'app',
    ...(head.caller?.app_id ? { 'rt.caller_app_id': head.caller.app_id } : {}),
    'rt.target_app_id': appId,
  };
  const server = tracing.start(`${head.method} ${head.path}`, 'server', carriedBy(head.headers), { ...attrs });
  const client = tracing.start(`${head.method} app ${head.path}`, 'client', contextHeaders(server), attrs);
  head.headers = withContext(head.headers, client);
  return underSpan(server, () => underSpan(client, call));
}
