/**
 * The operator's front door: the resource stream a sidecar in kubernetes mode reads
 * (sidecar/src/resources/operator-source.ts). Other packages import the operator from here only
 * (test/build/front-doors.test.ts). Re-exports only.
 */
export { operatorClient, RESOLVED_SECRETS_ANNOTATION, type ResourceSnapshot } from './proto.ts';
