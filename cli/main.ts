/**
 * The `rt` command, loaded by cli/rt.ts once V8's flags and the compile cache are set. Subcommands:
 *   rt run --app-id ID [options] -- <app command...>   sidecar + app on a laptop
 *   rt sidecar --app-id ID [options]                   the sidecar alone (container entrypoint)
 */
import { RUNTIME_VERSION } from '../sidecar/src/version.ts';
import { runCommand } from './run.ts';
import { sidecarCommand } from './sidecar.ts';
import { extraCommands } from './commands.ts';

const USAGE = `usage: rt <command> [options]

commands:
  run       start a sidecar and your app:  rt run --app-id myapp --app-port 3000 -- node app.js
  sidecar   start the sidecar alone:      rt sidecar --app-id myapp
${Object.entries(extraCommands)
  .map(([n, c]) => `  ${n.padEnd(10)}${c.summary}`)
  .join('\n')}
  help      the options of a command:    rt help run
  version   print rt's version           (also rt --version)

run "rt help <command>" or "rt <command> --help" for the options of a command.`;

async function main(argv: string[]): Promise<number> {
  const [cmd, ...rest] = argv;
  switch (cmd) {
    case 'run':
      return runCommand(rest);
    case 'sidecar':
      return sidecarCommand(rest);
    case '-v':
    case '--version':
    case 'version':
      console.log(`rt ${RUNTIME_VERSION} (node ${process.version})`);
      return 0;
    case 'help':
      // rt help <command> = rt <command> --help
      if (rest.length > 0 && rest[0] !== 'help') return main([rest[0], '--help']);
      console.log(USAGE);
      return 0;
    case undefined:
    case '-h':
    case '--help':
      console.log(USAGE);
      return 0;
    default: {
      const extra = extraCommands[cmd];
      if (extra) return extra.run(rest);
      console.error(`rt: unknown command "${cmd}"\n\n${USAGE}`);
      return 2;
    }
  }
}

main(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code;
  },
  (err) => {
    console.error(`rt: ${err instanceof Error ? err.message : String(err)}`);
    process.exitCode = 1;
  },
);
