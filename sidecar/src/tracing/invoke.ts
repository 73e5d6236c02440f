/**
 * Service invocation's callee side: a SERVER span for each call the internal port hands to the
 * app, whose parent is the caller sidecar's span (the traceparent the call brought), and the app
 * gets this span's context in place of the caller's.
 */
import type { InvokeAnswer } from '../invoke/call.ts';
import type { Header, RequestHead } from '../invoke/proto.ts';
import { endHttpSpan } from './http.ts';
import { contextHeaders, type TracingService } from './service.ts';

const valueOf = (headers: Header[], name: string): string | undefined => headers.find((h) => h.name === name)?.value;

/** Runs `call` (the app's answer) under a span started from `head`, whose trace headers it rewrites. */
export async function tracedAppCall(tracing: TracingService, appId: string, head: RequestHead, call: () => Promise<InvokeAnswer>): Promise<InvokeAnswer> {
  const span = tracing.start(`${head.method} ${head.path}`, 'server', { traceparent: valueOf(head.headers, 'traceparent'), tracestate: valueOf(head.headers, 'tracestate') }, {
    'http.request.method': head.method,
    'url.path': head.path,
    'rt.operation': 'invoke',
    'rt.component': 'app',
    ...(head.caller?.app_id ? { 'rt.caller_app_id': head.caller.app_id } : {}),
    'rt.target_app_id': appId,
  });
  const h = contextHeaders(span);
  head.headers = head.headers.filter((x) => x.name !== 'traceparent' && x.name !== 'tracestate');
  head.headers.push({ name: 'traceparent', value: h.traceparent });
  if (h.tracestate) head.headers.push({ name: 'tracestate', value: h.tracestate });
  try {
    const answer = await call();
    if (answer.grpcStatus) span.setAttributes({ 'rpc.grpc.status_code': answer.grpcStatus.code });
    endHttpSpan(span, answer.status);
    return answer;
  } catch (e) {
    span.end((e as Error).message);
    throw e;
  }
}
