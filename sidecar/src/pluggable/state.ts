/**
 * A pluggable state store: the StateStore interface over dapr.proto.components.v1.StateStore
 * (and TransactionalStateStore / QueriableStateStore when the socket serves them and the
 * component reports TRANSACTIONAL / QUERY_API).
 */
import type {
  StateDeleteRequest,
  StateFeature,
  StateItem,
  StateOptions,
  StateSetRequest,
  StateStore,
  StateTransactionOperation,
} from '../components/types.ts';
import * as grpc from '@grpc/grpc-js';
import { capabilitiesOf } from '../components/state/common.ts';
import { StateRequestError } from '../components/state/errors.ts';
import type { QueryResult, StateQuery } from '../components/state/query.ts';
import { SERVICES } from './apis.ts';
import { Batcher } from './batcher.ts';
import { PluggableComponent } from './component.ts';
import { isServiceError, type CallContext } from './errors.ts';
import { fromQueryResponse, toQueryRequest, type QueryResponseMsg } from './query.ts';

interface Etag {
  value: string;
}
interface GetResponse {
  data: Buffer;
  etag: Etag | null;
  metadata: Record<string, string>;
  contentType: string;
}
interface BulkStateItem extends GetResponse {
  key: string;
  error: string;
}

const STATE_FEATURES: StateFeature[] = ['ETAG', 'TRANSACTIONAL', 'ACTOR', 'QUERY_API', 'TTL'];

export class PluggableStateStore extends PluggableComponent implements StateStore {
  protected readonly api = 'state';
  private featureList: string[] = [];
  /** false once the component said it has no bulk get of its own (got=false). */
  private bulkGetWorks = true;
  /** false once BulkSet turned out not to be implemented. */
  private bulkSetWorks = true;
  private readonly gets = new Batcher<string, StateItem | undefined>(
    (key) => this.getOne(key, {}),
    async (keys) => {
      const items = await this.bulkGetRaw(keys, {}).catch((e) => this.unimplemented(e, () => (this.bulkGetWorks = false)));
      if (!items) throw new Error('no bulk get'); // → each key on its own
      return items;
    },
  );
  private readonly sets = new Batcher<StateSetRequest, void>(
    (req) => this.setOne(req),
    async (reqs) => {
      await this.call(SERVICES.StateStore, 'BulkSet', { items: reqs.map(setRequest) }, etagContext(reqs)).catch((e) =>
        this.unimplemented(e, () => (this.bulkSetWorks = false)),
      );
      return reqs.map(() => undefined);
    },
  );
  /** Set in init when the socket serves TransactionalStateStore and the component reports TRANSACTIONAL. */
  transact?: (ops: StateTransactionOperation[], metadata?: Record<string, string>) => Promise<void>;
  /** Set in init when the socket serves QueriableStateStore and the component reports QUERY_API. */
  query?: (q: StateQuery, keyPrefix: string, metadata?: Record<string, string>) => Promise<QueryResult>;
  /** Page tokens are the component's own: passed through unread. */
  readonly opaqueQueryTokens = true;

  protected async initialize(): Promise<void> {
    const features = new Set((await this.initAndFeatures(SERVICES.StateStore)).map((f) => f.toUpperCase()));
    // the services the socket serves decide; a feature claimed without its service is dropped
    // TRANSACTIONAL and QUERY_API need both the claim and the service: the Go pluggable SDK serves
    // TransactionalStateStore and QueriableStateStore for every state store (answering
    // UNIMPLEMENTED when the store cannot), and reports the feature when it can, which is what
    // Dapr goes by
    const transactional = this.services.has(SERVICES.TransactionalStateStore) && features.has('TRANSACTIONAL');
    if (!transactional) features.delete('TRANSACTIONAL');
    const queriable = this.services.has(SERVICES.QueriableStateStore) && features.has('QUERY_API');
    if (!queriable) features.delete('QUERY_API');
    this.featureList = [...features].sort();
    this.transact = transactional ? (ops, md) => this.transactImpl(ops, md) : undefined;
    this.query = queriable ? (q, _prefix, md) => this.queryImpl(q, md) : undefined;
  }

  protected pingService(): string {
    return SERVICES.StateStore;
  }

  /** INVALID_ARGUMENT (other than a bad etag) is a refused request: 400 at the state API. */
  protected override call<Res>(service: string, method: string, req: unknown, c: Partial<CallContext> = {}): Promise<Res> {
    return super.call<Res>(service, method, req, { badRequest: (m) => new StateRequestError(m), ...c });
  }

  /** As for built-in stores: the contract's capability names (TTL is a feature, not shown). */
  capabilities(): string[] {
    return capabilitiesOf(this.features());
  }

  features(): StateFeature[] {
    return this.featureList.filter((f): f is StateFeature => (STATE_FEATURES as string[]).includes(f));
  }

  async get(key: string, metadata: Record<string, string> = {}): Promise<StateItem | undefined> {
    // plain reads of one turn go out together as one BulkGet
    if (this.bulkGetWorks && Object.keys(metadata).length === 0) return this.gets.run(key);
    return this.getOne(key, metadata);
  }

  private async getOne(key: string, metadata: Record<string, string>): Promise<StateItem | undefined> {
    const res = await this.call<GetResponse>(SERVICES.StateStore, 'Get', { key, metadata, consistency: consistency(metadata) }, { key });
    return toItem(key, res);
  }

  async bulkGet(keys: string[], metadata: Record<string, string> = {}): Promise<(StateItem | undefined)[]> {
    if (keys.length === 0) return [];
    return (await this.bulkGetRaw(keys, metadata)) ?? Promise.all(keys.map((k) => this.getOne(k, metadata)));
  }

