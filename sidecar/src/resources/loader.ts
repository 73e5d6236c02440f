/**
 * Reads resource YAML (multi-document) from files and folders, validates each resource and
 * returns typed resources. Every problem names the file, the resource and the field.
 */
import { readdir, readFile, stat } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { extname, join } from 'node:path';
import { RESOURCE_GROUPS, validateResource } from '../../../crds/validate.ts';
import { parseResiliency } from '../resiliency/spec.ts';
import { parseTracing } from '../tracing/config.ts';
import { parseDuration } from '../../../shared/duration.ts';
import {
  type ConfigurationResource,
  type HttpEndpointResource,
  type RawComponent,
  ResourceError,
  type Resources,
  type SubscriptionInfo,
  parseBulkSubscribe,
} from './types.ts';

const DEFAULT_INIT_TIMEOUT_MS = 5000;
const NAME_RE = /^[a-zA-Z0-9]([a-zA-Z0-9._-]{0,251}[a-zA-Z0-9])?$/;

export interface LoadOptions {
  appId: string;
  namespace: string;
  env?: NodeJS.ProcessEnv;
  /**
   * Told of what was skipped as not being a resource (a file of a folder that is not YAML, a
   * document without kind or apiVersion), one sentence naming the file; unset: skipped silently.
   */
  skipped?: (message: string) => void;
}

/** The kinds this loader reads (other kinds of rt's API groups are skipped quietly). */
const KINDS = new Set(['Component', 'Configuration', 'Subscription', 'HTTPEndpoint', 'Resiliency']);
/** The files of a resources folder that are read; others are skipped (a secret store's JSON file, say). */
const RESOURCE_EXTENSIONS = ['.yaml', '.yml'];

// yaml on first use: a sidecar without resource files never parses any (in the build, a module
// of its own loaded at that first call: images/bundle.ts)
const require = createRequire(import.meta.url);
const yaml = () => require('yaml') as typeof import('yaml');

/**
 * Loads the resources of the given paths: a file named on its own, or every .yaml/.yml file of a
 * folder (not recursive; other files are skipped, as the reference runtime does).
 */
export async function loadResources(paths: string[], opts: LoadOptions): Promise<Resources> {
  const out: Resources = { components: [], subscriptions: [], httpEndpoints: [] };
  for (const p of paths) {
    for (const file of await resourceFiles(p, opts)) {
      const text = await readFile(file, 'utf8');
      mergeInto(out, parseResources(text, file, opts));
    }
  }
  const seen = new Set<string>();
  for (const c of out.components) {
    if (seen.has(c.spec.name)) throw new ResourceError(c.spec.source, `Component "${c.spec.name}"`, 'metadata.name', 'a component of this name is defined twice');
    seen.add(c.spec.name);
  }
  return out;
}

/** Loads a single Configuration file (--config). */
export async function loadConfigurationFile(file: string, opts: LoadOptions): Promise<ConfigurationResource> {
  const r = parseResources(await readFile(file, 'utf8'), file, opts);
  if (!r.configuration) throw new ResourceError(file, undefined, 'kind', 'no Configuration resource in this file');
  return r.configuration;
}

/** Whether a file of a resources folder is read: its name ends in .yaml or .yml. */
function isResourceFileName(name: string): boolean {
  return RESOURCE_EXTENSIONS.includes(extname(name).toLowerCase());
}

async function resourceFiles(p: string, opts: LoadOptions): Promise<string[]> {
  let s;
  try {
    s = await stat(p);
  } catch {
    throw new ResourceError(p, undefined, undefined, 'resources path does not exist');
  }
  if (s.isFile()) return [p];
  const files: string[] = [];
  for (const entry of (await readdir(p, { withFileTypes: true })).sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0))) {
    if (entry.isDirectory()) continue;
    if (isResourceFileName(entry.name)) files.push(join(p, entry.name));
    // (hidden files, such as an editor's swap files or a mounted ConfigMap's ..data, without a word)
    else if (!entry.name.startsWith('.')) opts.skipped?.(`${join(p, entry.name)}: not a .yaml or .yml file, skipped (only those are read as resources)`);
  }
  return files;
}

