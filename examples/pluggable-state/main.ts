/**
 * An example pluggable state store for rt: its own process, serving the gRPC services
 * dapr.proto.components.v1.StateStore, TransactionalStateStore, QueriableStateStore,
 * OutputBinding and PubSub on a Unix socket, with gRPC reflection so that rt can discover what
 * it serves.
 *
 *   node examples/pluggable-state/main.ts [--name memstore] [--folder /tmp/rt-components-sockets]
 *
 * rt then offers the component types `state.memstore`, `bindings.memstore` and `pubsub.memstore`. Copy this folder
 * (and the .proto files, see README.md) to write your own; replace store.ts with your database.
 */
import { mkdirSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import { ReflectionService } from '@grpc/reflection';
import { Broker, type BrokerMessage } from './broker.ts';
import { runQuery, type QueryRequest } from './query.ts';
import { BadRequestError, EtagError, MemoryStore, type WriteOp } from './store.ts';

const { values: args } = parseArgs({
  options: {
    name: { type: 'string', default: process.env.COMPONENT_NAME ?? 'memstore' },
    folder: { type: 'string', default: process.env.RT_COMPONENTS_SOCKETS_FOLDER ?? '/tmp/rt-components-sockets' },
    protos: { type: 'string', default: process.env.RT_PROTO_DIR ?? join(import.meta.dirname, '../../sidecar/src/pluggable/proto') },
  },
});

// ---------------------------------------------------------------- protos
const PKG = 'dapr.proto.components.v1';
const definition = protoLoader.loadSync(
  ['common', 'state', 'bindings', 'pubsub'].map((f) => `dapr/proto/components/v1/${f}.proto`),
  // camelCase fields, enums by name, unset messages as null (so "no etag" differs from "")
  { keepCase: false, longs: String, enums: String, defaults: true, oneofs: true, includeDirs: [args.protos!] },
);
const service = (name: string) => definition[`${PKG}.${name}`] as grpc.ServiceDefinition;

// ---------------------------------------------------------------- data
// rt sends `x-component-instance: <component name>` on every call: one socket can serve several
// Component specs (e.g. two state stores, or a state store and a binding), each with its own data.
const instances = new Map<string, { store: MemoryStore; broker: Broker; metadata: Record<string, string> }>();

function instanceOf(call: { metadata: grpc.Metadata }) {
  const name = String(call.metadata.get('x-component-instance')[0] ?? '');
  let inst = instances.get(name);
  if (!inst) {
    // also after a restart of this process, before rt has sent Init again
    inst = { store: new MemoryStore(), broker: new Broker(), metadata: {} };
    instances.set(name, inst);
  }
  return inst;
}

/** Wraps a handler: exceptions become gRPC statuses rt understands. */
function unary<Req, Res>(fn: (req: Req, call: grpc.ServerUnaryCall<Req, Res>) => Res): grpc.handleUnaryCall<Req, Res> {
  return (call, callback) => {
    try {
      callback(null, fn(call.request, call));
    } catch (e) {
      callback(toStatus(e));
    }
  };
}

/** Etag mismatch → FAILED_PRECONDITION, invalid etag / bad input → INVALID_ARGUMENT. */
function toStatus(e: unknown): Partial<grpc.StatusObject> {
  const message = e instanceof Error ? e.message : String(e);
  if (e instanceof EtagError) return { code: e.kind === 'mismatch' ? grpc.status.FAILED_PRECONDITION : grpc.status.INVALID_ARGUMENT, details: message };
  if (e instanceof BadRequestError) return { code: grpc.status.INVALID_ARGUMENT, details: message };
  return { code: grpc.status.INTERNAL, details: message };
}

// ---------------------------------------------------------------- messages (as proto-loader gives them)
interface Etag {
  value: string;
}
interface StateOptions {
  concurrency: string;
}
interface SetRequest {
  key: string;
  value: Buffer;
  etag: Etag | null;
  metadata: Record<string, string>;
  options: StateOptions | null;
  contentType: string;
}
interface DeleteRequest {
  key: string;
  etag: Etag | null;
  options: StateOptions | null;
}
interface GetRequest {
  key: string;
}

const firstWrite = (o: StateOptions | null) => o?.concurrency === 'CONCURRENCY_FIRST_WRITE';
const setOp = (r: SetRequest): WriteOp => ({
  kind: 'set',
  key: r.key,
  value: r.value,
  etag: r.etag?.value,
  firstWrite: firstWrite(r.options),
  contentType: r.contentType,
  metadata: r.metadata,
});
const deleteOp = (r: DeleteRequest): WriteOp => ({ kind: 'delete', key: r.key, etag: r.etag?.value, firstWrite: firstWrite(r.options) });

function getItem(store: MemoryStore, key: string) {
  const e = store.get(key);
  // "not found" is empty data and no etag
  if (!e) return { data: Buffer.alloc(0), etag: null, metadata: {}, contentType: '' };
  const metadata: Record<string, string> = e.expiresAt ? { ttlExpireTime: new Date(e.expiresAt).toISOString() } : {};
  return { data: e.value, etag: { value: e.etag }, metadata, contentType: e.contentType };
}

// ---------------------------------------------------------------- StateStore
const ping = unary(() => ({}));

const stateStore: grpc.UntypedServiceImplementation = {
  Init: unary((req: { metadata: { properties: Record<string, string> } | null }, call) => {
    instanceOf(call).metadata = req.metadata?.properties ?? {};
    return {};
  }),
  // ETAG: writes check etags; TTL: ttlInSeconds is honoured; TRANSACTIONAL and QUERY_API: the
  // TransactionalStateStore and QueriableStateStore services below (rt wants the claim and the
  // service)
  Features: unary(() => ({ features: ['ETAG', 'TTL', 'TRANSACTIONAL', 'QUERY_API'] })),
  Ping: ping,
  Get: unary((req: GetRequest, call) => getItem(instanceOf(call).store, req.key)),
  Set: unary((req: SetRequest, call) => {
    instanceOf(call).store.apply([setOp(req)]);
    return {};
  }),
  Delete: unary((req: DeleteRequest, call) => {
    instanceOf(call).store.apply([deleteOp(req)]);
    return {};
  }),
  BulkGet: unary((req: { items: GetRequest[] }, call) => {
    const store = instanceOf(call).store;
    return { got: true, items: req.items.map((i) => ({ key: i.key, ...getItem(store, i.key), error: '' })) };
  }),
  BulkSet: unary((req: { items: SetRequest[] }, call) => {
    instanceOf(call).store.apply(req.items.map(setOp));
    return {};
  }),
  BulkDelete: unary((req: { items: DeleteRequest[] }, call) => {
    instanceOf(call).store.apply(req.items.map(deleteOp));
    return {};
  }),
};

const transactionalStateStore: grpc.UntypedServiceImplementation = {
  Transact: unary((req: { operations: { set?: SetRequest | null; delete?: DeleteRequest | null }[] }, call) => {
    instanceOf(call).store.apply(req.operations.map((op) => (op.set ? setOp(op.set) : deleteOp(op.delete!))));
    return {};
  }),
};

// filter, sort and pages over the JSON values (query.ts); an unreadable query → INVALID_ARGUMENT
const queriableStateStore: grpc.UntypedServiceImplementation = {
  Query: unary((req: QueryRequest, call) => runQuery(instanceOf(call).store.entries(), req)),
};

// ---------------------------------------------------------------- OutputBinding
// Operations on the same kind of store: create (data under metadata.key), get, delete, list.
const outputBinding: grpc.UntypedServiceImplementation = {
  Init: unary((req: { metadata: { properties: Record<string, string> } | null }, call) => {
    instanceOf(call).metadata = req.metadata?.properties ?? {};
    return {};
  }),
  Ping: ping,
  ListOperations: unary(() => ({ operations: ['create', 'get', 'delete', 'list'] })),
  Invoke: unary((req: { data: Buffer; metadata: Record<string, string>; operation: string }, call) => {
    const store = instanceOf(call).store;
    const key = req.metadata.key;
    const needKey = () => {
      if (!key) throw new BadRequestError(`operation "${req.operation}" needs metadata.key`);
      return key;
    };
    switch (req.operation) {
      case 'create':
        store.apply([{ kind: 'set', key: needKey(), value: req.data, firstWrite: false, contentType: '', metadata: {} }]);
        return { data: Buffer.alloc(0), metadata: { key: needKey() }, contentType: '' };
      case 'get': {
        const e = store.get(needKey());
        if (!e) throw new BadRequestError(`no item "${key}"`);
        return { data: e.value, metadata: {}, contentType: 'application/octet-stream' };
      }
      case 'delete':
        store.apply([{ kind: 'delete', key: needKey(), firstWrite: false }]);
        return { data: Buffer.alloc(0), metadata: {}, contentType: '' };
      case 'list':
        return { data: Buffer.from(JSON.stringify(store.keys())), metadata: {}, contentType: 'application/json' };
      default:
        throw new BadRequestError(`unknown operation "${req.operation}"`);
    }
  }),
};

// ---------------------------------------------------------------- pub/sub
interface PublishRequest {
  data: Buffer;
  topic: string;
  metadata: Record<string, string>;
  contentType: string;
}
interface PullRequest {
  topic: { name: string } | null;
  ackMessageId: string;
  ackError: { message: string } | null;
}

const pubSub: grpc.UntypedServiceImplementation = {
  Init: unary((req: { metadata: { properties: Record<string, string> } | null }, call) => {
    instanceOf(call).metadata = req.metadata?.properties ?? {};
    return {};
  }),
  Features: unary(() => ({ features: [] })),
  Ping: ping,
  Publish: unary((req: PublishRequest, call) => {
    instanceOf(call).broker.publish(req.topic, req.data, req.contentType, req.metadata);
    return {};
  }),
  BulkPublish: unary((req: { topic: string; entries: { entryId: string; event: Buffer; contentType: string; metadata: Record<string, string> }[] }, call) => {
    const broker = instanceOf(call).broker;
    for (const e of req.entries) broker.publish(req.topic, e.event, e.contentType, e.metadata);
    return { failedEntries: [] };
  }),
  // the first message names the topic; every later one acknowledges a message (ackError: not taken)
  PullMessages: (call: grpc.ServerDuplexStream<PullRequest, BrokerMessage>) => {
    const broker = instanceOf(call).broker;
    let stop: (() => void) | undefined;
    call.on('data', (req: PullRequest) => {
      if (req.topic && !stop) stop = broker.pull(req.topic.name, { send: (m) => call.write(m) });
      else if (req.ackMessageId) broker.ack(req.ackMessageId, req.ackError?.message);
    });
    const end = () => stop?.();
    call.on('end', () => {
      end();
      call.end();
    });
    call.on('error', end);
    call.on('cancelled', end);
  },
};

// ---------------------------------------------------------------- server
// channelz is a debugging service this component does not serve: skip its per-call bookkeeping
const server = new grpc.Server({ 'grpc.enable_channelz': 0 });
server.addService(service('StateStore'), stateStore);
server.addService(service('TransactionalStateStore'), transactionalStateStore);
server.addService(service('QueriableStateStore'), queriableStateStore);
server.addService(service('OutputBinding'), outputBinding);
server.addService(service('PubSub'), pubSub);
// reflection lists exactly the services added above: that is how rt learns what this socket serves
new ReflectionService(definition, {
  services: ['StateStore', 'TransactionalStateStore', 'QueriableStateStore', 'OutputBinding', 'PubSub'].map((s) => `${PKG}.${s}`),
}).addToServer(server);

const socketPath = join(args.folder!, `${args.name}.sock`);
mkdirSync(args.folder!, { recursive: true });
rmSync(socketPath, { force: true }); // a socket file left by a process that crashed
server.bindAsync(`unix:${socketPath}`, grpc.ServerCredentials.createInsecure(), (err) => {
  if (err) {
    console.error(`cannot listen on ${socketPath}: ${err.message}`);
    process.exit(1);
  }
  console.log(`pluggable state store "${args.name}" listening on ${socketPath}`);
});

const stop = () => {
  server.tryShutdown(() => {
    rmSync(socketPath, { force: true });
    process.exit(0);
  });
  setTimeout(() => server.forceShutdown(), 2000).unref();
};
process.on('SIGTERM', stop);
process.on('SIGINT', stop);
