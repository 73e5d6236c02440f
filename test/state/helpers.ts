/** Shared pieces of the state tests: a component spec and context for opening stores directly. */
import pino from 'pino';
import type { ComponentContext, ComponentSpec } from '../../sidecar/src/components/types.ts';

export function spec(type: string, metadata: Record<string, string> = {}): ComponentSpec {
  return { name: 'test', type, version: 'v1', metadata, secretKeys: [], initTimeoutMs: 5000, ignoreErrors: false, scopes: [], annotations: {}, source: 'test' };
}

export const componentContext: ComponentContext = { appId: 'test', namespace: 'default', log: pino({ level: 'silent' }) };