function mergeInto(into: Resources, from: Resources): void {
  into.components.push(...from.components);
  into.subscriptions.push(...from.subscriptions);
  into.httpEndpoints.push(...from.httpEndpoints);
  if (from.configuration) into.configuration = from.configuration;
  if (from.resiliencies?.length) (into.resiliencies ??= []).push(...from.resiliencies);
}

/** Parses the text of one resource file. Resources of kinds the sidecar does not know are skipped. */
export function parseResources(text: string, file: string, opts: LoadOptions): Resources {
  const out: Resources = { components: [], subscriptions: [], httpEndpoints: [] };
  const docs = yaml().parseAllDocuments(text, { prettyErrors: true, uniqueKeys: false });
  if (!Array.isArray(docs)) {
    // an empty stream
    return out;
  }
  docs.forEach((doc, i) => {
    if (doc.errors.length > 0) {
      throw new ResourceError(file, `document ${i + 1}`, undefined, `invalid YAML: ${doc.errors[0].message.split('\n')[0]}`);
    }
    let value: unknown;
    try {
      value = doc.toJS({ maxAliasCount: 100 });
    } catch (e) {
      throw new ResourceError(file, `document ${i + 1}`, undefined, `invalid YAML: ${(e as Error).message}`);
    }
    if (value === null || value === undefined) return;
    if (!isObject(value)) return void opts.skipped?.(`${file}: document ${i + 1} is not a mapping with apiVersion and kind: not a resource, skipped`);
    parseOne(value, file, i + 1, opts, out);
  });
  return out;
}

function parseOne(doc: Record<string, unknown>, file: string, index: number, opts: LoadOptions, out: Resources): void {
  const kind = doc.kind;
  const meta = doc.metadata;
  const name = isObject(meta) && typeof meta.name === 'string' ? meta.name : undefined;
  const label = `${typeof kind === 'string' && kind !== '' ? kind : 'resource'} ${name ? `"${name}"` : `#${index}`}`;
  const fail = (field: string, problem: string): never => {
    throw new ResourceError(file, label, field, problem);
  };
  const apiVersion = doc.apiVersion;
  const group = typeof apiVersion === 'string' ? apiVersion.split('/')[0] : undefined;
  const ours = group !== undefined && (RESOURCE_GROUPS as readonly string[]).includes(group);
  // a document that is no resource (a compose file, a values file) is skipped, as the reference
  // runtime skips whatever lacks its apiVersion and kind; one that says it is ours is checked
  if (typeof kind !== 'string' || kind === '') {
    if (!ours) return void opts.skipped?.(`${file}: document ${index} has no kind: not a resource, skipped`);
    fail('kind', 'is required (Component, Configuration, Subscription, HTTPEndpoint or Resiliency)');
  }
  if (typeof apiVersion !== 'string') {
    if (!KINDS.has(kind as string)) return void opts.skipped?.(`${file}: document ${index} has no apiVersion: not a resource, skipped`);
    fail('apiVersion', 'is required, e.g. rt.io/v1alpha1');
  }
  if (!ours) return; // another API group's resource: not ours
  if (!isObject(meta)) fail('metadata', 'is required and must be a mapping');
  if (name === undefined) fail('metadata.name', 'is required');
  if (!NAME_RE.test(name!)) fail('metadata.name', `"${name}" is not a valid name (letters, digits, '.', '_', '-'; up to 253 characters)`);
  const namespace = isObject(meta) && typeof meta.namespace === 'string' ? meta.namespace : undefined;
  if (namespace && namespace !== opts.namespace) return;
  const scopes = stringList(doc.scopes, () => fail('scopes', 'must be a list of app ids'));
  // a resource scoped to other apps is never loaded
  if (scopes.length > 0 && !scopes.includes(opts.appId)) return;
  let spec = doc.spec;
  // a v1alpha1 Subscription read as v2alpha1 through a CRD without conversion (dapr.io's, whose
  // schema keeps unknown fields) still has its route and no routes: its route is the default
  if (kind === 'Subscription' && String(doc.apiVersion).endsWith('/v2alpha1') && isObject(spec) && spec.routes === undefined && typeof spec.route === 'string') {
    const { route, ...rest } = spec;
    spec = doc.spec = { ...rest, routes: { default: route } };
  }
  // the CRDs' rules (crds/*.yaml), after this parser's own checks so its messages come first
  const crdRules = () => {
    const [first] = validateResource(doc);
    if (first) fail(first.field, first.message);
  };

  switch (kind) {
    case 'Component': {
      if (!isObject(spec)) fail('spec', 'is required and must be a mapping');
      out.components.push(parseComponent(name!, namespace, scopes, doc, spec as Record<string, unknown>, file, fail, opts));
      crdRules();
      return;
    }
    case 'Configuration': {
      const s = isObject(spec) ? spec : {};
      const features = s.features === undefined ? [] : s.features;
      if (!Array.isArray(features)) fail('spec.features', 'must be a list of {name, enabled}');
      parseTracing(s.tracing, fail); // refused here with its field; the tracing block reads it at start
      out.configuration = {
        name: name!,
        spec: s,
        features: (features as unknown[]).map((f, i) => {
          if (!isObject(f) || typeof f.name !== 'string' || f.name === '') fail(`spec.features[${i}].name`, 'is required');
          const ff = f as Record<string, unknown>;
          return { name: ff.name as string, enabled: ff.enabled === true || ff.enabled === 'true' };
        }),
      };
      crdRules();
      return;
    }
    case 'Subscription': {
      if (!isObject(spec)) fail('spec', 'is required and must be a mapping');
      out.subscriptions.push(parseSubscription(String(apiVersion), spec as Record<string, unknown>, fail));
      crdRules();
      return;
    }
    case 'HTTPEndpoint': {
      if (!isObject(spec)) fail('spec', 'is required and must be a mapping');
      out.httpEndpoints.push(parseHttpEndpoint(name!, spec as Record<string, unknown>, fail, isObject(doc.auth) ? doc.auth : undefined));
      crdRules();
      return;
    }
    case 'Resiliency': {
      // scopes were checked above: a resource scoped to other apps never gets here
      (out.resiliencies ??= []).push(parseResiliency(name!, scopes, spec, fail));
      crdRules();
      return;
    }
    default:
      return; // other kinds of our groups: not read by the sidecar
  }
}

