/**
 * The building blocks a sidecar runs, in order. Each is a folder under sidecar/src with a
 * `setup(ctx)`; add a new one here.
 */
import type { SidecarContext } from './context.ts';
import { setup as bindings } from './bindings/routes.ts';
import { setup as inputBindings } from './bindings/input.ts';
import { setup as invoke } from './invoke/setup.ts';
import { setup as jobs } from './jobs/setup.ts';
import { setup as metadata } from './metadata/routes.ts';
import { setup as metrics } from './metrics/setup.ts';
import { setup as pluggable } from './pluggable/setup.ts';
import { setup as pubsub } from './pubsub/setup.ts';
import { setup as secrets } from './secrets/routes.ts';
import { setup as state } from './state/routes.ts';
import { setup as workflows } from './workflows/setup.ts';
import { setup as runtimeApi } from './grpc/runtime/setup.ts';

export type BlockSetup = (ctx: SidecarContext) => Promise<void>;

/** Run before components are created: they may add component types to the catalog. */
export const preComponentHooks: BlockSetup[] = [pluggable];

export const buildingBlocks: BlockSetup[] = [metrics, metadata, state, secrets, jobs, workflows, bindings, inputBindings, invoke, pubsub, runtimeApi];
