/**
 * The injection: read the annotations once, edit a deep copy of the pod once, and compute the
 * JSONPatch once by comparing the two (so no two patch pieces can overwrite each other).
 */
import fastJsonPatch, { type Operation } from 'fast-json-patch';
import { injectionRequested, parseAnnotations, PREFIX } from './annotations.ts';
import type { ComponentLister } from './components.ts';
import { injectedComponents, prepareComponentContainer, type ComponentContainer } from './pluggable.ts';
import { addEnv, alreadyInjected, defaultAppId, podShapeError, type Container, type Pod } from './pod.ts';
import { appEnv, CA_ANNOTATION, IDENTITY_ENV, POD_CERTIFICATE_FILE, POD_CERTIFICATE_PATH, WORKLOAD_SIGNER, sidecarContainer, SOCKETS_VOLUME, TOKEN_AUDIENCE, TOKEN_VOLUME, TRUST_ANCHORS_ANNOTATION } from './sidecar-container.ts';

export interface InjectorSettings {
  sidecarImage: string;
  controlPlaneAddress: string;
  /** The scheduler's address(es) given to every sidecar (`--scheduler-host-address`). */
  schedulerAddress?: string;
  /** The placement service's address(es) given to every sidecar (`--placement-host-address`). */
  placementAddress?: string;
  /** Default of `rt.io/native-sidecar` (clusters 1.29+). */
  nativeSidecar: boolean;
  /**
   * The operator's CA (PEM) for the sidecar, when the control plane uses its own CA. It goes
   * into the pod's `rt.io/operator-ca` annotation and from there, by the downward API, into a
   * file beside the token (a Secret or ConfigMap would have to exist in every namespace).
   */
  operatorCaPem?: string;
  /**
   * Workload identity, when the platform turned it on (the chart's identity.enabled): every
   * sidecar gets mutual TLS, the issuer's address and the trust anchors (PEM roots), the latter
   * as the operator's CA is given (pod annotation `rt.io/trust-anchors` → downward API).
   */
  identity?: {
    trustDomain: string;
    issuerAddress: string;
    trustAnchorsPem: string;
    /**
     * The cluster serves PodCertificateRequests (decided at the injector's start): the kubelet
     * gets each sidecar its certificate through a projected podCertificate volume (signer
     * rt.io/workload), unless the pod says `rt.io/pod-certificate: "false"`.
     */
    podCertificates?: boolean;
    /** maxExpirationSeconds of the projected podCertificate (≥ 3600; the API server's floor). */
    podCertificateSeconds?: number;
  };
}

export type MutateResult =
  | { allowed: true; patch: Operation[]; warnings: string[] }
  | { allowed: false; message: string; warnings: string[] }
  /** The injector cannot answer yet: the webhook call fails, so the API server applies its failurePolicy. */
  | { allowed: false; unavailable: true; message: string; warnings: string[] };

