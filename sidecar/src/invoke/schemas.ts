/**
 * The service invocation routes' schemas (http/schema.ts). Everything after the target, the
 * query and the body go to the app unchanged, so only the path is declared.
 */
import { route } from '../http/schema.ts';

const ANY_BODY = 'any content, streamed to the app as sent (the query too)';
const ANSWER = { '200': "the app's answer: status, headers and body as it sent them" };

export const INVOKE = route('invoke.method', 'Invoke a method of an app (any HTTP method)', {
  params: { '*:target': '<app-id>[.<namespace>]/method/<method path>, or an HTTPEndpoint name or URL in place of the app id' },
  anyBody: ANY_BODY,
  responses: ANSWER,
});

export const BY_HEADER = route('invoke.header', 'Invoke the same path of the app named by the rt-app-id (or dapr-app-id) header (any HTTP method)', {
  params: { '*:path': 'the path on the app' },
  headers: { 'rt-app-id': 'the app to call (dapr-app-id is accepted too); without it the route answers 404' },
  anyBody: ANY_BODY,
  responses: ANSWER,
});

export const INVOKE_SCHEMAS = [INVOKE, BY_HEADER];
