/**
 * Workload identities as SPIFFE IDs: `spiffe://<trust domain>/ns/<namespace>/<app id>`, the one
 * URI SAN of every workload certificate rt issues (the reference runtime's shape, so its tools
 * read ours). Parsing is strict: a certificate whose URI does not have exactly this shape names
 * no workload.
 */

export interface WorkloadId {
  trustDomain: string;
  namespace: string;
  appId: string;
}

// SPIFFE trust domains: lowercase letters, digits, dots, dashes and underscores
const TRUST_DOMAIN = /^[a-z0-9._-]{1,255}$/;
// a Kubernetes namespace (DNS label)
const NAMESPACE = /^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/;
// app ids are path segments: no slash, no percent-encoding, no dot segments
const APP_ID = /^[A-Za-z0-9._~-]{1,253}$/;

/** Why an identity is not well formed, or undefined when it is. */
export function workloadIdProblem(id: WorkloadId): string | undefined {
  if (!TRUST_DOMAIN.test(id.trustDomain)) return `trust domain ${JSON.stringify(id.trustDomain)} is not a SPIFFE trust domain (lowercase letters, digits, . - _)`;
  if (!NAMESPACE.test(id.namespace)) return `namespace ${JSON.stringify(id.namespace)} is not a Kubernetes namespace name`;
  if (!APP_ID.test(id.appId) || id.appId === '.' || id.appId === '..') return `app id ${JSON.stringify(id.appId)} cannot be a SPIFFE path segment`;
  return undefined;
}

export function spiffeUri(id: WorkloadId): string {
  const problem = workloadIdProblem(id);
  if (problem) throw new Error(problem);
  return `spiffe://${id.trustDomain}/ns/${id.namespace}/${id.appId}`;
}

export function parseSpiffeUri(uri: string): WorkloadId | undefined {
  const m = /^spiffe:\/\/([^/]+)\/ns\/([^/]+)\/([^/]+)$/.exec(uri);
  if (!m) return undefined;
  const id = { trustDomain: m[1], namespace: m[2], appId: m[3] };
  return workloadIdProblem(id) ? undefined : id;
}

export function sameWorkload(a: WorkloadId, b: WorkloadId): boolean {
  return a.trustDomain === b.trustDomain && a.namespace === b.namespace && a.appId === b.appId;
}

/**
 * The URIs of a certificate's subjectAltName as node:tls and node:crypto print it
 * (`URI:spiffe://…, DNS:…`; a value with a comma or quote is printed JSON-quoted).
 */
export function sanUris(subjectAltName: string | undefined): string[] {
  if (!subjectAltName) return [];
  const uris: string[] = [];
  const re = /(?:^|,\s*)URI:("(?:[^"\\]|\\.)*"|[^,]*)/g;
  for (let m = re.exec(subjectAltName); m; m = re.exec(subjectAltName)) {
    const raw = m[1];
    uris.push(raw.startsWith('"') ? (JSON.parse(raw) as string) : raw);
  }
  return uris;
}

/** The workload a peer certificate names: its one SPIFFE URI SAN, or undefined (none, or several). */
export function certificateWorkload(cert: { subjectaltname?: string; subjectAltName?: string } | undefined): WorkloadId | undefined {
  const spiffe = sanUris(cert?.subjectaltname ?? cert?.subjectAltName).filter((u) => u.startsWith('spiffe://'));
  return spiffe.length === 1 ? parseSpiffeUri(spiffe[0]) : undefined;
}
