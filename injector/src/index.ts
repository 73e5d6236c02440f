/**
 * The injector's front door: its typed annotation table, which the operator reads too (a pod asks
 * for a sidecar and names its app id there), and `rt injector` for the `rt` command. Other
 * packages import the injector from here only (test/build/front-doors.test.ts). Re-exports only.
 */
export { ANNOTATIONS, injectionRequested, parseAnnotations } from './annotations.ts';
/** `rt injector` (cli/commands.ts); its code loads when it runs. */
export { injectorCommand } from './command.ts';
