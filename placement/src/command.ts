/** `rt placement` for cli/commands.ts: the service's code loads only when the command runs. */
export async function placementCommand(argv: string[]): Promise<number> {
  return (await import('./main.ts')).placementCommand(argv);
}