type Fail = (field: string, problem: string) => never;

function parseComponent(
  name: string,
  namespace: string | undefined,
  scopes: string[],
  doc: Record<string, unknown>,
  spec: Record<string, unknown>,
  file: string,
  fail: Fail,
  opts: LoadOptions,
): RawComponent {
  if (typeof spec.type !== 'string' || !/^[a-z]+\.[A-Za-z0-9._-]+$/.test(spec.type)) {
    fail('spec.type', 'is required, as <building block>.<name>, e.g. state.redis or bindings.sftp');
  }
  if (typeof spec.version !== 'string' || spec.version === '') fail('spec.version', 'is required, e.g. v1');
  let initTimeoutMs = DEFAULT_INIT_TIMEOUT_MS;
  if (spec.initTimeout !== undefined) {
    const d = typeof spec.initTimeout === 'string' ? parseDuration(spec.initTimeout) : undefined;
    if (d === undefined || d <= 0) fail('spec.initTimeout', `"${String(spec.initTimeout)}" is not a positive duration such as 5s or 1m`);
    initTimeoutMs = d!;
  }
  const ignoreErrors = spec.ignoreErrors === true || spec.ignoreErrors === 'true';
  const metadataList = spec.metadata === undefined || spec.metadata === null ? [] : spec.metadata;
  if (!Array.isArray(metadataList)) fail('spec.metadata', 'must be a list of {name, value}');
  const metadata: Record<string, string> = {};
  const secretRefs: RawComponent['secretRefs'] = [];
  const nonStringKeys: string[] = [];
  (metadataList as unknown[]).forEach((m, i) => {
    const field = `spec.metadata[${i}]`;
    if (!isObject(m)) fail(field, 'must be a mapping with name and value');
    const item = m as Record<string, unknown>;
    if (typeof item.name !== 'string' || item.name === '') fail(`${field}.name`, 'is required');
    const key = item.name as string;
    if (item.secretKeyRef !== undefined) {
      const ref = item.secretKeyRef;
      if (!isObject(ref) || typeof ref.name !== 'string' || ref.name === '') fail(`${field}.secretKeyRef.name`, 'is required');
      const r = ref as Record<string, unknown>;
      secretRefs.push({ field: key, secretName: r.name as string, key: typeof r.key === 'string' && r.key !== '' ? r.key : (r.name as string) });
      return;
    }
    if (item.envRef !== undefined) {
      if (typeof item.envRef !== 'string' || item.envRef === '') fail(`${field}.envRef`, 'must name an environment variable');
      metadata[key] = (opts.env ?? process.env)[item.envRef as string] ?? '';
      return;
    }
    // some fields must be quoted strings (e.g. Event Grid's handshakePort); remember which were not
    if (typeof item.value === 'number' || typeof item.value === 'boolean' || typeof item.value === 'bigint') nonStringKeys.push(key);
    metadata[key] = expandTemplates(scalarToString(item.value, () => fail(`${field}.value`, 'must be a scalar (string, number or boolean)')), opts);
  });
  const auth = isObject(doc.auth) ? doc.auth : undefined;
  const secretStore = auth && typeof auth.secretStore === 'string' ? auth.secretStore : undefined;
  const m = doc.metadata as Record<string, unknown>;
  const annotations: Record<string, string> = {};
  if (isObject(m.annotations)) for (const [k, v] of Object.entries(m.annotations)) annotations[k] = String(v);
  return {
    spec: {
      name,
      namespace,
      type: spec.type as string,
      version: spec.version as string,
      metadata,
      secretKeys: secretRefs.map((r) => r.field),
      nonStringKeys,
      initTimeoutMs,
      ignoreErrors,
      scopes,
      annotations,
      source: file,
    },
    secretRefs,
    secretStore,
  };
}

