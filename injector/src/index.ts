/**
 * The injector's front door: its typed annotation table, which the operator reads too (a pod asks
 * for a sidecar and names its app id there). Other packages import the injector from here only
 * (test/build/front-doors.test.ts). Re-exports only.
 */
export { ANNOTATIONS, injectionRequested, parseAnnotations } from './annotations.ts';
