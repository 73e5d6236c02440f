/** Subcommands of other processes (scheduler, operator, injector) register here. */
export interface Command {
  summary: string;
  run(argv: string[]): Promise<number>;
}

export const extraCommands: Record<string, Command> = {
  list: {
    summary: 'list the apps running on this machine (from the local registry under ~/.rt or RT_HOME)',
    run: async (argv) => (await import('./list.ts')).listCommand(argv),
  },
  scheduler: {
    summary: 'run the jobs scheduler service (SQLite, or etcd for several replicas)',
    run: async (argv) => (await import('../scheduler/src/index.ts')).schedulerCommand(argv),
  },
  placement: {
    summary: 'run the actor placement service (one replica, or several with etcd)',
    run: async (argv) => (await import('../placement/src/index.ts')).placementCommand(argv),
  },
  operator: {
    summary: 'run the operator (Component status, resources served to sidecars, injection watchdog)',
    run: async (argv) => (await import('../operator/src/index.ts')).operatorCommand(argv),
  },
  injector: {
    summary: 'run the sidecar injector (mutating admission webhook for pods, HTTPS)',
    run: async (argv) => (await import('../injector/src/index.ts')).injectorCommand(argv),
  },
};
