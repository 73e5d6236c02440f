/**
 * The Subscription CRD's conversion webhook (served by the operator, `--conversion-port`): the
 * API server asks it to turn `rt.io` Subscriptions between `v1alpha1` (`spec.route`, what most
 * existing manifests use) and `v2alpha1` (`spec.routes`, the storage version), so a v1alpha1 object
 * is stored with its route and `kubectl get subscriptions.v2alpha1.rt.io` shows it.
 *
 * - v1alpha1 → v2alpha1: `route` becomes `routes.default`.
 * - v2alpha1 → v1alpha1: `routes.default` (else the first rule's path) becomes `route`; the whole
 *   `routes` is kept in the annotation `rt.io/v2alpha1-routes`, so converting back gives the
 *   rules again (the API server expects a round trip to lose nothing). If `route` was changed
 *   meanwhile, the kept rules no longer apply and the new route is the default.
 * Everything else (metadata, pubsubname, topic, deadLetterTopic, bulkSubscribe, scopes, status)
 * is carried as it is.
 */
export const GROUP = 'rt.io';
const V1 = `${GROUP}/v1alpha1`;
const V2 = `${GROUP}/v2alpha1`;
export const ROUTES_ANNOTATION = 'rt.io/v2alpha1-routes';

type Obj = Record<string, unknown> & { apiVersion?: unknown; kind?: unknown; metadata?: Record<string, unknown>; spec?: Record<string, unknown> };
interface Routes {
  rules?: Array<{ match?: string; path?: string }>;
  default?: string;
}

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

export class ConversionError extends Error {}

/** One Subscription in the version asked for (a copy; the input is not changed). */
export function convertSubscription(input: unknown, desired: string): Obj {
  if (!isObject(input)) throw new ConversionError('an object to convert is not a JSON object');
  const obj = structuredClone(input) as Obj;
  if (obj.kind !== 'Subscription') throw new ConversionError(`only Subscriptions are converted, got kind ${JSON.stringify(obj.kind)}`);
  if (obj.apiVersion !== V1 && obj.apiVersion !== V2) throw new ConversionError(`cannot convert from ${JSON.stringify(obj.apiVersion)}`);
  if (desired !== V1 && desired !== V2) throw new ConversionError(`cannot convert to ${JSON.stringify(desired)}: rt.io Subscriptions are ${V1} or ${V2}`);
  if (obj.apiVersion === desired) return obj;
  const spec = isObject(obj.spec) ? obj.spec : (obj.spec = {});
  const metadata = isObject(obj.metadata) ? obj.metadata : (obj.metadata = {});
  const annotations: Record<string, string> = isObject(metadata.annotations) ? (metadata.annotations as Record<string, string>) : {};
  if (desired === V2) {
    const route = typeof spec.route === 'string' ? spec.route : undefined;
    delete spec.route;
    const kept = parseKept(annotations[ROUTES_ANNOTATION]);
    delete annotations[ROUTES_ANNOTATION];
    // the kept rules hold only while the route is still the one they gave
    spec.routes = kept && route !== undefined && routeOf(kept) === route ? kept : route !== undefined ? { default: route } : {};
  } else {
    const routes = isObject(spec.routes) ? (spec.routes as Routes) : {};
    delete spec.routes;
    const route = routeOf(routes);
    if (route !== undefined) spec.route = route;
    // anything but a lone default (rules, even an empty list) would be lost: keep the whole routes
    if (routes.default === undefined || Object.keys(routes).some((k) => k !== 'default')) annotations[ROUTES_ANNOTATION] = JSON.stringify(routes);
  }
  if (Object.keys(annotations).length > 0) metadata.annotations = annotations;
  else delete metadata.annotations;
  obj.apiVersion = desired;
  return obj;
}

function routeOf(r: Routes): string | undefined {
  return r.default ?? r.rules?.find((x) => typeof x.path === 'string')?.path;
}

function parseKept(text: string | undefined): Routes | undefined {
  if (!text) return undefined;
  try {
    const v = JSON.parse(text) as unknown;
    return isObject(v) ? (v as Routes) : undefined;
  } catch {
    return undefined;
  }
}

/** A ConversionReview (apiextensions.k8s.io/v1) in, its answer out; never throws. */
export function reviewConversion(body: unknown): { apiVersion: string; kind: 'ConversionReview'; response: Record<string, unknown> } {
  const request = isObject(body) && isObject(body.request) ? body.request : undefined;
  const uid = typeof request?.uid === 'string' ? request.uid : '';
  const answer = (response: Record<string, unknown>) => ({ apiVersion: 'apiextensions.k8s.io/v1', kind: 'ConversionReview' as const, response: { uid, ...response } });
  const failed = (message: string) => answer({ convertedObjects: [], result: { status: 'Failure', message: `rt operator: ${message}` } });
  if (!isObject(body) || body.kind !== 'ConversionReview' || !request) return failed('not a ConversionReview with a request');
  if (!Array.isArray(request.objects) || typeof request.desiredAPIVersion !== 'string') return failed('request.objects and request.desiredAPIVersion are required');
  try {
    const desired = request.desiredAPIVersion;
    return answer({ convertedObjects: request.objects.map((o) => convertSubscription(o, desired)), result: { status: 'Success' } });
  } catch (e) {
    if (e instanceof ConversionError) return failed(e.message);
    throw e;
  }
}
