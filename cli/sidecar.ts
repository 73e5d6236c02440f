/** `rt sidecar`: the sidecar alone, until SIGTERM/SIGINT. */
import { existsSync, writeFileSync } from 'node:fs';
import { startSidecar } from '../sidecar/src/sidecar.ts';
import { startupOver } from './memory-reducer.ts';
import { explainStartError } from './errors.ts';
import { SIDECAR_HELP, UsageError, parseSidecarArgs } from './options.ts';

/**
 * In a container, why the sidecar stopped goes where the kubelet reads it (the container's
 * terminationMessagePath, /dev/termination-log by default): the kubelet puts it in the container's
 * status, and the operator records it as an Event on the pod (SidecarFailed), so `kubectl describe
 * pod` says why without the logs. Outside a container the file is not there, and nothing is written.
 */
const TERMINATION_LOG = process.env.RT_TERMINATION_MESSAGE_PATH ?? '/dev/termination-log';
function writeTerminationMessage(text: string): void {
  if (!existsSync(TERMINATION_LOG)) return;
  try {
    // the kubelet reads at most 4 KiB of it
    writeFileSync(TERMINATION_LOG, text.slice(0, 4000));
  } catch {
    // a read-only or missing file: the log still says it
  }
}

export async function sidecarCommand(argv: string[]): Promise<number> {
  let parsed;
  try {
    parsed = parseSidecarArgs(argv, false);
  } catch (e) {
    if (e instanceof UsageError) {
      console.error(`rt sidecar: ${e.message}\n\n${SIDECAR_HELP}`);
      return 2;
    }
    throw e;
  }
  if (parsed.help) {
    console.log(`usage: rt sidecar --app-id ID [options]\n\n${SIDECAR_HELP}`);
    return 0;
  }
  for (const w of parsed.warnings) console.error(`rt sidecar: warning: ${w}`);
  let sidecar;
  try {
    sidecar = await startSidecar(parsed.options);
    startupOver();
  } catch (e) {
    const explained = explainStartError(e, parsed.options);
    if (!explained) {
      writeTerminationMessage(`rt sidecar could not start: ${(e as Error).message}`);
      throw e;
    }
    console.error(`rt sidecar: ${explained}`);
    writeTerminationMessage(`rt sidecar could not start: ${explained}`);
    return 1;
  }
  await new Promise<void>((resolve) => {
    const stop = () => resolve();
    process.once('SIGTERM', stop);
    process.once('SIGINT', stop);
    void sidecar.closed.then(stop);
  });
  await sidecar.close();
  return 0;
}
