/**
 * AdmissionReview v1 in and out. Whatever arrives, the answer is an AdmissionReview: a request
 * that cannot be read is denied with a message saying why (never a 5xx, never a crash).
 */
import type { ComponentLister } from './components.ts';
import { mutatePod, type InjectorSettings } from './mutate.ts';

export const REVIEW_API_VERSION = 'admission.k8s.io/v1';

export interface ReviewResponse {
  apiVersion: string;
  kind: 'AdmissionReview';
  response: {
    uid: string;
    allowed: boolean;
    patchType?: 'JSONPatch';
    patch?: string;
    warnings?: string[];
    status?: { code: number; message: string; reason?: string };
  };
}

export interface ReviewOutcome {
  review: ReviewResponse;
  /** Short label for logs and metrics: skipped, injected, denied, malformed; unavailable: answer 503, not the review. */
  outcome: 'skipped' | 'injected' | 'denied' | 'malformed' | 'unavailable';
}

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/** Answers one AdmissionReview body (raw bytes as received). */
export function review(body: string, settings: InjectorSettings, components: ComponentLister): ReviewOutcome {
  let parsed: unknown;
  try {
    parsed = JSON.parse(body);
  } catch (e) {
    return malformed('', `the body is not JSON (${(e as Error).message})`);
  }
  if (!isObject(parsed)) return malformed('', 'the body is not a JSON object');
  const req = parsed.request;
  const uid = isObject(req) && typeof req.uid === 'string' ? req.uid : '';
  if (parsed.kind !== 'AdmissionReview') return malformed(uid, `kind must be AdmissionReview, got ${JSON.stringify(parsed.kind)}`);
  if (parsed.apiVersion !== REVIEW_API_VERSION) return malformed(uid, `apiVersion must be ${REVIEW_API_VERSION}, got ${JSON.stringify(parsed.apiVersion)}`);
  if (!isObject(req)) return malformed(uid, 'request must be an object');
  if (uid === '') return malformed(uid, 'request.uid must be a non-empty string');

  // only Pod CREATE is ours; anything else the webhook is sent passes unchanged
  const kind = isObject(req.kind) ? req.kind : {};
  if (kind.kind !== 'Pod' || (kind.group ?? '') !== '' || req.operation !== 'CREATE') return answer(uid, true, 'skipped');
  const namespace = typeof req.namespace === 'string' ? req.namespace : isObject(req.object) && isObject(req.object.metadata) ? String(req.object.metadata.namespace ?? '') : '';
  if (!namespace) return malformed(uid, 'request.namespace must name the pod\'s namespace');

  const result = mutatePod(req.object, namespace, settings, components);
  if (!result.allowed) return answer(uid, false, 'unavailable' in result ? 'unavailable' : 'denied', { warnings: result.warnings, message: result.message });
  if (result.patch.length === 0) return answer(uid, true, 'skipped', { warnings: result.warnings });
  return answer(uid, true, 'injected', { warnings: result.warnings, patch: result.patch });
}

function malformed(uid: string, why: string): ReviewOutcome {
  return answer(uid, false, 'malformed', { message: `rt injector: malformed AdmissionReview: ${why}` });
}

function answer(uid: string, allowed: boolean, outcome: ReviewOutcome['outcome'], o: { warnings?: string[]; message?: string; patch?: unknown[] } = {}): ReviewOutcome {
  const response: ReviewResponse['response'] = { uid, allowed };
  if (o.patch) {
    response.patchType = 'JSONPatch';
    response.patch = Buffer.from(JSON.stringify(o.patch)).toString('base64');
  }
  if (o.warnings?.length) response.warnings = o.warnings;
  if (!allowed) response.status = { code: 400, reason: 'BadRequest', message: o.message ?? 'denied' };
  return { review: { apiVersion: REVIEW_API_VERSION, kind: 'AdmissionReview', response }, outcome };
}
