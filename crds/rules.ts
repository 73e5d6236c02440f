/**
 * The CRDs' CEL rules (`x-kubernetes-validations` in crds/*.yaml) as plain functions, looked up
 * by the rule's exact text. The YAML stays the source of truth: a rule whose text is not here is
 * evaluated by CEL (crds/validate.ts), and test/crds/rules.test.ts checks that every rule in the
 * CRDs is here and that each function answers as CEL does on generated objects, errors included.
 * Why: loading @bufbuild/cel and planning the rules cost a sidecar with resource files ~150 ms of
 * start and 6–11 MB of RSS (bench/README.md `### startup`).
 *
 * CEL semantics kept: a missing map key is an error (`self.name` on an entry without a name);
 * `||` is true when either side is true and `&&` false when either side is false, whatever the
 * other side (an error on the other side does not matter); otherwise an error wins; a rule that
 * ends in an error fails. `has(self.x)`: the key is present (null counts as absent, as the JSON →
 * CEL conversion drops it).
 */

/** CEL's third value: the rule hit an error (missing key, wrong type). */
const ERR = Symbol('cel error');
type Val = boolean | typeof ERR;

/** CEL's `||` (dominant true) and `&&` (dominant false): the dominant value wins over an error. */
const logic =
  (dominant: boolean) =>
  (...xs: (() => Val)[]): Val => {
    let err = false;
    for (const x of xs) {
      const v = x();
      if (v === dominant) return dominant;
      if (v === ERR) err = true;
    }
    return err ? ERR : !dominant;
  };
const or = logic(true);
const and = logic(false);

type Obj = Record<string, unknown>;
const isMap = (v: unknown): v is Obj => v !== null && typeof v === 'object' && !Array.isArray(v);
const has = (self: Obj, k: string): boolean => self[k] !== undefined && self[k] !== null;
/** `self.k != s` (CEL's equality across types: a value of another type is not equal). */
const notEqual = (self: Obj, k: string, s: string): Val => (has(self, k) ? self[k] !== s : ERR);
/** size(): list length, map entries, string code points; anything else is an error. */
const size = (v: unknown): number | typeof ERR =>
  Array.isArray(v) ? v.length : typeof v === 'string' ? [...v].length : isMap(v) ? Object.values(v).filter((x) => x !== undefined && x !== null).length : ERR;

// the same flags crds/validate.ts gives CEL's re2 hook
const re = (pattern: string) => {
  const r = new RegExp(pattern, 'u');
  return (v: unknown): Val => (typeof v === 'string' ? r.test(v) : ERR);
};
const componentType = re('^[a-z]+[.][A-Za-z0-9._-]+$');
const httpUrl = re('^https?://.+');
const subscriptionName = re('^[A-Za-z0-9]{3,64}$');

/** A rule on a map-typed field: `self` that is not a map makes every member access an error. */
const onMap =
  (f: (self: Obj) => Val) =>
  (self: unknown): Val =>
    isMap(self) ? f(self) : ERR;

const RULES: Record<string, (self: unknown) => Val> = {
  "self.matches('^[a-z]+[.][A-Za-z0-9._-]+$')": componentType,
  "self.matches('^https?://.+')": httpUrl,
  '(has(self.value) ? 1 : 0) + (has(self.secretKeyRef) ? 1 : 0) + (has(self.envRef) ? 1 : 0) == 1': onMap(
    (s) => Number(has(s, 'value')) + Number(has(s, 'secretKeyRef')) + Number(has(s, 'envRef')) === 1,
  ),
  '(has(self.value) ? 1 : 0) + (has(self.secretKeyRef) ? 1 : 0) == 1': onMap((s) => Number(has(s, 'value')) + Number(has(s, 'secretKeyRef')) === 1),
  "self.name != 'handshakePort' || !has(self.value) || type(self.value) == string": onMap((s) =>
    or(
      () => notEqual(s, 'name', 'handshakePort'),
      () => !has(s, 'value'),
      () => typeof s.value === 'string',
    ),
  ),
  "self.name != 'eventSubscriptionName' || !has(self.value) || (type(self.value) == string && self.value.matches('^[A-Za-z0-9]{3,64}$'))": onMap((s) =>
    or(
      () => notEqual(s, 'name', 'eventSubscriptionName'),
      () => !has(s, 'value'),
      () =>
        and(
          () => typeof s.value === 'string',
          () => subscriptionName(s.value),
        ),
    ),
  ),
  '(has(self.rules) && size(self.rules) > 0) || has(self.default)': onMap((s) =>
    or(
      () =>
        and(
          () => has(s, 'rules'),
          () => {
            const n = size(s.rules);
            return n === ERR ? ERR : n > 0;
          },
        ),
      () => has(s, 'default'),
    ),
  ),
};

/** The rule's function, if it has one: true when the rule holds (an error counts as failed). */
export function compiledRule(rule: string): ((self: unknown) => boolean) | undefined {
  const f = RULES[rule];
  return f && ((self) => f(self) === true);
}

/** The rule texts that have a function (for the test that every CRD rule is covered). */
export const COMPILED_RULES: readonly string[] = Object.keys(RULES);
