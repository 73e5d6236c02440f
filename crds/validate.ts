/**
 * The CRD files in this folder are the one source of truth for resource shapes: this module reads
 * them and checks an object against its kind's schema — required fields and the CEL rules
 * (`x-kubernetes-validations`), run as the functions of crds/rules.ts (checked against CEL by
 * test/crds/rules.test.ts) or, for a rule without one, evaluated with @bufbuild/cel — so a
 * resource file, the operator and `kubectl apply` refuse the same objects with the same message.
 */
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import type { CelEnv, plan as Plan } from '@bufbuild/cel';
import { compiledRule } from './rules.ts';

// CEL and yaml load on first use (in the build, each a module of its own: images/bundle.ts)
const require = createRequire(import.meta.url);

export const CRD_FILES = ['components.yaml', 'configurations.yaml', 'subscriptions.yaml', 'httpendpoints.yaml'] as const;
/** API groups whose objects rt reads: its own, and the ecosystem's it is compatible with. */
export const RESOURCE_GROUPS = ['rt.io', 'dapr.io'] as const;

export interface OpenApiSchema {
  type?: string;
  required?: string[];
  properties?: Record<string, OpenApiSchema>;
  items?: OpenApiSchema;
  additionalProperties?: OpenApiSchema | boolean;
  'x-kubernetes-int-or-string'?: boolean;
  'x-kubernetes-preserve-unknown-fields'?: boolean;
  'x-kubernetes-validations'?: { rule: string; message?: string; fieldPath?: string }[];
}

export interface CrdVersion {
  name: string;
  served: boolean;
  storage: boolean;
  schema: { openAPIV3Schema: OpenApiSchema };
}

export interface Crd {
  apiVersion: string;
  kind: 'CustomResourceDefinition';
  metadata: { name: string };
  spec: { group: string; names: { kind: string; plural: string }; versions: CrdVersion[] };
}

/** A refusal: the field path (as the API server writes it, e.g. spec.metadata[0].value) and why. */
export interface FieldError {
  field: string;
  message: string;
}

let crds: Crd[] | undefined;

/**
 * The CRDs of crds/*.yaml, parsed once. The build writes them beside itself as one JSON file
 * (images/dist-assets.ts, CRDS_JSON): parsing the YAML cost a sidecar's start ~40 ms and 4–6 MB.
 */
export function loadCrds(): Crd[] {
  crds ??= readBuilt() ?? readCrdYaml();
  return crds;
}

/** The CRDs parsed from their YAML beside this module (the build writes these as CRDS_JSON). */
export function readCrdYaml(): Crd[] {
  return CRD_FILES.map((f) => (require('yaml') as typeof import('yaml')).parse(readFileSync(new URL(f, import.meta.url), 'utf8')) as Crd);
}

/** The file the build writes beside the CRDs: their YAML as a JSON array, in CRD_FILES order. */
export const CRDS_JSON = 'crds.json';

function readBuilt(): Crd[] | undefined {
  try {
    return JSON.parse(readFileSync(new URL(CRDS_JSON, import.meta.url), 'utf8')) as Crd[];
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return undefined; // the sources: no build
    throw e;
  }
}

/** The CRD of a kind (Component, Configuration, Subscription, HTTPEndpoint), if rt defines it. */
export function crdOf(kind: string): Crd | undefined {
  return loadCrds().find((c) => c.spec.names.kind === kind);
}

/** The schema of kind at a version; an unknown version of a known kind gets the storage version's. */
export function schemaOf(kind: string, version: string): OpenApiSchema | undefined {
  const crd = crdOf(kind);
  if (!crd) return undefined;
  const v = crd.spec.versions.find((x) => x.name === version) ?? crd.spec.versions.find((x) => x.storage);
  return v?.schema.openAPIV3Schema;
}

/**
 * Checks an object (apiVersion/kind/metadata/spec …) against its CRD: required fields and CEL rules.
 * Type mismatches are left to the caller's parser, which names them in its own words.
 */
export function validateResource(obj: Record<string, unknown>): FieldError[] {
  const kind = typeof obj.kind === 'string' ? obj.kind : '';
  const version = typeof obj.apiVersion === 'string' ? (obj.apiVersion.split('/')[1] ?? '') : '';
  const schema = schemaOf(kind, version);
  if (!schema) return [];
  const errors: FieldError[] = [];
  walk(schema, obj, '', errors);
  return errors;
}

