/** Subcommands of other processes (scheduler, operator, injector) register here. */
export interface Command {
  summary: string;
  run(argv: string[]): Promise<number>;
}

export const extraCommands: Record<string, Command> = {};
