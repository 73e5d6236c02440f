/**
 * The placement service's front door: what the sidecar's actor runtime uses to talk to it (the
 * proto and its messages) and to answer lookups from the table it gets (the hashing). Other
 * packages import placement from here only (test/build/front-doors.test.ts). Re-exports only.
 */
export { DEFAULT_REPLICATION_FACTOR, HashRing, PlacementRings, hash32, type RingHost, type TypeHosts } from './hashing.ts';
export { placementService, type PbHost, type PbOrder, type PbTableHost } from './grpc/proto.ts';
/** `rt placement` (cli/commands.ts); its code loads when it runs. */
export { placementCommand } from './command.ts';
