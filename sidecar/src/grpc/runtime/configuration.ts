/**
 * Configuration methods of the runtime API on the configuration block's service (shared with
 * the HTTP API). SubscribeConfiguration(Alpha1) is a server stream, as the reference serves it:
 * the first message carries the subscription's id and no items, each later one a change
 * (`{id, items}`); the subscription ends with the call (the client cancels it) or with an
 * UnsubscribeConfiguration of its id, which completes the stream. An unknown id is answered
 * `{ok: false, message}`, not an error, as the reference answers it (the SDKs unsubscribe
 * after cancelling, and read `ok`).
 */
import * as grpc from '@grpc/grpc-js';
import { ERRORS } from '../../api/errors.ts';
import type { ConfigurationItems } from '../../components/configuration/types.ts';
import type { ConfigurationService } from '../../configuration/service.ts';
import { ApiError } from '../../http/errors.ts';
import { GrpcServer } from '../server.ts';
import { toStatus } from './errors.ts';
import { MalformedMessage, metadataOf, type Unary } from './handler.ts';

// ---------------------------------------------------------------- wire shapes (keepCase)

export interface ConfigurationItemMsg {
  value: string;
  version: string;
  metadata: Record<string, string>;
}
export interface ConfigurationRequestMsg {
  store_name: string;
  keys: string[];
  metadata: Record<string, string>;
}
export interface UnsubscribeConfigurationRequest {
  store_name: string;
  id: string;
}
export interface SubscribeConfigurationResponse {
  id: string;
  items: Record<string, ConfigurationItemMsg>;
}

function itemsMsg(items: ConfigurationItems): Record<string, ConfigurationItemMsg> {
  const out: Record<string, ConfigurationItemMsg> = {};
  for (const [k, v] of Object.entries(items)) Object.defineProperty(out, k, { value: { value: v.value, version: v.version, metadata: { ...v.metadata } }, enumerable: true, writable: true, configurable: true });
  return out;
}

function request(req: ConfigurationRequestMsg) {
  return { store: req.store_name, keys: req.keys ?? [], metadata: metadataOf(req.metadata) ?? {} };
}

export function configurationMethods(svc: ConfigurationService): Record<string, Unary<never, unknown>> {
  const get = async (req: ConfigurationRequestMsg) => ({ items: itemsMsg(await svc.get(request(req))) });
  const unsubscribe = async (req: UnsubscribeConfigurationRequest) => {
    try {
      await svc.unsubscribe(req.id);
      return { ok: true, message: '' };
    } catch (e) {
      if (e instanceof ApiError && e.errorCode === ERRORS.CONFIGURATION_SUBSCRIPTION_NOT_FOUND.code) return { ok: false, message: e.message };
      throw e;
    }
  };
  return { GetConfiguration: get, GetConfigurationAlpha1: get, UnsubscribeConfiguration: unsubscribe, UnsubscribeConfigurationAlpha1: unsubscribe };
}

type SubscribeCall = grpc.ServerWritableStream<ConfigurationRequestMsg | MalformedMessage, SubscribeConfigurationResponse>;

export function configurationStreams(server: GrpcServer, svc: ConfigurationService): Record<string, grpc.UntypedHandleCall> {
  const subscribe = (call: SubscribeCall) => {
    if (!server.authorized(call.metadata)) {
      call.emit('error', GrpcServer.unauthenticated());
      return;
    }
    const req = call.request;
    if (req instanceof MalformedMessage) {
      call.emit('error', { code: grpc.status.INVALID_ARGUMENT, details: req.message });
      return;
    }
    let ended = false;
    let id: string | undefined;
    // changes wait for the id's message: it is the stream's first
    let ready!: () => void;
    const idSent = new Promise<void>((r) => (ready = r));
    const drains = new Set<() => void>();
    const stopWaiting = () => {
      ready();
      for (const d of drains) d();
      drains.clear();
    };
    const write = (msg: SubscribeConfigurationResponse) =>
      new Promise<void>((resolve) => {
        if (ended) return resolve();
        if (call.write(msg)) return resolve();
        // the client reads slowly: this key's next change waits (order per key)
        const done = () => {
          drains.delete(done);
          call.off('drain', done);
          resolve();
        };
        drains.add(done);
        call.once('drain', done);
      });
    call.on('cancelled', () => {
      ended = true;
      stopWaiting();
      if (id) void svc.end(id);
    });
    const sink = async (sid: string, items: ConfigurationItems) => {
      await idSent;
      await write({ id: sid, items: itemsMsg(items) });
    };
    // unsubscribed by id (or the sidecar stops): the stream completes
    const finished = () => {
      if (ended) return;
      ended = true;
      stopWaiting();
      call.end();
    };
    svc.subscribe(request(req), sink, finished).then(
      (sid) => {
        id = sid;
        if (ended) {
          void svc.end(sid);
          return;
        }
        call.write({ id: sid, items: {} });
        ready();
      },
      (e: unknown) => {
        ended = true;
        stopWaiting();
        call.emit('error', toStatus(e));
      },
    );
  };
  return { SubscribeConfiguration: subscribe as grpc.UntypedHandleCall, SubscribeConfigurationAlpha1: subscribe as grpc.UntypedHandleCall };
}
