/**
 * The operator's front door: the resource stream a sidecar in kubernetes mode reads
 * (sidecar/src/resources/operator-source.ts), and `rt operator` for the `rt` command. Other
 * packages import the operator from here only (test/build/front-doors.test.ts). Re-exports only.
 */
export { operatorClient, RESOLVED_SECRETS_ANNOTATION, type ResourceSnapshot } from './proto.ts';
/** `rt operator` (cli/commands.ts); its code loads when it runs. */
export { operatorCommand } from './command.ts';
