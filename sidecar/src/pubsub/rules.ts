/**
 * Routing rules of a subscription: CEL `match` expressions over the CloudEvent (`event`), in
 * order; the first that is true names the path, a rule without `match` is the default. A rule
 * that does not parse is refused when the subscription starts; one whose evaluation fails for a
 * message (a missing field, a type mismatch) is false for that message.
 */
import { createRequire } from 'node:module';
import type { CelEnv } from '@bufbuild/cel';
import type { SubscriptionRule } from '../resources/types.ts';

// CEL (with the protobuf runtime and RE2 it brings) loads on the first rule with a `match`, not at
// start: most sidecars have none, and it is ~10% of the start-up time (bench/README.md `### startup`).
// A synchronous require of the ESM package, since subscriptions reconcile synchronously.
const require = createRequire(import.meta.url);
let cel: typeof import('@bufbuild/cel') | undefined;
const celLib = () => (cel ??= require('@bufbuild/cel') as typeof import('@bufbuild/cel'));

type Evaluate = (vars: { event: unknown }) => unknown;

export interface CompiledRule {
  match: string;
  path: string;
  test?: Evaluate;
}

let env: CelEnv | undefined;

/** Parses and plans one CEL expression; throws with the parser's words when it is not CEL. */
export function compileMatch(expr: string): Evaluate {
  const { celEnv, parse, plan } = celLib();
  env ??= celEnv();
  let parsed;
  try {
    parsed = parse(expr);
  } catch (e) {
    throw new Error(`CEL expression ${JSON.stringify(expr.slice(0, 200))} does not parse: ${(e as Error).message}`);
  }
  return plan(env, parsed) as unknown as Evaluate;
}

export function compileRules(rules: SubscriptionRule[]): CompiledRule[] {
  return rules.map((r) => ({ match: r.match, path: r.path, test: r.match.trim() === '' ? undefined : compileMatch(r.match) }));
}

/** true only for a boolean true result: errors and non-booleans do not match. */
export function matches(test: Evaluate, event: unknown): boolean {
  try {
    const r = test({ event });
    return !celLib().isCelError(r) && r === true;
  } catch {
    return false;
  }
}

/** The path of the first rule that matches, or undefined (the message is dropped). */
export function route(rules: CompiledRule[], event: unknown): string | undefined {
  for (const r of rules) if (!r.test || matches(r.test, event)) return r.path;
  return undefined;
}
