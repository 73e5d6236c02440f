/**
 * PublishEvent and BulkPublishEvent(Alpha1) over the pub/sub block's PublishService, so the
 * gRPC API wraps, checks and answers as POST /v1.0/publish does (malformed → INVALID_ARGUMENT).
 * The HTTP API's 404s (unknown pub/sub ERR_PUBSUB_NOT_FOUND, empty name or topic) are
 * INVALID_ARGUMENT here, as the reference runtime answers them over gRPC. The W3C trace context
 * comes from the call's traceparent/tracestate metadata.
 */
import * as grpc from '@grpc/grpc-js';
import type { SidecarContext } from '../../context.ts';
import { ApiError } from '../../http/errors.ts';
import type { PublishService } from '../../pubsub/publish.ts';
import { StreamingSubscriptions } from '../../pubsub/streaming.ts';
import { GrpcServer } from '../server.ts';
import { invalidArgument } from './errors.ts';
import { bytesOf, metadataOf } from './handler.ts';

interface PublishEventRequest {
  pubsub_name: string;
  topic: string;
  data: Buffer;
  data_content_type: string;
  metadata: Record<string, string>;
}

interface BulkPublishRequest {
  pubsub_name: string;
  topic: string;
  entries: { entry_id: string; event: Buffer; content_type: string; metadata: Record<string, string> }[];
  metadata: Record<string, string>;
}

type Call = grpc.ServerUnaryCall<unknown, unknown>;

function header(call: Call, name: string): string | undefined {
  const v = call.metadata.get(name)[0];
  return typeof v === 'string' && v !== '' ? v : undefined;
}

/** The block's 404s (unknown pub/sub, empty name or topic) as the reference answers them over gRPC. */
async function asGrpc<T>(p: Promise<T>): Promise<T> {
  try {
    return await p;
  } catch (e) {
    if (e instanceof ApiError && e.status === 404) throw invalidArgument(e.errorCode, e.message);
    throw e;
  }
}

function service(ctx: SidecarContext): PublishService {
  const s = ctx.services.pubsub;
  if (!s) throw new ApiError(501, 'ERR_API_UNIMPLEMENTED', 'the pub/sub building block is not running');
  return s;
}

export function pubsubMethods(ctx: SidecarContext) {
  const bulk = async (req: BulkPublishRequest, call: Call) => {
    const failed = await asGrpc(service(ctx).bulkPublish({
      pubsubname: req.pubsub_name,
      topic: req.topic,
      entries: (req.entries ?? []).map((e) => ({ entryId: e.entry_id, data: bytesOf(e.event), contentType: e.content_type || undefined, metadata: metadataOf(e.metadata) ?? {} })),
      metadata: metadataOf(req.metadata) ?? {},
      traceparent: header(call, 'traceparent'),
    }));
    return { failedEntries: failed.map((f) => ({ entry_id: f.entryId, error: f.error })) };
  };
  return {
    async PublishEvent(req: PublishEventRequest, call: Call): Promise<Record<string, never>> {
      await asGrpc(service(ctx).publish({
        pubsubname: req.pubsub_name,
        topic: req.topic,
        data: bytesOf(req.data),
        contentType: req.data_content_type || undefined,
        metadata: metadataOf(req.metadata) ?? {},
        traceparent: header(call, 'traceparent'),
        tracestate: header(call, 'tracestate'),
      }));
      return {};
    },
    BulkPublishEvent: bulk,
    BulkPublishEventAlpha1: bulk,
  };
}

/** SubscribeTopicEventsAlpha1: STREAMING subscriptions, listed in the metadata while open. */
export function pubsubStreams(ctx: SidecarContext): Record<string, grpc.UntypedHandleCall> {
  const streaming = new StreamingSubscriptions(ctx.components, ctx.log.child({ block: 'pubsub' }));
  ctx.metadata.addSubscriptionProvider(() => streaming.list());
  const handle: grpc.handleBidiStreamingCall<unknown, unknown> = (call) => {
    if (!ctx.grpc.authorized(call.metadata)) {
      call.emit('error', GrpcServer.unauthenticated());
      return;
    }
    streaming.serve(call as Parameters<StreamingSubscriptions['serve']>[0]);
  };
  return { SubscribeTopicEventsAlpha1: handle };
}
