/**
 * The sidecar's front door for the other packages (test/build/front-doors.test.ts): what the
 * operator uses to check a Component exactly as a sidecar would load it, and to issue workload
 * certificates as the sidecar's identity code expects them; the local registry `rt list` reads.
 * Starting a sidecar is `sidecar.ts`, which the `rt` command imports by path: through here its
 * start would also evaluate the Component check's metadata declarations (the listed exception
 * in the test says what that measured). Re-exports only: everything listed is already in the
 * operator's module graph but the registry (node:fs and shared/rt-home.ts).
 */
// the apps running on this machine (cli/list.ts)
export { listEntries, registryDir, type RegistryEntry } from './invoke/registry/local.ts';
// checking a Component as a sidecar loads it (operator/src/check.ts)
export { builtinCatalog, ComponentCatalog } from './components/catalog.ts';
export { acceptedText, decodeMetadata, fieldOfKey, MetadataError } from './components/metadata/decode.ts';
export { declarationsOf } from './components/metadata/declarations.ts';
export { isPluggableApi } from './pluggable/apis.ts';
export { hasTemplate } from './resources/loader.ts';
// workload certificates (operator/src/issuer.ts, pod-certificates.ts, operator.ts)
export { issueFor, type IssuerSettings } from './identity/issue.ts';
export { caService, type SignCertificateRequest, type SignCertificateResponse } from './identity/proto.ts';
export { checkCsr, CsrError, issueWorkloadCertificate, spkiPublicKey, splitPemBundle } from './identity/x509.ts';