const TOKEN_SECONDS = 3600;
/** A Kubernetes label value. */
const LABEL_VALUE = /^[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$/;

export function mutatePod(value: unknown, namespace: string, settings: InjectorSettings, components: ComponentLister): MutateResult {
  const shape = podShapeError(value);
  if (shape) return deny(`rt injector: malformed pod: ${shape}`);
  const pod = value as Pod;
  const annotations = pod.metadata?.annotations ?? {};
  if (!injectionRequested(annotations) || alreadyInjected(pod)) return { allowed: true, patch: [], warnings: [] };

  const { config, errors, warnings } = parseAnnotations(annotations);
  if (errors.length) return deny(`rt injector: ${errors.join('; ')}`, warnings);
  const appId = config.appId ?? defaultAppId(pod);
  if (!appId) return deny(`rt injector: the pod has no name or generateName; set ${PREFIX}app-id`, warnings);
  const native = config.nativeSidecar ?? settings.nativeSidecar;
  const identity = settings.identity;
  if (identity && config.mtls === false) warnings.push(`${PREFIX}mtls: "false" is ignored: mutual TLS is on for every sidecar of this cluster (the platform's setting)`);
  if (!identity && config.mtls === true) warnings.push(`${PREFIX}mtls: "true" has no effect: this cluster's injector runs without --mtls (the chart's identity.enabled)`);
  const lockedEnv = identity ? config.env.filter((e) => IDENTITY_ENV.includes(e.name)).map((e) => e.name) : [];
  if (lockedEnv.length) warnings.push(`${PREFIX}env: ${lockedEnv.join(', ')} ignored: the identity settings come from the platform`);

  const podCertificate = !!identity?.podCertificates && config.podCertificate !== false;
  if (config.podCertificate === true && identity && !identity.podCertificates) warnings.push(`${PREFIX}pod-certificate: "true" has no effect: this cluster does not serve PodCertificateRequests, so the sidecar asks the issuer`);

  const out = structuredClone(pod);
  const spec = out.spec;

  // pluggable component containers: injected from Components, and named existing ones
  const fromComponents: ComponentContainer[] = [];
  if (config.injectPluggableComponents) {
    // an unsynced injector is a down one: the same failurePolicy decides (Ignore: admitted as it
    // is, and the watchdog reports it; Fail: refused), never an answer of its own
    if (!components.synced) return { allowed: false, unavailable: true, message: 'rt injector: the Components are not listed yet (the injector just started)', warnings };
    const found = injectedComponents(components.list(namespace), appId);
    warnings.push(...found.warnings);
    if (found.errors.length) return deny(`rt injector: ${found.errors.join('; ')}`, warnings);
    for (const cc of found.containers) {
      if ([...spec.containers, ...(spec.initContainers ?? [])].some((c) => c.name === cc.container.name)) {
        warnings.push(`container "${cc.container.name}" of a Component is already in the pod; kept as it is`);
        continue;
      }
      fromComponents.push(cc);
    }
  }
  const manual: ComponentContainer[] = [];
  for (const name of config.pluggableComponents) {
    const container = spec.containers.find((c) => c.name === name) ?? spec.initContainers?.find((c) => c.name === name);
    if (!container) return deny(`rt injector: ${PREFIX}pluggable-components names container "${name}", which the pod does not have`, warnings);
    // its socket is expected under the container's name
    manual.push({ container, sockets: [name] });
  }
  const pluggable = [...manual, ...fromComponents];
  const folder = config.socketsFolder;

  for (const v of [TOKEN_VOLUME, ...(pluggable.length ? [SOCKETS_VOLUME] : [])]) {
    if (spec.volumes?.some((x) => x.name === v)) return deny(`rt injector: the pod already has a volume named "${v}", which the injector adds`, warnings);
  }

  const sidecar = sidecarContainer({
    config,
    appId,
    image: config.sidecarImage ?? settings.sidecarImage,
    controlPlaneAddress: settings.controlPlaneAddress,
    schedulerAddress: settings.schedulerAddress,
    placementAddress: settings.placementAddress,
    operatorCa: settings.operatorCaPem !== undefined,
    identity: identity && { trustDomain: identity.trustDomain, issuerAddress: identity.issuerAddress, podCertificate: podCertificate ? POD_CERTIFICATE_FILE : undefined },
    native,
    sockets: pluggable.length ? { folder, names: [...new Set(pluggable.flatMap((p) => p.sockets))] } : undefined,
  });

  const prepared = pluggable.map((cc) => prepareComponentContainer(cc, folder, native));
  const manualNames = new Set(manual.map((m) => m.container.name));
  const isComponent = (c: Container) => manualNames.has(c.name);
  const apps = spec.containers.filter((c) => !isComponent(c));
  for (const c of apps) addEnv(c, appEnv(config));

  if (native) {
    // components, then the runtime, start before everything else (each waits for the previous one's startup probe)
    const userInit = (spec.initContainers ?? []).filter((c) => !isComponent(c));
    spec.initContainers = [...prepared, sidecar, ...userInit];
    spec.containers = apps;
  } else {
    const injected = prepared.filter((c) => !manualNames.has(c.name));
    spec.containers = [...spec.containers, ...injected, sidecar];
  }

  const volumes = [...(spec.volumes ?? [])];
  volumes.push({
    name: TOKEN_VOLUME,
    projected: {
      sources: [
        { serviceAccountToken: { audience: TOKEN_AUDIENCE, expirationSeconds: TOKEN_SECONDS, path: 'token' } },
        ...(settings.operatorCaPem ? [{ downwardAPI: { items: [{ path: 'ca.crt', fieldRef: { fieldPath: `metadata.annotations['${CA_ANNOTATION}']` } }] } }] : []),
        ...(identity ? [{ downwardAPI: { items: [{ path: 'trust-anchors.pem', fieldRef: { fieldPath: `metadata.annotations['${TRUST_ANCHORS_ANNOTATION}']` } }] } }] : []),
        // the kubelet makes the key, gets it signed by rt.io/workload and rotates it; the pod does not start without it
        ...(podCertificate
          ? [{ podCertificate: { signerName: WORKLOAD_SIGNER, keyType: 'ECDSAP256', maxExpirationSeconds: identity!.podCertificateSeconds ?? 86_400, credentialBundlePath: POD_CERTIFICATE_PATH } }]
          : []),
      ],
    },
  });
  if (pluggable.length) volumes.push({ name: SOCKETS_VOLUME, emptyDir: {} });
  spec.volumes = volumes;

  // the operator reads the app id from this annotation of the pod the sidecar's token is bound to
  const added: Record<string, string> = { [`${PREFIX}app-id`]: appId };
  if (settings.operatorCaPem) added[CA_ANNOTATION] = settings.operatorCaPem;
  if (identity) added[TRUST_ANCHORS_ANNOTATION] = identity.trustAnchorsPem;
  out.metadata = { ...(out.metadata ?? {}), annotations: { ...annotations, ...added } };
  // the label the operator's headless Service <app-id>-rt selects pods by (docs/kubernetes.md);
  // an app id that is no label value gets none, and a warning
  if (LABEL_VALUE.test(appId)) out.metadata.labels = { ...out.metadata.labels, [`${PREFIX}app-id`]: appId };
  else warnings.push(`app id "${appId}" cannot be a label value (at most 63 letters, digits, '-', '_' or '.', starting and ending with a letter or digit): the pod gets no ${PREFIX}app-id label, so no headless Service, and other apps cannot call it by DNS`);

  return { allowed: true, patch: fastJsonPatch.compare(pod, out), warnings };

  function deny(message: string, w: string[] = []): MutateResult {
    return { allowed: false, message, warnings: w };
  }
}
