/**
 * The output binding route's schema (http/schema.ts). The route reads its body itself (it may
 * stream `data` to the binding), so the body is checked once parsed; whether the binding has the
 * operation the bindings service checks.
 */
import { route, STRING_MAP } from '../http/schema.ts';

export const INVOKE = route('bindings.invoke', 'Invoke an output binding', {
  params: { name: 'the binding component' },
  ownBody: {
    type: 'object',
    required: ['operation'],
    properties: {
      operation: { type: 'string', description: "one of the binding's operations (e.g. create, get, list, delete)" },
      data: { description: 'the payload; a string is passed as is (e.g. base64 file content)' },
      metadata: STRING_MAP,
    },
    description: 'send a JSON object with "operation", and optionally "data" and "metadata"',
  },
  responses: { '200': "the binding's answer (its metadata as metadata.<name> headers)", '204': 'done, no content' },
});

export const BINDINGS_SCHEMAS = [INVOKE];
