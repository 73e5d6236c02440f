/**
 * kill -9 of the sidecar (`rt sidecar` process) while a workflow has activities in flight and
 * a durable timer pending; a restart on the same data dir finishes it with the right output,
 * and an activity whose result was stored before the crash does not run again.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { TaskHubGrpcClient } from '@dapr/durabletask-js';
import { OrchestrationStatus } from '@dapr/durabletask-js/orchestration/enum/orchestration-status.enum.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePort, waitForPort } from '../../test/services/net.ts';
import { getInstance, killed, lines, quietSdkLogs, startWorker, waitUntil } from './harness.ts';

const CLI = fileURLToPath(new URL('../../cli/rt.ts', import.meta.url));

let dataDir: string;
let markers: string;
let restore: () => void;
const procs: ChildProcess[] = [];

function startSidecarProcess(httpPort: number, grpcPort: number): ChildProcess {
  const p = spawn(
    process.execPath,
    [CLI, 'sidecar', '--app-id', 'wf-crash', '--http-port', String(httpPort), '--grpc-port', String(grpcPort), '--data-dir', dataDir, '--log-level', 'warn'],
    { stdio: ['ignore', 'ignore', 'inherit'] },
  );
  procs.push(p);
  return p;
}

beforeAll(() => {
  restore = quietSdkLogs();
  dataDir = mkdtempSync(join(tmpdir(), 'rt-wf-crash-'));
  markers = mkdtempSync(join(tmpdir(), 'rt-wf-crash-markers-'));
});

afterAll(async () => {
  for (const p of procs) await killed(p);
  rmSync(dataDir, { recursive: true, force: true });
  rmSync(markers, { recursive: true, force: true });
  restore?.();
});

describe('sidecar killed with -9 mid-workflow', () => {
  it('resumes after a restart: pending activities and the timer complete, stored results are kept', async () => {
    const [httpPort, grpcPort] = [await freePort(), await freePort()];
    const address = `127.0.0.1:${grpcPort}`;
    let sidecar = startSidecarProcess(httpPort, grpcPort);
    await waitForPort('127.0.0.1', httpPort, 30_000);
    await waitForPort('127.0.0.1', grpcPort, 10_000); // HTTP may open before gRPC
    // slow enough that the kill lands while they run, even on a loaded machine
    const worker = startWorker(address, markers, { SLOW_MS: '3000', TIMER_S: '3' });
    procs.push(worker);
    const client = new TaskHubGrpcClient(address);
    try {
      const id = await client.scheduleNewOrchestration('resilient', 1, 'crash-1');
      // quick(1) is done and stored; two slow activities (3 s) and a 3 s timer are pending
      await waitUntil(() => lines(markers, 'slow').length >= 2, 20_000, 'slow activities to start');
      await killed(sidecar);
      expect(lines(markers, 'quick'), 'the workflow got past the slow activities before the kill').toEqual(['1']);

      sidecar = startSidecarProcess(httpPort, grpcPort);
      await waitForPort('127.0.0.1', httpPort, 30_000);
      await waitForPort('127.0.0.1', grpcPort, 10_000);
      // the same worker process reconnects by itself: durabletask-js 1.0.0 retries its stream
      // once, 5 s after it ended. Only if the new sidecar was not up by then (a very loaded
      // machine) is the worker restarted, as its app would have to be.
      let st = await client.waitForOrchestrationCompletion(id, true, 20).catch(() => undefined);
      if (!st) {
        await killed(worker);
        procs.push(startWorker(address, markers, { SLOW_MS: '100' }));
        st = await client.waitForOrchestrationCompletion(id, true, 40);
      }
      const seen = `status ${st?.runtimeStatus}, output ${st?.serializedOutput}, failure ${st?.failureDetails?.message}, quick ${lines(markers, 'quick')}, slow ${lines(markers, 'slow')}`;
      expect(st?.runtimeStatus, seen).toBe(OrchestrationStatus.COMPLETED);
      expect(JSON.parse(st?.serializedOutput ?? ''), seen).toBe(51);
      // quick(1) ran once only: its stored result survived the crash
      expect(lines(markers, 'quick'), seen).toEqual(['1', '50']);
      expect((await getInstance(`http://127.0.0.1:${httpPort}`, id))?.runtimeStatus).toBe('COMPLETED');
    } finally {
      await client.stop();
    }
  }, 90_000);
});
