/**
 * Where jobs are kept. The store is the truth for create/get/delete/list; the engine keeps
 * in memory only the jobs it *owns* (all of them with SQLite, its partitions with etcd) and
 * learns about them through the listener.
 */
import type { JobKey, JobOwnerRef, JobRecord } from '../types.ts';

export interface StoreListener {
  /** A job this replica owns was created, replaced or loaded. */
  upsert(rec: JobRecord): void;
  /** A job this replica owns was deleted. */
  remove(key: JobKey): void;
  /**
   * The replica is about to give up these jobs (partition handover): stop firing them and
   * resolve once none of their triggers is in flight, so the next owner does not fire twice.
   */
  release(owns: (key: JobKey) => boolean): Promise<void>;
}

export interface ProgressUpdate {
  key: JobKey;
  gen: string;
  count: number;
  /** null = the job is finished and is removed. */
  nextAt: number | null;
}

export interface JobStore {
  /** Loads the owned jobs into the listener and starts reporting changes. */
  start(listener: StoreListener): Promise<void>;
  /** Writes a new job; false when one with that key exists. */
  create(rec: JobRecord): Promise<boolean>;
  /** Writes a job, replacing any with that key. */
  put(rec: JobRecord): Promise<void>;
  get(key: JobKey): Promise<JobRecord | undefined>;
  delete(key: JobKey): Promise<void>;
  list(ref: JobOwnerRef): Promise<JobRecord[]>;
  /** Records fires; an update whose gen no longer matches (job replaced or deleted) is ignored. */
  saveProgress(updates: ProgressUpdate[]): Promise<void>;
  /** Human-readable: the file or the etcd endpoints. */
  describe(): string;
  close(): Promise<void>;
}
