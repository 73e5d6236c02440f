/**
 * Every building block the sidecar runs, one line each: `export { block as <name> } from
 * './<folder>/block.ts'`. The order here does not matter: each block's entry declares what it
 * needs, uses and provides, and the sidecar starts them in an order that honours that
 * (block-graph.ts), refusing to start when a need is missing or blocks need each other.
 */
export { block as actors } from './actors/block.ts';
export { block as bindings } from './bindings/block.ts';
export { block as crypto } from './crypto/block.ts';
export { block as configuration } from './configuration/block.ts';
export { block as invoke } from './invoke/block.ts';
export { block as jobs } from './jobs/block.ts';
export { block as lock } from './lock/block.ts';
export { block as metadata } from './metadata/block.ts';
export { block as metrics } from './metrics/block.ts';
export { block as pluggable } from './pluggable/block.ts';
export { block as pubsub } from './pubsub/block.ts';
export { block as resiliency } from './resiliency/block.ts';
export { block as runtimeApi } from './grpc/runtime/block.ts';
export { block as secrets } from './secrets/block.ts';
export { block as state } from './state/block.ts';
export { block as tracing } from './tracing/block.ts';
export { block as workflows } from './workflows/block.ts';