/**
 * Templates in metadata values, as components of this ecosystem use them:
 * {uuid}, {appID}, {namespace}, {podName}, and {env:NAME} for an environment variable.
 */
const TEMPLATE = /\{(uuid|appID|namespace|podName|env:([A-Za-z_][A-Za-z0-9_]*))\}/g;

/** Whether a metadata value holds a template, so that what it means is known only in the sidecar. */
export function hasTemplate(value: string): boolean {
  return value.includes('{') && new RegExp(TEMPLATE.source).test(value);
}

function expandTemplates(value: string, opts: LoadOptions): string {
  if (!value.includes('{')) return value;
  const env = opts.env ?? process.env;
  return value.replace(TEMPLATE, (_all, what: string, envName?: string) => {
    if (envName) return env[envName] ?? '';
    switch (what) {
      case 'uuid':
        return crypto.randomUUID();
      case 'appID':
        return opts.appId;
      case 'namespace':
        return opts.namespace;
      default:
        return env.POD_NAME ?? env.HOSTNAME ?? opts.appId;
    }
  });
}

function parseSubscription(apiVersion: string, spec: Record<string, unknown>, fail: Fail): SubscriptionInfo {
  if (typeof spec.pubsubname !== 'string' || spec.pubsubname === '') fail('spec.pubsubname', 'is required');
  if (typeof spec.topic !== 'string' || spec.topic === '') fail('spec.topic', 'is required');
  const rules: SubscriptionInfo['rules'] = [];
  if (apiVersion.endsWith('/v2alpha1')) {
    const routes = spec.routes;
    if (!isObject(routes)) fail('spec.routes', 'is required in v2alpha1 (rules and/or default)');
    const r = routes as Record<string, unknown>;
    const ruleList = r.rules === undefined ? [] : r.rules;
    if (!Array.isArray(ruleList)) fail('spec.routes.rules', 'must be a list of {match, path}');
    (ruleList as unknown[]).forEach((rule, i) => {
      if (!isObject(rule) || typeof rule.path !== 'string') fail(`spec.routes.rules[${i}].path`, 'is required');
      const rr = rule as Record<string, unknown>;
      rules.push({ match: typeof rr.match === 'string' ? rr.match : '', path: rr.path as string });
    });
    if (r.default !== undefined) {
      if (typeof r.default !== 'string') fail('spec.routes.default', 'must be a path');
      rules.push({ match: '', path: r.default as string });
    }
    if (rules.length === 0) fail('spec.routes', 'needs at least one rule or a default route');
  } else {
    if (typeof spec.route !== 'string' || spec.route === '') fail('spec.route', 'is required in v1alpha1');
    rules.push({ match: '', path: spec.route as string });
  }
  const metadata: Record<string, string> = {};
  if (isObject(spec.metadata)) for (const [k, v] of Object.entries(spec.metadata)) metadata[k] = String(v);
  return {
    pubsubname: spec.pubsubname as string,
    topic: spec.topic as string,
    metadata,
    rules,
    deadLetterTopic: typeof spec.deadLetterTopic === 'string' ? spec.deadLetterTopic : '',
    type: 'DECLARATIVE',
    ...(spec.bulkSubscribe === undefined ? {} : { bulkSubscribe: parseBulkSubscribe(spec.bulkSubscribe, fail) }),
  };
}

