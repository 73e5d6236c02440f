/**
 * Several placement replicas: one leads, elected through an etcd lease (etcd3's Election: each
 * replica campaigns with its address; the oldest live campaign key wins). The leader serves
 * hosts; the others refuse their streams (FAILED_PRECONDITION naming the leader) and wait. When
 * the leader dies its lease expires after the TTL, the next campaign wins, and hosts reconnect
 * to it and report again; the table is rebuilt from their reports, so nothing but the
 * election lives in etcd.
 */
import type { Campaign, Etcd3, ElectionObserver } from 'etcd3';
import type { Logger } from 'pino';

export interface LeadershipOptions {
  endpoints: string[];
  prefix: string;
  ttlSec: number;
  /** What this replica campaigns with: its address, which followers name in their refusals. */
  value: string;
  log: Logger;
  /** TLS toward etcd: its CA, and a client certificate and key when etcd requires them. */
  tls?: { ca: Buffer; cert?: Buffer; key?: Buffer };
  onElected(): void;
  /** Leadership lost (the lease lapsed, or etcd is gone): stop serving at once. */
  onLost(why: string): void;
}

export interface Leadership {
  /** The leader's address, when known. */
  leader(): string | undefined;
  close(): Promise<void>;
}

export async function startLeadership(o: LeadershipOptions): Promise<Leadership> {
  const { Etcd3 } = await import('etcd3');
  const credentials = o.tls && { rootCertificate: o.tls.ca, certChain: o.tls.cert, privateKey: o.tls.key };
  const client: Etcd3 = new Etcd3({ hosts: o.endpoints, dialTimeout: 3000, ...(credentials ? { credentials } : {}) });
  const election = client.namespace(o.prefix.replace(/\/*$/, '/')).election('leader', o.ttlSec);
  let observer: ElectionObserver;
  try {
    // fail fast on an unreachable etcd: the process exits and its manager restarts it
    observer = await Promise.race([
      election.observe(),
      new Promise<never>((_, reject) => setTimeout(() => reject(new Error(`etcd at ${o.endpoints.join(',')} did not answer within 5 s`)), 5000).unref()),
    ]);
  } catch (e) {
    client.close();
    throw e;
  }
  // the observer's own value can name a later campaign when two start at once (it takes the last
  // put it sees); each change is read again as etcd orders it: the oldest campaign key leads
  let leader: string | undefined;
  let asked = 0;
  let answered = 0;
  const refresh = () => {
    const n = ++asked;
    return election.leader().then(
      (v) => {
        // reads may answer out of order: an older one must not undo a newer one
        if (n < answered) return;
        answered = n;
        leader = v;
      },
      () => undefined,
    );
  };
  // listen before the first read: a campaign put while it is under way (replicas starting at
  // once) would otherwise go unseen, and this follower would name no leader until the next change
  observer.on('change', () => void refresh());
  await refresh();
  observer.on('error', (e: Error) => o.log.warn({ err: e.message }, 'placement: watching the election failed'));
  let closed = false;
  let campaign: Campaign | undefined;
  let retry: NodeJS.Timeout | undefined;
  const run = () => {
    if (closed) return;
    const c = election.campaign(o.value);
    campaign = c;
    c.on('elected', () => {
      leader = o.value;
      o.log.info({ replica: o.value }, 'placement: this replica leads');
      o.onElected();
    });
    c.on('error', (e: Error) => {
      if (closed || campaign !== c) return;
      campaign = undefined;
      o.onLost(e.message);
      o.log.warn({ err: e.message }, 'placement: campaign failed; campaigning again');
      retry = setTimeout(run, 1000);
    });
  };
  run();
  return {
    leader: () => leader,
    close: async () => {
      closed = true;
      clearTimeout(retry);
      await campaign?.resign().catch(() => undefined);
      await observer.cancel().catch(() => undefined);
      client.close();
    },
  };
}
