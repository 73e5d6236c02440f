/** `rt sidecar`: the sidecar alone, until SIGTERM/SIGINT. */
import { startSidecar } from '../sidecar/src/sidecar.ts';
import { startupOver } from './memory-reducer.ts';
import { explainStartError } from './errors.ts';
import { SIDECAR_HELP, UsageError, parseSidecarArgs } from './options.ts';

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
    if (!explained) throw e;
    console.error(`rt sidecar: ${explained}`);
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
