/**
 * `rt injector`, for the `rt` command (cli/commands.ts) through the front door: main.ts and what it
 * starts load only when the command runs, so the front door stays as light as its other users need.
 */
export async function injectorCommand(argv: string[]): Promise<number> {
  return (await import('./main.ts')).injectorCommand(argv);
}