  /** undefined when the store has no bulk get of its own (got=false): then read key by key. */
  private async bulkGetRaw(keys: string[], metadata: Record<string, string>): Promise<(StateItem | undefined)[] | undefined> {
    const unique = [...new Set(keys)];
    const res = await this.call<{ items: BulkStateItem[]; got: boolean }>(SERVICES.StateStore, 'BulkGet', {
      items: unique.map((key) => ({ key, metadata, consistency: consistency(metadata) })),
    });
    if (!res.got) {
      this.bulkGetWorks = false;
      return undefined;
    }
    const byKey = new Map(res.items.map((i) => [i.key, i]));
    return keys.map((key) => {
      const item = byKey.get(key);
      if (!item) return undefined;
      if (item.error) throw new Error(`pluggable ${this.describe()} failed to get key "${key}": ${item.error}`);
      return toItem(key, item);
    });
  }

  async set(req: StateSetRequest): Promise<void> {
    // plain last-write SETs of one turn go out together as one BulkSet (safe to repeat one by one)
    if (this.bulkSetWorks && (req.etag === undefined || req.etag === '') && req.options?.concurrency !== 'first-write') return this.sets.run(req);
    return this.setOne(req);
  }

  private async setOne(req: StateSetRequest): Promise<void> {
    await this.call(SERVICES.StateStore, 'Set', setRequest(req), { key: req.key, write: true, withEtag: req.etag !== undefined });
  }

  async delete(req: StateDeleteRequest): Promise<void> {
    await this.call(SERVICES.StateStore, 'Delete', deleteRequest(req), { key: req.key, write: true, withEtag: req.etag !== undefined });
  }

  async bulkSet(reqs: StateSetRequest[]): Promise<void> {
    if (reqs.length === 0) return;
    await this.call(SERVICES.StateStore, 'BulkSet', { items: reqs.map(setRequest) }, etagContext(reqs));
  }

  async bulkDelete(reqs: StateDeleteRequest[]): Promise<void> {
    if (reqs.length === 0) return;
    await this.call(SERVICES.StateStore, 'BulkDelete', { items: reqs.map(deleteRequest) }, etagContext(reqs));
  }

  /** A component without a bulk call of its own: stop batching into it, then rethrow. */
  private unimplemented(e: unknown, disable: () => void): never {
    if (isServiceError((e as Error).cause) && ((e as Error).cause as grpc.ServiceError).code === grpc.status.UNIMPLEMENTED) disable();
    throw e;
  }

  /**
   * The query as the component protocol carries it (query.ts). The key prefix is not sent: the
   * component holds the keys with their prefixes and answers with them, as for the ecosystem.
   */
  private async queryImpl(q: StateQuery, metadata: Record<string, string> = {}): Promise<QueryResult> {
    return fromQueryResponse(await this.call<QueryResponseMsg>(SERVICES.QueriableStateStore, 'Query', toQueryRequest(q, metadata)));
  }

  private async transactImpl(ops: StateTransactionOperation[], metadata: Record<string, string> = {}): Promise<void> {
    const operations = ops.map((op) => (op.operation === 'upsert' ? { set: setRequest(op.request) } : { delete: deleteRequest(op.request) }));
    await this.call(SERVICES.TransactionalStateStore, 'Transact', { operations, metadata }, etagContext(ops.map((o) => o.request)));
  }
}

/** Empty data and no etag is how a component says "no such key". */
function toItem(key: string, res: GetResponse): StateItem | undefined {
  if (!res.etag && res.data.length === 0) return undefined;
  const metadata = { ...res.metadata };
  if (res.contentType) metadata.contentType ??= res.contentType;
  const item: StateItem = { key, value: new Uint8Array(res.data.buffer, res.data.byteOffset, res.data.byteLength) };
  if (res.etag) item.etag = res.etag.value;
  if (Object.keys(metadata).length > 0) item.metadata = metadata;
  return item;
}

function setRequest(r: StateSetRequest) {
  return {
    key: r.key,
    value: Buffer.from(r.value.buffer, r.value.byteOffset, r.value.byteLength),
    etag: r.etag !== undefined ? { value: r.etag } : null,
    metadata: r.metadata ?? {},
    options: options(r.options),
    contentType: r.metadata?.contentType ?? '',
  };
}

function deleteRequest(r: StateDeleteRequest) {
  return { key: r.key, etag: r.etag !== undefined ? { value: r.etag } : null, metadata: r.metadata ?? {}, options: options(r.options) };
}

function options(o: StateOptions | undefined) {
  return {
    concurrency: o?.concurrency === 'first-write' ? 'CONCURRENCY_FIRST_WRITE' : o?.concurrency === 'last-write' ? 'CONCURRENCY_LAST_WRITE' : 'CONCURRENCY_UNSPECIFIED',
    consistency: o?.consistency === 'strong' ? 'CONSISTENCY_STRONG' : o?.consistency === 'eventual' ? 'CONSISTENCY_EVENTUAL' : 'CONSISTENCY_UNSPECIFIED',
  };
}

function consistency(metadata: Record<string, string>): string {
  return metadata.consistency === 'strong' ? 'CONSISTENCY_STRONG' : metadata.consistency === 'eventual' ? 'CONSISTENCY_EVENTUAL' : 'CONSISTENCY_UNSPECIFIED';
}

/** For bulk writes an etag error names the first key that carried an etag. */
function etagContext(reqs: { key: string; etag?: string }[]) {
  const withEtag = reqs.find((r) => r.etag !== undefined);
  return { key: withEtag?.key ?? reqs[0]?.key, write: true, withEtag: withEtag !== undefined };
}
