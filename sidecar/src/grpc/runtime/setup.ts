/**
 * The runtime API building block: serves dapr.proto.runtime.v1.Dapr on the sidecar's gRPC
 * port (50001), the API the ecosystem's SDKs use over gRPC. It adds no logic of its own: each
 * method calls the building block's service (ctx.services, ctx.components, ctx.metadata), so
 * the HTTP and gRPC APIs check and answer alike. It starts after the blocks whose services it
 * needs or uses (grpc/runtime/block.ts).
 */
import * as grpc from '@grpc/grpc-js';
import type { SidecarContext } from '../../context.ts';
import type { BindingsService } from '../../bindings/service.ts';
import type { ConfigurationService } from '../../configuration/service.ts';
import type { LockService } from '../../lock/service.ts';
import type { SecretsService } from '../../secrets/service.ts';
import type { StateService } from '../../state/service.ts';
import { actorMethods } from './actors.ts';
import { bindingMethods, secretMethods } from './bindings.ts';
import { configurationMethods, configurationStreams } from './configuration.ts';
import { cryptoStreams } from './crypto.ts';
import { tolerantDecode, unary, type Unary } from './handler.ts';
import { jobMethods } from './jobs.ts';
import { lockMethods } from './lock.ts';
import { metadataMethods } from './metadata.ts';
import { pubsubMethods, pubsubStreams } from './pubsub.ts';
import { runtimeService } from './proto.ts';
import { stateMethods } from './state.ts';
import { unsupportedService } from './unsupported.ts';
import { workflowMethods } from './workflows.ts';

export async function setup(ctx: SidecarContext, needs: { state: StateService; bindings: BindingsService; secrets: SecretsService; configuration: ConfigurationService; lock: LockService }): Promise<void> {
  const methods: Record<string, Unary<never, unknown>> = {
    ...stateMethods(needs.state),
    ...bindingMethods(needs.bindings),
    ...secretMethods(needs.secrets),
    ...metadataMethods(ctx),
    ...jobMethods(ctx),
    ...workflowMethods(ctx),
    ...pubsubMethods(ctx),
    ...configurationMethods(needs.configuration),
    ...lockMethods(needs.lock),
    ...actorMethods(ctx),
  };
  const streams: Record<string, grpc.UntypedHandleCall> = { ...pubsubStreams(ctx), ...configurationStreams(ctx.grpc, needs.configuration), ...cryptoStreams(ctx) };
  // the proto loads with the port's first connection (grpc/server.ts)
  ctx.grpc.addService(() => {
    const definition = runtimeService();
    const implementation: grpc.UntypedServiceImplementation = {};
    const tolerant: Record<string, grpc.MethodDefinition<unknown, unknown>> = {};
    for (const name of Object.keys(definition)) {
      tolerant[name] = tolerantDecode(definition[name], name);
      if (streams[name]) {
        implementation[name] = streams[name];
        continue;
      }
      const fn = methods[name];
      if (!fn) throw new Error(`runtime API: no handler for ${name}`);
      implementation[name] = unary(ctx.grpc, fn as Unary<unknown, unknown>);
    }
    const extra = unsupportedService(ctx.grpc);
    return { definition: { ...tolerant, ...extra.definition }, implementation: { ...implementation, ...extra.handlers } };
  });
}

