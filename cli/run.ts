/**
 * `rt run`: starts embedded services (scheduler), the sidecar, then the app as a child
 * with the sidecar's ports in its env. Signals go to the app; when it exits, everything
 * stops and rt exits with the app's exit code.
 */
import { spawn } from 'node:child_process';
import { startSidecar, type Sidecar } from '../sidecar/src/sidecar.ts';
import { startupOver } from './memory-reducer.ts';
import { RUNTIME_VERSION } from '../sidecar/src/version.ts';
import { startEmbeddedServices } from './embedded.ts';
import { explainStartError } from './errors.ts';
import { SIDECAR_HELP, UsageError, parseSidecarArgs } from './options.ts';

const RUN_HELP = `usage: rt run --app-id ID [--app-port N] [options] -- <command...>

Starts a sidecar on embedded defaults and runs <command> with RT_HTTP_PORT, RT_GRPC_PORT
(and DAPR_HTTP_PORT, DAPR_GRPC_PORT) in its environment.

${SIDECAR_HELP}`;

export async function runCommand(argv: string[]): Promise<number> {
  const dash = argv.indexOf('--');
  const own = dash >= 0 ? argv.slice(0, dash) : argv;
  const command = dash >= 0 ? argv.slice(dash + 1) : [];
  let parsed;
  try {
    parsed = parseSidecarArgs(own, false);
  } catch (e) {
    if (e instanceof UsageError) {
      console.error(`rt run: ${e.message}\n\n${RUN_HELP}`);
      return 2;
    }
    throw e;
  }
  if (parsed.help) {
    console.log(RUN_HELP);
    return 0;
  }
  for (const w of parsed.warnings) console.error(`rt run: warning: ${w}`);
  const options = parsed.options;
  options.extended = {
    ...options.extended,
    cliPID: String(process.pid),
    appCommand: command.join(' '),
    runtimeVersion: RUNTIME_VERSION,
  };

  const embedded = await startEmbeddedServices(options);
  let sidecar: Sidecar;
  try {
    sidecar = await startSidecar(options);
    startupOver();
  } catch (e) {
    await embedded.close();
    const explained = explainStartError(e, options);
    if (!explained) throw e;
    console.error(`rt run: ${explained}`);
    return 1;
  }
  const stopAll = async () => {
    await sidecar.close();
    await embedded.close();
  };

  if (command.length === 0) {
    console.log(`rt: sidecar for "${options.appId}" on http://127.0.0.1:${sidecar.httpPort} (gRPC ${sidecar.grpcPort}); no app command, Ctrl-C to stop`);
    await new Promise<void>((resolve) => {
      process.once('SIGINT', resolve);
      process.once('SIGTERM', resolve);
      void sidecar.closed.then(resolve);
    });
    await stopAll();
    return 0;
  }

  const env: NodeJS.ProcessEnv = {
    ...process.env,
    RT_HTTP_PORT: String(sidecar.httpPort),
    RT_GRPC_PORT: String(sidecar.grpcPort),
    DAPR_HTTP_PORT: String(sidecar.httpPort),
    DAPR_GRPC_PORT: String(sidecar.grpcPort),
    APP_ID: options.appId,
  };
  if (options.appPort) {
    env.APP_PORT = String(options.appPort);
  }
  if (options.apiToken) {
    env.RT_API_TOKEN = options.apiToken;
    env.DAPR_API_TOKEN = options.apiToken;
  }
  const child = spawn(command[0], command.slice(1), { stdio: 'inherit', env });
  const spawned = await new Promise<boolean>((resolve) => {
    child.once('spawn', () => resolve(true));
    child.once('error', (e) => {
      console.error(`rt run: cannot start "${command[0]}": ${e.message}`);
      resolve(false);
    });
  });
  if (!spawned) {
    await stopAll();
    return 127;
  }
  sidecar.ctx.metadata.setExtended('appPID', String(child.pid));
  console.log(`rt: app "${options.appId}" started (pid ${child.pid}); sidecar on http://127.0.0.1:${sidecar.httpPort}, gRPC ${sidecar.grpcPort}`);

  const forward = (sig: NodeJS.Signals) => () => {
    if (child.exitCode === null) child.kill(sig);
  };
  const onInt = forward('SIGINT');
  const onTerm = forward('SIGTERM');
  process.on('SIGINT', onInt);
  process.on('SIGTERM', onTerm);
  const code = await new Promise<number>((resolve) => {
    child.once('exit', (c, sig) => resolve(c ?? (sig ? 128 + (signalNumber(sig) ?? 1) : 1)));
  });
  process.off('SIGINT', onInt);
  process.off('SIGTERM', onTerm);
  await stopAll();
  return code;
}

function signalNumber(sig: NodeJS.Signals): number | undefined {
  return ({ SIGHUP: 1, SIGINT: 2, SIGKILL: 9, SIGTERM: 15 } as Record<string, number>)[sig];
}
