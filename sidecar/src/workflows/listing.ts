/**
 * Listing and querying instances (ListInstanceIds / ListInstanceIDs, QueryInstances, purge by
 * filter): the catalog's ids in sorted order, each checked against its stored record. A page
 * continues after the last id of the previous one.
 */
import { WorkflowError } from './errors.ts';
import type { InstanceTable } from './instances.ts';
import { STALLED_STATUS, STATUS_BY_NUMBER, fromTimestamp, type RuntimeStatus, type Timestamp } from './proto.ts';
import { isTerminal, shownStatus, type InstanceRecord } from './record.ts';

export interface InstanceFilter {
  /** As gRPC shows them: a stalled instance matches STALLED, not RUNNING. */
  statuses?: (RuntimeStatus | 'STALLED')[];
  /** ms since epoch, both ends included */
  createdFrom?: number;
  createdTo?: number;
  /** ms since epoch, both ends included; only finished instances match */
  completedFrom?: number;
  completedTo?: number;
  idPrefix?: string;
}

export interface InstancePage {
  records: InstanceRecord[];
  /** The last id of this page when more may follow; absent on the last page. */
  next?: string;
}

/** Records read per store round trip while filling a page. */
const READ_BATCH = 200;

/**
 * The instances that match, in id order, after `after`; at most `limit` (0 = all).
 */
export async function listInstances(table: InstanceTable, filter: InstanceFilter, after: string | undefined, limit: number): Promise<InstancePage> {
  const ids = await table.catalog.allIds();
  let i = after === undefined ? 0 : firstAfter(ids, after);
  const records: InstanceRecord[] = [];
  while (i < ids.length) {
    const window = ids.slice(i, i + READ_BATCH).filter((id) => !filter.idPrefix || id.startsWith(filter.idPrefix));
    const recs = await table.readMany(window);
    for (const rec of recs) {
      if (!rec || !matches(rec, filter)) continue;
      records.push(rec);
      if (limit > 0 && records.length === limit) {
        const more = ids.indexOf(rec.id) < ids.length - 1;
        return more ? { records, next: rec.id } : { records };
      }
    }
    i += READ_BATCH;
  }
  return { records };
}

function matches(rec: InstanceRecord, f: InstanceFilter): boolean {
  if (f.statuses?.length && !f.statuses.includes(shownStatus(rec))) return false;
  if (f.createdFrom !== undefined && rec.createdAt < f.createdFrom) return false;
  if (f.createdTo !== undefined && rec.createdAt > f.createdTo) return false;
  if (f.completedFrom !== undefined || f.completedTo !== undefined) {
    if (!isTerminal(rec.status)) return false;
    if (f.completedFrom !== undefined && rec.updatedAt < f.completedFrom) return false;
    if (f.completedTo !== undefined && rec.updatedAt > f.completedTo) return false;
  }
  return true;
}

/** Index of the first id greater than `after` (ids sorted). */
function firstAfter(ids: string[], after: string): number {
  let lo = 0;
  let hi = ids.length;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (ids[mid] <= after) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/** Proto status numbers to names; an unknown number is a bad request. */
export function statusesOf(numbers: number[] | undefined): (RuntimeStatus | 'STALLED')[] | undefined {
  if (!numbers?.length) return undefined;
  return numbers.map((n) => {
    const s = n === STALLED_STATUS ? 'STALLED' : STATUS_BY_NUMBER[n];
    if (!s) throw new WorkflowError('INVALID', `unknown runtime status ${n}`);
    return s;
  });
}

export function timeOf(ts: Timestamp | null | undefined): number | undefined {
  return fromTimestamp(ts);
}

/** A page size from the request: absent or 0 = all; negative is a bad request. */
export function pageSizeOf(n: number | undefined): number {
  if (n === undefined) return 0;
  if (!Number.isInteger(n) || n < 0) throw new WorkflowError('INVALID', `page size must be a whole number ≥ 0, not ${n}`);
  return n;
}
