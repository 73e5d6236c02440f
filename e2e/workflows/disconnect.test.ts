/**
 * A worker process that dies (kill -9) with an activity in flight: the sidecar hands the work
 * to the next worker that connects, and the workflow completes with the right output.
 */
import type { ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { TaskHubGrpcClient } from '@dapr/durabletask-js';
import { OrchestrationStatus } from '@dapr/durabletask-js/orchestration/enum/orchestration-status.enum.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { killed, lines, quietSdkLogs, sidecarForTest, startWorker, waitUntil, type TestSidecar } from './harness.ts';

let sc: TestSidecar;
let markers: string;
let restore: () => void;
const procs: ChildProcess[] = [];

beforeAll(async () => {
  restore = quietSdkLogs();
  sc = await sidecarForTest('wf-disconnect');
  markers = mkdtempSync(join(tmpdir(), 'rt-wf-markers-'));
});

afterAll(async () => {
  for (const p of procs) await killed(p);
  await sc?.stop();
  rmSync(markers, { recursive: true, force: true });
  restore?.();
});

describe('worker disconnect (durabletask-js worker process)', () => {
  it('re-dispatches the work of a killed worker to the worker that comes back', async () => {
    const w1 = startWorker(sc.grpcAddress, markers, { SLOW_MS: '60000' });
    procs.push(w1);
    const client = new TaskHubGrpcClient(sc.grpcAddress);
    try {
      const id = await client.scheduleNewOrchestration('resilient', 1);
      // both slow activities are running in worker 1 (which would take a minute)
      await waitUntil(() => lines(markers, 'slow').length >= 2, 20_000, 'slow activities to start');
      await killed(w1);
      const w2 = startWorker(sc.grpcAddress, markers, { SLOW_MS: '100' });
      procs.push(w2);
      const st = await client.waitForOrchestrationCompletion(id, true, 30);
      expect(st?.runtimeStatus).toBe(OrchestrationStatus.COMPLETED);
      // quick(1)=2; slow(2)=20, slow(3)=30; quick(50)=51
      expect(JSON.parse(st?.serializedOutput ?? '')).toBe(51);
      // the two slow activities ran again on the second worker
      expect(lines(markers, 'slow').length).toBe(4);
    } finally {
      await client.stop();
    }
  });
});
