/**
 * `rt operator`, for the `rt` command (cli/commands.ts) through the front door: main.ts and what it
 * starts load only when the command runs, so the front door stays as light as its other users need.
 */
export async function operatorCommand(argv: string[]): Promise<number> {
  return (await import('./main.ts')).operatorCommand(argv);
}