function walk(schema: OpenApiSchema, value: unknown, path: string, errors: FieldError[]): void {
  if (value === undefined || value === null) return;
  const isObj = typeof value === 'object' && !Array.isArray(value);
  if (schema.type === 'object' && !isObj) return;
  if (schema.type === 'array' && !Array.isArray(value)) return;
  if (schema.type === 'string' && typeof value !== 'string') return;
  if (isObj && schema.type === 'object') {
    const o = value as Record<string, unknown>;
    for (const r of schema.required ?? []) {
      if (o[r] === undefined || o[r] === null) errors.push({ field: join(path, r), message: 'is required' });
    }
    for (const [k, sub] of Object.entries(schema.properties ?? {})) walk(sub, o[k], join(path, k), errors);
    if (typeof schema.additionalProperties === 'object') {
      for (const [k, v] of Object.entries(o)) if (!schema.properties?.[k]) walk(schema.additionalProperties, v, join(path, k), errors);
    }
  }
  if (Array.isArray(value) && schema.items) value.forEach((v, i) => walk(schema.items!, v, `${path}[${i}]`, errors));
  for (const rule of schema['x-kubernetes-validations'] ?? []) {
    if (!holds(rule.rule, value)) errors.push({ field: path + (rule.fieldPath ?? ''), message: rule.message ?? `failed rule: ${rule.rule}` });
  }
}

function join(path: string, key: string): string {
  return path === '' ? key : `${path}.${key}`;
}

// the rules' regexes (anchored, RE2-compatible) run as JS RegExps, compiled once: @bufbuild/cel's
// default compiles the pattern on every call, which made each check ~1 ms
const regexes = new Map<string, RegExp>();
// CEL (with the protobuf runtime and RE2 it brings) loads with the first rule that has no function
// in crds/rules.ts, not at start (bench/README.md `### startup`), through the synchronous require
// above, since validateResource is synchronous.
let cel: { lib: typeof import('@bufbuild/cel'); env: CelEnv } | undefined;
function celLib() {
  if (cel) return cel;
  const lib = require('@bufbuild/cel') as typeof import('@bufbuild/cel');
  const env = lib.celEnv({
    re2: {
      compile: (pattern: string) => {
        let r = regexes.get(pattern);
        if (!r) regexes.set(pattern, (r = new RegExp(pattern, 'u')));
        return r;
      },
    },
  });
  return (cel = { lib, env });
}
const planned = new Map<string, ReturnType<typeof Plan>>();

/** Whether CEL has been loaded in this process (only a rule without a function in crds/rules.ts loads it). */
export function celLoaded(): boolean {
  return cel !== undefined;
}

/**
 * true when the rule holds on the value (JSON as parsed); a rule that errors (e.g. a type mismatch)
 * counts as failed. The CRDs' rules run as the functions of crds/rules.ts; CEL is loaded only for
 * a rule that has none.
 */
function holds(rule: string, value: unknown): boolean {
  const compiled = compiledRule(rule);
  return compiled ? compiled(value) : evaluateCel(rule, value);
}

/** A rule evaluated by CEL itself (exported for the test that the compiled rules agree with it). */
export function evaluateCel(rule: string, value: unknown): boolean {
  const self = toCel(value);
  const { lib, env } = celLib();
  let run = planned.get(rule);
  if (!run) {
    run = lib.plan(env, lib.parse(rule));
    planned.set(rule, run);
  }
  const out = run({ self } as never);
  return !lib.isCelError(out) && out === true;
}

/** JSON → CEL input: objects become maps and whole numbers ints, as the API server sees them. */
function toCel(v: unknown): unknown {
  if (Array.isArray(v)) return v.map(toCel);
  if (typeof v === 'number') return Number.isInteger(v) ? BigInt(v) : v;
  if (v !== null && typeof v === 'object') return new Map(Object.entries(v).filter(([, x]) => x !== undefined && x !== null).map(([k, x]) => [k, toCel(x)]));
  return v;
}

/** The first error in the API server's words: `<field>: Invalid value: <message>`. */
export function describeErrors(errors: FieldError[]): string {
  return errors.map((e) => `${e.field}: ${e.message}`).join('; ');
}
