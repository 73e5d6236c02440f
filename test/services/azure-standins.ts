/**
 * Loopback stand-ins for the Azure services the event-routing binding talks to (no emulator
 * exists): Entra ID (token endpoint, OpenID configuration, JWKS), ARM (event subscriptions with
 * the long-running-operation protocol) and a custom topic. All serve HTTPS with a test CA that
 * this process is made to trust.
 */
import { randomUUID } from 'node:crypto';
import { makeTestCa, type TestCa } from './ca.ts';
import { startArmStandIn, type ArmStandIn } from './azure/arm.ts';
import { startEntraStandIn, type EntraStandIn } from './azure/entra.ts';
import { startTopicStandIn, type TopicStandIn } from './azure/topic.ts';

export { makeTestCa, startArmStandIn, startEntraStandIn, startTopicStandIn };
export type { ArmStandIn, EntraStandIn, TestCa, TopicStandIn };

export interface AzureStandIns {
  ca: TestCa;
  entra: EntraStandIn;
  arm: ArmStandIn;
  topic: TopicStandIn;
  subscriptionId: string;
  clientId: string;
  clientSecret: string;
  close(): Promise<void>;
}

/** Starts all three stand-ins, trusts their CA in this process and registers one client app. */
export async function startAzureStandIns(): Promise<AzureStandIns> {
  const ca = makeTestCa();
  ca.trust();
  const entra = await startEntraStandIn(ca);
  const arm = await startArmStandIn(ca, entra);
  const topic = await startTopicStandIn(ca);
  const clientId = randomUUID();
  const clientSecret = `secret-${randomUUID()}`;
  entra.addClient(clientId, clientSecret);
  return {
    ca,
    entra,
    arm,
    topic,
    subscriptionId: randomUUID(),
    clientId,
    clientSecret,
    close: async () => {
      await Promise.all([entra.close(), arm.close(), topic.close()]);
      ca.remove();
    },
  };
}
