/**
 * Who is calling: the sidecar sends its projected service-account token (audience rt.io/operator).
 * The operator asks the API server (TokenReview) whether the token is genuine, current and meant
 * for it, reads the pod the token is bound to, and takes the namespace from the token and the app
 * id from that pod's `rt.io/app-id` annotation — so a sidecar cannot claim another app or namespace.
 */
import type * as k8s from '@kubernetes/client-node';
import type { KubeClient } from '../../shared/kube/client.ts';

export const OPERATOR_AUDIENCE = 'rt.io/operator';
export const APP_ID_ANNOTATION = 'rt.io/app-id';

export interface Caller {
  namespace: string;
  appId: string;
  podName: string;
  serviceAccount: string;
}

/** The caller is not who it must be; the message says why, never echoing the token. */
export class IdentityError extends Error {}

export class IdentityChecker {
  private readonly client: KubeClient;

  constructor(client: KubeClient) {
    this.client = client;
  }

  async identify(token: string): Promise<Caller> {
    if (!token) throw new IdentityError('no service-account token (metadata "authorization: Bearer <token>")');
    const review = await this.client.create<k8s.V1TokenReview>('/apis/authentication.k8s.io/v1/tokenreviews', {
      apiVersion: 'authentication.k8s.io/v1',
      kind: 'TokenReview',
      spec: { token, audiences: [OPERATOR_AUDIENCE] },
    });
    const status = review.status;
    if (!status?.authenticated) throw new IdentityError(`token refused by the API server${status?.error ? `: ${status.error}` : ''}`);
    if (!(status.audiences ?? []).includes(OPERATOR_AUDIENCE)) throw new IdentityError(`token is not meant for audience ${OPERATOR_AUDIENCE}`);
    const m = /^system:serviceaccount:([^:]+):([^:]+)$/.exec(status.user?.username ?? '');
    if (!m) throw new IdentityError(`token is not a service-account token (user ${status.user?.username ?? 'unknown'})`);
    const [, namespace, serviceAccount] = m;
    const extra = status.user?.extra ?? {};
    const podName = extra['authentication.kubernetes.io/pod-name']?.[0];
    const podUid = extra['authentication.kubernetes.io/pod-uid']?.[0];
    if (!podName) throw new IdentityError('token is not bound to a pod (use a projected service-account token)');
    let pod: k8s.V1Pod;
    try {
      pod = await this.client.get<k8s.V1Pod>(`/api/v1/namespaces/${encodeURIComponent(namespace)}/pods/${encodeURIComponent(podName)}`);
    } catch {
      throw new IdentityError(`pod ${namespace}/${podName} of the token cannot be read`);
    }
    if (podUid && pod.metadata?.uid !== podUid) throw new IdentityError(`pod ${namespace}/${podName} of the token no longer exists`);
    const appId = pod.metadata?.annotations?.[APP_ID_ANNOTATION];
    if (!appId) throw new IdentityError(`pod ${namespace}/${podName} has no ${APP_ID_ANNOTATION} annotation`);
    return { namespace, appId, podName, serviceAccount };
  }
}
