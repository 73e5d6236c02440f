/**
 * Base of the stores whose reads and writes are synchronous in this process (in-memory,
 * SQLite): every write is one all-or-nothing `apply(ops)`, every read one `read(key)`, and no
 * other request can interleave with either.
 */
import type { ComponentSpec, ComponentContext, StateDeleteRequest, StateFeature, StateItem, StateSetRequest, StateStore, StateTransactionOperation } from '../types.ts';
import { capabilitiesOf } from './common.ts';

export abstract class SyncStateStore implements StateStore {
  protected abstract readonly featureList: StateFeature[];
  abstract init(spec: ComponentSpec, ctx: ComponentContext): Promise<void>;
  abstract close(): Promise<void>;
  protected abstract read(key: string): StateItem | undefined;
  /** Applies the operations in order, all or none; throws the first failing check. */
  protected abstract apply(ops: StateTransactionOperation[]): void;

  features(): StateFeature[] {
    return this.featureList;
  }

  capabilities(): string[] {
    return capabilitiesOf(this.featureList);
  }

  async get(key: string): Promise<StateItem | undefined> {
    return this.read(key);
  }

  async bulkGet(keys: string[]): Promise<(StateItem | undefined)[]> {
    return keys.map((k) => this.read(k));
  }

  async set(req: StateSetRequest): Promise<void> {
    this.apply([{ operation: 'upsert', request: req }]);
  }

  async delete(req: StateDeleteRequest): Promise<void> {
    this.apply([{ operation: 'delete', request: req }]);
  }

  /** All or nothing, like a transaction (stronger than the ecosystem's item-by-item bulk save). */
  async bulkSet(reqs: StateSetRequest[]): Promise<void> {
    this.apply(reqs.map((request) => ({ operation: 'upsert', request })));
  }

  async bulkDelete(reqs: StateDeleteRequest[]): Promise<void> {
    this.apply(reqs.map((request) => ({ operation: 'delete', request })));
  }

  async transact(ops: StateTransactionOperation[]): Promise<void> {
    this.apply(ops);
  }
}
