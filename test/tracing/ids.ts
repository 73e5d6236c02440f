/** Small helpers of the tracing tests: random hex ids (a trace is 16 bytes, a span 8), a span's error status. */
import { randomBytes } from 'node:crypto';
import type { JaegerSpan } from '../services/jaeger/query.ts';

export const hex = (bytes: number): string => randomBytes(bytes).toString('hex');

/** Whether a span as Jaeger has it ended with an error status. */
export const isError = (s: JaegerSpan | undefined): boolean => s?.tags['otel.status_code'] === 'ERROR' || s?.tags.error === true;
