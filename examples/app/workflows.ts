/**
 * The example's workflow worker, written with the public workflow SDK (@dapr/dapr) exactly as an
 * app would be for the reference runtime: it finds the sidecar through the DAPR_GRPC_PORT that
 * `rt run` sets. `greet` calls one activity and returns its result:
 *
 *   curl -X POST 'localhost:3500/v1.0/workflows/rt/greet/start?instanceID=w1' -d '"rt"'
 *   curl localhost:3500/v1.0/workflows/rt/w1     # runtimeStatus COMPLETED, output "Hello, rt!"
 */
import { LogLevel, WorkflowRuntime, type WorkflowActivityContext, type WorkflowContext } from '@dapr/dapr';

const hello = async (_: WorkflowActivityContext, name: string): Promise<string> => `Hello, ${name}!`;

async function* greet(ctx: WorkflowContext, name: string): AsyncGenerator<unknown, string, string> {
  const text: string = yield ctx.callActivity(hello, name ?? 'world');
  if (!ctx.isReplaying()) console.log(`[app] workflow ${ctx.getWorkflowInstanceId()} greeted: ${text}`);
  return text;
}

export async function startWorkflowWorker(): Promise<WorkflowRuntime> {
  const runtime = new WorkflowRuntime({ logger: { level: LogLevel.Warn } }).registerWorkflowWithName('greet', greet).registerActivityWithName('hello', hello);
  await runtime.start();
  return runtime;
}