function parseHttpEndpoint(name: string, spec: Record<string, unknown>, fail: Fail, auth?: Record<string, unknown>): HttpEndpointResource {
  const base = spec.baseUrl;
  if (typeof base !== 'string' || !/^https?:\/\/.+/.test(base)) fail('spec.baseUrl', 'is required and must be an http(s) URL');
  try {
    new URL(base as string);
  } catch {
    fail('spec.baseUrl', `"${String(base)}" is not a valid URL`);
  }
  const headers: Record<string, string> = {};
  const secretHeaders: NonNullable<HttpEndpointResource['secretHeaders']> = [];
  if (spec.headers !== undefined) {
    if (!Array.isArray(spec.headers)) fail('spec.headers', 'must be a list of {name, value}');
    (spec.headers as unknown[]).forEach((h, i) => {
      if (!isObject(h) || typeof h.name !== 'string') fail(`spec.headers[${i}].name`, 'is required');
      const hh = h as Record<string, unknown>;
      const ref = secretRef(hh.secretKeyRef, `spec.headers[${i}].secretKeyRef`, fail);
      if (ref) secretHeaders.push({ name: hh.name as string, secretName: ref.name, key: ref.key });
      else headers[hh.name as string] = hh.value === undefined ? '' : String(hh.value);
    });
  }
  let clientTLS: HttpEndpointResource['clientTLS'];
  if (spec.clientTLS !== undefined) {
    if (!isObject(spec.clientTLS)) fail('spec.clientTLS', 'must be a mapping of rootCA, certificate, privateKey');
    clientTLS = {};
    for (const part of ['rootCA', 'certificate', 'privateKey'] as const) {
      const v = (spec.clientTLS as Record<string, unknown>)[part];
      if (v === undefined) continue;
      if (!isObject(v)) fail(`spec.clientTLS.${part}`, 'must be {value} or {secretKeyRef: {name, key}}');
      const ref = secretRef(v.secretKeyRef, `spec.clientTLS.${part}.secretKeyRef`, fail);
      clientTLS[part] = ref ? { secretKeyRef: ref } : { value: String(v.value ?? '') };
    }
  }
  const secretStore = auth && typeof auth.secretStore === 'string' ? auth.secretStore : undefined;
  return { name, baseUrl: base as string, headers, secretHeaders: secretHeaders.length ? secretHeaders : undefined, clientTLS, secretStore };
}

function secretRef(ref: unknown, field: string, fail: Fail): { name: string; key: string } | undefined {
  if (ref === undefined) return undefined;
  if (!isObject(ref) || typeof ref.name !== 'string' || ref.name === '') fail(`${field}.name`, 'is required');
  const r = ref as Record<string, unknown>;
  return { name: r.name as string, key: typeof r.key === 'string' && r.key !== '' ? r.key : (r.name as string) };
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function stringList(v: unknown, onBad: () => never): string[] {
  if (v === undefined || v === null) return [];
  if (!Array.isArray(v) || !v.every((x) => typeof x === 'string')) onBad();
  return v as string[];
}

function scalarToString(v: unknown, onBad: () => never): string {
  if (v === undefined || v === null) return '';
  if (typeof v === 'string') return v;
  if (typeof v === 'number' || typeof v === 'boolean' || typeof v === 'bigint') return String(v);
  if (v instanceof Date) return v.toISOString();
  if (typeof v === 'object') return JSON.stringify(v); // structured values are passed as JSON text
  return onBad();
}
