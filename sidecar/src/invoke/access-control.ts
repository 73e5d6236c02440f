/**
 * A Configuration's `accessControl`, enforced by the sidecar that receives a call:
 *
 *   accessControl:
 *     defaultAction: deny            # when no policy names the caller (default: allow)
 *     trustDomain: public
 *     policies:
 *       - appId: checkout            # the caller
 *         namespace: default
 *         defaultAction: deny        # when no operation matches (default: the global one)
 *         operations:
 *           - { name: /orders/*, httpVerb: [GET, POST], action: allow }
 *
 * Operation names match the called path segment by segment: `*` is one segment, `**` any number.
 * An operation that matches but not on the verb falls to the policy's defaultAction. With no
 * accessControl at all every caller is allowed.
 */
import type { RequestHead } from './proto.ts';

type Action = 'allow' | 'deny';

interface Operation {
  name: string[];
  verbs: string[];
  action: Action;
}

interface Policy {
  appId: string;
  namespace?: string;
  trustDomain: string;
  defaultAction: Action;
  operations: Operation[];
}

export interface AccessControl {
  defaultAction: Action;
  trustDomain: string;
  policies: Policy[];
}

/**
 * Reads spec.accessControl; undefined when there is none. A wrong field is an Error naming it.
 * `defaultTrustDomain`: the trust domain of policies that name none, when the accessControl names
 * none either (with mTLS, the sidecar's own: callers' trust domains come from their certificates).
 */
export function parseAccessControl(spec: Record<string, unknown> | undefined, defaultTrustDomain = 'public'): AccessControl | undefined {
  const ac = spec?.accessControl;
  if (ac === undefined || ac === null) return undefined;
  if (!isObject(ac)) throw new Error('spec.accessControl must be a mapping');
  const defaultAction = action(ac.defaultAction, 'spec.accessControl.defaultAction', 'allow');
  const trustDomain = typeof ac.trustDomain === 'string' && ac.trustDomain ? ac.trustDomain : defaultTrustDomain;
  const policies = asList(ac.policies, 'spec.accessControl.policies').map((p, i): Policy => {
    const at = `spec.accessControl.policies[${i}]`;
    if (!isObject(p) || typeof p.appId !== 'string' || p.appId === '') throw new Error(`${at}.appId is required`);
    return {
      appId: p.appId,
      namespace: typeof p.namespace === 'string' && p.namespace ? p.namespace : undefined,
      trustDomain: typeof p.trustDomain === 'string' && p.trustDomain ? p.trustDomain : trustDomain,
      defaultAction: action(p.defaultAction, `${at}.defaultAction`, defaultAction),
      operations: asList(p.operations, `${at}.operations`).map((o, j): Operation => {
        const oat = `${at}.operations[${j}]`;
        if (!isObject(o) || typeof o.name !== 'string' || o.name === '') throw new Error(`${oat}.name is required`);
        const verbs = asList(o.httpVerb, `${oat}.httpVerb`).map((v) => String(v).toUpperCase());
        return { name: segments(o.name), verbs: verbs.length ? verbs : ['*'], action: action(o.action, `${oat}.action`, 'allow') };
      }),
    };
  });
  return { defaultAction, trustDomain, policies };
}

/** undefined when the call may go ahead; else why not (the message the caller sees). */
export function checkAccess(ac: AccessControl | undefined, head: RequestHead): string | undefined {
  if (!ac) return undefined;
  const caller = head.caller ?? { app_id: '', namespace: '', trust_domain: '' };
  const td = caller.trust_domain || ac.trustDomain;
  const policy = ac.policies.find((p) => p.appId === caller.app_id && (p.namespace === undefined || p.namespace === caller.namespace) && p.trustDomain === td);
  let verdict = ac.defaultAction;
  if (policy) {
    verdict = policy.defaultAction;
    const path = segments(head.path);
    const op = policy.operations.find((o) => matches(o.name, path));
    if (op && (op.verbs.includes('*') || op.verbs.includes(head.method.toUpperCase()))) verdict = op.action;
  }
  if (verdict === 'allow') return undefined;
  return `access control policy has denied access to id: spiffe://${td}/ns/${caller.namespace}/${caller.app_id} operation: ${head.path} verb: ${head.method}`;
}

function matches(pattern: string[], path: string[]): boolean {
  for (let i = 0; i < pattern.length; i++) {
    if (pattern[i] === '**') return true;
    if (i >= path.length) return false;
    if (pattern[i] !== '*' && pattern[i] !== path[i]) return false;
  }
  return pattern.length === path.length;
}

function segments(p: string): string[] {
  return p.split('/').filter((s) => s !== '');
}

function action(v: unknown, field: string, dflt: Action): Action {
  if (v === undefined || v === null || v === '') return dflt;
  const s = String(v).toLowerCase();
  if (s !== 'allow' && s !== 'deny') throw new Error(`${field} must be allow or deny, got "${String(v)}"`);
  return s;
}

function asList(v: unknown, field: string): unknown[] {
  if (v === undefined || v === null) return [];
  if (!Array.isArray(v)) throw new Error(`${field} must be a list`);
  return v;
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}
